/* Online updates (lac_mf_update): a held-out slice of generated users folded
 * in lands within 0.01 RMSE of a retrain (plain and neighbourhood models);
 * the solved rows are the optimum of their ridge objective (central
 * differences of the predictions); the neighbourhood model's LSH sums and
 * the new items' neighbour lists equal a search from scratch on the merged
 * ratings, and so do the bucket keys kept in the model; replaced ratings;
 * bad input; the given model untouched; the updated model's file round
 * trip; a model file of the older format (no keys, keyed on load) updates
 * to the same model as the current one, and so does the update in place. */
#include "cpu_context.h"
#include "harness.h"
#include "lacuna/lacuna.h"
#include "mf/mf_internal.h"
#include "mf/nbr_backend.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static lac_ctx_t ctx;

static lac_ratings_t make(const harness_triples *t)
{
    lac_ratings_t r = NULL;
    CHECK_OK(ctx, lac_ratings_from_arrays(ctx, t->n, t->u, t->i, t->r, &r));
    return r;
}

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

/* Generated ratings cut four ways: test (a tenth of the ratings), and of
 * the rest: base (known users and items), fresh (every rating of the new
 * users and new items), all (base + fresh). Ids are 1-based integers. */
typedef struct {
    harness_triples base, fresh, all, test, test_new;   /* test_new: the test ratings of new users */
} slices;

static void cut_scaled(slices *s, int64_t users, int64_t items, int64_t ratings, int clusters, double new_users,
                       double new_items, uint64_t seed, float scale)
{
    memset(s, 0, sizeof *s);
    lac_mf_gen_params g = lac_mf_gen_params_default();
    g.users = users;
    g.items = items;
    g.ratings = ratings;
    g.item_clusters = clusters;
    g.cluster_strength = clusters ? 1.0 : g.cluster_strength;
    g.half_stars = 0;
    g.seed = seed;
    lac_ratings_t r = NULL;
    CHECK_OK(ctx, lac_mf_generate(ctx, &g, &r));
    for (int64_t x = 0; x < lac_ratings_count(r); x++) {
        int64_t u, i;
        float v;
        CHECK_OK(ctx, lac_ratings_get(r, x, &u, &i, &v));
        v *= scale;
        int64_t uid = atoll(lac_ratings_user_id(r, u)), iid = atoll(lac_ratings_item_id(r, i));
        int is_new_user = (double)(mix((uint64_t)uid * 31 + seed) % 1000) < 1000 * new_users;
        int is_new_item = (double)(mix((uint64_t)iid * 17 + seed + 5) % 1000) < 1000 * new_items;
        if (mix((uint64_t)x + seed * 7919) % 10 == 0) {
            harness_triples_push(&s->test, uid, iid, v);
            if (is_new_user) harness_triples_push(&s->test_new, uid, iid, v);
            continue;
        }
        harness_triples_push(is_new_user || is_new_item ? &s->fresh : &s->base, uid, iid, v);
    }
    for (int64_t x = 0; x < s->base.n; x++) harness_triples_push(&s->all, s->base.u[x], s->base.i[x], s->base.r[x]);
    for (int64_t x = 0; x < s->fresh.n; x++) harness_triples_push(&s->all, s->fresh.u[x], s->fresh.i[x], s->fresh.r[x]);
    lac_ratings_destroy(&r);
}

static void cut(slices *s, int64_t users, int64_t items, int64_t ratings, int clusters, double new_users,
                double new_items, uint64_t seed)
{
    cut_scaled(s, users, items, ratings, clusters, new_users, new_items, seed, 1.0f);
}

static void slices_free(slices *s)
{
    harness_triples_free(&s->base);
    harness_triples_free(&s->fresh);
    harness_triples_free(&s->all);
    harness_triples_free(&s->test);
    harness_triples_free(&s->test_new);
}

static double rmse(lac_mf_model_t m, const harness_triples *t)
{
    lac_ratings_t r = make(t);
    double e = NAN;
    CHECK_OK(ctx, lac_mf_predict(ctx, m, r, NULL, &e, NULL, NULL));
    lac_ratings_destroy(&r);
    return e;
}

static lac_mf_model_t train(const lac_mf_params *p, const harness_triples *t)
{
    lac_ratings_t r = make(t);
    lac_mf_model_t m = NULL;
    CHECK_OK(ctx, lac_mf_train(ctx, p, r, NULL, NULL, NULL, &m, NULL));
    lac_ratings_destroy(&r);
    return m;
}

