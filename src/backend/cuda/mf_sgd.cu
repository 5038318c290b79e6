/* mf on CUDA: CUSGD++ (Algorithm 2). A warp owns a run of one user's
 * ratings: u_i lives in registers (element f in lane f % 32, slot f / 32),
 * u_i . v_j is a warp-shuffle reduction broadcast to every lane, v_j and
 * bhat_j are updated in global memory (Hogwild across warps, as in the paper),
 * and u_i goes back to global memory once, at the end. Rows are taken in
 * order of rating count (heaviest first). A row longer than RUN_MAX ratings is
 * cut into runs taken by a group of warps, so that one heavy user cannot
 * stretch the epoch; each run starts from the same u_i and folds its change
 * back with atomic adds, weighted by its share of the row (the runs' changes
 * are averaged: summed, they would overshoot, each having fitted u_i alone).
 * Registers hold F up to 32 * MAX_SLOTS; beyond that a general path keeps
 * u_i in global memory. Float32 throughout. */
#include "backend/cuda/cuda_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define WARPS_PER_BLOCK 8
#define RUN_MAX 512      /* ratings per warp run; longer rows are split
                            (LACUNA_MF_CUDA_RUN_MAX overrides it, for tuning) */
#define MAX_SLOTS 8      /* F <= 256 in registers */
#define SSE_SLOTS 64     /* partial sums of e^2, spread so that warps' atomics rarely meet */

