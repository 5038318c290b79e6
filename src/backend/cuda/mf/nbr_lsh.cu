/* simLSH on CUDA (nbr_backend.h's simlsh_topk), from the item-major ratings
 * to the lists:
 *  - keys: a block per item and 32 tables, a lane per table; the lanes sum
 *    their codes' G columns over the item's raters (psi(r) signed by the
 *    user's random string, lac_nbr_user_word, whose seed and user mixes are
 *    taken once per user) in registers, and the signs are folded into the
 *    key as the front end's bucket_keys does. The front end sums the same columns
 *    through lac_map, which takes its source rows as an array: here that
 *    array would be every rating's 2,400 signs (85 GB on the MovieLens-10M
 *    shape), so the signs are made where they are added.
 *  - buckets: each table's items sorted by key (CUB's segmented radix sort),
 *    a bucket's first and last slot per (table, item);
 *  - counting: a block per item gathers the members of its buckets (those of
 *    at most max_bucket items) into shared memory, sorts them, counts the
 *    runs and sorts (count down, item up): the first K are the list. An item
 *    with more than LSH_CAP candidates is counted by the CPU's table (keys
 *    copied back, logged); fewer than K distinct candidates are filled from
 *    lac_nbr_fill's sequence, as on the CPU.
 * The lists are the CPU's when every sum is exact in fp32 in any order: every
 * psi(r) a multiple of 2^-s and each item's sum of |psi(r)| times 2^s below
 * 2^24 (checked on the device first; half stars pass). Otherwise the call is
 * declined and the front end's lac_map sums run. */
#include "backend/cuda/cuda_internal.h"
#include "mf/nbr_backend.h"

#include <cub/cub.cuh>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#define LSH_KEY_WARPS 8         /* warps of the key kernel: slices of an item's ratings */
#define LSH_CAP 4096            /* candidates (repeats counted) of an item in shared memory */
#define LSH_COUNT_THREADS 256
#define LSH_GRID_THREADS 256

/* psi(r) as lac_mf_nbr_weight makes it (float64 powers, then float). */
static __device__ __forceinline__ float lsh_weight(float r, int power)
{
    double x = r, rp = x;
    for (int e = 1; e < power; e++) rp *= x;
    return (float)rp;
}

/* Fractional bits of a float: the least s with x 2^s an integer (99: none
 * below 2^-126, a subnormal or not finite). */
static __device__ __forceinline__ int frac_bits(float x)
{
    uint32_t b = __float_as_uint(x);
    int e = (int)((b >> 23) & 0xFF);
    if (x == 0.0f) return 0;
    if (e == 0 || e == 255) return 99;
    uint32_t m = (b & 0x7FFFFF) | 0x800000;
    int s = 23 - (__ffs(m) - 1) - (e - 127);
    return s < 0 ? 0 : s;
}

/* Per item: the most fractional bits of its weights and the sum of |w|. */
static __global__ void lsh_grid(const int64_t *__restrict__ start, const float *__restrict__ val, int power,
                                int *__restrict__ bits, double *__restrict__ abs_sum)
{
    typedef cub::BlockReduce<int, LSH_GRID_THREADS> reduce_int;
    typedef cub::BlockReduce<double, LSH_GRID_THREADS> reduce_dbl;
    __shared__ union {
        typename reduce_int::TempStorage i;
        typename reduce_dbl::TempStorage d;
    } tmp;
    const int64_t j = blockIdx.x;
    int s = 0;
    double a = 0.0;
    for (int64_t x = start[j] + threadIdx.x; x < start[j + 1]; x += blockDim.x) {
        float w = lsh_weight(val[x], power);
        int f = frac_bits(w);
        s = f > s ? f : s;
        a += fabs((double)w);
    }
    int bs = reduce_int(tmp.i).Reduce(s, ::cuda::maximum<>());
    __syncthreads();
    double ba = reduce_dbl(tmp.d).Sum(a);
    if (threadIdx.x == 0) bits[j] = bs, abs_sum[j] = ba;
}

/* The two mixes of lac_nbr_user_word that do not depend on the block. */
static __global__ void lsh_user_mix(uint64_t seed, int64_t users, uint64_t *__restrict__ mix)
{
    const int64_t u = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (u < users) mix[u] = lac_mix64(seed ^ 0x5851F42D4C957F2Dull) ^ lac_mix64((uint64_t)u * 0x9E3779B97F4A7C15ull);
}

