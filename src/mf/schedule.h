/* The SGD schedule of mf: how a backend deals the training ratings out, apart
 * from the update kernels that walk them (LIBMF keeps its scheduler apart the
 * same way), so that it runs and is tested on the CPU (tests/test_mf_schedule.c).
 * Plain C, host only.
 *
 * CUDA (CUSGD++, src/backend/cuda/mf/): users in order of rating count,
 * heaviest first; a row longer than run_max cut into runs; runs dealt longest
 * first, each to the least loaded lane group (LPT); each group's runs laid out
 * as one stream, padded to one common length, with a flag on a run's first
 * rating; popular items given replica rows that the groups share out.
 * CPU (src/mf/cpu/): users and items dealt round-robin in count order to the
 * B x B block grid of the deterministic mode, and a seeded stratum order. */
#ifndef LACUNA_MF_SCHEDULE_H
#define LACUNA_MF_SCHEDULE_H

#include "mf/mf_backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A stream cell: the item row (the item's own or a replica) in the low 30
 * bits, LAC_MF_RUN_START on the first rating of a run; LAC_MF_PAD after a
 * group's last run. */
#define LAC_MF_RUN_START 0x40000000
#define LAC_MF_ITEM_MASK 0x3fffffff
#define LAC_MF_PAD (-1)

#define LAC_MF_RUN_MAX 512            /* ratings a run at most (default); longer rows are split */
#define LAC_MF_HOT_RATINGS 512        /* ratings an epoch a row of a popular item, at least */
#define LAC_MF_MAX_REPLICAS 256       /* rows of one item at most */
/* Groups in flight: each gets at least this many ratings an epoch. Every
 * group updates v_j without locks, and the groups that meet on a popular
 * item overwrite each other's updates; fewer, longer streams lose fewer
 * (measured, MovieLens-10M shape: 16,384 groups instead of 8,688 were 4%
 * faster and 0.0005 worse in validation RMSE after 15 epochs). */
#define LAC_MF_RATINGS_PER_GROUP 1024

typedef struct {
    int64_t groups;           /* lane groups (streams), >= 1 */
    int64_t run_max;          /* ratings a run at most; cut to half a group's share (not under 32) */
    int64_t hot;              /* ratings a replica row; 0: chosen against replica_budget */
    double replica_budget;    /* bytes the replica rows may take (hot 0) */
    double row_bytes;         /* bytes of one item row */
    int64_t step_multiple;    /* streams padded to a multiple of this many steps */
    int64_t run_unit;         /* run_max rounded down to a multiple of this, at least one (cells a run never splits; 0, 1: none) */
} lac_mf_schedule_params;

/* The deal for one training. Runs are numbered in stream order: group g's
 * runs are group_first_run[g] .. group_first_run[g + 1] - 1, in the order
 * they appear in its stream. */
typedef struct {
    int64_t groups, steps;    /* streams, and steps each (a multiple of step_multiple) */
    int64_t runs, run_max, hot;   /* hot: the threshold used (no replicas under it) */
    int64_t rows;             /* item rows: the num_items own rows, then the replicas */
    int64_t hot_items;        /* items with replicas */
    int32_t *code;            /* groups x steps stream cells */
    float *rating;            /* groups x steps (0 in padding) */
    int64_t *group_first_run; /* groups + 1 */
    int32_t *run_user;        /* runs: the user */
    float *run_weight;        /* runs: 1 for a whole row, else the run's share of it */
    int32_t *hot_item;        /* hot_items: the item, */
    int32_t *hot_first;       /* its first replica row (replica r >= 1 is row hot_first + r - 1), */
    int32_t *hot_count;       /* its rows in all (own + replicas) */
} lac_mf_schedule;

/* Builds the CUSGD++ deal of d. Every rating is in exactly one run and one
 * stream cell; runs are whole rows or pieces of run_max ratings (the last one
 * shorter), and every group's load is within the longest run of every other
 * group's (LPT). An item of c ratings gets min(ceil(c / hot), 256, groups)
 * rows, and group g updates row g mod that count. */
lac_status lac_mf_schedule_build(lac_ctx_t ctx, const lac_mf_data *d, const lac_mf_schedule_params *p,
                                 lac_mf_schedule *out);
void lac_mf_schedule_free(lac_mf_schedule *s);

