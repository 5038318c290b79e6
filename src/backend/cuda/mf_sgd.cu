/* mf on CUDA: CUSGD++ (Algorithm 2). A group of G lanes (G = 4..32, a power
 * of two) owns a run of one user's ratings: u_i lives in the group's
 * registers as float4 pieces (piece c of the row in lane c % G, slot c / G),
 * u_i . v_j is a shuffle reduction over the G lanes, v_j and bhat_j are
 * updated in global memory (Hogwild across groups, as in the paper) and u_i
 * goes back to global memory once, at the end of the run. With F = 32 a group
 * is 8 lanes holding one float4 each, so a warp trains four users at once and
 * the reduction takes three shuffles instead of five.
 *
 * Schedule, built once per training: users in order of rating count (heaviest
 * first), a row longer than run_max cut into runs; runs dealt to groups by
 * longest-processing-time (each to the least loaded group), so every group
 * walks a stream of about the same length. The streams are laid out group by
 * group, padded to one common length, with a flag on the first rating of each
 * run: the epoch loop is the same for every lane, with no divergence except
 * where a group switches user. The next steps' (item, rating) are loaded eight
 * steps ahead, the next v_j row one step ahead (DQ = 1; two steps measured no
 * faster), so that L2 latency overlaps the current update while a v_j read is
 * at most DQ updates old.
 *
 * Popular items: every update of v_j is a read and a write of one line of L2,
 * and the accesses to one line are served one after another, so the item
 * with the most ratings sets a floor under the epoch (measured on an H100:
 * 5.3 ms an epoch on the MovieLens-10M shape whatever the number of groups,
 * ~85 ns for each of the 62,593 ratings of its most rated item). An item with
 * more than `hot` ratings therefore gets replicas, R = ceil(count / hot) rows
 * in all; group g updates replica g mod R, and after each epoch the replicas
 * are averaged (like the split rows of u_i) and the average copied back to
 * each. Rows and biases of the replicas sit after the items' own, so the
 * kernel indexes them like any item. hot starts at 512 ratings and doubles
 * until the replica rows take at most a third of L2: more would push the
 * rows themselves out of it (measured on the Netflix shape at F = 128:
 * 22.4 ms an epoch with 40 MB of replica rows, 18.9 ms with 17 MB). Item
 * biases sit one L2 line apart for the same reason (2.7 ms an epoch instead
 * of 5.3 with nothing else changed).
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
#include "backend/cuda/cuda_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define WARPS_PER_BLOCK 4
#define RUN_MAX 512           /* ratings per run at most; longer rows are split */
#define CODE_AHEAD 8          /* steps of (item, rating) loaded ahead; streams are padded to a multiple */
#define NEW_RUN 0x40000000    /* flag on the first rating of a run */
#define ITEM_MASK 0x3fffffff
#define PAD_CODE (-1)         /* padding after a group's last run */
#define MAX_PIECES 8          /* float4 pieces per lane: F <= 32 x 4 x 8 in registers */
#define SSE_SLOTS 64          /* partial sums of e^2, spread so that warps' atomics rarely meet */
/* Groups in flight: each gets at least this many ratings an epoch. Every
 * group updates v_j without locks, and the groups that meet on a popular
 * item overwrite each other's updates; fewer, longer streams lose fewer
 * (measured, MovieLens-10M shape: 16,384 groups instead of 8,688 were 4%
 * faster and 0.0005 worse in validation RMSE after 15 epochs). */
#define RATINGS_PER_GROUP 1024
#define HOT_RATINGS 512       /* ratings an epoch per row of a popular item, at least */
#define MAX_REPLICAS 256      /* rows of one item at most */
/* Item biases one L2 line apart: packed, 32 items' biases would share a line
 * and meet the popular-line limit above. */
#define BIAS_STRIDE 32

/* The arguments of one epoch (passed by value). */
struct epoch_args {
    const int32_t *code;            /* groups x steps: item | NEW_RUN, or PAD_CODE */
    const float *rating;            /* groups x steps */
    const int64_t *group_first_run; /* groups: index of the group's first run */
    const int32_t *run_user;        /* runs, group by group, in stream order */
    const float *run_weight;        /* 1: the run is the whole row; else its share of the row */
    int64_t steps;                  /* per group, a multiple of CODE_AHEAD */
    float *P, *Q, *user_bias;
    float *item_bias;               /* BIAS_STRIDE apart */
    int stride;                     /* floats per factor row, a multiple of 16 */
    float mean, lr, shrink, shrink_b;
    int use_bias;
    double *sse;
};

typedef void (*epoch_kernel)(epoch_args);

struct lac_mf_cuda_state {
    lac_ctx_t ctx;
    int64_t num_users, num_items, nnz, runs, valid_count;
    int k, stride;
    float mean, lambda, lambda_bias, rating_min, rating_max;
    int use_bias;
    /* the schedule */
    epoch_kernel kernel;
    int64_t groups, steps;
    unsigned blocks;
    int64_t rows, hot_items;  /* item rows with replicas; items that have replicas */
    /* device */
    int32_t *code;
    float *rating;
    int64_t *group_first_run;
    int32_t *run_user;
    float *run_weight;
    int32_t *hot_item, *hot_first, *hot_count;   /* per hot item: its index, first replica row, rows in all */
    float *P, *Q, *user_bias;
    float *item_bias;        /* BIAS_STRIDE apart */
    float *best;             /* P, Q, biases of the kept epoch, allocated on first keep */
    int32_t *valid_user, *valid_item;
    float *valid_rating;
    double *sums;            /* SSE_SLOTS training partial sums, then SSE_SLOTS validation */
};

