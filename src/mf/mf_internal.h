/* mf internals of the front end (src/mf: train, predict, recommend, model
 * files, the generator and the split): the model and how it is made from
 * rating files. What a backend is handed (the training data, evaluation sets,
 * the factor arrays, the backend table) is the contract in src/mf/mf_backend.h;
 * how a backend walks the data is the schedule in src/mf/schedule.h.
 *   data      the training ratings grouped by user (lac_mf_data);
 *   model     factors P (users) and Q (items), biases, id maps, the training
 *             items of each user, hyper-parameters;
 *   schedule  how a backend walks the data in an epoch (CPU: blocks of users x
 *             items; CUDA: runs of user rows dealt to lane groups).
 * The neighbourhood model (CULSH-MF) adds item-side arrays to the model and
 * walks the same data; online updates append users/items to the model and data. */
#ifndef LACUNA_MF_INTERNAL_H
#define LACUNA_MF_INTERNAL_H

#include "core/internal.h"
#include "data/ratings.h"
#include "mf/mf_backend.h"
#include "mf/nbr_backend.h"

#ifdef __cplusplus
extern "C" {
#endif

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
    /* the neighbourhood model (params.model); NULL for the plain one */
    int nbr_k;                /* K, 0 for the plain model */
    float *rated_vals;        /* the ratings of rated_items */
    int32_t *nbr;             /* num_items x K: S^K(j) */
    float *W, *C;             /* num_items x K */
    float *codes;             /* the search's per-item sums (LSH methods), num_items x code_cols */
    int64_t code_cols;
    uint64_t *keys;           /* with codes: their bucket keys, keys[t * num_items + j] for the q tables */
    int broken;               /* an in-place update failed half-way: not to be saved or updated */
};

/* The neighbourhood model's arrays (zeroed) for K neighbours. */
lac_status lac_mf_model_alloc_nbr(lac_ctx_t ctx, lac_mf_model_t m, int k);

/* Top-K neighbour lists (src/mf/neighbours.c). */
struct lac_mf_nbr {
    lac_mf_nbr_params params;
    int64_t num_items, num_users;
    int k;
    int32_t *list;            /* num_items x k dense item indices, best first */
    float *codes;             /* LSH methods: num_items x code_cols per-item sums (simLSH's
                               * accumulators, kept for online updates); else NULL */
    int64_t code_cols;
    uint64_t *keys;           /* with codes: their bucket keys (q x num_items) */
    lac_idmap items;          /* empty when made inside training (the model has the ids) */
    double seconds;
    int64_t bytes;            /* peak memory of the search */
};

/* The ratings item-major, and user-major too with with_users (ascending
 * indices; GSM and the model need both ways, the LSH methods item-major). */
lac_status lac_mf_nbr_data_build(lac_ctx_t ctx, const lac_mf_data *data, int with_users, lac_nbr_data *out);
void lac_mf_nbr_data_free(lac_nbr_data *d);
int64_t lac_mf_nbr_data_bytes(const lac_nbr_data *d);
/* What user `user` contributes to code column `col`: simLSH's 2 H - 1,
 * RP_cos' Gaussian, minHash's 24-bit hash (seeded; for online updates and
 * tests). An item's column is the lac_map of its ratings' weights times this
 * (sum; min for minHash). */
float lac_mf_nbr_source(const lac_mf_nbr_params *params, int64_t user, int64_t col);
/* The search on laid-out ratings (checked parameters); keep_codes keeps the
 * LSH methods' per-item sums in the result (else they are summed a group
 * of tables at a time and dropped). */
lac_status lac_mf_nbr_search(lac_ctx_t ctx, const lac_mf_nbr_params *params, const lac_nbr_data *d, int keep_codes,
                             lac_mf_nbr_t *out);

/* Online updates of the LSH codes: psi(r) (the item's mean for the centred
 * method), and a rating's contribution added to an item's row of codes
 * (its weight times the user's sources; minHash: the minimum). */
float lac_mf_nbr_weight(const lac_mf_nbr_params *params, float rating, double item_mean);
void lac_mf_nbr_codes_add(const lac_mf_nbr_params *params, float *row, int64_t cols, int64_t user, float weight);
/* Code columns of a method (0: GSM and random keep none). */
int64_t lac_mf_nbr_code_columns(const lac_mf_nbr_params *params);
/* Bucket keys (keys[t * num_items + j], q tables) of the items rows[0..
 * num_rows) (all with NULL) from their codes (num_items x
 * lac_mf_nbr_code_columns). */
void lac_mf_nbr_keys(const lac_mf_nbr_params *params, const float *codes, int64_t num_items, const int32_t *rows,
                     int64_t num_rows, uint64_t *keys);
/* The lists of items rows[0..num_rows) among all num_items from the bucket
 * keys: the backend's count over the tables (out: num_rows x K). */
lac_status lac_mf_nbr_search_rows(lac_ctx_t ctx, const lac_mf_nbr_params *params, const uint64_t *keys,
                                  int64_t num_items, const int32_t *rows, int64_t num_rows, int32_t *out);

