/* impute: the GFT basis, Algorithm 1 against a float64 reference written here
 * (plain loops for the transforms, a one-sided Jacobi SVD per frequency, no
 * batching), planted low-rank recovery, the generator, the basis cache and
 * every bad input (outputs untouched). Small graphs only. */
#include "harness.h"
#include "lacuna/lacuna.h"

#include <omp.h>
#include <stdint.h>
#include <sys/stat.h>

static lac_ctx_t ctx;

/* ------------------------------------------------------------------------ */
/* Reference                                                                 */
/* ------------------------------------------------------------------------ */
/* One-sided Jacobi SVD of A (r x c row-major, r >= c): A = U diag(s) V^T with
 * U r x c, V c x c, s descending. */
static void svd_jacobi(int r, int c, const double *A, double *U, double *s, double *V)
{
    double W[64 * 64];
    memcpy(W, A, sizeof(double) * (size_t)(r * c));
    for (int i = 0; i < c; i++)
        for (int j = 0; j < c; j++) V[i * c + j] = i == j;
    for (int sweep = 0; sweep < 60; sweep++) {
        double off = 0;
        for (int p = 0; p < c; p++)
            for (int q = p + 1; q < c; q++) {
                double alpha = 0, beta = 0, gamma = 0;
                for (int i = 0; i < r; i++) {
                    alpha += W[i * c + p] * W[i * c + p];
                    beta += W[i * c + q] * W[i * c + q];
                    gamma += W[i * c + p] * W[i * c + q];
                }
                if (fabs(gamma) <= 1e-300 || fabs(gamma) <= 1e-16 * sqrt(alpha * beta)) continue;
                off = fmax(off, fabs(gamma) / sqrt(alpha * beta));
                double zeta = (beta - alpha) / (2 * gamma);
                double t = (zeta >= 0 ? 1.0 : -1.0) / (fabs(zeta) + sqrt(1 + zeta * zeta));
                double cs = 1 / sqrt(1 + t * t), sn = cs * t;
                for (int i = 0; i < r; i++) {
                    double wp = W[i * c + p], wq = W[i * c + q];
                    W[i * c + p] = cs * wp - sn * wq;
                    W[i * c + q] = sn * wp + cs * wq;
                }
                for (int i = 0; i < c; i++) {
                    double vp = V[i * c + p], vq = V[i * c + q];
                    V[i * c + p] = cs * vp - sn * vq;
                    V[i * c + q] = sn * vp + cs * vq;
                }
            }
        if (off < 1e-15) break;
    }
    int order[64];
    for (int j = 0; j < c; j++) {
        order[j] = j;
        double norm = 0;
        for (int i = 0; i < r; i++) norm += W[i * c + j] * W[i * c + j];
        s[j] = sqrt(norm);
    }
    for (int a = 0; a < c; a++)   /* selection sort, descending */
        for (int b = a + 1; b < c; b++)
            if (s[order[b]] > s[order[a]]) {
                int tmp = order[a];
                order[a] = order[b];
                order[b] = tmp;
            }
    double s_sorted[64], V_sorted[64 * 64];
    for (int j = 0; j < c; j++) {
        int o = order[j];
        s_sorted[j] = s[o];
        for (int i = 0; i < r; i++) U[i * c + j] = s[o] > 0 ? W[i * c + o] / s[o] : 0;
        for (int i = 0; i < c; i++) V_sorted[i * c + j] = V[i * c + o];
    }
    memcpy(s, s_sorted, sizeof(double) * (size_t)c);
    memcpy(V, V_sorted, sizeof(double) * (size_t)(c * c));
}

/* S_λ(A) for an m x n matrix; returns the largest singular value. */
static double soft_threshold(int m, int n, const double *A, double lambda, double *out)
{
    int transpose = m < n, r = transpose ? n : m, c = transpose ? m : n;
    double B[64 * 64], U[64 * 64], V[64 * 64], s[64];
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            if (transpose) B[j * m + i] = A[i * n + j];
            else B[i * n + j] = A[i * n + j];
        }
    svd_jacobi(r, c, B, U, s, V);
    for (int i = 0; i < r; i++)
        for (int j = 0; j < c; j++) {
            double x = 0;
            for (int q = 0; q < c; q++)
                if (s[q] > lambda) x += U[i * c + q] * (s[q] - lambda) * V[j * c + q];
            if (transpose) out[j * r + i] = x;
            else out[i * c + j] = x;
        }
    return s[0];
}

/* Algorithm 1 in float64 with plain loops. U: N x N row-major (U[v][k]);
 * G: N x mn; observed: N x mn (1 = observed). Writes the estimate (N x mn). */
static void reference_impute(int N, int m, int n, const double *U, const double *G, const unsigned char *observed,
                             const lac_impute_params *p, double *estimate)
{
    int mn = m * n;
    size_t bytes = sizeof(double) * (size_t)(N * mn);
    double *X = calloc(1, bytes), *Xprev = calloc(1, bytes), *Gimp = malloc(bytes), *Ghat = malloc(bytes);
    double *Gest_hat = calloc(1, bytes), *Gnew = malloc(bytes), *lambda1 = malloc(sizeof(double) * (size_t)N);
    int t = 0;
    int64_t cap = p->max_iterations > 0 ? p->max_iterations : p->steps * p->inner;
    double fista = 1;   /* FISTA's t_k, kept across the λ steps */
    for (int j = 1; j <= p->steps && t < cap; j++) {
        double scale = pow(p->decay, j - 1);
        for (int inner = 0; inner < p->inner && t < cap; inner++) {
            t++;
            for (int i = 0; i < N * mn; i++) Gimp[i] = observed[i] ? G[i] : X[i];            /* line 7 */
            for (int k = 0; k < N; k++)                                                     /* line 8 */
                for (int e = 0; e < mn; e++) {
                    double x = 0;
                    for (int v = 0; v < N; v++) x += U[v * N + k] * Gimp[v * mn + e];
                    Ghat[k * mn + e] = x;
                }
            int first = t == 1 && p->lambda == 0;
            double change = 0, previous = 0;
            for (int k = 0; k < N; k++) {                                                   /* line 9 */
                double lam = p->lambda > 0 ? p->lambda * scale : lambda1[k] * scale;
                double smax = soft_threshold(m, n, Ghat + k * mn, first ? INFINITY : lam, Gnew + k * mn);
                if (first) lambda1[k] = smax;
                for (int e = 0; e < mn; e++) {
                    double d = Gnew[k * mn + e] - Gest_hat[k * mn + e];
                    change += d * d;
                    previous += Gest_hat[k * mn + e] * Gest_hat[k * mn + e];
                }
            }
            memcpy(Gest_hat, Gnew, bytes);
            for (int v = 0; v < N; v++)                                                     /* line 10 */
                for (int e = 0; e < mn; e++) {
                    double x = 0;
                    for (int k = 0; k < N; k++) x += U[v * N + k] * Gest_hat[k * mn + e];
                    estimate[v * mn + e] = x;
                }
            double theta = 0;
            if (p->accelerate) {
                double next = 0.5 * (1 + sqrt(1 + 4 * fista * fista));
                theta = (fista - 1) / next;
                fista = next;
            }
            for (int i = 0; i < N * mn; i++) {
                double x = observed[i] ? 0 : estimate[i];
                X[i] = x + theta * (x - Xprev[i]);
                Xprev[i] = x;
            }
            if (first || (t >= 2 && change <= p->tol * previous)) break;
        }
    }
    free(X);
    free(Xprev);
    free(Gimp);
    free(Ghat);
    free(Gest_hat);
    free(Gnew);
    free(lambda1);
}

