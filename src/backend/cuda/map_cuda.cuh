/* map on the CUDA backend: what the map_*.cu files share. The launch
 * descriptions (struct map_launch), the scratch layout that one call reduces
 * into before anything touches T, and the entry points of each concern:
 *   map_cuda.cu          dispatch (device arrays, host arrays, deterministic)
 *   map_kernels_reduce.cu  the atomic / privatised reduction and the finalise pass
 *   map_few_cuda.cu      few-target SUM/COUNT in one cooperative launch
 *   map_plan_cuda.cu     plan build (radix sort) and the segmented execute
 *   map_plan_local_cuda.cu  few-target plans: chunk-local sort, privatised execute
 *   map_stream_cuda.cu   host arrays streamed through the device in chunks */
#ifndef LACUNA_BACKEND_CUDA_MAP_CUDA_CUH
#define LACUNA_BACKEND_CUDA_MAP_CUDA_CUH

#include "backend/cuda/cuda_internal.h"

#include <stdint.h>

/* No offending row yet: the error flag starts here and atomicMin lowers it. */
#define MAP_NO_FAULT 0xFFFFFFFFFFFFFFFFull

/* How a reduction launch combines contributions: sums (SUM, MEAN, COUNT) or
 * order-preserving integer keys for MIN / MAX (see map_kernels_reduce.cu). */
typedef enum { MAP_KIND_ADD = 0, MAP_KIND_MIN = 1, MAP_KIND_MAX = 2 } map_kind;

/* Which accumulator arrays a call needs, each n x b "slots" long:
 * value (sum, or min/max key), weight sum (MEAN), hits (to tell an empty
 * target from one whose sum is 0 when empty_value matters). */
typedef struct {
    map_kind kind;
    int track_weight;     /* MEAN: sum of w (or counts) per slot */
    int track_hits;       /* number of contributions per slot */
    int arrays;           /* 1 + track_weight + track_hits */
    size_t acc_size;      /* bytes of one accumulator: 4 or 8 */
} map_layout;

/* Reduction strategy: where each block keeps its private copy of the target. */
typedef struct {
    int cluster_size;     /* blocks sharing one private copy through distributed shared memory */
    int64_t capacity;     /* slots privatised (the rest go straight to global atomics); 0: none */
    int64_t slice;        /* slots per block of a cluster */
    int64_t pitch;        /* shared-memory words between two arrays or copies */
    int clusters;         /* clusters alive at once (persistent grid / cluster_size) */
    int copies;           /* private copies per block (cluster_size 1) */
    int block;            /* threads per block */
    size_t smem_bytes;    /* dynamic shared memory per block */
} map_strategy;

/* One reduction launch over rows [0, rows) of the arrays given (a whole call or
 * one out-of-core chunk; row0 is the chunk's first row in the caller's arrays,
 * for error positions). */
typedef struct {
    const void *source;
    const void *bridge;
    const void *weights;      /* NULL: all weights 1 */
    int64_t rows, row0;
    int64_t n, b;
    lac_dtype value_dtype, index_dtype;
    lac_map_op op;
    lac_nan_policy nan_policy;
    map_layout layout;
    void *scratch;            /* arrays x slots accumulators, initialised by map_scratch_init */
    void *partials;           /* arrays x clusters x capacity, written by the privatised path */
    int partials_fresh;       /* 1: store this launch's private copies; 0: fold into them */
    unsigned long long *fault; /* smallest offending row (MAP_NO_FAULT if none) */
} map_reduce_args;

/* What the finalise pass needs: the accumulators and how to fold them into T. */
typedef struct {
    const void *scratch;      /* NULL when every slot was privatised */
    const void *partials;
    int clusters;
    int64_t capacity;
    int64_t slots;
    lac_dtype value_dtype;
    lac_map_op op;
    int accumulate;
    double empty_value;
    map_layout layout;
    void *target;             /* device, n x b */
    const unsigned long long *fault;
    unsigned long long *report; /* mapped host word that gets the fault flag, or NULL */
} map_finalize_args;

