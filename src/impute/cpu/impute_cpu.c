/* CPU backend of impute: OpenBLAS GEMMs for the GFT and iGFT (all threads),
 * LAPACK gesdd per frequency in an OpenMP loop for the SVT (one BLAS thread
 * each), syevd for the basis. The arithmetic is impute_cpu_body.inc,
 * included below once for float and once for double; this file holds the
 * table, which dispatches on the precision fixed at setup. */
#include "impute/cpu/impute_cpu.h"

#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* OpenBLAS's own thread count, set for a phase and restored after it, so
 * that the GEMMs use every thread and the per-frequency SVDs inside our
 * OpenMP loop use one each. */
typedef struct {
    int previous;
} blas_threads_scope;

static blas_threads_scope blas_threads_begin(int threads)
{
    blas_threads_scope scope = {openblas_get_num_threads()};
    if (threads != scope.previous) openblas_set_num_threads(threads);
    return scope;
}

static void blas_threads_end(blas_threads_scope scope)
{
    if (openblas_get_num_threads() != scope.previous) openblas_set_num_threads(scope.previous);
}

#define REAL float
#define F(name) name##_f32
#define GEMM cblas_sgemm
#define GESDD LAPACKE_sgesdd_work
#define SYEVD LAPACKE_ssyevd_work
#include "impute/cpu/impute_cpu_body.inc"

#define REAL double
#define F(name) name##_f64
#define GEMM cblas_dgemm
#define GESDD LAPACKE_dgesdd_work
#define SYEVD LAPACKE_dsyevd_work
#include "impute/cpu/impute_cpu_body.inc"

/* The precision is fixed at setup; every later phase follows the state. The
 * state's first member records it so that one table serves both. */
typedef struct {
    lac_dtype precision;
    void *impl;
} cpu_handle;

static lac_status cpu_setup(lac_ctx_t ctx, const lac_impute_problem *problem, void **state, double *truth_sq,
                            double *truth_missing_sq)
{
    cpu_handle *h = lac_calloc(ctx, 1, sizeof *h);
    if (!h) return LAC_ERR_OUT_OF_MEMORY;
    h->precision = problem->precision;
    lac_status st = problem->precision == LAC_FLOAT32
                        ? cpu_setup_f32(ctx, problem, &h->impl, truth_sq, truth_missing_sq)
                        : cpu_setup_f64(ctx, problem, &h->impl, truth_sq, truth_missing_sq);
    if (st < 0) {
        free(h);
        return st;
    }
    *state = h;
    return LAC_SUCCESS;
}

/* Frequencies / incomplete vertices of the state (for the whole ranges). */
static int64_t cpu_count(const cpu_handle *h, int incomplete)
{
    if (h->precision == LAC_FLOAT32) {
        const cpu_state_f32 *s = h->impl;
        return incomplete ? s->ni : s->N;
    }
    const cpu_state_f64 *s = h->impl;
    return incomplete ? s->ni : s->N;
}

static lac_status cpu_gft_part(lac_ctx_t ctx, void *state, int64_t k_lo, int64_t k_hi)
{
    cpu_handle *h = state;
    return h->precision == LAC_FLOAT32 ? cpu_gft_f32(ctx, h->impl, k_lo, k_hi) : cpu_gft_f64(ctx, h->impl, k_lo, k_hi);
}

static lac_status cpu_gft(lac_ctx_t ctx, void *state) { return cpu_gft_part(ctx, state, 0, cpu_count(state, 0)); }

static lac_status cpu_svt_part(lac_ctx_t ctx, void *state, int64_t k_lo, int64_t k_hi, const double *lambda,
                               double *sigma_max, lac_impute_svt_stats *stats)
{
    cpu_handle *h = state;
    return h->precision == LAC_FLOAT32 ? cpu_svt_f32(ctx, h->impl, k_lo, k_hi, lambda, sigma_max, stats)
                                       : cpu_svt_f64(ctx, h->impl, k_lo, k_hi, lambda, sigma_max, stats);
}

static lac_status cpu_svt(lac_ctx_t ctx, void *state, const double *lambda, double *sigma_max,
                          lac_impute_svt_stats *stats)
{
    cpu_handle *h = state;
    return cpu_svt_part(ctx, state, 0, cpu_count(h, 0), lambda, sigma_max, stats);
}

