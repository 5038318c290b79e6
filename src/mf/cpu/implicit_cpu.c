/* CPU backend of mf: an epoch of implicit-feedback training (the paper's
 * section 5: eq. (1), or the plain rule, as a logit trained by rule (5) with
 * the gradient of a ranking loss as its error e):
 *   cross-entropy: each interaction (i, j) with weight c is a positive,
 *     e = c (1 - sigmoid(r_hat)); `negatives` items i has not seen, drawn
 *     uniformly, are negatives, e = -sigmoid(r_hat) (with shared
 *     negatives, call.share: a chunk's negatives, weighted by its size);
 *   BPR: one unseen j' per interaction, x = r_hat(i, j) - r_hat(i, j'),
 *     e = c sigmoid(-x) at (i, j) and -c sigmoid(-x) at (i, j') (both
 *     predictions made before either step).
 * Threads take whole users (Hogwild over items, as the explicit schedule);
 * the draws are counter-based (seed, epoch, user, item: mf_backend.h),
 * the CUDA backend's too, so one thread is reproducible. The user's
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
static int32_t draw_negative(uint64_t user_seed, int32_t j, int t, int64_t ni, const float *seen)
{
    int32_t n = 0;
    for (int r = 0; r < LAC_MF_DRAWS; r++) {
        n = lac_mf_draw_item(user_seed, j, t, r, ni);
        if (seen[n] != seen[n]) break;
    }
    return n;
}

/* One user's interactions. */
static double user_epoch(const lac_mf_state *s, const lac_mf_step_consts *c, int64_t u, float *seen, int epoch)
{
    const lac_mf_data *d = s->call.data;
    const int64_t ni = c->m->num_items;
    float resid[2][LAC_MF_NBR_MAX_K], rr[2] = {0, 0}, rc[2] = {0, 0};
    uint64_t useed = lac_mf_draw_seed(s->call.seed, epoch, u);
    double loss = 0.0;
    for (int64_t a = d->row_start[u]; a < d->row_start[u + 1]; a++) seen[d->col[a]] = d->val[a];
    for (int64_t a = d->row_start[u]; a < d->row_start[u + 1]; a++) {
        int32_t j = d->col[a];
        float weight = d->val[a];
        if (s->call.loss == LAC_MF_LOSS_BPR) {
            int32_t n = draw_negative(useed, j, 0, ni, seen);
            float x = lac_mf_step_predict(c, u, j, seen, resid[0], &rr[0], &rc[0]) - lac_mf_step_predict(c, u, n, seen, resid[1], &rr[1], &rc[1]);
            float e = weight * sigmoid(-x);
            loss += weight * log_loss(x);
            lac_mf_step(c, u, j, e, resid[0], rr[0], rc[0]);
            lac_mf_step(c, u, n, -e, resid[1], rr[1], rc[1]);
            continue;
        }
        float x = lac_mf_step_predict(c, u, j, seen, resid[0], &rr[0], &rc[0]);
        loss += weight * log_loss(x);
        lac_mf_step(c, u, j, weight * (1.0f - sigmoid(x)), resid[0], rr[0], rc[0]);
        int t, size;
        int32_t key;
        int cnt = lac_mf_share(s->rank ? s->rank[a] : 0, d->row_start[u + 1] - d->row_start[u], s->call.share,
                               s->call.negatives, j, &t, &size, &key);
        for (; cnt > 0; cnt--, t += size) {
            int32_t n = draw_negative(useed, key, t, ni, seen);
            x = lac_mf_step_predict(c, u, n, seen, resid[1], &rr[1], &rc[1]);
            loss += size * log_loss(-x);
            lac_mf_step(c, u, n, -size * sigmoid(x), resid[1], rr[1], rc[1]);
        }
    }
    for (int64_t a = d->row_start[u]; a < d->row_start[u + 1]; a++) seen[d->col[a]] = NAN;
    return loss;
}

static int cmp_pair(const void *a, const void *b)
{
    const int32_t *x = (const int32_t *)a, *y = (const int32_t *)b;
    return (x[0] > y[0]) - (x[0] < y[0]);
}

lac_status lac_mf_cpu_implicit_begin(lac_ctx_t ctx, lac_mf_state *s)
{
    const lac_mf_data *d = s->call.data;
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

lac_status lac_mf_cpu_implicit_epoch(lac_ctx_t ctx, lac_mf_state *s, float lr, int epoch, double *loss_sum)
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
    int64_t nu = d->num_users, chunks = (nu + LAC_MF_HOGWILD_CHUNK - 1) / LAC_MF_HOGWILD_CHUNK;
    double *part = s->chunk_sse;
    int threads = s->call.deterministic ? 1 : s->threads;   /* one thread: the draws and steps in user order */
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
    for (int64_t ch = 0; ch < chunks; ch++) {
        float *seen = s->seen + (int64_t)omp_get_thread_num() * m->num_items;
        double sum = 0.0;
        for (int64_t u = ch * LAC_MF_HOGWILD_CHUNK; u < nu && u < (ch + 1) * LAC_MF_HOGWILD_CHUNK; u++)
            sum += user_epoch(s, &c, d->row_order[u], seen, epoch);
        part[ch] = sum;
    }
    double sum = 0.0;
    for (int64_t ch = 0; ch < chunks; ch++) sum += part[ch];
    *loss_sum = sum;
    return LAC_SUCCESS;
}
