/* The impute CPU backend's own entries beside its table (impute_backend.h):
 * the basis eigendecomposition and transform that the table's eigen and
 * transform point to, and the GEMM timing the benchmark takes its floors from. */
#ifndef LACUNA_IMPUTE_CPU_H
#define LACUNA_IMPUTE_CPU_H

#include "impute/impute_backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Dense symmetric eigendecomposition (LAPACK syevd) of the N x N matrix in a
 * (precision), in place: on return a holds the eigenvectors column-major when
 * vectors is set; eigenvalues (double, N) ascending. */
lac_status lac_impute_cpu_eigen(lac_ctx_t ctx, lac_dtype precision, int64_t n, void *a, int vectors,
                                double *eigenvalues);

/* out (mn x N) = in (mn x N) · U^T (inverse = 1: the iGFT) or in · U (the
 * GFT), column-major, in the basis' precision. */
lac_status lac_impute_cpu_transform(lac_ctx_t ctx, const struct lac_gft *gft, int64_t mn, const void *in, void *out,
                                    int inverse);

/* Seconds one GEMM C(m x n) = A(m x k) B(k x n) takes in dtype with the
 * context's threads (random data, one warm-up): the bench's rate for floors. */
double lac_impute_cpu_gemm_seconds(lac_ctx_t ctx, lac_dtype dtype, int64_t m, int64_t n, int64_t k);

#ifdef __cplusplus
}
#endif
#endif
