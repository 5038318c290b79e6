/* map on the CUDA backend over several devices (a context made with several
 * device ids, lac_ctx_params.device_ids). A call on host arrays is split by
 * row ranges across the context's shares in proportion to their speed (SMs x
 * clock): each share streams its own range through its device as the
 * out-of-core path does, into its own accumulators; the first device then
 * combines them in share order (a peer copy where the devices allow it, the
 * driver stages it through the host otherwise) and writes T once, only when
 * no share flagged a row. Device arrays stay on the first device: the map
 * reads each element once, so moving a row range to another device costs
 * more than reducing it in place.
 *
 * Deterministic SUM / COUNT / MEAN of host arrays split the same way, each
 * share's rows copied whole to its device (or, where they do not fit,
 * streamed twice in chunks: map_fixed_stream.cu) and summed in the exact
 * fixed-point words of map_fixed.cu. The words' scale must be one for all:
 * every share's range pass runs first, the host merges the ranges (the
 * largest exponent, the lowest bit) and hands the merged range to every
 * share's accumulation pass, whose words are then exact integer sums of its
 * rows; added word by word on the first device they are the one-device
 * call's sums, rounded once into T: the bits of one device (and of the CPU
 * wherever its float64 sums are exact). What the words do not cover stays
 * on the first device whole, with its bits: a range too wide for three
 * words (the sorted float64 path), MIN / MAX (order-free: split above),
 * LACUNA_MAP_CUDA_FIXED=0, and targets beyond 2^31. */
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

/* ------------------------------------------------------------------------ */
/* Deterministic: exact fixed-point parts added on the first device          */
/* ------------------------------------------------------------------------ */
/* The combined words into T on the first device, T copied back. */
static lac_status combine_fixed(lac_ctx_t ctx, const lac_map_call *call, map_fixed_part *const *P, int shares)
{
    lac_cuda_state *first = ctx->cuda;
    const size_t t_bytes = (size_t)(call->n * call->b) * lac_dtype_size(call->value_dtype);
    void *t_dev = NULL;
    LAC_CUDA_CHECK(ctx, cudaMalloc(&t_dev, t_bytes ? t_bytes : 1));
    lac_status st = LAC_SUCCESS;
    LAC_CUDA_CHECK_GOTO(ctx, cudaMemcpyAsync(t_dev, call->target, t_bytes, cudaMemcpyHostToDevice, first->stream), st, done);
    for (int i = 1; i < shares && st >= 0; i++) st = lac_map_fixed_part_add(ctx, P[0], P[i]);
    if (st >= 0) st = lac_map_fixed_part_finish(ctx, call, P[0], t_dev);
    if (st >= 0)
        LAC_CUDA_CHECK_GOTO(ctx, cudaMemcpyAsync(call->target, t_dev, t_bytes, cudaMemcpyDeviceToHost, first->stream), st,
                            done);
    if (st >= 0) LAC_CUDA_CHECK_GOTO(ctx, cudaStreamSynchronize(first->stream), st, done);
done:
    cudaStreamSynchronize(first->stream);
    cudaFree(t_dev);
    cudaGetLastError();
    return st;
}

extern "C" int lac_map_cuda_multi_fixed_serves(lac_ctx_t ctx, const lac_map_call *call)
{
    lac_map_call probe = *call;
    probe.memory = LAC_MEM_DEVICE;
    return lac_map_fixed_serves(ctx, &probe);
}

