/* mf over MPI ranks on the GPU: the CUDA table's `parts` (mf_backend.h), the
 * inner training that src/dist/mf_dist.c's rotation drives on each rank. A
 * part is this rank's users x one block of the items (call.item_part ==
 * call.part): a one-device CUSGD++ training (mf_sgd.cu) of those ratings in
 * local indices, made once. Between epoch calls the model lives in the
 * call's host arrays, where the rotation passes item rows round the ring, so
 * an epoch call copies the part's user and item rows in, runs one epoch of
 * the part's ratings and copies them back out: rows over PCIe against an
 * epoch of the block's ratings (mf_multi.cu keeps them on the devices of
 * one process instead).
 * In the first epochs (lac_mf_rounds_at of call.rounds) a call trains one
 * slice of the part's users, as the CPU's part does (the rotation then
 * turns its ring once a slice): a one-device training of the slice's
 * ratings, made for the call and freed after it (set-up against a slice's
 * few ratings, in two epochs; later epochs keep the whole part's training
 * and its kernels' parallelism). Slice r holds the users whose position
 * among the rank's users lies in its r-th R-th, so that a user's pieces in
 * the P parts are trained in the same round; whole blocks a turn converged
 * 0.7-1.0% worse with the neighbourhood model (docs/scaling.md).
 * Implicit feedback: the part's
 * training draws the negatives from its own items, `negatives` a positive of
 * weight negative_scale, the user's share of one process's
 * (lac_mf_cuda_block_negatives). The neighbourhood model takes them as its
 * stream's negatives' cells (mf_implicit.cu), drawn by weights that are 0
 * outside the part. With cross-entropy a part holds every user of the rank,
 * so that a user without a positive in the part draws its share there as
 * on the CPU (the plain model: a cell of negatives only in its stream).
 * The neighbourhood model's part keeps the model's item indices
 * (every item a row on the device, the part's with ratings): a rating's
 * terms read its user's whole row R(i) (rated_*, this rank's users, model
 * item ids) and the baselines bhat of neighbours in any block, which an
 * epoch call takes from every item bias of the host arrays as this rank
 * held them at the epoch's first call (the rotation gathers them after each
 * epoch; src/dist/mf_dist.c), the part's own items' as they stand. */
#include "backend/cuda/mf/mf_multi_cuda.h"
#include "backend/cuda/mf/mf_parts_cuda.h"
#include "mf/schedule.h"

#include <stdlib.h>
#include <string.h>

struct lac_mf_cuda_part {
    lac_mf_call call;           /* the rotation's: host arrays in the model's indices */
    lac_mf_data sub;            /* the part's ratings in local indices */
    lac_mf_factors fac;         /* the part's rows, packed on the host */
    int32_t *users_of, *items_of;   /* model index of each local user / item (of the part) */
    float *scale;               /* implicit cross-entropy: each local user's negatives' weight */
    uint64_t *cum;              /* implicit: the local items' cumulative weights (0 outside the part; NULL: uniform) */
    int32_t *item_local;        /* local index of each model item (-1 outside the part) */
    int64_t part_items;         /* the part's items (items_of's length) */
    int64_t *rank_pos;          /* each local user's position among the rank's users (the slices) */
    int64_t rank_users;         /* this rank's users (rows of call.data with ratings) */
    int next_slice;             /* the slice the next epoch call trains */
    float *bhat0;               /* the neighbourhood model: the item biases at the epoch's first call */
    int64_t *slice_rated;       /* the neighbourhood model: a slice's R(i) offsets, from 0 */
    int whole_items;            /* the neighbourhood model: local item index = model index */
    int64_t *rated_start;       /* the neighbourhood model: R(i) of each local user, */
    int32_t *rated_items;       /* model item ids, ascending */
    float *rated_vals;
    lac_mf_state *one;          /* the one-device training of the part */
};

/* The local users (rows with a rating in the part) and items (the part's),
 * and the part's ratings in those indices. */
