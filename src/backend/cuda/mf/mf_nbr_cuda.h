/* The neighbourhood model (CULSH-MF, eq. 1 with rule 5) on CUDA: what the
 * table (mf_sgd.cu), the host part (mf_nbr.cu) and the kernels
 * (mf_nbr_kernels.cu) share. The model walks CUSGD++'s schedule and keeps its
 * P, Q and biases where mf_sgd.cu keeps them; this part adds, on the device,
 * S^K(j) of every item row, the items' rows w_j | c_j (one per item: a
 * replica row of v_j, when the knob LACUNA_MF_CUDA_HOT asks for them, updates
 * its item's), each user's training ratings (R(i), items ascending: a
 * neighbour is found by a binary search), and bhat at the epoch's start (the
 * residuals' baselines, as on the CPU). R^K(i;j) is the same every epoch, so
 * for K <= 32 (explicit ratings, whose stream cells do not change) it is
 * found once before training: a 32-bit mask per stream cell and the ratings
 * of its bits, which the epoch reads instead of searching R(i) (the knob
 * LACUNA_MF_CUDA_NBR_MASK=0 keeps the search); the validation pairs' masks
 * likewise, made on their first validation. */

/* Ratings a lane group of the neighbourhood model, by default (mf_sgd.cu). */
#define LAC_MF_NBR_RATINGS_PER_GROUP 8192
#ifndef LACUNA_BACKEND_CUDA_MF_NBR_CUDA_H
#define LACUNA_BACKEND_CUDA_MF_NBR_CUDA_H

#include "backend/cuda/mf/mf_cuda.h"

/* The arguments of one epoch (passed by value). */
struct lac_mf_cuda_nbr_args {
    lac_mf_cuda_epoch_args base;    /* the streams, P, Q, biases (base.lr unused) */
    const int32_t *nbr;             /* rows x K: S^K of the row's item */
    float *WC;                      /* num_items x 2K: w_j, then c_j */
    const int32_t *wc_row;          /* rows: the item of each item row (its WC row); NULL: rows = items */
    int K;
    const int64_t *rated_start;     /* num_users + 1 */
    const int32_t *rated_items;     /* ascending within a user */
    const float *rated_vals;
    const float *bhat;              /* num_items: bhat at the epoch's start */
    /* the masked kernel's (NULL for the searching one): per stream cell the
     * bits k of S^K(j) that R(i) holds and the offset of their ratings in
     * mvals (slot order); bhat at the epoch's start of each row's slots */
    const uint32_t *mask, *moff;
    const float *mvals;
    const float *slot_bhat;         /* rows x K */
    float gb, gbh, gu, gv, gw, gc;  /* the groups' rates at this epoch */
    float lb, lbh, lu, lv, lw, lc;  /* and regularisers */
    int implicit;                   /* 1 cross-entropy: ratings are weights, negatives' negated (lac_mf_xent_error);
                                     * 2 BPR: a pair's three cells (mf_nbr_kernels.cu, nbr_error) */
};

typedef void (*lac_mf_cuda_nbr_fn)(lac_mf_cuda_nbr_args);

/* The epoch kernel for rows of `pieces` float4 and K neighbours: fn, its lanes
 * a group and groups a block (kernels file). */
struct lac_mf_cuda_nbr_kernel {
    lac_mf_cuda_nbr_fn fn;
    int lanes, groups_per_block;
    int masked;                     /* fn reads the masks (K <= 32, registers' path) */
};
/* masked: the mask-reading kernel where one exists for pieces and K, else
 * the searching one; lanes 8, 16 or 32 asks for that many (0: the default). */
lac_mf_cuda_nbr_kernel lac_mf_cuda_nbr_choose(int pieces, int K, int masked, int lanes);
lac_status lac_mf_cuda_nbr_occupancy(lac_ctx_t ctx, const lac_mf_cuda_nbr_kernel *k, int *blocks_per_sm);
lac_status lac_mf_cuda_nbr_launch_epoch(lac_ctx_t ctx, const lac_mf_cuda_nbr_kernel *k, unsigned blocks,
                                        const lac_mf_cuda_nbr_args *a);
/* bhat[j] = item_bias[j * LAC_MF_BIAS_STRIDE] for the num_items own rows. */
lac_status lac_mf_cuda_nbr_launch_bhat(lac_ctx_t ctx, const float *item_bias, int64_t num_items, float *bhat);
/* slot_bhat[r K + k] = item_bias of nbr[r K + k] (0 for no neighbour), rows x K. */
lac_status lac_mf_cuda_nbr_launch_slot_bhat(lac_ctx_t ctx, const float *item_bias, const int32_t *nbr, int64_t cells,
                                            float *slot_bhat);