static lac_mf_model_t update(lac_mf_model_t m, const harness_triples *t, int rounds, int sweeps, lac_mf_update_report *rep)
{
    lac_mf_update_params up = lac_mf_update_params_default();
    up.rounds = rounds;
    up.sweeps = sweeps;
    lac_ratings_t r = make(t);
    lac_mf_model_t out = NULL;
    CHECK_OK(ctx, lac_mf_update(ctx, &up, m, r, &out, rep));
    lac_ratings_destroy(&r);
    return out;
}

/* scale: the ratings times it (2: a 2-10 scale, trained in units) */
static void within_retrain(int kind, int64_t users, int64_t items, int64_t ratings, int clusters, float scale)
{
    slices s;
    cut_scaled(&s, users, items, ratings, clusters, 0.1, 0.0, 11, scale);
    lac_mf_params p = lac_mf_params_default();
    p.model = kind;
    p.k = 16;
    p.epochs = kind == LAC_MF_MODEL_PLAIN ? 20 : 25;
    p.lambda = 0.05;
    p.neighbours.k = 16;
    lac_mf_model_t base = train(&p, &s.base), full = train(&p, &s.all);
    lac_mf_update_report rep;
    lac_mf_model_t upd = update(base, &s.fresh, 2, 2, &rep);
    CHECK(rep.new_users > 0 && rep.new_items == 0);
    CHECK_INT(rep.ratings, s.fresh.n);
    CHECK_INT(lac_mf_model_num_users(upd), lac_mf_model_num_users(full));
    CHECK(rep.rmse_after < rep.rmse_before);
    double e_full = rmse(full, &s.test), e_upd = rmse(upd, &s.test), e_base = rmse(base, &s.test);
    double n_full = rmse(full, &s.test_new), n_upd = rmse(upd, &s.test_new), n_base = rmse(base, &s.test_new);
    printf("  %s x %g: test RMSE base %.4f, updated %.4f, retrained %.4f; new users %.4f, %.4f, %.4f\n",
           kind ? "neighbourhood" : "plain", scale, e_base, e_upd, e_full, n_base, n_upd, n_full);
    CHECK(fabs(e_upd - e_full) <= 0.01 * scale);
    CHECK(n_upd <= n_full + 0.02 * scale);   /* the new users themselves, a tenth of the test */
    CHECK(n_upd < n_base - 0.05 * scale);    /* and the update taught the model something about them */
    lac_mf_model_destroy(&base);
    lac_mf_model_destroy(&full);
    lac_mf_model_destroy(&upd);
    slices_free(&s);
}

TEST(new_users_within_retrain_plain)
{
    within_retrain(LAC_MF_MODEL_PLAIN, 1500, 400, 60000, 0, 1.0f);
    within_retrain(LAC_MF_MODEL_PLAIN, 1500, 400, 60000, 0, 2.0f);
}
TEST(new_users_within_retrain_neighbourhood) { within_retrain(LAC_MF_MODEL_NEIGHBOURHOOD, 800, 300, 32000, 8, 1.0f); }

/* J(theta) of user u over its ratings in t: sum (r - r_hat)^2 + lambda (n +
 * 10) |theta|^2, from the model's own predictions. */
static double user_objective(lac_mf_model_t m, int64_t u, const harness_triples *t, const char *uid, double lb, double lu)
{
    double J = 0.0;
    int64_t n = 0;
    for (int64_t x = 0; x < t->n; x++) {
        char id[32];
        snprintf(id, sizeof id, "%lld", (long long)t->u[x]);
        if (strcmp(id, uid)) continue;
        snprintf(id, sizeof id, "%lld", (long long)t->i[x]);
        int64_t j = lac_idmap_find(&m->items, id, strlen(id));
        double e = t->r[x] - (double)lac_mf_score(m, u, j);
        J += e * e;
        n++;
    }
    double pp = 0.0;
    for (int f = 0; f < m->k; f++) pp += (double)m->P[u * m->stride + f] * m->P[u * m->stride + f];
    double count = n + 10.0;   /* foldin_cpu.c's FOLD_PRIOR_RATINGS */
    return J + lb * count * (double)m->user_bias[u] * m->user_bias[u] + lu * count * pp;
}

