/* Deterministic SUM, COUNT and MEAN on the CUDA backend without a sort:
 * every w_i * S_i is added as an exact fixed-point integer, split into up to
 * three 64-bit words, with integer atomics (shared memory for few targets,
 * L2 beyond). Integer addition is associative, so the words, and hence T,
 * are the same whatever the grid, the timing or the order of the atomics;
 * and the sum is exact, so T is the exact sum rounded once (SUM) or two
 * exact sums divided in float64 (MEAN).
 *
 * The scale of a call comes from a pass over S (and w): the largest exponent
 * of a finite nonzero w_i * S_i and the lowest set bit of any of them. With
 * B = 62 - bits(m) bits a word (so that m additions cannot overflow one),
 * K = ceil(span / B) words cover every bit exactly; the words are aligned to
 * the top, so a value near the largest touches the top word only. When
 * K > 3 (a range of more than 3B bits, e.g. 1e-30 beside 1e+10) the call
 * declines and the caller takes the sorted float64 path: never less accurate
 * than that path, never an inexact fixed point. NaN and infinities are kept
 * apart as flags per target and give what float arithmetic gives (NaN, or
 * the infinity; +inf and -inf together NaN). See docs/map-cuda.md. */
#include "backend/cuda/map/map_cuda.cuh"
#include "backend/cuda/map/map_fixed.cuh"
#include "backend/cuda/map/map_device.cuh"

#include <stdlib.h>
#include <string.h>


/* Per-call header in the workspace: fault flag and the range of the values. */
typedef struct {
    unsigned long long fault;
    int x_top, x_low;          /* w*S (or w, or S): max top exponent + BIAS, BIAS - min lowest bit */
    int w_top, w_low;          /* w alone (weighted MEAN's denominator) */
} fixed_header;

/* ------------------------------------------------------------------------ */
/* The range pass                                                           */
/* ------------------------------------------------------------------------ */
/* Top exponent and lowest set bit of a finite nonzero double. */
__device__ __forceinline__ void exponent_range(double x, int &top, int &low)
{
    unsigned long long u = (unsigned long long)__double_as_longlong(x) & 0x7FFFFFFFFFFFFFFFull;
    int e = (int)(u >> 52);
    unsigned long long mant = u & 0xFFFFFFFFFFFFFull;
    if (e == 0) {
        top = -1074 + 63 - __clzll((long long)mant);
        low = -1074 + __ffsll((long long)mant) - 1;
    } else {
        mant |= 1ull << 52;
        top = e - 1023;
        low = e - 1075 + __ffsll((long long)mant) - 1;
    }
}

struct range_acc {
    int top, low;   /* INT_MIN / INT_MAX when nothing seen */
    __device__ range_acc() : top(-0x7FFFFFFF), low(0x7FFFFFFF) {}
    __device__ void see(double x)
    {
        if (x == 0.0 || !isfinite(x)) return;
        int t, l;
        exponent_range(x, t, l);
        top = max(top, t);
        low = min(low, l);
    }
    /* One atomic per warp. */
    __device__ void publish(int *top_enc, int *low_enc)
    {
        int t = __reduce_max_sync(0xFFFFFFFFu, top), l = __reduce_min_sync(0xFFFFFFFFu, low);
        if ((threadIdx.x & 31) == 0 && t > -0x7FFFFFFF) {
            atomicMax(top_enc, t + FIXED_EXP_BIAS);
            atomicMax(low_enc, FIXED_EXP_BIAS - l);
        }
    }
};

typedef enum { RANGE_S = 0, RANGE_WS = 1, RANGE_W = 2 } range_mode;

/* The values a call adds: S (RANGE_S, any column layout, read flat and 16
 * bytes at a time when aligned), w * S, or w; and w alone for weighted MEAN. */
template <class V>
__global__ void __launch_bounds__(256) map_fixed_range_kernel(const V *S, const V *W, int64_t m, int64_t b, int mode,
                                                              int mean_weighted, fixed_header *h)
{
    range_acc x, w;
    const int64_t tid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, stride = (int64_t)gridDim.x * blockDim.x;
    if (mode == RANGE_S) {
        const int64_t count = m * b;
        const bool vec = ((uintptr_t)S & 15u) == 0;
        const int64_t quads = vec ? count / 4 : 0;
        for (int64_t q = tid; q < quads; q += stride) {
            V v[4];
            load4(S + 4 * q, v);
            x.see((double)v[0]), x.see((double)v[1]), x.see((double)v[2]), x.see((double)v[3]);
        }
        for (int64_t i = 4 * quads + tid; i < count; i += stride) x.see((double)S[i]);
    } else {
        for (int64_t e = tid; e < m * b; e += stride) {
            const int64_t i = e / b;
            const double wi = (double)W[i];
            x.see(mode == RANGE_W ? wi : __dmul_rn(wi, (double)S[e]));
            if (mean_weighted && e - i * b == 0) w.see(wi);
        }
    }
    x.publish(&h->x_top, &h->x_low);
    if (mean_weighted) w.publish(&h->w_top, &h->w_low);
}

/* ------------------------------------------------------------------------ */
/* The accumulation pass                                                    */
/* ------------------------------------------------------------------------ */
typedef struct {
    const void *source, *bridge, *weights;
    int64_t m, n, b, slots;
    int64_t scale_m;          /* rows the word layout is for: the whole call's (a split call's parts share it) */
    lac_map_op op;
    lac_nan_policy nan_policy;
    int checked;              /* bridge known to be in [0, n) */
    int unit;                 /* unweighted COUNT: every value is 1 */
    int read_source;
    int mean_weighted;        /* a second accumulator for the weights */
    int count;                /* an integer count per target (hits, or MEAN's denominator) */
    fixed_header *h;
    unsigned long long *xw;   /* FIXED_WORDS x slots: the value's words (word-major) */
    unsigned long long *ww;   /* FIXED_WORDS x slots: the weight's words */
    unsigned long long *hits; /* slots */
    unsigned int *flags;      /* slots: NaN / +inf / -inf seen (bits 0-2 value, 3-5 weight) */
    unsigned long long *partials; /* shared path: fields x blocks x slots */
    int vec;                  /* one column, 16-byte aligned S, R (and w): 4 rows a load */
    int hot;                  /* one column, at least HOT_SAMPLE rows, a hot area in shared memory */
    int64_t row0;             /* added to a flagged row: the rows' place in the part (streamed chunks) */
} fixed_args;

