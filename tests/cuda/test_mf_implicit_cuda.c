/* Implicit feedback on CUDA (GPU test, label "cuda"):
 *  - one epoch of one user against float64: the negatives drawn by the rule
 *    of mf_backend.h (here on the host), a cell's item and its negatives
 *    scored with the same u_i (at most 4 negatives at once; rows no group
 *    divides one at a time), every v_j stepped with that u_i and u_i by the
 *    steps' sum; for cross-entropy (2 and 5 negatives) and BPR, at F = 3, 40
 *    (4 lanes, 3 float4 each) and 300 (a full warp, last slot partly
 *    filled); and with shared negatives (a chunk's negatives split over
 *    its interactions, weighted by its size);
 *  - trained on generated interactions with planted preferences (the CPU
 *    test's data, tests/mf_planted.h), HR@10 beats most-popular by the CPU
 *    test's margin (2x), and HR@10 and NDCG@10 (full ranking, leave-one-out)
 *    are within 0.05 of the CPU's with the same seed, on two shapes: the
 *    plain model (cross-entropy, with shared negatives, BPR) and the
 *    neighbourhood model (cross-entropy: its stream's negatives' cells;
 *    BPR: a pair's three cells);
 *  - BPR with the neighbourhood model, one epoch of one user against
 *    float64 (eq. (1), rule (5) by groups), on both kernels;
 *  - a block's pool of negatives (LACUNA_MF_CUDA_NEG_POOL): one epoch
 *    against float64, and the planted data's HR@10 and NDCG@10 within 0.05
 *    of the CPU's;
 *  - its warp copies (LACUNA_MF_CUDA_NEG_POOL_ADD=1; pools of 16 and 32, one
 *    round and several): one epoch against float64, and the planted data's
 *    HR@10 and NDCG@10 within 0.05 of the CPU's (pool 32, 2 cells a row);
 *  - in-batch negatives (LACUNA_MF_CUDA_INBATCH, 4 and 8 lanes a group; the
 *    default of the plain model's cross-entropy on one device, weighted to
 *    the drawn law: the default context logs that it took them): one
 *    epoch of the one user, alone in its warp, against float64 (its
 *    positives' steps only, each row shrunk once a step), and the planted
 *    data's HR@10 and NDCG@10 (k 16: 4 lanes, 4 and 7 negatives; the
 *    default, and drawn negatives beside it) within 0.05 of the CPU's; its
 *    seen test: users who have seen every item take no negative (the
 *    epoch's loss is the positives' alone, float64), and take them without
 *    the test. (The weights themselves: tests/test_mf_implicit.c.) */
#include "harness.h"
#include "cuda_harness.h"
#include "lacuna/lacuna.h"
#include "mf/mf_internal.h"
#include "mf_planted.h"

#include <math.h>

static lac_ctx_t gpu, cpu, pooled;   /* pooled: LACUNA_MF_CUDA_NEG_POOL=16 */
/* warp copies: a pool of 16, 8 cells a row; a pool of 32, 2 cells a row */
static lac_ctx_t copies16, copies32;
/* in-batch negatives: lanes chosen by k (8 where they divide the row), 4
 * lanes, and without the seen test */
static lac_ctx_t inbatch, inbatch4, inbatch_unseen;
/* drawn negatives (LACUNA_MF_CUDA_INBATCH=-1); the defaults with a log */
static lac_ctx_t drawn, logged;
static char log_seen[4096];

static void keep_log(lac_log_level level, const char *message, void *user)
{
    (void)level;
    (void)user;
    if (strstr(message, "mf CUDA implicit"))
        snprintf(log_seen + strlen(log_seen), sizeof log_seen - strlen(log_seen), "%s\n", message);
}

static double sig(double x) { return 1.0 / (1.0 + exp(-x)); }

static double log_loss(double x) { return x > 0 ? log1p(exp(-x)) : -x + log1p(exp(x)); }

/* Negatives by the items' weights (lac_mf_data.neg_cum) that a test sets:
 * candidate r's 53 bits modulo their sum, found by a scan; NULL: uniform. */
static const uint64_t skew[6] = {1, 5, 2, 9, 3, 7};

static int32_t ref_draw(const uint64_t *w, uint64_t useed, int32_t key, int t, int r)
{
    if (!w) return lac_mf_draw_item(useed, key, t, r, 6);
    uint64_t total = 0, x;
    for (int j = 0; j < 6; j++) total += w[j];
    x = lac_mf_draw_bits(useed, key, t, r) % total;
    int32_t j = 0;
    while (x >= w[j]) x -= w[j++];
    return j;
}

/* One user with 3 interactions (items 2, 0, 4 of 6, weights 1, 2, 0.5),
 * trained with weights and uniform negatives. */
static int32_t one_col[3] = {2, 0, 4}, one_order[1] = {0};
static float one_val[3] = {1.0f, 2.0f, 0.5f};
static int64_t one_start[2] = {0, 3};

static lac_mf_data one_user(void)
{
    lac_mf_data d;
    memset(&d, 0, sizeof d);
    d.num_users = 1;
    d.num_items = 6;
    d.nnz = 3;
    d.row_start = one_start;
    d.col = one_col;
    d.val = one_val;
    d.row_order = one_order;
    return d;
}

static lac_mf_params one_user_params(int loss, int k, uint64_t seed)
{
    lac_mf_params p = lac_mf_params_default();
    p.implicit = 1;
    p.weighted = 1;
    p.loss = loss;
    p.k = k;
    p.seed = seed;
    p.negative_exponent = 0;
    return p;
}

/* Model m's biases and factors at random values from *s: each user's bias
 * and row, then each item's. */
static void random_model(lac_mf_model_t m, int64_t users, int64_t items, int k, unsigned long long *s)
{
    for (int64_t u = 0; u < users; u++) {
        m->user_bias[u] = (float)(0.2 * harness_rand_uniform(s) - 0.1);
        for (int f = 0; f < k; f++) m->P[u * m->stride + f] = (float)((harness_rand_uniform(s) - 0.5) / sqrt(k));
    }
    for (int64_t j = 0; j < items; j++) {
        m->item_bias[j] = (float)(0.2 * harness_rand_uniform(s) - 0.1);
        for (int f = 0; f < k; f++) m->Q[j * m->stride + f] = (float)(harness_rand_uniform(s) - 0.5);
    }
}

