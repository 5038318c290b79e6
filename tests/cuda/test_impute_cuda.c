/* impute on the CUDA backend (GPU test, label "cuda").
 *
 * The batched SVT against LAPACK's dgesdd in float64 (thresholded and rebuilt
 * here), through the backend table with an identity basis so that the GFT
 * is exact: random, ill-conditioned, rank-deficient, zero, tiny- and
 * huge-valued slices; square, tall, wide and degenerate shapes from 1 x 7 to
 * 512 x 512 (the shared-memory Jacobi path and the Gram path beyond it);
 * thresholds between singular values, 0 and above σmax; the σmax-only pass.
 * Then whole imputations against the CPU backend with the same basis (float32
 * and float64, vertex and entry masks, with and without acceleration), the
 * basis eigendecomposition against LAPACK's, and the generator's transform.
 * And the streamed (out-of-core) plan under LACUNA_CUDA_MEMORY_CAP against
 * the resident one. */
#include "harness.h"
#include "cuda_harness.h"
#include "impute/impute_backend.h"
#include "lacuna/lacuna.h"

#include <lapacke.h>

static lac_ctx_t gpu, cpu;

/* ------------------------------------------------------------------------ */
/* The reference: S_λ of a rows x cols column-major slice by dgesdd           */
/* ------------------------------------------------------------------------ */
/* s gets the singular values (descending, min(rows, cols)); out S_λ(A) when
 * lambda >= 0. */
static void reference_svt(int rows, int cols, const float *a, double lambda, double *s, double *out)
{
    int p = rows < cols ? rows : cols;
    double *ad = malloc(sizeof(double) * (size_t)rows * cols), *u = malloc(sizeof(double) * (size_t)rows * p);
    double *vt = malloc(sizeof(double) * (size_t)p * cols);
    for (int i = 0; i < rows * cols; i++) ad[i] = a[i];
    int info = LAPACKE_dgesdd(LAPACK_COL_MAJOR, 'S', rows, cols, ad, rows, s, u, rows, vt, p);
    if (info != 0) HARNESS_FAIL("reference dgesdd failed (info %d)", info);
    if (out) {
        memset(out, 0, sizeof(double) * (size_t)rows * cols);
        for (int j = 0; j < p; j++) {
            double f = s[j] - lambda;
            if (lambda < 0 || f <= 0) continue;
            for (int c = 0; c < cols; c++)
                for (int r = 0; r < rows; r++) out[r + (size_t)c * rows] += u[r + (size_t)j * rows] * f * vt[j + (size_t)c * p];
        }
    }
    free(ad);
    free(u);
    free(vt);
}

/* ------------------------------------------------------------------------ */
/* The CUDA table's SVT over N slices of m x n through an identity basis      */
/* ------------------------------------------------------------------------ */
/* The canonical basis (U = I) of N vertices in *g and, over it, a problem
 * of N float32 slices of m x n in *pr (the caller sets the rest);
 * identity_free(g) after. */
static void identity_problem(int64_t N, int64_t m, int64_t n, const float *tensor, const unsigned char *state,
                             struct lac_gft *g, lac_impute_problem *pr)
{
    float *identity = calloc((size_t)(N * N), sizeof(float));
    for (int64_t v = 0; v < N; v++) identity[v + v * N] = 1;
    *g = (struct lac_gft){N, LAC_FLOAT32, identity, calloc((size_t)N, sizeof(double)), 0, 0};
    memset(pr, 0, sizeof *pr);
    pr->precision = LAC_FLOAT32;
    pr->N = N;
    pr->m = m;
    pr->n = n;
    pr->gft = g;
    pr->tensor = tensor;
    pr->tensor_dtype = LAC_FLOAT32;
    pr->vertex_state = state;
}

static void identity_free(struct lac_gft *g)
{
    free(g->vectors);
    free(g->eigenvalues);
}

/* What runs before the λ pass: nothing, a σmax-only pass (as in Algorithm 1,
 * where the first pass is that one, so that the λ pass starts from its
 * vectors), or a pass with the same λ. */
enum { FIRST_NONE, FIRST_SIGMA, FIRST_LAMBDA };

/* On context c, after the `first` pass. */
static int ctx_svt(lac_ctx_t c, int64_t N, int64_t m, int64_t n, const float *slices, const double *lambda, float *out,
                   double *sigma_max, lac_impute_svt_stats *stats, int first)
{
    const lac_impute_backend *be = lac_impute_backend_cuda();
    if (!be) {
        HARNESS_FAIL("no CUDA impute table");
        return -1;
    }
    unsigned char *state = malloc((size_t)N);
    int64_t none = 0;
    for (int64_t v = 0; v < N; v++) state[v] = LAC_VERTEX_OBSERVED;
    struct lac_gft g;
    lac_impute_problem pr;
    identity_problem(N, m, n, slices, state, &g, &pr);
    pr.incomplete = &none;
    void *st = NULL;
    double tsq = 0, tmsq = 0, err = 0;
    int rc = -1;
    if (be->setup(c, &pr, &st, &tsq, &tmsq) == 0 && be->gft(c, st) == 0 &&
        (first == FIRST_NONE || be->svt(c, st, first == FIRST_LAMBDA ? lambda : NULL, NULL, stats) == 0) &&
        be->svt(c, st, lambda, sigma_max, stats) == 0 &&
        be->finish(c, st, LAC_IMPUTE_ESTIMATE, out, LAC_FLOAT32, &err) == 0)
        rc = 0;
    else
        HARNESS_FAIL("CUDA SVT of %lld slices of %lld x %lld: %s", (long long)N, (long long)m, (long long)n,
                     lac_last_error(c));
    if (st) be->release(st);
    identity_free(&g);
    free(state);
    return rc;
}

static int gpu_svt(int64_t N, int64_t m, int64_t n, const float *slices, const double *lambda, float *out,
                   double *sigma_max, lac_impute_svt_stats *stats, int warm)
{
    return ctx_svt(gpu, N, m, n, slices, lambda, out, sigma_max, stats, warm ? FIRST_SIGMA : FIRST_NONE);
}

/* The worst of the slices' ‖S_λ - LAPACK's‖ / ‖A‖ (rows = n, cols = m). */
static double worst_against_lapack(int64_t N, int64_t m, int64_t n, const float *a, const double *lambda,
                                   const float *out)
{
    const int64_t size = m * n, p = m < n ? m : n;
    double *ref = malloc(sizeof(double) * (size_t)size), *sv = malloc(sizeof(double) * (size_t)p), worst = 0;
    for (int64_t k = 0; k < N; k++) {
        reference_svt((int)n, (int)m, a + k * size, lambda[k], sv, ref);
        double num = 0, den = 0;
        for (int64_t e = 0; e < size; e++) {
            double d = (double)out[k * size + e] - ref[e];
            num += d * d;
            den += (double)a[k * size + e] * (double)a[k * size + e];
        }
        double rel = den > 0 ? sqrt(num / den) : sqrt(num);
        if (rel > worst) worst = rel;
    }
    free(ref);
    free(sv);
    return worst;
}

enum { RANDOM, ILL_CONDITIONED, RANK_THREE, ZERO, TINY, HUGE_VALUES, KINDS };
static const char *kind_name[KINDS] = {"random", "ill-conditioned", "rank 3", "zero", "tiny", "huge"};

static double gaussian(unsigned long long *s)
{
    double u1 = harness_rand_uniform(s), u2 = harness_rand_uniform(s);
    return sqrt(-2 * log(u1 + 1e-300)) * cos(6.283185307179586 * u2);
}

/* Slice k of N (m x n row-major = n x m column-major) of the given kind. */
static void make_slice(int kind, int64_t m, int64_t n, unsigned long long *s, float *a)
{
    const int64_t rows = n, cols = m, size = m * n;
    if (kind == ZERO) {
        memset(a, 0, sizeof(float) * (size_t)size);
        return;
    }
    if (kind == RANK_THREE) {
        double x[3 * 1024], y[3 * 1024];
        for (int64_t i = 0; i < 3 * rows; i++) x[i] = gaussian(s);
        for (int64_t i = 0; i < 3 * cols; i++) y[i] = gaussian(s);
        for (int64_t c = 0; c < cols; c++)
            for (int64_t r = 0; r < rows; r++)
                a[r + c * rows] = (float)(x[r] * y[c] + x[rows + r] * y[cols + c] + x[2 * rows + r] * y[2 * cols + c]);
        return;
    }
    double scale = kind == TINY ? 1e-30 : kind == HUGE_VALUES ? 1e30 : 1;
    for (int64_t c = 0; c < cols; c++) {
        /* Ill-conditioned: columns scaled over six decades. */
        double col_scale = kind == ILL_CONDITIONED ? pow(10.0, -6.0 * (double)c / (double)(cols > 1 ? cols - 1 : 1)) : 1;
        for (int64_t r = 0; r < rows; r++) a[r + c * rows] = (float)(gaussian(s) * col_scale * scale);
    }
}

/* N slices of one shape and kind: λ between the 3rd and 4th singular values
 * (or 0, or above σmax, by slice), result against the reference. */
