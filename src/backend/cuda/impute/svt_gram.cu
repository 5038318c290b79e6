/* Batched singular-value soft-thresholding for slices too big for shared
 * memory: through the Gram matrix, in float64.
 *
 * For a chunk of slices A (rows x cols): B = AᵀA (or AAᵀ, the smaller side),
 * float64 GEMMs over the batch; B = Q diag(μ) Qᵀ by cuSOLVER's batched
 * symmetric eigensolver; σ_j = sqrt(μ_j), and only the r eigenvectors with
 * σ_j > λ are used: S_λ(A) = A Q_r diag(1 - λ/σ) Q_rᵀ (right vectors) or
 * Q_r diag(1 - λ/σ) Q_rᵀ A (left vectors), two more batched GEMMs over the
 * chunk's largest r. Squaring in float64 keeps what lies above ~1e-8 σmax,
 * far below any λ of the schedule. A slice whose eigensolve reports failure
 * is solved again alone by syevd (another algorithm); only if that fails too
 * is it an error. */
#include "backend/cuda/impute/impute_cuda.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>

#include <new>

namespace {

template <typename REAL> __global__ void widen(double *dst, const REAL *src, int64_t count)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < count; i += (int64_t)gridDim.x * blockDim.x)
        dst[i] = (double)src[i];
}

/* Per slice: σmax, the kept count and the shrink factors of the p eigenpairs
 * (ascending; f = 0 for those not kept); the chunk's largest r in *r_max. */
__global__ void shrink_factors(const double *mu, int p, int64_t count, const double *lambda, double *factor,
                               int *kept, int *r_max, double *sigma_max)
{
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < count; k += (int64_t)gridDim.x * blockDim.x) {
        const double *m = mu + k * p;
        double top = m[p - 1] > 0 ? m[p - 1] : 0;
        sigma_max[k] = sqrt(top);
        int r = 0;
        for (int j = 0; j < p; j++) {
            double s = m[j] > 0 ? sqrt(m[j]) : 0;
            int keep = lambda && s > lambda[k] && s > 0;
            factor[k * p + j] = keep ? 1 - lambda[k] / s : 0;
            r += keep;
        }
        kept[k] = r;
        if (r) atomicMax(r_max, r);
    }
}

/* T's columns (right: rows x r, column j) or rows (left: r x cols, row j)
 * scaled by the factor of eigenpair p - r + j. */
__global__ void scale_kept(double *t, const double *factor, int p, int r, int64_t len, int right, int64_t count)
{
    const int64_t per = len * r;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < per * count;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t k = i / per, e = i % per;
        int j = right ? (int)(e / len) : (int)(e % r);
        t[i] *= factor[k * p + p - r + j];
    }
}

/* The result over the previous estimate, and each slice's figures. */
template <typename REAL>
__global__ void store_result(const double *r, REAL *out, const REAL *truth, int64_t size, int64_t stride,
                             const int *kept, const double *sigma_max, const int *info, double *stats,
                             const int *skip)
{
    __shared__ double part[3][32];
    const int64_t k = blockIdx.x;
    if (skip && skip[k]) return;
    double change = 0, previous = 0, terr = 0;
    const bool any = r && kept[k] > 0;   /* nothing kept: exactly 0, whatever the buffers hold */
    for (int64_t e = threadIdx.x; e < size; e += blockDim.x) {
        double v = any ? r[k * size + e] : 0, old = (double)out[k * stride + e];
        change += (v - old) * (v - old);
        previous += old * old;
        if (truth) {
            double q = v - (double)truth[k * stride + e];
            terr += q * q;
        }
        out[k * stride + e] = (REAL)v;
    }
    for (int off = 16; off > 0; off >>= 1) {
        change += __shfl_xor_sync(0xffffffffu, change, off);
        previous += __shfl_xor_sync(0xffffffffu, previous, off);
        terr += __shfl_xor_sync(0xffffffffu, terr, off);
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) {
        part[0][warp] = change;
        part[1][warp] = previous;
        part[2][warp] = terr;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        double s[3] = {0, 0, 0};
        for (int w = 0; w < (int)(blockDim.x + 31) / 32; w++)
            for (int q = 0; q < 3; q++) s[q] += part[q][w];
        double *st = stats + k * LAC_SVT_STATS;
        int ok = (!info || info[k] == 0) && sigma_max[k] <= DBL_MAX;
        st[LAC_SVT_CHANGE] = ok ? s[0] : NAN;
        st[LAC_SVT_PREVIOUS] = ok ? s[1] : NAN;
        st[LAC_SVT_TRUTH] = ok ? s[2] : NAN;
        st[LAC_SVT_SIGMA_MAX] = ok ? sigma_max[k] : NAN;
        st[LAC_SVT_RANK] = ok ? kept[k] : -1;
        st[LAC_SVT_SWEEPS] = 0;
    }
}

