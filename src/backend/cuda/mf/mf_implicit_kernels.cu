/* Kernels of implicit feedback on CUDA (mf_implicit_cuda.h): the draws and
 * the epoch, and their launch.
 *
 * The draws: a thread per (cell, negative), each candidate tested against
 * the user's items by a binary search; all of them independent, so their
 * latency overlaps (in the epoch each would sit on a group's chain of steps;
 * measured: drawn inside the epoch, from a bitmap of the run's user's items
 * in shared memory, the epoch was 10% slower at k = 32 and 13% at k = 128).
 *
 * The epoch walks CUSGD++'s streams as cusgd_epoch does (mf_sgd_kernels.cu):
 * G lanes a user run, u_i in registers, v_j and bhat_j in global memory
 * through L2. At a cell of item row j with weight c, it scores j and up to
 * NB negatives with the same u_i (their rows loaded together, so their
 * latency overlaps), takes each one's error of the loss (cross-entropy:
 * c (1 - sigmoid) at j, -sigmoid at a negative; BPR: c sigmoid(-x) and its
 * negative, x = r_hat_j - r_hat_j'), steps every v_j with that u_i by rule
 * (5), and u_i (b_i) once by the steps' sum, shrunk once per step. The CPU
 * steps u_i after each; at these learning rates the difference is within
 * the tests' tolerance of the ranking figures. The cell's (item, weight,
 * negatives) are loaded a step ahead. The loss sums go to base.sse. */
#include "backend/cuda/mf/mf_implicit_cuda.h"

#include <math.h>

/* The first candidate for negative t (key: the item, or the chunk of
 * shared ones) that the user has not seen (items: theirs, ascending), or
 * the last: lac_mf_draw_negative's rule (cum: the items' weights, NULL:
 * uniform). */
static __device__ __forceinline__ int32_t draw_unseen(const uint64_t *cum, uint64_t seed, int32_t key, int t,
                                                      const int32_t *items, int len, int64_t num_items)
{
    int32_t n = 0;
    for (int r = 0; r < LAC_MF_DRAWS; r++) {
        n = lac_mf_draw_negative(cum, seed, key, t, r, num_items);
        if (find_item(items, len, n) < 0) break;
    }
    return n;
}

/* Item n's row for the cell's group: a popular item's replica, as for its ratings. */
static __device__ __forceinline__ int32_t replica_row(const lac_mf_cuda_draw_args &a, int32_t n, int64_t cell)
{
    const int64_t group = cell / a.steps;
    const int32_t count = __ldg(a.rep_count + n), replica = (int32_t)(group % count);
    return replica == 0 ? n : __ldg(a.rep_first + n) + replica - 1;
}

/* A thread per (cell, negative) (SHARED: per cell, which finds its rank
 * once and writes its list: most cells take one or none, -1 after the
 * last; and its negatives' weight, times user_scale's; a cell without a
 * positive (rating < 0) takes `alone` with key -1 and t = 0, 1, ..., the
 * neighbourhood model's draws for such a user). */
template <bool SHARED>
static __global__ void draw_negatives(lac_mf_cuda_draw_args a)
{
    const int per = SHARED ? 1 : a.negatives;
    const int64_t x = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (x >= a.cells * per) return;
    const int64_t cell = x / per;
    const int32_t cd = __ldg(a.code + cell), u = __ldg(a.cell_user + cell);
    if (cd < 0 || u < 0) return;
    const int32_t j = __ldg(a.row_item + (cd & LAC_MF_ITEM_MASK));
    const int64_t s0 = __ldg(a.seen_start + u);
    const int32_t *items = a.seen_items + s0;
    const int len = (int)(__ldg(a.seen_start + u + 1) - s0);
    const uint64_t seed = lac_mf_draw_seed(a.seed, a.epoch, u);
    if (!SHARED) {
        const int t = (int)(x - cell * per);
        a.neg[x] = replica_row(a, draw_unseen(a.neg_cum, seed, j, t, items, len, a.num_items), cell);
        return;
    }
    int first = 0, size = 1, cnt;
    int32_t key = -1;
    const float scale = a.user_scale ? __ldg(a.user_scale + u) : 1.0f;
    if (a.rating && __ldg(a.rating + cell) < 0.0f) {   /* no positive here: the user's share alone */
        cnt = a.alone;
        if (a.neg_weight) a.neg_weight[cell] = scale * (float)a.negatives / (float)a.alone;
    } else {
        cnt = lac_mf_share(find_item(items, len, j), len, a.share, a.negatives, j, &first, &size, &key);
        if (a.neg_weight) a.neg_weight[cell] = (float)size * scale;
    }
    for (int b = 0; b < a.negatives; b++) {
        a.neg[cell * a.negatives + b] =
            b < cnt ? replica_row(a, draw_unseen(a.neg_cum, seed, key, first + b * size, items, len, a.num_items), cell)
                    : -1;
        if (b >= cnt) break;   /* -1 ends the cell's list */
    }
}