__device__ __forceinline__ float warp_sum(float x)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}

__device__ __forceinline__ float dot4(float4 a, float4 b, float acc)
{
    return fmaf(a.w, b.w, fmaf(a.z, b.z, fmaf(a.y, b.y, fmaf(a.x, b.x, acc))));
}

__device__ __forceinline__ float4 axpby4(float s, float4 a, float t, float4 b)
{
    return make_float4(fmaf(s, a.x, t * b.x), fmaf(s, a.y, t * b.y), fmaf(s, a.z, t * b.z), fmaf(s, a.w, t * b.w));
}

/* The V float4 pieces of a factor row that lane `sub` of a group holds. */
template <int G, int V, bool FULL>
__device__ __forceinline__ void load_row(float4 (&x)[V], const float4 *row, int sub, int pieces, bool present)
{
#pragma unroll
    for (int v = 0; v < V; v++) {
        const int c = sub + G * v;
        x[v] = (present && (FULL || c < pieces)) ? __ldcg(row + c) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
}

/* The end of a run: u_i (and b_i) back to memory, or the weighted change
 * folded in when other groups hold other runs of the same row. */
template <int G, int V, bool FULL>
__device__ __forceinline__ void finish_run(const epoch_args &a, int64_t user, float weight, const float4 (&p)[V],
                                           const float4 (&p0)[V], float bu, float bu0, int sub)
{
    const int pieces = a.stride >> 2;
    float4 *row = (float4 *)(a.P + user * a.stride);
    if (weight < 1.0f) {
#pragma unroll
        for (int v = 0; v < V; v++) {
            const int c = sub + G * v;
            if (FULL || c < pieces) {
                float *f = (float *)(row + c);
                atomicAdd(f + 0, weight * (p[v].x - p0[v].x));
                atomicAdd(f + 1, weight * (p[v].y - p0[v].y));
                atomicAdd(f + 2, weight * (p[v].z - p0[v].z));
                atomicAdd(f + 3, weight * (p[v].w - p0[v].w));
            }
        }
        if (sub == 0) atomicAdd(a.user_bias + user, weight * (bu - bu0));
    } else {
#pragma unroll
        for (int v = 0; v < V; v++) {
            const int c = sub + G * v;
            if (FULL || c < pieces) __stcg(row + c, p[v]);
        }
        if (sub == 0) a.user_bias[user] = bu;
    }
}

/* One epoch of update rule (5), CUSGD++ style, G lanes per user run, V float4
 * pieces per lane (FULL: G x V pieces are exactly the row; else lanes past the
 * row's end hold zeros), v_j loaded DQ steps ahead. */
template <int G, int V, bool FULL, int DQ>
__global__ void __launch_bounds__(32 * WARPS_PER_BLOCK) cusgd_epoch(epoch_args a)
{
    constexpr int GROUPS_PER_WARP = 32 / G;
    const int lane = threadIdx.x & 31, sub = lane & (G - 1);
    const int64_t group =
        ((int64_t)blockIdx.x * WARPS_PER_BLOCK + (threadIdx.x >> 5)) * GROUPS_PER_WARP + lane / G;
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

    /* the pipeline: codes and ratings CODE_AHEAD steps ahead, v_j rows DQ */
    int32_t c[CODE_AHEAD];
    float r[CODE_AHEAD];
    float4 q[DQ][V];
    float bj[DQ];
#pragma unroll
    for (int d = 0; d < CODE_AHEAD; d++) {
        c[d] = __ldg(code + d);
        r[d] = __ldg(rating + d);
    }
#pragma unroll
    for (int d = 0; d < DQ; d++) {
        const int32_t j = c[d] & ITEM_MASK;
        load_row<G, V, FULL>(q[d], Q4 + (int64_t)j * pieces, sub, pieces, c[d] >= 0);
        bj[d] = (a.use_bias && c[d] >= 0) ? __ldcg(a.item_bias + (int64_t)j * BIAS_STRIDE) : 0.0f;
    }

    for (int64_t t0 = 0; t0 < steps; t0 += CODE_AHEAD) {
#pragma unroll
        for (int d = 0; d < CODE_AHEAD; d++) {
            const int slot = d % DQ;
            const int32_t cd = c[d];
            if (cd >= 0 && (cd & NEW_RUN)) {   /* the same for the group's lanes */
                if (user >= 0) finish_run<G, V, FULL>(a, user, weight, p, p0, bu, bu0, sub);
                user = a.run_user[next_run];
                weight = a.run_weight[next_run];
                next_run++;
                load_row<G, V, FULL>(p, (const float4 *)(a.P + user * a.stride), sub, pieces, true);
#pragma unroll
                for (int v = 0; v < V; v++) p0[v] = p[v];
                bu = bu0 = __ldcg(a.user_bias + user);
            }
            float part = 0.0f;
#pragma unroll
            for (int v = 0; v < V; v++) part = dot4(p[v], q[slot][v], part);
#pragma unroll
            for (int o = G / 2; o > 0; o >>= 1) part += __shfl_xor_sync(0xffffffffu, part, o);
            if (cd >= 0) {
                const int32_t j = cd & ITEM_MASK;
                const float e = r[d] - (a.mean + bu + bj[slot] + part);
                const float step = a.lr * e;
                if (sub == 0) sse = fmaf(e, e, sse);
                if (a.use_bias) {
                    bu = fmaf(a.shrink_b, bu, step);
                    if (sub == 0) a.item_bias[(int64_t)j * BIAS_STRIDE] = fmaf(a.shrink_b, bj[slot], step);
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
            /* refill: this slot's code with step t + CODE_AHEAD, the v_j slot with step t + DQ */
            const int64_t t = t0 + d;
            if (t + CODE_AHEAD < steps) {
                c[d] = __ldg(code + t + CODE_AHEAD);
                r[d] = __ldg(rating + t + CODE_AHEAD);
            }
            if (t + DQ < steps) {
                const int32_t cn = c[(d + DQ) % CODE_AHEAD], j = cn & ITEM_MASK;
                load_row<G, V, FULL>(q[slot], Q4 + (int64_t)j * pieces, sub, pieces, cn >= 0);
                bj[slot] = (a.use_bias && cn >= 0) ? __ldcg(a.item_bias + (int64_t)j * BIAS_STRIDE) : 0.0f;
            }
        }
    }
    if (user >= 0) finish_run<G, V, FULL>(a, user, weight, p, p0, bu, bu0, sub);
    sse = warp_sum(sse);
    if (lane == 0) atomicAdd(a.sse + (blockIdx.x * WARPS_PER_BLOCK + (threadIdx.x >> 5)) % SSE_SLOTS, (double)sse);
}

/* The general path for rows wider than the registers hold: a warp per group,
 * u_i in global memory, updated in place (the runs of a split row share it,
 * Hogwild), lanes striding over the row. */
__global__ void __launch_bounds__(32 * WARPS_PER_BLOCK) sgd_epoch_general(epoch_args a)
{
    const int lane = threadIdx.x & 31;
    const int64_t group = (int64_t)blockIdx.x * WARPS_PER_BLOCK + (threadIdx.x >> 5);
    const int32_t *code = a.code + group * a.steps;
    const float *rating = a.rating + group * a.steps;
    const int stride = a.stride;
    float sse = 0.0f;
    int64_t user = -1, next_run = a.group_first_run[group];
    float *pu = NULL;
    for (int64_t t = 0; t < a.steps; t++) {
        const int32_t cd = code[t];
        if (cd < 0) break;   /* padding: the stream has ended */
        if (cd & NEW_RUN) {
            user = a.run_user[next_run];
            next_run++;
            pu = a.P + user * stride;
        }
        const int32_t j = cd & ITEM_MASK;
        float *qj = a.Q + (int64_t)j * stride;
        float part = 0.0f;
        for (int f = lane; f < stride; f += 32) part = fmaf(__ldcg(pu + f), __ldcg(qj + f), part);
        const float dot = warp_sum(part);
        const float bu = __ldcg(a.user_bias + user);
        const float bj = a.use_bias ? __ldcg(a.item_bias + (int64_t)j * BIAS_STRIDE) : 0.0f;
        const float e = rating[t] - (a.mean + bu + bj + dot);
        const float step = a.lr * e;
        sse = fmaf(e, e, sse);
        __syncwarp();
        if (a.use_bias && lane == 0) {
            a.user_bias[user] = fmaf(a.shrink_b, bu, step);
            a.item_bias[(int64_t)j * BIAS_STRIDE] = fmaf(a.shrink_b, bj, step);
        }
        for (int f = lane; f < stride; f += 32) {
            const float pf = __ldcg(pu + f), qf = __ldcg(qj + f);
            pu[f] = fmaf(a.shrink, pf, step * qf);
            qj[f] = fmaf(a.shrink, qf, step * pf);
        }
        __syncwarp();
    }
    if (lane == 0) atomicAdd(a.sse + group % SSE_SLOTS, (double)sse);
}
/* A popular item's replicas: averaged into every one of them (merge), or the
 * item's own row copied to them (spread). A warp per item. */
__global__ void merge_replicas(const int32_t *__restrict__ hot_item, const int32_t *__restrict__ hot_first,
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
        float *own = f < stride ? Q + j * stride + f : item_bias + j * BIAS_STRIDE;
        float value = *own;
        if (!spread) {
            for (int r = 1; r < n; r++)
                value += f < stride ? Q[(first + r - 1) * stride + f] : item_bias[(first + r - 1) * BIAS_STRIDE];
            value *= inv;
            *own = value;
        }
        for (int r = 1; r < n; r++) {
            if (f < stride) Q[(first + r - 1) * stride + f] = value;
            else item_bias[(first + r - 1) * BIAS_STRIDE] = value;
        }
    }
}

static lac_status replicas(lac_ctx_t ctx, lac_mf_cuda_state *s, int spread)
{
    if (s->hot_items == 0) return LAC_SUCCESS;
    unsigned blocks = (unsigned)((s->hot_items + 7) / 8);
    merge_replicas<<<blocks, 256, 0, ctx->cuda->stream>>>(s->hot_item, s->hot_first, s->hot_count, s->hot_items, s->Q,
                                                          s->item_bias, s->stride, spread);
    LAC_CUDA_CHECK_LAUNCH(ctx);
    return LAC_SUCCESS;
}

/* Validation: a warp per rating, the prediction clamped as on the host;
 * -1 marks a user or item the model has not seen. */
__global__ void validation_sse(const int32_t *__restrict__ vu, const int32_t *__restrict__ vi,
                               const float *__restrict__ vr, int64_t count, const float *__restrict__ P,
                               const float *__restrict__ Q, const float *__restrict__ user_bias,
                               const float *__restrict__ item_bias, int k, int stride, float mean, float lo, float hi,
                               double *__restrict__ sse_out)
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
        float s = mean + warp_sum(part) + (u >= 0 ? user_bias[u] : 0.0f) +
                  (j >= 0 ? item_bias[(int64_t)j * BIAS_STRIDE] : 0.0f);
        s = fminf(fmaxf(s, lo), hi);
        const float e = vr[i] - s;
        sse = fmaf(e, e, sse);
    }
    if (lane == 0) atomicAdd(sse_out + (warp & (SSE_SLOTS - 1)), (double)sse);
}

