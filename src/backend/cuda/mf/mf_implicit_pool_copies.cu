/* Implicit feedback on CUDA with warp copies of a block's pool of negatives
 * (lac_mf_cuda_implicit_copies_choose, mf_implicit_cuda.h): the epoch, with
 * its pools and its cells' negatives drawn inside it.
 *
 * Why: the atomic pool (mf_implicit_pool.cu) no longer loads a negative's
 * row, but still adds every negative's step to memory (4 rows a cell); the
 * epoch was 6.3x an explicit one. Here a pool row's bytes go through L2
 * once a round, loaded and its change added: at k = 32 a cell moves the
 * positive's 256 bytes and 2 x 128 x P / (cells a round) for the pool.
 * Float atomics on shared memory are compare-and-swap loops on sm_90, so
 * each warp steps its own copy of the round's rows with plain loads and
 * stores; the groups of a warp whose slots meet take turns (each adds its
 * change to the copy as it stands: no step is lost). No draw kernel: the
 * pool is drawn by the block, a cell's negatives from a mask of the slots
 * its user has not seen, made at each run's and round's start.
 *
 * Every warp-wide collective (__any_sync, __match_any_sync,
 * __reduce_max_sync, __syncwarp) is reached by all 32 lanes: a warp steps
 * while any of its groups has a cell, and a group without one (its stream
 * ended) takes part with a key of its own. No warp waits on another but at
 * __syncthreads, which every thread of the block reaches each round. */
#include "backend/cuda/mf/mf_implicit_cuda.h"

#include <math.h>

/* The dynamic shared memory of a pool of P rows of `pieces` float4: the
 * rows as the round loaded them (v0), each warp's copy, the same for the
 * biases, and two rounds' items and rows. */
static size_t copies_smem(int P, int pieces)
{
    return (size_t)(1 + LAC_MF_WARPS_PER_BLOCK) * (size_t)P * ((size_t)pieces * sizeof(float4) + sizeof(float)) +
           (size_t)4 * (size_t)P * sizeof(int32_t);
}

/* Pool `pool`'s items and rows (the block's replica of a popular item), by
 * the pool kernel's rule (mf_implicit_pool.cu, draw_pools): key -1 - pool in
 * place of a user, item 0, try 0, slot s as the negative's index. */
template <int P>
static __device__ void draw_pool(const lac_mf_cuda_draw_args &d, int64_t pool, int32_t *item, int32_t *row)
{
    for (int s = threadIdx.x; s < P; s += blockDim.x) {
        const int32_t n =
            lac_mf_draw_negative(d.neg_cum, lac_mf_draw_seed(d.seed, d.epoch, -1 - pool), 0, s, 0, d.num_items);
        const int32_t count = __ldg(d.rep_count + n), replica = (int32_t)(blockIdx.x % count);
        item[s] = n;
        row[s] = replica == 0 ? n : __ldg(d.rep_first + n) + replica - 1;
    }
}

/* The slots whose items user u has not seen, one bit each, in every lane of
 * the group: lane sub searches slots sub, sub + G, ... in u's items
 * (ascending), all its searches in step (find_item's, mf_cuda.h). */
template <int G, int P>
static __device__ unsigned unseen_slots(const lac_mf_cuda_draw_args &d, int64_t u, const int32_t *item, int sub,
                                        unsigned mask)
{
    constexpr int K = (P + G - 1) / G;
    const int64_t s0 = __ldg(d.seen_start + u);
    const int len = (int)(__ldg(d.seen_start + u + 1) - s0);
    const int32_t *items = d.seen_items + s0;
    int32_t x[K];
    int base[K];
#pragma unroll
    for (int k = 0; k < K; k++) x[k] = sub + G * k < P ? item[sub + G * k] : 0, base[k] = 0;
    for (int n = len; n > 1;) {
        const int half = n >> 1;
#pragma unroll
        for (int k = 0; k < K; k++) base[k] = __ldg(items + base[k] + half) < x[k] ? base[k] + half : base[k];
        n -= half;
    }
    unsigned bits = 0;
#pragma unroll
    for (int k = 0; k < K; k++) {
        const int s = sub + G * k;
        int b = base[k];
        if (len > 0 && __ldg(items + b) < x[k]) b++;
        const bool seen = b < len && __ldg(items + b) == x[k];
        if (s < P && !seen) bits |= 1u << s;
    }
#pragma unroll
    for (int o = G / 2; o > 0; o >>= 1) bits |= __shfl_xor_sync(mask, bits, o);
    return bits;
}

