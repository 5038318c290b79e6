/* Implicit feedback on CUDA (lac_mf_call.implicit, the plain model): what the
 * table (mf_sgd.cu), the host part (mf_implicit.cu) and the kernels
 * (mf_implicit_kernels.cu) share. The epoch walks CUSGD++'s streams (the
 * cells' ratings are the interactions' weights); before it, a draw kernel
 * writes every cell's negatives by the counter-based rule of mf_backend.h
 * (shared ones: the cell's part of its chunk's, lac_mf_share), as item rows (a popular item's replica of the cell's group), so that the
 * epoch loads them ahead like the cells themselves. */
#ifndef LACUNA_BACKEND_CUDA_MF_IMPLICIT_CUDA_H
#define LACUNA_BACKEND_CUDA_MF_IMPLICIT_CUDA_H

#include "backend/cuda/mf/mf_cuda.h"

/* The arguments of the draws (one epoch, passed by value). */
struct lac_mf_cuda_draw_args {
    const int32_t *code;            /* groups x steps, as the epoch's */
    const int32_t *cell_user;       /* groups x steps: the cell's user (-1 in padding) */
    const int32_t *row_item;        /* item rows: the item of each (a replica's is its item's) */
    const int32_t *rep_first;       /* num_items: first replica row */
    const int32_t *rep_count;       /* num_items: rows in all (1: no replicas) */
    const int64_t *seen_start;      /* num_users + 1 */
    const int32_t *seen_items;      /* each user's items, ascending */
    int64_t cells, steps, num_items;
    uint64_t seed;
    int epoch, negatives;           /* per cell (1 for BPR) */
    int share;                      /* interactions sharing negatives (lac_mf_share) */
    int32_t *neg;                   /* cells x negatives: item rows (shared: -1 after the cell's last) */
    float *neg_weight;              /* cells: the negatives' weight (lists: share > 1 or user_scale; NULL: 1) */
    const float *user_scale;        /* per user: its negatives' weight (call.negative_scale; NULL: 1) */
    const uint64_t *neg_cum;        /* num_items: the items' cumulative weights (NULL: uniform) */
    const float *rating;            /* groups x steps: < 0 a cell without a positive (NULL: none) */
    int alone;                      /* such a cell's negatives: ceil(negatives / share) */
    /* a block's pool of negatives (lac_mf_cuda_implicit_kernel.pool > 0): pool
     * b x rounds + r is block b's in its round r (steps r x round_steps on) */
    int32_t *pool_item, *pool_row;  /* pools x pool: the items, their rows (the block's replica) */
    int64_t pools;
    int pool, round_steps, rounds, groups_per_block;
    /* the warp copies' test of a pool's items: each user's items in a table
     * of its own (lac_mf_seen_slot; num_users + 1 starts, each table a power
     * of two of at least twice its items, -1 empty) */
    const int64_t *seen_table_start;
    const int32_t *seen_table;
};

/* Item x's first slot in a user's table of `cap` slots (a power of two;
 * linear probing from there, the table at most half full). */
static __host__ __device__ __forceinline__ uint32_t lac_mf_seen_slot(int32_t x, uint32_t cap)
{
    uint32_t h = (uint32_t)x * 0x9E3779B1u;
    return (h ^ (h >> 16)) & (cap - 1u);
}

/* The arguments of one epoch (passed by value). */
struct lac_mf_cuda_implicit_args {
    lac_mf_cuda_epoch_args base;    /* streams, factors, lr and shrinks; sse takes the loss */
    const int32_t *neg;             /* the draws' rows (shared: -1, no more for the cell) */
    const float *neg_weight;        /* per cell, or NULL: 1 */
    int negatives, bpr;
    /* a block's pool (kernel.pool > 0): neg holds slots of it (-1: none) */
    const int32_t *pool_row;
    int pool, round_steps, rounds;
    /* the warp copies (kernel.copies) draw the pools and the cells' slots
     * themselves, from these (the users' items, the items' weights and
     * replicas, seed and epoch) */
    lac_mf_cuda_draw_args draws;
    /* in-batch negatives (kernel.inbatch): the group of slot s this epoch is
     * (perm_a s + perm_b) mod groups (lac_mf_cuda_implicit_inbatch_map);
     * kernel.inbatch 2, the seen test: each row's item's rank among the
     * 32 seen_words most interacted (-1: not among them) and each user's
     * seen_words words of bits of them */
    uint64_t perm_a, perm_b;
    const int32_t *row_rank;
    const uint32_t *seen_bits;
    int seen_words;
    const float *row_weight;        /* each row's weight as an in-batch negative (NULL: 1) */
};

/* The neighbourhood model's draws: the stream cells that are negatives,
 * each with its user, key and t of the rule (one epoch, passed by value). */
