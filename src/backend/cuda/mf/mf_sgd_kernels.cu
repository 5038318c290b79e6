/* CUSGD++ kernels (Algorithm 2): the epoch, the popular items' replicas, the
 * validation error; and their launches. The host driver is mf_sgd.cu; the
 * schedule the epoch walks is built on the host by src/mf/schedule.c.
 *
 * A group of G lanes (G = 4..32, a power of two) owns a run of one user's
 * ratings: u_i lives in the group's registers as float4 pieces (piece c of
 * the row in lane c % G, slot c / G), u_i . v_j is a shuffle reduction over
 * the G lanes, v_j and bhat_j are updated in global memory (Hogwild across
 * groups, as in the paper) and u_i goes back to global memory once, at the
 * end of the run. With F = 32 a group is 8 lanes holding one float4 each, so a
 * warp trains four users at once and the reduction takes three shuffles
 * instead of five.
 *
 * Each group walks its own stream of (item row, rating) cells, with a flag on
 * the first rating of each run: the loop is the same for every lane, with no
 * divergence except where a group switches user. The next steps' (item,
 * rating) are loaded eight steps ahead, the next v_j row one step ahead
 * (DQ = 1; two steps measured no faster), so that L2 latency overlaps the
 * current update while a v_j read is at most DQ updates old.
 *
 * v_j, bhat_j and the split users' rows are read with ld.global.cg (L2, which
 * is coherent across SMs): the default L1-cached load would return a copy of
 * v_j that another SM has since updated, and on small data, where all of V
 * fits in L1, each SM would then train its own stale copy.
 *
 * A run that is part of a longer row starts from the u_i in memory and folds
 * its change back with atomic adds, weighted by its share of the row (the
 * runs' changes are averaged: summed, they would overshoot, each having
 * fitted u_i alone). Rows wider than 32 lanes x 8 float4 (F > 1024) take a
 * general path with u_i in global memory. Float32 throughout. */
#include "backend/cuda/mf/mf_cuda.h"

/* One epoch of update rule (5), CUSGD++ style, G lanes per user run, V float4
 * pieces per lane (FULL: G x V pieces are exactly the row; else lanes past the
 * row's end hold zeros), v_j loaded DQ steps ahead. */
