/* The canonical GFT basis (src/impute/gft_canonical.c): the same basis
 * whatever rotation and signs the eigensolver returns inside a degenerate
 * eigenspace (and whatever the thread count), checked against the rule
 * written out here in plain loops (the projector P = QQ^T as a matrix, the
 * probes projected by it and Gram-Schmidt in R^N); still an orthonormal
 * eigenbasis; the imputation unchanged by a rotated basis; caches of earlier
 * formats made canonical on load. */
#include "harness.h"
#include "lacuna/lacuna.h"
#include "impute/impute_front.h"
#include "io/basis_cache.h"

#include <stdlib.h>

static lac_ctx_t ctx;

/* ------------------------------------------------------------------------ */
/* Graphs                                                                    */
/* ------------------------------------------------------------------------ */
static lac_graph_t graph_of(int N, int count, const int64_t *src, const int64_t *dst)
{
    lac_array a = lac_array_vector((void *)src, LAC_INT64, count), b = lac_array_vector((void *)dst, LAC_INT64, count);
    lac_graph_t g = NULL;
    CHECK_OK(ctx, lac_graph_from_edges(ctx, N, &a, &b, NULL, &g));
    return g;
}

/* Vertex 0 joined to 1..N-1: eigenvalues 0, 1 (N-2 times), 2. */
static lac_graph_t star(int N)
{
    int64_t src[128], dst[128];
    for (int v = 1; v < N; v++) src[v - 1] = 0, dst[v - 1] = v;
    return graph_of(N, N - 1, src, dst);
}

/* K_N: eigenvalues 0 and N/(N-1) (N-1 times). */
static lac_graph_t complete(int N)
{
    int64_t src[256], dst[256];
    int count = 0;
    for (int u = 0; u < N; u++)
        for (int v = u + 1; v < N; v++) src[count] = u, dst[count++] = v;
    return graph_of(N, count, src, dst);
}

/* A star of 7, a K_5, a path of 3, an edge and an isolated vertex (N = 18),
 * interleaved: eigenvalue 0 four times, 1 seven times (the star's, the
 * path's and the isolated vertex's), 1.25 four times, 2 three times. */
static lac_graph_t mixture(void)
{
    static const int64_t src[] = {3, 3, 3, 3, 3, 3, 1, 1, 1, 1, 6, 6, 6, 9, 9, 12, 0, 5, 8};
    static const int64_t dst[] = {4, 7, 10, 13, 16, 17, 6, 9, 12, 15, 9, 12, 15, 12, 15, 15, 2, 8, 11};
    return graph_of(18, (int)(sizeof src / sizeof *src), src, dst);
}

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */
/* ------------------------------------------------------------------------ */
static double *basis_copy(const struct lac_gft *g)
{
    double *U = malloc(sizeof(double) * (size_t)(g->n * g->n));
    for (int64_t i = 0; i < g->n * g->n; i++)
        U[i] = g->precision == LAC_FLOAT32 ? (double)((float *)g->vectors)[i] : ((double *)g->vectors)[i];
    return U;
}

/* A copy of g whose vectors are U (column-major doubles, rounded to g's precision). */
static struct lac_gft *gft_with(const struct lac_gft *g, const double *U)
{
    int64_t n = g->n;
    struct lac_gft *h = calloc(1, sizeof *h);
    *h = *g;
    h->vectors = malloc((size_t)(n * n) * lac_dtype_size(g->precision));
    h->eigenvalues = malloc(sizeof(double) * (size_t)n);
    memcpy(h->eigenvalues, g->eigenvalues, sizeof(double) * (size_t)n);
    for (int64_t i = 0; i < n * n; i++) {
        if (g->precision == LAC_FLOAT32) ((float *)h->vectors)[i] = (float)U[i];
        else ((double *)h->vectors)[i] = U[i];
    }
    return h;
}

/* Eigenspaces by the library's tolerance: start[k] = first index of k's group. */
static int groups_of(const struct lac_gft *g, int *start)
{
    double tau = lac_gft_degenerate_tolerance(g->precision, g->n, g->eigenvalues);
    int count = 0;
    for (int k = 0; k < g->n; k++) {
        start[k] = k > 0 && g->eigenvalues[k] - g->eigenvalues[k - 1] <= tau ? start[k - 1] : k;
        if (start[k] == k && k + 1 < g->n && g->eigenvalues[k + 1] - g->eigenvalues[k] <= tau) count++;
    }
    return count;
}

