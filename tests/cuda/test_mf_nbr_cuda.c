/* The neighbourhood model and the neighbour search on CUDA (GPU test, label
 * "cuda"), against the CPU backend:
 *  - one epoch of users with disjoint items (no Hogwild conflicts, bhat of
 *    the residuals taken at the epoch's start on both) gives the CPU's
 *    parameters to rounding, for every register layout: F = K = 32 (8 lanes,
 *    4 neighbour slots each), small F and K not multiples of 32 (F = 20,
 *    K = 6), F = 40 with K = 40, F = 128 with K = 16, and the general path
 *    (F = 300, K = 300); for K <= 32 both with the per-rating neighbour
 *    masks (the default, 32 lanes a group; 8 and 16 through the knob) and
 *    with the knob that searches every epoch;
 *  - trained with early stopping on generated data with planted item
 *    neighbourhoods, the validation RMSE is within 0.005 of the CPU's, and
 *    better than plain MF's on the GPU with the same F; predictions of the
 *    downloaded model reproduce it;
 *  - exact GSM gives the CPU's lists, item for item, with int8 GEMMs (half
 *    stars, the default) and fp16 ones (forced by the knob);
 *  - so does simLSH for the same seed: sums on the GPU where they are exact
 *    (half stars), items with more candidates than the GPU counts left to
 *    the CPU, real-valued ratings summed on the host; in many chunks, from
 *    triples out of user order with repeated pairs, holding no more memory
 *    for four times the ratings;
 *  - a CUDA context's training searches simLSH on the GPU (its log says so)
 *    and keeps the CPU training's sums, bit for bit, its keys and lists,
 *    also in many chunks; online updates of either model give the same. */
#include "harness.h"
#include "cuda_harness.h"
#include "lacuna/lacuna.h"
#include "mf/mf_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* cpu: one thread; cpu_all: every core; gpu_fp16: GSM in fp16; gpu_chunks:
 * simLSH in chunks of 4,096 ratings; gpu_search: no masks; gpu_lanes[i]:
 * the masked kernel with 8 or 16 lanes a group */
static lac_ctx_t gpu, gpu_fp16, gpu_chunks, gpu_search, gpu_lanes[2], gpu_logged, cpu, cpu_all;

/* gpu_logged's messages: whether the GPU's simLSH served a search */
static int simlsh_on_gpu;
static void note_log(lac_log_level level, const char *message, void *user)
{
    (void)level;
    (void)user;
    if (strstr(message, "simLSH on the GPU,")) simlsh_on_gpu = 1;
}

/* users x per ratings, user u rating items u * per .. u * per + per - 1. */
static lac_ratings_t disjoint_ratings(int users, int per)
{
    int64_t n = (int64_t)users * per;
    int64_t *u = malloc(sizeof(int64_t) * (size_t)n), *i = malloc(sizeof(int64_t) * (size_t)n);
    float *v = malloc(sizeof(float) * (size_t)n);
    unsigned long long s = 42;
    for (int64_t a = 0; a < n; a++) {
        u[a] = a / per;
        i[a] = a;
        v[a] = (float)(1 + (int)(harness_rand_uniform(&s) * 9) * 0.5);
    }
    lac_ratings_t r = NULL;
    CHECK_OK(cpu, lac_ratings_from_arrays(cpu, n, u, i, v, &r));
    free(u);
    free(i);
    free(v);
    return r;
}

/* A model of the data with random factors, W and C, and lists that mix the
 * user's other items (R^K) with random ones (N^K). */
