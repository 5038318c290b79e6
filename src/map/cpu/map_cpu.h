/* What the CPU map paths share (one-shot and deterministic in map_cpu.c, the
 * deterministic fallback in map_det_cpu.c, planned in map_plan_cpu.c) beyond
 * the per-element arithmetic of map/map_arith.h. Every path
 * accumulates in float64 (but the float32 SUM fast path onto many targets, see
 * map_cpu.c) and rounds once when it writes T. */
#ifndef LACUNA_MAP_CPU_MAP_CPU_H
#define LACUNA_MAP_CPU_MAP_CPU_H

#include "map/map_arith.h"
#include "map/map_backend.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

/* *first = min(*first, bad) across the threads of a parallel pass (-1: none yet). */
static inline void lac_map_cpu_lower_first(int64_t *first, int64_t bad)
{
    _Pragma("omp critical(lac_map_cpu_first_bad)")
    if (*first < 0 || bad < *first) *first = bad;
}

/* Finds the first NaN of source or weights in row order and reports the
 * smallest offending position of any kind up to it (lac_map_report_flagged);
 * LAC_SUCCESS when there is no NaN. */
lac_status lac_map_cpu_report_first_nan(lac_ctx_t ctx, const lac_map_call *c);

/* Below this many elements (m * b) one thread does it all (no fork/join cost). */
#define LAC_MAP_CPU_SERIAL_BELOW (1 << 15)
/* Deterministic calls fold this many fixed row blocks, each into its own
 * accumulators from the identity, and merge them in block order: the same
 * work as the one-shot pass whatever the thread count (6 splits evenly over
 * 1, 2, 3 and 6 threads). */
#define LAC_MAP_CPU_DET_BLOCKS 6

/* The row blocks of a deterministic call: a function of its shape only, so T
 * does not depend on the thread count (row block j is [range_start(m, j, k),
 * range_start(m, j + 1, k))). Small calls are one block: a serial loop. */
static inline int lac_map_cpu_det_blocks(int64_t m, int64_t b)
{
    return (double)m * (double)b < LAC_MAP_CPU_SERIAL_BELOW ? 1 : LAC_MAP_CPU_DET_BLOCKS;
}

/* Deterministic map when fixed-block accumulators would not fit (far more
 * targets than rows, or memory): owner-computes streaming (map_det_cpu.c). */
lac_status lac_map_cpu_deterministic(lac_ctx_t ctx, const lac_map_call *c);

/* The CPU backend's plan (plan->state): the bridge checked once and copied in
 * the narrowest encoding that holds every target (map_backend.h: uint16 up to
 * 65536 targets, packed 24-bit up to 2^24, then int32, int64), every entry
 * known to be in [0, n). When the build finds a few targets taking most rows
 * (Zipf), the copy names accumulator slots instead, numbered by descending
 * row count (slot s holds target order[s]): the hot targets then share a few
 * cache lines. An execute is a one-shot pass over that copy without range
 * checks (map_plan_cpu.c). */
typedef struct {
    void *bridge;             /* m entries of bridge_dtype */
    lac_dtype bridge_dtype;   /* LAC_MAP_INDEX_U16, LAC_MAP_INDEX_U24, LAC_INT32 or LAC_INT64 */
    int32_t *order;           /* n targets by slot, or NULL (entries are targets) */
} lac_map_cpu_plan;

/* The one-shot pass (lac_map_cpu) over a call whose bridge holds slots
 * (a plan's copy, bridge_checked), slot s accumulating target order[s]
 * (NULL: slots are targets): each target's rows fold in the same
 * order into the same precision, so T has the bits of lac_map_cpu over the
 * bridge of targets. */
lac_status lac_map_cpu_slots(lac_ctx_t ctx, const lac_map_call *call, const int32_t *order);
/* Whether a deterministic call takes the streaming pass of map_det_cpu.c
 * (whose owned ranges are targets, not slots). */
bool lac_map_cpu_det_streams(const lac_map_call *call);

/* The table's entries (map_cpu.c, map_plan_cpu.c). */
lac_status lac_map_cpu(lac_ctx_t ctx, const lac_map_call *call);
lac_status lac_map_cpu_plan_build(lac_ctx_t ctx, lac_map_plan_t plan, const lac_map_call *call);
lac_status lac_map_cpu_plan_execute(lac_ctx_t ctx, lac_map_plan_t plan, const lac_map_call *call);
void lac_map_cpu_plan_release(lac_map_plan_t plan);

#endif