/* keys[t N + j]: table t's key of item j. A block per item and 32 tables:
 * lane l is table 32 blockIdx.y + l, warp w sums the ratings w, w + 8, ...;
 * a pass covers the codes whose columns fit 32 registers (one pass for
 * p = 3, G = 8), the warps' sums meet in shared memory (exact, so in any
 * order) and warp 0 folds the signs into the keys. */
static __global__ void __launch_bounds__(32 * LSH_KEY_WARPS)
    lsh_keys(const int64_t *__restrict__ start, const int32_t *__restrict__ user, const float *__restrict__ val,
             const uint64_t *__restrict__ mix, int64_t N, int q, int p, int G, int power, uint64_t *__restrict__ keys)
{
    __shared__ float part[LSH_KEY_WARPS][32][33];
    const int64_t j = blockIdx.x;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int t = blockIdx.y * 32 + lane;
    const int64_t lo = start[j], hi = start[j + 1];
    const int per = 32 / G > 0 ? 32 / G : 1;   /* codes a pass */
    uint64_t key = LAC_NBR_KEY0;
    for (int x0 = 0; x0 < p; x0 += per) {
        const int codes = p - x0 < per ? p - x0 : per, ncol = codes * G;
        const int64_t c0 = ((int64_t)t * p + x0) * G;
        const int64_t blk = c0 / 64;
        const int off = (int)(c0 % 64);
        const bool two = off + ncol > 64;
        const uint64_t b0 = (uint64_t)blk * 0xD1342543DE82EF95ull, b1 = (uint64_t)(blk + 1) * 0xD1342543DE82EF95ull;
        float acc[32];
#pragma unroll
        for (int g = 0; g < 32; g++) acc[g] = 0.0f;
        for (int64_t a = lo + warp; a < hi; a += LSH_KEY_WARPS) {
            const uint64_t m = mix[user[a]];
            const float w = lsh_weight(val[a], power);
            uint64_t bits = lac_mix64(m ^ b0) >> off;
            if (two) bits |= lac_mix64(m ^ b1) << (64 - off);
#pragma unroll
            for (int g = 0; g < 32; g++) acc[g] += (bits >> g) & 1 ? w : -w;
        }
#pragma unroll
        for (int g = 0; g < 32; g++) part[warp][g][lane] = acc[g];
        __syncthreads();
        if (warp == 0) {
            for (int x = 0; x < codes; x++) {
                uint64_t code = 0;
                for (int g = 0; g < G; g++) {
                    float sum = 0.0f;
                    for (int v = 0; v < LSH_KEY_WARPS; v++) sum += part[v][x * G + g][lane];
                    code |= (uint64_t)(sum >= 0.0f) << g;
                }
                key = lac_nbr_key_fold(key, x0 + x, code);
            }
        }
        __syncthreads();
    }
    if (warp == 0 && t < q) keys[(int64_t)t * N + j] = key;
}

static __global__ void lsh_iota(int64_t n, int64_t N, int32_t *__restrict__ item, int *__restrict__ offsets, int q)
{
    const int64_t x = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (x < n) item[x] = (int32_t)(x % N);
    if (x <= q) offsets[x] = (int)(x * N);
}

/* head[x]: slot x starts a bucket (a new key, or a new table). */
static __global__ void lsh_heads(const uint64_t *__restrict__ key, int64_t n, int64_t N, int *__restrict__ head)
{
    const int64_t x = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (x < n) head[x] = x % N == 0 || key[x] != key[x - 1];
}

/* bucket b's first slot (first[buckets] = n); bid: inclusive sums of heads. */
static __global__ void lsh_firsts(const int *__restrict__ bid, int64_t n, int *__restrict__ first)
{
    const int64_t x = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (x >= n) return;
    if (x == 0 || bid[x] != bid[x - 1]) first[bid[x] - 1] = (int)x;
    if (x == n - 1) first[bid[x]] = (int)n;
}

/* (table t, item j)'s bucket: slots [lo, hi) of the sorted items. */
static __global__ void lsh_ranges(const int32_t *__restrict__ item, const int *__restrict__ bid,
                                  const int *__restrict__ first, int64_t n, int64_t N, int *__restrict__ lo,
                                  int *__restrict__ hi)
{
    const int64_t x = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (x >= n) return;
    const int64_t at = x / N * N + item[x];
    const int b = bid[x] - 1;
    lo[at] = first[b];
    hi[at] = first[b + 1];
}

