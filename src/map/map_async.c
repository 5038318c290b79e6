/* The stream-ordered map calls of include/lacuna/lacuna_cuda.h: the same
 * checks as lac_map, then the CUDA backend's asynchronous table. This file
 * does not include CUDA's headers: cudaStream_t is `struct CUstream_st *`. */
#include "core/internal.h"
#include "map/map_backend.h"
#include "map/map_front.h"

struct CUstream_st;
LAC_API lac_status lac_map_cuda_async(lac_ctx_t ctx, const lac_map_params *params, const lac_array *source,
                                      const lac_array *bridge, const lac_array *weights, lac_array *target,
                                      struct CUstream_st *stream);
LAC_API lac_status lac_map_cuda_synchronize(lac_ctx_t ctx, struct CUstream_st *stream);

static lac_status async_table(lac_ctx_t ctx, const lac_map_async_backend **out)
{
    *out = lac_map_async_backend_cuda();
    if (ctx->backend != LAC_BACKEND_CUDA || !*out)
        return lac_error(ctx, LAC_ERR_UNSUPPORTED, "asynchronous map calls need a context with the CUDA backend");
    return LAC_SUCCESS;
}

lac_status lac_map_cuda_async(lac_ctx_t ctx, const lac_map_params *params, const lac_array *source,
                              const lac_array *bridge, const lac_array *weights, lac_array *target,
                              struct CUstream_st *stream)
{
    LAC_ARG_NOT_NULL(ctx, ctx);
    LAC_ARG_NOT_NULL(ctx, bridge);
    const lac_map_async_backend *table;
    LAC_CHECK(async_table(ctx, &table));
    lac_map_call call;
    LAC_CHECK(lac_map_check_call(ctx, params, source, bridge, weights, target, 0, 0, &call));
    return table->map(ctx, &call, stream);
}

lac_status lac_map_cuda_synchronize(lac_ctx_t ctx, struct CUstream_st *stream)
{
    LAC_ARG_NOT_NULL(ctx, ctx);
    const lac_map_async_backend *table;
    LAC_CHECK(async_table(ctx, &table));
    return table->synchronize(ctx, stream);
}