static void check_shape(int64_t m, int64_t n, int64_t N, int kind)
{
    const char *quick = getenv("LACUNA_TEST_QUICK");
    if (quick && strcmp(quick, "1") == 0 && N > 4) N = 4;   /* the sanitizers' runs */
    const int64_t size = m * n, p = m < n ? m : n;
    float *a = calloc((size_t)(N * size), sizeof(float)), *out = malloc(sizeof(float) * (size_t)(N * size));
    double *lambda = calloc((size_t)N, sizeof(double));
    double *sv = malloc(sizeof(double) * (size_t)p), *sigma = malloc(sizeof(double) * (size_t)N);
    int *want_rank = malloc(sizeof(int) * (size_t)N);
    unsigned long long seed = 1000 + (unsigned long long)(m * 7919 + n * 31 + kind);
    int64_t rank_sum = 0;
    for (int64_t k = 0; k < N; k++) {
        make_slice(kind, m, n, &seed, a + k * size);
        reference_svt((int)n, (int)m, a + k * size, -1, sv, NULL);
        int mode = (int)(k % 4);
        if (mode == 0 && p > 3) lambda[k] = 0.5 * (sv[2] + sv[3]);
        else if (mode == 1) lambda[k] = 0;
        else if (mode == 2) lambda[k] = sv[0] * 1.01 + 1e-300;
        else lambda[k] = 0.5 * sv[0];
        int r = 0;
        while (r < p && sv[r] > lambda[k]) r++;
        want_rank[k] = r;
        rank_sum += r;
    }
    lac_impute_svt_stats stats;
    for (int warm = 0; warm <= 1; warm++) {
    if (gpu_svt(N, m, n, a, lambda, out, NULL, &stats, warm) == 0) {
        double worst = worst_against_lapack(N, m, n, a, lambda, out);
        /* Float32 rounding of a p-term rebuild, relative to ‖A‖. */
        double tol = 2e-6 * sqrt((double)(m > n ? m : n));
        if (worst > tol)
            HARNESS_FAIL("%lld x %lld x %lld %s, %s start: S_λ differs from LAPACK's by %.3g of ‖A‖ (tolerance %.3g)",
                         (long long)m, (long long)n, (long long)N, kind_name[kind], warm ? "warm" : "cold", worst, tol);
        if (kind != ZERO && kind != TINY && kind != RANK_THREE && kind != ILL_CONDITIONED)
            CHECK_INT(stats.rank_sum, rank_sum);   /* thresholds lie well between singular values */
    }
    }
    /* The σmax-only pass: the largest singular value and a zero estimate. */
    if (gpu_svt(N, m, n, a, NULL, out, sigma, &stats, 0) == 0) {
        double worst = 0, nonzero = 0;
        for (int64_t k = 0; k < N; k++) {
            reference_svt((int)n, (int)m, a + k * size, -1, sv, NULL);
            double rel = sv[0] > 0 ? fabs(sigma[k] - sv[0]) / sv[0] : fabs(sigma[k]);
            if (rel > worst) worst = rel;
        }
        for (int64_t e = 0; e < N * size; e++) nonzero += fabs(out[e]);
        if (worst > 4e-5 || nonzero != 0)   /* float32 after ~10^3 rotations a column */
            HARNESS_FAIL("%lld x %lld %s: σmax off by %.3g (relative), estimate sum %g", (long long)m, (long long)n,
                         kind_name[kind], worst, nonzero);
        CHECK_INT(stats.rank_sum, 0);
    }
    free(a);
    free(out);
    free(lambda);
    free(sv);
    free(sigma);
    free(want_rank);
}

TEST(batched_svt_matches_lapack_on_small_slices)
{
    static const int64_t shapes[][3] = {{2, 2, 40}, {1, 7, 8}, {7, 1, 8}, {3, 5, 12}, {50, 50, 24}, {64, 64, 12},
                                        {30, 100, 8}, {100, 30, 8}, {128, 128, 4}, {17, 33, 9}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int kind = 0; kind < KINDS; kind++) check_shape(shapes[s][0], shapes[s][1], shapes[s][2], kind);
}

TEST(batched_svt_matches_lapack_beyond_shared_memory)
{
    check_shape(512, 512, 3, RANDOM);
    check_shape(512, 512, 2, ILL_CONDITIONED);
    check_shape(512, 512, 2, RANK_THREE);
    check_shape(512, 512, 1, ZERO);
    check_shape(600, 300, 2, RANDOM);
    check_shape(300, 600, 2, TINY);
}

/* Each SVT path forced (LACUNA_IMPUTE_CUDA_SVT) on shapes the default gives
 * to the other: the same reference; a warm pass runs a path twice on one
 * state (the Gram route then reuses its kept buffers). */
static void check_forced_path(const char *knobs, int shares, const int64_t (*shapes)[3], size_t count)
{
    lac_ctx_params p = lac_ctx_params_default();
    p.backend = LAC_BACKEND_CUDA;
    p.knobs = knobs;
    p.num_devices = shares;   /* every share on device 0 */
    lac_ctx_t forced = NULL, usual = gpu;
    if (lac_ctx_create(&p, &forced) != 0) {
        HARNESS_FAIL("context with %s: %s", knobs, lac_last_error(NULL));
        return;
    }
    gpu = forced;
    for (size_t s = 0; s < count; s++)
        for (int kind = 0; kind < KINDS; kind++) check_shape(shapes[s][0], shapes[s][1], shapes[s][2], kind);
    gpu = usual;
    lac_ctx_destroy(&forced);
}

TEST(each_svt_path_matches_lapack_where_the_other_is_the_default)
{
    static const int64_t small[][3] = {{2, 2, 9}, {50, 50, 12}, {30, 100, 6}, {100, 30, 6}};
    static const int64_t large[][3] = {{128, 128, 4}, {100, 120, 3}, {97, 200, 2}};
    check_forced_path("IMPUTE_CUDA_SVT=gram", 0, small, sizeof small / sizeof small[0]);
    check_forced_path("IMPUTE_CUDA_SVT=jacobi", 0, large, sizeof large / sizeof large[0]);
    /* Without the rank-exploiting parts: Jacobi rotating every pair, the Gram
     * route's full eigensolve every pass. */
    check_forced_path("IMPUTE_CUDA_SUBSPACE=off", 0, small, sizeof small / sizeof small[0]);
    check_forced_path("IMPUTE_CUDA_SUBSPACE=off", 0, large, 1);
}

/* Without a warm start the Jacobi path keeps no V: a slice whose kept σ are
 * all within 4x of σmax (λ at σmax/2, λ above σmax, most of the λ between
 * σ3 and σ4) is done without V, S_λ rebuilt from Aᵀ w of the kept columns;
 * λ = 0 and the rest go to the second launch with V; every shape and kind
 * against LAPACK as with V (the Gram route is unaffected and rides along);
 * then V everywhere (LACUNA_IMPUTE_CUDA_VLESS=0). */
TEST(svt_without_kept_vectors_matches_lapack)
{
    static const int64_t shapes[][3] = {{2, 2, 40}, {1, 7, 8}, {7, 1, 8}, {3, 5, 12}, {50, 50, 24}, {64, 64, 12},
                                        {30, 100, 8}, {100, 30, 8}, {17, 33, 9}, {128, 128, 4}};
    check_forced_path("IMPUTE_CUDA_WARM=0", 0, shapes, sizeof shapes / sizeof shapes[0]);
    check_forced_path("IMPUTE_CUDA_WARM=0,IMPUTE_CUDA_SVT=jacobi", 2, shapes + 9, 1);
    check_forced_path("IMPUTE_CUDA_WARM=0,IMPUTE_CUDA_VLESS=0", 0, shapes + 4, 2);
}

/* Two and three shares of device 0 (the multi-GPU split run on one device):
 * the SVT's slices split across them, each part against LAPACK; odd counts. */
TEST(svt_split_across_shares_matches_lapack)
{
    static const int64_t shapes[][3] = {{2, 2, 9}, {50, 50, 13}, {30, 100, 7}, {1, 7, 2}};
    static const int64_t large[][3] = {{128, 128, 5}, {512, 512, 3}};
    check_forced_path(NULL, 2, shapes, sizeof shapes / sizeof shapes[0]);
    check_forced_path(NULL, 3, shapes, sizeof shapes / sizeof shapes[0]);
    check_forced_path(NULL, 2, large, 1);
    const char *quick = getenv("LACUNA_TEST_QUICK");
    if (!(quick && strcmp(quick, "1") == 0)) check_forced_path(NULL, 2, large + 1, 1);
}

/* ------------------------------------------------------------------------ */
/* Whole imputations: GPU against CPU with one basis                          */
/* ------------------------------------------------------------------------ */
static lac_graph_t ring_with_chords(lac_ctx_t c, int64_t N, unsigned long long seed)
{
    int64_t E = 2 * N, *src = malloc(sizeof(int64_t) * (size_t)E), *dst = malloc(sizeof(int64_t) * (size_t)E);
    double *w = malloc(sizeof(double) * (size_t)E);
    for (int64_t v = 0; v < N; v++) {
        src[v] = v;
        dst[v] = (v + 1) % N;
        w[v] = 1;
        src[N + v] = v;
        dst[N + v] = (int64_t)(harness_rand_uniform(&seed) * (double)N) % N;
        if (dst[N + v] == v) dst[N + v] = (v + 2) % N;
        w[N + v] = 0.5 + harness_rand_uniform(&seed);
    }
    lac_array a = lac_array_vector(src, LAC_INT64, E), b = lac_array_vector(dst, LAC_INT64, E);
    lac_array wa = lac_array_vector(w, LAC_FLOAT64, E);
    lac_graph_t g = NULL;
    CHECK_OK(c, lac_graph_from_edges(c, N, &a, &b, &wa, &g));
    free(src);
    free(dst);
    free(w);
    return g;
}

/* ‖b - a‖ / ‖a‖ over n doubles (‖b - a‖ when a is zero). */
static double relative_difference(const double *a, const double *b, int64_t n)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        num += (a[i] - b[i]) * (a[i] - b[i]);
        den += a[i] * a[i];
    }
    return sqrt(num / (den > 0 ? den : 1));
}

/* A generated problem on a ring with chords (90 vertices, 6 x 5 slices,
 * rank 2, 60% of the vertices observed; with entry_mask, half the entries of
 * the others too): the tensor has NaN where unobserved. */
static int64_t case_n = 90, case_m = 6, case_nn = 5, case_rank = 2;
typedef struct {
    lac_graph_t graph;
    lac_gft_t gft;
    lac_array truth, observed, tensor;
} impute_case;

static void impute_case_make(lac_dtype precision, int entry_mask, uint64_t gen_seed, unsigned long long mask_seed,
                             impute_case *c)
{
    const int64_t N = case_n, mn = case_m * case_nn;
    c->graph = ring_with_chords(cpu, N, 7);
    c->gft = NULL;
    CHECK_OK(cpu, lac_gft_create(cpu, c->graph, precision, &c->gft));
    int64_t shape[3] = {N, case_m, case_nn};
    CHECK_OK(cpu, lac_array_alloc(cpu, LAC_FLOAT64, 3, shape, &c->truth));
    CHECK_OK(cpu, lac_array_alloc(cpu, LAC_BOOL, 1, shape, &c->observed));
    lac_impute_gen_params gp = lac_impute_gen_params_default();
    gp.m = case_m;
    gp.n = case_nn;
    gp.rank = case_rank;
    gp.observed_ratio = 0.6;
    gp.seed = gen_seed;
    CHECK_OK(cpu, lac_impute_generate(cpu, &gp, c->gft, &c->truth, &c->observed));
    CHECK_OK(cpu, lac_array_alloc(cpu, LAC_FLOAT64, 3, shape, &c->tensor));
    double *t = c->tensor.data, *g = c->truth.data;
    unsigned char *obs = c->observed.data;
    for (int64_t v = 0; v < N; v++)
        for (int64_t e = 0; e < mn; e++) {
            int seen = obs[v] || (entry_mask && harness_rand_uniform(&mask_seed) < 0.5);
            t[v * mn + e] = seen ? g[v * mn + e] : NAN;
        }
}