static void free_state(lac_mf_cuda_state *s)
{
    if (!s) return;
    void *ptrs[] = {s->code, s->rating, s->group_first_run, s->run_user, s->run_weight, s->hot_item, s->hot_first,
                    s->hot_count, s->P, s->Q, s->user_bias, s->item_bias, s->best, s->valid_user, s->valid_item,
                    s->valid_rating, s->sums};
    for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0]; i++)
        if (ptrs[i]) cudaFree(ptrs[i]);
    free(s);
}

template <typename T>
static lac_status upload(lac_ctx_t ctx, T **dst, const T *src, size_t count)
{
    size_t bytes = (count ? count : 1) * sizeof(T);
    LAC_CUDA_CHECK(ctx, cudaMalloc((void **)dst, bytes));
    if (count) LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(*dst, src, count * sizeof(T), cudaMemcpyHostToDevice, ctx->cuda->stream));
    return LAC_SUCCESS;
}

/* The kernels built: every G with V = 1..4 whole pieces (v_j one or two steps
 * ahead), and full warps over a partly filled last slot. */
template <int G, int V, bool FULL>
static epoch_kernel kernel_ahead(int ahead)
{
    return ahead >= 2 ? cusgd_epoch<G, V, FULL, 2> : cusgd_epoch<G, V, FULL, 1>;
}

