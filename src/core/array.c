/* Array descriptors and memory: host arrays, device memory, pinned memory. */
#include "core/internal.h"
#include "core/device.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* What a library-made array owns, and how lac_array_release gives it back. */
enum { OWNED_MALLOC = 1, OWNED_MMAP = 2 };
struct lac_array_owner {
    int kind;
    void *base;
    size_t bytes;
};

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
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] == 0) return 0;   /* empty, whatever the other sizes */
    int64_t count = 1;
    for (int d = 0; d < a->ndim; d++)
        if (__builtin_mul_overflow(count, a->shape[d], &count)) return INT64_MAX;   /* no such array fits memory */
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
    return lac_array_own_malloc(ctx, out, data, bytes);
}

static lac_status own(lac_ctx_t ctx, lac_array *a, int kind, void *base, size_t bytes)
{
    struct lac_array_owner *o = malloc(sizeof *o);
    if (!o) {
        if (kind == OWNED_MALLOC) free(base);
        else munmap(base, bytes);
        memset(a, 0, sizeof *a);
        return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "could not allocate an array record");
    }
    o->kind = kind;
    o->base = base;
    o->bytes = bytes;
    a->owner = o;
    return LAC_SUCCESS;
}

lac_status lac_array_own_malloc(lac_ctx_t ctx, lac_array *a, void *block, size_t bytes)
{
    return own(ctx, a, OWNED_MALLOC, block, bytes);
}

lac_status lac_array_own_mmap(lac_ctx_t ctx, lac_array *a, void *mapping, size_t bytes)
{
    return own(ctx, a, OWNED_MMAP, mapping, bytes);
}

lac_array lac_array_view(const lac_array *a)
{
    lac_array v;
    memset(&v, 0, sizeof v);
    if (a) {
        v = *a;
        v.owner = NULL;
    }
    return v;
}

void lac_array_release(lac_array *a)
{
    if (!a) return;
    struct lac_array_owner *o = a->owner;
    if (o && o->kind == OWNED_MALLOC) free(o->base);
    else if (o && o->kind == OWNED_MMAP) munmap(o->base, o->bytes);
    free(o);
    memset(a, 0, sizeof *a);
}

/* Device memory goes through the context's device table; a CPU context has none. */
static lac_status device_of(lac_ctx_t ctx, const lac_device_backend **out)
{
    *out = lac_ctx_device(ctx);
    if (*out) return LAC_SUCCESS;
    if (!lac_device_backend_cuda()) return lac_error(ctx, LAC_ERR_NOT_COMPILED, "this build has no CUDA backend");
    return lac_error(ctx, LAC_ERR_ARGUMENT, "device memory needs a context with the CUDA backend");
}

lac_status lac_device_alloc(lac_ctx_t ctx, size_t bytes, void **ptr)
{
    LAC_ARG_NOT_NULL(ctx, ctx);
    LAC_ARG_NOT_NULL(ctx, ptr);
    const lac_device_backend *device;
    LAC_CHECK(device_of(ctx, &device));
    return device->malloc(ctx, bytes, ptr);
}

lac_status lac_device_free(lac_ctx_t ctx, void *ptr)
{
    LAC_ARG_NOT_NULL(ctx, ctx);
    if (!ptr) return LAC_SUCCESS;
    const lac_device_backend *device;
    LAC_CHECK(device_of(ctx, &device));
    return device->free(ctx, ptr);
}

lac_status lac_host_alloc_pinned(lac_ctx_t ctx, size_t bytes, void **ptr)
{
    LAC_ARG_NOT_NULL(ctx, ctx);
    LAC_ARG_NOT_NULL(ctx, ptr);
    const lac_device_backend *device;
    LAC_CHECK(device_of(ctx, &device));
    return device->host_alloc(ctx, bytes, ptr);
}

lac_status lac_host_free_pinned(lac_ctx_t ctx, void *ptr)
{
    LAC_ARG_NOT_NULL(ctx, ctx);
    if (!ptr) return LAC_SUCCESS;
    const lac_device_backend *device;
    LAC_CHECK(device_of(ctx, &device));
    return device->host_free(ctx, ptr);
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
    const lac_device_backend *device;
    LAC_CHECK(device_of(ctx, &device));
    return device->memcpy(ctx, dst, dst_memory, src, src_memory, bytes);
}