static lac_status make_sub(lac_ctx_t ctx, lac_mf_cuda_part *q)
{
    const lac_mf_data *d = q->call.data;
    const int32_t *part = q->call.item_part;
    int32_t *item_local = q->item_local =
        (int32_t *)lac_malloc(ctx, (size_t)(d->num_items ? d->num_items : 1) * sizeof(int32_t));
    q->rank_pos = (int64_t *)lac_malloc(ctx, (size_t)(d->num_users ? d->num_users : 1) * sizeof(int64_t));
    q->items_of = (int32_t *)lac_malloc(ctx, (size_t)(d->num_items ? d->num_items : 1) * sizeof(int32_t));
    q->users_of = (int32_t *)lac_malloc(ctx, (size_t)(d->num_users ? d->num_users : 1) * sizeof(int32_t));
    lac_status st = item_local && q->rank_pos && q->items_of && q->users_of ? LAC_SUCCESS : LAC_ERR_OUT_OF_MEMORY;
    int64_t ni = 0, nu = 0;
    for (int64_t j = 0; st == LAC_SUCCESS && j < d->num_items; j++) {
        item_local[j] = part[j] != q->call.part ? -1 : q->whole_items ? (int32_t)j : (int32_t)ni;
        if (part[j] == q->call.part) q->items_of[ni++] = (int32_t)j;
    }
    q->part_items = ni;
    if (q->whole_items) ni = d->num_items;
    /* cross-entropy: every user with interactions (its negatives need no
     * positive here; lac_mf_cuda_block_negatives) */
    const int every = q->call.implicit && q->call.loss != LAC_MF_LOSS_BPR;
    for (int64_t x = 0; st == LAC_SUCCESS && x < d->num_users; x++) {
        int64_t a = d->row_start[x];
        while (a < d->row_start[x + 1] && item_local[d->col[a]] < 0) a++;
        if (a < d->row_start[x + 1] || (every && d->row_start[x + 1] > d->row_start[x])) {
            q->rank_pos[nu] = q->rank_users;
            q->users_of[nu++] = (int32_t)x;
        }
        q->rank_users += d->row_start[x + 1] > d->row_start[x];
    }
    if (st == LAC_SUCCESS) st = lac_mf_block_data(ctx, d, q->users_of, nu, item_local, ni, &q->sub);
    return st == LAC_SUCCESS ? st
                             : lac_error(ctx, st, "out of host memory for the ratings of mf part %d", q->call.part);
}

lac_status lac_mf_cuda_block_negatives(lac_ctx_t ctx, const lac_mf_call *call, const int32_t *item_part, int part,
                                       const lac_mf_data *sub, const int32_t *users_of, const int32_t *row_item,
                                       float **scale, uint64_t **cum)
{
    const lac_mf_data *d = call->data;
    const uint64_t *all = call->neg_cum;
    *scale = NULL;
    *cum = NULL;
    double part_w = 0.0;
    int every = 1;   /* every row an item of the part: uniform draws need no table */
    for (int64_t r = 0; r < sub->num_items; r++) {
        part_w += row_item[r] >= 0 ? lac_mf_item_weight(all, row_item[r]) : 0.0;
        every &= row_item[r] >= 0;
    }
    if (all || !every) {
        *cum = (uint64_t *)lac_malloc(ctx, (size_t)lac_mf_cum_words(sub->num_items) * sizeof(uint64_t));
        if (!*cum) return LAC_ERR_OUT_OF_MEMORY;
        lac_mf_cum_of_items(*cum, all, row_item, sub->num_items);
    }
    if (call->loss == LAC_MF_LOSS_BPR) return LAC_SUCCESS;
    *scale = (float *)lac_malloc(ctx, (size_t)(sub->num_users ? sub->num_users : 1) * sizeof(float));
    if (!*scale) return LAC_ERR_OUT_OF_MEMORY;
    for (int64_t x = 0; x < sub->num_users; x++) {
        const int64_t u = users_of[x], n = d->row_start[u + 1] - d->row_start[u];
        int64_t nb = 0;
        const double here = lac_mf_part_share(d, all, item_part, part, part_w, u, &nb);
        (*scale)[x] = (float)((double)n * here / (double)(nb > 0 ? nb : 1));
    }
    return LAC_SUCCESS;
}

