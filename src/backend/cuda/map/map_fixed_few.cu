/* Deterministic SUM, COUNT and MEAN of few targets in one launch: exact
 * fixed point (map_fixed.cu's words and rules) without its range pass.
 *
 * float32 values, one column, device arrays, unweighted (or a weighted
 * COUNT), every target's words in one block's shared memory. Each block
 * reads the same first FF_SAMPLE values and takes the words' scale from
 * their largest exponent plus FF_MARGIN bits: K words of B bits then cover
 * every value within 2^(K B - 24 - FF_MARGIN) below that top. Each element
 * is checked against the window as it is added (an integer compare); one
 * outside it (larger than the guess, or bits below the lowest word) marks
 * the call missed. The words are integer sums (shared-memory integer
 * atomics), so the block's copy, its partials row and their sum after a grid
 * barrier are the same whatever the grid or timing; and a call that did not
 * miss holds the exact sum, so T, rounded once from it, has the bits of
 * map_fixed.cu's two-pass scheme (which needs the range first: a read of S
 * more). A missed call leaves T untouched and the caller runs that scheme.
 * NaN and infinities are flags per target (4 bits, packed), bad indices and
 * NaN under LAC_NAN_ERROR fault with T untouched, as there. */
#include "backend/cuda/map/map_cuda.cuh"
#include "backend/cuda/map/map_device.cuh"
#include "backend/cuda/map/map_fixed.cuh"

#include <cooperative_groups.h>

#include <string.h>

namespace cg = cooperative_groups;

#define FF_BLOCK 1024
#define FF_SAMPLE 4096        /* the values every block reads to guess the scale */
#define FF_MARGIN 6           /* bits above the sample's top exponent the words allow */
#define FF_WORDS 2            /* words a value is split into here */
#define FF_HOT 4              /* hot targets a thread keeps in registers */
#define FF_HOT_SELECT 2       /* the same with selected addresses (the default) */
#define FF_HOT_SHARE_LOG2 4   /* hot: at least 1/16 of the sample */
#define FF_WARM 64            /* warm targets with per-lane accumulators */
#define FF_WARM_SHARE_LOG2 9  /* warm: at least 1/512 of the sample */

typedef struct {
    const void *source, *bridge, *weights;
    int64_t m, n;
    lac_nan_policy nan_policy;
    int checked;              /* bridge known to be in [0, n) */
    int unit;                 /* every value is 1 (unweighted COUNT) */
    int value_is_weight;      /* weighted COUNT: the value is w */
    int read_source;
    int count;                /* an integer count per target */
    int warm;                 /* room for the warm targets' accumulators */
    unsigned int warm_offset, index_offset;   /* bytes: the warm accumulators, the warm index */
    unsigned int warm_low_offset;   /* bytes to the warm targets' low-word accumulators */
    int warm_low;             /* warm targets' low words in per-lane accumulators too */
    size_t zero_words;        /* 8-byte words of shared memory zeroed before the rows */
    fixed_rules rules;
    void *target;
    unsigned long long *partials; /* (K + count) x grid x n words, then grid x nf flag words */
    unsigned int *missed;     /* grid: this block saw a value outside the window */
    unsigned long long *fault;      /* MAP_NO_FAULT on entry */
    unsigned long long *next_fault; /* reset for the next call, or NULL */
    unsigned long long *report;     /* mapped host word, or NULL */
    unsigned long long *word;       /* device copy of the report */
} ff_args;

/* One element's value split into the words: |x| 2^shift = mant 2^sh, word k
 * its bits [k B, (k+1) B), the top word the rest, all with x's sign; false
 * when it falls outside the window (bits below the lowest word, or above the
 * top one: nothing added). Window checks and shifts in a few integer steps. */
