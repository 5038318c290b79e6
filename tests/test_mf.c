/* mf: one SGD epoch against a float64 loop of update rule (5) written here,
 * exact low-rank recovery, convergence on generated data to the noise level,
 * determinism, model file round trip and corruption, recommend, split,
 * generator, parameter checks. */
#include "cpu_context.h"
#include "harness.h"
#include "lacuna/lacuna.h"
#include "mf/mf_internal.h"

static lac_ctx_t ctx, ctx2;

static lac_ratings_t generated(int64_t users, int64_t items, int64_t ratings, double noise, uint64_t seed)
{
    lac_mf_gen_params g = lac_mf_gen_params_default();
    g.users = users;
    g.items = items;
    g.ratings = ratings;
    g.noise = noise;
    g.rank = 4;
    g.seed = seed;
    lac_ratings_t r = NULL;
    CHECK_OK(ctx, lac_mf_generate(ctx, &g, &r));
    return r;
}

/* Update rule (5) in float64 for one rating; returns e^2. */
static double reference_update(double *P, double *Q, double *bu, double *bi, int k, int64_t u, int64_t j, double r,
                               double mean, int use_bias, double lr, double lambda, double lambda_b)
{
    double pred = mean + (use_bias ? bu[u] + bi[j] : 0.0);
    for (int f = 0; f < k; f++) pred += P[u * k + f] * Q[j * k + f];
    double e = r - pred;
    if (use_bias) {
        bu[u] += lr * (e - lambda_b * bu[u]);
        bi[j] += lr * (e - lambda_b * bi[j]);
    }
    for (int f = 0; f < k; f++) {
        double pf = P[u * k + f], qf = Q[j * k + f];
        P[u * k + f] = pf + lr * (e * qf - lambda * pf);
        Q[j * k + f] = qf + lr * (e * pf - lambda * qf);
    }
    return e * e;
}

/* One epoch with one thread walks users in count order, each user's ratings
 * in read order: the same sequence in float64 here must agree closely. */
TEST(one_epoch_matches_float64_update_rule)
{
    lac_ratings_t r = generated(40, 30, 300, 0.3, 5);
    lac_mf_data d;
    CHECK_OK(ctx, lac_mf_data_build(ctx, r, &d));
    for (int use_bias = 0; use_bias <= 1; use_bias++) {
        int k = 20;   /* not a multiple of 16: padded rows */
        lac_mf_model_t m = NULL;
        CHECK_OK(ctx, lac_mf_model_alloc(ctx, d.num_users, d.num_items, k, &m));
        m->params.lambda = 0.05;
        m->params.lambda_bias = 0.02;
        m->params.use_bias = use_bias;
        m->mean = use_bias ? d.mean : 0.0;
        unsigned long long s = 99;
        double *P = malloc(sizeof(double) * (size_t)(d.num_users * k)), *Q = malloc(sizeof(double) * (size_t)(d.num_items * k));
        double *bu = calloc((size_t)d.num_users, sizeof(double)), *bi = calloc((size_t)d.num_items, sizeof(double));
        for (int64_t u = 0; u < d.num_users; u++)
            for (int f = 0; f < k; f++) P[u * k + f] = m->P[u * m->stride + f] = (float)(0.3 * harness_rand_uniform(&s));
        for (int64_t j = 0; j < d.num_items; j++)
            for (int f = 0; f < k; f++) Q[j * k + f] = m->Q[j * m->stride + f] = (float)(0.3 * harness_rand_uniform(&s));
        const lac_mf_backend *cpu = &lac_mf_cpu_backend;
        lac_mf_call call = lac_mf_model_call(m, &d, NULL);
        lac_mf_state *st = NULL;
        CHECK_OK(ctx, cpu->begin(ctx, &call, &st));
        double sse = 0, ref_sse = 0, lr = 0.05;
        CHECK_OK(ctx, cpu->epoch(ctx, st, (float)lr, 0, &sse));
        /* one thread, one block: users in count order taken two at a time,
         * their ratings interleaved (A's a-th, then B's a-th), then the tails */
        for (int64_t o = 0; o < d.num_users; o += 2) {
            int64_t pair[2] = {d.row_order[o], o + 1 < d.num_users ? d.row_order[o + 1] : -1};
            int64_t len[2];
            for (int w = 0; w < 2; w++) len[w] = pair[w] < 0 ? 0 : d.row_start[pair[w] + 1] - d.row_start[pair[w]];
            int64_t longest = len[0] > len[1] ? len[0] : len[1];
            for (int64_t x = 0; x < longest; x++)
                for (int w = 0; w < 2; w++) {
                    if (x >= len[w]) continue;
                    int64_t u = pair[w], a = d.row_start[u] + x;
                    ref_sse += reference_update(P, Q, bu, bi, k, u, d.col[a], d.val[a], use_bias ? d.mean : 0.0,
                                                use_bias, lr, 0.05, 0.02);
                }
        }
        double worst = 0;
        for (int64_t u = 0; u < d.num_users; u++) {
            for (int f = 0; f < k; f++) worst = fmax(worst, fabs(P[u * k + f] - m->P[u * m->stride + f]));
            for (int f = k; f < m->stride; f++) CHECK(m->P[u * m->stride + f] == 0.0f);
            worst = fmax(worst, fabs(bu[u] - m->user_bias[u]));
        }
        for (int64_t j = 0; j < d.num_items; j++) {
            for (int f = 0; f < k; f++) worst = fmax(worst, fabs(Q[j * k + f] - m->Q[j * m->stride + f]));
            worst = fmax(worst, fabs(bi[j] - m->item_bias[j]));
        }
        if (worst > 1e-4) HARNESS_FAIL("bias %d: factors differ from the float64 reference by %g", use_bias, worst);
        CHECK_NEAR(sse, ref_sse, 1e-4);
        cpu->end(ctx, st);
        lac_mf_model_destroy(&m);
        free(P);
        free(Q);
        free(bu);
        free(bi);
    }
    lac_mf_data_free(&d);
    lac_ratings_destroy(&r);
}

