/* map on the CUDA backend: the kernels of the one-shot reduction
 * T[R[i]] op= w[i] * S[i], its finalise pass, and their launches (the host's
 * choice of strategy is map_strategy.cu's).
 *
 * Each call reduces into scratch accumulators first and checks the bridge and
 * the NaN policy in the same pass (the smallest offending row goes to a device
 * flag by atomicMin); the finalise pass then writes T only when the flag is
 * clear, so a bad call leaves T untouched.
 *
 * Contention decides where the accumulators live (docs/map-cuda.md):
 *  - the target fits in one block's shared memory (few targets): every block of
 *    a persistent grid keeps private copies, updated with shared-memory atomics,
 *    lane l updating copy l % copies so that the lanes of a warp that hit one
 *    hot target (skewed bridges) spread over several addresses;
 *  - larger targets, SUM/COUNT: global (L2) atomics, with the hot targets of a
 *    skewed bridge found by a per-block sample and accumulated in shared memory;
 *  - larger targets, other ops: a pair or quad of blocks (a thread-block
 *    cluster) privatise what fits through distributed shared memory, the rest
 *    goes to global atomics.
 * Private copies end as "partials" rows (one per block or cluster) that the
 * finalise pass sums per target, so no global atomic is spent on flushing them.
 * SUM/COUNT with NaN propagated over one column run a dedicated kernel
 * (map_sum_private_kernel); everything else the general one (map_reduce_kernel).
 *
 * MIN/MAX use order-preserving integer keys (float bits flipped so that integer
 * order is float order) with a NaN code that always wins, so that they run on
 * integer atomicMin/atomicMax; an untouched slot keeps the sentinel. */
#include "backend/cuda/map/map_cuda.cuh"
#include "backend/cuda/map/map_device.cuh"

#include <cooperative_groups.h>

#include <math.h>
#include <type_traits>
#include <stdlib.h>
#include <string.h>

namespace cg = cooperative_groups;


/* ------------------------------------------------------------------------ */
/* Accumulator types and order-preserving keys                               */
/* ------------------------------------------------------------------------ */
template <class V> struct value_traits;
template <> struct value_traits<float> {
    typedef unsigned int key_t;
};
template <> struct value_traits<double> {
    typedef unsigned long long key_t;
};

__device__ __forceinline__ unsigned int order_key(float x)
{
    unsigned int u = __float_as_uint(x);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
__device__ __forceinline__ unsigned long long order_key(double x)
{
    unsigned long long u = (unsigned long long)__double_as_longlong(x);
    return (u & 0x8000000000000000ull) ? ~u : (u | 0x8000000000000000ull);
}
__device__ __forceinline__ float key_value(unsigned int k, float)
{
    return __uint_as_float((k & 0x80000000u) ? (k & 0x7FFFFFFFu) : ~k);
}
__device__ __forceinline__ double key_value(unsigned long long k, double)
{
    return __longlong_as_double((long long)((k & 0x8000000000000000ull) ? (k & 0x7FFFFFFFFFFFFFFFull) : ~k));
}

/* The identity of each kind: 0 for sums; for MIN the all-ones sentinel (no
 * real key reaches it), for MAX 0. A NaN key is the extreme on the other side:
 * 0 for MIN, all-ones for MAX, so that it wins every comparison. */
template <class A, int KIND> __device__ __forceinline__ A kind_identity()
{
    if constexpr (KIND == MAP_KIND_MIN) return (A)~(A)0;
    else return (A)0;
}
template <class A, int KIND> __device__ __forceinline__ A kind_nan_key()
{
    if constexpr (KIND == MAP_KIND_MAX) return (A)~(A)0;
    else return (A)0;
}

template <int KIND, class A> __device__ __forceinline__ A kind_combine(A a, A b)
{
    if constexpr (KIND == MAP_KIND_ADD) return a + b;
    else if constexpr (KIND == MAP_KIND_MIN) return a < b ? a : b;
    else return a > b ? a : b;
}

template <int KIND, class A> __device__ __forceinline__ void kind_atomic(A *p, A v)
{
    if constexpr (KIND == MAP_KIND_ADD) atomicAdd(p, v);
    else if constexpr (KIND == MAP_KIND_MIN) atomicMin(p, v);
    else atomicMax(p, v);
}

/* ------------------------------------------------------------------------ */
/* Reductions into distributed shared memory (a cluster peer's slice)        */
/* ------------------------------------------------------------------------ */
/* The peer's address through mapa and a fire-and-forget red on the
 * shared::cluster window: cheaper than generic-pointer atomics, and it covers
 * the 64-bit min/max keys too. */
__device__ __forceinline__ unsigned int peer_address(const void *local, unsigned int rank)
{
    unsigned int a = (unsigned int)__cvta_generic_to_shared(local), r;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(rank));
    return r;
}
template <int KIND> __device__ __forceinline__ void peer_red(unsigned int addr, float v)
{
    asm volatile("red.shared::cluster.add.f32 [%0], %1;" ::"r"(addr), "f"(v) : "memory");
}
template <int KIND> __device__ __forceinline__ void peer_red(unsigned int addr, double v)
{
    asm volatile("red.shared::cluster.add.f64 [%0], %1;" ::"r"(addr), "d"(v) : "memory");
}
template <int KIND> __device__ __forceinline__ void peer_red(unsigned int addr, unsigned int v)
{
    if constexpr (KIND == MAP_KIND_MIN) asm volatile("red.shared::cluster.min.u32 [%0], %1;" ::"r"(addr), "r"(v) : "memory");
    else asm volatile("red.shared::cluster.max.u32 [%0], %1;" ::"r"(addr), "r"(v) : "memory");
}
template <int KIND> __device__ __forceinline__ void peer_red(unsigned int addr, unsigned long long v)
{
    if constexpr (KIND == MAP_KIND_MIN) asm volatile("red.shared::cluster.min.u64 [%0], %1;" ::"r"(addr), "l"(v) : "memory");
    else asm volatile("red.shared::cluster.max.u64 [%0], %1;" ::"r"(addr), "l"(v) : "memory");
}