/* The round's turn (every thread of the block): each row's change, the sum
 * over the warps of copy less v0, added to memory (old_row: the round's rows;
 * NULL: none), then the next round's rows (new_row; NULL: none) loaded into
 * v0 and every copy. A thread keeps to its own (slot, piece) in both. */
template <int P, int PIECES>
static __device__ void turn_round(const lac_mf_cuda_epoch_args &a, float4 *v0, float *b0, const int32_t *old_row,
                                  const int32_t *new_row)
{
    constexpr int N = P * PIECES, W = LAC_MF_WARPS_PER_BLOCK;
    float4 *Q4 = (float4 *)a.Q;
    for (int x = threadIdx.x; x < N; x += blockDim.x) {
        const int s = x / PIECES, c = x - s * PIECES;
        if (old_row) {
            const float4 o = v0[x];
            float4 sum = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
            for (int w = 1; w <= W; w++) {
                const float4 q = v0[x + w * N];
                sum.x += q.x - o.x, sum.y += q.y - o.y, sum.z += q.z - o.z, sum.w += q.w - o.w;
            }
            if (sum.x != 0.0f || sum.y != 0.0f || sum.z != 0.0f || sum.w != 0.0f)   /* a slot no warp drew */
                lac_mf_add4(Q4 + (int64_t)old_row[s] * PIECES + c, sum);
        }
        if (new_row) {
            const float4 q = __ldcg(Q4 + (int64_t)new_row[s] * PIECES + c);
#pragma unroll
            for (int w = 0; w <= W; w++) v0[x + w * N] = q;
        }
    }
    if (!a.use_bias) return;
    for (int s = threadIdx.x; s < P; s += blockDim.x) {
        if (old_row) {
            float sum = 0.0f;
#pragma unroll
            for (int w = 1; w <= W; w++) sum += b0[s + w * P] - b0[s];
            if (sum != 0.0f) atomicAdd(a.item_bias + (int64_t)old_row[s] * LAC_MF_BIAS_STRIDE, sum);
        }
        if (new_row) {
            const float b = __ldcg(a.item_bias + (int64_t)new_row[s] * LAC_MF_BIAS_STRIDE);
#pragma unroll
            for (int w = 0; w <= W; w++) b0[s + w * P] = b;
        }
    }
}

/* One epoch, G lanes a user run, V float4 pieces a lane (exactly the row),
 * a pool of P rows; up to 4 negatives a batch. The walk of the streams, the
 * positive's step and u_i's are implicit_epoch's (mf_implicit_kernels.cu,
 * cross-entropy, no lists; the positive's row loaded a step ahead, as the
 * explicit kernel's). Negative c0 + b of a cell (a batch c0 of NB): the
 * slot of its user's unseen ones picked by 13 bits (b) of the rule's bits
 * for (user, item row, c0, 0), one hash a batch (each slot within 0.4% of
 * uniform), scored against the warp's copy as the batch found it, its step
 * added to that copy, (shrink - 1) v + step u of the v it was scored with. */