/* A fully observed rank-1 matrix a_u b_j has an exact factorisation. */
TEST(exact_rank_one_is_recovered)
{
    int nu = 30, ni = 20;
    int64_t *users = malloc(sizeof(int64_t) * nu * ni), *items = malloc(sizeof(int64_t) * nu * ni);
    float *vals = malloc(sizeof(float) * nu * ni);
    for (int u = 0; u < nu; u++)
        for (int j = 0; j < ni; j++) {
            users[u * ni + j] = u;
            items[u * ni + j] = j;
            vals[u * ni + j] = (float)((1.0 + 0.05 * u) * (1.0 + 0.1 * j));
        }
    lac_ratings_t r = NULL;
    CHECK_OK(ctx, lac_ratings_from_arrays(ctx, nu * ni, users, items, vals, &r));
    lac_mf_params p = lac_mf_params_default();
    p.k = 2;
    p.use_bias = 0;
    p.lambda = 0;
    p.alpha = 0.01;
    p.beta = 0;
    p.epochs = 300;
    lac_mf_model_t m = NULL;
    lac_mf_report rep;
    CHECK_OK(ctx, lac_mf_train(ctx, &p, r, NULL, NULL, NULL, &m, &rep));
    if (!(rep.train_rmse < 0.01)) HARNESS_FAIL("rank-1 train RMSE %g, expected < 0.01", rep.train_rmse);
    CHECK_INT(rep.epochs, 300);
    lac_mf_model_destroy(&m);
    lac_ratings_destroy(&r);
    free(users);
    free(items);
    free(vals);
}

/* RMSE of predicting the training mean: the bar a model must clear. */
static double mean_rmse(lac_ratings_t train, lac_ratings_t test)
{
    double mu = 0, sq = 0;
    float v;
    for (int64_t i = 0; i < lac_ratings_count(train); i++) {
        lac_ratings_get(train, i, NULL, NULL, &v);
        mu += v;
    }
    mu /= (double)lac_ratings_count(train);
    for (int64_t i = 0; i < lac_ratings_count(test); i++) {
        lac_ratings_get(test, i, NULL, NULL, &v);
        sq += (v - mu) * (v - mu);
    }
    return sqrt(sq / (double)lac_ratings_count(test));
}

static int count_epochs(int epoch, double tr, double va, double sec, void *user)
{
    (void)tr, (void)va, (void)sec;
    *(int *)user = epoch;
    return 0;
}

