/* map plans on the CUDA backend, few targets: the chunk-local plan.
 *
 * The sorted plan (map_plan.cu) reads S through a global permutation, a
 * 32-byte sector for each 4-byte value. When the target fits a block's shared
 * memory in float32 (n < 2^16, see local_chunk_rows), the plan instead cuts
 * the rows into chunks of C consecutive rows (C = 2048 ... 16384) and
 * sorts each chunk by target on its own, keeping one 32-bit word per row:
 * (target << 16) | (row within the chunk). An execute then
 *  - streams each chunk's S (and w) into shared memory contiguously
 *    (cp.async, a ring of up to 4 chunks), and its words into registers;
 *  - reduces the chunk's runs of equal targets in float64: thread j sums
 *    positions [j*P, j*P + P) of the sorted chunk in order (P = C / 1024), and
 *    the parts of a run that spans threads are joined by a segmented scan
 *    across the block (a fixed shuffle tree, so a fixed order);
 *  - adds each run's sum once into the block's private float64 copy of the
 *    target (one run per target per chunk: no two threads meet on an address).
 *    A float32 copy (LACUNA_MAP_CUDA_PLAN_ACC=f32, benchmarks) is faster but
 *    rounds many times per target.
 * The chunks are dealt to K = min(SMs at build, chunks) "virtual blocks" in a
 * fixed way (chunk c to virtual block c % K, in increasing c), each with its
 * own private copy and float64 partials row; after a grid barrier T[t] = sum
 * of the K rows, in a fixed two-level order. Every sum's order depends on the
 * plan (m, n, C, K) only, never on the grid or timing, so every run gives the
 * same bits (the test checks this across runs and grid sizes,
 * LACUNA_MAP_CUDA_PLAN_GRID).
 *
 * Bytes an execute moves: S (and w) once, the words (4 bytes a row), T once,
 * plus the K x n float64 partials written and read back (in L2 mostly).
 * The plan keeps the words (4 bytes a row, rounded up to whole chunks) and a
 * row count per target (4 bytes a target). A call whose ring of 2 chunks of
 * 16384 rows does not fit (weights, float64 values) runs on a twin plan of
 * 8192-row chunks that the first such call builds from the words (and keeps).
 * Calls this path does not serve (several columns, MIN/MAX/MEAN, NaN
 * skip/error, unaligned arrays, or too little shared memory for the dtype) run
 * on a sorted plan that the first such call builds from the words (and keeps). */
#include "backend/cuda/map/map_cuda.cuh"

#include <cooperative_groups.h>
#include <cub/device/device_radix_sort.cuh>
#include <cuda_pipeline.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

namespace cg = cooperative_groups;

#define LOCAL_BLOCK 1024
#define LOCAL_SENTINEL 0xFFFFu           /* target of the padding positions past m */
#define LOCAL_SMEM_BUDGET 230400         /* bytes: what the chunk size is chosen against (H100) */
#define LOCAL_BOUNDARY_BYTES 0         /* the run scan needs only static shared memory */
#define LOCAL_GROUPS 8                   /* final pass: rows summed in LOCAL_GROUPS interleaved groups */
#define LOCAL_NARROW_ROWS 8192           /* chunk rows of a plan's narrow twin (weighted or float64 calls) */

struct map_local_plan {
    uint32_t *words;          /* chunks x C: (target << 16) | row within the chunk */
    int32_t *hits;            /* n: rows per target */
    int64_t m, n, chunk_rows, chunks;
    int virtual_blocks;       /* the device's SM count at build, at most chunks */
    int acc32;                /* float32 values: 1 = float32 private copies (float64 across them) */
    map_local_plan *narrow;   /* the same plan in LOCAL_NARROW_ROWS chunks, built for the first call
                                 whose ring of 2 chunks does not fit beside wide ones, or NULL */
};

/* Bytes of a private copy of n targets in accumulators of acc_bytes, rounded
 * to 16 so that the ring behind it stays aligned for 16-byte copies. */
static __host__ __device__ size_t local_priv_bytes(int64_t n, size_t acc_bytes)
{
    return ((size_t)n * acc_bytes + 15) / 16 * 16;
}

