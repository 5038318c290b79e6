/* CUDA backend internals: the per-context device state and the checks every
 * .cu file uses. Only .cu files include this. */
#ifndef LACUNA_BACKEND_CUDA_INTERNAL_H
#define LACUNA_BACKEND_CUDA_INTERNAL_H

#include "backend/cuda/gateway.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusolverDn.h>

struct lac_cuda_state {
    int device;                      /* the context's first device */
    int num_devices;
    int device_ids[LAC_MAX_DEVICES];
    cudaDeviceProp prop;
    cudaStream_t stream;             /* compute */
    cudaStream_t copy_streams[2];    /* host<->device streaming, overlapped with compute */
    cublasHandle_t cublas;
    cusolverDnHandle_t cusolver;
    void *workspace;                 /* grown on demand, reused across calls */
    size_t workspace_bytes;
};

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

/* Makes the context's device current on this host thread. */
lac_status lac_cuda_use_device(lac_ctx_t ctx);

#endif
