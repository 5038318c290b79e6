/* map plans on the CPU backend: build (check the bridge once and keep a
 * narrowed copy) and execute (the deterministic one-shot pass over that copy).
 *
 * Build: one parallel pass over the bridge that range-checks every entry and
 * copies it into the narrowest encoding that holds every target: 2 bytes an
 * entry up to 65536 targets, 3 up to 2^24, 4 up to 2^31, else 8 (an int32
 * bridge onto 500k targets streams 25% fewer bytes an execute, an int64 one
 * 62% fewer).
 *
 * Execute: the deterministic one-shot call (map_cpu.c: fixed row blocks,
 * merged in block order) on the checked copy, with no range checks: the same
 * kernels and bits as a deterministic lac_map with the same parameters,
 * whatever the thread count. Why not sort the bridge into per-target segments
 * and reduce them in parallel: gathering S in segment order misses the cache
 * on nearly every row (5-8x a serial loop on 40M rows), and the sort needs
 * O(m + n) memory besides. */
#include "map/cpu/map_cpu.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* NaN scan (LAC_NAN_ERROR)                                                   */
/* ------------------------------------------------------------------------ */
static bool row_has_nan(const lac_map_call *c, int64_t i)
{
    if (c->weights && isnan(lac_load_real(c->weights, c->value_dtype, i))) return true;
    for (int64_t col = 0; col < c->b; col++)
        if (isnan(lac_load_real(c->source, c->value_dtype, i * c->b + col))) return true;
    return false;
}

lac_status lac_map_cpu_report_first_nan(lac_ctx_t ctx, const lac_map_call *c)
{
    int64_t first = -1;
    int threads = c->m * c->b < LAC_MAP_CPU_SERIAL_BELOW ? 1 : lac_threads(ctx);
#pragma omp parallel num_threads(threads)
    {
        int t = omp_get_thread_num(), nth = omp_get_num_threads();
        int64_t hi = lac_range_start(c->m, t + 1, nth), mine = -1;
        for (int64_t i = lac_range_start(c->m, t, nth); i < hi; i++)
            if (row_has_nan(c, i)) {
                mine = i;
                break;
            }
        if (mine >= 0) lac_map_cpu_lower_first(&first, mine);
    }
    /* The rescan names the smallest offending position of any kind (a bad
     * bridge entry before the NaN, in a one-shot call). */
    return first < 0 ? LAC_SUCCESS : lac_map_report_flagged(ctx, c, first);
}

/* ------------------------------------------------------------------------ */
/* Build                                                                     */
/* ------------------------------------------------------------------------ */
/* Targets renumbered by row count (map_cpu.h): learnt when the accumulators
 * are past a core's L2 (float32 fast path: 1 MB) and the HOT_TARGETS
 * most-mapped targets take HOT_MIN_SHARE of the rows and HOT_OVER_UNIFORM
 * times their share of the targets (Zipf), whose scattered
 * lines would otherwise crowd the cache. Uniform bridges have no such
 * targets and keep target ids. */
#define ORDER_MIN_TARGETS (1 << 18)
#define ORDER_MAX_TARGETS (1 << 24)   /* a thread's counts: 64 MB at most */
#define HOT_TARGETS (1 << 16)
#define HOT_MIN_SHARE 0.5
#define HOT_OVER_UNIFORM 4.0
#define COUNT_CAP (1 << 16)   /* counts sorted exactly up to this */

/* Stores r as entry i of copy. */
static inline void store_entry(void *copy, lac_dtype kept, int64_t i, int64_t r)
{
    if (kept == LAC_MAP_INDEX_U16) ((uint16_t *)copy)[i] = (uint16_t)r;
    else if (kept == LAC_MAP_INDEX_U24) {
        uint8_t *e = (uint8_t *)copy + 3 * i;
        e[0] = (uint8_t)r, e[1] = (uint8_t)(r >> 8), e[2] = (uint8_t)(r >> 16);
    } else if (kept == LAC_INT32) ((int32_t *)copy)[i] = (int32_t)r;
    else ((int64_t *)copy)[i] = r;
}

/* Entry i of copy, reading its own bytes only (threads rewrite neighbours). */
static inline int64_t load_entry(const void *copy, lac_dtype kept, int64_t i)
{
    if (kept == LAC_MAP_INDEX_U16) return ((const uint16_t *)copy)[i];
    if (kept == LAC_MAP_INDEX_U24) {
        const uint8_t *e = (const uint8_t *)copy + 3 * i;
        return (int64_t)e[0] | (int64_t)e[1] << 8 | (int64_t)e[2] << 16;
    }
    if (kept == LAC_INT32) return ((const int32_t *)copy)[i];
    return ((const int64_t *)copy)[i];
}

