/* map on the CPU backend: placeholder until the OpenMP kernels land. */
#include "map/map_internal.h"

lac_status lac_map_cpu(lac_ctx_t ctx, const lac_map_call *call)
{
    (void)call;
    return lac_error(ctx, LAC_ERR_UNSUPPORTED, "map on the CPU backend is not available yet");
}

lac_status lac_map_plan_build_cpu(lac_ctx_t ctx, lac_map_plan_t plan, const lac_map_call *call)
{
    (void)plan;
    (void)call;
    return lac_error(ctx, LAC_ERR_UNSUPPORTED, "map plans are not available yet");
}

lac_status lac_map_plan_execute_cpu(lac_ctx_t ctx, lac_map_plan_t plan, const lac_map_call *call)
{
    (void)plan;
    (void)call;
    return lac_error(ctx, LAC_ERR_UNSUPPORTED, "map plans are not available yet");
}
