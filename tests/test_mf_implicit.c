/* Implicit feedback (lac_mf_params.implicit): on generated interactions with
 * planted preferences (a user "sees" the items it rates 4 or more, ratings
 * from a low-rank signal with planted item clusters), leave-one-out HR@10
 * over full ranking of cross-entropy and BPR training, plain and
 * neighbourhood models, against most-popular (counted here); one epoch of
 * the plain cross-entropy kernel against a float64 reference; the checks
 * (validation, CUDA, weights); the model file keeps the setting; the
 * correction for the negatives' weights; the held-out search. */
#include "cpu_context.h"
#include "harness.h"
#include "lacuna/lacuna.h"
#include "mf/mf_internal.h"
#include "mf_planted.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static lac_ctx_t ctx;

/* A version 5 model file rewritten as version 4: the header without its last
 * word (the negatives' correction), the FNV-1a checksum of the rest. */
static void write_version4(const char *from, const char *to)
{
    FILE *fp = fopen(from, "rb");
    CHECK(fp != NULL);
    fseek(fp, 0, SEEK_END);
    long size = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    unsigned char *buf = malloc((size_t)size);
    CHECK(buf && fread(buf, 1, (size_t)size, fp) == (size_t)size);
    fclose(fp);
    uint32_t version, header_bytes;
    memcpy(&version, buf + 8, 4);
    memcpy(&header_bytes, buf + 12, 4);
    CHECK_INT(version, 5);
    uint32_t v4 = 4, hb4 = header_bytes - 8;
    fp = fopen(to, "wb");
    CHECK(fp != NULL);
    uint64_t h = 1469598103934665603ull;
    const unsigned char *parts[5] = {buf, (const unsigned char *)&v4, (const unsigned char *)&hb4, buf + 16,
                                     buf + 16 + header_bytes};
    size_t lens[5] = {8, 4, 4, hb4, (size_t)size - 8 - (16 + header_bytes)};
    for (int x = 0; x < 5; x++) {
        for (size_t i = 0; i < lens[x]; i++) h = (h ^ parts[x][i]) * 1099511628211ull;
        CHECK(fwrite(parts[x], 1, lens[x], fp) == lens[x]);
    }
    CHECK(fwrite(&h, 8, 1, fp) == 1);
    fclose(fp);
    free(buf);
}

/* HR@10 of a model over the users with a held-out item: its top 10 leave
 * the training items out (lac_mf_recommend). */
static double hr_model(lac_mf_model_t m, const loo *d)
{
    int64_t n = 0, hits = 0, *users = malloc((size_t)d->users * sizeof *users), *held = malloc((size_t)d->users * sizeof *held);
    for (int64_t uid = 1; uid <= d->users; uid++) {
        char id[32];
        snprintf(id, sizeof id, "%lld", (long long)uid);
        int64_t u = lac_mf_model_user_index(m, id);
        if (!d->held[uid] || u < 0) continue;
        users[n] = u;
        held[n++] = d->held[uid];
    }
    int64_t *top = malloc((size_t)(n ? n : 1) * 10 * sizeof *top);
    CHECK_OK(ctx, lac_mf_recommend(ctx, m, n, users, 10, top, NULL));
    for (int64_t x = 0; x < n * 10; x++)
        if (top[x] >= 0 && atoll(lac_mf_model_item_id(m, top[x])) == held[x / 10]) hits++;
    free(users);
    free(held);
    free(top);
    return n ? (double)hits / (double)n : NAN;
}

static lac_mf_model_t train(const lac_mf_params *p, const harness_triples *t)
{
    lac_ratings_t r = NULL;
    CHECK_OK(ctx, lac_ratings_from_arrays(ctx, t->n, t->u, t->i, t->r, &r));
    lac_mf_model_t m = NULL;
    CHECK_OK(ctx, lac_mf_train(ctx, p, r, NULL, NULL, NULL, &m, NULL));
    lac_ratings_destroy(&r);
    return m;
}

/* The learning rates the command-line tool and Python take for implicit
 * feedback when none are given (docs/mf.md). */
static void implicit_rates(lac_mf_params *p)
{
    p->beta = 0.1;
    p->rates = (lac_mf_groups){0.2, 0.2, 0.2, 0.2, 0.02, 0.02};
    p->beta_groups = 0.1;
}