/* The neighbourhood model: each local user's whole row R(i) from the model's. */
static lac_status make_rated(lac_ctx_t ctx, lac_mf_cuda_part *q)
{
    const lac_mf_factors *g = &q->call.factors;
    const int64_t nu = q->sub.num_users;
    q->rated_start = (int64_t *)lac_malloc(ctx, (size_t)(nu + 1) * sizeof(int64_t));
    if (!q->rated_start) return LAC_ERR_OUT_OF_MEMORY;
    q->rated_start[0] = 0;
    for (int64_t x = 0; x < nu; x++) {
        const int64_t u = q->users_of[x];
        q->rated_start[x + 1] = q->rated_start[x] + (g->rated_start[u + 1] - g->rated_start[u]);
    }
    const size_t total = (size_t)q->rated_start[nu];
    q->rated_items = (int32_t *)lac_malloc(ctx, (total ? total : 1) * sizeof(int32_t));
    q->rated_vals = (float *)lac_malloc(ctx, (total ? total : 1) * sizeof(float));
    if (!q->rated_items || !q->rated_vals) return LAC_ERR_OUT_OF_MEMORY;
    for (int64_t x = 0; x < nu; x++) {
        const int64_t u = q->users_of[x], a = g->rated_start[u], len = g->rated_start[u + 1] - a;
        memcpy(q->rated_items + q->rated_start[x], g->rated_items + a, (size_t)len * sizeof(int32_t));
        memcpy(q->rated_vals + q->rated_start[x], g->rated_vals + a, (size_t)len * sizeof(float));
    }
    return LAC_SUCCESS;
}

/* Implicit feedback: the part's negatives drawn within its items, weighted
 * to the user's share of one process's (lac_mf_cuda_block_negatives). With
 * whole items the rows outside the part weigh 0. */
static lac_status part_negatives(lac_ctx_t ctx, lac_mf_cuda_part *q)
{
    const int64_t rows = q->sub.num_items;
    int32_t *row_item = q->items_of;
    if (q->whole_items) {
        row_item = (int32_t *)lac_malloc(ctx, (size_t)(rows ? rows : 1) * sizeof *row_item);
        if (!row_item) return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "out of host memory for mf part %d", q->call.part);
        for (int64_t j = 0; j < rows; j++) row_item[j] = q->call.item_part[j] == q->call.part ? (int32_t)j : -1;
    }
    lac_status st = lac_mf_cuda_block_negatives(ctx, &q->call, q->call.item_part, q->call.part, &q->sub, q->users_of,
                                                row_item, &q->scale, &q->cum);
    if (row_item != q->items_of) free(row_item);
    return st == LAC_SUCCESS ? st
                             : lac_error(ctx, st, "out of host memory for the negatives of mf part %d", q->call.part);
}

/* The part's rows of the model's host arrays (its local users [lo, hi) and
 * its items) into its packed rows (in 1), or back. With whole items, every
 * item bias goes in (the neighbours' baselines: as the epoch's first call,
 * `first`, found them) and only the part's rows come back. */
static void exchange(lac_mf_cuda_part *q, int in, int first, int64_t lo, int64_t hi)
{
    const lac_mf_factors *g = &q->call.factors, *f = &q->fac;
    const size_t row = (size_t)g->stride * sizeof(float);
    if (in && q->whole_items) {
        if (first) memcpy(q->bhat0, g->item_bias, (size_t)g->num_items * sizeof(float));
        memcpy(f->item_bias, q->bhat0, (size_t)g->num_items * sizeof(float));
    }
    for (int64_t u = lo; u < hi; u++) {
        float *mine = f->P + u * f->stride, *model = g->P + (int64_t)q->users_of[u] * g->stride;
        memcpy(in ? mine : model, in ? model : mine, row);
        if (in) f->user_bias[u] = g->user_bias[q->users_of[u]];
        else g->user_bias[q->users_of[u]] = f->user_bias[u];
    }
    const size_t wc = (size_t)g->nbr_k * sizeof(float);
    for (int64_t x = 0; x < q->part_items; x++) {
        const int64_t j = q->items_of[x], local = q->whole_items ? j : x;
        float *mine = f->Q + local * f->stride, *model = g->Q + j * g->stride;
        memcpy(in ? mine : model, in ? model : mine, row);
        if (in) f->item_bias[local] = g->item_bias[j];
        else g->item_bias[j] = f->item_bias[local];
        if (wc) {
            float *mw = f->W + local * g->nbr_k, *gw = g->W + j * g->nbr_k;
            float *mc = f->C + local * g->nbr_k, *gc = g->C + j * g->nbr_k;
            memcpy(in ? mw : gw, in ? gw : mw, wc);
            memcpy(in ? mc : gc, in ? gc : mc, wc);
        }
    }
}

/* The one-device training's call for ratings `data` (local indices) and
 * packed rows f; scale: its users' negatives' weights (implicit). */