/* A chunk's eigenpairs (ascending, p x p vectors a slice) into the kept
 * vectors (descending) and values of slice slot[k] (first + k without a map). */
__global__ void keep_pairs(const double *vectors, const double *mu, int64_t p, int64_t n, double *v, double *theta,
                           const int *slot, int64_t first)
{
    const int64_t pp = p * p;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n * pp; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t k = i / pp, e = i % pp, row = e % p, col = e / p;
        const int64_t to = slot ? slot[first + k] : first + k;
        v[to * pp + row + col * p] = vectors[k * pp + row + (p - 1 - col) * p];
        if (theta && row == 0) theta[to * p + col] = mu[k * p + p - 1 - col];
    }
}

unsigned grid_for(int64_t n)
{
    int64_t g = (n + 255) / 256;
    return (unsigned)(g < 1 ? 1 : g > 8192 ? 8192 : g);
}

} // namespace

lac_status lac_svt_rebuild(lac_ctx_t ctx, int right, int64_t rows, int64_t cols, int64_t n, int r_max, double *a,
                           double *t, const double *qr, int64_t vstride, const double *factor, int fp)
{
    if (r_max <= 0) return LAC_SUCCESS;
    cublasHandle_t blas;
    LAC_CHECK(lac_cuda_cublas(ctx, &blas));
    cudaStream_t stream = ctx->cuda->stream;
    const int64_t size = rows * cols, p = right ? cols : rows;
    const double one = 1, zero = 0;
    cublasStatus_t bs;
    if (right) {   /* T = A Q_r (rows x r), scaled; R = T Q_rᵀ into a */
        bs = cublasDgemmStridedBatched_64(blas, CUBLAS_OP_N, CUBLAS_OP_N, rows, r_max, cols, &one, a, rows, size, qr, p,
                                          vstride, &zero, t, rows, rows * r_max, n);
        if (bs == CUBLAS_STATUS_SUCCESS) {
            scale_kept<<<grid_for(n * rows * r_max), 256, 0, stream>>>(t, factor, fp, r_max, rows, 1, n);
            bs = cublasDgemmStridedBatched_64(blas, CUBLAS_OP_N, CUBLAS_OP_T, rows, cols, r_max, &one, t, rows,
                                              rows * r_max, qr, p, vstride, &zero, a, rows, size, n);
        }
    } else {       /* T = Q_rᵀ A (r x cols), scaled; R = Q_r T into a */
        bs = cublasDgemmStridedBatched_64(blas, CUBLAS_OP_T, CUBLAS_OP_N, r_max, cols, rows, &one, qr, p, vstride, a,
                                          rows, size, &zero, t, r_max, r_max * cols, n);
        if (bs == CUBLAS_STATUS_SUCCESS) {
            scale_kept<<<grid_for(n * cols * r_max), 256, 0, stream>>>(t, factor, fp, r_max, cols, 0, n);
            bs = cublasDgemmStridedBatched_64(blas, CUBLAS_OP_N, CUBLAS_OP_N, rows, cols, r_max, &one, qr, p, vstride,
                                              t, r_max, r_max * cols, &zero, a, rows, size, n);
        }
    }
    if (bs != CUBLAS_STATUS_SUCCESS) return lac_cublas_fail(ctx, (int)bs, "rebuild of the thresholded slices", __FILE__, __LINE__);
    LAC_CUDA_CHECK_LAUNCH(ctx);
    return LAC_SUCCESS;
}