TEST(implicit_beats_most_popular)
{
    loo d;
    make_loo(&d, 1000, 300, 20, 8, 7);
    double pop = hr_popular(&d);
    printf("  most-popular HR@10 %.3f over %lld interactions\n", pop, (long long)d.train.n);
    struct {
        const char *name;
        int model, loss, share;
        double exponent;   /* -1: the model's default (plain 0.75, neighbourhood 0) */
        double over;       /* HR@10 must exceed this many times most-popular's */
    } cases[] = {{"plain xent", LAC_MF_MODEL_PLAIN, LAC_MF_LOSS_XENT, 1, -1, 2.0},
                 {"plain bpr", LAC_MF_MODEL_PLAIN, LAC_MF_LOSS_BPR, 1, -1, 2.0},
                 {"neighbourhood xent", LAC_MF_MODEL_NEIGHBOURHOOD, LAC_MF_LOSS_XENT, 1, -1, 2.0},
                 {"neighbourhood bpr", LAC_MF_MODEL_NEIGHBOURHOOD, LAC_MF_LOSS_BPR, 1, -1, 2.0},
                 {"plain xent, negatives shared by 4", LAC_MF_MODEL_PLAIN, LAC_MF_LOSS_XENT, 4, -1, 2.0},
                 {"plain xent, uniform negatives", LAC_MF_MODEL_PLAIN, LAC_MF_LOSS_XENT, 1, 0, 2.0},
                 /* not the neighbourhood model's default because popularity
                  * draws cost it 0.02-0.04 HR@10 (docs/mf.md): measured 1.99-2.1x
                  * here, the threads' order deciding which */
                 {"neighbourhood xent, negatives by popularity^0.5", LAC_MF_MODEL_NEIGHBOURHOOD, LAC_MF_LOSS_XENT, 1,
                  0.5, 1.8}};
    for (int c = 0; c < 7; c++) {
        lac_mf_params p = lac_mf_params_default();
        p.implicit = 1;
        p.model = cases[c].model;
        p.loss = cases[c].loss;
        p.negative_share = cases[c].share;
        p.negative_exponent = cases[c].exponent;
        p.k = 16;
        p.epochs = 20;
        p.neighbours.k = 16;
        implicit_rates(&p);
        lac_mf_model_t m = train(&p, &d.train);
        double hr = hr_model(m, &d);
        printf("  %s HR@10 %.3f\n", cases[c].name, hr);
        CHECK(hr > cases[c].over * pop);   /* measured: 2.0-2.5 x (shared by 4: 2.1 x; uniform 2.5 x) */
        const double used = cases[c].exponent >= 0 ? cases[c].exponent : cases[c].model == LAC_MF_MODEL_PLAIN ? 0.75 : 0;
        CHECK(lac_mf_model_params(m).negative_exponent == used);   /* the model keeps the value it used */
        lac_mf_model_destroy(&m);
    }
    harness_triples_free(&d.train);
    free(d.held);
}

static double sig(double x) { return 1.0 / (1.0 + exp(-x)); }

/* A one-thread CPU context: the epochs below are followed step by step. */
static lac_ctx_t one_thread(void)
{
    lac_ctx_params cp = lac_ctx_params_default();
    cp.backend = LAC_BACKEND_CPU;
    cp.threads = 1;
    lac_ctx_t one = NULL;
    CHECK_OK(NULL, lac_ctx_create(&cp, &one));
    return one;
}

/* count rows of F (the model's stride) and their biases drawn at random,
 * the same values into the float64 reference's ref (count x k) and refb. */
static void draw_rows(float *F, float *bias, int stride, int count, int k, double *ref, double *refb,
                      unsigned long long *s)
{
    for (int r = 0; r < count; r++) {
        refb[r] = bias[r] = (float)(0.2 * harness_rand_uniform(s) - 0.1);
        for (int f = 0; f < k; f++) ref[r * k + f] = F[r * stride + f] = (float)(harness_rand_uniform(s) - 0.5);
    }
}

/* One epoch of the CPU backend's call at learning rate lr; its summed loss. */
static double cpu_epoch(lac_ctx_t one, const lac_mf_call *call, double lr)
{
    lac_mf_state *st = NULL;
    double sum = 0.0;
    CHECK_OK(one, lac_mf_cpu_backend.begin(one, call, &st));
    CHECK_OK(one, lac_mf_cpu_backend.epoch(one, st, (float)lr, 0, &sum));
    lac_mf_cpu_backend.end(one, st);
    return sum;
}

/* One epoch of the plain kernel on 3 users x 2 items, each user with one
 * interaction, so that its one negative is the other item; users in count
 * order (ties: index). Against rule (5) in float64 with e the loss gradient. */