/* ------------------------------------------------------------------------ */
/* Fixtures                                                                  */
/* ------------------------------------------------------------------------ */
/* A connected test graph: a ring with seeded chords and weights. */
static lac_graph_t small_graph(int N, unsigned long long seed)
{
    int64_t src[256], dst[256];
    double w[256];
    int count = 0;
    unsigned long long s = seed;
    for (int v = 0; v < N; v++) {
        src[count] = v;
        dst[count] = (v + 1) % N;
        w[count++] = 0.5 + harness_rand_uniform(&s);
    }
    for (int c = 0; c < N; c++) {
        src[count] = (int64_t)(harness_rand_u64(&s) % (unsigned)N);
        dst[count] = (int64_t)(harness_rand_u64(&s) % (unsigned)N);
        w[count++] = 0.5 + harness_rand_uniform(&s);
    }
    lac_array a = lac_array_vector(src, LAC_INT64, count), b = lac_array_vector(dst, LAC_INT64, count);
    lac_array wa = lac_array_vector(w, LAC_FLOAT64, count);
    lac_graph_t g = NULL;
    lac_graph_from_edges(ctx, N, &a, &b, &wa, &g);
    return g;
}

static double rel_diff(int count, const double *a, const double *b)
{
    double num = 0, den = 0;
    for (int i = 0; i < count; i++) {
        num += (a[i] - b[i]) * (a[i] - b[i]);
        den += b[i] * b[i];
    }
    return sqrt(num / (den > 0 ? den : 1));
}

/* Low-rank spectral slices through the test's own loops: G = U Ĝ. */
static void planted(int N, int m, int n, int rank, const double *U, unsigned long long seed, double *G)
{
    double *hat = malloc(sizeof(double) * (size_t)(N * m * n));
    unsigned long long s = seed;
    for (int k = 0; k < N; k++) {
        double A[64 * 4], B[64 * 4];
        for (int i = 0; i < m * rank; i++) A[i] = harness_rand_uniform(&s) - 0.5;
        for (int i = 0; i < n * rank; i++) B[i] = harness_rand_uniform(&s) - 0.5;
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++) {
                double x = 0;
                for (int q = 0; q < rank; q++) x += A[i * rank + q] * B[j * rank + q];
                hat[k * m * n + i * n + j] = x;
            }
    }
    for (int v = 0; v < N; v++)
        for (int e = 0; e < m * n; e++) {
            double x = 0;
            for (int k = 0; k < N; k++) x += U[v * N + k] * hat[k * m * n + e];
            G[v * m * n + e] = x;
        }
    free(hat);
}

/* ------------------------------------------------------------------------ */
/* Tests                                                                     */
/* ------------------------------------------------------------------------ */
TEST(basis_is_an_orthonormal_eigendecomposition)
{
    const int N = 24;
    lac_graph_t g = small_graph(N, 11);
    double L[24 * 24], U[24 * 24], w[24];
    lac_array La = lac_array_matrix(L, LAC_FLOAT64, N, N);
    CHECK_OK(ctx, lac_graph_laplacian(ctx, g, &La));
    for (int prec = 0; prec < 2; prec++) {
        lac_gft_t gft = NULL;
        CHECK_OK(ctx, lac_gft_create(ctx, g, prec ? LAC_FLOAT64 : LAC_FLOAT32, &gft));
        lac_array wa = lac_array_vector(w, LAC_FLOAT64, N), Ua = lac_array_matrix(U, LAC_FLOAT64, N, N);
        CHECK_OK(ctx, lac_gft_copy(ctx, gft, &wa, &Ua));
        double tol = prec ? 1e-12 : 1e-5, residual = 0, ortho = 0;
        for (int i = 0; i < N; i++)
            for (int k = 0; k < N; k++) {
                double lu = 0, utu = 0;
                for (int j = 0; j < N; j++) {
                    lu += L[i * N + j] * U[j * N + k];
                    utu += U[j * N + i] * U[j * N + k];
                }
                residual = fmax(residual, fabs(lu - U[i * N + k] * w[k]));
                ortho = fmax(ortho, fabs(utu - (i == k)));
            }
        if (residual > tol) HARNESS_FAIL("precision %d: |L U - U diag(w)|max = %g > %g", prec, residual, tol);
        if (ortho > tol) HARNESS_FAIL("precision %d: |U^T U - I|max = %g > %g", prec, ortho, tol);
        for (int k = 1; k < N; k++) CHECK(w[k] >= w[k - 1]);
        CHECK(w[0] > -tol && w[0] < tol);
        CHECK(w[N - 1] < 2 + tol);
        lac_gft_destroy(&gft);
        CHECK(gft == NULL);
    }
    lac_graph_destroy(&g);
}

/* Runs the library and the reference on one problem; returns the relative
 * difference of the estimates (and of the completed tensors through *completed). */
