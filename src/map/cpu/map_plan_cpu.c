/* map plans on the CPU backend: build (check the bridge once and keep a
 * narrowed copy) and execute (the deterministic one-shot pass over that copy).
 *
 * Build: one parallel pass over the bridge that range-checks every entry and
 * copies it into the narrowest index type that holds every target (int32 when
 * n <= INT32_MAX, halving an int64 bridge and the bytes each execute streams).
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
/* Copies rows [lo, hi) of the bridge into copy (narrowed to int32 when
 * narrow); returns the first row outside [0, n), or -1. */
static int64_t copy_checked(const lac_map_call *c, int64_t lo, int64_t hi, void *copy, bool narrow)
{
    const int64_t n = c->n;
    for (int64_t i = lo; i < hi; i++) {
        int64_t r = lac_map_bridge_at(c, i);
        if ((uint64_t)r >= (uint64_t)n) return i;
        if (narrow) ((int32_t *)copy)[i] = (int32_t)r;
        else ((int64_t *)copy)[i] = r;
    }
    return -1;
}

lac_status lac_map_cpu_plan_build(lac_ctx_t ctx, lac_map_plan_t plan, const lac_map_call *c)
{
    const int64_t m = c->m;
    const bool narrow = c->n <= INT32_MAX;
    size_t entry = narrow ? sizeof(int32_t) : sizeof(int64_t);
    void *copy = lac_malloc(ctx, (size_t)(m > 0 ? m : 1) * entry);
    if (!copy) return LAC_ERR_OUT_OF_MEMORY;

    int threads = m < LAC_MAP_CPU_SERIAL_BELOW ? 1 : lac_threads(ctx);
    int64_t first_bad = -1;
#pragma omp parallel num_threads(threads)
    {
        int t = omp_get_thread_num(), nth = omp_get_num_threads();
        int64_t bad = copy_checked(c, lac_range_start(m, t, nth), lac_range_start(m, t + 1, nth), copy, narrow);
        if (bad >= 0) {
            lac_map_cpu_lower_first(&first_bad, bad);
        }
    }
    if (first_bad >= 0) {
        free(copy);
        /* The smallest offending position, reported as a one-shot call does. */
        return lac_map_report_flagged(ctx, c, first_bad);
    }
    lac_map_cpu_plan *kept = lac_malloc(ctx, sizeof *kept);
    if (!kept) {
        free(copy);
        return LAC_ERR_OUT_OF_MEMORY;
    }
    kept->bridge = copy;
    kept->bridge_dtype = narrow ? LAC_INT32 : LAC_INT64;
    plan->state = kept;
    return LAC_SUCCESS;
}

/* ------------------------------------------------------------------------ */
/* Execute                                                                   */
/* ------------------------------------------------------------------------ */
lac_status lac_map_cpu_plan_execute(lac_ctx_t ctx, lac_map_plan_t plan, const lac_map_call *c)
{
    const lac_map_cpu_plan *kept = plan->state;
    lac_map_call planned = *c;
    planned.bridge = kept->bridge;
    planned.index_dtype = kept->bridge_dtype;
    planned.bridge_checked = 1;
    return lac_map_cpu(ctx, &planned);
}

void lac_map_cpu_plan_release(lac_map_plan_t plan)
{
    lac_map_cpu_plan *kept = plan->state;
    if (kept) free(kept->bridge);
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
