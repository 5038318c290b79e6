/* The contract between the mf front end (src/mf/train.c and friends: checks,
 * epochs, early stopping) and its backends (src/mf/sgd_cpu.c,
 * src/backend/cuda/mf_*.cu). Three separate things:
 *   data      the training ratings grouped by user (CSR, 32-bit item indices),
 *             duplicates resolved, rows also listed by rating count;
 *   model     factors P (users) and Q (items), biases, id maps, the training
 *             items of each user, hyper-parameters;
 *   schedule  how a backend walks the data in an epoch (CPU: blocks of users x
 *             items; CUDA: a warp per user row in count order).
 * The neighbourhood model (CULSH-MF) adds item-side arrays to the model and
 * walks the same data; online updates append users/items to the model and data. */
#ifndef LACUNA_MF_INTERNAL_H
#define LACUNA_MF_INTERNAL_H

#include "core/internal.h"
#include "io/ratings_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Factor rows are padded to a multiple of this many floats (64 bytes) and
 * 64-byte aligned, so that vector loops need no tails; the padding stays 0. */
#define LAC_MF_ROW_ALIGN 16

typedef struct {
    int64_t num_users, num_items, nnz;
    int64_t *row_start;       /* num_users + 1 */
    int32_t *col;             /* nnz item indices, in read order within a row */
    float *val;               /* nnz ratings */
    int32_t *row_order;       /* users by rating count, most first (ties: index) */
    int64_t duplicates;       /* (user, item) pairs dropped: the last rating kept */
    double mean;              /* mu */
    float min, max;
} lac_mf_data;

/* Groups ratings by user and drops repeated pairs (the last one read wins). */
lac_status lac_mf_data_build(lac_ctx_t ctx, lac_ratings_t ratings, lac_mf_data *out);
void lac_mf_data_free(lac_mf_data *data);

struct lac_mf_model {
    lac_mf_params params;
    int64_t num_users, num_items;
    int k, stride;            /* stride: k rounded up to LAC_MF_ROW_ALIGN */
    float *P, *Q;             /* num_users x stride, num_items x stride */
    float *user_bias, *item_bias;   /* b_i, bhat_j: zeros without biases */
    double mean;              /* mu (0 without biases) */
    float rating_min, rating_max;   /* predictions are clamped to this range */
    lac_idmap users, items;
    int64_t *rated_start;     /* num_users + 1 */
    int32_t *rated_items;     /* each user's training items, ascending */
    int epochs;               /* trained */
};

/* A model with zeroed arrays (rows aligned and padded). */
lac_status lac_mf_model_alloc(lac_ctx_t ctx, int64_t num_users, int64_t num_items, int k, lac_mf_model_t *out);

/* Ratings of some file mapped into a model's dense indices; -1 for an id the
 * model has not seen. */
typedef struct {
    int64_t count;
    int32_t *user, *item;
    float *val;
    int64_t unknown;          /* ratings with an unseen user or item */
} lac_mf_eval;

lac_status lac_mf_eval_map(lac_ctx_t ctx, lac_mf_model_t model, lac_ratings_t ratings, lac_mf_eval *out);
void lac_mf_eval_free(lac_mf_eval *eval);
/* Host predictions of an evaluation set (clamped), with RMSE and MAE; any
 * output may be NULL. Fixed-order sums: the same result for any thread count. */
lac_status lac_mf_eval_host(lac_ctx_t ctx, lac_mf_model_t model, const lac_mf_eval *eval, float *predictions,
                            double *rmse, double *mae);

/* The prediction rule without clamping (users/items -1: unknown). */
static inline float lac_mf_score(lac_mf_model_t m, int64_t u, int64_t j)
{
    float s = (float)m->mean;
    if (u >= 0) s += m->user_bias[u];
    if (j >= 0) s += m->item_bias[j];
    if (u >= 0 && j >= 0) {
        const float *p = m->P + u * m->stride, *q = m->Q + j * m->stride;
        float dot = 0.0f;
        for (int f = 0; f < m->k; f++) dot += p[f] * q[f];
        s += dot;
    }
    return s;
}

/* The learning rate of epoch t (from 0), eq. (7): alpha / (1 + beta t^1.5). */
double lac_mf_learning_rate(const lac_mf_params *params, int epoch);

/* CPU backend (src/mf/sgd_cpu.c): the block schedule and its kernels. */
typedef struct lac_mf_cpu_state lac_mf_cpu_state;
lac_status lac_mf_cpu_begin(lac_ctx_t ctx, const lac_mf_data *data, lac_mf_model_t model, lac_mf_cpu_state **out);
/* One epoch of update rule (5); *train_sse: the sum of squared errors seen
 * before each update (LIBMF's running training loss). */
lac_status lac_mf_cpu_epoch(lac_ctx_t ctx, lac_mf_cpu_state *state, float learning_rate, int epoch,
                            double *train_sse);
void lac_mf_cpu_end(lac_mf_cpu_state *state);

/* CUDA backend (CUSGD++, src/backend/cuda/mf_*.cu), through the gateway. */
typedef struct {
    const lac_mf_data *data;
    lac_mf_model_t model;     /* initial factors in; results out at download */
    const lac_mf_eval *valid; /* may be NULL */
} lac_mf_cuda_call;
typedef struct lac_mf_cuda_state lac_mf_cuda_state;

#ifdef __cplusplus
}
#endif
#endif
