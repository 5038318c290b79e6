/* Device and pinned host memory, and copies, for the public memory calls. */
#include "backend/cuda/cuda_internal.h"

static lac_status need_cuda(lac_ctx_t ctx)
{
    if (ctx->backend != LAC_BACKEND_CUDA || !ctx->cuda)
        return lac_error(ctx, LAC_ERR_ARGUMENT, "device memory needs a context with the CUDA backend");
    return lac_cuda_use_device(ctx);
}

lac_status lac_cuda_malloc(lac_ctx_t ctx, size_t bytes, void **ptr)
{
    LAC_CHECK(need_cuda(ctx));
    *ptr = NULL;
    LAC_CUDA_CHECK(ctx, cudaMalloc(ptr, bytes ? bytes : 1));
    return LAC_SUCCESS;
}

lac_status lac_cuda_free(lac_ctx_t ctx, void *ptr)
{
    LAC_CHECK(need_cuda(ctx));
    LAC_CUDA_CHECK(ctx, cudaFree(ptr));
    return LAC_SUCCESS;
}

lac_status lac_cuda_host_alloc(lac_ctx_t ctx, size_t bytes, void **ptr)
{
    LAC_CHECK(need_cuda(ctx));
    *ptr = NULL;
    LAC_CUDA_CHECK(ctx, cudaMallocHost(ptr, bytes ? bytes : 1));
    return LAC_SUCCESS;
}

lac_status lac_cuda_host_free(lac_ctx_t ctx, void *ptr)
{
    LAC_CHECK(need_cuda(ctx));
    LAC_CUDA_CHECK(ctx, cudaFreeHost(ptr));
    return LAC_SUCCESS;
}

lac_status lac_cuda_memcpy(lac_ctx_t ctx, void *dst, lac_memory dst_memory, const void *src,
                                      lac_memory src_memory, size_t bytes)
{
    LAC_CHECK(need_cuda(ctx));
    cudaMemcpyKind kind = dst_memory == LAC_MEM_DEVICE
                              ? (src_memory == LAC_MEM_DEVICE ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
                              : cudaMemcpyDeviceToHost;
    LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(dst, src, bytes, kind, ctx->cuda->stream));
    LAC_CUDA_CHECK(ctx, cudaStreamSynchronize(ctx->cuda->stream));
    return LAC_SUCCESS;
}