template <typename REAL>
lac_status lac_svt_store(lac_ctx_t ctx, const double *result, REAL *out, const REAL *truth, int64_t size,
                         int64_t stride, int64_t n, const int *kept, const double *sigma_max, const int *info,
                         double *stats, const int *skip)
{
    store_result<REAL><<<(unsigned)n, 256, 0, ctx->cuda->stream>>>(result, out, truth, size, stride, kept, sigma_max,
                                                                    info, stats, skip);
    LAC_CUDA_CHECK_LAUNCH(ctx);
    return LAC_SUCCESS;
}

template <typename REAL> lac_status lac_svt_widen(lac_ctx_t ctx, double *dst, const REAL *src, int64_t count)
{
    widen<REAL><<<grid_for(count), 256, 0, ctx->cuda->stream>>>(dst, src, count);
    LAC_CUDA_CHECK_LAUNCH(ctx);
    return LAC_SUCCESS;
}

template lac_status lac_svt_widen<float>(lac_ctx_t, double *, const float *, int64_t);
template lac_status lac_svt_widen<double>(lac_ctx_t, double *, const double *, int64_t);
template lac_status lac_svt_store<float>(lac_ctx_t, const double *, float *, const float *, int64_t, int64_t, int64_t,
                                         const int *, const double *, const int *, double *, const int *);
template lac_status lac_svt_store<double>(lac_ctx_t, const double *, double *, const double *, int64_t, int64_t,
                                          int64_t, const int *, const double *, const int *, double *, const int *);

namespace {
} // namespace

lac_svt_gram_cache::~lac_svt_gram_cache()
{
    release_full();
    lac_svt_subspace_free(sub);
}

void lac_svt_gram_cache::release_full()
{
    cudaFree(a);
    cudaFree(b);
    cudaFree(t);
    cudaFree(mu);
    cudaFree(factor);
    cudaFree(sigma);
    cudaFree(kept);
    cudaFree(r_max);
    cudaFree(info);
    cudaFree(work);
    free(host_work);
    free(info_host);
    if (params) cusolverDnDestroyParams(params);
    a = b = t = mu = factor = sigma = nullptr;
    kept = r_max = info = info_host = nullptr;
    work = host_work = nullptr;
    params = nullptr;
    rows = cols = chunk = 0;
    work_bytes = host_bytes = 0;
}

void lac_svt_gram_cache_free(lac_svt_gram_cache *cache)
{
    delete cache;
}

lac_status lac_syev_batched_workspace(lac_ctx_t ctx, cusolverDnHandle_t solver, cudaDataType type, int64_t n, void *a,
                                      void *w, int64_t batch, cusolverDnParams_t *params, void **work, size_t *work_bytes,
                                      void **host_work, size_t *host_bytes)
{
    LAC_CUSOLVER_CHECK(ctx, cusolverDnCreateParams(params));
    LAC_CUSOLVER_CHECK(ctx, cusolverDnXsyevBatched_bufferSize(solver, *params, CUSOLVER_EIG_MODE_VECTOR,
                                                              CUBLAS_FILL_MODE_UPPER, n, type, a, n, type, w, type,
                                                              work_bytes, host_bytes, batch));
    LAC_CUDA_CHECK(ctx, cudaMalloc(work, *work_bytes ? *work_bytes : 1));
    *host_work = malloc(*host_bytes ? *host_bytes : 1);
    if (!*host_work) return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "host workspace of the batched eigensolver");
    return LAC_SUCCESS;
}

