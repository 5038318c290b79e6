/* The neighbour search on CUDA (nbr_backend.h), handed out by the gateway:
 * exact GSM top-K on the GPU; the bucket methods' counting stays the CPU's
 * (the same table entry), their code sums go through lac_map already.
 *
 * GSM: the six co-rating sums of every pair (n, sx, sy, sxx, syy, sxy over
 * the users who rated both items) are products of dense item x user
 * matrices I (1 where rated), R (the rating) and R2 (its square), e.g.
 * sxy = R_x . R_y and sx = R_x . I_y: six GEMMs on the tensor cores (fp16
 * inputs, fp32 sums) for a block of items x against every item y, never more
 * than a block's B x N sums at once. A warp per item x then scores every y
 * with lac_nbr_shrunk_pearson (the CPU's formula, float64) and keeps the K
 * best (higher S, then lower index) in shared memory: a candidate enters when
 * it beats the set's worst, which the warp finds again after each entry.
 *
 * Exact, as the CPU is, when every rating and its square are fp16 numbers
 * and every sum stays on fp32's integer grid: ratings multiples of 2^-s and
 * an item's sum of squares times 2^2s (and its count, its sum of |r| times
 * 2^s) below 2^24; then each fp32 sum equals the CPU's float64 sum and the
 * lists are the same, ties included. Half stars on 0.5..5 with up to 670,000
 * raters an item pass. Data outside that, K over 1024, or dense matrices
 * over half the free device memory are searched by the CPU's table (logged). */
#include "backend/cuda/cuda_internal.h"
#include "mf/nbr_backend.h"

#include <cuda_fp16.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#define GSM_WARPS 4            /* warps (items x) a block of the top-K kernel */
#define GSM_MAX_K 1024         /* the set of a warp in shared memory: K x 12 bytes */
#define GSM_SUM_BYTES ((size_t)1 << 30)   /* a block's six B x N sums at most */

/* Item x's dense rows: I, R, R2 (items x users, fp16). */
static __global__ void fill_dense(const int64_t *__restrict__ start, const int32_t *__restrict__ user,
                                  const float *__restrict__ val, int64_t num_items, int64_t ld,
                                  __half *__restrict__ I, __half *__restrict__ R, __half *__restrict__ R2)
{
    const int64_t j = blockIdx.x;
    if (j >= num_items) return;
    for (int64_t a = start[j] + threadIdx.x; a < start[j + 1]; a += blockDim.x) {
        const int64_t at = j * ld + user[a];
        const float r = val[a];
        I[at] = __float2half(1.0f);
        R[at] = __float2half(r);
        R2[at] = __float2half(r * r);
    }
}

/* a before b: higher S, then lower index (nbr_cpu.c) */
static __device__ __forceinline__ bool gsm_better(double sa, int ia, double sb, int ib)
{
    return sa > sb || (sa == sb && ia < ib);
}

/* The worst entry of the warp's set of `count`: its score, index, position. */
static __device__ void gsm_worst(const double *sc, const int *id, int count, double *ws, int *wi, int *wp)
{
    const int lane = threadIdx.x & 31;
    double s = INFINITY;
    int i = -1, p = -1;
    for (int e = lane; e < count; e += 32)
        if (p < 0 || gsm_better(s, i, sc[e], id[e])) s = sc[e], i = id[e], p = e;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const double s2 = __shfl_xor_sync(0xffffffffu, s, o);
        const int i2 = __shfl_xor_sync(0xffffffffu, i, o), p2 = __shfl_xor_sync(0xffffffffu, p, o);
        if (p < 0 || (p2 >= 0 && gsm_better(s, i, s2, i2))) s = s2, i = i2, p = p2;
    }
    *ws = s;
    *wi = i;
    *wp = p;
}

/* A warp per item x of the block [x0, x0 + B): S against every y, the K best
 * into out (best first). sums: six N x B arrays, (y, x - x0) at y + (x - x0) N. */
static __global__ void __launch_bounds__(32 * GSM_WARPS) gsm_select(const float *__restrict__ sums, int64_t N,
                                                                   int64_t x0, int64_t B, int K, double shrink,
                                                                   int32_t *__restrict__ out)
{
    extern __shared__ unsigned char smem[];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t xl = (int64_t)blockIdx.x * GSM_WARPS + warp;
    if (xl >= B) return;   /* the whole warp */
    const int64_t x = x0 + xl;
    double *sc = (double *)smem + (size_t)warp * K;
    int *id = (int *)((double *)smem + (size_t)GSM_WARPS * K) + (size_t)warp * K;
    const size_t plane = (size_t)N * (size_t)B;
    const float *col = sums + (size_t)xl * (size_t)N;
    int count = 0, wi = -1, wp = -1;
    double ws = INFINITY;
    for (int64_t y0 = 0; y0 < N; y0 += 32) {
        const int64_t y = y0 + lane;
        const bool valid = y < N && y != x;
        double s = -INFINITY;
        if (valid)
            s = lac_nbr_shrunk_pearson(col[y], col[plane + y], col[2 * plane + y], col[3 * plane + y],
                                       col[4 * plane + y], col[5 * plane + y], shrink);
        const bool take = valid && (count < K || gsm_better(s, (int)y, ws, wi));
        unsigned mask = __ballot_sync(0xffffffffu, take);
        while (mask) {
            const int l = __ffs(mask) - 1;
            mask &= mask - 1;
            const double cs = __shfl_sync(0xffffffffu, s, l);
            const int cy = (int)(y0 + l);
            if (count < K) {
                if (lane == 0) sc[count] = cs, id[count] = cy;
                count++;
                __syncwarp();
                if (count == K) gsm_worst(sc, id, count, &ws, &wi, &wp);
            } else if (gsm_better(cs, cy, ws, wi)) {
                if (lane == 0) sc[wp] = cs, id[wp] = cy;
                __syncwarp();
                gsm_worst(sc, id, count, &ws, &wi, &wp);
            }
            __syncwarp();
        }
    }
    __syncwarp();
    /* best first: an entry's place is the number of entries better than it */
    for (int e = lane; e < count; e += 32) {
        int rank = 0;
        for (int f = 0; f < count; f++) rank += gsm_better(sc[f], id[f], sc[e], id[e]);
        out[x * K + rank] = id[e];
    }
}

