/* impute on CUDA: what the host driver (impute_dispatch.cu), the SVT paths
 * (svt_jacobi.cu, svt_gram.cu) and the element-wise kernels
 * (impute_kernels.cu) share. Only those files include this. */
#ifndef LACUNA_BACKEND_CUDA_IMPUTE_CUDA_H
#define LACUNA_BACKEND_CUDA_IMPUTE_CUDA_H

#include "backend/cuda/cuda_internal.h"
#include "impute/impute_backend.h"

/* Per-slice figures an SVT pass leaves on the device, LAC_SVT_STATS doubles a
 * slice, summed on the host in slice order (so the sums do not depend on the
 * grid). rank is -1 for a slice that was not finite. */
enum {
    LAC_SVT_CHANGE = 0, LAC_SVT_PREVIOUS, LAC_SVT_TRUTH, LAC_SVT_SIGMA_MAX, LAC_SVT_RANK,
    LAC_SVT_SWEEPS,   /* Jacobi sweeps the slice took (0: another path) */
    LAC_SVT_STATS
};

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
struct lac_svt_gram_cache;
void lac_svt_gram_cache_free(lac_svt_gram_cache *cache);
template <typename REAL>
lac_status lac_svt_gram(lac_ctx_t ctx, const lac_svt_batch<REAL> &b, size_t budget, lac_svt_gram_cache **cache);

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
/* The imputation step after the iGFT (impute_backend.h's igft): masks,
 * extrapolates, and leaves per-block partial sums of the missing error in
 * partial[0 .. blocks). Returns the block count used. */
template <typename REAL>
lac_status lac_impute_cuda_impute_step(lac_ctx_t ctx, int64_t count, const REAL *x_new, const unsigned char *obs,
                                       const REAL *truth, REAL *x_inc, REAL *x_est, REAL theta, int extrapolate,
                                       double *partial, int *blocks);

/* 3xTF32 operands: hi = a rounded to TF32, lo = a - hi, so that
 * hi·hi' + hi·lo' + lo·hi' on TF32 tensor cores keeps ~fp32 accuracy. */
lac_status lac_impute_cuda_split_tf32(lac_ctx_t ctx, const float *a, float *hi, float *lo, int64_t count);

#define LAC_IMPUTE_CUDA_PARTIALS 512   /* most partial sums a reduction leaves */

#endif
