/* simLSH on CUDA (nbr_backend.h's simlsh_topk), from the caller's ratings
 * to the lists, in device memory O(N (K + q)) and nothing a rating:
 *  - keys, a chunk of items at a time: the host gathers the chunk's ratings
 *    item-major (lac_nbr_blocks: one pass over the triples per chunk,
 *    repeated pairs resolved as the layouts resolve them) into pinned
 *    staging, two buffers taking turns so that the next chunk is gathered
 *    while the device keys this one; a block per item and 32 tables, a lane
 *    per table, sums its codes' G columns over the item's raters (psi(r)
 *    signed by the user's random string, lac_nbr_user_word, whose seed and
 *    user mixes are taken once per user) in registers, and folds the signs
 *    into the key as the front end's bucket_keys does. The front end sums
 *    the same columns through lac_map, which takes its source rows as an
 *    array: here that array would be every rating's 2,400 signs (85 GB on
 *    the MovieLens-10M shape), so the signs are made where they are added.
 *  - buckets, a group of tables at a time: the group's keys sorted (CUB's
 *    segmented radix sort), then each table's 8 N bytes of keys give way to
 *    its bucket index in lac_nbr_index's form (N first slots, -1 where
 *    nothing counts, and the N sorted items, LAC_NBR_BUCKET_END on a
 *    bucket's last);
 *  - counting: a block per item gathers the members of its buckets (those of
 *    two to max_bucket items) into shared memory, sorts them, counts the
 *    runs and sorts (count down, item up): the first K are the list. An item
 *    with more than LSH_CAP candidates is counted by the CPU's table on the
 *    index (copied back, logged); fewer than K distinct candidates are
 *    filled from lac_nbr_fill's sequence, as on the CPU.
 * The lists are the CPU's when every sum is exact in fp32 in any order: for
 * each item, every psi(r) a multiple of 2^-s and the sum of |psi(r)| times
 * 2^s below 2^24 (checked on the device, chunk by chunk; half stars pass).
 * Otherwise the call is declined and the front end's sums run. Where the
 * caller keeps the sums (call->codes: training, for online updates), the
 * key kernel writes them to a device array of N x q p G floats, copied back
 * with the keys before these become the index: exact sums, so the floats
 * the front end's lac_map sums would keep, bit for bit. */
#include "backend/cuda/cuda_internal.h"
#include "core/knobs.h"
#include "mf/nbr_backend.h"

#include <cub/cub.cuh>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#define LSH_KEY_WARPS 8         /* warps of the key kernel: slices of an item's ratings */
#define LSH_CAP 4096            /* candidates (repeats counted) of an item in shared memory */
#define LSH_COUNT_THREADS 256
#define LSH_CHUNK ((int64_t)1 << 20)         /* ratings a chunk (LACUNA_NBR_CUDA_CHUNK) */
#define LSH_CHUNK_ITEMS ((int64_t)1 << 16)   /* items a chunk */

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

/* A block per item of a chunk: bad |= 1 where a weight is off every binary
 * grid, 2 where the sum of |w| times 2^s (s: the item's most fractional
 * bits) reaches 2^24, so that some sum of the item's might round. */
#define LSH_CHECK_THREADS 256
static __global__ void lsh_check(const int64_t *__restrict__ start, const float *__restrict__ val, int power,
                                 int *__restrict__ bad)
{
    typedef cub::BlockReduce<int, LSH_CHECK_THREADS> reduce_int;
    typedef cub::BlockReduce<double, LSH_CHECK_THREADS> reduce_dbl;
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
    if (threadIdx.x == 0 && (bs > 60 || ldexp(ba, bs) >= 16777216.0)) atomicOr(bad, bs > 60 ? 1 : 2);
}

/* The two mixes of lac_nbr_user_word that do not depend on the block. */
static __global__ void lsh_user_mix(uint64_t seed, int64_t users, uint64_t *__restrict__ mix)
{
    const int64_t u = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (u < users) mix[u] = lac_mix64(seed ^ 0x5851F42D4C957F2Dull) ^ lac_mix64((uint64_t)u * 0x9E3779B97F4A7C15ull);
}

