/* The contract between the map front end (src/map/map.c: argument checks, one
 * backend table picked per call) and its backends: the CPU one (src/map/cpu/)
 * and the CUDA one (src/backend/cuda/map/, handed out by the gateway). Backends
 * include this, core and their own headers, nothing of the front end; the
 * fault reporting they share lives below the front end (src/map/map_fault.c). */
#ifndef LACUNA_MAP_BACKEND_H
#define LACUNA_MAP_BACKEND_H

#include "core/internal.h"

#include <string.h>

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

/* The plan: the bridge checked once, in whatever form the backend that built
 * it keeps (CPU: a narrowed host copy, src/map/cpu/map_cpu.h; CUDA: a device
 * plan). The same table executes and releases it. */
typedef struct lac_map_backend lac_map_backend;
struct lac_map_plan {
    int64_t m, n;
    lac_backend backend;            /* which backend built it */
    const lac_map_backend *table;   /* ... and its table */
    void *state;                    /* the backend's own plan, released by table->plan_release */
    int deterministic;              /* executes are deterministic (the default) */
    struct lac_map_dist_plan *dist; /* over MPI ranks: this rank's part (src/dist/map_dist.c), else NULL */
};

/* Index encodings a CPU plan may keep besides LAC_INT32 / LAC_INT64 (never in
 * a caller's array): uint16, and 24-bit little-endian entries packed 3 bytes
 * apart (with one byte of padding after the last). */
#define LAC_MAP_INDEX_U16 ((lac_dtype)0x7001)
#define LAC_MAP_INDEX_U24 ((lac_dtype)0x7002)

static inline int64_t lac_map_load_u24(const void *bridge, int64_t i)
{
    uint32_t v;
    memcpy(&v, (const uint8_t *)bridge + 3 * i, sizeof v);
    return (int64_t)(v & 0xFFFFFFu);
}

/* Reads bridge[i] as int64 whatever the index dtype. */
static inline int64_t lac_map_bridge_at(const lac_map_call *c, int64_t i)
{
    if (c->index_dtype == LAC_INT32) return (int64_t)((const int32_t *)c->bridge)[i];
    if (c->index_dtype == LAC_INT64) return ((const int64_t *)c->bridge)[i];
    if (c->index_dtype == LAC_MAP_INDEX_U16) return (int64_t)((const uint16_t *)c->bridge)[i];
    return lac_map_load_u24(c->bridge, i);
}

/* Fault reporting, one wording for every backend (src/map/map_fault.c). */
/* Message for the first out-of-range bridge entry; returns LAC_ERR_RANGE. */
lac_status lac_map_report_bad_index(lac_ctx_t ctx, int64_t position, int64_t value, int64_t n);
/* Message for the first NaN (source row/column or weight); returns LAC_ERR_VALUE. */
lac_status lac_map_report_nan(lac_ctx_t ctx, const char *what, int64_t row, int64_t col);
/* Host-side scan for the smallest bad position of a host call: a bridge entry
 * outside [0, n), or (with LAC_NAN_ERROR) a NaN in source or weights. Returns
 * LAC_SUCCESS when there is none. Shared by every backend's error path. */
lac_status lac_map_scan_host(lac_ctx_t ctx, const lac_map_call *call);
/* The same over a call that holds rows [offset, offset + m) of the whole
 * input: positions are named in the whole input. */
lac_status lac_map_scan_host_at(lac_ctx_t ctx, const lac_map_call *call, int64_t offset);
/* A backend's pass rejected row `flagged` (its smallest, of one kind of fault):
 * names the smallest offending position of any kind with a host scan, or
 * returns LAC_ERR_INTERNAL when the scan finds none. */
lac_status lac_map_report_flagged(lac_ctx_t ctx, const lac_map_call *call, int64_t flagged);

/* A backend: one-shot calls and plans. Every call it gets is checked (above). */
struct lac_map_backend {
    const char *name;
    lac_status (*map)(lac_ctx_t ctx, const lac_map_call *call);
    /* Fills plan->state from a call holding only the bridge (O(m), checks it). */
    lac_status (*plan_build)(lac_ctx_t ctx, lac_map_plan_t plan, const lac_map_call *call);
    /* A call without bridge (call->bridge NULL, bridge_checked) over plan->state. */
    lac_status (*plan_execute)(lac_ctx_t ctx, lac_map_plan_t plan, const lac_map_call *call);
    void (*plan_release)(lac_map_plan_t plan);
};

/* Stream-ordered calls (include/lacuna/lacuna_cuda.h), CUDA backend only;
 * stream is a cudaStream_t. map defers its device faults to synchronize. */
typedef struct {
    lac_status (*map)(lac_ctx_t ctx, const lac_map_call *call, void *stream);
    lac_status (*synchronize)(lac_ctx_t ctx, void *stream);
} lac_map_async_backend;

/* map over the context's MPI ranks (src/dist/map_dist.c): each rank maps its
 * range of the rows through `table` into partial targets, the partials are
 * reduced in rank order and every rank finishes the whole T. Host arrays;
 * the same T as one process within float64 rounding. Without MPI a context
 * has one rank and this is the table's own call.
 * Plans over ranks: dist_plan_build makes plan->dist, this rank's rows of
 * the bridge in pieces, each a plan of the table's own; dist_plan_execute is
 * lac_map_dist over those plans; dist_plan_release frees plan->dist. */
#ifdef LACUNA_HAVE_MPI
lac_status lac_map_dist(lac_ctx_t ctx, const lac_map_backend *table, const lac_map_call *call);
lac_status lac_map_dist_plan_build(lac_ctx_t ctx, lac_map_plan_t plan, const lac_map_call *call);
lac_status lac_map_dist_plan_execute(lac_ctx_t ctx, lac_map_plan_t plan, const lac_map_call *call);
void lac_map_dist_plan_release(lac_map_plan_t plan);
#else
static inline lac_status lac_map_dist(lac_ctx_t ctx, const lac_map_backend *table, const lac_map_call *call)
{
    return table->map(ctx, call);
}
static inline lac_status lac_map_dist_plan_build(lac_ctx_t ctx, lac_map_plan_t plan, const lac_map_call *call)
{
    return plan->table->plan_build(ctx, plan, call);
}
static inline lac_status lac_map_dist_plan_execute(lac_ctx_t ctx, lac_map_plan_t plan, const lac_map_call *call)
{
    return plan->table->plan_execute(ctx, plan, call);
}
static inline void lac_map_dist_plan_release(lac_map_plan_t plan) { (void)plan; }
#endif

/* The CPU backend (src/map/cpu/), always there. */
extern const lac_map_backend lac_map_cpu_backend;
/* The CUDA backend's table (src/backend/cuda/gateway.cu); NULL without CUDA. */
#ifdef LACUNA_HAVE_CUDA
const lac_map_backend *lac_map_backend_cuda(void);
const lac_map_async_backend *lac_map_async_backend_cuda(void);
#else
static inline const lac_map_backend *lac_map_backend_cuda(void) { return NULL; }
static inline const lac_map_async_backend *lac_map_async_backend_cuda(void) { return NULL; }
#endif

#ifdef __cplusplus
}
#endif
#endif