/* Adds x to the words of one target: the top word at `top` (shared or L2),
 * the lower ones in L2 (words[k * slots + slot]); non-finite x sets a flag.
 * |x| 2^shift = mant 2^sh is an integer below 2^(K bits) (the range pass saw
 * x): word k holds its bits [k bits, (k+1) bits), the top word the rest, all
 * with x's sign. Integer shifts only; a zero word is not added. */
__device__ __forceinline__ void fixed_add(double x, const fixed_scale &sc, unsigned long long *top,
                                          unsigned long long *words, int64_t slots, int64_t slot, unsigned int *flags,
                                          int flag_shift)
{
    if (x == 0.0) return;
    const unsigned long long u = (unsigned long long)__double_as_longlong(x);
    int e = (int)((u >> 52) & 0x7FF);
    if (e == 0x7FF) {
        unsigned int bit = (u & 0xFFFFFFFFFFFFFull) ? 1u : (u >> 63) ? 4u : 2u;
        atomicOr(flags + slot, bit << flag_shift);
        return;
    }
    unsigned long long mant = u & 0xFFFFFFFFFFFFFull;
    if (e) mant |= 1ull << 52;
    else e = 1;
    const bool neg = (u >> 63) != 0;
    const int sh = e - 1075 + sc.shift;
    const unsigned long long mask = (1ull << sc.bits) - 1;
#pragma unroll
    for (int k = 0; k < FIXED_WORDS; k++) {
        if (k >= sc.K) break;
        const int s = sh - k * sc.bits;
        unsigned long long w = s >= 0 ? (s < 64 ? mant << s : 0ull) : (s > -64 ? mant >> -s : 0ull);
        if (k + 1 < sc.K) w &= mask;
        if (w) atomicAdd(k + 1 == sc.K ? top : words + (int64_t)k * slots + slot, neg ? 0ull - w : w);
    }
}

/* Hot targets of a skewed bridge, found in a sample of each block's rows
 * (one column only). Their atomics would serialise on one address: on the
 * shared path the lanes of a warp meet there, on the L2 path every update
 * of one address waits for the last (~2 ns each). Shared path: up to
 * HOT_THREAD targets with a share of 1/16 or more, in thread-private
 * columns. L2 path: up to HOT_WARP targets with a share of 1/512 or more,
 * in per-warp shared copies found through the sample's hash table. Integer
 * sums: where a value is added does not change T. */
#define HOT_THREAD 4
#define HOT_WARP 128
#define HOT_SAMPLE 2048
#define HOT_TABLE 4096
#define HOT_EMPTY (-1)

typedef struct {
    int *key;                 /* HOT_TABLE sampled targets (HOT_EMPTY) */
    int *val;                 /* HOT_TABLE: sample counts, then the hot index or -1 */
    int *slot;                /* hot index -> target */
    int *count;               /* number of hot targets */
    unsigned long long *x, *w;  /* hot top words: [h][thread] (shared path) or [warp][h] (L2 path) */
    unsigned int *hits;
} hot_area;

__device__ __forceinline__ unsigned int hot_hash(int r) { return ((unsigned int)r * 2654435761u) >> (32 - 12); }

/* Bytes of the hot area for a block of `block` threads (0: no hot targets). */
static __host__ __device__ size_t hot_bytes(bool shared_path, int block, int count, int mean_weighted)
{
    const size_t per = 8 + (count ? 4 : 0) + (mean_weighted ? 8 : 0);
    const size_t cols = shared_path ? (size_t)HOT_THREAD * block * per : (size_t)(block / 32) * HOT_WARP * per;
    const size_t table = (size_t)HOT_TABLE * 8;
    /* The shared path's columns take the table's place once the sample is counted. */
    return (size_t)HOT_WARP * 4 + 16 + (shared_path ? (table > cols ? table : cols) : table + cols);
}

/* Where one element's top words and count go: a hot target's private copy,
 * else the block's shared copy (SHARED) or L2. */
template <bool SHARED>
__device__ __forceinline__ void fixed_element(const fixed_args &a, const fixed_scale &xs, const fixed_scale &ws,
                                              unsigned long long *s_x, unsigned long long *s_w, unsigned int *s_hits,
                                              const hot_area &hot, int nhot, int64_t i, int64_t c, int64_t r, double s,
                                              double w)
{
    if (isnan(s) || isnan(w)) {
        if (a.nan_policy == LAC_NAN_SKIP) return;
        if (a.nan_policy == LAC_NAN_ERROR) {
            flag_fault(&a.h->fault, (unsigned long long)(a.row0 + i));
            return;
        }
    }
    const int64_t slot = r * a.b + c;
    int h = -1;
    if (nhot) {
        if (SHARED) {
            for (int k = 0; k < HOT_THREAD && k < nhot; k++)
                if (hot.slot[k] == (int)slot) h = k;
        } else {
            for (unsigned int t = hot_hash((int)slot);; t = (t + 1) & (HOT_TABLE - 1)) {
                const int key = hot.key[t];
                if (key == (int)slot) {
                    h = hot.val[t];
                    break;
                }
                if (key == HOT_EMPTY) break;
            }
        }
    }
    /* Index of this thread's (or warp's) copy of hot target h. */
    const int64_t hi = h < 0 ? 0 : SHARED ? (int64_t)h * blockDim.x + threadIdx.x : (int64_t)(threadIdx.x >> 5) * HOT_WARP + h;
    const double x = a.unit ? 1.0 : a.op == LAC_MAP_COUNT ? w : __dmul_rn(w, s);
    unsigned long long *xtop = h >= 0 ? hot.x + hi : SHARED ? s_x + slot : a.xw + (int64_t)(xs.K - 1) * a.slots + slot;
    fixed_add(x, xs, xtop, a.xw, a.slots, slot, a.flags, 0);
    if (a.mean_weighted) {
        unsigned long long *wtop = h >= 0 ? hot.w + hi : SHARED ? s_w + slot : a.ww + (int64_t)(ws.K - 1) * a.slots + slot;
        fixed_add(w, ws, wtop, a.ww, a.slots, slot, a.flags, 3);
    }
    if (a.count) {
        if (h >= 0) atomicAdd(hot.hits + hi, 1u);
        else if (SHARED) atomicAdd(s_hits + slot, 1u);
        else atomicAdd(a.hits + slot, 1ull);
    }
}

