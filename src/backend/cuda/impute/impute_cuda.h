/* impute on CUDA: what the host driver (impute_dispatch.cu), the SVT paths
 * (svt_jacobi.cu, svt_gram.cu) and the element-wise kernels
 * (impute_kernels.cu) share. Only those files include this. */
#ifndef LACUNA_BACKEND_CUDA_IMPUTE_CUDA_H
#define LACUNA_BACKEND_CUDA_IMPUTE_CUDA_H

#include <float.h>
#include <math.h>

#include "backend/cuda/cuda_internal.h"
#include "impute/impute_backend.h"
#include "impute/stream_plan.h"

/* Per-slice figures an SVT pass leaves on the device, LAC_SVT_STATS doubles a
 * slice, summed on the host in slice order (so the sums do not depend on the
 * grid). rank is -1 for a slice that was not finite. */
enum {
    LAC_SVT_CHANGE = 0, LAC_SVT_PREVIOUS, LAC_SVT_TRUTH, LAC_SVT_SIGMA_MAX, LAC_SVT_RANK,
    LAC_SVT_SWEEPS,   /* Jacobi sweeps the slice took (0: another path), plus LAC_SVT_REFUSED when
                         its certificate for the columns below λ was refused */
    LAC_SVT_STATS
};
enum { LAC_SVT_REFUSED = 1024 };   /* above any sweep count */
enum { LAC_SVT_SHARP = 2048 };     /* Gershgorin refused, Cholesky proved (svt_jacobi.cu) */

/* The certificates' tolerance: a result within 2^-21 of ‖A‖_F of S_λ(A). */
#define LAC_SVT_TAU 4.76837158203125e-7

/* The shift s of the SVT's Cholesky certificates (svt_subspace.cu,
 * svt_jacobi.cu): a successful float64 factorisation of s·I − M proves
 * λ_max(M) ≤ λ²(1 + η), l2 = λ². η: what M may exceed λ² by, h(λ²(1 + η)) ≈
 * η/2 on at most p directions of norm ≤ λ√(1 + η), within LAC_SVT_TAU of
 * ‖A‖_F (fro2 = ‖A‖_F²); δ: the factorisation's backward error and the
 * rounding of forming the matrix, 4·terms·ε·knorm (knorm ≥ ‖s·I − M‖).
 * 0 where no proof can be made (δ would eat η). */
__host__ __device__ inline double lac_svt_certificate_shift(double l2, double fro2, double p, double terms, double knorm)
{
    double eta = 2 * LAC_SVT_TAU * sqrt(fro2) / (sqrt(l2) * sqrt(p));
    if (eta > 0.01) eta = 0.01;
    const double shift = l2 * (1 + eta) - 4.0 * terms * DBL_EPSILON * knorm;
    return shift > l2 ? shift : 0;
}

/* One SVT pass over `count` slices. A slice is a rows x cols column-major
 * matrix (lda = rows) `stride` elements after the previous one. */
template <typename REAL> struct lac_svt_batch {
    int64_t count, rows, cols, stride;
    const REAL *a;          /* the slices, left intact */
    REAL *out;              /* S_λ of each slice; read first as the previous estimate */
    const REAL *truth;      /* the truth's slices (Ĝtrue), or NULL */
    const double *lambda;   /* λ a slice, or NULL: singular values only, out = 0 */
    double *stats;          /* count x LAC_SVT_STATS */
    double *v;              /* Jacobi path: count x p x p right singular vectors kept between
                               passes (p = min(rows, cols)), or NULL */
    int warm;               /* v holds the previous pass's vectors: start from them */
    /* Gram path: with v, every slice's eigenvalues of AᵀA (descending, count x p) are
     * kept in theta, and the vectors and values of slice k go to slot[k] (device
     * map; NULL: k itself). */
    double *theta = nullptr;
    const int *slot = nullptr;
};

/* The shared-memory one-sided Jacobi path (svt_jacobi.cu): whether a slice of
 * this shape fits it, and the pass. */
template <typename REAL> bool lac_svt_jacobi_fits(const cudaDeviceProp &prop, int64_t rows, int64_t cols);
template <typename REAL> lac_status lac_svt_jacobi(lac_ctx_t ctx, const lac_svt_batch<REAL> &b);

/* The Gram-matrix path for slices too big for shared memory (svt_gram.cu):
 * B = AᵀA in float64 and a batched symmetric eigensolver, in chunks of slices
 * that fit `budget` bytes of workspace. With `cache` non-NULL the buffers
 * are kept in *cache for the next pass over slices of the same shape (free
 * them with lac_svt_gram_cache_free once the stream is idle). */
