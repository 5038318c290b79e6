/* mf ranking metrics against a small case computed by hand (full ranking and
 * sampled negatives where every free item is sampled), the sampled protocol
 * against a brute-force count, and leave-one-out splits by time. */
#include "cpu_context.h"
#include "harness.h"
#include "lacuna/lacuna.h"
#include "mf/mf_internal.h"

#include <math.h>
#include <stdlib.h>

static lac_ctx_t ctx, ctx2;

/* Users 1, 2, 3; items 10..15 (dense 0..5, all rated by user 3). User 1
 * rated 10, user 2 rated 11. Scores: u . v = v_j = 0.9, 0.8, ..., 0.4. */
static lac_mf_model_t hand_model(void)
{
    int64_t u[] = {1, 2, 3, 3, 3, 3, 3, 3}, j[] = {10, 11, 10, 11, 12, 13, 14, 15};
    float r[] = {5, 4, 3, 3, 3, 3, 3, 3};
    lac_ratings_t train = NULL;
    CHECK_OK(ctx, lac_ratings_from_arrays(ctx, 8, u, j, r, &train));
    lac_mf_params p = lac_mf_params_default();
    p.k = 1;
    p.epochs = 1;
    p.deterministic = 1;
    lac_mf_model_t m = NULL;
    CHECK_OK(ctx, lac_mf_train(ctx, &p, train, NULL, NULL, NULL, &m, NULL));
    lac_ratings_destroy(&train);
    if (!m) return NULL;
    m->mean = 0;
    for (int64_t a = 0; a < m->num_users; a++) m->P[a * m->stride] = 1.0f, m->user_bias[a] = 0;
    for (int64_t b = 0; b < m->num_items; b++) m->Q[b * m->stride] = 0.9f - 0.1f * (float)b, m->item_bias[b] = 0;
    return m;
}

static lac_ratings_t hand_test(void)
{
    /* relevant: user 1 {13, 15}, user 2 {10}; skipped: an unknown user, a
     * pair rated in training, a pair given twice */
    int64_t u[] = {1, 1, 2, 9, 1, 2}, j[] = {13, 15, 10, 10, 10, 10};
    float r[] = {1, 1, 1, 1, 1, 1};
    lac_ratings_t t = NULL;
    CHECK_OK(ctx, lac_ratings_from_arrays(ctx, 6, u, j, r, &t));
    return t;
}

TEST(full_ranking_by_hand)
{
    lac_mf_model_t m = hand_model();
    lac_ratings_t t = hand_test();
    if (!m || !t) return;
    lac_mf_rank_params p = lac_mf_rank_params_default();
    p.n = 3;
    p.negatives = 0;
    lac_mf_rank_report r;
    CHECK_OK(ctx, lac_mf_rank_evaluate(ctx, &p, m, t, &r));
    /* user 1: top 3 of {11 .8, 12 .7, 13 .6, 14 .5, 15 .4} = 11 12 13: one hit at
     * position 3: HR 1, NDCG (1/log2 4) / (1 + 1/log2 3), P 1/3, R 1/2, AP (1/3)/2.
     * user 2: top 3 of {10 .9, 12, 13, 14, 15} = 10 12 13: hit at 1: all 1 but P 1/3. */
    double ndcg1 = 0.5 / (1.0 + 1.0 / log2(3.0));
    CHECK_NEAR(r.hr, 1.0, 1e-12);
    CHECK_NEAR(r.ndcg, (ndcg1 + 1.0) / 2, 1e-12);
    CHECK_NEAR(r.precision, 1.0 / 3, 1e-12);
    CHECK_NEAR(r.recall, (0.5 + 1.0) / 2, 1e-12);
    CHECK_NEAR(r.map, (1.0 / 6 + 1.0) / 2, 1e-12);
    CHECK_INT(r.users, 2);
    CHECK_INT(r.pairs, 3);
    CHECK_INT(r.skipped, 3);
    /* each user's NDCG, in user order (the implicit search's paired test) */
    double *ndcg = NULL;
    CHECK_OK(ctx, lac_mf_rank_users(ctx, &p, m, t, &r, &ndcg));
    if (ndcg) {
        CHECK_NEAR(ndcg[0], ndcg1, 1e-12);
        CHECK_NEAR(ndcg[1], 1.0, 1e-12);
    }
    free(ndcg);
    /* n = 2: user 1 has no hit; user 2 as before but P 1/2, AP 1 */
    p.n = 2;
    CHECK_OK(ctx, lac_mf_rank_evaluate(ctx, &p, m, t, &r));
    CHECK_NEAR(r.hr, 0.5, 1e-12);
    CHECK_NEAR(r.ndcg, 0.5, 1e-12);
    CHECK_NEAR(r.precision, 0.25, 1e-12);
    CHECK_NEAR(r.recall, 0.5, 1e-12);
    CHECK_NEAR(r.map, 0.5, 1e-12);
    lac_mf_model_destroy(&m);
    lac_ratings_destroy(&t);
}