/* Chunk rows for n targets: the largest of 16384, 8192, 4096, 2048 with which
 * a float32 unweighted execute keeps at least 2 chunks of S in its ring
 * beside the private copy of acc_bytes a target (the execute takes up to 4
 * where they fit: 3 in flight while one is reduced). Longer chunks spread the
 * per-chunk scan and barriers over more rows and leave fewer runs (so fewer
 * private-copy updates) a row, which outweighs a shorter ring: at 20k targets
 * 8192 rows with 2 in the ring took 0.184 ms at 40M rows, 4096 with 4 took
 * 0.253; at 10k, 16384 rows with 2 took 0.164, 8192 with 4 took 0.175. 0 when
 * n does not fit (then the plan is a sorted one). */
static int64_t local_chunk_rows(int64_t n, size_t acc_bytes)
{
    if (n < 1 || n >= (int64_t)LOCAL_SENTINEL) return 0;
    int64_t room = (int64_t)LOCAL_SMEM_BUDGET - (int64_t)local_priv_bytes(n, acc_bytes) - LOCAL_BOUNDARY_BYTES;
    for (int64_t c = 16384; c >= 2048; c /= 2)
        if (2 * c * 4 <= room) return c;
    return 0;
}

/* Shared memory of an execute: the private copy and `stages` ring slots of
 * C rows (S, w). */
static size_t local_smem(int64_t n, int64_t c, size_t acc_bytes, size_t vs, int weighted, int stages)
{
    return local_priv_bytes(n, acc_bytes) + LOCAL_BOUNDARY_BYTES + (size_t)stages * (size_t)c * (vs + (weighted ? vs : 0));
}

/* ------------------------------------------------------------------------ */
/* Build                                                                     */
/* ------------------------------------------------------------------------ */
template <class I, class K>
__global__ void local_keys_kernel(const I *bridge, int64_t m, int64_t c, K *keys, uint16_t *rows)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < m; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t chunk = i / c;
        keys[i] = ((K)chunk << 16) | (K)(uint32_t)bridge[i];
        rows[i] = (uint16_t)(i - chunk * c);
    }
}

template <class K>
__global__ void local_pack_kernel(const K *keys, const uint16_t *rows, int64_t m, int64_t padded, uint32_t *words)
{
    for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < padded; k += (int64_t)gridDim.x * blockDim.x)
        words[k] = k < m ? ((uint32_t)(keys[k] & 0xFFFFu) << 16) | rows[k] : (LOCAL_SENTINEL << 16);
}

/* Rows per target: a block histogram in shared memory, then one atomic per
 * target and block (integer counts: the same whatever the order). */
template <class I> __global__ void local_hits_kernel(const I *bridge, int64_t m, int64_t n, int32_t *hits)
{
    extern __shared__ int32_t hist[];
    for (int64_t t = threadIdx.x; t < n; t += blockDim.x) hist[t] = 0;
    __syncthreads();
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < m; i += (int64_t)gridDim.x * blockDim.x)
        atomicAdd(&hist[(int64_t)bridge[i]], 1);
    __syncthreads();
    for (int64_t t = threadIdx.x; t < n; t += blockDim.x)
        if (hist[t]) atomicAdd(&hits[t], hist[t]);
}

/* Back from words to a bridge (for the sorted plan of calls this path does not
 * serve). */
static __global__ void local_unpack_kernel(const uint32_t *words, int64_t m, int64_t c, int32_t *bridge)
{
    for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < m; k += (int64_t)gridDim.x * blockDim.x) {
        uint32_t w = words[k];
        int64_t row = (k / c) * c + (w & 0xFFFFu);
        bridge[row] = (int32_t)(w >> 16);
    }
}

static unsigned int local_grid(lac_ctx_t ctx, int64_t work, int block)
{
    int64_t want = (work + block - 1) / block, cap = (int64_t)ctx->cuda->prop.multiProcessorCount * 16;
    if (want < 1) want = 1;
    return (unsigned int)(want < cap ? want : cap);
}