namespace {

typedef lac_svt_gram_cache gram_buffers;

/* Buffers for chunks of `chunk` slices of rows x cols (Gram side p). */
lac_status gram_alloc(lac_ctx_t ctx, cusolverDnHandle_t solver, gram_buffers &g, int64_t chunk, int64_t rows,
                      int64_t cols, int64_t p)
{
    const int64_t size = rows * cols;
    g.rows = rows;
    g.cols = cols;
    g.chunk = chunk;
    LAC_CUDA_CHECK(ctx, cudaMalloc(&g.a, (size_t)(chunk * size) * sizeof(double)));
    LAC_CUDA_CHECK(ctx, cudaMalloc(&g.t, (size_t)(chunk * size) * sizeof(double)));
    LAC_CUDA_CHECK(ctx, cudaMalloc(&g.b, (size_t)(chunk * p * p) * sizeof(double)));
    LAC_CUDA_CHECK(ctx, cudaMalloc(&g.mu, (size_t)(chunk * p) * sizeof(double)));
    LAC_CUDA_CHECK(ctx, cudaMalloc(&g.factor, (size_t)(chunk * p) * sizeof(double)));
    LAC_CUDA_CHECK(ctx, cudaMalloc(&g.sigma, (size_t)chunk * sizeof(double)));
    LAC_CUDA_CHECK(ctx, cudaMalloc(&g.kept, (size_t)chunk * sizeof(int)));
    LAC_CUDA_CHECK(ctx, cudaMalloc(&g.info, (size_t)chunk * sizeof(int)));
    LAC_CUDA_CHECK(ctx, cudaMalloc(&g.r_max, sizeof(int)));
    LAC_CHECK(lac_syev_batched_workspace(ctx, solver, CUDA_R_64F, p, g.b, g.mu, chunk, &g.params, &g.work, &g.work_bytes,
                                         &g.host_work, &g.host_bytes));
    g.info_host = (int *)malloc((size_t)chunk * sizeof(int));
    if (!g.info_host)
        return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "host workspace of the batched eigensolver");
    return LAC_SUCCESS;
}

/* Solves slice k's eigenproblem again with syevd after the batched solver
 * reported failure; b_k is rebuilt from a_k first (the failed call may have
 * left it half-reduced). */
lac_status resolve_alone(lac_ctx_t ctx, cusolverDnHandle_t solver, cublasHandle_t blas, gram_buffers &g, int64_t k,
                         int64_t rows, int64_t cols, int64_t p, int right)
{
    double one = 1, zero = 0;
    double *ak = g.a + k * rows * cols, *bk = g.b + k * p * p;
    LAC_CUBLAS_CHECK(ctx, cublasDgemm_64(blas, right ? CUBLAS_OP_T : CUBLAS_OP_N, right ? CUBLAS_OP_N : CUBLAS_OP_T, p, p,
                                         right ? rows : cols, &one, ak, rows, ak, rows, &zero, bk, p));
    size_t dev_bytes = 0, host_bytes = 0;
    LAC_CUSOLVER_CHECK(ctx, cusolverDnXsyevd_bufferSize(solver, g.params, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_UPPER,
                                                        p, CUDA_R_64F, bk, p, CUDA_R_64F, g.mu + k * p, CUDA_R_64F,
                                                        &dev_bytes, &host_bytes));
    void *dwork = nullptr, *hwork = nullptr;
    LAC_CUDA_CHECK(ctx, cudaMalloc(&dwork, dev_bytes ? dev_bytes : 1));
    hwork = malloc(host_bytes ? host_bytes : 1);
    cusolverStatus_t cs = cusolverDnXsyevd(solver, g.params, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_UPPER, p,
                                           CUDA_R_64F, bk, p, CUDA_R_64F, g.mu + k * p, CUDA_R_64F, dwork, dev_bytes,
                                           hwork, host_bytes, g.info + k);
    cudaError_t ce = cudaStreamSynchronize(ctx->cuda->stream);
    cudaFree(dwork);
    free(hwork);
    if (cs != CUSOLVER_STATUS_SUCCESS) return lac_cusolver_fail(ctx, (int)cs, "cusolverDnXsyevd", __FILE__, __LINE__);
    if (ce != cudaSuccess) return lac_cuda_fail(ctx, ce, "syevd of one slice", __FILE__, __LINE__);
    return LAC_SUCCESS;
}