/* keys[t N + j0 + b]: table t's key of the chunk's item b (its ratings
 * start[b] .. start[b + 1] of the chunk). A block per item and 32 tables:
 * lane l is table 32 blockIdx.y + l, warp w sums the ratings w, w + 8, ...;
 * a pass covers the codes whose columns fit 32 registers (one pass for
 * p = 3, G = 8), the warps' sums meet in shared memory (exact, so in any
 * order) and warp 0 folds the signs into the keys. */
static __global__ void __launch_bounds__(32 * LSH_KEY_WARPS)
    lsh_keys(const int64_t *__restrict__ start, const int32_t *__restrict__ user, const float *__restrict__ val,
             const uint64_t *__restrict__ mix, int64_t N, int64_t j0, int q, int p, int G, int power,
             uint64_t *__restrict__ keys, float *__restrict__ sums)
{
    __shared__ float part[LSH_KEY_WARPS][32][33];
    const int64_t j = blockIdx.x;   /* in the chunk */
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
                    if (sums && t < q) sums[(j0 + j) * ((int64_t)q * p * G) + c0 + x * G + g] = sum;
                }
                key = lac_nbr_key_fold(key, x0 + x, code);
            }
        }
        __syncthreads();
    }
    if (warp == 0 && t < q) keys[(int64_t)t * N + j0 + j] = key;
}

/* A group's slots: item[x] = x mod N, offsets[t] = t N (segments, t <= tables). */
static __global__ void lsh_iota(int64_t n, int64_t N, int32_t *__restrict__ item, int *__restrict__ offsets, int tables)
{
    const int64_t x = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (x < n) item[x] = (int32_t)(x % N);
    if (x <= tables) offsets[x] = (int)(x * N);
}

/* Table t of a group (keys sorted, their items beside them) into its bucket
 * index at idx + 2 N t: lo[item] (N: the bucket's first slot where it
 * counts, else -1), then the N items with LAC_NBR_BUCKET_END on each
 * bucket's last. A thread per bucket, from its first slot. */