TEST(converges_on_generated_data_to_the_noise)
{
    /* noise 0.3 and rounding to halves (variance 1/48): the floor is ~0.33 */
    lac_ratings_t all = generated(600, 300, 40000, 0.3, 7), train = NULL, test = NULL;
    lac_mf_split_params sp = lac_mf_split_params_default();
    CHECK_OK(ctx, lac_mf_split(ctx, &sp, all, &train, &test));
    lac_mf_params p = lac_mf_params_default();
    p.k = 16;
    lac_mf_model_t m = NULL;
    lac_mf_report rep;
    int seen = 0;
    CHECK_OK(ctx2, lac_mf_train(ctx2, &p, train, test, count_epochs, &seen, &m, &rep));
    double floor_rmse = sqrt(0.09 + 1.0 / 48), base = mean_rmse(train, test);
    if (!(rep.valid_rmse < floor_rmse + 0.12))
        HARNESS_FAIL("valid RMSE %g, noise floor %g, mean-only %g", rep.valid_rmse, floor_rmse, base);
    if (!(rep.valid_rmse < 0.6 * base)) HARNESS_FAIL("valid RMSE %g is not well below mean-only %g", rep.valid_rmse, base);
    CHECK_INT(seen, rep.epochs);
    CHECK(rep.best_epoch >= 1 && rep.best_epoch <= rep.epochs);
    double rmse, mae;
    int64_t unknown;
    CHECK_OK(ctx, lac_mf_predict(ctx, m, test, NULL, &rmse, &mae, &unknown));
    CHECK_NEAR(rmse, rep.valid_rmse, 1e-9);
    CHECK(mae <= rmse);
    lac_mf_model_destroy(&m);
    lac_ratings_destroy(&all);
    lac_ratings_destroy(&train);
    lac_ratings_destroy(&test);
}

static lac_mf_model_t train_small(lac_ctx_t c, lac_ratings_t r, int deterministic, uint64_t seed)
{
    lac_mf_params p = lac_mf_params_default();
    p.k = 8;
    p.epochs = 5;
    p.deterministic = deterministic;
    p.seed = seed;
    lac_mf_model_t m = NULL;
    CHECK_OK(c, lac_mf_train(c, &p, r, NULL, NULL, NULL, &m, NULL));
    return m;
}

TEST(deterministic_runs_are_identical)
{
    lac_ratings_t r = generated(300, 200, 12000, 0.5, 3);
    lac_mf_model_t a = train_small(ctx2, r, 1, 11), b = train_small(ctx2, r, 1, 11), c = train_small(ctx2, r, 1, 12);
    size_t bytes = (size_t)(lac_mf_model_num_users(a) * a->stride) * sizeof(float);
    CHECK(memcmp(a->P, b->P, bytes) == 0);
    CHECK(memcmp(a->Q, b->Q, (size_t)(lac_mf_model_num_items(a) * a->stride) * sizeof(float)) == 0);
    CHECK(memcmp(a->P, c->P, bytes) != 0);   /* the seed matters */
    lac_mf_model_destroy(&a);
    lac_mf_model_destroy(&b);
    lac_mf_model_destroy(&c);
    lac_ratings_destroy(&r);
}

TEST(duplicates_keep_the_last_rating)
{
    int64_t users[] = {1, 1, 2, 1}, items[] = {5, 6, 5, 5};
    float vals[] = {1, 3, 4, 5};
    lac_ratings_t r = NULL;
    CHECK_OK(ctx, lac_ratings_from_arrays(ctx, 4, users, items, vals, &r));
    lac_mf_data d;
    CHECK_OK(ctx, lac_mf_data_build(ctx, r, &d));
    CHECK_INT(d.nnz, 3);
    CHECK_INT(d.duplicates, 1);
    /* user "1" is dense 0, item "5" dense 0: its kept rating is 5 */
    int found = 0;
    for (int64_t a = d.row_start[0]; a < d.row_start[1]; a++)
        if (d.col[a] == 0) {
            found = 1;
            CHECK(d.val[a] == 5.0f);
        }
    CHECK(found);
    CHECK_NEAR(d.mean, (3.0 + 4.0 + 5.0) / 3.0, 1e-12);
    lac_mf_data_free(&d);
    lac_ratings_destroy(&r);
}

