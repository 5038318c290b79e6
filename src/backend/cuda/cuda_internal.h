/* CUDA backend internals: the per-context device state and the checks every
 * .cu file uses. Only files under src/backend/cuda include this. */
#ifndef LACUNA_BACKEND_CUDA_INTERNAL_H
#define LACUNA_BACKEND_CUDA_INTERNAL_H

#include "core/internal.h"
#include "core/device.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusolverDn.h>

/* Per-context state that a capability's CUDA backend keeps between calls
 * (fault words, kernel caches), made on first use and freed with the context. */
enum { LAC_CUDA_SLOT_MAP = 0, LAC_CUDA_SLOT_MF = 1, LAC_CUDA_SLOT_IMPUTE = 2, LAC_CUDA_SLOTS = 3 };
typedef void (*lac_cuda_slot_release_fn)(lac_ctx_t ctx, void *state);
typedef struct {
    void *state;
    lac_cuda_slot_release_fn release;
} lac_cuda_slot;

struct lac_cuda_state {
    int device;                      /* the context's device (this share's) */
    cudaDeviceProp prop;
    cudaStream_t stream;             /* compute */
    cudaStream_t copy_streams[2];    /* host<->device streaming, overlapped with compute */
    cublasHandle_t cublas;           /* made on first use (lac_cuda_cublas) */
    cusolverDnHandle_t cusolver;     /* made on first use (lac_cuda_cusolver) */
    void *workspace;                 /* grown on demand, reused across calls */
    size_t workspace_bytes;
    lac_cuda_slot slots[LAC_CUDA_SLOTS];
    /* A context given several devices (lac_ctx_params.device_ids, a device
     * may repeat) holds one state a device, its "shares": shares[0] is the
     * first state itself, the one ctx->cuda points at. Capabilities that
     * split work select a share with lac_cuda_share_scope; the others use
     * the first. Set in the first state only. */
    int share_count;
    struct lac_cuda_state *shares[LAC_MAX_DEVICES];
};

/* While alive, ctx->cuda is share i of the context and its device is
 * current; the first share and its device come back after. */
struct lac_cuda_share_scope {
    lac_ctx_t ctx;
    lac_cuda_state *saved;
    lac_cuda_share_scope(lac_ctx_t c, int i) : ctx(c), saved(c->cuda)
    {
        ctx->cuda = saved->shares[i];
        cudaSetDevice(ctx->cuda->device);
    }
    ~lac_cuda_share_scope()
    {
        ctx->cuda = saved;
        cudaSetDevice(saved->device);
    }
    lac_cuda_share_scope(const lac_cuda_share_scope &) = delete;
    lac_cuda_share_scope &operator=(const lac_cuda_share_scope &) = delete;
};

/* Work of `count` items split across a context's shares in proportion to
 * their speed (SMs x clock; shares of one device split evenly): share i
 * takes [start[i], start[i + 1]), start[share_count] = count. */
void lac_cuda_share_split(const lac_cuda_state *first, int64_t count, int64_t *start);

/* The state of `slot` for this context: zeroed `bytes` made on first use,
 * released with the context through `release` (which frees what the state
 * holds, not the state itself). */
lac_status lac_cuda_slot_get(lac_ctx_t ctx, int slot, size_t bytes, lac_cuda_slot_release_fn release, void **state);

/* The context's cuBLAS / cuSOLVER handle on its compute stream, made on first use. */
lac_status lac_cuda_cublas(lac_ctx_t ctx, cublasHandle_t *out);
lac_status lac_cuda_cusolver(lac_ctx_t ctx, cusolverDnHandle_t *out);

/* Records a CUDA failure with where it happened; returns LAC_ERR_CUDA (or
 * LAC_ERR_OUT_OF_MEMORY for allocation failures). */
lac_status lac_cuda_fail(lac_ctx_t ctx, cudaError_t err, const char *what, const char *file, int line);
lac_status lac_cublas_fail(lac_ctx_t ctx, int err, const char *what, const char *file, int line);
lac_status lac_cusolver_fail(lac_ctx_t ctx, int err, const char *what, const char *file, int line);

/* Every CUDA call is checked; the enclosing function returns on failure. */
#define LAC_CUDA_CHECK(ctx, expr)                                                           \
    do {                                                                                    \
        cudaError_t lac_e_ = (expr);                                                        \
        if (lac_e_ != cudaSuccess) return lac_cuda_fail((ctx), lac_e_, #expr, __FILE__, __LINE__); \
    } while (0)

#define LAC_CUDA_CHECK_GOTO(ctx, expr, st, label)                                         \
    do {                                                                                  \
        cudaError_t lac_e_ = (expr);                                                      \
        if (lac_e_ != cudaSuccess) {                                                      \
            (st) = lac_cuda_fail((ctx), lac_e_, #expr, __FILE__, __LINE__);              \
            goto label;                                                                   \
        }                                                                                 \
    } while (0)

/* After a kernel launch: the launch error (bad configuration, etc.). */
#define LAC_CUDA_CHECK_LAUNCH(ctx) LAC_CUDA_CHECK((ctx), cudaGetLastError())

#define LAC_CUBLAS_CHECK(ctx, expr)                                                          \
    do {                                                                                     \
        cublasStatus_t lac_e_ = (expr);                                                      \
        if (lac_e_ != CUBLAS_STATUS_SUCCESS) return lac_cublas_fail((ctx), (int)lac_e_, #expr, __FILE__, __LINE__); \
    } while (0)

#define LAC_CUSOLVER_CHECK(ctx, expr)                                                          \
    do {                                                                                       \
        cusolverStatus_t lac_e_ = (expr);                                                      \
        if (lac_e_ != CUSOLVER_STATUS_SUCCESS) return lac_cusolver_fail((ctx), (int)lac_e_, #expr, __FILE__, __LINE__); \
    } while (0)

/* A scratch buffer of at least `bytes` on the context's device (valid until the
 * next call that asks for workspace). */
lac_status lac_cuda_workspace(lac_ctx_t ctx, size_t bytes, void **ptr);

/* The device table's entries (context.cu, memory.cu); gateway.cu hands them out. */
int lac_cuda_devices(void);
const char *lac_cuda_runtime_info(void);
lac_status lac_cuda_describe(lac_ctx_t ctx, int device, char *buf, size_t len);
lac_status lac_cuda_ctx_init(lac_ctx_t ctx);
void lac_cuda_ctx_fini(lac_ctx_t ctx);
lac_status lac_cuda_synchronize(lac_ctx_t ctx);
lac_status lac_cuda_malloc(lac_ctx_t ctx, size_t bytes, void **ptr);
lac_status lac_cuda_free(lac_ctx_t ctx, void *ptr);
lac_status lac_cuda_host_alloc(lac_ctx_t ctx, size_t bytes, void **ptr);
lac_status lac_cuda_host_free(lac_ctx_t ctx, void *ptr);
lac_status lac_cuda_memcpy(lac_ctx_t ctx, void *dst, lac_memory dst_memory, const void *src, lac_memory src_memory,
                           size_t bytes);

/* Makes the context's device current on this host thread. */
lac_status lac_cuda_use_device(lac_ctx_t ctx);

#endif