/* Gram-Schmidt of the columns of A (rows x cols, column-major), twice. */
static void gram_schmidt(int rows, int cols, double *A)
{
    for (int j = 0; j < cols; j++) {
        for (int pass = 0; pass < 2; pass++)
            for (int p = 0; p < j; p++) {
                double dot = 0;
                for (int i = 0; i < rows; i++) dot += A[i + p * rows] * A[i + j * rows];
                for (int i = 0; i < rows; i++) A[i + j * rows] -= dot * A[i + p * rows];
            }
        double len = 0;
        for (int i = 0; i < rows; i++) len += A[i + j * rows] * A[i + j * rows];
        for (int i = 0; i < rows; i++) A[i + j * rows] /= sqrt(len);
    }
}

/* U with each eigenspace's columns mixed by a random orthogonal matrix and
 * every column's sign flipped at random. */
static void rotate(const struct lac_gft *g, double *U, unsigned long long seed)
{
    int n = (int)g->n, start[64];
    groups_of(g, start);
    unsigned long long s = seed;
    double R[64 * 64], *block = malloc(sizeof(double) * (size_t)(n * n));
    for (int k0 = 0, k1; k0 < n; k0 = k1) {
        for (k1 = k0 + 1; k1 < n && start[k1] == k0; k1++) {
        }
        int d = k1 - k0;
        for (int i = 0; i < d * d; i++) R[i] = harness_rand_uniform(&s) - 0.5;
        gram_schmidt(d, d, R);
        for (int j = 0; j < d; j++) {
            double sign = harness_rand_uniform(&s) < 0.5 ? -1 : 1;
            for (int v = 0; v < n; v++) {
                double x = 0;
                for (int c = 0; c < d; c++) x += U[v + (k0 + c) * n] * R[c + j * d];
                block[v + j * n] = sign * x;
            }
        }
        memcpy(U + (size_t)k0 * (size_t)n, block, sizeof(double) * (size_t)(d * n));
    }
    free(block);
}

static double max_diff(int count, const double *a, const double *b)
{
    double m = 0;
    for (int i = 0; i < count; i++) m = fmax(m, fabs(a[i] - b[i]));
    return m;
}

/* ------------------------------------------------------------------------ */
/* Tests                                                                     */
/* ------------------------------------------------------------------------ */
TEST(rotations_and_signs_give_the_same_basis)
{
    lac_graph_t graphs[4] = {star(9), complete(7), mixture(), star(40)};
    for (int gi = 0; gi < 4; gi++)
        for (int prec = 0; prec < 2; prec++) {
            lac_dtype precision = prec ? LAC_FLOAT64 : LAC_FLOAT32;
            double tol = prec ? 1e-12 : 3e-6;
            lac_gft_t gft = NULL;
            CHECK_OK(ctx, lac_gft_create(ctx, graphs[gi], precision, &gft));
            int n = (int)gft->n, start[64];
            CHECK(groups_of(gft, start) >= 1);
            double *canonical = basis_copy(gft);
            for (unsigned long long seed = 1; seed <= 5; seed++) {
                double *U = basis_copy(gft);
                rotate(gft, U, seed);
                if (!(max_diff(n * n, U, canonical) > 0.05)) HARNESS_FAIL("graph %d: the rotation changed nothing", gi);
                struct lac_gft *h = gft_with(gft, U);
                int64_t groups = -1;
                CHECK_OK(ctx, lac_gft_canonicalize(ctx, precision, n, h->vectors, h->eigenvalues, &groups));
                CHECK(groups >= 1);
                double *V = basis_copy(h), d = max_diff(n * n, V, canonical);
                if (!(d <= tol))
                    HARNESS_FAIL("graph %d, %s, seed %llu: canonical bases differ by %g (> %g)", gi,
                                 lac_dtype_name(precision), seed, d, tol);
                free(V);
                free(U);
                lac_gft_destroy(&h);
            }
            free(canonical);
            lac_gft_destroy(&gft);
        }
    for (int gi = 0; gi < 4; gi++) lac_graph_destroy(&graphs[gi]);
}

