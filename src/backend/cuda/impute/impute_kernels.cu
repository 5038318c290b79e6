/* impute on CUDA: the element-wise kernels around the GEMMs and the SVT
 * (impute_cuda.h): loading the observed part of a tensor, gathering the
 * incomplete vertices' rows of the basis, and the imputation step. */
#include "backend/cuda/impute/impute_cuda.h"

namespace {

unsigned grid_for(int64_t n, int64_t cap)
{
    int64_t g = (n + 255) / 256;
    return (unsigned)(g < 1 ? 1 : g > cap ? cap : g);
}

template <typename REAL, typename SRC>
__global__ void load_kernel(REAL *dst, const SRC *src, int64_t count, int64_t mn, const unsigned char *vertex_state,
                            const unsigned char *entry, int mask)
{
    const int64_t total = count * mn;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        int keep = 1;
        if (mask) {
            unsigned char state = vertex_state[i / mn];
            keep = state == LAC_VERTEX_OBSERVED || (state == LAC_VERTEX_PARTIAL && entry && entry[i]);
        }
        dst[i] = keep ? (REAL)src[i] : (REAL)0;
    }
}

template <typename REAL>
__global__ void gather_rows_kernel(REAL *out, const REAL *in, const int64_t *index, int64_t rows_out, int64_t rows_in,
                                   int64_t cols)
{
    const int64_t total = rows_out * cols;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total; e += (int64_t)gridDim.x * blockDim.x) {
        int64_t i = e % rows_out, k = e / rows_out;
        out[e] = in[index[i] + k * rows_in];
    }
}

/* The block's sum of each thread's v into partial[blockIdx.x], in a fixed
 * order (warps, then warp sums in order). */
__device__ void block_partial(double v, double *partial)
{
    __shared__ double warp_sums[32];
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = v;
    __syncthreads();
    if (threadIdx.x == 0) {
        double s = 0;
        for (int w = 0; w < (int)(blockDim.x + 31) / 32; w++) s += warp_sums[w];
        partial[blockIdx.x] = s;
    }
}

/* The first `blocks` partial sums read back through the pinned host buffer
 * and added in block order. */
lac_status sum_partials(lac_ctx_t ctx, const double *partial, double *partial_host, unsigned blocks, double *sum)
{
    cudaStream_t stream = ctx->cuda->stream;
    LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(partial_host, partial, (size_t)blocks * sizeof(double), cudaMemcpyDeviceToHost,
                                        stream));
    LAC_CUDA_CHECK(ctx, cudaStreamSynchronize(stream));
    double s = 0;
    for (unsigned i = 0; i < blocks; i++) s += partial_host[i];
    *sum = s;
    return LAC_SUCCESS;
}

/* Line 10's P_Ω⊥ and the next line 7's extrapolation (impute_backend.h). */
template <typename REAL>
__global__ void impute_step_kernel(int64_t count, const REAL *x_new, const unsigned char *obs, const REAL *truth,
                                   REAL *x_inc, REAL *x_est, REAL theta, int extrapolate, double *partial)
{
    double err = 0;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < count; i += (int64_t)gridDim.x * blockDim.x) {
        REAL x = x_new[i];
        const int observed = obs && obs[i];
        if (observed) x = 0;   /* the observed entries come from C */
        if (truth && !observed) {
            double d = (double)x - (double)truth[i];
            err += d * d;
        }
        if (extrapolate) {
            x_inc[i] = x + theta * (x - x_est[i]);
            x_est[i] = x;
        } else {
            x_inc[i] = x;
        }
    }
    block_partial(err, partial);
}

/* Σ (a − b)² over the entries that skip does not mark (b NULL: 0), a
 * partial sum a block. */
template <typename REAL>
__global__ void sq_sum_kernel(int64_t count, const REAL *a, const REAL *b, const unsigned char *skip, double *partial)
{
    double sum = 0;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < count; i += (int64_t)gridDim.x * blockDim.x) {
        if (skip && skip[i]) continue;
        const double d = (double)a[i] - (b ? (double)b[i] : 0.0);
        sum += d * d;
    }
    block_partial(sum, partial);
}

template <typename REAL>
__global__ void gather_columns_kernel(REAL *out, const REAL *in, const int64_t *index, int64_t count, int64_t mn)
{
    const int64_t total = count * mn;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total; e += (int64_t)gridDim.x * blockDim.x)
        out[e] = in[index[e / mn] * mn + e % mn];
}

/* hi = a rounded to TF32 (nearest, ties away), lo = a - hi (exact in fp32). */
__global__ void split_tf32_kernel(const float *a, float *hi, float *lo, int64_t count)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < count; i += (int64_t)gridDim.x * blockDim.x) {
        float x = a[i];
        unsigned bits;
        asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(bits) : "f"(x));
        float h = __uint_as_float(bits);
        hi[i] = h;
        lo[i] = x - h;
    }
}

} // namespace

lac_status lac_impute_cuda_split_tf32(lac_ctx_t ctx, const float *a, float *hi, float *lo, int64_t count)
{
    if (count <= 0) return LAC_SUCCESS;
    split_tf32_kernel<<<grid_for(count, 65536), 256, 0, ctx->cuda->stream>>>(a, hi, lo, count);
    LAC_CUDA_CHECK_LAUNCH(ctx);
    return LAC_SUCCESS;
}