#ifdef __cplusplus
extern "C" {
#endif

/* The accumulator layout one call needs. */
map_layout map_layout_for(const lac_map_call *call);

/* Picks block, cluster size and privatised capacity for `slots` on this device.
 * Benchmarks force one through LACUNA_MAP_CUDA_STRATEGY (global|cluster1..16). */
lac_status map_strategy_choose(lac_ctx_t ctx, const lac_map_call *call, const map_layout *layout,
                               map_strategy *out);

/* Sets the scratch accumulators to their identities (scratch may be NULL when
 * no launch touches it) and the fault flag to MAP_NO_FAULT, on ctx's compute
 * stream. */
lac_status map_scratch_init(lac_ctx_t ctx, const map_layout *layout, void *scratch, int64_t slots,
                            unsigned long long *fault);
/* One reduction launch (device pointers), on ctx's compute stream. */
lac_status map_reduce_launch(lac_ctx_t ctx, const map_strategy *strategy, const map_reduce_args *args);
/* Writes T from the accumulators unless the fault flag was set (then T is left
 * as it was), on ctx's compute stream. */
lac_status map_finalize_launch(lac_ctx_t ctx, const map_finalize_args *args);

/* Bytes of scratch + partials + fault flag a one-shot call needs, and the
 * carving of one workspace block into those parts. */
size_t map_scratch_bytes(const map_layout *layout, const map_strategy *strategy, int64_t slots);
void map_scratch_carve(void *base, const map_layout *layout, const map_strategy *strategy, int64_t slots,
                       void **scratch, void **partials, unsigned long long **fault);

/* After a reduction: reads the fault flag (synchronising the compute stream) and,
 * when a row was flagged, records the error naming its smallest offending
 * position. The row's values are read back from host or device memory. */
lac_status map_report_fault(lac_ctx_t ctx, const lac_map_call *call, const unsigned long long *fault_device);
/* The same through the mapped word the finalise pass wrote (no copy back);
 * falls back to map_report_fault when report is NULL. */
lac_status map_report_fault_mapped(lac_ctx_t ctx, const lac_map_call *call, const unsigned long long *fault_device,
                                   const unsigned long long *report);
/* This context's mapped host word for the fault flag (NULL if none could be had). */
unsigned long long *map_fault_report_word(lac_ctx_t ctx);
/* This context's two device fault flags for single-launch paths: the launch
 * flags into *current (MAP_NO_FAULT on entry) and resets *next for the call
 * after it; map_fault_pair_advance after a successful launch swaps them. Both
 * NULL when the context could not get a pair (then reset a flag yourself). */
lac_status map_fault_pair(lac_ctx_t ctx, unsigned long long **current, unsigned long long **next);
void map_fault_pair_advance(lac_ctx_t ctx);

/* The reduction arguments shared by the one-shot paths (the caller sets the rows). */
map_reduce_args map_reduce_args_for(const lac_map_call *call, const map_layout *L, void *scratch, void *partials,
                                    unsigned long long *fault);
/* Builds the finalise arguments for a one-shot strategy, writes T (target is a
 * device pointer) unless a row was flagged, and reports the flagged row. */
lac_status map_finalize_and_report(lac_ctx_t ctx, const lac_map_call *call, const map_strategy *S,
                                   const map_layout *L, void *scratch, void *partials, int64_t slots,
                                   void *target, unsigned long long *fault);
/* Few targets, SUM/COUNT of one column in device memory (map_few_cuda.cu): the
 * whole call in one cooperative launch. *taken = 0 (and nothing done) when the
 * call is not of that kind. */
lac_status map_few_try(lac_ctx_t ctx, const lac_map_call *call, const map_layout *L, int *taken);
/* Out-of-core path: host arrays streamed through the device (map_stream_cuda.cu). */
lac_status map_cuda_stream(lac_ctx_t ctx, const lac_map_call *call);
/* Device-array one-shot (non-deterministic) path (map_cuda.cu). */
lac_status map_cuda_device(lac_ctx_t ctx, const lac_map_call *call);

/* Plans (map_plan_cuda.cu). A device plan: the bridge sorted by target. */
typedef struct {
    void *order;              /* device, m source rows in target order (int32 or int64) */
    void *offsets;            /* device, n + 1 segment starts (same dtype as order) */
    lac_dtype order_dtype;
} map_device_plan;

/* Chunk-local plans for few targets (map_plan_local_cuda.cu). */
typedef struct map_local_plan map_local_plan;
/* Builds one from a checked device bridge; *out stays NULL when n does not
 * suit this kind of plan. */
lac_status map_local_plan_build(lac_ctx_t ctx, const void *bridge, lac_dtype index_dtype, int64_t m, int64_t n,
                                map_local_plan **out);
void map_local_plan_free(map_local_plan *p);
/* Runs the call (SUM/COUNT of one aligned device column, NaN propagated) and
 * sets *taken; *taken = 0 (nothing done) for calls it does not serve. */
lac_status map_local_plan_execute(lac_ctx_t ctx, const map_local_plan *p, const lac_map_call *call, int *taken);
/* Writes the plan's bridge (int32, m entries, device) back out of its words. */
lac_status map_local_plan_bridge(lac_ctx_t ctx, const map_local_plan *p, int32_t *bridge);
/* Device bytes the plan keeps. */
size_t map_local_plan_bytes(const map_local_plan *p);

/* Deterministic one-shot map (any memory): a temporary plan, then the
 * segmented fixed-order reduction. */
lac_status map_cuda_deterministic(lac_ctx_t ctx, const lac_map_call *call);
/* Checks a device bridge: fault = smallest row outside [0, n). */
lac_status map_check_bridge_launch(lac_ctx_t ctx, const void *bridge, lac_dtype index_dtype, int64_t m, int64_t n,
                                   unsigned long long *fault);

#ifdef __cplusplus
}
#endif
#endif
