/* map on the CUDA backend: what the files of this folder share. The launch
 * descriptions, the scratch layout that one call reduces into before anything
 * touches T, the per-context state, and the entry points of each concern:
 *   map_dispatch.cu        the table's entries: picks the path of a checked call
 *   map_state.cu           per-context state: fault words, kernel facts
 *   map_fault.cu           the fault flag read back and named
 *   map_strategy.cu        layout, reduction strategy, scratch sizes (host)
 *   map_reduce_kernels.cu  the atomic / privatised reduction and the finalise pass
 *   map_few.cu             few-target SUM/COUNT and weighted MEAN in one cooperative launch
 *   map_part.cu            many-target SUM/COUNT: rows partitioned by target range in L2
 *   map_plan.cu            plan build (radix sort) and the segmented execute
 *   map_plan_local.cu      few-target plans: chunk-local sort, privatised execute
 *   map_plan_multi.cu      plans of a host bridge split across the context's devices
 *   map_fixed.cu           deterministic SUM/COUNT/MEAN in exact fixed point (no sort)
 *   map_fixed_few.cu       the same for few float32 targets in one launch, no range pass
 *   map_stream.cu          host arrays streamed through the device in chunks
 *   map_multi.cu           host arrays split across the context's devices (also deterministic)
 *   map_async.cu           stream-ordered calls: deferred fault reports */
#ifndef LACUNA_BACKEND_CUDA_MAP_MAP_CUDA_CUH
#define LACUNA_BACKEND_CUDA_MAP_MAP_CUDA_CUH

#include "backend/cuda/cuda_internal.h"
#include "map/map_backend.h"

#include <stdint.h>

/* Constants the reduction kernels and the host's strategy share
 * (map_reduce_kernels.cu explains the hot targets). */
/* Private copies per block for few targets: lanes of a warp that hit one hot
 * target spread over this many addresses (skewed bridges). */
/* Rows a chunk of host arrays streamed to the device (map_stream.cu,
 * map_fixed_stream.cu): 16M rows of float32 + int32 are 128 MB a buffer set,
 * long enough that a copy dwarfs the per-chunk launch cost. */
#define MAP_STREAM_DEFAULT_ROWS ((int64_t)1 << 24)
#define MAP_DEFAULT_COPIES 4
/* Targets too large for one block: a pair of blocks up to this many slots,
 * a quad beyond (bench/RESULTS.md). */
#define MAP_PAIR_SLOTS 600000
/* Hot targets of a skewed bridge: at most MAP_HOT_MAX a block, found in a
 * sample of MAP_HOT_SAMPLES bridge entries as those seen MAP_HOT_MIN times. */
#define MAP_HOT_MAX 128
#define MAP_HOT_SAMPLES 4096
#define MAP_HOT_MIN 8        /* of MAP_HOT_SAMPLES: a share of ~0.2%; a uniform bridge over
                                 10k targets reaches it with probability ~1e-8 per target */
#define MAP_HOT_COUNT_SLOTS 8192   /* sample hash table (key, count) pairs */
#define MAP_HOT_TABLE 256          /* lookup hash slots (power of two, 2 x MAP_HOT_MAX) */
#define MAP_HOT_LANES 4            /* accumulators per warp and hot target */

/* No offending row yet: the error flag starts here and atomicMin lowers it. */
#define MAP_NO_FAULT 0xFFFFFFFFFFFFFFFFull

/* How a reduction launch combines contributions: sums (SUM, MEAN, COUNT) or
 * order-preserving integer keys for MIN / MAX (see map_reduce_kernels.cu). */
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
    void *scratch;            /* arrays x slots accumulators, initialised by lac_map_scratch_init */
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

/* 16-byte vector loads need 16-byte aligned arrays. */
static inline int lac_map_aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

/* Offsets into device buffers carved from one workspace block: 256-byte steps. */
static inline size_t lac_map_align256(size_t x) { return (x + 255) & ~(size_t)255; }

/* What a context keeps for map between calls (its CUDA slot LAC_CUDA_SLOT_MAP):
 *  - a mapped pinned host word that the last kernel of a call writes the fault
 *    flag into: the host reads it after the stream's synchronisation, with no
 *    copy to issue (a copy back costs several microseconds a call, a sizeable
 *    part of a small map);
 *  - two device fault flags for the single-launch paths: call k flags into
 *    pair[parity] and resets pair[1 - parity] for call k + 1, so that no call
 *    needs a reset of its own (a memset is one more operation on the stream);
 *  - kernel facts: attributes and occupancy answers cost tens of microseconds a
 *    query, as much as a whole small map, so each is asked once per context. */