struct lac_svt_subspace;
struct lac_svt_gram_cache {
    int64_t rows = 0, cols = 0, chunk = 0;   /* chunk 0: the full path's buffers not made */
    double *a = nullptr, *b = nullptr, *t = nullptr, *mu = nullptr, *factor = nullptr, *sigma = nullptr;
    int *kept = nullptr, *r_max = nullptr, *info = nullptr, *info_host = nullptr;
    void *work = nullptr;
    size_t work_bytes = 0, host_bytes = 0;
    void *host_work = nullptr;
    cusolverDnParams_t params = nullptr;
    lac_svt_subspace *sub = nullptr;   /* the subspace path's state (svt_subspace.cu) */
    void release_full();
    ~lac_svt_gram_cache();
};
void lac_svt_gram_cache_free(lac_svt_gram_cache *cache);
/* cuSOLVER's batched symmetric eigensolver (vectors, upper) for `batch`
 * matrices of n x n of `type`: its parameters and both workspaces, made. */
lac_status lac_syev_batched_workspace(lac_ctx_t ctx, cusolverDnHandle_t solver, cudaDataType type, int64_t n, void *a,
                                      void *w, int64_t batch, cusolverDnParams_t *params, void **work, size_t *work_bytes,
                                      void **host_work, size_t *host_bytes);
/* With a cache, v and λ on a warm pass of float32 slices, the subspace path
 * (svt_subspace.cu) first; the full eigensolve for what it cannot certify. */
template <typename REAL>
lac_status lac_svt_gram(lac_ctx_t ctx, const lac_svt_batch<REAL> &b, size_t budget, lac_svt_gram_cache **cache);
/* The full path alone: every slice's whole eigendecomposition. */
template <typename REAL>
lac_status lac_svt_gram_full(lac_ctx_t ctx, const lac_svt_batch<REAL> &b, size_t budget, lac_svt_gram_cache **cache);
/* What both Gram paths share: the rebuild S_λ = A Q_r diag(f) Q_rᵀ (right,
 * cols <= rows) or Q_r diag(f) Q_rᵀ A over n packed float64 slices in a
 * (overwritten by the result), Q_r the r_max columns at qr (leading dimension
 * p = min(rows, cols), vstride apart), f of column j at factor[k*fp + fp - r_max + j];
 * t holds max(rows, cols) x r_max a slice. And the store over the previous
 * estimate with each slice's figures, skipping slices with skip[k] set. */
lac_status lac_svt_rebuild(lac_ctx_t ctx, int right, int64_t rows, int64_t cols, int64_t n, int r_max, double *a,
                           double *t, const double *qr, int64_t vstride, const double *factor, int fp);
/* dst = src in float64 (count values). */
template <typename REAL> lac_status lac_svt_widen(lac_ctx_t ctx, double *dst, const REAL *src, int64_t count);
template <typename REAL>
lac_status lac_svt_store(lac_ctx_t ctx, const double *result, REAL *out, const REAL *truth, int64_t size,
                         int64_t stride, int64_t n, const int *kept, const double *sigma_max, const int *info,
                         double *stats, const int *skip);

/* The rank-exploiting path (svt_subspace.cu). on: the knob lets it run for
 * this precision. seed: the cache's per-slice eigenvalue store for a full
 * pass whose vectors start the next. The pass answers LAC_INFO_NOT_CONVERGED
 * (having done nothing) when no full pass has seeded it. */
template <typename REAL> bool lac_svt_subspace_on(lac_ctx_t ctx);
lac_status lac_svt_subspace_seed(lac_ctx_t ctx, lac_svt_gram_cache **cache, int64_t count, int64_t p, double **theta);
template <typename REAL>
lac_status lac_svt_subspace_pass(lac_ctx_t ctx, const lac_svt_batch<REAL> &b, size_t budget, lac_svt_gram_cache **cache,
                            lac_svt_subspace **sub);
void lac_svt_subspace_free(lac_svt_subspace *sub);
/* A cold pass (a λ, no warm start) on slices with min(m, n) of at least
 * LACUNA_IMPUTE_CUDA_COLD: the same pass from random vectors, block p/2,
 * a longer filter; what it cannot certify takes the full eigensolve. It
 * stores q pairs a slice, so a warm pass after it takes the full path. */
template <typename REAL> bool lac_svt_subspace_cold_on(lac_ctx_t ctx, int64_t p);
template <typename REAL>
lac_status lac_svt_subspace_cold(lac_ctx_t ctx, const lac_svt_batch<REAL> &b, size_t budget, lac_svt_gram_cache **cache,
                                 lac_svt_subspace **sub);
/* The device bytes a slice adds to a Gram chunk (its buffers and the batched
 * eigensolver's workspace) and what a chunk needs whatever its size, for the
 * memory plan. */