static void impute_case_free(impute_case *c)
{
    lac_array_release(&c->truth);
    lac_array_release(&c->observed);
    lac_array_release(&c->tensor);
    lac_gft_destroy(&c->gft);
    lac_graph_destroy(&c->graph);
}

/* mode 0: plain; 1: λ chosen by hold-out (the same step on both); 2: the GPU
 * on TF32 against the CPU (float32). TF32 keeps 10 bits of each product's
 * mantissa: on this small, poorly determined problem (rMSE 0.67) the
 * completion moved by 8% (H200, 2026-11-24), hence the loose bound; it
 * catches a TF32 path that is wrong, not one that is imprecise. mode 3:
 * 3xTF32, which must stay near FP32 (within 10x FP32's own bound). mode 4:
 * two shares of device 0 splitting the GFT, the SVT and the iGFT by
 * columns, against the CPU as mode 0 and against one device to rounding
 * (the iGFT's sum is split). mode 5: two shares with 3xTF32, whose GEMMs
 * stay on the first device: only the SVT is split, and a slice's Jacobi SVT
 * does not depend on which share runs it, so bit for bit one device's. */
static void impute_both(lac_dtype precision, int entry_mask, int accelerate, int mode)
{
    const int64_t N = case_n, mn = case_m * case_nn;
    int64_t shape[3] = {N, case_m, case_nn};
    impute_case c;
    impute_case_make(precision, entry_mask, 11, 5, &c);
    lac_gft_t gft = c.gft;
    lac_array truth = c.truth, tensor = c.tensor, out_cpu, out_gpu;
    CHECK_OK(cpu, lac_array_alloc(cpu, LAC_FLOAT64, 3, shape, &out_cpu));
    CHECK_OK(cpu, lac_array_alloc(cpu, LAC_FLOAT64, 3, shape, &out_gpu));
    lac_impute_params p = lac_impute_params_default();
    p.accelerate = accelerate;
    lac_impute_selection sel_cpu = lac_impute_selection_default(), sel_gpu = lac_impute_selection_default();
    if (mode == 1) {
        p.select_fraction = 0.2;
        p.selection = &sel_cpu;
    }
    lac_impute_result rc, rg;
    CHECK_OK(cpu, lac_impute(cpu, &p, gft, &tensor, NULL, &truth, &out_cpu, &rc));
    if (mode == 1) p.selection = &sel_gpu;
    if (mode == 2) p.gemm_tf32 = LAC_GEMM_TF32;
    if (mode == 3 || mode == 5) p.gemm_tf32 = LAC_GEMM_3XTF32;
    lac_ctx_t run = gpu, two = NULL;
    if (mode >= 4) {
        lac_ctx_params cp = lac_ctx_params_default();
        cp.backend = LAC_BACKEND_CUDA;
        cp.num_devices = 2;   /* device 0 twice */
        CHECK_OK(NULL, lac_ctx_create(&cp, &two));
        run = two;
    }
    CHECK_OK(run, lac_impute(run, &p, gft, &tensor, NULL, &truth, &out_gpu, &rg));
    if (mode >= 4) {
        lac_array out_one;
        lac_impute_result r1;
        CHECK_OK(cpu, lac_array_alloc(cpu, LAC_FLOAT64, 3, shape, &out_one));
        CHECK_OK(gpu, lac_impute(gpu, &p, gft, &tensor, NULL, &truth, &out_one, &r1));
        if (mode == 5) {
            CHECK(memcmp(out_one.data, out_gpu.data, sizeof(double) * (size_t)(N * mn)) == 0);
            CHECK_INT(r1.iterations, rg.iterations);
        } else {
            double rel1 = relative_difference(out_one.data, out_gpu.data, N * mn);
            printf("    two shares against one device (%s): relative difference %.3g\n", lac_dtype_name(precision), rel1);
            if (!(rel1 <= (precision == LAC_FLOAT32 ? 1e-4 : 1e-10)))
                HARNESS_FAIL("two shares and one device differ by %.3g", rel1);
            CHECK(llabs(r1.iterations - rg.iterations) <= 1);
        }
        lac_array_release(&out_one);
        lac_ctx_destroy(&two);
    }
    if (mode == 1) CHECK_INT(sel_gpu.chosen_step, sel_cpu.chosen_step);
    double rel = relative_difference(out_cpu.data, out_gpu.data, N * mn);
    double tol = mode == 2 ? 0.15 : mode == 3 || mode == 5 ? 2e-3 : precision == LAC_FLOAT32 ? 2e-4 : 1e-9;
    if (mode == 2 || mode == 3)
        printf("    %s against the CPU's FP32: relative difference %.3g\n", mode == 2 ? "TF32" : "3xTF32", rel);
    if (!(rel <= tol))
        HARNESS_FAIL("%s, %s mask, accelerate %d: GPU and CPU completions differ by %.3g (tolerance %.3g)",
                     lac_dtype_name(precision), entry_mask ? "entry" : "vertex", accelerate, rel, tol);
    if (mode < 2) CHECK_INT(rg.iterations, rc.iterations);
    CHECK_NEAR(rg.rmse_missing, rc.rmse_missing,
               mode == 2 ? 0.05 * rc.rmse_missing : mode == 3 || mode == 5 ? 1e-3 : precision == LAC_FLOAT32 ? 1e-4 : 1e-9);
    lac_array_release(&out_cpu);
    lac_array_release(&out_gpu);
    impute_case_free(&c);
}

TEST(imputation_matches_the_cpu)
{
    impute_both(LAC_FLOAT64, 0, 1, 0);
    impute_both(LAC_FLOAT64, 1, 1, 0);
    impute_both(LAC_FLOAT64, 1, 0, 0);
    impute_both(LAC_FLOAT32, 0, 1, 0);
    impute_both(LAC_FLOAT32, 1, 0, 0);
    impute_both(LAC_FLOAT64, 0, 1, 1);   /* λ by hold-out */
    impute_both(LAC_FLOAT32, 1, 1, 1);
    impute_both(LAC_FLOAT32, 0, 1, 2);   /* TF32 */
    impute_both(LAC_FLOAT32, 1, 1, 3);   /* 3xTF32 */
    impute_both(LAC_FLOAT32, 1, 1, 4);   /* two shares of device 0 */
    impute_both(LAC_FLOAT64, 0, 1, 4);
    impute_both(LAC_FLOAT32, 0, 1, 5);   /* two shares, 3xTF32 */
}

/* Whole imputations whose every pass is cold (no V anywhere): the CPU's
 * completion, float32 and float64, vertex and entry masks. */
TEST(imputation_without_kept_vectors_matches_the_cpu)
{
    lac_ctx_params p = lac_ctx_params_default();
    p.backend = LAC_BACKEND_CUDA;
    p.knobs = "IMPUTE_CUDA_WARM=0";
    lac_ctx_t cold = NULL, usual = gpu;
    if (lac_ctx_create(&p, &cold) != 0) {
        HARNESS_FAIL("context without the warm start: %s", lac_last_error(NULL));
        return;
    }
    gpu = cold;
    impute_both(LAC_FLOAT32, 0, 1, 0);
    impute_both(LAC_FLOAT64, 1, 1, 0);
    impute_both(LAC_FLOAT32, 1, 0, 0);
    gpu = usual;
    lac_ctx_destroy(&cold);
}

/* ------------------------------------------------------------------------ */
/* The Gram route's certified subspace pass                                   */
/* ------------------------------------------------------------------------ */
/* What the subspace pass logged last (debug level): slices certified, zero by
 * trace, and solved by the full eigensolve; passes seen. */
static long long sub_certified, sub_zero, sub_full, sub_passes, sub_certified_all, sub_full_all, sub_cold;

static void note_subspace(lac_log_level level, const char *message, void *user)
{
    (void)level;
    (void)user;
    const char *at = strstr(message, "SVT by subspace");
    if (!at) return;
    const char *c = strstr(at, "filter degree ");
    long long deg, of;
    if (c && sscanf(strchr(c, ':') + 2, "%lld of %lld slices certified (%lld zero by trace), %lld", &sub_certified, &of,
                    &sub_zero, &sub_full) == 4) {
        (void)deg;
        sub_passes++;
        sub_cold += strstr(at, "(cold start)") != NULL;
        sub_certified_all += sub_certified;
        sub_full_all += sub_full;
    }
}

/* A CUDA context with `knobs`, logging at `level` into `log`. */
static lac_ctx_t logged_context(const char *knobs, lac_log_fn log, lac_log_level level)
{
    lac_ctx_params p = lac_ctx_params_default();
    p.backend = LAC_BACKEND_CUDA;
    p.knobs = knobs;
    p.log = log;
    p.log_level = level;
    lac_ctx_t c = NULL;
    if (lac_ctx_create(&p, &c) != 0) HARNESS_FAIL("context with %s: %s", knobs, lac_last_error(NULL));
    return c;
}

static lac_ctx_t subspace_context(const char *knobs)
{
    return logged_context(knobs, note_subspace, LAC_LOG_DEBUG);
}

/* A rows x cols slice with the given singular values (descending, min side)
 * and random singular vectors. */
static void slice_with_spectrum(int rows, int cols, const double *sv, unsigned long long *seed, float *a)
{
    int p = rows < cols ? rows : cols;
    double *g = malloc(sizeof(double) * (size_t)rows * cols), *u = malloc(sizeof(double) * (size_t)rows * p);
    double *vt = malloc(sizeof(double) * (size_t)p * cols), *s = malloc(sizeof(double) * (size_t)p);
    for (int i = 0; i < rows * cols; i++) g[i] = gaussian(seed);
    if (LAPACKE_dgesdd(LAPACK_COL_MAJOR, 'S', rows, cols, g, rows, s, u, rows, vt, p) != 0) HARNESS_FAIL("dgesdd");
    for (int c = 0; c < cols; c++)
        for (int r = 0; r < rows; r++) {
            double x = 0;
            for (int j = 0; j < p; j++) x += u[r + (size_t)j * rows] * sv[j] * vt[j + (size_t)c * p];
            a[r + (size_t)c * rows] = (float)x;
        }
    free(g);
    free(u);
    free(vt);
    free(s);
}