static void check_eigendecomposition(lac_graph_t graph, const struct lac_gft *g, double tol)
{
    int n = (int)g->n;
    double *L = malloc(sizeof(double) * (size_t)(n * n)), *U = basis_copy(g);
    lac_array La = lac_array_matrix(L, LAC_FLOAT64, n, n);
    CHECK_OK(ctx, lac_graph_laplacian(ctx, graph, &La));
    double residual = 0, ortho = 0;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < n; k++) {
            double lu = 0, utu = 0;
            for (int j = 0; j < n; j++) {
                lu += L[i * n + j] * U[j + k * n];
                utu += U[j + i * n] * U[j + k * n];
            }
            residual = fmax(residual, fabs(lu - U[i + k * n] * g->eigenvalues[k]));
            ortho = fmax(ortho, fabs(utu - (i == k)));
        }
    if (!(residual <= tol)) HARNESS_FAIL("|L U - U diag(w)|max = %g > %g", residual, tol);
    if (!(ortho <= tol)) HARNESS_FAIL("|U^T U - I|max = %g > %g", ortho, tol);
    free(L);
    free(U);
}

/* The rule as docs/impute.md states it: entry v of probe t is the splitmix64
 * finaliser of v + (t + 1)·0x9E3779B97F4A7C15, its top 53 bits u, 2u/2^53 - 1. */
static double reference_probe(long long t, long long v)
{
    unsigned long long z = (unsigned long long)v + 0x9E3779B97F4A7C15ull * (unsigned long long)(t + 1);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return 2.0 * ((double)(z >> 11) / 9007199254740992.0) - 1.0;
}

/* The canonical basis of the eigenspace with projector P (n x n): probes
 * x_0, x_1, ... projected, y = P x, Gram-Schmidt (twice) against the vectors
 * already made, kept when |y| > sqrt(eps)|x|, else the next spare probe
 * (x_d, x_{d+1}, ...). *spares: spare probes used. */
static void reference_basis(int n, const double *P, int d, double eps, double *E, int *spares)
{
    int next_spare = d;
    *spares = 0;
    for (int j = 0; j < d; j++) {
        double *y = E + j * n;
        for (int t = j;; t = next_spare++, (*spares)++) {
            double xx = 0;
            for (int u = 0; u < n; u++) {
                y[u] = 0;
                for (int v = 0; v < n; v++) y[u] += P[u + v * n] * reference_probe(t, v);
                xx += reference_probe(t, u) * reference_probe(t, u);
            }
            for (int pass = 0; pass < 2; pass++)
                for (int p = 0; p < j; p++) {
                    double dot = 0;
                    for (int u = 0; u < n; u++) dot += E[u + p * n] * y[u];
                    for (int u = 0; u < n; u++) y[u] -= dot * E[u + p * n];
                }
            double len = 0;
            for (int u = 0; u < n; u++) len += y[u] * y[u];
            if (sqrt(len) > sqrt(eps) * sqrt(xx)) {
                for (int u = 0; u < n; u++) y[u] /= sqrt(len);
                break;
            }
        }
    }
}

/* Every eigenspace of g against reference_basis, P formed from U itself
 * (QQ^T does not depend on the rotation); returns spare probes used. */
static int check_against_reference(const char *what, const struct lac_gft *g, const double *U, double tol)
{
    int n = (int)g->n, start[128], spares = 0;
    double eps = g->precision == LAC_FLOAT32 ? 1.1920928955078125e-07 : 2.220446049250313e-16;
    groups_of(g, start);
    double *P = malloc(sizeof(double) * (size_t)(n * n)), *E = malloc(sizeof(double) * (size_t)(n * n));
    for (int k0 = 0, k1; k0 < n; k0 = k1) {
        for (k1 = k0 + 1; k1 < n && start[k1] == k0; k1++) {
        }
        int d = k1 - k0, used;
        for (int u = 0; u < n; u++)
            for (int v = 0; v < n; v++) {
                double x = 0;
                for (int c = k0; c < k1; c++) x += U[u + c * n] * U[v + c * n];
                P[u + v * n] = x;
            }
        reference_basis(n, P, d, eps, E, &used);
        spares += used;
        double diff = max_diff(n * d, U + k0 * n, E);
        if (!(diff <= tol))
            HARNESS_FAIL("%s, %s: eigenspace %d..%d differs from the projected probes by %g (> %g)", what,
                         lac_dtype_name(g->precision), k0, k1 - 1, diff, tol);
    }
    free(P);
    free(E);
    return spares;
}

