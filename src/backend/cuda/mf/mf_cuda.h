/* CUSGD++ on CUDA: what the host driver (mf_sgd.cu) and the kernels
 * (mf_sgd_kernels.cu) share: the epoch's arguments, the layout constants, the
 * choice of kernel and the launches. Only those two files include this. */
#ifndef LACUNA_BACKEND_CUDA_MF_CUDA_H
#define LACUNA_BACKEND_CUDA_MF_CUDA_H

#include "backend/cuda/cuda_internal.h"
#include "mf/mf_backend.h"
#include "mf/schedule.h"   /* the stream cells' encoding */

#define LAC_MF_WARPS_PER_BLOCK 4
#define LAC_MF_CODE_AHEAD 8   /* steps of (item, rating) loaded ahead; streams are padded to a multiple */
#define LAC_MF_MAX_PIECES 8   /* float4 pieces per lane: F <= 32 x 4 x 8 in registers */
#define LAC_MF_SSE_SLOTS 64   /* partial sums of e^2, spread so that warps' atomics rarely meet */
/* Item biases one L2 line apart: packed, 32 items' biases would share a line
 * and meet the popular-line limit (mf_sgd.cu). */
#define LAC_MF_BIAS_STRIDE 32

/* The sum of x over a warp's 32 lanes, in every lane. */
static __device__ __forceinline__ float lac_mf_warp_sum(float x)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}

/* The arguments of one epoch (passed by value). */
struct lac_mf_cuda_epoch_args {
    const int32_t *code;            /* groups x steps: item | LAC_MF_RUN_START, or LAC_MF_PAD */
    const float *rating;            /* groups x steps */
    const int64_t *group_first_run; /* groups: index of the group's first run */
    const int32_t *run_user;        /* runs, group by group, in stream order */
    const float *run_weight;        /* 1: the run is the whole row; else its share of the row */
    int64_t steps;                  /* per group, a multiple of LAC_MF_CODE_AHEAD */
    float *P, *Q, *user_bias;
    float *item_bias;               /* LAC_MF_BIAS_STRIDE apart */
    int stride;                     /* floats per factor row, a multiple of 16 */
    float mean, lr, shrink, shrink_b;
    int use_bias;
    double *sse;
};

typedef void (*lac_mf_cuda_epoch_fn)(lac_mf_cuda_epoch_args);

/* The epoch kernel for a row of `pieces` float4, and its group shape. */
struct lac_mf_cuda_kernel {
    lac_mf_cuda_epoch_fn fn;
    int lanes;                      /* lanes a group */
    int groups_per_block;           /* groups a block of LAC_MF_WARPS_PER_BLOCK warps trains */
};

/* want: lanes asked for (a tuning knob, 0: none); ahead: v_j rows loaded 1 or 2 steps ahead. */
lac_mf_cuda_kernel lac_mf_cuda_choose_kernel(int pieces, int want, int ahead);
lac_status lac_mf_cuda_occupancy(lac_ctx_t ctx, const lac_mf_cuda_kernel *k, int *blocks_per_sm);
lac_status lac_mf_cuda_launch_epoch(lac_ctx_t ctx, const lac_mf_cuda_kernel *k, unsigned blocks,
                                    const lac_mf_cuda_epoch_args *a);
/* Popular items' replica rows averaged into each (spread 0) or the item's own
 * row copied to them (spread 1). */
lac_status lac_mf_cuda_launch_replicas(lac_ctx_t ctx, const int32_t *hot_item, const int32_t *hot_first,
                                       const int32_t *hot_count, int64_t hot_items, float *Q, float *item_bias,
                                       int stride, int spread);
/* Adds the validation set's squared errors into sse[0 .. LAC_MF_SSE_SLOTS). */
lac_status lac_mf_cuda_launch_validation(lac_ctx_t ctx, const int32_t *user, const int32_t *item, const float *rating,
                                         int64_t count, const float *P, const float *Q, const float *user_bias,
                                         const float *item_bias, int k, int stride, float mean, float lo, float hi,
                                         double *sse);

#endif
