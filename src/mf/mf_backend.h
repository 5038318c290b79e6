/* The contract between the mf front end (src/mf/train.c: checks, model set-up,
 * the epoch loop, early stopping) and its backends: the CPU one in src/mf/cpu/
 * and CUSGD++ in src/backend/cuda/mf/. It holds what a backend is handed:
 *   lac_mf_data     the training ratings grouped by user (CSR, 32-bit item
 *                   indices), duplicates resolved, rows listed by rating count;
 *   lac_mf_eval     an evaluation set in the model's dense indices;
 *   lac_mf_factors  the model's trainable arrays (borrowed) and their shapes;
 *   lac_mf_call     all of it with the hyper-parameters;
 * and the backend table. A backend sees nothing of struct lac_mf_model, the id
 * maps or the rating files. How a backend walks the data (the work deal, hot
 * item replicas, the stream order) is in src/mf/schedule.h, shared by both. */
#ifndef LACUNA_MF_BACKEND_H
#define LACUNA_MF_BACKEND_H

#include "core/internal.h"
#include "core/random.h"

#include <string.h>

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
    /* Implicit feedback's negatives (lac_mf_implicit_data): num_items
     * cumulative integer weights of the items, NULL: uniform draws. */
    uint64_t *neg_cum;
} lac_mf_data;

/* Ratings of some file mapped into a model's dense indices; -1 for an id the
 * model has not seen. */
typedef struct {
    int64_t count;
    int32_t *user, *item;
    float *val;
    int64_t unknown;          /* ratings with an unseen user or item */
} lac_mf_eval;

/* A model's trainable arrays and what is needed to read them: P (num_users x
 * stride), Q (num_items x stride), b_i, bhat_j; mu and the rating range. */
typedef struct {
    int64_t num_users, num_items;
    int k, stride;            /* stride: k rounded up to LAC_MF_ROW_ALIGN */
    float *P, *Q, *user_bias, *item_bias;
    double mean;              /* mu (0 without biases) */
    float rating_min, rating_max;   /* predictions are clamped to this range */
    /* The neighbourhood model (kind LAC_MF_MODEL_NEIGHBOURHOOD; nbr_k = 0
     * for the plain one): S^K(j), the influence rows w_j and c_j, and each
     * user's training ratings (R(i); N(i) is its complement), eq. (1). */
    int kind;
    int nbr_k;                /* K */
    const int32_t *nbr;       /* num_items x K: S^K(j) */
    float *W, *C;             /* num_items x K */
    const int64_t *rated_start;   /* num_users + 1 */
    const int32_t *rated_items;   /* items ascending within a user */
    const float *rated_vals;      /* their ratings */
} lac_mf_factors;

/* The trainable arrays of f and their lengths in floats: P, Q, b_i, bhat_j
 * and, for the neighbourhood model, W and C. Returns how many (4 or 6). */
static inline int lac_mf_factors_arrays(const lac_mf_factors *f, float *arrays[6], size_t floats[6])
{
    size_t nk = (size_t)f->num_items * (size_t)f->nbr_k;
    float *a[6] = {f->P, f->Q, f->user_bias, f->item_bias, f->W, f->C};
    size_t n[6] = {(size_t)f->num_users * (size_t)f->stride, (size_t)f->num_items * (size_t)f->stride,
                   (size_t)f->num_users, (size_t)f->num_items, nk, nk};
    for (int i = 0; i < 6; i++) {
        arrays[i] = a[i];
        floats[i] = n[i];
    }
    return f->nbr_k ? 6 : 4;
}

/* A host copy of f's trainable arrays (a backend's kept epoch): allocated
 * into kept[] (the caller frees what is there on failure too), or copied
 * from f (restore 0) or back into f (1). */
static inline lac_status lac_mf_kept_alloc(lac_ctx_t ctx, const lac_mf_factors *f, float *kept[6])
{
    float *arrays[6];
    size_t floats[6];
    for (int i = 0, n = lac_mf_factors_arrays(f, arrays, floats); i < n; i++)
        if (!(kept[i] = (float *)lac_malloc(ctx, floats[i] * sizeof(float) + 1))) return LAC_ERR_OUT_OF_MEMORY;
    return LAC_SUCCESS;
}