static void one_epoch(int loss)
{
    lac_ctx_t one = one_thread();
    int64_t us[3] = {1, 2, 3}, is[3] = {1, 2, 1};
    float w[3] = {1.0f, 2.0f, 0.5f};
    lac_ratings_t r = NULL;
    CHECK_OK(one, lac_ratings_from_arrays(one, 3, us, is, w, &r));
    lac_mf_data d;
    CHECK_OK(one, lac_mf_data_build(one, r, &d));
    lac_mf_params p = lac_mf_params_default();
    p.implicit = 1;
    p.weighted = 1;
    p.loss = loss;
    p.negatives = 1;
    p.deterministic = 1;
    p.k = 3;
    CHECK_OK(one, lac_mf_implicit_data(one, &p, &d));
    lac_mf_model_t m = NULL;
    CHECK_OK(one, lac_mf_model_alloc(one, 3, 2, 3, &m));
    m->params = p;
    double P[3][3], Q[2][3], bu[3], bi[2];
    unsigned long long s = 5;
    draw_rows(m->P, m->user_bias, m->stride, 3, 3, &P[0][0], bu, &s);
    draw_rows(m->Q, m->item_bias, m->stride, 2, 3, &Q[0][0], bi, &s);
    lac_mf_call call = lac_mf_model_call(m, &d, NULL);
    double lr = 0.3, ref_loss = 0.0, sum = cpu_epoch(one, &call, lr);
    /* the reference: users 0, 1, 2 (one interaction each: index order) */
    const int pos[3] = {0, 1, 0};
    const double weight[3] = {1.0, 2.0, 0.5};
    for (int u = 0; u < 3; u++) {
        int jp = pos[u], jn = 1 - pos[u];
        double e_at[2], x[2];
        for (int t = 0; t < 2; t++) {
            int j = t ? jn : jp;
            x[t] = bu[u] + bi[j];
            for (int f = 0; f < 3; f++) x[t] += P[u][f] * Q[j][f];
        }
        for (int t = 0; t < 2; t++) {
            int j = t ? jn : jp;
            if (loss == LAC_MF_LOSS_XENT) {   /* the positive's step comes before the negative is scored */
                if (t == 1) {
                    x[1] = bu[u] + bi[j];
                    for (int f = 0; f < 3; f++) x[1] += P[u][f] * Q[j][f];
                }
                e_at[t] = t ? -sig(x[1]) : weight[u] * (1.0 - sig(x[0]));
                ref_loss += t ? log1p(exp(x[1])) : weight[u] * log1p(exp(-x[0]));
            } else {
                double g = sig(-(x[0] - x[1]));
                e_at[t] = t ? -weight[u] * g : weight[u] * g;
                if (!t) ref_loss += weight[u] * log1p(exp(-(x[0] - x[1])));
            }
            double step = lr * e_at[t];
            bu[u] = (1 - lr * p.lambda_bias) * bu[u] + step;
            bi[j] = (1 - lr * p.lambda_bias) * bi[j] + step;
            for (int f = 0; f < 3; f++) {
                double pf = P[u][f], qf = Q[j][f];
                P[u][f] = (1 - lr * p.lambda) * pf + step * qf;
                Q[j][f] = (1 - lr * p.lambda) * qf + step * pf;
            }
        }
    }
    double worst = 0.0;
    for (int u = 0; u < 3; u++) {
        worst = fmax(worst, fabs(bu[u] - m->user_bias[u]));
        for (int f = 0; f < 3; f++) worst = fmax(worst, fabs(P[u][f] - m->P[u * m->stride + f]));
    }
    for (int j = 0; j < 2; j++) {
        worst = fmax(worst, fabs(bi[j] - m->item_bias[j]));
        for (int f = 0; f < 3; f++) worst = fmax(worst, fabs(Q[j][f] - m->Q[j * m->stride + f]));
    }
    printf("  %s: largest difference from float64 %.2e, loss %.6f vs %.6f\n", loss ? "bpr" : "xent", worst, sum,
           ref_loss);
    CHECK(worst < 1e-5);
    CHECK_NEAR(sum, ref_loss, 1e-5);
    lac_mf_model_destroy(&m);
    lac_mf_data_free(&d);
    lac_ratings_destroy(&r);
    lac_ctx_destroy(&one);
}

/* Candidate r of the counter-based rule by the items' weights w (NULL:
 * uniform): its 53 bits modulo their sum, found by a scan. */
static int32_t ref_draw(const uint64_t *w, int ni, uint64_t useed, int32_t key, int t, int r)
{
    if (!w) return lac_mf_draw_item(useed, key, t, r, ni);
    uint64_t total = 0, x;
    for (int j = 0; j < ni; j++) total += w[j];
    x = lac_mf_draw_bits(useed, key, t, r) % total;
    int32_t j = 0;
    while (x >= w[j]) x -= w[j++];
    return j;
}

/* Shared negatives (negative_share): one user with 5 interactions of 12
 * items in read order 7, 2, 9, 0, 4, chunks of `share` of its items
 * ascending; each chunk's `negatives` drawn by the counter-based rule with
 * the chunk's index as key, negative t stepped after the chunk's interaction
 * of rank t mod size, with weight size. Against float64, steps in order.
 * skewed: the negatives drawn by the items' weights 1, 4, 9, ... (a table
 * set here, lac_mf_data.neg_cum). */
