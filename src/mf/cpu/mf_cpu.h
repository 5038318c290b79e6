/* The CPU backend of mf (src/mf/cpu/): its state for one training, shared by
 * the layout and table (backend_cpu.c) and the SGD kernels (sgd_cpu.c). */
#ifndef LACUNA_MF_CPU_H
#define LACUNA_MF_CPU_H

#include "mf/mf_backend.h"

#define LAC_MF_HOGWILD_CHUNK 64   /* users a thread takes at a time (Hogwild schedule) */

struct lac_mf_state {
    lac_mf_call call;         /* the factors are trained in place */
    int blocks;               /* B: 1 (Hogwild) or 2 x threads (deterministic) */
    int threads;
    int64_t *block_seg;       /* B*B + 1: segments of block b */
    int32_t *seg_user;        /* per segment: its user */
    int64_t *seg_start;       /* segments + 1: ratings of segment s */
    int32_t *item;            /* ratings in block order */
    float *val;
    double *block_sse;        /* per block, summed in a fixed order */
    double *chunk_sse;        /* per chunk of users (Hogwild schedule) */
    int *stratum_order;       /* this epoch's stratum order */
    int rounds;               /* slices of each block's users an epoch (lac_mf_rounds) */
    int next_round;           /* with call.item_part: the slice the next epoch call trains */
    float *kept[6];           /* P, Q, b, bhat (, W, C) of the kept epoch (with validation) */
    /* the neighbourhood model */
    float *bhat_epoch;        /* bhat at the epoch's start: the baselines of R^K's residuals */
    float *seen;              /* threads x num_items: the current user's ratings, NaN elsewhere
                               * (the neighbourhood model and implicit feedback) */
    int32_t *rank;            /* implicit feedback with shared negatives: each
                               * interaction's rank in its user's items, ascending */
    int32_t *part_items;      /* implicit feedback with call.item_part: the part's items, ascending */
    uint64_t *part_cum;       /* their cumulative weights (call.neg_cum; NULL: uniform) */
    double part_w;            /* their weight in all */
    int64_t part_size;
    int32_t *part_users;      /* ... and the users with interactions, in row order (the slices') */
    int64_t part_user_count;
    int64_t *valid_start;     /* num_users + 2: validation entries by user (unknown users last) */
    int64_t *valid_order;     /* the entries in that order */
    float *valid_pred;        /* their predictions, in the set's order */
};

/* One epoch of update rule (5) over the block grid (sgd_cpu.c). */
lac_status lac_mf_cpu_epoch(lac_ctx_t ctx, lac_mf_state *state, float learning_rate, int epoch, double *train_sse);

/* Segments [seg_lo, seg_hi) of the neighbourhood model (sgd_nbr_cpu.c): eq. (1)
 * and update rule (5) for every group; seen is the calling thread's row of
 * state->seen. */
double lac_mf_cpu_nbr_range(const lac_mf_state *s, int64_t seg_lo, int64_t seg_hi, float scale, float *seen);

/* One epoch of implicit-feedback training (implicit_cpu.c), or with
 * call.item_part slice `slice` of `slices` of the part's epoch; *loss_sum:
 * the summed loss. */
lac_status lac_mf_cpu_implicit_epoch(lac_ctx_t ctx, lac_mf_state *state, float learning_rate, int epoch, int slice,
                                     int slices, double *loss_sum);

/* Implicit feedback's set-up (implicit_cpu.c): the ranks of shared negatives,
 * or (call.item_part) the part's items and users. */
lac_status lac_mf_cpu_implicit_begin(lac_ctx_t ctx, lac_mf_state *state);

/* Rows of an online update in closed form (foldin_cpu.c). */
lac_status lac_mf_cpu_fold_in(lac_ctx_t ctx, const lac_mf_fold_call *call);

#endif
