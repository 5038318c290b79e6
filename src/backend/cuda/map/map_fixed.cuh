/* map on the CUDA backend: the exact fixed-point words of the deterministic
 * sums (map_fixed.cu, map_fixed_few.cu): the word layout a range of values
 * needs, the words' value rounded once, and the rules that turn a target's
 * words, NaN/inf flags and count into T. */
#ifndef LACUNA_BACKEND_CUDA_MAP_FIXED_CUH
#define LACUNA_BACKEND_CUDA_MAP_FIXED_CUH

#include "backend/cuda/map/map_cuda.cuh"

#include <math.h>

#define FIXED_WORDS 3          /* most words a value is split into */
#define FIXED_EXP_BIAS 2048    /* exponents stored biased, 0 = no value seen */
#define FIXED_DECLINED (MAP_NO_FAULT - 1)   /* report word: the range needs more words */

/* The word layout of one accumulator, from the range its values span. */
typedef struct {
    int ok;                    /* 0: K would exceed FIXED_WORDS, or the scale is out of range */
    int K, bits;
    int shift;                 /* value * 2^shift is an integer < 2^(K bits) */
} fixed_scale;

/* Bits a word holds: m additions of |c| < 2^bits stay below 2^62. */
static __host__ __device__ int fixed_bits(int64_t m)
{
    int h = 0;
    while (h < 62 && ((int64_t)1 << h) <= m) h++;
    int bits = 62 - h;
    return bits < 1 ? 1 : bits;
}

static __host__ __device__ fixed_scale fixed_scale_of(int top_enc, int low_enc, int64_t m)
{
    fixed_scale s;
    s.bits = fixed_bits(m);
    if (top_enc == 0) {   /* no finite nonzero value: any words stay 0 */
        s.ok = 1, s.K = 1, s.shift = 0;
        return s;
    }
    const int top = top_enc - FIXED_EXP_BIAS, low = FIXED_EXP_BIAS - low_enc;
    const int span = top - low + 1;
    s.K = (span + s.bits - 1) / s.bits;
    if (s.K < 1) s.K = 1;
    s.shift = s.K * s.bits - 1 - top;
    s.ok = s.K <= FIXED_WORDS && s.shift >= -1100 && s.shift <= 1100;
    return s;
}


/* ------------------------------------------------------------------------ */
/* Finalise                                                                 */
/* ------------------------------------------------------------------------ */
/* Adds v << at into the 192-bit magnitude u. */
__device__ __forceinline__ void add_at(unsigned long long u[3], unsigned long long v, int at)
{
    const int limb = at >> 6, off = at & 63;
    unsigned long long lo = v << off, hi = off ? v >> (64 - off) : 0ull;
    unsigned long long carry = 0;
    for (int k = limb; k < 3; k++) {
        unsigned long long add = k == limb ? lo : k == limb + 1 ? hi : 0ull;
        unsigned long long s = u[k] + add;
        unsigned long long c1 = s < add;
        unsigned long long s2 = s + carry;
        carry = c1 + (s2 < s);
        u[k] = s2;
    }
}

/* The words' exact value times 2^-shift, rounded once to V (round to nearest
 * even; a result in V's subnormal range may be rounded twice). */
template <class V> __device__ V fixed_value(long long w[FIXED_WORDS], const fixed_scale &sc)
{
    const int K = sc.K, B = sc.bits;
    /* Carries up: lower words into [0, 2^B). */
    for (int k = 0; k + 1 < K; k++) {
        long long carry = w[k] >> B;
        w[k] -= carry * ((long long)1 << B);
        w[k + 1] += carry;
    }
    const bool neg = w[K - 1] < 0;
    if (neg) {
        for (int k = 0; k < K; k++) w[k] = -w[k];
        for (int k = 0; k + 1 < K; k++)
            if (w[k] < 0) w[k] += (long long)1 << B, w[k + 1] -= 1;
    }
    unsigned long long u[3] = {0, 0, 0};
    for (int k = 0; k < K; k++) add_at(u, (unsigned long long)w[k], k * B);
    int limb = u[2] ? 2 : u[1] ? 1 : u[0] ? 0 : -1;
    if (limb < 0) return (V)0;
    const int msb = limb * 64 + 63 - __clzll((long long)u[limb]);
    /* The 64 bits from the leading one down, the rest folded into a sticky bit. */
    unsigned long long window;
    int low = msb - 63;
    if (low <= 0) {
        window = u[0];
        low = 0;
    } else {
        const int l = low >> 6, off = low & 63;
        window = off ? (u[l] >> off) | (l + 1 < 3 ? u[l + 1] << (64 - off) : 0ull) : u[l];
        bool sticky = off ? (u[l] & ((1ull << off) - 1)) != 0 : false;
        for (int k = 0; k < l; k++) sticky |= u[k] != 0;
        window |= sticky ? 1ull : 0ull;
    }
    const int e = low - sc.shift;
    double r;
    if (sizeof(V) == 4) r = (double)__ull2float_rn(window);
    else r = __ull2double_rn(window);
    r = ldexp(r, e);
    return (V)(neg ? -r : r);
}

/* NaN / inf flags (3 bits) of one accumulator: the float result they force,
 * or 0 when none is set. */
__device__ __forceinline__ int flags_force(unsigned int f, double *out)
{
    if (!f) return 0;
    if ((f & 1u) || (f & 6u) == 6u) *out = NAN;
    else *out = (f & 2u) ? INFINITY : -INFINITY;
    return 1;
}

/* The rules of a call that turn a target's words into T (as the sorted path's
 * seg_finish and the CPU backend's lac_map_finalize). */
typedef struct {
    lac_map_op op;
    int accumulate, track_hits;
    int mean_weighted;        /* MEAN's denominator from the weight words, else from the count */
    double empty_value;
} fixed_rules;

/* T of one target from its gathered words (xw: the values', ww: the
 * weights'; both consumed), flags (bits 0-2 the value's, 3-5 the weight's)
 * and count; old is T's value before the call. */
template <class V>
__device__ V fixed_result(const fixed_rules &r, const fixed_scale &xs, const fixed_scale &ws, long long xw[FIXED_WORDS],
                          long long ww[FIXED_WORDS], unsigned int fl, unsigned long long hits, V old)
{
    double acc;
    const bool exact_sum = !flags_force(fl & 7u, &acc);
    if (r.op != LAC_MAP_MEAN && !r.accumulate && exact_sum) {
        /* SUM / COUNT: the exact sum rounded once into T. */
        int touched = r.track_hits ? hits > 0 : 1;
        const V v = fixed_value<V>(xw, xs);
        if (!r.track_hits && r.op == LAC_MAP_COUNT) touched = v != (V)0;
        return touched ? v : (V)r.empty_value;
    }
    if (exact_sum) acc = fixed_value<double>(xw, xs);
    if (r.accumulate) return (V)__dadd_rn((double)old, acc);
    double wsum = 0.0;
    if (r.op == LAC_MAP_MEAN) {
        if (r.mean_weighted) {
            if (!flags_force((fl >> 3) & 7u, &wsum)) wsum = fixed_value<double>(ww, ws);
        } else {
            wsum = (double)hits;
        }
    }
    int touched;
    if (r.track_hits) touched = hits > 0;
    else if (r.op == LAC_MAP_MEAN) touched = wsum != 0.0;
    else if (r.op == LAC_MAP_COUNT) touched = acc != 0.0;
    else touched = 1;
    return (V)(!touched ? r.empty_value : r.op == LAC_MAP_MEAN ? __ddiv_rn(acc, wsum) : acc);
}

#endif