TEST(the_basis_is_the_projected_probes)
{
    lac_graph_t graphs[4] = {star(9), complete(7), mixture(), star(40)};
    const char *names[4] = {"star of 9", "K_7", "mixture", "star of 40"};
    for (int gi = 0; gi < 4; gi++)
        for (int prec = 0; prec < 2; prec++) {
            lac_dtype precision = prec ? LAC_FLOAT64 : LAC_FLOAT32;
            lac_gft_t gft = NULL;
            CHECK_OK(ctx, lac_gft_create(ctx, graphs[gi], precision, &gft));
            double *U = basis_copy(gft);
            check_against_reference(names[gi], gft, U, prec ? 1e-12 : 3e-6);
            free(U);
            lac_gft_destroy(&gft);
        }
    /* the star of 9's eigenvalue-1 eigenspace is the leaves' I - J/8: the
     * library finds it and its vectors are spread over the leaves (a pivoted
     * basis put half of each vector's weight on one leaf) */
    lac_gft_t gft = NULL;
    CHECK_OK(ctx, lac_gft_create(ctx, graphs[0], LAC_FLOAT64, &gft));
    int start[64];
    CHECK_INT(groups_of(gft, start), 1);
    CHECK(start[1] == 1 && start[7] == 1 && start[8] == 8);
    double *U = basis_copy(gft), P[81], E[81];
    for (int u = 0; u < 9; u++)
        for (int v = 0; v < 9; v++) P[u + v * 9] = (u > 0 && v > 0) ? (u == v) - 1.0 / 8 : 0;
    int used;
    reference_basis(9, P, 7, 2.220446049250313e-16, E, &used);
    CHECK_INT(used, 0);
    CHECK(max_diff(9 * 7, U + 9, E) <= 1e-12);
    free(U);
    lac_gft_destroy(&gft);
    for (int gi = 0; gi < 4; gi++) lac_graph_destroy(&graphs[gi]);
}

/* A made-up orthonormal basis whose eigenspace {1, 2} and simple vector 3 are
 * orthogonal to probe x_0: both need a spare probe. */
TEST(a_probe_outside_the_eigenspace_gives_way_to_a_spare)
{
    enum { n = 6 };
    double U[n * n], w[n] = {0, 1, 1, 2, 3, 4};
    unsigned long long s = 5;
    for (int v = 0; v < n; v++) U[v] = reference_probe(0, v);
    for (int i = n; i < n * n; i++) U[i] = harness_rand_uniform(&s) - 0.5;
    gram_schmidt(n, n, U);   /* columns 1.. orthogonal to x_0 */
    struct lac_gft g = {0};
    g.n = n;
    g.precision = LAC_FLOAT64;
    g.vectors = U;
    g.eigenvalues = w;
    int64_t groups = 0;
    double input[n * n];
    memcpy(input, U, sizeof U);
    CHECK_OK(ctx, lac_gft_canonicalize(ctx, LAC_FLOAT64, n, U, w, &groups));
    CHECK_INT(groups, 1);
    CHECK(max_diff(n * n, U, input) > 0.05);
    /* x_0 lies in column 0's span, so every other vector needs a spare:
     * one for the eigenspace {1, 2} and one for each of 3, 4, 5 */
    CHECK_INT(check_against_reference("made-up basis", &g, U, 1e-12), 4);
    /* and the basis is the same from a rotated one */
    double again[n * n];
    memcpy(again, input, sizeof again);
    g.vectors = again;
    rotate(&g, again, 2);
    CHECK_OK(ctx, lac_gft_canonicalize(ctx, LAC_FLOAT64, n, again, w, NULL));
    CHECK(max_diff(n * n, again, U) <= 1e-12);
}

/* The same basis, bit for bit, from the same input whatever the thread count
 * (the star of 64 is large enough for the loops to use threads). */
TEST(thread_counts_give_the_same_bits)
{
    lac_graph_t g = star(64);
    lac_gft_t gft = NULL;
    CHECK_OK(ctx, lac_gft_create(ctx, g, LAC_FLOAT64, &gft));
    double *rotated = basis_copy(gft), *first = NULL;
    rotate(gft, rotated, 11);
    for (int threads = 1; threads <= 3; threads++) {
        lac_ctx_params p = lac_ctx_params_default();
        p.backend = LAC_BACKEND_CPU;
        p.threads = threads;
        lac_ctx_t c = NULL;
        CHECK(lac_ctx_create(&p, &c) == 0);
        double *U = malloc(sizeof(double) * 64 * 64);
        memcpy(U, rotated, sizeof(double) * 64 * 64);
        CHECK_OK(c, lac_gft_canonicalize(c, LAC_FLOAT64, 64, U, gft->eigenvalues, NULL));
        if (!first) first = U;
        else {
            CHECK(memcmp(first, U, sizeof(double) * 64 * 64) == 0);
            free(U);
        }
        lac_ctx_destroy(&c);
    }
    free(first);
    free(rotated);
    lac_gft_destroy(&gft);
    lac_graph_destroy(&g);
}