/* Central differences of J at the solved row: J is quadratic in the row, so
 * they are its exact gradient up to rounding, which must vanish. */
static void check_optimal_users(int kind)
{
    slices s;
    cut(&s, 300, 120, 9000, kind ? 4 : 0, 0.1, 0.0, 5);
    lac_mf_params p = lac_mf_params_default();
    p.model = kind;
    p.k = 6;
    p.epochs = 10;
    p.neighbours.k = 8;
    lac_mf_model_t base = train(&p, &s.base);
    lac_mf_model_t m = update(base, &s.fresh, 1, 0, NULL);
    double lb = kind ? p.lambdas.b : p.lambda_bias, lu = kind ? p.lambdas.u : p.lambda, worst = 0.0;
    for (int64_t u = lac_mf_model_num_users(base); u < m->num_users; u++) {
        const char *uid = lac_mf_model_user_id(m, u);
        float *params[1 + 16];
        params[0] = &m->user_bias[u];
        for (int f = 0; f < m->k; f++) params[1 + f] = &m->P[u * m->stride + f];
        for (int x = 0; x <= m->k; x++) {
            float keep = *params[x], h = 0.01f;
            *params[x] = keep + h;
            double up = user_objective(m, u, &s.fresh, uid, lb, lu);
            *params[x] = keep - h;
            double down = user_objective(m, u, &s.fresh, uid, lb, lu);
            *params[x] = keep;
            double g = (up - down) / (2.0 * h), at = user_objective(m, u, &s.fresh, uid, lb, lu);
            double rel = fabs(g) / (1.0 + at);
            worst = rel > worst ? rel : worst;
        }
    }
    printf("  %s: largest |dJ/dtheta| / (1 + J) at the solved rows %.2e\n", kind ? "neighbourhood" : "plain", worst);
    CHECK(worst < 2e-3);
    lac_mf_model_destroy(&base);
    lac_mf_model_destroy(&m);
    slices_free(&s);
}

TEST(solved_rows_are_ridge_optima) { check_optimal_users(LAC_MF_MODEL_PLAIN); check_optimal_users(LAC_MF_MODEL_NEIGHBOURHOOD); }

/* Each user's training list after an update (new users, new items and
 * re-rated pairs, fresh in scattered order) equals the union of the old and
 * new ratings with the new value winning, from a dense table by ids. */
static void merged_lists(int kind)
{
    slices s;
    cut(&s, 300, 150, 8000, kind ? 4 : 0, 0.1, 0.1, 13);
    for (int64_t x = 0; x < s.base.n; x += 37) {   /* re-rated pairs */
        float v = s.base.r[x] >= 3 ? 1.0f : 5.0f;
        harness_triples_push(&s.fresh, s.base.u[x], s.base.i[x], v);
    }
    lac_mf_params p = lac_mf_params_default();
    p.model = kind;
    p.k = 4;
    p.epochs = 2;
    p.neighbours.k = 8;
    lac_mf_model_t base = train(&p, &s.base);
    lac_mf_update_report rep;
    lac_mf_model_t m = update(base, &s.fresh, 1, 1, &rep);
    CHECK(rep.new_users > 0 && rep.new_items > 0 && rep.replaced > 0);
    int64_t U = 0, I = 0, expected = 0, bad = 0;
    for (int64_t x = 0; x < s.base.n + s.fresh.n; x++) {
        int64_t u = x < s.base.n ? s.base.u[x] : s.fresh.u[x - s.base.n], i = x < s.base.n ? s.base.i[x] : s.fresh.i[x - s.base.n];
        U = u + 1 > U ? u + 1 : U;
        I = i + 1 > I ? i + 1 : I;
    }
    float *table = malloc((size_t)(U * I) * sizeof *table);
    for (int64_t x = 0; x < U * I; x++) table[x] = NAN;
    for (int64_t x = 0; x < s.base.n; x++) table[s.base.u[x] * I + s.base.i[x]] = s.base.r[x];
    for (int64_t x = 0; x < s.fresh.n; x++) table[s.fresh.u[x] * I + s.fresh.i[x]] = s.fresh.r[x];
    for (int64_t x = 0; x < U * I; x++) expected += table[x] == table[x];
    CHECK_INT(m->rated_start[m->num_users], expected);
    for (int64_t u = 0; u < m->num_users; u++) {
        int64_t uid = atoll(lac_mf_model_user_id(m, u));
        for (int64_t a = m->rated_start[u]; a < m->rated_start[u + 1]; a++) {
            int64_t iid = atoll(lac_mf_model_item_id(m, m->rated_items[a]));
            float want = table[uid * I + iid];
            bad += want != want || (a > m->rated_start[u] && m->rated_items[a] <= m->rated_items[a - 1]) ||
                   (m->rated_vals && m->rated_vals[a] != want);
        }
    }
    CHECK_INT(bad, 0);
    free(table);
    lac_mf_model_destroy(&base);
    lac_mf_model_destroy(&m);
    slices_free(&s);
}