/* The masks (mf_nbr_mask.cu): for every cell of the streams (groups x steps
 * of base), the bits of R(i) ∩ S^K(j) and their ratings, made once per
 * training. *built 0 (and nothing allocated) where they cannot be: K > 32,
 * offsets past 32 bits, or too little device memory. */
struct lac_mf_cuda_nbr_masks {
    uint32_t *mask, *moff;
    float *mvals;
    int64_t rated;                  /* entries of mvals */
};
lac_status lac_mf_cuda_nbr_masks_build(lac_ctx_t ctx, const lac_mf_cuda_epoch_args *base, int64_t groups,
                                       const int32_t *nbr, int K, const int64_t *rated_start,
                                       const int32_t *rated_items, const float *rated_vals,
                                       lac_mf_cuda_nbr_masks *out, int *built);
/* The same for count (user, item) pairs, the validation set's (an item or
 * user of -1: no bits). */
lac_status lac_mf_cuda_nbr_masks_pairs(lac_ctx_t ctx, const int32_t *user, const int32_t *item, int64_t count,
                                       const int32_t *nbr, int K, const int64_t *rated_start,
                                       const int32_t *rated_items, const float *rated_vals,
                                       lac_mf_cuda_nbr_masks *out, int *built);
void lac_mf_cuda_nbr_masks_free(lac_mf_cuda_nbr_masks *m);
/* Adds the validation set's squared errors (eq. 1, clamped) into
 * sse[0 .. LAC_MF_SSE_SLOTS); with vm (the pairs' masks) R^K(i;j) is read
 * from them, else searched in R(i). */
lac_status lac_mf_cuda_nbr_launch_validation(lac_ctx_t ctx, const lac_mf_cuda_nbr_args *a, const int32_t *user,
                                             const int32_t *item, const float *rating, int64_t count, int k,
                                             float lo, float hi, const lac_mf_cuda_nbr_masks *vm, double *sse);

/* The host part (mf_nbr.cu): one training's device arrays of the model. */
typedef struct lac_mf_cuda_nbr lac_mf_cuda_nbr;

/* Chooses the kernel for the call (factors.nbr_k > 0) before the schedule. */
lac_status lac_mf_cuda_nbr_begin(lac_ctx_t ctx, const lac_mf_call *call, int pieces, lac_mf_cuda_nbr **out,
                                 lac_mf_cuda_nbr_kernel *kernel);
/* The epoch's blocks from the default's count: rounded down to the same
 * number on every multiprocessor where that drops at most a quarter of one
 * round, so that none runs a block more than the others (its warps' steps,
 * bound by their chains of instructions, would set the epoch's end). */
int64_t lac_mf_cuda_nbr_even_blocks(lac_ctx_t ctx, int64_t blocks);
/* Uploads S^K, W, C, R(i) for the schedule's item rows; for the masked
 * kernel makes the masks of base's streams (falling back to the searching
 * kernel where they cannot be made). */
lac_status lac_mf_cuda_nbr_upload(lac_ctx_t ctx, lac_mf_cuda_nbr *n, const lac_mf_schedule *sch,
                                  const lac_mf_cuda_epoch_args *base);
/* One epoch at scale (the rates' factor 1 / (1 + beta t^1.5)); base holds the
 * streams and the factors. */
lac_status lac_mf_cuda_nbr_epoch(lac_ctx_t ctx, lac_mf_cuda_nbr *n, const lac_mf_cuda_epoch_args *base, float scale,
                                 unsigned blocks);
lac_status lac_mf_cuda_nbr_validation(lac_ctx_t ctx, lac_mf_cuda_nbr *n, const lac_mf_cuda_epoch_args *base,
                                      const int32_t *user, const int32_t *item, const float *rating, int64_t count,
                                      int k, float lo, float hi, double *sse);
/* W and C: kept (restore 0) or brought back (1); to host arrays (num_items x
 * K each) or from them, current (kept 0) or the kept copy (1). */
lac_status lac_mf_cuda_nbr_keep(lac_ctx_t ctx, lac_mf_cuda_nbr *n, int restore);
lac_status lac_mf_cuda_nbr_copy(lac_ctx_t ctx, lac_mf_cuda_nbr *n, int kept, float *W, float *C, int to_device);
/* The device's w_j | c_j rows (num_items x 2K), which the several-device
 * rotation moves with the item blocks. */
float *lac_mf_cuda_nbr_wc(const lac_mf_cuda_nbr *n);
void lac_mf_cuda_nbr_end(lac_mf_cuda_nbr *n);

#endif