/* x is an fp16 number: 0, or a normal fp16 (exponent -14..15) whose float
 * mantissa ends in 13 zero bits. */
static int fp16_exact(float x)
{
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    int e = (int)((b >> 23) & 0xFF) - 127;
    return x == 0.0f || (e >= -14 && e <= 15 && (b & 0x1FFF) == 0);
}

/* Whether the fp16 / fp32 path gives the CPU's sums exactly (see the top). */
static int exact_on_tensor_cores(const lac_nbr_data *d)
{
    int s = 0;   /* every rating a multiple of 2^-s */
    for (int64_t a = 0; a < d->nnz; a++) {
        double v = ldexp((double)d->item_val[a], s);
        while (v != floor(v) && s <= 8) v = ldexp((double)d->item_val[a], ++s);
        if (s > 8) return 0;
    }
    double limit = ldexp(1.0, 24);
    for (int64_t j = 0; j < d->num_items; j++) {
        double sq = 0.0, ab = 0.0;
        for (int64_t a = d->item_start[j]; a < d->item_start[j + 1]; a++) {
            float r = d->item_val[a];
            if (!fp16_exact(r) || !fp16_exact(r * r) || (double)r * r != (double)(r * r)) return 0;
            sq += (double)r * r;
            ab += fabs((double)r);
        }
        if (ldexp(sq, 2 * s) >= limit || ldexp(ab, s) >= limit ||
            (double)(d->item_start[j + 1] - d->item_start[j]) >= limit)
            return 0;
    }
    return 1;
}

struct gsm_device {
    int64_t *start;
    int32_t *user;
    float *val, *sums;
    __half *dense;
    int32_t *out;
};

static void gsm_free(gsm_device *g)
{
    void *ptrs[] = {g->start, g->user, g->val, g->sums, g->dense, g->out};
    for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0]; i++)
        if (ptrs[i]) cudaFree(ptrs[i]);
}

