/* map on the CUDA backend, out of core: S, R (and w) in host memory, possibly
 * larger than the device, stream through in chunks of rows. Two device buffer
 * sets alternate between the context's two copy streams, so that the copy of
 * chunk k+1 overlaps the reduction of chunk k on the compute stream; every
 * chunk reduces into the same scratch accumulators (private copies fold into
 * their partials rows), and T is written once at the end, only when no row was
 * flagged. Pinned host memory (lac_host_alloc_pinned, cudaHostRegister) is
 * copied from directly at full speed; pageable memory goes through the
 * driver's own staging, slower and without overlap on the host side. */
#include "backend/cuda/map/map_cuda.cuh"

#include <string.h>


static lac_status is_pinned(lac_ctx_t ctx, const void *p, int *pinned)
{
    *pinned = 0;
    if (!p) return LAC_SUCCESS;
    cudaPointerAttributes attr;
    cudaError_t e = cudaPointerGetAttributes(&attr, p);
    if (e != cudaSuccess) {
        cudaGetLastError();   /* older drivers answer an error for pageable memory */
        return LAC_SUCCESS;
    }
    *pinned = attr.type == cudaMemoryTypeHost;
    return LAC_SUCCESS;
}

/* Queues rows [first, first + count) of a host call on ctx's current share:
 * the chunks copied in and reduced into the share's accumulators, nothing
 * finalised. The workspace gets `extra` bytes more, at job->extra. */
extern "C" lac_status lac_map_stream_enqueue(lac_ctx_t ctx, const lac_map_call *call, int64_t first, int64_t count,
                                             size_t extra, map_stream_job *job)
{
    memset(job, 0, sizeof *job);
    lac_cuda_state *cs = ctx->cuda;
    cudaStream_t stream = cs->stream;
    const int64_t slots = call->n * call->b;
    const size_t vsz = lac_dtype_size(call->value_dtype), isz = lac_dtype_size(call->index_dtype);
    const size_t t_bytes = (size_t)slots * vsz;
    int64_t chunk = call->params.chunk_elements > 0 ? call->params.chunk_elements : MAP_STREAM_DEFAULT_ROWS;
    if (chunk > count) chunk = count > 0 ? count : 1;

    /* The strategy is sized for one chunk: the same grid serves every chunk,
     * so each private copy keeps folding into its own partials row. */
    lac_map_call sized = *call;
    sized.m = chunk;
    map_layout L = lac_map_layout_for(call);
    map_strategy S;
    LAC_CHECK(lac_map_strategy_choose(ctx, &sized, &L, &S));
    if (count == 0) S.capacity = 0;
    job->L = L;
    job->S = S;

    size_t s_chunk = lac_map_align256((size_t)chunk * call->b * vsz), r_chunk = lac_map_align256((size_t)chunk * isz),
           w_chunk = call->weights ? lac_map_align256((size_t)chunk * vsz) : 0;
    size_t scratch_bytes = lac_map_align256(lac_map_scratch_bytes(&L, &S, slots));
    size_t total = scratch_bytes + lac_map_align256(t_bytes) + 2 * (s_chunk + r_chunk + w_chunk) + extra;
    void *ws = NULL;
    LAC_CHECK(lac_cuda_workspace(ctx, total, &ws));
    unsigned char *p = (unsigned char *)ws;
    lac_map_scratch_carve(p, &L, &S, slots, &job->scratch, &job->partials, &job->fault);
    p += scratch_bytes;
    job->t_dev = p;
    p += lac_map_align256(t_bytes);
    void *s_buf[2], *r_buf[2], *w_buf[2];
    for (int k = 0; k < 2; k++) {
        s_buf[k] = p;
        p += s_chunk;
        r_buf[k] = p;
        p += r_chunk;
        w_buf[k] = call->weights ? (void *)p : NULL;
        p += w_chunk;
    }
    job->extra = extra ? p : NULL;

    int pinned_s = 0, pinned_r = 0, pinned_w = 0;
    LAC_CHECK(is_pinned(ctx, call->source, &pinned_s));
    LAC_CHECK(is_pinned(ctx, call->bridge, &pinned_r));
    LAC_CHECK(is_pinned(ctx, call->weights, &pinned_w));
    lac_log(ctx, LAC_LOG_DEBUG, "map cuda stream: rows %lld..%lld in chunks of %lld, pinned S/R/w %d/%d/%d, cluster %d x %d",
            (long long)first, (long long)(first + count), (long long)chunk, pinned_s, pinned_r, pinned_w, S.cluster_size,
            S.clusters);

    for (int k = 0; k < 2; k++) {
        LAC_CUDA_CHECK(ctx, cudaEventCreateWithFlags(&job->copied[k], cudaEventDisableTiming));
        LAC_CUDA_CHECK(ctx, cudaEventCreateWithFlags(&job->consumed[k], cudaEventDisableTiming));
    }
    LAC_CHECK(lac_map_scratch_init(ctx, &L, S.capacity < slots ? job->scratch : NULL, slots, job->fault));
    /* T's current values are needed on the device when folding into them. */
    if (call->params.accumulate && t_bytes)
        LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(job->t_dev, call->target, t_bytes, cudaMemcpyHostToDevice, stream));

    map_reduce_args a = lac_map_reduce_args_for(call, &L, job->scratch, job->partials, job->fault);
    int index = 0;
    for (int64_t r0 = first; r0 < first + count; r0 += chunk, index++) {
        const int k = index & 1;
        const int64_t rows = first + count - r0 < chunk ? first + count - r0 : chunk;
        LAC_CHECK(lac_map_chunk_in(ctx, call, r0, rows, index, s_buf, r_buf, w_buf, 1, 1, job->copied, job->consumed));
        a.source = s_buf[k];
        a.bridge = r_buf[k];
        a.weights = w_buf[k];
        a.rows = rows;
        a.row0 = r0;
        a.partials_fresh = index == 0;
        LAC_CHECK(lac_map_reduce_launch(ctx, &S, &a));
        LAC_CUDA_CHECK(ctx, cudaEventRecord(job->consumed[k], stream));
    }
    return LAC_SUCCESS;
}

