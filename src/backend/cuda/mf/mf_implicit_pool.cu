/* Implicit feedback on CUDA with a block's pool of negatives
 * (lac_mf_cuda_implicit_pool_choose, mf_implicit_cuda.h): the pools' draws,
 * the cells' draws of slots in them, and the epoch.
 *
 * Why: the unpooled epoch (mf_implicit_kernels.cu) loads and stores the
 * positive's and 4 negatives' rows through L2 at every cell. Here a block's
 * cells of one round score their negatives against the pool's rows in
 * shared memory (as the round found them: within a round a pool row is
 * stale, its steps summed as a minibatch's) and add each step's change to
 * the row in memory (vector atomics: no load, nothing waits on them).
 * Measured on one H200 (bench/RESULTS.md, "a block's pool of negatives"):
 * this 9-15% faster than no pool; summing the steps in shared memory
 * instead 1.7-2.1x slower than no pool (float atomics there are
 * compare-and-swap loops), one sum a group (no atomics, a copy of the pool
 * for every group) 4% faster with 16 rows, 10% slower with 32. HR@10 fell
 * 0.004-0.009 against the unpooled kernel, hence not the default. */
#include "backend/cuda/mf/mf_implicit_cuda.h"

#include <math.h>

/* Pool x / pool's items by the negatives' distribution (the pool's own key:
 * -1 - pool in place of a user), and their rows: the block's replica of a
 * popular item. */
static __global__ void draw_pools(lac_mf_cuda_draw_args a)
{
    const int64_t x = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (x >= a.pools * a.pool) return;
    const int64_t pool = x / a.pool, block = pool / a.rounds;
    const int slot = (int)(x - pool * a.pool);
    const int32_t n =
        lac_mf_draw_negative(a.neg_cum, lac_mf_draw_seed(a.seed, a.epoch, -1 - pool), 0, slot, 0, a.num_items);
    const int32_t count = __ldg(a.rep_count + n), replica = (int32_t)(block % count);
    a.pool_item[x] = n;
    a.pool_row[x] = replica == 0 ? n : __ldg(a.rep_first + n) + replica - 1;
}

/* A thread per (cell, negative): the first of LAC_MF_DRAWS slots of the
 * cell's pool whose item the user has not seen, or -1 (keyed as the
 * unpooled draws: user, item, negative, try). */
static __global__ void draw_slots(lac_mf_cuda_draw_args a)
{
    const int64_t x = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (x >= a.cells * a.negatives) return;
    const int64_t cell = x / a.negatives;
    const int t = (int)(x - cell * a.negatives);
    const int32_t cd = __ldg(a.code + cell), u = __ldg(a.cell_user + cell);
    if (cd < 0 || u < 0) return;
    const int32_t j = __ldg(a.row_item + (cd & LAC_MF_ITEM_MASK));
    const int64_t group = cell / a.steps, step = cell - group * a.steps;
    const int64_t pool = (group / a.groups_per_block) * a.rounds + step / a.round_steps;
    const int32_t *items = a.pool_item + pool * a.pool;
    const int64_t s0 = __ldg(a.seen_start + u);
    const int len = (int)(__ldg(a.seen_start + u + 1) - s0);
    const uint64_t seed = lac_mf_draw_seed(a.seed, a.epoch, u);
    int32_t slot = -1;
    for (int r = 0; r < LAC_MF_DRAWS && slot < 0; r++) {
        const int s = (int)(lac_mf_draw_bits(seed, j, t, r) & (uint64_t)(a.pool - 1));
        if (find_item(a.seen_items + s0, len, __ldg(items + s)) < 0) slot = s;
    }
    a.neg[x] = slot;
}

/* One epoch, G lanes a user run, V float4 pieces a lane (exactly the row);
 * up to 4 negatives scored together, from the pool in shared memory. The
 * walk of the streams, the positive's step and u_i's are implicit_epoch's
 * (mf_implicit_kernels.cu, cross-entropy, no lists). A negative's step is
 * added to its row in memory at once, as its change of the round's copy:
 * (shrink - 1) v + step u (vector atomics, fire and forget). */