/* ------------------------------------------------------------------------ */
/* The reduction kernel                                                      */
/* ------------------------------------------------------------------------ */
/* Launch-constant description of where slots live (from map_strategy). */
struct reduce_geometry {
    int cluster_size;
    int clusters;
    int copies;              /* private copies per block (lane % copies picks one) */
    unsigned int capacity;   /* slots < capacity are privatised */
    unsigned int slice;      /* slots per block */
    unsigned int pitch;      /* words between two arrays/copies in shared memory */
    float inv_slice;
};

/* Per-element context shared by the loops of the kernel. */
template <class V, class A, int KIND> struct reducer {
    const map_reduce_args &a;
    const reduce_geometry &g;
    A *priv;                  /* this block's shared copy (copies x arrays x pitch) */
    A *scratch;
    int64_t slots;
    int copy;                 /* this lane's private copy */

    /* What element (row, col) with source s, weight w and bridge value r
     * contributes: its slot and up to 3 accumulator values. Returns false when
     * it contributes nothing (bad index or NaN flagged, NaN skipped). */
    __device__ __forceinline__ bool element(int64_t row, int64_t col, V s, V w, int64_t r, int64_t *slot,
                                            A vals[3]) const
    {
        if (r < 0 || r >= a.n) {
            flag_fault(a.fault, (unsigned long long)(a.row0 + row));
            return false;
        }
        bool bad = isnan(s) || isnan(w);
        if (bad && a.nan_policy != LAC_NAN_PROPAGATE) {
            if (a.nan_policy == LAC_NAN_ERROR) flag_fault(a.fault, (unsigned long long)(a.row0 + row));
            return false;
        }
        *slot = r * a.b + col;
        if constexpr (KIND == MAP_KIND_ADD) {
            /* Array 1 is the weight sum when tracked, else the hits; array 2
             * the hits after a weight sum (constant indices keep vals in
             * registers). */
            vals[0] = (A)(a.op == LAC_MAP_COUNT ? w : w * s);
            vals[1] = a.layout.track_weight ? (A)w : (A)1;
            vals[2] = (A)1;
        } else {
            V x = w * s;
            vals[0] = isnan(x) ? kind_nan_key<A, KIND>() : (A)order_key(x);
        }
        return true;
    }

    /* Adds vals into slot: this block's shared memory, a cluster peer's, or
     * global scratch. */
    __device__ __forceinline__ void update(int64_t slot, const A *vals) const
    {
        int arrays = a.layout.arrays;
        if (slot < (int64_t)g.capacity) {
            unsigned int s = (unsigned int)slot;
            if (g.cluster_size == 1) {
                A *base = priv + (size_t)copy * arrays * g.pitch + s;
#pragma unroll
                for (int k = 0; k < 3; k++)
                    if (k < arrays) kind_atomic<KIND>(base + (size_t)k * g.pitch, vals[k]);
            } else {
                unsigned int owner = (unsigned int)((float)s * g.inv_slice);
                if (owner * g.slice > s) owner--;
                else if ((owner + 1) * g.slice <= s) owner++;
                unsigned int addr = peer_address(priv + (s - owner * g.slice), owner);
#pragma unroll
                for (int k = 0; k < 3; k++)
                    if (k < arrays) peer_red<KIND>(addr + (unsigned int)(k * g.pitch * sizeof(A)), vals[k]);
            }
        } else {
#pragma unroll
            for (int k = 0; k < 3; k++)
                if (k < arrays) kind_atomic<KIND>(scratch + (size_t)k * slots + slot, vals[k]);
        }
    }
};

