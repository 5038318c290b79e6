/* map on the CUDA backend: many targets (more than one block's shared memory
 * holds) without a random L2 atomic per row.
 *
 * The targets are cut into P ranges of W (< 65536) each; each range lives in
 * the shared memory of g = G / P blocks of a persistent cooperative grid of G
 * blocks (one per SM). The rows are taken in chunks of G tiles, small enough
 * that a chunk's partitioned copy stays in L2:
 *   scatter(k)  each block sorts its tile of chunk k by range in shared memory
 *               (warp-aggregated counts) and writes each range's run, as
 *               (16-bit local index, value), to its region of the chunk's
 *               buffer: coalesced writes that stay in L2;
 *   reduce(k)   each block adds, with shared-memory atomics, the entries of its
 *               range that 1/g of the blocks wrote for chunk k.
 * A block scatters chunk k, then reduces chunk k - 1: the two overlap across
 * the grid, and blocks wait only on per-chunk counters (chunk k scattered by
 * all; chunk k - PART_BUFFERS reduced by all before its buffer is reused), not
 * on a grid barrier. DRAM sees S and R once; L2 the partitioned copy twice.
 * A region that overflows (a skewed bridge) sends the rest of its run to an
 * n-long spill array with global atomics. At the end the g blocks of a range
 * write their copies as partials, meet, and each sums 1/g of the range (plus
 * the spill) into T, unless a row was flagged (bad index): then T stays as it
 * was. Fault words, report word and the write rules are map_few.cu's. */
#include "backend/cuda/map/map_cuda.cuh"
#include "backend/cuda/map/map_device.cuh"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define PART_BLOCK 1024
#define PART_TILE 8192          /* rows a block sorts by range at once (8 a thread) */
#define PART_BUFFERS 3          /* chunks in flight: written, waiting, read */
#define PART_MAX_RANGES 256
#define PART_MAX_WIDTH 65535    /* local indices are 16-bit */

typedef struct {
    const void *source, *bridge, *weights;
    int64_t rows, n;
    void *target;
    unsigned long long *fault, *next_fault, *report;
    double empty_value;
    int accumulate;
    int check;                /* 0: the bridge is known to be in [0, n) (a plan's) */
    int ranges, per_range;    /* P, g */
    unsigned int width;       /* W */
    float inv_width;
    int64_t chunk_rows;       /* G * tiles * PART_TILE */
    int tiles;                /* tiles a block scatters per chunk */
    int64_t chunks;
    unsigned int cap;         /* entries of one (block, range) region, a multiple of 8 */
    void *vals;               /* PART_BUFFERS x G x P x cap values */
    unsigned short *idx;      /* the same, local indices */
    unsigned int *fill;       /* PART_BUFFERS x G x P entries written */
    unsigned int *counters;   /* scattered[chunks], freed[chunks], arrive[P], zeroed; 0 on entry */
    void *partials;           /* g x n */
    void *spill;              /* n, zeroed by the kernel */
    unsigned long long *sticky;   /* deferred report (map_deferred), or NULL */
    unsigned long long tag;
    unsigned long long *prof;     /* G x PART_PROF: nanoseconds per phase (LACUNA_MAP_CUDA_PART=profile), or NULL */
} part_args;

/* Phases timed per block under LACUNA_MAP_CUDA_PART=profile. */
enum { PROF_SETUP, PROF_WAIT_FREED, PROF_SCATTER, PROF_WAIT_SCATTERED, PROF_REDUCE, PROF_TOTAL, PART_PROF };
static const char *const part_prof_names[PART_PROF] = {"setup", "wait-freed", "scatter", "wait-scattered",
                                                       "reduce", "chunks"};

__device__ __forceinline__ unsigned long long part_clock()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__device__ __forceinline__ void part_prefetch_l2(const void *p, unsigned int bytes)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
#else
    (void)p, (void)bytes;
#endif
}

__device__ __forceinline__ void part_wait(const unsigned int *c, unsigned int goal)
{
    while (*(const volatile unsigned int *)c < goal) __nanosleep(64);
}