static __global__ void lsh_index(const uint64_t *__restrict__ key, const int32_t *__restrict__ item, int64_t n,
                                 int64_t N, int max_bucket, int32_t *__restrict__ idx)
{
    const int64_t x = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (x >= n) return;
    const int64_t t = x / N, y = x % N;
    const uint64_t *k = key + t * N;
    const int32_t *it = item + t * N;
    if (y > 0 && k[y] == k[y - 1]) return;
    int64_t e = y + 1;
    while (e < N && k[e] == k[y]) e++;
    const bool counts = e - y > 1 && e - y <= max_bucket;
    int32_t *lo = idx + 2 * N * t, *member = lo + N;
    for (int64_t z = y; z < e; z++) {
        lo[it[z]] = counts ? (int32_t)y : -1;
        member[z] = it[z] | (z + 1 == e ? LAC_NBR_BUCKET_END : 0);
    }
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
    lsh_count(const int32_t *__restrict__ idx, int64_t N, int q, int K, uint64_t seed, int32_t *__restrict__ out,
              int *__restrict__ have)
{
    extern __shared__ unsigned long long packed[];   /* LSH_CAP, then cand */
    int32_t *cand = (int32_t *)(packed + LSH_CAP);
    __shared__ int cursor, distinct;
    const int64_t j = blockIdx.x;
    if (threadIdx.x == 0) cursor = 0, distinct = 0;
    __syncthreads();
    for (int t = threadIdx.x; t < q; t += blockDim.x) {
        const int32_t *lo = idx + 2 * N * t, *member = lo + N;
        const int32_t b = lo[j];
        if (b < 0) continue;
        for (int64_t x = b;; x++) {
            const int32_t v = member[x], m = v & ~LAC_NBR_BUCKET_END;
            if (m != j) {
                const int c = atomicAdd(&cursor, 1);
                if (c < LSH_CAP) cand[c] = m;
            }
            if (v & LAC_NBR_BUCKET_END) break;
        }
    }
    __syncthreads();
    const int n = cursor;
    if (n > LSH_CAP) {
        if (threadIdx.x == 0) have[j] = -1;
        return;
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

/* Device memory with its running total and peak. */
#define LSH_SLOTS 16
struct lsh_device {
    void *ptr[LSH_SLOTS];
    int64_t size[LSH_SLOTS];
    int64_t now, peak;
};

template <typename T>
static lac_status lsh_get(lac_ctx_t ctx, lsh_device *g, T **out, int64_t count)
{
    int64_t bytes = count * (int64_t)sizeof(T);
    int s = 0;
    while (s < LSH_SLOTS && g->ptr[s]) s++;
    if (s == LSH_SLOTS) return lac_error(ctx, LAC_ERR_INTERNAL, "simLSH on the GPU: too many buffers");
    LAC_CUDA_CHECK(ctx, cudaMalloc(&g->ptr[s], (size_t)(bytes > 0 ? bytes : 1)));
    g->size[s] = bytes;
    g->now += bytes;
    g->peak = g->now > g->peak ? g->now : g->peak;
    *out = (T *)g->ptr[s];
    return LAC_SUCCESS;
}

static void lsh_put(lsh_device *g, void *p)
{
    for (int s = 0; s < LSH_SLOTS && p; s++)
        if (g->ptr[s] == p) {
            cudaFree(p);
            g->now -= g->size[s];
            g->ptr[s] = NULL;
            return;
        }
}

static void lsh_put_all(lsh_device *g)
{
    for (int s = 0; s < LSH_SLOTS; s++) lsh_put(g, g->ptr[s]);
}

/* A staging buffer: a chunk's offsets, users and ratings. */
struct lsh_stage {
    int64_t *start;
    int32_t *user;
    float *val;
    cudaEvent_t copied;   /* its uploads are done: it may be filled again */
};

/* Items whose candidates overflow shared memory: the CPU's table on the
 * index, copied back (lac_nbr_index's form, table t's members at t N). */
static lac_status lsh_overflow(lac_ctx_t ctx, lac_nbr_call *call, const int32_t *idx, const int *have, int32_t *out,
                               int64_t *host_bytes)
{
    const int64_t N = call->data->num_items, q = call->tables;
    const int K = call->k;
    int64_t rows = 0;
    for (int64_t j = 0; j < N; j++) rows += have[j] < 0;
    if (!rows) return LAC_SUCCESS;
    lac_nbr_index ix;
    memset(&ix, 0, sizeof ix);
    LAC_CHECK(lac_nbr_index_init(ctx, &ix, q, N));
    int32_t *back = (int32_t *)lac_malloc(ctx, (size_t)(2 * q * N) * sizeof *back);
    int32_t *row = (int32_t *)lac_malloc(ctx, (size_t)rows * sizeof *row);
    int32_t *lists = (int32_t *)lac_malloc(ctx, (size_t)rows * (size_t)K * sizeof *lists);
    lac_status st = back && row && lists ? LAC_SUCCESS : LAC_ERR_OUT_OF_MEMORY;
    if (st == LAC_SUCCESS) {
        cudaError_t e = cudaMemcpy(back, idx, (size_t)(2 * q * N) * sizeof *back, cudaMemcpyDeviceToHost);
        st = e == cudaSuccess ? LAC_SUCCESS : lac_error(ctx, LAC_ERR_CUDA, "simLSH index back: %s", cudaGetErrorString(e));
    }
    if (st == LAC_SUCCESS) {
        /* lo where it is, the members appended table by table */
        for (int64_t t = 0; t < q; t++) memcpy(ix.lo + t * N, back + 2 * N * t, (size_t)N * sizeof *ix.lo);
        for (int64_t t = 0; t < q; t++) memmove(back + N * t, back + 2 * N * t + N, (size_t)N * sizeof *back);
        ix.member = back;
        back = NULL;
        ix.cap = q * N;
        for (int64_t t = 0; t <= q; t++) ix.base[t] = t * N;
        ix.filled = q;
        rows = 0;
        for (int64_t j = 0; j < N; j++)
            if (have[j] < 0) row[rows++] = (int32_t)j;
        lac_nbr_call c = *call;
        c.index = &ix;
        c.rows = row;
        c.num_rows = rows;
        st = lac_nbr_cpu_backend.bucket_topk(ctx, &c, lists);
        lac_log(ctx, LAC_LOG_INFO, "mf neighbours: simLSH, %lld items of over %d candidates counted on the CPU",
                (long long)rows, LSH_CAP);
        if (st == LAC_SUCCESS) {
            *host_bytes += c.bytes + rows * (K + 1) * 4;
            for (int64_t r = 0; r < rows; r++)
                memcpy(out + (int64_t)row[r] * K, lists + r * K, (size_t)K * sizeof *out);
        }
    }
    lac_nbr_index_free(&ix);
    free(back);
    free(row);
    free(lists);
    return st;
}

/* What a search holds beside its device memory. */
struct lsh_host {
    lac_nbr_blocks blocks;
    lsh_stage stage[2];
    int staged;   /* buffers allocated (their events created) */
    int pinned;   /* cudaMallocHost's, else malloc's */
};

static void lsh_host_free(lsh_host *h)
{
    for (int b = 0; b < h->staged; b++) {
        cudaEventDestroy(h->stage[b].copied);
        if (h->pinned)
            cudaFreeHost(h->stage[b].start);
        else
            free(h->stage[b].start);
    }
    lac_nbr_blocks_free(&h->blocks);
}

/* Every item's keys, chunk by chunk: gathered on the host while the device
 * keys the chunk before. Sets call->declined where a chunk's sums would be
 * inexact. */
static lac_status lsh_keys_by_chunks(lac_ctx_t ctx, lac_nbr_call *call, lsh_device *g, lsh_host *h, uint64_t *keys,
                                     float *codes, int64_t *host_bytes)
{
    const lac_nbr_data *d = call->data;
    const int64_t N = d->num_items, U = d->num_users;
    const int q = call->tables, threads = lac_threads(ctx);
    cudaStream_t st = ctx->cuda->stream;
    int64_t chunk = lac_knob_int(ctx, LAC_KNOB_NBR_CUDA_CHUNK, LSH_CHUNK);
    chunk = chunk < 1 ? 1 : chunk;
    const char *staging = lac_knob_string(ctx, LAC_KNOB_NBR_CUDA_STAGING);
    h->pinned = !staging || strcmp(staging, "pageable") != 0;
    double t0 = omp_get_wtime();
    LAC_CHECK(lac_nbr_blocks_init(ctx, &h->blocks, d, chunk, chunk < LSH_CHUNK_ITEMS ? chunk : LSH_CHUNK_ITEMS, threads));
    double t_count = omp_get_wtime();
    const int64_t cap = h->blocks.most, items = h->blocks.most_items;
    const size_t stage_bytes = (size_t)(items + 1) * 8 + (size_t)cap * 8;
    for (; h->staged < 2; h->staged++) {
        lsh_stage *s = &h->stage[h->staged];
        void *p = NULL;
        if (h->pinned)
            LAC_CUDA_CHECK(ctx, cudaMallocHost(&p, stage_bytes));
        else if (!(p = lac_malloc(ctx, stage_bytes)))
            return LAC_ERR_OUT_OF_MEMORY;
        s->start = (int64_t *)p;
        s->user = (int32_t *)(s->start + items + 1);
        s->val = (float *)(s->user + cap);
        if (cudaEventCreateWithFlags(&s->copied, cudaEventDisableTiming) != cudaSuccess) {
            if (h->pinned)
                cudaFreeHost(p);
            else
                free(p);
            return lac_error(ctx, LAC_ERR_CUDA, "simLSH on the GPU: an event");
        }
    }
    double t_stage = omp_get_wtime(), gathering = 0.0, waiting = 0.0;
    *host_bytes += lac_nbr_blocks_bytes(&h->blocks) + 2 * (int64_t)stage_bytes;
    uint64_t *mix = NULL;
    int64_t *dstart = NULL;
    int32_t *duser = NULL;
    float *dval = NULL;
    LAC_CHECK(lsh_get(ctx, g, &mix, U));
    LAC_CHECK(lsh_get(ctx, g, &dstart, items + 1));
    LAC_CHECK(lsh_get(ctx, g, &duser, cap));
    LAC_CHECK(lsh_get(ctx, g, &dval, cap));
    lsh_user_mix<<<(unsigned)((U + 255) / 256), 256, 0, st>>>(call->seed, U, mix);
    LAC_CUDA_CHECK_LAUNCH(ctx);
    int *dbad = NULL, bad = 0;
    LAC_CHECK(lsh_get(ctx, g, &dbad, 1));
    LAC_CUDA_CHECK(ctx, cudaMemsetAsync(dbad, 0, sizeof *dbad, st));
    int64_t chunks = 0;
    for (int64_t j0 = 0, j1, run; j0 < N; j0 = j1, chunks++) {
        j1 = lac_nbr_blocks_next(&h->blocks, j0, &run);
        lsh_stage *s = &h->stage[chunks & 1];
        double w0 = omp_get_wtime();
        LAC_CUDA_CHECK(ctx, cudaEventSynchronize(s->copied));   /* recorded, or never: returns at once */
        double w1 = omp_get_wtime();
        LAC_CHECK(lac_nbr_blocks_gather(ctx, &h->blocks, j0, j1, s->start, s->user, s->val));
        double w2 = omp_get_wtime();
        const int64_t nb = j1 - j0, len = s->start[nb];
        /* the device buffer is free once the chunk before is keyed: the
         * stream orders that */
        LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(dstart, s->start, (size_t)(nb + 1) * 8, cudaMemcpyHostToDevice, st));
        if (len) {
            LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(duser, s->user, (size_t)len * 4, cudaMemcpyHostToDevice, st));
            LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(dval, s->val, (size_t)len * 4, cudaMemcpyHostToDevice, st));
        }
        LAC_CUDA_CHECK(ctx, cudaEventRecord(s->copied, st));
        gathering += w2 - w1;
        waiting += w1 - w0 + omp_get_wtime() - w2;
        lsh_check<<<(unsigned)nb, LSH_CHECK_THREADS, 0, st>>>(dstart, dval, call->psi_power, dbad);
        LAC_CUDA_CHECK_LAUNCH(ctx);
        dim3 grid((unsigned)nb, (unsigned)((q + 31) / 32));
        lsh_keys<<<grid, 32 * LSH_KEY_WARPS, 0, st>>>(dstart, duser, dval, mix, N, j0, q, call->p, call->bits,
                                                      call->psi_power, keys, codes);
        LAC_CUDA_CHECK_LAUNCH(ctx);
    }
    double t_loop = omp_get_wtime();
    LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(&bad, dbad, sizeof bad, cudaMemcpyDeviceToHost, st));
    LAC_CUDA_CHECK(ctx, cudaStreamSynchronize(st));
    lac_log(ctx, LAC_LOG_INFO, "mf neighbours: simLSH's chunks: %.4f s the counts, %.4f s the %s staging, %.4f s "
            "gathering, %.4f s waiting for or queueing the uploads, %.4f s the device's tail", t_count - t0,
            t_stage - t_count, h->pinned ? "pinned" : "pageable", gathering, waiting, omp_get_wtime() - t_loop);
    const char *why = bad & 1 ? "a weight off every binary grid"
                      : bad   ? "an item's weights summing off fp32's integer grid"
                              : NULL;
    lsh_put(g, dbad);
    lsh_put(g, mix);
    lsh_put(g, dstart);
    lsh_put(g, duser);
    lsh_put(g, dval);
    if (why) {
        lac_log(ctx, LAC_LOG_INFO, "mf neighbours: simLSH's sums on the host (%s)", why);
        call->declined = 1;
    } else {
        lac_log(ctx, LAC_LOG_INFO, "mf neighbours: simLSH on the GPU, %lld chunks of at most %lld ratings", (long long)chunks,
                (long long)chunk);
    }
    return LAC_SUCCESS;
}

