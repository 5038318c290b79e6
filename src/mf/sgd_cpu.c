/* CPU backend of mf: SGD with update rule (5), ratings grouped by user (users
 * by count, as CUSGD++ orders rows): u_i and b_i stay in cache and registers
 * across a user's ratings while the v_j stream by. Two schedules:
 *  - Hogwild (default): threads take whole users, a chunk at a time, and share
 *    V without locks, as the CUSGD++ warps do. A user's ratings stay together,
 *    which converges in fewer epochs than cutting them into blocks; a rare
 *    simultaneous update of one v_j loses one of the two.
 *  - deterministic: a B x B grid of blocks (users x items), LIBMF/DSGD style;
 *    a stratum is B blocks that share no user and no item and runs in
 *    parallel, with a barrier between strata. The model then depends only on
 *    the seed and B = 2 x threads; the price is the barriers' idle time and,
 *    measured on generated data, slower convergence per epoch (each user's
 *    ratings are cut into B pieces visited at different times). */
#include "mf/mf_internal.h"
#include "core/random.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

#define HOGWILD_CHUNK 64   /* users a thread takes at a time (Hogwild schedule) */

struct lac_mf_cpu_state {
    lac_mf_model_t model;
    int blocks;               /* B */
    int threads;
    int64_t *block_seg;       /* B*B + 1: segments of block b */
    int32_t *seg_user;        /* per segment: its user */
    int64_t *seg_start;       /* segments + 1: ratings of segment s */
    int32_t *item;            /* ratings in block order */
    float *val;
    double *block_sse;        /* per block, summed in a fixed order */
    double *chunk_sse;        /* per chunk of users (Hogwild schedule) */
    int *stratum_shift;       /* this epoch's stratum order */
    uint64_t seed;
};

void lac_mf_cpu_end(lac_mf_cpu_state *s)
{
    if (!s) return;
    free(s->block_seg);
    free(s->seg_user);
    free(s->seg_start);
    free(s->item);
    free(s->val);
    free(s->block_sse);
    free(s->chunk_sse);
    free(s->stratum_shift);
    free(s);
}