static void shared_epoch(int negatives, int share, int skewed)
{
    lac_ctx_t one = one_thread();
    const int n = 5, ni = 12, k = 3, sorted[5] = {0, 2, 4, 7, 9};
    int32_t items[5] = {7, 2, 9, 0, 4}, order[1] = {0};
    float w[5] = {1, 1, 1, 1, 1};
    int64_t start[2] = {0, 5};
    lac_mf_data d;
    memset(&d, 0, sizeof d);
    d.num_users = 1;
    d.num_items = ni;
    d.nnz = n;
    d.row_start = start;
    d.col = items;
    d.val = w;
    d.row_order = order;
    lac_mf_params p = lac_mf_params_default();
    p.implicit = 1;
    p.negatives = negatives;
    p.negative_share = share;
    p.deterministic = 1;
    p.k = k;
    p.negative_exponent = 0;
    CHECK_OK(one, lac_mf_implicit_data(one, &p, &d));
    CHECK(d.neg_cum == NULL);   /* exponent 0: uniform */
    uint64_t wt[12];
    for (int j = 0; j < ni; j++) wt[j] = (uint64_t)((j + 1) * (j + 1));
    if (skewed) {
        d.neg_cum = malloc((size_t)lac_mf_cum_words(ni) * sizeof *d.neg_cum);
        for (int j = 0; j < ni; j++) d.neg_cum[j] = (j ? d.neg_cum[j - 1] : 0) + wt[j];
        lac_mf_cum_index(d.neg_cum, ni);
    }
    lac_mf_model_t m = NULL;
    CHECK_OK(one, lac_mf_model_alloc(one, 1, ni, k, &m));
    m->params = p;
    double P[3], Q[12][3], bu, bi[12];
    unsigned long long s = 9;
    draw_rows(m->P, m->user_bias, m->stride, 1, k, P, &bu, &s);
    draw_rows(m->Q, m->item_bias, m->stride, ni, k, &Q[0][0], bi, &s);
    lac_mf_call call = lac_mf_model_call(m, &d, NULL);
    double lr = 0.2, ref_loss = 0.0, sum = cpu_epoch(one, &call, lr);
    /* the reference */
    int seen[12] = {0};
    for (int a = 0; a < n; a++) seen[items[a]] = 1;
    const uint64_t useed = lac_mf_draw_seed(call.seed, 0, 0);
    int steps = 0;
    for (int a = 0; a < n; a++) {
        int rank = 0;
        while (sorted[rank] != items[a]) rank++;
        const int c = rank / share, size = n - c * share < share ? n - c * share : share;
        int todo[16], m_items = 0;
        double weight[16];
        todo[m_items] = items[a], weight[m_items++] = 1.0;
        for (int t = rank - c * share; t < negatives; t += size) {
            int32_t x = 0;
            for (int q = 0; q < LAC_MF_DRAWS; q++) {
                x = ref_draw(skewed ? wt : NULL, ni, useed, share == 1 ? items[a] : c, t, q);
                if (!seen[x]) break;
            }
            todo[m_items] = x, weight[m_items++] = -size;
        }
        for (int x = 0; x < m_items; x++, steps++) {
            const int j = todo[x];
            double y = bu + bi[j];
            for (int f = 0; f < k; f++) y += P[f] * Q[j][f];
            const double e = x == 0 ? 1.0 - sig(y) : weight[x] * sig(y);
            ref_loss += x == 0 ? log1p(exp(-y)) : -weight[x] * log1p(exp(y));
            const double step = lr * e;
            bu = (1 - lr * p.lambda_bias) * bu + step;
            bi[j] = (1 - lr * p.lambda_bias) * bi[j] + step;
            for (int f = 0; f < k; f++) {
                const double pf = P[f], qf = Q[j][f];
                P[f] = (1 - lr * p.lambda) * pf + step * qf;
                Q[j][f] = (1 - lr * p.lambda) * qf + step * pf;
            }
        }
    }
    double worst = fabs(bu - m->user_bias[0]);
    for (int f = 0; f < k; f++) worst = fmax(worst, fabs(P[f] - m->P[f]));
    for (int j = 0; j < ni; j++) {
        worst = fmax(worst, fabs(bi[j] - m->item_bias[j]));
        for (int f = 0; f < k; f++) worst = fmax(worst, fabs(Q[j][f] - m->Q[j * m->stride + f]));
    }
    printf("  %d negatives shared by %d%s: %d steps, largest difference from float64 %.2e, loss %.6f vs %.6f\n",
           negatives, share, skewed ? ", weighted draws" : "", steps, worst, sum, ref_loss);
    CHECK(steps == n + (n + share - 1) / share * negatives);   /* each chunk's negatives once */
    CHECK(worst < 1e-5);
    CHECK_NEAR(sum, ref_loss, 1e-5);
    free(d.neg_cum);
    lac_mf_model_destroy(&m);
    lac_ctx_destroy(&one);
}