/* Ascending bitonic sort of a[0, P) in shared memory, P a power of two. */
template <typename T>
static __device__ void lsh_bitonic(T *a, int P)
{
    for (int k = 2; k <= P; k <<= 1)
        for (int s = k >> 1; s > 0; s >>= 1) {
            for (int i = threadIdx.x; i < P; i += blockDim.x) {
                const int l = i ^ s;
                if (l > i) {
                    const T x = a[i], y = a[l];
                    if ((x > y) == ((i & k) == 0)) a[i] = y, a[l] = x;
                }
            }
            __syncthreads();
        }
}

/* A block per item: its candidates counted, the K most frequent into out;
 * have[j] = how many (-1: more than LSH_CAP candidates, left to the host). */
static __global__ void __launch_bounds__(LSH_COUNT_THREADS)
    lsh_count(const int32_t *__restrict__ member, const int *__restrict__ lo, const int *__restrict__ hi, int64_t N,
              int q, int max_bucket, int K, uint64_t seed, int32_t *__restrict__ out, int *__restrict__ have)
{
    extern __shared__ unsigned long long packed[];   /* LSH_CAP, then cand */
    int32_t *cand = (int32_t *)(packed + LSH_CAP);
    __shared__ int total, cursor, distinct;
    const int64_t j = blockIdx.x;
    if (threadIdx.x == 0) total = 0, cursor = 0, distinct = 0;
    __syncthreads();
    int mine = 0;
    for (int t = threadIdx.x; t < q; t += blockDim.x) {
        const int s = hi[(int64_t)t * N + j] - lo[(int64_t)t * N + j];
        if (s <= max_bucket) mine += s - 1;
    }
    if (mine) atomicAdd(&total, mine);
    __syncthreads();
    const int n = total;
    if (n > LSH_CAP) {
        if (threadIdx.x == 0) have[j] = -1;
        return;
    }
    for (int t = threadIdx.x; t < q; t += blockDim.x) {
        const int b = lo[(int64_t)t * N + j], e = hi[(int64_t)t * N + j];
        if (e - b > max_bucket) continue;
        for (int x = b; x < e; x++) {
            const int32_t m = member[x];
            if (m != j) cand[atomicAdd(&cursor, 1)] = m;
        }
    }
    int P = 1;
    while (P < n) P <<= 1;
    for (int i = n + threadIdx.x; i < P; i += blockDim.x) cand[i] = INT32_MAX;
    __syncthreads();
    lsh_bitonic(cand, P);
    /* a run's first slot packs (UINT32_MAX - count, item): ascending is the
     * CPU's order, more frequent first, then the lower item */
    int runs = 0;
    for (int i = threadIdx.x; i < P; i += blockDim.x) {
        unsigned long long v = ~0ull;
        if (i < n && (i == 0 || cand[i] != cand[i - 1])) {
            int e = i + 1;
            while (e < n && cand[e] == cand[i]) e++;
            v = ((unsigned long long)(0xFFFFFFFFu - (unsigned)(e - i)) << 32) | (uint32_t)cand[i];
            runs++;
        }
        packed[i] = v;
    }
    if (runs) atomicAdd(&distinct, runs);
    __syncthreads();
    lsh_bitonic(packed, P);
    const int h = distinct < K ? distinct : K;
    for (int x = threadIdx.x; x < h; x += blockDim.x) out[j * K + x] = (int32_t)(packed[x] & 0xFFFFFFFFu);
    __syncthreads();
    if (threadIdx.x == 0) {
        lac_nbr_fill(seed, j, N, K, out + j * K, h);
        have[j] = h;
    }
}

struct lsh_device {
    int64_t *start;
    int32_t *user, *item_in, *item_out;
    float *val;
    uint64_t *mix, *key_in, *key_out;
    int *bits, *offsets, *head, *bid, *first, *lo, *hi, *have;
    double *abs_sum;
    int32_t *out;
    void *temp;
};

#define LSH_ALLOC(ctx, g, field, count, peak)                                                               \
    do {                                                                                                    \
        size_t bytes_ = (size_t)(count) * sizeof *(g)->field;                                               \
        LAC_CUDA_CHECK(ctx, cudaMalloc((void **)&(g)->field, bytes_ ? bytes_ : 1));                         \
        *(peak) += (int64_t)bytes_;                                                                         \
    } while (0)