/* Copies rows [lo, hi) of the bridge into copy in the encoding `kept`,
 * counting each target's rows in counts when given; returns the first row
 * outside [0, n), or -1. */
static int64_t copy_checked(const lac_map_call *c, int64_t lo, int64_t hi, void *copy, lac_dtype kept, uint32_t *counts)
{
    const int64_t n = c->n;
    for (int64_t i = lo; i < hi; i++) {
        int64_t r = lac_map_bridge_at(c, i);
        if ((uint64_t)r >= (uint64_t)n) return i;
        store_entry(copy, kept, i, r);
        if (counts) counts[r]++;
    }
    return -1;
}

/* The narrowest encoding that holds every slot below `slots`, and its bytes
 * per entry. Each execute streams the copy once: at 40M rows onto 500k
 * targets a 3-byte entry instead of 4 saves 40 MB a call. */
static lac_dtype narrowest(int64_t slots, size_t *entry)
{
    if (slots <= 1 << 16) return *entry = 2, LAC_MAP_INDEX_U16;
    if (slots <= 1 << 24) return *entry = 3, LAC_MAP_INDEX_U24;
    if (slots <= INT32_MAX) return *entry = 4, LAC_INT32;
    return *entry = 8, LAC_INT64;
}

/* From the rows' counts: the targets by descending count (ties by id, counts
 * from COUNT_CAP up as one), when the HOT_TARGETS first take HOT_MIN_SHARE
 * of the rows; NULL when they do not or memory runs out (the plan works
 * without). counts is overwritten with each target's slot. */
static int32_t *order_by_count(lac_ctx_t ctx, uint32_t *counts, int64_t n, int64_t m)
{
    int64_t *start = calloc(COUNT_CAP + 2, sizeof *start);
    if (!start) return NULL;
    for (int64_t r = 0; r < n; r++) start[COUNT_CAP - (counts[r] < COUNT_CAP ? counts[r] : COUNT_CAP) + 1]++;
    for (int64_t v = 1; v <= COUNT_CAP + 1; v++) start[v] += start[v - 1];
    /* start[COUNT_CAP - c]: the first slot of the targets counted c */
    double hot_rows = 0.0;
    for (int64_t r = 0; r < n; r++)
        if (start[COUNT_CAP - (counts[r] < COUNT_CAP ? counts[r] : COUNT_CAP)] < HOT_TARGETS) hot_rows += counts[r];
    /* Skewed: well above both the share and what as many targets would take
     * of a uniform bridge (few rows a target spread unevenly by chance). */
    const double share = hot_rows / (double)m;
    const bool skewed = share >= HOT_MIN_SHARE && share >= HOT_OVER_UNIFORM * (double)HOT_TARGETS / (double)n;
    int32_t *order = skewed ? malloc((size_t)n * sizeof *order) : NULL;
    if (order) {
        for (int64_t r = 0; r < n; r++) {
            int64_t s = start[COUNT_CAP - (counts[r] < COUNT_CAP ? counts[r] : COUNT_CAP)]++;
            order[s] = (int32_t)r;
            counts[r] = (uint32_t)s;
        }
        lac_log(ctx, LAC_LOG_DEBUG, "map plan (cpu): the %d most-mapped targets take %.0f%% of the rows: targets renumbered",
                HOT_TARGETS, 100.0 * hot_rows / (double)m);
    }
    free(start);
    return order;
}