/* The one user's model at random values (from s), also in float64 (P: k,
 * Q: 6 x k, bu, bi: 6), trained one epoch at rate lr on context c (its loss
 * in *sum); skewed: negatives drawn by the weights `skew` (d->neg_cum). */
static lac_mf_model_t one_user_epoch(lac_ctx_t c, const lac_mf_params *p, lac_mf_data *d, int skewed,
                                     unsigned long long s, double lr, double *P, double *Q, double *bu, double *bi,
                                     double *sum, uint64_t *seed)
{
    const int k = p->k;
    CHECK_OK(c, lac_mf_implicit_data(c, p, d));
    CHECK(d->neg_cum == NULL);   /* exponent 0: uniform */
    if (skewed) {
        d->neg_cum = malloc((size_t)lac_mf_cum_words(6) * sizeof *d->neg_cum);
        for (int j = 0; j < 6; j++) d->neg_cum[j] = (j ? d->neg_cum[j - 1] : 0) + skew[j];
        lac_mf_cum_index(d->neg_cum, 6);
    }
    lac_mf_model_t m = NULL;
    CHECK_OK(c, lac_mf_model_alloc(c, 1, 6, k, &m));
    m->params = *p;
    random_model(m, 1, 6, k, &s);
    *bu = m->user_bias[0];
    for (int f = 0; f < k; f++) P[f] = m->P[f];
    for (int j = 0; j < 6; j++) {
        bi[j] = m->item_bias[j];
        for (int f = 0; f < k; f++) Q[j * k + f] = m->Q[j * m->stride + f];
    }
    lac_mf_call call = lac_mf_model_call(m, d, NULL);
    const lac_mf_backend *b = lac_mf_backend_cuda();
    lac_mf_state *st = NULL;
    *sum = 0.0;
    *seed = call.seed;
    CHECK_OK(c, b->begin(c, &call, &st));
    CHECK_OK(c, b->epoch(c, st, (float)lr, 0, sum));
    CHECK_OK(c, b->download(c, st));
    b->end(c, st);
    return m;
}

/* The largest difference of the trained model m from the float64 one. */
static double one_user_gap(const lac_mf_model_t m, int k, const double *P, const double *Q, double bu, const double *bi)
{
    double worst = fabs(bu - m->user_bias[0]);
    for (int f = 0; f < k; f++) worst = fmax(worst, fabs(P[f] - m->P[f]));
    for (int j = 0; j < 6; j++) {
        worst = fmax(worst, fabs(bi[j] - m->item_bias[j]));
        for (int f = 0; f < k; f++) worst = fmax(worst, fabs(Q[j * k + f] - m->Q[j * m->stride + f]));
    }
    return worst;
}

/* One user with 3 interactions (items 2, 0, 4 of 6, weights 1, 2, 0.5);
 * skewed: negatives drawn by the weights `skew`. */
static void one_epoch(int k, int loss, int negatives, int nb, int share, int skewed)
{
    const int32_t *col = one_col;
    const float *val = one_val;
    lac_mf_data d = one_user();
    lac_mf_params p = one_user_params(loss, k, 11);
    p.negatives = negatives;
    p.negative_share = share;
    double *P = calloc((size_t)k, sizeof *P), *Q = calloc((size_t)6 * k, sizeof *Q), bu, bi[6];
    double lr = 0.05, sum = 0.0, ref_loss = 0.0;
    uint64_t seed = 0;
    lac_mf_model_t m = one_user_epoch(drawn, &p, &d, skewed, 5, lr, P, Q, &bu, bi, &sum, &seed);
    /* the reference */
    const double shrink = 1 - lr * p.lambda, shrink_b = 1 - lr * p.lambda_bias;
    const uint64_t useed = lac_mf_draw_seed(seed, 0, 0);
    const int sorted[3] = {0, 2, 4};
    double *old = malloc(sizeof(double) * (size_t)k * 6), *acc = malloc(sizeof(double) * (size_t)k);
    for (int a = 0; a < 3; a++) {
        const int j = col[a];
        const double w = val[a];
        /* shared negatives: j's chunk among the items ascending, its part of the chunk's draws */
        int rank = 0, negs = 0, first = 0, size = 1, key = j, ts[8];
        while (sorted[rank] != j) rank++;
        if (loss == LAC_MF_LOSS_BPR) {
            negs = 1, ts[0] = 0;
        } else {
            if (share > 1) {
                int c = rank / share;
                size = 3 - c * share < share ? 3 - c * share : share;
                first = rank - c * share;
                key = c;
            }
            for (int t = first; t < negatives; t += size) ts[negs++] = t;
        }
        for (int c0 = 0; c0 == 0 || c0 < negs; c0 += nb) {
            int cnt = negs - c0 < nb ? negs - c0 : nb, rows[8];
            for (int t = 0; t < cnt; t++) {
                int32_t n = 0;
                for (int r = 0; r < LAC_MF_DRAWS; r++) {
                    n = ref_draw(skewed ? skew : NULL, useed, key, ts[c0 + t], r);
                    if (n != 2 && n != 0 && n != 4) break;
                }
                rows[t] = n;
            }
            memcpy(old, Q, sizeof(double) * (size_t)k * 6);
            double score[9], e[9], oldb[6];
            memcpy(oldb, bi, sizeof oldb);
            int item[9], m_items = 0;
            if (c0 == 0) item[m_items++] = j;
            for (int t = 0; t < cnt; t++) item[m_items++] = rows[t];
            for (int x = 0; x < m_items; x++) {
                score[x] = bu + oldb[item[x]];
                for (int f = 0; f < k; f++) score[x] += P[f] * old[item[x] * k + f];
            }
            if (loss == LAC_MF_LOSS_BPR) {
                double x = score[0] - score[1];
                e[0] = w * sig(-x);
                e[1] = -e[0];
                ref_loss += w * log_loss(x);
            } else {
                for (int x = 0; x < m_items; x++) {
                    int positive = c0 == 0 && x == 0;
                    e[x] = positive ? w * (1 - sig(score[x])) : -size * sig(score[x]);
                    ref_loss += positive ? w * log_loss(score[x]) : size * log_loss(-score[x]);
                }
            }
            double keep = 1, keep_b = 1, bstep = 0;
            for (int f = 0; f < k; f++) acc[f] = 0;
            for (int x = 0; x < m_items; x++) {   /* a repeated negative: the last step stands */
                double step = lr * e[x];
                for (int f = 0; f < k; f++) {
                    Q[item[x] * k + f] = shrink * old[item[x] * k + f] + step * P[f];
                    acc[f] += step * old[item[x] * k + f];
                }
                bi[item[x]] = shrink_b * oldb[item[x]] + step;
                keep *= shrink;
                keep_b *= shrink_b;
                bstep += step;
            }
            for (int f = 0; f < k; f++) P[f] = keep * P[f] + acc[f];
            bu = keep_b * bu + bstep;
        }
    }
    const double worst = one_user_gap(m, k, P, Q, bu, bi);
    printf("  k %d, %s, %d negatives shared by %d%s: largest difference from float64 %.2e, loss %.6f vs %.6f\n", k,
           loss ? "bpr" : "xent", negatives, share, skewed ? ", weighted draws" : "", worst, sum, ref_loss);
    if (!(worst < 2e-5)) HARNESS_FAIL("k = %d: the CUDA epoch is %g from the float64 reference", k, worst);
    CHECK_NEAR(sum, ref_loss, 1e-4 * (1 + fabs(ref_loss)));
    free(old);
    free(acc);
    free(P);
    free(Q);
    free(d.neg_cum);
    lac_mf_model_destroy(&m);
}

