/* mf on several devices of one context (lac_ctx_params.device_ids; a device
 * may repeat, as two shares of it): the paper's rotation (section 4.2,
 * Fig. 5), the one src/dist/mf_dist.c runs over MPI ranks, with the
 * context's D shares as the workers. Users and items are dealt by rating
 * count to D blocks each (lac_mf_deal_blocks). Share p holds D one-device
 * trainings (mf_sgd.cu), (p, b) for every item block b: the ratings of user
 * block p and item block b in local indices, with u_i, b_i of block p and
 * v_j, bhat_j of block b. In sub-epoch s every share trains (p, (p + s) mod D)
 * on its own stream, all D at once; then share p's item block goes to share
 * p - 1 (cudaMemcpyPeerAsync: direct where peer access is on, else staged by
 * the driver; the same device for repeated ids), which trains it next, and
 * user block p's rows go from (p, b) to (p, b + 1) on the device. No two
 * shares touch one user or item row at once. After D sub-epochs every block
 * has been trained once, and (p, p) holds user block p and item block p: the
 * home copies that download, put, keep and validation read. Streams wait
 * on events, not on the host: share p's training waits for the block it
 * receives and, before its next, for the copy of its last block to finish.
 * Validation gathers the home blocks into one model on the first device
 * (block after block) and runs the one-device validation kernel there on
 * the entries renumbered to it; each home training keeps its own kept epoch
 * on its device.
 * Over several machines or with NCCL the same exchange would be the ring's
 * send/receive of one item block a sub-epoch (src/dist/mf_dist.c runs it
 * over MPI ranks on the CPU); on one host the peer copies are that ring.
 * The neighbourhood model: a rating's terms read its user's whole row R(i)
 * and the baselines bhat of its item's neighbours, in any block. So each
 * training (p, b) holds every item's rows, numbered block-major (block b's
 * items are the rows [item_first[b], item_first[b + 1]), so a block moves as
 * one range, w_j | c_j with it), S^K and R(i) in those numbers, and the item
 * biases of the other blocks as the homes held them at the epoch's start
 * (copied to every training before it; the CPU's rotation over ranks reads
 * them as the rank last held them, likewise at most an epoch old).
 * Validation then runs on the host over the downloaded model.
 * Implicit feedback: training (p, b) draws its negatives within item block b
 * only (the other blocks' rows are being trained elsewhere), weighted to its
 * users' share of one process's, as a GPU rank's part does (mf_parts.cu);
 * the neighbourhood model's negatives are cells of its stream (drawn with
 * weight 0 outside the block's rows); with cross-entropy a user with no
 * positive in the block draws its share there too (both models;
 * mf_implicit.cu). */
#include "backend/cuda/mf/mf_multi_cuda.h"
#include "backend/cuda/mf/mf_cuda.h"
#include "backend/cuda/mf/mf_parts_cuda.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct lac_mf_cuda_multi {
    int D;
    lac_mf_call call;                          /* the whole training: host arrays in the model's indices */
    int32_t *user_block, *item_block;          /* block of each user / item */
    int32_t *user_local, *item_local;          /* index within its block */
    int64_t block_users[LAC_MAX_DEVICES], block_items[LAC_MAX_DEVICES];
    int32_t *users_of[LAC_MAX_DEVICES], *items_of[LAC_MAX_DEVICES];   /* model indices by local index */
    float *hP[LAC_MAX_DEVICES], *hub[LAC_MAX_DEVICES];   /* packed host rows of user block p */
    float *hQ[LAC_MAX_DEVICES], *hib[LAC_MAX_DEVICES];   /* of item block b */
    lac_mf_data sub[LAC_MAX_DEVICES * LAC_MAX_DEVICES];  /* (p, b): p * D + b */
    lac_mf_factors fac[LAC_MAX_DEVICES * LAC_MAX_DEVICES];
    lac_mf_state *part[LAC_MAX_DEVICES * LAC_MAX_DEVICES];
    int device[LAC_MAX_DEVICES];
    cudaEvent_t trained[LAC_MAX_DEVICES], moved[LAC_MAX_DEVICES];
    int host_current;                          /* call.factors hold the current model */
    /* the neighbourhood model (nbr 1): every training sees all items, block-major */
    int nbr;
    int32_t *lists;                            /* S^K, rows and ids block-major */
    int64_t *rated_start[LAC_MAX_DEVICES];     /* R(i) of user block p's users, */
    int32_t *rated_items[LAC_MAX_DEVICES];     /* block-major ids ascending */
    float *rated_vals[LAC_MAX_DEVICES];
    float *aQ[LAC_MAX_DEVICES], *aib[LAC_MAX_DEVICES];   /* set p: every item's rows, block-major, */
    float *aW[LAC_MAX_DEVICES], *aC[LAC_MAX_DEVICES];    /* what share p's trainings upload and download */
    cudaEvent_t refreshed[LAC_MAX_DEVICES];
    /* validation on the first device: the model gathered block after block */
    int64_t user_first[LAC_MAX_DEVICES + 1], item_first[LAC_MAX_DEVICES + 1];
    float *gP, *gQ, *gub, *gib;                /* gib: LAC_MF_BIAS_STRIDE apart */
    int32_t *gv_user, *gv_item;                /* the entries in the gathered indices (-1: unknown) */
    float *gv_rating;
    int64_t gv_count;
    double *gsums;                             /* LAC_MF_SSE_SLOTS */
};