/* Through the backend table on the Gram route, passes on one state: the
 * σmax-only pass (the full eigensolve, which keeps every slice's vectors),
 * then λ passes that the subspace pass takes. Slices: a clear rank 3, a
 * spectrum with three singular values at λ itself (and one just below),
 * zero slices (certified by the trace; then λ = 0, left to the full path
 * in a compacted batch), and slices whose rank then grows from 2 to 14 (the
 * block grows from the kept eigenvalues). Each pass against LAPACK. */
TEST(subspace_svt_certifies_or_falls_back)
{
    const int64_t m = 48, n = 40, N = 16, size = m * n, p = 40;
    float *a = calloc((size_t)(N * size), sizeof(float)), *out = malloc(sizeof(float) * (size_t)(N * size));
    double *l1 = malloc(sizeof(double) * (size_t)N), *l2 = malloc(sizeof(double) * (size_t)N);
    double sv[40];
    unsigned long long seed = 4242;
    for (int64_t k = 0; k < N; k++) {
        int kind = (int)(k % 4);
        for (int j = 0; j < p; j++) sv[j] = 1.0 / (1 + j);   /* below every λ but the grown ones */
        if (kind == 0) {   /* rank 3 */
            sv[0] = 10, sv[1] = 8, sv[2] = 6;
            l1[k] = l2[k] = 3;
        } else if (kind == 1) {   /* σ = λ three times, and 1e-6 below */
            sv[0] = 9, sv[1] = 4, sv[2] = sv[3] = sv[4] = 2, sv[5] = 2 * (1 - 1e-6);
            l1[k] = l2[k] = 2;
        } else if (kind == 2) {   /* zero; then λ = 0, which the pass leaves to the full path */
            for (int j = 0; j < p; j++) sv[j] = 0;
            l1[k] = 1;
            l2[k] = 0;
        } else {   /* rank 2 at λ1, about 14 at λ2 */
            for (int j = 0; j < p; j++) sv[j] = 12.0 / (1 + j);
            l1[k] = 5;
            l2[k] = 0.8;
        }
        if (kind != 2) slice_with_spectrum((int)n, (int)m, sv, &seed, a + k * size);
    }
    lac_ctx_t c = subspace_context("IMPUTE_CUDA_SVT=gram");
    const lac_impute_backend *be = lac_impute_backend_cuda();
    unsigned char *state = malloc((size_t)N);
    int64_t none = 0;
    for (int64_t v = 0; v < N; v++) state[v] = LAC_VERTEX_OBSERVED;
    struct lac_gft g;
    lac_impute_problem pr;
    identity_problem(N, m, n, a, state, &g, &pr);
    pr.incomplete = &none;
    void *st = NULL;
    double tsq = 0, tmsq = 0, err = 0;
    lac_impute_svt_stats stats;
    const double tol = 2e-6 * sqrt((double)m);
    if (c && be && be->setup(c, &pr, &st, &tsq, &tmsq) == 0 && be->gft(c, st) == 0 &&
        be->svt(c, st, NULL, NULL, &stats) == 0) {
        const double *lambdas[4] = {l1, l1, l2, l2};
        const char *what[4] = {"first λ pass (block from the σmax pass)", "the same λ again",
                               "λ lowered (rank 2 -> 14: the block grows; λ = 0 falls back)", "the same again"};
        for (int pass = 0; pass < 4; pass++) {
            sub_passes = sub_certified = sub_zero = sub_full = 0;
            /* finish leaves U Ĝest where the GFT's Ĝ was: the GFT again first. */
            if (be->gft(c, st) != 0 || be->svt(c, st, lambdas[pass], NULL, &stats) != 0 ||
                be->finish(c, st, LAC_IMPUTE_ESTIMATE, out, LAC_FLOAT32, &err) != 0) {
                HARNESS_FAIL("pass %d: %s", pass, lac_last_error(c));
                break;
            }
            double worst = worst_against_lapack(N, m, n, a, lambdas[pass], out);
            printf("    %s: %lld certified (%lld zero by trace), %lld by the full eigensolve; %.3g of ‖A‖\n", what[pass],
                   sub_certified, sub_zero, sub_full, worst);
            if (!(worst <= tol)) HARNESS_FAIL("%s: S_λ differs from LAPACK's by %.3g of ‖A‖ (tolerance %.3g)", what[pass], worst, tol);
            CHECK_INT(sub_passes, 1);
            /* Exact vectors kept from the previous pass: all certified but λ = 0. */
            CHECK_INT(sub_zero, pass < 2 ? N / 4 : 0);
            CHECK_INT(sub_full, pass < 2 ? 0 : N / 4);
        }
        /* Off: no subspace pass at all, the same answer. */
    } else {
        HARNESS_FAIL("subspace setup: %s", c ? lac_last_error(c) : "no context");
    }
    if (st) be->release(st);
    lac_ctx_destroy(&c);
    lac_ctx_t off = subspace_context("IMPUTE_CUDA_SVT=gram,IMPUTE_CUDA_SUBSPACE=off");
    sub_passes = 0;
    st = NULL;
    if (off && be->setup(off, &pr, &st, &tsq, &tmsq) == 0 && be->gft(off, st) == 0 &&
        be->svt(off, st, NULL, NULL, &stats) == 0 && be->svt(off, st, l1, NULL, &stats) == 0 &&
        be->svt(off, st, l1, NULL, &stats) == 0 && be->finish(off, st, LAC_IMPUTE_ESTIMATE, out, LAC_FLOAT32, &err) == 0) {
        CHECK_INT(sub_passes, 0);
        CHECK(worst_against_lapack(N, m, n, a, l1, out) <= tol);
    } else {
        HARNESS_FAIL("subspace off: %s", off ? lac_last_error(off) : "no context");
    }
    if (st) be->release(st);
    lac_ctx_destroy(&off);
    identity_free(&g);
    free(state);
    free(a);
    free(out);
    free(l1);
    free(l2);
}

/* Cold passes (no vectors kept, IMPUTE_CUDA_WARM=0) on the Gram route start
 * the certified subspace pass from random vectors (block p/2). Through the
 * backend table, against LAPACK, with the threshold lowered to 64 so that
 * 80 x 72 slices take it: Gaussian slices at σmax/2 (certified), at σmax/4
 * (the rank exceeds the block: the full eigensolve), singular values at λ
 * itself, zero slices (zero by the trace), λ = 0 (the full eigensolve), and
 * a rank-5 slice over noise at σmax/33 (the filter grows its top columns
 * fast and is orthonormalised more often). Then 256 x 256 slices at the
 * default threshold, and the threshold at 0 (no subspace pass). */
static void cold_slices(int64_t N, int64_t m, int64_t n, int kinds, unsigned long long seed, float *a, double *lambda)
{
    const int64_t size = m * n, p = m < n ? m : n;
    double *sv = malloc(sizeof(double) * (size_t)p);
    for (int64_t k = 0; k < N; k++) {
        const int kind = (int)(k % kinds);
        float *slice = a + k * size;
        if (kind == 0 || kind == 1 || kind == 4) {
            for (int64_t e = 0; e < size; e++) slice[e] = (float)gaussian(&seed);
            reference_svt((int)n, (int)m, slice, -1, sv, NULL);
            lambda[k] = kind == 0 ? sv[0] / 2 : kind == 1 ? sv[0] / 4 : 0;
            continue;
        }
        for (int64_t j = 0; j < p; j++) sv[j] = 1.0 / (1 + j);
        if (kind == 2) {   /* σ = λ three times, and 1e-6 below */
            sv[0] = 9, sv[1] = 4, sv[2] = sv[3] = sv[4] = 2, sv[5] = 2 * (1 - 1e-6);
            lambda[k] = 2;
        } else if (kind == 3) {
            for (int64_t j = 0; j < p; j++) sv[j] = 0;
            lambda[k] = 1;
        } else {   /* rank 5 over noise */
            sv[0] = 100, sv[1] = 80, sv[2] = 60, sv[3] = 40, sv[4] = 20;
            lambda[k] = 3;
        }
        if (kind == 3) memset(slice, 0, sizeof(float) * (size_t)size);
        else slice_with_spectrum((int)n, (int)m, sv, &seed, slice);
    }
    free(sv);
}

/* One λ pass of `knobs` over the slices after the `first` pass: its figures
 * into sub_*, its worst distance to LAPACK returned (or -1 on failure). */
static double one_pass(const char *knobs, int first, int64_t N, int64_t m, int64_t n, const float *a,
                       const double *lambda)
{
    lac_ctx_t c = subspace_context(knobs);
    float *out = malloc(sizeof(float) * (size_t)(N * m * n));
    lac_impute_svt_stats stats;
    double worst = -1;
    sub_passes = sub_certified = sub_zero = sub_full = sub_cold = 0;
    if (c && ctx_svt(c, N, m, n, a, lambda, out, NULL, &stats, first) == 0)
        worst = worst_against_lapack(N, m, n, a, lambda, out);
    lac_ctx_destroy(&c);
    free(out);
    return worst;
}