lac_status lac_mf_cpu_begin(lac_ctx_t ctx, const lac_mf_data *d, lac_mf_model_t model, lac_mf_cpu_state **out)
{
    lac_mf_cpu_state *s = lac_calloc(ctx, 1, sizeof *s);
    if (!s) return LAC_ERR_OUT_OF_MEMORY;
    s->model = model;
    s->threads = lac_threads(ctx);
    /* 2 blocks per thread and side balance the strata; one thread needs none */
    /* Deterministic: B = 2 blocks per thread and side balance the strata.
     * Otherwise one block: users whole, shared by the threads (Hogwild). */
    s->blocks = (s->threads == 1 || !model->params.deterministic) ? 1 : 2 * s->threads;
    s->seed = model->params.seed;
    int B = s->blocks;
    int64_t nb = (int64_t)B * B, nu = d->num_users, ni = d->num_items;
    lac_status st = LAC_SUCCESS;
    int32_t *row_block = lac_malloc(ctx, (size_t)(nu ? nu : 1) * sizeof *row_block);
    int32_t *col_block = lac_malloc(ctx, (size_t)(ni ? ni : 1) * sizeof *col_block);
    int64_t *item_count = lac_calloc(ctx, (size_t)ni + 1, sizeof *item_count);
    int32_t *item_rank = lac_malloc(ctx, (size_t)(ni ? ni : 1) * sizeof *item_rank);
    int64_t *cnt = lac_calloc(ctx, (size_t)nb, sizeof *cnt);
    int64_t *segs = lac_calloc(ctx, (size_t)nb, sizeof *segs);
    int64_t *row_cnt = lac_malloc(ctx, (size_t)B * sizeof *row_cnt);
    int64_t *write_at = lac_malloc(ctx, (size_t)B * sizeof *write_at);
    s->block_seg = lac_calloc(ctx, (size_t)nb + 1, sizeof *s->block_seg);
    s->block_sse = lac_calloc(ctx, (size_t)nb, sizeof *s->block_sse);
    s->stratum_shift = lac_malloc(ctx, (size_t)B * sizeof *s->stratum_shift);
    s->item = lac_malloc(ctx, (size_t)(d->nnz ? d->nnz : 1) * sizeof *s->item);
    s->val = lac_malloc(ctx, (size_t)(d->nnz ? d->nnz : 1) * sizeof *s->val);
    if (!row_block || !col_block || !item_count || !item_rank || !cnt || !segs || !row_cnt || !write_at || !s->block_seg ||
        !s->block_sse || !s->stratum_shift || !s->item || !s->val) {
        st = LAC_ERR_OUT_OF_MEMORY;
        goto done;
    }
    /* Rows dealt round-robin in count order, items likewise: blocks get about
     * the same number of ratings. */
    for (int64_t r = 0; r < nu; r++) row_block[d->row_order[r]] = (int32_t)(r % B);
    for (int64_t a = 0; a < d->nnz; a++) item_count[d->col[a]]++;
    for (int64_t j = 0; j < ni; j++) item_rank[j] = (int32_t)j;
    {   /* items by count, most first: a counting sort */
        int64_t maxc = 0;
        for (int64_t j = 0; j < ni; j++) maxc = item_count[j] > maxc ? item_count[j] : maxc;
        int64_t *bucket = lac_calloc(ctx, (size_t)maxc + 2, sizeof *bucket);
        if (!bucket) {
            st = LAC_ERR_OUT_OF_MEMORY;
            goto done;
        }
        for (int64_t j = 0; j < ni; j++) bucket[maxc - item_count[j] + 1]++;
        for (int64_t c = 1; c <= maxc + 1; c++) bucket[c] += bucket[c - 1];
        for (int64_t j = 0; j < ni; j++) item_rank[bucket[maxc - item_count[j]]++] = (int32_t)j;
        free(bucket);
    }
    for (int64_t r = 0; r < ni; r++) col_block[item_rank[r]] = (int32_t)(r % B);

    /* counting pass: ratings and user segments per block */
    for (int64_t r = 0; r < nu; r++) {
        int32_t u = d->row_order[r];
        int64_t base = (int64_t)row_block[u] * B;
        for (int c = 0; c < B; c++) row_cnt[c] = 0;
        for (int64_t a = d->row_start[u]; a < d->row_start[u + 1]; a++) row_cnt[col_block[d->col[a]]]++;
        for (int c = 0; c < B; c++)
            if (row_cnt[c]) {
                cnt[base + c] += row_cnt[c];
                segs[base + c]++;
            }
    }
    int64_t total_segs = 0;
    for (int64_t b = 0; b < nb; b++) {
        s->block_seg[b] = total_segs;
        total_segs += segs[b];
    }
    s->block_seg[nb] = total_segs;
    s->seg_user = lac_malloc(ctx, (size_t)(total_segs ? total_segs : 1) * sizeof *s->seg_user);
    s->seg_start = lac_malloc(ctx, ((size_t)total_segs + 1) * sizeof *s->seg_start);
    if (!s->seg_user || !s->seg_start) {
        st = LAC_ERR_OUT_OF_MEMORY;
        goto done;
    }
    {   /* fill pass: block b's ratings start at the sum of the earlier blocks' */
        int64_t *next_rating = cnt, *next_seg = segs, acc = 0;
        for (int64_t b = 0; b < nb; b++) {
            int64_t c = cnt[b];
            next_rating[b] = acc;
            acc += c;
            next_seg[b] = s->block_seg[b];
        }
        for (int64_t r = 0; r < nu; r++) {
            int32_t u = d->row_order[r];
            int64_t base = (int64_t)row_block[u] * B;
            for (int c = 0; c < B; c++) row_cnt[c] = 0;
            for (int64_t a = d->row_start[u]; a < d->row_start[u + 1]; a++) row_cnt[col_block[d->col[a]]]++;
            for (int c = 0; c < B; c++)
                if (row_cnt[c]) {
                    int64_t sg = next_seg[base + c]++;
                    s->seg_user[sg] = u;
                    s->seg_start[sg] = next_rating[base + c];
                    write_at[c] = next_rating[base + c];
                    next_rating[base + c] += row_cnt[c];
                }
            for (int64_t a = d->row_start[u]; a < d->row_start[u + 1]; a++) {
                int32_t j = d->col[a];
                int64_t at = write_at[col_block[j]]++;
                s->item[at] = j;
                s->val[at] = d->val[a];
            }
        }
        s->seg_start[total_segs] = d->nnz;
    }
    s->chunk_sse = lac_calloc(ctx, (size_t)(total_segs / HOGWILD_CHUNK + 1), sizeof *s->chunk_sse);
    if (!s->chunk_sse) {
        st = LAC_ERR_OUT_OF_MEMORY;
        goto done;
    }
done:
    free(row_block);
    free(col_block);
    free(item_count);
    free(item_rank);
    free(cnt);
    free(segs);
    free(row_cnt);
    free(write_at);
    if (st < 0) {
        lac_mf_cpu_end(s);
        return st;
    }
    *out = s;
    return LAC_SUCCESS;
}

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
static inline __attribute__((always_inline)) double sgd_segments(const lac_mf_cpu_state *s, int64_t seg_lo,
                                                                 int64_t seg_hi, int S, const sgd_consts *c)
{
    lac_mf_model_t m = s->model;
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
static double sgd_range(const lac_mf_cpu_state *s, int64_t seg_lo, int64_t seg_hi, float lr)
{
    lac_mf_model_t m = s->model;
    sgd_consts c = {m->Q,
                    m->item_bias,
                    (float)m->mean,
                    lr,
                    1.0f - lr * (float)m->params.lambda,
                    1.0f - lr * (float)m->params.lambda_bias,
                    m->params.use_bias};
    switch (m->stride) {
    case 16: return sgd_segments(s, seg_lo, seg_hi, 16, &c);
    case 32: return sgd_segments(s, seg_lo, seg_hi, 32, &c);
    case 64: return sgd_segments(s, seg_lo, seg_hi, 64, &c);
    case 128: return sgd_segments(s, seg_lo, seg_hi, 128, &c);
    default: return sgd_segments(s, seg_lo, seg_hi, m->stride, &c);
    }
}

lac_status lac_mf_cpu_epoch(lac_ctx_t ctx, lac_mf_cpu_state *s, float lr, int epoch, double *train_sse)
{
    int B = s->blocks;
    /* this epoch's stratum order: a seeded shuffle, the same for any run */
    uint64_t rng = s->seed * 0x9e3779b97f4a7c15ull + (uint64_t)epoch + 1;
    for (int i = 0; i < B; i++) s->stratum_shift[i] = i;
    for (int i = B - 1; i > 0; i--) {
        int r = (int)(lac_splitmix64(&rng) % (uint64_t)(i + 1));
        int t = s->stratum_shift[i];
        s->stratum_shift[i] = s->stratum_shift[r];
        s->stratum_shift[r] = t;
    }
    int64_t steps = (int64_t)B * B;
    if (s->model->params.deterministic) {
        /* a barrier after each stratum: blocks of one stratum are disjoint,
         * so the result does not depend on which thread ran which block */
#pragma omp parallel num_threads(s->threads)
        for (int st = 0; st < B; st++) {
#pragma omp for schedule(dynamic, 1)
            for (int rb = 0; rb < B; rb++) {
                int64_t b = (int64_t)rb * B + (rb + s->stratum_shift[st]) % B;
                s->block_sse[b] = sgd_range(s, s->block_seg[b], s->block_seg[b + 1], lr);
            }
        }
    } else {
        /* one block: threads take users in count order, a chunk at a time
         * (CUSGD++ on the CPU); v_j is shared without locks */
        int64_t segs = s->block_seg[1], chunks = (segs + HOGWILD_CHUNK - 1) / HOGWILD_CHUNK;
        double *part = s->chunk_sse;
#pragma omp parallel for num_threads(s->threads) schedule(dynamic, 1)
        for (int64_t ch = 0; ch < chunks; ch++) {
            int64_t lo = ch * HOGWILD_CHUNK, hi = lo + HOGWILD_CHUNK < segs ? lo + HOGWILD_CHUNK : segs;
            part[ch] = sgd_range(s, lo, hi, lr);
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