struct ff_split {
    int B, shift, KB;
    template <int K> __device__ __forceinline__ bool split(float x, unsigned long long w[FF_WORDS], unsigned int &flag) const
    {
        const unsigned int u = __float_as_uint(x);
        int e = (int)((u >> 23) & 0xFFu);
        flag = 0;
        w[0] = w[1] = 0;
        if (e == 0xFF) {
            flag = (u & 0x7FFFFFu) ? 1u : (u >> 31) ? 4u : 2u;
            return true;
        }
        unsigned int mant = u & 0x7FFFFFu;
        if (e) mant |= 1u << 23;
        else e = 1;
        if (!mant) return true;
        int sh = e - 150 + shift;
        if (sh < 0) {   /* bits below the lowest word must be zero */
            if (sh <= -24 || (mant & ((1u << -sh) - 1u))) return false;
            mant >>= -sh;
            sh = 0;
        }
        if (sh + 31 - __clz((int)mant) >= KB) return false;   /* above the top word */
        const unsigned long long wide = mant;
        const bool neg = (u >> 31) != 0;
        unsigned long long top, low = 0;
        if (K == 1) {
            top = wide << sh;
        } else {
            top = sh >= B ? wide << (sh - B) : wide >> (B - sh);
            low = sh < 64 ? (wide << sh) & ((1ull << B) - 1) : 0ull;
        }
        w[K - 1] = neg ? 0ull - top : top;
        if (K > 1) w[0] = neg ? 0ull - low : low;
        return true;
    }
};

/* Adds c (mod 2^64) to the shared word at w. CS: by its 32-bit halves,
 * with native 32-bit shared atomics, the low half's carry (seen in the old
 * value it returns) going into the high half, which most adds of a small
 * c then leave alone. The word ends the same as with one 64-bit atomic
 * (every step adds mod 2^64, in any order), which shared memory does by a
 * compare-and-store loop. */
template <bool CS> __device__ __forceinline__ void ff_add(unsigned long long *w, unsigned long long c)
{
    if constexpr (!CS) {
        atomicAdd(w, c);
    } else {
        unsigned int *h = reinterpret_cast<unsigned int *>(w);   /* little-endian: h[0] the low half */
        const unsigned int lo = (unsigned int)c;
        unsigned int hi = (unsigned int)(c >> 32);
        if (lo) {
            const unsigned int old = atomicAdd(h, lo);
            hi += old + lo < old ? 1u : 0u;   /* the low half wrapped */
        }
        if (hi) atomicAdd(h + 1, hi);
    }
}

/* The rows of one block into its shared words: H hot targets' top words
 * and counts in registers, warm targets' in per-lane accumulators (found
 * through a byte per target), the rest by shared-memory integer atomics.
 * SELECT (the default): the low words go with the top words, and a warm or
 * other row does one atomic a word at a selected address. Returns whether a
 * value fell outside the window. */