int lac_mf_cuda_multi_wanted(lac_ctx_t ctx, const lac_mf_call *call)
{
    const int D = ctx->cuda->share_count;
    if (D < 2) return 0;
    const char *why = call->item_part           ? "a part of the items"
                      : call->data->num_users < D ? "fewer users than devices"
                      : call->data->num_items < D ? "fewer items than devices"
                                                  : NULL;
    if (!why) return 1;
    lac_log(ctx, LAC_LOG_WARN, "mf CUDA: %s trains on the first of the context's %d devices", why, D);
    return 0;
}

/* Row of block b's x-th item in a training's item arrays. */
static int64_t item_row(const lac_mf_cuda_multi *m, int b, int64_t x) { return m->nbr ? m->item_first[b] + x : x; }

/* Item rows of one training: its block's, or every item (block-major). */
static int64_t training_items(const lac_mf_cuda_multi *m, int b)
{
    return m->nbr ? m->item_first[m->D] : m->block_items[b];
}

/* The ratings of user block p and item block b, in local indices. */
static lac_status make_sub(lac_ctx_t ctx, lac_mf_cuda_multi *m, int p, int b)
{
    const lac_mf_data *d = m->call.data;
    int32_t *local = (int32_t *)lac_malloc(ctx, (size_t)(d->num_items ? d->num_items : 1) * sizeof *local);
    lac_status st = local ? LAC_SUCCESS : LAC_ERR_OUT_OF_MEMORY;
    for (int64_t j = 0; st == LAC_SUCCESS && j < d->num_items; j++)
        local[j] = m->item_block[j] == b ? (int32_t)item_row(m, b, m->item_local[j]) : -1;
    if (st == LAC_SUCCESS)
        st = lac_mf_block_data(ctx, d, m->users_of[p], m->block_users[p], local, training_items(m, b),
                               &m->sub[p * m->D + b]);
    free(local);
    return st == LAC_SUCCESS ? st : lac_error(ctx, st, "out of host memory for the ratings of mf block (%d, %d)", p, b);
}

/* n rows (model indices of[]) of F and bias into a block's packed host rows, or back. */
static void exchange_rows(float *rows, float *row_bias, float *F, float *bias, const int32_t *of, int64_t n,
                          int stride, int to_blocks)
{
    for (int64_t r = 0; r < n; r++) {
        float *h = rows + r * stride, *g = F + (int64_t)of[r] * stride;
        memcpy(to_blocks ? h : g, to_blocks ? g : h, (size_t)stride * sizeof(float));
        if (to_blocks) row_bias[r] = bias[of[r]];
        else bias[of[r]] = row_bias[r];
    }
}

/* The neighbourhood model's item rows: the model's into every set
 * (to_blocks 1), or block b's range of set b (each home's current block)
 * back into the model's. */
static void exchange_items_all(lac_mf_cuda_multi *m, const lac_mf_factors *f, int to_blocks)
{
    const size_t row = (size_t)f->stride * sizeof(float), wc = (size_t)f->nbr_k * sizeof(float);
    for (int b = 0; b < m->D; b++)
        for (int64_t x = 0; x < m->block_items[b]; x++) {
            const int64_t j = m->items_of[b][x], r = item_row(m, b, x);
            for (int p = to_blocks ? 0 : b; p < (to_blocks ? m->D : b + 1); p++) {
                float *q = m->aQ[p] + r * f->stride, *w = m->aW[p] + r * f->nbr_k, *c = m->aC[p] + r * f->nbr_k;
                memcpy(to_blocks ? q : f->Q + j * f->stride, to_blocks ? f->Q + j * f->stride : q, row);
                memcpy(to_blocks ? w : f->W + j * f->nbr_k, to_blocks ? f->W + j * f->nbr_k : w, wc);
                memcpy(to_blocks ? c : f->C + j * f->nbr_k, to_blocks ? f->C + j * f->nbr_k : c, wc);
                if (to_blocks) m->aib[p][r] = f->item_bias[j];
                else f->item_bias[j] = m->aib[p][r];
            }
        }
}

/* The model's arrays f into the blocks' host rows (to_blocks 1), or back. */
static void exchange(lac_mf_cuda_multi *m, const lac_mf_factors *f, int to_blocks)
{
    for (int p = 0; p < m->D; p++) {
        exchange_rows(m->hP[p], m->hub[p], f->P, f->user_bias, m->users_of[p], m->block_users[p], f->stride, to_blocks);
        if (!m->nbr)
            exchange_rows(m->hQ[p], m->hib[p], f->Q, f->item_bias, m->items_of[p], m->block_items[p], f->stride,
                          to_blocks);
    }
    if (m->nbr) exchange_items_all(m, f, to_blocks);
}

