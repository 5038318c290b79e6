/* The contract between the map front end (src/map/map.c: argument checks and
 * dispatch) and its backends (src/map/map_cpu*.c, src/backend/cuda/map_*.cu). */
#ifndef LACUNA_MAP_INTERNAL_H
#define LACUNA_MAP_INTERNAL_H

#include "core/internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A checked call: shapes agree, dtypes are valid, all arrays share `memory`,
 * MEAN does not accumulate. What is NOT yet checked, because it costs a pass over
 * the data that backends fuse into their own: bridge values in [0, n) (unless
 * bridge_checked) and the NaN policy. A backend must detect those itself, leave target untouched, and report
 * the smallest offending position with lac_map_report_bad_index /
 * lac_map_report_nan. */
typedef struct {
    lac_map_params params;
    const void *source;    /* m x b values, row-major */
    const void *bridge;    /* m indices */
    const void *weights;   /* m values or NULL */
    void *target;          /* n x b values, row-major */
    lac_dtype value_dtype; /* LAC_FLOAT32 or LAC_FLOAT64 */
    lac_dtype index_dtype; /* LAC_INT32 or LAC_INT64 */
    int64_t m;             /* sources (bridge length) */
    int64_t n;             /* targets */
    int64_t b;             /* columns sharing the bridge, >= 1 */
    lac_memory memory;
    int bridge_checked;    /* every bridge entry is known to be in [0, n) (a plan's copy) */
} lac_map_call;

/* The plan: the bridge checked once. The CPU backend keeps a host copy of it in
 * the narrowest index type that holds every target (int32 when n <= INT32_MAX),
 * all entries known to be in [0, n); an execute is the deterministic streaming
 * pass over that copy. The CUDA backend keeps its own device-side plan. */
struct lac_map_plan {
    int64_t m, n;
    lac_backend backend;      /* which backend built it and executes it */
    void *bridge;             /* CPU: host, m checked entries of bridge_dtype; else NULL */
    lac_dtype bridge_dtype;   /* CPU: LAC_INT32 when n <= INT32_MAX, else LAC_INT64 */
    lac_dtype order_dtype;    /* CUDA: the index type of its device order (set by it) */
    void *device;             /* the CUDA backend's copy, or NULL */
};

/* Reads bridge[i] as int64 whatever the index dtype. */
static inline int64_t lac_map_bridge_at(const lac_map_call *c, int64_t i)
{
    return c->index_dtype == LAC_INT32 ? (int64_t)((const int32_t *)c->bridge)[i]
                                       : ((const int64_t *)c->bridge)[i];
}

/* Message for the first out-of-range bridge entry; returns LAC_ERR_RANGE. */
lac_status lac_map_report_bad_index(lac_ctx_t ctx, int64_t position, int64_t value, int64_t n);
/* Message for the first NaN (source row/column or weight); returns LAC_ERR_VALUE. */
lac_status lac_map_report_nan(lac_ctx_t ctx, const char *what, int64_t row, int64_t col);

/* Host-side scan for the smallest bad position of a host call: a bridge entry
 * outside [0, n), or (with LAC_NAN_ERROR) a NaN in source or weights. Returns
 * LAC_SUCCESS when there is none. Shared by every backend's error path. */
lac_status lac_map_scan_host(lac_ctx_t ctx, const lac_map_call *call);

/* CPU backend (src/map/map_cpu*.c). */
lac_status lac_map_cpu(lac_ctx_t ctx, const lac_map_call *call);
/* Fills plan->bridge with a checked, narrowed copy of a host bridge (O(m)). */
lac_status lac_map_plan_build_cpu(lac_ctx_t ctx, lac_map_plan_t plan, const lac_map_call *call);
lac_status lac_map_plan_execute_cpu(lac_ctx_t ctx, lac_map_plan_t plan, const lac_map_call *call);

#ifdef __cplusplus
}
#endif
#endif