TEST(merged_training_lists_are_the_union) { merged_lists(LAC_MF_MODEL_PLAIN); merged_lists(LAC_MF_MODEL_NEIGHBOURHOOD); }

/* The LSH sums after an update equal those summed from scratch over the
 * merged ratings (integer ratings: r^2 sums are exact in float), and the
 * new items' S^K(j) equal a full search's. fresh also re-rates some known
 * pairs (the old share is taken out). */
static void lsh_from_scratch(lac_mf_nbr_method method)
{
    slices s;
    cut(&s, 400, 200, 12000, 5, 0.1, 0.1, 9);
    for (int64_t x = 0; x < s.base.n; x += 40) {   /* re-rated pairs */
        float v = s.base.r[x] >= 3 ? 1.0f : 5.0f;
        harness_triples_push(&s.fresh, s.base.u[x], s.base.i[x], v);
        harness_triples_push(&s.all, s.base.u[x], s.base.i[x], v);
    }
    lac_mf_params p = lac_mf_params_default();
    p.model = LAC_MF_MODEL_NEIGHBOURHOOD;
    p.k = 4;
    p.epochs = 3;
    p.neighbours.method = method;
    p.neighbours.k = 10;
    p.neighbours.q = 20;
    lac_mf_model_t base = train(&p, &s.base);
    lac_mf_update_report rep;
    lac_mf_model_t m = update(base, &s.fresh, 1, 1, &rep);
    CHECK(rep.new_items > 0 && rep.replaced > 0);
    /* from scratch: the merged ratings, ids in the same order as the model's */
    lac_ratings_t all = make(&s.all);
    lac_mf_data d;
    lac_nbr_data nd;
    lac_mf_nbr_t found = NULL;
    CHECK_OK(ctx, lac_mf_data_build(ctx, all, &d));
    CHECK_OK(ctx, lac_mf_nbr_data_build(ctx, &d, 1, &nd));
    CHECK_OK(ctx, lac_mf_nbr_search(ctx, &p.neighbours, &nd, 1, &found));
    CHECK_INT(found->num_items, m->num_items);
    for (int64_t j = 0; j < m->num_items; j++) CHECK(!strcmp(lac_ratings_item_id(all, j), lac_mf_model_item_id(m, j)));
    CHECK_INT(found->code_cols, m->code_cols);
    int64_t diff = 0;
    for (int64_t x = 0; x < m->num_items * m->code_cols; x++) diff += found->codes[x] != m->codes[x];
    CHECK_INT(diff, 0);
    /* the bucket keys kept in the model: those of the sums (only the changed items were keyed again) */
    CHECK(m->keys != NULL && found->keys != NULL);
    for (int64_t x = 0; x < m->num_items * p.neighbours.q; x++) diff += found->keys[x] != m->keys[x];
    CHECK_INT(diff, 0);
    int64_t ni = lac_mf_model_num_items(base), K = m->nbr_k, same = 0;
    for (int64_t x = ni * K; x < m->num_items * K; x++) same += found->list[x] == m->nbr[x];
    CHECK_INT(same, (m->num_items - ni) * K);
    /* training lists: the merged ones */
    CHECK_INT(m->rated_start[m->num_users], d.nnz);
    /* the known items keep theirs */
    CHECK(!memcmp(m->nbr, base->nbr, (size_t)(ni * K) * sizeof *m->nbr));
    lac_mf_nbr_destroy(&found);
    lac_mf_nbr_data_free(&nd);
    lac_mf_data_free(&d);
    lac_ratings_destroy(&all);
    lac_mf_model_destroy(&base);
    lac_mf_model_destroy(&m);
    slices_free(&s);
}