static void lsh_free(lsh_device *g)
{
    void *ptrs[] = {g->start, g->user, g->item_in, g->item_out, g->val, g->mix, g->key_in, g->key_out, g->bits,
                    g->offsets, g->head, g->bid, g->first, g->lo, g->hi, g->have, g->abs_sum, g->out, g->temp};
    for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0]; i++)
        if (ptrs[i]) cudaFree(ptrs[i]);
}

/* Items whose candidates overflow shared memory: the CPU's table on the keys. */
static lac_status lsh_overflow(lac_ctx_t ctx, lac_nbr_call *call, const lsh_device *g, const int *have,
                               int32_t *out)
{
    const int64_t N = call->data->num_items, n = N * call->tables;
    const int K = call->k;
    int64_t rows = 0;
    for (int64_t j = 0; j < N; j++) rows += have[j] < 0;
    if (!rows) return LAC_SUCCESS;
    uint64_t *keys = (uint64_t *)lac_malloc(ctx, (size_t)n * sizeof *keys);
    int32_t *row = (int32_t *)lac_malloc(ctx, (size_t)rows * sizeof *row);
    int32_t *lists = (int32_t *)lac_malloc(ctx, (size_t)rows * (size_t)K * sizeof *lists);
    lac_status st = keys && row && lists ? LAC_SUCCESS : LAC_ERR_OUT_OF_MEMORY;
    if (st == LAC_SUCCESS) {
        rows = 0;
        for (int64_t j = 0; j < N; j++)
            if (have[j] < 0) row[rows++] = (int32_t)j;
        cudaError_t e = cudaMemcpy(keys, g->key_in, (size_t)n * sizeof *keys, cudaMemcpyDeviceToHost);
        st = e == cudaSuccess ? LAC_SUCCESS : lac_error(ctx, LAC_ERR_CUDA, "simLSH keys back: %s", cudaGetErrorString(e));
    }
    if (st == LAC_SUCCESS) {
        lac_nbr_call c = *call;
        c.keys = keys;
        c.rows = row;
        c.num_rows = rows;
        st = lac_nbr_cpu_backend.bucket_topk(ctx, &c, lists);
        lac_log(ctx, LAC_LOG_INFO, "mf neighbours: simLSH, %lld items of over %d candidates counted on the CPU",
                (long long)rows, LSH_CAP);
        if (st == LAC_SUCCESS) {
            call->bytes += c.bytes + n * 8 + rows * (K + 1) * 4;
            for (int64_t r = 0; r < rows; r++)
                memcpy(out + (int64_t)row[r] * K, lists + r * K, (size_t)K * sizeof *out);
        }
    }
    free(keys);
    free(row);
    free(lists);
    return st;
}