/* Ratings spread wider than LAC_MF_UNIT_RANGE train in units of range /
 * LAC_MF_UNIT_RANGE (0-100 in units of 22.2), where the defaults (tuned on
 * 1-5 stars) hold: the same learning rates, initialisation and lambdas on
 * any scale. lac_mf_rating_unit gives the unit of a range (1 when narrow). */
#define LAC_MF_UNIT_RANGE 4.5
double lac_mf_rating_unit(double min, double max);
void lac_mf_scale_floats(float *x, int64_t n, double by);
/* The model in units of `unit` (by = 1 / unit) or back in rating units (by
 * = unit): mu, b, bhat, the range, R(i)'s ratings and C scale by it, P and Q
 * by its square root (u . v by it); W is a ratio. factors 0: only mu, the
 * range and R(i)'s ratings (the factors drawn in units already). */
void lac_mf_model_scale(lac_mf_model_t m, double by, int factors);

/* A model with zeroed arrays (rows aligned and padded). */
lac_status lac_mf_model_alloc(lac_ctx_t ctx, int64_t num_users, int64_t num_items, int k, lac_mf_model_t *out);
/* A deep copy of a model. */
lac_status lac_mf_model_clone(lac_ctx_t ctx, lac_mf_model_t src, lac_mf_model_t *out);
/* Grows a model in place to nu2 users and ni2 items (at least its own): the
 * factors, biases, neighbour arrays and LSH sums get zeroed rows, the bucket
 * keys move to the wider tables (the new items' left to key); rated_start
 * and the id maps are the caller's. */
lac_status lac_mf_model_grow(lac_ctx_t ctx, lac_mf_model_t m, int64_t nu2, int64_t ni2);

lac_status lac_mf_eval_map(lac_ctx_t ctx, lac_mf_model_t model, lac_ratings_t ratings, lac_mf_eval *out);
void lac_mf_eval_free(lac_mf_eval *eval);
/* Host predictions of an evaluation set (clamped), with RMSE and MAE; any
 * output may be NULL. Fixed-order sums: the same result for any thread count. */
lac_status lac_mf_eval_host(lac_ctx_t ctx, lac_mf_model_t model, const lac_mf_eval *eval, float *predictions,
                            double *rmse, double *mae);

/* lac_mf_rank_evaluate, and with user_ndcg each evaluated user's NDCG in
 * user order (report->users values, malloc'd; the caller frees it). */
lac_status lac_mf_rank_users(lac_ctx_t ctx, const lac_mf_rank_params *params, lac_mf_model_t m, lac_ratings_t test,
                             lac_mf_rank_report *report, double **user_ndcg);

/* The implicit search's test (tune.c): whether a ranks the held-out users
 * better than b by more than two standard errors of their paired NDCG
 * differences (a[x] - b[x], x < users). A trial replaces the best only on
 * such a gain, and the negative correction (the default) is dropped only when
 * the model without it gains so. */
int lac_mf_tune_clear_gain(const double *a, const double *b, int64_t users);

/* The model's trainable arrays as a backend sees them (borrowed). */
lac_mf_factors lac_mf_model_factors(lac_mf_model_t m);

/* The prediction rule without clamping (users/items -1: unknown). */
static inline float lac_mf_score(lac_mf_model_t m, int64_t u, int64_t j)
{
    float s = lac_mf_rule(m->mean, m->P, m->Q, m->user_bias, m->item_bias, m->k, m->stride, u, j);
    if (m->nbr_k && u >= 0 && j >= 0) {
        lac_mf_factors f = lac_mf_model_factors(m);
        s += lac_mf_nbr_term(&f, u, j, NULL);
    }
    return s;
}

/* Implicit feedback (src/mf/implicit.c): the training data's ratings
 * become the interactions' weights (1, or the ratings with params->weighted,
 * which must be > 0), mu 0 and the range unbounded (r_hat is a logit). */
lac_status lac_mf_implicit_data(lac_ctx_t ctx, const lac_mf_params *params, lac_mf_data *data);
/* params->negative_exponent, the model's default resolved (model.c). */
double lac_mf_negative_exponent(const lac_mf_params *params);
/* bhat_j += by x E x log(n_j) (E the model's negative exponent, n_j item j's
 * training interactions, at least 1): negative_correction (implicit.c). */
lac_status lac_mf_negative_correct(lac_ctx_t ctx, lac_mf_model_t m, double by);

/* The call that trains model m on data (valid may be NULL). */
lac_mf_call lac_mf_model_call(lac_mf_model_t m, const lac_mf_data *data, const lac_mf_eval *valid);

/* The learning rate of epoch t (from 0), eq. (7): alpha / (1 + beta t^1.5);
 * for the neighbourhood model the groups' factor 1 / (1 + beta_groups t^1.5). */
double lac_mf_learning_rate(const lac_mf_params *params, int epoch);

#ifdef __cplusplus
}
#endif
#endif