TEST(one_epoch_matches_float64_reference)
{
    one_epoch(LAC_MF_LOSS_XENT);
    one_epoch(LAC_MF_LOSS_BPR);
    shared_epoch(4, 1, 0);   /* every interaction its own: the items' keys */
    shared_epoch(4, 2, 0);   /* chunks of 2, 2, 1 */
    shared_epoch(3, 4, 0);   /* chunks of 4 and 1: the first chunk's last interaction has none */
    shared_epoch(6, 3, 0);
    shared_epoch(4, 1, 1);   /* negatives by the items' weights */
    shared_epoch(6, 3, 1);
}

/* Interactions where item j of ni has 1 + j^2 (item id j + 1, dense index j). */
static lac_ratings_t squares_of_interactions(harness_triples *t, int ni)
{
    memset(t, 0, sizeof *t);
    for (int64_t j = 0; j < ni; j++)
        for (int64_t u = 0; u < 1 + j * j; u++) harness_triples_push(t, u + 1, j + 1, 1.0f);
    lac_ratings_t r = NULL;
    CHECK_OK(ctx, lac_ratings_from_arrays(ctx, t->n, t->u, t->i, t->r, &r));
    return r;
}

/* r's data for implicit feedback with the negatives' exponent e (the
 * neighbourhood model's default where nbr). */
static lac_mf_data implicit_data_at(lac_ratings_t r, double e, int nbr)
{
    lac_mf_data d;
    CHECK_OK(ctx, lac_mf_data_build(ctx, r, &d));
    lac_mf_params p = lac_mf_params_default();
    p.implicit = 1;
    p.negative_exponent = e;
    if (nbr) p.model = LAC_MF_MODEL_NEIGHBOURHOOD;
    CHECK_OK(ctx, lac_mf_implicit_data(ctx, &p, &d));
    return d;
}

/* The negatives' table (lac_mf_implicit_data): item j of 9 with 1 + j^2
 * interactions; its weight against (1 + j^2)^e / sum in float64, and the
 * frequency of each item in 180,000 draws of the counter-based rule against
 * that probability (within 5 standard deviations); exponent 0 (or the
 * neighbourhood model's default) draws uniformly, without a table. */
TEST(negatives_by_popularity)
{
    harness_triples t;
    const int ni = 9;
    lac_ratings_t r = squares_of_interactions(&t, ni);
    const double exps[4] = {0.5, 1.0, 0.0, -1.0};
    for (int x = 0; x < 4; x++) {
        lac_mf_data d = implicit_data_at(r, exps[x], x == 3);
        CHECK_INT(d.num_items, ni);
        CHECK((d.neg_cum != NULL) == (exps[x] > 0));
        double prob[9], total = 0.0, worst = 0.0, worst_z = 0.0;
        for (int j = 0; j < ni; j++) {   /* dense indices are in first-seen order: item id j + 1 is index j */
            prob[j] = exps[x] > 0 ? pow(1.0 + j * j, exps[x]) : 1.0;
            total += prob[j];
        }
        for (int j = 0; j < ni; j++) {
            prob[j] /= total;
            if (d.neg_cum) {
                double w = (double)(d.neg_cum[j] - (j ? d.neg_cum[j - 1] : 0)) / (double)d.neg_cum[ni - 1];
                worst = fmax(worst, fabs(w - prob[j]) / prob[j]);
            }
        }
        const int draws = 180000;
        int64_t hits[9] = {0};
        for (int a = 0; a < draws; a++) {
            int32_t n = lac_mf_draw_negative(d.neg_cum, lac_mf_draw_seed(7, a / 1000, a % 7), a % 1000, a % 11, a % 32, ni);
            CHECK(n >= 0 && n < ni);
            if (n >= 0 && n < ni) hits[n]++;
        }
        for (int j = 0; j < ni; j++) {
            double sd = sqrt(draws * prob[j] * (1 - prob[j]));
            worst_z = fmax(worst_z, fabs((double)hits[j] - draws * prob[j]) / sd);
        }
        printf("  exponent %g%s: weights within %.1e of (1 + j^2)^e, draws within %.2f sd (item 8: %.4f vs %.4f)\n",
               exps[x], x == 3 ? " (neighbourhood model's default)" : "", worst, worst_z, (double)hits[8] / draws,
               prob[8]);
        CHECK(worst < 1e-9);
        CHECK(worst_z < 5.0);
        lac_mf_data_free(&d);
    }
    lac_ratings_destroy(&r);
    harness_triples_free(&t);
}

/* In-batch negatives' weights (lac_mf_inbatch_weights, the CUDA backend's
 * default): such negatives come in proportion to the items' interactions
 * (1 + j^2 here), and item j's weight must be scale x q_j / p_j with q the
 * law n^e normalised, so that the weights' mean under the in-batch law is
 * `scale` (the negatives' term of the loss is the drawn one's in
 * expectation); rows that replicate an item take its weight, an item
 * without interactions 0. */