TEST(cold_subspace_svt_certifies_or_falls_back)
{
    {
        const int64_t m = 80, n = 72, N = 12;
        float *a = malloc(sizeof(float) * (size_t)(N * m * n));
        double *lambda = malloc(sizeof(double) * (size_t)N);
        cold_slices(N, m, n, 6, 777, a, lambda);
        const double tol = 2e-6 * sqrt((double)m);
        double worst = one_pass("IMPUTE_CUDA_SVT=gram,IMPUTE_CUDA_WARM=0,IMPUTE_CUDA_COLD=64", FIRST_NONE, N, m, n, a, lambda);
        printf("    80 x 72: %lld certified (%lld zero by trace), %lld by the full eigensolve; %.3g of ‖A‖\n",
               sub_certified, sub_zero, sub_full, worst);
        if (!(worst >= 0 && worst <= tol)) HARNESS_FAIL("cold pass: S_λ differs from LAPACK's by %.3g of ‖A‖", worst);
        CHECK_INT(sub_passes, 1);
        CHECK_INT(sub_zero, 2);
        CHECK_INT(sub_certified, 8);   /* σmax/2, σ = λ, zero, rank 5: two each */
        CHECK_INT(sub_full, 4);        /* σmax/4 and λ = 0 */
        worst = one_pass("IMPUTE_CUDA_SVT=gram,IMPUTE_CUDA_WARM=0,IMPUTE_CUDA_COLD=0", FIRST_NONE, N, m, n, a, lambda);
        CHECK_INT(sub_passes, 0);
        if (!(worst >= 0 && worst <= tol)) HARNESS_FAIL("full eigensolve: %.3g of ‖A‖", worst);
        free(a);
        free(lambda);
    }
    {
        const int64_t m = 256, n = 256, N = 4;
        float *a = malloc(sizeof(float) * (size_t)(N * m * n));
        double *lambda = malloc(sizeof(double) * (size_t)N);
        cold_slices(N, m, n, 1, 778, a, lambda);
        double worst = one_pass("IMPUTE_CUDA_WARM=0", FIRST_NONE, N, m, n, a, lambda);
        printf("    256 x 256: %lld certified, %lld by the full eigensolve; %.3g of ‖A‖\n", sub_certified, sub_full, worst);
        if (!(worst >= 0 && worst <= 2e-6 * sqrt((double)m))) HARNESS_FAIL("cold pass at 256: %.3g of ‖A‖", worst);
        CHECK_INT(sub_passes, 1);
        CHECK_INT(sub_certified, 4);
        /* A warm pass whose block exceeds 128 (λ at 0.4 σmax: rank about 128,
         * block 160) solves its Ritz problem in float32 and refines it. */
        for (int64_t k = 0; k < N; k++) lambda[k] *= 0.8;
        worst = one_pass("", FIRST_SIGMA, N, m, n, a, lambda);
        printf("    256 x 256, warm, wide block: %lld certified, %lld by the full eigensolve; %.3g of ‖A‖\n",
               sub_certified, sub_full, worst);
        if (!(worst >= 0 && worst <= 2e-6 * sqrt((double)m))) HARNESS_FAIL("warm pass at 256: %.3g of ‖A‖", worst);
        CHECK_INT(sub_passes, 1);
        CHECK_INT(sub_certified, 4);
        /* With the warm start, a first pass with a λ is the full eigensolve
         * (no cold pass: its q pairs could not start the next one), and the
         * second the warm subspace pass. */
        worst = one_pass("", FIRST_LAMBDA, N, m, n, a, lambda);
        if (!(worst >= 0 && worst <= 2e-6 * sqrt((double)m))) HARNESS_FAIL("λ first, then warm: %.3g of ‖A‖", worst);
        CHECK_INT(sub_cold, 0);
        CHECK_INT(sub_passes, 1);
        CHECK_INT(sub_certified, 4);
        free(a);
        free(lambda);
    }
}

/* What the Jacobi pass logged last: slices whose certificate for the
 * columns below λ was refused, and those Cholesky proved after Gershgorin
 * refused. */
static long long jac_refused = -1, jac_sharp = -1;

static void note_jacobi(lac_log_level level, const char *message, void *user)
{
    (void)level;
    (void)user;
    const char *at = strstr(message, "certificate refused on ");
    const char *ch = strstr(message, "Gershgorin was refused on ");
    if (!strstr(message, "SVT by Jacobi") || !at || !ch) return;
    jac_refused = atoll(at + strlen("certificate refused on "));
    jac_sharp = atoll(ch + strlen("Gershgorin was refused on "));
}

/* The Jacobi pass's warm start leaves pairs of columns below (0.8 λ)²
 * unrotated and then proves that the block below λ hides no singular value
 * above it. Two passes on one state whose slices are set between them (every
 * vertex missing, identity basis: slice k is X_I's column k): the σmax pass
 * on A0 = Q diag(s) Pᵀ (three values above λ = 1, 37 in [0.25, 0.6] or, for
 * the hidden case, [0.2, 0.45]), then
 * the λ pass on A1 = Q (diag(s) + M) Pᵀ, M nonzero only on the 37 below:
 *   proved: M = 0.04·Gaussian: every column of the block stays below
 *     0.8 λ, Gershgorin's discs (|γ| summed over 36 columns) cross λ², but
 *     the block's largest singular value stays below 0.9 λ: Cholesky proves;
 *   hidden: M = 1.3 x yᵀ (x, y of ±1/√37): the columns stay below 0.55 λ but
 *     the block holds a singular value near 1.3 λ: both refuse, and every
 *     pair is rotated.
 * Each against LAPACK, and the log's counts. */
TEST(jacobi_certificate_proves_or_refuses_the_block_below_lambda)
{
    const int64_t m = 40, n = 48, N = 8, size = m * n, p = 40, b = p - 3;
    float *a0 = malloc(sizeof(float) * (size_t)(N * size)), *a1 = malloc(sizeof(float) * (size_t)(N * size));
    float *out = malloc(sizeof(float) * (size_t)(N * size));
    double *lambda = malloc(sizeof(double) * (size_t)N), *sv = malloc(sizeof(double) * (size_t)p);
    double *g = malloc(sizeof(double) * (size_t)(n * p)), *q = malloc(sizeof(double) * (size_t)(n * p));
    double *pt = malloc(sizeof(double) * (size_t)(p * p)), *d = malloc(sizeof(double) * (size_t)(p * p));
    double *t = malloc(sizeof(double) * (size_t)(n * p));
    unsigned long long seed = 9090;
    for (int64_t k = 0; k < N; k++) {
        const int hidden = (int)(k % 2);
        lambda[k] = 1;
        /* Q (n x p) and Pᵀ (p x p) orthonormal, from a Gaussian's SVD. */
        for (int64_t i = 0; i < n * p; i++) g[i] = gaussian(&seed);
        if (LAPACKE_dgesdd(LAPACK_COL_MAJOR, 'S', (int)n, (int)p, g, (int)n, sv, q, (int)n, pt, (int)p) != 0)
            HARNESS_FAIL("dgesdd");
        for (int pass = 0; pass < 2; pass++) {
            memset(d, 0, sizeof(double) * (size_t)(p * p));
            d[0] = 10, d[1 + p] = 8, d[2 + 2 * p] = 6;
            for (int64_t j = 0; j < b; j++) {
                const double lo = hidden ? 0.2 : 0.25, hi = hidden ? 0.45 : 0.6;
                d[(3 + j) * (p + 1)] = hi - (hi - lo) * (double)j / (double)(b - 1);
            }
            if (pass == 1) {
                double x[64], y[64];
                for (int64_t j = 0; j < b; j++) {
                    x[j] = (gaussian(&seed) < 0 ? -1 : 1) / sqrt((double)b);
                    y[j] = (gaussian(&seed) < 0 ? -1 : 1) / sqrt((double)b);
                }
                for (int64_t j = 0; j < b; j++)
                    for (int64_t i = 0; i < b; i++)
                        d[(3 + i) + (3 + j) * p] += hidden ? 1.3 * x[i] * y[j] : 0.04 * gaussian(&seed);
            }
            /* A = Q D Pᵀ, n x p column-major (rows = n, cols = m). */
            for (int64_t j = 0; j < p; j++)
                for (int64_t r = 0; r < n; r++) {
                    double v = 0;
                    for (int64_t i = 0; i < p; i++) v += q[r + i * n] * d[i + j * p];
                    t[r + j * n] = v;
                }
            float *a = (pass ? a1 : a0) + k * size;
            for (int64_t c = 0; c < p; c++)
                for (int64_t r = 0; r < n; r++) {
                    double v = 0;
                    for (int64_t i = 0; i < p; i++) v += t[r + i * n] * pt[i + c * p];
                    a[r + c * n] = (float)v;
                }
        }
        /* The design: A1's fourth singular value below 0.9 λ (proved) or
         * above 1.2 λ (hidden). */
        reference_svt((int)n, (int)m, a1 + k * size, -1, sv, NULL);
        if (hidden ? !(sv[3] > 1.2) : !(sv[3] < 0.9))
            HARNESS_FAIL("slice %lld: σ4 = %.4g, not what the case needs", (long long)k, sv[3]);
    }
    const lac_impute_backend *be = lac_impute_backend_cuda();
    unsigned char *state = malloc((size_t)N);
    int64_t *inc = malloc(sizeof(int64_t) * (size_t)N);
    for (int64_t v = 0; v < N; v++) state[v] = LAC_VERTEX_MISSING, inc[v] = v;
    float *zeros = calloc((size_t)(N * size), sizeof(float));
    struct lac_gft gf;
    lac_impute_problem pr;
    identity_problem(N, m, n, zeros, state, &gf, &pr);
    pr.incomplete = inc;
    pr.num_incomplete = N;
    const double tol = 2e-6 * sqrt((double)n);
    const char *knobs[2] = {"IMPUTE_CUDA_SVT=jacobi", "IMPUTE_CUDA_SVT=jacobi,IMPUTE_CUDA_SUBSPACE=off"};
    for (int run = 0; run < 2; run++) {
        lac_ctx_t c = logged_context(knobs[run], note_jacobi, LAC_LOG_DEBUG);
        void *st = NULL, *x_est = NULL;
        double tsq = 0, tmsq = 0, err = 0;
        int64_t elements = 0;
        lac_dtype dt;
        lac_impute_svt_stats stats;
        /* igft_part makes the host mirror of X_I that incomplete hands out. */
        int ok = c && be && be->setup(c, &pr, &st, &tsq, &tmsq) == 0 && be->igft_part(c, st, 0, N, 0, &err) == 0;
        float *x = ok ? (float *)be->incomplete(st, &x_est, &elements, &dt) : NULL;
        if (ok && x && elements == size && dt == LAC_FLOAT32) {
            memcpy(x, a0, sizeof(float) * (size_t)(N * size));
            ok = be->gft(c, st) == 0 && be->svt(c, st, NULL, NULL, &stats) == 0;
            x = ok ? (float *)be->incomplete(st, &x_est, &elements, &dt) : NULL;
            if (x) memcpy(x, a1, sizeof(float) * (size_t)(N * size));
            jac_refused = jac_sharp = -1;
            ok = x && be->gft(c, st) == 0 && be->svt(c, st, lambda, NULL, &stats) == 0 &&
                 be->finish(c, st, LAC_IMPUTE_ESTIMATE, out, LAC_FLOAT32, &err) == 0;
        } else {
            ok = 0;
        }
        if (ok) {
            double worst = worst_against_lapack(N, m, n, a1, lambda, out);
            printf("    %s: refused %lld, proved by Cholesky after Gershgorin %lld; %.3g of ‖A‖\n", knobs[run],
                   jac_refused, jac_sharp, worst);
            if (!(worst <= tol)) HARNESS_FAIL("%s: S_λ differs from LAPACK's by %.3g of ‖A‖ (tolerance %.3g)", knobs[run], worst, tol);
            CHECK_INT(stats.rank_sum, 3 * N / 2 + 4 * N / 2);   /* the hidden value is kept */
            CHECK_INT(jac_refused, run == 0 ? N / 2 : 0);
            CHECK_INT(jac_sharp, run == 0 ? N / 2 : 0);
        } else {
            HARNESS_FAIL("%s: %s", knobs[run], c ? lac_last_error(c) : "no context");
        }
        if (st) be->release(st);
        lac_ctx_destroy(&c);
    }
    identity_free(&gf);
    free(state);
    free(inc);
    free(zeros);
    free(a0);
    free(a1);
    free(out);
    free(lambda);
    free(sv);
    free(g);
    free(q);
    free(pt);
    free(d);
    free(t);
}