struct lac_mf_cuda_nbr_draw_args {
    int32_t *code;                  /* the stream: the item bits of the negatives' cells are written */
    const int64_t *cell;            /* count: the cells */
    const int32_t *user, *key, *t;  /* count each */
    const int64_t *seen_start;      /* num_users + 1 */
    const int32_t *seen_items;      /* each user's items, ascending */
    int64_t count, num_items;
    uint64_t seed;
    int epoch;
    const uint64_t *neg_cum;        /* num_items: the items' cumulative weights (NULL: uniform) */
};
lac_status lac_mf_cuda_implicit_launch_nbr_draws(lac_ctx_t ctx, const lac_mf_cuda_nbr_draw_args *a);

typedef void (*lac_mf_cuda_implicit_fn)(lac_mf_cuda_implicit_args);

/* The epoch kernel for rows of `pieces` float4 (fn NULL: wider than the
 * registers hold) and its group shape. */
struct lac_mf_cuda_implicit_kernel {
    lac_mf_cuda_implicit_fn fn;
    int lanes, groups_per_block;
    /* > 0: the pool kernel (mf_implicit_pool.cu): rows of a block's pool,
     * steps of a round, its dynamic shared memory; copies: the warp copies'
     * kernel (mf_implicit_pool_copies.cu) */
    int pool, round_steps, copies;
    size_t smem;
    int inbatch;   /* the in-batch kernel (mf_implicit_inbatch.cu): no draws; 2: with the seen test */
};
/* lists: shared negatives (cells end their lists with -1, neg_weight); 2:
 * also cells without a positive (lac_mf_cuda_implicit_alone_cells). */
lac_mf_cuda_implicit_kernel lac_mf_cuda_implicit_choose(int pieces, int negatives_per_cell, int lists);
/* A block's pool of negatives (cross-entropy, unshared, no lists; the knob
 * LACUNA_MF_CUDA_NEG_POOL): each thread block draws `pool` items (16, 32
 * or 64) by the negatives' distribution for each round of its cells
 * (about 8 x pool cells) and holds their rows and biases in shared memory;
 * a cell's negatives are slots of its block's pool (each the first of up
 * to LAC_MF_DRAWS slots whose item the user has not seen; none after
 * that), scored against the round's copies, each step added to the row
 * in memory as (shrink - 1) v + step u of the copy v. A negative is still
 * drawn by the distribution; no negative's row is loaded from L2. fn
 * NULL: rows a group does not divide (mf_implicit_pool.cu). */
lac_mf_cuda_implicit_kernel lac_mf_cuda_implicit_pool_choose(int pieces, int pool, int cells);
/* Cells of a round per pool row (LACUNA_MF_CUDA_NEG_POOL_CELLS): a round's
 * steps for groups_per_block groups, at least 1. */
int lac_mf_cuda_pool_round_steps(int pool, int cells, int groups_per_block);
/* Warp copies of a block's pool (LACUNA_MF_CUDA_NEG_POOL_ADD=1, pool 16 or
 * 32; mf_implicit_pool_copies.cu): each warp steps its own copy of the
 * round's pool rows in shared memory by rule (5) with plain loads and
 * stores, and each row's summed change over the block's warps goes to
 * memory once a round (vector atomics). The pools (as the pool kernel's)
 * and a cell's negatives are drawn in the epoch: negative n = c0 + b (b <
 * 4) of the cell of item row j in the warp's group g is, by bits 13 b on of
 * the rule's bits for (user, j, c0, 0), uniformly one of the slots whose
 * item the user has not seen in class (g + n) mod the warp's groups of the
 * pool's slots (a 32-bit mask of the unseen ones made at each run's and
 * round's start; none where the class has none), so that a warp's groups
 * never meet on a slot within b. No draw kernel, no array of draws. fn
 * NULL: no such kernel. */
lac_mf_cuda_implicit_kernel lac_mf_cuda_implicit_copies_choose(int pieces, int pool, int cells);
/* The in-batch negatives' seen test covers the items of the highest
 * interaction counts: all of them where the users' bits fit in this many
 * bytes (to stay in L2), else as many as fit, at least the minimum. */
#define LAC_MF_INBATCH_SEEN_BYTES ((int64_t)16 << 20)
#define LAC_MF_INBATCH_SEEN_MIN 1024

/* In-batch negatives (LACUNA_MF_CUDA_INBATCH, by default on one device
 * where the negatives' exponent is >= 0.5; cross-entropy, unshared, no
 * lists; mf_implicit_inbatch.cu): a warp's 32 / lanes groups step together
 * and each cell's negatives are the positives' rows of the next
 * min(negatives, groups - 1) groups of its warp at that step; the groups
 * that share a warp change every epoch. lanes 4 or 8 (0: 8 where they
 * divide the row, else 4); seen: a negative among the most interacted
 * items (LAC_MF_INBATCH_SEEN_*) that the user has seen is passed over. fn NULL:
 * rows the lanes do not divide, or wider than 8 pieces a lane. No draw
 * kernel; a negative weighs row_weight's (lac_mf_inbatch_weights). */