void lac_svt_gram_bytes(lac_ctx_t ctx, int64_t rows, int64_t cols, size_t *per_slice, size_t *fixed);

/* One SVT pass over `count` packed slices of the problem (each m x n
 * row-major, so n x m column-major to the solvers) by the Jacobi path or the
 * Gram path (workspace `gram_budget`, buffers kept in *gram_cache); the
 * other arguments are lac_svt_batch's. */
template <typename REAL>
lac_status lac_svt_slices(lac_ctx_t ctx, bool jacobi, const lac_impute_problem &pr, int64_t count, const REAL *a,
                          REAL *out, const REAL *truth, const double *lambda, double *stats, double *v, int warm,
                          size_t gram_budget, lac_svt_gram_cache **gram_cache)
{
    lac_svt_batch<REAL> b;
    b.count = count;
    b.rows = pr.n;
    b.cols = pr.m;
    b.stride = pr.m * pr.n;
    b.a = a;
    b.out = out;
    b.truth = truth;
    b.lambda = lambda;
    b.stats = stats;
    b.v = v;
    b.warm = warm;
    return jacobi ? lac_svt_jacobi<REAL>(ctx, b) : lac_svt_gram<REAL>(ctx, b, gram_budget, gram_cache);
}

/* Element-wise steps (impute_kernels.cu), all on the context's stream. */
/* dst[v*mn + e] = the observed part of src (any float dtype) for vertices
 * [first, first + count): vertex_state and entry (NULL: whole vertices) are
 * device arrays of the chunk; mask = 0 copies everything. */
template <typename REAL>
lac_status lac_impute_cuda_load(lac_ctx_t ctx, REAL *dst, const void *src, lac_dtype src_dtype, int64_t count,
                                int64_t mn, const unsigned char *vertex_state, const unsigned char *entry, int mask);
/* out[i + k*rows_out] = in[index[i] + k*rows_in] for i < rows_out, k < cols. */
template <typename REAL>
lac_status lac_impute_cuda_gather_rows(lac_ctx_t ctx, REAL *out, const REAL *in, const int64_t *index,
                                       int64_t rows_out, int64_t rows_in, int64_t cols);
/* Columns index[0 .. count) (a device array) of in (mn x *) into out (mn x count). */
template <typename REAL>
lac_status lac_impute_cuda_gather_columns(lac_ctx_t ctx, REAL *out, const REAL *in, const int64_t *index, int64_t count,
                                          int64_t mn);
/* *sum = Σ (a[i] − b[i])² in float64 over i < count where skip (NULL: none)
 * is 0, b NULL read as 0; the per-block sums read back through the pinned
 * partial_host (LAC_IMPUTE_CUDA_PARTIALS) and added in block order. */
template <typename REAL>
lac_status lac_impute_cuda_sq_sum(lac_ctx_t ctx, int64_t count, const REAL *a, const REAL *b, const unsigned char *skip,
                                  double *partial, double *partial_host, double *sum);
/* The imputation step after the iGFT (impute_backend.h's igft): masks,
 * extrapolates, and leaves per-block partial sums of the missing error in
 * partial[0 .. blocks). Returns the block count used. */
template <typename REAL>
lac_status lac_impute_cuda_impute_step(lac_ctx_t ctx, int64_t count, const REAL *x_new, const unsigned char *obs,
                                       const REAL *truth, REAL *x_inc, REAL *x_est, REAL theta, int extrapolate,
                                       double *partial, int *blocks);

/* The imputation step, its missing-error partial sums read back through
 * the pinned partial_host and added in block order into *error_sq. */
template <typename REAL>
lac_status lac_impute_cuda_impute_sum(lac_ctx_t ctx, int64_t count, const REAL *x_new, const unsigned char *obs,
                                      const REAL *truth, REAL *x_inc, REAL *x_est, REAL theta, int extrapolate,
                                      double *partial, double *partial_host, double *error_sq);

/* 3xTF32 operands: hi = a rounded to TF32, lo = a - hi, so that
 * hi·hi' + hi·lo' + lo·hi' on TF32 tensor cores keeps ~fp32 accuracy. */
lac_status lac_impute_cuda_split_tf32(lac_ctx_t ctx, const float *a, float *hi, float *lo, int64_t count);

#define LAC_IMPUTE_CUDA_PARTIALS 512   /* most partial sums a reduction leaves */

/* GEMMs of either precision on a cuBLAS handle. */
static inline cublasStatus_t lac_gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n,
                                      int64_t k, float alpha, const float *a, int64_t lda, const float *b, int64_t ldb,
                                      float beta, float *c, int64_t ldc)
{
    return cublasSgemm_64(h, ta, tb, m, n, k, &alpha, a, lda, b, ldb, &beta, c, ldc);
}