/* A chunk's buffers a slice (gram_alloc), the eigensolver's workspace apart. */
size_t chunk_slice_bytes(int64_t size, int64_t p)
{
    return (size_t)(2 * size + p * p + 2 * p + 4) * sizeof(double) + 2 * sizeof(int);
}

} // namespace


void lac_svt_gram_bytes(lac_ctx_t ctx, int64_t rows, int64_t cols, size_t *per_slice, size_t *fixed)
{
    const int64_t p = cols <= rows ? cols : rows;
    /* The batched eigensolver's workspace asked for chunks of 64 and 128:
     * the difference grows with the chunk, the rest does not. Where the
     * query is refused, twice the Gram matrix a slice. */
    size_t work[2] = {0, 0}, host = 0;
    bool asked = false;
    cusolverDnHandle_t solver;
    cusolverDnParams_t params = nullptr;
    if (lac_cuda_cusolver(ctx, &solver) == LAC_SUCCESS && cusolverDnCreateParams(&params) == CUSOLVER_STATUS_SUCCESS) {
        asked = true;
        for (int i = 0; i < 2 && asked; i++)
            asked = cusolverDnXsyevBatched_bufferSize(solver, params, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_UPPER, p,
                                                      CUDA_R_64F, nullptr, p, CUDA_R_64F, nullptr, CUDA_R_64F, &work[i],
                                                      &host, 64 << i) == CUSOLVER_STATUS_SUCCESS;
        cusolverDnDestroyParams(params);
    }
    size_t slope = (size_t)(2 * p * p) * sizeof(double), base = 0;
    if (asked && work[1] >= work[0]) {
        slope = (work[1] - work[0] + 63) / 64;
        base = work[0] > 64 * slope ? work[0] - 64 * slope : 0;
    }
    *per_slice = chunk_slice_bytes(rows * cols, p) + slope;
    *fixed = base;
}