template <class K>
static lac_status local_build_typed(lac_ctx_t ctx, const void *bridge, lac_dtype index_dtype, map_local_plan *p)
{
    cudaStream_t st = ctx->cuda->stream;
    const int64_t m = p->m, padded = p->chunks * p->chunk_rows;
    int end_bit = 16;
    while (end_bit < (int)(8 * sizeof(K)) && ((int64_t)1 << (end_bit - 16)) < p->chunks) end_bit++;
    size_t temp_bytes = 0;
    LAC_CUDA_CHECK(ctx, cub::DeviceRadixSort::SortPairs(NULL, temp_bytes, (const K *)NULL, (K *)NULL,
                                                        (const uint16_t *)NULL, (uint16_t *)NULL, m, 0, end_bit, st));
    size_t kb = lac_map_align256((size_t)m * sizeof(K)), rb = lac_map_align256((size_t)m * sizeof(uint16_t));
    void *ws = NULL;
    LAC_CHECK(lac_cuda_workspace(ctx, 2 * kb + 2 * rb + lac_map_align256(temp_bytes), &ws));
    unsigned char *q = (unsigned char *)ws;
    K *keys_in = (K *)q, *keys_out = (K *)(q + kb);
    uint16_t *rows_in = (uint16_t *)(q + 2 * kb), *rows_out = (uint16_t *)(q + 2 * kb + rb);
    void *temp = q + 2 * kb + 2 * rb;
    unsigned int grid = local_grid(ctx, m, 256);
    if (index_dtype == LAC_INT32)
        local_keys_kernel<int32_t, K><<<grid, 256, 0, st>>>((const int32_t *)bridge, m, p->chunk_rows, keys_in, rows_in);
    else
        local_keys_kernel<int64_t, K><<<grid, 256, 0, st>>>((const int64_t *)bridge, m, p->chunk_rows, keys_in, rows_in);
    LAC_CUDA_CHECK_LAUNCH(ctx);
    /* Stable: equal targets of a chunk keep ascending rows. */
    LAC_CUDA_CHECK(ctx, cub::DeviceRadixSort::SortPairs(temp, temp_bytes, keys_in, keys_out, rows_in, rows_out, m, 0,
                                                        end_bit, st));
    local_pack_kernel<K><<<local_grid(ctx, padded, 256), 256, 0, st>>>(keys_out, rows_out, m, padded, p->words);
    LAC_CUDA_CHECK_LAUNCH(ctx);
    LAC_CUDA_CHECK(ctx, cudaMemsetAsync(p->hits, 0, (size_t)p->n * sizeof(int32_t), st));
    const size_t hist = (size_t)p->n * sizeof(int32_t);
    unsigned int hgrid = (unsigned int)ctx->cuda->prop.multiProcessorCount * 2;
    if (index_dtype == LAC_INT32) {
        LAC_CUDA_CHECK(ctx, cudaFuncSetAttribute(local_hits_kernel<int32_t>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)hist));
        local_hits_kernel<int32_t><<<hgrid, 1024, hist, st>>>((const int32_t *)bridge, m, p->n, p->hits);
    } else {
        LAC_CUDA_CHECK(ctx, cudaFuncSetAttribute(local_hits_kernel<int64_t>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)hist));
        local_hits_kernel<int64_t><<<hgrid, 1024, hist, st>>>((const int64_t *)bridge, m, p->n, p->hits);
    }
    LAC_CUDA_CHECK_LAUNCH(ctx);
    LAC_CUDA_CHECK(ctx, cudaStreamSynchronize(st));
    return LAC_SUCCESS;
}

extern "C" void lac_map_local_plan_free(map_local_plan *p)
{
    if (!p) return;
    lac_map_local_plan_free(p->narrow);
    cudaFree(p->words);
    cudaFree(p->hits);
    cudaGetLastError();
    free(p);
}

static lac_status local_plan_make(lac_ctx_t ctx, const void *bridge, lac_dtype index_dtype, int64_t m, int64_t n,
                                  int64_t c, int acc32, map_local_plan **out);

extern "C" lac_status lac_map_local_plan_build(lac_ctx_t ctx, const void *bridge, lac_dtype index_dtype, int64_t m,
                                           int64_t n, map_local_plan **out)
{
    *out = NULL;
    /* Float64 private copies: every target's sum rounded once into T, as the
     * tests demand (within 1e-6 of the float64 reference per target).
     * LACUNA_MAP_CUDA_PLAN_ACC=f32 (benchmarks only) makes float32 values sum
     * into float32 copies, each run's float64 sum rounded into the copy:
     * faster (0.163 against 0.173 ms at 40M -> 10k, 0.173 against 0.184 at
     * 20k), but a target of many rows then carries many float32 roundings,
     * which failed that bound in the plan test (~5k targets, 1.5M rows). */
    const char *acc = lac_knob_string(ctx, LAC_KNOB_MAP_CUDA_PLAN_ACC);
    const int acc32 = acc && strcmp(acc, "f32") == 0;
    int64_t c = local_chunk_rows(n, acc32 ? 4 : 8);
    /* LACUNA_MAP_CUDA_PLAN_CHUNK=2048|4096|8192|16384 (benchmarks) forces the
     * chunk rows; an execute whose ring then does not fit runs on the narrow
     * twin (16384) or the sorted plan. */
    const char *chunk = lac_knob_string(ctx, LAC_KNOB_MAP_CUDA_PLAN_CHUNK);
    if (c > 0 && chunk && (atoi(chunk) == 2048 || atoi(chunk) == 4096 || atoi(chunk) == 8192 || atoi(chunk) == 16384))
        c = atoi(chunk);
    if (c == 0 || m < 1) return LAC_SUCCESS;   /* not this kind of plan */
    return local_plan_make(ctx, bridge, index_dtype, m, n, c, acc32, out);
}

