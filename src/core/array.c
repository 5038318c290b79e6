/* Array descriptors and memory: host arrays, device memory, pinned memory. */
#include "core/internal.h"
#include "backend/cuda/gateway.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* owned_kind_ values: how lac_array_release gives the data back. */
enum { OWNED_NONE = 0, OWNED_MALLOC = 1, OWNED_MMAP = 2 };

size_t lac_dtype_size(lac_dtype dtype)
{
    switch (dtype) {
    case LAC_FLOAT32: return 4;
    case LAC_FLOAT64: return 8;
    case LAC_INT32: return 4;
    case LAC_INT64: return 8;
    case LAC_BOOL: return 1;
    default: return 0;
    }
}

const char *lac_dtype_name(lac_dtype dtype)
{
    switch (dtype) {
    case LAC_FLOAT32: return "float32";
    case LAC_FLOAT64: return "float64";
    case LAC_INT32: return "int32";
    case LAC_INT64: return "int64";
    case LAC_BOOL: return "bool";
    default: return "unknown";
    }
}

int64_t lac_array_count(const lac_array *a)
{
    if (!a) return 0;
    int64_t count = 1;
    for (int d = 0; d < a->ndim; d++) count *= a->shape[d];
    return count;
}

lac_array lac_array_vector(void *data, lac_dtype dtype, int64_t length)
{
    lac_array a;
    memset(&a, 0, sizeof a);
    a.data = data;
    a.dtype = dtype;
    a.ndim = 1;
    a.shape[0] = length;
    return a;
}

lac_array lac_array_matrix(void *data, lac_dtype dtype, int64_t rows, int64_t cols)
{
    lac_array a = lac_array_vector(data, dtype, rows);
    a.ndim = 2;
    a.shape[1] = cols;
    return a;
}

lac_status lac_array_alloc(lac_ctx_t ctx, lac_dtype dtype, int ndim, const int64_t *shape,
                           lac_array *out)
{
    LAC_ARG_NOT_NULL(ctx, out);
    LAC_ARG_NOT_NULL(ctx, shape);
    if (lac_dtype_size(dtype) == 0) return lac_error(ctx, LAC_ERR_DTYPE, "unknown dtype %d", (int)dtype);
    if (ndim < 1 || ndim > LAC_MAX_DIMS)
        return lac_error(ctx, LAC_ERR_SHAPE, "ndim %d is outside [1, %d]", ndim, LAC_MAX_DIMS);
    size_t bytes = lac_dtype_size(dtype);
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0) return lac_error(ctx, LAC_ERR_SHAPE, "shape[%d] = %lld is negative", d, (long long)shape[d]);
        if (lac_mul_overflows(bytes, (size_t)shape[d], &bytes))
            return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "array size overflows");
    }
    void *data = lac_calloc(ctx, bytes, 1);
    if (!data) return LAC_ERR_OUT_OF_MEMORY;
    memset(out, 0, sizeof *out);
    out->data = data;
    out->dtype = dtype;
    out->ndim = ndim;
    for (int d = 0; d < ndim; d++) out->shape[d] = shape[d];
    out->owned_ = data;
    out->owned_bytes_ = bytes;
    out->owned_kind_ = OWNED_MALLOC;
    return LAC_SUCCESS;
}

/* Used by the readers to hand over what they allocated or mapped. */
void lac_array_take_malloc(lac_array *a, void *block, size_t bytes)
{
    a->owned_ = block;
    a->owned_bytes_ = bytes;
    a->owned_kind_ = OWNED_MALLOC;
}

void lac_array_take_mmap(lac_array *a, void *mapping, size_t bytes)
{
    a->owned_ = mapping;
    a->owned_bytes_ = bytes;
    a->owned_kind_ = OWNED_MMAP;
}

void lac_array_release(lac_array *a)
{
    if (!a) return;
    if (a->owned_kind_ == OWNED_MALLOC) free(a->owned_);
    else if (a->owned_kind_ == OWNED_MMAP) munmap(a->owned_, a->owned_bytes_);
    memset(a, 0, sizeof *a);
}

lac_status lac_device_alloc(lac_ctx_t ctx, size_t bytes, void **ptr)
{
    LAC_ARG_NOT_NULL(ctx, ctx);
    LAC_ARG_NOT_NULL(ctx, ptr);
    return lac_cuda_malloc(ctx, bytes, ptr);
}

lac_status lac_device_free(lac_ctx_t ctx, void *ptr)
{
    LAC_ARG_NOT_NULL(ctx, ctx);
    if (!ptr) return LAC_SUCCESS;
    return lac_cuda_free(ctx, ptr);
}

lac_status lac_host_alloc_pinned(lac_ctx_t ctx, size_t bytes, void **ptr)
{
    LAC_ARG_NOT_NULL(ctx, ctx);
    LAC_ARG_NOT_NULL(ctx, ptr);
    return lac_cuda_host_alloc(ctx, bytes, ptr);
}

lac_status lac_host_free_pinned(lac_ctx_t ctx, void *ptr)
{
    LAC_ARG_NOT_NULL(ctx, ctx);
    if (!ptr) return LAC_SUCCESS;
    return lac_cuda_host_free(ctx, ptr);
}

lac_status lac_memcpy(lac_ctx_t ctx, void *dst, lac_memory dst_memory, const void *src,
                      lac_memory src_memory, size_t bytes)
{
    LAC_ARG_NOT_NULL(ctx, ctx);
    if (bytes == 0) return LAC_SUCCESS;
    LAC_ARG_NOT_NULL(ctx, dst);
    LAC_ARG_NOT_NULL(ctx, src);
    if (dst_memory == LAC_MEM_HOST && src_memory == LAC_MEM_HOST) {
        memmove(dst, src, bytes);
        return LAC_SUCCESS;
    }
    return lac_cuda_memcpy(ctx, dst, dst_memory, src, src_memory, bytes);
}
