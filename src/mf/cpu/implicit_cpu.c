/* CPU backend of mf: an epoch of implicit-feedback training (the paper's
 * section 5: eq. (1), or the plain rule, as a logit trained by rule (5) with
 * the gradient of a ranking loss as its error e):
 *   cross-entropy: each interaction (i, j) with weight c is a positive,
 *     e = c (1 - sigmoid(r_hat)); `negatives` items i has not seen, drawn
 *     by the items' weights (call.neg_cum; uniform without), are negatives, e = -sigmoid(r_hat) (with shared
 *     negatives, call.share: a chunk's negatives, weighted by its size);
 *   BPR: one unseen j' per interaction, x = r_hat(i, j) - r_hat(i, j'),
 *     e = c sigmoid(-x) at (i, j) and -c sigmoid(-x) at (i, j') (both
 *     predictions made before either step).
 * Threads take whole users (Hogwild over items, as the explicit schedule);
 * the draws are counter-based (seed, epoch, user, item: mf_backend.h),
 * the CUDA backend's too, so one thread is reproducible.
 * A part of the items (call.item_part: an MPI rank's held item block,
 * src/dist/mf_dist.c) trains the part's positives, and negatives drawn
 * by the same weights from the part's unseen items only (the other blocks' rows are
 * being trained elsewhere), as many as the part's share of one process's
 * (user_part_epoch): over the epoch's P parts each item then receives one
 * process's expected negative weight. The user's
 * interactions are written into the thread's dense row `seen` (NaN
 * elsewhere): the negative test and R(i) of eq. (1) in one load. */
#include "core/random.h"
#include "mf/cpu/mf_cpu.h"
#include "mf/cpu/nbr_step.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>

static inline float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

/* -log sigmoid(x), without overflow. */
static inline double log_loss(double x) { return x > 0 ? log1p(exp(-x)) : -x + log1p(exp(x)); }

/* Negative t of the interaction with item j, or of the chunk with key j
 * (the rules of mf_backend.h). */
static int32_t draw_negative(const uint64_t *cum, uint64_t user_seed, int32_t j, int t, int64_t ni, const float *seen)
{
    int32_t n = 0;
    for (int r = 0; r < LAC_MF_DRAWS; r++) {
        n = lac_mf_draw_negative(cum, user_seed, j, t, r, ni);
        if (seen[n] != seen[n]) break;
    }
    return n;
}

/* A user's scratch for eq. (1)'s residuals: [0] the positive, [1] a negative. */
typedef struct {
    float resid[2][LAC_MF_NBR_MAX_K], rr[2], rc[2];
} scratch;

/* BPR's pair (positive j, negative n), both predicted before either step; the loss. */
static double step_pair(const lac_mf_step_consts *c, scratch *w, int64_t u, int32_t j, int32_t n, float weight,
                        const float *seen)
{
    float x = lac_mf_step_predict(c, u, j, seen, w->resid[0], &w->rr[0], &w->rc[0]) -
              lac_mf_step_predict(c, u, n, seen, w->resid[1], &w->rr[1], &w->rc[1]);
    float e = weight * sigmoid(-x);
    lac_mf_step(c, u, j, e, w->resid[0], w->rr[0], w->rc[0]);
    lac_mf_step(c, u, n, -e, w->resid[1], w->rr[1], w->rc[1]);
    return weight * log_loss(x);
}

/* Cross-entropy's step at a positive (1) or a negative (0) item j; the loss. */
static double step_one(const lac_mf_step_consts *c, scratch *w, int64_t u, int32_t j, int positive, float weight,
                       const float *seen)
{
    const int k = !positive;
    float x = lac_mf_step_predict(c, u, j, seen, w->resid[k], &w->rr[k], &w->rc[k]);
    float e = positive ? weight * (1.0f - sigmoid(x)) : -weight * sigmoid(x);
    lac_mf_step(c, u, j, e, w->resid[k], w->rr[k], w->rc[k]);
    return weight * log_loss(positive ? x : -x);
}

/* One user's interactions. */
static double user_epoch(const lac_mf_state *s, const lac_mf_step_consts *c, int64_t u, float *seen, int epoch)
{
    const lac_mf_data *d = s->call.data;
    const int64_t ni = c->m->num_items;
    scratch w = {.rr = {0, 0}, .rc = {0, 0}};
    uint64_t useed = lac_mf_draw_seed(s->call.seed, epoch, u);
    double loss = 0.0;
    for (int64_t a = d->row_start[u]; a < d->row_start[u + 1]; a++) seen[d->col[a]] = d->val[a];
    for (int64_t a = d->row_start[u]; a < d->row_start[u + 1]; a++) {
        int32_t j = d->col[a];
        float weight = d->val[a];
        if (s->call.loss == LAC_MF_LOSS_BPR) {
            loss += step_pair(c, &w, u, j, draw_negative(s->call.neg_cum, useed, j, 0, ni, seen), weight, seen);
            continue;
        }
        loss += step_one(c, &w, u, j, 1, weight, seen);
        int t, size;
        int32_t key;
        int cnt = lac_mf_share(s->rank ? s->rank[a] : 0, d->row_start[u + 1] - d->row_start[u], s->call.share,
                               s->call.negatives, j, &t, &size, &key);
        for (; cnt > 0; cnt--, t += size)
            loss += step_one(c, &w, u, draw_negative(s->call.neg_cum, useed, key, t, ni, seen), 0, (float)size, seen);
    }
    for (int64_t a = d->row_start[u]; a < d->row_start[u + 1]; a++) seen[d->col[a]] = NAN;
    return loss;
}

