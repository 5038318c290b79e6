/* The fault flag of a map call read back and named: the kernels flag the
 * smallest offending row, the host reads the row's values and words the error
 * as every backend does (src/map/map_fault.c). */
#include "backend/cuda/map/map_cuda.cuh"

#include <math.h>
#include <string.h>

/* Reads `bytes` at p (host or device memory) into out. */
static lac_status read_back(lac_ctx_t ctx, lac_memory memory, const void *p, void *out, size_t bytes)
{
    if (memory == LAC_MEM_HOST) {
        memcpy(out, p, bytes);
        return LAC_SUCCESS;
    }
    LAC_CUDA_CHECK(ctx, cudaMemcpy(out, p, bytes, cudaMemcpyDeviceToHost));
    return LAC_SUCCESS;
}

static double as_double(const unsigned char *p, lac_dtype dt)
{
    if (dt == LAC_FLOAT32) {
        float f;
        memcpy(&f, p, sizeof f);
        return f;
    }
    double d;
    memcpy(&d, p, sizeof d);
    return d;
}


extern "C" lac_status lac_map_report_fault(lac_ctx_t ctx, const lac_map_call *call, const unsigned long long *fault_device)
{
    unsigned long long row = MAP_NO_FAULT;
    LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(&row, fault_device, sizeof row, cudaMemcpyDeviceToHost, ctx->cuda->stream));
    LAC_CUDA_CHECK(ctx, cudaStreamSynchronize(ctx->cuda->stream));
    return lac_map_describe_row(ctx, call, row);
}

extern "C" lac_status lac_map_report_fault_mapped(lac_ctx_t ctx, const lac_map_call *call,
                                              const unsigned long long *fault_device, const unsigned long long *report)
{
    if (!report) return lac_map_report_fault(ctx, call, fault_device);
    LAC_CUDA_CHECK(ctx, cudaStreamSynchronize(ctx->cuda->stream));
    return lac_map_describe_row(ctx, call, *(const volatile unsigned long long *)report);
}

extern "C" lac_status lac_map_describe_row(lac_ctx_t ctx, const lac_map_call *call, unsigned long long row)
{
    if (row == MAP_NO_FAULT) return LAC_SUCCESS;

    /* The kernels flag the smallest row with any fault; name it the way
     * lac_map_scan_host does: the bridge first, then the weight, then the
     * source columns in order. */
    const int64_t i = (int64_t)row;
    const size_t isz = lac_dtype_size(call->index_dtype), vsz = lac_dtype_size(call->value_dtype);
    if (call->bridge) {
        unsigned char buf[8];
        LAC_CHECK(read_back(ctx, call->memory, (const unsigned char *)call->bridge + (size_t)i * isz, buf, isz));
        int64_t r;
        if (call->index_dtype == LAC_INT32) {
            int32_t r32;
            memcpy(&r32, buf, sizeof r32);
            r = r32;
        } else {
            memcpy(&r, buf, sizeof r);
        }
        if (r < 0 || r >= call->n) return lac_map_report_bad_index(ctx, i, r, call->n);
    }
    if (call->params.nan_policy == LAC_NAN_ERROR && call->source) {
        unsigned char buf[8];
        if (call->weights) {
            LAC_CHECK(read_back(ctx, call->memory, (const unsigned char *)call->weights + (size_t)i * vsz, buf, vsz));
            if (isnan(as_double(buf, call->value_dtype))) return lac_map_report_nan(ctx, "weights", i, -1);
        }
        for (int64_t col = 0; col < call->b; col++) {
            LAC_CHECK(read_back(ctx, call->memory, (const unsigned char *)call->source + ((size_t)i * call->b + col) * vsz,
                                buf, vsz));
            if (isnan(as_double(buf, call->value_dtype)))
                return lac_map_report_nan(ctx, "source", i, call->b > 1 ? col : -1);
        }
    }
    return lac_error(ctx, LAC_ERR_INTERNAL, "map: row %lld was flagged on the device but shows no fault", (long long)i);
}