template <int G, int V>
static __global__ void __launch_bounds__(32 * LAC_MF_WARPS_PER_BLOCK) pool_epoch(lac_mf_cuda_implicit_args ia)
{
    constexpr int NB = 4;
    const lac_mf_cuda_epoch_args &a = ia.base;
    constexpr int GROUPS_PER_WARP = 32 / G;
    const int lane = threadIdx.x & 31, sub = lane & (G - 1), first = lane & ~(G - 1);
    const unsigned mask = G == 32 ? 0xffffffffu : ((1u << G) - 1u) << first;
    const int64_t group =
        ((int64_t)blockIdx.x * LAC_MF_WARPS_PER_BLOCK + (threadIdx.x >> 5)) * GROUPS_PER_WARP + lane / G;
    const int pieces = a.stride >> 2, negs = ia.negatives, P = ia.pool;
    const int32_t *code = a.code + group * a.steps;
    const float *weight_of = a.rating + group * a.steps;
    const int32_t *neg = ia.neg + group * a.steps * negs;
    const float4 *Q4 = (const float4 *)a.Q;
    const bool bias = a.use_bias != 0;

    /* the round's pool: its rows as the round found them, their biases, row indices */
    extern __shared__ float4 lac_mf_pool_smem[];
    float4 *pq = lac_mf_pool_smem;
    float *pb = (float *)(pq + P * pieces);
    int32_t *prow = (int32_t *)(pb + P);

    float4 p[V], p0[V];
#pragma unroll
    for (int v = 0; v < V; v++) p[v] = p0[v] = make_float4(0.f, 0.f, 0.f, 0.f);
    float bu = 0.0f, bu0 = 0.0f, share = 1.0f, loss = 0.0f;
    int64_t user = -1, next_run = a.group_first_run[group];

    int32_t cd = a.steps > 0 ? __ldg(code) : LAC_MF_PAD;
    float w = a.steps > 0 ? __ldg(weight_of) : 0.0f;
    int32_t nn[NB];
#pragma unroll
    for (int b = 0; b < NB; b++) nn[b] = (cd >= 0 && b < negs) ? __ldg(neg + b) : -1;
    int64_t t = 0;
    for (int r = 0; r < ia.rounds; r++) {
        const int32_t *rows = ia.pool_row + ((int64_t)blockIdx.x * ia.rounds + r) * P;
        for (int x = threadIdx.x; x < P * pieces; x += blockDim.x) {
            const int s = x / pieces;
            pq[x] = __ldcg(Q4 + (int64_t)__ldg(rows + s) * pieces + (x - s * pieces));
        }
        for (int s = threadIdx.x; s < P; s += blockDim.x) {
            const int32_t row = __ldg(rows + s);
            prow[s] = row;
            pb[s] = bias ? __ldcg(a.item_bias + (int64_t)row * LAC_MF_BIAS_STRIDE) : 0.0f;
        }
        __syncthreads();
        const int64_t t_end = (int64_t)(r + 1) * ia.round_steps < a.steps ? (int64_t)(r + 1) * ia.round_steps : a.steps;
        for (; t < t_end && cd >= 0; t++) {   /* padding ends a stream */
            const int32_t c_now = cd;
            const float w_now = w;
            int32_t n_now[NB];
#pragma unroll
            for (int b = 0; b < NB; b++) n_now[b] = nn[b];
            cd = t + 1 < a.steps ? __ldg(code + t + 1) : LAC_MF_PAD;
            if (cd >= 0) {
                w = __ldg(weight_of + t + 1);
#pragma unroll
                for (int b = 0; b < NB; b++) nn[b] = b < negs ? __ldg(neg + (t + 1) * negs + b) : -1;
            }
            if (c_now & LAC_MF_RUN_START) {
                start_run<G, V, true>(a, user, share, next_run, p, p0, bu, bu0, sub, pieces);
            }
            const int32_t j = c_now & LAC_MF_ITEM_MASK;
            float4 qp[V];
            load_row<G, V, true>(qp, Q4 + (int64_t)j * pieces, sub, pieces, true);
            const float bp = bias ? __ldcg(a.item_bias + (int64_t)j * LAC_MF_BIAS_STRIDE) : 0.0f;
            float part = 0.0f;
#pragma unroll
            for (int v = 0; v < V; v++) part = dot4(p[v], qp[v], part);
#pragma unroll
            for (int o = G / 2; o > 0; o >>= 1) part += __shfl_xor_sync(mask, part, o);
            const float base = a.mean + bu, sp = base + bp + part;
            const float step_p = a.lr * w_now * (1.0f - lac_mf_sigmoid(sp));
            if (sub == 0) loss += w_now * lac_mf_log_loss(sp);
            /* the positive's step with this u_i, as the unpooled epoch */
            float4 acc[V];
            {
                float4 *qj = (float4 *)a.Q + (int64_t)j * pieces;
#pragma unroll
                for (int v = 0; v < V; v++) {
                    __stcg(qj + sub + G * v, axpby4(a.shrink, qp[v], step_p, p[v]));
                    acc[v] = make_float4(step_p * qp[v].x, step_p * qp[v].y, step_p * qp[v].z, step_p * qp[v].w);
                }
                if (bias && sub == 0) a.item_bias[(int64_t)j * LAC_MF_BIAS_STRIDE] = fmaf(a.shrink_b, bp, step_p);
            }
            float keep = a.shrink, keep_b = a.shrink_b, bstep = step_p;
            for (int c0 = 0; c0 < negs; c0 += NB) {
                int32_t sl[NB];
#pragma unroll
                for (int b = 0; b < NB; b++)
                    sl[b] = c0 == 0 ? n_now[b] : c0 + b < negs ? __ldg(neg + t * negs + c0 + b) : -1;
                float4 qn[NB][V];
                float sn[NB];
#pragma unroll
                for (int b = 0; b < NB; b++) {
                    const float x = slot_dot<G, V>(p, qn[b], sl[b] >= 0 ? pq + sl[b] * pieces + sub : NULL, mask);
                    sn[b] = base + (sl[b] >= 0 ? pb[sl[b]] : 0.0f) + x;
                }
#pragma unroll
                for (int b = 0; b < NB; b++) {
                    if (sl[b] < 0) continue;
                    const float step = -a.lr * lac_mf_sigmoid(sn[b]);
                    const int64_t row = prow[sl[b]];
                    if (sub == 0) {
                        loss += lac_mf_log_loss(-sn[b]);
                        if (bias) atomicAdd(a.item_bias + row * LAC_MF_BIAS_STRIDE, (a.shrink_b - 1.0f) * pb[sl[b]] + step);
                    }
#pragma unroll
                    for (int v = 0; v < V; v++) {
                        lac_mf_add4((float4 *)a.Q + row * pieces + sub + G * v,
                                    axpby4(a.shrink - 1.0f, qn[b][v], step, p[v]));
                        acc[v] = axpby4(1.0f, acc[v], step, qn[b][v]);
                    }
                    keep *= a.shrink;
                    keep_b *= a.shrink_b;
                    bstep += step;
                }
            }
#pragma unroll
            for (int v = 0; v < V; v++) p[v] = axpby4(keep, p[v], 1.0f, acc[v]);
            if (bias) bu = fmaf(keep_b, bu, bstep);
        }
        if (!__syncthreads_or(cd >= 0)) break;   /* every stream of the block ended */
    }
    if (user >= 0) finish_run<G, V, true>(a, user, share, p, p0, bu, bu0, sub);
    lac_mf_warp_add(a.sse, loss, lane);
}