static inline cublasStatus_t lac_gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int64_t m,
                                      int64_t n, int64_t k, double alpha, const double *a, int64_t lda, const double *b,
                                      int64_t ldb, double beta, double *c, int64_t ldc)
{
    return cublasDgemm_64(h, ta, tb, m, n, k, &alpha, a, lda, b, ldb, &beta, c, ldc);
}

/* The context's cuBLAS handle in TF32 mode for one GEMM when the state asks
 * for it, restored after (the handle is shared with other capabilities). */
struct lac_math_mode_scope {
    cublasHandle_t h;
    cublasMath_t previous;
    bool changed = false;
    lac_math_mode_scope(cublasHandle_t handle, bool tf32) : h(handle)
    {
        if (tf32 && cublasGetMathMode(h, &previous) == CUBLAS_STATUS_SUCCESS)
            changed = cublasSetMathMode(h, CUBLAS_TF32_TENSOR_OP_MATH) == CUBLAS_STATUS_SUCCESS;
    }
    ~lac_math_mode_scope()
    {
        if (changed) cublasSetMathMode(h, previous);
    }
};

/* The phase clock (impute_phases.cu, LACUNA_IMPUTE_CUDA_PHASES): events at
 * these marks of an iteration, each phase's median logged at release. NULL
 * (the knob off) makes every call a no-op. STEP0 (the iGFT's product done,
 * the imputation step next) is marked by the resident plan only. */
enum {
    LAC_PHASE_GFT0, LAC_PHASE_GFT1, LAC_PHASE_SVT0, LAC_PHASE_SVT1, LAC_PHASE_IGFT0, LAC_PHASE_STEP0, LAC_PHASE_IGFT1,
    LAC_PHASE_MARKS
};
struct lac_phase_clock;
lac_phase_clock *lac_phase_clock_make(lac_ctx_t ctx);
void lac_phase_mark(lac_phase_clock *clock, int mark, cudaStream_t stream);
/* After IGFT1: waits for it and adds the iteration's figures. */
void lac_phase_iteration_end(lac_phase_clock *clock);
/* Logs the medians (info) with the context given to make, and frees. */
void lac_phase_clock_free(lac_phase_clock *clock);

/* Host-side steps both plans share (impute_dispatch.cu). */
/* ‖G‖² and its part over the missing entries, from the host's truth. */
template <typename REAL> void lac_impute_cuda_truth_norms(const lac_impute_problem *pr, double *all, double *missing);
/* An SVT pass's per-slice figures (N x LAC_SVT_STATS, host) summed in slice
 * order; an error for a slice that was not finite. */
lac_status lac_impute_cuda_sum_stats(lac_ctx_t ctx, const double *stats_host, int64_t N, bool jacobi, int warm,
                                     double *sigma_max, lac_impute_svt_stats *out);
/* The backend's finish once `estimate` can fill a host copy of U Ĝest
 * (mn x N): the error against the truth, the ESTIMATE, or the COMPLETED
 * tensor from the device's imputed entries x_est (mn x ni). */
template <typename REAL>
lac_status lac_impute_cuda_finish(lac_ctx_t ctx, const lac_impute_problem *pr,
                                  lac_status (*estimate)(lac_ctx_t ctx, void *state, REAL *full), void *state,
                                  const REAL *x_est, lac_impute_output output, void *out, lac_dtype out_dtype,
                                  double *error_sq);

/* The streamed plan (impute_stream.cu): the frequency-indexed buffers in
 * pinned host memory, slabs of `plan->slab` frequencies through the device.
 * One pass over the slabs does the GFT, the SVT and the iGFT's product, so
 * gft is empty and igft only the imputation step. */
template <typename REAL>
lac_status lac_impute_stream_setup(lac_ctx_t ctx, const lac_impute_problem *pr, const lac_impute_plan *plan, bool jacobi,
                                   void **state, double *truth_sq, double *truth_missing_sq);
template <typename REAL>
lac_status lac_impute_stream_svt(lac_ctx_t ctx, void *state, const double *lambda, double *sigma_max,
                                 lac_impute_svt_stats *stats);
template <typename REAL> lac_status lac_impute_stream_igft(lac_ctx_t ctx, void *state, double momentum, double *missing_sq);
template <typename REAL>
lac_status lac_impute_stream_finish(lac_ctx_t ctx, void *state, lac_impute_output output, void *out, lac_dtype out_dtype,
                                    double *error_sq);
template <typename REAL> void lac_impute_stream_release(void *state);

#endif
