/* mf over several devices of one context (GPU test, label "cuda"): the block
 * rotation of src/backend/cuda/mf/mf_multi.cu with two and three shares of
 * device 0 (cuda:0,0 and cuda:0,0,0; three is an odd block count) against
 * one device and the CPU: on generated data the validation RMSE (early
 * stopping on, so the kept epoch is restored through the rotation) must come
 * within 0.005 of one device's, and predictions of the downloaded model must
 * reproduce the RMSE reported during training (every block gathered into the
 * model's indices). The neighbourhood model rotates too (every training
 * holding all item rows for the neighbours' baselines): within 0.005 (two
 * shares) and 0.01 (three) of one device's RMSE on planted item clusters, and the downloaded model
 * (W, C and R(i) gathered) predicts what training reported. Implicit
 * feedback rotates too (each training's negatives drawn within its item
 * block, weighted to its users' share of one process's): on planted
 * preferences HR@10 / NDCG@10 (full ranking, leave-one-out) within 0.05 /
 * 0.03 of one device's, both models with cross-entropy and BPR, and the
 * first epoch's mean loss at a
 * learning rate of 1e-7 (the negatives' weight) within 1% of one device's,
 * also where most users have no positive in most blocks (cross-entropy,
 * both models; within 0.2% for the plain model).
 * More shares than users train on the first device (logged), and
 * deterministic training is refused as on one device. A checkpoint written by a rotation
 * resumes at its end to the same model (on the rotation and on the CPU), and
 * a training broken off after 3 epochs on two shares and resumed on three
 * comes as close as one without a break. */
#include "harness.h"
#include "lacuna/lacuna.h"
#include "mf/mf_internal.h"
#include "mf_planted.h"

#include <math.h>
#include <string.h>

static lac_ctx_t cpu, one, shares[6];   /* shares[n]: n shares of device 0 */
static char seen[4096];

static void keep_log(lac_log_level level, const char *message, void *user)
{
    (void)level;
    (void)user;
    if (strstr(message, "rotation") || strstr(message, "first of the context"))
        snprintf(seen + strlen(seen), sizeof seen - strlen(seen), "%s\n", message);
}

static lac_ctx_t make_ctx(int n)
{
    lac_ctx_params p = lac_ctx_params_default();
    p.backend = LAC_BACKEND_CUDA;
    p.num_devices = n;   /* device_ids all 0 */
    p.log = keep_log;
    p.log_level = LAC_LOG_INFO;
    /* implicit feedback: one device's drawn negatives, as the shares' parts
     * draw them (its default, in-batch negatives: test_mf_implicit_cuda.c) */
    p.knobs = "MF_CUDA_INBATCH=-1";
    lac_ctx_t c = NULL;
    if (lac_ctx_create(&p, &c) != 0) HARNESS_FAIL("context of %d shares: %s", n, lac_last_error(NULL));
    return c;
}

static void split_generated_clusters(int64_t users, int64_t items, int64_t ratings, uint64_t seed, int clusters,
                                     lac_ratings_t *train, lac_ratings_t *valid)
{
    lac_mf_gen_params g = lac_mf_gen_params_default();
    g.users = users;
    g.items = items;
    g.ratings = ratings;
    g.seed = seed;
    g.item_clusters = clusters;
    lac_ratings_t all = NULL;
    CHECK_OK(cpu, lac_mf_generate(cpu, &g, &all));
    lac_mf_split_params sp = lac_mf_split_params_default();
    CHECK_OK(cpu, lac_mf_split(cpu, &sp, all, train, valid));
    lac_ratings_destroy(&all);
}

static void split_generated(int64_t users, int64_t items, int64_t ratings, uint64_t seed, lac_ratings_t *train,
                            lac_ratings_t *valid)
{
    split_generated_clusters(users, items, ratings, seed, 0, train, valid);
}