lac_status lac_map_cpu_plan_build(lac_ctx_t ctx, lac_map_plan_t plan, const lac_map_call *c)
{
    const int64_t m = c->m, n = c->n;
    int threads = m < LAC_MAP_CPU_SERIAL_BELOW ? 1 : lac_threads(ctx);
    /* Count the rows of each target when renumbering might pay (each thread its
     * own counts, summed into the first). */
    uint32_t *counts = NULL;
    if (n >= ORDER_MIN_TARGETS && n <= ORDER_MAX_TARGETS && m >= n && m <= UINT32_MAX)
        counts = calloc((size_t)threads * (size_t)n, sizeof *counts);
    size_t entry;
    lac_dtype kept_dtype = narrowest(n, &entry);
    lac_map_cpu_plan *kept = lac_calloc(ctx, 1, sizeof *kept);
    /* 4 spare bytes: a 3-byte entry is read as 4 */
    void *copy = lac_malloc(ctx, (size_t)m * entry + 4);
    if (!copy || !kept) {
        free(copy), free(kept), free(counts);
        return LAC_ERR_OUT_OF_MEMORY;
    }
    memset((uint8_t *)copy + (size_t)m * entry, 0, 4);

    int64_t first_bad = -1;
#pragma omp parallel num_threads(threads)
    {
        int t = omp_get_thread_num(), nth = omp_get_num_threads();
        int64_t bad = copy_checked(c, lac_range_start(m, t, nth), lac_range_start(m, t + 1, nth), copy, kept_dtype,
                                   counts ? counts + (size_t)t * (size_t)n : NULL);
        if (bad >= 0) lac_map_cpu_lower_first(&first_bad, bad);
    }
    if (first_bad >= 0) {
        free(copy), free(kept), free(counts);
        /* The smallest offending position, reported as a one-shot call does. */
        return lac_map_report_flagged(ctx, c, first_bad);
    }
    if (counts) {
        for (int t = 1; t < threads; t++)
            for (int64_t r = 0; r < n; r++) counts[r] += counts[(size_t)t * (size_t)n + r];
        kept->order = order_by_count(ctx, counts, n, m);
        if (kept->order) {
            /* Entries now name slots (counts holds each target's). */
#pragma omp parallel for num_threads(threads) schedule(static)
            for (int64_t i = 0; i < m; i++) store_entry(copy, kept_dtype, i, counts[load_entry(copy, kept_dtype, i)]);
        }
        free(counts);
        if (!kept->order && kept_dtype == LAC_MAP_INDEX_U24) {
            /* Spread targets: the pass waits on random updates past the L2,
             * and a 3-byte entry's unpacking then costs more than its saved
             * byte (2-6% at 40M rows onto 500k): keep 4 bytes. */
            int32_t *wide = malloc((size_t)m * sizeof *wide);   /* optional: u24 works */
            if (wide) {
#pragma omp parallel for num_threads(threads) schedule(static)
                for (int64_t i = 0; i < m; i++) wide[i] = (int32_t)load_entry(copy, kept_dtype, i);
                free(copy);
                copy = wide;
                kept_dtype = LAC_INT32;
            }
        }
    }
    kept->bridge = copy;
    kept->bridge_dtype = kept_dtype;
    plan->state = kept;
    return LAC_SUCCESS;
}

/* ------------------------------------------------------------------------ */
/* Execute                                                                   */
/* ------------------------------------------------------------------------ */
/* A deterministic execute whose shape takes the streaming pass, which owns
 * ranges of targets, not slots: over a copy of the bridge in target ids. */
static lac_status execute_in_targets(lac_ctx_t ctx, const lac_map_cpu_plan *kept, const lac_map_call *planned)
{
    const int64_t m = planned->m;
    const bool narrow = planned->n <= INT32_MAX;
    void *ids = lac_malloc(ctx, (size_t)m * (narrow ? sizeof(int32_t) : sizeof(int64_t)));
    if (!ids) return LAC_ERR_OUT_OF_MEMORY;
    int threads = m < LAC_MAP_CPU_SERIAL_BELOW ? 1 : lac_threads(ctx);
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t i = 0; i < m; i++) {
        int64_t r = lac_map_bridge_at(planned, i);
        r = kept->order[r];
        if (narrow) ((int32_t *)ids)[i] = (int32_t)r;
        else ((int64_t *)ids)[i] = r;
    }
    lac_map_call call = *planned;
    call.bridge = ids;
    call.index_dtype = narrow ? LAC_INT32 : LAC_INT64;
    lac_status st = lac_map_cpu(ctx, &call);
    free(ids);
    return st;
}

lac_status lac_map_cpu_plan_execute(lac_ctx_t ctx, lac_map_plan_t plan, const lac_map_call *c)
{
    const lac_map_cpu_plan *kept = plan->state;
    lac_map_call planned = *c;
    planned.bridge = kept->bridge;
    planned.index_dtype = kept->bridge_dtype;
    planned.bridge_checked = 1;
    if (kept->order && planned.params.deterministic && lac_map_cpu_det_streams(&planned))
        return execute_in_targets(ctx, kept, &planned);
    return lac_map_cpu_slots(ctx, &planned, kept->order);
}

void lac_map_cpu_plan_release(lac_map_plan_t plan)
{
    lac_map_cpu_plan *kept = plan->state;
    if (kept) free(kept->bridge), free(kept->order);
    free(kept);
    plan->state = NULL;
}

const lac_map_backend lac_map_cpu_backend = {
    "cpu",
    lac_map_cpu,
    lac_map_cpu_plan_build,
    lac_map_cpu_plan_execute,
    lac_map_cpu_plan_release,
};