static double compare_with_reference(int N, int m, int n, lac_dtype precision, const lac_impute_params *p,
                                     const unsigned char *entry_observed, const unsigned char *slice_observed,
                                     double *completed_diff)
{
    lac_graph_t g = small_graph(N, 5);
    lac_gft_t gft = NULL;
    lac_gft_create(ctx, g, precision, &gft);
    double *U = malloc(sizeof(double) * (size_t)(N * N));
    lac_array Ua = lac_array_matrix(U, LAC_FLOAT64, N, N);
    lac_gft_copy(ctx, gft, NULL, &Ua);
    int mn = m * n;
    double *G = malloc(sizeof(double) * (size_t)(N * mn)), *ref = malloc(sizeof(double) * (size_t)(N * mn));
    double *got = malloc(sizeof(double) * (size_t)(N * mn));
    unsigned char *obs = malloc((size_t)(N * mn));
    planted(N, m, n, 2, U, 99, G);
    for (int i = 0; i < N * mn; i++) obs[i] = entry_observed ? entry_observed[i] : slice_observed[i / mn];
    reference_impute(N, m, n, U, G, obs, p, ref);

    int64_t shape[3] = {N, m, n};
    lac_array tensor, out;
    lac_array_alloc(ctx, precision, 3, shape, &tensor);
    lac_array_alloc(ctx, precision, 3, shape, &out);
    for (int i = 0; i < N * mn; i++) {
        if (precision == LAC_FLOAT32) ((float *)tensor.data)[i] = (float)G[i];
        else ((double *)tensor.data)[i] = G[i];
    }
    lac_array mask = entry_observed ? (lac_array){0} : lac_array_vector((void *)slice_observed, LAC_BOOL, N);
    if (entry_observed) {
        mask = lac_array_vector((void *)entry_observed, LAC_BOOL, N);
        mask.ndim = 3;
        mask.shape[1] = m;
        mask.shape[2] = n;
    }
    double diff = INFINITY;
    for (int output = 0; output < 2; output++) {
        lac_impute_params q = *p;
        q.output = output ? LAC_IMPUTE_COMPLETED : LAC_IMPUTE_ESTIMATE;
        lac_impute_result res;
        CHECK_OK(ctx, lac_impute(ctx, &q, gft, &tensor, &mask, NULL, &out, &res));
        for (int i = 0; i < N * mn; i++)
            got[i] = precision == LAC_FLOAT32 ? (double)((float *)out.data)[i] : ((double *)out.data)[i];
        if (output == 0) {
            diff = rel_diff(N * mn, got, ref);
        } else {
            for (int i = 0; i < N * mn; i++)
                if (obs[i]) ref[i] = G[i];
            *completed_diff = rel_diff(N * mn, got, ref);
        }
    }
    lac_array_release(&tensor);
    lac_array_release(&out);
    free(U);
    free(G);
    free(ref);
    free(got);
    free(obs);
    lac_gft_destroy(&gft);
    lac_graph_destroy(&g);
    return diff;
}

static unsigned char *slice_sample(int N, double ratio, unsigned long long seed)
{
    unsigned char *obs = malloc((size_t)N);
    unsigned long long s = seed;
    for (int v = 0; v < N; v++) obs[v] = harness_rand_uniform(&s) < ratio;
    obs[0] = 1;
    return obs;
}

TEST(matches_the_float64_reference)
{
    const int N = 24, m = 6, n = 5;
    unsigned char *obs = slice_sample(N, 0.7, 3);
    lac_impute_params p = lac_impute_params_default();
    p.steps = 6;
    p.inner = 4;
    p.tol = 0;   /* a fixed number of iterations, so that both sides stop together */
    double completed = INFINITY;
    double d = compare_with_reference(N, m, n, LAC_FLOAT64, &p, NULL, obs, &completed);
    printf("    double: relative difference %.3g (estimate), %.3g (completed)\n", d, completed);
    if (!(d <= 1e-5)) HARNESS_FAIL("double: estimate differs from the reference by %g (> 1e-5)", d);
    if (!(completed <= 1e-5)) HARNESS_FAIL("double: completed tensor differs by %g (> 1e-5)", completed);
    d = compare_with_reference(N, m, n, LAC_FLOAT32, &p, NULL, obs, &completed);
    printf("    single: relative difference %.3g (estimate), %.3g (completed)\n", d, completed);
    if (!(d <= 1e-3)) HARNESS_FAIL("single: estimate differs from the reference by %g (> 1e-3)", d);
    if (!(completed <= 1e-3)) HARNESS_FAIL("single: completed tensor differs by %g (> 1e-3)", completed);
    /* λ down to 1e-15 σmax: the smallest ones take the SVT's gesdd path */
    p.decay = 0.05;
    p.steps = 12;
    p.inner = 2;
    d = compare_with_reference(N, m, n, LAC_FLOAT64, &p, NULL, obs, &completed);
    if (!(d <= 1e-5)) HARNESS_FAIL("double, tiny lambda: estimate differs by %g", d);
    p = lac_impute_params_default();
    p.steps = 6;
    p.inner = 4;
    /* with the tolerance test on, and a user lambda */
    p.tol = 1e-6;
    p.lambda = 0.8;
    d = compare_with_reference(N, m, n, LAC_FLOAT64, &p, NULL, obs, &completed);
    if (!(d <= 1e-5)) HARNESS_FAIL("double, tol and lambda: differs by %g", d);
    free(obs);
}

TEST(matches_the_reference_with_entry_masks_and_acceleration)
{
    const int N = 20, m = 5, n = 6;
    unsigned char *obs = malloc((size_t)(N * m * n));
    unsigned long long s = 8;
    for (int v = 0; v < N; v++) {
        double kind = harness_rand_uniform(&s);   /* observed, missing or partly observed slices */
        for (int e = 0; e < m * n; e++)
            obs[v * m * n + e] = kind < 0.5 ? 1 : kind < 0.7 ? 0 : harness_rand_uniform(&s) < 0.6;
    }
    lac_impute_params p = lac_impute_params_default();
    p.steps = 5;
    p.inner = 5;
    p.tol = 0;
    p.accelerate = 1;
    double completed = INFINITY;
    double d = compare_with_reference(N, m, n, LAC_FLOAT64, &p, obs, NULL, &completed);
    printf("    entry mask + acceleration: relative difference %.3g\n", d);
    if (!(d <= 1e-5)) HARNESS_FAIL("entry mask + acceleration: estimate differs by %g", d);
    if (!(completed <= 1e-5)) HARNESS_FAIL("entry mask + acceleration: completed differs by %g", completed);
    p.accelerate = 0;
    d = compare_with_reference(N, m, n, LAC_FLOAT64, &p, obs, NULL, &completed);
    if (!(d <= 1e-5)) HARNESS_FAIL("entry mask: estimate differs by %g", d);
    free(obs);
}