TEST(one_epoch_matches_float64_reference)
{
    one_epoch(3, LAC_MF_LOSS_XENT, 2, 4, 1, 0);
    one_epoch(3, LAC_MF_LOSS_XENT, 5, 4, 1, 0);   /* a second batch of negatives */
    one_epoch(3, LAC_MF_LOSS_BPR, 1, 1, 1, 0);
    one_epoch(40, LAC_MF_LOSS_XENT, 2, 4, 1, 0);
    one_epoch(300, LAC_MF_LOSS_XENT, 2, 1, 1, 0);
    one_epoch(300, LAC_MF_LOSS_BPR, 1, 1, 1, 0);
    /* shared negatives (chunks of 2 of the 3 items: 2 and 1 interactions; of 4: one chunk of 3) */
    one_epoch(3, LAC_MF_LOSS_XENT, 4, 4, 2, 0);
    one_epoch(3, LAC_MF_LOSS_XENT, 5, 4, 4, 0);
    one_epoch(3, LAC_MF_LOSS_XENT, 3, 1, 4, 0);    /* a negative a cell: one at a time */
    one_epoch(40, LAC_MF_LOSS_XENT, 8, 4, 2, 0);   /* the last chunk's 8: two batches */
    one_epoch(300, LAC_MF_LOSS_XENT, 4, 1, 4, 0);
    /* negatives by the items' weights (the plain model's default) */
    one_epoch(3, LAC_MF_LOSS_XENT, 5, 4, 1, 1);
    one_epoch(3, LAC_MF_LOSS_BPR, 1, 1, 1, 1);
    one_epoch(40, LAC_MF_LOSS_XENT, 8, 4, 2, 1);
}

/* A block's pool of negatives (LACUNA_MF_CUDA_NEG_POOL=16, cross-entropy):
 * one epoch of the one user against float64. The pool: 16 items drawn by
 * the rule with -1 - pool for the user and 0 for the item (the one block's
 * first round holds the user's 3 cells); negative b of the cell of item j
 * the first of 32 slots (the rule's bits for (user, j, b, r), modulo 16)
 * whose item the user has not seen, or none. The positive steps as without
 * the pool; the negatives are scored against the pool's rows as the round
 * found them (u_i's steps taken from those copies v too), and each step adds
 * (shrink - 1) v + step u to the row. */
/* The pooled references' positive step of the one user's interaction with
 * item j (weight w): Q's row and bias stepped, acc = step x the row before
 * it, the loss added; returns the step. */
static double positive_step(const double *P, double *Q, double *bi, double bu, int k, int j, double w, double lr,
                            double shrink, double shrink_b, double *acc, double *loss)
{
    double sp = bu + bi[j];
    for (int f = 0; f < k; f++) sp += P[f] * Q[j * k + f];
    const double step = lr * w * (1 - sig(sp));
    *loss += w * log_loss(sp);
    for (int f = 0; f < k; f++) {
        acc[f] = step * Q[j * k + f];
        Q[j * k + f] = shrink * Q[j * k + f] + step * P[f];
    }
    bi[j] = shrink_b * bi[j] + step;
    return step;
}

/* A pool negative's step, scored sn from its row q and bias b as the step
 * found them: the change added to row and *bias (which may have moved since),
 * acc += step x q, the loss added; returns the step. */
static double negative_step(const double *P, const double *q, double b, double sn, double *row, double *bias, int k,
                            double lr, double shrink, double shrink_b, double *acc, double *loss)
{
    const double step = -lr * sig(sn);
    *loss += log_loss(-sn);
    for (int f = 0; f < k; f++) {
        row[f] += (shrink - 1) * q[f] + step * P[f];
        acc[f] += step * q[f];
    }
    *bias += (shrink_b - 1) * b + step;
    return step;
}