template <int G>
static epoch_kernel kernel_full(int pieces_per_lane, int ahead)
{
    switch (pieces_per_lane) {
    case 1: return kernel_ahead<G, 1, true>(ahead);
    case 2: return kernel_ahead<G, 2, true>(ahead);
    case 3: return kernel_ahead<G, 3, true>(ahead);
    case 4: return kernel_ahead<G, 4, true>(ahead);
    default: return NULL;
    }
}

static epoch_kernel kernel_masked(int pieces_per_lane)
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
static epoch_kernel choose_kernel(int pieces, int want, int ahead, int *lanes)
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
    if (pieces <= 32 * MAX_PIECES) {
        *lanes = 32;
        return kernel_masked((pieces + 31) / 32);
    }
    *lanes = 32;
    return sgd_epoch_general;
}

/* Rows (the item's own and its replicas) for an item of `count` ratings. */
static int64_t replica_rows(int64_t count, int64_t hot, int64_t groups)
{
    int64_t n = (count + hot - 1) / hot;
    if (n > MAX_REPLICAS) n = MAX_REPLICAS;
    if (n > groups) n = groups;
    return n < 1 ? 1 : n;
}

static int64_t knob(const char *name, int64_t fallback)
{
    const char *v = getenv(name);
    return v && atoll(v) >= 1 ? atoll(v) : fallback;
}

/* Longest processing time first: runs (longest first) each to the least
 * loaded group, through a binary min-heap of (load, group). */
static void deal_runs(const int64_t *run_len, int64_t runs, int64_t groups, int64_t *load, int64_t *heap,
                      int64_t *run_group)
{
    for (int64_t g = 0; g < groups; g++) load[g] = 0, heap[g] = g;
#define LESS(x, y) (load[x] < load[y] || (load[x] == load[y] && (x) < (y)))
    for (int64_t r = 0; r < runs; r++) {
        int64_t g = heap[0];
        run_group[r] = g;
        load[g] += run_len[r];
        for (int64_t i = 0;;) {   /* sift the root down */
            int64_t l = 2 * i + 1, m = i;
            if (l < groups && LESS(heap[l], heap[m])) m = l;
            if (l + 1 < groups && LESS(heap[l + 1], heap[m])) m = l + 1;
            if (m == i) break;
            int64_t t = heap[i];
            heap[i] = heap[m];
            heap[m] = t;
            i = m;
        }
    }
#undef LESS
}

