/* map plans over host bridges on a CUDA context of several devices: each
 * share plans its row range (lac_cuda_share_split, the split of one-shot
 * calls): its rows of the bridge copied to its device once, checked and
 * kept as int32. An execute on host arrays then copies each share only its
 * rows of S (and w) and, for SUM / COUNT / MEAN, sums them in the exact
 * fixed-point words of map_fixed.cu with one scale, added on the first
 * device (map_multi.cu): the bits of the one-device plan, deterministic or
 * not. The rest runs as the one-shot call over the plan's bridge gathered
 * back: MIN / MAX (order-free, split by the streamed path), and values too
 * far apart for the words (the first device's sorted path, one device's
 * bits). Device arrays live on the first device: the bridge is gathered
 * there and the one-device execute's paths run. */
#include "backend/cuda/map/map_cuda.cuh"

#include <stdlib.h>
#include <string.h>

/* Rows a share needs before a split pays (as map_multi.cu's one-shot calls). */
#define MAP_PLAN_MULTI_MIN_ROWS ((int64_t)1 << 15)

struct map_multi_plan {
    int shares;
    int64_t m, n;
    int64_t start[LAC_MAX_DEVICES + 1];
    int32_t *narrow[LAC_MAX_DEVICES];   /* share i's rows of the checked bridge, on its device */
    int device[LAC_MAX_DEVICES];
};

/* Share's bridge rows checked (fault: the smallest local row outside
 * [0, n)) and narrowed to int32. */
template <class I>
__global__ void map_plan_multi_check_kernel(const I *bridge, int64_t m, int64_t n, int32_t *out, unsigned long long *fault)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < m; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = (int64_t)bridge[i];
        if (r < 0 || r >= n) {
            if ((unsigned long long)i < *(volatile unsigned long long *)fault) atomicMin(fault, (unsigned long long)i);
            out[i] = 0;
        } else {
            out[i] = (int32_t)r;
        }
    }
}

extern "C" int lac_map_multi_plan_wanted(lac_ctx_t ctx, const lac_map_call *call)
{
    const int shares = ctx->cuda->share_count;
    return shares > 1 && call->memory == LAC_MEM_HOST && call->n <= INT32_MAX &&
           call->m >= MAP_PLAN_MULTI_MIN_ROWS * shares;
}

extern "C" void lac_map_multi_plan_free(map_multi_plan *p)
{
    if (!p) return;
    int saved = -1;
    cudaGetDevice(&saved);
    for (int i = 0; i < p->shares; i++) {
        cudaSetDevice(p->device[i]);
        cudaFree(p->narrow[i]);
    }
    if (saved >= 0) cudaSetDevice(saved);
    cudaGetLastError();
    free(p);
}

extern "C" lac_status lac_map_multi_plan_build(lac_ctx_t ctx, const lac_map_call *call, map_multi_plan **out)
{
    *out = NULL;
    map_multi_plan *p = (map_multi_plan *)calloc(1, sizeof *p);
    if (!p) return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "could not allocate a map plan");
    p->shares = ctx->cuda->share_count;
    p->m = call->m;
    p->n = call->n;
    lac_cuda_share_split(ctx->cuda, call->m, p->start);
    const size_t is = lac_dtype_size(call->index_dtype);
    void *copy[LAC_MAX_DEVICES];
    unsigned long long *fault[LAC_MAX_DEVICES];
    memset(copy, 0, sizeof copy);
    memset(fault, 0, sizeof fault);
    lac_status st = LAC_SUCCESS;
    /* Every share's copy and check queued before any is waited for. */
    for (int i = 0; i < p->shares && st >= 0; i++) {
        lac_cuda_share_scope scope(ctx, i);
        cudaStream_t s = ctx->cuda->stream;
        const int64_t rows = p->start[i + 1] - p->start[i];
        p->device[i] = ctx->cuda->device;
        void *ws = NULL;
        LAC_CHECK_GOTO(lac_cuda_workspace(ctx, 256, &ws), st, done);
        fault[i] = (unsigned long long *)ws;
        LAC_CUDA_CHECK_GOTO(ctx, cudaMemsetAsync(fault[i], 0xFF, sizeof *fault[i], s), st, done);
        LAC_CUDA_CHECK_GOTO(ctx, cudaMalloc((void **)&p->narrow[i], (size_t)(rows > 0 ? rows : 1) * sizeof(int32_t)), st, done);
        LAC_CUDA_CHECK_GOTO(ctx, cudaMalloc(&copy[i], (size_t)(rows > 0 ? rows : 1) * is), st, done);
        if (rows == 0) continue;
        LAC_CUDA_CHECK_GOTO(ctx, cudaMemcpyAsync(copy[i], (const char *)call->bridge + (size_t)p->start[i] * is, (size_t)rows * is,
                                                 cudaMemcpyHostToDevice, s), st, done);
        unsigned int grid = (unsigned int)((rows + 255) / 256);
        const unsigned int most = (unsigned int)ctx->cuda->prop.multiProcessorCount * 8;
        if (grid > most) grid = most;
        if (call->index_dtype == LAC_INT32)
            map_plan_multi_check_kernel<int32_t><<<grid, 256, 0, s>>>((const int32_t *)copy[i], rows, call->n, p->narrow[i], fault[i]);
        else
            map_plan_multi_check_kernel<int64_t><<<grid, 256, 0, s>>>((const int64_t *)copy[i], rows, call->n, p->narrow[i], fault[i]);
        LAC_CUDA_CHECK_GOTO(ctx, cudaGetLastError(), st, done);
    }
