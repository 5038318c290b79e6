/* map on the CUDA backend: placeholder until the kernels land. */
#include "backend/cuda/cuda_internal.h"

extern "C" lac_status lac_cuda_map(lac_ctx_t ctx, const lac_map_call *call)
{
    (void)call;
    return lac_error(ctx, LAC_ERR_UNSUPPORTED, "map on the CUDA backend is not available yet");
}

extern "C" lac_status lac_cuda_map_plan_build(lac_ctx_t ctx, lac_map_plan_t plan, const lac_map_call *call)
{
    (void)plan;
    (void)call;
    return lac_error(ctx, LAC_ERR_UNSUPPORTED, "map plans on the CUDA backend are not available yet");
}

extern "C" lac_status lac_cuda_map_plan_execute(lac_ctx_t ctx, lac_map_plan_t plan, const lac_map_call *call)
{
    (void)plan;
    (void)call;
    return lac_error(ctx, LAC_ERR_UNSUPPORTED, "map plans on the CUDA backend are not available yet");
}

extern "C" void lac_cuda_map_plan_release(lac_map_plan_t plan) { (void)plan; }