extern "C" lac_status lac_map_chunk_in(lac_ctx_t ctx, const lac_map_call *call, int64_t r0, int64_t rows, int index,
                                       void *const s[2], void *const r[2], void *const w[2], int source, int bridge,
                                       cudaEvent_t copied[2], cudaEvent_t consumed[2])
{
    lac_cuda_state *cs = ctx->cuda;
    const int k = index & 1;
    cudaStream_t copy = cs->copy_streams[k];
    const size_t vsz = lac_dtype_size(call->value_dtype), isz = lac_dtype_size(call->index_dtype);
    /* Set k is free once the kernels two chunks back have read it. */
    if (index >= 2) LAC_CUDA_CHECK(ctx, cudaStreamWaitEvent(copy, consumed[k], 0));
    if (bridge)
        LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(r[k], (const unsigned char *)call->bridge + (size_t)r0 * isz, (size_t)rows * isz,
                                            cudaMemcpyHostToDevice, copy));
    if (source)
        LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(s[k], (const unsigned char *)call->source + (size_t)r0 * call->b * vsz,
                                            (size_t)rows * call->b * vsz, cudaMemcpyHostToDevice, copy));
    if (call->weights)
        LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(w[k], (const unsigned char *)call->weights + (size_t)r0 * vsz, (size_t)rows * vsz,
                                            cudaMemcpyHostToDevice, copy));
    LAC_CUDA_CHECK(ctx, cudaEventRecord(copied[k], copy));
    LAC_CUDA_CHECK(ctx, cudaStreamWaitEvent(cs->stream, copied[k], 0));
    return LAC_SUCCESS;
}

extern "C" void lac_map_stream_release(lac_ctx_t ctx, map_stream_job *job)
{
    /* On an early exit, copies may still be in flight into the workspace. */
    lac_cuda_state *cs = ctx->cuda;
    cudaStreamSynchronize(cs->copy_streams[0]);
    cudaStreamSynchronize(cs->copy_streams[1]);
    cudaStreamSynchronize(cs->stream);
    for (int k = 0; k < 2; k++) {
        if (job->copied[k]) cudaEventDestroy(job->copied[k]);
        if (job->consumed[k]) cudaEventDestroy(job->consumed[k]);
        job->copied[k] = job->consumed[k] = NULL;
    }
}

extern "C" lac_status lac_map_cuda_stream(lac_ctx_t ctx, const lac_map_call *call)
{
    const int64_t slots = call->n * call->b;
    const size_t t_bytes = (size_t)slots * lac_dtype_size(call->value_dtype);
    map_stream_job job;
    lac_status st = lac_map_stream_enqueue(ctx, call, 0, call->m, 0, &job);
    if (st >= 0)
        st = lac_map_finalize_and_report(ctx, call, &job.S, &job.L, job.scratch, job.partials, slots, job.t_dev, job.fault);
    if (st >= 0 && t_bytes) {
        cudaStream_t stream = ctx->cuda->stream;
        cudaError_t e = cudaMemcpyAsync(call->target, job.t_dev, t_bytes, cudaMemcpyDeviceToHost, stream);
        if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
        if (e != cudaSuccess) st = lac_cuda_fail(ctx, e, "copying T back", __FILE__, __LINE__);
    }
    lac_map_stream_release(ctx, &job);
    return st;
}

/* ------------------------------------------------------------------------ */
/* A row range copied whole (deterministic and planned calls of host arrays) */
/* ------------------------------------------------------------------------ */
extern "C" void lac_map_rows_free(map_rows_dev *d)
{
    cudaFree(d->source);
    cudaFree(d->bridge);
    cudaFree(d->weights);
    cudaFree(d->target);
    cudaGetLastError();
    memset(d, 0, sizeof *d);
}