/* The range and local index of target t (float reciprocal, corrected). */
__device__ __forceinline__ void part_split(unsigned int t, unsigned int W, float inv, unsigned int &r, unsigned int &loc)
{
    r = (unsigned int)((float)t * inv);
    if (r * W > t) r--;
    else if ((r + 1) * W <= t) r++;
    loc = t - r * W;
}

/* MODE: 0 sum, 1 weighted sum, 2 count, 3 weighted count. */
template <class V, class I, int MODE> __global__ void __launch_bounds__(PART_BLOCK, 1) map_part_kernel(part_args a)
{
    extern __shared__ __align__(16) unsigned char smem_raw[];
    __shared__ unsigned int hist[PART_MAX_RANGES];
    __shared__ unsigned int start[PART_MAX_RANGES + 1];
    __shared__ unsigned int cur[PART_MAX_RANGES];
    __shared__ unsigned int seg[PART_MAX_RANGES + 1];   /* reduce: prefix of the regions' fills */
    __shared__ int spill_ok, overflow;
    const unsigned int tid = threadIdx.x, lane = tid & 31;
    const int G = (int)gridDim.x, b = (int)blockIdx.x;
    const int P = a.ranges, g = a.per_range;
    const unsigned int W = a.width;
    const unsigned long long un = (unsigned long long)a.n;
    V *acc = reinterpret_cast<V *>(smem_raw);
    V *stage_val = reinterpret_cast<V *>(smem_raw + ((size_t)W * sizeof(V) + 15) / 16 * 16);
    unsigned short *stage_idx = reinterpret_cast<unsigned short *>(stage_val + PART_TILE);
    const V *S = reinterpret_cast<const V *>(a.source);
    const V *Wt = reinterpret_cast<const V *>(a.weights);
    const I *R = reinterpret_cast<const I *>(a.bridge);
    V *vals = reinterpret_cast<V *>(a.vals);
    V *spill = reinterpret_cast<V *>(a.spill);
    unsigned int *scattered = a.counters, *freed = a.counters + a.chunks, *arrive = freed + a.chunks;
    unsigned int *zeroed = arrive + P;
    const int my_range = b < P * g ? b / g : -1, member = b % g;
    const unsigned int tile_rows = PART_TILE;
    const int64_t block_rows = (int64_t)a.tiles * tile_rows;

    if (b == 0 && tid == 0 && a.next_fault) *a.next_fault = MAP_NO_FAULT;
    __shared__ unsigned long long prof[PART_PROF + 2];   /* phases, then the last mark and the start */
    if (a.prof && tid == 0) {
        for (int i = 0; i < PART_PROF; i++) prof[i] = 0;
        prof[PART_PROF] = prof[PART_PROF + 1] = part_clock();
    }
    auto lap = [&](int phase) {
        if (a.prof && tid == 0) {
            const unsigned long long now = part_clock();
            prof[phase] += now - prof[PART_PROF];
            prof[PART_PROF] = now;
        }
    };
    /* The first chunk's rows into L2 while shared memory is zeroed. */
    if (tid < (unsigned int)a.tiles) {
        const int64_t lo = (int64_t)b * block_rows + (int64_t)tid * tile_rows;
        const int64_t len = a.rows / 4 * 4 - lo < (int64_t)tile_rows ? a.rows / 4 * 4 - lo : (int64_t)tile_rows;
        if (len > 0) {
            part_prefetch_l2(R + lo, (unsigned int)(len * sizeof(I)));
            if (MODE < 2) part_prefetch_l2(S + lo, (unsigned int)(len * sizeof(V)));
            if (MODE & 1) part_prefetch_l2(Wt + lo, (unsigned int)(len * sizeof(V)));
        }
    }
    for (unsigned int t = tid; t < W; t += PART_BLOCK) acc[t] = (V)0;
    {   /* this block's share of the spill */
        const int64_t per = (a.n + G - 1) / G, s0 = (int64_t)b * per;
        const int64_t s1 = s0 + per < a.n ? s0 + per : a.n;
        for (int64_t t = s0 + tid; t < s1; t += PART_BLOCK) spill[t] = (V)0;
    }
    __syncthreads();
    if (tid == 0) {
        __threadfence();
        atomicAdd(zeroed, 1u);
        spill_ok = 0;
    }
    lap(PROF_SETUP);

    for (int64_t k = 0; k <= a.chunks; k++) {
        /* ---- scatter(k) ---- */
        if (k < a.chunks) {
            const int q = (int)(k % PART_BUFFERS);
            if (tid == 0 && k >= PART_BUFFERS) part_wait(freed + (k - PART_BUFFERS), (unsigned int)G);
            lap(PROF_WAIT_FREED);
            if (tid < (unsigned int)P) cur[tid] = 0;
            /* The next chunk's rows into L2 (DRAM works while this block sorts and reduces). */
            if (k + 1 < a.chunks && tid < (unsigned int)a.tiles) {
                const int64_t lo = (k + 1) * a.chunk_rows + (int64_t)b * block_rows + (int64_t)tid * tile_rows;
                const int64_t whole = a.rows / 4 * 4;
                const int64_t len = whole - lo < (int64_t)tile_rows ? whole - lo : (int64_t)tile_rows;
                if (len > 0) {
                    part_prefetch_l2(R + lo, (unsigned int)(len * sizeof(I)));
                    if (MODE < 2) part_prefetch_l2(S + lo, (unsigned int)(len * sizeof(V)));
                    if (MODE & 1) part_prefetch_l2(Wt + lo, (unsigned int)(len * sizeof(V)));
                }
            }
            __syncthreads();
            const size_t region0 = ((size_t)q * G + b) * P;
            for (int tile = 0; tile < a.tiles; tile++) {
                const int64_t t0 = k * a.chunk_rows + (int64_t)b * block_rows + (int64_t)tile * tile_rows;
                if (tid < (unsigned int)P) hist[tid] = 0;
                if (tid == 0) overflow = 0;
                __syncthreads();
                /* 8 rows a thread: two vectors of 4. */
                V x[8];
                unsigned int rr[8], loc[8], pos[8];
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const int64_t r0 = t0 + (int64_t)h * 4 * PART_BLOCK + 4 * (int64_t)tid;
                    I rv[4] = {};
                    V sv[4] = {}, wv[4] = {};
                    if (r0 + 4 <= a.rows) {
                        load4(R + r0, rv);
                        if (MODE < 2) load4(S + r0, sv);
                        if (MODE & 1) load4(Wt + r0, wv);
                    } else {
#pragma unroll
                        for (int e = 0; e < 4; e++)
                            if (r0 + e < a.rows) {
                                rv[e] = R[r0 + e];
                                if (MODE < 2) sv[e] = S[r0 + e];
                                if (MODE & 1) wv[e] = Wt[r0 + e];
                            }
                    }
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        const int s = 4 * h + e;
                        const unsigned long long key = (unsigned long long)(int64_t)rv[e];
                        x[s] = MODE == 0 ? sv[e] : MODE == 1 ? wv[e] * sv[e] : MODE == 2 ? (V)1 : wv[e];
                        rr[s] = 0xFFFFFFFFu;
                        if (r0 + e < a.rows) {
                            if (a.check && key >= un) flag_fault(a.fault, (unsigned long long)(r0 + e));
                            else part_split((unsigned int)key, W, a.inv_width, rr[s], loc[s]);
                        }
                    }
                }
                /* Ranks within the tile's range runs, one shared atomic per
                 * distinct range of a warp. */
#pragma unroll
                for (int s = 0; s < 8; s++) {
                    const unsigned int peers = __match_any_sync(0xFFFFFFFFu, rr[s]);
                    const int leader = __ffs(peers) - 1;
                    unsigned int base = 0;
                    if ((int)lane == leader && rr[s] != 0xFFFFFFFFu) base = atomicAdd(&hist[rr[s]], (unsigned int)__popc(peers));
                    base = __shfl_sync(0xFFFFFFFFu, base, leader);
                    pos[s] = base + (unsigned int)__popc(peers & ((1u << lane) - 1u));
                }
                __syncthreads();
                if (tid < 32) {   /* exclusive scan of hist into start */
                    unsigned int carry = 0;
                    for (int r0 = 0; r0 < P; r0 += 32) {
                        const int r = r0 + (int)lane;
                        const unsigned int v = r < P ? hist[r] : 0u;
                        unsigned int inc = v;
                        for (int off = 1; off < 32; off <<= 1) {
                            const unsigned int y = __shfl_up_sync(0xFFFFFFFFu, inc, off);
                            if ((int)lane >= off) inc += y;
                        }
                        if (r < P) {
                            start[r] = carry + inc - v;
                            if (cur[r] + v > a.cap) overflow = 1;
                        }
                        carry += __shfl_sync(0xFFFFFFFFu, inc, 31);
                    }
                    if (lane == 0) start[P] = carry;
                }
                __syncthreads();
#pragma unroll
                for (int s = 0; s < 8; s++)
                    if (rr[s] != 0xFFFFFFFFu) {
                        const unsigned int p = start[rr[s]] + pos[s];
                        stage_val[p] = x[s];
                        stage_idx[p] = (unsigned short)loc[s];
                    }
                if (overflow && tid == 0 && !spill_ok) {   /* the spill must be zero everywhere first */
                    part_wait(zeroed, (unsigned int)G);
                    __threadfence();
                    spill_ok = 1;
                }
                __syncthreads();
                /* Each range's run to its region: consecutive threads, consecutive entries. */
                const unsigned int total = start[P];
                for (unsigned int p = tid; p < total; p += PART_BLOCK) {
                    int lo = 0, hi = P;   /* the range r with start[r] <= p < start[r + 1] */
                    while (hi - lo > 1) {
                        const int mid = (lo + hi) >> 1;
                        if (start[mid] <= p) lo = mid;
                        else hi = mid;
                    }
                    const unsigned int at = cur[lo] + (p - start[lo]);
                    if (at < a.cap) {
                        const size_t off = (region0 + (size_t)lo) * a.cap + at;
                        vals[off] = stage_val[p];
                        a.idx[off] = stage_idx[p];
                    } else {
                        atomicAdd(spill + (size_t)lo * W + stage_idx[p], stage_val[p]);
                    }
                }
                __syncthreads();
                if (tid < (unsigned int)P) cur[tid] += hist[tid];
            }
            __syncthreads();
            if (tid < (unsigned int)P) a.fill[region0 + tid] = cur[tid] < a.cap ? cur[tid] : a.cap;
            __syncthreads();
            if (tid == 0) {
                __threadfence();
                atomicAdd(scattered + k, 1u);
            }
            lap(PROF_SCATTER);
        }
        /* ---- reduce(k - 1) ---- */
        if (k >= 1) {
            const int64_t kk = k - 1;
            const int q = (int)(kk % PART_BUFFERS);
            if (tid == 0) {
                part_wait(scattered + kk, (unsigned int)G);
                __threadfence();
            }
            __syncthreads();
            lap(PROF_WAIT_SCATTERED);
            if (my_range >= 0) {
                /* The regions of my range written by blocks member, member + g, ... as one list. */
                const int nseg = (G - member + g - 1) / g;
                if (tid < 32) {
                    unsigned int carry = 0;
                    for (int s0 = 0; s0 < nseg; s0 += 32) {
                        const int s = s0 + (int)lane;
                        const unsigned int v =
                            s < nseg ? __ldcg(a.fill + ((size_t)q * G + member + (size_t)s * g) * P + my_range) : 0u;
                        unsigned int inc = v;
                        for (int off = 1; off < 32; off <<= 1) {
                            const unsigned int y = __shfl_up_sync(0xFFFFFFFFu, inc, off);
                            if ((int)lane >= off) inc += y;
                        }
                        if (s < nseg) seg[s] = carry + inc - v;
                        carry += __shfl_sync(0xFFFFFFFFu, inc, 31);
                    }
                    if (lane == 0) seg[nseg] = carry;
                }
                __syncthreads();
                const unsigned int total = seg[nseg];
                for (unsigned int p0 = tid; p0 < total; p0 += 4 * PART_BLOCK) {
                    V v[4];
                    unsigned short li[4];
#pragma unroll
                    for (int u = 0; u < 4; u++) {
                        const unsigned int p = p0 + (unsigned int)u * PART_BLOCK;
                        li[u] = 0xFFFF;
                        if (p < total) {
                            int lo = 0, hi = nseg;
                            while (hi - lo > 1) {
                                const int mid = (lo + hi) >> 1;
                                if (seg[mid] <= p) lo = mid;
                                else hi = mid;
                            }
                            const size_t off = (((size_t)q * G + member + (size_t)lo * g) * P + my_range) * a.cap + (p - seg[lo]);
                            v[u] = __ldcg(vals + off);
                            li[u] = __ldcg(a.idx + off);
                        }
                    }
#pragma unroll
                    for (int u = 0; u < 4; u++)
                        if (li[u] != 0xFFFF) atomicAdd(acc + li[u], v[u]);
                }
            }
            __syncthreads();
            if (tid == 0) {
                __threadfence();
                atomicAdd(freed + kk, 1u);
            }
            lap(PROF_REDUCE);
        }
    }
    if (a.prof && tid == 0) {
        prof[PROF_TOTAL] = part_clock() - prof[PART_PROF + 1];
        for (int i = 0; i < PART_PROF; i++) a.prof[(size_t)b * PART_PROF + i] = prof[i];
    }

    /* ---- T: the g copies of each range summed (with the spill) ---- */
    __syncthreads();
    const unsigned long long fault = *(volatile unsigned long long *)a.fault;   /* final: every chunk scattered */
    if (b == 0 && tid == 0 && a.report) *(volatile unsigned long long *)a.report = fault;
    if (b == 0 && tid == 0 && a.sticky && fault != MAP_NO_FAULT) atomicMin(a.sticky, a.tag | fault);
    if (my_range < 0) return;
    const int64_t r0 = (int64_t)my_range * W;
    const int64_t width = a.n - r0 < (int64_t)W ? a.n - r0 : (int64_t)W;
    V *part = reinterpret_cast<V *>(a.partials);
    if (g > 1) {
        for (int64_t t = tid; t < width; t += PART_BLOCK) part[(size_t)member * a.n + r0 + t] = acc[t];
        __syncthreads();
        if (tid == 0) {
            __threadfence();
            atomicAdd(arrive + my_range, 1u);
            part_wait(arrive + my_range, (unsigned int)g);
            __threadfence();
        }
        __syncthreads();
    }
    if (fault != MAP_NO_FAULT) return;   /* T stays as it was */
    if (!spill_ok && tid == 0) {   /* other blocks' spill: zeroed before anyone added to it */
        part_wait(zeroed, (unsigned int)G);
        __threadfence();
    }
    __syncthreads();
    const bool empty_is_zero = a.empty_value == 0.0 && !signbit(a.empty_value);
    V *T = reinterpret_cast<V *>(a.target);
    const int64_t per = (width + g - 1) / g, s0 = (int64_t)member * per;
    const int64_t s1 = s0 + per < width ? s0 + per : width;
    for (int64_t t = s0 + tid; t < s1; t += PART_BLOCK) {
        V sum = __ldcg(spill + r0 + t);
        if (g > 1)
            for (int c = 0; c < g; c++) sum += __ldcg(part + (size_t)c * a.n + r0 + t);
        else
            sum += acc[t];
        const int64_t k = r0 + t;
        if (a.accumulate) T[k] = T[k] + sum;
        else if (MODE >= 2) T[k] = sum != (V)0 || empty_is_zero ? sum : (V)a.empty_value;
        else T[k] = sum;
    }
}