template <int G, int V, bool FULL, int DQ>
static __global__ void __launch_bounds__(32 * LAC_MF_WARPS_PER_BLOCK) cusgd_epoch(lac_mf_cuda_epoch_args a)
{
    constexpr int GROUPS_PER_WARP = 32 / G;
    const int lane = threadIdx.x & 31, sub = lane & (G - 1);
    const int64_t group =
        ((int64_t)blockIdx.x * LAC_MF_WARPS_PER_BLOCK + (threadIdx.x >> 5)) * GROUPS_PER_WARP + lane / G;
    const int pieces = a.stride >> 2;
    const int32_t *code = a.code + group * a.steps;
    const float *rating = a.rating + group * a.steps;
    const float4 *Q4 = (const float4 *)a.Q;
    const int64_t steps = a.steps;

    float4 p[V], p0[V];
#pragma unroll
    for (int v = 0; v < V; v++) p[v] = p0[v] = make_float4(0.f, 0.f, 0.f, 0.f);
    float bu = 0.0f, bu0 = 0.0f, weight = 1.0f, sse = 0.0f;
    int64_t user = -1, next_run = a.group_first_run[group];

    /* the pipeline: codes and ratings LAC_MF_CODE_AHEAD steps ahead, v_j rows DQ */
    int32_t c[LAC_MF_CODE_AHEAD];
    float r[LAC_MF_CODE_AHEAD];
    float4 q[DQ][V];
    float bj[DQ];
#pragma unroll
    for (int d = 0; d < LAC_MF_CODE_AHEAD; d++) {
        c[d] = __ldg(code + d);
        r[d] = __ldg(rating + d);
    }
#pragma unroll
    for (int d = 0; d < DQ; d++) {
        const int32_t j = c[d] & LAC_MF_ITEM_MASK;
        load_row<G, V, FULL>(q[d], Q4 + (int64_t)j * pieces, sub, pieces, c[d] >= 0);
        bj[d] = (a.use_bias && c[d] >= 0) ? __ldcg(a.item_bias + (int64_t)j * LAC_MF_BIAS_STRIDE) : 0.0f;
    }

    for (int64_t t0 = 0; t0 < steps; t0 += LAC_MF_CODE_AHEAD) {
#pragma unroll
        for (int d = 0; d < LAC_MF_CODE_AHEAD; d++) {
            const int slot = d % DQ;
            const int32_t cd = c[d];
            if (cd >= 0 && (cd & LAC_MF_RUN_START)) {   /* the same for the group's lanes */
                start_run<G, V, FULL>(a, user, weight, next_run, p, p0, bu, bu0, sub, pieces);
            }
            float part = 0.0f;
#pragma unroll
            for (int v = 0; v < V; v++) part = dot4(p[v], q[slot][v], part);
#pragma unroll
            for (int o = G / 2; o > 0; o >>= 1) part += __shfl_xor_sync(0xffffffffu, part, o);
            if (cd >= 0) {
                const int32_t j = cd & LAC_MF_ITEM_MASK;
                const float e = r[d] - (a.mean + bu + bj[slot] + part);
                const float step = a.lr * e;
                if (sub == 0) sse = fmaf(e, e, sse);
                if (a.use_bias) {
                    bu = fmaf(a.shrink_b, bu, step);
                    if (sub == 0) a.item_bias[(int64_t)j * LAC_MF_BIAS_STRIDE] = fmaf(a.shrink_b, bj[slot], step);
                }
                float4 *qj = (float4 *)a.Q + (int64_t)j * pieces;
#pragma unroll
                for (int v = 0; v < V; v++) {
                    const int pc = sub + G * v;
                    const float4 pf = p[v], qf = q[slot][v];
                    p[v] = axpby4(a.shrink, pf, step, qf);
                    if (FULL || pc < pieces) __stcg(qj + pc, axpby4(a.shrink, qf, step, pf));
                }
            }
            /* refill: this slot's code with step t + LAC_MF_CODE_AHEAD, the v_j slot with step t + DQ */
            const int64_t t = t0 + d;
            if (t + LAC_MF_CODE_AHEAD < steps) {
                c[d] = __ldg(code + t + LAC_MF_CODE_AHEAD);
                r[d] = __ldg(rating + t + LAC_MF_CODE_AHEAD);
            }
            if (t + DQ < steps) {
                const int32_t cn = c[(d + DQ) % LAC_MF_CODE_AHEAD], j = cn & LAC_MF_ITEM_MASK;
                load_row<G, V, FULL>(q[slot], Q4 + (int64_t)j * pieces, sub, pieces, cn >= 0);
                bj[slot] = (a.use_bias && cn >= 0) ? __ldcg(a.item_bias + (int64_t)j * LAC_MF_BIAS_STRIDE) : 0.0f;
            }
        }
    }
    if (user >= 0) finish_run<G, V, FULL>(a, user, weight, p, p0, bu, bu0, sub);
    lac_mf_warp_add(a.sse, sse, lane);
}

/* The general path for rows wider than the registers hold: a warp per group,
 * u_i in global memory, updated in place (the runs of a split row share it,
 * Hogwild), lanes striding over the row. */
static __global__ void __launch_bounds__(32 * LAC_MF_WARPS_PER_BLOCK) sgd_epoch_general(lac_mf_cuda_epoch_args a)
{
    const int lane = threadIdx.x & 31;
    const int64_t group = (int64_t)blockIdx.x * LAC_MF_WARPS_PER_BLOCK + (threadIdx.x >> 5);
    const int32_t *code = a.code + group * a.steps;
    const float *rating = a.rating + group * a.steps;
    const int stride = a.stride;
    float sse = 0.0f;
    int64_t user = -1, next_run = a.group_first_run[group];
    float *pu = NULL;
    for (int64_t t = 0; t < a.steps; t++) {
        const int32_t cd = code[t];
        if (cd < 0) break;   /* padding: the stream has ended */
        if (cd & LAC_MF_RUN_START) {
            user = a.run_user[next_run];
            next_run++;
            pu = a.P + user * stride;
        }
        const int32_t j = cd & LAC_MF_ITEM_MASK;
        float *qj = a.Q + (int64_t)j * stride;
        float part = 0.0f;
        for (int f = lane; f < stride; f += 32) part = fmaf(__ldcg(pu + f), __ldcg(qj + f), part);
        const float dot = lac_mf_warp_sum(part);
        const float bu = __ldcg(a.user_bias + user);
        const float bj = a.use_bias ? __ldcg(a.item_bias + (int64_t)j * LAC_MF_BIAS_STRIDE) : 0.0f;
        const float e = rating[t] - (a.mean + bu + bj + dot);
        const float step = a.lr * e;
        sse = fmaf(e, e, sse);
        __syncwarp();
        if (a.use_bias && lane == 0) {
            a.user_bias[user] = fmaf(a.shrink_b, bu, step);
            a.item_bias[(int64_t)j * LAC_MF_BIAS_STRIDE] = fmaf(a.shrink_b, bj, step);
        }
        for (int f = lane; f < stride; f += 32) {
            const float pf = __ldcg(pu + f), qf = __ldcg(qj + f);
            pu[f] = fmaf(a.shrink, pf, step * qf);
            qj[f] = fmaf(a.shrink, qf, step * pf);
        }
        __syncwarp();
    }
    if (lane == 0) atomicAdd(a.sse + group % LAC_MF_SSE_SLOTS, (double)sse);
}
/* A popular item's replicas: averaged into every one of them (merge), or the
 * item's own row copied to them (spread). A warp per item. */
