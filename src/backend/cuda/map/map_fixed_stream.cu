/* map on the CUDA backend: a share's rows of a deterministic SUM/COUNT/MEAN
 * on host arrays too large to copy whole, streamed through the exact
 * fixed-point words of map_fixed.cu in chunks. The words need the values'
 * range before the first addition, so the rows pass twice: S (and w) for the
 * range, then, with the range every share agreed on, S, R (and w) into the
 * words. Integer words under one scale: the bits of the whole copy, for
 * (v [+ v]) more bytes a row over the host link. Two buffer sets alternate
 * on the context's two copy streams, as in map_stream.cu, so that a chunk's
 * copy overlaps the last chunk's kernels. */
#include "backend/cuda/map/map_cuda.cuh"

#include <stdlib.h>
#include <string.h>

struct map_fixed_stream {
    lac_map_call host;            /* the call: host arrays */
    int64_t first, count, chunk;  /* the share's rows [first, first + count), chunk rows at a time */
    int index;                    /* chunks queued so far, over both passes */
    void *buf;                    /* the two buffer sets, one allocation */
    void *s[2], *r[2], *w[2];
    cudaEvent_t copied[2], consumed[2];
    map_fixed_part *P;            /* owned by the caller once begun */
};

typedef lac_status (*chunk_fn)(lac_ctx_t ctx, map_fixed_part *P, const lac_map_call *rows, int64_t row0);

static lac_status see_chunk(lac_ctx_t ctx, map_fixed_part *P, const lac_map_call *rows, int64_t row0)
{
    (void)row0;
    return lac_map_fixed_part_see(ctx, P, rows);
}

/* One pass over the share's rows: each chunk's arrays copied in on a copy
 * stream (lac_map_chunk_in), then fn queued on the compute stream over them. */
static lac_status stream_pass(lac_ctx_t ctx, map_fixed_stream *F, bool source, bool bridge, chunk_fn fn)
{
    const lac_map_call *c = &F->host;
    const int64_t end = F->first + F->count;
    for (int64_t r0 = F->first; r0 < end; r0 += F->chunk, F->index++) {
        const int k = F->index & 1;
        const int64_t rows = end - r0 < F->chunk ? end - r0 : F->chunk;
        LAC_CHECK(lac_map_chunk_in(ctx, c, r0, rows, F->index, F->s, F->r, F->w, source, bridge, F->copied, F->consumed));
        lac_map_call d = *c;
        d.memory = LAC_MEM_DEVICE;
        d.m = rows;
        d.source = F->s[k];
        d.bridge = F->r[k];
        d.weights = c->weights ? F->w[k] : NULL;
        LAC_CHECK(fn(ctx, F->P, &d, r0 - F->first));
        LAC_CUDA_CHECK(ctx, cudaEventRecord(F->consumed[k], ctx->cuda->stream));
    }
    return LAC_SUCCESS;
}

extern "C" void lac_map_fixed_stream_free(lac_ctx_t ctx, map_fixed_stream *F)
{
    if (!F) return;
    lac_cuda_state *cs = ctx->cuda;
    /* On an early exit, copies may still be in flight into the buffers. */
    cudaStreamSynchronize(cs->copy_streams[0]);
    cudaStreamSynchronize(cs->copy_streams[1]);
    cudaStreamSynchronize(cs->stream);
    for (int k = 0; k < 2; k++) {
        if (F->copied[k]) cudaEventDestroy(F->copied[k]);
        if (F->consumed[k]) cudaEventDestroy(F->consumed[k]);
    }
    cudaFree(F->buf);
    cudaGetLastError();
    free(F);
}

extern "C" lac_status lac_map_fixed_stream_begin(lac_ctx_t ctx, const lac_map_call *call, int64_t first, int64_t count,
                                                 int recv, map_fixed_stream **out, map_fixed_part **part)
{
    *out = NULL;
    *part = NULL;
    map_fixed_stream *F = (map_fixed_stream *)calloc(1, sizeof *F);
    if (!F) return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "could not allocate a streamed map part");
    F->host = *call;
    F->first = first;
    F->count = count;
    F->chunk = call->params.chunk_elements > 0 ? call->params.chunk_elements : MAP_STREAM_DEFAULT_ROWS;
    if (F->chunk > count) F->chunk = count > 0 ? count : 1;
    const size_t vsz = lac_dtype_size(call->value_dtype), isz = lac_dtype_size(call->index_dtype);
    const size_t s_chunk = lac_map_align256((size_t)F->chunk * call->b * vsz),
                 r_chunk = lac_map_align256((size_t)F->chunk * isz),
                 w_chunk = call->weights ? lac_map_align256((size_t)F->chunk * vsz) : 0, set = s_chunk + r_chunk + w_chunk;
    lac_status st = LAC_SUCCESS;
    LAC_CUDA_CHECK_GOTO(ctx, cudaMalloc(&F->buf, 2 * set), st, fail);
    for (int k = 0; k < 2; k++) {
        unsigned char *p = (unsigned char *)F->buf + k * set;
        F->s[k] = p;
        F->r[k] = p + s_chunk;
        F->w[k] = call->weights ? p + s_chunk + r_chunk : NULL;
        LAC_CUDA_CHECK_GOTO(ctx, cudaEventCreateWithFlags(&F->copied[k], cudaEventDisableTiming), st, fail);
        LAC_CUDA_CHECK_GOTO(ctx, cudaEventCreateWithFlags(&F->consumed[k], cudaEventDisableTiming), st, fail);
    }
    {
        /* The launch shape is a chunk's: every chunk runs on the same grid. */
        lac_map_call shape = *call;
        shape.memory = LAC_MEM_DEVICE;
        shape.m = F->chunk;
        shape.source = F->s[0];
        shape.bridge = F->r[0];
        shape.weights = F->w[0];
        LAC_CHECK_GOTO(lac_map_fixed_part_prepare(ctx, &shape, call->m, recv, &F->P), st, fail);
    }
    lac_log(ctx, LAC_LOG_DEBUG, "map cuda: deterministic rows %lld..%lld streamed in chunks of %lld (two passes)",
            (long long)first, (long long)(first + count), (long long)F->chunk);
    {
        /* The range pass: what the words' scale depends on. */
        int range_pass, range_source, add_source;
        lac_map_fixed_part_reads(F->P, &range_pass, &range_source, &add_source);
        if (range_pass) LAC_CHECK_GOTO(stream_pass(ctx, F, range_source, false, see_chunk), st, fail);
    }
    *out = F;
    *part = F->P;
    return LAC_SUCCESS;
fail:
    lac_map_fixed_part_free(F->P);
    F->P = NULL;
    lac_map_fixed_stream_free(ctx, F);
    return st;
}

extern "C" lac_status lac_map_fixed_stream_accumulate(lac_ctx_t ctx, map_fixed_stream *F, const int range[4])
{
    LAC_CHECK(lac_map_fixed_part_set_range(ctx, F->P, range));
    int range_pass, range_source, add_source;
    lac_map_fixed_part_reads(F->P, &range_pass, &range_source, &add_source);
    return stream_pass(ctx, F, add_source, true, lac_map_fixed_part_add_rows);
}