static lac_status lsh_run(lac_ctx_t ctx, lac_nbr_call *call, int32_t *out, lsh_device *g)
{
    const lac_nbr_data *d = call->data;
    const int64_t N = d->num_items, U = d->num_users, nnz = d->nnz, n = N * call->tables;
    const int q = call->tables, K = call->k;
    cudaStream_t st = ctx->cuda->stream;
    int64_t peak = 0;
    double t0 = omp_get_wtime();
    LSH_ALLOC(ctx, g, start, N + 1, &peak);
    LSH_ALLOC(ctx, g, user, nnz, &peak);
    LSH_ALLOC(ctx, g, val, nnz, &peak);
    LSH_ALLOC(ctx, g, bits, N, &peak);
    LSH_ALLOC(ctx, g, abs_sum, N, &peak);
    LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(g->start, d->item_start, (size_t)(N + 1) * 8, cudaMemcpyHostToDevice, st));
    if (nnz) {
        LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(g->user, d->item_user, (size_t)nnz * 4, cudaMemcpyHostToDevice, st));
        LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(g->val, d->item_val, (size_t)nnz * 4, cudaMemcpyHostToDevice, st));
    }
    lsh_grid<<<(unsigned)N, LSH_GRID_THREADS, 0, st>>>(g->start, g->val, call->psi_power, g->bits, g->abs_sum);
    LAC_CUDA_CHECK_LAUNCH(ctx);
    /* the exactness check's facts come back while the keys are made */
    int *bits = (int *)lac_malloc(ctx, (size_t)N * (sizeof(int) + sizeof(double)));
    if (!bits) return LAC_ERR_OUT_OF_MEMORY;
    double *abs_sum = (double *)(bits + N + (N & 1));
    LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(bits, g->bits, (size_t)N * sizeof(int), cudaMemcpyDeviceToHost, st));
    LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(abs_sum, g->abs_sum, (size_t)N * sizeof(double), cudaMemcpyDeviceToHost, st));
    LAC_CUDA_CHECK(ctx, cudaStreamSynchronize(st));
    int s = 0;
    for (int64_t j = 0; j < N; j++) s = bits[j] > s ? bits[j] : s;
    const char *why = s > 60 ? "a weight off every binary grid" : NULL;
    for (int64_t j = 0; j < N && !why; j++)
        if (ldexp(abs_sum[j], s) >= 16777216.0) why = "an item's weights summing off fp32's integer grid";
    free(bits);
    if (why) {
        lac_log(ctx, LAC_LOG_INFO, "mf neighbours: simLSH's sums on the host (%s)", why);
        call->declined = 1;
        return LAC_SUCCESS;
    }
    double t_check = omp_get_wtime();
    cudaEvent_t ev[4];
    for (int e = 0; e < 4; e++) LAC_CUDA_CHECK(ctx, cudaEventCreate(&ev[e]));
    LAC_CUDA_CHECK(ctx, cudaEventRecord(ev[0], st));
    LSH_ALLOC(ctx, g, mix, U, &peak);
    LSH_ALLOC(ctx, g, key_in, n, &peak);
    lsh_user_mix<<<(unsigned)((U + 255) / 256), 256, 0, st>>>(call->seed, U, g->mix);
    LAC_CUDA_CHECK_LAUNCH(ctx);
    dim3 grid((unsigned)N, (unsigned)((q + 31) / 32));
    lsh_keys<<<grid, 32 * LSH_KEY_WARPS, 0, st>>>(g->start, g->user, g->val, g->mix, N, q, call->p, call->bits,
                                                  call->psi_power, g->key_in);
    LAC_CUDA_CHECK_LAUNCH(ctx);
    LAC_CUDA_CHECK(ctx, cudaEventRecord(ev[1], st));
    /* each table sorted by key */
    LSH_ALLOC(ctx, g, key_out, n, &peak);
    LSH_ALLOC(ctx, g, item_in, n, &peak);
    LSH_ALLOC(ctx, g, item_out, n, &peak);
    LSH_ALLOC(ctx, g, offsets, q + 1, &peak);
    const unsigned blocks = (unsigned)((n + 255) / 256);
    lsh_iota<<<blocks, 256, 0, st>>>(n, N, g->item_in, g->offsets, q);
    LAC_CUDA_CHECK_LAUNCH(ctx);
    size_t sort_bytes = 0, scan_bytes = 0;
    LAC_CUDA_CHECK(ctx, cub::DeviceSegmentedRadixSort::SortPairs(NULL, sort_bytes, g->key_in, g->key_out,
                                                                 g->item_in, g->item_out, (int)n, q, g->offsets,
                                                                 g->offsets + 1, 0, 64, st));
    LSH_ALLOC(ctx, g, head, n, &peak);
    LSH_ALLOC(ctx, g, bid, n, &peak);
    LAC_CUDA_CHECK(ctx, cub::DeviceScan::InclusiveSum(NULL, scan_bytes, g->head, g->bid, (int)n, st));
    size_t temp = sort_bytes > scan_bytes ? sort_bytes : scan_bytes;
    LAC_CUDA_CHECK(ctx, cudaMalloc(&g->temp, temp));
    peak += (int64_t)temp;
    LAC_CUDA_CHECK(ctx, cub::DeviceSegmentedRadixSort::SortPairs(g->temp, sort_bytes, g->key_in, g->key_out,
                                                                 g->item_in, g->item_out, (int)n, q, g->offsets,
                                                                 g->offsets + 1, 0, 64, st));
    lsh_heads<<<blocks, 256, 0, st>>>(g->key_out, n, N, g->head);
    LAC_CUDA_CHECK_LAUNCH(ctx);
    LAC_CUDA_CHECK(ctx, cub::DeviceScan::InclusiveSum(g->temp, scan_bytes, g->head, g->bid, (int)n, st));
    LSH_ALLOC(ctx, g, first, n + 1, &peak);
    LSH_ALLOC(ctx, g, lo, n, &peak);
    LSH_ALLOC(ctx, g, hi, n, &peak);
    lsh_firsts<<<blocks, 256, 0, st>>>(g->bid, n, g->first);
    LAC_CUDA_CHECK_LAUNCH(ctx);
    lsh_ranges<<<blocks, 256, 0, st>>>(g->item_out, g->bid, g->first, n, N, g->lo, g->hi);
    LAC_CUDA_CHECK_LAUNCH(ctx);
    LAC_CUDA_CHECK(ctx, cudaEventRecord(ev[2], st));
    /* counted per item */
    LSH_ALLOC(ctx, g, out, N * K, &peak);
    LSH_ALLOC(ctx, g, have, N, &peak);
    const size_t smem = (size_t)LSH_CAP * (sizeof(unsigned long long) + sizeof(int32_t));
    LAC_CUDA_CHECK(ctx, cudaFuncSetAttribute(lsh_count, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    lsh_count<<<(unsigned)N, LSH_COUNT_THREADS, smem, st>>>(g->item_out, g->lo, g->hi, N, q, call->max_bucket, K,
                                                           call->seed, g->out, g->have);
    LAC_CUDA_CHECK_LAUNCH(ctx);
    LAC_CUDA_CHECK(ctx, cudaEventRecord(ev[3], st));
    int *have = (int *)lac_malloc(ctx, (size_t)N * sizeof *have);
    if (!have) return LAC_ERR_OUT_OF_MEMORY;
    cudaError_t e1 = cudaMemcpyAsync(out, g->out, (size_t)N * K * sizeof *out, cudaMemcpyDeviceToHost, st);
    cudaError_t e2 = cudaMemcpyAsync(have, g->have, (size_t)N * sizeof *have, cudaMemcpyDeviceToHost, st);
    cudaError_t e3 = cudaStreamSynchronize(st);
    if (e1 != cudaSuccess || e2 != cudaSuccess || e3 != cudaSuccess) {
        free(have);
        return lac_error(ctx, LAC_ERR_CUDA, "simLSH on the GPU: %s",
                         cudaGetErrorString(e1 != cudaSuccess ? e1 : e2 != cudaSuccess ? e2 : e3));
    }
    double t_dev = omp_get_wtime();
    float ms[3] = {0, 0, 0};
    for (int e = 0; e < 3; e++) cudaEventElapsedTime(&ms[e], ev[e], ev[e + 1]);
    for (int e = 0; e < 4; e++) cudaEventDestroy(ev[e]);
    call->bytes = peak;
    lac_status status = lsh_overflow(ctx, call, g, have, out);
    free(have);
    lac_log(ctx, LAC_LOG_INFO, "mf neighbours: simLSH on the GPU: %.4f s uploads and the exactness check, %.4f s the "
            "keys and the rest to the lists (keys %.4f s, sort %.4f s, count %.4f s), %.4f s the items left to the CPU; %.1f MB "
            "on the device", t_check - t0, t_dev - t_check, ms[0] / 1e3, ms[1] / 1e3, ms[2] / 1e3, omp_get_wtime() - t_dev, peak / 1048576.0);
    return status;
}

extern "C" lac_status lac_nbr_cuda_simlsh_topk(lac_ctx_t ctx, lac_nbr_call *call, int32_t *out)
{
    const lac_nbr_data *d = call->data;
    call->declined = 0;
    const char *why = call->rows                                             ? "a subset of items"
                      : d->num_items < 1 || d->num_items * (int64_t)call->tables > INT32_MAX / 2 ? "tables x items over 2^30"
                      : d->num_users > INT32_MAX                               ? "too many users"
                                                                               : NULL;
    if (why) {
        lac_log(ctx, LAC_LOG_INFO, "mf neighbours: simLSH's sums on the host (%s)", why);
        call->declined = 1;
        return LAC_SUCCESS;
    }
    LAC_CHECK(lac_cuda_use_device(ctx));
    lsh_device g;
    memset(&g, 0, sizeof g);
    lac_status st = lsh_run(ctx, call, out, &g);
    if (st != LAC_SUCCESS) cudaStreamSynchronize(ctx->cuda->stream);
    lsh_free(&g);
    return st;
}