/* Each table's keys (in place) into its bucket index, a group of tables at
 * a time (the sort's slots at most an eighth of a chunk's ratings). */
static lac_status lsh_buckets(lac_ctx_t ctx, const lac_nbr_call *call, lsh_device *g, uint64_t *keys)
{
    const int64_t N = call->data->num_items;
    const int q = call->tables;
    cudaStream_t st = ctx->cuda->stream;
    int64_t slots = lac_knob_int(ctx, LAC_KNOB_NBR_CUDA_CHUNK, LSH_CHUNK) / 8;
    int64_t group = slots / N;
    group = group < 1 ? 1 : group > q ? q : group;
    const int64_t n = group * N;
    uint64_t *kb = NULL;
    int32_t *va = NULL, *vb = NULL;
    int *offsets = NULL;
    LAC_CHECK(lsh_get(ctx, g, &kb, n));
    LAC_CHECK(lsh_get(ctx, g, &va, n));
    LAC_CHECK(lsh_get(ctx, g, &vb, n));
    LAC_CHECK(lsh_get(ctx, g, &offsets, group + 1));
    void *temp = NULL;
    size_t temp_bytes = 0;
    for (int t0 = 0; t0 < q; t0 += (int)group) {
        const int tables = q - t0 < group ? q - t0 : (int)group;
        const int64_t m = (int64_t)tables * N;
        uint64_t *region = keys + (int64_t)t0 * N;
        lsh_iota<<<(unsigned)((m + 255) / 256), 256, 0, st>>>(m, N, va, offsets, tables);
        LAC_CUDA_CHECK_LAUNCH(ctx);
        cub::DoubleBuffer<uint64_t> k(region, kb);
        cub::DoubleBuffer<int32_t> v(va, vb);
        size_t need = 0;
        LAC_CUDA_CHECK(ctx, cub::DeviceSegmentedRadixSort::SortPairs(NULL, need, k, v, (int)m, tables, offsets,
                                                                     offsets + 1, 0, 64, st));
        if (need > temp_bytes) {
            lsh_put(g, temp);
            LAC_CHECK(lsh_get(ctx, g, (char **)&temp, (int64_t)need));
            temp_bytes = need;
        }
        LAC_CUDA_CHECK(ctx, cub::DeviceSegmentedRadixSort::SortPairs(temp, need, k, v, (int)m, tables, offsets,
                                                                     offsets + 1, 0, 64, st));
        /* the region becomes the index: the sorted keys read from kb */
        if (k.Current() == region)
            LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(kb, region, (size_t)m * 8, cudaMemcpyDeviceToDevice, st));
        lsh_index<<<(unsigned)((m + 255) / 256), 256, 0, st>>>(kb, v.Current(), m, N, call->max_bucket,
                                                               (int32_t *)region);
        LAC_CUDA_CHECK_LAUNCH(ctx);
    }
    LAC_CUDA_CHECK(ctx, cudaStreamSynchronize(st));
    lsh_put(g, temp);
    lsh_put(g, kb);
    lsh_put(g, va);
    lsh_put(g, vb);
    lsh_put(g, offsets);
    return LAC_SUCCESS;
}

