/* The neighbour search on CUDA (nbr_backend.h), handed out by the gateway:
 * exact GSM top-K on the GPU (here), simLSH on the GPU (nbr_lsh.cu); the
 * other bucket methods' counting stays the CPU's (their code sums go through
 * lac_map).
 *
 * GSM: the six co-rating sums of every pair (n, sx, sy, sxx, syy, sxy over
 * the users who rated both items) are products of dense item x user
 * matrices I (1 where rated), R (the rating) and R2 (its square), e.g.
 * sxy = R_x . R_y and sx = R_x . I_y: six GEMMs on the tensor cores for a
 * block of items x against every item y, never more than a block's B x N
 * sums at once. A warp per item x then scores every y with
 * lac_nbr_shrunk_pearson (the CPU's formula, float64) and keeps the K best
 * (higher S, then lower index) in shared memory: a candidate enters when it
 * beats the set's worst, which the warp finds again after each entry.
 *
 * Exact, as the CPU is, in two cases. Half stars (2r an integer, |r| <= 5.5):
 * int8 inputs 1, 2r and 4r^2 and int32 sums (below 2^31), halved and
 * quartered back exactly. Otherwise fp16 inputs and fp32 sums when every
 * rating and its square are fp16 numbers and every sum stays on fp32's
 * integer grid: ratings multiples of 2^-s and an item's sum of squares times
 * 2^2s (and its count, its sum of |r| times 2^s) below 2^24. Either way each
 * sum equals the CPU's float64 sum and the lists are the same, ties
 * included. Data outside both, K over 1024, or dense matrices over half the
 * free device memory are searched by the CPU's table (logged). */
#include "backend/cuda/cuda_internal.h"
#include "core/knobs.h"
#include "mf/nbr_backend.h"

#include <cuda_fp16.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#define GSM_WARPS 4            /* warps (items x) a block of the top-K kernel */
#define GSM_MAX_K 1024         /* the set of a warp in shared memory: K x 12 bytes */
#define GSM_SUM_BYTES ((size_t)1 << 30)   /* a block's six B x N sums at most */
#define GSM_USERS 0            /* users a GEMM sums over at once, 0: all (LACUNA_NBR_CUDA_GSM_USERS) */

/* Item x's dense rows: I, R, R2 (items x users), fp16 (r, r^2) or int8
 * (2r, 4r^2: half stars as integers). */
static __device__ __forceinline__ void dense_put(__half *at, float v) { *at = __float2half(v); }
static __device__ __forceinline__ void dense_put(int8_t *at, float v) { *at = (int8_t)v; }

template <typename E>
static __global__ void fill_dense(const int64_t *__restrict__ start, const int32_t *__restrict__ user,
                                  const float *__restrict__ val, int64_t num_items, int64_t ld, float scale,
                                  E *__restrict__ I, E *__restrict__ R, E *__restrict__ R2)
{
    const int64_t j = blockIdx.x;
    if (j >= num_items) return;
    for (int64_t a = start[j] + threadIdx.x; a < start[j + 1]; a += blockDim.x) {
        const int64_t at = j * ld + user[a];
        const float r = val[a] * scale;
        dense_put(I + at, 1.0f);
        dense_put(R + at, r);
        dense_put(R2 + at, r * r);
    }
}

/* flag: set when a rating is no half star within [-5.5, 5.5] (2r not an
 * integer of int8's reach with its square) */