template <class V, class I, int KIND>
__global__ void __launch_bounds__(1024, 1) map_reduce_kernel(map_reduce_args a, reduce_geometry g, int vectorised)
{
    typedef typename value_traits<V>::key_t key_t;
    typedef typename std::conditional<KIND == MAP_KIND_ADD, V, key_t>::type A;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    A *priv = reinterpret_cast<A *>(smem_raw);
    const int64_t slots = a.n * a.b;
    const int lane = threadIdx.x & 31;
    reducer<V, A, KIND> red{a, g, priv, reinterpret_cast<A *>(a.scratch), slots, lane & (g.copies - 1)};

    const int arrays = a.layout.arrays;
    const unsigned int priv_words = (unsigned int)g.copies * arrays * g.pitch;
    if (g.capacity > 0) {
        for (unsigned int t = threadIdx.x; t < priv_words; t += blockDim.x) priv[t] = kind_identity<A, KIND>();
        if (g.cluster_size > 1) cg::this_cluster().sync();
        else __syncthreads();
    }

    const V *S = reinterpret_cast<const V *>(a.source);
    const I *R = reinterpret_cast<const I *>(a.bridge);
    const V *W = reinterpret_cast<const V *>(a.weights);
    const int64_t warps = (int64_t)gridDim.x * (blockDim.x >> 5);
    const int64_t warp_id = (int64_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    int64_t first_scalar_row = 0;

    if (vectorised) {
        /* b == 1, 16-byte aligned arrays: each warp takes 64 vectors of 4 rows
         * per step, two per lane, both loads in flight before the first use. */
        const int64_t nvec = a.rows / 4;
        for (int64_t v0 = warp_id * 64; v0 < nvec; v0 += warps * 64) {
            V s[8], w[8];
            I r[8];
#pragma unroll
            for (int u = 0; u < 2; u++) {
                int64_t v = v0 + u * 32 + lane;
                if (v < nvec) {
                    load4(R + 4 * v, r + 4 * u);
                    load4(S + 4 * v, s + 4 * u);
                    if (W) load4(W + 4 * v, w + 4 * u);
                    else w[4 * u] = w[4 * u + 1] = w[4 * u + 2] = w[4 * u + 3] = (V)1;
                }
            }
#pragma unroll
            for (int u = 0; u < 2; u++) {
                int64_t v = v0 + u * 32 + lane;
                if (v >= nvec) continue;
#pragma unroll
                for (int q = 0; q < 4; q++) {
                    int64_t slot = 0;
                    A vals[3] = {};
                    if (red.element(4 * v + q, 0, s[4 * u + q], w[4 * u + q], (int64_t)r[4 * u + q], &slot, vals))
                        red.update(slot, vals);
                }
            }
        }
        first_scalar_row = nvec * 4;
    }

    /* Rows left over (all rows when not vectorised): one row per thread, its b
     * columns in turn. */
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t row = first_scalar_row + (int64_t)blockIdx.x * blockDim.x + threadIdx.x; row < a.rows; row += stride) {
        int64_t r = (int64_t)R[row];
        V w = W ? W[row] : (V)1;
        for (int64_t col = 0; col < a.b; col++) {
            int64_t slot = 0;
            A vals[3] = {};
            if (red.element(row, col, S[row * a.b + col], w, r, &slot, vals)) red.update(slot, vals);
        }
    }

    if (g.capacity == 0) return;
    /* Every peer's reductions into this block's slice are done after this. */
    unsigned int rank = 0;
    if (g.cluster_size > 1) {
        cg::cluster_group cluster = cg::this_cluster();
        cluster.sync();
        rank = cluster.block_rank();
    } else {
        __syncthreads();
    }
    const unsigned int cluster_id = blockIdx.x / g.cluster_size;
    A *partials = reinterpret_cast<A *>(a.partials);
    for (int k = 0; k < arrays; k++) {
        A *row_out = partials + ((size_t)k * g.clusters + cluster_id) * g.capacity;
        for (unsigned int t = threadIdx.x; t < g.slice; t += blockDim.x) {
            unsigned int s = rank * g.slice + t;
            if (s >= g.capacity) break;
            A v = priv[(size_t)k * g.pitch + t];
            for (int c = 1; c < g.copies; c++) v = kind_combine<KIND>(v, priv[((size_t)c * arrays + k) * g.pitch + t]);
            row_out[s] = a.partials_fresh ? v : kind_combine<KIND>(row_out[s], v);
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Hot targets of a skewed bridge                                            */
/* ------------------------------------------------------------------------ */
/* A skewed bridge (Zipf) sends a large share of the rows to a few targets;
 * their atomics serialise on one address, whatever memory it lives in (on an
 * H100 about 2 ns per update of one L2 address: 9 ms for 40M Zipf(1.1) rows).
 * So each block of the dedicated kernel first samples MAP_HOT_SAMPLES bridge
 * entries (its own strided subset of all rows), counts them in a shared hash
 * table and takes the targets seen at least MAP_HOT_MIN times (a share of
 * ~0.2% or more; the threshold doubles until at most MAP_HOT_MAX remain). It
 * then adds those into accumulators of their own, MAP_HOT_LANES per warp (so
 * that only a few lanes of one warp ever meet on one address), and folds them
 * in once at the end. A uniform bridge yields none: the sample costs a few
 * microseconds at the start of each block, in parallel. */

__device__ __forceinline__ unsigned int hot_hash(unsigned int key) { return key * 2654435761u; }

/* The common case on its own: SUM or COUNT, NaN propagated, one column,
 * aligned arrays. Nothing but the loads, one range check, one hash probe for
 * hot targets and one atomic per element (an unweighted COUNT does not even
 * read S). The cold targets go to this block's private copies in shared
 * memory (privatised: the whole target fits) or straight to global scratch
 * (many targets). MODE: 0 sum, 1 weighted sum, 2 count, 3 weighted count,
 * 4 weighted MEAN into global pairs (sum w S, sum w) only (map_mean_pair.cu:
 * one 8-byte L2 reduction a row; the weight sums start at -0.0 and add
 * w + 0.0, so -0.0 tells an untouched target; the hot targets' weight sums
 * sit behind their sums in shared memory). */
template <class V> struct mean_pair { V sum, wsum; };

/* (x, y) into a global pair: one vector reduction on sm_90 for float32. */
template <class V> __device__ __forceinline__ void pair_add(mean_pair<V> *p, V x, V y)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if constexpr (sizeof(V) == 4) {
        atomicAdd(reinterpret_cast<float2 *>(p), make_float2(x, y));
        return;
    }
#endif
    atomicAdd(&p->sum, x);
    atomicAdd(&p->wsum, y);
}

template <class V, class I, int MODE>
__global__ void __launch_bounds__(1024, 1)
    map_sum_private_kernel(const V *S, const I *R, const V *W, int64_t rows, int64_t row0, int64_t n, V *partials,
                           int fresh, int copies, unsigned int pitch, unsigned long long *fault, V *scratch,
                           int sample)
{
    extern __shared__ __align__(16) unsigned char smem_raw[];
    __shared__ unsigned int hot_keys[MAP_HOT_MAX];
    __shared__ unsigned int hot_found;
    const bool privatised = partials != NULL;
    const unsigned int bd = blockDim.x, tid = threadIdx.x;
    const unsigned int hot_width = (bd >> 5) * MAP_HOT_LANES;   /* accumulators per hot target */
    V *hot_acc = reinterpret_cast<V *>(smem_raw);                  /* MAP_HOT_MAX x hot_width */
    unsigned int *table = reinterpret_cast<unsigned int *>(hot_acc + MAP_HOT_MAX * hot_width);   /* key, index */
    V *priv = reinterpret_cast<V *>(table + 2 * MAP_HOT_TABLE);
    constexpr bool MEAN = MODE == 4;
    V *hot_w = priv;   /* MEAN (never privatised): the hot targets' weight sums */
    mean_pair<V> *pairs = reinterpret_cast<mean_pair<V> *>(scratch);
    const int lane = tid & 31;
    const unsigned int empty = 0xFFFFFFFFu;

    /* The sample, counted in the (not yet used) accumulator space. */
    unsigned int hot_count = 0;
    if (sample) {
        unsigned int *counts = reinterpret_cast<unsigned int *>(hot_acc);
        if (tid == 0) hot_found = 0;
        for (unsigned int t = tid; t < 2 * MAP_HOT_COUNT_SLOTS; t += bd) counts[t] = t & 1 ? 0u : empty;
        __syncthreads();
        const int64_t total = (int64_t)gridDim.x * MAP_HOT_SAMPLES;
        const int64_t step = rows / total > 0 ? rows / total : 1;
        for (unsigned int j = tid; j < MAP_HOT_SAMPLES; j += bd) {
            int64_t q = (int64_t)j * gridDim.x + blockIdx.x;
            int64_t r = (int64_t)R[(q * step) % rows];
            if (r < 0 || r >= n || r >= (int64_t)empty) continue;
            unsigned int key = (unsigned int)r, h = hot_hash(key) & (MAP_HOT_COUNT_SLOTS - 1);
            for (;;) {
                unsigned int old = atomicCAS(&counts[2 * h], empty, key);
                if (old == empty || old == key) {
                    atomicAdd(&counts[2 * h + 1], 1u);
                    break;
                }
                h = (h + 1) & (MAP_HOT_COUNT_SLOTS - 1);
            }
        }
        __syncthreads();
        for (unsigned int threshold = MAP_HOT_MIN;; threshold *= 2) {
            for (unsigned int t = tid; t < MAP_HOT_COUNT_SLOTS; t += bd)
                if (counts[2 * t] != empty && counts[2 * t + 1] >= threshold) {
                    unsigned int i = atomicAdd(&hot_found, 1u);
                    if (i < MAP_HOT_MAX) hot_keys[i] = counts[2 * t];
                }
            __syncthreads();
            if (hot_found <= MAP_HOT_MAX) break;
            __syncthreads();
            if (tid == 0) hot_found = 0;
            __syncthreads();
        }
        hot_count = hot_found;
        __syncthreads();
    }
    for (unsigned int t = tid; t < MAP_HOT_MAX * hot_width; t += bd) {
        hot_acc[t] = (V)0;
        if (MEAN) hot_w[t] = -(V)0;
    }
    for (unsigned int t = tid; t < 2 * MAP_HOT_TABLE; t += bd) table[t] = empty;
    if (privatised)
        for (unsigned int t = tid; t < (unsigned int)copies * pitch; t += bd) priv[t] = (V)0;
    __syncthreads();
    if (tid == 0)
        for (unsigned int h = 0; h < hot_count; h++) {
            unsigned int k = hot_keys[h], slot = hot_hash(k) >> 24;
            while (table[2 * slot] != empty) slot = (slot + 1) & (MAP_HOT_TABLE - 1);
            table[2 * slot] = k;
            table[2 * slot + 1] = h;
        }
    __syncthreads();
    const unsigned int hot_lane = (tid >> 5) * MAP_HOT_LANES + (tid & (MAP_HOT_LANES - 1));
    V *mine = priv + (size_t)(lane & (copies - 1)) * pitch;
    const unsigned long long un = (unsigned long long)n;

    auto add = [&](unsigned long long key, V x, V y, int64_t row) {
        if (key >= un) {
            flag_fault(fault, (unsigned long long)(row0 + row));
            return;
        }
        if (hot_count) {
            unsigned int slot = hot_hash((unsigned int)key) >> 24;
            for (;;) {
                unsigned int k = table[2 * slot];
                if (k == (unsigned int)key) {
                    const unsigned int at = table[2 * slot + 1] * hot_width + hot_lane;
                    atomicAdd(hot_acc + at, x);
                    if (MEAN) atomicAdd(hot_w + at, y);
                    return;
                }
                if (k == empty) break;
                slot = (slot + 1) & (MAP_HOT_TABLE - 1);
            }
        }
        /* Two statements, so that each atomic knows its memory space
         * (shared or global) instead of going through a generic address. */
        if (MEAN) pair_add(pairs + key, x, y);
        else if (privatised) atomicAdd(mine + key, x);
        else atomicAdd(scratch + key, x);
    };

    const int64_t warps = (int64_t)gridDim.x * (bd >> 5);
    const int64_t warp_id = (int64_t)blockIdx.x * (bd >> 5) + (tid >> 5);
    const int64_t nvec = rows / 4;
    for (int64_t v0 = warp_id * 64; v0 < nvec; v0 += warps * 64) {
        V s[8], w[8];
        I r[8];
#pragma unroll
        for (int u = 0; u < 2; u++) {
            int64_t v = v0 + u * 32 + lane;
            if (v < nvec) {
                load4(R + 4 * v, r + 4 * u);
                if (MODE < 2 || MEAN) load4(S + 4 * v, s + 4 * u);
                if ((MODE & 1) || MEAN) load4(W + 4 * v, w + 4 * u);
            }
        }
#pragma unroll
        for (int u = 0; u < 2; u++) {
            int64_t v = v0 + u * 32 + lane;
            if (v >= nvec) continue;
#pragma unroll
            for (int q = 0; q < 4; q++) {
                int k = 4 * u + q;
                V x = MODE == 0 ? s[k] : MODE == 1 || MEAN ? w[k] * s[k] : MODE == 2 ? (V)1 : w[k];
                add((unsigned long long)(int64_t)r[k], x, MEAN ? w[k] + (V)0 : (V)0, 4 * v + q);
            }
        }
    }
    for (int64_t row = nvec * 4 + (int64_t)blockIdx.x * bd + tid; row < rows; row += (int64_t)gridDim.x * bd) {
        V x = MODE == 0 ? S[row] : MODE == 1 || MEAN ? W[row] * S[row] : MODE == 2 ? (V)1 : W[row];
        add((unsigned long long)(int64_t)R[row], x, MEAN ? W[row] + (V)0 : (V)0, row);
    }
    __syncthreads();
    /* Hot targets: each warp sums one target's per-thread accumulators. */
    for (unsigned int h = tid >> 5; h < hot_count; h += bd >> 5) {
        V v = (V)0, vw = -(V)0;
        for (unsigned int t = lane; t < hot_width; t += 32) {
            v += hot_acc[h * hot_width + t];
            if (MEAN) vw += hot_w[h * hot_width + t];
        }
        for (int off = 16; off > 0; off >>= 1) {
            v += __shfl_xor_sync(0xFFFFFFFFu, v, off);
            if (MEAN) vw += __shfl_xor_sync(0xFFFFFFFFu, vw, off);
        }
        if (lane == 0) {
            if (MEAN) pair_add(pairs + hot_keys[h], v, vw);
            else if (privatised) priv[hot_keys[h]] += v;   /* copy 0; one warp per target */
            else atomicAdd(scratch + hot_keys[h], v);
        }
    }
    if (!privatised) return;
    __syncthreads();
    V *out = partials + (size_t)blockIdx.x * n;
    for (int64_t t = tid; t < n; t += bd) {
        V v = priv[t];
        for (int c = 1; c < copies; c++) v += priv[(size_t)c * pitch + t];
        out[t] = fresh ? v : out[t] + v;
    }
}

/* ------------------------------------------------------------------------ */
/* Finalise: accumulators -> T                                               */
/* ------------------------------------------------------------------------ */
template <class V, int KIND> __global__ void map_finalize_kernel(map_finalize_args f)
{
    typedef typename value_traits<V>::key_t key_t;
    typedef typename std::conditional<KIND == MAP_KIND_ADD, V, key_t>::type A;
    const unsigned long long fault = *(volatile const unsigned long long *)f.fault;
    if (f.report && blockIdx.x == 0 && threadIdx.x == 0) *(volatile unsigned long long *)f.report = fault;
    if (fault != MAP_NO_FAULT) return;   /* T stays as it was */
    const A *scratch = reinterpret_cast<const A *>(f.scratch);
    const A *partials = reinterpret_cast<const A *>(f.partials);
    V *T = reinterpret_cast<V *>(f.target);
    const int arrays = f.layout.arrays;
    const bool empty_is_zero = f.empty_value == 0.0 && !signbit(f.empty_value);
    for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < f.slots; k += (int64_t)gridDim.x * blockDim.x) {
        A acc[3] = {};
#pragma unroll
        for (int j = 0; j < 3; j++) {
            if (j >= arrays) continue;
            A v = scratch ? scratch[(size_t)j * f.slots + k] : kind_identity<A, KIND>();
            if (k < f.capacity)
                for (int c = 0; c < f.clusters; c++)
                    v = kind_combine<KIND>(v, partials[((size_t)j * f.clusters + c) * f.capacity + k]);
            acc[j] = v;
        }
        V out;
        if constexpr (KIND == MAP_KIND_ADD) {
            V sum = (V)acc[0];
            V wsum = f.layout.track_weight ? (V)acc[1] : (V)0;
            A hits = f.layout.track_weight ? acc[2] : acc[1];
            int touched = f.layout.track_hits ? hits > (A)0 : -1;
            if (f.accumulate) {
                out = T[k] + sum;
            } else {
                if (touched < 0) {
                    if (f.op == LAC_MAP_MEAN) touched = wsum != (V)0;
                    else if (f.op == LAC_MAP_COUNT) touched = sum != (V)0 || empty_is_zero;
                    else touched = 1;
                }
                out = !touched ? (V)f.empty_value : f.op == LAC_MAP_MEAN ? sum / wsum : sum;
            }
        } else {
            A key = acc[0];
            bool touched = key != kind_identity<A, KIND>();
            V x = key == kind_nan_key<A, KIND>() ? (V)NAN : key_value(key, (V)0);
            if (!f.accumulate) {
                out = touched ? x : (V)f.empty_value;
            } else if (!touched) {
                out = T[k];
            } else {
                V old = T[k];
                /* NaN on either side wins, as in the CPU backend. */
                if (isnan(old) || isnan(x)) out = isnan(old) ? old : x;
                else out = KIND == MAP_KIND_MIN ? (x < old ? x : old) : (x > old ? x : old);
            }
        }
        T[k] = out;
    }
}

/* ------------------------------------------------------------------------ */
/* Launches                                                                  */
/* ------------------------------------------------------------------------ */
template <class V, class I, int KIND> static const void *reduce_kernel_for()
{
    return reinterpret_cast<const void *>(&map_reduce_kernel<V, I, KIND>);
}

const void *lac_map_pick_reduce_kernel(lac_dtype value, lac_dtype index, map_kind kind)
{
#define LAC_PICK(V, I)                                                                                \
    switch (kind) {                                                                                   \
    case MAP_KIND_ADD: return reduce_kernel_for<V, I, MAP_KIND_ADD>();                                \
    case MAP_KIND_MIN: return reduce_kernel_for<V, I, MAP_KIND_MIN>();                                \
    default: return reduce_kernel_for<V, I, MAP_KIND_MAX>();                                          \
    }
    if (value == LAC_FLOAT32) {
        if (index == LAC_INT32) LAC_PICK(float, int32_t) else LAC_PICK(float, int64_t)
    } else {
        if (index == LAC_INT32) LAC_PICK(double, int32_t) else LAC_PICK(double, int64_t)
    }
#undef LAC_PICK
}

template <class V, class I> static const void *sum_kernel_for(int mode)
{
    switch (mode) {
    case 0: return reinterpret_cast<const void *>(&map_sum_private_kernel<V, I, 0>);
    case 1: return reinterpret_cast<const void *>(&map_sum_private_kernel<V, I, 1>);
    case 2: return reinterpret_cast<const void *>(&map_sum_private_kernel<V, I, 2>);
    case 3: return reinterpret_cast<const void *>(&map_sum_private_kernel<V, I, 3>);
    default: return reinterpret_cast<const void *>(&map_sum_private_kernel<V, I, 4>);
    }
}

const void *lac_map_pick_sum_kernel(lac_dtype value, lac_dtype index, int mode)
{
    if (value == LAC_FLOAT32) return index == LAC_INT32 ? sum_kernel_for<float, int32_t>(mode) : sum_kernel_for<float, int64_t>(mode);
    return index == LAC_INT32 ? sum_kernel_for<double, int32_t>(mode) : sum_kernel_for<double, int64_t>(mode);
}

extern "C" lac_status lac_map_scratch_init(lac_ctx_t ctx, const map_layout *L, void *scratch, int64_t slots,
                                       unsigned long long *fault)
{
    cudaStream_t st = ctx->cuda->stream;
    /* Identities are byte patterns: 0 for sums and MAX keys, all-ones for MIN. */
    int pattern = L->kind == MAP_KIND_MIN ? 0xFF : 0;
    if (slots > 0 && scratch)
        LAC_CUDA_CHECK(ctx, cudaMemsetAsync(scratch, pattern, (size_t)L->arrays * (size_t)slots * L->acc_size, st));
    LAC_CUDA_CHECK(ctx, cudaMemsetAsync(fault, 0xFF, sizeof *fault, st));
    return LAC_SUCCESS;
}


extern "C" lac_status lac_map_reduce_launch(lac_ctx_t ctx, const map_strategy *s, const map_reduce_args *args)
{
    if (args->rows <= 0) return LAC_SUCCESS;
    const void *kernel = lac_map_pick_reduce_kernel(args->value_dtype, args->index_dtype, args->layout.kind);
    reduce_geometry g;
    g.cluster_size = s->cluster_size;
    g.clusters = s->clusters;
    g.copies = s->copies > 0 ? s->copies : 1;
    g.capacity = (unsigned int)s->capacity;
    g.slice = (unsigned int)s->slice;
    g.pitch = (unsigned int)s->pitch;
    g.inv_slice = s->slice > 0 ? 1.0f / (float)s->slice : 0.0f;
    int vectorised = args->b == 1 && lac_map_aligned16(args->source) && lac_map_aligned16(args->bridge) &&
                     (!args->weights || lac_map_aligned16(args->weights));

    const map_layout *L = &args->layout;
    bool simple = lac_map_simple_sum(L, args->op, args->nan_policy, args->b) && vectorised && s->cluster_size == 1 &&
                  (s->capacity == args->n || s->capacity == 0);
    if (simple) {
        cudaStream_t st = ctx->cuda->stream;
        /* Sampling for hot targets pays where their atomics go to L2 (many
         * targets). With the target privatised, the block's private copies
         * (lane % copies) already spread a hot target's lanes, and a sample
         * costs more than it saves (bench/RESULTS.md). Small inputs:
         * too few rows for contention to matter. */
        int sample = s->capacity == 0 && args->rows >= 16 * (int64_t)MAP_HOT_SAMPLES;
        int mode = (args->op == LAC_MAP_COUNT ? 2 : 0) + (args->weights ? 1 : 0);
        const void *fast = lac_map_pick_sum_kernel(args->value_dtype, args->index_dtype, mode);
        LAC_CHECK(lac_map_prepare_kernel(ctx, fast));
        const bool privatised = s->capacity == args->n;
        int copies = s->copies > 0 ? s->copies : 1;
        unsigned int pitch = (unsigned int)s->pitch;
        size_t smem = privatised ? s->smem_bytes : lac_map_hot_bytes(lac_dtype_size(args->value_dtype), s->block);
        /* Global mode: two blocks per SM keep enough loads in flight. */
        int64_t grid = privatised ? s->clusters : (s->clusters < 2 * ctx->cuda->prop.multiProcessorCount ? s->clusters : 2 * ctx->cuda->prop.multiProcessorCount);
        const void *S = args->source, *R = args->bridge, *W = args->weights;
        int64_t rows = args->rows, row0 = args->row0, n = args->n;
        void *partials = privatised ? args->partials : NULL;
        void *scratch = args->scratch;
        int fresh = args->partials_fresh;
        unsigned long long *fault = args->fault;
        void *params[] = {&S, &R, &W, &rows, &row0, &n, &partials, &fresh, &copies, &pitch, &fault, &scratch, &sample};
        LAC_CUDA_CHECK(ctx, cudaLaunchKernel(fast, dim3((unsigned int)grid), dim3(s->block), params, smem, st));
        LAC_CUDA_CHECK_LAUNCH(ctx);
        return LAC_SUCCESS;
    }

    LAC_CHECK(lac_map_prepare_kernel(ctx, kernel));
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = s->cluster_size;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    cfg.gridDim = dim3((unsigned int)(s->clusters * s->cluster_size));
    cfg.blockDim = dim3(s->block);
    cfg.dynamicSmemBytes = s->smem_bytes;
    cfg.stream = ctx->cuda->stream;
    cfg.attrs = attr;
    cfg.numAttrs = s->cluster_size > 1 ? 1 : 0;
    map_reduce_args a = *args;
    void *params[] = {&a, &g, &vectorised};
    LAC_CUDA_CHECK(ctx, cudaLaunchKernelExC(&cfg, kernel, params));
    LAC_CUDA_CHECK_LAUNCH(ctx);
    return LAC_SUCCESS;
}

extern "C" lac_status lac_map_finalize_launch(lac_ctx_t ctx, const map_finalize_args *f)
{
    if (f->slots <= 0) return LAC_SUCCESS;
    int block = 256;
    int64_t want = (f->slots + block - 1) / block;
    int64_t cap = (int64_t)ctx->cuda->prop.multiProcessorCount * 8;
    unsigned int grid = (unsigned int)(want < cap ? want : cap);
    cudaStream_t st = ctx->cuda->stream;
    map_finalize_args a = *f;
    if (f->value_dtype == LAC_FLOAT32) {
        if (f->layout.kind == MAP_KIND_ADD) map_finalize_kernel<float, MAP_KIND_ADD><<<grid, block, 0, st>>>(a);
        else if (f->layout.kind == MAP_KIND_MIN) map_finalize_kernel<float, MAP_KIND_MIN><<<grid, block, 0, st>>>(a);
        else map_finalize_kernel<float, MAP_KIND_MAX><<<grid, block, 0, st>>>(a);
    } else {
        if (f->layout.kind == MAP_KIND_ADD) map_finalize_kernel<double, MAP_KIND_ADD><<<grid, block, 0, st>>>(a);
        else if (f->layout.kind == MAP_KIND_MIN) map_finalize_kernel<double, MAP_KIND_MIN><<<grid, block, 0, st>>>(a);
        else map_finalize_kernel<double, MAP_KIND_MAX><<<grid, block, 0, st>>>(a);
    }
    LAC_CUDA_CHECK_LAUNCH(ctx);
    return LAC_SUCCESS;
}

/* ------------------------------------------------------------------------ */
/* Whole accumulators, for a call split across devices (map_multi.cu)        */
/* ------------------------------------------------------------------------ */
/* out[j, k] = scratch[j, k] (identity when NULL) combined with the private
 * copies' partials: one device's part of the call, before any finalise. */
template <class A, int KIND> __global__ void map_fold_kernel(map_finalize_args f, A *out)
{
    const A *scratch = reinterpret_cast<const A *>(f.scratch);
    const A *partials = reinterpret_cast<const A *>(f.partials);
    for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < f.slots; k += (int64_t)gridDim.x * blockDim.x)
        for (int j = 0; j < f.layout.arrays; j++) {
            A v = scratch ? scratch[(size_t)j * f.slots + k] : kind_identity<A, KIND>();
            if (k < f.capacity)
                for (int c = 0; c < f.clusters; c++)
                    v = kind_combine<KIND>(v, partials[((size_t)j * f.clusters + c) * f.capacity + k]);
            out[(size_t)j * f.slots + k] = v;
        }
}