typedef enum { MAP_FACT_PREPARED = 0, MAP_FACT_CLUSTERS = 1, MAP_FACT_FEW = 2, MAP_FACT_LOCAL = 3, MAP_FACT_PART = 4,
               MAP_FACT_PAIR = 5 } map_fact_kind;
typedef struct {
    const void *kernel;
    map_fact_kind kind;
    int64_t key;              /* cluster size, or 0 */
    size_t smem;
    int64_t value[2];
} map_kernel_fact;
#define MAP_KERNEL_FACTS 128
/* Deferred (stream-ordered) calls remembered for naming a fault at the next
 * synchronisation. */
#define MAP_ASYNC_RING 64
typedef struct {
    unsigned long long seq;
    lac_map_call call;
} map_async_entry;
typedef struct {
    unsigned long long *report;   /* mapped pinned host word, or NULL until first asked for */
    int report_failed;            /* the mapped word could not be had: copy back instead */
    unsigned long long *pair;     /* device, 2 words, or NULL until first asked for */
    int parity;
    map_kernel_fact facts[MAP_KERNEL_FACTS];
    int fact_count;
    unsigned long long *sticky;   /* device: tag | row of the first deferred fault, or MAP_NO_FAULT */
    unsigned long long async_seq; /* deferred calls so far */
    map_async_entry ring[MAP_ASYNC_RING];
    cudaEvent_t async_done;       /* the last deferred call, for the context's stream to wait on */
} map_cuda_ctx_state;

/* This context's map state, made on first use (map_state.cu). */
lac_status lac_map_cuda_state(lac_ctx_t ctx, map_cuda_ctx_state **out);
/* A kernel fact of this context: 1 and value[] when known, else 0. */
int lac_map_fact_find(lac_ctx_t ctx, const void *kernel, map_fact_kind kind, int64_t key, size_t smem, int64_t value[2]);
void lac_map_fact_put(lac_ctx_t ctx, const void *kernel, map_fact_kind kind, int64_t key, size_t smem,
                      const int64_t value[2]);