/* Data, mask and basis for the tests below. */
typedef struct {
    lac_graph_t graph;
    lac_gft_t gft;
    lac_array truth, tensor, mask, out;
    int N, m, n;
} problem;

static void problem_make(problem *pb, int N, int m, int n, int rank, double ratio, unsigned long long seed)
{
    memset(pb, 0, sizeof *pb);
    pb->N = N;
    pb->m = m;
    pb->n = n;
    pb->graph = small_graph(N, seed);
    lac_gft_create(ctx, pb->graph, LAC_FLOAT64, &pb->gft);
    int64_t shape[3] = {N, m, n};
    lac_array_alloc(ctx, LAC_FLOAT64, 3, shape, &pb->truth);
    lac_array_alloc(ctx, LAC_FLOAT64, 3, shape, &pb->tensor);
    lac_array_alloc(ctx, LAC_FLOAT64, 3, shape, &pb->out);
    lac_array_alloc(ctx, LAC_BOOL, 1, shape, &pb->mask);
    lac_impute_gen_params gp = lac_impute_gen_params_default();
    gp.m = m, gp.n = n, gp.rank = rank, gp.observed_ratio = ratio, gp.seed = seed;
    lac_impute_generate(ctx, &gp, pb->gft, &pb->truth, &pb->mask);
    memcpy(pb->tensor.data, pb->truth.data, sizeof(double) * (size_t)(N * m * n));
}

static void problem_free(problem *pb)
{
    lac_array_release(&pb->truth);
    lac_array_release(&pb->tensor);
    lac_array_release(&pb->out);
    lac_array_release(&pb->mask);
    lac_gft_destroy(&pb->gft);
    lac_graph_destroy(&pb->graph);
}

TEST(recovers_planted_low_rank_graph_tensors)
{
    problem pb;
    problem_make(&pb, 60, 8, 8, 1, 0.8, 21);
    lac_impute_params p = lac_impute_params_default();
    p.steps = 14;
    p.inner = 40;
    p.accelerate = 1;
    lac_impute_result res;
    CHECK_OK(ctx, lac_impute(ctx, &p, pb.gft, &pb.tensor, &pb.mask, &pb.truth, &pb.out, &res));
    printf("    rMSE %.3g (all), %.3g (missing) after %lld iterations\n", res.rmse_all, res.rmse_missing,
           (long long)res.iterations);
    if (!(res.rmse_missing < 1e-2)) HARNESS_FAIL("rMSE over the missing slices %g (>= 1e-2)", res.rmse_missing);
    if (!(res.rmse_all < 1e-2)) HARNESS_FAIL("rMSE over all slices %g (>= 1e-2)", res.rmse_all);
    /* the reported errors agree with the ones computed here from the output */
    const double *truth = pb.truth.data, *out = pb.out.data;
    const unsigned char *mask = pb.mask.data;
    double num = 0, den = 0;
    int mn = pb.m * pb.n;
    for (int i = 0; i < pb.N * mn; i++)
        if (!mask[i / mn]) {
            num += (out[i] - truth[i]) * (out[i] - truth[i]);
            den += truth[i] * truth[i];
        }
    CHECK_NEAR(sqrt(num / den), res.rmse_missing, 1e-6);
    CHECK_INT(res.observed_vertices + res.missing_vertices, pb.N);
    CHECK_INT(res.partial_vertices, 0);
    CHECK(res.iterations >= 1 && res.seconds >= 0);
    problem_free(&pb);
}

TEST(nan_marked_slices_equal_the_slice_mask)
{
    problem pb;
    problem_make(&pb, 30, 4, 5, 2, 0.6, 4);
    lac_impute_params p = lac_impute_params_default();
    p.steps = 5;
    p.inner = 3;
    CHECK_OK(ctx, lac_impute(ctx, &p, pb.gft, &pb.tensor, &pb.mask, NULL, &pb.out, NULL));
    double *with_mask = malloc(sizeof(double) * 30 * 20);
    memcpy(with_mask, pb.out.data, sizeof(double) * 30 * 20);
    const unsigned char *mask = pb.mask.data;
    double *x = pb.tensor.data;
    for (int i = 0; i < 30 * 20; i++)
        if (!mask[i / 20]) x[i] = NAN;
    /* in place: out is the tensor itself */
    CHECK_OK(ctx, lac_impute(ctx, &p, pb.gft, &pb.tensor, NULL, NULL, &pb.tensor, NULL));
    double worst = 0;
    for (int i = 0; i < 30 * 20; i++) worst = fmax(worst, fabs(x[i] - with_mask[i]));
    if (!(worst == 0)) HARNESS_FAIL("NaN-marked run differs from the masked one by %g", worst);
    free(with_mask);
    problem_free(&pb);
}