static void pooled_epoch(int k, int negatives, int skewed)
{
    enum { POOL = 16 };
    lac_mf_data d = one_user();
    lac_mf_params p = one_user_params(LAC_MF_LOSS_XENT, k, 11);
    p.negatives = negatives;
    double *P = calloc((size_t)k, sizeof *P), *Q = calloc((size_t)6 * k, sizeof *Q), bu, bi[6];
    double lr = 0.05, sum = 0.0, ref_loss = 0.0;
    uint64_t seed = 0;
    lac_mf_model_t m = one_user_epoch(pooled, &p, &d, skewed, 9, lr, P, Q, &bu, bi, &sum, &seed);
    const double shrink = 1 - lr * p.lambda, shrink_b = 1 - lr * p.lambda_bias;
    const uint64_t useed = lac_mf_draw_seed(seed, 0, 0), pseed = lac_mf_draw_seed(seed, 0, -1);
    int item[POOL];
    double pq[POOL][64], pb[POOL], acc[64];
    for (int x = 0; x < POOL; x++) {
        item[x] = ref_draw(skewed ? skew : NULL, pseed, 0, x, 0);
        for (int f = 0; f < k; f++) pq[x][f] = Q[item[x] * k + f];
        pb[x] = bi[item[x]];
    }
    for (int a = 0; a < 3; a++) {
        const int j = one_col[a];
        const double step_p = positive_step(P, Q, bi, bu, k, j, one_val[a], lr, shrink, shrink_b, acc, &ref_loss);
        double keep = shrink, keep_b = shrink_b, bstep = step_p;
        for (int n = 0; n < negatives; n++) {
            int slot = -1;
            for (int r = 0; r < LAC_MF_DRAWS && slot < 0; r++) {
                const int x = (int)(lac_mf_draw_bits(useed, j, n, r) % POOL);
                if (item[x] != 2 && item[x] != 0 && item[x] != 4) slot = x;
            }
            if (slot < 0) continue;
            double sn = bu + pb[slot];
            for (int f = 0; f < k; f++) sn += P[f] * pq[slot][f];
            bstep += negative_step(P, pq[slot], pb[slot], sn, Q + item[slot] * k, bi + item[slot], k, lr, shrink, shrink_b,
                                   acc, &ref_loss);
            keep *= shrink, keep_b *= shrink_b;
        }
        for (int f = 0; f < k; f++) P[f] = keep * P[f] + acc[f];
        bu = keep_b * bu + bstep;
    }
    const double worst = one_user_gap(m, k, P, Q, bu, bi);
    printf("  pool of %d, k %d, %d negatives%s: largest difference from float64 %.2e, loss %.6f vs %.6f\n", POOL, k,
           negatives, skewed ? ", weighted draws" : "", worst, sum, ref_loss);
    if (!(worst < 2e-5)) HARNESS_FAIL("pool, k = %d: the CUDA epoch is %g from the float64 reference", k, worst);
    CHECK_NEAR(sum, ref_loss, 1e-4 * (1 + fabs(ref_loss)));
    free(P);
    free(Q);
    free(d.neg_cum);
    lac_mf_model_destroy(&m);
}

TEST(pooled_epoch_matches_float64_reference)
{
    pooled_epoch(3, 2, 0);
    pooled_epoch(3, 5, 0);    /* a second batch of negatives */
    pooled_epoch(40, 4, 1);   /* 3 float4 a lane, weighted draws */
    pooled_epoch(64, 6, 1);
}

/* Warp copies of a block's pool (LACUNA_MF_CUDA_NEG_POOL_ADD=1) on context
 * c with `pool` rows, cross-entropy: one epoch of the one user against
 * float64. The user's cells are steps 0, 1, 2 of the one block's first
 * group; a round is round_steps steps (cells a row x pool / the block's
 * groups: 32 at k = 3 and 40, 16 at k = 64, 8 at k = 128). Round r's pool:
 * `pool` items drawn by the rule with -1 - r for the user, 0 for the item,
 * the slot for the negative, try 0; the warp's copy of their rows and
 * biases starts as the round found them. At each round's (and the run's)
 * start the mask of the slots whose items the user has not seen; negative
 * n = c0 + b (batches of 4) of the cell of item j is drawn among those of
 * class n mod the warp's groups (gpw: 8 at k = 3 and 40, 4 at k = 64, 2 at
 * k = 128; the user's group is the warp's first), slots pool / gpw x class
 * on: its set bit number (bits 13 b to 13 b + 12 of the rule's for (user,
 * j, c0, 0)) x their count >> 13; scored against the copy as the batch
 * found it, its step adds (shrink - 1) v + step u to the copy. At the
 * round's end each row takes its copy's change. */
static void copies_epoch(lac_ctx_t c, int pool, int round_steps, int gpw, int k, int negatives, int skewed)
{
    lac_mf_data d = one_user();
    lac_mf_params p = one_user_params(LAC_MF_LOSS_XENT, k, 11);
    p.negatives = negatives;
    double *P = calloc((size_t)k, sizeof *P), *Q = calloc((size_t)6 * k, sizeof *Q), bu, bi[6];
    double lr = 0.05, sum = 0.0, ref_loss = 0.0;
    uint64_t seed = 0;
    lac_mf_model_t m = one_user_epoch(c, &p, &d, skewed, 13, lr, P, Q, &bu, bi, &sum, &seed);
    const double shrink = 1 - lr * p.lambda, shrink_b = 1 - lr * p.lambda_bias;
    const uint64_t useed = lac_mf_draw_seed(seed, 0, 0);
    const int per = pool / gpw;   /* slots of a class */
    int item[32];
    double v0[32][128], cp[32][128], b0[32], bc[32], acc[128];
    unsigned unseen = 0;
    for (int a = 0; a <= 3; a++) {
        if (a == 3 || a % round_steps == 0) {   /* the round's end: each row takes its copy's change */
            for (int x = 0; a > 0 && x < pool; x++) {
                for (int f = 0; f < k; f++) Q[item[x] * k + f] += cp[x][f] - v0[x][f];
                bi[item[x]] += bc[x] - b0[x];
            }
            if (a == 3) break;
            const uint64_t pseed = lac_mf_draw_seed(seed, 0, -1 - a / round_steps);
            unseen = 0;
            for (int x = 0; x < pool; x++) {
                item[x] = ref_draw(skewed ? skew : NULL, pseed, 0, x, 0);
                for (int f = 0; f < k; f++) v0[x][f] = cp[x][f] = Q[item[x] * k + f];
                b0[x] = bc[x] = bi[item[x]];
                if (item[x] != 2 && item[x] != 0 && item[x] != 4) unseen |= 1u << x;
            }
        }
        const int j = one_col[a];
        const double step_p = positive_step(P, Q, bi, bu, k, j, one_val[a], lr, shrink, shrink_b, acc, &ref_loss);
        double keep = shrink, keep_b = shrink_b, bstep = step_p;
        for (int c0 = 0; c0 < negatives; c0 += 4) {
            int sl[4], n = negatives - c0 < 4 ? negatives - c0 : 4;
            double qn[4][128], bn[4], sn[4];
            const uint64_t bits = lac_mf_draw_bits(useed, j, c0, 0);   /* 13 bits a negative */
            for (int b = 0; b < n; b++) {   /* scored against the copy as the batch found it */
                const int first = (c0 + b) % gpw * per;
                int count = 0, x = first;
                for (int y = first; y < first + per; y++) count += (unseen >> y) & 1;
                sl[b] = -1;
                if (!count) continue;
                int kth = (int)((((bits >> (13 * b)) & 0x1fff) * (uint64_t)count) >> 13);
                for (;; x++)
                    if (((unseen >> x) & 1) && kth-- == 0) break;
                sl[b] = x;
                memcpy(qn[b], cp[x], sizeof(double) * (size_t)k);
                bn[b] = bc[x];
                sn[b] = bu + bn[b];
                for (int f = 0; f < k; f++) sn[b] += P[f] * qn[b][f];
            }
            for (int b = 0; b < n; b++) {
                if (sl[b] < 0) continue;
                bstep += negative_step(P, qn[b], bn[b], sn[b], cp[sl[b]], bc + sl[b], k, lr, shrink, shrink_b, acc, &ref_loss);
                keep *= shrink, keep_b *= shrink_b;
            }
        }
        for (int f = 0; f < k; f++) P[f] = keep * P[f] + acc[f];
        bu = keep_b * bu + bstep;
    }
    const double worst = one_user_gap(m, k, P, Q, bu, bi);
    printf("  warp copies of a pool of %d (%d steps a round), k %d, %d negatives%s: largest difference from float64 "
           "%.2e, loss %.6f vs %.6f\n",
           pool, round_steps, k, negatives, skewed ? ", weighted draws" : "", worst, sum, ref_loss);
    if (!(worst < 2e-5)) HARNESS_FAIL("warp copies, k = %d: the CUDA epoch is %g from the float64 reference", k, worst);
    CHECK_NEAR(sum, ref_loss, 1e-4 * (1 + fabs(ref_loss)));
    free(P);
    free(Q);
    free(d.neg_cum);
    lac_mf_model_destroy(&m);
}