/* The implicit search moves only on a gain beyond two standard errors of
 * the users' paired differences: a tiny mean gain with a wide spread is no
 * gain, a steady one is, a loss is not, one user tells nothing. */
TEST(search_moves_only_on_a_clear_gain)
{
    enum { U = 1000 };
    double *with = malloc(U * sizeof *with), *without = malloc(U * sizeof *without);
    if (!with || !without) {
        CHECK(0);
        free(with), free(without);
        return;
    }
    for (int x = 0; x < U; x++) {   /* differences +-0.3 with mean 0.002: z = 0.002 / (0.3 / sqrt(1000)) = 0.21 */
        with[x] = 0.1;
        without[x] = 0.1 + (x % 2 ? 0.302 : -0.298);
    }
    CHECK_INT(lac_mf_tune_clear_gain(without, with, U), 0);
    for (int x = 0; x < U; x++) without[x] = 0.1 + 0.02 + (x % 2 ? 0.1 : -0.1);   /* z = 0.02 / (0.1 / 31.6) = 6.3 */
    CHECK_INT(lac_mf_tune_clear_gain(without, with, U), 1);
    CHECK_INT(lac_mf_tune_clear_gain(with, without, U), 0);
    for (int x = 0; x < U; x++) without[x] = 0.1 - 0.02 + (x % 2 ? 0.1 : -0.1);
    CHECK_INT(lac_mf_tune_clear_gain(without, with, U), 0);
    CHECK_INT(lac_mf_tune_clear_gain(with, without, U), 1);
    CHECK_INT(lac_mf_tune_clear_gain(with, without, 1), 0);   /* one user: nothing to test */
    free(with);
    free(without);
}

TEST(sampled_negatives_by_hand)
{
    lac_mf_model_t m = hand_model();
    lac_ratings_t t = hand_test();
    if (!m || !t) return;
    lac_mf_rank_params p = lac_mf_rank_params_default();   /* 99 negatives: fewer are free, all taken */
    p.n = 3;
    lac_mf_rank_report r;
    CHECK_OK(ctx, lac_mf_rank_evaluate(ctx, &p, m, t, &r));
    /* user 1's negatives {11, 12, 14}: item 13 (.6) ranks 2 (hit: NDCG 1/log2 4 = .5,
     * P 1/3, R 1, AP 1/3), item 15 (.4) ranks 3 (miss): the user's mean is half.
     * user 2's negatives {12, 13, 14, 15}: item 10 ranks 0: 1, 1, 1/3, 1, 1. */
    CHECK_NEAR(r.hr, (0.5 + 1.0) / 2, 1e-12);
    CHECK_NEAR(r.ndcg, (0.25 + 1.0) / 2, 1e-12);
    CHECK_NEAR(r.precision, (1.0 / 6 + 1.0 / 3) / 2, 1e-12);
    CHECK_NEAR(r.recall, (0.5 + 1.0) / 2, 1e-12);
    CHECK_NEAR(r.map, (1.0 / 6 + 1.0) / 2, 1e-12);
    CHECK_INT(r.users, 2);
    /* bad parameters */
    p.n = 0;
    CHECK_STATUS(ctx, lac_mf_rank_evaluate(ctx, &p, m, t, &r), LAC_ERR_ARGUMENT);
    p.n = 3;
    p.negatives = -1;
    CHECK_STATUS(ctx, lac_mf_rank_evaluate(ctx, &p, m, t, &r), LAC_ERR_ARGUMENT);
    lac_mf_model_destroy(&m);
    lac_ratings_destroy(&t);
}

/* On generated data with 99 of many free items sampled: the figures are
 * seeded (any thread count), HR@n of a model whose scores rank items at
 * random is near n / (negatives + 1), and HR of full ranking with n = all
 * items is 1. */
