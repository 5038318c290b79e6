/* map on the CUDA backend: the table's entries. Picks the path for a checked
 * call (device arrays: one-shot reduction; host arrays: streamed in chunks;
 * deterministic: exact fixed point, else a temporary plan's segmented
 * reduction; host arrays on a context of several devices: split across
 * them, map_multi.cu, deterministic calls too). */
#include "backend/cuda/map/map_cuda.cuh"

#include <string.h>

/* The reduction arguments every one-shot path shares; the caller sets the
 * rows (source, bridge, weights, rows, row0) and partials_fresh. */
map_reduce_args lac_map_reduce_args_for(const lac_map_call *call, const map_layout *L, void *scratch, void *partials,
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

/* The finalise pass's arguments for a one-shot strategy. */
static map_finalize_args finalize_args(const lac_map_call *call, const map_strategy *S, const map_layout *L,
                                       void *scratch, void *partials, int64_t slots, void *target,
                                       unsigned long long *fault)
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
    return f;
}

/* Folds the accumulators into T (unless a row was flagged) and reports the
 * smallest flagged row: the last step of every one-shot path. */
lac_status lac_map_finalize_and_report(lac_ctx_t ctx, const lac_map_call *call, const map_strategy *S,
                                   const map_layout *L, void *scratch, void *partials, int64_t slots,
                                   void *target, unsigned long long *fault)
{
    map_finalize_args f = finalize_args(call, S, L, scratch, partials, slots, target, fault);
    f.report = lac_map_fault_report_word(ctx);
    LAC_CHECK(lac_map_finalize_launch(ctx, &f));
    return lac_map_report_fault_mapped(ctx, call, fault, f.report);
}

/* A deferred call's report: the sticky word lowered to tag | row when this
 * call's flag is set (one thread, after the finalise pass on the stream). */
static __global__ void map_sticky_kernel(const unsigned long long *fault, unsigned long long *sticky, unsigned long long tag)
{
    const unsigned long long f = *fault;
    if (f != MAP_NO_FAULT) atomicMin(sticky, tag | f);
}

/* One-shot, non-deterministic map of device arrays: reduce into scratch (with
 * the checks), finalise into T unless a row was flagged. */
extern "C" lac_status lac_map_cuda_device(lac_ctx_t ctx, const lac_map_call *call, const map_deferred *defer)
{
    const int64_t slots = call->n * call->b;
    map_layout L = lac_map_layout_for(call);
    int taken = 0;
    lac_status few = lac_map_few_try(ctx, call, &L, defer, &taken);
    if (taken || few < 0) return few;
    lac_status pair = lac_map_mean_pair_try(ctx, call, &L, defer, &taken);
    if (taken || pair < 0) return pair;
    lac_status part = lac_map_part_try(ctx, call, &L, defer, &taken);
    if (taken || part < 0) return part;
    map_strategy S;
    LAC_CHECK(lac_map_strategy_choose(ctx, call, &L, &S));
    if (call->m == 0) S.capacity = 0;   /* no launch writes partials */
    void *ws = NULL, *scratch = NULL, *partials = NULL;
    unsigned long long *fault = NULL;
    LAC_CHECK(lac_cuda_workspace(ctx, lac_map_scratch_bytes(&L, &S, slots), &ws));
    lac_map_scratch_carve(ws, &L, &S, slots, &scratch, &partials, &fault);
    LAC_CHECK(lac_map_scratch_init(ctx, &L, S.capacity < slots ? scratch : NULL, slots, fault));

    map_reduce_args a = lac_map_reduce_args_for(call, &L, scratch, partials, fault);
    a.source = call->source;
    a.bridge = call->bridge;
    a.weights = call->weights;
    a.rows = call->m;
    a.row0 = 0;
    a.partials_fresh = 1;
    LAC_CHECK(lac_map_reduce_launch(ctx, &S, &a));

    if (!defer) return lac_map_finalize_and_report(ctx, call, &S, &L, scratch, partials, slots, call->target, fault);
    map_finalize_args f = finalize_args(call, &S, &L, scratch, partials, slots, call->target, fault);
    LAC_CHECK(lac_map_finalize_launch(ctx, &f));
    map_sticky_kernel<<<1, 1, 0, ctx->cuda->stream>>>(fault, defer->sticky, defer->tag);
    LAC_CUDA_CHECK_LAUNCH(ctx);
    return LAC_SUCCESS;
}

lac_status lac_map_cuda(lac_ctx_t ctx, const lac_map_call *call)
{
    LAC_CHECK(lac_cuda_use_device(ctx));
    if (call->n == 0) return LAC_SUCCESS;   /* then m == 0 too (checked by the front end) */
    /* MIN/MAX are exact whatever the order: the atomic path is deterministic. */
    bool order_free = call->params.op == LAC_MAP_MIN || call->params.op == LAC_MAP_MAX;
    if (call->params.deterministic && !order_free)
        return lac_map_cuda_multi_wanted(ctx, call) ? lac_map_cuda_multi_deterministic(ctx, call)
                                                    : lac_map_cuda_deterministic(ctx, call);
    if (call->memory == LAC_MEM_DEVICE) return lac_map_cuda_device(ctx, call, NULL);
    if (lac_map_cuda_multi_wanted(ctx, call)) return lac_map_cuda_multi(ctx, call);
    return lac_map_cuda_stream(ctx, call);
}

extern "C" const lac_map_backend lac_map_cuda_table = {
    "cuda",
    lac_map_cuda,
    lac_map_cuda_plan_build,
    lac_map_cuda_plan_execute,
    lac_map_cuda_plan_release,
};