TEST(warp_copies_epoch_matches_float64_reference)
{
    copies_epoch(copies16, 16, 4, 8, 3, 2, 0);    /* one round */
    copies_epoch(copies16, 16, 4, 8, 3, 5, 0);    /* a second batch of negatives */
    copies_epoch(copies16, 16, 4, 8, 40, 4, 1);   /* 3 float4 a lane, weighted draws */
    copies_epoch(copies32, 32, 2, 8, 3, 4, 0);    /* two rounds */
    copies_epoch(copies32, 32, 2, 8, 40, 6, 1);
    copies_epoch(copies32, 32, 4, 4, 64, 4, 1);   /* 8 lanes, 2 float4 a lane */
    copies_epoch(copies32, 32, 8, 2, 128, 5, 1);  /* 16 lanes */
}

/* In-batch negatives on context c, cross-entropy: one epoch of the one user
 * against float64. Its group is the only live one of its warp, so every
 * step is its positive's alone: the row and u_i each shrunk once, u_i
 * stepped by the positive's step times the row before it. */
static void inbatch_epoch(lac_ctx_t c, int k)
{
    lac_mf_data d = one_user();
    lac_mf_params p = one_user_params(LAC_MF_LOSS_XENT, k, 5);
    double *P = calloc((size_t)k, sizeof *P), *Q = calloc((size_t)6 * k, sizeof *Q), *acc = calloc((size_t)k, sizeof *acc);
    double bu, bi[6], lr = 0.05, sum = 0.0, ref_loss = 0.0;
    uint64_t seed = 0;
    lac_mf_model_t m = one_user_epoch(c, &p, &d, 0, 17, lr, P, Q, &bu, bi, &sum, &seed);
    const double shrink = 1 - lr * p.lambda, shrink_b = 1 - lr * p.lambda_bias;
    for (int a = 0; a < 3; a++) {
        const double step = positive_step(P, Q, bi, bu, k, one_col[a], one_val[a], lr, shrink, shrink_b, acc, &ref_loss);
        for (int f = 0; f < k; f++) P[f] = shrink * P[f] + acc[f];
        bu = shrink_b * bu + step;
    }
    const double worst = one_user_gap(m, k, P, Q, bu, bi);
    printf("  in-batch, k %d: largest difference from float64 %.2e, loss %.6f vs %.6f\n", k, worst, sum, ref_loss);
    if (!(worst < 2e-5)) HARNESS_FAIL("in-batch, k = %d: the CUDA epoch is %g from the float64 reference", k, worst);
    CHECK_NEAR(sum, ref_loss, 1e-4 * (1 + fabs(ref_loss)));
    free(P);
    free(Q);
    free(acc);
    lac_mf_model_destroy(&m);
}

TEST(inbatch_epoch_alone_matches_float64_reference)
{
    inbatch_epoch(inbatch, 3);     /* 4 lanes, 1 float4 each */
    inbatch_epoch(inbatch, 32);    /* 8 lanes, 1 float4 each */
    inbatch_epoch(inbatch, 40);    /* 4 lanes, 3 float4 each (a row of 48) */
    inbatch_epoch(inbatch, 128);   /* 8 lanes, 4 float4 each */
    inbatch_epoch(inbatch4, 32);   /* 4 lanes, 2 float4 each */
}

/* The seen test of in-batch negatives: 40 users who have each seen all 6
 * items, one epoch at a rate too small to move the factors (1e-7). Every
 * in-batch negative is an item its user has seen, so with the test the
 * epoch's loss is its positives' alone, sum of -log sigmoid(x_ui) at the
 * starting factors (float64 here); without it (inbatch_unseen) the
 * negatives' terms add about as much again a negative. */