/* Ĝest: N slices of mn values in the state's precision, one after the other. */
static void *cpu_estimate(void *state, int64_t *slice_elements, lac_dtype *dtype)
{
    cpu_handle *h = state;
    *dtype = h->precision;
    if (h->precision == LAC_FLOAT32) {
        *slice_elements = ((cpu_state_f32 *)h->impl)->mn;
        return ((cpu_state_f32 *)h->impl)->gest;
    }
    *slice_elements = ((cpu_state_f64 *)h->impl)->mn;
    return ((cpu_state_f64 *)h->impl)->gest;
}

static lac_status cpu_igft_part(lac_ctx_t ctx, void *state, int64_t i_lo, int64_t i_hi, double momentum,
                                double *missing_error_sq)
{
    cpu_handle *h = state;
    return h->precision == LAC_FLOAT32 ? cpu_igft_f32(ctx, h->impl, i_lo, i_hi, momentum, missing_error_sq)
                                       : cpu_igft_f64(ctx, h->impl, i_lo, i_hi, momentum, missing_error_sq);
}

static lac_status cpu_igft(lac_ctx_t ctx, void *state, double momentum, double *missing_error_sq)
{
    return cpu_igft_part(ctx, state, 0, cpu_count(state, 1), momentum, missing_error_sq);
}

/* What line 7 imputes on the incomplete vertices (and with momentum the
 * unextrapolated estimate): ni columns of mn values each. */
static void *cpu_incomplete(void *state, void **x_est, int64_t *vertex_elements, lac_dtype *dtype)
{
    cpu_handle *h = state;
    *dtype = h->precision;
    if (h->precision == LAC_FLOAT32) {
        cpu_state_f32 *s = h->impl;
        *vertex_elements = s->mn;
        *x_est = s->x_est != s->x_inc ? s->x_est : NULL;
        return s->x_inc;
    }
    cpu_state_f64 *s = h->impl;
    *vertex_elements = s->mn;
    *x_est = s->x_est != s->x_inc ? s->x_est : NULL;
    return s->x_inc;
}

static lac_status cpu_finish(lac_ctx_t ctx, void *state, lac_impute_output output, void *out, lac_dtype out_dtype,
                             double *error_sq)
{
    cpu_handle *h = state;
    return h->precision == LAC_FLOAT32 ? cpu_finish_f32(ctx, h->impl, output, out, out_dtype, error_sq)
                                       : cpu_finish_f64(ctx, h->impl, output, out, out_dtype, error_sq);
}

static void cpu_release(void *state)
{
    cpu_handle *h = state;
    if (!h) return;
    if (h->precision == LAC_FLOAT32) cpu_release_f32(h->impl);
    else cpu_release_f64(h->impl);
    free(h);
}

const lac_impute_backend lac_impute_cpu_backend = {
    .name = "cpu",
    .setup = cpu_setup,
    .gft = cpu_gft,
    .svt = cpu_svt,
    .igft = cpu_igft,
    .finish = cpu_finish,
    .release = cpu_release,
    .eigen = lac_impute_cpu_eigen,
    .transform = lac_impute_cpu_transform,
    .svt_part = cpu_svt_part,
    .estimate = cpu_estimate,
    .gft_part = cpu_gft_part,
    .igft_part = cpu_igft_part,
    .incomplete = cpu_incomplete,
};

lac_status lac_impute_cpu_eigen(lac_ctx_t ctx, lac_dtype precision, int64_t n, void *a, int vectors,
                                double *eigenvalues)
{
    return precision == LAC_FLOAT32 ? cpu_eigen_f32(ctx, n, a, vectors, eigenvalues)
                                    : cpu_eigen_f64(ctx, n, a, vectors, eigenvalues);
}

lac_status lac_impute_cpu_transform(lac_ctx_t ctx, const struct lac_gft *gft, int64_t mn, const void *in, void *out,
                                    int inverse)
{
    if (gft->precision == LAC_FLOAT32) gemm_basis_f32(lac_threads(ctx), gft->vectors, gft->n, mn, in, out, inverse);
    else gemm_basis_f64(lac_threads(ctx), gft->vectors, gft->n, mn, in, out, inverse);
    return LAC_SUCCESS;
}

double lac_impute_cpu_gemm_seconds(lac_ctx_t ctx, lac_dtype dtype, int64_t m, int64_t n, int64_t k)
{
    return dtype == LAC_FLOAT32 ? gemm_seconds_f32(ctx, m, n, k) : gemm_seconds_f64(ctx, m, n, k);
}
