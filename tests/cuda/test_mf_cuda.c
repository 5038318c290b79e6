/* mf on the CUDA backend (GPU test, label "cuda"): CUSGD++ against the CPU
 * path. Users with disjoint items have no Hogwild conflicts, so one epoch must
 * give the CPU's factors to rounding, for F = 32 (full warps), 20 and 40
 * (masked lanes) and 300 (the general path). On generated data of the
 * MovieLens-10M shape the validation RMSE must come within 0.005 of the
 * CPU's, and predictions of the downloaded model must reproduce the RMSE
 * reported on the device. */
#include "harness.h"
#include "lacuna/lacuna.h"
#include "mf/mf_internal.h"

static lac_ctx_t gpu, cpu, cpu_all;   /* cpu: one thread; cpu_all: every core */

static lac_ratings_t disjoint_ratings(int users, int per_user)
{
    int64_t n = (int64_t)users * per_user;
    int64_t *u = malloc(sizeof(int64_t) * (size_t)n), *i = malloc(sizeof(int64_t) * (size_t)n);
    float *v = malloc(sizeof(float) * (size_t)n);
    unsigned long long s = 42;
    for (int64_t a = 0; a < n; a++) {
        u[a] = a / per_user;
        i[a] = a;   /* every rating its own item: no two users share one */
        v[a] = (float)(1 + (int)(harness_rand_uniform(&s) * 9) * 0.5);
    }
    lac_ratings_t r = NULL;
    CHECK_OK(cpu, lac_ratings_from_arrays(cpu, n, u, i, v, &r));
    free(u);
    free(i);
    free(v);
    return r;
}

TEST(disjoint_users_match_the_cpu)
{
    lac_ratings_t r = disjoint_ratings(64, 40);   /* 40 < one warp run: sequential per user */
    int ks[] = {32, 20, 40, 300};
    for (int c = 0; c < 4; c++)
        for (int bias = 0; bias <= 1; bias++) {
            lac_mf_params p = lac_mf_params_default();
            p.k = ks[c];
            p.epochs = 1;
            p.use_bias = bias;
            p.alpha = 0.02;
            lac_mf_model_t a = NULL, b = NULL;
            CHECK_OK(cpu, lac_mf_train(cpu, &p, r, NULL, NULL, NULL, &a, NULL));
            CHECK_OK(gpu, lac_mf_train(gpu, &p, r, NULL, NULL, NULL, &b, NULL));
            if (!a || !b) continue;
            double worst = 0;
            for (int64_t x = 0; x < a->num_users * a->stride; x++) worst = fmax(worst, fabs(a->P[x] - b->P[x]));
            for (int64_t x = 0; x < a->num_items * a->stride; x++) worst = fmax(worst, fabs(a->Q[x] - b->Q[x]));
            for (int64_t x = 0; x < a->num_users; x++) worst = fmax(worst, fabs(a->user_bias[x] - b->user_bias[x]));
            for (int64_t x = 0; x < a->num_items; x++) worst = fmax(worst, fabs(a->item_bias[x] - b->item_bias[x]));
            if (worst > 2e-5) HARNESS_FAIL("k = %d, bias %d: CUDA and CPU factors differ by %g", ks[c], bias, worst);
            lac_mf_model_destroy(&a);
            lac_mf_model_destroy(&b);
        }
    lac_ratings_destroy(&r);
}