done:
    {
        /* The shares hold ascending row ranges: the first flagged is the smallest row. */
        unsigned long long row = MAP_NO_FAULT;
        for (int i = 0; i < p->shares; i++) {
            lac_cuda_share_scope scope(ctx, i);
            cudaError_t e = cudaStreamSynchronize(ctx->cuda->stream);
            if (st >= 0 && e != cudaSuccess) st = lac_cuda_fail(ctx, e, "planning a share's rows", __FILE__, __LINE__);
            unsigned long long r = MAP_NO_FAULT;
            if (st >= 0 && fault[i] && row == MAP_NO_FAULT) {
                e = cudaMemcpy(&r, fault[i], sizeof r, cudaMemcpyDeviceToHost);
                if (e != cudaSuccess) st = lac_cuda_fail(ctx, e, "reading a share's fault flag", __FILE__, __LINE__);
                else if (r != MAP_NO_FAULT) row = (unsigned long long)p->start[i] + r;
            }
            cudaFree(copy[i]);
            cudaGetLastError();
        }
        if (st >= 0) st = lac_map_describe_row(ctx, call, row);
    }
    if (st < 0) {
        lac_map_multi_plan_free(p);
        return st;
    }
    lac_log(ctx, LAC_LOG_DEBUG, "map cuda: a plan of %lld rows split across %d devices, %lld on the first",
            (long long)call->m, p->shares, (long long)(p->start[1] - p->start[0]));
    *out = p;
    return LAC_SUCCESS;
}

extern "C" lac_status lac_map_multi_plan_gather(lac_ctx_t ctx, const map_multi_plan *p, int32_t **bridge)
{
    *bridge = NULL;
    cudaStream_t s = ctx->cuda->stream;
    LAC_CUDA_CHECK(ctx, cudaMalloc((void **)bridge, (size_t)(p->m > 0 ? p->m : 1) * sizeof(int32_t)));
    for (int i = 0; i < p->shares; i++) {
        const int64_t rows = p->start[i + 1] - p->start[i];
        if (rows == 0) continue;
        cudaError_t e = cudaMemcpyPeerAsync(*bridge + p->start[i], ctx->cuda->device, p->narrow[i], p->device[i],
                                            (size_t)rows * sizeof(int32_t), s);
        if (e != cudaSuccess) {
            cudaStreamSynchronize(s);
            cudaFree(*bridge);
            *bridge = NULL;
            return lac_cuda_fail(ctx, e, "gathering a plan's bridge", __FILE__, __LINE__);
        }
    }
    return LAC_SUCCESS;
}

/* The one-shot call over the plan's bridge, gathered to the host. */
static lac_status execute_gathered(lac_ctx_t ctx, const map_multi_plan *p, const lac_map_call *call)
{
    int32_t *host = (int32_t *)malloc((size_t)(p->m > 0 ? p->m : 1) * sizeof(int32_t));
    if (!host) return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "could not allocate a map plan's bridge (%lld rows)", (long long)p->m);
    lac_status st = LAC_SUCCESS;
    for (int i = 0; i < p->shares && st >= 0; i++) {   /* unified addressing: any current device */
        const int64_t rows = p->start[i + 1] - p->start[i];
        cudaError_t e = rows ? cudaMemcpy(host + p->start[i], p->narrow[i], (size_t)rows * sizeof(int32_t), cudaMemcpyDeviceToHost)
                             : cudaSuccess;
        if (e != cudaSuccess) st = lac_cuda_fail(ctx, e, "reading a plan's bridge back", __FILE__, __LINE__);
    }
    if (st >= 0) {
        lac_map_call c = *call;
        c.bridge = host;
        c.index_dtype = LAC_INT32;
        c.bridge_checked = 1;
        st = lac_map_cuda(ctx, &c);
    }
    free(host);
    return st;
}

extern "C" lac_status lac_map_multi_plan_execute_host(lac_ctx_t ctx, const map_multi_plan *p, const lac_map_call *call)
{
    /* The split needs this context's shares on the plan's devices. */
    bool same = ctx->cuda->share_count == p->shares;
    for (int i = 0; same && i < p->shares; i++) same = ctx->cuda->shares[i]->device == p->device[i];
    const lac_map_op op = call->params.op;
    if (same && op != LAC_MAP_MIN && op != LAC_MAP_MAX && lac_map_cuda_multi_fixed_serves(ctx, call)) {
        int done = 0;
        LAC_CHECK(lac_map_cuda_multi_fixed(ctx, call, ctx->cuda->share_count, p->start, p->narrow, &done));
        if (done) return LAC_SUCCESS;
    }
    return execute_gathered(ctx, p, call);
}