struct lac_mf_cuda_state {
    lac_ctx_t ctx;
    int64_t num_users, num_items, nnz, runs, valid_count;
    int k, stride, slots;
    float mean, lambda, lambda_bias, rating_min, rating_max;
    int use_bias;
    /* device */
    int32_t *item;           /* nnz, grouped by user */
    float *rating;
    int32_t *run_user;       /* runs, heaviest users first */
    int64_t *run_start;      /* runs + 1 entries are not contiguous: start and end */
    int64_t *run_end;
    float *run_weight;       /* 1: the run is the whole row; else its share of the row */
    float *P, *Q, *user_bias, *item_bias;
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

/* One epoch of update rule (5), CUSGD++ style. SLOTS = ceil(stride / 32);
 * FULL: stride is a multiple of 32 (no lane masking). */
template <int SLOTS, bool FULL>
__global__ void __launch_bounds__(32 * WARPS_PER_BLOCK)
cusgd_epoch(const int32_t *__restrict__ item, const float *__restrict__ rating, const int32_t *__restrict__ run_user,
            const int64_t *__restrict__ run_start, const int64_t *__restrict__ run_end,
            const float *__restrict__ run_weight, int64_t runs, float *__restrict__ P, float *__restrict__ Q,
            float *__restrict__ user_bias, float *__restrict__ item_bias, int stride, float mean, float lr,
            float shrink, float shrink_b, int use_bias, double *__restrict__ sse_out)
{
    const int lane = threadIdx.x & 31;
    const int64_t warp = (int64_t)blockIdx.x * WARPS_PER_BLOCK + (threadIdx.x >> 5);
    const int64_t warps = (int64_t)gridDim.x * WARPS_PER_BLOCK;
    float sse = 0.0f;
    for (int64_t run = warp; run < runs; run += warps) {
        const int64_t u = run_user[run], lo = run_start[run], hi = run_end[run];
        float *pu = P + u * stride;
        float p[SLOTS], p0[SLOTS];
#pragma unroll
        for (int s = 0; s < SLOTS; s++) {
            int f = lane + 32 * s;
            p[s] = (FULL || f < stride) ? pu[f] : 0.0f;
            p0[s] = p[s];
        }
        float bu = user_bias[u], bu0 = bu;
        /* software pipeline: the next rating's v_j is loaded while this one updates */
        int32_t j_next = item[lo];
        float r_next = rating[lo];
        float q_next[SLOTS];
#pragma unroll
        for (int s = 0; s < SLOTS; s++) {
            int f = lane + 32 * s;
            q_next[s] = (FULL || f < stride) ? Q[(int64_t)j_next * stride + f] : 0.0f;
        }
        for (int64_t a = lo; a < hi; a++) {
            const int32_t j = j_next;
            const float r = r_next;
            float q[SLOTS];
#pragma unroll
            for (int s = 0; s < SLOTS; s++) q[s] = q_next[s];
            if (a + 1 < hi) {
                j_next = item[a + 1];
                r_next = rating[a + 1];
#pragma unroll
                for (int s = 0; s < SLOTS; s++) {
                    int f = lane + 32 * s;
                    q_next[s] = (FULL || f < stride) ? Q[(int64_t)j_next * stride + f] : 0.0f;
                }
            }
            const float bj = use_bias ? item_bias[j] : 0.0f;
            float part = 0.0f;
#pragma unroll
            for (int s = 0; s < SLOTS; s++) part = fmaf(p[s], q[s], part);
            const float dot = warp_sum(part);
            const float e = r - (mean + bu + bj + dot);
            const float step = lr * e;
            sse = fmaf(e, e, sse);
            if (use_bias) {
                bu = fmaf(shrink_b, bu, step);
                if (lane == 0) item_bias[j] = fmaf(shrink_b, bj, step);
            }
            float *qj = Q + (int64_t)j * stride;
#pragma unroll
            for (int s = 0; s < SLOTS; s++) {
                int f = lane + 32 * s;
                const float pf = p[s], qf = q[s];
                p[s] = fmaf(shrink, pf, step * qf);
                if (FULL || f < stride) qj[f] = fmaf(shrink, qf, step * pf);
            }
        }
        const float weight = run_weight[run];
        if (weight < 1.0f) {
            /* a group of warps shares this row: fold this run's change back */
#pragma unroll
            for (int s = 0; s < SLOTS; s++) {
                int f = lane + 32 * s;
                if (FULL || f < stride) atomicAdd(pu + f, weight * (p[s] - p0[s]));
            }
            if (lane == 0) atomicAdd(user_bias + u, weight * (bu - bu0));
        } else {
#pragma unroll
            for (int s = 0; s < SLOTS; s++) {
                int f = lane + 32 * s;
                if (FULL || f < stride) pu[f] = p[s];
            }
            if (lane == 0) user_bias[u] = bu;
        }
    }
    if (lane == 0) atomicAdd(sse_out + (warp & (SSE_SLOTS - 1)), (double)sse);
}

/* The general path for F > 32 * MAX_SLOTS: u_i stays in global memory
 * (updated in place, lanes striding over the row). */
__global__ void __launch_bounds__(32 * WARPS_PER_BLOCK)
sgd_epoch_general(const int32_t *__restrict__ item, const float *__restrict__ rating,
                  const int32_t *__restrict__ run_user, const int64_t *__restrict__ run_start,
                  const int64_t *__restrict__ run_end, int64_t runs, float *__restrict__ P, float *__restrict__ Q,
                  float *__restrict__ user_bias, float *__restrict__ item_bias, int stride, float mean, float lr,
                  float shrink, float shrink_b, int use_bias, double *__restrict__ sse_out)
{
    const int lane = threadIdx.x & 31;
    const int64_t warp = (int64_t)blockIdx.x * WARPS_PER_BLOCK + (threadIdx.x >> 5);
    const int64_t warps = (int64_t)gridDim.x * WARPS_PER_BLOCK;
    float sse = 0.0f;
    for (int64_t run = warp; run < runs; run += warps) {
        const int64_t u = run_user[run];
        float *pu = P + u * stride;
        for (int64_t a = run_start[run]; a < run_end[run]; a++) {
            const int32_t j = item[a];
            float *qj = Q + (int64_t)j * stride;
            float part = 0.0f;
            for (int f = lane; f < stride; f += 32) part = fmaf(pu[f], qj[f], part);
            const float dot = warp_sum(part);
            const float bu = user_bias[u], bj = use_bias ? item_bias[j] : 0.0f;
            const float e = rating[a] - (mean + bu + bj + dot);
            const float step = lr * e;
            sse = fmaf(e, e, sse);
            __syncwarp();
            if (use_bias && lane == 0) {
                user_bias[u] = fmaf(shrink_b, bu, step);
                item_bias[j] = fmaf(shrink_b, bj, step);
            }
            for (int f = lane; f < stride; f += 32) {
                const float pf = pu[f], qf = qj[f];
                pu[f] = fmaf(shrink, pf, step * qf);
                qj[f] = fmaf(shrink, qf, step * pf);
            }
            __syncwarp();
        }
    }
    if (lane == 0) atomicAdd(sse_out + (warp & (SSE_SLOTS - 1)), (double)sse);
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
        float s = mean + warp_sum(part) + (u >= 0 ? user_bias[u] : 0.0f) + (j >= 0 ? item_bias[j] : 0.0f);
        s = fminf(fmaxf(s, lo), hi);
        const float e = vr[i] - s;
        sse = fmaf(e, e, sse);
    }
    if (lane == 0) atomicAdd(sse_out + (warp & (SSE_SLOTS - 1)), (double)sse);
}