extern "C" lac_status lac_map_rows_fit(lac_ctx_t ctx, const lac_map_call *call, int64_t count, int bridge_given,
                                       int with_target, int *fits, size_t *need, size_t *room)
{
    const size_t vs = lac_dtype_size(call->value_dtype), is = lac_dtype_size(call->index_dtype);
    *need = (size_t)count * call->b * vs + (with_target ? (size_t)call->n * call->b * vs : 0) +
            (call->bridge && !bridge_given ? (size_t)count * is : 0) + (call->weights ? (size_t)count * vs : 0);
    size_t free_bytes = 0, total_bytes = 0;
    LAC_CUDA_CHECK(ctx, cudaMemGetInfo(&free_bytes, &total_bytes));
    const size_t margin = (size_t)1 << 28;
    *room = free_bytes > margin ? free_bytes - margin : 0;
    const char *cap_text = lac_knob_string(ctx, LAC_KNOB_CUDA_MEMORY_CAP);
    uint64_t cap = 0;
    if (cap_text && *cap_text) {
        if (lac_parse_bytes(cap_text, &cap) != 0)
            return lac_error(ctx, LAC_ERR_VALUE, "LACUNA_CUDA_MEMORY_CAP=%s is not a byte count (digits, optionally k, M, "
                             "G or T)", cap_text);
        if (cap < *room) *room = (size_t)cap;
    }
    *fits = *need <= *room;
    return LAC_SUCCESS;
}

extern "C" lac_status lac_map_rows_copy(lac_ctx_t ctx, const lac_map_call *call, int64_t first, int64_t count,
                                        const int32_t *bridge, int with_target, map_rows_dev *d, lac_map_call *dcall)
{
    memset(d, 0, sizeof *d);
    cudaStream_t st = ctx->cuda->stream;
    const size_t vs = lac_dtype_size(call->value_dtype), is = lac_dtype_size(call->index_dtype);
    const size_t s_bytes = (size_t)count * call->b * vs, t_bytes = with_target ? (size_t)call->n * call->b * vs : 0,
                 r_bytes = call->bridge && !bridge ? (size_t)count * is : 0,
                 w_bytes = call->weights ? (size_t)count * vs : 0;
    int fits = 0;
    size_t need = 0, room = 0;
    LAC_CHECK(lac_map_rows_fit(ctx, call, count, bridge != NULL, with_target, &fits, &need, &room));
    if (!fits)
        return lac_error(ctx, LAC_ERR_UNSUPPORTED,
                         "a planned CUDA map of host arrays, or a deterministic one that the fixed-point words do not "
                         "serve (MIN/MAX aside, values spanning more than their range), copies its rows to device %d "
                         "(%.1f GB), but only %.1f GB may be used: use device arrays in smaller batches, drop "
                         "deterministic, or use the CPU backend",
                         ctx->cuda->device, need / 1e9, room / 1e9);
    lac_status s = LAC_SUCCESS;
    const char *S = (const char *)call->source + (size_t)first * call->b * vs;
    LAC_CUDA_CHECK_GOTO(ctx, cudaMalloc(&d->source, s_bytes ? s_bytes : 1), s, fail);
    if (s_bytes) LAC_CUDA_CHECK_GOTO(ctx, cudaMemcpyAsync(d->source, S, s_bytes, cudaMemcpyHostToDevice, st), s, fail);
    if (with_target) {
        LAC_CUDA_CHECK_GOTO(ctx, cudaMalloc(&d->target, t_bytes ? t_bytes : 1), s, fail);
        if (t_bytes)
            LAC_CUDA_CHECK_GOTO(ctx, cudaMemcpyAsync(d->target, call->target, t_bytes, cudaMemcpyHostToDevice, st), s, fail);
    }
    if (call->bridge && !bridge) {
        LAC_CUDA_CHECK_GOTO(ctx, cudaMalloc(&d->bridge, r_bytes ? r_bytes : 1), s, fail);
        if (r_bytes)
            LAC_CUDA_CHECK_GOTO(ctx, cudaMemcpyAsync(d->bridge, (const char *)call->bridge + (size_t)first * is, r_bytes,
                                                     cudaMemcpyHostToDevice, st),
                                s, fail);
    }
    if (call->weights) {
        LAC_CUDA_CHECK_GOTO(ctx, cudaMalloc(&d->weights, w_bytes ? w_bytes : 1), s, fail);
        if (w_bytes)
            LAC_CUDA_CHECK_GOTO(ctx, cudaMemcpyAsync(d->weights, (const char *)call->weights + (size_t)first * vs, w_bytes,
                                                     cudaMemcpyHostToDevice, st),
                                s, fail);
    }
    *dcall = *call;
    dcall->memory = LAC_MEM_DEVICE;
    dcall->m = count;
    dcall->source = d->source;
    dcall->weights = d->weights;
    if (with_target) dcall->target = d->target;
    if (bridge) {   /* a plan's part: checked, narrowed, resident */
        dcall->bridge = bridge;
        dcall->index_dtype = LAC_INT32;
        dcall->bridge_checked = 1;
    } else {
        dcall->bridge = d->bridge;
    }
    return LAC_SUCCESS;
fail:
    cudaStreamSynchronize(st);   /* copies queued before the failure read d's buffers */
    lac_map_rows_free(d);
    return s;
}
