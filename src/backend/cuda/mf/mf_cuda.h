/* CUSGD++ on CUDA: what the host driver (mf_sgd.cu) and the kernels
 * (mf_sgd_kernels.cu) share: the epoch's arguments, the layout constants, the
 * device helpers of u_i in registers, the choice of kernel and the launches.
 * The neighbourhood model's and implicit feedback's files (mf_nbr*,
 * mf_implicit*) build on it. */
#ifndef LACUNA_BACKEND_CUDA_MF_CUDA_H
#define LACUNA_BACKEND_CUDA_MF_CUDA_H

#include "backend/cuda/cuda_internal.h"
#include "mf/mf_backend.h"
#include "mf/schedule.h"   /* the stream cells' encoding */

#define LAC_MF_WARPS_PER_BLOCK 4
#define LAC_MF_CODE_AHEAD 8   /* steps of (item, rating) loaded ahead; streams are padded to a multiple */
#define LAC_MF_MAX_PIECES 8   /* float4 pieces per lane: F <= 32 x 4 x 8 in registers */
#define LAC_MF_SSE_SLOTS 64   /* partial sums of e^2, spread so that warps' atomics rarely meet */
/* Item biases one L2 line apart: packed, 32 items' biases would share a line
 * and meet the popular-line limit (mf_sgd.cu). */
#define LAC_MF_BIAS_STRIDE 32

/* The sum of x over a warp's 32 lanes, in every lane. */
static __device__ __forceinline__ float lac_mf_warp_sum(float x)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}

/* The warp's sum of x added to the warp's slot of the partial sums (every
 * lane of the warp calls it; lane 0, threadIdx.x & 31 == 0, adds). */
static __device__ __forceinline__ void lac_mf_warp_add(double *slots, float x, int lane)
{
    x = lac_mf_warp_sum(x);
    if (lane == 0)
        atomicAdd(slots + (blockIdx.x * LAC_MF_WARPS_PER_BLOCK + (threadIdx.x >> 5)) % LAC_MF_SSE_SLOTS, (double)x);
}

/* v += d, four floats, fire and forget (one vector atomic on sm_90: no
 * load, nothing waits on it). */
static __device__ __forceinline__ void lac_mf_add4(float4 *v, float4 d)
{
#if __CUDA_ARCH__ >= 900
    atomicAdd(v, d);
#else
    float *f = (float *)v;
    atomicAdd(f + 0, d.x), atomicAdd(f + 1, d.y), atomicAdd(f + 2, d.z), atomicAdd(f + 3, d.w);
#endif
}