static lac_status local_plan_make(lac_ctx_t ctx, const void *bridge, lac_dtype index_dtype, int64_t m, int64_t n,
                                  int64_t c, int acc32, map_local_plan **out)
{
    map_local_plan *p = (map_local_plan *)calloc(1, sizeof *p);
    if (!p) return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "could not allocate a map plan");
    p->m = m;
    p->n = n;
    p->chunk_rows = c;
    p->chunks = (m + c - 1) / c;
    p->acc32 = acc32;
    /* One virtual block per SM of the device the plan is built on: all SMs
     * busy, and the sums' order still a property of the plan, not of a run. */
    const int64_t sms = ctx->cuda->prop.multiProcessorCount;
    p->virtual_blocks = (int)(p->chunks < sms ? p->chunks : sms);
    lac_status s = LAC_SUCCESS;
    LAC_CUDA_CHECK_GOTO(ctx, cudaMalloc(&p->words, (size_t)(p->chunks * c) * sizeof(uint32_t)), s, fail);
    LAC_CUDA_CHECK_GOTO(ctx, cudaMalloc(&p->hits, (size_t)n * sizeof(int32_t)), s, fail);
    s = p->chunks <= 0xFFFF ? local_build_typed<uint32_t>(ctx, bridge, index_dtype, p)
                            : local_build_typed<unsigned long long>(ctx, bridge, index_dtype, p);
    if (s < 0) goto fail;
    *out = p;
    return LAC_SUCCESS;
fail:
    lac_map_local_plan_free(p);
    return s;
}

extern "C" lac_status lac_map_local_plan_bridge(lac_ctx_t ctx, const map_local_plan *p, int32_t *bridge)
{
    local_unpack_kernel<<<local_grid(ctx, p->m, 256), 256, 0, ctx->cuda->stream>>>(p->words, p->m, p->chunk_rows, bridge);
    LAC_CUDA_CHECK_LAUNCH(ctx);
    return LAC_SUCCESS;
}

/* ------------------------------------------------------------------------ */
/* Execute                                                                   */
/* ------------------------------------------------------------------------ */
typedef struct {
    const void *source, *weights;
    const uint32_t *words;
    const int32_t *hits;
    int64_t m, n, chunk_rows, chunks;
    int virtual_blocks, stages;
    double *partials;          /* virtual_blocks x n */
    void *target;
    int accumulate, track_hits;
    double empty_value;
} local_args;

/* Queues chunk `chunk`'s S (and w) into ring slot `slot` (16-byte copies; a
 * short last chunk element by element past its last whole 16 bytes). */
/* Inclusive segmented scan across a warp in a fixed shuffle tree: v sums
 * the values of its segment up to this lane, a segment starting where f is
 * set (f ends as "a start at or before this lane"). The same tree on every
 * call, so the same bits. */
__device__ __forceinline__ void warp_segmented_scan(double &v, int &f, int lane)
{
#pragma unroll
    for (int off = 1; off < 32; off <<= 1) {
        double ov = __shfl_up_sync(0xFFFFFFFFu, v, off);
        int of = __shfl_up_sync(0xFFFFFFFFu, f, off);
        if (lane >= off) {
            if (!f) v = __dadd_rn(ov, v);
            f |= of;
        }
    }
}

