/* mf out of the box: rating scales other than 1-5 train with the defaults
 * (the RMSE scales with the ratings), the automatic search of the
 * hyper-parameters picks the regularisation that a grid on the test set
 * finds best. */
#include "harness.h"
#include "lacuna/lacuna.h"

#include <stdlib.h>

static lac_ctx_t ctx;

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

/* The ratings a * r + b, ids the dense indices. */
static lac_ratings_t rescaled(lac_ratings_t r, double a, double b)
{
    int64_t n = lac_ratings_count(r);
    int64_t *u = malloc((size_t)n * sizeof *u), *j = malloc((size_t)n * sizeof *j);
    float *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++) {
        lac_ratings_get(r, i, &u[i], &j[i], &v[i]);
        v[i] = (float)(a * v[i] + b);
    }
    lac_ratings_t out = NULL;
    CHECK_OK(ctx, lac_ratings_from_arrays(ctx, n, u, j, v, &out));
    free(u);
    free(j);
    free(v);
    return out;
}

/* Test RMSE of the defaults on the ratings a * r + b, in units of a. */
static double default_rmse_scaled(lac_ratings_t all, double a, double b)
{
    lac_ratings_t s = rescaled(all, a, b), train = NULL, test = NULL;
    lac_mf_split_params sp = lac_mf_split_params_default();
    sp.fraction = 0.2;
    sp.seed = 5;
    CHECK_OK(ctx, lac_mf_split(ctx, &sp, s, &train, &test));
    lac_mf_params p = lac_mf_params_default();
    p.deterministic = 1;
    p.k = 8;
    lac_mf_model_t m = NULL;
    lac_mf_report rep;
    double rmse = NAN;
    CHECK_OK(ctx, lac_mf_train(ctx, &p, train, test, NULL, NULL, &m, &rep));
    if (m) CHECK_OK(ctx, lac_mf_predict(ctx, m, test, NULL, &rmse, NULL, NULL));
    if (m) CHECK_NEAR(rmse, rep.valid_rmse, 1e-5);   /* the report is in rating units */
    lac_mf_model_destroy(&m);
    lac_ratings_destroy(&s);
    lac_ratings_destroy(&train);
    lac_ratings_destroy(&test);
    return rmse / fabs(a);
}

TEST(scales_other_than_one_to_five_train_with_the_defaults)
{
    lac_ratings_t all = generated(400, 200, 16000, 0.5, 3);
    double base = default_rmse_scaled(all, 1.0, 0.0);
    CHECK(base < 0.75);
    /* 0-100, -10..10, 0-10 and 0-1000: no divergence, the same fit in units */
    const double scale[][2] = {{25.0, -25.0}, {5.0, -15.0}, {2.5, -2.5}, {250.0, -250.0}};
    for (int s = 0; s < 4; s++) {
        double r = default_rmse_scaled(all, scale[s][0], scale[s][1]);
        if (!(fabs(r - base) < 0.05 * base)) HARNESS_FAIL("scale %g: RMSE %.4f in 1-5 units, %.4f on 1-5", scale[s][0], r, base);
    }
    lac_ratings_destroy(&all);
}

/* Test RMSE of p trained on train with early stopping on test (the grid's
 * view, peeking at the test set) or for p.epochs (peek = 0). */
static double test_rmse(lac_mf_params p, lac_ratings_t train, lac_ratings_t test, int peek)
{
    lac_mf_model_t m = NULL;
    double rmse = NAN;
    CHECK_OK(ctx, lac_mf_train(ctx, &p, train, peek ? test : NULL, NULL, NULL, &m, NULL));
    if (m) CHECK_OK(ctx, lac_mf_predict(ctx, m, test, NULL, &rmse, NULL, NULL));
    lac_mf_model_destroy(&m);
    return rmse;
}

TEST(the_search_picks_the_best_regularisation_of_a_grid_on_the_test_set)
{
    /* noisy and sparse: the defaults' lambda overfits */
    lac_ratings_t all = generated(300, 200, 9000, 1.0, 11), train = NULL, test = NULL;
    lac_mf_split_params sp = lac_mf_split_params_default();
    sp.fraction = 0.2;
    sp.seed = 2;
    CHECK_OK(ctx, lac_mf_split(ctx, &sp, all, &train, &test));
    lac_mf_params base = lac_mf_params_default();
    base.deterministic = 1;
    base.k = 8;
    double best = INFINITY, best_lambda = 0.0;
    for (double l = 0.0075; l < 1.0; l *= 2) {
        lac_mf_params p = base;
        p.lambda = l;
        double r = test_rmse(p, train, test, 1);
        if (r < best) best = r, best_lambda = l;
    }
    CHECK(best_lambda > base.lambda);   /* the case the search is for */
    lac_mf_tune_params tp = lac_mf_tune_params_default();
    tp.search = LAC_MF_TUNE_LAMBDA;
    lac_mf_params chosen = base;
    lac_mf_tune_report rep;
    CHECK_OK(ctx, lac_mf_tune(ctx, &tp, &chosen, train, &rep));
    CHECK_INT(rep.searched, LAC_MF_TUNE_LAMBDA);
    CHECK(rep.trials >= 3 && rep.trials <= 9);
    CHECK(rep.rmse < rep.start_rmse);
    CHECK_INT(chosen.k, base.k);   /* not searched: as given */
    CHECK_NEAR(chosen.alpha, base.alpha, 0);
    if (!(chosen.lambda >= best_lambda / 2.01 && chosen.lambda <= best_lambda * 2.01))
        HARNESS_FAIL("chose lambda %g, the grid's best on test %g", chosen.lambda, best_lambda);
    CHECK(chosen.epochs >= 1 && chosen.epochs <= base.epochs);
    /* trained on all of train for the chosen epochs, without peeking */
    double r = test_rmse(chosen, train, test, 0), r0 = test_rmse(base, train, test, 0);
    if (!(r < best * 1.01)) HARNESS_FAIL("test RMSE %.4f chosen, %.4f the grid's best", r, best);
    CHECK(r < r0);
    /* nothing to search, too few ratings: as given */
    lac_mf_params q = base;
    tp.search = 0;
    CHECK_OK(ctx, lac_mf_tune(ctx, &tp, &q, train, &rep));
    CHECK_INT(rep.searched, 0);
    CHECK_INT(q.epochs, base.epochs);
    lac_ratings_destroy(&all);
    lac_ratings_destroy(&train);
    lac_ratings_destroy(&test);
}

int main(void)
{
    lac_ctx_params p = lac_ctx_params_default();
    p.backend = LAC_BACKEND_CPU;
    p.threads = 1;
    if (lac_ctx_create(&p, &ctx) != 0) return 1;
    RUN(scales_other_than_one_to_five_train_with_the_defaults);
    RUN(the_search_picks_the_best_regularisation_of_a_grid_on_the_test_set);
    lac_ctx_destroy(&ctx);
    return harness_finish();
}