template <class V, bool SHARED>
__device__ __forceinline__ void fixed_row(const fixed_args &a, const fixed_scale &xs, const fixed_scale &ws,
                                          unsigned long long *s_x, unsigned long long *s_w, unsigned int *s_hits,
                                          const hot_area &hot, int nhot, int64_t i, int64_t r, double w)
{
    if (!a.checked && (r < 0 || r >= a.n)) {
        flag_fault(&a.h->fault, (unsigned long long)(a.row0 + i));
        return;
    }
    const V *S = (const V *)a.source;
    for (int64_t c = 0; c < a.b; c++) {
        double s = a.read_source ? (double)S[i * a.b + c] : 0.0;
        fixed_element<SHARED>(a, xs, ws, s_x, s_w, s_hits, hot, nhot, i, c, r, s, w);
    }
}

/* The hot targets of this block: a sample of HOT_SAMPLE bridge entries from
 * the block's first rows counted in a hash table. Returns their number. */
template <class I, bool SHARED> __device__ int hot_find(const fixed_args &a, const hot_area &hot)
{
    for (int t = threadIdx.x; t < HOT_TABLE; t += blockDim.x) hot.key[t] = HOT_EMPTY, hot.val[t] = 0;
    if (threadIdx.x == 0) *hot.count = 0;
    __syncthreads();
    const I *R = (const I *)a.bridge;
    const int64_t first = ((int64_t)4 * blockIdx.x * blockDim.x) % a.m;
    for (int t = threadIdx.x; t < HOT_SAMPLE; t += blockDim.x) {
        const int64_t r = (int64_t)R[(first + t) % a.m];
        if (r < 0 || r >= a.n) continue;
        for (unsigned int k = hot_hash((int)r);; k = (k + 1) & (HOT_TABLE - 1)) {
            const int prev = atomicCAS(hot.key + k, HOT_EMPTY, (int)r);
            if (prev == HOT_EMPTY || prev == (int)r) {
                atomicAdd(hot.val + k, 1);
                break;
            }
        }
    }
    __syncthreads();
    const int least = SHARED ? HOT_SAMPLE / 16 : HOT_SAMPLE / 512, most = SHARED ? HOT_THREAD : HOT_WARP;
    for (int t = threadIdx.x; t < HOT_TABLE; t += blockDim.x) {
        int idx = -1;
        if (hot.key[t] != HOT_EMPTY && hot.val[t] >= least) {
            idx = atomicAdd(hot.count, 1);
            if (idx < most) hot.slot[idx] = hot.key[t];
            else idx = -1;
        }
        hot.val[t] = idx;
    }
    __syncthreads();
    const int nhot = min(*hot.count, most);
    /* The thread columns share their memory with the table: zero them now. */
    const int64_t words = SHARED ? (int64_t)nhot * blockDim.x : (int64_t)(blockDim.x / 32) * HOT_WARP;
    if (nhot) {
        if (SHARED) __syncthreads();   /* every thread has read the table */
        for (int64_t k = threadIdx.x; k < words; k += blockDim.x) {
            hot.x[k] = 0;
            if (a.mean_weighted) hot.w[k] = 0;
            if (a.count) hot.hits[k] = 0;
        }
    }
    __syncthreads();
    return nhot;
}

/* The hot copies folded into the block's shared copy (SHARED) or L2, once. */
template <bool SHARED>
__device__ void hot_fold(const fixed_args &a, const fixed_scale &xs, const fixed_scale &ws, unsigned long long *s_x,
                         unsigned long long *s_w, unsigned int *s_hits, const hot_area &hot, int nhot)
{
    if (SHARED) {
        /* Warp h sums hot target h's thread column. */
        const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
        if (warp < nhot) {
            unsigned long long x = 0, w = 0;
            unsigned int c = 0;
            for (int t = lane; t < (int)blockDim.x; t += 32) {
                x += hot.x[(int64_t)warp * blockDim.x + t];
                if (a.mean_weighted) w += hot.w[(int64_t)warp * blockDim.x + t];
                if (a.count) c += hot.hits[(int64_t)warp * blockDim.x + t];
            }
            for (int off = 16; off > 0; off >>= 1) {
                x += __shfl_xor_sync(0xFFFFFFFFu, x, off);
                w += __shfl_xor_sync(0xFFFFFFFFu, w, off);
                c += __shfl_xor_sync(0xFFFFFFFFu, c, off);
            }
            if (lane == 0) {
                const int slot = hot.slot[warp];
                atomicAdd(s_x + slot, x);
                if (a.mean_weighted) atomicAdd(s_w + slot, w);
                if (a.count) atomicAdd(s_hits + slot, c);
            }
        }
    } else {
        for (int h = threadIdx.x; h < nhot; h += blockDim.x) {
            unsigned long long x = 0, w = 0, c = 0;
            for (int k = 0; k < (int)blockDim.x / 32; k++) {
                x += hot.x[(int64_t)k * HOT_WARP + h];
                if (a.mean_weighted) w += hot.w[(int64_t)k * HOT_WARP + h];
                if (a.count) c += hot.hits[(int64_t)k * HOT_WARP + h];
            }
            const int64_t slot = hot.slot[h];
            if (x) atomicAdd(a.xw + (int64_t)(xs.K - 1) * a.slots + slot, x);
            if (w) atomicAdd(a.ww + (int64_t)(ws.K - 1) * a.slots + slot, w);
            if (c) atomicAdd(a.hits + slot, c);
        }
    }
}

/* SHARED: the top words (and counts) of every target in the block's shared
 * memory, written as the block's partials row at the end; else all in L2.
 * Hot targets (a.hot, one column) first go to copies of their own. */