static inline void lac_mf_kept_copy(const lac_mf_factors *f, float *const kept[6], int restore)
{
    float *arrays[6];
    size_t floats[6];
    for (int i = 0, n = lac_mf_factors_arrays(f, arrays, floats); i < n; i++)
        if (floats[i]) memcpy(restore ? arrays[i] : kept[i], restore ? kept[i] : arrays[i], floats[i] * sizeof(float));
}

/* One training, as a backend receives it. The front end keeps everything it
 * points to alive until the backend's end. */
typedef struct {
    const lac_mf_data *data;
    const lac_mf_eval *valid; /* may be NULL */
    lac_mf_factors factors;   /* initial values in; the trained ones after download */
    double lambda, lambda_bias;
    int use_bias;
    int deterministic;        /* the result depends only on the seed (and threads) */
    uint64_t seed;
    /* The neighbourhood model: group g's learning rate in an epoch is
     * rates.g x the learning_rate the epoch is given (the front end passes
     * 1 / (1 + beta t^1.5) there), its regulariser lambdas.g. */
    lac_mf_groups rates, lambdas;
    /* Implicit feedback: data's ratings are the interactions' weights, the
     * error of rule (5) the gradient of the loss (lac_mf_loss) in r_hat,
     * `negatives` uniform negatives per interaction (one for BPR), drawn
     * from seed, epoch and user; epoch's *train_sse is the summed loss. */
    int implicit, loss, negatives;
    /* Interactions sharing one draw of negatives (1: each its own; the
     * rule below, lac_mf_share). */
    int share;
    /* The negatives' distribution (lac_mf_data.neg_cum; NULL: uniform) and
     * its exponent (lac_mf_params.negative_exponent, resolved). */
    const uint64_t *neg_cum;
    double negative_exponent;
    /* One part of the items (the blocks of src/dist/mf_dist.c): with
     * item_part (num_items entries), the epochs train only the ratings of
     * the items j with item_part[j] == part; the neighbourhood terms still see
     * the user's whole row of data. NULL: all the ratings. A backend
     * without `parts` below refuses it, implicit feedback one without
     * `implicit_parts`. */
    const int32_t *item_part;
    int part;
    /* With item_part: each epoch call trains the next of the epoch's
     * lac_mf_rounds_at(rounds, epoch) slices of the part's users (rounds 0
     * or 1: all of them), so that that many calls make the part's epoch; the
     * epoch's start (the neighbourhood terms' baselines) is the first
     * slice's call. */
    int rounds;
    /* Implicit feedback (cross-entropy): per user of data, the weight of
     * each of its negatives; NULL: 1 (a GPU rank's part, mf_parts.cu). */
    const float *negative_scale;
} lac_mf_call;

/* Implicit feedback's negatives, the same on every backend: candidate r
 * (r < LAC_MF_DRAWS) for negative t of user u's interaction with item j is a
 * counter-based splitmix64 draw keyed by (seed, epoch, u, j, t, r), so any
 * thread or device can draw it in any order (j is unique within a user, so a
 * row split over several device groups draws the same). The first candidate
 * u has not seen is the negative; after LAC_MF_DRAWS seen ones, the last. */
#define LAC_MF_DRAWS 32

static inline LAC_RANDOM_HD uint64_t lac_mf_draw_seed(uint64_t seed, int epoch, int64_t u)
{
    uint64_t e = lac_mix64(seed * 0x9E3779B97F4A7C15ull + (uint64_t)epoch);
    return lac_mix64(e ^ lac_mix64((uint64_t)u + 0x51ED270B2A3C2D59ull));
}

static inline LAC_RANDOM_HD uint64_t lac_mf_draw_bits(uint64_t user_seed, int32_t j, int t, int r)
{
    uint64_t key = (uint64_t)(uint32_t)j << 15 | (uint64_t)t << 5 | (uint64_t)r;   /* t < 1024, r < 32 */
    uint64_t state = user_seed + key * 0x9E3779B97F4A7C15ull;
    return lac_splitmix64(&state) >> 11;
}

static inline LAC_RANDOM_HD int32_t lac_mf_draw_item(uint64_t user_seed, int32_t j, int t, int r, int64_t num_items)
{
    return (int32_t)(lac_mf_draw_bits(user_seed, j, t, r) % (uint64_t)num_items);
}