TEST(still_an_orthonormal_eigenbasis)
{
    lac_graph_t graphs[4] = {star(9), complete(7), mixture(), star(40)};
    for (int gi = 0; gi < 4; gi++)
        for (int prec = 0; prec < 2; prec++) {
            lac_gft_t gft = NULL;
            CHECK_OK(ctx, lac_gft_create(ctx, graphs[gi], prec ? LAC_FLOAT64 : LAC_FLOAT32, &gft));
            check_eigendecomposition(graphs[gi], gft, prec ? 1e-12 : 1e-5);
            lac_gft_destroy(&gft);
        }
    for (int gi = 0; gi < 4; gi++) lac_graph_destroy(&graphs[gi]);
}

TEST(imputation_is_the_same_with_a_rotated_basis)
{
    lac_graph_t g = mixture();
    for (int prec = 0; prec < 2; prec++) {
        lac_dtype precision = prec ? LAC_FLOAT64 : LAC_FLOAT32;
        lac_gft_t gft = NULL;
        CHECK_OK(ctx, lac_gft_create(ctx, g, precision, &gft));
        const int N = 18, m = 5, n = 4, mn = m * n;
        int64_t shape[3] = {N, m, n};
        lac_array tensor, out[3];
        CHECK_OK(ctx, lac_array_alloc(ctx, LAC_FLOAT64, 3, shape, &tensor));
        /* rank-1 spectral slices through the canonical basis, a third of the vertices unobserved */
        double *U = basis_copy(gft), *hat = malloc(sizeof(double) * (size_t)(N * mn));
        unsigned long long s = 17;
        for (int k = 0; k < N; k++) {
            double a[5], b[4];
            for (int i = 0; i < m; i++) a[i] = harness_rand_uniform(&s) - 0.5;
            for (int j = 0; j < n; j++) b[j] = harness_rand_uniform(&s) - 0.5;
            for (int i = 0; i < m; i++)
                for (int j = 0; j < n; j++) hat[k * mn + i * n + j] = a[i] * b[j];
        }
        for (int v = 0; v < N; v++)
            for (int e = 0; e < mn; e++) {
                double x = 0;
                for (int k = 0; k < N; k++) x += U[v + k * N] * hat[k * mn + e];
                ((double *)tensor.data)[v * mn + e] = x;
            }
        unsigned char obs[18];
        for (int v = 0; v < N; v++) obs[v] = v % 3 != 1;
        lac_array mask = lac_array_vector(obs, LAC_BOOL, N);
        double *rotated = basis_copy(gft);
        rotate(gft, rotated, 3);
        struct lac_gft *raw = gft_with(gft, rotated), *fixed = gft_with(gft, rotated);
        CHECK_OK(ctx, lac_gft_canonicalize(ctx, precision, N, fixed->vectors, fixed->eigenvalues, NULL));
        struct lac_gft *bases[3] = {gft, fixed, raw};
        lac_impute_params p = lac_impute_params_default();
        p.steps = 5;
        p.output = LAC_IMPUTE_ESTIMATE;
        for (int b = 0; b < 3; b++) {
            CHECK_OK(ctx, lac_array_alloc(ctx, LAC_FLOAT64, 3, shape, &out[b]));
            CHECK_OK(ctx, lac_impute(ctx, &p, bases[b], &tensor, &mask, NULL, &out[b], NULL));
        }
        double same = max_diff(N * mn, out[1].data, out[0].data), other = max_diff(N * mn, out[2].data, out[0].data);
        printf("    %s: rotated and made canonical %.3g, rotated only %.3g\n", lac_dtype_name(precision), same, other);
        if (!(same <= (prec ? 1e-10 : 1e-4))) HARNESS_FAIL("the rotated canonical basis changes the result by %g", same);
        /* the rotation does matter without the canonical basis */
        if (!(other > 1e-3)) HARNESS_FAIL("a rotated basis changed the result by only %g", other);
        for (int b = 0; b < 3; b++) lac_array_release(&out[b]);
        lac_gft_destroy(&raw);
        lac_gft_destroy(&fixed);
        lac_gft_destroy(&gft);
        lac_array_release(&tensor);
        free(U);
        free(hat);
        free(rotated);
    }
    lac_graph_destroy(&g);
}