template <class I, int K, int H, bool SELECT, bool CS>
__device__ __forceinline__ bool ff_rows(const ff_args &a, const ff_split &sp, unsigned long long *words, unsigned int *hits,
                                        unsigned int *flags, const unsigned int *hot, unsigned int nhot,
                                        unsigned long long *warm_acc, unsigned int *warm_cnt, unsigned long long *warm_lo,
                                        const unsigned char *warm_index, bool warm)
{
    const unsigned int tid = threadIdx.x, bd = blockDim.x;
    const int lane = tid & 31;
    const int64_t n = a.n, m = a.m;
    const unsigned long long un = (unsigned long long)n;
    const float *S = (const float *)a.source, *W = (const float *)a.weights;
    const I *R = (const I *)a.bridge;
    unsigned int hk[H > 0 ? H : 1];
    unsigned long long hx[H > 0 ? H : 1], hl[K > 1 && H > 0 ? H : 1];
    unsigned int hc[H > 0 ? H : 1];
#pragma unroll
    for (int j = 0; j < H; j++) hk[j] = j < (int)nhot ? hot[j] : 0xFFFFFFFFu, hx[j] = 0, hc[j] = 0;
#pragma unroll
    for (int j = 0; j < (K > 1 ? H : 0); j++) hl[j] = 0;
    /* Integer sums: where a word is added does not change the words. */
    const bool warm_low = K > 1 && a.warm_low;
    bool missed = false;
    auto element = [&](int64_t i, unsigned long long key, float s, float w) {
        if (!a.checked && key >= un) {
            flag_fault(a.fault, (unsigned long long)i);
            return;
        }
        if (a.nan_policy != LAC_NAN_PROPAGATE && (isnan(s) || isnan(w))) {
            if (a.nan_policy == LAC_NAN_SKIP) return;
            flag_fault(a.fault, (unsigned long long)i);
            return;
        }
        const float x = a.unit ? 1.0f : a.value_is_weight ? w : s;
        unsigned long long wd[FF_WORDS];
        unsigned int flag;
        if (!sp.template split<K>(x, wd, flag)) {
            missed = true;
            return;
        }
        if (flag) atomicOr(flags + (key >> 3), flag << ((key & 7) * 4));
        if (K > 1 && wd[0] && !SELECT) atomicAdd(words + key, wd[0]);
        bool is_hot = false;
#pragma unroll
        for (int j = 0; j < H; j++)
            if ((unsigned int)key == hk[j]) {
                hx[j] += wd[K - 1], hc[j] += 1, is_hot = true;
                if (K > 1) hl[j] += wd[0];
            }
        if (is_hot) return;
        const unsigned int wi = warm ? warm_index[key] : 0u;
        if constexpr (SELECT) {
            /* One atomic a word at a selected address, the lane's own
             * accumulator of a warm target or the target's word: the warm and
             * other lanes of a warp do not take turns on two branches. */
            const size_t at = (size_t)(wi ? wi - 1 : 0) * 32 + lane;
            unsigned long long *top = wi ? warm_acc + at : words + (size_t)(K - 1) * n + key;
            unsigned long long *low = wi && warm_low ? warm_lo + at : words + key;
            if (K > 1 && wd[0]) ff_add<CS>(low, wd[0]);
            if (wd[K - 1]) ff_add<CS>(top, wd[K - 1]);
            if (a.count) atomicAdd(wi ? warm_cnt + at : hits + key, 1u);
            return;
        }
        if (wi) {   /* this lane's own accumulator: no other lane of the warp meets it */
            if (wd[K - 1]) atomicAdd(warm_acc + (wi - 1) * 32 + lane, wd[K - 1]);
            if (a.count) atomicAdd(warm_cnt + (wi - 1) * 32 + lane, 1u);
            return;
        }
        if (wd[K - 1]) atomicAdd(words + (size_t)(K - 1) * n + key, wd[K - 1]);
        if (a.count) atomicAdd(hits + key, 1u);
    };
    const int64_t step = (int64_t)gridDim.x * bd, quads = m / 4;
    int64_t q = (int64_t)blockIdx.x * bd + tid;
    I r[4] = {};
    float s[4] = {}, w[4] = {1.0f, 1.0f, 1.0f, 1.0f};
    auto load = [&](int64_t v) {
        load4(R + 4 * v, r);
        if (a.read_source) load4(S + 4 * v, s);
        if (W) load4(W + 4 * v, w);
    };
    if (q < quads) load(q);
    for (; !missed && q < quads; q += step) {
        I cr[4];
        float cs[4], cw[4];
#pragma unroll
        for (int j = 0; j < 4; j++) cr[j] = r[j], cs[j] = s[j], cw[j] = w[j];
        if (q + step < quads) load(q + step);
#pragma unroll
        for (int j = 0; j < 4; j++) element(4 * q + j, (unsigned long long)(int64_t)cr[j], cs[j], cw[j]);
    }
    for (int64_t i = 4 * quads + (int64_t)blockIdx.x * bd + tid; !missed && i < m; i += step)
        element(i, (unsigned long long)(int64_t)R[i], a.read_source ? S[i] : 0.0f, W ? W[i] : 1.0f);
    /* The registers: one warp sum per hot target. */
#pragma unroll
    for (int j = 0; j < H; j++) {
        if (j >= (int)nhot) break;
        unsigned long long x = hx[j], lo = K > 1 ? hl[j] : 0ull;
        unsigned int c = hc[j];
        for (int off = 16; off > 0; off >>= 1) {
            x += __shfl_xor_sync(0xFFFFFFFFu, x, off);
            c += __shfl_xor_sync(0xFFFFFFFFu, c, off);
            if (SELECT) lo += __shfl_xor_sync(0xFFFFFFFFu, lo, off);
        }
        if (lane == 0) {
            if (x) ff_add<CS>(words + (size_t)(K - 1) * n + hk[j], x);
            if (a.count && c) atomicAdd(hits + hk[j], c);
            if (SELECT && lo) ff_add<CS>(words + hk[j], lo);
        }
    }
    return missed;
}