static lac_mf_call one_call(const lac_mf_cuda_part *q, const lac_mf_data *data, const lac_mf_factors *f,
                            const float *scale)
{
    lac_mf_call c = q->call;
    c.data = data;
    c.valid = NULL;   /* the rotation validates over the ranks */
    c.factors = *f;
    c.item_part = NULL;
    c.rounds = 0;
    c.negative_scale = scale;
    c.neg_cum = q->cum;   /* the local items' */
    return c;
}

void lac_mf_cuda_part_end(lac_ctx_t ctx, lac_mf_cuda_part *q)
{
    if (!q) return;
    lac_mf_cuda_one_end(ctx, q->one);
    lac_mf_block_data_free(&q->sub);
    free(q->users_of);
    free(q->items_of);
    free(q->item_local);
    free(q->rank_pos);
    free(q->bhat0);
    free(q->slice_rated);
    free(q->scale);
    free(q->cum);
    free(q->rated_start);
    free(q->rated_items);
    free(q->rated_vals);
    cudaFreeHost(q->fac.W);
    cudaFreeHost(q->fac.C);
    cudaFreeHost(q->fac.P);
    cudaFreeHost(q->fac.Q);
    cudaFreeHost(q->fac.user_bias);
    cudaFreeHost(q->fac.item_bias);
    free(q);
}

lac_status lac_mf_cuda_part_begin(lac_ctx_t ctx, const lac_mf_call *call, lac_mf_cuda_part **out)
{
    *out = NULL;
    lac_mf_cuda_part *q = (lac_mf_cuda_part *)calloc(1, sizeof *q);
    if (!q) return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "out of host memory for an mf part");
    q->call = *call;
    q->whole_items = call->factors.nbr_k > 0;
    lac_status st = make_sub(ctx, q);
    if (st == LAC_SUCCESS && call->implicit) st = part_negatives(ctx, q);
    if (st == LAC_SUCCESS && q->whole_items && make_rated(ctx, q) != LAC_SUCCESS)
        st = lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "out of host memory for the rows R(i) of mf part %d", call->part);
    lac_mf_factors *f = &q->fac;
    *f = call->factors;
    f->num_users = q->sub.num_users;
    f->num_items = q->sub.num_items;
    f->P = f->Q = f->user_bias = f->item_bias = f->W = f->C = NULL;
    if (q->whole_items) {
        f->rated_start = q->rated_start;
        f->rated_items = q->rated_items;
        f->rated_vals = q->rated_vals;
    }
    /* pinned: the rows cross PCIe every epoch call; zeroed, since the rows
     * of items outside the part go to the device untrained */
    const size_t pu = (size_t)(f->num_users * f->stride + 1), qi = (size_t)(f->num_items * f->stride + 1);
    const size_t wc = (size_t)(f->num_items * f->nbr_k + 1);
    if (st == LAC_SUCCESS && (cudaMallocHost((void **)&f->P, pu * sizeof(float)) != cudaSuccess ||
                              cudaMallocHost((void **)&f->Q, qi * sizeof(float)) != cudaSuccess ||
                              cudaMallocHost((void **)&f->user_bias, (size_t)(f->num_users + 1) * sizeof(float)) !=
                                  cudaSuccess ||
                              cudaMallocHost((void **)&f->item_bias, (size_t)(f->num_items + 1) * sizeof(float)) !=
                                  cudaSuccess ||
                              (f->nbr_k && (cudaMallocHost((void **)&f->W, wc * sizeof(float)) != cudaSuccess ||
                                            cudaMallocHost((void **)&f->C, wc * sizeof(float)) != cudaSuccess))))
        st = lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "out of pinned host memory for the rows of mf part %d", call->part);
    if (st == LAC_SUCCESS && q->whole_items) {
        q->bhat0 = (float *)lac_malloc(ctx, (size_t)(f->num_items ? f->num_items : 1) * sizeof(float));
        q->slice_rated = (int64_t *)lac_malloc(ctx, (size_t)(f->num_users + 1) * sizeof(int64_t));
        if (!q->bhat0 || !q->slice_rated)
            st = lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "out of host memory for mf part %d", call->part);
    }
    if (st == LAC_SUCCESS) {
        memset(f->Q, 0, qi * sizeof(float));
        if (f->nbr_k) {
            memset(f->W, 0, wc * sizeof(float));
            memset(f->C, 0, wc * sizeof(float));
        }
        exchange(q, 1, 1, 0, f->num_users);
        const lac_mf_call c = one_call(q, &q->sub, f, q->scale);
        st = lac_mf_cuda_one_begin(ctx, &c, &q->one);
    }
    if (st != LAC_SUCCESS) {
        lac_mf_cuda_part_end(ctx, q);
        return st;
    }
    *out = q;
    return LAC_SUCCESS;
}