TEST(lsh_sums_and_new_neighbours_match_a_fresh_search)
{
    lsh_from_scratch(LAC_MF_NBR_SIMLSH);
    lsh_from_scratch(LAC_MF_NBR_MINHASH);
}

TEST(bad_input_model_untouched_and_file_round_trip)
{
    slices s;
    cut(&s, 300, 120, 9000, 4, 0.1, 0.1, 3);
    lac_mf_params p = lac_mf_params_default();
    p.model = LAC_MF_MODEL_NEIGHBOURHOOD;
    p.k = 6;
    p.epochs = 5;
    p.neighbours.k = 8;
    lac_mf_model_t base = train(&p, &s.base);
    int64_t nu = base->num_users;
    size_t pbytes = (size_t)nu * base->stride * sizeof(float);
    float *P0 = malloc(pbytes);
    memcpy(P0, base->P, pbytes);
    lac_mf_update_params up = lac_mf_update_params_default();
    lac_mf_model_t out = NULL;
    lac_ratings_t fresh = make(&s.fresh);
    up.rounds = 0;
    CHECK_STATUS(ctx, lac_mf_update(ctx, &up, base, fresh, &out, NULL), LAC_ERR_ARGUMENT);
    up = lac_mf_update_params_default();
    up.sweeps = -1;
    CHECK_STATUS(ctx, lac_mf_update(ctx, &up, base, fresh, &out, NULL), LAC_ERR_ARGUMENT);
    up = lac_mf_update_params_default();
    CHECK_STATUS(ctx, lac_mf_update(ctx, &up, NULL, fresh, &out, NULL), LAC_ERR_ARGUMENT);
    CHECK(out == NULL);
    lac_ratings_t nan_rating = NULL;   /* the readers refuse one: made by hand */
    CHECK_OK(ctx, lac_ratings_new(ctx, 1, &nan_rating));
    int32_t at;
    CHECK_OK(ctx, lac_idmap_intern(ctx, &nan_rating->users, "1", 1, &at));
    CHECK_OK(ctx, lac_idmap_intern(ctx, &nan_rating->items, "1", 1, &at));
    CHECK_OK(ctx, lac_ratings_push(ctx, nan_rating, 0, 0, NAN));
    CHECK_STATUS(ctx, lac_mf_update(ctx, &up, base, nan_rating, &out, NULL), LAC_ERR_VALUE);
    CHECK(out == NULL);
    lac_ratings_destroy(&nan_rating);
    lac_mf_update_report rep;
    CHECK_OK(ctx, lac_mf_update(ctx, &up, base, fresh, &out, &rep));
    CHECK(base->num_users == nu && !memcmp(P0, base->P, pbytes));   /* the given model is not changed */
    CHECK_INT(out->num_users, nu + rep.new_users);
    /* the updated model saves and loads with the same predictions */
    char path[4096];
    snprintf(path, sizeof path, "%s/test_mf_update.model", getenv("LACUNA_TEST_TMPDIR") ? getenv("LACUNA_TEST_TMPDIR") : ".");
    CHECK_OK(ctx, lac_mf_model_save(ctx, path, out));
    lac_mf_model_t back = NULL;
    CHECK_OK(ctx, lac_mf_model_load(ctx, path, &back));
    lac_ratings_t test = make(&s.test);
    float *a = malloc((size_t)s.test.n * sizeof *a), *b = malloc((size_t)s.test.n * sizeof *b);
    CHECK_OK(ctx, lac_mf_predict(ctx, out, test, a, NULL, NULL, NULL));
    CHECK_OK(ctx, lac_mf_predict(ctx, back, test, b, NULL, NULL, NULL));
    CHECK(!memcmp(a, b, (size_t)s.test.n * sizeof *a));
    /* an update of the updated model (another round of the same ratings) works too */
    lac_mf_model_t again = NULL;
    CHECK_OK(ctx, lac_mf_update(ctx, &up, back, fresh, &again, &rep));
    CHECK_INT(rep.new_users, 0);
    CHECK_INT(rep.new_items, 0);
    CHECK_INT(rep.replaced, rep.ratings);
    remove(path);
    free(a);
    free(b);
    free(P0);
    lac_ratings_destroy(&test);
    lac_ratings_destroy(&fresh);
    lac_mf_model_destroy(&again);
    lac_mf_model_destroy(&back);
    lac_mf_model_destroy(&out);
    lac_mf_model_destroy(&base);
    slices_free(&s);
}