#ifdef __cplusplus
extern "C" {
#endif

/* The accumulator layout one call needs. */
map_layout lac_map_layout_for(const lac_map_call *call);

/* Picks block, cluster size and privatised capacity for `slots` on this device.
 * Benchmarks force one through the knob LACUNA_MAP_CUDA_STRATEGY (global|cluster1..16). */
lac_status lac_map_strategy_choose(lac_ctx_t ctx, const lac_map_call *call, const map_layout *layout,
                               map_strategy *out);

/* Sets the scratch accumulators to their identities (scratch may be NULL when
 * no launch touches it) and the fault flag to MAP_NO_FAULT, on ctx's compute
 * stream. */
lac_status lac_map_scratch_init(lac_ctx_t ctx, const map_layout *layout, void *scratch, int64_t slots,
                            unsigned long long *fault);
/* One reduction launch (device pointers), on ctx's compute stream. */
lac_status lac_map_reduce_launch(lac_ctx_t ctx, const map_strategy *strategy, const map_reduce_args *args);
/* Writes T from the accumulators unless the fault flag was set (then T is left
 * as it was), on ctx's compute stream. */
lac_status lac_map_finalize_launch(lac_ctx_t ctx, const map_finalize_args *args);

/* Bytes of scratch + partials + fault flag a one-shot call needs, and the
 * carving of one workspace block into those parts. */
size_t lac_map_scratch_bytes(const map_layout *layout, const map_strategy *strategy, int64_t slots);
void lac_map_scratch_carve(void *base, const map_layout *layout, const map_strategy *strategy, int64_t slots,
                       void **scratch, void **partials, unsigned long long **fault);

/* Names the fault of `row` of a call (its values read back), as every backend
 * words it; LAC_ERR_INTERNAL when the row shows none. */
lac_status lac_map_describe_row(lac_ctx_t ctx, const lac_map_call *call, unsigned long long row);
/* After a reduction: reads the fault flag (synchronising the compute stream) and,
 * when a row was flagged, records the error naming its smallest offending
 * position. The row's values are read back from host or device memory. */
lac_status lac_map_report_fault(lac_ctx_t ctx, const lac_map_call *call, const unsigned long long *fault_device);
/* The same through the mapped word the finalise pass wrote (no copy back);
 * falls back to lac_map_report_fault when report is NULL. */
lac_status lac_map_report_fault_mapped(lac_ctx_t ctx, const lac_map_call *call, const unsigned long long *fault_device,
                                   const unsigned long long *report);
/* This context's mapped host word for the fault flag (NULL if none could be had). */
unsigned long long *lac_map_fault_report_word(lac_ctx_t ctx);
/* This context's two device fault flags for single-launch paths: the launch
 * flags into *current (MAP_NO_FAULT on entry) and resets *next for the call
 * after it; lac_map_fault_pair_advance after a successful launch swaps them. Both
 * NULL when the context could not get a pair (then reset a flag yourself). */
lac_status lac_map_fault_pair(lac_ctx_t ctx, unsigned long long **current, unsigned long long **next);
void lac_map_fault_pair_advance(lac_ctx_t ctx);

/* The reduction arguments shared by the one-shot paths (the caller sets the rows). */
map_reduce_args lac_map_reduce_args_for(const lac_map_call *call, const map_layout *L, void *scratch, void *partials,
                                    unsigned long long *fault);
/* Builds the finalise arguments for a one-shot strategy, writes T (target is a
 * device pointer) unless a row was flagged, and reports the flagged row. */
lac_status lac_map_finalize_and_report(lac_ctx_t ctx, const lac_map_call *call, const map_strategy *S,
                                   const map_layout *L, void *scratch, void *partials, int64_t slots,
                                   void *target, unsigned long long *fault);
/* A stream-ordered call (map_async.cu) defers its fault report: the launch
 * flags into a workspace word reset on the stream, and the call's last kernel
 * lowers the context's sticky word to tag | row when a row was flagged. */
typedef struct {
    unsigned long long *sticky;   /* device */
    unsigned long long tag;       /* the call's sequence number << MAP_TAG_SHIFT */
} map_deferred;
#define MAP_TAG_SHIFT 40

/* Few targets, SUM/COUNT of one column in device memory (map_few.cu): the
 * whole call in one cooperative launch. *taken = 0 (and nothing done) when the
 * call is not of that kind. defer NULL: the fault is read back and named. */
lac_status lac_map_few_try(lac_ctx_t ctx, const lac_map_call *call, const map_layout *L, const map_deferred *defer,
                           int *taken);
/* Many targets, SUM/COUNT of one column in device memory (map_part.cu): rows
 * partitioned by target range through L2, reduced in shared memory, in one
 * cooperative launch. *taken and defer as lac_map_few_try. */
lac_status lac_map_part_try(lac_ctx_t ctx, const lac_map_call *call, const map_layout *L, const map_deferred *defer,
                            int *taken);
/* Many targets, float32 weighted MEAN of one column in device memory
 * (map_mean_pair.cu): a (sum w S, sum w) pair a target in L2, one vector
 * reduction a row. *taken and defer as lac_map_few_try. */
lac_status lac_map_mean_pair_try(lac_ctx_t ctx, const lac_map_call *call, const map_layout *L, const map_deferred *defer,
                                 int *taken);
/* Out-of-core path: host arrays streamed through the device (map_stream.cu). */
lac_status lac_map_cuda_stream(lac_ctx_t ctx, const lac_map_call *call);
/* One share's streamed rows: queued by lac_map_stream_enqueue on ctx's
 * current share (accumulators in scratch / partials, nothing finalised; t_dev
 * n x b on the device, `extra` bytes more at extra), released (waited for)
 * by lac_map_stream_release on the same share, also after a failure. */
typedef struct {
    map_layout L;
    map_strategy S;
    void *scratch, *partials, *t_dev, *extra;
    unsigned long long *fault;
    cudaEvent_t copied[2], consumed[2];
} map_stream_job;
lac_status lac_map_stream_enqueue(lac_ctx_t ctx, const lac_map_call *call, int64_t first, int64_t count, size_t extra,
                                  map_stream_job *job);
void lac_map_stream_release(lac_ctx_t ctx, map_stream_job *job);
/* Rows [first, first + count) of a host call copied whole to ctx's current
 * device (map_stream.cu), as the device call `dcall` (m = count): S, w, R
 * (or `bridge`, a plan's checked int32 bridge kept resident), and T's n x b
 * values when with_target (the result is computed there and copied back
 * only on success). Checks free memory first; on failure nothing stays
 * allocated. lac_map_rows_free accepts a zeroed or failed copy. */
typedef struct {
    void *source, *bridge, *weights, *target;
} map_rows_dev;
/* Chunk `index` of a streamed pass, rows [r0, r0 + rows) of a host call:
 * its arrays (R when bridge, S when source, w when the call has weights)
 * into buffer set index & 1 on that set's copy stream, once the kernels of
 * chunk index - 2 have read the set (consumed[]); the compute stream then
 * waits for them (copied[]). The caller records consumed[index & 1] on the
 * compute stream after the kernels that read the set. */
lac_status lac_map_chunk_in(lac_ctx_t ctx, const lac_map_call *call, int64_t r0, int64_t rows, int index,
                            void *const s[2], void *const r[2], void *const w[2], int source, int bridge,
                            cudaEvent_t copied[2], cudaEvent_t consumed[2]);
/* Whether rows [first, first + count) of a host call (with T when
 * with_target; without R when a resident bridge is given) fit the device's
 * free memory, less a margin, or LACUNA_CUDA_MEMORY_CAP where it is lower;
 * need / room: the bytes, for messages. */
lac_status lac_map_rows_fit(lac_ctx_t ctx, const lac_map_call *call, int64_t count, int bridge_given, int with_target,
                            int *fits, size_t *need, size_t *room);
lac_status lac_map_rows_copy(lac_ctx_t ctx, const lac_map_call *call, int64_t first, int64_t count, const int32_t *bridge,
                             int with_target, map_rows_dev *d, lac_map_call *dcall);
void lac_map_rows_free(map_rows_dev *d);
/* Host arrays split by rows across the context's shares (map_multi.cu):
 * whether a call gets the split, and the split call. */
int lac_map_cuda_multi_wanted(lac_ctx_t ctx, const lac_map_call *call);
lac_status lac_map_cuda_multi(lac_ctx_t ctx, const lac_map_call *call);
/* The same for a deterministic call: exact fixed-point parts with one scale,
 * added on the first device (one device's bits); a call the words do not
 * serve runs whole on the first device. */
lac_status lac_map_cuda_multi_deterministic(lac_ctx_t ctx, const lac_map_call *call);
/* Its parts: whether the fixed-point words serve the call (op, size, knob),
 * and the split itself over the first `shares` shares' row ranges start[]
 * (bridges: each share's checked int32 rows on its device, a plan's; NULL:
 * copied from the call, whole where they fit, else streamed in chunks);
 * *done = 0, nothing written, when the values span more than the words hold. */
int lac_map_cuda_multi_fixed_serves(lac_ctx_t ctx, const lac_map_call *call);
lac_status lac_map_cuda_multi_fixed(lac_ctx_t ctx, const lac_map_call *call, int shares, const int64_t *start,
                                    int32_t *const *bridges, int *done);
/* Plans over host bridges on a context of several devices (map_plan_multi.cu):
 * each share keeps its rows of the checked bridge (int32) on its device. */
typedef struct map_multi_plan map_multi_plan;
/* Whether a plan build gets the split: host bridge, several shares, enough rows, n <= INT32_MAX. */
int lac_map_multi_plan_wanted(lac_ctx_t ctx, const lac_map_call *call);
lac_status lac_map_multi_plan_build(lac_ctx_t ctx, const lac_map_call *call, map_multi_plan **out);
/* Host arrays: SUM / COUNT / MEAN split in exact fixed point (deterministic
 * or not); the rest (MIN / MAX, a range too wide for the words) as the
 * one-shot call over the plan's bridge gathered to the host. */
lac_status lac_map_multi_plan_execute_host(lac_ctx_t ctx, const map_multi_plan *p, const lac_map_call *call);
/* The plan's whole bridge (int32, checked) gathered on the first device; cudaFree it. */
lac_status lac_map_multi_plan_gather(lac_ctx_t ctx, const map_multi_plan *p, int32_t **bridge);
void lac_map_multi_plan_free(map_multi_plan *p);
/* The whole accumulators (arrays x slots) of a one-shot strategy written to
 * out (which may be f->scratch): scratch folded with the private copies. */
lac_status lac_map_fold_launch(lac_ctx_t ctx, const map_finalize_args *f, void *out);
/* acc = acc combined with other by the layout's kind (arrays x slots). */
lac_status lac_map_combine_launch(lac_ctx_t ctx, const map_layout *L, lac_dtype value_dtype, int64_t slots, void *acc,
                                  const void *other);
/* Device-array one-shot (non-deterministic) path (map_dispatch.cu); defer
 * as lac_map_few_try. */
lac_status lac_map_cuda_device(lac_ctx_t ctx, const lac_map_call *call, const map_deferred *defer);

/* Plans (map_plan.cu). A device plan: the bridge sorted by target. */
typedef struct {
    void *order;              /* device, m source rows in target order (int32 or int64) */
    void *offsets;            /* device, n + 1 segment starts (same dtype as order) */
    lac_dtype order_dtype;
} map_device_plan;

/* Chunk-local plans for few targets (map_plan_local.cu). */
typedef struct map_local_plan map_local_plan;
/* Builds one from a checked device bridge; *out stays NULL when n does not
 * suit this kind of plan. */
lac_status lac_map_local_plan_build(lac_ctx_t ctx, const void *bridge, lac_dtype index_dtype, int64_t m, int64_t n,
                                map_local_plan **out);
void lac_map_local_plan_free(map_local_plan *p);
/* Runs the call (SUM/COUNT of one aligned device column, NaN propagated) and
 * sets *taken; *taken = 0 (nothing done) for calls it does not serve. */
lac_status lac_map_local_plan_execute(lac_ctx_t ctx, const map_local_plan *p, const lac_map_call *call, int *taken);
/* Writes the plan's bridge (int32, m entries, device) back out of its words. */
lac_status lac_map_local_plan_bridge(lac_ctx_t ctx, const map_local_plan *p, int32_t *bridge);
/* Device bytes the plan keeps. */
size_t lac_map_local_plan_bytes(const map_local_plan *p);

/* The reduction kernels' entry addresses, for attribute and occupancy queries
 * (map_reduce_kernels.cu): the general kernel of a kind, and the dedicated
 * SUM/COUNT kernel in one of its modes. */
const void *lac_map_pick_reduce_kernel(lac_dtype value, lac_dtype index, map_kind kind);
const void *lac_map_pick_sum_kernel(lac_dtype value, lac_dtype index, int mode);

/* Host strategy helpers the launches share (map_strategy.cu): raising a
 * kernel's shared-memory limit once per context; whether a call is the
 * dedicated kernel's case (SUM/COUNT, NaN propagated, one column); the shared
 * memory that kernel needs besides the private copies. */
lac_status lac_map_prepare_kernel(lac_ctx_t ctx, const void *kernel);
/* A cooperative kernel's dynamic shared-memory limit (raised to the device's
 * whole shared memory) and, for smem > 0, how many blocks of `block` threads
 * and smem bytes fit one SM: asked once per context, kept as facts of `kind`. */
lac_status lac_map_coop_limits(lac_ctx_t ctx, const void *kernel, map_fact_kind kind, int block, size_t smem,
                               size_t *smem_max, int *per_sm);
bool lac_map_simple_sum(const map_layout *L, lac_map_op op, lac_nan_policy nan_policy, int64_t b);
/* The calls the one-launch paths (map_few.cu, map_part.cu) serve: device
 * arrays, 16-byte aligned, one column, SUM/COUNT with NaN propagated, at
 * least one row, n <= INT32_MAX / 4. */
bool lac_map_one_launch_call(const lac_map_call *call, const map_layout *L);
size_t lac_map_hot_bytes(size_t value_size, int block);

/* The table's entries (map_dispatch.cu, map_plan.cu). */
lac_status lac_map_cuda(lac_ctx_t ctx, const lac_map_call *call);
lac_status lac_map_cuda_plan_build(lac_ctx_t ctx, lac_map_plan_t plan, const lac_map_call *call);
lac_status lac_map_cuda_plan_execute(lac_ctx_t ctx, lac_map_plan_t plan, const lac_map_call *call);
void lac_map_cuda_plan_release(lac_map_plan_t plan);

/* Deterministic one-shot map (any memory): a temporary plan, then the
 * segmented fixed-order reduction. */
lac_status lac_map_cuda_deterministic(lac_ctx_t ctx, const lac_map_call *call);
/* Deterministic SUM/COUNT/MEAN of device arrays in exact fixed-point words
 * (map_fixed.cu): *taken = 0 (T untouched) for calls it does not serve, or
 * when the values span more bits than its words hold; the caller then takes
 * the sorted path. A checked call's bridge may be a plan's (bridge_checked). */
lac_status lac_map_fixed_try(lac_ctx_t ctx, const lac_map_call *call, int *taken);
/* Few float32 targets of device arrays (map_fixed_few.cu): the same bits in
 * one launch, the scale guessed from a sample; *taken = 0 (T untouched) for
 * calls it does not serve or whose values fall outside its window. */
lac_status lac_map_fixed_few_try(lac_ctx_t ctx, const lac_map_call *call, int *taken);
/* Whether lac_map_fixed_try would try the call (op, memory, size, knob). */
int lac_map_fixed_serves(lac_ctx_t ctx, const lac_map_call *call);
/* A deterministic call of host arrays split by rows across shares
 * (map_multi.cu), each share's part in the fixed-point words of
 * map_fixed.cu, all with one scale so that the parts add up word by word to
 * the whole call's words: begin (on the part's share: the launch shape,
 * zeroed words, the range pass queued; recv: room for another part's words),
 * range (waits; the part's exponent range, merged by the caller with max),
 * fits (whether the merged range fits the words), accumulate (the merged
 * range in, the pass queued), fault (waits; the smallest flagged row of the
 * part, MAP_NO_FAULT if none), add (on into's share: from's words copied
 * over and added), finish (T on the device from the words by the call's
 * rules, queued), free. scale_m is the whole call's rows. */
typedef struct map_fixed_part map_fixed_part;
lac_status lac_map_fixed_part_begin(lac_ctx_t ctx, const lac_map_call *part, int64_t scale_m, int recv, map_fixed_part **out);
/* The same in steps, for rows that arrive in chunks (map_fixed_stream.cu):
 * prepare (the launch shape of `part`, zeroed words, no pass), see (the
 * range pass over some rows, merged into the part's range), set_range (the
 * merged range in), add_rows (the accumulation pass over some rows, row0
 * their first row's place in the part, added to a flagged row). begin is
 * prepare + see; accumulate is set_range + add_rows. */
lac_status lac_map_fixed_part_prepare(lac_ctx_t ctx, const lac_map_call *part, int64_t scale_m, int recv,
                                      map_fixed_part **out);
lac_status lac_map_fixed_part_see(lac_ctx_t ctx, const map_fixed_part *P, const lac_map_call *rows);
/* The arrays a part's passes read: whether it has a range pass at all, whether
 * that pass reads S (w is read whenever the call has weights), whether the
 * accumulation reads S (R always). */
void lac_map_fixed_part_reads(const map_fixed_part *P, int *range_pass, int *range_source, int *add_source);
lac_status lac_map_fixed_part_set_range(lac_ctx_t ctx, map_fixed_part *P, const int range[4]);
lac_status lac_map_fixed_part_add_rows(lac_ctx_t ctx, map_fixed_part *P, const lac_map_call *rows, int64_t row0);
lac_status lac_map_fixed_part_range(lac_ctx_t ctx, const map_fixed_part *P, int range[4]);
int lac_map_fixed_range_fits(const map_fixed_part *P, const int range[4]);
lac_status lac_map_fixed_part_accumulate(lac_ctx_t ctx, const lac_map_call *part, map_fixed_part *P, const int range[4]);
lac_status lac_map_fixed_part_fault(lac_ctx_t ctx, const map_fixed_part *P, unsigned long long *row);
lac_status lac_map_fixed_part_add(lac_ctx_t ctx, map_fixed_part *into, const map_fixed_part *from);
lac_status lac_map_fixed_part_finish(lac_ctx_t ctx, const lac_map_call *call, const map_fixed_part *P, void *target);
void lac_map_fixed_part_free(map_fixed_part *P);
/* A part whose host rows [first, first + count) do not fit the device
 * (map_fixed_stream.cu): begin queues the range pass over chunks and hands
 * out the part (the caller frees it; range, fits, fault, add and finish as
 * above); accumulate takes the merged range and queues the second pass;
 * free waits for the copies and releases the buffers. */
typedef struct map_fixed_stream map_fixed_stream;
lac_status lac_map_fixed_stream_begin(lac_ctx_t ctx, const lac_map_call *call, int64_t first, int64_t count, int recv,
                                      map_fixed_stream **out, map_fixed_part **part);
lac_status lac_map_fixed_stream_accumulate(lac_ctx_t ctx, map_fixed_stream *F, const int range[4]);
void lac_map_fixed_stream_free(lac_ctx_t ctx, map_fixed_stream *F);
/* Checks a device bridge: fault = smallest row outside [0, n). */
lac_status lac_map_check_bridge_launch(lac_ctx_t ctx, const void *bridge, lac_dtype index_dtype, int64_t m, int64_t n,
                                   unsigned long long *fault);

#ifdef __cplusplus
}
#endif
#endif