template <class I, int K, bool SELECT, bool CS> __global__ void __launch_bounds__(FF_BLOCK, 1) map_fixed_few_kernel(ff_args a)
{
    extern __shared__ __align__(16) unsigned long long ff_smem[];
    __shared__ int s_top_enc, s_low_enc;
    __shared__ unsigned int s_hot[FF_HOT], s_found, s_missed, s_warm[FF_WARM], s_wfound;
    const unsigned int tid = threadIdx.x, bd = blockDim.x;
    const int64_t n = a.n, m = a.m;
    const unsigned long long un = (unsigned long long)n;
    const float *S = (const float *)a.source, *W = (const float *)a.weights;
    const I *R = (const I *)a.bridge;
    const int64_t nf = (n + 7) / 8;
    unsigned long long *words = ff_smem;   /* K x n */
    unsigned int *hits = (unsigned int *)(words + (size_t)K * n);   /* n, when counting */
    unsigned int *flags = hits + (a.count ? (n + 1) / 2 * 2 : 0);   /* nf: 4 bits a target */
    unsigned int *counts = (unsigned int *)ff_smem;                 /* the sample's, before the words */

    if (blockIdx.x == 0 && tid == 0 && a.next_fault) *a.next_fault = MAP_NO_FAULT;
    for (int64_t t = tid; t < n; t += bd) counts[t] = 0;
    if (tid == 0) s_top_enc = 0, s_low_enc = 0, s_found = 0, s_missed = 0;
    __syncthreads();

    /* 1. The sample: the first FF_SAMPLE values' exponents (the same for every
     * block, so every block takes the same scale) and bridge counts. */
    auto value = [&](int64_t i) { return a.unit ? 1.0f : a.value_is_weight ? W[i] : S[i]; };
    const int64_t sample = m < FF_SAMPLE ? m : FF_SAMPLE;
    {
        int top = -0x7FFFFFFF, low = 0x7FFFFFFF;
        for (int64_t i = tid; i < sample; i += bd) {
            const float x = value(i);
            if (x != 0.0f && isfinite(x)) {
                const unsigned int u = __float_as_uint(x);
                int e = (int)((u >> 23) & 0xFFu);
                unsigned int mant = u & 0x7FFFFFu;
                if (e) mant |= 1u << 23;
                else e = 1;
                top = max(top, e - 150 + 31 - __clz((int)mant));
                low = min(low, e - 150 + __ffs((int)mant) - 1);
            }
            const unsigned long long key = (unsigned long long)(int64_t)R[i];
            if (key < un) atomicAdd(&counts[key], 1u);
        }
        top = __reduce_max_sync(0xFFFFFFFFu, top);
        low = __reduce_min_sync(0xFFFFFFFFu, low);
        if ((tid & 31) == 0 && top > -0x7FFFFFFF) {
            atomicMax(&s_top_enc, top + FIXED_EXP_BIAS);
            atomicMax(&s_low_enc, FIXED_EXP_BIAS - low);
        }
    }
    __syncthreads();
    /* Hot targets: a share of 1/16 of the sample or more, the first FF_HOT
     * found (which ones does not change the integer sums). */
    const unsigned int bar = (unsigned int)(sample >> FF_HOT_SHARE_LOG2) > 16u ? (unsigned int)(sample >> FF_HOT_SHARE_LOG2) : 16u;
    /* With selected addresses, two in registers (the rows' registers allow
     * no more without spills); the other hot ones join the warm targets. */
    const unsigned int hot_cap = SELECT ? FF_HOT_SELECT : FF_HOT;
    for (int64_t t = tid; t < n; t += bd)
        if (counts[t] >= bar) {
            const unsigned int i = atomicAdd(&s_found, 1u);
            if (i < hot_cap) s_hot[i] = (unsigned int)t;
        }
    __syncthreads();
    const unsigned int nhot = s_found < hot_cap ? s_found : hot_cap;
    /* Warm targets: a share of 1/512 or more below the hot bar, the first
     * FF_WARM found, when the host left room for their accumulators. */
    unsigned int nwarm = 0;
    if (a.warm) {
        const unsigned int wbar = (unsigned int)(sample >> FF_WARM_SHARE_LOG2) > 8u ? (unsigned int)(sample >> FF_WARM_SHARE_LOG2) : 8u;
        if (tid == 0) s_wfound = 0;
        __syncthreads();
        for (int64_t t = tid; t < n; t += bd)
            if (counts[t] >= wbar && (counts[t] < bar || (SELECT && nhot == hot_cap && s_hot[0] != t && s_hot[1] != t))) {
                const unsigned int i = atomicAdd(&s_wfound, 1u);
                if (i < FF_WARM) s_warm[i] = (unsigned int)t;
            }
        __syncthreads();
        nwarm = s_wfound < FF_WARM ? s_wfound : FF_WARM;
    }
    /* The window: the sample's top + FF_MARGIN down K words; an unweighted
     * COUNT adds ones (one word). No finite nonzero value in the sample: missed. */
    ff_split sp;
    sp.B = fixed_scale_of(FIXED_EXP_BIAS, FIXED_EXP_BIAS, m).bits;
    sp.KB = K * sp.B;
    const int top = a.unit ? 0 : s_top_enc - FIXED_EXP_BIAS + FF_MARGIN;
    sp.shift = sp.KB - 1 - top;
    bool missed = !a.unit && s_top_enc == 0;
    __syncthreads();   /* every thread has read the counts */
    for (size_t t = tid; t < a.zero_words; t += bd) ff_smem[t] = 0;
    __syncthreads();

    /* 2. The rows. */
    unsigned long long *warm_acc = ff_smem + a.warm_offset / 8;
    unsigned int *warm_cnt = (unsigned int *)(warm_acc + FF_WARM * 32);
    unsigned long long *warm_lo = ff_smem + a.warm_low_offset / 8;
    unsigned char *warm_index = (unsigned char *)ff_smem + a.index_offset;
    const bool warm = nwarm > 0;
    if (warm) {
        if (tid < nwarm) warm_index[s_warm[tid]] = (unsigned char)(tid + 1);
        __syncthreads();
    }
    if (!missed) {
        /* Each choice its own kernel: the registers of one do not crowd the
         * other's (without the selected addresses: as before them). */
        constexpr int H = SELECT ? FF_HOT_SELECT : FF_HOT;
        if (nhot == 0) missed = ff_rows<I, K, 0, SELECT, CS>(a, sp, words, hits, flags, s_hot, 0, warm_acc, warm_cnt, warm_lo, warm_index, warm);
        else missed = ff_rows<I, K, H, SELECT, CS>(a, sp, words, hits, flags, s_hot, nhot, warm_acc, warm_cnt, warm_lo, warm_index, warm);
    }
    __syncthreads();
    /* Warm accumulators: one warp per target sums the 32 lanes' parts. */
    for (unsigned int h = tid >> 5; h < nwarm; h += bd >> 5) {
        unsigned long long x = warm_acc[h * 32 + (tid & 31)];
        unsigned long long lo = K > 1 && a.warm_low ? warm_lo[h * 32 + (tid & 31)] : 0ull;
        unsigned int c = a.count ? warm_cnt[h * 32 + (tid & 31)] : 0u;
        for (int off = 16; off > 0; off >>= 1) {
            x += __shfl_xor_sync(0xFFFFFFFFu, x, off);
            c += __shfl_xor_sync(0xFFFFFFFFu, c, off);
            lo += __shfl_xor_sync(0xFFFFFFFFu, lo, off);
        }
        if ((tid & 31) == 0) {
            if (x) ff_add<CS>(words + (size_t)(K - 1) * n + s_warm[h], x);
            if (a.count && c) atomicAdd(hits + s_warm[h], c);
            if (lo) ff_add<CS>(words + s_warm[h], lo);
        }
    }
    if (missed) s_missed = 1;   /* a benign race: every writer writes 1 */
    __syncthreads();

    /* 3. The block's partials row: K words, the count, the flags. */
    const int G = (int)gridDim.x;
    const int fields = K + (a.count ? 1 : 0);
    unsigned long long *P = a.partials;
    unsigned int *PF = (unsigned int *)(P + (size_t)fields * G * n);
    const size_t blk = blockIdx.x;
    for (int64_t t = tid; t < n; t += bd) {
        for (int k = 0; k < K; k++) P[((size_t)k * G + blk) * n + t] = words[(size_t)k * n + t];
        if (a.count) P[((size_t)K * G + blk) * n + t] = hits[t];
    }
    for (int64_t t = tid; t < nf; t += bd) PF[blk * nf + t] = flags[t];
    if (tid == 0) a.missed[blk] = s_missed;
    __threadfence();
    cg::this_grid().sync();

    /* 4. After the barrier: declined (any block missed), faulted (T stays as
     * it was), or each block writes one slice of T. */
    unsigned int any_missed = 0;
    for (int g = tid; g < G; g += bd) any_missed |= *(volatile unsigned int *)&a.missed[g];
    any_missed = __syncthreads_or(any_missed != 0);
    const unsigned long long fault = *(volatile unsigned long long *)a.fault;
    const unsigned long long word = any_missed ? FIXED_DECLINED : fault;
    if (blockIdx.x == 0 && tid == 0) {
        *(volatile unsigned long long *)a.word = word;
        if (a.report) *(volatile unsigned long long *)a.report = word;
    }
    if (word != MAP_NO_FAULT) return;
    /* A slice of per targets, a tile of TW at a time: RG groups of threads
     * each sum every RG-th partials row (integer sums: any grouping gives the
     * same words), group 0 adds the groups' sums. ff_smem is free again. */
    fixed_scale xs;
    xs.ok = 1, xs.K = K, xs.bits = sp.B, xs.shift = sp.shift;
    const int64_t per = (n + G - 1) / G, s0 = (int64_t)blockIdx.x * per;
    const int64_t s1 = s0 + per < n ? s0 + per : n;
    const int TW = per >= (int64_t)bd ? (int)bd : (int)((per + 31) / 32 * 32);
    const int RG = (int)bd / TW;
    const int group = (int)tid / TW, col = (int)tid % TW;
    unsigned long long *red = ff_smem;   /* (fields + 1) x bd */
    float *T = (float *)a.target;
    for (int64_t base = s0; base < s1; base += TW) {
        const int64_t k = base + col;
        unsigned long long acc[FF_WORDS + 1] = {0, 0, 0};
        unsigned int fl = 0;
        if (k < s1 && group < RG) {
            for (int c = group; c < G; c += RG) {
#pragma unroll
                for (int f = 0; f < FF_WORDS + 1; f++)
                    if (f < fields) acc[f] += P[((size_t)f * G + c) * n + k];
                fl |= (PF[(size_t)c * nf + (k >> 3)] >> ((k & 7) * 4)) & 0xFu;
            }
        }
#pragma unroll
        for (int f = 0; f < FF_WORDS + 1; f++)
            if (f < fields) red[(size_t)f * bd + tid] = acc[f];
        red[(size_t)fields * bd + tid] = fl;
        __syncthreads();
        if (group == 0 && k < s1) {
            long long xw[FIXED_WORDS] = {0, 0, 0}, ww[FIXED_WORDS] = {0, 0, 0};
            unsigned long long hits_k = 0;
            unsigned int fk = 0;
            for (int h = 0; h < RG; h++) {
                const int at = h * TW + col;
#pragma unroll
                for (int f = 0; f < K; f++) xw[f] += (long long)red[(size_t)f * bd + at];
                if (a.count) hits_k += red[(size_t)K * bd + at];
                fk |= (unsigned int)red[(size_t)fields * bd + at];
            }
            T[k] = fixed_result<float>(a.rules, xs, xs, xw, ww, fk, hits_k, T[k]);
        }
        __syncthreads();
    }
}

