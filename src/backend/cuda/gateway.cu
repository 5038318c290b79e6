/* The gateway: the one door from the library into the CUDA backend. It hands
 * out tables (the device table here; each capability's beside it) and nothing
 * else; front ends pick a table and call it. */
#include "backend/cuda/cuda_internal.h"
#include "impute/impute_backend.h"
#include "map/map_backend.h"
#include "mf/mf_backend.h"

static const lac_device_backend cuda_device = {
    "cuda",
    lac_cuda_devices,
    lac_cuda_runtime_info,
    lac_cuda_describe,
    lac_cuda_ctx_init,
    lac_cuda_ctx_fini,
    lac_cuda_synchronize,
    lac_cuda_malloc,
    lac_cuda_free,
    lac_cuda_host_alloc,
    lac_cuda_host_free,
    lac_cuda_memcpy,
};

extern "C" const lac_device_backend *lac_device_backend_cuda(void) { return &cuda_device; }

/* map: src/backend/cuda/map/ (map_dispatch.cu). */
extern "C" const lac_map_backend lac_map_cuda_table;
extern "C" const lac_map_backend *lac_map_backend_cuda(void) { return &lac_map_cuda_table; }
extern "C" const lac_map_async_backend lac_map_cuda_async_table;   /* map_async.cu */
extern "C" const lac_map_async_backend *lac_map_async_backend_cuda(void) { return &lac_map_cuda_async_table; }

/* mf: src/backend/cuda/mf/ (mf_sgd.cu). */
extern "C" const lac_mf_backend lac_mf_cuda_table;
extern "C" const lac_mf_backend *lac_mf_backend_cuda(void) { return &lac_mf_cuda_table; }

/* mf neighbours: src/backend/cuda/mf/nbr_gsm.cu hands its table out itself
 * (its contract, mf/nbr_backend.h, is not one the gateway includes). */

/* impute: src/backend/cuda/impute/ (impute_dispatch.cu). */
extern "C" const lac_impute_backend lac_impute_cuda_table;
extern "C" const lac_impute_backend *lac_impute_backend_cuda(void) { return &lac_impute_cuda_table; }