template <int G, int V, int P>
static __global__ void __launch_bounds__(32 * LAC_MF_WARPS_PER_BLOCK) copies_epoch(lac_mf_cuda_implicit_args ia)
{
    constexpr int NB = 4, PIECES = G * V, N = P * PIECES, W = LAC_MF_WARPS_PER_BLOCK;
    const lac_mf_cuda_epoch_args &a = ia.base;
    const lac_mf_cuda_draw_args &d = ia.draws;
    constexpr int GROUPS_PER_WARP = 32 / G;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, sub = lane & (G - 1), first = lane & ~(G - 1);
    const unsigned mask = G == 32 ? 0xffffffffu : ((1u << G) - 1u) << first;
    const unsigned before = (1u << first) - 1u;   /* the lanes of the warp's earlier groups */
    const int64_t group = ((int64_t)blockIdx.x * W + warp) * GROUPS_PER_WARP + lane / G;
    const int negs = ia.negatives;
    const int32_t *code = a.code + group * a.steps;
    const float *weight_of = a.rating + group * a.steps;
    const float4 *Q4 = (const float4 *)a.Q;
    const bool bias = a.use_bias != 0;

    extern __shared__ float4 lac_mf_copies_smem[];
    float4 *v0 = lac_mf_copies_smem, *copy = v0 + N * (1 + warp);
    float *b0 = (float *)(v0 + N * (1 + W)), *bcopy = b0 + P * (1 + warp);
    int32_t *item = (int32_t *)(b0 + P * (1 + W)), *row = item + 2 * P;   /* round r's: [P x (r & 1)] */

    const int64_t pool0 = (int64_t)blockIdx.x * ia.rounds;
    draw_pool<P>(d, pool0, item, row);
    if (ia.rounds > 1) draw_pool<P>(d, pool0 + 1, item + P, row + P);
    __syncthreads();
    turn_round<P, PIECES>(a, v0, b0, NULL, row);
    __syncthreads();

    float4 p[V], p0[V];
#pragma unroll
    for (int v = 0; v < V; v++) p[v] = p0[v] = make_float4(0.f, 0.f, 0.f, 0.f);
    float bu = 0.0f, bu0 = 0.0f, share = 1.0f, loss = 0.0f;
    int64_t user = -1, next_run = a.group_first_run[group];
    uint64_t useed = 0;
    unsigned unseen = 0;

    /* the cell a step ahead: its code, weight, row and bias */
    int32_t cd = a.steps > 0 ? __ldg(code) : LAC_MF_PAD;
    float w = 0.0f, bq_next = 0.0f;
    float4 q_next[V];
    load_row<G, V, true>(q_next, Q4 + (int64_t)(cd & LAC_MF_ITEM_MASK) * PIECES, sub, PIECES, cd >= 0);
    if (cd >= 0) {
        w = __ldg(weight_of);
        if (bias) bq_next = __ldcg(a.item_bias + (int64_t)(cd & LAC_MF_ITEM_MASK) * LAC_MF_BIAS_STRIDE);
    }
    int64_t t = 0;
    for (int r = 0; r < ia.rounds; r++) {
        const int32_t *round_item = item + (r & 1) * P;
        const int64_t t_end = (int64_t)(r + 1) * ia.round_steps < a.steps ? (int64_t)(r + 1) * ia.round_steps : a.steps;
        bool fresh = true;   /* the round's first step: every group's mask anew */
        for (; t < t_end; t++) {
            const bool live = cd >= 0;   /* padding ends a stream */
            if (!__any_sync(0xffffffffu, live)) break;
            const int32_t c_now = cd, j = c_now & LAC_MF_ITEM_MASK;
            const float w_now = w, bp = bq_next;
            float4 qp[V];
#pragma unroll
            for (int v = 0; v < V; v++) qp[v] = q_next[v];
            if (live) {
                cd = t + 1 < a.steps ? __ldg(code + t + 1) : LAC_MF_PAD;
                load_row<G, V, true>(q_next, Q4 + (int64_t)(cd & LAC_MF_ITEM_MASK) * PIECES, sub, PIECES, cd >= 0);
                if (cd >= 0) {
                    w = __ldg(weight_of + t + 1);
                    if (bias) bq_next = __ldcg(a.item_bias + (int64_t)(cd & LAC_MF_ITEM_MASK) * LAC_MF_BIAS_STRIDE);
                }
                if (c_now & LAC_MF_RUN_START) {
                    start_run<G, V, true>(a, user, share, next_run, p, p0, bu, bu0, sub, PIECES);
                    useed = lac_mf_draw_seed(d.seed, d.epoch, user);
                }
                if (fresh || (c_now & LAC_MF_RUN_START)) unseen = unseen_slots<G, P>(d, user, round_item, sub, mask);
            }
            fresh = false;
            /* the positive, as the unpooled epoch (a group without a cell: all zero) */
            float part = 0.0f;
#pragma unroll
            for (int v = 0; v < V; v++) part = dot4(p[v], qp[v], part);
#pragma unroll
            for (int o = G / 2; o > 0; o >>= 1) part += __shfl_xor_sync(mask, part, o);
            const float base = a.mean + bu, sp = base + bp + part;
            const float step_p = live ? a.lr * w_now * (1.0f - lac_mf_sigmoid(sp)) : 0.0f;
            float4 acc[V];
#pragma unroll
            for (int v = 0; v < V; v++)
                acc[v] = make_float4(step_p * qp[v].x, step_p * qp[v].y, step_p * qp[v].z, step_p * qp[v].w);
            if (live) {
                if (sub == 0) loss += w_now * lac_mf_log_loss(sp);
                float4 *qj = (float4 *)a.Q + (int64_t)j * PIECES;
#pragma unroll
                for (int v = 0; v < V; v++) __stcg(qj + sub + G * v, axpby4(a.shrink, qp[v], step_p, p[v]));
                if (bias && sub == 0) a.item_bias[(int64_t)j * LAC_MF_BIAS_STRIDE] = fmaf(a.shrink_b, bp, step_p);
            }
            float keep = a.shrink, keep_b = a.shrink_b, bstep = step_p;
            const int cnt = __popc(unseen);
            for (int c0 = 0; c0 < negs; c0 += NB) {   /* the same count in every lane */
                int sl[NB];
                float4 qn[NB][V];
                float sn[NB], bn[NB], step[NB];
                const uint64_t bits = live ? lac_mf_draw_bits(useed, j, c0, 0) : 0;   /* 13 bits a negative */
#pragma unroll
                for (int b = 0; b < NB; b++) {
                    sl[b] = -1;
                    if (live && cnt > 0 && c0 + b < negs)
                        sl[b] = (int)__fns(unseen, 0, 1 + (int)((((bits >> (13 * b)) & 0x1fffu) * (unsigned)cnt) >> 13));
                    float x = 0.0f;
#pragma unroll
                    for (int v = 0; v < V; v++) {
                        qn[b][v] = sl[b] >= 0 ? copy[sl[b] * PIECES + sub + G * v] : make_float4(0.f, 0.f, 0.f, 0.f);
                        x = dot4(p[v], qn[b][v], x);
                    }
#pragma unroll
                    for (int o = G / 2; o > 0; o >>= 1) x += __shfl_xor_sync(mask, x, o);
                    bn[b] = sl[b] >= 0 && bias ? bcopy[sl[b]] : 0.0f;
                    sn[b] = base + bn[b] + x;
                }
#pragma unroll
                for (int b = 0; b < NB; b++) {
                    step[b] = sl[b] >= 0 ? -a.lr * lac_mf_sigmoid(sn[b]) : 0.0f;
                    if (sl[b] >= 0 && sub == 0) loss += lac_mf_log_loss(-sn[b]);
                }
                /* the steps into the warp's copy (every group has read it); groups on one slot in turns */
                __syncwarp();
#pragma unroll
                for (int b = 0; b < NB; b++) {
                    const int key = sl[b] >= 0 ? sl[b] : P + lane / G;   /* none: a key of the group's own */
                    const unsigned meet = __match_any_sync(0xffffffffu, key);
                    const int turn = __popc(meet & before) / G;
                    const unsigned turns = __reduce_max_sync(0xffffffffu, (unsigned)(__popc(meet) / G));
                    for (unsigned k = 0; k < turns; k++) {
                        if (sl[b] >= 0 && turn == (int)k) {
#pragma unroll
                            for (int v = 0; v < V; v++) {
                                float4 *c = copy + sl[b] * PIECES + sub + G * v;
                                const float4 dv = axpby4(a.shrink - 1.0f, qn[b][v], step[b], p[v]);
                                *c = axpby4(1.0f, *c, 1.0f, dv);
                            }
                            if (bias && sub == 0) bcopy[sl[b]] += (a.shrink_b - 1.0f) * bn[b] + step[b];
                        }
                        __syncwarp();
                    }
                    if (sl[b] >= 0) {
#pragma unroll
                        for (int v = 0; v < V; v++) acc[v] = axpby4(1.0f, acc[v], step[b], qn[b][v]);
                        keep *= a.shrink;
                        keep_b *= a.shrink_b;
                        bstep += step[b];
                    }
                }
            }
            if (live) {
#pragma unroll
                for (int v = 0; v < V; v++) p[v] = axpby4(keep, p[v], 1.0f, acc[v]);
                if (bias) bu = fmaf(keep_b, bu, bstep);
            }
        }
        const bool more = __syncthreads_or(cd >= 0) && r + 1 < ia.rounds;
        turn_round<P, PIECES>(a, v0, b0, row + (r & 1) * P, more ? row + ((r + 1) & 1) * P : NULL);
        if (!more) break;
        __syncthreads();
        if (r + 2 < ia.rounds) draw_pool<P>(d, pool0 + r + 2, item + (r & 1) * P, row + (r & 1) * P);
    }
    if (user >= 0) finish_run<G, V, true>(a, user, share, p, p0, bu, bu0, sub);
    lac_mf_warp_add(a.sse, loss, lane);
}