/* The home trainings (p, p) from the call's host arrays (to_device 1), or
 * the call's host arrays from them. */
static lac_status home_copy(lac_ctx_t ctx, lac_mf_cuda_multi *m, int to_device)
{
    if (to_device) exchange(m, &m->call.factors, 1);
    for (int p = 0; p < m->D; p++) {
        lac_cuda_share_scope scope(ctx, p);
        lac_mf_state *home = m->part[p * m->D + p];
        if (to_device) LAC_CHECK(lac_mf_cuda_one_put(ctx, home, 0, &m->fac[p * m->D + p]));
        else LAC_CHECK(lac_mf_cuda_one_get(ctx, home, 0, &m->fac[p * m->D + p]));
    }
    if (!to_device) exchange(m, &m->call.factors, 0);
    m->host_current = 1;
    return LAC_SUCCESS;
}

static lac_status host_current(lac_ctx_t ctx, lac_mf_cuda_multi *m)
{
    return m->host_current ? LAC_SUCCESS : home_copy(ctx, m, 0);
}

template <typename T>
static lac_status upload(lac_ctx_t ctx, T **dst, const T *src, size_t count)
{
    LAC_CUDA_CHECK(ctx, cudaMalloc((void **)dst, (count ? count : 1) * sizeof(T)));
    if (src && count)
        LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(*dst, src, count * sizeof(T), cudaMemcpyHostToDevice, ctx->cuda->stream));
    return LAC_SUCCESS;
}

/* The gathered model and the validation entries in its indices, on the first device. */
static lac_status valid_set_up(lac_ctx_t ctx, lac_mf_cuda_multi *m)
{
    const lac_mf_eval *v = m->call.valid;
    const lac_mf_factors *f = &m->call.factors;
    m->gv_count = v->count;
    int32_t *user = (int32_t *)lac_malloc(ctx, (size_t)v->count * sizeof *user);
    int32_t *item = (int32_t *)lac_malloc(ctx, (size_t)v->count * sizeof *item);
    if (!user || !item) {
        free(user);
        free(item);
        return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "out of host memory for %lld validation entries",
                         (long long)v->count);
    }
    for (int64_t i = 0; i < v->count; i++) {
        const int32_t x = v->user[i], j = v->item[i];
        user[i] = x < 0 ? -1 : (int32_t)(m->user_first[m->user_block[x]] + m->user_local[x]);
        item[i] = j < 0 ? -1 : (int32_t)(m->item_first[m->item_block[j]] + m->item_local[j]);
    }
    lac_status st = LAC_SUCCESS;
    {
        lac_cuda_share_scope scope(ctx, 0);
        LAC_CHECK_GOTO(upload(ctx, &m->gv_user, (const int32_t *)user, (size_t)v->count), st, done);
        LAC_CHECK_GOTO(upload(ctx, &m->gv_item, (const int32_t *)item, (size_t)v->count), st, done);
        LAC_CHECK_GOTO(upload(ctx, &m->gv_rating, (const float *)v->val, (size_t)v->count), st, done);
        LAC_CHECK_GOTO(upload(ctx, &m->gP, (const float *)NULL, (size_t)(f->num_users * f->stride)), st, done);
        LAC_CHECK_GOTO(upload(ctx, &m->gQ, (const float *)NULL, (size_t)(f->num_items * f->stride)), st, done);
        LAC_CHECK_GOTO(upload(ctx, &m->gub, (const float *)NULL, (size_t)f->num_users), st, done);
        LAC_CHECK_GOTO(upload(ctx, &m->gib, (const float *)NULL, (size_t)f->num_items * LAC_MF_BIAS_STRIDE), st, done);
        LAC_CHECK_GOTO(upload(ctx, &m->gsums, (const double *)NULL, LAC_MF_SSE_SLOTS), st, done);
    done:
        cudaStreamSynchronize(ctx->cuda->stream);   /* the host arrays go next */
    }
    free(user);
    free(item);
    return st;
}

typedef struct {
    int32_t row;   /* the item's block-major number */
    int64_t at;    /* its entry in the model's R(i) */
} rated_entry;

static int compare_rated(const void *a, const void *b)
{
    const int32_t x = ((const rated_entry *)a)->row, y = ((const rated_entry *)b)->row;
    return (x > y) - (x < y);
}

/* The neighbourhood model's lists and rows in block-major item numbers, and
 * the sets of every item's host rows. */
