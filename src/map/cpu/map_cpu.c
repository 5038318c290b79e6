/* map on the CPU backend, one-shot path: T[R[i]] op= w[i] * S[i] with OpenMP.
 *
 * Each thread takes a contiguous range of source rows. When the targets are few
 * enough (threads * n * b accumulators within a memory budget, and not many
 * more than the sources) every thread folds into its own private accumulators,
 * which are merged in thread order at the end: no contention, and the pass
 * streams S and R once. Otherwise the threads share one scratch and update it
 * with atomics (memory O(n * b), whatever m is), which contends little because
 * many targets spread the writers. Accumulators are float64, but for the
 * float32 SUM fast path onto many targets (see DEFINE_SUM_ROWS).
 *
 * Deterministic calls (and plan executes) cut the rows into a fixed number of
 * blocks (LAC_MAP_CPU_DET_BLOCKS, a function of the shape only), fold each
 * block in row order into its own accumulators and merge them in block order:
 * the same kernels and nearly the same work as above, and T does not depend on
 * the thread count. Only when those copies would not fit does a deterministic
 * call stream every row in every thread instead (map_det_cpu.c).
 *
 * Either way T is written only after the pass has seen every row: bad bridge
 * entries and NaNs under LAC_NAN_ERROR are detected inside the pass and leave T
 * untouched. S and R are only read in order, so memory-mapped inputs larger than
 * memory work with the same bounded extra memory. */
#include "map/cpu/map_cpu.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* Private accumulators for all threads together may use this much memory. */
#define PRIVATE_BUDGET_BYTES ((double)(256u << 20))
/* Privates pay off while their init + merge (threads * n * b) is not much more
 * than the pass itself (m * b). */
#define PRIVATE_MAX_TARGETS_PER_SOURCE 4.0
/* float64 accumulators up to this size per thread, float32 beyond (fast path). */
#define FLOAT64_ACC_MAX_BYTES ((double)(1u << 20))
/* Rows a thread maps between looks at the stop flag raised by an error. */
#define BLOCK_ROWS (1 << 16)

typedef struct {
    double *acc;        /* n * b: sum, min or max (MEAN: the sum of w * S) */
    float *acc32;       /* instead of acc: float32 SUM on the fast path, and float32
                         * sources' weighted means and b-column sums when not
                         * deterministic */
    float *wsum32;      /* instead of wsum with acc32 (acc32 + 1) */
    double *wsum;       /* n * b: MEAN's sum of weights (its count without), or NULL;
                         * it starts at -0.0 and adds w + 0.0 (never -0.0), so it is
                         * -0.0 exactly when nothing mapped there: MEAN's "touched"
                         * flag without a third random line per row */
    int64_t stride;     /* element k is acc[k * stride]: 2 for MEAN, whose acc and wsum
                         * interleave (wsum == acc + 1), so an update touches one line */
    uint8_t *touched;   /* n * b: whether anything mapped there, or NULL */
} accumulators;

/* ------------------------------------------------------------------------ */
/* Atomic updates of a shared float64 scratch                                */
/* ------------------------------------------------------------------------ */
static inline void atomic_add(double *p, double x)
{
#pragma omp atomic
    *p += x;
}

static inline void atomic_add_f32(float *p, float x)
{
#pragma omp atomic
    *p += x;
}