static double all_seen_loss(lac_ctx_t c, double *ref)
{
    enum { U = 40, I = 6, K = 16 };
    static int64_t start[U + 1];
    static int32_t col[U * I], order[U];
    static float val[U * I];
    for (int u = 0; u <= U; u++) start[u] = (int64_t)u * I;
    /* each user's items in an order of its own, so that a warp's groups hold
     * different items at a step (the user's own item is never its negative) */
    for (int x = 0; x < U * I; x++) col[x] = (x % I + x / I) % I, val[x] = 1.0f;
    for (int u = 0; u < U; u++) order[u] = u;
    lac_mf_data d;
    memset(&d, 0, sizeof d);
    d.num_users = U, d.num_items = I, d.nnz = U * I;
    d.row_start = start, d.col = col, d.val = val, d.row_order = order;
    lac_mf_params p = one_user_params(LAC_MF_LOSS_XENT, K, 3);
    p.negatives = 3;
    CHECK_OK(c, lac_mf_implicit_data(c, &p, &d));
    lac_mf_model_t m = NULL;
    CHECK_OK(c, lac_mf_model_alloc(c, U, I, K, &m));
    m->params = p;
    unsigned long long s = 23;
    random_model(m, U, I, K, &s);
    *ref = 0.0;
    for (int u = 0; u < U; u++)
        for (int j = 0; j < I; j++) {
            double x = m->user_bias[u] + m->item_bias[j];
            for (int f = 0; f < K; f++) x += (double)m->P[u * m->stride + f] * m->Q[j * m->stride + f];
            *ref += log_loss(x);
        }
    lac_mf_call call = lac_mf_model_call(m, &d, NULL);
    const lac_mf_backend *b = lac_mf_backend_cuda();
    lac_mf_state *st = NULL;
    double sum = 0.0;
    CHECK_OK(c, b->begin(c, &call, &st));
    CHECK_OK(c, b->epoch(c, st, 1e-7f, 0, &sum));
    b->end(c, st);
    free(d.neg_cum);
    lac_mf_model_destroy(&m);
    return sum;
}

TEST(inbatch_negatives_pass_over_seen_items)
{
    double ref = 0.0, ref2 = 0.0;
    const double with = all_seen_loss(inbatch, &ref), without = all_seen_loss(inbatch_unseen, &ref2);
    printf("  in-batch, every item seen: loss %.6f with the seen test, %.6f without; positives alone %.6f\n", with,
           without, ref);
    CHECK_NEAR(with, ref, 1e-4 * ref);
    CHECK(without > 1.5 * ref);   /* the test is what keeps the negatives out */
}

/* The neighbourhood model's eq. (1) for user 0 and item j in float64: R(i)
 * from seen (NaN: unseen), the residuals' baselines bhat at the epoch's
 * start; the residuals and the two normalisers for the step. */
typedef struct {
    int F, K;
    double *P, *Q, bu, bi[6], *W, *C, bhat[6];
    const int32_t *nbr;
    const double *seen;
} nbr_ref;

static double nbr_predict(const nbr_ref *r, int j, double *resid, double *rr, double *rc)
{
    const double base = r->bu;   /* implicit feedback: mean 0 */
    double x = base + r->bi[j], sr = 0, sc = 0;
    int nr = 0;
    for (int f = 0; f < r->F; f++) x += r->P[f] * r->Q[j * r->F + f];
    for (int k = 0; k < r->K; k++) {
        const int n = r->nbr[j * r->K + k];
        if (r->seen[n] == r->seen[n]) {
            resid[k] = r->seen[n] - base - r->bhat[n];
            sr += resid[k] * r->W[j * r->K + k];
            nr++;
        } else {
            resid[k] = NAN;
            sc += r->C[j * r->K + k];
        }
    }
    *rr = nr ? 1 / sqrt(nr) : 0;
    *rc = nr < r->K ? 1 / sqrt(r->K - nr) : 0;
    return x + sr * *rr + sc * *rc;
}

/* Rule (5) at (0, j) with error e, rates g and regularisers l (b, bhat, u, v, w, c). */
static void nbr_step(nbr_ref *r, int j, double e, const double *g, const double *l)
{
    double resid[8], rr, rc;
    nbr_predict(r, j, resid, &rr, &rc);   /* with b_i as it is now */
    r->bu += g[0] * (e - l[0] * r->bu);
    r->bi[j] += g[1] * (e - l[1] * r->bi[j]);
    for (int f = 0; f < r->F; f++) {
        const double pf = r->P[f], qf = r->Q[j * r->F + f];
        r->P[f] = pf + g[2] * (e * qf - l[2] * pf);
        r->Q[j * r->F + f] = qf + g[3] * (e * pf - l[3] * qf);
    }
    for (int k = 0; k < r->K; k++) {
        double *w = r->W + j * r->K + k, *c = r->C + j * r->K + k;
        if (resid[k] == resid[k]) *w += g[4] * (e * rr * resid[k] - l[4] * *w);
        else *c += g[5] * (e * rc - l[5] * *c);
    }
}

/* BPR with the neighbourhood model: one epoch of one user (items 2, 0, 4 of
 * 6, weights 1, 2, 0.5; K = 3 neighbours, the next three items) against
 * float64. Each pair (j, n): both scored first, x = r_hat_j - r_hat_n, then n
 * stepped by -c sigmoid(-x) and j by c sigmoid(-x), the CUDA stream's order
 * (the CPU steps j first: the same objective, the difference O(rate^2)). */