TEST(inbatch_weights_bring_negatives_to_the_law)
{
    harness_triples t;
    const int ni = 9;
    lac_ratings_t r = squares_of_interactions(&t, ni);
    const double exps[4] = {0.75, 0.5, 1.0, 0.0}, scale = 4.0 / 3.0;
    int64_t count[9];
    int32_t row_item[11];
    for (int j = 0; j < ni; j++) count[j] = 1 + j * j, row_item[j] = j;
    row_item[9] = row_item[10] = 8;   /* two replicas of the most interacted item */
    for (int x = 0; x < 4; x++) {
        lac_mf_data d = implicit_data_at(r, exps[x], 0);
        float w[11];
        lac_mf_inbatch_weights(&d, d.neg_cum, count, row_item, 11, scale, w);
        double law = 0.0, mean = 0.0, worst = 0.0;
        for (int j = 0; j < ni; j++) law += pow(1.0 + j * j, exps[x]);
        for (int j = 0; j < ni; j++) {
            const double q = pow(1.0 + j * j, exps[x]) / law, pj = (1.0 + j * j) / (double)d.nnz;
            worst = fmax(worst, fabs(w[j] - scale * q / pj) / (scale * q / pj));
            mean += pj * w[j];
        }
        printf("  exponent %g: weights within %.1e of scale q_j / p_j, their mean under the in-batch law %.6f "
               "(scale %.6f); item 0 %.3f, item 8 %.3f\n", exps[x], worst, mean, scale, w[0], w[8]);
        CHECK(worst < 1e-6);
        CHECK_NEAR(mean, scale, 1e-6);
        CHECK(w[9] == w[8] && w[10] == w[8]);
        if (exps[x] == 1.0) CHECK_NEAR(w[4], scale, 1e-6);   /* the in-batch law itself: the scale alone */
        int64_t none[9];
        memcpy(none, count, sizeof none);
        none[3] = 0;   /* an item no cell holds */
        lac_mf_inbatch_weights(&d, d.neg_cum, none, row_item, 11, scale, w);
        CHECK(w[3] == 0.0f);
        lac_mf_data_free(&d);
    }
    lac_ratings_destroy(&r);
    harness_triples_free(&t);
}