/* The first local user at or past position `pos` among the rank's users. */
static int64_t first_at(const lac_mf_cuda_part *q, int64_t pos)
{
    int64_t lo = 0, hi = q->sub.num_users;
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (q->rank_pos[mid] < pos) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* One epoch of the local users [lo, hi)'s ratings: a one-device training of
 * them made for the call (its rows: the packed ones of those users, every
 * item row) and freed. draw: the epoch its negatives are keyed by (implicit;
 * the slice's local user indices start at 0 in every slice, so each slice
 * gets its own key). */
static lac_status train_slice(lac_ctx_t ctx, lac_mf_cuda_part *q, int64_t lo, int64_t hi, float lr, int draw,
                              double *train_sse)
{
    lac_mf_data sub;
    lac_status st = lac_mf_block_data(ctx, q->call.data, q->users_of + lo, hi - lo, q->item_local, q->sub.num_items,
                                      &sub);
    if (st != LAC_SUCCESS)
        return lac_error(ctx, st, "out of host memory for a slice of the ratings of mf part %d", q->call.part);
    lac_mf_factors f = q->fac;
    f.num_users = hi - lo;
    f.P += lo * f.stride;
    f.user_bias += lo;
    if (q->whole_items) {
        for (int64_t x = lo; x <= hi; x++) q->slice_rated[x - lo] = q->rated_start[x] - q->rated_start[lo];
        f.rated_start = q->slice_rated;
        f.rated_items = q->rated_items + q->rated_start[lo];
        f.rated_vals = q->rated_vals + q->rated_start[lo];
    }
    const lac_mf_call c = one_call(q, &sub, &f, q->scale ? q->scale + lo : NULL);
    lac_mf_state *one = NULL;
    /* a training a slice: their set-up lines would flood an info log */
    const lac_log_level level = ctx->log_level;
    if (level > LAC_LOG_WARN) ctx->log_level = LAC_LOG_WARN;
    st = lac_mf_cuda_one_begin(ctx, &c, &one);
    ctx->log_level = level;
    if (st == LAC_SUCCESS) st = lac_mf_cuda_one_launch(ctx, one, lr, draw);
    if (st == LAC_SUCCESS) st = lac_mf_cuda_one_sse(ctx, one, train_sse);
    if (st == LAC_SUCCESS) st = lac_mf_cuda_one_get(ctx, one, 0, &f);
    lac_mf_cuda_one_end(ctx, one);
    lac_mf_block_data_free(&sub);
    return st;
}

lac_status lac_mf_cuda_part_epoch(lac_ctx_t ctx, lac_mf_cuda_part *q, float lr, int epoch, double *train_sse)
{
    *train_sse = 0.0;
    const int R = lac_mf_rounds_at(q->call.rounds > 1 ? q->call.rounds : 1, epoch);
    const int r = q->next_slice < R ? q->next_slice : 0;
    q->next_slice = (r + 1) % R;
    int64_t lo = 0, hi = q->fac.num_users;
    if (R > 1) {
        lo = first_at(q, q->rank_users * r / R);
        hi = first_at(q, q->rank_users * (r + 1) / R);
    }
    exchange(q, 1, r == 0, lo, hi);
    if (R == 1) {
        LAC_CHECK(lac_mf_cuda_one_put(ctx, q->one, 0, &q->fac));
        LAC_CHECK(lac_mf_cuda_one_launch(ctx, q->one, lr, epoch));
        LAC_CHECK(lac_mf_cuda_one_sse(ctx, q->one, train_sse));
        LAC_CHECK(lac_mf_cuda_one_get(ctx, q->one, 0, &q->fac));
    } else if (hi > lo) {
        /* keys below 0: apart from every whole epoch's */
        LAC_CHECK(train_slice(ctx, q, lo, hi, lr, -(epoch * R + r) - 1, train_sse));
    }
    exchange(q, 0, 0, lo, hi);
    return LAC_SUCCESS;
}