/* Negative g of user u's negatives within the part: by the items' weights
 * over the part's items (uniform without), the first of LAC_MF_DRAWS
 * candidates u has not seen. */
static int32_t draw_in_part(const lac_mf_state *s, uint64_t part_seed, int64_t g, const float *seen)
{
    int32_t n = 0;
    for (int r = 0; r < LAC_MF_DRAWS; r++) {
        n = s->part_items[lac_mf_draw_negative(s->part_cum, part_seed, (int32_t)(g >> 10), (int)(g & 1023), r,
                                               s->part_size)];
        if (seen[n] != seen[n]) break;
    }
    return n;
}

/* One user's epoch on a part of the items. Cross-entropy: one process
 * draws n x negatives from u's unseen items, of which a part of unseen
 * weight U_b (items, when uniform) gets n x negatives x U_b / U in
 * expectation; that count (rounded at
 * random, so the expectation holds) is drawn within the part, each negative
 * of weight `share`, and spread over the part's positives (the g-th after
 * positive g mod n_b; after none when u has no positive here: u's items
 * here still get their negatives). BPR's pair is stepped at once, so its
 * negative comes from the positive's part: one process's one pair a
 * positive, the negative uniform over the part's unseen items (the parts
 * are dealt round-robin by popularity, lac_mf_deal_blocks, so a part's
 * items are a popularity-stratified sample of all). */
static double user_part_epoch(const lac_mf_state *s, const lac_mf_step_consts *c, int64_t u, float *seen, int epoch)
{
    const lac_mf_data *d = s->call.data;
    const int32_t *part = s->call.item_part, me = s->call.part;
    const int64_t lo = d->row_start[u], hi = d->row_start[u + 1], n = hi - lo, ni = c->m->num_items;
    scratch w = {.rr = {0, 0}, .rc = {0, 0}};
    uint64_t pseed = lac_mix64(lac_mf_draw_seed(s->call.seed, epoch, u) ^ (0xA24BAED4963EE407ull * (uint64_t)(me + 1)));
    double loss = 0.0;
    int64_t nb = 0, negs = 0;
    for (int64_t a = lo; a < hi; a++) seen[d->col[a]] = d->val[a];
    const double here = lac_mf_part_share(d, s->call.neg_cum, part, me, s->part_w, u, &nb);
    const int bpr = s->call.loss == LAC_MF_LOSS_BPR, share = s->call.share > 1 ? s->call.share : 1;
    if (!bpr && ni > n && s->part_size > nb) {
        double want = (double)s->call.negatives * (double)n * here / share;
        double u01 = (double)(lac_mix64(pseed + 0x632BE59BD9B4E019ull) >> 11) * (1.0 / 9007199254740992.0);
        negs = (int64_t)want + (u01 < want - floor(want));
    }
    int64_t x = 0;   /* the positive's place among the part's */
    for (int64_t a = lo; a < hi; a++) {
        int32_t j = d->col[a];
        if (part[j] != me) continue;
        float weight = d->val[a];
        if (bpr) {
            loss += step_pair(c, &w, u, j, draw_in_part(s, pseed, j, seen), weight, seen);
            continue;
        }
        loss += step_one(c, &w, u, j, 1, weight, seen);
        for (int64_t g = x; g < negs; g += nb)
            loss += step_one(c, &w, u, draw_in_part(s, pseed, g, seen), 0, (float)share, seen);
        x++;
    }
    for (int64_t g = 0; nb == 0 && g < negs; g++)   /* none here to follow */
        loss += step_one(c, &w, u, draw_in_part(s, pseed, g, seen), 0, (float)share, seen);
    for (int64_t a = lo; a < hi; a++) seen[d->col[a]] = NAN;
    return loss;
}

static int cmp_pair(const void *a, const void *b)
{
    const int32_t *x = (const int32_t *)a, *y = (const int32_t *)b;
    return (x[0] > y[0]) - (x[0] < y[0]);
}