TEST(model_file_round_trip_and_corruption)
{
    lac_ratings_t r = generated(200, 100, 6000, 0.5, 4);
    lac_mf_model_t m = train_small(ctx, r, 0, 1), back = NULL;
    char path[512];
    harness_temp_path(path, sizeof path, "model.bin");
    CHECK_OK(ctx, lac_mf_model_save(ctx, path, m));
    CHECK_OK(ctx, lac_mf_model_load(ctx, path, &back));
    float *pa = malloc(sizeof(float) * (size_t)lac_ratings_count(r)), *pb = malloc(sizeof(float) * (size_t)lac_ratings_count(r));
    CHECK_OK(ctx, lac_mf_predict(ctx, m, r, pa, NULL, NULL, NULL));
    CHECK_OK(ctx, lac_mf_predict(ctx, back, r, pb, NULL, NULL, NULL));
    CHECK(memcmp(pa, pb, sizeof(float) * (size_t)lac_ratings_count(r)) == 0);
    CHECK_INT(lac_mf_model_k(back), 8);
    CHECK(strcmp(lac_mf_model_user_id(back, 3), lac_mf_model_user_id(m, 3)) == 0);
    CHECK_INT(back->rated_start[back->num_users], m->rated_start[m->num_users]);
    lac_mf_model_destroy(&back);

    FILE *fp = fopen(path, "rb");
    fseek(fp, 0, SEEK_END);
    long size = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    unsigned char *bytes = malloc((size_t)size);
    CHECK(fread(bytes, 1, (size_t)size, fp) == (size_t)size);
    fclose(fp);
    /* a flipped byte in the factors */
    bytes[size / 2] ^= 0x40;
    fp = fopen(path, "wb");
    fwrite(bytes, 1, (size_t)size, fp);
    fclose(fp);
    CHECK_STATUS(ctx, lac_mf_model_load(ctx, path, &back), LAC_ERR_FORMAT);
    CHECK_STR_CONTAINS(lac_last_error(ctx), "checksum");
    CHECK(back == NULL);
    /* truncated */
    bytes[size / 2] ^= 0x40;
    fp = fopen(path, "wb");
    fwrite(bytes, 1, (size_t)size - 100, fp);
    fclose(fp);
    CHECK_STATUS(ctx, lac_mf_model_load(ctx, path, &back), LAC_ERR_FORMAT);
    fp = fopen(path, "wb");
    fwrite(bytes, 1, 10, fp);
    fclose(fp);
    CHECK_STATUS(ctx, lac_mf_model_load(ctx, path, &back), LAC_ERR_FORMAT);
    CHECK_STR_CONTAINS(lac_last_error(ctx), "too short");
    CHECK(back == NULL);
    /* a folder given as the model: the caller's mistake, not an attempt to read it */
    const char *dir = getenv("LACUNA_TEST_TMPDIR");
    CHECK_STATUS(ctx, lac_mf_model_load(ctx, dir ? dir : ".", &back), LAC_ERR_ARGUMENT);
    CHECK_STR_CONTAINS(lac_last_error(ctx), "directory");
    CHECK(back == NULL);
    remove(path);
    free(bytes);
    free(pa);
    free(pb);
    lac_mf_model_destroy(&m);
    lac_ratings_destroy(&r);
}

TEST(recommend_excludes_rated_and_ranks_by_score)
{
    lac_ratings_t r = generated(100, 60, 2000, 0.5, 9);
    lac_mf_model_t m = train_small(ctx, r, 0, 1);
    int64_t users[] = {0, 5, 99}, n = 7;
    int64_t items[3 * 7];
    float scores[3 * 7];
    CHECK_OK(ctx, lac_mf_recommend(ctx, m, 3, users, n, items, scores));
    for (int i = 0; i < 3; i++) {
        int64_t u = users[i];
        /* reference: every unrated item scored in float64 from the factors */
        unsigned char *rated = calloc(60, 1);
        for (int64_t a = 0; a < lac_ratings_count(r); a++) {
            int64_t uu, jj;
            lac_ratings_get(r, a, &uu, &jj, NULL);
            if (uu == u) rated[jj] = 1;
        }
        double best[7];
        int nb = 0;
        for (int64_t j = 0; j < 60; j++) {
            if (rated[j]) continue;
            double s = m->mean + m->user_bias[u] + m->item_bias[j];
            for (int f = 0; f < m->k; f++) s += (double)m->P[u * m->stride + f] * m->Q[j * m->stride + f];
            /* insertion into the 7 best (best[6] is compared only once it holds one) */
            if (nb == 7 && s <= best[6]) continue;
            int at = nb < 7 ? nb++ : 6;
            best[at] = s;
            while (at > 0 && best[at] > best[at - 1]) {
                double t = best[at];
                best[at] = best[at - 1];
                best[at - 1] = t;
                at--;
            }
        }
        for (int x = 0; x < n; x++) {
            int64_t j = items[i * n + x];
            if (j < 0 || j >= 60) {
                HARNESS_FAIL("user %lld: item %lld out of range", (long long)u, (long long)j);
                continue;
            }
            if (rated[j]) HARNESS_FAIL("user %lld: recommended item %lld was rated", (long long)u, (long long)j);
            if (x > 0 && scores[i * n + x] > scores[i * n + x - 1]) HARNESS_FAIL("scores not descending at %d", x);
            CHECK_NEAR(scores[i * n + x], best[x], 1e-4);
        }
        free(rated);
    }
    /* more than the unrated items: the rest is -1 */
    int64_t many = 60, *all = malloc(sizeof(int64_t) * 60);
    CHECK_OK(ctx, lac_mf_recommend(ctx, m, 1, users, many, all, NULL));
    int64_t rated_count = m->rated_start[1] - m->rated_start[0];
    CHECK_INT(all[60 - rated_count - 1] >= 0, 1);
    if (rated_count > 0) CHECK_INT(all[60 - rated_count], -1);
    free(all);
    int64_t bad = 100;
    CHECK_STATUS(ctx, lac_mf_recommend(ctx, m, 1, &bad, 3, items, NULL), LAC_ERR_RANGE);
    lac_mf_model_destroy(&m);
    lac_ratings_destroy(&r);
}

