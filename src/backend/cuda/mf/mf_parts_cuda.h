/* mf over MPI ranks on the GPU (mf_parts.cu): the CUDA table's trainings of
 * one part of the items (call.item_part) for src/dist/mf_dist.c's rotation,
 * the model in the call's host arrays between epoch calls. */
#ifndef LACUNA_BACKEND_CUDA_MF_PARTS_CUDA_H
#define LACUNA_BACKEND_CUDA_MF_PARTS_CUDA_H

#include "backend/cuda/cuda_internal.h"
#include "mf/mf_backend.h"

typedef struct lac_mf_cuda_part lac_mf_cuda_part;
/* The part call->part of call->item_part: this rank's users' ratings of those
 * items, on the context's device. Explicit ratings, either model. */
lac_status lac_mf_cuda_part_begin(lac_ctx_t ctx, const lac_mf_call *call, lac_mf_cuda_part **out);
/* One epoch of the part's ratings: its rows from the call's host arrays,
 * trained on the device, and back. */
lac_status lac_mf_cuda_part_epoch(lac_ctx_t ctx, lac_mf_cuda_part *q, float lr, int epoch, double *train_sse);
void lac_mf_cuda_part_end(lac_ctx_t ctx, lac_mf_cuda_part *q);

#endif