template <class V, int NEEDS_S, int WEIGHTED>
__device__ __forceinline__ void local_fetch(const local_args &a, int64_t chunk, int slot, V *ring_s, V *ring_w)
{
    const int c = (int)a.chunk_rows;
    const int64_t row0 = chunk * c;
    const int len = a.m - row0 < c ? (int)(a.m - row0) : c;
    const int tid = (int)threadIdx.x;
    constexpr int per16 = 16 / (int)sizeof(V);
    const int whole = len / per16 * per16;
    if (NEEDS_S) {
        V *ds = ring_s + (size_t)slot * c;
        const V *ss = reinterpret_cast<const V *>(a.source) + row0;
        for (int k = tid * per16; k < whole; k += LOCAL_BLOCK * per16) __pipeline_memcpy_async(ds + k, ss + k, 16);
        for (int k = whole + tid; k < len; k += LOCAL_BLOCK) __pipeline_memcpy_async(ds + k, ss + k, sizeof(V));
    }
    if (WEIGHTED) {
        V *dv = ring_w + (size_t)slot * c;
        const V *sv = reinterpret_cast<const V *>(a.weights) + row0;
        for (int k = tid * per16; k < whole; k += LOCAL_BLOCK * per16) __pipeline_memcpy_async(dv + k, sv + k, 16);
        for (int k = whole + tid; k < len; k += LOCAL_BLOCK) __pipeline_memcpy_async(dv + k, sv + k, sizeof(V));
    }
}

/* This thread's P words of a chunk (P consecutive, 8-byte aligned or better). */
template <int P> __device__ __forceinline__ void local_words(const uint32_t *p, uint32_t w[P])
{
    if constexpr (P == 2) {
        uint2 v = __ldcs(reinterpret_cast<const uint2 *>(p));
        w[0] = v.x, w[1] = v.y;
    } else {
#pragma unroll
        for (int i = 0; i < P / 4; i++) {
            uint4 v = __ldcs(reinterpret_cast<const uint4 *>(p) + i);
            w[4 * i] = v.x, w[4 * i + 1] = v.y, w[4 * i + 2] = v.z, w[4 * i + 3] = v.w;
        }
    }
}

/* One run's float64 sum into a private accumulator, rounded once into it
 * (no fused operation: the same bits on every run). */
__device__ __forceinline__ void local_add(double *acc, double x) { *acc = __dadd_rn(*acc, x); }
__device__ __forceinline__ void local_add(float *acc, double x) { *acc = __double2float_rn(__dadd_rn((double)*acc, x)); }

/* MODE: 0 sum, 1 weighted sum, 2 count, 3 weighted count; P positions per
 * thread. The words of chunk j + 1 are loaded into registers while chunk j is
 * reduced; S (and w) of the next stages - 1 chunks are in flight into the
 * shared ring meanwhile. */