/* The neighbourhood model's: a thread per negative's cell, its item bits
 * written (the cell's other bits kept). */
static __global__ void draw_nbr_negatives(lac_mf_cuda_nbr_draw_args a)
{
    const int64_t x = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (x >= a.count) return;
    const int32_t u = __ldg(a.user + x), key = __ldg(a.key + x), t = __ldg(a.t + x);
    const int64_t s0 = __ldg(a.seen_start + u);
    const int32_t *items = a.seen_items + s0;
    const int len = (int)(__ldg(a.seen_start + u + 1) - s0);
    const int32_t n = draw_unseen(a.neg_cum, lac_mf_draw_seed(a.seed, a.epoch, u), key, t, items, len, a.num_items);
    int32_t *c = a.code + __ldg(a.cell + x);
    *c = (*c & ~LAC_MF_ITEM_MASK) | n;
}

lac_status lac_mf_cuda_implicit_launch_nbr_draws(lac_ctx_t ctx, const lac_mf_cuda_nbr_draw_args *a)
{
    if (a->count <= 0) return LAC_SUCCESS;
    draw_nbr_negatives<<<(unsigned)((a->count + 255) / 256), 256, 0, ctx->cuda->stream>>>(*a);
    LAC_CUDA_CHECK_LAUNCH(ctx);
    return LAC_SUCCESS;
}

/* One epoch, G lanes a user run, V float4 pieces a lane (FULL: exactly the
 * row), up to NB negatives scored together (NB <= G). LISTS (shared
 * negatives): a cell's negatives end with -1 and weigh neg_weight; without,
 * every cell has all of them with weight 1 and the loop's bounds are known
 * (measured 14-21% faster: the lists cost the unshared default). ALONE (a
 * block of the items, with lists): a cell of weight < 0 has no positive,
 * only its negatives (a user without a positive in the block); one device's
 * kernels do without the test. */