template <class V, class I, bool SHARED> __global__ void __launch_bounds__(SHARED ? 1024 : 256, SHARED ? 1 : 4) map_fixed_kernel(fixed_args a)
{
    extern __shared__ unsigned long long fixed_smem[];
    const fixed_header *h = a.h;
    const fixed_scale xs = a.unit ? fixed_scale_of(FIXED_EXP_BIAS, FIXED_EXP_BIAS, a.scale_m)
                                  : fixed_scale_of(h->x_top, h->x_low, a.scale_m);
    const fixed_scale ws = fixed_scale_of(h->w_top, h->w_low, a.scale_m);
    if (!xs.ok || (a.mean_weighted && !ws.ok)) return;   /* declined: the caller takes the sorted path */

    unsigned long long *s_x = NULL, *s_w = NULL;
    unsigned int *s_hits = NULL;
    int64_t used = 0;   /* 8-byte words of shared memory taken */
    if (SHARED) {
        s_x = fixed_smem;
        s_w = s_x + (a.mean_weighted ? a.slots : 0);
        s_hits = (unsigned int *)(s_w + a.slots);
        used = a.slots * (1 + a.mean_weighted) + (a.count ? (a.slots + 1) / 2 : 0);
        for (int64_t k = threadIdx.x; k < used; k += blockDim.x) fixed_smem[k] = 0;
    }
    hot_area hot;
    memset(&hot, 0, sizeof hot);
    int nhot = 0;
    if (a.hot) {
        /* [slot HOT_WARP][count 4][table: key, val] then the copies (over the table). */
        int *base = (int *)(fixed_smem + used);
        hot.slot = base;
        hot.count = base + HOT_WARP;
        hot.key = base + HOT_WARP + 4;
        hot.val = hot.key + HOT_TABLE;
        const int64_t per = SHARED ? (int64_t)HOT_THREAD * blockDim.x : (int64_t)(blockDim.x / 32) * HOT_WARP;
        hot.x = (unsigned long long *)(hot.key);
        hot.w = hot.x + per;
        hot.hits = (unsigned int *)(hot.w + (a.mean_weighted ? per : 0));
        if (!SHARED) {   /* the L2 path keeps the table for its lookups: copies after it */
            hot.x = (unsigned long long *)(hot.val + HOT_TABLE);
            hot.w = hot.x + per;
            hot.hits = (unsigned int *)(hot.w + (a.mean_weighted ? per : 0));
        }
        nhot = hot_find<I, SHARED>(a, hot);
    } else if (SHARED) {
        __syncthreads();
    }

    const I *R = (const I *)a.bridge;
    const V *W = (const V *)a.weights;
    const int64_t tid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, stride = (int64_t)gridDim.x * blockDim.x;
    if (a.vec) {
        const V *S = (const V *)a.source;
        const int64_t quads = a.m / 4;
        /* The next step's loads are issued before this step's atomics. */
        I nr[4] = {0, 0, 0, 0};
        V ns[4] = {0, 0, 0, 0}, nw[4] = {1, 1, 1, 1};
        if (tid < quads) {
            load4(R + 4 * tid, nr);
            if (a.read_source) load4(S + 4 * tid, ns);
            if (W) load4(W + 4 * tid, nw);
        }
        for (int64_t q = tid; q < quads; q += stride) {
            I r[4];
            V s[4], w[4];
#pragma unroll
            for (int j = 0; j < 4; j++) r[j] = nr[j], s[j] = ns[j], w[j] = nw[j];
            if (q + stride < quads) {
                load4(R + 4 * (q + stride), nr);
                if (a.read_source) load4(S + 4 * (q + stride), ns);
                if (W) load4(W + 4 * (q + stride), nw);
            }
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const int64_t i = 4 * q + j, rj = (int64_t)r[j];
                if (!a.checked && (rj < 0 || rj >= a.n)) {
                    flag_fault(&a.h->fault, (unsigned long long)(a.row0 + i));
                    continue;
                }
                fixed_element<SHARED>(a, xs, ws, s_x, s_w, s_hits, hot, nhot, i, 0, rj, (double)s[j], (double)w[j]);
            }
        }
        for (int64_t i = 4 * quads + tid; i < a.m; i += stride)
            fixed_row<V, SHARED>(a, xs, ws, s_x, s_w, s_hits, hot, nhot, i, (int64_t)R[i], W ? (double)W[i] : 1.0);
    } else {
        for (int64_t i = tid; i < a.m; i += stride)
            fixed_row<V, SHARED>(a, xs, ws, s_x, s_w, s_hits, hot, nhot, i, (int64_t)R[i], W ? (double)W[i] : 1.0);
    }
    if (nhot) {
        __syncthreads();
        hot_fold<SHARED>(a, xs, ws, s_x, s_w, s_hits, hot, nhot);
    }
    if (SHARED) {
        __syncthreads();
        const int64_t G = gridDim.x, blk = blockIdx.x;
        for (int64_t k = threadIdx.x; k < a.slots; k += blockDim.x) {
            a.partials[blk * a.slots + k] = s_x[k];
            if (a.mean_weighted) a.partials[(G + blk) * a.slots + k] = s_w[k];
            if (a.count) a.partials[(2 * G + blk) * a.slots + k] = s_hits[k];
        }
    }
}


typedef struct {
    fixed_args a;
    int shared;               /* partials hold the top words and counts */
    int blocks;
    int accumulate, track_hits;
    double empty_value;
    void *target;
    unsigned long long *report;   /* mapped host word, or NULL */
} fixed_finish_args;

/* The words of target k of one accumulator (field 0 the value, 1 the
 * weight): the top word summed over the blocks' partials on the shared path. */
__device__ __forceinline__ void fixed_gather(const fixed_finish_args &f, const fixed_scale &sc,
                                             const unsigned long long *words, int field, int64_t k,
                                             long long w[FIXED_WORDS])
{
    w[0] = w[1] = w[2] = 0;
    for (int j = 0; j + 1 < sc.K; j++) w[j] = (long long)words[(int64_t)j * f.a.slots + k];
    if (f.shared) {
        unsigned long long top = 0;
        for (int blk = 0; blk < f.blocks; blk++) top += f.a.partials[((int64_t)field * f.blocks + blk) * f.a.slots + k];
        w[sc.K - 1] = (long long)top;
    } else {
        w[sc.K - 1] = (long long)words[(int64_t)(sc.K - 1) * f.a.slots + k];
    }
}

