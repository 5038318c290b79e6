/* CUDA context state: device selection, streams and a workspace made once per
 * context, cuBLAS/cuSOLVER handles and capability slots made on first use;
 * error reporting for the backend. */
#include "backend/cuda/cuda_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

lac_status lac_cuda_fail(lac_ctx_t ctx, cudaError_t err, const char *what, const char *file, int line)
{
    const char *base = strrchr(file, '/');
    lac_status st = err == cudaErrorMemoryAllocation ? LAC_ERR_OUT_OF_MEMORY : LAC_ERR_CUDA;
    cudaGetLastError();   /* clear a non-sticky error so the context stays usable */
    return lac_error(ctx, st, "%s (%s) at %s:%d: %s", cudaGetErrorName(err), cudaGetErrorString(err),
                     base ? base + 1 : file, line, what);
}

lac_status lac_cublas_fail(lac_ctx_t ctx, int err, const char *what, const char *file, int line)
{
    const char *base = strrchr(file, '/');
    return lac_error(ctx, err == CUBLAS_STATUS_ALLOC_FAILED ? LAC_ERR_OUT_OF_MEMORY : LAC_ERR_CUDA,
                     "cuBLAS status %d (%s) at %s:%d: %s", err, cublasGetStatusString((cublasStatus_t)err),
                     base ? base + 1 : file, line, what);
}

lac_status lac_cusolver_fail(lac_ctx_t ctx, int err, const char *what, const char *file, int line)
{
    const char *base = strrchr(file, '/');
    return lac_error(ctx, err == CUSOLVER_STATUS_ALLOC_FAILED ? LAC_ERR_OUT_OF_MEMORY : LAC_ERR_CUDA,
                     "cuSOLVER status %d at %s:%d: %s", err, base ? base + 1 : file, line, what);
}

int lac_cuda_devices(void)
{
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return count;
}

const char *lac_cuda_runtime_info(void)
{
    static char info[128];
    if (!info[0]) {
        int runtime = 0, driver = 0;
        cudaRuntimeGetVersion(&runtime);
        if (cudaDriverGetVersion(&driver) != cudaSuccess) driver = 0;
        cudaGetLastError();
        snprintf(info, sizeof info, "runtime %d.%d, driver %d.%d, built for sm_%s", runtime / 1000,
                 (runtime % 1000) / 10, driver / 1000, (driver % 1000) / 10, LACUNA_CUDA_ARCHS);
    }
    return info;
}

lac_status lac_cuda_describe(lac_ctx_t ctx, int device, char *buf, size_t len)
{
    cudaDeviceProp prop;
    LAC_CUDA_CHECK(ctx, cudaGetDeviceProperties(&prop, device));
    snprintf(buf, len, "%s, sm_%d%d, %d SMs, %.1f GiB, L2 %.0f MiB", prop.name, prop.major, prop.minor,
             prop.multiProcessorCount, (double)prop.totalGlobalMem / (1024.0 * 1024.0 * 1024.0),
             prop.l2CacheSize / (1024.0 * 1024.0));
    return LAC_SUCCESS;
}

lac_status lac_cuda_use_device(lac_ctx_t ctx)
{
    LAC_CUDA_CHECK(ctx, cudaSetDevice(ctx->cuda->device));
    return LAC_SUCCESS;
}

/* One share's device, properties and streams (the handles come on first use). */
static lac_status share_init(lac_ctx_t ctx, lac_cuda_state *s, int device, int count)
{
    s->device = device;
    if (device >= count) return lac_error(ctx, LAC_ERR_NO_DEVICE, "CUDA device %d asked for, but only %d visible", device, count);
    LAC_CUDA_CHECK(ctx, cudaSetDevice(device));
    LAC_CUDA_CHECK(ctx, cudaGetDeviceProperties(&s->prop, device));
    LAC_CUDA_CHECK(ctx, cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking));
    for (int i = 0; i < 2; i++) LAC_CUDA_CHECK(ctx, cudaStreamCreateWithFlags(&s->copy_streams[i], cudaStreamNonBlocking));
    return LAC_SUCCESS;
}

static void share_fini(lac_ctx_t ctx, lac_cuda_state *s)
{
    cudaSetDevice(s->device);
    /* Capability state first: it may still hold device memory. */
    for (int i = 0; i < LAC_CUDA_SLOTS; i++)
        if (s->slots[i].state) {
            if (s->slots[i].release) s->slots[i].release(ctx, s->slots[i].state);
            free(s->slots[i].state);
        }
    if (s->workspace) cudaFree(s->workspace);
    if (s->cusolver) cusolverDnDestroy(s->cusolver);
    if (s->cublas) cublasDestroy(s->cublas);
    for (int i = 0; i < 2; i++)
        if (s->copy_streams[i]) cudaStreamDestroy(s->copy_streams[i]);
    if (s->stream) cudaStreamDestroy(s->stream);
    cudaGetLastError();
}

