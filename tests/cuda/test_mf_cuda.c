/* mf on the CUDA backend (GPU test, label "cuda"): CUSGD++ against the CPU
 * path. Users with disjoint items have no Hogwild conflicts, so one epoch must
 * give the CPU's factors to rounding, for every register layout of u_i: F = 32
 * (8 lanes a user, one float4 each), 16 (4 lanes), 40 (4 lanes, three float4
 * each), 128 (8 lanes, four float4), 300 (a full warp, last slot partly
 * filled) and 1100 (the general path, u_i in global memory). On generated data of the
 * MovieLens-10M shape the validation RMSE must come within 0.005 of the
 * CPU's, and predictions of the downloaded model must reproduce the RMSE
 * reported on the device. A popular item's replicas must average their
 * updates, and rows split over several groups must still converge. A
 * checkpoint written on the device resumes to the same model, bit for bit,
 * on the device and on the CPU, and a training broken off and resumed on the
 * device comes as close as one without a break. */
#include "harness.h"
#include "cuda_harness.h"
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
    lac_ratings_t r = disjoint_ratings(64, 40);   /* 40 ratings a user: whole rows, never split */
    int ks[] = {32, 16, 40, 128, 300, 1100};
    for (int c = 0; c < 6; c++)
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

/* Generated data: CPU (every core) and CUDA validation RMSE, early stopping on. */
static void compare_on_generated(int64_t users, int64_t items, int64_t ratings, uint64_t seed, const int *ks, int nk)
{
    lac_mf_gen_params g = lac_mf_gen_params_default();
    g.users = users;
    g.items = items;
    g.ratings = ratings;
    g.seed = seed;
    lac_ratings_t all = NULL, train = NULL, valid = NULL;
    CHECK_OK(cpu, lac_mf_generate(cpu, &g, &all));
    lac_mf_split_params sp = lac_mf_split_params_default();
    CHECK_OK(cpu, lac_mf_split(cpu, &sp, all, &train, &valid));
    for (int c = 0; c < nk; c++) {
        lac_mf_params p = lac_mf_params_default();
        p.k = ks[c];
        lac_mf_model_t a = NULL, b = NULL;
        lac_mf_report ra, rb;
        CHECK_OK(cpu_all, lac_mf_train(cpu_all, &p, train, valid, NULL, NULL, &a, &ra));
        CHECK_OK(gpu, lac_mf_train(gpu, &p, train, valid, NULL, NULL, &b, &rb));
        if (!a || !b) continue;
        printf("    %lld x %lld, %lld ratings, k = %d: CPU valid RMSE %.4f (%d epochs), CUDA %.4f (%d epochs)\n",
               (long long)users, (long long)items, (long long)lac_ratings_count(train), ks[c], ra.valid_rmse,
               ra.epochs, rb.valid_rmse, rb.epochs);
        if (!(fabs(ra.valid_rmse - rb.valid_rmse) <= 0.005))
            HARNESS_FAIL("%lld ratings, k = %d: CUDA valid RMSE %.5f vs CPU %.5f", (long long)lac_ratings_count(train),
                         ks[c], rb.valid_rmse, ra.valid_rmse);
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

TEST(generated_data_rmse_within_0005_of_cpu)
{
    /* the MovieLens-10M shape (popular items replicated, split rows), and
     * small data (270 K ratings), where all of V fits in an SM's L1: it must
     * be read through L2, or each SM trains a stale copy */
    const int ml_ks[] = {32, 40}, small_ks[] = {32, 64};
    compare_on_generated(69878, 10677, 10000054, 12, ml_ks, 2);
    compare_on_generated(4000, 1500, 300000, 3, small_ks, 2);
}

/* A rank-1 matrix whose users rate more than one run holds (600 ratings a
 * row, cut into runs over several groups): the split rows (atomic folding of
 * u_i) must still fit it. */
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

/* A popular item's replicas: 8 users rate one shared item (and nothing
 * else); with a replica row per 1 rating (knob MF_CUDA_HOT=1) each user
 * lands in its own group and updates its own replica, so one epoch must give,
 * for each user, one step of rule (5) from the initial factors, and for the
 * item the average of the 8 replicas' steps. The initial factors are read
 * back from a run with a learning rate too small to change a float. */
TEST(popular_item_replicas_average_their_updates)
{
    enum { USERS = 8 };
    int64_t u[USERS], i[USERS];
    float v[USERS];
    for (int a = 0; a < USERS; a++) u[a] = a, i[a] = 0, v[a] = (float)(1 + a % 9 * 0.5);
    lac_ratings_t r = NULL;
    CHECK_OK(cpu, lac_ratings_from_arrays(cpu, USERS, u, i, v, &r));
    int ks[] = {32, 128};
    /* the knob set for this context only (the environment is read once) */
    lac_ctx_t hot = NULL;
    lac_ctx_params cp = lac_ctx_params_default();
    cp.backend = LAC_BACKEND_CUDA;
    cp.knobs = "MF_CUDA_HOT=1";
    CHECK_OK(NULL, lac_ctx_create(&cp, &hot));
    for (int c = 0; c < 2; c++) {
        lac_mf_params p = lac_mf_params_default();
        p.k = ks[c];
        p.epochs = 1;
        p.alpha = 1e-30;
        lac_mf_model_t m0 = NULL, m1 = NULL;
        CHECK_OK(hot, lac_mf_train(hot, &p, r, NULL, NULL, NULL, &m0, NULL));
        p.alpha = 0.05;
        CHECK_OK(hot, lac_mf_train(hot, &p, r, NULL, NULL, NULL, &m1, NULL));
        if (!m0 || !m1) continue;
        const double lr = 0.05, shrink = 1.0 - lr * p.lambda, shrink_b = 1.0 - lr * p.lambda_bias;
        const int stride = m0->stride;
        const float *q0 = m0->Q;
        double worst = 0, bias_sum = 0;
        double *q_sum = calloc((size_t)stride, sizeof *q_sum);
        for (int a = 0; a < USERS; a++) {
            const float *p0 = m0->P + (int64_t)a * stride;
            double dot = 0;
            for (int f = 0; f < m0->k; f++) dot += (double)p0[f] * q0[f];
            double e = v[a] - (m0->mean + m0->user_bias[a] + m0->item_bias[0] + dot), step = lr * e;
            for (int f = 0; f < m0->k; f++) {
                worst = fmax(worst, fabs(m1->P[(int64_t)a * stride + f] - (shrink * p0[f] + step * q0[f])));
                q_sum[f] += shrink * q0[f] + step * p0[f];
            }
            worst = fmax(worst, fabs(m1->user_bias[a] - (shrink_b * m0->user_bias[a] + step)));
            bias_sum += shrink_b * m0->item_bias[0] + step;
        }
        for (int f = 0; f < m0->k; f++) worst = fmax(worst, fabs(m1->Q[f] - q_sum[f] / USERS));
        worst = fmax(worst, fabs(m1->item_bias[0] - bias_sum / USERS));
        if (worst > 2e-5) HARNESS_FAIL("k = %d: replicas' average differs from the reference by %g", ks[c], worst);
        free(q_sum);
        lac_mf_model_destroy(&m0);
        lac_mf_model_destroy(&m1);
    }
    lac_ctx_destroy(&hot);
    lac_ratings_destroy(&r);
}

/* Bytes of a model as saved. */
static unsigned char *model_bytes(lac_mf_model_t m, const char *name, long *size)
{
    char path[512];
    harness_temp_path(path, sizeof path, name);
    unsigned char *buf = NULL;
    *size = -1;
    if (lac_mf_model_save(cpu, path, m) != LAC_SUCCESS) return NULL;
    FILE *fp = fopen(path, "rb");
    if (fp && fseek(fp, 0, SEEK_END) == 0 && (*size = ftell(fp)) > 0 && fseek(fp, 0, SEEK_SET) == 0 &&
        (buf = malloc((size_t)*size)) && fread(buf, 1, (size_t)*size, fp) != (size_t)*size) {
        free(buf);
        buf = NULL;
    }
    if (fp) fclose(fp);
    remove(path);
    return buf;
}

static int same_model(lac_mf_model_t a, lac_mf_model_t b)
{
    long na, nb;
    unsigned char *x = model_bytes(a, "ck_a.bin", &na), *y = model_bytes(b, "ck_b.bin", &nb);
    int same = x && y && na == nb && memcmp(x, y, (size_t)na) == 0;
    free(x);
    free(y);
    return same;
}

TEST(checkpoints_written_on_the_device_resume_anywhere)
{
    lac_mf_gen_params g = lac_mf_gen_params_default();
    g.users = 4000;
    g.items = 1500;
    g.ratings = 300000;
    g.seed = 5;
    lac_ratings_t all = NULL, train = NULL, valid = NULL;
    CHECK_OK(cpu, lac_mf_generate(cpu, &g, &all));
    lac_mf_split_params sp = lac_mf_split_params_default();
    CHECK_OK(cpu, lac_mf_split(cpu, &sp, all, &train, &valid));
    char path[512];
    harness_temp_path(path, sizeof path, "mf.ck");
    remove(path);
    lac_mf_params p = lac_mf_params_default();
    p.epochs = 60;
    lac_mf_checkpoint_params ck = lac_mf_checkpoint_params_default();
    ck.path = path;
    lac_mf_model_t a = NULL, b = NULL, c = NULL, d = NULL;
    lac_mf_report ra, rb, rc, rd;
    CHECK_OK(gpu, lac_mf_train_checkpointed(gpu, &p, &ck, train, valid, NULL, NULL, &a, &ra));
    printf("    %d epochs, kept %d, valid RMSE %.4f\n", ra.epochs, ra.best_epoch, ra.valid_rmse);
    /* at its end: nothing left to train, the model comes from the file */
    ck.resume = 1;
    CHECK_OK(gpu, lac_mf_train_checkpointed(gpu, &p, &ck, train, valid, NULL, NULL, &b, &rb));
    CHECK_OK(cpu_all, lac_mf_train_checkpointed(cpu_all, &p, &ck, train, valid, NULL, NULL, &c, &rc));
    if (a && b && c) {
        CHECK(same_model(a, b));
        CHECK(same_model(a, c));
        CHECK_INT(rb.epochs, ra.epochs);
        CHECK_INT(rb.best_epoch, ra.best_epoch);
        CHECK_INT(rc.best_epoch, ra.best_epoch);
    }
    /* broken off after 3 epochs, resumed on the device */
    remove(path);
    ck.resume = 0;
    p.epochs = 3;
    CHECK_OK(gpu, lac_mf_train_checkpointed(gpu, &p, &ck, train, valid, NULL, NULL, &d, &rd));
    lac_mf_model_destroy(&d);
    ck.resume = 1;
    p.epochs = 60;
    CHECK_OK(gpu, lac_mf_train_checkpointed(gpu, &p, &ck, train, valid, NULL, NULL, &d, &rd));
    if (d) {
        printf("    3 + resumed: %d epochs, kept %d, valid RMSE %.4f\n", rd.epochs, rd.best_epoch, rd.valid_rmse);
        CHECK(fabs(rd.valid_rmse - ra.valid_rmse) <= 0.005);
    }
    remove(path);
    lac_mf_model_destroy(&a);
    lac_mf_model_destroy(&b);
    lac_mf_model_destroy(&c);
    lac_mf_model_destroy(&d);
    lac_ratings_destroy(&all);
    lac_ratings_destroy(&train);
    lac_ratings_destroy(&valid);
}

int main(void)
{
    int rc;
    if (!harness_cuda_start(&gpu, &cpu, 1, &rc)) return rc;
    lac_ctx_params p = lac_ctx_params_default();
    if (lac_ctx_create(&p, &cpu_all) != 0) return 1;
    RUN(disjoint_users_match_the_cpu);
    RUN(generated_data_rmse_within_0005_of_cpu);
    RUN(heavy_rows_split_over_warps_still_converge);
    RUN(popular_item_replicas_average_their_updates);
    RUN(checkpoints_written_on_the_device_resume_anywhere);
    lac_ctx_destroy(&gpu);
    lac_ctx_destroy(&cpu);
    lac_ctx_destroy(&cpu_all);
    return harness_finish();
}