template <class V, class ACC, int MODE, int P>
__global__ void __launch_bounds__(LOCAL_BLOCK, 1) map_plan_local_kernel(local_args a)
{
    constexpr int WEIGHTED = MODE & 1;
    constexpr uint32_t NONE = 0xFFFFFFFFu;   /* no neighbour */
    extern __shared__ __align__(16) unsigned char smem_raw[];
    const int64_t n = a.n, c = a.chunk_rows;
    const int stages = a.stages;
    ACC *priv = reinterpret_cast<ACC *>(smem_raw);
    __shared__ double warp_v[LOCAL_BLOCK / 32];
    __shared__ int warp_f[LOCAL_BLOCK / 32];
    __shared__ uint32_t warp_first[LOCAL_BLOCK / 32], warp_last[LOCAL_BLOCK / 32];
    V *ring_s = reinterpret_cast<V *>(smem_raw + local_priv_bytes(n, sizeof(ACC)));
    V *ring_w = ring_s + (size_t)stages * c;
    const unsigned int tid = threadIdx.x;
    const int lane = (int)(tid & 31), warp = (int)(tid >> 5);
    const int K = a.virtual_blocks;

    for (int vb = blockIdx.x; vb < K; vb += gridDim.x) {
        for (int64_t t = tid; t < n; t += LOCAL_BLOCK) priv[t] = (ACC)0;
        /* This virtual block's chunks: vb, vb + K, ... in increasing order. */
        const int64_t mine = a.chunks > vb ? (a.chunks - vb + K - 1) / K : 0;
        for (int j = 0; j < stages - 1; j++) {
            if (j < mine) local_fetch<V, (MODE < 2), WEIGHTED>(a, vb + (int64_t)j * K, j, ring_s, ring_w);
            __pipeline_commit();
        }
        uint32_t next[P], w[P];
        if (mine > 0) local_words<P>(a.words + (int64_t)vb * c + (int64_t)tid * P, next);
        for (int64_t j = 0; j < mine; j++) {
            __syncthreads();   /* chunk j - 1 is done with its ring slot and the warp arrays */
#pragma unroll
            for (int q = 0; q < P; q++) w[q] = next[q];
            if (j + 1 < mine) local_words<P>(a.words + (vb + (j + 1) * K) * c + (int64_t)tid * P, next);
            const int64_t ahead = j + stages - 1;
            if (ahead < mine) local_fetch<V, (MODE < 2), WEIGHTED>(a, vb + ahead * K, (int)ahead % stages, ring_s, ring_w);
            __pipeline_commit();
            const uint32_t first_t = w[0] >> 16, last_t = w[P - 1] >> 16;
            if (lane == 0) warp_first[warp] = first_t;
            if (lane == 31) warp_last[warp] = last_t;
            __pipeline_wait_prior(stages - 1);   /* chunk j's S has landed */
            __syncthreads();

            const int slot = (int)j % stages;
            const V *cs = ring_s + (size_t)slot * c;
            const V *cwt = ring_w + (size_t)slot * c;
            /* This thread's positions in order: runs of equal targets. */
            uint32_t run_t = first_t;
            double run_sum = 0.0, first_sum = 0.0;
            bool first_closed = false;
#pragma unroll
            for (int q = 0; q < P; q++) {
                const uint32_t t = w[q] >> 16, row = w[q] & 0xFFFFu;
                double x = 0.0;
                if (t != LOCAL_SENTINEL) {
                    if (MODE == 0) x = (double)cs[row];
                    else if (MODE == 1) x = __dmul_rn((double)cwt[row], (double)cs[row]);
                    else if (MODE == 2) x = 1.0;
                    else x = (double)cwt[row];
                }
                if (q > 0 && t != run_t) {
                    if (!first_closed) {
                        first_sum = run_sum;
                        first_closed = true;
                    } else if (run_t < n) {
                        local_add(priv + run_t, run_sum);   /* a run wholly inside this thread */
                    }
                    run_t = t;
                    run_sum = 0.0;
                }
                run_sum = __dadd_rn(run_sum, x);
            }
            if (!first_closed) first_sum = run_sum;
            uint32_t prev_last = __shfl_up_sync(0xFFFFFFFFu, last_t, 1);
            uint32_t next_first = __shfl_down_sync(0xFFFFFFFFu, first_t, 1);
            if (lane == 0) prev_last = warp > 0 ? warp_last[warp - 1] : NONE;
            if (lane == 31) next_first = warp + 1 < LOCAL_BLOCK / 32 ? warp_first[warp + 1] : NONE;
            const bool from_prev = prev_last == first_t;
            const bool to_next = next_first == run_t;

            /* Runs that span threads: a segmented scan over the threads' last
             * runs (flag: the run starts in this thread), of fixed shape, so
             * its sums' order is fixed. v = the open run's sum up to the end
             * of this thread, excl = the same up to the previous thread. */
            int f = first_closed || !from_prev;
            double v = run_sum;
            warp_segmented_scan(v, f, lane);
            if (lane == 31) warp_v[warp] = v, warp_f[warp] = f;
            __syncthreads();
            /* Every warp scans the 32 warps' values itself (the same fixed
             * tree in each, so the same bits): no warp waits at a second
             * barrier for one warp's scan. The arrays are rewritten only
             * after the next chunk's first barrier. */
            double wv = warp_v[lane];
            int wf = warp_f[lane];
            warp_segmented_scan(wv, wf, lane);
            const double earlier = __shfl_sync(0xFFFFFFFFu, wv, (warp + 31) & 31);   /* through warp - 1 */
            if (warp > 0 && !f) v = __dadd_rn(earlier, v);   /* the earlier warps' open run */
            double excl = __shfl_up_sync(0xFFFFFFFFu, v, 1);
            if (lane == 0) excl = warp > 0 ? earlier : 0.0;

            /* One add per target and chunk, by the thread where its run ends. */
            if (first_closed && first_t < n)
                local_add(priv + first_t, from_prev ? __dadd_rn(excl, first_sum) : first_sum);
            if (!to_next && run_t < n) local_add(priv + run_t, v);
        }
        __pipeline_wait_prior(0);
        __syncthreads();
        double *row = a.partials + (size_t)vb * n;
        for (int64_t t = tid; t < n; t += LOCAL_BLOCK) row[t] = (double)priv[t];
        __syncthreads();
    }
    __threadfence();
    cg::this_grid().sync();

    /* T[t] = the K partials rows summed in a fixed order: group g sums rows g,
     * g + LOCAL_GROUPS, ... in turn, then the groups in turn. */
    constexpr int TW = LOCAL_BLOCK / LOCAL_GROUPS;
    double *red = reinterpret_cast<double *>(smem_raw);   /* free again */
    const int G = (int)gridDim.x;
    const int64_t per = (n + G - 1) / G, s0 = (int64_t)blockIdx.x * per;
    const int64_t s1 = s0 + per < n ? s0 + per : n;
    const int group = (int)tid / TW, col = (int)tid % TW;
    V *T = reinterpret_cast<V *>(a.target);
    for (int64_t base = s0; base < s1; base += TW) {
        const int64_t k = base + col;
        double v = 0.0;
        if (k < s1) {
#pragma unroll 8
            for (int r = group; r < K; r += LOCAL_GROUPS) v = __dadd_rn(v, a.partials[(size_t)r * n + k]);
        }
        red[tid] = v;
        __syncthreads();
        if (group == 0 && k < s1) {
            double acc = 0.0;
            for (int g = 0; g < LOCAL_GROUPS; g++) acc = __dadd_rn(acc, red[g * TW + col]);
            /* The rules of seg_finish (map_plan.cu) for SUM and COUNT. */
            V out;
            if (a.accumulate) {
                out = (V)__dadd_rn((double)T[k], acc);
            } else {
                bool touched = a.track_hits ? a.hits[k] > 0 : MODE >= 2 ? acc != 0.0 : true;
                out = (V)(touched ? acc : a.empty_value);
            }
            T[k] = out;
        }
        __syncthreads();
    }
}