static lac_status gsm_run(lac_ctx_t ctx, lac_nbr_call *call, int32_t *out, gsm_device *g)
{
    const lac_nbr_data *d = call->data;
    const int64_t N = d->num_items, U = d->num_users, nnz = d->nnz;
    const int K = call->k;
    cudaStream_t st = ctx->cuda->stream;
    double t_start = omp_get_wtime();
    const int64_t ld = (U + 63) / 64 * 64;   /* users, padded with zeros: aligned rows for the tensor cores */
    size_t dense = (size_t)N * (size_t)ld;
    int64_t B = (int64_t)(GSM_SUM_BYTES / (6 * sizeof(float) * (size_t)N));
    B = B < 1 ? 1 : B > N ? N : B;
    size_t sums = 6 * (size_t)N * (size_t)B;
    call->bytes = (int64_t)(3 * dense * sizeof(__half) + sums * sizeof(float) + (size_t)N * K * 4 +
                            (size_t)nnz * 8 + (size_t)(N + 1) * 8);
    LAC_CUDA_CHECK(ctx, cudaMalloc((void **)&g->start, (size_t)(N + 1) * sizeof(int64_t)));
    LAC_CUDA_CHECK(ctx, cudaMalloc((void **)&g->user, (size_t)(nnz ? nnz : 1) * sizeof(int32_t)));
    LAC_CUDA_CHECK(ctx, cudaMalloc((void **)&g->val, (size_t)(nnz ? nnz : 1) * sizeof(float)));
    LAC_CUDA_CHECK(ctx, cudaMalloc((void **)&g->dense, 3 * dense * sizeof(__half)));
    LAC_CUDA_CHECK(ctx, cudaMalloc((void **)&g->sums, sums * sizeof(float)));
    LAC_CUDA_CHECK(ctx, cudaMalloc((void **)&g->out, (size_t)N * K * sizeof(int32_t)));
    LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(g->start, d->item_start, (size_t)(N + 1) * sizeof(int64_t),
                                        cudaMemcpyHostToDevice, st));
    if (nnz) {
        LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(g->user, d->item_user, (size_t)nnz * 4, cudaMemcpyHostToDevice, st));
        LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(g->val, d->item_val, (size_t)nnz * 4, cudaMemcpyHostToDevice, st));
    }
    __half *I = g->dense, *R = I + dense, *R2 = R + dense;
    LAC_CUDA_CHECK(ctx, cudaMemsetAsync(g->dense, 0, 3 * dense * sizeof(__half), st));
    fill_dense<<<(unsigned)N, 256, 0, st>>>(g->start, g->user, g->val, N, ld, I, R, R2);
    LAC_CUDA_CHECK_LAUNCH(ctx);
    cublasHandle_t blas;
    LAC_CHECK(lac_cuda_cublas(ctx, &blas));
    LAC_CUDA_CHECK(ctx, cudaStreamSynchronize(st));
    double t_fill = omp_get_wtime();
    LAC_CUBLAS_CHECK(ctx, cublasSetStream(blas, st));
    /* (x side, y side) of n, sx, sy, sxx, syy, sxy */
    const __half *xs[6] = {I, R, I, R2, I, R}, *ys[6] = {I, I, R, I, R2, R};
    const float one = 1.0f, zero = 0.0f;
    size_t smem = (size_t)GSM_WARPS * K * (sizeof(double) + sizeof(int));
    LAC_CUDA_CHECK(ctx, cudaFuncSetAttribute(gsm_select, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    for (int64_t x0 = 0; x0 < N; x0 += B) {
        int64_t b = N - x0 < B ? N - x0 : B;
        for (int q = 0; q < 6; q++)   /* C (N x b, column-major) = Y^T X: y down, x across */
            LAC_CUBLAS_CHECK(ctx, cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)N, (int)b, (int)ld, &one, ys[q],
                                               CUDA_R_16F, (int)ld, xs[q] + (size_t)x0 * ld, CUDA_R_16F, (int)ld, &zero,
                                               g->sums + (size_t)q * N * b, CUDA_R_32F, (int)N, CUBLAS_COMPUTE_32F,
                                               CUBLAS_GEMM_DEFAULT));
        gsm_select<<<(unsigned)((b + GSM_WARPS - 1) / GSM_WARPS), 32 * GSM_WARPS, smem, st>>>(g->sums, N, x0, b, K,
                                                                                             call->shrink, g->out);
        LAC_CUDA_CHECK_LAUNCH(ctx);
    }
    LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(out, g->out, (size_t)N * K * sizeof(int32_t), cudaMemcpyDeviceToHost, st));
    LAC_CUDA_CHECK(ctx, cudaStreamSynchronize(st));
    lac_log(ctx, LAC_LOG_INFO, "mf neighbours: GSM on the GPU, %lld blocks of %lld items: %.3f s to the dense matrices, "
            "%.3f s for the sums and the selection", (long long)((N + B - 1) / B), (long long)B, t_fill - t_start,
            omp_get_wtime() - t_fill);
    return LAC_SUCCESS;
}

static lac_status cuda_gsm_topk(lac_ctx_t ctx, lac_nbr_call *call, int32_t *out)
{
    const lac_nbr_data *d = call->data;
    double t0 = omp_get_wtime();
    LAC_CHECK(lac_cuda_use_device(ctx));
    size_t free_bytes = 0, total = 0;
    LAC_CUDA_CHECK(ctx, cudaMemGetInfo(&free_bytes, &total));
    double dense = 3.0 * 2.0 * (double)d->num_items * (double)(d->num_users + 63);
    const char *why = call->k > GSM_MAX_K                    ? "K over 1024"
                      : d->num_users > INT32_MAX || d->num_items > INT32_MAX ? "too many users or items"
                      : dense + GSM_SUM_BYTES > 0.5 * (double)free_bytes ? "dense matrices over half the free memory"
                      : !exact_on_tensor_cores(d)                          ? "ratings off fp16's exact grid"
                                                                           : NULL;
    lac_log(ctx, LAC_LOG_INFO, "mf neighbours: GSM's exactness check %.3f s", omp_get_wtime() - t0);
    if (why) {
        lac_log(ctx, LAC_LOG_INFO, "mf neighbours: exact GSM on the CPU (%s)", why);
        return lac_nbr_cpu_backend.gsm_topk(ctx, call, out);
    }
    gsm_device g = {NULL, NULL, NULL, NULL, NULL, NULL};
    lac_status st = gsm_run(ctx, call, out, &g);
    if (st != LAC_SUCCESS) cudaStreamSynchronize(ctx->cuda->stream);
    gsm_free(&g);
    return st;
}

/* The bucket methods' counting: the CPU's (their sums ran through lac_map). */
static lac_status cuda_bucket_topk(lac_ctx_t ctx, lac_nbr_call *call, int32_t *out)
{
    return lac_nbr_cpu_backend.bucket_topk(ctx, call, out);
}

static const lac_nbr_backend nbr_cuda_table = {"cuda", cuda_gsm_topk, cuda_bucket_topk};

extern "C" const lac_nbr_backend *lac_nbr_backend_cuda(void) { return &nbr_cuda_table; }