template <typename REAL>
lac_status lac_impute_cuda_load(lac_ctx_t ctx, REAL *dst, const void *src, lac_dtype src_dtype, int64_t count,
                                int64_t mn, const unsigned char *vertex_state, const unsigned char *entry, int mask)
{
    const unsigned grid = grid_for(count * mn, 65536);
    cudaStream_t stream = ctx->cuda->stream;
    if (src_dtype == LAC_FLOAT32)
        load_kernel<REAL, float><<<grid, 256, 0, stream>>>(dst, (const float *)src, count, mn, vertex_state, entry, mask);
    else
        load_kernel<REAL, double><<<grid, 256, 0, stream>>>(dst, (const double *)src, count, mn, vertex_state, entry, mask);
    LAC_CUDA_CHECK_LAUNCH(ctx);
    return LAC_SUCCESS;
}

template <typename REAL>
lac_status lac_impute_cuda_gather_rows(lac_ctx_t ctx, REAL *out, const REAL *in, const int64_t *index,
                                       int64_t rows_out, int64_t rows_in, int64_t cols)
{
    if (rows_out * cols == 0) return LAC_SUCCESS;
    gather_rows_kernel<REAL><<<grid_for(rows_out * cols, 65536), 256, 0, ctx->cuda->stream>>>(out, in, index, rows_out,
                                                                                              rows_in, cols);
    LAC_CUDA_CHECK_LAUNCH(ctx);
    return LAC_SUCCESS;
}

template <typename REAL>
lac_status lac_impute_cuda_impute_step(lac_ctx_t ctx, int64_t count, const REAL *x_new, const unsigned char *obs,
                                       const REAL *truth, REAL *x_inc, REAL *x_est, REAL theta, int extrapolate,
                                       double *partial, int *blocks)
{
    /* A fixed grid: the partial sums, added on the host in block order, do not
     * depend on timing. */
    const unsigned grid = grid_for(count, LAC_IMPUTE_CUDA_PARTIALS);
    impute_step_kernel<REAL><<<grid, 256, 0, ctx->cuda->stream>>>(count, x_new, obs, truth, x_inc, x_est, theta,
                                                                 extrapolate, partial);
    LAC_CUDA_CHECK_LAUNCH(ctx);
    *blocks = (int)grid;
    return LAC_SUCCESS;
}

template <typename REAL>
lac_status lac_impute_cuda_impute_sum(lac_ctx_t ctx, int64_t count, const REAL *x_new, const unsigned char *obs,
                                      const REAL *truth, REAL *x_inc, REAL *x_est, REAL theta, int extrapolate,
                                      double *partial, double *partial_host, double *error_sq)
{
    int blocks = 0;
    LAC_CHECK(lac_impute_cuda_impute_step<REAL>(ctx, count, x_new, obs, truth, x_inc, x_est, theta, extrapolate, partial,
                                                &blocks));
    return sum_partials(ctx, partial, partial_host, (unsigned)blocks, error_sq);
}

template <typename REAL>
lac_status lac_impute_cuda_sq_sum(lac_ctx_t ctx, int64_t count, const REAL *a, const REAL *b, const unsigned char *skip,
                                  double *partial, double *partial_host, double *sum)
{
    *sum = 0;
    if (count <= 0) return LAC_SUCCESS;
    /* A fixed grid, added on the host in block order: the same bits every run. */
    const unsigned grid = grid_for(count, LAC_IMPUTE_CUDA_PARTIALS);
    sq_sum_kernel<REAL><<<grid, 256, 0, ctx->cuda->stream>>>(count, a, b, skip, partial);
    LAC_CUDA_CHECK_LAUNCH(ctx);
    return sum_partials(ctx, partial, partial_host, grid, sum);
}

template <typename REAL>
lac_status lac_impute_cuda_gather_columns(lac_ctx_t ctx, REAL *out, const REAL *in, const int64_t *index, int64_t count,
                                          int64_t mn)
{
    if (count * mn == 0) return LAC_SUCCESS;
    gather_columns_kernel<REAL><<<grid_for(count * mn, 65536), 256, 0, ctx->cuda->stream>>>(out, in, index, count, mn);
    LAC_CUDA_CHECK_LAUNCH(ctx);
    return LAC_SUCCESS;
}

#define LAC_INSTANTIATE(REAL)                                                                                     \
    template lac_status lac_impute_cuda_sq_sum<REAL>(lac_ctx_t, int64_t, const REAL *, const REAL *,              \
                                                     const unsigned char *, double *, double *, double *);        \
    template lac_status lac_impute_cuda_gather_columns<REAL>(lac_ctx_t, REAL *, const REAL *, const int64_t *,    \
                                                             int64_t, int64_t);                                   \
    template lac_status lac_impute_cuda_load<REAL>(lac_ctx_t, REAL *, const void *, lac_dtype, int64_t, int64_t,  \
                                                   const unsigned char *, const unsigned char *, int);            \
    template lac_status lac_impute_cuda_gather_rows<REAL>(lac_ctx_t, REAL *, const REAL *, const int64_t *,       \
                                                          int64_t, int64_t, int64_t);                             \
    template lac_status lac_impute_cuda_impute_step<REAL>(lac_ctx_t, int64_t, const REAL *, const unsigned char *, \
                                                          const REAL *, REAL *, REAL *, REAL, int, double *, int *); \
    template lac_status lac_impute_cuda_impute_sum<REAL>(lac_ctx_t, int64_t, const REAL *, const unsigned char *,   \
                                                         const REAL *, REAL *, REAL *, REAL, int, double *, double *, \
                                                         double *);
LAC_INSTANTIATE(float)
LAC_INSTANTIATE(double)
