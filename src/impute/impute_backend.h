/* The contract between the impute front end (src/impute/impute.c: argument
 * checks, the λ schedule, convergence, progress; gft.c and generate.c) and its
 * backends: the CPU one (src/impute/cpu/) and the CUDA one handed out by
 * src/backend/cuda/gateway.cu. A backend sees only what is here: checked
 * problems on host memory, one phase per call. */
#ifndef LACUNA_IMPUTE_BACKEND_H
#define LACUNA_IMPUTE_BACKEND_H

#include "core/internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The GFT basis (lac_gft_t): U stored column-major, vectors[v + k*N] = U[v, k]
 * (column k is the eigenvector of eigenvalue k), in `precision`. */
struct lac_gft {
    int64_t n;
    lac_dtype precision;        /* LAC_FLOAT32 or LAC_FLOAT64 */
    void *vectors;              /* N * N */
    double *eigenvalues;        /* N, ascending */
    uint64_t graph_fingerprint;
    double seconds;             /* the eigendecomposition's time; 0 when loaded */
};

/* What each vertex's slice is: the front end classifies them once. */
enum { LAC_VERTEX_OBSERVED = 0, LAC_VERTEX_PARTIAL = 1, LAC_VERTEX_MISSING = 2 };

/* A checked imputation problem (host pointers). The tensor, truth and output
 * are (N, m, n) C-order arrays, i.e. column-major (m·n) x N matrices whose
 * column v is vertex v's slice: the GFT is a right multiplication by U. */
typedef struct {
    lac_dtype precision;                 /* of the computation = the basis' */
    int64_t N, m, n;
    const struct lac_gft *gft;
    const void *tensor;                  /* observed data; unobserved entries are ignored */
    lac_dtype tensor_dtype;
    const unsigned char *vertex_state;   /* N: LAC_VERTEX_* */
    const unsigned char *entry_observed; /* N*m*n (1 = observed), or NULL when no vertex is partial */
    int64_t num_incomplete;              /* vertices that are PARTIAL or MISSING */
    const int64_t *incomplete;           /* their numbers, ascending */
    const void *truth;                   /* or NULL */
    lac_dtype truth_dtype;
    int momentum;                        /* igft will be given θ != 0 (needs two more buffers) */
    int gemm_tf32;                       /* lac_gemm_mode of the GPU's GFT GEMMs (params.gemm_tf32) */
} lac_impute_problem;

/* What one SVT pass (Algorithm 2 over every frequency) reports; sums in float64. */
typedef struct {
    double change_sq;        /* Σ_k ‖Ĝest_new(k) - Ĝest_old(k)‖² */
    double previous_sq;      /* Σ_k ‖Ĝest_old(k)‖² */
    double truth_error_sq;   /* Σ_k ‖Ĝest_new(k) - Ĝtrue(k)‖² (with truth) */
    int64_t rank_sum;        /* Σ_k rank of Ĝest_new(k) */
} lac_impute_svt_stats;

/* One backend: the basis (eigen), the generator's transform, and an
 * imputation as a state made by setup, then one call per phase. */
typedef struct {
    const char *name;
    /* Buffers; C = U^T P_Ω(G) once (the constant part of every GFT); with
     * truth, Ĝtrue = U^T G and the norms that errors are relative to. Sets
     * truth_sq (‖G‖²) and truth_missing_sq (over missing entries). */
    lac_status (*setup)(lac_ctx_t ctx, const lac_impute_problem *problem, void **state, double *truth_sq,
                        double *truth_missing_sq);
    /* Algorithm 1 line 8 with line 7 folded in: Ĝ = C + U_I^T X_I, where X_I
     * holds P_Ω⊥(G^est) on the incomplete vertices I. */
    lac_status (*gft)(lac_ctx_t ctx, void *state);
    /* Line 9 / Algorithm 2: Ĝest(k) = S_λk(Ĝ(k)) for every k. With lambda NULL,
     * only the singular values are computed: sigma_max[k] gets the largest and
     * Ĝest becomes 0 (= S_λ with λk = σmax). */
    lac_status (*svt)(lac_ctx_t ctx, void *state, const double *lambda, double *sigma_max,
                      lac_impute_svt_stats *stats);
    /* Line 10 on the incomplete vertices: X_t = P_Ω⊥(U_I Ĝest), and what the
     * next line 7 imputes: X_t itself, or with momentum θ the extrapolation
     * X_t + θ (X_t - X_{t-1}). With truth, *missing_error_sq = Σ over missing
     * entries of (X_t - G)². */
    lac_status (*igft)(lac_ctx_t ctx, void *state, double momentum, double *missing_error_sq);
    /* The output in out_dtype: COMPLETED = P_Ω(G) + P_Ω⊥(G^est), ESTIMATE =
     * U Ĝest; with truth, *error_sq = ‖U Ĝest - G‖² (spatial, exact). The
     * state stays usable: λ selection reads the completion after each step
     * of its hold-out walk and goes on with gft/svt/igft. */
    lac_status (*finish)(lac_ctx_t ctx, void *state, lac_impute_output output, void *out, lac_dtype out_dtype,
                         double *error_sq);
    void (*release)(void *state);
    /* Dense symmetric eigendecomposition (syevd) of the N x N host matrix a
     * (precision), in place: on return a holds the eigenvectors column-major
     * when vectors is set; eigenvalues (double, N) ascending. */
    lac_status (*eigen)(lac_ctx_t ctx, lac_dtype precision, int64_t n, void *a, int vectors, double *eigenvalues);
    /* out (mn x N) = in (mn x N) · U^T (inverse = 1: the iGFT) or in · U (the
     * GFT), host, column-major, in the basis' precision. */
    lac_status (*transform)(lac_ctx_t ctx, const struct lac_gft *gft, int64_t mn, const void *in, void *out,
                            int inverse);
    /* For the SVT split over MPI ranks (src/dist/impute_dist.c); NULL where a
     * backend does not offer it (then every rank runs the whole SVT). svt_part
     * is svt over frequencies [k_lo, k_hi) only (lambda and sigma_max are
     * still indexed by k; stats cover those frequencies); estimate gives the
     * host Ĝest: N slices of *slice_elements values of *dtype, slice k at
     * k * *slice_elements. */
    lac_status (*svt_part)(lac_ctx_t ctx, void *state, int64_t k_lo, int64_t k_hi, const double *lambda,
                           double *sigma_max, lac_impute_svt_stats *stats);
    void *(*estimate)(void *state, int64_t *slice_elements, lac_dtype *dtype);
    /* For the GFT and iGFT split over MPI ranks (NULL: every rank runs the
     * whole phase). gft_part is gft for the frequencies [k_lo, k_hi) only (the
     * other columns of Ĝ are left stale: svt_part of the same range reads only
     * its own). igft_part is igft for the incomplete vertices [i_lo, i_hi) of
     * the problem's list (positions in `incomplete`, not vertex numbers);
     * *missing_error_sq covers those. incomplete gives the host buffers that
     * igft writes, ni columns of *vertex_elements values of *dtype: what line
     * 7 imputes, and in *x_est (NULL without momentum) the estimate itself. */
    lac_status (*gft_part)(lac_ctx_t ctx, void *state, int64_t k_lo, int64_t k_hi);
    lac_status (*igft_part)(lac_ctx_t ctx, void *state, int64_t i_lo, int64_t i_hi, double momentum,
                            double *missing_error_sq);
    void *(*incomplete)(void *state, void **x_est, int64_t *vertex_elements, lac_dtype *dtype);
    /* Whether this state takes the part entries (NULL: always). Where any
     * rank's state does not, every rank runs the whole phases. The pointers
     * estimate and incomplete return may be written by the caller (the
     * ranks' gather) until the next call on the state, which reads them. */
    int (*splits)(void *state);
} lac_impute_backend;