/* T from the words, by the rules of the sorted path's seg_finish (and the CPU
 * backend's lac_map_finalize): only when no row was flagged and the range fit. */
template <class V> __global__ void map_fixed_finish_kernel(fixed_finish_args f)
{
    const fixed_args &a = f.a;
    const unsigned long long fault = *(volatile unsigned long long *)&a.h->fault;
    const fixed_scale xs = a.unit ? fixed_scale_of(FIXED_EXP_BIAS, FIXED_EXP_BIAS, a.scale_m)
                                  : fixed_scale_of(a.h->x_top, a.h->x_low, a.scale_m);
    const fixed_scale ws = fixed_scale_of(a.h->w_top, a.h->w_low, a.scale_m);
    const bool declined = !xs.ok || (a.mean_weighted && !ws.ok);
    if (blockIdx.x == 0 && threadIdx.x == 0 && f.report)
        *(volatile unsigned long long *)f.report = declined ? FIXED_DECLINED : fault;
    if (declined || fault != MAP_NO_FAULT) return;
    V *T = (V *)f.target;
    fixed_rules r;
    r.op = a.op, r.accumulate = f.accumulate, r.track_hits = f.track_hits, r.mean_weighted = a.mean_weighted;
    r.empty_value = f.empty_value;
    for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < a.slots; k += (int64_t)gridDim.x * blockDim.x) {
        unsigned long long hits = 0;
        if (a.count) {
            if (f.shared)
                for (int blk = 0; blk < f.blocks; blk++) hits += f.a.partials[((int64_t)2 * f.blocks + blk) * a.slots + k];
            else hits = a.hits[k];
        }
        long long xw[FIXED_WORDS], ww[FIXED_WORDS] = {0, 0, 0};
        fixed_gather(f, xs, a.xw, 0, k, xw);
        if (a.mean_weighted) fixed_gather(f, ws, a.ww, 1, k, ww);
        T[k] = fixed_result<V>(r, xs, ws, xw, ww, a.flags[k], hits, T[k]);
    }
}

/* ------------------------------------------------------------------------ */
/* Host                                                                     */
/* ------------------------------------------------------------------------ */
template <class V, class I> static const void *fixed_kernel(bool shared)
{
    return shared ? (const void *)map_fixed_kernel<V, I, true> : (const void *)map_fixed_kernel<V, I, false>;
}

static const void *pick_kernel(lac_dtype v, lac_dtype i, bool shared)
{
    if (v == LAC_FLOAT32) return i == LAC_INT32 ? fixed_kernel<float, int32_t>(shared) : fixed_kernel<float, int64_t>(shared);
    return i == LAC_INT32 ? fixed_kernel<double, int32_t>(shared) : fixed_kernel<double, int64_t>(shared);
}

extern "C" int lac_map_fixed_serves(lac_ctx_t ctx, const lac_map_call *call)
{
    const char *knob = lac_knob_string(ctx, LAC_KNOB_MAP_CUDA_FIXED);
    if (knob && strcmp(knob, "0") == 0) return 0;
    lac_map_op op = call->params.op;
    return call->memory == LAC_MEM_DEVICE && (op == LAC_MAP_SUM || op == LAC_MAP_COUNT || op == LAC_MAP_MEAN) &&
           call->n * call->b > 0 && call->n * call->b <= INT32_MAX;
}

/* One call's (or one share's part's) launches: the accumulation pass's
 * arguments and shape, and its workspace carved as
 *   [header 256][value words][weight words][counts][flags] | partials | recv
 * where everything before the partials is zeroed together and, once the
 * shared path's partials are folded in (map_fixed_flat_kernel), holds the
 * whole of the part's sums: parts of a split call add up word by word. */
struct map_fixed_part {
    fixed_args a;
    bool launch_shared;       /* the accumulation kernel keeps the top words in shared memory */
    bool shared;              /* partials hold top words not yet folded into the flat region */
    int64_t grid;
    size_t smem;
    int block;
    size_t flat_bytes;        /* bytes from the value words to the partials */
    void *extra;              /* room for another part's flat region (recv), or NULL */
    int device;
};

/* The launch shape and workspace of a call's accumulation pass; zeroes the
 * words (on ctx's stream). */