template <int G, int V, bool FULL, int NB, bool LISTS, bool ALONE = false>
static __global__ void __launch_bounds__(32 * LAC_MF_WARPS_PER_BLOCK) implicit_epoch(lac_mf_cuda_implicit_args ia)
{
    const lac_mf_cuda_epoch_args &a = ia.base;
    constexpr int GROUPS_PER_WARP = 32 / G;
    const int lane = threadIdx.x & 31, sub = lane & (G - 1), first = lane & ~(G - 1);
    const unsigned mask = G == 32 ? 0xffffffffu : ((1u << G) - 1u) << first;
    const int64_t group =
        ((int64_t)blockIdx.x * LAC_MF_WARPS_PER_BLOCK + (threadIdx.x >> 5)) * GROUPS_PER_WARP + lane / G;
    const int pieces = a.stride >> 2, negs = ia.negatives;
    const int32_t *code = a.code + group * a.steps;
    const float *weight_of = a.rating + group * a.steps;
    const int32_t *neg = ia.neg + group * a.steps * negs;
    const float4 *Q4 = (const float4 *)a.Q;
    const bool bias = a.use_bias != 0;

    float4 p[V], p0[V];
#pragma unroll
    for (int v = 0; v < V; v++) p[v] = p0[v] = make_float4(0.f, 0.f, 0.f, 0.f);
    float bu = 0.0f, bu0 = 0.0f, share = 1.0f, loss = 0.0f;
    int64_t user = -1, next_run = a.group_first_run[group];

    constexpr int NL = LISTS ? NB + 1 : NB, NONE = LISTS ? -1 : 0;
    const float *nw = LISTS && ia.neg_weight ? ia.neg_weight + group * a.steps : NULL;
    int32_t cd = a.steps > 0 ? __ldg(code) : LAC_MF_PAD;
    float w = a.steps > 0 ? __ldg(weight_of) : 0.0f, wn = (nw && cd >= 0) ? __ldg(nw) : 1.0f;
    int32_t nn[NL];   /* the cell's first NB negatives (LISTS: and whether there are more) */
#pragma unroll
    for (int b = 0; b < NL; b++) nn[b] = (cd >= 0 && b < negs) ? __ldg(neg + b) : NONE;
    for (int64_t t = 0; t < a.steps && cd >= 0; t++) {   /* padding ends a stream */
        const int32_t c_now = cd;
        const float w_now = w, wn_now = wn;
        int32_t n_now[NL];
#pragma unroll
        for (int b = 0; b < NL; b++) n_now[b] = nn[b];
        /* the next cell, a step ahead */
        cd = t + 1 < a.steps ? __ldg(code + t + 1) : LAC_MF_PAD;
        if (cd >= 0) {
            w = __ldg(weight_of + t + 1);
            if (nw) wn = __ldg(nw + t + 1);
#pragma unroll
            for (int b = 0; b < NL; b++) nn[b] = b < negs ? __ldg(neg + (t + 1) * negs + b) : NONE;
        }
        if (c_now & LAC_MF_RUN_START) {
            start_run<G, V, FULL>(a, user, share, next_run, p, p0, bu, bu0, sub, pieces);
        }
        const int32_t j = c_now & LAC_MF_ITEM_MASK;
        /* the positive with the first NB negatives, then the rest NB at a time;
         * LISTS: -1 ends the cell's negatives (shared ones: most cells have 0 or 1) */
        for (int c0 = 0, more = 1; LISTS ? more != 0 : c0 < negs; c0 += NB) {
            const bool pos = c0 == 0 && (!ALONE || w_now >= 0.0f);
            int cnt = negs - c0 < NB ? negs - c0 : NB;   /* LISTS: counted below */
            int32_t rows[NB];
            if (c0 == 0) {
#pragma unroll
                for (int b = 0; b < NB; b++) rows[b] = n_now[b];
            } else {   /* more negatives than NB: the rest from memory */
#pragma unroll
                for (int b = 0; b < NB; b++)
                    rows[b] = (LISTS ? c0 + b < negs : b < cnt) ? __ldg(neg + t * negs + c0 + b) : NONE;
            }
            if (LISTS) {   /* up to the first -1 (the entries after it are stale) */
                cnt = 0;
#pragma unroll
                for (int b = 0; b < NB; b++) cnt += (cnt == b && rows[b] >= 0) ? 1 : 0;
                more = cnt == NB && c0 + NB < negs && (c0 > 0 || n_now[NL - 1] >= 0);
#pragma unroll
                for (int b = 0; b < NB; b++) rows[b] = rows[b] >= 0 ? rows[b] : 0;
            }
            float4 qp[V], qn[NB][V];
            float bp = 0.0f, bn[NB];
            load_row<G, V, FULL>(qp, Q4 + (int64_t)j * pieces, sub, pieces, pos);
            if (pos && bias) bp = __ldcg(a.item_bias + (int64_t)j * LAC_MF_BIAS_STRIDE);
#pragma unroll
            for (int b = 0; b < NB; b++) {
                load_row<G, V, FULL>(qn[b], Q4 + (int64_t)rows[b] * pieces, sub, pieces, b < cnt);
                bn[b] = (bias && b < cnt) ? __ldcg(a.item_bias + (int64_t)rows[b] * LAC_MF_BIAS_STRIDE) : 0.0f;
            }
            float part = 0.0f, sn[NB];
#pragma unroll
            for (int v = 0; v < V; v++) part = dot4(p[v], qp[v], part);
#pragma unroll
            for (int o = G / 2; o > 0; o >>= 1) part += __shfl_xor_sync(mask, part, o);
            const float base = a.mean + bu, sp = base + bp + part;
#pragma unroll
            for (int b = 0; b < NB; b++) {
                float x = 0.0f;
#pragma unroll
                for (int v = 0; v < V; v++) x = dot4(p[v], qn[b][v], x);
#pragma unroll
                for (int o = G / 2; o > 0; o >>= 1) x += __shfl_xor_sync(mask, x, o);
                sn[b] = base + bn[b] + x;
            }
            float ep = 0.0f, en[NB];
            if (ia.bpr) {
                const float x = sp - sn[0], e = w_now * lac_mf_sigmoid(-x);
                ep = e;
                en[0] = -e;
#pragma unroll
                for (int b = 1; b < NB; b++) en[b] = 0.0f;
                if (sub == 0) loss += w_now * lac_mf_log_loss(x);
            } else {
                if (pos) {
                    ep = w_now * (1.0f - lac_mf_sigmoid(sp));
                    if (sub == 0) loss += w_now * lac_mf_log_loss(sp);
                }
#pragma unroll
                for (int b = 0; b < NB; b++) {
                    en[b] = b < cnt ? -wn_now * lac_mf_sigmoid(sn[b]) : 0.0f;
                    if (sub == 0 && b < cnt) loss += wn_now * lac_mf_log_loss(-sn[b]);
                }
            }
            /* v_j (bhat_j) with this u_i; u_i (b_i) by the steps' sum */
            float4 acc[V];
#pragma unroll
            for (int v = 0; v < V; v++) acc[v] = make_float4(0.f, 0.f, 0.f, 0.f);
            float keep = 1.0f, keep_b = 1.0f, bstep = 0.0f;
            if (pos) {
                const float step = a.lr * ep;
                float4 *qj = (float4 *)a.Q + (int64_t)j * pieces;
#pragma unroll
                for (int v = 0; v < V; v++) {
                    const int pc = sub + G * v;
                    if (FULL || pc < pieces) __stcg(qj + pc, axpby4(a.shrink, qp[v], step, p[v]));
                    acc[v] = axpby4(1.0f, acc[v], step, qp[v]);
                }
                if (bias && sub == 0) a.item_bias[(int64_t)j * LAC_MF_BIAS_STRIDE] = fmaf(a.shrink_b, bp, step);
                keep *= a.shrink;
                keep_b *= a.shrink_b;
                bstep += step;
            }
#pragma unroll
            for (int b = 0; b < NB; b++) {
                if (b >= cnt) continue;
                const float step = a.lr * en[b];
                float4 *qj = (float4 *)a.Q + (int64_t)rows[b] * pieces;
#pragma unroll
                for (int v = 0; v < V; v++) {
                    const int pc = sub + G * v;
                    if (FULL || pc < pieces) __stcg(qj + pc, axpby4(a.shrink, qn[b][v], step, p[v]));
                    acc[v] = axpby4(1.0f, acc[v], step, qn[b][v]);
                }
                if (bias && sub == 0)
                    a.item_bias[(int64_t)rows[b] * LAC_MF_BIAS_STRIDE] = fmaf(a.shrink_b, bn[b], step);
                keep *= a.shrink;
                keep_b *= a.shrink_b;
                bstep += step;
            }
#pragma unroll
            for (int v = 0; v < V; v++) p[v] = axpby4(keep, p[v], 1.0f, acc[v]);
            if (bias) bu = fmaf(keep_b, bu, bstep);
            if (ia.bpr) break;   /* one negative */
            if (LISTS && !more) break;
        }
    }
    if (user >= 0) finish_run<G, V, FULL>(a, user, share, p, p0, bu, bu0, sub);
    /* every group of the warp is here: the warp's sum */
    lac_mf_warp_add(a.sse, loss, lane);
}