TEST(checks_and_model_file)
{
    harness_triples t;
    memset(&t, 0, sizeof t);
    for (int64_t u = 1; u <= 30; u++)
        for (int64_t i = 1; i <= 10; i += 1 + (u % 3)) harness_triples_push(&t, u, i, (float)(1 + (u + i) % 4));
    lac_ratings_t r = NULL;
    CHECK_OK(ctx, lac_ratings_from_arrays(ctx, t.n, t.u, t.i, t.r, &r));
    lac_mf_params p = lac_mf_params_default();
    p.implicit = 1;
    p.k = 4;
    p.epochs = 3;
    lac_mf_model_t m = NULL;
    CHECK_STATUS(ctx, lac_mf_train(ctx, &p, r, r, NULL, NULL, &m, NULL), LAC_ERR_ARGUMENT);   /* no validation */
    p.negatives = 0;
    CHECK_STATUS(ctx, lac_mf_train(ctx, &p, r, NULL, NULL, NULL, &m, NULL), LAC_ERR_ARGUMENT);
    p.negatives = 7;
    p.negative_share = 0;
    CHECK_STATUS(ctx, lac_mf_train(ctx, &p, r, NULL, NULL, NULL, &m, NULL), LAC_ERR_ARGUMENT);
    p.negative_share = LAC_MF_SHARE_MAX + 1;
    CHECK_STATUS(ctx, lac_mf_train(ctx, &p, r, NULL, NULL, NULL, &m, NULL), LAC_ERR_ARGUMENT);
    p.negative_share = 5;
    p.negative_exponent = 2.5;
    CHECK_STATUS(ctx, lac_mf_train(ctx, &p, r, NULL, NULL, NULL, &m, NULL), LAC_ERR_ARGUMENT);
    p.negative_exponent = -0.5;
    CHECK_STATUS(ctx, lac_mf_train(ctx, &p, r, NULL, NULL, NULL, &m, NULL), LAC_ERR_ARGUMENT);
    p.negative_exponent = NAN;
    CHECK_STATUS(ctx, lac_mf_train(ctx, &p, r, NULL, NULL, NULL, &m, NULL), LAC_ERR_ARGUMENT);
    p.negative_exponent = 0.75;
    p.negative_correction = 1.5;
    CHECK_STATUS(ctx, lac_mf_train(ctx, &p, r, NULL, NULL, NULL, &m, NULL), LAC_ERR_ARGUMENT);
    p.negative_correction = 0.5;
    p.loss = LAC_MF_LOSS_BPR;
    p.weighted = 1;
    CHECK_OK(ctx, lac_mf_train(ctx, &p, r, NULL, NULL, NULL, &m, NULL));
    char path[4096];
    snprintf(path, sizeof path, "%s/test_mf_implicit.model", getenv("LACUNA_TEST_TMPDIR") ? getenv("LACUNA_TEST_TMPDIR") : ".");
    CHECK_OK(ctx, lac_mf_model_save(ctx, path, m));
    lac_mf_model_t back = NULL;
    CHECK_OK(ctx, lac_mf_model_load(ctx, path, &back));
    lac_mf_params q = lac_mf_model_params(back);
    CHECK(q.implicit == 1 && q.loss == LAC_MF_LOSS_BPR && q.weighted == 1 && q.negatives == 7 && q.negative_share == 5);
    CHECK(q.negative_exponent == 0.75);
    CHECK(q.negative_correction == 0.5);   /* the file keeps the correction folded into the biases */
    lac_mf_model_destroy(&back);
    /* the same file as version 4 wrote it (no correction word): such models
     * were trained before the correction existed, so they read as 0 */
    char old_path[4096];
    snprintf(old_path, sizeof old_path, "%s/test_mf_implicit_v4.model", getenv("LACUNA_TEST_TMPDIR") ? getenv("LACUNA_TEST_TMPDIR") : ".");
    write_version4(path, old_path);
    CHECK_OK(ctx, lac_mf_model_load(ctx, old_path, &back));
    q = lac_mf_model_params(back);
    CHECK(q.implicit == 1 && q.negative_exponent == 0.75 && q.negative_correction == 0.0);
    remove(old_path);
    lac_mf_update_params up = lac_mf_update_params_default();
    lac_mf_model_t upd = NULL;
    CHECK_STATUS(ctx, lac_mf_update(ctx, &up, back, r, &upd, NULL), LAC_ERR_UNSUPPORTED);
    remove(path);
    lac_mf_model_destroy(&back);
    lac_mf_model_destroy(&m);
    lac_ratings_destroy(&r);
    t.r[3] = 0.0f;   /* a weight that is not > 0 */
    CHECK_OK(ctx, lac_ratings_from_arrays(ctx, t.n, t.u, t.i, t.r, &r));
    CHECK_STATUS(ctx, lac_mf_train(ctx, &p, r, NULL, NULL, NULL, &m, NULL), LAC_ERR_VALUE);
    p.weighted = 0;   /* seen: the value does not matter */
    CHECK_OK(ctx, lac_mf_train(ctx, &p, r, NULL, NULL, NULL, &m, NULL));
    lac_mf_model_destroy(&m);
    lac_ratings_destroy(&r);
    harness_triples_free(&t);
}

/* Planted interactions (6 clusters) as ratings of ctx one. */
static lac_ratings_t planted_ratings(lac_ctx_t one, loo *d, int64_t users, int64_t items, int per_user, uint64_t seed)
{
    make_loo(d, users, items, per_user, 6, seed);
    lac_ratings_t r = NULL;
    CHECK_OK(one, lac_ratings_from_arrays(one, d->train.n, d->train.u, d->train.i, d->train.r, &r));
    return r;
}

/* negative_correction: the same training (one thread) with C = 0 and 1
 * differs only in bhat_j, by E log n_j counted here; E = 0 moves nothing;
 * values out of [0, 1] refused. */
TEST(negative_correction)
{
    loo d;
    lac_ctx_t one = one_thread();
    lac_ratings_t r = planted_ratings(one, &d, 300, 120, 12, 5);
    for (int e = 0; e < 2; e++) {
        lac_mf_model_t m[2] = {NULL, NULL};
        for (int c = 0; c < 2; c++) {
            lac_mf_params p = lac_mf_params_default();
            p.implicit = 1;
            p.k = 6;
            p.epochs = 4;
            p.negative_exponent = e ? -1.0 : 0.0;   /* the plain model's default, 0.75; or uniform */
            p.negative_correction = c;
            implicit_rates(&p);
            CHECK_OK(one, lac_mf_train(one, &p, r, NULL, NULL, NULL, &m[c], NULL));
        }
        const double used = lac_mf_model_params(m[0]).negative_exponent;
        CHECK(used == (e ? 0.75 : 0.0));
        const int64_t ni = m[0]->num_items;
        double worst = 0.0;
        for (int64_t j = 0; j < ni; j++) {
            int64_t n = 0, id = atoll(lac_mf_model_item_id(m[0], j));
            for (int64_t a = 0; a < d.train.n; a++) n += d.train.i[a] == id;
            const double want = used * log(n > 1 ? (double)n : 1.0);
            worst = fmax(worst, fabs((double)m[1]->item_bias[j] - (double)m[0]->item_bias[j] - want));
        }
        printf("  E %g: bhat_j moved by E log n_j within %.2g\n", used, worst);
        CHECK(worst < 1e-5);
        const size_t rows_q = (size_t)ni * (size_t)m[0]->stride, rows_p = (size_t)m[0]->num_users * (size_t)m[0]->stride;
        CHECK(!memcmp(m[0]->Q, m[1]->Q, rows_q * sizeof(float)) && !memcmp(m[0]->P, m[1]->P, rows_p * sizeof(float)));
        CHECK(!memcmp(m[0]->user_bias, m[1]->user_bias, (size_t)m[0]->num_users * sizeof(float)));
        lac_mf_model_destroy(&m[0]);
        lac_mf_model_destroy(&m[1]);
    }
    lac_mf_params p = lac_mf_params_default();
    p.implicit = 1;
    const double bad[3] = {-0.1, 1.5, NAN};
    for (int x = 0; x < 3; x++) {
        p.negative_correction = bad[x];
        CHECK(lac_mf_params_check(&p) != NULL);
    }
    lac_ratings_destroy(&r);
    lac_ctx_destroy(&one);
    harness_triples_free(&d.train);
    free(d.held);
}