/* The lists of a few rows (the update's search of new items, which scans
 * each table for the rows' keys) equal those rows' lists of the search of
 * every item (which sorts each table): keys from a small alphabet, so that
 * buckets are large, rows share keys and some buckets pass max_bucket. */
TEST(row_lists_equal_the_full_search)
{
    const int64_t ni = 600, T = 12;
    uint64_t *keys = malloc((size_t)(ni * T) * sizeof *keys);
    for (int64_t t = 0; t < T; t++)
        for (int64_t j = 0; j < ni; j++) keys[t * ni + j] = mix((uint64_t)(t * 1000 + mix((uint64_t)j * 3 + (uint64_t)t) % (3 + t % 5 * 9)));
    int32_t rows[40];
    for (int r = 0; r < 40; r++) rows[r] = (int32_t)(mix((uint64_t)r + 77) % (uint64_t)ni);
    for (int max_bucket = 60; max_bucket <= 1000; max_bucket += 940) {
        lac_nbr_data d;
        memset(&d, 0, sizeof d);
        d.num_items = ni;
        lac_nbr_call call;
        memset(&call, 0, sizeof call);
        call.data = &d;
        call.k = 12;
        call.seed = 5;
        call.max_bucket = max_bucket;
        call.tables = (int)T;
        call.keys = keys;
        int32_t *all = malloc((size_t)(ni * call.k) * sizeof *all), *some = malloc(sizeof rows / 4 * call.k * 4);
        CHECK_OK(ctx, lac_nbr_cpu_backend.bucket_topk(ctx, &call, all));
        call.rows = rows;
        call.num_rows = 40;
        CHECK_OK(ctx, lac_nbr_cpu_backend.bucket_topk(ctx, &call, some));
        int64_t diff = 0;
        for (int r = 0; r < 40; r++)
            for (int x = 0; x < call.k; x++) diff += some[r * call.k + x] != all[(int64_t)rows[r] * call.k + x];
        CHECK_INT(diff, 0);
        free(all);
        free(some);
    }
    free(keys);
}

static unsigned char *slurp(const char *path, long *size)
{
    FILE *fp = fopen(path, "rb");
    CHECK(fp != NULL);
    fseek(fp, 0, SEEK_END);
    *size = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    unsigned char *buf = malloc((size_t)*size);
    CHECK(fread(buf, 1, (size_t)*size, fp) == (size_t)*size);
    fclose(fp);
    return buf;
}

/* A version 5 file rewritten as version 2 (the layout before the bucket
 * keys): header without the key-table count (and versions 4 and 5's
 * negative exponent and correction), no keys section, the FNV-1a
 * checksum of the rest. */
static void write_version2(const char *from, const char *to, int64_t key_bytes)
{
    long size;
    unsigned char *buf = slurp(from, &size);
    uint32_t version, header_bytes;
    memcpy(&version, buf + 8, 4);
    memcpy(&header_bytes, buf + 12, 4);
    CHECK_INT(version, 5);
    uint32_t v2 = 2, hb2 = header_bytes - 24;
    FILE *fp = fopen(to, "wb");
    CHECK(fp != NULL);
    uint64_t h = 1469598103934665603ull;
    const unsigned char *parts[4] = {buf, (const unsigned char *)&v2, (const unsigned char *)&hb2, buf + 16};
    size_t lens[4] = {8, 4, 4, hb2};
    for (int x = 0; x < 5; x++) {
        const unsigned char *d = x < 4 ? parts[x] : buf + 16 + header_bytes;
        size_t n = x < 4 ? lens[x] : (size_t)(size - 8 - key_bytes) - (16 + header_bytes);
        for (size_t i = 0; i < n; i++) h = (h ^ d[i]) * 1099511628211ull;
        CHECK(fwrite(d, 1, n, fp) == n);
    }
    CHECK(fwrite(&h, 8, 1, fp) == 1);
    fclose(fp);
    free(buf);
}