static inline void atomic_fold(lac_map_op op, double *p, double x)
{
    if (op != LAC_MAP_MIN && op != LAC_MAP_MAX) {
        atomic_add(p, x);
        return;
    }
    double cur, next;
    __atomic_load(p, &cur, __ATOMIC_RELAXED);
    do {
        next = lac_map_combine(op, cur, x);
        if (next == cur || (isnan(cur) && isnan(next))) return;   /* nothing to change */
    } while (!__atomic_compare_exchange(p, &cur, &next, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
}

/* The updates of the accumulators are random, and past a core's L2 (many
 * targets, b columns) each waits for memory: the row kernels ask for the
 * target of the row PREFETCH_ROWS ahead, so that several are in flight.
 * Within the L2 that only costs instructions (4 columns onto 10k targets:
 * 15-50% slower), hence the threshold. */
#define PREFETCH_ROWS 16
#define PREFETCH_MIN_BYTES ((double)(1u << 20))
/* The b-column kernel's rows wait longer each (4 float32 columns onto 500k
 * targets: 8 MB of accumulators a thread, in the L3): it asks about
 * WIDE_PREFETCH_BYTES of accumulator entries ahead, 16-128 rows (4 columns:
 * 128 rows ahead, 1.5x faster than 16; 64 columns: 16, as many more cost
 * 1.5x). */
#define WIDE_PREFETCH_BYTES 2048
static inline int64_t wide_prefetch_rows(int64_t entry_bytes)
{
    const int64_t rows = WIDE_PREFETCH_BYTES / entry_bytes;
    return rows < PREFETCH_ROWS ? PREFETCH_ROWS : rows > 128 ? 128 : rows;
}
#define lac_map_prefetch_target(acc, r, n) __builtin_prefetch(&(acc)[(uint64_t)(r) < (uint64_t)(n) ? (r) : 0], 1, 3)

/* ------------------------------------------------------------------------ */
/* Row kernels: map rows [lo, hi) into accumulators; return the first bad    */
/* row (bridge out of range, or NaN under LAC_NAN_ERROR), or -1.             */
/* ------------------------------------------------------------------------ */
/* The common case, kept tight: SUM, one column, no weights, NaN propagated.
 * float32 sums over many targets go into float32 accumulators, as the serial
 * loop does: float64 ones would double the working set of the random updates
 * (500k targets: 4 MB instead of 2 MB, past a core's L2) and run about 2.5x
 * slower. Up to FLOAT64_ACC_MAX_BYTES of float64 accumulators cost nothing
 * extra, and keep sums onto hot targets (Zipf) accurate. */
#define DEFINE_SUM_ROWS(name, VT, LOAD, AT, UPDATE)                                                           \
    static int64_t name(const VT *S, const void *R, int64_t lo, int64_t hi, int64_t n, bool checked, AT *acc) \
    {                                                                                                       \
        for (int64_t i = lo; i < hi; i++) {                                                                 \
            uint64_t r = (uint64_t)LOAD(R, i);                                                              \
            if (!checked && r >= (uint64_t)n) return i;                                                     \
            UPDATE(i, r);                                                                                   \
        }                                                                                                   \
        return -1;                                                                                          \
    }
/* A plan's packed 24-bit copy (always checked), 4 entries from 3 aligned
 * words: a 4-byte load at 3 * i would split a cache line every 16 rows and
 * cost 10% onto Zipf-skewed targets. */
#define DEFINE_SUM_ROWS_U24(name, VT, AT, UPDATE)                                                             \
    static int64_t name(const VT *S, const void *R, int64_t lo, int64_t hi, int64_t n, bool checked, AT *acc) \
    {                                                                                                       \
        (void)n, (void)checked;                                                                             \
        int64_t i = lo;                                                                                     \
        for (; i < hi && (i & 3); i++) UPDATE(i, (uint64_t)lac_map_load_u24(R, i));                         \
        const uint32_t *w = (const uint32_t *)((const uint8_t *)R + 3 * i);                                 \
        for (; i + 4 <= hi; i += 4, w += 3) {                                                               \
            const uint32_t w0 = w[0], w1 = w[1], w2 = w[2];                                                 \
            UPDATE(i, w0 & 0xFFFFFFu);                                                                      \
            UPDATE(i + 1, (w0 >> 24) | ((w1 & 0xFFFFu) << 8));                                              \
            UPDATE(i + 2, (w1 >> 16) | ((w2 & 0xFFu) << 16));                                               \
            UPDATE(i + 3, w2 >> 8);                                                                         \
        }                                                                                                   \
        for (; i < hi; i++) UPDATE(i, (uint64_t)lac_map_load_u24(R, i));                                    \
        return -1;                                                                                          \
    }
/* Bridge loaders: a caller's int32 / int64, or a plan's narrower copy. */
#define LOAD_I32(R, i) ((int64_t)((const int32_t *)(R))[i])
#define LOAD_I64(R, i) (((const int64_t *)(R))[i])
#define LOAD_U16(R, i) ((int64_t)((const uint16_t *)(R))[i])
#define LOAD_U24(R, i) lac_map_load_u24(R, i)
/* The updates: acc[r] += S[k], into float32 or float64, plain or atomic. */
#define ADD_SAME(k, r) (acc[r] += S[k])
#define ADD_F64(k, r) (acc[r] += (double)S[k])
#define ADD_F32_ATOMIC(k, r) atomic_add_f32(&acc[r], S[k])
#define ADD_F64_ATOMIC(k, r) atomic_add(&acc[r], (double)S[k])
/* sum_rows_<source>_<accumulator>_<index>[_atomic], for every index encoding */
#define DEFINE_SUM_ROWS_ALL(IDX, DEFINE, ...)                                       \
    DEFINE(sum_rows_f32_f32_##IDX, float, __VA_ARGS__ float, ADD_SAME)              \
    DEFINE(sum_rows_f32_f64_##IDX, float, __VA_ARGS__ double, ADD_F64)              \
    DEFINE(sum_rows_f64_f64_##IDX, double, __VA_ARGS__ double, ADD_SAME)            \
    DEFINE(sum_rows_f32_f32_##IDX##_atomic, float, __VA_ARGS__ float, ADD_F32_ATOMIC) \
    DEFINE(sum_rows_f32_f64_##IDX##_atomic, float, __VA_ARGS__ double, ADD_F64_ATOMIC) \
    DEFINE(sum_rows_f64_f64_##IDX##_atomic, double, __VA_ARGS__ double, ADD_F64_ATOMIC)
DEFINE_SUM_ROWS_ALL(i32, DEFINE_SUM_ROWS, LOAD_I32,)
DEFINE_SUM_ROWS_ALL(i64, DEFINE_SUM_ROWS, LOAD_I64,)
DEFINE_SUM_ROWS_ALL(u16, DEFINE_SUM_ROWS, LOAD_U16,)
DEFINE_SUM_ROWS_ALL(u24, DEFINE_SUM_ROWS_U24)

/* Which of the four index encodings a call's bridge has. */
static int index_kind(const lac_map_call *c)
{
    return c->index_dtype == LAC_INT32 ? 0 : c->index_dtype == LAC_INT64 ? 1 : c->index_dtype == LAC_MAP_INDEX_U16 ? 2 : 3;
}

typedef int64_t (*sum_f32_f32_fn)(const float *, const void *, int64_t, int64_t, int64_t, bool, float *);
typedef int64_t (*sum_f32_f64_fn)(const float *, const void *, int64_t, int64_t, int64_t, bool, double *);
typedef int64_t (*sum_f64_f64_fn)(const double *, const void *, int64_t, int64_t, int64_t, bool, double *);
#define BY_INDEX(prefix, suffix) {prefix##i32##suffix, prefix##i64##suffix, prefix##u16##suffix, prefix##u24##suffix}

static int64_t sum_rows(const lac_map_call *c, int64_t lo, int64_t hi, const accumulators *a, bool atomic)
{
    static const sum_f32_f32_fn f32_f32[2][4] = {BY_INDEX(sum_rows_f32_f32_, ), BY_INDEX(sum_rows_f32_f32_, _atomic)};
    static const sum_f32_f64_fn f32_f64[2][4] = {BY_INDEX(sum_rows_f32_f64_, ), BY_INDEX(sum_rows_f32_f64_, _atomic)};
    static const sum_f64_f64_fn f64_f64[2][4] = {BY_INDEX(sum_rows_f64_f64_, ), BY_INDEX(sum_rows_f64_f64_, _atomic)};
    const int k = index_kind(c), at = atomic ? 1 : 0;
    const bool ok = c->bridge_checked;   /* a plan's copy: no range checks */
    if (a->acc32) return f32_f32[at][k](c->source, c->bridge, lo, hi, c->n, ok, a->acc32);   /* float32 source */
    if (c->value_dtype == LAC_FLOAT32) return f32_f64[at][k](c->source, c->bridge, lo, hi, c->n, ok, a->acc);
    return f64_f64[at][k](c->source, c->bridge, lo, hi, c->n, ok, a->acc);
}

/* float32 rows of b > 1 columns summed (weighted or not, NaN propagated)
 * into private float64 accumulators (float32 ones, acc32, onto many targets
 * when not deterministic), with typed bridge loads: a loop the compiler
 * vectorises, where map_rows loads and combines one element at a time (the LSH codes of `mf neighbours`
 * are such maps, 64 columns wide). */
#define WIDE_ROW(AT, LOAD, ACC)                                                                     \
    {                                                                                                \
        int64_t r = LOAD(R, i);                                                                      \
        if ((uint64_t)r >= (uint64_t)n) return i;                                                    \
        const AT wi = w ? (AT)w[i] : 1;                                                              \
        const float *restrict s = S + i * b;                                                         \
        AT *restrict acc = a->ACC + r * b;                                                           \
        for (int64_t col = 0; col < b; col++) acc[col] += wi * (AT)s[col];                           \
    }
/* (two loops: a prefetch test inside the one loop cost 5% onto 10k targets) */
#define DEFINE_WIDE_ROWS(name, LOAD, AT, ACC)                                                      \
    static int64_t name(const lac_map_call *c, int64_t lo, int64_t hi, const accumulators *a)        \
    {                                                                                                \
        const float *S = c->source, *w = c->weights;                                                 \
        const void *R = c->bridge;                                                                   \
        const int64_t b = c->b, n = c->n;                                                            \
        const int64_t ahead = wide_prefetch_rows(b * (int64_t)sizeof(AT));                           \
        int64_t i = lo;                                                                              \
        if ((double)n * (double)b * sizeof(AT) > PREFETCH_MIN_BYTES)                                 \
            for (; i + ahead < hi; i++) {                                                            \
                lac_map_prefetch_target(a->ACC, LOAD(R, i + ahead) * b, n * b);                      \
                WIDE_ROW(AT, LOAD, ACC)                                                              \
            }                                                                                        \
        for (; i < hi; i++) WIDE_ROW(AT, LOAD, ACC)                                                  \
        return -1;                                                                                   \
    }
/* sum_rows_wide_<accumulator>_<index>, for every index encoding */
#define DEFINE_WIDE_ROWS_ALL(IDX, LOAD)                                 \
    DEFINE_WIDE_ROWS(sum_rows_wide_f64_##IDX, LOAD, double, acc)        \
    DEFINE_WIDE_ROWS(sum_rows_wide_f32_##IDX, LOAD, float, acc32)
/* DEFINE(index, loader) for every index encoding */
#define FOR_EACH_INDEX(DEFINE) \
    DEFINE(i32, LOAD_I32) DEFINE(i64, LOAD_I64) DEFINE(u16, LOAD_U16) DEFINE(u24, LOAD_U24)
FOR_EACH_INDEX(DEFINE_WIDE_ROWS_ALL)

static int64_t sum_rows_wide(const lac_map_call *c, int64_t lo, int64_t hi, const accumulators *a)
{
    typedef int64_t (*fn)(const lac_map_call *, int64_t, int64_t, const accumulators *);
    static const fn by[2][4] = {BY_INDEX(sum_rows_wide_f64_, ), BY_INDEX(sum_rows_wide_f32_, )};
    return by[a->acc32 ? 1 : 0][index_kind(c)](c, lo, hi, a);
}

/* The row loop of DEFINE_WEIGHTED_ROWS, with or without MEAN's weight sum
 * (as two loops: one with a test the compiler would not hoist ran 1.5x
 * slower onto 10k targets). */
#define WEIGHTED_ROW_LOOP(AT, LOAD, WSUM_ADD)                                                        \
    for (int64_t i = lo; i < hi; i++) {                                                              \
        if (prefetch && i + PREFETCH_ROWS < hi) {                                                    \
            int64_t ahead = LOAD(R, i + PREFETCH_ROWS);                                              \
            lac_map_prefetch_target(acc, ahead * st, n * st);                                        \
        }                                                                                            \
        uint64_t r = (uint64_t)LOAD(R, i);                                                           \
        if (!checked && r >= (uint64_t)n) return i;                                                  \
        const AT wi = w ? (AT)w[i] : 1;                                                              \
        acc[r * st] += count ? wi : wi * (AT)S[i];                                                   \
        WSUM_ADD;                                                                                    \
        if (touched) touched[r] = 1;                                                                 \
    }
/* One column, NaN propagated, SUM / MEAN / COUNT with weights (or MEAN's
 * count without), into private accumulators: typed loads and the same
 * arithmetic as map_rows (so the same bits), without its per-element
 * dispatch, prefetching the targets ahead as DEFINE_WIDE_ROWS does. With
 * acc32 (float32 sources, not deterministic) they add in float32. */
#define DEFINE_WEIGHTED_ROWS(name, VT, LOAD, AT, ACC, WSUM)                                          \
    static int64_t name(const lac_map_call *c, int64_t lo, int64_t hi, const accumulators *a)        \
    {                                                                                                \
        const VT *S = c->source, *w = c->weights;                                                    \
        const void *R = c->bridge;                                                                   \
        const int64_t n = c->n;                                                                      \
        const bool checked = c->bridge_checked, count = c->params.op == LAC_MAP_COUNT;               \
        AT *acc = a->ACC, *wsum = a->WSUM;                                                           \
        const int64_t st = a->stride;                                                                \
        uint8_t *touched = a->touched;                                                               \
        const bool prefetch = (double)n * (double)st * sizeof(AT) > PREFETCH_MIN_BYTES;             \
        if (wsum) WEIGHTED_ROW_LOOP(AT, LOAD, wsum[r * st] += wi + (AT)0)                            \
        else WEIGHTED_ROW_LOOP(AT, LOAD, (void)0)                                                    \
        return -1;                                                                                   \
    }
/* weighted_rows_<source>_<index>[_acc32], for every index encoding */
#define DEFINE_WEIGHTED_ROWS_ALL(IDX, LOAD)                                                       \
    DEFINE_WEIGHTED_ROWS(weighted_rows_f32_##IDX, float, LOAD, double, acc, wsum)                 \
    DEFINE_WEIGHTED_ROWS(weighted_rows_f64_##IDX, double, LOAD, double, acc, wsum)                \
    DEFINE_WEIGHTED_ROWS(weighted_rows_f32_##IDX##_acc32, float, LOAD, float, acc32, wsum32)
FOR_EACH_INDEX(DEFINE_WEIGHTED_ROWS_ALL)

static int64_t weighted_rows(const lac_map_call *c, int64_t lo, int64_t hi, const accumulators *a)
{
    typedef int64_t (*fn)(const lac_map_call *, int64_t, int64_t, const accumulators *);
    static const fn by[3][4] = {BY_INDEX(weighted_rows_f32_, ), BY_INDEX(weighted_rows_f64_, ),
                                BY_INDEX(weighted_rows_f32_, _acc32)};
    return by[a->acc32 ? 2 : c->value_dtype == LAC_FLOAT32 ? 0 : 1][index_kind(c)](c, lo, hi, a);
}

/* Every op, weights, b columns and NaN policy. */
static int64_t map_rows(const lac_map_call *c, int64_t lo, int64_t hi, const accumulators *a, bool atomic)
{
    const lac_map_params *p = &c->params;
    const int64_t b = c->b;
    if (!atomic && p->op == LAC_MAP_SUM && c->value_dtype == LAC_FLOAT32 && p->nan_policy == LAC_NAN_PROPAGATE &&
        !a->wsum && !a->touched && b > 1)
        return sum_rows_wide(c, lo, hi, a);
    if (!atomic && b == 1 && p->nan_policy == LAC_NAN_PROPAGATE &&
        (p->op == LAC_MAP_SUM || p->op == LAC_MAP_MEAN || p->op == LAC_MAP_COUNT))
        return weighted_rows(c, lo, hi, a);
    for (int64_t i = lo; i < hi; i++) {
        int64_t r = lac_map_bridge_at(c, i);
        if ((uint64_t)r >= (uint64_t)c->n) return i;
        double wi = c->weights ? lac_load_real(c->weights, c->value_dtype, i) : 1.0;
        for (int64_t col = 0; col < b; col++) {
            double x;
            int present = lac_map_element_at(c, i, col, wi, &x);
            if (present < 0) return i;
            if (!present) continue;
            int64_t k = r * b + col;
            if (atomic) {
                atomic_fold(p->op, &a->acc[k * a->stride], x);
                if (a->wsum) atomic_add(&a->wsum[k * a->stride], wi + 0.0);
                if (a->touched) __atomic_store_n(&a->touched[k], 1, __ATOMIC_RELAXED);
            } else {
                a->acc[k * a->stride] = lac_map_combine(p->op, a->acc[k * a->stride], x);
                if (a->wsum) a->wsum[k * a->stride] += wi + 0.0;
                if (a->touched) a->touched[k] = 1;
            }
        }
    }
    return -1;
}

/* ------------------------------------------------------------------------ */
/* The pass                                                                  */
/* ------------------------------------------------------------------------ */
static void accumulators_init(const lac_map_call *c, const accumulators *a, int64_t lo, int64_t hi)
{
    if (a->acc32) {
        if (a->wsum32)
            for (int64_t k = lo; k < hi; k++) a->acc32[k * a->stride] = 0.0f, a->wsum32[k * a->stride] = -0.0f;
        else memset(a->acc32 + lo, 0, (size_t)(hi - lo) * sizeof *a->acc32);
        if (a->touched) memset(a->touched + lo, 0, (size_t)(hi - lo));
        return;
    }
    double id = lac_map_identity(c->params.op);
    if (a->stride == 1 && id == 0.0 && !a->wsum) {
        memset(a->acc + lo, 0, (size_t)(hi - lo) * sizeof *a->acc);
        if (a->touched) memset(a->touched + lo, 0, (size_t)(hi - lo));
        return;
    }
    for (int64_t k = lo; k < hi; k++) {
        a->acc[k * a->stride] = id;
        if (a->wsum) a->wsum[k * a->stride] = -0.0;
    }
    if (a->touched) memset(a->touched + lo, 0, (size_t)(hi - lo));
}

static accumulators accumulators_of(const accumulators *all, int copy, int64_t nt)
{
    int64_t st = all->stride;
    accumulators a = {all->acc ? all->acc + (int64_t)copy * nt * st : NULL,
                      all->acc32 ? all->acc32 + (int64_t)copy * nt * st : NULL,
                      all->wsum32 ? all->wsum32 + (int64_t)copy * nt * st : NULL,
                      all->wsum ? all->wsum + (int64_t)copy * nt * st : NULL, st,
                      all->touched ? all->touched + (int64_t)copy * nt : NULL};
    return a;
}

static void accumulators_free(accumulators *a)
{
    free(a->acc);   /* wsum lives in it */
    free(a->acc32);   /* and wsum32 */
    free(a->touched);
    memset(a, 0, sizeof *a);
}

/* Whole cache lines: malloc's large blocks start 16 bytes into a page, which
 * puts every other 32-byte entry (4 float64 columns) across two lines. */
static void *alloc_lines(size_t bytes)
{
    return aligned_alloc(64, (bytes + 63) / 64 * 64);
}

/* copies blocks of nt slots; false (nothing held) when memory runs out. */
static bool accumulators_alloc(accumulators *a, int copies, int64_t nt, bool acc32, bool mean, bool flags)
{
    size_t slots = (size_t)(nt > 0 ? nt : 1) * (size_t)copies;
    memset(a, 0, sizeof *a);
    if (acc32) a->acc32 = alloc_lines(slots * (mean ? 2 : 1) * sizeof(float));
    else a->acc = alloc_lines(slots * (mean ? 2 : 1) * sizeof(double));
    a->stride = mean ? 2 : 1;
    if (mean && a->acc) a->wsum = a->acc + 1;
    if (mean && a->acc32) a->wsum32 = a->acc32 + 1;
    if (flags) a->touched = malloc(slots);
    if ((acc32 ? !a->acc32 : !a->acc) || (mean && !a->wsum && !a->wsum32) || (flags && !a->touched)) {
        accumulators_free(a);
        return false;
    }
    return true;
}

/* T[k] = the sum of the copies' element k, in copy order, rounded once;
 * with an order, slot k holds target order[k]'s sum. */
static void merge_sums(const lac_map_call *c, const accumulators *all, int copies, const int32_t *order, int threads)
{
    const int64_t nt = c->n * c->b;
#pragma omp parallel num_threads(threads)
    {
        int t = omp_get_thread_num(), nth = omp_get_num_threads();
        const int64_t lo = lac_range_start(nt, t, nth), hi = lac_range_start(nt, t + 1, nth);
        double sum[256];
        for (int64_t k0 = lo; k0 < hi; k0 += 256) {
            const int64_t len = hi - k0 < 256 ? hi - k0 : 256;
            for (int copy = 0; copy < copies; copy++) {
                const int64_t base = (int64_t)copy * nt + k0;
                if (all->acc32) {
                    const float *restrict part = all->acc32 + base;
                    if (copy == 0) for (int64_t j = 0; j < len; j++) sum[j] = (double)part[j];
                    else for (int64_t j = 0; j < len; j++) sum[j] += (double)part[j];
                } else {
                    const double *restrict part = all->acc + base;
                    if (copy == 0) for (int64_t j = 0; j < len; j++) sum[j] = part[j];
                    else for (int64_t j = 0; j < len; j++) sum[j] += part[j];
                }
            }
            if (order && c->b == 1) {
                if (c->value_dtype == LAC_FLOAT32)
                    for (int64_t j = 0; j < len; j++) ((float *)c->target)[order[k0 + j]] = (float)sum[j];
                else for (int64_t j = 0; j < len; j++) ((double *)c->target)[order[k0 + j]] = sum[j];
            } else if (order)
                for (int64_t j = 0, k = k0; j < len; j++, k++)
                    lac_map_store(c->target, c->value_dtype, (int64_t)order[k / c->b] * c->b + k % c->b, sum[j]);
            else if (c->value_dtype == LAC_FLOAT32)
                for (int64_t j = 0; j < len; j++) ((float *)c->target)[k0 + j] = (float)sum[j];
            else memcpy((double *)c->target + k0, sum, (size_t)len * sizeof *sum);
        }
    }
}

/* Every target from its slots (target order[s] from slot s, or s itself). */
static void finalize_all(const lac_map_call *c, const accumulators *all, int copies, const int32_t *order, int threads)
{
    const int64_t nt = c->n * c->b, b = c->b;
    const lac_map_op op = c->params.op;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t k = 0; k < nt; k++) {
        double acc = 0.0, wsum = 0.0;
        int touched = all->touched || all->wsum || all->wsum32 ? 0 : -1;
        for (int copy = 0; copy < copies; copy++) {
            int64_t slot = (int64_t)copy * nt + k;
            double part = all->acc32 ? (double)all->acc32[slot * all->stride] : all->acc[slot * all->stride];
            acc = copy == 0 ? part : lac_map_combine(op, acc, part);
            if (all->wsum || all->wsum32) {
                /* -0.0: nothing mapped there; adding it leaves wsum as it is */
                const double w = all->wsum32 ? (double)all->wsum32[slot * all->stride] : all->wsum[slot * all->stride];
                wsum += w;
                touched |= !(w == 0.0 && signbit(w));
            }
            if (all->touched) touched |= all->touched[slot];
        }
        lac_map_finalize(c, order ? (int64_t)order[k / b] * b + k % b : k, acc, wsum, touched);
    }
}

/* Maps rows [lo, hi) in BLOCK_ROWS pieces, stopping early when another
 * thread raised stop; returns the first bad row or -1. */
static int64_t map_range(const lac_map_call *c, int64_t lo, int64_t hi, const accumulators *a, bool atomic, bool fast,
                         int *stop)
{
    int64_t bad = -1;
    for (int64_t block = lo; block < hi && bad < 0; block += BLOCK_ROWS) {
        if (__atomic_load_n(stop, __ATOMIC_RELAXED)) break;
        int64_t end = hi - block > BLOCK_ROWS ? block + BLOCK_ROWS : hi;
        bad = fast ? sum_rows(c, block, end, a, atomic) : map_rows(c, block, end, a, atomic);
    }
    return bad;
}

/* The path a call takes, from its shape and parameters only (never its
 * bridge's values), so that a plan's execute and a one-shot call agree. */
typedef struct {
    bool mean, flags, fast, acc32;
    bool acc32_private;   /* acc32 with private copies (not the shared atomics) */
    double per_copy;   /* bytes of one copy of the accumulators */
    int blocks;        /* deterministic row blocks, 0 when not deterministic */
} pass_shape;

static pass_shape shape_of(const lac_map_call *c)
{
    const lac_map_params *p = &c->params;
    const int64_t nt = c->n * c->b;
    pass_shape sh;
    sh.mean = p->op == LAC_MAP_MEAN;
    sh.flags = lac_map_needs_flags(c) && !sh.mean;   /* MEAN's wsum tells (accumulators) */
    sh.fast = p->op == LAC_MAP_SUM && c->b == 1 && !c->weights && p->nan_policy == LAC_NAN_PROPAGATE && !sh.flags;
    const bool many = c->value_dtype == LAC_FLOAT32 && (double)nt * sizeof(double) > FLOAT64_ACC_MAX_BYTES;
    sh.acc32 = sh.fast && many;
    /* Not deterministic: float32 sources' weighted means and b-column sums
     * (the kernels of weighted_rows and DEFINE_WIDE_ROWS) take float32
     * accumulators too, as the plain sum does: float64 ones are 16 or 8b
     * bytes a target, past the caches, and cost about 1.6-2x onto 500k
     * targets (a weighted sum's 8 bytes cost nothing measurable: it keeps
     * float64). Deterministic calls keep float64 (and their bits). */
    sh.acc32_private = !sh.fast && many && !p->deterministic && p->nan_policy == LAC_NAN_PROPAGATE &&
                       (c->b == 1 ? c->weights && sh.mean : p->op == LAC_MAP_SUM && !sh.flags);
    /* Weighted MEAN's flag byte still counts: which calls fit (and so a
     * deterministic call's bits) stays as it was. */
    const double acc_bytes = sh.acc32 || sh.acc32_private ? sizeof(float) : sizeof(double);
    sh.per_copy = (double)nt * (acc_bytes * (sh.mean ? 2 : 1) + (lac_map_needs_flags(c) ? 1 : 0));
    sh.blocks = p->deterministic ? lac_map_cpu_det_blocks(c->m, c->b) : 0;
    return sh;
}

/* copies private copies of the accumulators are worth it and fit. */
static bool privates_fit(const lac_map_call *c, const pass_shape *sh, int copies)
{
    return (double)copies * sh->per_copy <= PRIVATE_BUDGET_BYTES &&
           (double)copies * (double)c->n * (double)c->b <= PRIVATE_MAX_TARGETS_PER_SOURCE * (double)c->m * (double)c->b;
}

bool lac_map_cpu_det_streams(const lac_map_call *c)
{
    const pass_shape sh = shape_of(c);
    return sh.blocks > 1 && !privates_fit(c, &sh, sh.blocks);
}

lac_status lac_map_cpu(lac_ctx_t ctx, const lac_map_call *c) { return lac_map_cpu_slots(ctx, c, NULL); }

lac_status lac_map_cpu_slots(lac_ctx_t ctx, const lac_map_call *c, const int32_t *order)
{
    const lac_map_params *p = &c->params;
    if (p->deterministic && p->nan_policy == LAC_NAN_ERROR) {
        /* Rule out NaNs in one parallel pass first: without them "error" and
         * "propagate" give the same T, and the pass then takes the same
         * kernels (and bits) as a plan execute, fast path included. */
        LAC_CHECK(lac_map_cpu_report_first_nan(ctx, c));
        lac_map_call clean = *c;
        clean.params.nan_policy = LAC_NAN_PROPAGATE;
        return lac_map_cpu_slots(ctx, &clean, order);
    }
    const int64_t m = c->m, nt = c->n * c->b;
    const pass_shape sh = shape_of(c);
    const bool fast = sh.fast;
    int threads = lac_threads(ctx);
    if ((double)m * (double)c->b < LAC_MAP_CPU_SERIAL_BELOW) threads = 1;

    /* Private accumulators per thread (deterministic: per fixed row block),
     * or one shared scratch with atomics. */
    const int blocks = sh.blocks;
    if (blocks > 1 && !privates_fit(c, &sh, blocks)) {
        if (order) return lac_error(ctx, LAC_ERR_INTERNAL, "map: a plan's slot order reached the streaming pass");
        return lac_map_cpu_deterministic(ctx, c);
    }
    bool privates = blocks > 0 || threads == 1 || privates_fit(c, &sh, threads);
    accumulators all;
    if (!accumulators_alloc(&all, blocks > 0 ? blocks : privates ? threads : 1, nt,
                            sh.acc32 || (sh.acc32_private && privates), sh.mean, sh.flags)) {
        /* Not the streaming pass: its bits differ, and a deterministic T must
         * not depend on the memory free at the time. */
        if (blocks > 0)
            return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "map: cannot allocate %d x %.1f MB of deterministic accumulators",
                             blocks, sh.per_copy / 1e6);
        if (!privates || threads == 1 || !accumulators_alloc(&all, 1, nt, sh.acc32, sh.mean, sh.flags))
            return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "map: cannot allocate %.1f MB of accumulators", sh.per_copy / 1e6);
        lac_log(ctx, LAC_LOG_DEBUG, "map: private accumulators did not fit, using shared atomics");
        privates = false;
    }
    const bool atomic = !privates && threads > 1;
    lac_log(ctx, LAC_LOG_DEBUG, "map cpu: m %lld, n %lld, b %lld, %d thread(s), %s%s", (long long)m,
            (long long)c->n, (long long)c->b, threads,
            blocks > 0 ? "fixed row blocks" : atomic ? "shared atomics" : "private accumulators",
            order ? ", targets in the plan's order" : "");

    int64_t first_bad = -1;
    int stop = 0, team = 1;
#pragma omp parallel num_threads(threads)
    {
        int t = omp_get_thread_num(), nth = omp_get_num_threads();
        if (t == 0) team = nth;   /* OpenMP may give fewer threads than asked */
        int64_t bad = -1;
        if (blocks > 0) {
            /* Deterministic: row block j folds into copy j from the identity,
             * whichever thread runs it (first touch by that thread). */
            for (int j = (int)lac_range_start(blocks, t, nth); j < lac_range_start(blocks, t + 1, nth) && bad < 0; j++) {
                accumulators mine = accumulators_of(&all, j, nt);
                accumulators_init(c, &mine, 0, nt);
                bad = map_range(c, lac_range_start(m, j, blocks), lac_range_start(m, j + 1, blocks), &mine, false,
                                fast, &stop);
            }
        } else {
            /* Each private copy is initialised by its own thread (first touch). */
            accumulators mine = accumulators_of(&all, privates ? t : 0, nt);
            if (privates) accumulators_init(c, &mine, 0, nt);
            else accumulators_init(c, &mine, lac_range_start(nt, t, nth), lac_range_start(nt, t + 1, nth));
#pragma omp barrier
            bad = map_range(c, lac_range_start(m, t, nth), lac_range_start(m, t + 1, nth), &mine, atomic, fast,
                            &stop);
        }
        if (bad >= 0) {
            __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
            lac_map_cpu_lower_first(&first_bad, bad);
        }
    }

    lac_status st = LAC_SUCCESS;
    if (first_bad >= 0) {
        /* T is untouched; name the smallest offending position of any kind. */
        st = lac_map_report_flagged(ctx, c, first_bad);
        accumulators_free(&all);
        return st;
    }

    /* Merge the copies in thread (block) order and write T. */
    const int copies = blocks > 0 ? blocks : privates ? team : 1;
    if (p->op == LAC_MAP_SUM && !p->accumulate && !all.touched)
        /* Plain sums: a loop the compiler vectorises (the general one
         * costs as much as the copies it reads). */
        merge_sums(c, &all, copies, order, threads);
    else finalize_all(c, &all, copies, order, threads);
    accumulators_free(&all);
    return LAC_SUCCESS;
}