template <int G, int NB, bool LISTS, bool ALONE>
static lac_mf_cuda_implicit_fn full(int v)
{
    switch (v) {
    case 1: return implicit_epoch<G, 1, true, NB, LISTS, ALONE>;
    case 2: return implicit_epoch<G, 2, true, NB, LISTS, ALONE>;
    case 3: return implicit_epoch<G, 3, true, NB, LISTS, ALONE>;
    case 4: return implicit_epoch<G, 4, true, NB, LISTS, ALONE>;
    default: return NULL;
    }
}

template <int NB, bool LISTS, bool ALONE = false>
static lac_mf_cuda_implicit_fn full_lanes(int g, int v)
{
    return g == 4    ? full<4, NB, LISTS, ALONE>(v)
           : g == 8  ? full<8, NB, LISTS, ALONE>(v)
           : g == 16 ? full<16, NB, LISTS, ALONE>(v)
                     : full<32, NB, LISTS, ALONE>(v);
}

template <bool LISTS, bool ALONE = false>
static lac_mf_cuda_implicit_fn masked(int v)
{
    switch (v) {
    case 1: return implicit_epoch<32, 1, false, 1, LISTS, ALONE>;
    case 2: return implicit_epoch<32, 2, false, 1, LISTS, ALONE>;
    case 3: return implicit_epoch<32, 3, false, 1, LISTS, ALONE>;
    case 4: return implicit_epoch<32, 4, false, 1, LISTS, ALONE>;
    case 5: return implicit_epoch<32, 5, false, 1, LISTS, ALONE>;
    case 6: return implicit_epoch<32, 6, false, 1, LISTS, ALONE>;
    case 7: return implicit_epoch<32, 7, false, 1, LISTS, ALONE>;
    case 8: return implicit_epoch<32, 8, false, 1, LISTS, ALONE>;
    default: return NULL;
    }
}