static void free_state(lac_mf_cuda_state *s)
{
    if (!s) return;
    void *ptrs[] = {s->item, s->rating, s->run_user, s->run_start, s->run_end, s->run_weight, s->P, s->Q,
                    s->user_bias, s->item_bias, s->best, s->valid_user, s->valid_item, s->valid_rating, s->sums};
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

extern "C" lac_status lac_cuda_mf_begin(lac_ctx_t ctx, const lac_mf_cuda_call *call, lac_mf_cuda_state **out)
{
    LAC_CHECK(lac_cuda_use_device(ctx));
    const lac_mf_data *d = call->data;
    lac_mf_model_t m = call->model;
    lac_mf_cuda_state *s = (lac_mf_cuda_state *)calloc(1, sizeof *s);
    if (!s) return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "out of host memory for the CUDA mf state");
    s->ctx = ctx;
    s->num_users = d->num_users;
    s->num_items = d->num_items;
    s->nnz = d->nnz;
    s->k = m->k;
    s->stride = m->stride;
    s->slots = (m->stride + 31) / 32;
    s->mean = (float)m->mean;
    s->lambda = (float)m->params.lambda;
    s->lambda_bias = (float)m->params.lambda_bias;
    s->use_bias = m->params.use_bias;
    s->rating_min = m->rating_min;
    s->rating_max = m->rating_max;
    lac_status st = LAC_SUCCESS;

    /* runs: users in count order, each cut into pieces of at most run_max */
    int64_t run_max = RUN_MAX, runs = 0;
    const char *knob = getenv("LACUNA_MF_CUDA_RUN_MAX");
    if (knob && atoll(knob) >= 1) run_max = atoll(knob);
    for (int64_t r = 0; r < d->num_users; r++) {
        int64_t u = d->row_order[r], len = d->row_start[u + 1] - d->row_start[u];
        runs += (len + run_max - 1) / run_max;
    }
    int32_t *ru = (int32_t *)malloc((size_t)(runs ? runs : 1) * sizeof *ru);
    int64_t *rs = (int64_t *)malloc((size_t)(runs ? runs : 1) * sizeof *rs);
    int64_t *re = (int64_t *)malloc((size_t)(runs ? runs : 1) * sizeof *re);
    float *rsh = (float *)malloc((size_t)(runs ? runs : 1) * sizeof *rsh);
    if (!ru || !rs || !re || !rsh) {
        st = lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "out of host memory for %lld runs", (long long)runs);
        goto fail;
    }
    {
        int64_t n = 0;
        for (int64_t r = 0; r < d->num_users; r++) {
            int64_t u = d->row_order[r], lo = d->row_start[u], hi = d->row_start[u + 1];
            for (int64_t a = lo; a < hi; a += run_max, n++) {
                ru[n] = (int32_t)u;
                rs[n] = a;
                re[n] = a + run_max < hi ? a + run_max : hi;
                rsh[n] = hi - lo > run_max ? (float)(re[n] - a) / (float)(hi - lo) : 1.0f;
            }
        }
    }
    s->runs = runs;
    {
        size_t pu = (size_t)d->num_users * (size_t)s->stride, qi = (size_t)d->num_items * (size_t)s->stride;
        LAC_CHECK_GOTO(upload(ctx, &s->item, d->col, (size_t)d->nnz), st, fail);
        LAC_CHECK_GOTO(upload(ctx, &s->rating, d->val, (size_t)d->nnz), st, fail);
        LAC_CHECK_GOTO(upload(ctx, &s->run_user, ru, (size_t)runs), st, fail);
        LAC_CHECK_GOTO(upload(ctx, &s->run_start, rs, (size_t)runs), st, fail);
        LAC_CHECK_GOTO(upload(ctx, &s->run_end, re, (size_t)runs), st, fail);
        LAC_CHECK_GOTO(upload(ctx, &s->run_weight, rsh, (size_t)runs), st, fail);
        LAC_CHECK_GOTO(upload(ctx, &s->P, m->P, pu), st, fail);
        LAC_CHECK_GOTO(upload(ctx, &s->Q, m->Q, qi), st, fail);
        LAC_CHECK_GOTO(upload(ctx, &s->user_bias, m->user_bias, (size_t)d->num_users), st, fail);
        LAC_CHECK_GOTO(upload(ctx, &s->item_bias, m->item_bias, (size_t)d->num_items), st, fail);
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
    free(ru);
    free(rs);
    free(re);
    free(rsh);
    *out = s;
    return LAC_SUCCESS;
fail:
    cudaStreamSynchronize(ctx->cuda->stream);
    free(ru);
    free(rs);
    free(re);
    free(rsh);
    free_state(s);
    return st;
}

/* Warps in flight. Every warp updates v_j rows without locks, and the warps
 * on one popular item at the same time overwrite each other's updates: such a
 * v_j gets about one effective update per warp's worth of ratings. So each
 * warp is given at least RATINGS_PER_WARP ratings an epoch (and there are no
 * more warps than items or runs): on small data fewer warps, each walking the
 * run list with a stride; MovieLens-sized data and up fill the GPU. */