static __global__ void half_star_check(const float *__restrict__ val, int64_t nnz, int *__restrict__ flag)
{
    const int64_t a = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (a >= nnz) return;
    const float t = 2.0f * val[a];
    if (!(t == rintf(t) && fabsf(t) <= 11.0f)) *flag = 1;
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
 * into out (best first). sums: six ldn x B arrays, (y, x - x0) at
 * y + (x - x0) ldn, fp32 (fp16 inputs) or int32 (int8 inputs: sums of 2r
 * and 4r^2, scaled back exactly by halves and quarters). */
template <typename T>
static __global__ void __launch_bounds__(32 * GSM_WARPS) gsm_select(const T *__restrict__ sums, int64_t N,
                                                                   int64_t ldn, int64_t x0, int64_t B, int K,
                                                                   double shrink, double h,
                                                                   int32_t *__restrict__ out)
{
    extern __shared__ unsigned char smem[];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t xl = (int64_t)blockIdx.x * GSM_WARPS + warp;
    if (xl >= B) return;   /* the whole warp */
    const int64_t x = x0 + xl;
    double *sc = (double *)smem + (size_t)warp * K;
    int *id = (int *)((double *)smem + (size_t)GSM_WARPS * K) + (size_t)warp * K;
    const size_t plane = (size_t)ldn * (size_t)B;
    const T *col = sums + (size_t)xl * (size_t)ldn;
    const double h2 = h * h;
    int count = 0, wi = -1, wp = -1;
    double ws = INFINITY;
    for (int64_t y0 = 0; y0 < N; y0 += 32) {
        const int64_t y = y0 + lane;
        const bool valid = y < N && y != x;
        double s = -INFINITY;
        if (valid)
            s = lac_nbr_shrunk_pearson((double)col[y], h * (double)col[plane + y], h * (double)col[2 * plane + y],
                                       h2 * (double)col[3 * plane + y], h2 * (double)col[4 * plane + y],
                                       h2 * (double)col[5 * plane + y], shrink);
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
    float *val;
    void *sums, *dense;
    int32_t *out;
    int *flag;
};

static void gsm_free(gsm_device *g)
{
    void *ptrs[] = {g->start, g->user, g->val, g->sums, g->dense, g->out, g->flag};
    for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0]; i++)
        if (ptrs[i]) cudaFree(ptrs[i]);
}

/* The GEMMs' inputs: int8 (half stars), fp16 (fp16's exact grid), or none. */
typedef enum { GSM_INT8, GSM_FP16, GSM_CPU } gsm_path;