/* acc = acc combined with other, element by element (count elements). */
template <class A, int KIND> __global__ void map_combine_kernel(A *acc, const A *other, int64_t count)
{
    for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < count; k += (int64_t)gridDim.x * blockDim.x)
        acc[k] = kind_combine<KIND>(acc[k], other[k]);
}

static unsigned int elementwise_grid(lac_ctx_t ctx, int64_t count, int block)
{
    int64_t want = (count + block - 1) / block, cap = (int64_t)ctx->cuda->prop.multiProcessorCount * 8;
    return (unsigned int)(want < cap ? (want > 0 ? want : 1) : cap);
}

/* The accumulator type of a layout: the value type for sums, the key type
 * (as wide as the value) for MIN / MAX. */
#define LAC_MAP_BY_KIND(L, vt, CALL)                                                                    \
    do {                                                                                                \
        if ((L)->kind == MAP_KIND_ADD) {                                                                \
            if ((vt) == LAC_FLOAT32) CALL(float, MAP_KIND_ADD);                                         \
            else CALL(double, MAP_KIND_ADD);                                                            \
        } else if ((L)->kind == MAP_KIND_MIN) {                                                         \
            if ((vt) == LAC_FLOAT32) CALL(unsigned int, MAP_KIND_MIN);                                  \
            else CALL(unsigned long long, MAP_KIND_MIN);                                                \
        } else {                                                                                        \
            if ((vt) == LAC_FLOAT32) CALL(unsigned int, MAP_KIND_MAX);                                  \
            else CALL(unsigned long long, MAP_KIND_MAX);                                                \
        }                                                                                               \
    } while (0)