/* Trains on ctx; checks the downloaded model's RMSE against the report. */
static double train_rmse(lac_ctx_t ctx, const lac_mf_params *p, lac_ratings_t train, lac_ratings_t valid, int *epochs)
{
    lac_mf_model_t m = NULL;
    lac_mf_report r;
    CHECK_OK(ctx, lac_mf_train(ctx, p, train, valid, NULL, NULL, &m, &r));
    if (!m) return NAN;
    double rmse = NAN;
    CHECK_OK(cpu, lac_mf_predict(cpu, m, valid, NULL, &rmse, NULL, NULL));
    CHECK_NEAR(rmse, r.valid_rmse, 1e-4);
    lac_mf_model_destroy(&m);
    *epochs = r.epochs;
    return r.valid_rmse;
}

/* r[n], e[n]: the RMSE and epochs on n = 1 (one device), 2 and 3 shares,
 * checking that the shares rotated. */
static void train_on_shares(const lac_mf_params *p, lac_ratings_t train, lac_ratings_t valid, double r[4], int e[4])
{
    r[1] = train_rmse(one, p, train, valid, &e[1]);
    for (int n = 2; n <= 3; n++) {
        char want[64];
        snprintf(want, sizeof want, "%d devices, the rotation over %d x %d blocks", n, n, n);
        seen[0] = 0;
        r[n] = train_rmse(shares[n], p, train, valid, &e[n]);
        if (!strstr(seen, want)) HARNESS_FAIL("%d shares did not rotate: %s", n, seen);
    }
}

static void compare(int64_t users, int64_t items, int64_t ratings, uint64_t seed, int k)
{
    lac_ratings_t train = NULL, valid = NULL;
    split_generated(users, items, ratings, seed, &train, &valid);
    lac_mf_params p = lac_mf_params_default();
    p.k = k;
    double r[4];
    int e[4] = {0}, ec = 0;
    train_on_shares(&p, train, valid, r, e);
    const double r1 = r[1], r2 = r[2], r3 = r[3];
    const int e1 = e[1], e2 = e[2], e3 = e[3];
    double rc = train_rmse(cpu, &p, train, valid, &ec);
    printf("    %lld x %lld, %lld ratings, k = %d: valid RMSE CPU %.4f (%d epochs), cuda:0 %.4f (%d), cuda:0,0 %.4f "
           "(%d), cuda:0,0,0 %.4f (%d)\n",
           (long long)users, (long long)items, (long long)lac_ratings_count(train), k, rc, ec, r1, e1, r2, e2, r3, e3);
    if (!(fabs(r2 - r1) <= 0.005)) HARNESS_FAIL("cuda:0,0 valid RMSE %.5f vs cuda:0 %.5f", r2, r1);
    if (!(fabs(r3 - r1) <= 0.005)) HARNESS_FAIL("cuda:0,0,0 valid RMSE %.5f vs cuda:0 %.5f", r3, r1);
    if (!(fabs(r3 - rc) <= 0.005)) HARNESS_FAIL("cuda:0,0,0 valid RMSE %.5f vs the CPU %.5f", r3, rc);
    lac_ratings_destroy(&train);
    lac_ratings_destroy(&valid);
}

TEST(rotation_rmse_within_0005_of_one_device)
{
    compare(4000, 1500, 300000, 3, 32);     /* small: all of V in L2 */
    compare(30000, 6000, 3000000, 7, 64);   /* popular items with replicas, split rows */
}