/* ------------------------------------------------------------------------ */
/* Host                                                                      */
/* ------------------------------------------------------------------------ */
/* Shared memory: [K x n words][n counts][flags, 4 bits a target], then with
 * warm targets [FF_WARM x 32 accumulators (and counts)][a byte per target];
 * after the barrier the same memory holds the final sums' tiles. */
typedef struct {
    size_t warm_offset, warm_low_offset, index_offset, zero_bytes, smem;
} ff_layout;

/* warm_low: the warm targets' low words get accumulators too (after the
 * counts'). */
static ff_layout ff_layout_of(int64_t n, int K, int count, int warm, int warm_low)
{
    ff_layout l;
    const size_t nf = (size_t)(n + 7) / 8;
    const size_t data = (size_t)K * n * 8 + (count ? (size_t)(n + 1) / 2 * 2 * 4 : 0) + (nf + 1) / 2 * 8;
    l.warm_offset = (data + 15) / 16 * 16;
    l.warm_low_offset = l.warm_offset + (size_t)FF_WARM * 32 * (8 + (count ? 4 : 0));
    l.index_offset = l.warm_low_offset + (warm_low ? (size_t)FF_WARM * 32 * 8 : 0);
    l.zero_bytes = warm ? l.index_offset + ((size_t)n + 15) / 16 * 16 : data;
    const size_t red = (size_t)(K + 2) * FF_BLOCK * 8;
    l.smem = l.zero_bytes + 16 > red ? l.zero_bytes + 16 : red;
    return l;
}

