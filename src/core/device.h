/* The device contract: what the core (context, memory, build information)
 * needs from a device backend. The core owns this table and never includes a
 * backend; src/backend/cuda fills it and its gateway hands it out. Without
 * CUDA in the build there is no table and the core answers "not compiled". */
#ifndef LACUNA_CORE_DEVICE_H
#define LACUNA_CORE_DEVICE_H

#include "core/internal.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    const char *name;
    int (*device_count)(void);                 /* 0 when none is usable */
    const char *(*runtime_info)(void);         /* "runtime 13.0, driver ..." */
    lac_status (*describe)(lac_ctx_t ctx, int device, char *buf, size_t len);
    /* Makes ctx->device (streams, workspace; library handles lazily). */
    lac_status (*ctx_init)(lac_ctx_t ctx);
    /* Frees everything the context's device state holds; safe after a failed init. */
    void (*ctx_fini)(lac_ctx_t ctx);
    lac_status (*synchronize)(lac_ctx_t ctx);
    lac_status (*malloc)(lac_ctx_t ctx, size_t bytes, void **ptr);
    lac_status (*free)(lac_ctx_t ctx, void *ptr);
    lac_status (*host_alloc)(lac_ctx_t ctx, size_t bytes, void **ptr);
    lac_status (*host_free)(lac_ctx_t ctx, void *ptr);
    lac_status (*memcpy)(lac_ctx_t ctx, void *dst, lac_memory dst_memory, const void *src, lac_memory src_memory,
                         size_t bytes);
} lac_device_backend;

/* The CUDA device table (src/backend/cuda/gateway.cu), NULL without CUDA. */
#ifdef LACUNA_HAVE_CUDA
const lac_device_backend *lac_device_backend_cuda(void);
#else
static inline const lac_device_backend *lac_device_backend_cuda(void) { return NULL; }
#endif

/* The context's device table: CUDA's for a CUDA context, else NULL. */
static inline const lac_device_backend *lac_ctx_device(lac_ctx_t ctx)
{
    return ctx && ctx->backend == LAC_BACKEND_CUDA ? lac_device_backend_cuda() : NULL;
}

#ifdef __cplusplus
}
#endif
#endif