static lac_mf_model_t random_model(const lac_mf_data *d, int F, int K, int per, uint64_t seed)
{
    lac_mf_model_t m = NULL;
    CHECK_OK(cpu, lac_mf_model_alloc(cpu, d->num_users, d->num_items, F, &m));
    CHECK_OK(cpu, lac_mf_model_alloc_nbr(cpu, m, K));
    m->params.model = LAC_MF_MODEL_NEIGHBOURHOOD;
    m->params.use_bias = 1;
    m->params.rates = (lac_mf_groups){0.03, 0.02, 0.04, 0.05, 0.01, 0.015};
    m->params.lambdas = (lac_mf_groups){0.02, 0.03, 0.04, 0.05, 0.06, 0.07};
    m->mean = d->mean;
    m->rating_min = d->min;
    m->rating_max = d->max;
    unsigned long long s = seed;
    for (int64_t u = 0; u < d->num_users; u++) {
        for (int f = 0; f < F; f++) m->P[u * m->stride + f] = (float)(0.3 * harness_rand_uniform(&s));
        m->user_bias[u] = (float)(0.2 * harness_rand_uniform(&s) - 0.1);
    }
    int64_t ni = d->num_items;
    for (int64_t j = 0; j < ni; j++) {
        for (int f = 0; f < F; f++) m->Q[j * m->stride + f] = (float)(0.3 * harness_rand_uniform(&s));
        m->item_bias[j] = (float)(0.2 * harness_rand_uniform(&s) - 0.1);
        int32_t *nb = m->nbr + j * K;
        int have = 0;
        int64_t first = j / per * per;   /* the same user's items (dense index = item id here) */
        for (int64_t x = first; x < first + per && have < K / 2; x++)
            if (x != j) nb[have++] = (int32_t)x;
        lac_nbr_fill(seed, j, ni, K, nb, have);
        for (int k = 0; k < K; k++) {
            m->W[j * K + k] = (float)(0.2 * harness_rand_uniform(&s) - 0.1);
            m->C[j * K + k] = (float)(0.2 * harness_rand_uniform(&s) - 0.1);
        }
    }
    /* R(i): the items ascending with their ratings */
    m->rated_vals = malloc(sizeof(float) * (size_t)d->nnz);
    m->rated_items = malloc(sizeof(int32_t) * (size_t)d->nnz);
    for (int64_t u = 0; u <= d->num_users; u++) m->rated_start[u] = d->row_start[u];
    for (int64_t a = 0; a < d->nnz; a++) {
        m->rated_items[a] = d->col[a];
        m->rated_vals[a] = d->val[a];
    }
    return m;
}

static double largest_gap(const float *a, const float *b, int64_t n)
{
    double worst = 0;
    for (int64_t x = 0; x < n; x++) worst = fmax(worst, fabs((double)a[x] - b[x]));
    return worst;
}

TEST(one_epoch_of_disjoint_users_matches_the_cpu)
{
    const int per = 40;
    lac_ratings_t r = disjoint_ratings(64, per);
    lac_mf_data d;
    CHECK_OK(cpu, lac_mf_data_build(cpu, r, &d));
    /* each user's items ascending, as R(i) must be */
    for (int64_t u = 0; u < d.num_users; u++)
        for (int64_t a = d.row_start[u] + 1; a < d.row_start[u + 1]; a++)
            if (d.col[a] <= d.col[a - 1]) HARNESS_FAIL("user %lld: items not ascending", (long long)u);
    int Fs[] = {32, 20, 40, 128, 300}, Ks[] = {32, 6, 40, 16, 300};
    const lac_mf_backend *cu = lac_mf_backend_cuda();
    CHECK(cu && cu->neighbourhood);
    lac_ctx_t ctxs[4] = {gpu, gpu_search, gpu_lanes[0], gpu_lanes[1]};
    const char *hows[4] = {"", " (searching)", " (8 lanes)", " (16 lanes)"};
    for (int run = 0; run < 20 && cu; run++) {
        const int c = run % 5;
        lac_ctx_t g = ctxs[run / 5];
        int F = Fs[c], K = Ks[c] < d.num_items ? Ks[c] : (int)d.num_items - 1;
        lac_mf_model_t a = random_model(&d, F, K, per, 9 + c), b = random_model(&d, F, K, per, 9 + c);
        lac_mf_call ca = lac_mf_model_call(a, &d, NULL), cb = lac_mf_model_call(b, &d, NULL);
        lac_mf_state *sa = NULL, *sb = NULL;
        double ea = 0, eb = 0;
        CHECK_OK(cpu, lac_mf_cpu_backend.begin(cpu, &ca, &sa));
        CHECK_OK(cpu, lac_mf_cpu_backend.epoch(cpu, sa, 0.7f, 0, &ea));
        CHECK_OK(g, cu->begin(g, &cb, &sb));
        if (sb) {
            CHECK_OK(g, cu->epoch(g, sb, 0.7f, 0, &eb));
            CHECK_OK(g, cu->download(g, sb));
        }
        double worst = 0;
        worst = fmax(worst, largest_gap(a->P, b->P, a->num_users * a->stride));
        worst = fmax(worst, largest_gap(a->Q, b->Q, a->num_items * a->stride));
        worst = fmax(worst, largest_gap(a->user_bias, b->user_bias, a->num_users));
        worst = fmax(worst, largest_gap(a->item_bias, b->item_bias, a->num_items));
        worst = fmax(worst, largest_gap(a->W, b->W, a->num_items * K));
        worst = fmax(worst, largest_gap(a->C, b->C, a->num_items * K));
        const char *how = hows[run / 5];
        printf("    F = %d, K = %d%s: largest gap %.3g, sse CPU %.6g CUDA %.6g\n", F, K, how, worst, ea, eb);
        if (worst > 5e-5) HARNESS_FAIL("F = %d, K = %d%s: CUDA and CPU parameters differ by %g", F, K, how, worst);
        CHECK_NEAR(eb, ea, 1e-4 * ea);
        lac_mf_cpu_backend.end(cpu, sa);
        cu->end(g, sb);
        lac_mf_model_destroy(&a);
        lac_mf_model_destroy(&b);
    }
    lac_mf_data_free(&d);
    lac_ratings_destroy(&r);
}