static __global__ void merge_replicas(const int32_t *__restrict__ hot_item, const int32_t *__restrict__ hot_first,
                                      const int32_t *__restrict__ hot_count, int64_t hot_items, float *__restrict__ Q,
                                      float *__restrict__ item_bias, int stride, int spread)
{
    const int lane = threadIdx.x & 31;
    const int64_t h = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    if (h >= hot_items) return;
    const int64_t j = hot_item[h], first = hot_first[h];
    const int n = hot_count[h];
    const float inv = 1.0f / (float)n;
    for (int f = lane; f <= stride; f += 32) {
        /* f == stride stands for the bias */
        float *own = f < stride ? Q + j * stride + f : item_bias + j * LAC_MF_BIAS_STRIDE;
        float value = *own;
        if (!spread) {
            for (int r = 1; r < n; r++)
                value += f < stride ? Q[(first + r - 1) * stride + f] : item_bias[(first + r - 1) * LAC_MF_BIAS_STRIDE];
            value *= inv;
            *own = value;
        }
        for (int r = 1; r < n; r++) {
            if (f < stride) Q[(first + r - 1) * stride + f] = value;
            else item_bias[(first + r - 1) * LAC_MF_BIAS_STRIDE] = value;
        }
    }
}

/* Validation: a warp per rating, the prediction clamped as on the host;
 * -1 marks a user or item the model has not seen. */
static __global__ void validation_sse(const int32_t *__restrict__ vu, const int32_t *__restrict__ vi,
                                      const float *__restrict__ vr, int64_t count, const float *__restrict__ P,
                                      const float *__restrict__ Q, const float *__restrict__ user_bias,
                                      const float *__restrict__ item_bias, int k, int stride, float mean, float lo,
                                      float hi, double *__restrict__ sse_out)
{
    const int lane = threadIdx.x & 31;
    const int64_t warp = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int64_t warps = ((int64_t)gridDim.x * blockDim.x) >> 5;
    float sse = 0.0f;
    for (int64_t i = warp; i < count; i += warps) {
        const int32_t u = vu[i], j = vi[i];
        float part = 0.0f;
        if (u >= 0 && j >= 0)
            for (int f = lane; f < k; f += 32) part = fmaf(P[(int64_t)u * stride + f], Q[(int64_t)j * stride + f], part);
        float s = mean + lac_mf_warp_sum(part) + (u >= 0 ? user_bias[u] : 0.0f) +
                  (j >= 0 ? item_bias[(int64_t)j * LAC_MF_BIAS_STRIDE] : 0.0f);
        s = fminf(fmaxf(s, lo), hi);
        const float e = vr[i] - s;
        sse = fmaf(e, e, sse);
    }
    if (lane == 0) atomicAdd(sse_out + (warp & (LAC_MF_SSE_SLOTS - 1)), (double)sse);
}

/* The kernels built: every G with V = 1..4 whole pieces (v_j one or two steps
 * ahead), and full warps over a partly filled last slot. */
template <int G, int V, bool FULL>
static lac_mf_cuda_epoch_fn kernel_ahead(int ahead)
{
    return ahead >= 2 ? cusgd_epoch<G, V, FULL, 2> : cusgd_epoch<G, V, FULL, 1>;
}

template <int G>
static lac_mf_cuda_epoch_fn kernel_full(int pieces_per_lane, int ahead)
{
    switch (pieces_per_lane) {
    case 1: return kernel_ahead<G, 1, true>(ahead);
    case 2: return kernel_ahead<G, 2, true>(ahead);
    case 3: return kernel_ahead<G, 3, true>(ahead);
    case 4: return kernel_ahead<G, 4, true>(ahead);
    default: return NULL;
    }
}

static lac_mf_cuda_epoch_fn kernel_masked(int pieces_per_lane)
{
    switch (pieces_per_lane) {
    case 1: return cusgd_epoch<32, 1, false, 1>;
    case 2: return cusgd_epoch<32, 2, false, 1>;
    case 3: return cusgd_epoch<32, 3, false, 1>;
    case 4: return cusgd_epoch<32, 4, false, 1>;
    case 5: return cusgd_epoch<32, 5, false, 1>;
    case 6: return cusgd_epoch<32, 6, false, 1>;
    case 7: return cusgd_epoch<32, 7, false, 1>;
    case 8: return cusgd_epoch<32, 8, false, 1>;
    default: return NULL;
    }
}