TEST(unknown_users_and_items_get_the_biases)
{
    lac_ratings_t r = generated(50, 40, 800, 0.5, 2);
    lac_mf_model_t m = train_small(ctx, r, 0, 1);
    int64_t users[] = {999999, 1}, items[] = {1, 888888};
    float vals[] = {3, 3}, pred[2];
    lac_ratings_t t = NULL;
    CHECK_OK(ctx, lac_ratings_from_arrays(ctx, 2, users, items, vals, &t));
    int64_t unknown = 0;
    CHECK_OK(ctx, lac_mf_predict(ctx, m, t, pred, NULL, NULL, &unknown));
    CHECK_INT(unknown, 2);
    int64_t j1 = -1;   /* item "1" in the model */
    for (int64_t j = 0; j < m->num_items; j++)
        if (!strcmp(lac_mf_model_item_id(m, j), "1")) j1 = j;
    int64_t u1 = lac_mf_model_user_index(m, "1");
    CHECK(j1 >= 0 && u1 >= 0);
    CHECK_NEAR(pred[0], fmin(m->rating_max, fmax(m->rating_min, m->mean + m->item_bias[j1])), 1e-6);
    CHECK_NEAR(pred[1], fmin(m->rating_max, fmax(m->rating_min, m->mean + m->user_bias[u1])), 1e-6);
    lac_ratings_destroy(&t);
    lac_mf_model_destroy(&m);
    lac_ratings_destroy(&r);
}

TEST(split_random_and_per_user)
{
    lac_ratings_t r = generated(200, 100, 8000, 0.5, 6), a = NULL, b = NULL;
    lac_mf_split_params sp = lac_mf_split_params_default();
    sp.fraction = 0.2;
    CHECK_OK(ctx, lac_mf_split(ctx, &sp, r, &a, &b));
    CHECK_INT(lac_ratings_count(a) + lac_ratings_count(b), lac_ratings_count(r));
    double share = (double)lac_ratings_count(b) / (double)lac_ratings_count(r);
    if (fabs(share - 0.2) > 0.02) HARNESS_FAIL("test share %g, asked 0.2", share);
    lac_ratings_destroy(&a);
    lac_ratings_destroy(&b);
    sp.per_user = 1;
    CHECK_OK(ctx, lac_mf_split(ctx, &sp, r, &a, &b));
    int64_t nu = lac_ratings_num_users(r);
    int64_t *total = calloc((size_t)nu, sizeof(int64_t)), *held = calloc((size_t)nu, sizeof(int64_t));
    for (int64_t i = 0; i < lac_ratings_count(r); i++) {
        int64_t u;
        lac_ratings_get(r, i, &u, NULL, NULL);
        total[u]++;
    }
    for (int64_t i = 0; i < lac_ratings_count(b); i++) {
        int64_t u;
        lac_ratings_get(b, i, &u, NULL, NULL);
        held[u]++;
    }
    for (int64_t u = 0; u < nu; u++) {
        int64_t want = llround(0.2 * (double)total[u]);
        if (want >= total[u]) want = total[u] - 1;
        if (held[u] != want) {
            HARNESS_FAIL("user %lld: %lld held out of %lld, expected %lld", (long long)u, (long long)held[u],
                         (long long)total[u], (long long)want);
            break;
        }
    }
    free(total);
    free(held);
    sp.fraction = 1.0;
    lac_ratings_t c = NULL, e = NULL;
    CHECK_STATUS(ctx, lac_mf_split(ctx, &sp, r, &c, &e), LAC_ERR_ARGUMENT);
    lac_ratings_destroy(&a);
    lac_ratings_destroy(&b);
    lac_ratings_destroy(&r);
}