static void split_clustered(int64_t users, int64_t items, int64_t ratings, int clusters, uint64_t seed,
                            lac_ratings_t *train, lac_ratings_t *valid)
{
    lac_mf_gen_params g = lac_mf_gen_params_default();
    g.users = users;
    g.items = items;
    g.ratings = ratings;
    g.item_clusters = clusters;
    g.cluster_strength = 1.0;
    g.seed = seed;
    lac_ratings_t all = NULL;
    CHECK_OK(cpu, lac_mf_generate(cpu, &g, &all));
    lac_mf_split_params sp = lac_mf_split_params_default();
    CHECK_OK(cpu, lac_mf_split(cpu, &sp, all, train, valid));
    lac_ratings_destroy(&all);
}

static void train_both(lac_ratings_t train, lac_ratings_t valid, int F, int K, lac_mf_nbr_method method)
{
    lac_mf_params p = lac_mf_params_default();
    p.model = LAC_MF_MODEL_NEIGHBOURHOOD;
    p.k = F;
    p.epochs = 100;
    p.neighbours.method = method;
    p.neighbours.k = K;
    lac_mf_params plain = lac_mf_params_default();
    plain.k = F;
    plain.epochs = 100;
    lac_mf_model_t a = NULL, b = NULL, c = NULL;
    lac_mf_report ra, rb, rc;
    CHECK_OK(cpu_all, lac_mf_train(cpu_all, &p, train, valid, NULL, NULL, &a, &ra));
    CHECK_OK(gpu, lac_mf_train(gpu, &p, train, valid, NULL, NULL, &b, &rb));
    CHECK_OK(gpu, lac_mf_train(gpu, &plain, train, valid, NULL, NULL, &c, &rc));
    if (!a || !b || !c) return;
    printf("    F = %d, K = %d (%s): valid RMSE CPU %.4f (%d epochs), CUDA %.4f (%d epochs), plain MF on CUDA %.4f\n",
           F, K, lac_mf_nbr_method_name(method), ra.valid_rmse, ra.epochs, rb.valid_rmse, rb.epochs, rc.valid_rmse);
    if (!(fabs(ra.valid_rmse - rb.valid_rmse) <= 0.005))
        HARNESS_FAIL("F = %d, K = %d: CUDA valid RMSE %.5f vs CPU %.5f", F, K, rb.valid_rmse, ra.valid_rmse);
    if (!(rb.valid_rmse < rc.valid_rmse))
        HARNESS_FAIL("F = %d, K = %d: neighbourhood %.5f not better than plain %.5f", F, K, rb.valid_rmse,
                     rc.valid_rmse);
    double rmse = NAN;
    CHECK_OK(cpu_all, lac_mf_predict(cpu_all, b, valid, NULL, &rmse, NULL, NULL));
    CHECK_NEAR(rmse, rb.valid_rmse, 1e-4);
    lac_mf_model_destroy(&a);
    lac_mf_model_destroy(&b);
    lac_mf_model_destroy(&c);
}