extern "C" lac_status lac_cuda_mf_begin(lac_ctx_t ctx, const lac_mf_cuda_call *call, lac_mf_cuda_state **out)
{
    LAC_CHECK(lac_cuda_use_device(ctx));
    const lac_mf_data *d = call->data;
    lac_mf_model_t m = call->model;
    if (d->num_items > ITEM_MASK)
        return lac_error(ctx, LAC_ERR_UNSUPPORTED, "mf CUDA: %lld items, more than the %d the schedule can index",
                         (long long)d->num_items, ITEM_MASK);
    lac_mf_cuda_state *s = (lac_mf_cuda_state *)calloc(1, sizeof *s);
    if (!s) return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "out of host memory for the CUDA mf state");
    s->ctx = ctx;
    s->num_users = d->num_users;
    s->num_items = d->num_items;
    s->nnz = d->nnz;
    s->k = m->k;
    s->stride = m->stride;
    s->mean = (float)m->mean;
    s->lambda = (float)m->params.lambda;
    s->lambda_bias = (float)m->params.lambda_bias;
    s->use_bias = m->params.use_bias;
    s->rating_min = m->rating_min;
    s->rating_max = m->rating_max;
    lac_status st = LAC_SUCCESS;
    int64_t *run_len = NULL, *run_src = NULL, *order = NULL, *bucket = NULL, *deal_len = NULL, *run_group = NULL;
    int64_t *slot_of = NULL, *load = NULL, *heap = NULL, *first = NULL;
    int32_t *code = NULL, *run_user = NULL;
    float *rating = NULL, *run_weight = NULL;
    int64_t runs = 0, groups = 0, share = 0, run_max = 0, per_block = 0, hot = 0;
    int32_t *replica_count = NULL, *replica_first = NULL, *hot_item = NULL, *hot_first = NULL, *hot_count = NULL;
    int lanes = 32, per_sm = 0;

    /* the kernel and the number of groups in flight (tuning knobs, for
     * measurements: LACUNA_MF_CUDA_LANES, _AHEAD, _GROUPS, _RUN_MAX) */
    s->kernel = choose_kernel(s->stride / 4, (int)knob("LACUNA_MF_CUDA_LANES", 0),
                              (int)knob("LACUNA_MF_CUDA_AHEAD", 1), &lanes);
    per_block = (int64_t)WARPS_PER_BLOCK * (s->kernel == sgd_epoch_general ? 1 : 32 / lanes);
    LAC_CUDA_CHECK_GOTO(ctx, cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, s->kernel, 32 * WARPS_PER_BLOCK, 0),
                        st, fail);
    {
        int64_t resident = (int64_t)(per_sm > 0 ? per_sm : 1) * ctx->cuda->prop.multiProcessorCount;
        int64_t want = knob("LACUNA_MF_CUDA_GROUPS", d->nnz / RATINGS_PER_GROUP);
        int64_t blocks = (want + per_block - 1) / per_block;
        if (blocks > resident) blocks = resident;   /* one wave: no block waits for another */
        if (blocks < 1) blocks = 1;
        s->blocks = (unsigned)blocks;
        s->groups = blocks * per_block;
    }

    /* popular items' replicas (LACUNA_MF_CUDA_HOT: ratings a row, for tuning) */
    replica_count = (int32_t *)calloc((size_t)d->num_items + 1, sizeof *replica_count);
    replica_first = (int32_t *)calloc((size_t)d->num_items + 1, sizeof *replica_first);
    if (!replica_count || !replica_first) {
        st = lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "out of host memory for %lld item counts", (long long)d->num_items);
        goto fail;
    }
    for (int64_t a = 0; a < d->nnz; a++) replica_count[d->col[a]]++;
    hot = knob("LACUNA_MF_CUDA_HOT", 0);
    if (hot == 0) {
        const double budget = ctx->cuda->prop.l2CacheSize / 3.0, row_bytes = (double)s->stride * sizeof(float);
        for (hot = HOT_RATINGS;; hot *= 2) {
            int64_t extra = 0;
            for (int64_t j = 0; j < d->num_items; j++) extra += replica_rows(replica_count[j], hot, s->groups) - 1;
            if ((double)extra * row_bytes <= budget || hot > d->nnz) break;
        }
    }
    s->rows = d->num_items;
    for (int64_t j = 0; j < d->num_items; j++) {
        int64_t n = replica_rows(replica_count[j], hot, s->groups);
        replica_count[j] = (int32_t)n;
        replica_first[j] = (int32_t)s->rows;   /* rows of replicas 1 .. n-1 */
        s->rows += n - 1;
        s->hot_items += n > 1;
    }
    if (s->rows > ITEM_MASK) {
        st = lac_error(ctx, LAC_ERR_UNSUPPORTED, "mf CUDA: %lld item rows with replicas, more than %d",
                       (long long)s->rows, ITEM_MASK);
        goto fail;
    }
    hot_item = (int32_t *)malloc((size_t)(s->hot_items + 1) * sizeof *hot_item);
    hot_first = (int32_t *)malloc((size_t)(s->hot_items + 1) * sizeof *hot_first);
    hot_count = (int32_t *)malloc((size_t)(s->hot_items + 1) * sizeof *hot_count);
    if (!hot_item || !hot_first || !hot_count) {
        st = lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "out of host memory for %lld popular items",
                       (long long)s->hot_items);
        goto fail;
    }
    for (int64_t j = 0, h = 0; j < d->num_items; j++)
        if (replica_count[j] > 1) {
            hot_item[h] = (int32_t)j;
            hot_first[h] = replica_first[j];
            hot_count[h] = replica_count[j];
            h++;
        }

    /* runs: users in count order, each cut into pieces of at most run_max,
     * run_max small enough against a group's share for the deal to balance */
    groups = s->groups;
    share = (d->nnz + groups - 1) / groups;
    run_max = knob("LACUNA_MF_CUDA_RUN_MAX", RUN_MAX);
    if (run_max > share / 2) run_max = share / 2 > 32 ? share / 2 : 32;
    for (int64_t r = 0; r < d->num_users; r++) {
        int64_t u = d->row_order[r], len = d->row_start[u + 1] - d->row_start[u];
        runs += (len + run_max - 1) / run_max;
    }
    s->runs = runs;
    /* runs in count order (run_src: first rating, a CSR index) */
    run_len = (int64_t *)malloc((size_t)(runs + 1) * sizeof *run_len);
    run_src = (int64_t *)malloc((size_t)(runs + 1) * sizeof *run_src);
    order = (int64_t *)malloc((size_t)(runs + 1) * sizeof *order);
    bucket = (int64_t *)calloc((size_t)run_max + 2, sizeof *bucket);
    deal_len = (int64_t *)malloc((size_t)(runs + 1) * sizeof *deal_len);
    run_group = (int64_t *)malloc((size_t)(runs + 1) * sizeof *run_group);
    slot_of = (int64_t *)malloc((size_t)(runs + 1) * sizeof *slot_of);
    load = (int64_t *)malloc((size_t)groups * sizeof *load);
    heap = (int64_t *)malloc((size_t)groups * sizeof *heap);
    first = (int64_t *)calloc((size_t)groups + 1, sizeof *first);
    run_user = (int32_t *)malloc((size_t)(runs + 1) * sizeof *run_user);
    run_weight = (float *)malloc((size_t)(runs + 1) * sizeof *run_weight);
    if (!run_len || !run_src || !order || !bucket || !deal_len || !run_group || !slot_of || !load || !heap ||
        !first || !run_user || !run_weight) {
        st = lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "out of host memory for %lld runs", (long long)runs);
        goto fail;
    }
    {
        int64_t n = 0;
        for (int64_t r = 0; r < d->num_users; r++) {
            int64_t u = d->row_order[r], lo = d->row_start[u], hi = d->row_start[u + 1];
            for (int64_t a = lo; a < hi; a += run_max, n++) {
                run_src[n] = a;
                run_len[n] = a + run_max < hi ? run_max : hi - a;
            }
        }
        /* the deal order: longest first (a counting sort; ties keep the count order) */
        for (int64_t r = 0; r < runs; r++) bucket[run_max - run_len[r] + 1]++;
        for (int64_t b = 1; b <= run_max + 1; b++) bucket[b] += bucket[b - 1];
        for (int64_t r = 0; r < runs; r++) order[bucket[run_max - run_len[r]]++] = r;
        for (int64_t i = 0; i < runs; i++) deal_len[i] = run_len[order[i]];
    }
    deal_runs(deal_len, runs, groups, load, heap, run_group);
    {
        /* each group's stream: its runs in deal order, padded to `steps` */
        int64_t steps = 0;
        for (int64_t g = 0; g < groups; g++) steps = load[g] > steps ? load[g] : steps;
        steps = (steps + CODE_AHEAD - 1) / CODE_AHEAD * CODE_AHEAD;
        if (steps < CODE_AHEAD) steps = CODE_AHEAD;
        s->steps = steps;
        size_t cells = (size_t)groups * (size_t)steps;
        code = (int32_t *)malloc(cells * sizeof *code);
        rating = (float *)malloc(cells * sizeof *rating);
        if (!code || !rating) {
            st = lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "out of host memory for the mf schedule (%lld x %lld)",
                           (long long)groups, (long long)steps);
            goto fail;
        }
        for (size_t x = 0; x < cells; x++) code[x] = PAD_CODE, rating[x] = 0.0f;
        for (int64_t i = 0; i < runs; i++) first[run_group[i] + 1]++;
        for (int64_t g = 0; g < groups; g++) first[g + 1] += first[g];
        int64_t *filled = load, *next_slot = heap;   /* reused: the deal is done */
        for (int64_t g = 0; g < groups; g++) filled[g] = 0, next_slot[g] = first[g];
        for (int64_t i = 0; i < runs; i++) {
            const int64_t r = order[i], g = run_group[i], a0 = run_src[r];
            slot_of[r] = next_slot[g]++;
            int32_t *cg = code + g * steps;
            float *rg = rating + g * steps;
            for (int64_t a = a0; a < a0 + run_len[r]; a++, filled[g]++) {
                const int32_t j = d->col[a], replica = (int32_t)(g % replica_count[j]);
                const int32_t row = replica == 0 ? j : replica_first[j] + replica - 1;
                cg[filled[g]] = row | (a == a0 ? NEW_RUN : 0);
                rg[filled[g]] = d->val[a];
            }
        }
        /* each run's user and share of the row */
        int64_t n = 0;
        for (int64_t r = 0; r < d->num_users; r++) {
            int64_t u = d->row_order[r], lo = d->row_start[u], hi = d->row_start[u + 1];
            for (int64_t a = lo; a < hi; a += run_max, n++) {
                run_user[slot_of[n]] = (int32_t)u;
                run_weight[slot_of[n]] = hi - lo > run_max ? (float)run_len[n] / (float)(hi - lo) : 1.0f;
            }
        }
    }
    lac_log(ctx, LAC_LOG_INFO,
            "mf CUDA: %d lanes a user, %lld groups in %u blocks, %lld runs (at most %lld ratings), %lld steps a "
            "group (%.1f%% padding), %lld popular items (over %lld ratings) with %lld replica rows",
            lanes, (long long)groups, s->blocks, (long long)runs, (long long)run_max, (long long)s->steps,
            100.0 * (1.0 - (double)d->nnz / ((double)groups * (double)s->steps)), (long long)s->hot_items,
            (long long)hot,
            (long long)(s->rows - d->num_items));
    {
        size_t pu = (size_t)d->num_users * (size_t)s->stride, qi = (size_t)d->num_items * (size_t)s->stride;
        size_t rows_q = (size_t)s->rows * (size_t)s->stride;
        size_t cells = (size_t)groups * (size_t)s->steps;
        LAC_CHECK_GOTO(upload(ctx, &s->code, code, cells), st, fail);
        LAC_CHECK_GOTO(upload(ctx, &s->rating, rating, cells), st, fail);
        LAC_CHECK_GOTO(upload(ctx, &s->group_first_run, first, (size_t)groups), st, fail);
        LAC_CHECK_GOTO(upload(ctx, &s->run_user, run_user, (size_t)runs), st, fail);
        LAC_CHECK_GOTO(upload(ctx, &s->run_weight, run_weight, (size_t)runs), st, fail);
        LAC_CHECK_GOTO(upload(ctx, &s->P, m->P, pu), st, fail);
        LAC_CUDA_CHECK_GOTO(ctx, cudaMalloc((void **)&s->Q, (rows_q ? rows_q : 1) * sizeof(float)), st, fail);
        if (qi) LAC_CUDA_CHECK_GOTO(ctx, cudaMemcpyAsync(s->Q, m->Q, qi * sizeof(float), cudaMemcpyHostToDevice,
                                                         ctx->cuda->stream), st, fail);
        LAC_CHECK_GOTO(upload(ctx, &s->user_bias, m->user_bias, (size_t)d->num_users), st, fail);
        LAC_CUDA_CHECK_GOTO(ctx,
                            cudaMalloc((void **)&s->item_bias, ((size_t)s->rows + 1) * BIAS_STRIDE * sizeof(float)),
                            st, fail);
        if (d->num_items)
            LAC_CUDA_CHECK_GOTO(ctx, cudaMemcpy2DAsync(s->item_bias, BIAS_STRIDE * sizeof(float), m->item_bias,
                                                       sizeof(float), sizeof(float), (size_t)d->num_items,
                                                       cudaMemcpyHostToDevice, ctx->cuda->stream), st, fail);
        LAC_CHECK_GOTO(upload(ctx, &s->hot_item, hot_item, (size_t)s->hot_items), st, fail);
        LAC_CHECK_GOTO(upload(ctx, &s->hot_first, hot_first, (size_t)s->hot_items), st, fail);
        LAC_CHECK_GOTO(upload(ctx, &s->hot_count, hot_count, (size_t)s->hot_items), st, fail);
        LAC_CHECK_GOTO(replicas(ctx, s, 1), st, fail);
        if (call->valid) {
            s->valid_count = call->valid->count;
            LAC_CHECK_GOTO(upload(ctx, &s->valid_user, call->valid->user, (size_t)s->valid_count), st, fail);
            LAC_CHECK_GOTO(upload(ctx, &s->valid_item, call->valid->item, (size_t)s->valid_count), st, fail);
            LAC_CHECK_GOTO(upload(ctx, &s->valid_rating, call->valid->val, (size_t)s->valid_count), st, fail);
        }
        LAC_CUDA_CHECK_GOTO(ctx, cudaMalloc((void **)&s->sums, 2 * SSE_SLOTS * sizeof(double)), st, fail);
        /* the host arrays must outlive the asynchronous copies */
        LAC_CUDA_CHECK_GOTO(ctx, cudaStreamSynchronize(ctx->cuda->stream), st, fail);
    }