/* Whole imputations on the Gram route with the subspace pass (48 x 40
 * slices, rank 3): its warm passes start from the previous iteration's
 * vectors of slices that changed, so the filter, the residual check and the
 * certificate decide, and what fails falls back; the completion must equal
 * the CPU's as the full path's does. Also two shares of device 0. */
TEST(imputation_with_the_subspace_pass_matches_the_cpu)
{
    lac_ctx_t usual = gpu, c = subspace_context("IMPUTE_CUDA_SVT=gram");
    int64_t saved[4] = {case_n, case_m, case_nn, case_rank};
    case_n = 60, case_m = 48, case_nn = 40, case_rank = 3;
    gpu = c;
    for (int run = 0; run < 2; run++) {
        sub_passes = sub_certified_all = sub_full_all = 0;
        impute_both(LAC_FLOAT32, run, !run, 0);
        printf("    %s mask: %lld subspace passes, %lld slices certified, %lld by the full eigensolve\n",
               run ? "entry" : "vertex", sub_passes, sub_certified_all, sub_full_all);
        CHECK(sub_passes > 0);
    }
    gpu = usual;
    case_n = saved[0], case_m = saved[1], case_nn = saved[2], case_rank = saved[3];
    lac_ctx_destroy(&c);
}

/* ------------------------------------------------------------------------ */
/* Out of core: LACUNA_CUDA_MEMORY_CAP against the resident plan             */
/* ------------------------------------------------------------------------ */
/* The slab width the streamed plan logged (0: the run stayed resident). */
static long long logged_slab;

static void note_slab(lac_log_level level, const char *message, void *user)
{
    (void)level;
    (void)user;
    const char *at = strstr(message, "in slabs of ");
    if (at) logged_slab = atoll(at + strlen("in slabs of "));
}

/* A CUDA context with `knobs`, logging at info level into note_slab. */
static lac_ctx_t capped_context(const char *knobs)
{
    return logged_context(knobs, note_slab, LAC_LOG_INFO);
}

/* Whole imputations on a random graph (ring with chords, 90 vertices, 6 x 5
 * slices, rank 2, 60% observed), resident and with a cap that holds about a
 * fifth of the frequencies a slab. The streamed run adds the iGFT's
 * per-slab products in another order than the one resident GEMM: float
 * rounding only, so the completions agree to 1e-4 (float32) and 1e-10
 * (float64) relative, the bounds of the two-share split whose iGFT sum is
 * split the same way, and the iteration counts to one. knobs without a cap:
 * a cap placed between one slab and the resident plan. */
static void streamed_equals_resident(lac_dtype precision, int entry_mask, int accelerate, const char *knobs)
{
    const int64_t N = case_n, mn = case_m * case_nn;
    int64_t shape[3] = {N, case_m, case_nn};
    impute_case c;
    impute_case_make(precision, entry_mask, 23, 9, &c);
    lac_gft_t gft = c.gft;
    lac_array truth = c.truth, tensor = c.tensor, out_res, out_str;
    CHECK_OK(cpu, lac_array_alloc(cpu, LAC_FLOAT64, 3, shape, &out_res));
    CHECK_OK(cpu, lac_array_alloc(cpu, LAC_FLOAT64, 3, shape, &out_str));
    lac_impute_params p = lac_impute_params_default();
    p.accelerate = accelerate;
    lac_impute_result rr, rs;
    char auto_knobs[160];
    if (strstr(knobs, "CUDA_MEMORY_CAP") == NULL) {
        /* A quarter of the way from one slab to the resident plan, as the
         * error for a cap of 1000 bytes names them (the Gram path's solver
         * workspace is the library's to size). */
        snprintf(auto_knobs, sizeof auto_knobs, "CUDA_MEMORY_CAP=1000,%s", knobs);
        lac_ctx_t probe = capped_context(auto_knobs);
        CHECK_STATUS(probe, lac_impute(probe, &p, gft, &tensor, NULL, &truth, &out_str, &rs), LAC_ERR_VALUE);
        const char *msg = lac_last_error(probe), *lo = strstr(msg, "below the "), *hi = strstr(msg, "plan needs ");
        unsigned long long least = lo ? strtoull(lo + 10, NULL, 10) : 0, resident = hi ? strtoull(hi + 11, NULL, 10) : 0;
        CHECK(least > 0 && resident > least);
        snprintf(auto_knobs, sizeof auto_knobs, "CUDA_MEMORY_CAP=%llu,%s", least + (resident - least) / 4, knobs);
        knobs = auto_knobs;
        lac_ctx_destroy(&probe);
    }
    lac_ctx_t capped = capped_context(knobs);
    logged_slab = 0;
    CHECK_OK(gpu, lac_impute(gpu, &p, gft, &tensor, NULL, &truth, &out_res, &rr));
    CHECK_OK(capped, lac_impute(capped, &p, gft, &tensor, NULL, &truth, &out_str, &rs));
    printf("    %s, %s mask, accelerate %d (%s): slabs of %lld of %lld frequencies, ", lac_dtype_name(precision),
           entry_mask ? "entry" : "vertex", accelerate, knobs, logged_slab, (long long)N);
    CHECK(logged_slab >= 1 && logged_slab <= N / 4);
    double rel = relative_difference(out_res.data, out_str.data, N * mn);
    const double tol = precision == LAC_FLOAT32 ? 1e-4 : 1e-10;
    printf("relative difference %.3g (bound %.0e)\n", rel, tol);
    if (!(rel <= tol)) HARNESS_FAIL("streamed and resident completions differ by %.3g", rel);
    CHECK(llabs(rr.iterations - rs.iterations) <= 1);
    CHECK_NEAR(rs.rmse_all, rr.rmse_all, 10 * tol + 10 * tol * rr.rmse_all);
    CHECK_NEAR(rs.rmse_missing, rr.rmse_missing, 10 * tol + 10 * tol * rr.rmse_missing);
    lac_ctx_destroy(&capped);
    lac_array_release(&out_res);
    lac_array_release(&out_str);
    impute_case_free(&c);
}

TEST(streamed_imputation_equals_the_resident_one)
{
    /* 60 kB: about two fifths of the resident plan's 150 kB (float32). */
    streamed_equals_resident(LAC_FLOAT32, 0, 1, "CUDA_MEMORY_CAP=60000");
    streamed_equals_resident(LAC_FLOAT32, 1, 0, "CUDA_MEMORY_CAP=60000");
    streamed_equals_resident(LAC_FLOAT64, 1, 1, "CUDA_MEMORY_CAP=110000");
    streamed_equals_resident(LAC_FLOAT32, 1, 1, "IMPUTE_CUDA_SVT=gram");
}

/* ------------------------------------------------------------------------ */
/* The phase clock (LACUNA_IMPUTE_CUDA_PHASES), a measurement only            */
/* ------------------------------------------------------------------------ */
/* The clock's line: iterations, then GFT, SVT, iGFT, the imputation step
 * (-1: inside the iGFT) and the whole iteration, medians in ms; lines seen. */
static double clock_figures[6];
static int clock_lines;

static void note_clock(lac_log_level level, const char *message, void *user)
{
    (void)level;
    (void)user;
    note_slab(level, message, user);
    const char *at = strstr(message, "phases by CUDA events over ");
    if (!at) return;
    clock_lines++;
    const char *g = strstr(at, ": GFT "), *v = strstr(at, ", SVT "), *i = strstr(at, ", iGFT ");
    const char *st = strstr(at, "imputation step "), *w = strstr(at, "whole iteration ");
    long long n = 0;
    if (sscanf(at, "phases by CUDA events over %lld", &n) != 1 || !g || !v || !i || !st || !w) return;
    clock_figures[0] = (double)n;
    clock_figures[1] = atof(g + 6);
    clock_figures[2] = atof(v + 6);
    clock_figures[3] = atof(i + 7);
    clock_figures[4] = strncmp(st + 16, "inside", 6) == 0 ? -1 : atof(st + 16);
    clock_figures[5] = atof(w + 16);
}

/* With the clock on, the completion is the one without it, bit for bit (it
 * only records events), and its line counts the run's iterations with every
 * phase's median inside the whole iteration's (an iteration holds each of its
 * phases, so each order statistic does too); off, no line. Resident (the
 * imputation step timed apart) and streamed (inside the iGFT). */
