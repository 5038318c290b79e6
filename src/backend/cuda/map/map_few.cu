/* map on the CUDA backend: the few-target one-shot sum in a single launch.
 *
 * SUM, COUNT or weighted MEAN (NaN propagated, one column, aligned device
 * arrays) into a target that fits one block's shared memory: the case the
 * issue's "few targets" rows measure. A weighted MEAN keeps sum w in a twin
 * of every accumulator; the twins start at -0.0 and add w + 0.0, so one still
 * at -0.0 had no row (as the CPU backend's; LACUNA_MAP_CUDA_MEAN_MARK=0: a hit
 * byte per target, a plain store a row). One cooperative launch does
 * everything a call needs:
 *  0. each block asks L2 for the rows of its first steps (bulk prefetch), so
 *     that DRAM works while the block sets up its shared memory;
 *  1. each block counts the bridge entries of its own first two steps
 *     (FEW_SAMPLE_ROWS, rows it reads anyway) and sorts the targets
 *     it saw often into "hot" (a share of 1/64 or more, at most FEW_HOT) and
 *     "warm" (1/512 or more, at most FEW_WARM). A hot target's rows add into
 *     the thread's own column of accumulators (found through a byte index per
 *     target; no atomic at all; in registers, compared one by one, where the
 *     columns do not fit), a warm target's into the lane's own
 *     accumulator: the lanes of a warp that meet on one target of a skewed
 *     bridge never share an address, which is what serialises shared-memory
 *     atomics (Zipf(1.1) puts ~15% of the rows on one target);
 *  2. the other rows go to the block's private copy of the target in shared
 *     memory (one copy where the warm area is there; else up to 4, lane l
 *     updating copy l % copies), 16-byte streaming loads with the next step's
 *     loads issued before this step's atomics;
 *  3. each block writes its copy as one partials row; a grid barrier; each
 *     block then sums one slice of the targets over all partials rows and
 *     writes T, unless a row was flagged (bad index): then T stays untouched.
 *     A single block (small calls) writes T from its copy directly.
 * The fault flag is one of the context's two device words (lac_map_fault_pair),
 * and block 0 resets the other for the next call, so the call needs no memset
 * and no second kernel: one launch and one synchronisation, which is what the
 * fixed cost of a small call is made of. */
#include "backend/cuda/map/map_cuda.cuh"
#include "backend/cuda/map/map_device.cuh"

#include <cooperative_groups.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

namespace cg = cooperative_groups;

#define FEW_BLOCK 1024
#define FEW_HOT 8                 /* hot targets a thread keeps in registers */
#define FEW_SAMPLE_ROWS 8192      /* bridge entries each block samples (32 KB of int32) */
#define FEW_SHARE_LOG2 6          /* "hot": at least 1/64 of the sample (a uniform bridge
                                     over 10k targets puts ~1 row of 8192 on each) */
#define FEW_COPIES_MAX 4
#define FEW_WARM 64               /* "warm" targets (share 1/512 or more, not hot) with
                                     per-lane accumulators in shared memory: the lanes of
                                     a warp that meet on one never share an address */
#define FEW_WARM_SHARE_LOG2 9
#define FEW_PREFETCH_STEPS 4      /* steps of its own rows each block asks into L2 first */

typedef struct {
    const void *source, *bridge, *weights;
    int64_t rows, n;
    void *partials;               /* grid x n values */
    void *target;
    unsigned long long *fault;    /* this call's flag (MAP_NO_FAULT on entry) */
    unsigned long long *next_fault; /* reset here for the next call, or NULL */
    unsigned long long *report;   /* mapped host word, or NULL */
    double empty_value;
    unsigned int pitch;           /* values between two private copies */
    int copies;                   /* private copies per block, a power of two */
    int accumulate;
    int hot_cap;                  /* hot keys a block may keep (<= few_hot_max) */
    int warm_cap;                 /* warm keys a block may keep (<= FEW_WARM; 0: no warm area) */
    int hot_table;                /* 1: hot keys through the index into per-thread columns, not registers */
    unsigned int warm_offset;     /* bytes from the start of dynamic shared memory to the warm area */
    int prefetch_steps;           /* this block's first steps of R/S/w asked into L2 at the start */
    int select;                   /* table mode: one atomic at a selected address, not three paths */
    int prefetch_roll;            /* 1: keep prefetching prefetch_steps ahead through the rows */
    unsigned int index_offset;    /* bytes to the warm index (a byte per target) */
    unsigned int twin;            /* weighted MEAN: values from each accumulator to its weight's twin */
    unsigned int hit_offset;      /* weighted MEAN: bytes to the hit flags (a byte per target) */
    int mark;                     /* weighted MEAN: weight sums start at -0.0 and add w + 0.0 (never
                                     -0.0), so -0.0 tells an untouched target: no hit byte a row */
    unsigned long long *sticky;   /* deferred report (map_deferred), or NULL */
    unsigned long long tag;
} few_args;

/* Asks `bytes` (a multiple of 16) at p (16-byte aligned) into L2. */
__device__ __forceinline__ void few_prefetch_l2(const void *p, unsigned int bytes)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
#else
    (void)p, (void)bytes;