TEST(trained_rmse_within_0005_of_the_cpu)
{
    /* a 20,000 x 3,000 shape with 100 planted clusters, 1 M ratings (items
     * popular enough for replica rows) */
    lac_ratings_t train = NULL, valid = NULL;
    split_clustered(20000, 3000, 1000000, 100, 5, &train, &valid);
    train_both(train, valid, 32, 32, LAC_MF_NBR_GSM);
    train_both(train, valid, 20, 20, LAC_MF_NBR_SIMLSH);   /* F and K not multiples of 32 */
    lac_ratings_destroy(&train);
    lac_ratings_destroy(&valid);
}

/* The lists of ratings by the GPU (context g) and the CPU for params np:
 * the same, item for item (ties and simLSH's random fill included). Returns
 * the GPU search's bytes. */
static int64_t same_lists(lac_ctx_t g, lac_ratings_t r, const lac_mf_nbr_params *np, const char *what)
{
    int K = np->k;
    const char *m = lac_mf_nbr_method_name(np->method);
    lac_mf_nbr_t a = NULL, b = NULL;
    CHECK_OK(cpu_all, lac_mf_neighbours(cpu_all, np, r, &a));
    CHECK_OK(g, lac_mf_neighbours(g, np, r, &b));
    if (!a || !b) return 0;
    int64_t differ = 0, first = -1, bytes = lac_mf_nbr_bytes(b);
    for (int64_t x = 0; x < a->num_items * K; x++)
        if (a->list[x] != b->list[x]) {
            if (first < 0) first = x;
            differ++;
        }
    printf("    %s %s%s, K = %d, q = %d, G = %d, psi r^%d: %lld items, CPU %.3f s, GPU %.3f s (%.2f MB), %lld entries "
           "differ\n", m, what, g == gpu_fp16 ? " (fp16 GEMMs)" : g == gpu_chunks ? " (chunks of 4,096)" : "", K, np->q,
           np->bits, np->psi_power, (long long)a->num_items, lac_mf_nbr_seconds(a), lac_mf_nbr_seconds(b),
           bytes / 1048576.0, (long long)differ);
    if (differ)
        HARNESS_FAIL("%s %s: lists differ at item %lld, place %lld: CPU %d, GPU %d", m, what, (long long)(first / K),
                     (long long)(first % K), a->list[first], b->list[first]);
    lac_mf_nbr_destroy(&a);
    lac_mf_nbr_destroy(&b);
    return bytes;
}

static void same_gsm_lists(lac_ctx_t g, lac_ratings_t r, int K, const char *what)
{
    lac_mf_nbr_params np = lac_mf_nbr_params_default();
    np.method = LAC_MF_NBR_GSM;
    np.k = K;
    same_lists(g, r, &np, what);
}

