/* Deterministic map on the CPU when the fixed row blocks of map_cpu.c would
 * need too many copies of the accumulators (far more targets than rows, or
 * past the memory budget): every thread owns a contiguous range of targets and
 * streams all the rows in order, folding those that map into its range in
 * float64. Each target's rows are thus added in ascending row order whatever
 * the thread count: the same bits as a serial float64 loop. Whether a call
 * comes here depends on its shape only, so a plan execute and a one-shot call
 * with the same parameters still agree bit for bit.
 *
 * Streaming reads S and R in order once per thread, with no extra memory but
 * the n x b accumulators, so it also works on memory-mapped inputs larger than
 * memory. Threads walk the rows in lockstep chunks so that each chunk comes
 * from memory (or disk) once and is then shared through the cache. The price:
 * each thread reads every row, so the pass costs about one serial pass
 * whatever the thread count. */
#include "map/cpu/map_cpu.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* Rows all threads finish before any starts the next chunk. */
#define CHUNK_ROWS (1 << 22)
/* Rows outside a thread's targets land in one of these slots, so that the
 * common loop needs no branch (a 50% unpredictable one with two threads). */
#define SPARE_SLOTS 8

/* SUM, one column, no weights, NaN propagated: branch-free (the compiler
 * turns a conditional pointer into a branch, so the slot is picked with a
 * mask). own has span + SPARE_SLOTS entries: the thread's targets, then the
 * spares. */
#define DEFINE_OWNED_SUM(name, VT, IT)                                                                  \
    static int64_t name(const VT *S, const IT *R, int64_t lo, int64_t hi, int64_t n, bool checked,      \
                        int64_t first, int64_t span, double *own)                                       \
    {                                                                                                   \
        for (int64_t i = lo; i < hi; i++) {                                                             \
            int64_t r = (int64_t)R[i];                                                                  \
            if (!checked && (uint64_t)r >= (uint64_t)n) return i;                                       \
            uint64_t offset = (uint64_t)(r - first);                                                    \
            uint64_t mine = -(uint64_t)(offset < (uint64_t)span);                                       \
            uint64_t spare = (uint64_t)span + ((uint64_t)i & (SPARE_SLOTS - 1));                        \
            own[(offset & mine) | (spare & ~mine)] += (double)S[i];                                     \
        }                                                                                               \
        return -1;                                                                                      \
    }
DEFINE_OWNED_SUM(owned_sum_f32_i32, float, int32_t)
DEFINE_OWNED_SUM(owned_sum_f32_i64, float, int64_t)
DEFINE_OWNED_SUM(owned_sum_f64_i32, double, int32_t)
DEFINE_OWNED_SUM(owned_sum_f64_i64, double, int64_t)

static int64_t owned_sum(const lac_map_call *c, int64_t lo, int64_t hi, int64_t first, int64_t span, double *own)
{
    bool i32 = c->index_dtype == LAC_INT32, checked = c->bridge_checked;
    if (c->value_dtype == LAC_FLOAT32)
        return i32 ? owned_sum_f32_i32(c->source, c->bridge, lo, hi, c->n, checked, first, span, own)
                   : owned_sum_f32_i64(c->source, c->bridge, lo, hi, c->n, checked, first, span, own);
    return i32 ? owned_sum_f64_i32(c->source, c->bridge, lo, hi, c->n, checked, first, span, own)
               : owned_sum_f64_i64(c->source, c->bridge, lo, hi, c->n, checked, first, span, own);
}

/* Every op, weights, b columns, NaN policy; targets [first, first + span). */
static int64_t owned_rows(const lac_map_call *c, int64_t lo, int64_t hi, int64_t first, int64_t span, double *acc,
                          double *wsum, uint8_t *touched)
{
    const lac_map_params *p = &c->params;
    const int64_t b = c->b;
    for (int64_t i = lo; i < hi; i++) {
        int64_t r = lac_map_bridge_at(c, i);
        if (!c->bridge_checked && (uint64_t)r >= (uint64_t)c->n) return i;
        bool mine = (uint64_t)(r - first) < (uint64_t)span;
        /* Under LAC_NAN_ERROR every thread checks every row, so that all
         * agree on where the pass stops. */
        if (!mine && p->nan_policy != LAC_NAN_ERROR) continue;
        double wi = c->weights ? lac_load_real(c->weights, c->value_dtype, i) : 1.0;
        for (int64_t col = 0; col < b; col++) {
            double x;
            int present = lac_map_element_at(c, i, col, wi, &x);
            if (present < 0) return i;
            if (!present || !mine) continue;
            int64_t k = r * b + col;
            acc[k] = lac_map_combine(p->op, acc[k], x);
            if (wsum) wsum[k] += wi;
            if (touched) touched[k] = 1;
        }
    }
    return -1;
}