fail:
    if (st != LAC_SUCCESS) cudaStreamSynchronize(ctx->cuda->stream);
    free(run_len);
    free(run_src);
    free(order);
    free(bucket);
    free(deal_len);
    free(run_group);
    free(slot_of);
    free(load);
    free(heap);
    free(first);
    free(code);
    free(rating);
    free(run_user);
    free(run_weight);
    free(replica_count);
    free(replica_first);
    free(hot_item);
    free(hot_first);
    free(hot_count);
    if (st != LAC_SUCCESS) {
        free_state(s);
        return st;
    }
    *out = s;
    return LAC_SUCCESS;
}

extern "C" lac_status lac_cuda_mf_epoch(lac_ctx_t ctx, lac_mf_cuda_state *s, float lr, double *train_sse)
{
    cudaStream_t stream = ctx->cuda->stream;
    LAC_CUDA_CHECK(ctx, cudaMemsetAsync(s->sums, 0, SSE_SLOTS * sizeof(double), stream));
    if (s->runs > 0) {
        epoch_args a;
        a.code = s->code;
        a.rating = s->rating;
        a.group_first_run = s->group_first_run;
        a.run_user = s->run_user;
        a.run_weight = s->run_weight;
        a.steps = s->steps;
        a.P = s->P;
        a.Q = s->Q;
        a.user_bias = s->user_bias;
        a.item_bias = s->item_bias;
        a.stride = s->stride;
        a.mean = s->mean;
        a.lr = lr;
        a.shrink = 1.0f - lr * s->lambda;
        a.shrink_b = 1.0f - lr * s->lambda_bias;
        a.use_bias = s->use_bias;
        a.sse = s->sums;
        s->kernel<<<s->blocks, 32 * WARPS_PER_BLOCK, 0, stream>>>(a);
        LAC_CUDA_CHECK_LAUNCH(ctx);
        LAC_CHECK(replicas(ctx, s, 0));
    }
    double part[SSE_SLOTS], sse = 0.0;
    LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(part, s->sums, sizeof part, cudaMemcpyDeviceToHost, stream));
    LAC_CUDA_CHECK(ctx, cudaStreamSynchronize(stream));
    for (int i = 0; i < SSE_SLOTS; i++) sse += part[i];
    *train_sse = sse;
    return LAC_SUCCESS;
}
extern "C" lac_status lac_cuda_mf_valid_rmse(lac_ctx_t ctx, lac_mf_cuda_state *s, double *rmse)
{
    cudaStream_t stream = ctx->cuda->stream;
    if (s->valid_count == 0) {
        *rmse = NAN;
        return LAC_SUCCESS;
    }
    LAC_CUDA_CHECK(ctx, cudaMemsetAsync(s->sums + SSE_SLOTS, 0, SSE_SLOTS * sizeof(double), stream));
    int64_t warps = s->valid_count < 65536 ? s->valid_count : 65536;
    unsigned blocks = (unsigned)((warps + 7) / 8);
    validation_sse<<<blocks, 256, 0, stream>>>(s->valid_user, s->valid_item, s->valid_rating, s->valid_count, s->P,
                                               s->Q, s->user_bias, s->item_bias, s->k, s->stride, s->mean,
                                               s->rating_min, s->rating_max, s->sums + SSE_SLOTS);
    LAC_CUDA_CHECK_LAUNCH(ctx);
    double part[SSE_SLOTS], sse = 0.0;
    LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(part, s->sums + SSE_SLOTS, sizeof part, cudaMemcpyDeviceToHost, stream));
    LAC_CUDA_CHECK(ctx, cudaStreamSynchronize(stream));
    for (int i = 0; i < SSE_SLOTS; i++) sse += part[i];
    *rmse = sqrt(sse / (double)s->valid_count);
    return LAC_SUCCESS;
}