/* Fewer users (4) than shares (5): trains on the first device, logged. */
TEST(more_shares_than_users_trains_on_the_first_device)
{
    int64_t u[40], i[40];
    float v[40];
    for (int a = 0; a < 40; a++) {
        u[a] = a % 4;
        i[a] = a;
        v[a] = (float)(1 + a % 5);
    }
    lac_ratings_t r = NULL;
    CHECK_OK(cpu, lac_ratings_from_arrays(cpu, 40, u, i, v, &r));
    lac_mf_params p = lac_mf_params_default();
    p.k = 8;
    p.epochs = 3;
    lac_mf_model_t m = NULL;
    seen[0] = 0;
    CHECK_OK(shares[5], lac_mf_train(shares[5], &p, r, NULL, NULL, NULL, &m, NULL));
    if (!strstr(seen, "fewer users than devices trains on the first of the context's 5 devices"))
        HARNESS_FAIL("no fallback logged: %s", seen);
    CHECK(m != NULL);
    lac_mf_model_destroy(&m);
    lac_ratings_destroy(&r);
}

TEST(deterministic_refused)
{
    lac_ratings_t train = NULL, valid = NULL;
    split_generated(2000, 800, 100000, 11, &train, &valid);
    lac_mf_params p = lac_mf_params_default();
    p.k = 16;
    p.deterministic = 1;
    lac_mf_model_t m = NULL;
    CHECK(lac_mf_train(shares[2], &p, train, valid, NULL, NULL, &m, NULL) == LAC_ERR_UNSUPPORTED);
    CHECK(m == NULL);
    lac_ratings_destroy(&train);
    lac_ratings_destroy(&valid);
}

/* The neighbourhood model on 2 and 3 shares against one device, on planted
 * item clusters (where its terms matter), with simLSH and exact lists. */
TEST(neighbourhood_rotation_within_0005_of_one_device)
{
    lac_ratings_t train = NULL, valid = NULL;
    split_generated_clusters(6000, 1200, 400000, 5, 30, &train, &valid);
    for (int exact = 0; exact < 2; exact++) {
        lac_mf_params p = lac_mf_params_default();
        p.k = 32;
        p.model = LAC_MF_MODEL_NEIGHBOURHOOD;
        p.neighbours.k = 16;
        if (exact) p.neighbours.method = LAC_MF_NBR_GSM;
        double r[4];
        int e[4] = {0};
        train_on_shares(&p, train, valid, r, e);
        const double r1 = r[1], r2 = r[2], r3 = r[3];
        const int e1 = e[1], e2 = e[2], e3 = e[3];
        printf("    neighbourhood (%s lists), K 16: valid RMSE cuda:0 %.4f (%d epochs), cuda:0,0 %.4f (%d), "
               "cuda:0,0,0 %.4f (%d)\n",
               exact ? "exact" : "simLSH", r1, e1, r2, e2, r3, e3);
        /* Whole blocks a turn: a user's pieces are trained an epoch / D
         * apart, which the neighbourhood terms feel more than the plain
         * model (measured on one H200: +0.0017 at 2 shares, +0.0047 to
         * +0.0069 at 3; the CPU ranks' rounds close it, not done here) */
        if (!(fabs(r2 - r1) <= 0.005)) HARNESS_FAIL("neighbourhood cuda:0,0 valid RMSE %.5f vs cuda:0 %.5f", r2, r1);
        if (!(fabs(r3 - r1) <= 0.01)) HARNESS_FAIL("neighbourhood cuda:0,0,0 valid RMSE %.5f vs cuda:0 %.5f", r3, r1);
    }
    lac_ratings_destroy(&train);
    lac_ratings_destroy(&valid);
}

/* The epoch callback's training figure: implicit feedback's mean loss. */
static int first_loss(int epoch, double train, double valid, double seconds, void *user)
{
    (void)epoch, (void)valid, (void)seconds;
    *(double *)user = train;
    return 0;
}

/* Implicit feedback on 2 and 3 shares against one device (tests/mf_planted.h's
 * data, the tool's implicit rates): both models, cross-entropy and BPR. */