#endif
}

/* Hot keys kept in registers, at most: registers are few at 1024 threads. */
template <class V, class I> __host__ __device__ constexpr int few_hot_max()
{
    return sizeof(V) == 4 && sizeof(I) == 4 ? FEW_HOT : FEW_HOT / 2;
}

/* The rows of one block: one vector of 4 rows per lane and step, the next
 * step's loads issued before this step's updates. An element whose target is
 * one of the block's H hot keys adds into this thread's register for it, one
 * of its warm keys into its warp's accumulator for it; any other goes to the
 * lane's private copy in shared memory. */
template <class V, class I, int MODE, int H, bool TABLE, bool SELECT = false, bool MEAN = MODE == 4>
__device__ __forceinline__ void few_rows(const few_args &a, V *priv, const unsigned int *hot_keys, unsigned int nhot,
                                         V *warm_acc, const unsigned char *warm_index, unsigned int nwarm, V *hot_cols)
{
    const unsigned int tid = threadIdx.x, bd = blockDim.x;
    const int lane = tid & 31;
    const int64_t rows = a.rows;
    const unsigned long long un = (unsigned long long)a.n;
    const V *S = reinterpret_cast<const V *>(a.source);
    const I *R = reinterpret_cast<const I *>(a.bridge);
    const V *W = reinterpret_cast<const V *>(a.weights);
    /* Keys fit 32 bits here (n <= INT32_MAX / 4); 0xFFFFFFFF matches no key. */
    unsigned int hk[H > 0 ? H : 1];
    V hacc[H > 0 ? H : 1], hacc2[MEAN && H > 0 ? H : 1];
#pragma unroll
    for (int j = 0; j < H; j++) {
        hk[j] = j < (int)nhot ? hot_keys[j] : 0xFFFFFFFFu;
        hacc[j] = (V)0;
        if (MEAN) hacc2[j] = a.mark ? -(V)0 : (V)0;
    }
    V *mine = priv + (size_t)(lane & (a.copies - 1)) * a.pitch;
    unsigned char *hit = reinterpret_cast<unsigned char *>(priv) + a.hit_offset;
    const unsigned int twin = a.twin;
    /* Weighted MEAN (MEAN): x = w S at an accumulator, y = w at its twin. */
    auto add = [&](V *at, V x, V y) {
        atomicAdd(at, x);
        if (MEAN) atomicAdd(at + twin, y);
    };
    auto put = [&](unsigned long long key, V x, V y, int64_t row) {
        if (key >= un) {
            flag_fault(a.fault, (unsigned long long)row);
            return;
        }
        if (MEAN && !a.mark) hit[key] = 1;   /* a plain store: every writer writes 1 */
        bool hot = false;
#pragma unroll
        for (int j = 0; j < H; j++)
            if ((unsigned int)key == hk[j]) {
                hacc[j] += x;
                if (MEAN) hacc2[j] += y;
                hot = true;
            }
        if (hot) return;
        if (TABLE && SELECT) {   /* one atomic at a selected address: no divergent paths in the warp */
            const unsigned int wi = warm_index[key];
            V *at = wi == 0 ? mine + key
                    : wi <= nhot ? hot_cols + (wi - 1) * FEW_BLOCK + tid   /* hot: this thread's own column */
                                 : warm_acc + (wi - 1 - nhot) * 32 + lane; /* warm: this lane's accumulator */
            add(at, x, y);
            return;
        } else if (TABLE) {   /* hot: this thread's own column, no atomic; warm: this lane's accumulator */
            unsigned int wi = warm_index[key];
            if (wi && wi <= nhot) {
                V *at = hot_cols + (wi - 1) * FEW_BLOCK + tid;
                *at += x;
                if (MEAN) at[twin] += y;
                return;
            }
            if (wi) {
                add(warm_acc + (wi - 1 - nhot) * 32 + lane, x, y);
                return;
            }
        } else if (nwarm) {   /* a warm key: this lane's own accumulator, no other lane of its warp meets it */
            unsigned int wi = warm_index[key];
            if (wi) {
                add(warm_acc + (wi - 1) * 32 + lane, x, y);
                return;
            }
        }
        add(mine + key, x, y);
    };
    const int64_t step = (int64_t)gridDim.x * bd;   /* vectors per step, grid-wide */
    const int64_t nvec = rows / 4;
    V s[4] = {}, w[4] = {};
    I r[4] = {};
    auto load = [&](int64_t v) {
        load4(R + 4 * v, r);
        if (MODE < 2 || MEAN) load4(S + 4 * v, s);
        if ((MODE & 1) || MEAN) load4(W + 4 * v, w);
    };
    int64_t v = (int64_t)blockIdx.x * bd + tid;
    if (v < nvec) load(v);
    /* Rolling L2 prefetch (a.prefetch_roll): at step k, thread 0 asks for the
     * block's rows of step k + prefetch_steps, so that more bytes are in
     * flight than the registers of one step hold. */
    int64_t ahead_row = 4 * ((int64_t)blockIdx.x * bd + (int64_t)a.prefetch_steps * step);
    for (; v < nvec; v += step) {
        V cs[4], cw[4];
        I cr[4];
#pragma unroll
        for (int q = 0; q < 4; q++) cs[q] = s[q], cw[q] = w[q], cr[q] = r[q];
        if (v + step < nvec) load(v + step);   /* in flight while this step's atomics run */
        if (a.prefetch_roll && tid == 0) {
            const int64_t len = 4 * nvec - ahead_row < 4 * (int64_t)bd ? 4 * nvec - ahead_row : 4 * (int64_t)bd;
            if (len > 0) {
                few_prefetch_l2(R + ahead_row, (unsigned int)(len * sizeof(I)));
                if (MODE < 2 || MEAN) few_prefetch_l2(S + ahead_row, (unsigned int)(len * sizeof(V)));
                if ((MODE & 1) || MEAN) few_prefetch_l2(W + ahead_row, (unsigned int)(len * sizeof(V)));
            }
            ahead_row += 4 * step;
        }
#pragma unroll
        for (int q = 0; q < 4; q++) {
            V x = MODE == 0 ? cs[q] : MODE == 1 || MEAN ? cw[q] * cs[q] : MODE == 2 ? (V)1 : cw[q];
            put((unsigned long long)(int64_t)cr[q], x, MEAN && a.mark ? cw[q] + (V)0 : cw[q], 4 * v + q);
        }
    }
    for (int64_t row = nvec * 4 + (int64_t)blockIdx.x * bd + tid; row < rows; row += (int64_t)gridDim.x * bd) {
        V x = MODE == 0 ? S[row] : MODE == 1 || MEAN ? W[row] * S[row] : MODE == 2 ? (V)1 : W[row];
        put((unsigned long long)(int64_t)R[row], x, MEAN ? (a.mark ? W[row] + (V)0 : W[row]) : (V)0, row);
    }
    /* The registers: one warp sum per hot key into copy 0. */
#pragma unroll
    for (int j = 0; j < H; j++) {
        if (j >= (int)nhot) break;
        V x = hacc[j], y = MEAN ? hacc2[j] : (V)0;
        for (int off = 16; off > 0; off >>= 1) {
            x += __shfl_xor_sync(0xFFFFFFFFu, x, off);
            if (MEAN) y += __shfl_xor_sync(0xFFFFFFFFu, y, off);
        }
        if (lane == 0) add(priv + hk[j], x, y);
    }
}