/* Implicit feedback's negatives in a schedule s of the neighbourhood
 * model's cells (src/backend/cuda/mf/mf_implicit_cuda.h) made from d: each
 * interaction followed by one cell per negative (rating < 0, item the
 * interaction's; lac_mf_share's count of `negatives` shared by `share`,
 * none where scale[u] is 0), a user without an interaction only negatives'
 * cells. For each negative's cell, in stream order: its index in s's cells,
 * its user and its draw's key and t, the interaction's by lac_mf_share as
 * the CPU draws them (a user without an interaction: key -1, t = 0, 1, ...),
 * also where a row cut into runs puts an interaction's last negatives at
 * the start of the next run (runs are pieces of s->run_max cells, so the
 * run's offset gives how many came before). BPR's triples never split. */
/* Each user's items of d, ascending (d's CSR layout; malloc'ed), or NULL
 * when out of memory. */
int32_t *lac_mf_sorted_items(const lac_mf_data *d);
typedef struct {
    int64_t count;
    int64_t *cell;
    int32_t *user, *key, *t;
} lac_mf_negative_cells;
lac_status lac_mf_schedule_negatives(lac_ctx_t ctx, const lac_mf_data *d, const lac_mf_schedule *s, int share,
                                     int negatives, const float *scale, lac_mf_negative_cells *out);
void lac_mf_negative_cells_free(lac_mf_negative_cells *n);
/* Blocks of per_block groups to start for `want` groups: rounded up to whole
 * blocks, at most `resident` (one wave: no block waits for another), at least one. */
int64_t lac_mf_schedule_blocks(int64_t want, int64_t per_block, int64_t resident);

/* Rows (the item's own and its replicas) for an item of `count` ratings. */
int64_t lac_mf_replica_rows(int64_t count, int64_t hot, int64_t groups);

/* Longest processing time first: item i (of length len[i], in the order
 * given) to the least loaded group, ties to the lowest group. load (groups)
 * ends with each group's load; heap (groups) is scratch. */
void lac_mf_deal_lpt(const int64_t *len, int64_t n, int64_t groups, int64_t *load, int64_t *heap, int64_t *group_of);

/* order: 0..n-1 by count, most first; ties keep index order (a counting sort). */
lac_status lac_mf_order_by_count(lac_ctx_t ctx, const int64_t *count, int64_t n, int64_t *order);

/* One block of the ratings for a rotation's training (several devices, or
 * GPU ranks): the rows of users[0..nu) (model indices) restricted to the
 * items with item_local[j] >= 0, in local indices (user u is users[u], item j
 * is item_local[j] < ni), rows ordered by count. o's arrays are freed with
 * lac_mf_block_data_free. */
lac_status lac_mf_block_data(lac_ctx_t ctx, const lac_mf_data *d, const int32_t *users, int64_t nu,
                             const int32_t *item_local, int64_t ni, lac_mf_data *o);
void lac_mf_block_data_free(lac_mf_data *o);

/* The deterministic CPU grid: users dealt round-robin in rating-count order to
 * `blocks` row blocks, items by rating count likewise to column blocks, so
 * blocks hold about the same number of ratings. */
lac_status lac_mf_deal_blocks(lac_ctx_t ctx, const lac_mf_data *d, int blocks, int32_t *row_block, int32_t *col_block);

/* Rounds an epoch of a block grid is cut into: round r trains the r-th of
 * `rounds` consecutive slices of every block's users, stratum by stratum, so
 * that the pieces of one user's row (one a column block) are trained close
 * together in time, as in one process's user-major order. One pass of the
 * strata per epoch (a user's pieces an epoch/B apart) measured 1-2.4% worse
 * validation RMSE at 40 epochs on generated data; slices of about
 * LAC_MF_ROUND_USERS users came within the seed-to-seed spread
 * (docs/scaling.md, "mf over ranks"). Only the first LAC_MF_ROUND_EPOCHS
 * epochs need them (the fast early learning; rounds in every epoch measured
 * no better), so later epochs pass whole blocks, one message a turn. */
#define LAC_MF_ROUND_USERS 32
#define LAC_MF_ROUND_EPOCHS 2
int lac_mf_rounds(int64_t users_per_block);
/* Over MPI ranks each round passes every item block once round the ring, so
 * there the rounds stop at this many (slices grow past LAC_MF_ROUND_USERS
 * beyond 16,384 users a block; the measured sets had 209-313 rounds). */
#define LAC_MF_DIST_MAX_ROUNDS 512
/* The rounds of epoch `epoch` (from 0) for a grid of `rounds`. */
static inline int lac_mf_rounds_at(int rounds, int epoch) { return epoch < LAC_MF_ROUND_EPOCHS ? rounds : 1; }

/* The order of the B strata in an epoch: a seeded shuffle of 0..B-1, the same
 * for a seed and epoch in any run. */
void lac_mf_stratum_order(uint64_t seed, int epoch, int blocks, int *order);

#ifdef __cplusplus
}
#endif
#endif