TEST(older_file_without_keys_updates_the_same)
{
    slices s;
    cut(&s, 300, 150, 9000, 4, 0.1, 0.1, 5);
    lac_mf_params p = lac_mf_params_default();
    p.model = LAC_MF_MODEL_NEIGHBOURHOOD;
    p.k = 6;
    p.epochs = 4;
    p.neighbours.k = 8;
    p.neighbours.q = 16;
    lac_mf_model_t base = train(&p, &s.base);
    const char *dir = getenv("LACUNA_TEST_TMPDIR") ? getenv("LACUNA_TEST_TMPDIR") : ".";
    char now[4096], old[4096], out_now[4096], out_old[4096];
    snprintf(now, sizeof now, "%s/test_mf_update_v3.model", dir);
    snprintf(old, sizeof old, "%s/test_mf_update_v2.model", dir);
    snprintf(out_now, sizeof out_now, "%s/test_mf_update_v3_out.model", dir);
    snprintf(out_old, sizeof out_old, "%s/test_mf_update_v2_out.model", dir);
    CHECK_OK(ctx, lac_mf_model_save(ctx, now, base));
    write_version2(now, old, base->num_items * p.neighbours.q * 8);
    lac_mf_model_t a = NULL, b = NULL, ua = NULL, ub = NULL;
    CHECK_OK(ctx, lac_mf_model_load(ctx, now, &a));
    CHECK_OK(ctx, lac_mf_model_load(ctx, old, &b));
    CHECK(a->keys != NULL && b->keys != NULL);
    CHECK(!memcmp(a->keys, b->keys, (size_t)(base->num_items * p.neighbours.q) * 8));   /* keyed on load as trained */
    lac_mf_update_report ra, rb;
    ua = update(a, &s.fresh, 2, 2, &ra);
    ub = update(b, &s.fresh, 2, 2, &rb);
    CHECK(ra.new_items > 0);
    CHECK_OK(ctx, lac_mf_model_save(ctx, out_now, ua));
    CHECK_OK(ctx, lac_mf_model_save(ctx, out_old, ub));
    long na, nb;
    unsigned char *fa = slurp(out_now, &na), *fb = slurp(out_old, &nb);
    CHECK(na == nb && !memcmp(fa, fb, (size_t)na));   /* the same updated model, byte for byte */
    /* the update in place (what `mf update` does) gives that model too */
    lac_ratings_t fresh = make(&s.fresh);
    lac_mf_update_params up = lac_mf_update_params_default();
    lac_mf_update_report ri;
    CHECK_OK(ctx, lac_mf_update_in_place(ctx, &up, b, fresh, &ri));
    CHECK_INT(ri.new_items, ra.new_items);
    CHECK(ri.rmse_before == ra.rmse_before && ri.rmse_after == ra.rmse_after);
    CHECK_OK(ctx, lac_mf_model_save(ctx, out_old, b));
    free(fb);
    fb = slurp(out_old, &nb);
    CHECK(na == nb && !memcmp(fa, fb, (size_t)na));
    lac_ratings_destroy(&fresh);
    /* and the predictions of the test ratings agree with the in-memory model's update */
    lac_mf_model_t uc = update(base, &s.fresh, 2, 2, NULL);
    lac_ratings_t test = make(&s.test);
    float *x = malloc((size_t)s.test.n * sizeof *x), *y = malloc((size_t)s.test.n * sizeof *y);
    CHECK_OK(ctx, lac_mf_predict(ctx, ub, test, x, NULL, NULL, NULL));
    CHECK_OK(ctx, lac_mf_predict(ctx, uc, test, y, NULL, NULL, NULL));
    CHECK(!memcmp(x, y, (size_t)s.test.n * sizeof *x));
    remove(now);
    remove(old);
    remove(out_now);
    remove(out_old);
    free(fa);
    free(fb);
    free(x);
    free(y);
    lac_ratings_destroy(&test);
    lac_mf_model_destroy(&a);
    lac_mf_model_destroy(&b);
    lac_mf_model_destroy(&ua);
    lac_mf_model_destroy(&ub);
    lac_mf_model_destroy(&uc);
    lac_mf_model_destroy(&base);
    slices_free(&s);
}

int main(void)
{
    if (!(ctx = cpu_context(2))) return 1;
    RUN(new_users_within_retrain_plain);
    RUN(new_users_within_retrain_neighbourhood);
    RUN(solved_rows_are_ridge_optima);
    RUN(merged_training_lists_are_the_union);
    RUN(lsh_sums_and_new_neighbours_match_a_fresh_search);
    RUN(bad_input_model_untouched_and_file_round_trip);
    RUN(older_file_without_keys_updates_the_same);
    RUN(row_lists_equal_the_full_search);
    lac_ctx_destroy(&ctx);
    return harness_finish();
}
