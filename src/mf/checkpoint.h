/* mf training checkpoints (checkpoint.c): the state a training needs to go
 * on where it stopped, written atomically every few epochs and read back by
 * a resumed training. The epoch loop (train.c) only calls these. */
#ifndef LACUNA_MF_CHECKPOINT_H
#define LACUNA_MF_CHECKPOINT_H

#include "mf/mf_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Where the epoch loop stands after `epoch` epochs: its early-stopping
 * state and what the report needs. The learning rate and every random draw
 * (initial factors, stratum order) are functions of the parameters, the
 * seed and the epoch, so these and the factors are the whole state. */
typedef struct {
    int epoch, best_epoch, since_best;
    double best, last_train, last_valid, seconds;
} lac_mf_progress;

/* What a checkpoint is checked against: the run's parameters and data. */
typedef struct {
    const lac_mf_params *params;
    const lac_mf_data *data;
    const lac_mf_eval *valid;  /* NULL without validation */
    lac_mf_model_t model;      /* its id maps are part of the data */
    int threads;
    int ranks;                 /* MPI ranks training it (1: one process) */
} lac_mf_run;

/* A checkpoint read and checked, waiting to be handed to the backend. */
typedef struct {
    lac_mf_progress progress;
    lac_mf_factors current, kept;   /* kept.P NULL when none was kept */
    void *block;
} lac_mf_checkpoint;

/* Refuses (LAC_ERR_ARGUMENT) a path that holds something other than a
 * checkpoint, so that a training never replaces another file. */
lac_status lac_mf_checkpoint_replaceable(lac_ctx_t ctx, const char *path);

/* Writes the checkpoint of run at progress: the backend's current factors
 * and, with validation, its kept ones. *scratch: host room for one set of
 * factors, allocated on first use (free it with lac_mf_checkpoint_scratch_free).
 * Over MPI ranks every rank calls it (the backend's get gathers the blocks)
 * and rank 0 alone writes; every rank returns rank 0's failure. */
lac_status lac_mf_checkpoint_save(lac_ctx_t ctx, const char *path, const lac_mf_run *run,
                                  const lac_mf_progress *progress, const lac_mf_backend *be, lac_mf_state *state,
                                  lac_mf_factors *scratch);
void lac_mf_checkpoint_scratch_free(lac_mf_factors *scratch);

/* Reads path and checks it against run: another training file, validation
 * file, k or other parameter is LAC_ERR_ARGUMENT naming it. Over MPI ranks
 * every rank reads it (a path all ranks see, as the training file); a
 * checkpoint written by another number of ranks (or one process) resumes
 * from the whole state it holds. */
lac_status lac_mf_checkpoint_read(lac_ctx_t ctx, const char *path, const lac_mf_run *run, lac_mf_checkpoint *out);
/* Hands the factors to the backend (current, then kept) and frees them. */
lac_status lac_mf_checkpoint_apply(lac_ctx_t ctx, lac_mf_checkpoint *ck, const lac_mf_backend *be,
                                   lac_mf_state *state);
void lac_mf_checkpoint_free(lac_mf_checkpoint *ck);

#ifdef __cplusplus
}
#endif
#endif