TEST(gsm_lists_are_the_cpus)
{
    lac_ratings_t train = NULL, valid = NULL;
    split_clustered(20000, 3000, 1000000, 100, 5, &train, &valid);
    same_gsm_lists(gpu, train, 32, "clustered 20,000 x 3,000");
    same_gsm_lists(gpu, train, 20, "clustered 20,000 x 3,000");
    same_gsm_lists(gpu_fp16, train, 32, "clustered 20,000 x 3,000");
    lac_ratings_destroy(&train);
    lac_ratings_destroy(&valid);
    /* sparse: most pairs share fewer than two users, S = 0 ties to the lower index */
    split_clustered(400, 300, 2000, 0, 7, &train, &valid);
    same_gsm_lists(gpu, train, 32, "sparse 400 x 300");
    same_gsm_lists(gpu_fp16, train, 32, "sparse 400 x 300");
    lac_ratings_destroy(&train);
    lac_ratings_destroy(&valid);
    /* ratings off fp16's grid: the CPU's table serves the GPU context */
    int64_t n = 3000;
    int64_t *u = malloc(sizeof(int64_t) * (size_t)n), *i = malloc(sizeof(int64_t) * (size_t)n);
    float *v = malloc(sizeof(float) * (size_t)n);
    unsigned long long s = 11;
    for (int64_t x = 0; x < n; x++) {
        u[x] = (int64_t)(harness_rand_uniform(&s) * 200);
        i[x] = (int64_t)(harness_rand_uniform(&s) * 100);
        v[x] = (float)(1.0 + 4.0 * harness_rand_uniform(&s));
    }
    lac_ratings_t odd = NULL;
    CHECK_OK(cpu, lac_ratings_from_arrays(cpu, n, u, i, v, &odd));
    same_gsm_lists(gpu, odd, 8, "real-valued ratings");
    /* half stars (int8 inputs 2r, 4r^2), and negative ones */
    for (int64_t x = 0; x < n; x++) v[x] = (float)(x % 3 ? 0.5 * (int)(v[x] * 2.0f) : -0.5 * (int)(v[x] * 2.0f));
    lac_ratings_t half = NULL;
    CHECK_OK(cpu, lac_ratings_from_arrays(cpu, n, u, i, v, &half));
    same_gsm_lists(gpu, half, 8, "signed half stars");
    same_gsm_lists(gpu_fp16, half, 8, "signed half stars");
    lac_ratings_destroy(&half);
    lac_ratings_destroy(&odd);
    free(u);
    free(i);
    free(v);
}

static int64_t simlsh_lists_on(lac_ctx_t g, lac_ratings_t r, int K, int q, int bits, int psi, const char *what)
{
    lac_mf_nbr_params np = lac_mf_nbr_params_default();
    np.method = LAC_MF_NBR_SIMLSH;
    np.k = K;
    np.q = q;
    np.bits = bits;
    np.psi_power = psi;
    np.seed = 3;
    return same_lists(g, r, &np, what);
}

static void same_simlsh_lists(lac_ratings_t r, int K, int q, int bits, int psi, const char *what)
{
    simlsh_lists_on(gpu, r, K, q, bits, psi, what);
}

TEST(simlsh_lists_are_the_cpus)
{
    lac_ratings_t train = NULL, valid = NULL;
    split_clustered(20000, 3000, 1000000, 100, 5, &train, &valid);
    same_simlsh_lists(train, 32, 100, 8, 2, "clustered 20,000 x 3,000");
    same_simlsh_lists(train, 20, 30, 20, 4, "clustered 20,000 x 3,000");   /* codes across two hash words */
    simlsh_lists_on(gpu_chunks, train, 32, 100, 8, 2, "clustered 20,000 x 3,000");   /* ~200 chunks */
    lac_ratings_destroy(&train);
    lac_ratings_destroy(&valid);
    /* small keys (G = 2): buckets of ~80 items, counts tied */
    split_clustered(6000, 5000, 60000, 0, 9, &train, &valid);
    same_simlsh_lists(train, 16, 12, 2, 2, "sparse 6,000 x 5,000, G = 2");
    lac_ratings_destroy(&train);
    lac_ratings_destroy(&valid);
    /* 80 items rated by one user alike share every bucket: 79 x 100
     * candidates each, more than the GPU's shared memory holds (the CPU
     * counts them); the rest are real-valued (the host's sums) or half stars */
    int64_t n = 4000;
    int64_t *u = malloc(sizeof(int64_t) * (size_t)n), *i = malloc(sizeof(int64_t) * (size_t)n);
    float *v = malloc(sizeof(float) * (size_t)n);
    for (int pass = 0; pass < 2; pass++) {
        unsigned long long s = 13;
        for (int64_t x = 0; x < n; x++) {
            int alike = x < 80;
            u[x] = alike ? 0 : 1 + (int64_t)(harness_rand_uniform(&s) * 300);
            i[x] = alike ? x : 80 + (int64_t)(harness_rand_uniform(&s) * 200);
            v[x] = alike ? 4.0f
                   : pass ? (float)(1.0 + 4.0 * harness_rand_uniform(&s))
                          : (float)(1 + (int)(harness_rand_uniform(&s) * 9) * 0.5);
        }
        lac_ratings_t odd = NULL;
        CHECK_OK(cpu, lac_ratings_from_arrays(cpu, n, u, i, v, &odd));
        same_simlsh_lists(odd, 8, 100, 8, 2, pass ? "shared buckets, real-valued ratings" : "shared buckets, half stars");
        lac_ratings_destroy(&odd);
    }
    free(u);
    free(i);
    free(v);
}