/* The phases over the context's MPI ranks (src/dist/impute_dist.c), each rank
 * owning a range of the N frequencies (GFT, SVT) and of the incomplete
 * vertices (iGFT). svt: rank r thresholds its frequencies, then every rank
 * gathers the others' Ĝest slices (and sigma_max) and the stats are summed
 * in rank order, so every rank goes on with the whole estimate. gft: each
 * rank computes only its own frequencies' columns of Ĝ (all the SVT reads).
 * igft: each rank computes its vertices, then gathers the others' (the sum
 * of the errors in rank order). Without MPI, or one rank, or a backend
 * without the part entries: the table's whole phase. */
#ifdef LACUNA_HAVE_MPI
lac_status lac_impute_gft_dist(lac_ctx_t ctx, const lac_impute_backend *backend, void *state, int64_t N);
lac_status lac_impute_svt_dist(lac_ctx_t ctx, const lac_impute_backend *backend, void *state, int64_t N,
                               const double *lambda, double *sigma_max, lac_impute_svt_stats *stats);
lac_status lac_impute_igft_dist(lac_ctx_t ctx, const lac_impute_backend *backend, void *state, int64_t num_incomplete,
                                double momentum, double *missing_error_sq);
/* Rank 0's graph Fourier basis (made, or read from the cache, with status
 * `status` there) to every rank's g (allocated with the graph's n and the
 * precision; NULL where status failed), and rank 0's *from_cache. Collective:
 * returns the lowest failing rank's status everywhere. */
lac_status lac_gft_share(lac_ctx_t ctx, lac_status status, struct lac_gft *g, int *from_cache);
#else
static inline lac_status lac_gft_share(lac_ctx_t ctx, lac_status status, struct lac_gft *g, int *from_cache)
{
    (void)ctx, (void)g, (void)from_cache;
    return status;
}
static inline lac_status lac_impute_gft_dist(lac_ctx_t ctx, const lac_impute_backend *backend, void *state, int64_t N)
{
    (void)N;
    return backend->gft(ctx, state);
}
static inline lac_status lac_impute_svt_dist(lac_ctx_t ctx, const lac_impute_backend *backend, void *state, int64_t N,
                                             const double *lambda, double *sigma_max, lac_impute_svt_stats *stats)
{
    (void)N;
    return backend->svt(ctx, state, lambda, sigma_max, stats);
}
static inline lac_status lac_impute_igft_dist(lac_ctx_t ctx, const lac_impute_backend *backend, void *state,
                                              int64_t num_incomplete, double momentum, double *missing_error_sq)
{
    (void)num_incomplete;
    return backend->igft(ctx, state, momentum, missing_error_sq);
}
#endif

/* The CPU backend (src/impute/cpu/), always there. */
extern const lac_impute_backend lac_impute_cpu_backend;
/* The CUDA backend's table. */
#ifdef LACUNA_HAVE_CUDA
const lac_impute_backend *lac_impute_backend_cuda(void);   /* src/backend/cuda/gateway.cu */
#else
static inline const lac_impute_backend *lac_impute_backend_cuda(void) { return NULL; }
#endif

#ifdef __cplusplus
}
#endif
#endif