/* MODE: 0 sum, 1 weighted sum, 2 count, 3 weighted count, 4 weighted mean
 * (sum w S and sum w in twin accumulators, a hit byte per target). */
template <class V, class I, int MODE> __global__ void __launch_bounds__(FEW_BLOCK, 1) map_few_kernel(few_args a)
{
    constexpr bool MEAN = MODE == 4;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    __shared__ unsigned int hot_keys[FEW_HOT];
    __shared__ unsigned int hot_found;
    __shared__ unsigned int warm_keys[FEW_WARM];
    __shared__ V red[FEW_BLOCK];
    __shared__ V red2[MEAN ? FEW_BLOCK : 1];
    __shared__ unsigned char redh[MEAN ? FEW_BLOCK : 1];
    V *priv = reinterpret_cast<V *>(smem_raw);
    unsigned int *counts = reinterpret_cast<unsigned int *>(smem_raw);   /* the sample, before priv is used */
    const unsigned int tid = threadIdx.x, bd = blockDim.x;
    const int64_t n = a.n, rows = a.rows;
    const unsigned long long un = (unsigned long long)n;
    const I *R = reinterpret_cast<const I *>(a.bridge);

    if (blockIdx.x == 0 && tid == 0 && a.next_fault) *a.next_fault = MAP_NO_FAULT;

    /* The block's own rows of step s are [own0 + s * step_rows, + 4 bd). The
     * first prefetch_steps of them are asked into L2 now (one bulk prefetch
     * per array and step), so that DRAM is busy while the block samples and
     * zeroes its shared memory below, instead of idle until the first loads. */
    const int64_t step_rows = 4 * (int64_t)gridDim.x * bd, own0 = 4 * (int64_t)blockIdx.x * bd;
    if (tid < (unsigned int)a.prefetch_steps) {
        const int64_t lo = own0 + (int64_t)tid * step_rows, whole = rows / 4 * 4;
        const int64_t len = whole - lo < 4 * (int64_t)bd ? whole - lo : 4 * (int64_t)bd;
        if (len > 0) {
            few_prefetch_l2(R + lo, (unsigned int)(len * sizeof(I)));
            if (MODE < 2 || MEAN) few_prefetch_l2(reinterpret_cast<const V *>(a.source) + lo, (unsigned int)(len * sizeof(V)));
            if ((MODE & 1) || MEAN) few_prefetch_l2(reinterpret_cast<const V *>(a.weights) + lo, (unsigned int)(len * sizeof(V)));
        }
    }

    /* 1. Hot targets: count the bridge entries of this block's first two
     * steps (a skewed bridge's hot targets show in any stretch of it; these
     * rows the block reads anyway, so the sample adds no DRAM traffic).
     * Shared memory is zeroed and scanned 16 bytes at a time (the counts of
     * keys n..n4*4 stay 0, below every bar): the block's set-up runs before
     * its first row, so its length is paid in full. */
    uint4 *counts4 = reinterpret_cast<uint4 *>(smem_raw);
    const int64_t n4 = (n + 3) / 4;
    for (int64_t t = tid; t < n4; t += bd) counts4[t] = make_uint4(0u, 0u, 0u, 0u);
    if (tid == 0) hot_found = 0;
    __syncthreads();
    int64_t sampled = 0;
    for (int s = 0; s < FEW_SAMPLE_ROWS / (4 * FEW_BLOCK) && a.hot_cap > 0; s++) {
        const int64_t lo = own0 + s * step_rows;
        const int64_t len = rows - lo < 4 * (int64_t)bd ? rows - lo : 4 * (int64_t)bd;
        if (len <= 0) break;
        for (int64_t j = tid; j < len; j += bd) {
            unsigned long long key = (unsigned long long)(int64_t)R[lo + j];
            if (key < un) atomicAdd(&counts[key], 1u);
        }
        sampled += len;
    }
    __syncthreads();
    unsigned int threshold = (unsigned int)(sampled >> FEW_SHARE_LOG2);
    if (threshold < 8) threshold = 8;
    unsigned int nhot = 0;
    if (sampled >= 8) {
        for (;;) {   /* raise the bar until at most hot_cap remain */
            for (int64_t t = tid; t < n4; t += bd) {
                const uint4 c4 = counts4[t];
                const unsigned int c[4] = {c4.x, c4.y, c4.z, c4.w};
#pragma unroll
                for (int q = 0; q < 4; q++)
                    if (c[q] >= threshold) {
                        unsigned int i = atomicAdd(&hot_found, 1u);
                        if (i < FEW_HOT) hot_keys[i] = (unsigned int)(4 * t + q);
                    }
            }
            __syncthreads();
            nhot = hot_found;
            __syncthreads();
            if (nhot <= (unsigned int)a.hot_cap) break;
            if (tid == 0) hot_found = 0;
            threshold *= 2;
            __syncthreads();
        }
    }
    /* Warm keys: a share of 1/512 or more, below the hot ones' bar. */
    unsigned int nwarm = 0;
    V *hot_cols = reinterpret_cast<V *>(smem_raw + a.warm_offset);   /* FEW_HOT x FEW_BLOCK, table mode */
    V *warm_acc = hot_cols + (a.hot_table ? FEW_HOT * FEW_BLOCK : 0);
    unsigned char *warm_index = smem_raw + a.index_offset;
    if (sampled >= 8 && a.warm_cap > 0) {
        unsigned int bar = (unsigned int)(sampled >> FEW_WARM_SHARE_LOG2);
        if (bar < 8) bar = 8;
        if (tid == 0) hot_found = 0;
        __syncthreads();
        while (bar < threshold) {
            for (int64_t t = tid; t < n4; t += bd) {
                const uint4 c4 = counts4[t];
                const unsigned int c[4] = {c4.x, c4.y, c4.z, c4.w};
#pragma unroll
                for (int q = 0; q < 4; q++)
                    if (c[q] >= bar && c[q] < threshold) {
                        unsigned int i = atomicAdd(&hot_found, 1u);
                        if (i < FEW_WARM) warm_keys[i] = (unsigned int)(4 * t + q);
                    }
            }
            __syncthreads();
            nwarm = hot_found;
            __syncthreads();
            if (nwarm <= (unsigned int)a.warm_cap) break;
            nwarm = 0;
            if (tid == 0) hot_found = 0;
            bar *= 2;
            __syncthreads();
        }
    }
    const bool table = a.hot_table && (nhot || nwarm);
    {   /* the private copies, and behind them (contiguous) the hot columns, the
         * warm accumulators and the index when they are used */
        const size_t bytes = MEAN ? (size_t)a.hit_offset + ((size_t)n + 15) / 16 * 16
                             : nwarm || table ? (size_t)a.index_offset + ((size_t)n + 15) / 16 * 16 : a.warm_offset;
        uint4 *z = reinterpret_cast<uint4 *>(smem_raw);
        for (size_t t = tid; t < bytes / 16; t += bd) z[t] = make_uint4(0u, 0u, 0u, 0u);
        if constexpr (MEAN) {   /* with mark, the twin (weight) area starts at -0.0: its sign bits set */
            if (a.mark) {
                __syncthreads();
                const size_t twin0 = (size_t)a.twin * sizeof(V) / 16;
                const unsigned int neg = sizeof(V) == 4 ? 0x80000000u : 0u;
                for (size_t t = twin0 + tid; t < 2 * twin0; t += bd) z[t] = make_uint4(neg, 0x80000000u, neg, 0x80000000u);
            }
        }
    }
    if (nwarm || table) {
        __syncthreads();
        const unsigned int first_warm = table ? nhot : 0;   /* index codes: hot keys first in table mode */
        if (table && tid < nhot) warm_index[hot_keys[tid]] = (unsigned char)(tid + 1);
        if (tid < nwarm) warm_index[warm_keys[tid]] = (unsigned char)(first_warm + tid + 1);
    }
    __syncthreads();

    /* 2. The rows, with as many hot-key registers as this block found (the
     * choice is the same for the whole block). */
    if (table && a.select) few_rows<V, I, MODE, 0, true, true>(a, priv, hot_keys, nhot, warm_acc, warm_index, nwarm, hot_cols);
    else if (table) few_rows<V, I, MODE, 0, true>(a, priv, hot_keys, nhot, warm_acc, warm_index, nwarm, hot_cols);
    else if (nhot == 0) few_rows<V, I, MODE, 0, false>(a, priv, hot_keys, 0, warm_acc, warm_index, nwarm, hot_cols);
    else if (nhot <= 2) few_rows<V, I, MODE, 2, false>(a, priv, hot_keys, nhot, warm_acc, warm_index, nwarm, hot_cols);
    else if (nhot <= 4) few_rows<V, I, MODE, 4, false>(a, priv, hot_keys, nhot, warm_acc, warm_index, nwarm, hot_cols);
    else few_rows<V, I, MODE, MEAN ? FEW_HOT / 2 : few_hot_max<V, I>(), false>(a, priv, hot_keys, nhot, warm_acc, warm_index, nwarm, hot_cols);
    __syncthreads();
    /* Hot columns (table mode): one warp per key sums the block's threads' parts. */
    const unsigned int twin = a.twin;
    auto fold = [&](V x, V y, unsigned int key) {   /* a warp's sum into copy 0 (and its twin) */
        for (int off = 16; off > 0; off >>= 1) {
            x += __shfl_xor_sync(0xFFFFFFFFu, x, off);
            if (MEAN) y += __shfl_xor_sync(0xFFFFFFFFu, y, off);
        }
        if ((tid & 31) == 0) {
            atomicAdd(priv + key, x);
            if (MEAN) atomicAdd(priv + twin + key, y);
        }
    };
    if (table)
        for (unsigned int h = tid >> 5; h < nhot; h += bd >> 5) {
            V x = (V)0, y = (V)0;
            for (unsigned int t = tid & 31; t < FEW_BLOCK; t += 32) {
                x += hot_cols[h * FEW_BLOCK + t];
                if (MEAN) y += hot_cols[twin + h * FEW_BLOCK + t];
            }
            fold(x, y, hot_keys[h]);
        }
    /* Warm accumulators: one warp per key sums the 32 lanes' parts into copy 0. */
    for (unsigned int h = tid >> 5; h < nwarm; h += bd >> 5)
        fold(warm_acc[h * 32 + (tid & 31)], MEAN ? warm_acc[twin + h * 32 + (tid & 31)] : (V)0, warm_keys[h]);
    __syncthreads();

    /* 3. T from the private copies: one block writes it directly; several
     * write a partials row each and, after a grid barrier, each sums one
     * slice of the targets over all rows. T is written only if no row was
     * flagged (bad index): else it stays as it was. */
    const bool empty_is_zero = a.empty_value == 0.0 && !signbit(a.empty_value);
    V *T = reinterpret_cast<V *>(a.target);
    /* The rules of map_finalize_kernel for one target (weighted MEAN: its
     * weight sum and whether any row hit it). */
    auto finish = [&](int64_t k, V sum, V wsum, bool hit) {
        if (a.accumulate) T[k] = T[k] + sum;
        else if (MEAN) T[k] = hit ? sum / wsum : (V)a.empty_value;
        else if (MODE >= 2) T[k] = sum != (V)0 || empty_is_zero ? sum : (V)a.empty_value;
        else T[k] = sum;
    };
    const unsigned char *hit = smem_raw + a.hit_offset;
    /* With mark, a weight sum that is still -0.0 had nothing mapped to it. */
    auto marked = [&](V w) { return !(w == (V)0 && signbit(w)); };
    const int G = (int)gridDim.x;
    V *P = reinterpret_cast<V *>(a.partials);
    V *P2 = P + (size_t)G * n;                                           /* weighted MEAN: weight sums */
    unsigned char *PH = reinterpret_cast<unsigned char *>(P2 + (size_t)G * n);   /* and hits */
    auto copies_sum = [&](const V *c0, int64_t t) {
        V v = c0[t];
        for (int c = 1; c < a.copies; c++) v += c0[(size_t)c * a.pitch + t];
        return v;
    };
    /* A target's sum and (weighted MEAN) weight sum over the copies. */
    auto own_sum = [&](int64_t t) { return copies_sum(priv, t); };
    auto own_wsum = [&](int64_t t) { return MEAN ? copies_sum(priv + twin, t) : (V)0; };
    if (G > 1) {
        V *out = P + (size_t)blockIdx.x * n;
        for (int64_t t = tid; t < n; t += bd) {
            out[t] = own_sum(t);
            if (MEAN) {
                P2[(size_t)blockIdx.x * n + t] = own_wsum(t);
                if (!a.mark) PH[(size_t)blockIdx.x * n + t] = hit[t];
            }
        }
        __threadfence();
        cg::this_grid().sync();
    } else {
        __threadfence();
        __syncthreads();
    }
    const unsigned long long fault = *(volatile unsigned long long *)a.fault;
    if (blockIdx.x == 0 && tid == 0 && a.report) *(volatile unsigned long long *)a.report = fault;
    if (blockIdx.x == 0 && tid == 0 && a.sticky && fault != MAP_NO_FAULT) atomicMin(a.sticky, a.tag | fault);
    if (fault != MAP_NO_FAULT) return;   /* T stays as it was */
    if (G == 1) {
        for (int64_t t = tid; t < n; t += bd) {
            const V ws = own_wsum(t);
            finish(t, own_sum(t), ws, MEAN && (a.mark ? marked(ws) : hit[t] != 0));
        }
        return;
    }
    /* Slice of per targets; a tile of TW of them at a time, RG groups of
     * threads each summing every RG-th partials row (loads unrolled, so that
     * many are in flight), then group 0 adds the groups' sums. */
    const int64_t per = (n + G - 1) / G, s0 = (int64_t)blockIdx.x * per;
    const int64_t s1 = s0 + per < n ? s0 + per : n;
    const int TW = per >= (int64_t)bd ? (int)bd : (int)((per + 31) / 32 * 32);
    const int RG = (int)bd / TW;
    const int group = (int)tid / TW, col = (int)tid % TW;
    for (int64_t base = s0; base < s1; base += TW) {
        const int64_t k = base + col;
        V v = (V)0, wv = MEAN && a.mark ? -(V)0 : (V)0;
        unsigned char hv = 0;
        if (k < s1 && group < RG) {
#pragma unroll 8
            for (int c = group; c < G; c += RG) {
                v += P[(size_t)c * n + k];
                if (MEAN) {
                    wv += P2[(size_t)c * n + k];
                    if (!a.mark) hv |= PH[(size_t)c * n + k];
                }
            }
        }
        red[tid] = v;
        if (MEAN) red2[tid] = wv, redh[tid] = hv;
        __syncthreads();
        if (group == 0 && k < s1) {
            V sum = (V)0, wsum = MEAN && a.mark ? -(V)0 : (V)0;
            bool any = false;
            for (int h = 0; h < RG; h++) {
                sum += red[h * TW + col];
                if (MEAN) wsum += red2[h * TW + col], any |= redh[h * TW + col] != 0;
            }
            if (MEAN && a.mark) any = marked(wsum);
            finish(k, sum, wsum, any);
        }
        __syncthreads();
    }
}