static void nbr_bpr_epoch(int F)
{
    enum { K = 3, NI = 6 };
    const int32_t *col = one_col;
    const float *val = one_val;
    lac_mf_data d = one_user();
    lac_mf_params p = one_user_params(LAC_MF_LOSS_BPR, F, 13);
    p.model = LAC_MF_MODEL_NEIGHBOURHOOD;
    p.rates = (lac_mf_groups){0.3, 0.2, 0.4, 0.5, 0.1, 0.15};
    p.lambdas = (lac_mf_groups){0.02, 0.03, 0.04, 0.05, 0.06, 0.07};
    CHECK_OK(gpu, lac_mf_implicit_data(gpu, &p, &d));
    lac_mf_model_t m = NULL;
    CHECK_OK(gpu, lac_mf_model_alloc(gpu, 1, NI, F, &m));
    CHECK_OK(gpu, lac_mf_model_alloc_nbr(gpu, m, K));
    m->params = p;
    m->params.neighbours.k = K;
    nbr_ref r;
    memset(&r, 0, sizeof r);
    r.F = F;
    r.K = K;
    r.P = calloc((size_t)F, sizeof *r.P);
    r.Q = calloc((size_t)NI * F, sizeof *r.Q);
    r.W = calloc(NI * K, sizeof *r.W);
    r.C = calloc(NI * K, sizeof *r.C);
    r.nbr = m->nbr;
    double seen[NI] = {NAN, NAN, NAN, NAN, NAN, NAN};
    seen[2] = 1.0, seen[0] = 2.0, seen[4] = 0.5;
    r.seen = seen;
    unsigned long long s = 17;
    r.bu = m->user_bias[0] = (float)(0.2 * harness_rand_uniform(&s) - 0.1);
    for (int f = 0; f < F; f++) r.P[f] = m->P[f] = (float)((harness_rand_uniform(&s) - 0.5) / sqrt(F));
    for (int j = 0; j < NI; j++) {
        r.bi[j] = r.bhat[j] = m->item_bias[j] = (float)(0.2 * harness_rand_uniform(&s) - 0.1);
        for (int f = 0; f < F; f++) r.Q[j * F + f] = m->Q[j * m->stride + f] = (float)(harness_rand_uniform(&s) - 0.5);
        for (int k = 0; k < K; k++) {
            m->nbr[j * K + k] = (j + 1 + k) % NI;
            r.W[j * K + k] = m->W[j * K + k] = (float)(0.4 * harness_rand_uniform(&s) - 0.2);
            r.C[j * K + k] = m->C[j * K + k] = (float)(0.4 * harness_rand_uniform(&s) - 0.2);
        }
    }
    /* R(i): the items ascending */
    const int32_t rated[3] = {0, 2, 4};
    const float rated_w[3] = {2.0f, 1.0f, 0.5f};
    m->rated_items = malloc(sizeof rated);
    m->rated_vals = malloc(sizeof rated_w);
    memcpy(m->rated_items, rated, sizeof rated);
    memcpy(m->rated_vals, rated_w, sizeof rated_w);
    m->rated_start[0] = 0;
    m->rated_start[1] = 3;
    lac_mf_call call = lac_mf_model_call(m, &d, NULL);
    const lac_mf_backend *b = lac_mf_backend_cuda();
    lac_mf_state *st = NULL;
    const double lr = 0.5;
    double sum = 0.0, ref_loss = 0.0;
    CHECK_OK(gpu, b->begin(gpu, &call, &st));
    if (st) {
        CHECK_OK(gpu, b->epoch(gpu, st, (float)lr, 0, &sum));
        CHECK_OK(gpu, b->download(gpu, st));
        b->end(gpu, st);
    }
    {
        const double *rt = &p.rates.b, *lt = &p.lambdas.b;
        double g[6], l[6], resid[K], rr, rc;
        for (int x = 0; x < 6; x++) g[x] = rt[x] * lr, l[x] = lt[x];
        const uint64_t useed = lac_mf_draw_seed(call.seed, 0, 0);
        for (int a = 0; a < 3; a++) {
            const int j = col[a];
            int32_t n = 0;
            for (int t = 0; t < LAC_MF_DRAWS; t++) {
                n = ref_draw(NULL, useed, j, 0, t);
                if (seen[n] != seen[n]) break;
            }
            const double x = nbr_predict(&r, j, resid, &rr, &rc) - nbr_predict(&r, n, resid, &rr, &rc);
            const double e = val[a] * sig(-x);
            ref_loss += val[a] * log_loss(x);
            nbr_step(&r, n, -e, g, l);
            nbr_step(&r, j, e, g, l);
        }
    }
    double worst = fabs(r.bu - m->user_bias[0]);
    for (int f = 0; f < F; f++) worst = fmax(worst, fabs(r.P[f] - m->P[f]));
    for (int j = 0; j < NI; j++) {
        worst = fmax(worst, fabs(r.bi[j] - m->item_bias[j]));
        for (int f = 0; f < F; f++) worst = fmax(worst, fabs(r.Q[j * F + f] - m->Q[j * m->stride + f]));
        for (int k = 0; k < K; k++) {
            worst = fmax(worst, fabs(r.W[j * K + k] - m->W[j * K + k]));
            worst = fmax(worst, fabs(r.C[j * K + k] - m->C[j * K + k]));
        }
    }
    printf("  neighbourhood bpr, k %d, K %d: largest difference from float64 %.2e, loss %.6f vs %.6f\n", F, K, worst,
           sum, ref_loss);
    if (!(worst < 2e-5)) HARNESS_FAIL("neighbourhood bpr k = %d: the CUDA epoch is %g from float64", F, worst);
    CHECK_NEAR(sum, ref_loss, 1e-4 * (1 + fabs(ref_loss)));
    free(r.P);
    free(r.Q);
    free(r.W);
    free(r.C);
    lac_mf_model_destroy(&m);
}

TEST(neighbourhood_bpr_epoch_matches_float64_reference)
{
    nbr_bpr_epoch(3);     /* 8 lanes, K in one slot a lane */
    nbr_bpr_epoch(40);    /* two float4 a lane */
    nbr_bpr_epoch(300);   /* the general path: a warp, u_i in memory */
}

/* A variant of the plain model's cross-entropy on context c (a knob's
 * kernel): trained on the planted data d, HR@10 beats most-popular 2x and
 * HR@10 and NDCG@10 are within 0.05 of the CPU's (rc). */
static void ranks_like_the_cpu(lac_ctx_t c, const lac_mf_params *p, lac_ratings_t r, const loo *d,
                               const lac_mf_rank_report *rc, double pop, const char *what)
{
    lac_mf_rank_report rp;
    lac_mf_model_t m = NULL;
    CHECK_OK(c, lac_mf_train(c, p, r, NULL, NULL, NULL, &m, NULL));
    if (!m) return;
    loo_rank(cpu, m, d, &rp);
    printf("  plain xent, %s: HR@10 %.3f, NDCG@10 %.3f\n", what, rp.hr, rp.ndcg);
    CHECK(rp.hr > 2.0 * pop);
    CHECK(fabs(rp.hr - rc->hr) <= 0.05);
    CHECK(fabs(rp.ndcg - rc->ndcg) <= 0.05);
    lac_mf_model_destroy(&m);
}

