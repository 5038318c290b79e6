/* mf over MPI ranks on the GPU: the CUDA table's `parts` (mf_backend.h), the
 * inner training that src/dist/mf_dist.c's rotation drives on each rank. A
 * part is this rank's users x one block of the items (call.item_part ==
 * call.part): a one-device CUSGD++ training (mf_sgd.cu) of those ratings in
 * local indices, made once. Between epoch calls the model lives in the
 * call's host arrays, where the rotation passes item rows round the ring, so
 * an epoch call copies the part's user and item rows in, runs one epoch of
 * the part's ratings and copies them back out: rows over PCIe against an
 * epoch of the block's ratings (mf_multi.cu keeps them on the devices of
 * one process instead). A call trains the whole part (no user slices), so
 * the rotation turns its ring once an epoch. Implicit feedback: the part's
 * training draws the negatives from its own items, `negatives` a positive of
 * weight negative_scale, the user's share of one process's
 * (lac_mf_cuda_block_negatives). The neighbourhood model takes them as its
 * stream's negatives' cells (mf_implicit.cu), drawn by weights that are 0
 * outside the part, and with cross-entropy its part holds every user of
 * the rank, so that a user without a positive in the part draws its share
 * there as on the CPU; the plain model's kernel hangs negatives on
 * positives, so such a user gets none there.
 * The neighbourhood model's part keeps the model's item indices
 * (every item a row on the device, the part's with ratings): a rating's
 * terms read its user's whole row R(i) (rated_*, this rank's users, model
 * item ids) and the baselines bhat of neighbours in any block, which an
 * epoch call takes from every item bias of the host arrays, as this rank
 * last held them (the rotation gathers them after each epoch;
 * src/dist/mf_dist.c). */
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
    int64_t part_items;         /* the part's items (items_of's length) */
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
    int32_t *item_local = (int32_t *)lac_malloc(ctx, (size_t)(d->num_items ? d->num_items : 1) * sizeof(int32_t));
    q->items_of = (int32_t *)lac_malloc(ctx, (size_t)(d->num_items ? d->num_items : 1) * sizeof(int32_t));
    q->users_of = (int32_t *)lac_malloc(ctx, (size_t)(d->num_users ? d->num_users : 1) * sizeof(int32_t));
    lac_status st = item_local && q->items_of && q->users_of ? LAC_SUCCESS : LAC_ERR_OUT_OF_MEMORY;
    int64_t ni = 0, nu = 0;
    for (int64_t j = 0; st == LAC_SUCCESS && j < d->num_items; j++) {
        item_local[j] = part[j] != q->call.part ? -1 : q->whole_items ? (int32_t)j : (int32_t)ni;
        if (part[j] == q->call.part) q->items_of[ni++] = (int32_t)j;
    }
    q->part_items = ni;
    if (q->whole_items) ni = d->num_items;
    /* the neighbourhood model's cross-entropy: every user with interactions
     * (its negatives' cells need no positive here; lac_mf_cuda_block_negatives) */
    const int every = q->whole_items && q->call.implicit && q->call.loss != LAC_MF_LOSS_BPR;
    for (int64_t x = 0; st == LAC_SUCCESS && x < d->num_users; x++) {
        int64_t a = d->row_start[x];
        while (a < d->row_start[x + 1] && item_local[d->col[a]] < 0) a++;
        if (a < d->row_start[x + 1] || (every && d->row_start[x + 1] > d->row_start[x])) q->users_of[nu++] = (int32_t)x;
    }
    if (st == LAC_SUCCESS) st = lac_mf_block_data(ctx, d, q->users_of, nu, item_local, ni, &q->sub);
    free(item_local);
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
        *cum = (uint64_t *)lac_malloc(ctx, (size_t)(sub->num_items ? sub->num_items : 1) * sizeof(uint64_t));
        if (!*cum) return LAC_ERR_OUT_OF_MEMORY;
        for (int64_t r = 0; r < sub->num_items; r++)
            (*cum)[r] = (r ? (*cum)[r - 1] : 0) + (row_item[r] >= 0 ? (uint64_t)lac_mf_item_weight(all, row_item[r]) : 0);
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

/* The part's rows of the model's host arrays into its packed rows (in 1), or
 * back. With whole items, every item bias goes in (the neighbours'
 * baselines) and only the part's rows come back. */
static void exchange(lac_mf_cuda_part *q, int in)
{
    const lac_mf_factors *g = &q->call.factors, *f = &q->fac;
    const size_t row = (size_t)g->stride * sizeof(float);
    for (int64_t u = 0; u < f->num_users; u++) {
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
    if (in && q->whole_items) memcpy(f->item_bias, g->item_bias, (size_t)g->num_items * sizeof(float));
}

void lac_mf_cuda_part_end(lac_ctx_t ctx, lac_mf_cuda_part *q)
{
    if (!q) return;
    lac_mf_cuda_one_end(ctx, q->one);
    lac_mf_block_data_free(&q->sub);
    free(q->users_of);
    free(q->items_of);
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
    if (st == LAC_SUCCESS) {
        memset(f->Q, 0, qi * sizeof(float));
        if (f->nbr_k) {
            memset(f->W, 0, wc * sizeof(float));
            memset(f->C, 0, wc * sizeof(float));
        }
        exchange(q, 1);
        lac_mf_call c = *call;
        c.data = &q->sub;
        c.valid = NULL;   /* the rotation validates over the ranks */
        c.factors = *f;
        c.item_part = NULL;
        c.rounds = 0;
        c.negative_scale = q->scale;
        c.neg_cum = q->cum;   /* the local items' */
        st = lac_mf_cuda_one_begin(ctx, &c, &q->one);
    }
    if (st != LAC_SUCCESS) {
        lac_mf_cuda_part_end(ctx, q);
        return st;
    }
    *out = q;
    return LAC_SUCCESS;
}

lac_status lac_mf_cuda_part_epoch(lac_ctx_t ctx, lac_mf_cuda_part *q, float lr, int epoch, double *train_sse)
{
    *train_sse = 0.0;
    exchange(q, 1);
    LAC_CHECK(lac_mf_cuda_one_put(ctx, q->one, 0, &q->fac));
    LAC_CHECK(lac_mf_cuda_one_launch(ctx, q->one, lr, epoch));
    LAC_CHECK(lac_mf_cuda_one_sse(ctx, q->one, train_sse));
    LAC_CHECK(lac_mf_cuda_one_get(ctx, q->one, 0, &q->fac));
    exchange(q, 0);
    return LAC_SUCCESS;
}