/* ------------------------------------------------------------------------ */
/* Host side                                                                 */
/* ------------------------------------------------------------------------ */
template <class V, class I> static const void *few_kernel_for(int mode)
{
    switch (mode) {
    case 0: return reinterpret_cast<const void *>(&map_few_kernel<V, I, 0>);
    case 1: return reinterpret_cast<const void *>(&map_few_kernel<V, I, 1>);
    case 2: return reinterpret_cast<const void *>(&map_few_kernel<V, I, 2>);
    case 3: return reinterpret_cast<const void *>(&map_few_kernel<V, I, 3>);
    default: return reinterpret_cast<const void *>(&map_few_kernel<V, I, 4>);
    }
}

static const void *pick_few_kernel(lac_dtype value, lac_dtype index, int mode)
{
    if (value == LAC_FLOAT32) return index == LAC_INT32 ? few_kernel_for<float, int32_t>(mode) : few_kernel_for<float, int64_t>(mode);
    return index == LAC_INT32 ? few_kernel_for<double, int32_t>(mode) : few_kernel_for<double, int64_t>(mode);
}

/* Values between two private copies: a multiple of 32 plus one, so that a
 * target's copies fall in different banks. */
static int64_t few_pitch(int64_t n) { return (n + 31) / 32 * 32 + 1; }