template <int G>
static lac_mf_cuda_implicit_fn pool_fn(int v)
{
    switch (v) {
    case 1: return pool_epoch<G, 1>;
    case 2: return pool_epoch<G, 2>;
    case 3: return pool_epoch<G, 3>;
    case 4: return pool_epoch<G, 4>;
    default: return NULL;
    }
}

int lac_mf_cuda_pool_round_steps(int pool, int cells, int groups_per_block)
{
    const int steps = cells * pool / groups_per_block;
    return steps < 1 ? 1 : steps;
}

lac_mf_cuda_implicit_kernel lac_mf_cuda_implicit_pool_choose(int pieces, int pool, int cells)
{
    const lac_mf_cuda_kernel e = lac_mf_cuda_choose_kernel(pieces, 0, 1);
    const int g = e.lanes, v = pieces / g;
    lac_mf_cuda_implicit_kernel k;
    k.lanes = g;
    k.groups_per_block = LAC_MF_WARPS_PER_BLOCK * (32 / g);
    k.pool = pool;
    k.copies = k.inbatch = 0;
    k.round_steps = lac_mf_cuda_pool_round_steps(pool, cells, k.groups_per_block);
    k.smem = (size_t)pool * ((size_t)pieces * sizeof(float4) + sizeof(float) + sizeof(int32_t));
    k.fn = NULL;
    if (pieces % g == 0 && v <= 4)
        k.fn = g == 4 ? pool_fn<4>(v) : g == 8 ? pool_fn<8>(v) : g == 16 ? pool_fn<16>(v) : pool_fn<32>(v);
    return k;
}

lac_status lac_mf_cuda_implicit_pool_launch(lac_ctx_t ctx, const lac_mf_cuda_implicit_kernel *k, unsigned blocks,
                                            const lac_mf_cuda_draw_args *draws, const lac_mf_cuda_implicit_args *a,
                                            cudaEvent_t mid)
{
    cudaStream_t stream = ctx->cuda->stream;
    const int64_t n = draws->pools * draws->pool, m = draws->cells * draws->negatives;
    if (n > 0) {
        draw_pools<<<(unsigned)((n + 255) / 256), 256, 0, stream>>>(*draws);
        LAC_CUDA_CHECK_LAUNCH(ctx);
    }
    if (m > 0) {
        draw_slots<<<(unsigned)((m + 255) / 256), 256, 0, stream>>>(*draws);
        LAC_CUDA_CHECK_LAUNCH(ctx);
    }
    if (mid) LAC_CUDA_CHECK(ctx, cudaEventRecord(mid, stream));
    k->fn<<<blocks, 32 * LAC_MF_WARPS_PER_BLOCK, k->smem, stream>>>(*a);
    LAC_CUDA_CHECK_LAUNCH(ctx);
    return LAC_SUCCESS;
}