template <class V, class ACC, int MODE> static const void *local_kernel_for(int64_t p)
{
    if (p == 2) return reinterpret_cast<const void *>(&map_plan_local_kernel<V, ACC, MODE, 2>);
    if (p == 4) return reinterpret_cast<const void *>(&map_plan_local_kernel<V, ACC, MODE, 4>);
    if (p == 8) return reinterpret_cast<const void *>(&map_plan_local_kernel<V, ACC, MODE, 8>);
    return reinterpret_cast<const void *>(&map_plan_local_kernel<V, ACC, MODE, 16>);
}

template <class V, class ACC> static const void *local_kernel_mode(int mode, int64_t p)
{
    switch (mode) {
    case 0: return local_kernel_for<V, ACC, 0>(p);
    case 1: return local_kernel_for<V, ACC, 1>(p);
    case 2: return local_kernel_for<V, ACC, 2>(p);
    default: return local_kernel_for<V, ACC, 3>(p);
    }
}

/* Raises the kernel's shared-memory limit and asks its blocks per SM, once
 * per context and shared-memory size. */
static lac_status local_prepare(lac_ctx_t ctx, const void *kernel, size_t smem, int *per_sm)
{
    int64_t known[2];
    if (lac_map_fact_find(ctx, kernel, MAP_FACT_LOCAL, 0, smem, known)) {
        *per_sm = (int)known[0];
        return LAC_SUCCESS;
    }
    cudaFuncAttributes attr;
    LAC_CUDA_CHECK(ctx, cudaFuncGetAttributes(&attr, kernel));
    LAC_CUDA_CHECK(ctx, cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             (int)(ctx->cuda->prop.sharedMemPerBlockOptin - attr.sharedSizeBytes)));
    int count = 0;
    LAC_CUDA_CHECK(ctx, cudaOccupancyMaxActiveBlocksPerMultiprocessor(&count, kernel, LOCAL_BLOCK, smem));
    const int64_t fact[2] = {count, 0};
    lac_map_fact_put(ctx, kernel, MAP_FACT_LOCAL, 0, smem, fact);
    *per_sm = count;
    return LAC_SUCCESS;
}

/* The narrow twin of a plan of wide chunks, built on first use from its
 * words (the bridge itself is not kept) and kept beside it. */
static lac_status local_narrow(lac_ctx_t ctx, map_local_plan *p)
{
    if (p->narrow) return LAC_SUCCESS;
    int32_t *bridge = NULL;
    LAC_CUDA_CHECK(ctx, cudaMalloc(&bridge, (size_t)p->m * sizeof(int32_t)));
    lac_status st = lac_map_local_plan_bridge(ctx, p, bridge);
    if (st >= 0) st = local_plan_make(ctx, bridge, LAC_INT32, p->m, p->n, LOCAL_NARROW_ROWS, p->acc32, &p->narrow);
    cudaStreamSynchronize(ctx->cuda->stream);
    cudaFree(bridge);
    cudaGetLastError();
    return st;
}