TEST(implicit_rotation_ranks_like_one_device)
{
    loo d;
    make_loo(&d, 1000, 300, 20, 8, 7);
    const double pop = hr_popular(&d);
    lac_ratings_t r = NULL;
    CHECK_OK(cpu, lac_ratings_from_arrays(cpu, d.train.n, d.train.u, d.train.i, d.train.r, &r));
    for (int x = 0; x < 4; x++) {
        lac_mf_params p = lac_mf_params_default();
        p.implicit = 1;
        p.loss = x == 1 || x == 3 ? LAC_MF_LOSS_BPR : LAC_MF_LOSS_XENT;
        p.k = 16;
        p.epochs = 20;
        p.beta = 0.1;   /* the tool's implicit rates (docs/mf.md) */
        if (x >= 2) {
            p.model = LAC_MF_MODEL_NEIGHBOURHOOD;
            p.neighbours.k = 16;
            p.rates = (lac_mf_groups){0.2, 0.2, 0.2, 0.2, 0.02, 0.02};
            p.beta_groups = 0.1;
        }
        double hr[4] = {0}, nd[4] = {0};
        for (int n = 1; n <= 3; n++) {
            lac_ctx_t ctx = n == 1 ? one : shares[n];
            lac_mf_model_t m = NULL;
            seen[0] = 0;
            CHECK_OK(ctx, lac_mf_train(ctx, &p, r, NULL, NULL, NULL, &m, NULL));
            if (!m) continue;
            char want[64];
            snprintf(want, sizeof want, "%d devices, the rotation over %d x %d blocks", n, n, n);
            if (n > 1 && !strstr(seen, want)) HARNESS_FAIL("implicit: %d shares did not rotate: %s", n, seen);
            lac_mf_rank_report rep;
            loo_rank(cpu, m, &d, &rep);
            hr[n] = rep.hr;
            nd[n] = rep.ndcg;
            lac_mf_model_destroy(&m);
        }
        const char *name = x == 3 ? "neighbourhood bpr" : x == 2 ? "neighbourhood xent" : x ? "plain bpr" : "plain xent";
        printf("    implicit %s: HR@10 / NDCG@10 cuda:0 %.3f / %.3f, cuda:0,0 %.3f / %.3f, cuda:0,0,0 %.3f / %.3f "
               "(most-popular HR@10 %.3f)\n",
               name, hr[1], nd[1], hr[2], nd[2], hr[3], nd[3], pop);
        for (int n = 2; n <= 3; n++) {
            if (!(fabs(hr[n] - hr[1]) <= 0.05)) HARNESS_FAIL("implicit %s, %d shares: HR@10 %.3f vs %.3f", name, n, hr[n], hr[1]);
            if (!(fabs(nd[n] - nd[1]) <= 0.03))
                HARNESS_FAIL("implicit %s, %d shares: NDCG@10 %.3f vs %.3f", name, n, nd[n], nd[1]);
        }
        /* the negatives' weight: at a rate of 1e-7 nothing moves, and the
         * first epoch's mean loss is log 2 x (1 + negatives) when the shares'
         * negatives weigh as one device's (D times them: log 2 x (1 + 4 D));
         * the neighbourhood model's BPR: one pair an interaction, as on one device */
        if (x == 1) continue;
        p.epochs = 1;
        p.alpha = 1e-7;
        p.rates = (lac_mf_groups){1e-7, 1e-7, 1e-7, 1e-7, 1e-7, 1e-7};
        double loss[4] = {0};
        for (int n = 1; n <= 3; n++) {
            lac_ctx_t ctx = n == 1 ? one : shares[n];
            lac_mf_model_t m = NULL;
            CHECK_OK(ctx, lac_mf_train(ctx, &p, r, NULL, first_loss, &loss[n], &m, NULL));
            lac_mf_model_destroy(&m);
        }
        printf("    implicit %s: first loss at 1e-7 cuda:0 %.4f, cuda:0,0 %.4f, cuda:0,0,0 %.4f\n", name, loss[1],
               loss[2], loss[3]);
        for (int n = 2; n <= 3; n++)
            if (!(fabs(loss[n] - loss[1]) <= 0.01 * loss[1]))
                HARNESS_FAIL("implicit %s, %d shares: first loss %.4f vs one device's %.4f", name, n, loss[n], loss[1]);
    }
    lac_ratings_destroy(&r);
    harness_triples_free(&d.train);
    free(d.held);
}

