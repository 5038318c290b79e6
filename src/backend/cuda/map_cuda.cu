/* map on the CUDA backend: the gateway entry lac_cuda_map. Picks the path for a
 * checked call (device arrays: one-shot reduction; host arrays: streamed in
 * chunks; deterministic: a temporary plan's segmented reduction) and turns a
 * flagged row into the error message that names it. */
#include "backend/cuda/map_cuda.cuh"

#include <math.h>
#include <string.h>

#include <mutex>

/* Reads `bytes` at p (host or device memory) into out. */
static lac_status read_back(lac_ctx_t ctx, lac_memory memory, const void *p, void *out, size_t bytes)
{
    if (memory == LAC_MEM_HOST) {
        memcpy(out, p, bytes);
        return LAC_SUCCESS;
    }
    LAC_CUDA_CHECK(ctx, cudaMemcpy(out, p, bytes, cudaMemcpyDeviceToHost));
    return LAC_SUCCESS;
}

static double as_double(const unsigned char *p, lac_dtype dt)
{
    if (dt == LAC_FLOAT32) {
        float f;
        memcpy(&f, p, sizeof f);
        return f;
    }
    double d;
    memcpy(&d, p, sizeof d);
    return d;
}

/* Per context, kept for the process's life (a context's address is reused
 * only after it is destroyed, and a context serves one thread at a time):
 *  - a mapped pinned host word that the last kernel of a call writes the fault
 *    flag into: the host reads it after the stream's synchronisation, with no
 *    copy to issue (a copy back costs several microseconds a call, a sizeable
 *    part of a small map);
 *  - two device fault flags for the single-launch paths: call k flags into
 *    pair[parity] and resets pair[1 - parity] for call k + 1, so that no call
 *    needs a reset of its own (a memset is one more operation on the stream). */
#define FLAG_POOL 64
static struct {
    const void *ctx;
    int device;
    unsigned long long *host;
    unsigned long long *pair;   /* device, 2 words, or NULL until first asked for */
    int parity;
} flag_pool[FLAG_POOL];
static int flag_count;
static std::mutex flag_mutex;

/* This context's pool entry, made on first use; -1 when the pool is full.
 * Called with flag_mutex held. */
static int flag_slot(lac_ctx_t ctx)
{
    for (int i = 0; i < flag_count; i++)
        if (flag_pool[i].ctx == (const void *)ctx && flag_pool[i].device == ctx->cuda->device) return i;
    if (flag_count == FLAG_POOL) return -1;
    memset(&flag_pool[flag_count], 0, sizeof flag_pool[flag_count]);
    flag_pool[flag_count].ctx = ctx;
    flag_pool[flag_count].device = ctx->cuda->device;
    return flag_count++;
}

extern "C" unsigned long long *map_fault_report_word(lac_ctx_t ctx)
{
    std::lock_guard<std::mutex> lock(flag_mutex);
    int i = flag_slot(ctx);
    if (i < 0) return NULL;
    if (!flag_pool[i].host) {
        void *p = NULL;
        if (cudaHostAlloc(&p, sizeof(unsigned long long), cudaHostAllocMapped) != cudaSuccess) {
            cudaGetLastError();
            return NULL;   /* the caller falls back to a copy */
        }
        flag_pool[i].host = (unsigned long long *)p;
    }
    return flag_pool[i].host;
}

extern "C" lac_status map_fault_pair(lac_ctx_t ctx, unsigned long long **current, unsigned long long **next)
{
    *current = *next = NULL;
    std::lock_guard<std::mutex> lock(flag_mutex);
    int i = flag_slot(ctx);
    if (i < 0) return LAC_SUCCESS;   /* the caller resets a workspace flag instead */
    if (!flag_pool[i].pair) {
        void *p = NULL;
        LAC_CUDA_CHECK(ctx, cudaMalloc(&p, 2 * sizeof(unsigned long long)));
        cudaError_t e = cudaMemset(p, 0xFF, 2 * sizeof(unsigned long long));
        if (e != cudaSuccess) {
            cudaFree(p);
            LAC_CUDA_CHECK(ctx, e);
        }
        flag_pool[i].pair = (unsigned long long *)p;
        flag_pool[i].parity = 0;
    }
    *current = flag_pool[i].pair + flag_pool[i].parity;
    *next = flag_pool[i].pair + (1 - flag_pool[i].parity);
    return LAC_SUCCESS;
}