static lac_status set_up_nbr(lac_ctx_t ctx, lac_mf_cuda_multi *m)
{
    const lac_mf_factors *f = &m->call.factors;
    const int64_t N = f->num_items, K = f->nbr_k;
    int32_t *at = (int32_t *)lac_malloc(ctx, (size_t)(N ? N : 1) * sizeof *at);   /* model item -> row */
    m->lists = (int32_t *)lac_malloc(ctx, (size_t)(N * K + 1) * sizeof(int32_t));
    if (!at || !m->lists) {
        free(at);
        return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "out of host memory for the mf rotation's lists");
    }
    for (int64_t j = 0; j < N; j++) at[j] = (int32_t)item_row(m, m->item_block[j], m->item_local[j]);
    for (int64_t j = 0; j < N; j++)
        for (int64_t k = 0; k < K; k++) {
            const int32_t x = f->nbr[j * K + k];
            m->lists[(int64_t)at[j] * K + k] = x >= 0 && x < N ? at[x] : x;
        }
    lac_status st = LAC_SUCCESS;
    for (int p = 0; st == LAC_SUCCESS && p < m->D; p++) {
        const int64_t nu = m->block_users[p];
        m->rated_start[p] = (int64_t *)lac_malloc(ctx, (size_t)(nu + 1) * sizeof(int64_t));
        if (!m->rated_start[p]) {
            st = LAC_ERR_OUT_OF_MEMORY;
            break;
        }
        m->rated_start[p][0] = 0;
        for (int64_t x = 0; x < nu; x++) {
            const int64_t u = m->users_of[p][x];
            m->rated_start[p][x + 1] = m->rated_start[p][x] + (f->rated_start[u + 1] - f->rated_start[u]);
        }
        const size_t total = (size_t)m->rated_start[p][nu];
        m->rated_items[p] = (int32_t *)lac_malloc(ctx, (total ? total : 1) * sizeof(int32_t));
        m->rated_vals[p] = (float *)lac_malloc(ctx, (total ? total : 1) * sizeof(float));
        rated_entry *pair = (rated_entry *)lac_malloc(ctx, (total ? total : 1) * sizeof(rated_entry));
        if (!m->rated_items[p] || !m->rated_vals[p] || !pair) st = LAC_ERR_OUT_OF_MEMORY;
        /* each row renumbered and sorted again (the kernels search it) */
        for (int64_t x = 0; st == LAC_SUCCESS && x < nu; x++) {
            const int64_t u = m->users_of[p][x], a = f->rated_start[u], len = f->rated_start[u + 1] - a;
            rated_entry *row = pair + m->rated_start[p][x];
            for (int64_t e = 0; e < len; e++) {
                row[e].row = at[f->rated_items[a + e]];
                row[e].at = a + e;
            }
            qsort(row, (size_t)len, sizeof *row, compare_rated);
            for (int64_t e = 0; e < len; e++) {
                m->rated_items[p][m->rated_start[p][x] + e] = row[e].row;
                m->rated_vals[p][m->rated_start[p][x] + e] = f->rated_vals[row[e].at];
            }
        }
        free(pair);
        m->aQ[p] = (float *)lac_calloc(ctx, (size_t)(N * f->stride + 1), sizeof(float));
        m->aib[p] = (float *)lac_calloc(ctx, (size_t)(N + 1), sizeof(float));
        m->aW[p] = (float *)lac_calloc(ctx, (size_t)(N * K + 1), sizeof(float));
        m->aC[p] = (float *)lac_calloc(ctx, (size_t)(N * K + 1), sizeof(float));
        if (!m->aQ[p] || !m->aib[p] || !m->aW[p] || !m->aC[p]) st = LAC_ERR_OUT_OF_MEMORY;
    }
    free(at);
    return st == LAC_SUCCESS ? st : lac_error(ctx, st, "out of host memory for the mf rotation's item rows");
}

/* Implicit feedback: training (p, b) draws its negatives within item block b
 * (every other row weighs 0), as many as its users' share of one process's
 * (lac_mf_cuda_block_negatives), from a seed of its own (the same local
 * indices recur in every block). */
static lac_status block_negatives(lac_ctx_t ctx, const lac_mf_cuda_multi *m, int p, int b, lac_mf_call *c,
                                  float **scale, uint64_t **cum)
{
    const int64_t rows = training_items(m, b);
    int32_t *row_item = (int32_t *)lac_malloc(ctx, (size_t)(rows ? rows : 1) * sizeof *row_item);
    if (!row_item) return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "out of host memory for mf block (%d, %d)", p, b);
    for (int64_t r = 0; r < rows; r++) row_item[r] = -1;
    for (int64_t x = 0; x < m->block_items[b]; x++) row_item[item_row(m, b, x)] = m->items_of[b][x];
    lac_status st = lac_mf_cuda_block_negatives(ctx, &m->call, m->item_block, b, c->data, m->users_of[p], row_item,
                                                scale, cum);
    free(row_item);
    if (st != LAC_SUCCESS)
        return lac_error(ctx, st, "out of host memory for the negatives of mf block (%d, %d)", p, b);
    c->negative_scale = *scale;
    c->neg_cum = *cum;
    c->seed = lac_mix64(m->call.seed ^ (0xA24BAED4963EE407ull * (uint64_t)(b + 1)));
    return LAC_SUCCESS;
}

