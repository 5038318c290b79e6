/* CPU backend of mf: the epochs of SGD with update rule (5), ratings grouped
 * by user (users by count, as CUSGD++ orders rows): u_i and b_i stay in cache
 * and registers across a user's ratings while the v_j stream by. The layout
 * and the choice of schedule are in backend_cpu.c:
 *  - Hogwild (default): a user's ratings stay together, which converges in
 *    fewer epochs than cutting them into blocks; a rare simultaneous update of
 *    one v_j loses one of the two.
 *  - deterministic: a stratum is B blocks that share no user and no item and
 *    runs in parallel, with a barrier between strata. The model then depends
 *    only on the seed and B = 2 x threads; the price is the barriers' idle time.
 *    In the first epochs (lac_mf_rounds_at) the strata are passed in rounds,
 *    each over one slice of every block's users (lac_mf_rounds), so that a
 *    user's B pieces are trained close together: whole blocks from the start
 *    (the pieces an epoch/B apart) converged 1-2.4% worse at 40 epochs on
 *    generated data. */
#include "mf/cpu/mf_cpu.h"
#include "mf/schedule.h"

#include <omp.h>
#include <stdint.h>
#include <string.h>

/* Four floats: GCC/Clang vector extensions give SSE (or NEON) code under a
 * plain -O3, with the reduction tree written out here. */
typedef float v4f __attribute__((vector_size(16), aligned(16)));

#ifndef PREFETCH_AHEAD
#define PREFETCH_AHEAD 4   /* ratings ahead: hides the L2/L3 latency of v_j rows */
#endif

typedef struct {
    float *Q, *item_bias;
    float mean, lr, shrink, shrink_b;
    int use_bias;
} sgd_consts;

/* Update rule (5) for one rating r of item j by the user whose row is pv and
 * bias *bu. S is the row stride in floats (a multiple of 16), a constant at
 * every call so that the loops unroll. The dot product keeps four vector
 * partial sums (a short add chain); the update is written as
 *   u_i <- (1 - gamma lambda) u_i + gamma e v_j,  v_j <- (1 - gamma lambda) v_j + gamma e u_i
 * (eq. 5 with the terms gathered): two multiplies and an add per element.
 * Returns e^2. */
static inline __attribute__((always_inline)) float sgd_rating(v4f *restrict pv, float *restrict bu, int32_t j,
                                                              float r, int S, const sgd_consts *c)
{
    const int nv = S / 4;
    v4f *restrict qv = (v4f *)__builtin_assume_aligned(c->Q + (int64_t)j * S, 64);
    v4f a0 = pv[0] * qv[0], a1 = pv[1] * qv[1], a2 = pv[2] * qv[2], a3 = pv[3] * qv[3];
    for (int f = 4; f < nv; f += 4) {
        a0 += pv[f] * qv[f];
        a1 += pv[f + 1] * qv[f + 1];
        a2 += pv[f + 2] * qv[f + 2];
        a3 += pv[f + 3] * qv[f + 3];
    }
    v4f acc = (a0 + a1) + (a2 + a3);
    float dot = (acc[0] + acc[1]) + (acc[2] + acc[3]);
    float e = r - (c->mean + *bu + c->item_bias[j] + dot);
    float step = c->lr * e;
    if (c->use_bias) {
        *bu = c->shrink_b * *bu + step;
        c->item_bias[j] = c->shrink_b * c->item_bias[j] + step;
    }
    const float shrink = c->shrink;
    for (int f = 0; f < nv; f++) {
        v4f pf = pv[f], qf = qv[f];
        pv[f] = shrink * pf + step * qf;
        qv[f] = shrink * qf + step * pf;
    }
    return e * e;
}

static inline __attribute__((always_inline)) void prefetch_row(const float *Q, int32_t j, int S)
{
    const char *row = (const char *)(Q + (int64_t)j * S);
    for (int off = 0; off < S * 4; off += 64) __builtin_prefetch(row + off, 1, 3);
}

#ifndef SGD_LANES
#define SGD_LANES 2
#endif

/* A block's segments SGD_LANES at a time, their ratings interleaved (the
 * a-th rating of each user in turn, then the longer users' tails in the same
 * turn order). Each user's ratings are a dependency chain through u_i (the row
 * changes after every rating); independent chains side by side keep the core
 * busy while one waits. The order is fixed, so the result is deterministic. */
static inline __attribute__((always_inline)) double sgd_segments(const lac_mf_state *s, int64_t seg_lo,
                                                                 int64_t seg_hi, int S, const sgd_consts *c)
{
    const lac_mf_factors *m = &s->call.factors;
    double sse = 0.0;
    for (int64_t sg = seg_lo; sg < seg_hi; sg += SGD_LANES) {
        v4f *pv[SGD_LANES];
        float bias[SGD_LANES];
        const int32_t *items[SGD_LANES];
        const float *ratings[SGD_LANES];
        int64_t len[SGD_LANES], shortest = INT64_MAX, longest = 0;
        for (int w = 0; w < SGD_LANES; w++) {
            int64_t g = sg + w < seg_hi ? sg + w : sg;   /* a missing lane repeats lane 0, empty */
            int64_t u = s->seg_user[g], lo = s->seg_start[g];
            pv[w] = (v4f *)(m->P + u * S);
            bias[w] = m->user_bias[u];
            items[w] = s->item + lo;
            ratings[w] = s->val + lo;
            len[w] = g == sg + w ? s->seg_start[g + 1] - lo : 0;
            shortest = len[w] < shortest ? len[w] : shortest;
            longest = len[w] > longest ? len[w] : longest;
        }
        for (int64_t a = 0; a < shortest; a++) {
            if (a + PREFETCH_AHEAD < shortest)
                for (int w = 0; w < SGD_LANES; w++) prefetch_row(c->Q, items[w][a + PREFETCH_AHEAD], S);
            for (int w = 0; w < SGD_LANES; w++) sse += sgd_rating(pv[w], &bias[w], items[w][a], ratings[w][a], S, c);
        }
        for (int64_t a = shortest; a < longest; a++)
            for (int w = 0; w < SGD_LANES; w++) {
                if (a >= len[w]) continue;
                if (a + PREFETCH_AHEAD < len[w]) prefetch_row(c->Q, items[w][a + PREFETCH_AHEAD], S);
                sse += sgd_rating(pv[w], &bias[w], items[w][a], ratings[w][a], S, c);
            }
        for (int w = 0; w < SGD_LANES; w++)
            if (sg + w < seg_hi) m->user_bias[s->seg_user[sg + w]] = bias[w];
    }
    return sse;
}