extern "C" lac_status lac_map_fold_launch(lac_ctx_t ctx, const map_finalize_args *f, void *out)
{
    if (f->slots <= 0) return LAC_SUCCESS;
    const int block = 256;
    const unsigned int grid = elementwise_grid(ctx, f->slots, block);
    cudaStream_t st = ctx->cuda->stream;
    map_finalize_args a = *f;
#define LAC_FOLD(A, KIND) map_fold_kernel<A, KIND><<<grid, block, 0, st>>>(a, reinterpret_cast<A *>(out))
    LAC_MAP_BY_KIND(&f->layout, f->value_dtype, LAC_FOLD);
#undef LAC_FOLD
    LAC_CUDA_CHECK_LAUNCH(ctx);
    return LAC_SUCCESS;
}

extern "C" lac_status lac_map_combine_launch(lac_ctx_t ctx, const map_layout *L, lac_dtype value_dtype, int64_t slots,
                                             void *acc, const void *other)
{
    const int64_t count = (int64_t)L->arrays * slots;
    if (count <= 0) return LAC_SUCCESS;
    const int block = 256;
    const unsigned int grid = elementwise_grid(ctx, count, block);
    cudaStream_t st = ctx->cuda->stream;
#define LAC_COMBINE(A, KIND) \
    map_combine_kernel<A, KIND><<<grid, block, 0, st>>>(reinterpret_cast<A *>(acc), reinterpret_cast<const A *>(other), count)
    LAC_MAP_BY_KIND(L, value_dtype, LAC_COMBINE);
#undef LAC_COMBINE
    LAC_CUDA_CHECK_LAUNCH(ctx);
    return LAC_SUCCESS;
}