template <int G, int P>
static lac_mf_cuda_implicit_fn copies_fn(int v)
{
    switch (v) {
    case 1: return copies_epoch<G, 1, P>;
    case 2: return copies_epoch<G, 2, P>;
    case 3: return copies_epoch<G, 3, P>;
    case 4: return copies_epoch<G, 4, P>;
    default: return NULL;
    }
}

template <int P>
static lac_mf_cuda_implicit_fn copies_lanes(int g, int v)
{
    return g == 4 ? copies_fn<4, P>(v) : g == 8 ? copies_fn<8, P>(v) : g == 16 ? copies_fn<16, P>(v) : copies_fn<32, P>(v);
}

lac_mf_cuda_implicit_kernel lac_mf_cuda_implicit_copies_choose(int pieces, int pool, int cells)
{
    lac_mf_cuda_implicit_kernel k = lac_mf_cuda_implicit_pool_choose(pieces, pool, cells);
    const int g = k.lanes, v = pieces / g;
    k.copies = 1;
    k.smem = copies_smem(pool, pieces);
    k.fn = NULL;
    if (pieces % g == 0 && v <= 4 && (pool == 16 || pool == 32))
        k.fn = pool == 16 ? copies_lanes<16>(g, v) : copies_lanes<32>(g, v);
    return k;
}

lac_status lac_mf_cuda_implicit_copies_launch(lac_ctx_t ctx, const lac_mf_cuda_implicit_kernel *k, unsigned blocks,
                                              const lac_mf_cuda_implicit_args *a, cudaEvent_t mid)
{
    cudaStream_t stream = ctx->cuda->stream;
    if (mid) LAC_CUDA_CHECK(ctx, cudaEventRecord(mid, stream));   /* no draws before the epoch */
    k->fn<<<blocks, 32 * LAC_MF_WARPS_PER_BLOCK, k->smem, stream>>>(*a);
    LAC_CUDA_CHECK_LAUNCH(ctx);
    return LAC_SUCCESS;
}