TEST(phase_clock_times_every_iteration_and_changes_nothing)
{
    const int64_t N = case_n, mn = case_m * case_nn;
    int64_t shape[3] = {N, case_m, case_nn};
    impute_case c;
    impute_case_make(LAC_FLOAT32, 0, 31, 7, &c);
    lac_array plain, timed;
    CHECK_OK(cpu, lac_array_alloc(cpu, LAC_FLOAT64, 3, shape, &plain));
    CHECK_OK(cpu, lac_array_alloc(cpu, LAC_FLOAT64, 3, shape, &timed));
    lac_impute_params p = lac_impute_params_default();
    for (int streamed = 0; streamed < 2; streamed++) {
        lac_ctx_t off = logged_context(streamed ? "CUDA_MEMORY_CAP=60000" : NULL, note_clock, LAC_LOG_INFO);
        lac_ctx_t on = logged_context(streamed ? "CUDA_MEMORY_CAP=60000,IMPUTE_CUDA_PHASES=1" : "IMPUTE_CUDA_PHASES=1",
                                      note_clock, LAC_LOG_INFO);
        lac_impute_result r0, r1;
        clock_lines = 0;
        logged_slab = 0;
        CHECK_OK(off, lac_impute(off, &p, c.gft, &c.tensor, NULL, &c.truth, &plain, &r0));
        CHECK_INT(clock_lines, 0);
        CHECK(streamed ? logged_slab > 0 : logged_slab == 0);
        CHECK_OK(on, lac_impute(on, &p, c.gft, &c.tensor, NULL, &c.truth, &timed, &r1));
        CHECK_INT(clock_lines, 1);
        CHECK(memcmp(plain.data, timed.data, sizeof(double) * (size_t)(N * mn)) == 0);
        CHECK_INT(r1.iterations, r0.iterations);
        printf("    %s: %.0f iterations, GFT %.4f + SVT %.4f + iGFT %.4f + step %.4f ms, whole %.4f ms\n",
               streamed ? "streamed" : "resident", clock_figures[0], clock_figures[1], clock_figures[2],
               clock_figures[3], clock_figures[4], clock_figures[5]);
        CHECK_INT((int64_t)clock_figures[0], r1.iterations);
        CHECK(streamed ? clock_figures[4] == -1 : clock_figures[4] > 0);
        for (int f = 1; f <= 4; f++)
            if (f != 4 || !streamed) CHECK(clock_figures[f] >= 0 && clock_figures[f] <= clock_figures[5]);
        CHECK(clock_figures[2] > 0 && clock_figures[5] > 0);
        lac_ctx_destroy(&off);
        lac_ctx_destroy(&on);
    }
    lac_array_release(&plain);
    lac_array_release(&timed);
    impute_case_free(&c);
}

/* Through the backend table with the canonical basis (U = I): every product
 * with U or U_I is then exact, so the streamed pass must give the resident
 * one's numbers (bound 1e-7 relative, float32, expected 0): the slabs, the
 * copies between them and the per-slab SVT lose nothing. Entry masks,
 * truth, momentum; a σmax-only pass, then λ at half of σmax. */
static void canonical_run(lac_ctx_t c, int64_t N, int64_t m, int64_t n, const float *tensor, const unsigned char *state,
                          const unsigned char *entry, const int64_t *incomplete, int64_t ni, const float *truth,
                          float *completed, float *estimate, double *figures)
{
    const lac_impute_backend *be = lac_impute_backend_cuda();
    double *sigma = malloc(sizeof(double) * (size_t)N), *lambda = malloc(sizeof(double) * (size_t)N);
    struct lac_gft g;
    lac_impute_problem pr;
    identity_problem(N, m, n, tensor, state, &g, &pr);
    pr.entry_observed = entry;
    pr.num_incomplete = ni;
    pr.incomplete = incomplete;
    pr.truth = truth;
    pr.truth_dtype = LAC_FLOAT32;
    pr.momentum = 1;
    void *st = NULL;
    double truth_sq = 0, missing_sq = 0;
    int f = 0;
    CHECK_OK(c, be->setup(c, &pr, &st, &truth_sq, &missing_sq));
    if (st) {
        figures[f++] = truth_sq;
        figures[f++] = missing_sq;
        for (int it = 0; it < 6; it++) {
            lac_impute_svt_stats stats;
            double err = 0;
            CHECK_OK(c, be->gft(c, st));
            if (it == 0) CHECK_OK(c, be->svt(c, st, NULL, sigma, &stats));
            else {
                for (int64_t k = 0; k < N; k++) lambda[k] = 0.5 * sigma[k];
                CHECK_OK(c, be->svt(c, st, lambda, NULL, &stats));
            }
            CHECK_OK(c, be->igft(c, st, it > 1 ? 0.3 : 0, &err));
            figures[f++] = stats.change_sq;
            figures[f++] = stats.truth_error_sq;
            figures[f++] = (double)stats.rank_sum;
            figures[f++] = err;
        }
        double e1 = 0, e2 = 0;
        CHECK_OK(c, be->finish(c, st, LAC_IMPUTE_COMPLETED, completed, LAC_FLOAT32, &e1));
        CHECK_OK(c, be->finish(c, st, LAC_IMPUTE_ESTIMATE, estimate, LAC_FLOAT32, &e2));
        figures[f++] = e1;
        figures[f++] = e2;
        be->release(st);
    }
    identity_free(&g);
    free(sigma);
    free(lambda);
}

enum { CANONICAL_FIGURES = 2 + 6 * 4 + 2 };

TEST(streamed_pass_with_the_canonical_basis_loses_nothing)
{
    const int64_t N = 64, m = 8, n = 6, mn = m * n;
    float *tensor = malloc(sizeof(float) * (size_t)(N * mn)), *truth = malloc(sizeof(float) * (size_t)(N * mn));
    unsigned char *state = malloc((size_t)N), *entry = malloc((size_t)(N * mn));
    int64_t *incomplete = malloc(sizeof(int64_t) * (size_t)N), ni = 0;
    unsigned long long seed = 31;
    for (int64_t v = 0; v < N; v++) {
        /* Rank-2 slices: a·bᵀ + c·dᵀ with random factors. */
        double f[2][14];
        for (int r = 0; r < 2; r++)
            for (int i = 0; i < 14; i++) f[r][i] = harness_rand_uniform(&seed) - 0.5;
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++)
                truth[v * mn + i * n + j] = (float)(f[0][i] * f[0][8 + j] + f[1][i] * f[1][8 + j]);
        double u = harness_rand_uniform(&seed);
        state[v] = u < 0.5 ? LAC_VERTEX_OBSERVED : u < 0.8 ? LAC_VERTEX_PARTIAL : LAC_VERTEX_MISSING;
        if (state[v] != LAC_VERTEX_OBSERVED) incomplete[ni++] = v;
        for (int64_t e = 0; e < mn; e++) {
            entry[v * mn + e] = state[v] == LAC_VERTEX_OBSERVED ||
                                (state[v] == LAC_VERTEX_PARTIAL && harness_rand_uniform(&seed) < 0.5);
            tensor[v * mn + e] = entry[v * mn + e] ? truth[v * mn + e] : NAN;
        }
    }
    float *c_res = malloc(sizeof(float) * (size_t)(N * mn)), *c_str = malloc(sizeof(float) * (size_t)(N * mn));
    float *e_res = malloc(sizeof(float) * (size_t)(N * mn)), *e_str = malloc(sizeof(float) * (size_t)(N * mn));
    double f_res[CANONICAL_FIGURES] = {0}, f_str[CANONICAL_FIGURES] = {0};
    lac_ctx_t capped = capped_context("CUDA_MEMORY_CAP=42000");
    logged_slab = 0;
    canonical_run(gpu, N, m, n, tensor, state, entry, incomplete, ni, truth, c_res, e_res, f_res);
    canonical_run(capped, N, m, n, tensor, state, entry, incomplete, ni, truth, c_str, e_str, f_str);
    printf("    slabs of %lld of %lld frequencies, %lld incomplete vertices\n", logged_slab, (long long)N, (long long)ni);
    CHECK(logged_slab >= 1 && logged_slab <= N / 4);
    double worst = 0;
    for (int i = 0; i < CANONICAL_FIGURES; i++) {
        double d = fabs(f_res[i] - f_str[i]) / (fabs(f_res[i]) > 1e-30 ? fabs(f_res[i]) : 1);
        if (d > worst) worst = d;
    }
    double *a = malloc(sizeof(double) * (size_t)(N * mn)), *b = malloc(sizeof(double) * (size_t)(N * mn));
    for (int k = 0; k < 2; k++) {
        const float *x = k ? e_res : c_res, *y = k ? e_str : c_str;
        for (int64_t i = 0; i < N * mn; i++) {
            a[i] = x[i];
            b[i] = y[i];
        }
        double rel = relative_difference(a, b, N * mn);
        printf("    %s: relative difference %.3g (bound 1e-7)\n", k ? "estimate" : "completion", rel);
        if (!(rel <= 1e-7)) HARNESS_FAIL("canonical basis: streamed and resident %s differ by %.3g", k ? "estimates" : "completions", rel);
    }
    printf("    figures (norms, change, truth error, rank, missing error): worst relative difference %.3g\n", worst);
    CHECK(worst <= 1e-7);
    lac_ctx_destroy(&capped);
    free(a);
    free(b);
    free(tensor);
    free(truth);
    free(state);
    free(entry);
    free(incomplete);
    free(c_res);
    free(c_str);
    free(e_res);
    free(e_str);
}

/* A cap below one slab: a clear error naming the knob and the minimum, no crash,
 * no state; a cap that is not a byte count: the same. */
TEST(streamed_cap_below_one_slab_is_a_clear_error)
{
    const int64_t N = 90, m = 6, n = 5;
    lac_graph_t graph = ring_with_chords(cpu, N, 7);
    lac_gft_t gft = NULL;
    CHECK_OK(cpu, lac_gft_create(cpu, graph, LAC_FLOAT32, &gft));
    int64_t shape[3] = {N, m, n};
    lac_array truth, observed, out;
    CHECK_OK(cpu, lac_array_alloc(cpu, LAC_FLOAT32, 3, shape, &truth));
    CHECK_OK(cpu, lac_array_alloc(cpu, LAC_BOOL, 1, shape, &observed));
    CHECK_OK(cpu, lac_array_alloc(cpu, LAC_FLOAT32, 3, shape, &out));
    lac_impute_gen_params gp = lac_impute_gen_params_default();
    gp.m = m;
    gp.n = n;
    gp.rank = case_rank;
    gp.observed_ratio = 0.6;
    CHECK_OK(cpu, lac_impute_generate(cpu, &gp, gft, &truth, &observed));
    static const char *knobs[] = {"CUDA_MEMORY_CAP=2000", "CUDA_MEMORY_CAP=1.5G", "CUDA_MEMORY_CAP=12MB"};
    for (int k = 0; k < 3; k++) {
        lac_ctx_t capped = capped_context(knobs[k]);
        lac_impute_params p = lac_impute_params_default();
        lac_impute_result r;
        CHECK_STATUS(capped, lac_impute(capped, &p, gft, &truth, &observed, NULL, &out, &r), LAC_ERR_VALUE);
        const char *msg = lac_last_error(capped);
        printf("    %s: %s\n", knobs[k], msg);
        CHECK_STR_CONTAINS(msg, "LACUNA_CUDA_MEMORY_CAP");
        if (k == 0) CHECK_STR_CONTAINS(msg, "one frequency a slab");
        lac_ctx_destroy(&capped);
    }
    lac_array_release(&truth);
    lac_array_release(&observed);
    lac_array_release(&out);
    lac_gft_destroy(&gft);
    lac_graph_destroy(&graph);
}