static lac_status set_up(lac_ctx_t ctx, lac_mf_cuda_multi *m)
{
    const lac_mf_data *d = m->call.data;
    const lac_mf_factors *f = &m->call.factors;
    const int D = m->D;
    m->user_block = (int32_t *)lac_malloc(ctx, (size_t)d->num_users * sizeof(int32_t));
    m->item_block = (int32_t *)lac_malloc(ctx, (size_t)d->num_items * sizeof(int32_t));
    m->user_local = (int32_t *)lac_malloc(ctx, (size_t)d->num_users * sizeof(int32_t));
    m->item_local = (int32_t *)lac_malloc(ctx, (size_t)d->num_items * sizeof(int32_t));
    if (!m->user_block || !m->item_block || !m->user_local || !m->item_local)
        return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "out of host memory for the mf rotation");
    LAC_CHECK(lac_mf_deal_blocks(ctx, d, D, m->user_block, m->item_block));
    for (int64_t x = 0; x < d->num_users; x++) m->user_local[x] = (int32_t)m->block_users[m->user_block[x]]++;
    for (int64_t x = 0; x < d->num_items; x++) m->item_local[x] = (int32_t)m->block_items[m->item_block[x]]++;
    for (int p = 0; p < D; p++) {
        m->users_of[p] = (int32_t *)lac_malloc(ctx, (size_t)m->block_users[p] * sizeof(int32_t));
        m->items_of[p] = (int32_t *)lac_malloc(ctx, (size_t)m->block_items[p] * sizeof(int32_t));
        m->hP[p] = (float *)lac_calloc(ctx, (size_t)(m->block_users[p] * f->stride), sizeof(float));
        m->hub[p] = (float *)lac_calloc(ctx, (size_t)m->block_users[p], sizeof(float));
        m->hQ[p] = (float *)lac_calloc(ctx, (size_t)(m->block_items[p] * f->stride), sizeof(float));
        m->hib[p] = (float *)lac_calloc(ctx, (size_t)m->block_items[p], sizeof(float));
        if (!m->users_of[p] || !m->items_of[p] || !m->hP[p] || !m->hub[p] || !m->hQ[p] || !m->hib[p])
            return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "out of host memory for the mf rotation");
    }
    for (int64_t x = 0; x < d->num_users; x++) m->users_of[m->user_block[x]][m->user_local[x]] = (int32_t)x;
    for (int64_t x = 0; x < d->num_items; x++) m->items_of[m->item_block[x]][m->item_local[x]] = (int32_t)x;
    for (int p = 0; p < D; p++) {
        m->user_first[p + 1] = m->user_first[p] + m->block_users[p];
        m->item_first[p + 1] = m->item_first[p] + m->block_items[p];
    }
    if (m->nbr) LAC_CHECK(set_up_nbr(ctx, m));
    exchange(m, f, 1);
    for (int p = 0; p < D; p++) m->device[p] = ctx->cuda->shares[p]->device;
    for (int p = 0; p < D; p++) {
        for (int b = 0; b < D; b++) LAC_CHECK(make_sub(ctx, m, p, b));
        lac_cuda_share_scope scope(ctx, p);
        LAC_CUDA_CHECK(ctx, cudaEventCreateWithFlags(&m->trained[p], cudaEventDisableTiming));
        LAC_CUDA_CHECK(ctx, cudaEventCreateWithFlags(&m->moved[p], cudaEventDisableTiming));
        LAC_CUDA_CHECK(ctx, cudaEventCreateWithFlags(&m->refreshed[p], cudaEventDisableTiming));
        for (int b = 0; b < D; b++) {
            lac_mf_call c = m->call;
            lac_mf_factors *sf = &m->fac[p * D + b];
            *sf = *f;
            sf->num_users = m->block_users[p];
            sf->num_items = training_items(m, b);
            sf->P = m->hP[p];
            sf->user_bias = m->hub[p];
            sf->Q = m->nbr ? m->aQ[p] : m->hQ[b];
            sf->item_bias = m->nbr ? m->aib[p] : m->hib[b];
            if (m->nbr) {
                sf->W = m->aW[p];
                sf->C = m->aC[p];
                sf->nbr = m->lists;
                sf->rated_start = m->rated_start[p];
                sf->rated_items = m->rated_items[p];
                sf->rated_vals = m->rated_vals[p];
            }
            c.data = &m->sub[p * D + b];
            c.valid = NULL;   /* validated on the host, over the whole model */
            c.factors = *sf;
            float *scale = NULL;
            uint64_t *cum = NULL;
            lac_status st = m->call.implicit ? block_negatives(ctx, m, p, b, &c, &scale, &cum) : LAC_SUCCESS;
            if (st == LAC_SUCCESS) st = lac_mf_cuda_one_begin(ctx, &c, &m->part[p * D + b]);
            free(scale);   /* on the device now */
            free(cum);
            LAC_CHECK(st);
        }
    }
    if (!m->nbr && m->call.valid && m->call.valid->count) LAC_CHECK(valid_set_up(ctx, m));
    int64_t lo = d->nnz, hi = 0;
    for (int i = 0; i < D * D; i++) {
        lo = m->sub[i].nnz < lo ? m->sub[i].nnz : lo;
        hi = m->sub[i].nnz > hi ? m->sub[i].nnz : hi;
    }
    lac_log(ctx, LAC_LOG_INFO, "mf CUDA: %d devices, the rotation over %d x %d blocks (%lld to %lld ratings a block)",
            D, D, D, (long long)lo, (long long)hi);
    m->host_current = 1;
    return LAC_SUCCESS;
}

