/* mf over MPI ranks on the GPU (mf_parts.cu): the CUDA table's trainings of
 * one part of the items (call.item_part) for src/dist/mf_dist.c's rotation,
 * the model in the call's host arrays between epoch calls. */
#ifndef LACUNA_BACKEND_CUDA_MF_PARTS_CUDA_H
#define LACUNA_BACKEND_CUDA_MF_PARTS_CUDA_H

#include "backend/cuda/cuda_internal.h"
#include "mf/mf_backend.h"

typedef struct lac_mf_cuda_part lac_mf_cuda_part;
/* The part call->part of call->item_part: this rank's users' ratings of those
 * items, on the context's device. Ratings or implicit feedback, either model
 * (both losses). */
lac_status lac_mf_cuda_part_begin(lac_ctx_t ctx, const lac_mf_call *call, lac_mf_cuda_part **out);
/* One epoch of the part's ratings (in the first epochs, of the next slice of
 * its users: call.rounds): its rows from the call's host arrays, trained on
 * the device, and back. */
lac_status lac_mf_cuda_part_epoch(lac_ctx_t ctx, lac_mf_cuda_part *q, float lr, int epoch, double *train_sse);
void lac_mf_cuda_part_end(lac_ctx_t ctx, lac_mf_cuda_part *q);

/* Implicit feedback on a block of the items (item_part[j] == part: a GPU
 * rank's part, a device's block in mf_multi.cu), trained as sub (local users
 * users_of[x] of call->data; item rows row_item[r], the model's item or -1
 * for a row outside the block): the negatives are drawn within the block by
 * the items' weights, *cum the rows' cumulative weights (0 outside; NULL:
 * uniform over every row), and for cross-entropy each of a user's n_b
 * positives there draws `negatives` of weight *scale (per local user; NULL
 * for BPR) = n x share / n_b (lac_mf_part_share), so that its negatives
 * there weigh, in expectation, as one process's that land in the block; a
 * user with no positive there (n_b = 0) gets n x share, its negatives'
 * `negatives` x that in all, which both models' streams take as cells of
 * their own (the CPU ranks' rule; mf_implicit_cuda.h). The caller frees
 * both. */
lac_status lac_mf_cuda_block_negatives(lac_ctx_t ctx, const lac_mf_call *call, const int32_t *item_part, int part,
                                       const lac_mf_data *sub, const int32_t *users_of, const int32_t *row_item,
                                       float **scale, uint64_t **cum);

#endif