/* The basis on the device: eigenvalues as LAPACK's; each eigenvector of a
 * simple eigenvalue equal up to sign. */
TEST(basis_eigendecomposition_matches_lapack)
{
    const int64_t N = 120;
    lac_graph_t graph = ring_with_chords(cpu, N, 3);
    lac_gft_t a = NULL, b = NULL;
    CHECK_OK(cpu, lac_gft_create(cpu, graph, LAC_FLOAT64, &a));
    CHECK_OK(gpu, lac_gft_create(gpu, graph, LAC_FLOAT64, &b));
    if (a && b) {
        double *ea = malloc(sizeof(double) * N), *eb = malloc(sizeof(double) * N);
        double *va = malloc(sizeof(double) * N * N), *vb = malloc(sizeof(double) * N * N);
        lac_array xa = lac_array_vector(ea, LAC_FLOAT64, N), xb = lac_array_vector(eb, LAC_FLOAT64, N);
        lac_array ua = lac_array_matrix(va, LAC_FLOAT64, N, N), ub = lac_array_matrix(vb, LAC_FLOAT64, N, N);
        CHECK_OK(cpu, lac_gft_copy(cpu, a, &xa, &ua));
        CHECK_OK(cpu, lac_gft_copy(cpu, b, &xb, &ub));
        double worst_value = 0, worst_vector = 0;
        for (int64_t k = 0; k < N; k++) {
            worst_value = fmax(worst_value, fabs(ea[k] - eb[k]));
            double gap = fmin(k > 0 ? ea[k] - ea[k - 1] : 1, k + 1 < N ? ea[k + 1] - ea[k] : 1);
            if (gap < 1e-6) continue;   /* degenerate: any rotation is an answer */
            double dot = 0;
            for (int64_t v = 0; v < N; v++) dot += va[v * N + k] * vb[v * N + k];
            worst_vector = fmax(worst_vector, 1 - fabs(dot));
        }
        if (worst_value > 1e-10 || worst_vector > 1e-8)
            HARNESS_FAIL("device basis: eigenvalues off by %.3g, eigenvectors by %.3g", worst_value, worst_vector);
        free(ea);
        free(eb);
        free(va);
        free(vb);
    }
    lac_gft_destroy(&a);
    lac_gft_destroy(&b);
    lac_graph_destroy(&graph);
}

/* The generator's transform on the device gives the CPU's tensor. */
TEST(generator_transform_matches_the_cpu)
{
    const int64_t N = 60, m = 4, n = 3;
    lac_graph_t graph = ring_with_chords(cpu, N, 9);
    lac_gft_t gft = NULL;
    CHECK_OK(cpu, lac_gft_create(cpu, graph, LAC_FLOAT64, &gft));
    int64_t shape[3] = {N, m, n};
    lac_array x, y;
    CHECK_OK(cpu, lac_array_alloc(cpu, LAC_FLOAT64, 3, shape, &x));
    CHECK_OK(cpu, lac_array_alloc(cpu, LAC_FLOAT64, 3, shape, &y));
    lac_impute_gen_params gp = lac_impute_gen_params_default();
    gp.m = m;
    gp.n = n;
    gp.rank = case_rank;
    gp.observed_ratio = 1;
    gp.seed = 3;
    CHECK_OK(cpu, lac_impute_generate(cpu, &gp, gft, &x, NULL));
    CHECK_OK(gpu, lac_impute_generate(gpu, &gp, gft, &y, NULL));
    double worst = 0;
    for (int64_t i = 0; i < N * m * n; i++) worst = fmax(worst, fabs(((double *)x.data)[i] - ((double *)y.data)[i]));
    if (worst > 1e-10) HARNESS_FAIL("generated tensors differ by %.3g", worst);
    lac_array_release(&x);
    lac_array_release(&y);
    lac_gft_destroy(&gft);
    lac_graph_destroy(&graph);
}

/* ego-Facebook (172 frequencies in degenerate eigenspaces): the GPU in float32
 * with its own cuSOLVER basis against the CPU's float64 path with LAPACK's,
 * both made canonical: the same completion to float32 accuracy. */
TEST(ego_facebook_agrees_with_the_cpu_float64_path)
{
    char path[4096];
    const char *root = getenv("LACUNA_SOURCE_DIR");
    snprintf(path, sizeof path, "%s/data/ego-facebook/facebook_combined.txt", root ? root : "..");
    lac_graph_params gp = lac_graph_params_default();
    lac_graph_t graph = NULL;
    CHECK_OK(cpu, lac_graph_load(cpu, path, &gp, &graph));
    if (!graph) return;
    lac_gft_t on_gpu = NULL, on_cpu = NULL, cpu32 = NULL;
    CHECK_OK(gpu, lac_gft_create(gpu, graph, LAC_FLOAT32, &on_gpu));
    CHECK_OK(cpu, lac_gft_create(cpu, graph, LAC_FLOAT64, &on_cpu));
    CHECK_OK(cpu, lac_gft_create(cpu, graph, LAC_FLOAT32, &cpu32));
    const int64_t N = lac_graph_num_vertices(graph), m = 10, n = 10;
    if (on_gpu && on_cpu && cpu32) {
        /* The two float32 bases (cuSOLVER's and LAPACK's eigenvectors, made canonical). */
        float *ua = malloc(sizeof(float) * (size_t)(N * N)), *ub = malloc(sizeof(float) * (size_t)(N * N));
        lac_array xa = lac_array_matrix(ua, LAC_FLOAT32, N, N), xb = lac_array_matrix(ub, LAC_FLOAT32, N, N);
        CHECK_OK(cpu, lac_gft_copy(cpu, on_gpu, NULL, &xa));
        CHECK_OK(cpu, lac_gft_copy(cpu, cpu32, NULL, &xb));
        double worst = 0;
        for (int64_t i = 0; i < N * N; i++) worst = fmax(worst, fabs((double)ua[i] - (double)ub[i]));
        printf("    float32 bases (cuSOLVER vs LAPACK, canonical): largest entry difference %.3g\n", worst);
        free(ua);
        free(ub);

        int64_t shape[3] = {N, m, n};
        lac_array truth, observed, out_cpu, out_gpu;
        CHECK_OK(cpu, lac_array_alloc(cpu, LAC_FLOAT64, 3, shape, &truth));
        CHECK_OK(cpu, lac_array_alloc(cpu, LAC_BOOL, 1, shape, &observed));
        CHECK_OK(cpu, lac_array_alloc(cpu, LAC_FLOAT64, 3, shape, &out_cpu));
        CHECK_OK(cpu, lac_array_alloc(cpu, LAC_FLOAT64, 3, shape, &out_gpu));
        lac_impute_gen_params g = lac_impute_gen_params_default();
        g.m = m;
        g.n = n;
        g.rank = 3;
        g.observed_ratio = 0.7;
        g.seed = 4;
        CHECK_OK(cpu, lac_impute_generate(cpu, &g, on_cpu, &truth, &observed));
        lac_impute_params p = lac_impute_params_default();
        p.steps = 4;
        p.inner = 6;
        lac_impute_result rc, rg;
        CHECK_OK(cpu, lac_impute(cpu, &p, on_cpu, &truth, &observed, &truth, &out_cpu, &rc));
        CHECK_OK(gpu, lac_impute(gpu, &p, on_gpu, &truth, &observed, &truth, &out_gpu, &rg));
        double rel = relative_difference(out_cpu.data, out_gpu.data, N * m * n);
        printf("    completions: relative difference %.3g; rmse CPU %.5g, GPU %.5g (%lld / %lld iterations)\n", rel,
               rc.rmse_all, rg.rmse_all, (long long)rc.iterations, (long long)rg.iterations);
        if (!(rel <= 1e-3)) HARNESS_FAIL("ego-Facebook: GPU float32 and CPU float64 completions differ by %.3g", rel);
        CHECK_NEAR(rg.rmse_all, rc.rmse_all, 2e-3);
        lac_array_release(&truth);
        lac_array_release(&observed);
        lac_array_release(&out_cpu);
        lac_array_release(&out_gpu);
    }
    lac_gft_destroy(&on_gpu);
    lac_gft_destroy(&on_cpu);
    lac_gft_destroy(&cpu32);
    lac_graph_destroy(&graph);
}

int main(void)
{
    int rc;
    if (!harness_cuda_start(&gpu, &cpu, 0, &rc)) return rc;
    RUN(batched_svt_matches_lapack_on_small_slices);
    /* LACUNA_TEST_QUICK=1 (the sanitizers' runs): the small cases only. */
    const char *quick = getenv("LACUNA_TEST_QUICK");
    const int full = !(quick && strcmp(quick, "1") == 0);
    if (full) RUN(batched_svt_matches_lapack_beyond_shared_memory);
    RUN(each_svt_path_matches_lapack_where_the_other_is_the_default);
    RUN(svt_without_kept_vectors_matches_lapack);
    RUN(svt_split_across_shares_matches_lapack);
    RUN(imputation_matches_the_cpu);
    RUN(imputation_without_kept_vectors_matches_the_cpu);
    RUN(subspace_svt_certifies_or_falls_back);
    RUN(cold_subspace_svt_certifies_or_falls_back);
    RUN(jacobi_certificate_proves_or_refuses_the_block_below_lambda);
    RUN(imputation_with_the_subspace_pass_matches_the_cpu);
    RUN(streamed_imputation_equals_the_resident_one);
    RUN(streamed_pass_with_the_canonical_basis_loses_nothing);
    RUN(streamed_cap_below_one_slab_is_a_clear_error);
    RUN(phase_clock_times_every_iteration_and_changes_nothing);
    RUN(basis_eigendecomposition_matches_lapack);
    RUN(generator_transform_matches_the_cpu);
    if (full) RUN(ego_facebook_agrees_with_the_cpu_float64_path);
    lac_ctx_destroy(&gpu);
    lac_ctx_destroy(&cpu);
    return harness_finish();
}