/* The part's items and the users with interactions (in row order). */
static lac_status part_begin(lac_ctx_t ctx, lac_mf_state *s)
{
    const lac_mf_data *d = s->call.data;
    for (int pass = 0; pass < 2; pass++) {
        s->part_size = s->part_user_count = 0;
        for (int64_t j = 0; j < d->num_items; j++)
            if (s->call.item_part[j] == s->call.part) {
                if (pass) s->part_items[s->part_size] = (int32_t)j;
                s->part_size++;
            }
        for (int64_t r = 0; r < d->num_users; r++) {
            int32_t u = d->row_order[r];
            if (d->row_start[u + 1] == d->row_start[u]) continue;
            if (pass) s->part_users[s->part_user_count] = u;
            s->part_user_count++;
        }
        if (pass) break;
        s->part_items = lac_malloc(ctx, (size_t)(s->part_size ? s->part_size : 1) * sizeof *s->part_items);
        s->part_users = lac_malloc(ctx, (size_t)(s->part_user_count ? s->part_user_count : 1) * sizeof *s->part_users);
        if (!s->part_items || !s->part_users) return LAC_ERR_OUT_OF_MEMORY;
    }
    s->part_w = 0.0;
    for (int64_t x = 0; x < s->part_size; x++) s->part_w += lac_mf_item_weight(s->call.neg_cum, s->part_items[x]);
    if (!s->call.neg_cum) return LAC_SUCCESS;
    s->part_cum = lac_malloc(ctx, (size_t)lac_mf_cum_words(s->part_size) * sizeof *s->part_cum);
    if (!s->part_cum) return LAC_ERR_OUT_OF_MEMORY;
    lac_mf_cum_of_items(s->part_cum, s->call.neg_cum, s->part_items, s->part_size);
    return LAC_SUCCESS;
}

lac_status lac_mf_cpu_implicit_begin(lac_ctx_t ctx, lac_mf_state *s)
{
    const lac_mf_data *d = s->call.data;
    if (s->call.item_part) return part_begin(ctx, s);
    if (s->call.share <= 1) return LAC_SUCCESS;
    int64_t longest = 0;
    for (int64_t u = 0; u < d->num_users; u++)
        if (d->row_start[u + 1] - d->row_start[u] > longest) longest = d->row_start[u + 1] - d->row_start[u];
    s->rank = lac_malloc(ctx, (size_t)(d->nnz ? d->nnz : 1) * sizeof *s->rank);
    int32_t *pairs = lac_malloc(ctx, (size_t)(longest ? longest : 1) * 2 * sizeof *pairs);
    if (!s->rank || !pairs) {
        free(pairs);
        return LAC_ERR_OUT_OF_MEMORY;
    }
    for (int64_t u = 0; u < d->num_users; u++) {   /* (item, position) sorted by item */
        int64_t lo = d->row_start[u], n = d->row_start[u + 1] - lo;
        for (int64_t x = 0; x < n; x++) pairs[2 * x] = d->col[lo + x], pairs[2 * x + 1] = (int32_t)x;
        qsort(pairs, (size_t)n, 2 * sizeof *pairs, cmp_pair);
        for (int64_t x = 0; x < n; x++) s->rank[lo + pairs[2 * x + 1]] = (int32_t)x;
    }
    free(pairs);
    return LAC_SUCCESS;
}

lac_status lac_mf_cpu_implicit_epoch(lac_ctx_t ctx, lac_mf_state *s, float lr, int epoch, int slice, int slices,
                                     double *loss_sum)
{
    const lac_mf_factors *m = &s->call.factors;
    const lac_mf_data *d = s->call.data;
    lac_mf_step_consts c;
    c.m = m;
    c.bhat_epoch = s->bhat_epoch;
    c.use_bias = s->call.use_bias;
    c.lr = lr;
    c.shrink = 1.0f - lr * (float)s->call.lambda;
    c.shrink_b = 1.0f - lr * (float)s->call.lambda_bias;
    const double *rates = &s->call.rates.b, *lambdas = &s->call.lambdas.b;
    for (int g = 0; g < 6; g++) {
        c.g[g] = (float)(rates[g] * lr);
        c.l[g] = (float)lambdas[g];
    }
    if (m->nbr_k > LAC_MF_NBR_MAX_K) return lac_error(ctx, LAC_ERR_ARGUMENT, "implicit training takes K <= %d", LAC_MF_NBR_MAX_K);
    /* the users of this call: all, or a slice of the part's */
    const int32_t *users = s->call.item_part ? s->part_users : d->row_order;
    int64_t all = s->call.item_part ? s->part_user_count : d->num_users;
    int64_t first = all * slice / slices, nu = all * (slice + 1) / slices - first;
    int64_t chunks = (nu + LAC_MF_HOGWILD_CHUNK - 1) / LAC_MF_HOGWILD_CHUNK;
    double *part = s->chunk_sse;
    int threads = s->call.deterministic ? 1 : s->threads;   /* one thread: the draws and steps in user order */
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
    for (int64_t ch = 0; ch < chunks; ch++) {
        float *seen = s->seen + (int64_t)omp_get_thread_num() * m->num_items;
        double sum = 0.0;
        for (int64_t u = ch * LAC_MF_HOGWILD_CHUNK; u < nu && u < (ch + 1) * LAC_MF_HOGWILD_CHUNK; u++)
            sum += s->call.item_part ? user_part_epoch(s, &c, users[first + u], seen, epoch)
                                     : user_epoch(s, &c, users[first + u], seen, epoch);
        part[ch] = sum;
    }
    double sum = 0.0;
    for (int64_t ch = 0; ch < chunks; ch++) sum += part[ch];
    *loss_sum = sum;
    return LAC_SUCCESS;
}