TEST(generated_data_rmse_within_0005_of_cpu)
{
    /* the MovieLens-10M shape: on small data CUSGD++ converges far slower
     * than the CPU (lost v_j updates; docs/mf.md), and --device auto keeps
     * such problems on the CPU */
    lac_mf_gen_params g = lac_mf_gen_params_default();
    g.users = 69878;
    g.items = 10677;
    g.ratings = 10000054;
    g.seed = 12;
    lac_ratings_t all = NULL, train = NULL, valid = NULL;
    CHECK_OK(cpu, lac_mf_generate(cpu, &g, &all));
    lac_mf_split_params sp = lac_mf_split_params_default();
    CHECK_OK(cpu, lac_mf_split(cpu, &sp, all, &train, &valid));
    int ks[] = {32, 40};
    for (int c = 0; c < 2; c++) {
        lac_mf_params p = lac_mf_params_default();
        p.k = ks[c];
        lac_mf_model_t a = NULL, b = NULL;
        lac_mf_report ra, rb;
        CHECK_OK(cpu_all, lac_mf_train(cpu_all, &p, train, valid, NULL, NULL, &a, &ra));
        CHECK_OK(gpu, lac_mf_train(gpu, &p, train, valid, NULL, NULL, &b, &rb));
        if (!a || !b) continue;
        printf("    k = %d: CPU valid RMSE %.4f (%d epochs), CUDA %.4f (%d epochs)\n", ks[c], ra.valid_rmse, ra.epochs,
               rb.valid_rmse, rb.epochs);
        if (!(fabs(ra.valid_rmse - rb.valid_rmse) <= 0.005))
            HARNESS_FAIL("k = %d: CUDA valid RMSE %.5f vs CPU %.5f", ks[c], rb.valid_rmse, ra.valid_rmse);
        double rmse;
        CHECK_OK(cpu, lac_mf_predict(cpu, b, valid, NULL, &rmse, NULL, NULL));
        CHECK_NEAR(rmse, rb.valid_rmse, 1e-4);
        lac_mf_model_destroy(&a);
        lac_mf_model_destroy(&b);
    }
    lac_ratings_destroy(&all);
    lac_ratings_destroy(&train);
    lac_ratings_destroy(&valid);
}

/* A rank-1 matrix whose users rate more than one warp run: the split rows
 * (atomic folding of u_i) must still fit it exactly. */
TEST(heavy_rows_split_over_warps_still_converge)
{
    int nu = 20, ni = 600;
    int64_t n = (int64_t)nu * ni;
    int64_t *u = malloc(sizeof(int64_t) * (size_t)n), *i = malloc(sizeof(int64_t) * (size_t)n);
    float *v = malloc(sizeof(float) * (size_t)n);
    for (int64_t a = 0; a < n; a++) {
        u[a] = a / ni;
        i[a] = a % ni;
        v[a] = (float)((1.0 + 0.05 * (double)u[a]) * (1.0 + 0.002 * (double)i[a]));
    }
    lac_ratings_t r = NULL;
    CHECK_OK(cpu, lac_ratings_from_arrays(cpu, n, u, i, v, &r));
    lac_mf_params p = lac_mf_params_default();
    p.k = 32;
    p.use_bias = 0;
    p.lambda = 0;
    p.alpha = 0.005;
    p.beta = 0;
    p.epochs = 200;
    lac_mf_model_t m = NULL;
    lac_mf_report rep;
    CHECK_OK(gpu, lac_mf_train(gpu, &p, r, NULL, NULL, NULL, &m, &rep));
    if (!(rep.train_rmse < 0.08)) HARNESS_FAIL("rank-1 with 600-rating rows: train RMSE %g", rep.train_rmse);
    lac_mf_model_destroy(&m);
    lac_ratings_destroy(&r);
    free(u);
    free(i);
    free(v);
}

int main(void)
{
    if (lac_cuda_device_count() == 0) {
        printf("no CUDA device: skipped\n");
        return 0;
    }
    lac_ctx_params p = lac_ctx_params_default();
    p.backend = LAC_BACKEND_CUDA;
    if (lac_ctx_create(&p, &gpu) != 0) {
        printf("no CUDA context: %s\n", lac_last_error(NULL));
        return 1;
    }
    p.backend = LAC_BACKEND_CPU;
    p.threads = 1;
    if (lac_ctx_create(&p, &cpu) != 0) return 1;
    p.threads = 0;
    if (lac_ctx_create(&p, &cpu_all) != 0) return 1;
    RUN(disjoint_users_match_the_cpu);
    RUN(generated_data_rmse_within_0005_of_cpu);
    RUN(heavy_rows_split_over_warps_still_converge);
    lac_ctx_destroy(&gpu);
    lac_ctx_destroy(&cpu);
    lac_ctx_destroy(&cpu_all);
    return harness_finish();
}