TEST(generator_is_seeded_low_rank_and_thread_independent)
{
    const int N = 24, m = 5, n = 4, rank = 2;
    lac_graph_t g = small_graph(N, 2);
    lac_gft_t gft = NULL;
    CHECK_OK(ctx, lac_gft_create(ctx, g, LAC_FLOAT64, &gft));
    int64_t shape[3] = {N, m, n};
    lac_array a, b, oa, ob;
    lac_array_alloc(ctx, LAC_FLOAT64, 3, shape, &a);
    lac_array_alloc(ctx, LAC_FLOAT64, 3, shape, &b);
    lac_array_alloc(ctx, LAC_BOOL, 1, shape, &oa);
    lac_array_alloc(ctx, LAC_BOOL, 1, shape, &ob);
    lac_impute_gen_params gp = lac_impute_gen_params_default();
    gp.m = m, gp.n = n, gp.rank = rank, gp.observed_ratio = 0.75, gp.seed = 42;
    CHECK_OK(ctx, lac_impute_generate(ctx, &gp, gft, &a, &oa));
    lac_ctx_params cp = lac_ctx_params_default();
    cp.backend = LAC_BACKEND_CPU;
    cp.threads = 1;
    lac_ctx_t one;
    CHECK_OK(NULL, lac_ctx_create(&cp, &one));
    CHECK_OK(one, lac_impute_generate(one, &gp, gft, &b, &ob));
    lac_ctx_destroy(&one);
    CHECK(memcmp(oa.data, ob.data, (size_t)N) == 0);
    double worst = 0;
    for (int i = 0; i < N * m * n; i++) worst = fmax(worst, fabs(((double *)a.data)[i] - ((double *)b.data)[i]));
    CHECK(worst < 1e-12);
    int count = 0;
    for (int v = 0; v < N; v++) count += ((unsigned char *)oa.data)[v];
    CHECK_INT(count, 18);   /* round(0.75 * 24) */

    /* Spectral slices U^T G have rank 2: the third singular value vanishes. */
    double U[24 * 24];
    lac_array Ua = lac_array_matrix(U, LAC_FLOAT64, N, N);
    CHECK_OK(ctx, lac_gft_copy(ctx, gft, NULL, &Ua));
    const double *G = a.data;
    double worst_ratio = 0;
    for (int k = 0; k < N; k++) {
        double hat[20], Us[20], s[4], V[16];
        for (int e = 0; e < m * n; e++) {
            double x = 0;
            for (int v = 0; v < N; v++) x += U[v * N + k] * G[v * m * n + e];
            hat[e] = x;
        }
        svd_jacobi(m, n, hat, Us, s, V);
        worst_ratio = fmax(worst_ratio, s[rank] / s[0]);
    }
    if (!(worst_ratio < 1e-10)) HARNESS_FAIL("a spectral slice has sigma_3 / sigma_1 = %g", worst_ratio);

    gp.seed = 43;
    CHECK_OK(ctx, lac_impute_generate(ctx, &gp, gft, &b, NULL));
    CHECK(memcmp(a.data, b.data, sizeof(double) * (size_t)(N * m * n)) != 0);
    gp.rank = 6;
    CHECK_STATUS(ctx, lac_impute_generate(ctx, &gp, gft, &b, NULL), LAC_ERR_ARGUMENT);
    lac_array_release(&a);
    lac_array_release(&b);
    lac_array_release(&oa);
    lac_array_release(&ob);
    lac_gft_destroy(&gft);
    lac_graph_destroy(&g);
}

TEST(bad_input_is_rejected_and_leaves_out_untouched)
{
    problem pb;
    problem_make(&pb, 20, 3, 4, 1, 0.7, 9);
    lac_impute_params p = lac_impute_params_default();
    double *out = pb.out.data, *x = pb.tensor.data;
    for (int i = 0; i < 20 * 12; i++) out[i] = 12345.0;

    /* a tensor for another graph */
    int64_t other[3] = {21, 3, 4};
    lac_array wrong;
    lac_array_alloc(ctx, LAC_FLOAT64, 3, other, &wrong);
    CHECK_STATUS(ctx, lac_impute(ctx, &p, pb.gft, &wrong, NULL, NULL, &pb.out, NULL), LAC_ERR_SHAPE);
    CHECK_STR_CONTAINS(lac_last_error(ctx), "21 slices");
    CHECK_STATUS(ctx, lac_impute_check(ctx, 20, &wrong, NULL, NULL), LAC_ERR_SHAPE);
    lac_array_release(&wrong);

    /* an empty observed set */
    unsigned char none[20] = {0};
    lac_array empty = lac_array_vector(none, LAC_BOOL, 20);
    CHECK_STATUS(ctx, lac_impute(ctx, &p, pb.gft, &pb.tensor, &empty, NULL, &pb.out, NULL), LAC_ERR_VALUE);
    CHECK_STR_CONTAINS(lac_last_error(ctx), "empty");

    /* NaN in observed data, slice mask and entry mask */
    const unsigned char *mask = pb.mask.data;
    int v = 0;
    while (!mask[v]) v++;
    x[v * 12 + 5] = NAN;
    CHECK_STATUS(ctx, lac_impute(ctx, &p, pb.gft, &pb.tensor, &pb.mask, NULL, &pb.out, NULL), LAC_ERR_VALUE);
    char where[64];
    snprintf(where, sizeof where, "tensor[%d, 1, 1]", v);
    CHECK_STR_CONTAINS(lac_last_error(ctx), where);
    unsigned char *entries = calloc(20 * 12, 1);
    entries[v * 12 + 5] = 1;
    lac_array em = lac_array_vector(entries, LAC_BOOL, 20);
    em.ndim = 3;
    em.shape[1] = 3;
    em.shape[2] = 4;
    CHECK_STATUS(ctx, lac_impute(ctx, &p, pb.gft, &pb.tensor, &em, NULL, &pb.out, NULL), LAC_ERR_VALUE);
    x[v * 12 + 5] = INFINITY;   /* without a mask, infinity is observed and not finite */
    CHECK_STATUS(ctx, lac_impute(ctx, &p, pb.gft, &pb.tensor, NULL, NULL, &pb.out, NULL), LAC_ERR_VALUE);
    x[v * 12 + 5] = 0;
    free(entries);

    /* a mask of the wrong kind, truth with NaN, bad parameters */
    int32_t ints[20] = {0};
    lac_array im = lac_array_vector(ints, LAC_INT32, 20);
    CHECK_STATUS(ctx, lac_impute(ctx, &p, pb.gft, &pb.tensor, &im, NULL, &pb.out, NULL), LAC_ERR_DTYPE);
    unsigned char short_mask[19] = {1};
    lac_array sm = lac_array_vector(short_mask, LAC_BOOL, 19);
    CHECK_STATUS(ctx, lac_impute(ctx, &p, pb.gft, &pb.tensor, &sm, NULL, &pb.out, NULL), LAC_ERR_SHAPE);
    ((double *)pb.truth.data)[3] = NAN;
    {   /* the first entry that is not finite is the one named, whatever the threads */
        const int64_t tm = pb.truth.shape[1], tn = pb.truth.shape[2], last = pb.truth.shape[0] * tm * tn - 1;
        const double kept = ((double *)pb.truth.data)[last];
        ((double *)pb.truth.data)[last] = INFINITY;
        CHECK_STATUS(ctx, lac_impute(ctx, &p, pb.gft, &pb.tensor, &pb.mask, &pb.truth, &pb.out, NULL), LAC_ERR_VALUE);
        char want[96];
        snprintf(want, sizeof want, "truth[0, %lld, %lld] is not finite", (long long)(3 / tn), (long long)(3 % tn));
        CHECK(strstr(lac_last_error(ctx), want) != NULL);
        ((double *)pb.truth.data)[last] = kept;
    }
    lac_impute_params bad = p;
    bad.decay = 1.5;
    CHECK_STATUS(ctx, lac_impute(ctx, &bad, pb.gft, &pb.tensor, &pb.mask, NULL, &pb.out, NULL), LAC_ERR_ARGUMENT);
    CHECK(lac_impute_params_check(&bad) != NULL);
    CHECK_STATUS(ctx, lac_impute(ctx, &p, NULL, &pb.tensor, &pb.mask, NULL, &pb.out, NULL), LAC_ERR_ARGUMENT);

    int untouched = 1;
    for (int i = 0; i < 20 * 12; i++) untouched &= out[i] == 12345.0;
    CHECK(untouched);

    /* the CUDA backend: not in this build, or no impute there yet; never a crash */
    lac_ctx_params cp = lac_ctx_params_default();
    cp.backend = LAC_BACKEND_CUDA;
    lac_ctx_t cuda = NULL;
    int st = lac_ctx_create(&cp, &cuda);
    if (st == 0) {
        CHECK_STATUS(cuda, lac_impute(cuda, &p, pb.gft, &pb.tensor, &pb.mask, NULL, &pb.out, NULL), LAC_ERR_UNSUPPORTED);
        lac_ctx_destroy(&cuda);
    } else {
        CHECK(st == LAC_ERR_NOT_COMPILED || st == LAC_ERR_NO_DEVICE);
    }
    problem_free(&pb);
}