#define RATINGS_PER_WARP 1024

static unsigned epoch_blocks(const lac_mf_cuda_state *s)
{
    int64_t warps = s->nnz / RATINGS_PER_WARP;
    if (warps < 64) warps = 64;
    if (warps > s->num_items) warps = s->num_items;
    if (warps > s->runs) warps = s->runs;
    if (warps < 1) warps = 1;
    return (unsigned)((warps + WARPS_PER_BLOCK - 1) / WARPS_PER_BLOCK);
}

template <int SLOTS>
static void launch_slots(lac_mf_cuda_state *s, float lr, cudaStream_t stream)
{
    const float shrink = 1.0f - lr * s->lambda, shrink_b = 1.0f - lr * s->lambda_bias;
    const unsigned blocks = epoch_blocks(s);
    if (s->stride % 32 == 0)
        cusgd_epoch<SLOTS, true><<<blocks, 32 * WARPS_PER_BLOCK, 0, stream>>>(
            s->item, s->rating, s->run_user, s->run_start, s->run_end, s->run_weight, s->runs, s->P, s->Q,
            s->user_bias, s->item_bias, s->stride, s->mean, lr, shrink, shrink_b, s->use_bias, s->sums);
    else
        cusgd_epoch<SLOTS, false><<<blocks, 32 * WARPS_PER_BLOCK, 0, stream>>>(
            s->item, s->rating, s->run_user, s->run_start, s->run_end, s->run_weight, s->runs, s->P, s->Q,
            s->user_bias, s->item_bias, s->stride, s->mean, lr, shrink, shrink_b, s->use_bias, s->sums);
}

extern "C" lac_status lac_cuda_mf_epoch(lac_ctx_t ctx, lac_mf_cuda_state *s, float lr, double *train_sse)
{
    cudaStream_t stream = ctx->cuda->stream;
    LAC_CUDA_CHECK(ctx, cudaMemsetAsync(s->sums, 0, SSE_SLOTS * sizeof(double), stream));
    if (s->runs > 0) {
        switch (s->slots) {
        case 1: launch_slots<1>(s, lr, stream); break;
        case 2: launch_slots<2>(s, lr, stream); break;
        case 3: launch_slots<3>(s, lr, stream); break;
        case 4: launch_slots<4>(s, lr, stream); break;
        case 5: launch_slots<5>(s, lr, stream); break;
        case 6: launch_slots<6>(s, lr, stream); break;
        case 7: launch_slots<7>(s, lr, stream); break;
        case 8: launch_slots<8>(s, lr, stream); break;
        default: {
            const float shrink = 1.0f - lr * s->lambda, shrink_b = 1.0f - lr * s->lambda_bias;
            const unsigned blocks = epoch_blocks(s);
            sgd_epoch_general<<<blocks, 32 * WARPS_PER_BLOCK, 0, stream>>>(
                s->item, s->rating, s->run_user, s->run_start, s->run_end, s->runs, s->P, s->Q, s->user_bias,
                s->item_bias, s->stride, s->mean, lr, shrink, shrink_b, s->use_bias, s->sums);
        }
        }
        LAC_CUDA_CHECK_LAUNCH(ctx);
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
    size_t total = pu + qi + (size_t)s->num_users + (size_t)s->num_items;
    if (!s->best) {
        if (restore) return lac_error(ctx, LAC_ERR_INTERNAL, "mf CUDA: restore without a kept epoch");
        LAC_CUDA_CHECK(ctx, cudaMalloc((void **)&s->best, total * sizeof(float) + 4));
    }
    float *parts[4] = {s->P, s->Q, s->user_bias, s->item_bias};
    size_t sizes[4] = {pu, qi, (size_t)s->num_users, (size_t)s->num_items};
    size_t at = 0;
    for (int i = 0; i < 4; i++) {
        float *kept = s->best + at;
        if (sizes[i])
            LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(restore ? parts[i] : kept, restore ? kept : parts[i],
                                                sizes[i] * sizeof(float), cudaMemcpyDeviceToDevice, ctx->cuda->stream));
        at += sizes[i];
    }
    return LAC_SUCCESS;
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
        LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(m->item_bias, s->item_bias, (size_t)s->num_items * sizeof(float),
                                            cudaMemcpyDeviceToHost, stream));
    LAC_CUDA_CHECK(ctx, cudaStreamSynchronize(stream));
    return LAC_SUCCESS;
}

extern "C" void lac_cuda_mf_end(lac_mf_cuda_state *s)
{
    if (!s) return;
    cudaStreamSynchronize(s->ctx->cuda->stream);
    free_state(s);
}