static lac_status fixed_prepare(lac_ctx_t ctx, const lac_map_call *call, int64_t scale_m, bool recv, map_fixed_part *P)
{
    memset(P, 0, sizeof *P);
    cudaStream_t st = ctx->cuda->stream;
    const lac_map_op op = call->params.op;
    const int64_t slots = call->n * call->b;
    const bool weighted = call->weights != NULL;
    map_layout L = lac_map_layout_for(call);

    fixed_args &a = P->a;
    a.source = call->source, a.bridge = call->bridge, a.weights = call->weights;
    a.m = call->m, a.n = call->n, a.b = call->b, a.slots = slots;
    a.scale_m = scale_m;
    a.op = op;
    a.nan_policy = call->params.nan_policy;
    a.checked = call->bridge_checked;
    a.unit = op == LAC_MAP_COUNT && !weighted;
    a.read_source = !(op == LAC_MAP_COUNT && call->params.nan_policy == LAC_NAN_PROPAGATE);
    a.mean_weighted = op == LAC_MAP_MEAN && weighted;
    a.count = L.track_hits || op == LAC_MAP_MEAN;
    a.vec = call->b == 1 && lac_map_aligned16(call->source) && lac_map_aligned16(call->bridge) &&
            (!weighted || lac_map_aligned16(call->weights));

    /* Where the top words live: one block's shared memory when every target's
     * fits (few targets), else L2. LACUNA_MAP_CUDA_FIXED=global|shared forces.
     * A hot area beside them where it fits (one column, enough rows to sample). */
    const char *knob = lac_knob_string(ctx, LAC_KNOB_MAP_CUDA_FIXED);
    const bool may_hot = call->b == 1 && call->m >= HOT_SAMPLE;
    const int block_shared = 1024, block_global = 256;
    size_t smem = (size_t)slots * 8 * (1 + a.mean_weighted) + (a.count ? (size_t)slots * 4 + 8 : 0);
    size_t smem_max = 0;
    int per_sm = 0;
    bool shared = false;
    if (!(knob && strcmp(knob, "global") == 0) && call->m > 0 && call->m < ((int64_t)1 << 32)) {
        const void *k = pick_kernel(call->value_dtype, call->index_dtype, true);
        LAC_CHECK(lac_map_coop_limits(ctx, k, MAP_FACT_FEW, block_shared, 0, &smem_max, &per_sm));
        const size_t with_hot = smem + hot_bytes(true, block_shared, a.count, a.mean_weighted);
        if (may_hot && with_hot <= smem_max) smem = with_hot, a.hot = 1;
        if (smem <= smem_max) {
            LAC_CHECK(lac_map_coop_limits(ctx, k, MAP_FACT_FEW, block_shared, smem, &smem_max, &per_sm));
            shared = per_sm > 0;
        }
    }
    if (knob && strcmp(knob, "shared") == 0 && !shared && call->m > 0)
        return lac_error(ctx, LAC_ERR_UNSUPPORTED, "LACUNA_MAP_CUDA_FIXED=shared: %lld targets do not fit shared memory",
                         (long long)slots);
    if (!shared) {
        a.hot = may_hot;
        smem = a.hot ? hot_bytes(false, block_global, a.count, a.mean_weighted) : 0;
        if (call->m > 0) {
            const void *k = pick_kernel(call->value_dtype, call->index_dtype, false);
            LAC_CHECK(lac_map_coop_limits(ctx, k, MAP_FACT_FEW, block_global, 0, &smem_max, &per_sm));
            if (smem > smem_max) a.hot = 0, smem = 0;
            per_sm = 8;
            if (smem > 0) LAC_CHECK(lac_map_coop_limits(ctx, k, MAP_FACT_FEW, block_global, smem, &smem_max, &per_sm));
            if (per_sm < 1) per_sm = 1;
        }
    }
    const int sms = ctx->cuda->prop.multiProcessorCount;
    int64_t grid = (int64_t)sms * (per_sm > 0 ? per_sm : 1);
    int64_t rows_per_thread = 8;   /* small calls: fewer blocks */
    int64_t want = (call->m + (int64_t)(shared ? block_shared : block_global) * rows_per_thread - 1) /
                   ((int64_t)(shared ? block_shared : block_global) * rows_per_thread);
    if (want < grid) grid = want > 0 ? want : 1;
    grid = lac_knob_int(ctx, LAC_KNOB_MAP_CUDA_FIXED_GRID, grid);
    if (grid < 1) grid = 1;

    /* Workspace: header, the words, counts, flags (zeroed together), partials. */
    const size_t words_bytes = (size_t)FIXED_WORDS * slots * 8;
    const size_t off_xw = 256, off_ww = off_xw + words_bytes,
                 off_hits = off_ww + (a.mean_weighted ? words_bytes : 0),
                 off_flags = off_hits + (a.count ? (size_t)slots * 8 : 0),
                 off_part = lac_map_align256(off_flags + (size_t)slots * 4),
                 part_bytes = shared ? (size_t)3 * grid * slots * 8 : 0,
                 off_extra = lac_map_align256(off_part + part_bytes),
                 extra = recv ? off_part - off_xw : 0;
    void *ws = NULL;
    LAC_CHECK(lac_cuda_workspace(ctx, off_extra + extra, &ws));
    unsigned char *base = (unsigned char *)ws;
    a.h = (fixed_header *)base;
    a.xw = (unsigned long long *)(base + off_xw);
    a.ww = (unsigned long long *)(base + off_ww);
    a.hits = (unsigned long long *)(base + off_hits);
    a.flags = (unsigned int *)(base + off_flags);
    a.partials = (unsigned long long *)(base + off_part);
    LAC_CUDA_CHECK(ctx, cudaMemsetAsync(base, 0, off_part, st));
    LAC_CUDA_CHECK(ctx, cudaMemsetAsync(&a.h->fault, 0xFF, sizeof a.h->fault, st));
    P->launch_shared = P->shared = shared;
    P->grid = grid;
    P->smem = smem;
    P->block = shared ? block_shared : block_global;
    P->flat_bytes = off_part - off_xw;
    P->extra = extra ? base + off_extra : NULL;
    P->device = ctx->cuda->device;
    return LAC_SUCCESS;
}

/* The range of the values (none for an unweighted COUNT: all 1) into the header. */
static lac_status fixed_range(lac_ctx_t ctx, const lac_map_call *call, const map_fixed_part *P)
{
    const fixed_args &a = P->a;
    if (a.unit || call->m == 0) return LAC_SUCCESS;
    const int sms = ctx->cuda->prop.multiProcessorCount;
    int mode = call->params.op == LAC_MAP_COUNT ? RANGE_W : call->weights ? RANGE_WS : RANGE_S;
    unsigned int g = (unsigned int)((int64_t)sms * 8);
    int64_t want_r = (call->m * call->b + 256 * 16 - 1) / (256 * 16);
    if (want_r < (int64_t)g) g = (unsigned int)(want_r > 0 ? want_r : 1);
    cudaStream_t st = ctx->cuda->stream;
    if (call->value_dtype == LAC_FLOAT32)
        map_fixed_range_kernel<float><<<g, 256, 0, st>>>((const float *)call->source, (const float *)call->weights,
                                                         call->m, call->b, mode, a.mean_weighted, a.h);
    else
        map_fixed_range_kernel<double><<<g, 256, 0, st>>>((const double *)call->source, (const double *)call->weights,
                                                          call->m, call->b, mode, a.mean_weighted, a.h);
    LAC_CUDA_CHECK_LAUNCH(ctx);
    return LAC_SUCCESS;
}