extern "C" lac_status lac_cuda_mf_keep(lac_ctx_t ctx, lac_mf_cuda_state *s, int restore)
{
    size_t pu = (size_t)s->num_users * (size_t)s->stride, qi = (size_t)s->num_items * (size_t)s->stride;
    size_t total = pu + qi + (size_t)s->num_users + (size_t)s->num_items * BIAS_STRIDE;
    if (!s->best) {
        if (restore) return lac_error(ctx, LAC_ERR_INTERNAL, "mf CUDA: restore without a kept epoch");
        LAC_CUDA_CHECK(ctx, cudaMalloc((void **)&s->best, total * sizeof(float) + 4));
    }
    float *parts[4] = {s->P, s->Q, s->user_bias, s->item_bias};
    size_t sizes[4] = {pu, qi, (size_t)s->num_users, (size_t)s->num_items * BIAS_STRIDE};
    size_t at = 0;
    for (int i = 0; i < 4; i++) {
        float *kept = s->best + at;
        if (sizes[i])
            LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(restore ? parts[i] : kept, restore ? kept : parts[i],
                                                sizes[i] * sizeof(float), cudaMemcpyDeviceToDevice, ctx->cuda->stream));
        at += sizes[i];
    }
    return restore ? replicas(ctx, s, 1) : LAC_SUCCESS;
}