TEST(generator_is_seeded_and_shaped)
{
    lac_mf_gen_params g = lac_mf_gen_params_default();
    g.users = 500;
    g.items = 300;
    g.ratings = 20000;
    lac_ratings_t a = NULL, b = NULL;
    CHECK_OK(ctx, lac_mf_generate(ctx, &g, &a));
    CHECK_OK(ctx2, lac_mf_generate(ctx2, &g, &b));   /* other thread count */
    CHECK_INT(lac_ratings_count(a), lac_ratings_count(b));
    int same = 1, on_scale = 1;
    int64_t first_user_count = 0, last_user_count = 0;
    for (int64_t i = 0; i < lac_ratings_count(a); i++) {
        int64_t ua, ia, ub, ib;
        float va, vb;
        lac_ratings_get(a, i, &ua, &ia, &va);
        lac_ratings_get(b, i, &ub, &ib, &vb);
        same &= ua == ub && ia == ib && va == vb;
        on_scale &= va >= 0.5f && va <= 5.0f && va * 2 == floorf(va * 2);
        if (!strcmp(lac_ratings_user_id(a, ua), "1")) first_user_count++;
        if (!strcmp(lac_ratings_user_id(a, ua), "500")) last_user_count++;
    }
    CHECK(same);
    CHECK(on_scale);
    double got = (double)lac_ratings_count(a);
    if (got < 0.9 * 20000 || got > 1.02 * 20000) HARNESS_FAIL("generated %g ratings for 20000", got);
    /* power-law activity: the first user is far busier than the last */
    if (!(first_user_count > 5 * last_user_count))
        HARNESS_FAIL("user 1 has %lld ratings, user 500 %lld", (long long)first_user_count, (long long)last_user_count);
    lac_ratings_destroy(&a);
    lac_ratings_destroy(&b);
    g.ratings = 500 * 300;
    CHECK_STATUS(ctx, lac_mf_generate(ctx, &g, &a), LAC_ERR_ARGUMENT);
    CHECK(a == NULL);
}

TEST(parameter_checks)
{
    lac_mf_params p = lac_mf_params_default();
    CHECK(lac_mf_params_check(&p) == NULL);
    p.k = 0;
    CHECK(lac_mf_params_check(&p) != NULL);
    p = lac_mf_params_default();
    p.alpha = NAN;
    CHECK(lac_mf_params_check(&p) != NULL);
    p = lac_mf_params_default();
    p.lambda = -1;
    CHECK(lac_mf_params_check(&p) != NULL);
    lac_ratings_t r = generated(20, 20, 100, 0.5, 1);
    lac_mf_model_t m = NULL;
    CHECK_STATUS(ctx, lac_mf_train(ctx, &p, r, NULL, NULL, NULL, &m, NULL), LAC_ERR_ARGUMENT);
    CHECK_STR_CONTAINS(lac_last_error(ctx), "lambda");
    CHECK(m == NULL);
    p = lac_mf_params_default();
    p.alpha = 50;   /* diverges */
    CHECK_STATUS(ctx, lac_mf_train(ctx, &p, r, NULL, NULL, NULL, &m, NULL), LAC_ERR_VALUE);
    CHECK_STR_CONTAINS(lac_last_error(ctx), "diverged");
    CHECK(m == NULL);
    CHECK_NEAR(lac_mf_learning_rate(&p, 4), 50.0 / (1.0 + p.beta * 8.0), 1e-12);   /* eq. (7): 4^1.5 = 8 */
    lac_ratings_destroy(&r);
}

int main(void)
{
    if (!(ctx = cpu_context(1)) || !(ctx2 = cpu_context(2))) return 1;
    RUN(one_epoch_matches_float64_update_rule);
    RUN(exact_rank_one_is_recovered);
    RUN(converges_on_generated_data_to_the_noise);
    RUN(deterministic_runs_are_identical);
    RUN(duplicates_keep_the_last_rating);
    RUN(model_file_round_trip_and_corruption);
    RUN(recommend_excludes_rated_and_ranks_by_score);
    RUN(unknown_users_and_items_get_the_biases);
    RUN(split_random_and_per_user);
    RUN(generator_is_seeded_and_shaped);
    RUN(parameter_checks);
    lac_ctx_destroy(&ctx);
    lac_ctx_destroy(&ctx2);
    return harness_finish();
}