/* ------------------------------------------------------------------------ */
/* Host side                                                                 */
/* ------------------------------------------------------------------------ */
template <class V, class I> static const void *part_kernel_for(int mode)
{
    switch (mode) {
    case 0: return reinterpret_cast<const void *>(&map_part_kernel<V, I, 0>);
    case 1: return reinterpret_cast<const void *>(&map_part_kernel<V, I, 1>);
    case 2: return reinterpret_cast<const void *>(&map_part_kernel<V, I, 2>);
    default: return reinterpret_cast<const void *>(&map_part_kernel<V, I, 3>);
    }
}

static const void *pick_part_kernel(lac_dtype value, lac_dtype index, int mode)
{
    if (value == LAC_FLOAT32) return index == LAC_INT32 ? part_kernel_for<float, int32_t>(mode) : part_kernel_for<float, int64_t>(mode);
    return index == LAC_INT32 ? part_kernel_for<double, int32_t>(mode) : part_kernel_for<double, int64_t>(mode);
}

extern "C" lac_status lac_map_part_try(lac_ctx_t ctx, const lac_map_call *call, const map_layout *L,
                                       const map_deferred *defer, int *taken)
{
    cudaStream_t st = ctx->cuda->stream;
    *taken = 0;
    const lac_map_params *p = &call->params;
    if (!lac_map_one_launch_call(call, L)) return LAC_SUCCESS;
    /* Opt-in while it is slower than the general kernel (bench/RESULTS.md):
     * LACUNA_MAP_CUDA_PART=1 takes it for every call it serves. */
    const char *knob = lac_knob_string(ctx, LAC_KNOB_MAP_CUDA_PART);
    const char *force = lac_knob_string(ctx, LAC_KNOB_MAP_CUDA_STRATEGY);
    const int profile = knob && strcmp(knob, "profile") == 0;
    if (!(knob && (strcmp(knob, "1") == 0 || profile)) || (force && *force)) return LAC_SUCCESS;

    const int mode = (p->op == LAC_MAP_COUNT ? 2 : 0) + (call->weights ? 1 : 0);
    const void *kernel = pick_part_kernel(call->value_dtype, call->index_dtype, mode);
    size_t smem_max = 0;
    int per_sm = 0;
    LAC_CHECK(lac_map_coop_limits(ctx, kernel, MAP_FACT_PART, PART_BLOCK, 0, &smem_max, &per_sm));
    const size_t vs = lac_dtype_size(call->value_dtype);
    const size_t stage = (size_t)PART_TILE * (vs + sizeof(unsigned short));
    if (smem_max < stage + 4096) return LAC_SUCCESS;
    int64_t wmax = (int64_t)((smem_max - stage - 64) / vs) / 32 * 32;
    if (wmax > PART_MAX_WIDTH / 32 * 32) wmax = PART_MAX_WIDTH / 32 * 32;
    const int G = ctx->cuda->prop.multiProcessorCount;
    const int64_t P = (call->n + wmax - 1) / wmax;
    if (P < 2 || P > G || P > PART_MAX_RANGES) return LAC_SUCCESS;   /* few targets, or too many for the grid */
    const int g = (int)(G / P);
    const int64_t W = ((call->n + P - 1) / P + 31) / 32 * 32;
    const size_t smem = ((size_t)W * vs + 15) / 16 * 16 + stage;
    LAC_CHECK(lac_map_coop_limits(ctx, kernel, MAP_FACT_PART, PART_BLOCK, smem, &smem_max, &per_sm));
    if (per_sm < 1) return LAC_SUCCESS;

    /* Tiles a block scatters per chunk: PART_BUFFERS chunks of partitioned
     * copy ((vs + 2) bytes a row) stay well inside L2. */
    int tiles = (int)lac_knob_int(ctx, LAC_KNOB_MAP_CUDA_PART_TILES, 0);
    if (tiles < 1 || tiles > 64) {
        const double l2 = ctx->cuda->prop.l2CacheSize > 0 ? (double)ctx->cuda->prop.l2CacheSize : 50e6;
        tiles = (int)(0.4 * l2 / (PART_BUFFERS * (double)G * PART_TILE * (double)(vs + 2)));
        if (tiles < 1) tiles = 1;
    }
    const int64_t chunk_rows = (int64_t)G * tiles * PART_TILE;
    const int64_t chunks = (call->m + chunk_rows - 1) / chunk_rows;
    const int64_t block_rows = (int64_t)tiles * PART_TILE;
    int64_t cap = block_rows * 2 / P + 256;
    if (cap > block_rows) cap = block_rows;
    cap = (cap + 7) / 8 * 8;

    const size_t regions = (size_t)PART_BUFFERS * G * P;
    const size_t vals_bytes = lac_map_align256(regions * cap * vs);
    const size_t idx_bytes = lac_map_align256(regions * cap * sizeof(unsigned short));
    const size_t fill_bytes = lac_map_align256(regions * sizeof(unsigned int));
    const size_t part_bytes = lac_map_align256((size_t)g * call->n * vs);
    const size_t spill_bytes = lac_map_align256((size_t)call->n * vs);
    const size_t counter_bytes = lac_map_align256((size_t)(2 * chunks + P + 1) * sizeof(unsigned int));
    const size_t prof_bytes = profile ? lac_map_align256((size_t)G * PART_PROF * sizeof(unsigned long long)) : 0;
    void *ws = NULL;
    LAC_CHECK(lac_cuda_workspace(ctx, vals_bytes + idx_bytes + fill_bytes + part_bytes + spill_bytes + counter_bytes +
                                          prof_bytes + 256, &ws));
    unsigned char *w = (unsigned char *)ws;
    part_args a;
    memset(&a, 0, sizeof a);
    a.vals = w;
    w += vals_bytes;
    a.idx = (unsigned short *)w;
    w += idx_bytes;
    a.fill = (unsigned int *)w;
    w += fill_bytes;
    a.partials = w;
    w += part_bytes;
    a.spill = w;
    w += spill_bytes;
    a.counters = (unsigned int *)w;
    w += counter_bytes;
    if (profile) {
        a.prof = (unsigned long long *)w;
        w += prof_bytes;
    }
    unsigned long long *fault = NULL, *next_fault = NULL;
    if (!defer) LAC_CHECK(lac_map_fault_pair(ctx, &fault, &next_fault));
    if (!fault) {   /* none left, or deferred: a workspace flag reset on the stream */
        fault = (unsigned long long *)w;
        LAC_CUDA_CHECK(ctx, cudaMemsetAsync(fault, 0xFF, sizeof *fault, st));
    }
    LAC_CUDA_CHECK(ctx, cudaMemsetAsync(a.counters, 0, counter_bytes + prof_bytes, st));

    a.source = call->source;
    a.bridge = call->bridge;
    a.weights = call->weights;
    a.rows = call->m;
    a.n = call->n;
    a.target = call->target;
    a.fault = fault;
    a.next_fault = next_fault;
    a.report = defer ? NULL : lac_map_fault_report_word(ctx);
    a.sticky = defer ? defer->sticky : NULL;
    a.tag = defer ? defer->tag : 0;
    a.empty_value = p->empty_value;
    a.accumulate = p->accumulate;
    a.check = !call->bridge_checked;
    a.ranges = (int)P;
    a.per_range = g;
    a.width = (unsigned int)W;
    a.inv_width = 1.0f / (float)W;
    a.chunk_rows = chunk_rows;
    a.tiles = tiles;
    a.chunks = chunks;
    a.cap = (unsigned int)cap;
    void *params[] = {&a};
    LAC_CUDA_CHECK(ctx, cudaLaunchCooperativeKernel(kernel, dim3((unsigned int)G), dim3(PART_BLOCK), params, smem, st));
    LAC_CUDA_CHECK_LAUNCH(ctx);
    if (next_fault) lac_map_fault_pair_advance(ctx);
    *taken = 1;
    if (profile) {   /* mean and largest time of each phase over the blocks, at info level */
        unsigned long long *h = (unsigned long long *)calloc((size_t)G * PART_PROF, sizeof *h);
        if (h && cudaMemcpyAsync(h, a.prof, (size_t)G * PART_PROF * sizeof *h, cudaMemcpyDeviceToHost, st) == cudaSuccess &&
            cudaStreamSynchronize(st) == cudaSuccess) {
            char line[512];
            int at = snprintf(line, sizeof line, "map part: P %d g %d W %u tiles %d chunks %lld cap %u (us mean/max):",
                              a.ranges, g, a.width, tiles, (long long)chunks, a.cap);
            for (int i = 0; i < PART_PROF && at < (int)sizeof line; i++) {
                double sum = 0, top = 0;
                for (int blk = 0; blk < G; blk++) {
                    const double v = 1e-3 * (double)h[(size_t)blk * PART_PROF + i];
                    sum += v;
                    top = v > top ? v : top;
                }
                at += snprintf(line + at, sizeof line - (size_t)at, " %s %.1f/%.1f", part_prof_names[i], sum / G, top);
            }
            lac_log(ctx, LAC_LOG_INFO, "%s", line);
        }
        free(h);
        cudaGetLastError();
    }
    if (defer) return LAC_SUCCESS;
    return lac_map_report_fault_mapped(ctx, call, fault, a.report);
}