void lac_mf_cuda_multi_end(lac_ctx_t ctx, lac_mf_cuda_multi *m)
{
    if (!m) return;
    for (int p = 0; p < m->D; p++) {
        lac_cuda_share_scope scope(ctx, p);
        for (int b = 0; b < m->D; b++) lac_mf_cuda_one_end(ctx, m->part[p * m->D + b]);
        if (m->trained[p]) cudaEventDestroy(m->trained[p]);
        if (m->moved[p]) cudaEventDestroy(m->moved[p]);
        if (m->refreshed[p]) cudaEventDestroy(m->refreshed[p]);
    }
    for (int i = 0; i < m->D * m->D; i++) lac_mf_block_data_free(&m->sub[i]);
    for (int p = 0; p < m->D; p++) {
        free(m->users_of[p]);
        free(m->items_of[p]);
        free(m->hP[p]);
        free(m->hub[p]);
        free(m->hQ[p]);
        free(m->hib[p]);
        free(m->rated_start[p]);
        free(m->rated_items[p]);
        free(m->rated_vals[p]);
        free(m->aQ[p]);
        free(m->aib[p]);
        free(m->aW[p]);
        free(m->aC[p]);
    }
    free(m->lists);
    free(m->user_block);
    free(m->item_block);
    free(m->user_local);
    free(m->item_local);
    {
        lac_cuda_share_scope scope(ctx, 0);
        void *ptrs[] = {m->gP, m->gQ, m->gub, m->gib, m->gv_user, m->gv_item, m->gv_rating, m->gsums};
        for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0]; i++)
            if (ptrs[i]) cudaFree(ptrs[i]);
    }
    free(m);
}

lac_status lac_mf_cuda_multi_begin(lac_ctx_t ctx, const lac_mf_call *call, lac_mf_cuda_multi **out)
{
    lac_mf_cuda_multi *m = (lac_mf_cuda_multi *)calloc(1, sizeof *m);
    if (!m) return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "out of host memory for the mf rotation");
    m->D = ctx->cuda->share_count;
    m->call = *call;
    m->nbr = call->factors.nbr_k > 0;
    lac_status st = set_up(ctx, m);
    if (st != LAC_SUCCESS) {
        lac_mf_cuda_multi_end(ctx, m);
        return st;
    }
    *out = m;
    return LAC_SUCCESS;
}

/* Training (p, b)'s user rows to (p, c) on share p's stream. */
static lac_status pass_users(lac_ctx_t ctx, lac_mf_cuda_multi *m, int p, int b, int c)
{
    lac_mf_cuda_one_arrays from = lac_mf_cuda_one_get_arrays(m->part[p * m->D + b]);
    lac_mf_cuda_one_arrays to = lac_mf_cuda_one_get_arrays(m->part[p * m->D + c]);
    cudaStream_t stream = ctx->cuda->stream;
    if (!from.num_users) return LAC_SUCCESS;
    LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(to.P, from.P, (size_t)(from.num_users * from.stride) * sizeof(float),
                                        cudaMemcpyDeviceToDevice, stream));
    LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(to.user_bias, from.user_bias, (size_t)from.num_users * sizeof(float),
                                        cudaMemcpyDeviceToDevice, stream));
    return LAC_SUCCESS;
}

/* One range of item rows (block b's) from training `from` to training `to`:
 * the factors, the biases and, for the neighbourhood model, w_j | c_j. */
static lac_status move_items(lac_ctx_t ctx, lac_mf_cuda_multi *m, int b, int from_share, lac_mf_state *from,
                             int to_share, lac_mf_state *to)
{
    lac_mf_cuda_one_arrays src = lac_mf_cuda_one_get_arrays(from), dst = lac_mf_cuda_one_get_arrays(to);
    const int64_t rows = m->block_items[b], r0 = item_row(m, b, 0);
    const int dd = m->device[to_share], sd = m->device[from_share];
    cudaStream_t stream = ctx->cuda->stream;
    if (!rows) return LAC_SUCCESS;
    LAC_CUDA_CHECK(ctx, cudaMemcpyPeerAsync(dst.Q + r0 * dst.stride, dd, src.Q + r0 * src.stride, sd,
                                            (size_t)(rows * src.stride) * sizeof(float), stream));
    LAC_CUDA_CHECK(ctx, cudaMemcpyPeerAsync(dst.item_bias + r0 * LAC_MF_BIAS_STRIDE, dd,
                                            src.item_bias + r0 * LAC_MF_BIAS_STRIDE, sd,
                                            (size_t)rows * LAC_MF_BIAS_STRIDE * sizeof(float), stream));
    if (src.WC)
        LAC_CUDA_CHECK(ctx, cudaMemcpyPeerAsync(dst.WC + r0 * 2 * src.K, dd, src.WC + r0 * 2 * src.K, sd,
                                                (size_t)(rows * 2 * src.K) * sizeof(float), stream));
    return LAC_SUCCESS;
}