extern "C" lac_status lac_cuda_mf_download(lac_ctx_t ctx, lac_mf_cuda_state *s, lac_mf_model_t m)
{
    cudaStream_t stream = ctx->cuda->stream;
    size_t pu = (size_t)s->num_users * (size_t)s->stride, qi = (size_t)s->num_items * (size_t)s->stride;
    if (pu) LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(m->P, s->P, pu * sizeof(float), cudaMemcpyDeviceToHost, stream));
    if (qi) LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(m->Q, s->Q, qi * sizeof(float), cudaMemcpyDeviceToHost, stream));
    if (s->num_users)
        LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(m->user_bias, s->user_bias, (size_t)s->num_users * sizeof(float),
                                            cudaMemcpyDeviceToHost, stream));
    if (s->num_items)
        LAC_CUDA_CHECK(ctx, cudaMemcpy2DAsync(m->item_bias, sizeof(float), s->item_bias, BIAS_STRIDE * sizeof(float),
                                              sizeof(float), (size_t)s->num_items, cudaMemcpyDeviceToHost, stream));
    LAC_CUDA_CHECK(ctx, cudaStreamSynchronize(stream));
    return LAC_SUCCESS;
}

extern "C" void lac_cuda_mf_end(lac_mf_cuda_state *s)
{
    if (!s) return;
    cudaStreamSynchronize(s->ctx->cuda->stream);
    free_state(s);
}