/* The accumulation pass (it returns at once when the header's range declines). */
static lac_status fixed_accumulate(lac_ctx_t ctx, const lac_map_call *call, map_fixed_part *P)
{
    if (P->a.m == 0) return LAC_SUCCESS;
    const void *k = pick_kernel(call->value_dtype, call->index_dtype, P->launch_shared);
    void *params[] = {&P->a};
    LAC_CUDA_CHECK(ctx, cudaLaunchKernel(k, dim3((unsigned int)P->grid), dim3(P->block), params, P->smem, ctx->cuda->stream));
    LAC_CUDA_CHECK_LAUNCH(ctx);
    return LAC_SUCCESS;
}

static unsigned int finish_grid(lac_ctx_t ctx, int64_t slots)
{
    const unsigned int most = (unsigned int)ctx->cuda->prop.multiProcessorCount * 8;
    const unsigned int g = (unsigned int)((slots + 255) / 256);
    return g > most ? most : g > 0 ? g : 1;
}

/* T from the words (target: device, n x b), by the call's rules; the fault
 * word (or FIXED_DECLINED) into report when it is not NULL. */
static lac_status fixed_finish(lac_ctx_t ctx, const lac_map_call *call, const map_fixed_part *P, void *target,
                               unsigned long long *report)
{
    fixed_finish_args f;
    memset(&f, 0, sizeof f);
    f.a = P->a;
    f.shared = P->shared;
    f.blocks = (int)P->grid;
    f.accumulate = call->params.accumulate;
    f.track_hits = lac_map_layout_for(call).track_hits;
    f.empty_value = call->params.empty_value;
    f.target = target;
    f.report = report;
    const unsigned int g = finish_grid(ctx, P->a.slots);
    cudaStream_t st = ctx->cuda->stream;
    if (call->value_dtype == LAC_FLOAT32) map_fixed_finish_kernel<float><<<g, 256, 0, st>>>(f);
    else map_fixed_finish_kernel<double><<<g, 256, 0, st>>>(f);
    LAC_CUDA_CHECK_LAUNCH(ctx);
    return LAC_SUCCESS;
}

extern "C" lac_status lac_map_fixed_try(lac_ctx_t ctx, const lac_map_call *call, int *taken)
{
    *taken = 0;
    if (!lac_map_fixed_serves(ctx, call)) return LAC_SUCCESS;
    LAC_CHECK(lac_map_fixed_few_try(ctx, call, taken));
    if (*taken) return LAC_SUCCESS;
    cudaStream_t st = ctx->cuda->stream;
    map_fixed_part P;
    LAC_CHECK(fixed_prepare(ctx, call, call->m, false, &P));
    LAC_CHECK(fixed_range(ctx, call, &P));
    LAC_CHECK(fixed_accumulate(ctx, call, &P));
    unsigned long long *report = lac_map_fault_report_word(ctx);
    LAC_CHECK(fixed_finish(ctx, call, &P, call->target, report));

    unsigned long long word = MAP_NO_FAULT;
    if (report) {
        LAC_CUDA_CHECK(ctx, cudaStreamSynchronize(st));
        word = *(volatile unsigned long long *)report;
    } else {
        fixed_header hh;
        LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(&hh, P.a.h, sizeof hh, cudaMemcpyDeviceToHost, st));
        LAC_CUDA_CHECK(ctx, cudaStreamSynchronize(st));
        const fixed_args &a = P.a;
        fixed_scale xs = a.unit ? fixed_scale_of(FIXED_EXP_BIAS, FIXED_EXP_BIAS, a.scale_m)
                                : fixed_scale_of(hh.x_top, hh.x_low, a.scale_m);
        fixed_scale wsc = fixed_scale_of(hh.w_top, hh.w_low, a.scale_m);
        word = (!xs.ok || (a.mean_weighted && !wsc.ok)) ? FIXED_DECLINED : hh.fault;
    }
    if (word == FIXED_DECLINED) {
        lac_log(ctx, LAC_LOG_DEBUG, "map: the values span more than %d fixed-point words; the sorted path sums them",
                FIXED_WORDS);
        return LAC_SUCCESS;   /* not taken: T untouched */
    }
    *taken = 1;
    return lac_map_describe_row(ctx, call, word);
}

/* ------------------------------------------------------------------------ */
/* A call split by rows across shares (map_multi.cu)                        */
/* ------------------------------------------------------------------------ */
/* The shared path's partials (top words, counts) folded into the L2 words:
 * the part's sums then lie in its flat region alone. */
static __global__ void map_fixed_flat_kernel(fixed_finish_args f)
{
    const fixed_args &a = f.a;
    const fixed_scale xs = a.unit ? fixed_scale_of(FIXED_EXP_BIAS, FIXED_EXP_BIAS, a.scale_m)
                                  : fixed_scale_of(a.h->x_top, a.h->x_low, a.scale_m);
    const fixed_scale ws = fixed_scale_of(a.h->w_top, a.h->w_low, a.scale_m);
    for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < a.slots; k += (int64_t)gridDim.x * blockDim.x) {
        unsigned long long x = 0, w = 0, c = 0;
        for (int blk = 0; blk < f.blocks; blk++) {
            x += a.partials[(int64_t)blk * a.slots + k];
            if (a.mean_weighted) w += a.partials[((int64_t)f.blocks + blk) * a.slots + k];
            if (a.count) c += a.partials[((int64_t)2 * f.blocks + blk) * a.slots + k];
        }
        a.xw[(int64_t)(xs.K - 1) * a.slots + k] += x;
        if (a.mean_weighted) a.ww[(int64_t)(ws.K - 1) * a.slots + k] += w;
        if (a.count) a.hits[k] += c;
    }
}

/* acc's flat region += other's: integer words and counts added, flags or'ed. */
static __global__ void map_fixed_add_kernel(unsigned long long *acc, const unsigned long long *other, int64_t words,
                                            unsigned int *acc_flags, const unsigned int *other_flags, int64_t slots)
{
    const int64_t tid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = tid; i < words; i += stride) acc[i] += other[i];
    for (int64_t k = tid; k < slots; k += stride) acc_flags[k] |= other_flags[k];
}