/* The neighbourhood model, before an epoch: every training takes the item
 * biases of the other blocks from their homes (the baselines bhat), and no
 * share starts training before every copy out of its home is done. */
static lac_status refresh_biases(lac_ctx_t ctx, lac_mf_cuda_multi *m)
{
    const int D = m->D;
    for (int p = 0; p < D; p++) {
        lac_cuda_share_scope scope(ctx, p);
        cudaStream_t stream = ctx->cuda->stream;
        for (int b = 0; b < D; b++) {
            lac_mf_cuda_one_arrays dst = lac_mf_cuda_one_get_arrays(m->part[p * D + b]);
            for (int q = 0; q < D; q++) {
                const int64_t rows = m->block_items[q], r0 = item_row(m, q, 0);
                if ((p == q && b == q) || !rows) continue;
                lac_mf_cuda_one_arrays src = lac_mf_cuda_one_get_arrays(m->part[q * D + q]);
                LAC_CUDA_CHECK(ctx, cudaMemcpyPeerAsync(dst.item_bias + r0 * LAC_MF_BIAS_STRIDE, m->device[p],
                                                        src.item_bias + r0 * LAC_MF_BIAS_STRIDE, m->device[q],
                                                        (size_t)rows * LAC_MF_BIAS_STRIDE * sizeof(float), stream));
            }
        }
        LAC_CUDA_CHECK(ctx, cudaEventRecord(m->refreshed[p], stream));
    }
    for (int p = 0; p < D; p++) {
        lac_cuda_share_scope scope(ctx, p);
        for (int q = 0; q < D; q++)
            if (q != p) LAC_CUDA_CHECK(ctx, cudaStreamWaitEvent(ctx->cuda->stream, m->refreshed[q], 0));
    }
    return LAC_SUCCESS;
}

lac_status lac_mf_cuda_multi_epoch(lac_ctx_t ctx, lac_mf_cuda_multi *m, float lr, int epoch, double *train_sse)
{
    const int D = m->D;
    m->host_current = 0;
    if (m->nbr) LAC_CHECK(refresh_biases(ctx, m));
    for (int s = 0; s < D; s++) {
        for (int p = 0; p < D; p++) {   /* the D blocks at once, a stream each */
            const int b = (p + s) % D;
            lac_cuda_share_scope scope(ctx, p);
            cudaStream_t stream = ctx->cuda->stream;
            if (s > 0) {
                /* the block this share passed on is read before anything writes it again */
                LAC_CUDA_CHECK(ctx, cudaStreamWaitEvent(stream, m->moved[(p + D - 1) % D], 0));
                LAC_CHECK(pass_users(ctx, m, p, (b + D - 1) % D, b));
                LAC_CHECK(lac_mf_cuda_one_spread(ctx, m->part[p * D + b]));
            }
            LAC_CHECK(lac_mf_cuda_one_launch(ctx, m->part[p * D + b], lr, epoch));
            LAC_CUDA_CHECK(ctx, cudaEventRecord(m->trained[p], stream));
        }
        for (int p = 0; p < D; p++) {   /* item block b from share p to p - 1, which trains it next */
            const int b = (p + s) % D, to = (p + D - 1) % D;
            lac_cuda_share_scope scope(ctx, to);
            cudaStream_t stream = ctx->cuda->stream;
            LAC_CUDA_CHECK(ctx, cudaStreamWaitEvent(stream, m->trained[p], 0));
            LAC_CHECK(move_items(ctx, m, b, p, m->part[p * D + b], to, m->part[to * D + b]));
            LAC_CUDA_CHECK(ctx, cudaEventRecord(m->moved[to], stream));
        }
    }
    double sse = 0.0;
    for (int p = 0; p < D; p++) {   /* user block p home to (p, p); the sums in a fixed order */
        lac_cuda_share_scope scope(ctx, p);
        LAC_CUDA_CHECK(ctx, cudaStreamWaitEvent(ctx->cuda->stream, m->moved[(p + D - 1) % D], 0));
        LAC_CHECK(pass_users(ctx, m, p, (p + D - 1) % D, p));
        LAC_CHECK(lac_mf_cuda_one_spread(ctx, m->part[p * D + p]));
        for (int b = 0; b < D; b++) {
            double part = 0.0;
            LAC_CHECK(lac_mf_cuda_one_sse(ctx, m->part[p * D + b], &part));
            sse += part;
        }
    }
    *train_sse = sse;
    return LAC_SUCCESS;
}