static void set_version_byte(const char *path, int version)
{
    FILE *fp = fopen(path, "r+b");
    CHECK(fp != NULL);
    fseek(fp, 7, SEEK_SET);
    fputc(version, fp);
    fclose(fp);
}

static int version_byte(const char *path)
{
    FILE *fp = fopen(path, "rb");
    CHECK(fp != NULL);
    fseek(fp, 7, SEEK_SET);
    int v = fgetc(fp);
    fclose(fp);
    return v;
}

TEST(old_caches_are_made_canonical_on_load)
{
    lac_graph_t g = mixture();
    char path[512];
    harness_temp_path(path, sizeof path, "canonical.gft");
    remove(path);
    lac_gft_t gft = NULL, loaded = NULL, again = NULL;
    CHECK_OK(ctx, lac_gft_create(ctx, g, LAC_FLOAT64, &gft));
    double *canonical = basis_copy(gft), *U = basis_copy(gft);
    rotate(gft, U, 9);
    struct lac_gft *rotated = gft_with(gft, U);
    /* files of formats 1 (a solver's rotated basis) and 2 (an earlier rule's) */
    CHECK_OK(ctx, lac_gft_save(ctx, rotated, path));
    CHECK_INT(version_byte(path), LAC_BASIS_CACHE_VERSION);
    for (int version = 1; version < LAC_BASIS_CACHE_VERSION; version++) {
        set_version_byte(path, version);
        CHECK_OK(ctx, lac_gft_load(ctx, path, g, LAC_FLOAT64, &loaded));
        double *V = basis_copy(loaded);
        CHECK(max_diff(18 * 18, V, canonical) <= 1e-12);
        free(V);
        lac_gft_destroy(&loaded);
    }
    /* a current-format file is taken as it is */
    set_version_byte(path, LAC_BASIS_CACHE_VERSION);
    CHECK_OK(ctx, lac_gft_load(ctx, path, g, LAC_FLOAT64, &loaded));
    CHECK(memcmp(loaded->vectors, rotated->vectors, sizeof(double) * 18 * 18) == 0);
    lac_gft_destroy(&loaded);
    set_version_byte(path, 1);
    /* load_or_create rewrites it in the current format */
    int cached = 0;
    CHECK_OK(ctx, lac_gft_load_or_create(ctx, g, LAC_FLOAT64, path, &loaded, &cached));
    CHECK_INT(cached, 1);
    CHECK_INT(version_byte(path), LAC_BASIS_CACHE_VERSION);
    CHECK_OK(ctx, lac_gft_load(ctx, path, g, LAC_FLOAT64, &again));
    CHECK(memcmp(loaded->vectors, again->vectors, sizeof(double) * 18 * 18) == 0);
    lac_gft_destroy(&again);
    /* a later format is refused, by name */
    set_version_byte(path, LAC_BASIS_CACHE_VERSION + 1);
    CHECK_STATUS(ctx, lac_gft_load(ctx, path, g, LAC_FLOAT64, &again), LAC_ERR_FORMAT);
    char later[32];
    snprintf(later, sizeof later, "format %d", LAC_BASIS_CACHE_VERSION + 1);
    CHECK_STR_CONTAINS(lac_last_error(ctx), later);
    CHECK(again == NULL);
    remove(path);
    free(canonical);
    free(U);
    lac_gft_destroy(&rotated);
    lac_gft_destroy(&loaded);
    lac_gft_destroy(&gft);
    lac_graph_destroy(&g);
}

int main(void)
{
    lac_ctx_params p = lac_ctx_params_default();
    p.backend = LAC_BACKEND_CPU;
    if (lac_ctx_create(&p, &ctx) != 0) return 1;
    RUN(rotations_and_signs_give_the_same_basis);
    RUN(the_basis_is_the_projected_probes);
    RUN(a_probe_outside_the_eigenspace_gives_way_to_a_spare);
    RUN(still_an_orthonormal_eigenbasis);
    RUN(thread_counts_give_the_same_bits);
    RUN(imputation_is_the_same_with_a_rotated_basis);
    RUN(old_caches_are_made_canonical_on_load);
    lac_ctx_destroy(&ctx);
    return harness_finish();
}