/* The high 64 bits of a x b. */
static inline LAC_RANDOM_HD uint64_t lac_mf_mulhi64(uint64_t a, uint64_t b)
{
#ifdef __CUDA_ARCH__
    return __umul64hi(a, b);
#else
    __extension__ typedef unsigned __int128 u128;
    return (uint64_t)(((u128)a * b) >> 64);
#endif
}

/* A table of the negatives' distribution over n items (lac_mf_data.neg_cum):
 * cum[0..n-1] the items' cumulative integer weights (total cum[n-1]; 0:
 * every draw the last item),
 * then, from lac_mf_cum_index, cum[n] = floor((2^64 - 1) / total),
 * cum[n+1] a shift s, and G + 1 int32 guide entries (G: a power of two >= n
 * and 2; total >> s < G): guide[b] the first item whose cumulative weight
 * exceeds b << s (the last item when none or b << s >= total; Chen's
 * indexed search: a draw x in [b << s, (b + 1) << s) lies in
 * [guide[b], guide[b + 1]], most often one item). lac_mf_cum_words(n) words. */
static inline int64_t lac_mf_cum_guides(int64_t n)
{
    int64_t g = 2;
    while (g < n) g *= 2;
    return g;
}

static inline int64_t lac_mf_cum_words(int64_t n)
{
    return n + 2 + (lac_mf_cum_guides(n) + 2) / 2;
}

/* cum's reciprocal, shift and guide from its first n entries (n >= 1). */
static inline void lac_mf_cum_index(uint64_t *cum, int64_t n)
{
    const uint64_t total = cum[n - 1];
    const int64_t G = lac_mf_cum_guides(n);
    int s = 0;
    while (s < 63 && (total ? total - 1 : 0) >> s >= (uint64_t)G) s++;
    cum[n] = total ? UINT64_MAX / total : 0;
    cum[n + 1] = total ? (uint64_t)s : 63;   /* no weight: every draw lands in bucket 0 */
    int32_t *guide = (int32_t *)(cum + n + 2);
    const int64_t used = total ? (int64_t)((total - 1) >> s) + 1 : 0;   /* b << s < total */
    int64_t i = 0;
    for (int64_t b = 0; b <= G; b++) {
        while (b < used && i < n - 1 && cum[i] <= (uint64_t)b << s) i++;
        guide[b] = (int32_t)(b < used ? i : n - 1);
    }
}

/* The item of a table cum of lac_mf_cum_index (n items) for a draw of
 * bits < 2^53: the first whose cumulative weight exceeds bits modulo the
 * total. The remainder comes from the reciprocal (a quotient short by at
 * most one, then one correction: exactly bits % total) and the search
 * starts at the guide, so that a draw takes about one step for any n. */
static inline LAC_RANDOM_HD int32_t lac_mf_cum_pick(const uint64_t *cum, int64_t n, uint64_t bits)
{
    const uint64_t total = cum[n - 1];
    uint64_t x = bits - lac_mf_mulhi64(bits, cum[n]) * total;
    if (x >= total) x -= total;
    const int32_t *guide = (const int32_t *)(cum + n + 2);
    const uint64_t b = x >> cum[n + 1];
    int64_t lo = guide[b], hi = guide[b + 1];
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (cum[mid] > x) hi = mid;
        else lo = mid + 1;
    }
    return (int32_t)lo;
}

/* The same draw from the items' table cum (lac_mf_data.neg_cum, integers so
 * that every backend picks the same item; NULL: uniform as above). */
static inline LAC_RANDOM_HD int32_t lac_mf_draw_negative(const uint64_t *cum, uint64_t user_seed, int32_t j, int t,
                                                         int r, int64_t num_items)
{
    if (!cum) return lac_mf_draw_item(user_seed, j, t, r, num_items);
    return lac_mf_cum_pick(cum, num_items, lac_mf_draw_bits(user_seed, j, t, r));
}

/* Item j's weight in those draws (1: uniform), for a part's own table. */
static inline double lac_mf_item_weight(const uint64_t *cum, int64_t j)
{
    return cum ? (double)(cum[j] - (j ? cum[j - 1] : 0)) : 1.0;
}