static lac_status gsm_run(lac_ctx_t ctx, lac_nbr_call *call, int32_t *out, gsm_device *g, gsm_path path)
{
    const lac_nbr_data *d = call->data;
    const int64_t N = d->num_items, U = d->num_users, nnz = d->nnz;
    const int K = call->k, i8 = path == GSM_INT8;
    const size_t esize = i8 ? 1 : sizeof(__half);
    cudaStream_t st = ctx->cuda->stream;
    double t_start = omp_get_wtime();
    const int64_t ld = (U + 63) / 64 * 64;   /* users, padded with zeros: aligned rows for the tensor cores */
    /* the sums' columns 256-byte aligned: cuBLAS's fast kernels want them */
    const int64_t ldn = (N + 63) / 64 * 64;
    /* planes of ldn rows (the rows past N zero): every GEMM dimension but the
     * last block's a multiple of 64 */
    size_t dense = (size_t)ldn * (size_t)ld;
    int64_t B = (int64_t)(GSM_SUM_BYTES / (6 * sizeof(float) * (size_t)ldn));
    B = B >= 64 ? B / 64 * 64 : B < 1 ? 1 : B;
    B = B > N ? N : B;
    size_t sums = 6 * (size_t)ldn * (size_t)B;
    call->bytes = (int64_t)(3 * dense * esize + sums * 4 + (size_t)N * K * 4 + (size_t)nnz * 8 + (size_t)(N + 1) * 8);
    LAC_CUDA_CHECK(ctx, cudaMalloc((void **)&g->dense, 3 * dense * esize));
    LAC_CUDA_CHECK(ctx, cudaMalloc((void **)&g->sums, sums * 4));
    LAC_CUDA_CHECK(ctx, cudaMalloc((void **)&g->out, (size_t)N * K * sizeof(int32_t)));
    LAC_CUDA_CHECK(ctx, cudaMemsetAsync(g->dense, 0, 3 * dense * esize, st));
    if (i8) {
        int8_t *I = (int8_t *)g->dense, *R = I + dense, *R2 = R + dense;
        fill_dense<<<(unsigned)N, 256, 0, st>>>(g->start, g->user, g->val, N, ld, 2.0f, I, R, R2);
    } else {
        __half *I = (__half *)g->dense, *R = I + dense, *R2 = R + dense;
        fill_dense<<<(unsigned)N, 256, 0, st>>>(g->start, g->user, g->val, N, ld, 1.0f, I, R, R2);
    }
    LAC_CUDA_CHECK_LAUNCH(ctx);
    cublasHandle_t blas;
    LAC_CHECK(lac_cuda_cublas(ctx, &blas));
    LAC_CUDA_CHECK(ctx, cudaStreamSynchronize(st));
    double t_fill = omp_get_wtime();
    LAC_CUBLAS_CHECK(ctx, cublasSetStream(blas, st));
    /* (x side, y side) of n, sx, sy, sxx, syy, sxy: planes 0 (I), 1 (R), 2 (R2) */
    const int xp[6] = {0, 1, 0, 2, 0, 1}, yp[6] = {0, 0, 1, 0, 2, 1};
    const float one = 1.0f, zero = 0.0f;
    const int32_t one_i = 1, zero_i = 0;
    size_t smem = (size_t)GSM_WARPS * K * (sizeof(double) + sizeof(int));
    if (i8)
        LAC_CUDA_CHECK(ctx, cudaFuncSetAttribute(gsm_select<int32_t>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                 (int)smem));
    else
        LAC_CUDA_CHECK(ctx, cudaFuncSetAttribute(gsm_select<float>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                 (int)smem));
    /* the GEMMs' and the selections' device times apart (events between) */
    const int64_t nblocks = (N + B - 1) / B;
    cudaEvent_t *ev = (cudaEvent_t *)calloc((size_t)(2 * nblocks + 1), sizeof *ev);
    if (!ev) return LAC_ERR_OUT_OF_MEMORY;
    for (int64_t e = 0; e < 2 * nblocks + 1; e++) cudaEventCreate(&ev[e]);
    cudaEventRecord(ev[0], st);
    const char *base = (const char *)g->dense;
    /* users a GEMM at once: slices add up (exact sums in any order) */
    int64_t kc = lac_knob_int(ctx, LAC_KNOB_NBR_CUDA_GSM_USERS, GSM_USERS);
    kc = kc <= 0 || kc >= ld ? ld : (kc + 63) / 64 * 64;
    lac_status status = LAC_SUCCESS;
    for (int64_t x0 = 0, blk = 0; x0 < N && status == LAC_SUCCESS; x0 += B, blk++) {
        int64_t b = N - x0 < B ? N - x0 : B;
        for (int q = 0; q < 6 && status == LAC_SUCCESS; q++)   /* C (N x b, column-major, ldn) = Y^T X */
            for (int64_t k0 = 0; k0 < ld && status == LAC_SUCCESS; k0 += kc) {
                const int k = (int)(ld - k0 < kc ? ld - k0 : kc);
                const void *Y = base + ((size_t)yp[q] * dense + (size_t)k0) * esize;
                const void *X = base + ((size_t)xp[q] * dense + (size_t)x0 * ld + (size_t)k0) * esize;
                void *C = (char *)g->sums + (size_t)q * ldn * b * 4;
                cublasStatus_t bs =
                    i8 ? cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)ldn, (int)b, k, &one_i, Y, CUDA_R_8I, (int)ld,
                                      X, CUDA_R_8I, (int)ld, k0 ? &one_i : &zero_i, C, CUDA_R_32I, (int)ldn,
                                      CUBLAS_COMPUTE_32I, CUBLAS_GEMM_DEFAULT)
                       : cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)ldn, (int)b, k, &one, Y, CUDA_R_16F, (int)ld,
                                      X, CUDA_R_16F, (int)ld, k0 ? &one : &zero, C, CUDA_R_32F, (int)ldn,
                                      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
                /* int8 refused: the caller tries fp16 */
                if (bs != CUBLAS_STATUS_SUCCESS)
                    status = lac_error(ctx, i8 ? LAC_ERR_UNSUPPORTED : LAC_ERR_CUDA,
                                       "GSM's %s GEMM failed (cuBLAS status %d)", i8 ? "int8" : "fp16", (int)bs);
            }
        if (status != LAC_SUCCESS) break;
        cudaEventRecord(ev[2 * blk + 1], st);
        const unsigned grid = (unsigned)((b + GSM_WARPS - 1) / GSM_WARPS);
        if (i8)
            gsm_select<<<grid, 32 * GSM_WARPS, smem, st>>>((const int32_t *)g->sums, N, ldn, x0, b, K, call->shrink,
                                                           0.5, g->out);
        else
            gsm_select<<<grid, 32 * GSM_WARPS, smem, st>>>((const float *)g->sums, N, ldn, x0, b, K, call->shrink,
                                                           1.0, g->out);
        cudaError_t le = cudaGetLastError();
        if (le != cudaSuccess) status = lac_error(ctx, LAC_ERR_CUDA, "GSM's selection: %s", cudaGetErrorString(le));
        cudaEventRecord(ev[2 * blk + 2], st);
    }
    if (status == LAC_SUCCESS) {
        cudaError_t e1 = cudaMemcpyAsync(out, g->out, (size_t)N * K * sizeof(int32_t), cudaMemcpyDeviceToHost, st);
        cudaError_t e2 = cudaStreamSynchronize(st);
        if (e1 != cudaSuccess || e2 != cudaSuccess)
            status = lac_error(ctx, LAC_ERR_CUDA, "GSM on the GPU: %s", cudaGetErrorString(e1 != cudaSuccess ? e1 : e2));
    }
    double gemm_s = 0, select_s = 0;
    for (int64_t e = 0; status == LAC_SUCCESS && e < 2 * nblocks; e++) {
        float ms = 0;
        cudaEventElapsedTime(&ms, ev[e], ev[e + 1]);
        *(e % 2 ? &select_s : &gemm_s) += ms / 1e3;
    }
    for (int64_t e = 0; e < 2 * nblocks + 1; e++) cudaEventDestroy(ev[e]);
    free(ev);
    if (status != LAC_SUCCESS) return status;
    lac_log(ctx, LAC_LOG_INFO, "mf neighbours: GSM on the GPU (%s inputs), %lld blocks of %lld items: %.3f s to the "
            "dense matrices, %.3f s for the sums (GEMMs of %lld users, %.4f s on the device) and the selection (%.4f s)",
            i8 ? "int8" : "fp16", (long long)nblocks, (long long)B, t_fill - t_start, omp_get_wtime() - t_fill,
            (long long)kc, gemm_s, select_s);
    return LAC_SUCCESS;
}