static int mode_of(const lac_map_call *call)
{
    if (call->params.op == LAC_MAP_MEAN) return 4;
    return (call->params.op == LAC_MAP_COUNT ? 2 : 0) + (call->weights ? 1 : 0);
}

/* Weighted MEAN of one aligned device column, NaN propagated: two private
 * columns (sum w S, sum w) and a hit byte per target, finalised in the same
 * launch. (An unweighted MEAN needs integer counts: the general path.) */
static bool weighted_mean_call(const lac_map_call *call)
{
    const lac_map_params *p = &call->params;
    return call->memory == LAC_MEM_DEVICE && p->op == LAC_MAP_MEAN && call->weights && p->nan_policy == LAC_NAN_PROPAGATE &&
           call->b == 1 && call->m >= 1 && call->n >= 1 && call->n <= INT32_MAX / 4 && lac_map_aligned16(call->source) &&
           lac_map_aligned16(call->bridge) && lac_map_aligned16(call->weights);
}

extern "C" lac_status lac_map_few_try(lac_ctx_t ctx, const lac_map_call *call, const map_layout *L,
                                      const map_deferred *defer, int *taken)
{
    *taken = 0;
    const lac_map_params *p = &call->params;
    const bool mean = weighted_mean_call(call);
    if (!mean && !lac_map_one_launch_call(call, L)) return LAC_SUCCESS;
    /* Knobs for benchmarks and tests: a forced strategy, or LACUNA_MAP_CUDA_FEW=0,
     * runs the general path instead. */
    const char *force = lac_knob_string(ctx, LAC_KNOB_MAP_CUDA_STRATEGY);
    const char *few = lac_knob_string(ctx, LAC_KNOB_MAP_CUDA_FEW);
    if ((force && *force) || (few && strcmp(few, "0") == 0)) return LAC_SUCCESS;

    const void *kernel = pick_few_kernel(call->value_dtype, call->index_dtype, mode_of(call));
    size_t smem_max = 0;
    int per_sm = 0;
    LAC_CHECK(lac_map_coop_limits(ctx, kernel, MAP_FACT_FEW, FEW_BLOCK, 0, &smem_max, &per_sm));
    const size_t vs = lac_dtype_size(call->value_dtype);
    const int64_t pitch = few_pitch(call->n);
    /* Shared memory: [copies | hot columns | warm accumulators], for a
     * weighted MEAN twice (the weights' twin), then the warm index and the
     * hit bytes (weighted MEAN), a byte per target each. (A float32 pair of
     * sums side by side, added by one 64-bit compare-and-swap, measured
     * slower: 0.305 against 0.227 ms at 40M -> 10k uniform, 0.790 against
     * 0.219 Zipf.) */
    const size_t twins = mean ? 2 : 1, index_bytes = ((size_t)call->n + 15) / 16 * 16;
    const size_t hit_bytes = mean ? index_bytes : 0;
    auto own_bytes = [&](int copies) { return (size_t)copies * pitch * vs; };
    auto fits = [&](size_t own, size_t extra, size_t index) { return twins * (own + extra) + index + hit_bytes <= smem_max; };
    if (!fits(own_bytes(1), 0, 0)) return LAC_SUCCESS;   /* many targets: not this path */
    /* The warm area (per-warp accumulators and an index byte per target),
     * when it fits beside one copy; then as many copies as fit. Knobs for
     * benchmarks: LACUNA_MAP_CUDA_WARM=0, LACUNA_MAP_CUDA_COPIES. */
    const char *warm_knob = lac_knob_string(ctx, LAC_KNOB_MAP_CUDA_WARM);
    size_t warm_bytes = (size_t)FEW_WARM * 32 * vs;   /* of the area (the index apart) */
    if ((warm_knob && strcmp(warm_knob, "0") == 0) || !fits(own_bytes(1), warm_bytes, index_bytes)) warm_bytes = 0;
    const size_t warm_index_bytes = warm_bytes ? index_bytes : 0;
    /* Hot keys through the index into per-thread columns (the default: one
     * byte load a row instead of a compare per hot key, measured 0.144 against
     * 0.149 ms at 40M -> 10k Zipf, 0.150 against 0.160 at 20k), or in
     * registers when that does not fit or LACUNA_MAP_CUDA_HOT_TABLE=0. */
    const char *table_knob = lac_knob_string(ctx, LAC_KNOB_MAP_CUDA_HOT_TABLE);
    int hot_table = !(table_knob && strcmp(table_knob, "0") == 0) && warm_bytes > 0;
    const size_t cols_bytes = (size_t)FEW_HOT * FEW_BLOCK * vs;
    if (hot_table && !fits(own_bytes(1), warm_bytes + cols_bytes, warm_index_bytes)) hot_table = 0;
    if (hot_table) warm_bytes += cols_bytes;
    /* One private copy where the warm area is there: the hot and warm keys
     * (a share of 1/512 or more) then never meet in a warp, and the rest
     * rarely do, so more copies only cost their zeroing and summing
     * (measured 0.138 against 0.151 ms at 40M -> 10k uniform, 0.143 against
     * 0.160 Zipf, 0.144 against 0.152 ms at 20k uniform). Without it, up to
     * FEW_COPIES_MAX spread a skewed bridge's collisions. */
    const char *copies_knob = lac_knob_string(ctx, LAC_KNOB_MAP_CUDA_COPIES);
    int copies_max = copies_knob && atoi(copies_knob) > 0 ? atoi(copies_knob) : warm_bytes ? 1 : FEW_COPIES_MAX;
    int copies = 1;
    while (copies * 2 <= copies_max && fits(own_bytes(copies * 2) + 16, warm_bytes, warm_index_bytes)) copies *= 2;
    const size_t warm_offset = (own_bytes(copies) + 15) / 16 * 16;
    const size_t area = warm_offset + warm_bytes;
    const size_t index_offset = twins * area, hit_offset = index_offset + warm_index_bytes;
    const size_t smem = hit_offset + hit_bytes;
    LAC_CHECK(lac_map_coop_limits(ctx, kernel, MAP_FACT_FEW, FEW_BLOCK, smem, &smem_max, &per_sm));
    if (per_sm < 1) return LAC_SUCCESS;

    /* Enough rows per block to pay for its private copies' zeroing and its
     * partials row (as lac_map_strategy_choose), at most what is resident at once
     * (a grid barrier needs every block resident). */
    const cudaDeviceProp *prop = &ctx->cuda->prop;
    int64_t grid = (int64_t)per_sm * prop->multiProcessorCount;
    int64_t by_work = call->m / (call->n * 4 > 16384 ? call->n * 4 : 16384);
    if (by_work < 1) by_work = 1;
    if (by_work < grid) grid = by_work;

    /* Partials: a row of sums per block (weighted MEAN: also of weights, and
     * of hit bytes). */
    const size_t part_bytes = (size_t)grid * (size_t)call->n * (twins * vs + (mean ? 1 : 0));
    void *ws = NULL;
    LAC_CHECK(lac_cuda_workspace(ctx, part_bytes + 256, &ws));
    unsigned long long *fault = NULL, *next_fault = NULL;
    /* A deferred call resets its own flag on the stream: a captured graph
     * replays that reset, not the alternation of the context's pair. */
    if (!defer) LAC_CHECK(lac_map_fault_pair(ctx, &fault, &next_fault));
    cudaStream_t st = ctx->cuda->stream;
    if (!fault) {   /* no pool entry left: a workspace flag, reset here */
        fault = (unsigned long long *)((unsigned char *)ws + part_bytes);
        fault = (unsigned long long *)(((uintptr_t)fault + 7) & ~(uintptr_t)7);
        LAC_CUDA_CHECK(ctx, cudaMemsetAsync(fault, 0xFF, sizeof *fault, st));
    }

    few_args a;
    memset(&a, 0, sizeof a);
    a.source = call->source;
    a.bridge = call->bridge;
    a.weights = call->weights;
    a.rows = call->m;
    a.n = call->n;
    a.partials = ws;
    a.target = call->target;
    a.fault = fault;
    a.next_fault = next_fault;
    a.report = defer ? NULL : lac_map_fault_report_word(ctx);
    a.sticky = defer ? defer->sticky : NULL;
    a.tag = defer ? defer->tag : 0;
    a.empty_value = p->empty_value;
    a.pitch = (unsigned int)pitch;
    a.copies = copies;
    a.accumulate = p->accumulate;
    /* LACUNA_MAP_CUDA_HOT caps the hot keys (a benchmark knob; 0: none). */
    const char *hot = lac_knob_string(ctx, LAC_KNOB_MAP_CUDA_HOT);
    const int hot_max = call->value_dtype == LAC_FLOAT32 && call->index_dtype == LAC_INT32 && !mean ? FEW_HOT : FEW_HOT / 2;
    a.hot_cap = hot && *hot ? atoi(hot) : hot_max;
    a.warm_cap = warm_bytes ? FEW_WARM : 0;
    a.warm_offset = (unsigned int)warm_offset;
    a.index_offset = (unsigned int)index_offset;
    a.twin = mean ? (unsigned int)(area / vs) : 0;
    a.hit_offset = (unsigned int)hit_offset;
    a.hot_table = hot_table;
    /* The weight sums' -0.0 tells a hit target (LACUNA_MAP_CUDA_MEAN_MARK=0: a hit byte a row). */
    a.mark = mean && lac_knob_int(ctx, LAC_KNOB_MAP_CUDA_MEAN_MARK, 1) != 0;
    if (a.hot_cap < 0 || a.hot_cap > hot_max) a.hot_cap = hot_max;
    /* LACUNA_MAP_CUDA_PREFETCH: steps prefetched into L2 per block (a
     * benchmark knob; 0: none). */
    const char *prefetch = lac_knob_string(ctx, LAC_KNOB_MAP_CUDA_PREFETCH);
    a.prefetch_steps = prefetch && *prefetch ? atoi(prefetch) : FEW_PREFETCH_STEPS;
    if (a.prefetch_steps < 0) a.prefetch_steps = 0;
    if (a.prefetch_steps > 32) a.prefetch_steps = 32;
    /* LACUNA_MAP_CUDA_SELECT=0: the hot/warm/other rows on three branches
     * (a benchmark knob). */
    const char *select = lac_knob_string(ctx, LAC_KNOB_MAP_CUDA_SELECT);
    a.select = !(select && strcmp(select, "0") == 0);
    /* LACUNA_MAP_CUDA_ROLL=1: the rolling prefetch through the rows (a
     * benchmark knob). */
    const char *roll = lac_knob_string(ctx, LAC_KNOB_MAP_CUDA_ROLL);
    a.prefetch_roll = roll && strcmp(roll, "1") == 0;
    void *params[] = {&a};
    LAC_CUDA_CHECK(ctx, cudaLaunchCooperativeKernel(kernel, dim3((unsigned int)grid), dim3(FEW_BLOCK), params, smem, st));
    LAC_CUDA_CHECK_LAUNCH(ctx);
    if (next_fault) lac_map_fault_pair_advance(ctx);
    *taken = 1;
    if (defer) return LAC_SUCCESS;
    return lac_map_report_fault_mapped(ctx, call, fault, a.report);
}