/* Users with one or two interactions on two and three shares: most have no
 * positive in one or two of the item blocks, where cross-entropy still
 * draws their share of negatives (the CPU ranks' rule; the plain model: a
 * stream cell of negatives only): the first epoch's mean loss at rates of
 * 1e-7 is one device's within 0.2% (the plain model; its logits start near
 * 0) and 1% (the neighbourhood model), where without those negatives it
 * would be about log 2 x (1 + 4 / 3) on three shares against log 2 x 5.
 * BPR draws each pair's negative in its positive's block: not affected. */
TEST(implicit_negatives_without_a_positive_in_the_block)
{
    const int64_t users = 3000, items = 300;
    int64_t n = 0, *u = malloc(sizeof *u * 2 * users), *i = malloc(sizeof *i * 2 * users);
    float *v = malloc(sizeof *v * 2 * users);
    unsigned long long s = 23;
    for (int64_t x = 0; x < users; x++)
        for (int c = 0; c <= x % 2; c++) {
            u[n] = x;
            i[n] = (int64_t)(harness_rand_uniform(&s) * items) % items;
            if (c && i[n] == i[n - 1]) i[n] = (i[n] + 1) % items;
            v[n++] = 1.0f;
        }
    lac_ratings_t r = NULL;
    CHECK_OK(cpu, lac_ratings_from_arrays(cpu, n, u, i, v, &r));
    for (int nbr = 0; nbr <= 1; nbr++) {
        lac_mf_params p = lac_mf_params_default();
        p.implicit = 1;
        p.k = 16;
        p.epochs = 1;
        p.alpha = 1e-7;
        if (nbr) {
            p.model = LAC_MF_MODEL_NEIGHBOURHOOD;
            p.neighbours.k = 16;
            p.rates = (lac_mf_groups){1e-7, 1e-7, 1e-7, 1e-7, 1e-7, 1e-7};
        }
        double loss[4] = {0};
        for (int d = 1; d <= 3; d++) {
            lac_mf_model_t m = NULL;
            CHECK_OK(d == 1 ? one : shares[d],
                     lac_mf_train(d == 1 ? one : shares[d], &p, r, NULL, first_loss, &loss[d], &m, NULL));
            lac_mf_model_destroy(&m);
        }
        const char *name = nbr ? "neighbourhood" : "plain";
        printf("    sparse users, %s xent: first loss at 1e-7 cuda:0 %.4f, cuda:0,0 %.4f, cuda:0,0,0 %.4f "
               "(log 2 x 5 = %.4f)\n", name, loss[1], loss[2], loss[3], 5 * log(2.0));
        for (int d = 2; d <= 3; d++)
            if (!(fabs(loss[d] - loss[1]) <= (nbr ? 0.01 : 0.002) * loss[1]))
                HARNESS_FAIL("sparse users, %s, %d shares: first loss %.4f vs one device's %.4f", name, d, loss[d],
                             loss[1]);
    }
    lac_ratings_destroy(&r);
    free(u);
    free(i);
    free(v);
}

static int same_factors(lac_mf_model_t a, lac_mf_model_t b)
{
    return a->num_users == b->num_users && a->num_items == b->num_items && a->stride == b->stride &&
           !memcmp(a->P, b->P, sizeof(float) * (size_t)(a->num_users * a->stride)) &&
           !memcmp(a->Q, b->Q, sizeof(float) * (size_t)(a->num_items * a->stride)) &&
           !memcmp(a->user_bias, b->user_bias, sizeof(float) * (size_t)a->num_users) &&
           !memcmp(a->item_bias, b->item_bias, sizeof(float) * (size_t)a->num_items);
}