lac_status lac_map_cpu_deterministic(lac_ctx_t ctx, const lac_map_call *c)
{
    const lac_map_params *p = &c->params;
    const int64_t m = c->m, n = c->n, nt = n * c->b;
    const bool flags = lac_map_needs_flags(c);
    /* The branch-free loop reads caller-typed bridges; a plan's narrower
     * copy goes through owned_rows (same order, same bits). */
    const bool typed = c->index_dtype == LAC_INT32 || c->index_dtype == LAC_INT64;
    const bool fast = typed && p->op == LAC_MAP_SUM && c->b == 1 && !c->weights && p->nan_policy == LAC_NAN_PROPAGATE &&
                      !flags;
    int threads = lac_threads(ctx);
    if ((double)m * (double)c->b < LAC_MAP_CPU_SERIAL_BELOW) threads = 1;
    if (threads > n) threads = n > 0 ? (int)n : 1;

    size_t slots = (size_t)(nt > 0 ? nt : 1);
    double *acc = lac_malloc(ctx, slots * sizeof *acc);
    double *wsum = acc && p->op == LAC_MAP_MEAN ? lac_malloc(ctx, slots * sizeof *wsum) : NULL;
    uint8_t *touched = acc && flags ? lac_malloc(ctx, slots) : NULL;
    if (!acc || (p->op == LAC_MAP_MEAN && !wsum) || (flags && !touched)) {
        free(acc), free(wsum), free(touched);
        return LAC_ERR_OUT_OF_MEMORY;
    }

    int64_t first_bad = -1;
    int stop = 0;
#pragma omp parallel num_threads(threads)
    {
        int t = omp_get_thread_num(), nth = omp_get_num_threads();
        int64_t first = lac_range_start(n, t, nth), span = lac_range_start(n, t + 1, nth) - first;
        double id = lac_map_identity(p->op);
        for (int64_t k = first * c->b; k < (first + span) * c->b; k++) {
            acc[k] = id;
            if (wsum) wsum[k] = 0.0;
            if (touched) touched[k] = 0;
        }
        /* The fast path adds into its own block (targets + spares), copied
         * into acc at the end; a thread that cannot get one uses the
         * general loop on acc (same order, same bits). */
        double *own = fast ? calloc((size_t)span + SPARE_SLOTS, sizeof *own) : NULL;
        for (int64_t lo = 0; lo < m; lo += CHUNK_ROWS) {
            int64_t hi = m - lo > CHUNK_ROWS ? lo + CHUNK_ROWS : m;
            int64_t bad = own ? owned_sum(c, lo, hi, first, span, own)
                              : owned_rows(c, lo, hi, first, span, acc, wsum, touched);
            if (bad >= 0) {
                __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
                lac_map_cpu_lower_first(&first_bad, bad);
            }
            /* Lockstep: the chunk is shared through the cache, and every
             * thread sees the same stop flag after the barrier. */
#pragma omp barrier
            if (__atomic_load_n(&stop, __ATOMIC_RELAXED)) break;
        }
        if (own) memcpy(acc + first, own, (size_t)span * sizeof *own);
        free(own);
    }

    lac_status st = LAC_SUCCESS;
    if (first_bad >= 0) {
        /* T is untouched; name the smallest offending position of any kind. */
        st = lac_map_report_flagged(ctx, c, first_bad);
    } else {
#pragma omp parallel for num_threads(threads) schedule(static)
        for (int64_t k = 0; k < nt; k++)
            lac_map_finalize(c, k, acc[k], wsum ? wsum[k] : 0.0, touched ? touched[k] : -1);
    }
    free(acc);
    free(wsum);
    free(touched);
    return st;
}