/* In-batch negatives (the CUDA backend's) come in proportion to the items'
 * interactions, p_j = count[j] / nnz (the other groups' positives).
 * Weighing item j's by q_j / p_j, q the call's law (cum, neg_cum; NULL:
 * uniform), times `scale` (the negatives asked over those a cell meets)
 * makes the loss's negative term that of the drawn negatives in
 * expectation (importance weights). weight[x] for row x, item row_item[x];
 * 0 for an item without interactions, which no cell meets. */
static inline void lac_mf_inbatch_weights(const lac_mf_data *d, const uint64_t *cum, const int64_t *count,
                                          const int32_t *row_item, int64_t rows, double scale, float *weight)
{
    const double total = cum && d->num_items ? (double)cum[d->num_items - 1] : (double)d->num_items;
    for (int64_t x = 0; x < rows; x++) {
        const int32_t j = row_item[x];
        const double q = lac_mf_item_weight(cum, j) / total, p = (double)count[j] / (double)d->nnz;
        weight[x] = count[j] > 0 ? (float)(scale * q / p) : 0.0f;
    }
}

/* A part's own table (lac_mf_cum_words(n) words at out, indexed) of its n
 * rows' items in the whole table all (NULL: uniform); items[r] < 0 is a
 * padding row that is never drawn. */
static inline void lac_mf_cum_of_items(uint64_t *out, const uint64_t *all, const int32_t *items, int64_t n)
{
    for (int64_t r = 0; r < n; r++)
        out[r] = (r ? out[r - 1] : 0) + (items[r] >= 0 ? (uint64_t)lac_mf_item_weight(all, items[r]) : 0);
    if (n) lac_mf_cum_index(out, n);
}

/* A part of the items (item_part[j] == part, of weight part_w in those
 * draws) and user u of d: the share of u's unseen weight that lies in the
 * part (one process's negatives of u land there in that proportion; 0 when
 * u has seen every item), and u's interactions there (*in_part). The parts'
 * trainings draw that share of one process's negatives within the part
 * (implicit_cpu.c; on CUDA mf_parts.cu, mf_multi.cu). */
static inline double lac_mf_part_share(const lac_mf_data *d, const uint64_t *cum, const int32_t *item_part, int part,
                                       double part_w, int64_t u, int64_t *in_part)
{
    double seen_w = 0.0, seen_part_w = 0.0;
    int64_t nb = 0;
    for (int64_t a = d->row_start[u]; a < d->row_start[u + 1]; a++) {
        const double w = lac_mf_item_weight(cum, d->col[a]);
        const int here = item_part[d->col[a]] == part;
        seen_w += w;
        seen_part_w += here ? w : 0.0;
        nb += here;
    }
    *in_part = nb;
    const double all_w = cum ? (double)cum[d->num_items - 1] : (double)d->num_items;
    return all_w > seen_w ? (part_w - seen_part_w) / (all_w - seen_w) : 0.0;
}

/* Shared negatives (lac_mf_params.negative_share = B): user u's n
 * interactions, items ascending, are chunks of B (the last one n mod B when
 * that is not 0); chunk c's `negatives` negatives are drawn as above with c
 * in place of the item, and negative t goes with the chunk's interaction of
 * rank t mod s (s: the chunk's size), stepped with weight s: the summed
 * gradient of the s positives' shared negative, scored once (a negative's
 * gradient does not depend on the positive). A user's negatives weigh
 * n x negatives in all, as without sharing. B = 1 is the rule above exactly
 * (keyed by the item). For the interaction of rank `rank` among n: its
 * first negative's t (*first; then every *size-th), their count (returned,
 * 0 when the chunk has fewer negatives than interactions) and the chunk's key
 * (*key, for lac_mf_draw_item's j). */
#define LAC_MF_SHARE_MAX 64

static inline LAC_RANDOM_HD int lac_mf_share(int64_t rank, int64_t n, int share, int negatives, int32_t item,
                                             int *first, int *size, int32_t *key)
{
    const int64_t c = rank / share, s = n - c * share < share ? n - c * share : share;
    *first = (int)(rank - c * share);
    *size = (int)s;
    *key = share == 1 ? item : (int32_t)c;
    return *first < negatives ? (negatives - *first + (int)s - 1) / (int)s : 0;
}