/* lac_mf_tune with implicit feedback: trials ranked by held-out NDCG@10;
 * the winner's figure is a trial's, recomputed here from its parameters on
 * the same per-user split (one thread: the same model), and the chosen
 * correction is the better of the two there. */
TEST(implicit_search)
{
    loo d;
    lac_ctx_t one = one_thread();
    lac_ratings_t r = planted_ratings(one, &d, 400, 150, 14, 9);
    lac_mf_params p = lac_mf_params_default();
    p.implicit = 1;
    p.k = 6;
    p.epochs = 6;
    implicit_rates(&p);
    lac_mf_tune_params tp = lac_mf_tune_params_default();
    tp.seed = 4;
    lac_mf_tune_report rep;
    lac_mf_params chosen = p;
    CHECK_OK(one, lac_mf_tune(one, &tp, &chosen, r, &rep));
    printf("  %d trials: lambda %g, correction %g, NDCG@10 %.4f (start %.4f)\n", rep.trials, chosen.lambda,
           chosen.negative_correction, rep.ndcg, rep.start_ndcg);
    CHECK_INT(rep.searched, LAC_MF_TUNE_LAMBDA | LAC_MF_TUNE_CORRECTION);
    CHECK(rep.trials >= 3 && rep.ndcg >= rep.start_ndcg && isnan(rep.rmse) && chosen.k == p.k && chosen.epochs == p.epochs);
    CHECK(chosen.negative_correction == 0.0 || chosen.negative_correction == 1.0);
    lac_mf_split_params sp = lac_mf_split_params_default();
    sp.fraction = tp.holdout;
    sp.per_user = 1;
    sp.seed = tp.seed;
    lac_ratings_t fit = NULL, hold = NULL;
    CHECK_OK(one, lac_mf_split(one, &sp, r, &fit, &hold));
    CHECK_INT(lac_ratings_count(hold), rep.holdout);
    lac_mf_rank_params rp = lac_mf_rank_params_default();
    rp.negatives = 0;
    double ndcg[2];
    for (int c = 0; c < 2; c++) {
        lac_mf_params q = chosen;
        q.negative_correction = c;
        lac_mf_model_t m = NULL;
        CHECK_OK(one, lac_mf_train(one, &q, fit, NULL, NULL, NULL, &m, NULL));
        lac_mf_rank_report rr;
        CHECK_OK(one, lac_mf_rank_evaluate(one, &rp, m, hold, &rr));
        ndcg[c] = rr.ndcg;
        lac_mf_model_destroy(&m);
    }
    const int c = (int)chosen.negative_correction;
    printf("  recomputed: NDCG@10 %.4f at correction 0, %.4f at 1\n", ndcg[0], ndcg[1]);
    CHECK(fabs(ndcg[c] - rep.ndcg) < 1e-4 && ndcg[c] >= ndcg[1 - c] - 1e-4);
    lac_ratings_destroy(&fit);
    lac_ratings_destroy(&hold);
    lac_ratings_destroy(&r);
    lac_ctx_destroy(&one);
    harness_triples_free(&d.train);
    free(d.held);
}

int main(void)
{
    if (!(ctx = cpu_context(2))) return 1;
    RUN(implicit_beats_most_popular);
    RUN(one_epoch_matches_float64_reference);
    RUN(negatives_by_popularity);
    RUN(inbatch_weights_bring_negatives_to_the_law);
    RUN(checks_and_model_file);
    RUN(negative_correction);
    RUN(implicit_search);
    lac_ctx_destroy(&ctx);
    return harness_finish();
}