/* Triples out of user order with repeated pairs (the last rating counts),
 * in chunks of 4,096 ratings (one pass over the triples each) and sorted a
 * table at a time: the CPU's lists; four times the ratings, the same items
 * and users, and the search holds no more (nothing a rating). */
TEST(simlsh_chunks_are_the_cpus)
{
    int64_t bytes[2] = {0, 0};
    for (int x = 0; x < 2; x++) {
        int64_t n = x ? 240000 : 60000;
        int64_t *u = malloc(sizeof(int64_t) * (size_t)n), *i = malloc(sizeof(int64_t) * (size_t)n);
        float *v = malloc(sizeof(float) * (size_t)n);
        unsigned long long s = 17 + (unsigned long long)x;
        for (int64_t a = 0; a < n; a++) {
            u[a] = a < 2000 ? a : (int64_t)(harness_rand_uniform(&s) * 2000);
            i[a] = a < 1500 ? a : (int64_t)(harness_rand_uniform(&s) * 1500);
            v[a] = (float)(0.5 * (1 + (int)(harness_rand_uniform(&s) * 10)));
        }
        lac_ratings_t r = NULL;
        CHECK_OK(cpu, lac_ratings_from_arrays(cpu, n, u, i, v, &r));
        bytes[x] = simlsh_lists_on(gpu_chunks, r, 16, 40, 8, 2, x ? "240,000 unordered, repeated pairs"
                                                                  : "60,000 unordered, repeated pairs");
        if (x) simlsh_lists_on(gpu, r, 16, 40, 8, 2, "240,000 unordered, repeated pairs");
        lac_ratings_destroy(&r);
        free(u);
        free(i);
        free(v);
    }
    printf("    bytes: %lld with 60,000 ratings, %lld with 240,000\n", (long long)bytes[0], (long long)bytes[1]);
    CHECK(bytes[0] > 0 && bytes[1] <= bytes[0] + bytes[0] / 20);
}

/* Model b's sums, keys and lists are model a's, byte for byte. */
static void same_kept(lac_mf_model_t a, lac_mf_model_t b, const char *what)
{
    CHECK(a->codes && b->codes && a->keys && b->keys);
    if (!a->codes || !b->codes || !a->keys || !b->keys) return;
    CHECK_INT(a->num_items, b->num_items);
    CHECK_INT(a->code_cols, b->code_cols);
    CHECK_INT(a->nbr_k, b->nbr_k);
    if (a->num_items != b->num_items || a->code_cols != b->code_cols || a->nbr_k != b->nbr_k) return;
    int64_t n = a->num_items, differ = 0;
    for (int64_t x = 0; x < n * a->code_cols; x++) differ += memcmp(&a->codes[x], &b->codes[x], sizeof(float)) != 0;
    int64_t keys = 0, lists = 0, nonzero = 0;
    for (int64_t x = 0; x < n * a->params.neighbours.q; x++) keys += a->keys[x] != b->keys[x];
    for (int64_t x = 0; x < n * a->nbr_k; x++) lists += a->nbr[x] != b->nbr[x];
    for (int64_t x = 0; x < n * a->code_cols; x++) nonzero += a->codes[x] != 0.0f;
    printf("    %s: %lld items x %lld sums (%lld nonzero): %lld sums, %lld keys, %lld list entries differ\n", what,
           (long long)n, (long long)a->code_cols, (long long)nonzero, (long long)differ, (long long)keys,
           (long long)lists);
    CHECK(nonzero > n);
    if (differ || keys || lists) HARNESS_FAIL("%s: the CUDA training's kept search differs from the CPU's", what);
}