extern "C" lac_status lac_map_cuda_multi_fixed(lac_ctx_t ctx, const lac_map_call *call, int shares, const int64_t *start,
                                               int32_t *const *bridges, int *done)
{
    *done = 0;
    map_rows_dev rows[LAC_MAX_DEVICES];
    lac_map_call parts[LAC_MAX_DEVICES];
    map_fixed_part *P[LAC_MAX_DEVICES];
    map_fixed_stream *F[LAC_MAX_DEVICES];   /* a share whose rows stream in chunks, else NULL */
    memset(rows, 0, sizeof rows);
    memset(P, 0, sizeof P);
    memset(F, 0, sizeof F);
    lac_status st = LAC_SUCCESS;
    /* Every share's rows in (or streaming) and its range pass queued before any is waited for. */
    for (int i = 0; i < shares && st >= 0; i++) {
        lac_cuda_share_scope scope(ctx, i);
        const int64_t count = start[i + 1] - start[i];
        int fits = 1;
        size_t need = 0, room = 0;
        if (!bridges) st = lac_map_rows_fit(ctx, call, count, 0, 0, &fits, &need, &room);
        if (st >= 0 && !fits) {
            st = lac_map_fixed_stream_begin(ctx, call, start[i], count, i == 0, &F[i], &P[i]);
            continue;
        }
        if (st >= 0)
            st = lac_map_rows_copy(ctx, call, start[i], count, bridges ? bridges[i] : NULL, 0, &rows[i], &parts[i]);
        if (st >= 0) st = lac_map_fixed_part_begin(ctx, &parts[i], call->m, i == 0, &P[i]);
    }
    int range[4] = {0, 0, 0, 0};   /* biased encodings: the larger, the wider */
    for (int i = 0; i < shares && st >= 0; i++) {
        lac_cuda_share_scope scope(ctx, i);
        int r[4];
        st = lac_map_fixed_part_range(ctx, P[i], r);
        for (int j = 0; j < 4 && st >= 0; j++)
            if (r[j] > range[j]) range[j] = r[j];
    }
    const bool fits = st >= 0 && lac_map_fixed_range_fits(P[0], range);
    for (int i = 0; i < shares && st >= 0 && fits; i++) {
        lac_cuda_share_scope scope(ctx, i);
        st = F[i] ? lac_map_fixed_stream_accumulate(ctx, F[i], range)
                  : lac_map_fixed_part_accumulate(ctx, &parts[i], P[i], range);
    }
    /* The shares hold ascending row ranges: the first flagged is the smallest row. */
    unsigned long long fault = MAP_NO_FAULT;
    for (int i = 0; i < shares && st >= 0 && fits && fault == MAP_NO_FAULT; i++) {
        lac_cuda_share_scope scope(ctx, i);
        unsigned long long row = MAP_NO_FAULT;
        st = lac_map_fixed_part_fault(ctx, P[i], &row);
        if (st >= 0 && row != MAP_NO_FAULT) fault = (unsigned long long)start[i] + row;
    }
    if (st >= 0 && fits && fault == MAP_NO_FAULT) {
        for (int i = 1; i < shares && st >= 0; i++) {   /* the other parts' words ready before the first reads them */
            lac_cuda_share_scope scope(ctx, i);
            LAC_CUDA_CHECK_GOTO(ctx, cudaStreamSynchronize(ctx->cuda->stream), st, release);
        }
        if (st >= 0) {
            lac_log(ctx, LAC_LOG_DEBUG, "map cuda: %lld rows split across %d devices, %lld on the first (deterministic)",
                    (long long)call->m, shares, (long long)(start[1] - start[0]));
            st = combine_fixed(ctx, call, P, shares);
        }
    }
release:
    for (int i = 0; i < shares; i++) {
        lac_cuda_share_scope scope(ctx, i);
        cudaStreamSynchronize(ctx->cuda->stream);   /* copies may still be in flight after a failure */
        lac_map_fixed_stream_free(ctx, F[i]);
        lac_map_rows_free(&rows[i]);
        lac_map_fixed_part_free(P[i]);
    }
    LAC_CHECK(st);
    if (!fits) {
        lac_log(ctx, LAC_LOG_DEBUG, "map cuda: the values span more than the fixed-point words hold; not split");
        return LAC_SUCCESS;
    }
    *done = 1;
    return lac_map_describe_row(ctx, call, fault);   /* T untouched when a row was flagged */
}

extern "C" lac_status lac_map_cuda_multi_deterministic(lac_ctx_t ctx, const lac_map_call *call)
{
    if (!lac_map_cuda_multi_fixed_serves(ctx, call)) return lac_map_cuda_deterministic(ctx, call);
    int64_t start[LAC_MAX_DEVICES + 1];
    lac_cuda_share_split(ctx->cuda, call->m, start);
    int done = 0;
    LAC_CHECK(lac_map_cuda_multi_fixed(ctx, call, ctx->cuda->share_count, start, NULL, &done));
    return done ? LAC_SUCCESS : lac_map_cuda_deterministic(ctx, call);   /* the whole call on the first device */
}