extern "C" lac_status lac_map_local_plan_execute(lac_ctx_t ctx, const map_local_plan *p, const lac_map_call *call,
                                             int *taken)
{
    *taken = 0;
    const lac_map_params *prm = &call->params;
    if (call->memory != LAC_MEM_DEVICE || call->b != 1 || prm->nan_policy != LAC_NAN_PROPAGATE) return LAC_SUCCESS;
    if (prm->op != LAC_MAP_SUM && prm->op != LAC_MAP_COUNT) return LAC_SUCCESS;
    if (!lac_map_aligned16(call->source) || (call->weights && !lac_map_aligned16(call->weights))) return LAC_SUCCESS;
    const size_t vs = lac_dtype_size(call->value_dtype);
    const int weighted = call->weights != NULL;
    const int acc32 = p->acc32 && call->value_dtype == LAC_FLOAT32;
    const size_t accb = acc32 ? 4 : 8;
    const size_t optin = ctx->cuda->prop.sharedMemPerBlockOptin - 1024;   /* room for static shared memory */
    int stages = 0;
    for (int s = 4; s >= 2 && !stages; s--)
        if (local_smem(p->n, p->chunk_rows, accb, vs, weighted, s) <= optin) stages = s;
    if (!stages && p->chunk_rows > LOCAL_NARROW_ROWS &&
        local_smem(p->n, LOCAL_NARROW_ROWS, accb, vs, weighted, 2) <= optin) {
        /* Wide chunks whose ring of 2 does not fit beside this call's w or
         * float64 S: run on the narrow twin. A weighted float32 call at 40M
         * -> 10k took 0.202 ms on 8192-row chunks, 0.236 on 16384 with one
         * ring slot, 1.80 on the sorted plan. */
        LAC_CHECK(local_narrow(ctx, (map_local_plan *)p));
        return lac_map_local_plan_execute(ctx, p->narrow, call, taken);
    }
    if (!stages) return LAC_SUCCESS;
    const size_t smem = local_smem(p->n, p->chunk_rows, accb, vs, weighted, stages);
    const int mode = (prm->op == LAC_MAP_COUNT ? 2 : 0) + weighted;
    const int64_t per_thread = p->chunk_rows / LOCAL_BLOCK;
    const void *kernel = call->value_dtype == LAC_FLOAT64 ? local_kernel_mode<double, double>(mode, per_thread)
                         : acc32                          ? local_kernel_mode<float, float>(mode, per_thread)
                                                          : local_kernel_mode<float, double>(mode, per_thread);
    int per_sm = 0;
    LAC_CHECK(local_prepare(ctx, kernel, smem, &per_sm));
    if (per_sm < 1) return LAC_SUCCESS;

    /* One block per virtual block where they all fit at once; a grid barrier
     * needs every block resident. LACUNA_MAP_CUDA_PLAN_GRID (tests) asks for
     * fewer: the bits must not change. */
    int64_t grid = (int64_t)per_sm * ctx->cuda->prop.multiProcessorCount;
    if (grid > p->virtual_blocks) grid = p->virtual_blocks;
    const char *force = lac_knob_string(ctx, LAC_KNOB_MAP_CUDA_PLAN_GRID);
    if (force && atoi(force) > 0 && atoi(force) < grid) grid = atoi(force);

    void *ws = NULL;
    LAC_CHECK(lac_cuda_workspace(ctx, (size_t)p->virtual_blocks * (size_t)p->n * sizeof(double), &ws));
    map_layout L = lac_map_layout_for(call);
    local_args a;
    memset(&a, 0, sizeof a);
    a.source = call->source;
    a.weights = call->weights;
    a.words = p->words;
    a.hits = p->hits;
    a.m = p->m;
    a.n = p->n;
    a.chunk_rows = p->chunk_rows;
    a.chunks = p->chunks;
    a.virtual_blocks = p->virtual_blocks;
    a.stages = stages;
    a.partials = (double *)ws;
    a.target = call->target;
    a.accumulate = prm->accumulate;
    a.track_hits = L.track_hits;
    a.empty_value = prm->empty_value;
    void *params[] = {&a};
    LAC_CUDA_CHECK(ctx, cudaLaunchCooperativeKernel(kernel, dim3((unsigned int)grid), dim3(LOCAL_BLOCK), params, smem,
                                                    ctx->cuda->stream));
    LAC_CUDA_CHECK_LAUNCH(ctx);
    *taken = 1;
    return LAC_SUCCESS;
}

extern "C" size_t lac_map_local_plan_bytes(const map_local_plan *p)
{
    return (size_t)(p->chunks * p->chunk_rows) * sizeof(uint32_t) + (size_t)p->n * sizeof(int32_t) +
           (p->narrow ? lac_map_local_plan_bytes(p->narrow) : 0);
}