static void planted(int64_t users, int64_t items, int per_user, int groups, uint64_t seed)
{
    loo d;
    make_loo(&d, users, items, per_user, groups, seed);
    double pop = hr_popular(&d);
    printf("  %lld x %lld: most-popular HR@10 %.3f\n", (long long)users, (long long)items, pop);
    lac_ratings_t r = NULL;
    CHECK_OK(cpu, lac_ratings_from_arrays(cpu, d.train.n, d.train.u, d.train.i, d.train.r, &r));
    /* cross-entropy, with negatives shared by 4, BPR; the neighbourhood
     * model's cross-entropy, shared by 2, and BPR */
    for (int x = 0; x < 6; x++) {
        const int loss = x == 2 || x == 5 ? LAC_MF_LOSS_BPR : LAC_MF_LOSS_XENT;
        lac_mf_params p = lac_mf_params_default();
        p.implicit = 1;
        p.loss = loss;
        p.negative_share = x == 1 ? 4 : x == 4 ? 2 : 1;
        p.k = 16;
        p.epochs = 20;
        p.beta = 0.1;   /* the tool's implicit rates (docs/mf.md) */
        if (x >= 3) {
            p.model = LAC_MF_MODEL_NEIGHBOURHOOD;
            p.neighbours.k = 16;
            p.rates = (lac_mf_groups){0.2, 0.2, 0.2, 0.2, 0.02, 0.02};
            p.beta_groups = 0.1;
        }
        lac_mf_rank_report rc, rg;
        lac_mf_model_t mc = NULL, mg = NULL;
        CHECK_OK(cpu, lac_mf_train(cpu, &p, r, NULL, NULL, NULL, &mc, NULL));
        CHECK_OK(gpu, lac_mf_train(gpu, &p, r, NULL, NULL, NULL, &mg, NULL));
        if (!mc || !mg) continue;
        loo_rank(cpu, mc, &d, &rc);
        loo_rank(cpu, mg, &d, &rg);
        printf("  %s %s share %d: HR@10 CPU %.3f CUDA %.3f, NDCG@10 CPU %.3f CUDA %.3f\n", x >= 3 ? "nbr" : "plain",
               loss ? "bpr" : "xent", p.negative_share, rc.hr, rg.hr, rc.ndcg, rg.ndcg);
        CHECK(rg.hr > 2.0 * pop);
        CHECK(fabs(rg.hr - rc.hr) <= 0.05);
        CHECK(fabs(rg.ndcg - rc.ndcg) <= 0.05);
        if (x == 0) {   /* the default: in-batch negatives on one device (logged); drawn ones beside */
            lac_mf_model_t mp = NULL;
            log_seen[0] = 0;
            CHECK_OK(logged, lac_mf_train(logged, &p, r, NULL, NULL, NULL, &mp, NULL));
            if (!strstr(log_seen, "in-batch negatives")) HARNESS_FAIL("the default took no in-batch negatives: %s", log_seen);
            lac_mf_model_destroy(&mp);
            for (int o = 0; o < 2; o++) {   /* drawn where the weights would span too much or be too heavy */
                lac_mf_params po = p;
                if (o) po.negatives = 15;   /* k 16 takes 4 lanes: 7 met, under half of them */
                else po.negative_exponent = 0.25;
                po.epochs = 1;
                log_seen[0] = 0;
                mp = NULL;
                CHECK_OK(logged, lac_mf_train(logged, &po, r, NULL, NULL, NULL, &mp, NULL));
                if (strstr(log_seen, "in-batch negatives"))
                    HARNESS_FAIL("%s took in-batch negatives: %s", o ? "9 negatives" : "exponent 0.25", log_seen);
                lac_mf_model_destroy(&mp);
            }
            ranks_like_the_cpu(drawn, &p, r, &d, &rc, pop, "drawn negatives");
            ranks_like_the_cpu(pooled, &p, r, &d, &rc, pop, "a pool of 16 negatives");
            ranks_like_the_cpu(inbatch, &p, r, &d, &rc, pop, "in-batch negatives (4 of them)");
            lac_mf_params pb = p;
            pb.negatives = 7;   /* the warp's other 7 groups at 4 lanes */
            ranks_like_the_cpu(inbatch4, &pb, r, &d, &rc, pop, "in-batch negatives (7 of them)");
            ranks_like_the_cpu(copies32, &p, r, &d, &rc, pop, "warp copies of a pool of 32");
        }
        lac_mf_model_destroy(&mc);
        lac_mf_model_destroy(&mg);
    }
    lac_ratings_destroy(&r);
    harness_triples_free(&d.train);
    free(d.held);
}

TEST(planted_preferences_beat_most_popular_and_match_the_cpu)
{
    planted(1000, 300, 20, 8, 7);
    planted(3000, 1000, 30, 20, 3);
}

int main(void)
{
    /* the contexts of one kernel each (a knob's), and the defaults logged */
    const struct {
        lac_ctx_t *ctx;
        const char *knobs;
    } kernels[] = {
        {&pooled, "MF_CUDA_NEG_POOL=16"},
        {&copies16, "MF_CUDA_NEG_POOL=16,MF_CUDA_NEG_POOL_ADD=1,MF_CUDA_NEG_POOL_CELLS=8"},
        {&copies32, "MF_CUDA_NEG_POOL=32,MF_CUDA_NEG_POOL_ADD=1,MF_CUDA_NEG_POOL_CELLS=2"},
        {&inbatch, "MF_CUDA_INBATCH=0"},
        {&inbatch4, "MF_CUDA_INBATCH=4"},
        {&inbatch_unseen, "MF_CUDA_INBATCH=0,MF_CUDA_INBATCH_SEEN=0"},
        {&drawn, "MF_CUDA_INBATCH=-1"},
        {&logged, NULL},
    };
    const size_t nk = sizeof kernels / sizeof kernels[0];
    int rc;
    if (!harness_cuda_start(&gpu, &cpu, 0, &rc)) return rc;
    for (size_t i = 0; i < nk; i++) {
        lac_ctx_params cp = lac_ctx_params_default();
        cp.backend = LAC_BACKEND_CUDA;
        cp.knobs = kernels[i].knobs;
        if (!cp.knobs) cp.log = keep_log, cp.log_level = LAC_LOG_INFO;
        if (lac_ctx_create(&cp, kernels[i].ctx) != 0) {
            printf("no CUDA context with knobs %s: %s\n", cp.knobs ? cp.knobs : "(none)", lac_last_error(NULL));
            return 1;
        }
    }
    RUN(one_epoch_matches_float64_reference);
    RUN(pooled_epoch_matches_float64_reference);
    RUN(warp_copies_epoch_matches_float64_reference);
    RUN(inbatch_epoch_alone_matches_float64_reference);
    RUN(inbatch_negatives_pass_over_seen_items);
    RUN(neighbourhood_bpr_epoch_matches_float64_reference);
    RUN(planted_preferences_beat_most_popular_and_match_the_cpu);
    lac_ctx_destroy(&gpu);
    lac_ctx_destroy(&cpu);
    for (size_t i = 0; i < nk; i++) lac_ctx_destroy(kernels[i].ctx);
    return harness_finish();
}
