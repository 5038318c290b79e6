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
 * stores. A warp's groups draw their negative b from disjoint classes of
 * slots (group g's from class (g + b) mod its groups), so within b their
 * slots never meet, and a slot met between two b takes each change onto the
 * copy as it stands: no step is lost. No draw kernel: the pool is drawn by
 * the block, a cell's negatives from a mask of the slots its user has not
 * seen (each user's items in a hash table), made at each run's start and
 * under the loads of each round's rows. Measured on one H200
 * (bench/RESULTS.md, "warp copies of a block's pool: measured"): slower
 * than the unpooled epoch all the same (k = 32: 6.09 ms at 2 cells a row,
 * where HR@10 holds, 4.62 ms at 8, against 5.05 ms), a round costing some
 * 7 us of a block's time and a negative's work on the group's chain more
 * than an unpooled negative's loads; hence opt-in.
 *
 * Every warp-wide collective (__any_sync, __syncwarp) is reached by all 32
 * lanes: a warp steps while any of its groups has a cell, and a group
 * without one (its stream ended) goes through the step with nothing drawn.
 * No warp waits on another but at __syncthreads, which every thread of the
 * block reaches each round (three times: the round's end, its changes in
 * memory, the next round's rows in shared memory). */
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
 * the group: lane sub tests slots sub, sub + G, ... in u's table of items
 * (lac_mf_seen_slot), all its probes in step. */
template <int G, int P>
static __device__ unsigned unseen_slots(const lac_mf_cuda_draw_args &d, int64_t u, const int32_t *item, int sub,
                                        unsigned mask)
{
    constexpr int K = (P + G - 1) / G;
    const int64_t t0 = __ldg(d.seen_table_start + u);
    const uint32_t cap = (uint32_t)(__ldg(d.seen_table_start + u + 1) - t0);
    const int32_t *table = d.seen_table + t0;
    int32_t x[K];
    uint32_t at[K];
    unsigned open = 0, bits = 0;   /* open: the tests still probing */
#pragma unroll
    for (int k = 0; k < K; k++) {
        const int s = sub + G * k;
        x[k] = s < P ? item[s] : 0;
        at[k] = cap ? lac_mf_seen_slot(x[k], cap) : 0;
        if (s < P) {
            if (cap) open |= 1u << k;
            else bits |= 1u << s;
        }
    }
    while (open) {
#pragma unroll
        for (int k = 0; k < K; k++) {
            if (!(open >> k & 1)) continue;
            const int32_t v = __ldg(table + at[k]);
            if (v == x[k]) open &= ~(1u << k);                                  /* seen */
            else if (v < 0) open &= ~(1u << k), bits |= 1u << (sub + G * k);   /* not in the table */
            else at[k] = (at[k] + 1) & (cap - 1);
        }
    }
#pragma unroll
    for (int o = G / 2; o > 0; o >>= 1) bits |= __shfl_xor_sync(mask, bits, o);
    return bits;
}

/* The round's end (every thread of the block): each row's change, the sum
 * over the warps of copy less v0, added to memory (vector atomics). */
template <int P, int PIECES>
static __device__ void flush_round(const lac_mf_cuda_epoch_args &a, const float4 *v0, const float *b0,
                                   const int32_t *row)
{
    constexpr int N = P * PIECES, W = LAC_MF_WARPS_PER_BLOCK;
    float4 *Q4 = (float4 *)a.Q;
    for (int x = threadIdx.x; x < N; x += blockDim.x) {
        const int s = x / PIECES;
        const float4 o = v0[x];
        float4 sum = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
        for (int w = 1; w <= W; w++) {
            const float4 q = v0[x + w * N];
            sum.x += q.x - o.x, sum.y += q.y - o.y, sum.z += q.z - o.z, sum.w += q.w - o.w;
        }
        if (sum.x != 0.0f || sum.y != 0.0f || sum.z != 0.0f || sum.w != 0.0f)   /* a slot no warp drew */
            lac_mf_add4(Q4 + (int64_t)row[s] * PIECES + (x - s * PIECES), sum);
    }
    if (!a.use_bias) return;
    for (int s = threadIdx.x; s < P; s += blockDim.x) {
        float sum = 0.0f;
#pragma unroll
        for (int w = 1; w <= W; w++) sum += b0[s + w * P] - b0[s];
        if (sum != 0.0f) atomicAdd(a.item_bias + (int64_t)row[s] * LAC_MF_BIAS_STRIDE, sum);
    }
}

/* A round's start (every thread of the block): its rows (and biases) into
 * v0 and every warp's copy; meanwhile (user >= 0) the group's mask of the
 * round's slots (unseen_slots), its probes under the rows' loads. */
template <int G, int P, int PIECES>
static __device__ void load_round(const lac_mf_cuda_epoch_args &a, float4 *v0, float *b0, const int32_t *row,
                                  const lac_mf_cuda_draw_args &d, int64_t user, const int32_t *item, int sub,
                                  unsigned mask, unsigned &unseen)
{
    constexpr int N = P * PIECES, W = LAC_MF_WARPS_PER_BLOCK, T = 32 * W;
    constexpr int NQ = (N + T - 1) / T < 8 ? (N + T - 1) / T : 8;   /* loads in flight a thread */
    const float4 *Q4 = (const float4 *)a.Q;
    const bool bias = a.use_bias != 0;
    for (int x0 = 0; x0 < N; x0 += T * NQ) {
        float4 q[NQ];
        float b = 0.0f;
#pragma unroll
        for (int i = 0; i < NQ; i++) {
            const int x = x0 + threadIdx.x + T * i, s = x / PIECES;
            if (x < N) q[i] = __ldcg(Q4 + (int64_t)row[s] * PIECES + (x - s * PIECES));
        }
        if (x0 == 0 && bias && threadIdx.x < P)
            b = __ldcg(a.item_bias + (int64_t)row[threadIdx.x] * LAC_MF_BIAS_STRIDE);
        if (x0 == 0 && user >= 0) unseen = unseen_slots<G, P>(d, user, item, sub, mask);
#pragma unroll
        for (int i = 0; i < NQ; i++) {
            const int x = x0 + threadIdx.x + T * i;
            if (x < N)
#pragma unroll
                for (int w = 0; w <= W; w++) v0[x + w * N] = q[i];
        }
        if (x0 == 0 && bias && threadIdx.x < P)
#pragma unroll
            for (int w = 0; w <= W; w++) b0[threadIdx.x + w * P] = b;
    }
}

/* One epoch, G lanes a user run, V float4 pieces a lane (exactly the row),
 * a pool of P rows; up to 4 negatives a batch. The walk of the streams, the
 * positive's step and u_i's are implicit_epoch's (mf_implicit_kernels.cu,
 * cross-entropy, no lists; the positive's row loaded a step ahead, as the
 * explicit kernel's). Negative n = c0 + b of a cell (a batch c0 of NB) of
 * the warp's group g: of the unseen slots in class (g + n) mod the warp's
 * groups (P / that many slots from the class's times as many on), the one
 * picked by 13 bits (13 b on) of the rule's bits for (user, item row, c0,
 * 0), one hash a batch (each slot within 0.4% of uniform); scored against
 * the warp's copy as the batch found it, its step added to that copy,
 * (shrink - 1) v + step u of the v it was scored with. */
template <int G, int V, int P>
static __global__ void __launch_bounds__(32 * LAC_MF_WARPS_PER_BLOCK) copies_epoch(lac_mf_cuda_implicit_args ia)
{
    constexpr int NB = 4, PIECES = G * V, N = P * PIECES, W = LAC_MF_WARPS_PER_BLOCK;
    const lac_mf_cuda_epoch_args &a = ia.base;
    const lac_mf_cuda_draw_args &d = ia.draws;
    constexpr int GROUPS_PER_WARP = 32 / G, S = P / GROUPS_PER_WARP;   /* S: slots of a class */
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, sub = lane & (G - 1), first = lane & ~(G - 1);
    const unsigned mask = G == 32 ? 0xffffffffu : ((1u << G) - 1u) << first;
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
    unsigned unseen = 0;
    draw_pool<P>(d, pool0, item, row);
    if (ia.rounds > 1) draw_pool<P>(d, pool0 + 1, item + P, row + P);
    __syncthreads();
    load_round<G, P, PIECES>(a, v0, b0, row, d, -1, item, sub, mask, unseen);
    __syncthreads();

    float4 p[V], p0[V];
#pragma unroll
    for (int v = 0; v < V; v++) p[v] = p0[v] = make_float4(0.f, 0.f, 0.f, 0.f);
    float bu = 0.0f, bu0 = 0.0f, share = 1.0f, loss = 0.0f;
    int64_t user = -1, next_run = a.group_first_run[group];
    uint64_t useed = 0;

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
                    unseen = unseen_slots<G, P>(d, user, round_item, sub, mask);   /* a round's start: load_round */
                }
            }
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
            for (int c0 = 0; c0 < negs; c0 += NB) {   /* the same count in every lane */
                int sl[NB];
                float4 qn[NB][V];
                float sn[NB], bn[NB], step[NB];
                const uint64_t bits = live ? lac_mf_draw_bits(useed, j, c0, 0) : 0;   /* 13 bits a negative */
#pragma unroll
                for (int b = 0; b < NB; b++) {
                    /* negative n's class of slots: the groups of a warp on disjoint ones */
                    const int n = c0 + b, cls = (lane / G + n) % GROUPS_PER_WARP;
                    const unsigned in = S == 32 ? unseen : (unseen >> (cls * S)) & ((1u << (S & 31)) - 1u);
                    const int cnt = __popc(in);
                    sl[b] = -1;
                    if (live && cnt > 0 && n < negs) {
                        const unsigned kth = (((unsigned)(bits >> (13 * b)) & 0x1fffu) * (unsigned)cnt) >> 13;
                        sl[b] = cls * S + (int)__fns(in, 0, 1 + (int)kth);
                    }
                    const float x = slot_dot<G, V>(p, qn[b], sl[b] >= 0 ? copy + sl[b] * PIECES + sub : NULL, mask);
                    bn[b] = sl[b] >= 0 && bias ? bcopy[sl[b]] : 0.0f;
                    sn[b] = base + bn[b] + x;
                }
#pragma unroll
                for (int b = 0; b < NB; b++) {
                    step[b] = sl[b] >= 0 ? -a.lr * lac_mf_sigmoid(sn[b]) : 0.0f;
                    if (sl[b] >= 0 && sub == 0) loss += lac_mf_log_loss(-sn[b]);
                }
                /* the steps into the warp's copy, once every group has read it:
                 * within a negative b the groups' slots are apart, between two
                 * b a slot may meet (the change added to the copy as it stands) */
#pragma unroll
                for (int b = 0; b < NB; b++) {
                    __syncwarp();
                    if (sl[b] >= 0) {
#pragma unroll
                        for (int v = 0; v < V; v++) {
                            float4 *c = copy + sl[b] * PIECES + sub + G * v;
                            const float4 dv = axpby4(a.shrink - 1.0f, qn[b][v], step[b], p[v]);
                            *c = axpby4(1.0f, *c, 1.0f, dv);
                            acc[v] = axpby4(1.0f, acc[v], step[b], qn[b][v]);
                        }
                        if (bias && sub == 0) bcopy[sl[b]] += (a.shrink_b - 1.0f) * bn[b] + step[b];
                        keep *= a.shrink;
                        keep_b *= a.shrink_b;
                        bstep += step[b];
                    }
                }
                __syncwarp();
            }
            if (live) {
#pragma unroll
                for (int v = 0; v < V; v++) p[v] = axpby4(keep, p[v], 1.0f, acc[v]);
                if (bias) bu = fmaf(keep_b, bu, bstep);
            }
        }
        const bool more = __syncthreads_or(cd >= 0) && r + 1 < ia.rounds;
        flush_round<P, PIECES>(a, v0, b0, row + (r & 1) * P);
        if (!more) break;
        __syncthreads();   /* the round's changes in memory before the next rows are read */
        load_round<G, P, PIECES>(a, v0, b0, row + ((r + 1) & 1) * P, d, cd >= 0 ? user : -1, item + ((r + 1) & 1) * P,
                                 sub, mask, unseen);
        if (r + 2 < ia.rounds) draw_pool<P>(d, pool0 + r + 2, item + (r & 1) * P, row + (r & 1) * P);
        __syncthreads();
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
    return g == 4    ? copies_fn<4, P>(v)
           : g == 8  ? copies_fn<8, P>(v)
           : g == 16 ? copies_fn<16, P>(v)
                     : copies_fn<32, P>(v);
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