template <typename REAL>
lac_status lac_svt_gram_full(lac_ctx_t ctx, const lac_svt_batch<REAL> &b, size_t budget, lac_svt_gram_cache **cache)
{
    if (b.count == 0) return LAC_SUCCESS;
    cudaStream_t stream = ctx->cuda->stream;
    cublasHandle_t blas;
    cusolverDnHandle_t solver;
    LAC_CHECK(lac_cuda_cublas(ctx, &blas));
    LAC_CHECK(lac_cuda_cusolver(ctx, &solver));
    const int64_t rows = b.rows, cols = b.cols, size = rows * cols;
    if (b.stride != size) return lac_error(ctx, LAC_ERR_INTERNAL, "Gram SVT: slices must be packed");
    const int right = cols <= rows;   /* B = AᵀA: its eigenvectors are right singular vectors */
    const int64_t p = right ? cols : rows, len = right ? rows : cols;
    const size_t per_slice = chunk_slice_bytes(size, p);
    int64_t chunk = (int64_t)(budget / per_slice);
    if (chunk < 1) chunk = 1;
    if (chunk > b.count) chunk = b.count;

    /* Reuse the caller's buffers when they were made for this shape and hold
     * as many slices as the budget allows (a fallback's few slices may have
     * made them). */
    gram_buffers *buffers = cache ? *cache : nullptr;
    if (buffers && buffers->chunk && (buffers->rows != rows || buffers->cols != cols || buffers->chunk < chunk)) {
        LAC_CUDA_CHECK(ctx, cudaStreamSynchronize(stream));
        buffers->release_full();
    }
    const bool owned = !cache;
    if (!buffers) {
        buffers = new (std::nothrow) gram_buffers;
        if (!buffers) return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "Gram SVT buffers");
        if (cache) *cache = buffers;
    }
    if (!buffers->chunk) {
        lac_status as = gram_alloc(ctx, solver, *buffers, chunk, rows, cols, p);
        if (as < 0) {
            if (owned) delete buffers;
            else buffers->release_full();
            return as;
        }
    }
    gram_buffers &g = *buffers;
    chunk = g.chunk;
    const size_t host_bytes = g.host_bytes;
    int *info_host = g.info_host;

    lac_status st = LAC_SUCCESS;
    const double one = 1, zero = 0;
    for (int64_t first = 0; first < b.count && st == LAC_SUCCESS; first += chunk) {
        const int64_t n = b.count - first < chunk ? b.count - first : chunk;
        const REAL *a = b.a + first * b.stride;
        widen<REAL><<<grid_for(n * size), 256, 0, stream>>>(g.a, a, n * size);
        cudaError_t le = cudaGetLastError();
        if (le != cudaSuccess) {
            st = lac_cuda_fail(ctx, le, "widen", __FILE__, __LINE__);
            break;
        }
        cublasStatus_t bs = cublasDgemmStridedBatched_64(blas, right ? CUBLAS_OP_T : CUBLAS_OP_N,
                                                          right ? CUBLAS_OP_N : CUBLAS_OP_T, p, p, len, &one, g.a, rows,
                                                          size, g.a, rows, size, &zero, g.b, p, p * p, n);
        if (bs != CUBLAS_STATUS_SUCCESS) {
            st = lac_cublas_fail(ctx, (int)bs, "Gram matrices", __FILE__, __LINE__);
            break;
        }
        cusolverStatus_t cs = cusolverDnXsyevBatched(solver, g.params, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_UPPER,
                                                     p, CUDA_R_64F, g.b, p, CUDA_R_64F, g.mu, CUDA_R_64F, g.work,
                                                     g.work_bytes, g.host_work, host_bytes, g.info, n);
        if (cs != CUSOLVER_STATUS_SUCCESS) {
            st = lac_cusolver_fail(ctx, (int)cs, "cusolverDnXsyevBatched", __FILE__, __LINE__);
            break;
        }
        cudaError_t ce = cudaMemcpyAsync(info_host, g.info, (size_t)n * sizeof(int), cudaMemcpyDeviceToHost, stream);
        if (ce == cudaSuccess) ce = cudaStreamSynchronize(stream);
        if (ce != cudaSuccess) {
            st = lac_cuda_fail(ctx, ce, "eigensolver status", __FILE__, __LINE__);
            break;
        }
        for (int64_t k = 0; k < n && st == LAC_SUCCESS; k++)
            if (info_host[k] != 0) st = resolve_alone(ctx, solver, blas, g, k, rows, cols, p, right);
        if (st < 0) break;

        int r_max = 0;
        ce = cudaMemsetAsync(g.r_max, 0, sizeof(int), stream);
        if (ce == cudaSuccess) {
            shrink_factors<<<grid_for(n), 256, 0, stream>>>(g.mu, (int)p, n, b.lambda ? b.lambda + first : nullptr,
                                                            g.factor, g.kept, g.r_max, g.sigma);
            ce = cudaGetLastError();
        }
        if (ce == cudaSuccess) ce = cudaMemcpyAsync(&r_max, g.r_max, sizeof(int), cudaMemcpyDeviceToHost, stream);
        if (ce == cudaSuccess) ce = cudaStreamSynchronize(stream);
        if (ce != cudaSuccess) {
            st = lac_cuda_fail(ctx, ce, "shrink factors", __FILE__, __LINE__);
            break;
        }
        if (b.v) {   /* every eigenpair, descending, for the next pass's subspace */
            keep_pairs<<<grid_for(n * p * p), 256, 0, stream>>>(g.b, g.mu, p, n, b.v, b.theta, b.slot, first);
            ce = cudaGetLastError();
            if (ce != cudaSuccess) {
                st = lac_cuda_fail(ctx, ce, "keep_pairs", __FILE__, __LINE__);
                break;
            }
        }
        /* The top r_max eigenvectors (ascending order: the last columns). */
        st = lac_svt_rebuild(ctx, right, rows, cols, n, r_max, g.a, g.t, g.b + (p - r_max) * p, p * p, g.factor, p);
        if (st < 0) break;
        st = lac_svt_store<REAL>(ctx, r_max > 0 ? g.a : nullptr, b.out + first * b.stride,
                                 b.truth ? b.truth + first * b.stride : nullptr, size, b.stride, n, g.kept, g.sigma,
                                 g.info, b.stats + first * LAC_SVT_STATS, nullptr);
        if (st < 0) break;
    }
    /* The buffers may be freed next (by the caller, or here without a cache):
     * wait until the stream no longer uses them. */
    cudaError_t ce = cudaStreamSynchronize(stream);
    if (st == LAC_SUCCESS && ce != cudaSuccess) st = lac_cuda_fail(ctx, ce, "Gram SVT", __FILE__, __LINE__);
    if (owned) delete buffers;
    return st;
}