/* Lanes per group for a row of `pieces` float4: 8 lanes where each then
 * holds one or two pieces (F = 32: one float4 a lane, four users a warp),
 * else 4, 16 or 32 lanes with at most two pieces a lane, else at most four
 * (measured at F = 128: 16 or 32 lanes with two or one piece 6% faster than
 * 8 lanes with four); rows that no group divides evenly take a full warp with
 * the last slot partly filled; wider rows the general path. `want` (a tuning
 * knob, 0: none) picks G when it fits. */
static lac_mf_cuda_epoch_fn choose_kernel(int pieces, int want, int ahead, int *lanes)
{
    static const int order[4] = {8, 4, 16, 32};
    if (want == 4 || want == 8 || want == 16 || want == 32) {
        if (pieces % want == 0 && pieces / want <= 4) {
            *lanes = want;
            return want == 4 ? kernel_full<4>(pieces / 4, ahead) : want == 8 ? kernel_full<8>(pieces / 8, ahead)
                   : want == 16 ? kernel_full<16>(pieces / 16, ahead) : kernel_full<32>(pieces / 32, ahead);
        }
    }
    for (int i = 0; i < 8; i++) {
        int g = order[i % 4];
        if (pieces % g || pieces / g > (i < 4 ? 2 : 4)) continue;
        *lanes = g;
        return g == 4 ? kernel_full<4>(pieces / 4, ahead) : g == 8 ? kernel_full<8>(pieces / 8, ahead)
               : g == 16 ? kernel_full<16>(pieces / 16, ahead) : kernel_full<32>(pieces / 32, ahead);
    }
    if (pieces <= 32 * LAC_MF_MAX_PIECES) {
        *lanes = 32;
        return kernel_masked((pieces + 31) / 32);
    }
    *lanes = 32;
    return sgd_epoch_general;
}

lac_mf_cuda_kernel lac_mf_cuda_choose_kernel(int pieces, int want, int ahead)
{
    lac_mf_cuda_kernel k;
    k.lanes = 32;
    k.fn = choose_kernel(pieces, want, ahead, &k.lanes);
    k.groups_per_block = LAC_MF_WARPS_PER_BLOCK * (k.fn == sgd_epoch_general ? 1 : 32 / k.lanes);
    return k;
}

lac_status lac_mf_cuda_occupancy(lac_ctx_t ctx, const lac_mf_cuda_kernel *k, int *blocks_per_sm)
{
    LAC_CUDA_CHECK(ctx, cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks_per_sm, k->fn,
                                                                      32 * LAC_MF_WARPS_PER_BLOCK, 0));
    return LAC_SUCCESS;
}

lac_status lac_mf_cuda_launch_epoch(lac_ctx_t ctx, const lac_mf_cuda_kernel *k, unsigned blocks,
                                    const lac_mf_cuda_epoch_args *a)
{
    k->fn<<<blocks, 32 * LAC_MF_WARPS_PER_BLOCK, 0, ctx->cuda->stream>>>(*a);
    LAC_CUDA_CHECK_LAUNCH(ctx);
    return LAC_SUCCESS;
}

lac_status lac_mf_cuda_launch_replicas(lac_ctx_t ctx, const int32_t *hot_item, const int32_t *hot_first,
                                       const int32_t *hot_count, int64_t hot_items, float *Q, float *item_bias,
                                       int stride, int spread)
{
    if (hot_items == 0) return LAC_SUCCESS;
    unsigned blocks = (unsigned)((hot_items + 7) / 8);
    merge_replicas<<<blocks, 256, 0, ctx->cuda->stream>>>(hot_item, hot_first, hot_count, hot_items, Q, item_bias,
                                                          stride, spread);
    LAC_CUDA_CHECK_LAUNCH(ctx);
    return LAC_SUCCESS;
}

lac_status lac_mf_cuda_launch_validation(lac_ctx_t ctx, const int32_t *user, const int32_t *item, const float *rating,
                                         int64_t count, const float *P, const float *Q, const float *user_bias,
                                         const float *item_bias, int k, int stride, float mean, float lo, float hi,
                                         double *sse)
{
    int64_t warps = count < 65536 ? count : 65536;
    unsigned blocks = (unsigned)((warps + 7) / 8);
    validation_sse<<<blocks, 256, 0, ctx->cuda->stream>>>(user, item, rating, count, P, Q, user_bias, item_bias, k,
                                                          stride, mean, lo, hi, sse);
    LAC_CUDA_CHECK_LAUNCH(ctx);
    return LAC_SUCCESS;
}