lac_mf_cuda_implicit_kernel lac_mf_cuda_implicit_inbatch_choose(int pieces, int lanes, int seen);
/* The in-batch negatives a cell meets: min(negatives, the warp's groups - 1). */
static __host__ __device__ __forceinline__ int lac_mf_cuda_inbatch_met(int negatives, int lanes)
{
    return negatives < 32 / lanes - 1 ? negatives : 32 / lanes - 1;
}
void lac_mf_cuda_implicit_inbatch_map(uint64_t seed, int epoch, int64_t groups, uint64_t *a, uint64_t *b);
lac_status lac_mf_cuda_implicit_copies_launch(lac_ctx_t ctx, const lac_mf_cuda_implicit_kernel *k, unsigned blocks,
                                              const lac_mf_cuda_implicit_args *a, cudaEvent_t mid);
lac_status lac_mf_cuda_implicit_pool_launch(lac_ctx_t ctx, const lac_mf_cuda_implicit_kernel *k, unsigned blocks,
                                            const lac_mf_cuda_draw_args *draws, const lac_mf_cuda_implicit_args *a,
                                            cudaEvent_t mid);
lac_status lac_mf_cuda_implicit_occupancy(lac_ctx_t ctx, const lac_mf_cuda_implicit_kernel *k, int *blocks_per_sm);
/* mid: recorded between the draws and the epoch kernel when not NULL. */
lac_status lac_mf_cuda_implicit_launch(lac_ctx_t ctx, const lac_mf_cuda_implicit_kernel *k, unsigned blocks,
                                       const lac_mf_cuda_draw_args *draws, const lac_mf_cuda_implicit_args *a,
                                       cudaEvent_t mid);

/* The host part (mf_implicit.cu): one training's device arrays. */
typedef struct lac_mf_cuda_implicit lac_mf_cuda_implicit;

/* Chooses the kernel (an error for rows too wide) before the schedule. */
lac_status lac_mf_cuda_implicit_begin(lac_ctx_t ctx, const lac_mf_call *call, int pieces,
                                      lac_mf_cuda_implicit **out, lac_mf_cuda_implicit_kernel *kernel);
/* A block of the items (call.negative_scale, cross-entropy): the data the
 * schedule deals, call.data with one cell more, of weight -1 (no positive;
 * its item a placeholder), for each user with a scale but no interaction
 * there, whose share of one process's negatives (`negatives` x its scale,
 * as the CPU's part epoch) that cell draws (lac_mf_cuda_draw_args.alone);
 * *cells left empty where no user needs one. Freed by
 * lac_mf_cuda_implicit_cells_free. */
lac_status lac_mf_cuda_implicit_alone_cells(lac_ctx_t ctx, lac_mf_cuda_implicit *m, lac_mf_data *cells);
/* Uploads the users' item lists and the cells' users, replicas and draws'
 * room for the schedule. */
lac_status lac_mf_cuda_implicit_upload(lac_ctx_t ctx, lac_mf_cuda_implicit *m, const lac_mf_schedule *sch);
/* The draws and one epoch (base: the streams and factors at this epoch's rate). */
lac_status lac_mf_cuda_implicit_epoch(lac_ctx_t ctx, lac_mf_cuda_implicit *m, const lac_mf_cuda_epoch_args *base,
                                      int epoch, unsigned blocks);
void lac_mf_cuda_implicit_end(lac_mf_cuda_implicit *m);

/* The neighbourhood model (mf_nbr*.cu trains the cells; a cell's rating is
 * an interaction's weight, or minus a negative's: lac_mf_xent_error). Its
 * stream is scheduled from *cells: each user's interactions, each followed
 * by one cell for each of its negatives (lac_mf_share), rating minus the
 * negative's weight (times call.negative_scale's, none where that is 0: a
 * block of the items, mf_parts.cu; the item a placeholder, written by the
 * draws before every epoch); a user with no interaction there but a scale
 * takes ceil(negatives / share) negatives' cells alone, `negatives` x its
 * scale in all (as the CPU's part epoch); freed by
 * lac_mf_cuda_implicit_cells_free.
 * BPR: each interaction of weight c makes three cells, the positive (c),
 * its negative (-c, drawn as cross-entropy's one unshared negative) and
 * the positive again (0), which the kernel takes as one pair (its error
 * from both scores before either step; mf_nbr_kernels.cu): a run must not
 * split them (mf_sgd.cu: the schedule's run_unit 3 cuts long rows on whole
 * triples). */
lac_status lac_mf_cuda_implicit_nbr_begin(lac_ctx_t ctx, const lac_mf_call *call, lac_mf_cuda_implicit **out,
                                          lac_mf_data *cells);
void lac_mf_cuda_implicit_cells_free(lac_mf_data *cells);
/* Finds the negatives' cells in the schedule built from those cells. */
lac_status lac_mf_cuda_implicit_nbr_upload(lac_ctx_t ctx, lac_mf_cuda_implicit *m, const lac_mf_schedule *sch);
/* The epoch's negatives into the stream's codes. */
lac_status lac_mf_cuda_implicit_nbr_draw(lac_ctx_t ctx, lac_mf_cuda_implicit *m, int32_t *code, int epoch);

#endif