lac_status lac_cuda_ctx_init(lac_ctx_t ctx)
{
    int count = lac_cuda_devices();
    if (count == 0) return lac_error(ctx, LAC_ERR_NO_DEVICE, "CUDA backend asked for, but no CUDA device is visible");
    const int shares = ctx->params.num_devices > 1 ? ctx->params.num_devices : 1;
    lac_cuda_state *s = (lac_cuda_state *)calloc(1, sizeof *s);
    if (!s) return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "could not allocate the CUDA state");
    ctx->cuda = s;
    s->share_count = 1;
    s->shares[0] = s;
    /* No device named: under mpirun each rank of a host takes the next GPU
     * (ranks beyond the GPUs share them). */
    const int first = ctx->params.num_devices > 0 ? ctx->params.device_ids[0] : ctx->host_rank % count;
    if (ctx->params.num_devices == 0 && ctx->ranks > 1)
        lac_log(ctx, LAC_LOG_INFO, "context: rank %d takes CUDA device %d of this host's %d", ctx->rank, first, count);
    lac_status st = share_init(ctx, s, first, count);
    for (int i = 1; i < shares && st == LAC_SUCCESS; i++) {
        lac_cuda_state *share = (lac_cuda_state *)calloc(1, sizeof *share);
        if (!share) {
            st = lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "could not allocate the CUDA state of device %d", i);
            break;
        }
        s->shares[s->share_count++] = share;
        share->share_count = 0;
        st = share_init(ctx, share, ctx->params.device_ids[i], count);
    }
    if (st < 0) {
        lac_cuda_ctx_fini(ctx);
        return st;
    }
    /* Shares on distinct devices copy to each other directly (NVLink or PCIe
     * peer) where the pair allows; elsewhere the driver stages the copies
     * through host memory, much slower. */
    int staged = 0;
    for (int a = 0; a < s->share_count; a++)
        for (int b = 0; b < s->share_count; b++) {
            int from = s->shares[a]->device, to = s->shares[b]->device, can = 0;
            if (from == to) continue;
            if (cudaDeviceCanAccessPeer(&can, from, to) == cudaSuccess && can) {
                cudaSetDevice(from);
                if (cudaDeviceEnablePeerAccess(to, 0) != cudaSuccess) cudaGetLastError();   /* already enabled */
            } else {
                staged++;
            }
        }
    if (staged)
        lac_log(ctx, LAC_LOG_INFO, "cuda: %d device pairs without peer access: copies between them pass through the host",
                staged);
    cudaSetDevice(s->device);
    lac_log(ctx, LAC_LOG_INFO, "cuda: device %d (%s, %d SMs)%s", s->device, s->prop.name, s->prop.multiProcessorCount,
            shares > 1 ? " and more: impute and mf split their work across them, map its host-array calls" : "");
    return LAC_SUCCESS;
}

void lac_cuda_ctx_fini(lac_ctx_t ctx)
{
    lac_cuda_state *s = ctx->cuda;
    if (!s) return;
    for (int i = s->share_count - 1; i >= 1; i--) {
        share_fini(ctx, s->shares[i]);
        free(s->shares[i]);
    }
    share_fini(ctx, s);
    free(s);
    ctx->cuda = NULL;
}

lac_status lac_cuda_synchronize(lac_ctx_t ctx)
{
    LAC_CUDA_CHECK(ctx, cudaStreamSynchronize(ctx->cuda->stream));
    return LAC_SUCCESS;
}

lac_status lac_cuda_workspace(lac_ctx_t ctx, size_t bytes, void **ptr)
{
    lac_cuda_state *s = ctx->cuda;
    if (bytes > s->workspace_bytes) {
        if (s->workspace) {
            LAC_CUDA_CHECK(ctx, cudaStreamSynchronize(s->stream));
            LAC_CUDA_CHECK(ctx, cudaFree(s->workspace));
            s->workspace = NULL;
            s->workspace_bytes = 0;
        }
        LAC_CUDA_CHECK(ctx, cudaMalloc(&s->workspace, bytes));
        s->workspace_bytes = bytes;
    }
    *ptr = s->workspace;
    return LAC_SUCCESS;
}

lac_status lac_cuda_slot_get(lac_ctx_t ctx, int slot, size_t bytes, lac_cuda_slot_release_fn release, void **state)
{
    lac_cuda_slot *sl = &ctx->cuda->slots[slot];
    if (!sl->state) {
        sl->state = calloc(1, bytes);
        if (!sl->state) return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "could not allocate %zu bytes of CUDA state", bytes);
        sl->release = release;
    }
    *state = sl->state;
    return LAC_SUCCESS;
}

lac_status lac_cuda_cublas(lac_ctx_t ctx, cublasHandle_t *out)
{
    lac_cuda_state *s = ctx->cuda;
    if (!s->cublas) {
        LAC_CUBLAS_CHECK(ctx, cublasCreate(&s->cublas));
        LAC_CUBLAS_CHECK(ctx, cublasSetStream(s->cublas, s->stream));
    }
    *out = s->cublas;
    return LAC_SUCCESS;
}

lac_status lac_cuda_cusolver(lac_ctx_t ctx, cusolverDnHandle_t *out)
{
    lac_cuda_state *s = ctx->cuda;
    if (!s->cusolver) {
        LAC_CUSOLVER_CHECK(ctx, cusolverDnCreate(&s->cusolver));
        LAC_CUSOLVER_CHECK(ctx, cusolverDnSetStream(s->cusolver, s->stream));
    }
    *out = s->cusolver;
    return LAC_SUCCESS;
}

/* A device's speed for a split: SMs x clock. */
static double share_speed(const lac_cuda_state *share)
{
    int clock = 0;
    if (cudaDeviceGetAttribute(&clock, cudaDevAttrClockRate, share->device) != cudaSuccess || clock <= 0) {
        cudaGetLastError();
        clock = 1;
    }
    return (double)share->prop.multiProcessorCount * (double)clock;
}

void lac_cuda_share_split(const lac_cuda_state *first, int64_t count, int64_t *start)
{
    const int shares = first->share_count > 0 ? first->share_count : 1;
    double total = 0, speed[LAC_MAX_DEVICES];
    for (int i = 0; i < shares; i++) total += speed[i] = share_speed(first->shares[i]);
    double acc = 0;
    for (int i = 0; i < shares; i++) {
        start[i] = (int64_t)llround((double)count * acc / total);
        acc += speed[i];
    }
    start[shares] = count;
}