/* Online updates (src/mf/update.c): some users' or items' parameters solved
 * with everything else fixed. Eq. (1) is linear in one row's parameters, a
 * user's (b_i, u_i) or an item's (bhat_j, v_j, w_j, c_j), so each row is a
 * ridge regression over its ratings with the regulariser that SGD by rule
 * (5) minimises: the group's lambda times the ratings that update it. The
 * neighbourhood terms read R(i) from factors.rated_* (the updated lists). */
typedef struct lac_mf_fold_call {
    lac_mf_factors factors;   /* read, and the rows written */
    /* the ratings solved from, user-major and item-major (CSR over the model's indices) */
    const int64_t *user_start;
    const int32_t *user_item;
    const float *user_val;
    const int64_t *item_start;
    const int32_t *item_user;
    const float *item_val;
    int items;                /* 0: rows are users, 1: items */
    const int32_t *rows;
    int64_t num_rows;
    const unsigned char *skip;  /* users: ratings of items (users: of users) flagged here are left out; may be NULL */
    double lambda, lambda_bias;   /* the plain model's */
    int use_bias;
    lac_mf_groups lambdas;    /* the neighbourhood model's */
    int max_dim;              /* an item's w_j, c_j are solved only when 1 + k + 2 K <= max_dim */
} lac_mf_fold_call;

/* Each backend's own state for one training (defined by the backend). */
typedef struct lac_mf_state lac_mf_state;

typedef struct {
    const char *name;
    int deterministic;        /* can train with call->deterministic */
    /* Sets up the training: layout, schedule, device copies. */
    lac_status (*begin)(lac_ctx_t ctx, const lac_mf_call *call, lac_mf_state **state);
    /* One epoch of update rule (5) at learning_rate (epoch counts from 0);
     * *train_sse: the sum of squared errors seen before each update
     * (LIBMF's running training loss). */
    lac_status (*epoch)(lac_ctx_t ctx, lac_mf_state *state, float learning_rate, int epoch, double *train_sse);
    /* RMSE of the current factors on call->valid (NaN when it is empty). */
    lac_status (*valid_rmse)(lac_ctx_t ctx, lac_mf_state *state, double *rmse);
    /* Keeps the current factors (restore 0) or brings the kept ones back (1). */
    lac_status (*keep)(lac_ctx_t ctx, lac_mf_state *state, int restore);
    /* Leaves the trained factors in call->factors' arrays. */
    lac_status (*download)(lac_ctx_t ctx, lac_mf_state *state);
    /* Frees the state; accepts NULL. */
    void (*end)(lac_ctx_t ctx, lac_mf_state *state);
    /* Checkpoints: copy the current factors (kept 0) or the kept epoch's (1)
     * into host arrays shaped as call->factors, or set them from such arrays
     * (a resumed training). */
    lac_status (*get)(lac_ctx_t ctx, lac_mf_state *state, int kept, const lac_mf_factors *to);
    lac_status (*put)(lac_ctx_t ctx, lac_mf_state *state, int kept, const lac_mf_factors *from);
    /* Trains the neighbourhood model too (factors.kind); 0: plain only. Such
     * a backend follows src/mf/cpu/sgd_nbr_cpu.c: eq. (1) with N(i) the
     * complement of R(i) among S^K(j), the residuals' bhat_j1 taken at the
     * epoch's start, rule (5) per group at rates.g x learning_rate; keep,
     * get and put carry W and C with the factors. */
    int neighbourhood;
    /* Online updates: solves rows of call->factors in closed form (below);
     * NULL: the front end uses the CPU table's. */
    lac_status (*fold_in)(lac_ctx_t ctx, const struct lac_mf_fold_call *call);
    /* Trains a part of the items (call.item_part), with the factors in the
     * host arrays of call.factors between epochs (read and written there by
     * the caller); 0: neither. */
    int parts;
    /* With parts: 1 when each epoch call trains the next slice of the part's
     * users (call.rounds); 0 when a call trains the whole part, so that the
     * caller makes one round an epoch. */
    int part_slices;
    /* With parts: trains implicit feedback's parts too (the part's
     * positives, negatives drawn from the part's items: implicit_cpu.c). */
    int implicit_parts;
} lac_mf_backend;

