/* map on the CUDA backend over several devices (a context made with several
 * device ids, lac_ctx_params.device_ids). A call on host arrays is split by
 * row ranges across the context's shares in proportion to their speed (SMs x
 * clock): each share streams its own range through its device as the
 * out-of-core path does, into its own accumulators; the first device then
 * combines them in share order (a peer copy where the devices allow it, the
 * driver stages it through the host otherwise) and writes T once, only when
 * no share flagged a row. Device arrays stay on the first device: the map
 * reads each element once, so moving a row range to another device costs
 * more than reducing it in place. Deterministic calls stay on the first
 * device too (the segmented pass sums each target's rows in one fixed order;
 * a split would change the rounding), so they equal one device's bits. */
#include "backend/cuda/map/map_cuda.cuh"

#include <string.h>

/* Rows a share needs before a split pays for its own launches, copies and
 * the combine pass (bench/RESULTS.md, "map on cuda:0,0"). */
#define MAP_MULTI_MIN_ROWS ((int64_t)1 << 15)

extern "C" int lac_map_cuda_multi_wanted(lac_ctx_t ctx, const lac_map_call *call)
{
    const int shares = ctx->cuda->share_count;
    return shares > 1 && call->memory == LAC_MEM_HOST && call->m >= MAP_MULTI_MIN_ROWS * shares;
}

/* A share's accumulators made whole in place (its private copies folded in). */
static lac_status fold_job(lac_ctx_t ctx, const lac_map_call *call, map_stream_job *job)
{
    const int64_t slots = call->n * call->b;
    map_finalize_args f;
    memset(&f, 0, sizeof f);
    f.scratch = job->S.capacity < slots ? job->scratch : NULL;
    f.partials = job->partials;
    f.clusters = job->S.clusters;
    f.capacity = job->S.capacity;
    f.slots = slots;
    f.value_dtype = call->value_dtype;
    f.op = call->params.op;
    f.layout = job->L;
    return lac_map_fold_launch(ctx, &f, job->scratch);
}

extern "C" lac_status lac_map_cuda_multi(lac_ctx_t ctx, const lac_map_call *call)
{
    lac_cuda_state *first = ctx->cuda;
    const int shares = first->share_count;
    const int64_t slots = call->n * call->b;
    const map_layout L = lac_map_layout_for(call);
    const size_t acc_bytes = (size_t)L.arrays * (size_t)slots * L.acc_size;
    const size_t t_bytes = (size_t)slots * lac_dtype_size(call->value_dtype);
    int64_t start[LAC_MAX_DEVICES + 1];
    lac_cuda_share_split(first, call->m, start);
    lac_log(ctx, LAC_LOG_DEBUG, "map cuda: %lld rows split across %d devices, %lld on the first", (long long)call->m,
            shares, (long long)(start[1] - start[0]));

    /* The other shares are queued first so that they run while the first is
     * queued; only the first needs T's old values (accumulate). */
    map_stream_job jobs[LAC_MAX_DEVICES];
    memset(jobs, 0, sizeof jobs);
    lac_status st = LAC_SUCCESS;
    lac_map_call part = *call;
    part.params.accumulate = 0;
    for (int i = 1; i < shares && st >= 0; i++) {
        lac_cuda_share_scope scope(ctx, i);
        st = lac_map_stream_enqueue(ctx, &part, start[i], start[i + 1] - start[i], 0, &jobs[i]);
        if (st >= 0) st = fold_job(ctx, call, &jobs[i]);
    }
    if (st >= 0) st = lac_map_stream_enqueue(ctx, call, start[0], start[1] - start[0], lac_map_align256(acc_bytes), &jobs[0]);
    if (st >= 0) st = fold_job(ctx, call, &jobs[0]);

    /* Every share waited for (also after a failure: copies may be in flight
     * into its workspace), its fault word read: the smallest row wins. */
    unsigned long long fault = MAP_NO_FAULT;
    for (int i = shares - 1; i >= 0; i--) {
        lac_cuda_share_scope scope(ctx, i);
        lac_map_stream_release(ctx, &jobs[i]);
        if (st < 0 || !jobs[i].fault) continue;
        unsigned long long row = MAP_NO_FAULT;
        cudaError_t e = cudaMemcpy(&row, jobs[i].fault, sizeof row, cudaMemcpyDeviceToHost);
        if (e != cudaSuccess) st = lac_cuda_fail(ctx, e, "reading a share's fault flag", __FILE__, __LINE__);
        else if (row < fault) fault = row;
    }
    LAC_CHECK(st);
    if (fault != MAP_NO_FAULT) return lac_map_describe_row(ctx, call, fault);   /* T untouched */

    /* The shares' accumulators combined on the first device in share order. */
    cudaStream_t stream = first->stream;
    void *total = jobs[0].scratch, *recv = jobs[0].extra;
    for (int i = 1; i < shares; i++) {
        const int device = first->shares[i]->device;   /* peer access: enabled with the context */
        if (acc_bytes)
            LAC_CUDA_CHECK(ctx, cudaMemcpyPeerAsync(recv, first->device, jobs[i].scratch, device, acc_bytes, stream));
        LAC_CHECK(lac_map_combine_launch(ctx, &L, call->value_dtype, slots, total, recv));
    }
    map_strategy whole;
    memset(&whole, 0, sizeof whole);   /* capacity 0: the finalise reads the combined scratch only */
    LAC_CHECK(lac_map_finalize_and_report(ctx, call, &whole, &L, total, NULL, slots, jobs[0].t_dev, jobs[0].fault));
    if (t_bytes) {
        LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(call->target, jobs[0].t_dev, t_bytes, cudaMemcpyDeviceToHost, stream));
        LAC_CUDA_CHECK(ctx, cudaStreamSynchronize(stream));
    }
    return LAC_SUCCESS;
}