template <typename REAL>
lac_status lac_svt_gram(lac_ctx_t ctx, const lac_svt_batch<REAL> &b, size_t budget, lac_svt_gram_cache **cache)
{
    if (b.count == 0) return LAC_SUCCESS;
    if (cache && b.v && b.lambda && b.warm && lac_svt_subspace_on<REAL>(ctx)) {
        if (!*cache) {   /* the full path's buffers first: the subspace path falls back on them */
            gram_buffers *g = new (std::nothrow) gram_buffers;
            if (!g) return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "Gram SVT buffers");
            *cache = g;
        }
        lac_status st = lac_svt_subspace_pass<REAL>(ctx, b, budget, cache, &(*cache)->sub);
        if (st != LAC_INFO_NOT_CONVERGED) return st;   /* else: no usable subspace yet */
    }
    /* Without the warm start (or kept vectors) every pass with a λ is cold:
     * the subspace pass from random vectors. With it, the first pass is the
     * full eigensolve, whose p pairs start the warm passes. */
    const int64_t p = b.cols <= b.rows ? b.cols : b.rows;
    const bool warm_start = b.v && lac_knob_int(ctx, LAC_KNOB_IMPUTE_CUDA_WARM, 1) != 0;
    if (cache && b.lambda && !b.warm && !warm_start && lac_svt_subspace_cold_on<REAL>(ctx, p)) {
        double *theta;   /* the state's store of eigenvalues, made here */
        LAC_CHECK(lac_svt_subspace_seed(ctx, cache, b.count, p, &theta));
        lac_status st = lac_svt_subspace_cold<REAL>(ctx, b, budget, cache, &(*cache)->sub);
        if (st != LAC_INFO_NOT_CONVERGED) return st;
    }
    lac_svt_batch<REAL> full = b;
    if (cache && b.v && !b.theta && lac_svt_subspace_on<REAL>(ctx)) {
        LAC_CHECK(lac_svt_subspace_seed(ctx, cache, b.count, p, &full.theta));
    }
    return lac_svt_gram_full<REAL>(ctx, full, budget, cache);
}

template lac_status lac_svt_gram_full<float>(lac_ctx_t, const lac_svt_batch<float> &, size_t, lac_svt_gram_cache **);
template lac_status lac_svt_gram_full<double>(lac_ctx_t, const lac_svt_batch<double> &, size_t, lac_svt_gram_cache **);
template lac_status lac_svt_gram<float>(lac_ctx_t, const lac_svt_batch<float> &, size_t, lac_svt_gram_cache **);
template lac_status lac_svt_gram<double>(lac_ctx_t, const lac_svt_batch<double> &, size_t, lac_svt_gram_cache **);