/* The explicit kernel's group shape (lac_mf_cuda_choose_kernel), up to 4
 * negatives together (one when cells mostly take one: shared negatives, BPR;
 * fewer registers); rows no group divides take a full warp with one
 * negative at a time in registers (NB = 1); rows on its general path are
 * too wide (fn NULL). lists: shared negatives' cells (LISTS); 2: and cells
 * without a positive (ALONE). */
lac_mf_cuda_implicit_kernel lac_mf_cuda_implicit_choose(int pieces, int negatives_per_cell, int lists)
{
    const lac_mf_cuda_kernel e = lac_mf_cuda_choose_kernel(pieces, 0, 1);
    const int g = e.lanes, v = pieces / g, one = negatives_per_cell <= 1;
    lac_mf_cuda_implicit_kernel k;
    k.lanes = g;
    k.groups_per_block = LAC_MF_WARPS_PER_BLOCK * (32 / g);
    k.pool = k.round_steps = k.copies = k.inbatch = 0;
    k.smem = 0;
    if (pieces > 32 * LAC_MF_MAX_PIECES) k.fn = NULL;
    else if (pieces % g == 0 && v <= 4)
        k.fn = lists == 2 ? (one ? full_lanes<1, true, true>(g, v) : full_lanes<4, true, true>(g, v))
               : one      ? (lists ? full_lanes<1, true>(g, v) : full_lanes<1, false>(g, v))
                          : (lists ? full_lanes<4, true>(g, v) : full_lanes<4, false>(g, v));
    else
        k.fn = lists == 2 ? masked<true, true>((pieces + 31) / 32)
               : lists    ? masked<true>((pieces + 31) / 32)
                          : masked<false>((pieces + 31) / 32);
    return k;
}

lac_status lac_mf_cuda_implicit_occupancy(lac_ctx_t ctx, const lac_mf_cuda_implicit_kernel *k, int *blocks_per_sm)
{
    if (k->smem > 48 * 1024)   /* the pool kernel's (mf_implicit_pool.cu) */
        LAC_CUDA_CHECK(ctx, cudaFuncSetAttribute((const void *)k->fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                 (int)k->smem));
    LAC_CUDA_CHECK(ctx, cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks_per_sm, k->fn,
                                                                      32 * LAC_MF_WARPS_PER_BLOCK, k->smem));
    return LAC_SUCCESS;
}

lac_status lac_mf_cuda_implicit_launch(lac_ctx_t ctx, const lac_mf_cuda_implicit_kernel *k, unsigned blocks,
                                       const lac_mf_cuda_draw_args *draws, const lac_mf_cuda_implicit_args *a,
                                       cudaEvent_t mid)
{
    if (k->copies) return lac_mf_cuda_implicit_copies_launch(ctx, k, blocks, a, mid);
    if (k->pool > 0) return lac_mf_cuda_implicit_pool_launch(ctx, k, blocks, draws, a, mid);
    cudaStream_t stream = ctx->cuda->stream;
    /* lists (weights per cell): shared negatives, or a GPU rank's part (user_scale) */
    const bool lists = draws->neg_weight != NULL;
    int64_t n = k->inbatch ? 0 : draws->cells * (lists ? 1 : draws->negatives);
    if (n > 0) {
        if (!lists) draw_negatives<false><<<(unsigned)((n + 255) / 256), 256, 0, stream>>>(*draws);
        else draw_negatives<true><<<(unsigned)((n + 255) / 256), 256, 0, stream>>>(*draws);
        LAC_CUDA_CHECK_LAUNCH(ctx);
    }
    if (mid) LAC_CUDA_CHECK(ctx, cudaEventRecord(mid, stream));
    k->fn<<<blocks, 32 * LAC_MF_WARPS_PER_BLOCK, 0, stream>>>(*a);
    LAC_CUDA_CHECK_LAUNCH(ctx);
    return LAC_SUCCESS;
}