/* Training over the context's MPI ranks (src/dist/mf_dist.c): with more than
 * one rank, *table becomes the distributed table and *state its state, which
 * trains each rank's blocks through `inner` (a table with `parts`); with one
 * rank (or without MPI in the build) it is inner->begin and *table stays
 * inner. Every rank passes the same call (the same data, model and
 * options); after download every rank holds the whole model. */
/* lac_mf_dist_agree: every rank passes its status; when any failed, every
 * rank returns the lowest failing rank's failure and message (one rank's
 * file I/O: checkpoints, which rank 0 writes from the gathered state). */
#ifdef LACUNA_HAVE_MPI
lac_status lac_mf_dist_begin(lac_ctx_t ctx, const lac_mf_call *call, const lac_mf_backend **table,
                             lac_mf_state **state);
lac_status lac_mf_dist_agree(lac_ctx_t ctx, lac_status status);
#else
static inline lac_status lac_mf_dist_begin(lac_ctx_t ctx, const lac_mf_call *call, const lac_mf_backend **table,
                                           lac_mf_state **state)
{
    return (*table)->begin(ctx, call, state);
}
static inline lac_status lac_mf_dist_agree(lac_ctx_t ctx, lac_status status)
{
    (void)ctx;
    return status;
}
#endif

/* The CPU backend (src/mf/cpu/), always built. */
extern const lac_mf_backend lac_mf_cpu_backend;

/* The CUDA backend (src/backend/cuda/mf/), handed out by the CUDA gateway;
 * NULL without CUDA in the build. */
#ifdef LACUNA_HAVE_CUDA
const lac_mf_backend *lac_mf_backend_cuda(void);
#else
static inline const lac_mf_backend *lac_mf_backend_cuda(void) { return NULL; }
#endif

/* The prediction rule without clamping, mu + b_i + bhat_j + u_i . v_j, for
 * users/items -1 (unknown) the known terms only. */
static inline float lac_mf_rule(double mean, const float *P, const float *Q, const float *user_bias,
                                const float *item_bias, int k, int stride, int64_t u, int64_t j)
{
    float s = (float)mean;
    if (u >= 0) s += user_bias[u];
    if (j >= 0) s += item_bias[j];
    if (u >= 0 && j >= 0) {
        const float *p = P + u * stride, *q = Q + j * stride;
        float dot = 0.0f;
        for (int f = 0; f < k; f++) dot += p[f] * q[f];
        s += dot;
    }
    return s;
}

/* The neighbourhood terms of eq. (1) for a known user u and item j:
 * |R^K|^-1/2 sum (r_{u,j1} - mu - b_u - bhat_j1) w_{j,k} + |N^K|^-1/2 sum c_{j,k}
 * (src/mf/eval.c). seen: NULL (u's ratings are searched in rated_items), or
 * a dense row of num_items holding u's training ratings and NaN elsewhere
 * (the same value, found with one load). */
float lac_mf_nbr_term(const lac_mf_factors *m, int64_t u, int64_t j, const float *seen);

static inline float lac_mf_factors_score(const lac_mf_factors *m, int64_t u, int64_t j)
{
    float s = lac_mf_rule(m->mean, m->P, m->Q, m->user_bias, m->item_bias, m->k, m->stride, u, j);
    if (m->nbr_k && u >= 0 && j >= 0) s += lac_mf_nbr_term(m, u, j, NULL);
    return s;
}

/* Host predictions of an evaluation set (clamped to the rating range), with
 * RMSE and MAE; any output may be NULL. Fixed-order sums: the same result for
 * any thread count (src/mf/eval.c). */
lac_status lac_mf_eval_factors(lac_ctx_t ctx, const lac_mf_factors *m, const lac_mf_eval *eval, float *predictions,
                               double *rmse, double *mae);
/* RMSE and MAE of given (clamped) predictions of an evaluation set, in the
 * order lac_mf_eval_factors sums them: the same figures for the same
 * predictions. */
lac_status lac_mf_eval_reduce(lac_ctx_t ctx, const lac_mf_eval *eval, const float *predictions, double *rmse,
                              double *mae);

#ifdef __cplusplus
}
#endif
#endif