static lac_status lsh_run(lac_ctx_t ctx, lac_nbr_call *call, int32_t *out, lsh_device *g, lsh_host *h)
{
    const int64_t N = call->data->num_items, n = N * call->tables;
    const int q = call->tables, K = call->k;
    cudaStream_t st = ctx->cuda->stream;
    int64_t host_bytes = 0;
    double t0 = omp_get_wtime();
    uint64_t *keys = NULL;
    float *codes = NULL;
    LAC_CHECK(lsh_get(ctx, g, &keys, n));
    if (call->codes) {   /* kept: every item's sums beside the keys */
        const int64_t cols = (int64_t)q * call->p * call->bits;
        size_t free_bytes = 0, total = 0;
        LAC_CUDA_CHECK(ctx, cudaMemGetInfo(&free_bytes, &total));
        if ((double)N * (double)cols * 4.0 > 0.5 * (double)free_bytes) {
            lac_log(ctx, LAC_LOG_INFO, "mf neighbours: simLSH's sums on the host (%lld x %lld sums do not fit the GPU)",
                    (long long)N, (long long)cols);
            call->declined = 1;
            return LAC_SUCCESS;
        }
        LAC_CHECK(lsh_get(ctx, g, &codes, N * cols));
    }
    LAC_CHECK(lsh_keys_by_chunks(ctx, call, g, h, keys, codes, &host_bytes));
    if (call->declined) return LAC_SUCCESS;
    if (codes) {
        const int64_t cols = (int64_t)q * call->p * call->bits;
        LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(call->codes, codes, (size_t)(N * cols) * sizeof *codes,
                                            cudaMemcpyDeviceToHost, st));
        LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(call->keys_out, keys, (size_t)n * sizeof *keys, cudaMemcpyDeviceToHost, st));
        LAC_CUDA_CHECK(ctx, cudaStreamSynchronize(st));
        lsh_put(g, codes);
    }
    double t_keys = omp_get_wtime();
    LAC_CHECK(lsh_buckets(ctx, call, g, keys));
    double t_index = omp_get_wtime();
    /* counted per item */
    int32_t *dout = NULL;
    int *dhave = NULL;
    LAC_CHECK(lsh_get(ctx, g, &dout, N * K));
    LAC_CHECK(lsh_get(ctx, g, &dhave, N));
    const size_t smem = (size_t)LSH_CAP * (sizeof(unsigned long long) + sizeof(int32_t));
    LAC_CUDA_CHECK(ctx, cudaFuncSetAttribute(lsh_count, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    lsh_count<<<(unsigned)N, LSH_COUNT_THREADS, smem, st>>>((const int32_t *)keys, N, q, K, call->seed, dout, dhave);
    LAC_CUDA_CHECK_LAUNCH(ctx);
    int *have = (int *)lac_malloc(ctx, (size_t)N * sizeof *have);
    if (!have) return LAC_ERR_OUT_OF_MEMORY;
    host_bytes += N * 4;
    cudaError_t e1 = cudaMemcpyAsync(out, dout, (size_t)N * K * sizeof *out, cudaMemcpyDeviceToHost, st);
    cudaError_t e2 = cudaMemcpyAsync(have, dhave, (size_t)N * sizeof *have, cudaMemcpyDeviceToHost, st);
    cudaError_t e3 = cudaStreamSynchronize(st);
    if (e1 != cudaSuccess || e2 != cudaSuccess || e3 != cudaSuccess) {
        free(have);
        return lac_error(ctx, LAC_ERR_CUDA, "simLSH on the GPU: %s",
                         cudaGetErrorString(e1 != cudaSuccess ? e1 : e2 != cudaSuccess ? e2 : e3));
    }
    double t_dev = omp_get_wtime();
    lac_status status = lsh_overflow(ctx, call, (const int32_t *)keys, have, out, &host_bytes);
    free(have);
    call->bytes = g->peak + host_bytes;
    lac_log(ctx, LAC_LOG_INFO, "mf neighbours: simLSH on the GPU: %.4f s the keys (chunks gathered, uploaded, keyed), "
            "%.4f s the buckets, %.4f s the counts, %.4f s the items left to the CPU; %.1f MB on the device at most, "
            "%.1f MB on the host", t_keys - t0, t_index - t_keys, t_dev - t_index, omp_get_wtime() - t_dev,
            g->peak / 1048576.0, host_bytes / 1048576.0);
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
    lsh_host h;
    memset(&g, 0, sizeof g);
    memset(&h, 0, sizeof h);
    lac_status st = lsh_run(ctx, call, out, &g, &h);
    if (st != LAC_SUCCESS) cudaStreamSynchronize(ctx->cuda->stream);
    lsh_put_all(&g);
    lsh_host_free(&h);
    return st;
}