/* The sum of x over a group's G lanes (G a power of two), in every lane. */
template <int G>
static __device__ __forceinline__ float group_sum(float x)
{
#pragma unroll
    for (int o = G / 2; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}

/* Implicit feedback's losses (lac_mf_call.implicit) on a logit x. */
static __device__ __forceinline__ float lac_mf_sigmoid(float x) { return 1.0f / (1.0f + __expf(-x)); }

/* -log sigmoid(x), without overflow. */
static __device__ __forceinline__ float lac_mf_log_loss(float x)
{
    return x > 0 ? log1pf(__expf(-x)) : -x + log1pf(__expf(x));
}

/* A cell of cross-entropy whose rating r is the weight of a positive (r > 0)
 * or minus that of a negative: the error of rule (5) (the loss's gradient
 * in x) and the loss. */
static __device__ __forceinline__ float lac_mf_xent_error(float r, float x)
{
    return r > 0.0f ? r * (1.0f - lac_mf_sigmoid(x)) : r * lac_mf_sigmoid(x);
}
static __device__ __forceinline__ float lac_mf_xent_loss(float r, float x)
{
    return r > 0.0f ? r * lac_mf_log_loss(x) : -r * lac_mf_log_loss(-x);
}

/* The position of x among items[0..len) (ascending), or -1. */
static __device__ __forceinline__ int find_item(const int32_t *items, int len, int32_t x)
{
    int base = 0, n = len;
    while (n > 1) {
        const int half = n >> 1;
        base = __ldg(items + base + half) < x ? base + half : base;
        n -= half;
    }
    if (len > 0 && __ldg(items + base) < x) base++;
    return (base < len && __ldg(items + base) == x) ? base : -1;
}

/* The arguments of one epoch (passed by value). */
struct lac_mf_cuda_epoch_args {
    const int32_t *code;            /* groups x steps: item | LAC_MF_RUN_START, or LAC_MF_PAD */
    const float *rating;            /* groups x steps */
    const int64_t *group_first_run; /* groups: index of the group's first run */
    const int32_t *run_user;        /* runs, group by group, in stream order */
    const float *run_weight;        /* 1: the run is the whole row; else its share of the row */
    int64_t steps;                  /* per group, a multiple of LAC_MF_CODE_AHEAD */
    float *P, *Q, *user_bias;
    float *item_bias;               /* LAC_MF_BIAS_STRIDE apart */
    int stride;                     /* floats per factor row, a multiple of 16 */
    float mean, lr, shrink, shrink_b;
    int use_bias;
    double *sse;
};

typedef void (*lac_mf_cuda_epoch_fn)(lac_mf_cuda_epoch_args);

/* u_i in a group's registers (the plain kernels: mf_sgd_kernels.cu and
 * mf_implicit_kernels.cu). */
static __device__ __forceinline__ float dot4(float4 a, float4 b, float acc)
{
    return fmaf(a.w, b.w, fmaf(a.z, b.z, fmaf(a.y, b.y, fmaf(a.x, b.x, acc))));
}

static __device__ __forceinline__ float4 axpby4(float s, float4 a, float t, float4 b)
{
    return make_float4(fmaf(s, a.x, t * b.x), fmaf(s, a.y, t * b.y), fmaf(s, a.z, t * b.z), fmaf(s, a.w, t * b.w));
}

/* A pool slot's row pieces (lane's own, every G-th from row; zeros when row
 * is NULL) into q, and their dot product with p summed over the group, in
 * every lane (the pooled epochs: mf_implicit_pool.cu, _pool_copies.cu). */
template <int G, int V>
static __device__ __forceinline__ float slot_dot(const float4 (&p)[V], float4 (&q)[V], const float4 *row, unsigned mask)
{
    float x = 0.0f;
#pragma unroll
    for (int v = 0; v < V; v++) {
        q[v] = row ? row[G * v] : make_float4(0.f, 0.f, 0.f, 0.f);
        x = dot4(p[v], q[v], x);
    }
#pragma unroll
    for (int o = G / 2; o > 0; o >>= 1) x += __shfl_xor_sync(mask, x, o);
    return x;
}

/* The V float4 pieces of a factor row that lane `sub` of a group holds. */
template <int G, int V, bool FULL>
static __device__ __forceinline__ void load_row(float4 (&x)[V], const float4 *row, int sub, int pieces, bool present)
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
static __device__ __forceinline__ void finish_run(const lac_mf_cuda_epoch_args &a, int64_t user, float weight,
                                                  const float4 (&p)[V], const float4 (&p0)[V], float bu, float bu0,
                                                  int sub)
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

/* A stream's next run: the previous run's u_i finished (finish_run), the
 * next run's user, weight and row (kept as p0, to fold in a share's change). */
template <int G, int V, bool FULL>
static __device__ __forceinline__ void start_run(const lac_mf_cuda_epoch_args &a, int64_t &user, float &weight,
                                                 int64_t &next_run, float4 (&p)[V], float4 (&p0)[V], float &bu,
                                                 float &bu0, int sub, int pieces)
{
    if (user >= 0) finish_run<G, V, FULL>(a, user, weight, p, p0, bu, bu0, sub);
    user = a.run_user[next_run];
    weight = a.run_weight[next_run];
    next_run++;
    load_row<G, V, FULL>(p, (const float4 *)(a.P + user * a.stride), sub, pieces, true);
#pragma unroll
    for (int v = 0; v < V; v++) p0[v] = p[v];
    bu = bu0 = __ldcg(a.user_bias + user);
}


/* The epoch kernel for a row of `pieces` float4, and its group shape. */
struct lac_mf_cuda_kernel {
    lac_mf_cuda_epoch_fn fn;
    int lanes;                      /* lanes a group */
    int groups_per_block;           /* groups a block of LAC_MF_WARPS_PER_BLOCK warps trains */
};

/* want: lanes asked for (a tuning knob, 0: none); ahead: v_j rows loaded 1 or 2 steps ahead. */
lac_mf_cuda_kernel lac_mf_cuda_choose_kernel(int pieces, int want, int ahead);
lac_status lac_mf_cuda_occupancy(lac_ctx_t ctx, const lac_mf_cuda_kernel *k, int *blocks_per_sm);
lac_status lac_mf_cuda_launch_epoch(lac_ctx_t ctx, const lac_mf_cuda_kernel *k, unsigned blocks,
                                    const lac_mf_cuda_epoch_args *a);
/* Popular items' replica rows averaged into each (spread 0) or the item's own
 * row copied to them (spread 1). */
lac_status lac_mf_cuda_launch_replicas(lac_ctx_t ctx, const int32_t *hot_item, const int32_t *hot_first,
                                       const int32_t *hot_count, int64_t hot_items, float *Q, float *item_bias,
                                       int stride, int spread);
/* Adds the validation set's squared errors into sse[0 .. LAC_MF_SSE_SLOTS). */
lac_status lac_mf_cuda_launch_validation(lac_ctx_t ctx, const int32_t *user, const int32_t *item, const float *rating,
                                         int64_t count, const float *P, const float *Q, const float *user_bias,
                                         const float *item_bias, int k, int stride, float mean, float lo, float hi,
                                         double *sse);

#endif
