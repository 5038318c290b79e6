/* map on the CUDA backend, stream-ordered (include/lacuna/lacuna_cuda.h): the
 * one-shot device paths on the caller's stream with their fault reports
 * deferred. Each call resets its own fault flag on the stream and its last
 * kernel lowers the context's sticky word to (call number << MAP_TAG_SHIFT) |
 * row when a row was flagged, T left untouched; synchronize reads the word,
 * names the fault from the remembered call and resets the word. */
#include "backend/cuda/map/map_cuda.cuh"

#include <string.h>

#define MAP_TAG_MASK ((1ull << (64 - MAP_TAG_SHIFT - 1)) - 1)   /* call numbers kept in a tag */
#define MAP_ROW_MASK ((1ull << MAP_TAG_SHIFT) - 1)

static lac_status async_state(lac_ctx_t ctx, map_cuda_ctx_state **out)
{
    map_cuda_ctx_state *s = NULL;
    LAC_CHECK(lac_map_cuda_state(ctx, &s));
    if (!s->sticky) {
        void *p = NULL;
        LAC_CUDA_CHECK(ctx, cudaMalloc(&p, sizeof(unsigned long long)));
        cudaError_t e = cudaMemset(p, 0xFF, sizeof(unsigned long long));
        if (e != cudaSuccess) {
            cudaFree(p);
            LAC_CUDA_CHECK(ctx, e);
        }
        s->sticky = (unsigned long long *)p;
    }
    if (!s->async_done) LAC_CUDA_CHECK(ctx, cudaEventCreateWithFlags(&s->async_done, cudaEventDisableTiming));
    *out = s;
    return LAC_SUCCESS;
}

static lac_status async_map(lac_ctx_t ctx, const lac_map_call *call, void *stream)
{
    LAC_CHECK(lac_cuda_use_device(ctx));
    if (call->memory != LAC_MEM_DEVICE)
        return lac_error(ctx, LAC_ERR_ARGUMENT, "lac_map_cuda_async takes device arrays (host arrays are streamed with synchronisations: use lac_map)");
    const bool order_free = call->params.op == LAC_MAP_MIN || call->params.op == LAC_MAP_MAX;
    if (call->params.deterministic && !order_free)
        return lac_error(ctx, LAC_ERR_UNSUPPORTED,
                         "a deterministic %s sorts the bridge with synchronisations: use lac_map or a plan",
                         lac_map_op_name(call->params.op));
    if (call->n == 0) return LAC_SUCCESS;
    map_cuda_ctx_state *s = NULL;
    LAC_CHECK(async_state(ctx, &s));
    cudaStream_t user = (cudaStream_t)stream;
    map_deferred d;
    d.sticky = s->sticky;
    d.tag = (s->async_seq & MAP_TAG_MASK) << MAP_TAG_SHIFT;
    /* Every launch of the paths goes to the context's compute stream: for
     * this call, that is the caller's. */
    cudaStream_t own = ctx->cuda->stream;
    ctx->cuda->stream = user;
    lac_status st = lac_map_cuda_device(ctx, call, &d);
    ctx->cuda->stream = own;
    if (st < 0) return st;
    map_async_entry *e = &s->ring[s->async_seq % MAP_ASYNC_RING];
    e->seq = s->async_seq++;
    e->call = *call;
    /* The context's own stream (lac_map, the workspace's next user) waits for
     * this call; not while the caller's stream is being captured (the wait
     * would pull the context's stream into the graph). */
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    LAC_CUDA_CHECK(ctx, cudaStreamIsCapturing(user, &capturing));
    if (capturing == cudaStreamCaptureStatusNone) {
        LAC_CUDA_CHECK(ctx, cudaEventRecord(s->async_done, user));
        LAC_CUDA_CHECK(ctx, cudaStreamWaitEvent(own, s->async_done, 0));
    }
    return LAC_SUCCESS;
}

static lac_status async_synchronize(lac_ctx_t ctx, void *stream)
{
    LAC_CHECK(lac_cuda_use_device(ctx));
    LAC_CUDA_CHECK(ctx, cudaStreamSynchronize((cudaStream_t)stream));
    map_cuda_ctx_state *s = NULL;
    LAC_CHECK(lac_map_cuda_state(ctx, &s));
    if (!s->sticky) return LAC_SUCCESS;   /* no deferred call yet */
    unsigned long long word = MAP_NO_FAULT;
    LAC_CUDA_CHECK(ctx, cudaMemcpy(&word, s->sticky, sizeof word, cudaMemcpyDeviceToHost));
    if (word == MAP_NO_FAULT) return LAC_SUCCESS;
    LAC_CUDA_CHECK(ctx, cudaMemset(s->sticky, 0xFF, sizeof(unsigned long long)));
    const unsigned long long tag = word >> MAP_TAG_SHIFT, row = word & MAP_ROW_MASK;
    for (int i = 0; i < MAP_ASYNC_RING; i++) {
        const map_async_entry *e = &s->ring[i];
        if ((e->seq & MAP_TAG_MASK) == tag && e->seq < s->async_seq) return lac_map_describe_row(ctx, &e->call, row);
    }
    return lac_error(ctx, LAC_ERR_RANGE, "an asynchronous map call (number %llu) flagged its row %llu (a bad index or NaN)",
                     tag, row);
}

extern "C" const lac_map_async_backend lac_map_cuda_async_table = {
    async_map,
    async_synchronize,
};