extern "C" void map_fault_pair_advance(lac_ctx_t ctx)
{
    std::lock_guard<std::mutex> lock(flag_mutex);
    for (int i = 0; i < flag_count; i++)
        if (flag_pool[i].ctx == (const void *)ctx && flag_pool[i].device == ctx->cuda->device) {
            flag_pool[i].parity = 1 - flag_pool[i].parity;
            return;
        }
}

static lac_status describe_row(lac_ctx_t ctx, const lac_map_call *call, unsigned long long row);

extern "C" lac_status map_report_fault(lac_ctx_t ctx, const lac_map_call *call, const unsigned long long *fault_device)
{
    unsigned long long row = MAP_NO_FAULT;
    LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(&row, fault_device, sizeof row, cudaMemcpyDeviceToHost, ctx->cuda->stream));
    LAC_CUDA_CHECK(ctx, cudaStreamSynchronize(ctx->cuda->stream));
    return describe_row(ctx, call, row);
}

extern "C" lac_status map_report_fault_mapped(lac_ctx_t ctx, const lac_map_call *call,
                                              const unsigned long long *fault_device, const unsigned long long *report)
{
    if (!report) return map_report_fault(ctx, call, fault_device);
    LAC_CUDA_CHECK(ctx, cudaStreamSynchronize(ctx->cuda->stream));
    return describe_row(ctx, call, *(const volatile unsigned long long *)report);
}

static lac_status describe_row(lac_ctx_t ctx, const lac_map_call *call, unsigned long long row)
{
    if (row == MAP_NO_FAULT) return LAC_SUCCESS;

    /* The kernels flag the smallest row with any fault; name it the way
     * lac_map_scan_host does: the bridge first, then the weight, then the
     * source columns in order. */
    const int64_t i = (int64_t)row;
    const size_t isz = lac_dtype_size(call->index_dtype), vsz = lac_dtype_size(call->value_dtype);
    if (call->bridge) {
        unsigned char buf[8];
        LAC_CHECK(read_back(ctx, call->memory, (const unsigned char *)call->bridge + (size_t)i * isz, buf, isz));
        int64_t r;
        if (call->index_dtype == LAC_INT32) {
            int32_t r32;
            memcpy(&r32, buf, sizeof r32);
            r = r32;
        } else {
            memcpy(&r, buf, sizeof r);
        }
        if (r < 0 || r >= call->n) return lac_map_report_bad_index(ctx, i, r, call->n);
    }
    if (call->params.nan_policy == LAC_NAN_ERROR && call->source) {
        unsigned char buf[8];
        if (call->weights) {
            LAC_CHECK(read_back(ctx, call->memory, (const unsigned char *)call->weights + (size_t)i * vsz, buf, vsz));
            if (isnan(as_double(buf, call->value_dtype))) return lac_map_report_nan(ctx, "weights", i, -1);
        }
        for (int64_t col = 0; col < call->b; col++) {
            LAC_CHECK(read_back(ctx, call->memory, (const unsigned char *)call->source + ((size_t)i * call->b + col) * vsz,
                                buf, vsz));
            if (isnan(as_double(buf, call->value_dtype)))
                return lac_map_report_nan(ctx, "source", i, call->b > 1 ? col : -1);
        }
    }
    return lac_error(ctx, LAC_ERR_INTERNAL, "map: row %lld was flagged on the device but shows no fault", (long long)i);
}

/* The reduction arguments every one-shot path shares; the caller sets the
 * rows (source, bridge, weights, rows, row0) and partials_fresh. */