static int stop_after_two(const lac_impute_iteration *it, void *user)
{
    int *calls = user;
    (*calls)++;
    CHECK(it->iteration == *calls);
    return it->iteration >= 2;
}

TEST(progress_reports_every_iteration_and_can_stop)
{
    problem pb;
    problem_make(&pb, 20, 3, 3, 1, 0.7, 12);
    lac_impute_params p = lac_impute_params_default();
    int calls = 0;
    p.progress = stop_after_two;
    p.progress_user = &calls;
    lac_impute_result res;
    CHECK_STATUS(ctx, lac_impute(ctx, &p, pb.gft, &pb.tensor, &pb.mask, &pb.truth, &pb.out, &res), LAC_INFO_NOT_CONVERGED);
    CHECK_INT(calls, 2);
    CHECK_INT(res.iterations, 2);
    CHECK(isfinite(res.rmse_all));
    problem_free(&pb);
}

/* Noise of standard deviation sigma on every entry of the tensor (the truth
 * stays clean): too small a λ fits the noise, too large a one loses signal. */
static void add_noise(problem *pb, double sigma, unsigned long long seed)
{
    unsigned long long s = seed;
    double *x = pb->tensor.data;
    for (int i = 0; i < pb->N * pb->m * pb->n; i++) {
        double u1 = harness_rand_uniform(&s), u2 = harness_rand_uniform(&s);
        x[i] += sigma * sqrt(-2 * log(u1 + 1e-300)) * cos(6.283185307179586 * u2);
    }
}

/* One thread for the many small fits below: on a loaded machine, threads
 * waiting at each phase's barrier cost more than the work. */
static lac_ctx_t serial;

/* After each λ step of a fit: the error against the clean truth on the
 * missing entries (the last iteration's of that step). */
static int record_step_errors(const lac_impute_iteration *it, void *user)
{
    ((double *)user)[it->step - 1] = it->rmse_missing;
    return 0;
}

/* The step whose fit has the lowest error against the clean truth on the
 * missing entries: one walk down the schedule, read after every step (the fit
 * stopped after j steps is that walk's prefix). */
static int64_t best_true_step(problem *pb, const lac_impute_params *p, const lac_array *mask, double *errors)
{
    lac_impute_params q = *p;
    q.select_fraction = 0;
    q.progress = record_step_errors;
    q.progress_user = errors;
    CHECK_OK(serial, lac_impute(serial, &q, pb->gft, &pb->tensor, mask, &pb->truth, &pb->out, NULL));
    int64_t best = 1;
    for (int64_t j = 2; j <= p->steps; j++)
        if (errors[j - 1] < errors[best - 1]) best = j;
    return best;
}

typedef struct {
    int64_t calls, selecting, after_selecting;   /* iterations reported, on the hold-out path, out of order */
    double lambda_max;                           /* of the last one */
} selection_watch;

static int watch_selection(const lac_impute_iteration *it, void *user)
{
    selection_watch *w = user;
    w->calls++;
    if (it->selecting) {
        w->selecting++;
        if (w->calls > w->selecting) w->after_selecting++;   /* a hold-out iteration after the fit began */
    }
    w->lambda_max = it->lambda_max;
    return 0;
}

/* The selection run against the clean truth (within one step of the best),
 * its report against itself and the fit it promises (the schedule stopped at
 * the chosen step, on all the data), and the seed. */