/* Uploads the item-major ratings and picks the GEMMs' inputs: int8 when
 * every rating is a half star within +-5.5 (checked on the device; int32
 * sums exact below 2^31), else fp16 where exact_on_tensor_cores holds (the
 * host's scan), else the CPU's table; the knob LACUNA_NBR_CUDA_GSM forces
 * fp16 (int8 data too) for measurements. */
static lac_status gsm_prepare(lac_ctx_t ctx, const lac_nbr_data *d, gsm_device *g, gsm_path *path)
{
    const int64_t N = d->num_items, nnz = d->nnz;
    cudaStream_t st = ctx->cuda->stream;
    LAC_CUDA_CHECK(ctx, cudaMalloc((void **)&g->start, (size_t)(N + 1) * sizeof(int64_t)));
    LAC_CUDA_CHECK(ctx, cudaMalloc((void **)&g->user, (size_t)(nnz ? nnz : 1) * sizeof(int32_t)));
    LAC_CUDA_CHECK(ctx, cudaMalloc((void **)&g->val, (size_t)(nnz ? nnz : 1) * sizeof(float)));
    LAC_CUDA_CHECK(ctx, cudaMalloc((void **)&g->flag, sizeof(int)));
    LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(g->start, d->item_start, (size_t)(N + 1) * sizeof(int64_t),
                                        cudaMemcpyHostToDevice, st));
    LAC_CUDA_CHECK(ctx, cudaMemsetAsync(g->flag, 0, sizeof(int), st));
    if (nnz) {
        LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(g->user, d->item_user, (size_t)nnz * 4, cudaMemcpyHostToDevice, st));
        LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(g->val, d->item_val, (size_t)nnz * 4, cudaMemcpyHostToDevice, st));
        half_star_check<<<(unsigned)((nnz + 255) / 256), 256, 0, st>>>(g->val, nnz, g->flag);
        LAC_CUDA_CHECK_LAUNCH(ctx);
    }
    int flag = 1;
    LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(&flag, g->flag, sizeof flag, cudaMemcpyDeviceToHost, st));
    LAC_CUDA_CHECK(ctx, cudaStreamSynchronize(st));
    const char *force = lac_knob_string(ctx, LAC_KNOB_NBR_CUDA_GSM);
    int fp16 = force && strcmp(force, "fp16") == 0;
    /* int32 sums: at most 121 a rater and item */
    *path = !flag && !fp16 && d->num_users < (INT64_C(1) << 31) / 121 ? GSM_INT8
            : exact_on_tensor_cores(d)                                 ? GSM_FP16
                                                                       : GSM_CPU;
    return LAC_SUCCESS;
}