map_reduce_args map_reduce_args_for(const lac_map_call *call, const map_layout *L, void *scratch, void *partials,
                                    unsigned long long *fault)
{
    map_reduce_args a;
    memset(&a, 0, sizeof a);
    a.n = call->n;
    a.b = call->b;
    a.value_dtype = call->value_dtype;
    a.index_dtype = call->index_dtype;
    a.op = call->params.op;
    a.nan_policy = call->params.nan_policy;
    a.layout = *L;
    a.scratch = scratch;
    a.partials = partials;
    a.fault = fault;
    return a;
}

/* Folds the accumulators into T (unless a row was flagged) and reports the
 * smallest flagged row: the last step of every one-shot path. */
lac_status map_finalize_and_report(lac_ctx_t ctx, const lac_map_call *call, const map_strategy *S,
                                   const map_layout *L, void *scratch, void *partials, int64_t slots,
                                   void *target, unsigned long long *fault)
{
    map_finalize_args f;
    memset(&f, 0, sizeof f);
    f.scratch = S->capacity < slots ? scratch : NULL;
    f.partials = partials;
    f.clusters = S->clusters;
    f.capacity = S->capacity;
    f.slots = slots;
    f.value_dtype = call->value_dtype;
    f.op = call->params.op;
    f.accumulate = call->params.accumulate;
    f.empty_value = call->params.empty_value;
    f.layout = *L;
    f.target = target;
    f.fault = fault;
    f.report = map_fault_report_word(ctx);
    LAC_CHECK(map_finalize_launch(ctx, &f));
    return map_report_fault_mapped(ctx, call, fault, f.report);
}

/* One-shot, non-deterministic map of device arrays: reduce into scratch (with
 * the checks), finalise into T unless a row was flagged. */
extern "C" lac_status map_cuda_device(lac_ctx_t ctx, const lac_map_call *call)
{
    const int64_t slots = call->n * call->b;
    map_layout L = map_layout_for(call);
    int taken = 0;
    lac_status few = map_few_try(ctx, call, &L, &taken);
    if (taken || few < 0) return few;
    map_strategy S;
    LAC_CHECK(map_strategy_choose(ctx, call, &L, &S));
    if (call->m == 0) S.capacity = 0;   /* no launch writes partials */
    void *ws = NULL, *scratch = NULL, *partials = NULL;
    unsigned long long *fault = NULL;
    LAC_CHECK(lac_cuda_workspace(ctx, map_scratch_bytes(&L, &S, slots), &ws));
    map_scratch_carve(ws, &L, &S, slots, &scratch, &partials, &fault);
    LAC_CHECK(map_scratch_init(ctx, &L, S.capacity < slots ? scratch : NULL, slots, fault));

    map_reduce_args a = map_reduce_args_for(call, &L, scratch, partials, fault);
    a.source = call->source;
    a.bridge = call->bridge;
    a.weights = call->weights;
    a.rows = call->m;
    a.row0 = 0;
    a.partials_fresh = 1;
    LAC_CHECK(map_reduce_launch(ctx, &S, &a));

    return map_finalize_and_report(ctx, call, &S, &L, scratch, partials, slots, call->target, fault);
}

extern "C" lac_status lac_cuda_map(lac_ctx_t ctx, const lac_map_call *call)
{
    LAC_CHECK(lac_cuda_use_device(ctx));
    if (call->n == 0) return LAC_SUCCESS;   /* then m == 0 too (checked by the front end) */
    /* MIN/MAX are exact whatever the order: the atomic path is deterministic. */
    bool order_free = call->params.op == LAC_MAP_MIN || call->params.op == LAC_MAP_MAX;
    if (call->params.deterministic && !order_free) return map_cuda_deterministic(ctx, call);
    if (call->memory == LAC_MEM_DEVICE) return map_cuda_device(ctx, call);
    return map_cuda_stream(ctx, call);
}