extern "C" lac_status lac_map_fixed_part_prepare(lac_ctx_t ctx, const lac_map_call *part, int64_t total_m, int recv,
                                                 map_fixed_part **out)
{
    *out = (map_fixed_part *)calloc(1, sizeof **out);
    if (!*out) return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "could not allocate a map part");
    return fixed_prepare(ctx, part, total_m, recv != 0, *out);
}

extern "C" void lac_map_fixed_part_reads(const map_fixed_part *P, int *range_pass, int *range_source, int *add_source)
{
    *range_pass = !P->a.unit;                        /* an unweighted COUNT adds ones: no range */
    *range_source = P->a.op != LAC_MAP_COUNT;        /* fixed_range's RANGE_W reads w alone */
    *add_source = P->a.read_source;
}

extern "C" lac_status lac_map_fixed_part_see(lac_ctx_t ctx, const map_fixed_part *P, const lac_map_call *rows)
{
    return fixed_range(ctx, rows, P);
}

extern "C" lac_status lac_map_fixed_part_begin(lac_ctx_t ctx, const lac_map_call *part, int64_t total_m, int recv,
                                               map_fixed_part **out)
{
    LAC_CHECK(lac_map_fixed_part_prepare(ctx, part, total_m, recv, out));
    return fixed_range(ctx, part, *out);
}

extern "C" lac_status lac_map_fixed_part_range(lac_ctx_t ctx, const map_fixed_part *P, int range[4])
{
    fixed_header hh;
    cudaStream_t st = ctx->cuda->stream;
    LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(&hh, P->a.h, sizeof hh, cudaMemcpyDeviceToHost, st));
    LAC_CUDA_CHECK(ctx, cudaStreamSynchronize(st));
    range[0] = hh.x_top, range[1] = hh.x_low, range[2] = hh.w_top, range[3] = hh.w_low;
    return LAC_SUCCESS;
}

extern "C" int lac_map_fixed_range_fits(const map_fixed_part *P, const int range[4])
{
    const fixed_args &a = P->a;
    const fixed_scale xs = a.unit ? fixed_scale_of(FIXED_EXP_BIAS, FIXED_EXP_BIAS, a.scale_m)
                                  : fixed_scale_of(range[0], range[1], a.scale_m);
    const fixed_scale ws = fixed_scale_of(range[2], range[3], a.scale_m);
    return xs.ok && (!a.mean_weighted || ws.ok);
}

extern "C" lac_status lac_map_fixed_part_set_range(lac_ctx_t ctx, map_fixed_part *P, const int range[4])
{
    fixed_header hh;
    hh.fault = MAP_NO_FAULT;
    hh.x_top = range[0], hh.x_low = range[1], hh.w_top = range[2], hh.w_low = range[3];
    cudaStream_t st = ctx->cuda->stream;
    LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(P->a.h, &hh, sizeof hh, cudaMemcpyHostToDevice, st));
    LAC_CUDA_CHECK(ctx, cudaStreamSynchronize(st));   /* hh is on this stack */
    return LAC_SUCCESS;
}

extern "C" lac_status lac_map_fixed_part_add_rows(lac_ctx_t ctx, map_fixed_part *P, const lac_map_call *rows,
                                                  int64_t row0)
{
    fixed_args &a = P->a;
    a.source = rows->source, a.bridge = rows->bridge, a.weights = rows->weights;
    a.m = rows->m;
    a.row0 = row0;
    a.vec = rows->b == 1 && lac_map_aligned16(rows->source) && lac_map_aligned16(rows->bridge) &&
            (!rows->weights || lac_map_aligned16(rows->weights));
    LAC_CHECK(fixed_accumulate(ctx, rows, P));
    if (P->launch_shared && a.m > 0) {   /* the blocks' partials rows folded in before the next launch rewrites them */
        fixed_finish_args f;
        memset(&f, 0, sizeof f);
        f.a = a;
        f.blocks = (int)P->grid;
        map_fixed_flat_kernel<<<finish_grid(ctx, a.slots), 256, 0, ctx->cuda->stream>>>(f);
        LAC_CUDA_CHECK_LAUNCH(ctx);
    }
    P->shared = false;
    return LAC_SUCCESS;
}

extern "C" lac_status lac_map_fixed_part_accumulate(lac_ctx_t ctx, const lac_map_call *part, map_fixed_part *P,
                                                    const int range[4])
{
    LAC_CHECK(lac_map_fixed_part_set_range(ctx, P, range));
    return lac_map_fixed_part_add_rows(ctx, P, part, 0);
}

extern "C" lac_status lac_map_fixed_part_fault(lac_ctx_t ctx, const map_fixed_part *P, unsigned long long *row)
{
    cudaStream_t st = ctx->cuda->stream;
    LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(row, &P->a.h->fault, sizeof *row, cudaMemcpyDeviceToHost, st));
    LAC_CUDA_CHECK(ctx, cudaStreamSynchronize(st));
    return LAC_SUCCESS;
}

extern "C" lac_status lac_map_fixed_part_add(lac_ctx_t ctx, map_fixed_part *into, const map_fixed_part *from)
{
    cudaStream_t st = ctx->cuda->stream;
    if (!into->extra) return lac_error(ctx, LAC_ERR_INTERNAL, "map: a part without room for another's words");
    LAC_CUDA_CHECK(ctx, cudaMemcpyPeerAsync(into->extra, into->device, from->a.xw, from->device, from->flat_bytes, st));
    const int64_t words = (int64_t)(((unsigned char *)into->a.flags - (unsigned char *)into->a.xw) / 8);
    const unsigned int *flags = (const unsigned int *)((unsigned char *)into->extra + words * 8);
    map_fixed_add_kernel<<<finish_grid(ctx, words), 256, 0, st>>>(into->a.xw, (const unsigned long long *)into->extra,
                                                                   words, into->a.flags, flags, into->a.slots);
    LAC_CUDA_CHECK_LAUNCH(ctx);
    return LAC_SUCCESS;
}

extern "C" lac_status lac_map_fixed_part_finish(lac_ctx_t ctx, const lac_map_call *call, const map_fixed_part *P,
                                                void *target)
{
    return fixed_finish(ctx, call, P, target, NULL);
}

extern "C" void lac_map_fixed_part_free(map_fixed_part *P) { free(P); }