TEST(checkpoints_of_a_rotation_resume)
{
    lac_ratings_t train = NULL, valid = NULL;
    split_generated(4000, 1500, 300000, 5, &train, &valid);
    char path[512];
    harness_temp_path(path, sizeof path, "mf_multi.ck");
    remove(path);
    lac_mf_params p = lac_mf_params_default();
    p.epochs = 60;
    lac_mf_checkpoint_params ck = lac_mf_checkpoint_params_default();
    ck.path = path;
    lac_mf_model_t a = NULL, b = NULL, c = NULL, d = NULL;
    lac_mf_report ra, rb, rc, rd;
    CHECK_OK(shares[2], lac_mf_train_checkpointed(shares[2], &p, &ck, train, valid, NULL, NULL, &a, &ra));
    ck.resume = 1;   /* at its end: nothing left to train */
    CHECK_OK(shares[2], lac_mf_train_checkpointed(shares[2], &p, &ck, train, valid, NULL, NULL, &b, &rb));
    CHECK_OK(cpu, lac_mf_train_checkpointed(cpu, &p, &ck, train, valid, NULL, NULL, &c, &rc));
    if (a && b && c) {
        printf("    cuda:0,0: %d epochs, kept %d, valid RMSE %.4f\n", ra.epochs, ra.best_epoch, ra.valid_rmse);
        CHECK(same_factors(a, b));
        CHECK(same_factors(a, c));
        CHECK_INT(rb.best_epoch, ra.best_epoch);
        CHECK_INT(rc.best_epoch, ra.best_epoch);
    }
    remove(path);
    ck.resume = 0;
    p.epochs = 3;
    CHECK_OK(shares[2], lac_mf_train_checkpointed(shares[2], &p, &ck, train, valid, NULL, NULL, &d, &rd));
    lac_mf_model_destroy(&d);
    ck.resume = 1;
    p.epochs = 60;
    CHECK_OK(shares[3], lac_mf_train_checkpointed(shares[3], &p, &ck, train, valid, NULL, NULL, &d, &rd));
    if (d) {
        printf("    3 on cuda:0,0 + resumed on cuda:0,0,0: %d epochs, kept %d, valid RMSE %.4f\n", rd.epochs,
               rd.best_epoch, rd.valid_rmse);
        CHECK(fabs(rd.valid_rmse - ra.valid_rmse) <= 0.005);
    }
    remove(path);
    lac_mf_model_destroy(&a);
    lac_mf_model_destroy(&b);
    lac_mf_model_destroy(&c);
    lac_mf_model_destroy(&d);
    lac_ratings_destroy(&train);
    lac_ratings_destroy(&valid);
}

int main(void)
{
    if (lac_cuda_device_count() == 0) {
        printf("no CUDA device: skipped\n");
        return 0;
    }
    lac_ctx_params p = lac_ctx_params_default();
    p.backend = LAC_BACKEND_CPU;
    if (lac_ctx_create(&p, &cpu) != 0) return 1;
    one = make_ctx(1);
    shares[2] = make_ctx(2);
    shares[3] = make_ctx(3);
    shares[5] = make_ctx(5);
    if (!one || !shares[2] || !shares[3] || !shares[5]) return harness_finish();
    RUN(rotation_rmse_within_0005_of_one_device);
    RUN(more_shares_than_users_trains_on_the_first_device);
    RUN(deterministic_refused);
    RUN(neighbourhood_rotation_within_0005_of_one_device);
    RUN(implicit_rotation_ranks_like_one_device);
    RUN(implicit_negatives_without_a_positive_in_the_block);
    RUN(checkpoints_of_a_rotation_resume);
    lac_ctx_destroy(&one);
    for (int n = 0; n < 6; n++) lac_ctx_destroy(&shares[n]);
    lac_ctx_destroy(&cpu);
    return harness_finish();
}