/* Segments [seg_lo, seg_hi) with the learning rate lr. */
static double sgd_range(const lac_mf_state *s, int64_t seg_lo, int64_t seg_hi, float lr)
{
    const lac_mf_factors *m = &s->call.factors;
    sgd_consts c = {m->Q,
                    m->item_bias,
                    (float)m->mean,
                    lr,
                    1.0f - lr * (float)s->call.lambda,
                    1.0f - lr * (float)s->call.lambda_bias,
                    s->call.use_bias};
    switch (m->stride) {
    case 16: return sgd_segments(s, seg_lo, seg_hi, 16, &c);
    case 32: return sgd_segments(s, seg_lo, seg_hi, 32, &c);
    case 64: return sgd_segments(s, seg_lo, seg_hi, 64, &c);
    case 128: return sgd_segments(s, seg_lo, seg_hi, 128, &c);
    default: return sgd_segments(s, seg_lo, seg_hi, m->stride, &c);
    }
}

/* The model's kernel for segments [lo, hi) on thread t. */
static double run_range(const lac_mf_state *s, int64_t lo, int64_t hi, float lr)
{
    if (!s->call.factors.nbr_k) return sgd_range(s, lo, hi, lr);
    return lac_mf_cpu_nbr_range(s, lo, hi, lr, s->seen + (int64_t)omp_get_thread_num() * s->call.factors.num_items);
}

lac_status lac_mf_cpu_epoch(lac_ctx_t ctx, lac_mf_state *s, float lr, int epoch, double *train_sse)
{
    int B = s->blocks, R = lac_mf_rounds_at(s->rounds, epoch), r_lo = 0, r_hi = R;
    if (s->call.item_part) {   /* one slice a call (the caller's rounds) */
        r_lo = s->next_round;
        r_hi = r_lo + 1;
        s->next_round = r_hi % R;
    }
    if (s->call.factors.nbr_k && r_lo == 0)   /* the residuals' baselines for this epoch */
        memcpy(s->bhat_epoch, s->call.factors.item_bias, (size_t)s->call.factors.num_items * sizeof(float));
    if (s->call.implicit) return lac_mf_cpu_implicit_epoch(ctx, s, lr, epoch, r_lo, s->call.item_part ? R : 1, train_sse);
    lac_mf_stratum_order(s->call.seed, epoch, B, s->stratum_order);
    int64_t steps = (int64_t)B * B;
    if (s->call.deterministic) {
        /* a barrier after each stratum: blocks of one stratum are disjoint,
         * so the result does not depend on which thread ran which block */
#pragma omp parallel num_threads(s->threads)
        for (int r = r_lo; r < r_hi; r++)
            for (int st = 0; st < B; st++) {
#pragma omp for schedule(dynamic, 1)
                for (int rb = 0; rb < B; rb++) {
                    int64_t b = (int64_t)rb * B + (rb + s->stratum_order[st]) % B, n = s->block_seg[b + 1] - s->block_seg[b];
                    double x = run_range(s, s->block_seg[b] + n * r / R, s->block_seg[b] + n * (r + 1) / R, lr);
                    s->block_sse[b] = r == r_lo ? x : s->block_sse[b] + x;
                }
            }
    } else {
        /* one block: threads take users in count order, a chunk at a time
         * (CUSGD++ on the CPU); v_j is shared without locks */
        int64_t n = s->block_seg[1], first = n * r_lo / R, segs = n * r_hi / R - first;
        int64_t chunks = (segs + LAC_MF_HOGWILD_CHUNK - 1) / LAC_MF_HOGWILD_CHUNK;
        double *part = s->chunk_sse;
#pragma omp parallel for num_threads(s->threads) schedule(dynamic, 1)
        for (int64_t ch = 0; ch < chunks; ch++) {
            int64_t lo = ch * LAC_MF_HOGWILD_CHUNK, hi = lo + LAC_MF_HOGWILD_CHUNK < segs ? lo + LAC_MF_HOGWILD_CHUNK : segs;
            part[ch] = run_range(s, first + lo, first + hi, lr);
        }
        s->block_sse[0] = 0.0;
        for (int64_t ch = 0; ch < chunks; ch++) s->block_sse[0] += part[ch];
    }
    double sse = 0.0;
    for (int64_t b = 0; b < steps; b++) sse += s->block_sse[b];
    *train_sse = sse;
    (void)ctx;
    return LAC_SUCCESS;
}