lac_status lac_mf_cuda_multi_valid_rmse(lac_ctx_t ctx, lac_mf_cuda_multi *m, double *rmse)
{
    if (m->nbr && m->call.valid && m->call.valid->count) {   /* eq. (1) over the downloaded model */
        LAC_CHECK(host_current(ctx, m));
        return lac_mf_eval_factors(ctx, &m->call.factors, m->call.valid, NULL, rmse, NULL);
    }
    if (!m->gv_count) {
        *rmse = NAN;
        return LAC_SUCCESS;
    }
    const lac_mf_factors *f = &m->call.factors;
    lac_cuda_share_scope scope(ctx, 0);
    cudaStream_t stream = ctx->cuda->stream;
    for (int p = 0; p < m->D; p++) {   /* the epoch ended with every stream idle */
        lac_mf_cuda_one_arrays h = lac_mf_cuda_one_get_arrays(m->part[p * m->D + p]);
        const int from = m->device[p], to = m->device[0];
        LAC_CUDA_CHECK(ctx, cudaMemcpyPeerAsync(m->gP + m->user_first[p] * f->stride, to, h.P, from,
                                                (size_t)(h.num_users * h.stride) * sizeof(float), stream));
        LAC_CUDA_CHECK(ctx, cudaMemcpyPeerAsync(m->gub + m->user_first[p], to, h.user_bias, from,
                                                (size_t)h.num_users * sizeof(float), stream));
        LAC_CUDA_CHECK(ctx, cudaMemcpyPeerAsync(m->gQ + m->item_first[p] * f->stride, to, h.Q, from,
                                                (size_t)(h.num_items * h.stride) * sizeof(float), stream));
        LAC_CUDA_CHECK(ctx, cudaMemcpyPeerAsync(m->gib + m->item_first[p] * LAC_MF_BIAS_STRIDE, to, h.item_bias, from,
                                                (size_t)h.num_items * LAC_MF_BIAS_STRIDE * sizeof(float), stream));
    }
    LAC_CUDA_CHECK(ctx, cudaMemsetAsync(m->gsums, 0, LAC_MF_SSE_SLOTS * sizeof(double), stream));
    LAC_CHECK(lac_mf_cuda_launch_validation(ctx, m->gv_user, m->gv_item, m->gv_rating, m->gv_count, m->gP, m->gQ,
                                            m->gub, m->gib, f->k, f->stride, (float)f->mean, f->rating_min,
                                            f->rating_max, m->gsums));
    double part[LAC_MF_SSE_SLOTS], sse = 0.0;
    LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(part, m->gsums, sizeof part, cudaMemcpyDeviceToHost, stream));
    LAC_CUDA_CHECK(ctx, cudaStreamSynchronize(stream));
    for (int i = 0; i < LAC_MF_SSE_SLOTS; i++) sse += part[i];
    *rmse = sqrt(sse / (double)m->gv_count);
    return LAC_SUCCESS;
}

/* Each home training keeps (or brings back) its blocks on its device. */
lac_status lac_mf_cuda_multi_keep(lac_ctx_t ctx, lac_mf_cuda_multi *m, int restore)
{
    for (int p = 0; p < m->D; p++) {
        lac_cuda_share_scope scope(ctx, p);
        LAC_CHECK(lac_mf_cuda_one_keep(ctx, m->part[p * m->D + p], restore));
    }
    if (restore) m->host_current = 0;
    return LAC_SUCCESS;
}

lac_status lac_mf_cuda_multi_download(lac_ctx_t ctx, lac_mf_cuda_multi *m) { return host_current(ctx, m); }

/* a's arrays into b's (the same shapes). */
static void copy_arrays(const lac_mf_factors *a, const lac_mf_factors *b)
{
    float *from[6], *to[6];
    size_t floats[6];
    lac_mf_factors_arrays(b, to, floats);
    for (int i = 0, n = lac_mf_factors_arrays(a, from, floats); i < n; i++)
        if (floats[i]) memcpy(to[i], from[i], floats[i] * sizeof(float));
}

lac_status lac_mf_cuda_multi_get(lac_ctx_t ctx, lac_mf_cuda_multi *m, int kept, const lac_mf_factors *to)
{
    if (kept) {   /* the homes' kept blocks through the blocks' host rows */
        for (int p = 0; p < m->D; p++) {
            lac_cuda_share_scope scope(ctx, p);
            LAC_CHECK(lac_mf_cuda_one_get(ctx, m->part[p * m->D + p], 1, &m->fac[p * m->D + p]));
        }
        exchange(m, to, 0);
        return LAC_SUCCESS;
    }
    LAC_CHECK(host_current(ctx, m));
    copy_arrays(&m->call.factors, to);
    return LAC_SUCCESS;
}

lac_status lac_mf_cuda_multi_put(lac_ctx_t ctx, lac_mf_cuda_multi *m, int kept, const lac_mf_factors *from)
{
    if (kept) {
        exchange(m, from, 1);
        for (int p = 0; p < m->D; p++) {
            lac_cuda_share_scope scope(ctx, p);
            LAC_CHECK(lac_mf_cuda_one_put(ctx, m->part[p * m->D + p], 1, &m->fac[p * m->D + p]));
        }
        return LAC_SUCCESS;
    }
    copy_arrays(from, &m->call.factors);
    return home_copy(ctx, m, 1);
}