static void check_selection(problem *pb, const lac_array *mask, int entries, int64_t observed_units, int all_checks)
{
    lac_impute_params p = lac_impute_params_default();
    p.steps = 12;
    p.decay = 0.6;
    p.inner = 20;
    p.tol = 1e-7;
    double truth_errors[12], curve[16], again[16];
    int64_t best = best_true_step(pb, &p, mask, truth_errors);
    /* the data make both ends worse than the middle */
    if (!(best > 2 && best < p.steps - 1)) HARNESS_FAIL("the best step on the clean truth is %lld: not inside", (long long)best);
    lac_impute_selection sel = lac_impute_selection_default();
    sel.curve = curve;
    sel.curve_capacity = 16;
    selection_watch watch = {0};
    p.select_fraction = 0.2;
    p.select_seed = 5;
    p.selection = &sel;
    p.progress = watch_selection;
    p.progress_user = &watch;
    lac_impute_result res;
    CHECK_OK(serial, lac_impute(serial, &p, pb->gft, &pb->tensor, mask, &pb->truth, &pb->out, &res));
    printf("    %s: chosen step %lld (hold-out error %.4g), best against the truth %lld\n", entries ? "entries" : "vertices",
           (long long)sel.chosen_step, sel.chosen_error, (long long)best);
    if (llabs(sel.chosen_step - best) > 1)
        HARNESS_FAIL("hold-out chose step %lld, the truth's best is %lld", (long long)sel.chosen_step, (long long)best);
    CHECK_INT(sel.entries, entries);
    CHECK_INT(sel.held_out, llround(0.2 * (double)observed_units));
    CHECK_INT(sel.steps, 12);
    for (int j = 0; j < 12; j++) {
        CHECK(curve[j] >= curve[sel.chosen_step - 1]);
        CHECK(isfinite(curve[j]));
    }
    for (int j = 12; j < 16; j++) CHECK(isnan(curve[j]));
    CHECK_NEAR(curve[0], 1.0, 1e-12);   /* at λ^1 = σmax the estimate is 0 */
    CHECK(sel.chosen_error == curve[sel.chosen_step - 1]);
    CHECK_NEAR(sel.chosen_scale, pow(0.6, (double)(sel.chosen_step - 1)), 1e-15);
    /* hold-out iterations first, then the fit (res counts the fit's) */
    CHECK(watch.selecting >= 12);
    CHECK_INT(watch.after_selecting, 0);
    CHECK_INT(watch.calls - watch.selecting, res.iterations);
    CHECK_INT(res.steps, sel.chosen_step);
    CHECK_NEAR(sel.chosen_lambda_max, watch.lambda_max, 1e-12 * watch.lambda_max);
    if (!all_checks) return;

    /* the fit is the schedule stopped at the chosen step */
    int64_t count = (int64_t)pb->N * pb->m * pb->n;
    double *chosen_out = malloc(sizeof(double) * (size_t)count);
    memcpy(chosen_out, pb->out.data, sizeof(double) * (size_t)count);
    lac_impute_params q = p;
    q.select_fraction = 0;
    q.selection = NULL;
    q.progress = NULL;
    q.steps = sel.chosen_step;
    CHECK_OK(serial, lac_impute(serial, &q, pb->gft, &pb->tensor, mask, &pb->truth, &pb->out, &res));
    CHECK(memcmp(chosen_out, pb->out.data, sizeof(double) * (size_t)count) == 0);
    CHECK_NEAR(res.rmse_missing, truth_errors[sel.chosen_step - 1], 1e-12);

    /* the same seed, the same curve; another seed, another hold-out set */
    lac_impute_selection sel2 = lac_impute_selection_default();
    sel2.curve = again;
    sel2.curve_capacity = 16;
    p.selection = &sel2;
    p.progress = NULL;
    CHECK_OK(serial, lac_impute(serial, &p, pb->gft, &pb->tensor, mask, NULL, &pb->out, NULL));
    CHECK(memcmp(curve, again, sizeof curve) == 0);
    CHECK(memcmp(chosen_out, pb->out.data, sizeof(double) * (size_t)count) == 0);
    p.select_seed = 6;
    CHECK_OK(serial, lac_impute(serial, &p, pb->gft, &pb->tensor, mask, NULL, &pb->out, NULL));
    CHECK(memcmp(curve, again, sizeof(double) * 12) != 0);
    free(chosen_out);
}

TEST(lambda_chosen_by_hold_out_is_the_best_one)
{
    for (int trial = 0; trial < 2; trial++) {
        /* vertices: 70% of the slices observed */
        problem pb;
        problem_make(&pb, 60, 8, 8, 2, 0.7, 31 + (unsigned long long)trial);
        add_noise(&pb, 0.6, 7 + (unsigned long long)trial);
        int64_t observed = 0;
        for (int v = 0; v < pb.N; v++) observed += ((unsigned char *)pb.mask.data)[v];
        check_selection(&pb, &pb.mask, 0, observed, trial == 0);
        /* entries: 70% of them observed */
        unsigned char *entries = malloc((size_t)(pb.N * pb.m * pb.n));
        unsigned long long s = 90 + (unsigned long long)trial;
        observed = 0;
        for (int i = 0; i < pb.N * pb.m * pb.n; i++) observed += entries[i] = harness_rand_uniform(&s) < 0.7;
        int64_t shape[3] = {pb.N, pb.m, pb.n};
        lac_array emask = lac_array_vector(entries, LAC_BOOL, pb.N);
        emask.ndim = 3;
        memcpy(emask.shape, shape, sizeof shape);
        check_selection(&pb, &emask, 1, observed, 0);
        free(entries);
        problem_free(&pb);
    }
}

static int stop_at_once(const lac_impute_iteration *it, void *user)
{
    (void)it;
    (*(int64_t *)user)++;
    return 1;
}