TEST(sampled_negatives_on_generated_data)
{
    lac_mf_gen_params g = lac_mf_gen_params_default();
    g.users = 300;
    g.items = 400;
    g.ratings = 6000;
    g.seed = 5;
    lac_ratings_t all = NULL, train = NULL, test = NULL;
    CHECK_OK(ctx, lac_mf_generate(ctx, &g, &all));
    lac_mf_split_params sp = lac_mf_split_params_default();
    CHECK_OK(ctx, lac_mf_split(ctx, &sp, all, &train, &test));
    lac_mf_params p = lac_mf_params_default();
    p.k = 4;
    p.epochs = 3;
    p.deterministic = 1;
    lac_mf_model_t m = NULL;
    CHECK_OK(ctx, lac_mf_train(ctx, &p, train, NULL, NULL, NULL, &m, NULL));
    if (!m) return;
    lac_mf_rank_params rp = lac_mf_rank_params_default();
    lac_mf_rank_report a, b, c;
    CHECK_OK(ctx, lac_mf_rank_evaluate(ctx, &rp, m, test, &a));
    CHECK_OK(ctx2, lac_mf_rank_evaluate(ctx2, &rp, m, test, &b));
    CHECK(a.hr == b.hr && a.ndcg == b.ndcg && a.map == b.map);
    rp.seed = 2;
    CHECK_OK(ctx, lac_mf_rank_evaluate(ctx, &rp, m, test, &c));
    CHECK(c.hr != a.hr || c.ndcg != a.ndcg);
    /* random scores: every score equal would count every negative as ranking
     * above; so shuffle the item factors' meaning with random values */
    unsigned long long s = 7;
    for (int64_t j = 0; j < m->num_items; j++) {
        m->item_bias[j] = (float)harness_rand_uniform(&s);
        for (int f = 0; f < m->k; f++) m->Q[j * m->stride + f] = 0;
    }
    CHECK_OK(ctx, lac_mf_rank_evaluate(ctx, &rp, m, test, &c));
    CHECK(c.hr > 0.05 && c.hr < 0.15);   /* 10 / 100 */
    CHECK_NEAR(c.recall, c.hr, 1e-12);     /* one relevant item a case */
    rp.negatives = 0;
    rp.n = (int)m->num_items;
    CHECK_OK(ctx, lac_mf_rank_evaluate(ctx, &rp, m, test, &c));
    CHECK_NEAR(c.hr, 1.0, 1e-12);
    CHECK_NEAR(c.recall, 1.0, 1e-12);
    lac_mf_model_destroy(&m);
    lac_ratings_destroy(&all);
    lac_ratings_destroy(&train);
    lac_ratings_destroy(&test);
}

TEST(leave_last_split_by_timestamp)
{
    char path[512];
    harness_temp_path(path, sizeof path, "leave_last.dat");
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f) return;
    /* user 1: latest 300 (item 10); user 2: one rating, kept in train;
     * user 3: a tie at 7, the later line (item 12) */
    fputs("1::10::5::300\n1::11::4::100\n1::12::3::200\n2::10::2::50\n3::11::4::7\n3::12::1::7\n3::13::2::6\n", f);
    fclose(f);
    lac_ratings_t all = NULL, train = NULL, test = NULL;
    CHECK_OK(ctx, lac_ratings_read(ctx, path, NULL, &all));
    remove(path);
    if (!all) return;
    lac_mf_split_params sp = lac_mf_split_params_default();
    sp.leave_last = 1;
    CHECK_OK(ctx, lac_mf_split(ctx, &sp, all, &train, &test));
    if (!test) return;
    CHECK_INT(lac_ratings_count(train), 5);
    CHECK_INT(lac_ratings_count(test), 2);
    int64_t u, j;
    float v;
    lac_ratings_get(test, 0, &u, &j, &v);
    CHECK(!strcmp(lac_ratings_user_id(test, u), "1") && !strcmp(lac_ratings_item_id(test, j), "10"));
    lac_ratings_get(test, 1, &u, &j, &v);
    CHECK(!strcmp(lac_ratings_user_id(test, u), "3") && !strcmp(lac_ratings_item_id(test, j), "12"));
    lac_ratings_destroy(&train);
    lac_ratings_destroy(&test);
    lac_ratings_destroy(&all);
    /* without timestamps: each user's last line */
    int64_t uu[] = {1, 1, 2, 2}, jj[] = {5, 6, 7, 8};
    float rr[] = {1, 2, 3, 4};
    CHECK_OK(ctx, lac_ratings_from_arrays(ctx, 4, uu, jj, rr, &all));
    CHECK_OK(ctx, lac_mf_split(ctx, &sp, all, &train, &test));
    if (test) {
        CHECK_INT(lac_ratings_count(test), 2);
        lac_ratings_get(test, 1, &u, &j, &v);
        CHECK(!strcmp(lac_ratings_item_id(test, j), "8"));
    }
    lac_ratings_destroy(&train);
    lac_ratings_destroy(&test);
    lac_ratings_destroy(&all);
}

int main(void)
{
    if (!(ctx = cpu_context(1)) || !(ctx2 = cpu_context(2))) return 1;
    RUN(full_ranking_by_hand);
    RUN(search_moves_only_on_a_clear_gain);
    RUN(sampled_negatives_by_hand);
    RUN(sampled_negatives_on_generated_data);
    RUN(leave_last_split_by_timestamp);
    lac_ctx_destroy(&ctx);
    lac_ctx_destroy(&ctx2);
    return harness_finish();
}