TEST(simlsh_training_keeps_the_cpus_codes)
{
    lac_ratings_t train = NULL, valid = NULL, more = NULL, rest = NULL;
    split_clustered(3000, 800, 60000, 20, 23, &train, &valid);
    split_clustered(3500, 900, 6000, 0, 29, &more, &rest);   /* new users and items, and known ones again */
    lac_mf_params p = lac_mf_params_default();
    p.model = LAC_MF_MODEL_NEIGHBOURHOOD;
    p.k = 8;
    p.epochs = 2;
    p.neighbours.method = LAC_MF_NBR_SIMLSH;
    p.neighbours.k = 12;
    p.neighbours.q = 24;
    p.neighbours.seed = 5;
    lac_ctx_t on[2] = {gpu_logged, gpu_chunks};
    const char *name[2] = {"trained on the GPU", "trained on the GPU, chunks of 4,096"};
    lac_mf_model_t a = NULL, a2 = NULL;
    CHECK_OK(cpu_all, lac_mf_train(cpu_all, &p, train, NULL, NULL, NULL, &a, NULL));
    lac_mf_update_params up = lac_mf_update_params_default();
    CHECK_OK(cpu_all, lac_mf_update(cpu_all, &up, a, more, &a2, NULL));
    for (int x = 0; x < 2 && a && a2; x++) {
        lac_mf_model_t b = NULL, b2 = NULL;
        simlsh_on_gpu = 0;
        CHECK_OK(on[x], lac_mf_train(on[x], &p, train, NULL, NULL, NULL, &b, NULL));
        if (x == 0) CHECK(simlsh_on_gpu);
        if (!b) continue;
        same_kept(a, b, name[x]);
        CHECK_OK(cpu_all, lac_mf_update(cpu_all, &up, b, more, &b2, NULL));
        if (b2) same_kept(a2, b2, x ? "then updated on the CPU (chunks)" : "then updated on the CPU");
        lac_mf_model_destroy(&b);
        lac_mf_model_destroy(&b2);
    }
    lac_mf_model_destroy(&a);
    lac_mf_model_destroy(&a2);
    lac_ratings_destroy(&train);
    lac_ratings_destroy(&valid);
    lac_ratings_destroy(&more);
    lac_ratings_destroy(&rest);
}

int main(void)
{
    int rc;
    if (!harness_cuda_start(&gpu, &cpu, 1, &rc)) return rc;
    lac_ctx_params p = lac_ctx_params_default();
    if (lac_ctx_create(&p, &cpu_all) != 0) return 1;
    p.backend = LAC_BACKEND_CUDA;
    p.knobs = "LACUNA_NBR_CUDA_GSM=fp16";
    if (lac_ctx_create(&p, &gpu_fp16) != 0) return 1;
    p.knobs = "LACUNA_NBR_CUDA_CHUNK=4096";
    if (lac_ctx_create(&p, &gpu_chunks) != 0) return 1;
    p.knobs = "LACUNA_MF_CUDA_NBR_MASK=0";
    if (lac_ctx_create(&p, &gpu_search) != 0) return 1;
    p.knobs = "LACUNA_MF_CUDA_LANES=8";
    if (lac_ctx_create(&p, &gpu_lanes[0]) != 0) return 1;
    p.knobs = "LACUNA_MF_CUDA_LANES=16";
    if (lac_ctx_create(&p, &gpu_lanes[1]) != 0) return 1;
    p.knobs = NULL;
    p.log = note_log;
    p.log_level = LAC_LOG_INFO;
    if (lac_ctx_create(&p, &gpu_logged) != 0) return 1;
    RUN(one_epoch_of_disjoint_users_matches_the_cpu);
    RUN(trained_rmse_within_0005_of_the_cpu);
    RUN(gsm_lists_are_the_cpus);
    RUN(simlsh_lists_are_the_cpus);
    RUN(simlsh_chunks_are_the_cpus);
    RUN(simlsh_training_keeps_the_cpus_codes);
    lac_ctx_destroy(&gpu_logged);
    lac_ctx_destroy(&gpu);
    lac_ctx_destroy(&gpu_fp16);
    lac_ctx_destroy(&gpu_chunks);
    lac_ctx_destroy(&gpu_search);
    lac_ctx_destroy(&gpu_lanes[0]);
    lac_ctx_destroy(&gpu_lanes[1]);
    lac_ctx_destroy(&cpu);
    lac_ctx_destroy(&cpu_all);
    return harness_finish();
}