TEST(bad_hold_out_fractions_are_refused)
{
    problem pb;
    problem_make(&pb, 20, 3, 3, 1, 0.5, 2);
    double bad[] = {-0.1, 1.0, 1.5, NAN, INFINITY};
    for (int i = 0; i < 5; i++) {
        lac_impute_params p = lac_impute_params_default();
        p.select_fraction = bad[i];
        CHECK(lac_impute_params_check(&p) != NULL);
        CHECK_STR_CONTAINS(lac_impute_params_check(&p), "select_fraction");
        ((double *)pb.out.data)[0] = 42;
        CHECK_STATUS(serial, lac_impute(serial, &p, pb.gft, &pb.tensor, &pb.mask, NULL, &pb.out, NULL), LAC_ERR_ARGUMENT);
        CHECK(((double *)pb.out.data)[0] == 42);
    }
    lac_impute_params p = lac_impute_params_default();
    p.select_fraction = 0.5;
    /* one observed vertex: nothing to hold out and fit */
    unsigned char one[20] = {0};
    one[3] = 1;
    lac_array mask = lac_array_vector(one, LAC_BOOL, 20);
    CHECK_STATUS(serial, lac_impute(serial, &p, pb.gft, &pb.tensor, &mask, NULL, &pb.out, NULL), LAC_ERR_VALUE);
    CHECK_STR_CONTAINS(lac_last_error(serial), "at least 2 observed vertices");
    CHECK(((double *)pb.out.data)[0] == 42);
    /* two: one held out, whatever the fraction */
    one[7] = 1;
    lac_impute_selection sel = lac_impute_selection_default();
    p.selection = &sel;
    p.select_fraction = 0.01;
    CHECK_OK(serial, lac_impute(serial, &p, pb.gft, &pb.tensor, &mask, NULL, &pb.out, NULL));
    CHECK_INT(sel.held_out, 1);
    p.select_fraction = 0.99;
    CHECK_OK(serial, lac_impute(serial, &p, pb.gft, &pb.tensor, &mask, NULL, &pb.out, NULL));
    CHECK_INT(sel.held_out, 1);
    /* a progress callback that stops: the hold-out walk ends, and the fit
     * (which it stops too) writes its first iteration out */
    lac_impute_params stop = p;
    int64_t calls = 0;
    stop.progress = stop_at_once;
    stop.progress_user = &calls;
    ((double *)pb.out.data)[0] = 42;
    CHECK_STATUS(serial, lac_impute(serial, &stop, pb.gft, &pb.tensor, &mask, NULL, &pb.out, NULL), LAC_INFO_NOT_CONVERGED);
    CHECK_INT(calls, 2);
    CHECK_INT(sel.chosen_step, 1);
    CHECK_INT(sel.steps, 0);
    CHECK(((double *)pb.out.data)[0] != 42);
    /* a report struct not started from its default */
    sel.struct_size = 0;
    CHECK_STATUS(serial, lac_impute(serial, &p, pb.gft, &pb.tensor, &mask, NULL, &pb.out, NULL), LAC_ERR_ARGUMENT);
    CHECK_STR_CONTAINS(lac_last_error(serial), "lac_impute_selection_default");
    problem_free(&pb);
}

static int file_exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

TEST(basis_cache_round_trip_and_validation)
{
    lac_graph_t g = small_graph(16, 3), other = small_graph(16, 4);
    char path[512];
    harness_temp_path(path, sizeof path, "basis.gft");
    remove(path);
    lac_gft_t a = NULL, b = NULL;
    int cached = -1;
    CHECK_OK(ctx, lac_gft_load_or_create(ctx, g, LAC_FLOAT64, path, &a, &cached));
    CHECK_INT(cached, 0);
    CHECK(file_exists(path));
    CHECK_OK(ctx, lac_gft_load_or_create(ctx, g, LAC_FLOAT64, path, &b, &cached));
    CHECK_INT(cached, 1);
    double ua[256], ub[256];
    lac_array A = lac_array_matrix(ua, LAC_FLOAT64, 16, 16), B = lac_array_matrix(ub, LAC_FLOAT64, 16, 16);
    lac_gft_copy(ctx, a, NULL, &A);
    lac_gft_copy(ctx, b, NULL, &B);
    CHECK(memcmp(ua, ub, sizeof ua) == 0);
    lac_gft_destroy(&b);

    lac_gft_t c = NULL;
    CHECK_STATUS(ctx, lac_gft_load(ctx, path, other, LAC_FLOAT64, &c), LAC_ERR_VALUE);
    CHECK_STR_CONTAINS(lac_last_error(ctx), "another graph");
    CHECK_STATUS(ctx, lac_gft_load(ctx, path, g, LAC_FLOAT32, &c), LAC_ERR_VALUE);
    CHECK_STR_CONTAINS(lac_last_error(ctx), "float64");

    /* a flipped byte in U, then a truncated file */
    FILE *fp = fopen(path, "r+b");
    fseek(fp, 40 + 16 * 8 + 100, SEEK_SET);
    int byte = fgetc(fp);
    fseek(fp, 40 + 16 * 8 + 100, SEEK_SET);
    fputc(byte ^ 0x40, fp);
    fclose(fp);
    CHECK_STATUS(ctx, lac_gft_load(ctx, path, g, LAC_FLOAT64, &c), LAC_ERR_FORMAT);
    CHECK_STR_CONTAINS(lac_last_error(ctx), "checksum");
    CHECK(truncate(path, 200) == 0);
    CHECK_STATUS(ctx, lac_gft_load(ctx, path, g, LAC_FLOAT64, &c), LAC_ERR_FORMAT);
    CHECK(c == NULL);
    /* a damaged cache is recomputed and rewritten */
    CHECK_OK(ctx, lac_gft_load_or_create(ctx, g, LAC_FLOAT64, path, &c, &cached));
    CHECK_INT(cached, 0);
    lac_gft_destroy(&c);
    CHECK_OK(ctx, lac_gft_load(ctx, path, g, LAC_FLOAT64, &c));
    lac_gft_destroy(&c);
    CHECK_STATUS(ctx, lac_gft_save(ctx, a, "/nonexistent-folder/basis.gft"), LAC_ERR_IO);
    remove(path);
    lac_gft_destroy(&a);
    lac_graph_destroy(&g);
    lac_graph_destroy(&other);
}

int main(void)
{
    lac_ctx_params p = lac_ctx_params_default();
    p.backend = LAC_BACKEND_CPU;
    if (lac_ctx_create(&p, &ctx) != 0) return 1;
    p.threads = 1;
    if (lac_ctx_create(&p, &serial) != 0) return 1;
    RUN(basis_is_an_orthonormal_eigendecomposition);
    RUN(matches_the_float64_reference);
    RUN(matches_the_reference_with_entry_masks_and_acceleration);
    RUN(recovers_planted_low_rank_graph_tensors);
    RUN(nan_marked_slices_equal_the_slice_mask);
    RUN(generator_is_seeded_low_rank_and_thread_independent);
    RUN(bad_input_is_rejected_and_leaves_out_untouched);
    RUN(progress_reports_every_iteration_and_can_stop);
    RUN(basis_cache_round_trip_and_validation);
    RUN(lambda_chosen_by_hold_out_is_the_best_one);
    RUN(bad_hold_out_fractions_are_refused);
    lac_ctx_destroy(&serial);
    lac_ctx_destroy(&ctx);
    return harness_finish();
}