static lac_status cuda_gsm_topk(lac_ctx_t ctx, lac_nbr_call *call, int32_t *out)
{
    const lac_nbr_data *d = call->data;
    double t0 = omp_get_wtime();
    if (call->k > GSM_MAX_K || d->num_users > INT32_MAX || d->num_items > INT32_MAX) {
        lac_log(ctx, LAC_LOG_INFO, "mf neighbours: exact GSM on the CPU (%s)",
                call->k > GSM_MAX_K ? "K over 1024" : "too many users or items");
        return lac_nbr_cpu_backend.gsm_topk(ctx, call, out);
    }
    LAC_CHECK(lac_cuda_use_device(ctx));
    gsm_device g;
    memset(&g, 0, sizeof g);
    gsm_path path = GSM_CPU;
    lac_status st = gsm_prepare(ctx, d, &g, &path);
    size_t free_bytes = 0, total = 0;
    if (st == LAC_SUCCESS && cudaMemGetInfo(&free_bytes, &total) != cudaSuccess) free_bytes = 0;
    double dense = 3.0 * 2.0 * (double)(d->num_items + 63) * (double)(d->num_users + 63);   /* fp16's, the fallback's */
    const char *why = path == GSM_CPU                                  ? "ratings off fp16's exact grid"
                      : dense + GSM_SUM_BYTES > 0.5 * (double)free_bytes ? "dense matrices over half the free memory"
                                                                         : NULL;
    lac_log(ctx, LAC_LOG_INFO, "mf neighbours: GSM's uploads and exactness check %.3f s", omp_get_wtime() - t0);
    if (st == LAC_SUCCESS && why) {
        lac_log(ctx, LAC_LOG_INFO, "mf neighbours: exact GSM on the CPU (%s)", why);
        gsm_free(&g);
        return lac_nbr_cpu_backend.gsm_topk(ctx, call, out);
    }
    if (st == LAC_SUCCESS) st = gsm_run(ctx, call, out, &g, path);
    if (st == LAC_ERR_UNSUPPORTED && path == GSM_INT8) {
        lac_log(ctx, LAC_LOG_INFO, "mf neighbours: %s; GSM again with fp16 inputs", lac_last_error(ctx));
        cudaStreamSynchronize(ctx->cuda->stream);
        void *ptrs[] = {g.sums, g.dense, g.out};
        for (size_t i = 0; i < 3; i++)
            if (ptrs[i]) cudaFree(ptrs[i]);
        g.sums = g.dense = NULL;
        g.out = NULL;
        st = exact_on_tensor_cores(d) ? gsm_run(ctx, call, out, &g, GSM_FP16)
                                      : lac_nbr_cpu_backend.gsm_topk(ctx, call, out);
    }
    if (st != LAC_SUCCESS) cudaStreamSynchronize(ctx->cuda->stream);
    gsm_free(&g);
    return st;
}

/* The bucket methods' counting: the CPU's (their sums ran through lac_map). */
static lac_status cuda_bucket_topk(lac_ctx_t ctx, lac_nbr_call *call, int32_t *out)
{
    return lac_nbr_cpu_backend.bucket_topk(ctx, call, out);
}

/* simLSH whole on the GPU: nbr_lsh.cu */
extern "C" lac_status lac_nbr_cuda_simlsh_topk(lac_ctx_t ctx, lac_nbr_call *call, int32_t *out);

static const lac_nbr_backend nbr_cuda_table = {"cuda", cuda_gsm_topk, cuda_bucket_topk, lac_nbr_cuda_simlsh_topk};

extern "C" const lac_nbr_backend *lac_nbr_backend_cuda(void) { return &nbr_cuda_table; }