template <bool SELECT, bool CS> static const void *ff_kernel_for(lac_dtype index, int unit)
{
    if (index == LAC_INT32)
        return unit ? (const void *)map_fixed_few_kernel<int32_t, 1, SELECT, CS>
                    : (const void *)map_fixed_few_kernel<int32_t, FF_WORDS, SELECT, CS>;
    return unit ? (const void *)map_fixed_few_kernel<int64_t, 1, SELECT, CS>
                : (const void *)map_fixed_few_kernel<int64_t, FF_WORDS, SELECT, CS>;
}

extern "C" lac_status lac_map_fixed_few_try(lac_ctx_t ctx, const lac_map_call *call, int *taken)
{
    *taken = 0;
    const lac_map_params *p = &call->params;
    const bool weighted = call->weights != NULL;
    map_layout L = lac_map_layout_for(call);
    /* float32 values: a value spans 24 bits, so two words of the window leave
     * room for a wide range (float64's 53 would not). */
    if (call->memory != LAC_MEM_DEVICE || call->value_dtype != LAC_FLOAT32 || call->b != 1 || call->m < 1 ||
        call->m >= ((int64_t)1 << 32) || call->n < 1 || call->n > INT32_MAX / 4)
        return LAC_SUCCESS;
    if (!(p->op == LAC_MAP_SUM || p->op == LAC_MAP_MEAN || p->op == LAC_MAP_COUNT) || (weighted && p->op != LAC_MAP_COUNT))
        return LAC_SUCCESS;
    if (!lac_map_aligned16(call->source) || !lac_map_aligned16(call->bridge) || (weighted && !lac_map_aligned16(call->weights)))
        return LAC_SUCCESS;
    /* LACUNA_MAP_CUDA_FIXED=shared|global forces map_fixed.cu's two passes. */
    const char *knob = lac_knob_string(ctx, LAC_KNOB_MAP_CUDA_FIXED);
    if (knob && *knob && strcmp(knob, "1") != 0) return LAC_SUCCESS;

    const int unit = p->op == LAC_MAP_COUNT && !weighted;
    const int K = unit ? 1 : FF_WORDS;
    const int count = L.track_hits || p->op == LAC_MAP_MEAN;
    /* Selected addresses (LACUNA_MAP_CUDA_FIXED_SELECT=0: the kernel before them). */
    const int select = lac_knob_int(ctx, LAC_KNOB_MAP_CUDA_FIXED_SELECT, 1) != 0;
    /* The words' adds by 32-bit halves and a carry (LACUNA_MAP_CUDA_FIXED_CARRY=0:
     * by 64-bit atomics; the kernel without selected addresses keeps those). */
    const int carry = select && lac_knob_int(ctx, LAC_KNOB_MAP_CUDA_FIXED_CARRY, 1) != 0;
    const void *kernel = carry ? ff_kernel_for<true, true>(call->index_dtype, unit)
                         : select ? ff_kernel_for<true, false>(call->index_dtype, unit)
                                  : ff_kernel_for<false, false>(call->index_dtype, unit);
    size_t smem_max = 0;
    int per_sm = 0;
    LAC_CHECK(lac_map_coop_limits(ctx, kernel, MAP_FACT_FEW, FF_BLOCK, 0, &smem_max, &per_sm));
    /* Warm targets' accumulators where they fit (LACUNA_MAP_CUDA_WARM=0: none). */
    const char *warm_knob = lac_knob_string(ctx, LAC_KNOB_MAP_CUDA_WARM);
    int warm = !(warm_knob && strcmp(warm_knob, "0") == 0);
    /* The hot and warm targets' low words beside their top words
     * (LACUNA_MAP_CUDA_FIXED_SELECT=0: by shared atomics at the target). */
    int warm_low = select && K > 1 && warm;
    ff_layout lay = ff_layout_of(call->n, K, count, warm, warm_low);
    if (lay.smem > smem_max && warm_low) warm_low = 0, lay = ff_layout_of(call->n, K, count, warm, 0);
    if (lay.smem > smem_max) warm = 0, lay = ff_layout_of(call->n, K, count, 0, 0);
    const size_t smem = lay.smem;
    if (smem > smem_max) return LAC_SUCCESS;
    LAC_CHECK(lac_map_coop_limits(ctx, kernel, MAP_FACT_FEW, FF_BLOCK, smem, &smem_max, &per_sm));
    if (per_sm < 1) return LAC_SUCCESS;
    const int64_t resident = (int64_t)per_sm * ctx->cuda->prop.multiProcessorCount;
    int64_t grid = resident;
    int64_t by_work = call->m / (call->n * 4 > 16384 ? call->n * 4 : 16384);
    if (by_work < 1) by_work = 1;
    if (by_work < grid) grid = by_work;
    /* LACUNA_MAP_CUDA_FIXED_GRID (tests): a grid this launch cannot hold
     * resident goes to the two passes. */
    grid = lac_knob_int(ctx, LAC_KNOB_MAP_CUDA_FIXED_GRID, grid);
    if (grid < 1 || grid > resident) return LAC_SUCCESS;

    const int fields = K + count;
    const size_t nf = (size_t)(call->n + 7) / 8;
    const size_t part = (size_t)fields * grid * call->n * 8 + lac_map_align256((size_t)grid * nf * 4);
    void *ws = NULL;
    LAC_CHECK(lac_cuda_workspace(ctx, part + lac_map_align256((size_t)grid * 4) + 256, &ws));
    unsigned char *base = (unsigned char *)ws;
    ff_args a;
    memset(&a, 0, sizeof a);
    a.partials = (unsigned long long *)base;
    a.missed = (unsigned int *)(base + part);
    a.word = (unsigned long long *)(base + part + lac_map_align256((size_t)grid * 4));
    cudaStream_t st = ctx->cuda->stream;
    unsigned long long *fault = NULL, *next_fault = NULL;
    LAC_CHECK(lac_map_fault_pair(ctx, &fault, &next_fault));
    if (!fault) {   /* no pool entry: a workspace flag, reset here */
        fault = a.word + 1;
        LAC_CUDA_CHECK(ctx, cudaMemsetAsync(fault, 0xFF, sizeof *fault, st));
    }
    a.source = call->source, a.bridge = call->bridge, a.weights = call->weights;
    a.m = call->m, a.n = call->n;
    a.nan_policy = p->nan_policy;
    a.checked = call->bridge_checked;
    a.unit = unit;
    a.value_is_weight = p->op == LAC_MAP_COUNT && weighted;
    a.read_source = !(p->op == LAC_MAP_COUNT && p->nan_policy == LAC_NAN_PROPAGATE);
    a.count = count;
    a.warm = warm;
    a.warm_offset = (unsigned int)lay.warm_offset;
    a.index_offset = (unsigned int)lay.index_offset;
    a.warm_low_offset = (unsigned int)lay.warm_low_offset;
    a.warm_low = warm_low;
    a.zero_words = (lay.zero_bytes + 7) / 8;
    a.rules.op = p->op, a.rules.accumulate = p->accumulate, a.rules.track_hits = L.track_hits;
    a.rules.mean_weighted = 0, a.rules.empty_value = p->empty_value;
    a.target = call->target;
    a.fault = fault, a.next_fault = next_fault;
    a.report = lac_map_fault_report_word(ctx);
    void *params[] = {&a};
    LAC_CUDA_CHECK(ctx, cudaLaunchCooperativeKernel(kernel, dim3((unsigned int)grid), dim3(FF_BLOCK), params, smem, st));
    LAC_CUDA_CHECK_LAUNCH(ctx);
    if (next_fault) lac_map_fault_pair_advance(ctx);
    unsigned long long word = MAP_NO_FAULT;
    if (a.report) {
        LAC_CUDA_CHECK(ctx, cudaStreamSynchronize(st));
        word = *(volatile unsigned long long *)a.report;
    } else {
        LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(&word, a.word, sizeof word, cudaMemcpyDeviceToHost, st));
        LAC_CUDA_CHECK(ctx, cudaStreamSynchronize(st));
    }
    if (word == FIXED_DECLINED) {
        lac_log(ctx, LAC_LOG_DEBUG, "map: values outside the one-launch fixed-point window; two passes sum them");
        return LAC_SUCCESS;   /* not taken: T untouched */
    }
    *taken = 1;
    return lac_map_describe_row(ctx, call, word);
}
