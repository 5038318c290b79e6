/* Implicit feedback's device arrays for one training (mf_implicit_cuda.h):
 * each user's items ascending (the negatives' test), every stream cell's
 * user, the item rows' items and the popular items' replicas (the draws
 * key on the item and write the group's row), the room for the draws; the
 * epoch's launches. mf_sgd.cu, the table, calls these beside its own. */
#include "backend/cuda/mf/mf_implicit_cuda.h"

#include <algorithm>
#include <stdlib.h>
#include <string.h>

struct lac_mf_cuda_implicit {
    const lac_mf_call *call;
    lac_mf_cuda_implicit_kernel kernel;
    int negatives, bpr, share;
    int alone;                      /* cells without a positive in the stream (alone_cells) */
    int64_t cells, steps;
    float *neg_weight, *user_scale;
    int64_t *seen_start;
    uint64_t *neg_cum;              /* the items' cumulative weights (NULL: uniform draws) */
    int32_t *seen_items, *cell_user, *row_item, *rep_first, *rep_count, *neg;
    /* the blocks' pools of negatives (kernel.pool > 0); the warp copies' tables of the users' items */
    int32_t *pool_item, *pool_row, *seen_table;
    int64_t *seen_table_start;
    /* in-batch negatives' seen test: each row's rank among the most
     * interacted items (-1: not among them), each user's bits of those */
    int32_t *row_rank;
    uint32_t *seen_bits;
    float *row_weight;              /* in-batch negatives: each row's weight as a negative (NULL: 1) */
    int seen_words;                 /* a user's words of bits */
    int64_t pools;
    int rounds;
    cudaEvent_t phase[3];           /* LACUNA_MF_CUDA_PHASES: before the draws, before the epoch kernel, after */
    /* the neighbourhood model: the negatives' cells and their draws' keys */
    int64_t nbr_count;
    int64_t *nbr_cell;
    int32_t *nbr_user, *nbr_key, *nbr_t;
};

void lac_mf_cuda_implicit_end(lac_mf_cuda_implicit *m)
{
    if (!m) return;
    void *ptrs[] = {m->seen_start, m->seen_items, m->cell_user, m->row_item, m->rep_first, m->rep_count, m->neg,
                    m->neg_weight, m->user_scale, m->nbr_cell, m->nbr_user, m->nbr_key, m->nbr_t, m->neg_cum,
                    m->pool_item, m->pool_row, m->seen_table, m->seen_table_start, m->row_rank, m->seen_bits,
                    m->row_weight};
    for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0]; i++)
        if (ptrs[i]) cudaFree(ptrs[i]);
    for (int i = 0; i < 3; i++)
        if (m->phase[i]) cudaEventDestroy(m->phase[i]);
    free(m);
}

lac_status lac_mf_cuda_implicit_begin(lac_ctx_t ctx, const lac_mf_call *call, int pieces,
                                      lac_mf_cuda_implicit **out, lac_mf_cuda_implicit_kernel *kernel)
{
    const int bpr = call->loss == LAC_MF_LOSS_BPR, negatives = bpr ? 1 : call->negatives;
    const int share = bpr || call->share < 1 ? 1 : call->share;
    /* with shared negatives most cells take (negatives / share) rounded up */
    /* lists (a weight per cell): shared negatives, or a GPU rank's part's scale (upload) */
    const int lists = call->negative_scale && !bpr ? 2 : share > 1;   /* 2: and cells without a positive */
    lac_mf_cuda_implicit_kernel k = lac_mf_cuda_implicit_choose(pieces, (negatives + share - 1) / share, lists);
    /* a block's pool of negatives: cross-entropy's unshared ones on one device */
    const int64_t pool = lac_knob_int(ctx, LAC_KNOB_MF_CUDA_NEG_POOL, 0);
    const int copies = lac_knob_int(ctx, LAC_KNOB_MF_CUDA_NEG_POOL_ADD, 0) == 1;
    const int64_t cells = lac_knob_int(ctx, LAC_KNOB_MF_CUDA_NEG_POOL_CELLS, 8);
    if (!bpr && !lists && k.fn && (pool == 16 || pool == 32 || (pool == 64 && !copies)) && cells >= 1 &&
        cells <= 1024) {
        lac_mf_cuda_implicit_kernel pk = copies ? lac_mf_cuda_implicit_copies_choose(pieces, (int)pool, (int)cells)
                                                : lac_mf_cuda_implicit_pool_choose(pieces, (int)pool, (int)cells);
        if (pk.smem > ctx->cuda->prop.sharedMemPerBlockOptin) pk.fn = NULL;
        if (pk.fn) k = pk;
        if (pk.fn)
            lac_log(ctx, LAC_LOG_INFO,
                    "mf CUDA implicit: a block's pool of %d negatives%s, %d steps a round, %zu bytes", pk.pool,
                    pk.copies ? " (warp copies)" : "", pk.round_steps, pk.smem);
        else
            lac_log(ctx, LAC_LOG_INFO, "mf CUDA implicit: no pool kernel for k = %d", call->factors.k);
    }
    /* in-batch negatives: cross-entropy's unshared ones; by default on one
     * device (no item parts) where the weights that bring them to the
     * call's law stay within n^0.5 (exponent >= 0.5) and a cell meets at
     * least half the negatives asked (each weighs at most 2 on average:
     * a few heavy steps would stand for many light ones) */
    const int64_t forced = lac_knob_int(ctx, LAC_KNOB_MF_CUDA_INBATCH, -2);
    const int64_t inbatch = forced != -2 ? forced : !call->item_part && call->negative_exponent >= 0.5 ? 0 : -1;
    if (!bpr && !lists && k.fn && inbatch >= 0 && !k.pool) {
        lac_mf_cuda_implicit_kernel bk = lac_mf_cuda_implicit_inbatch_choose(
            pieces, (int)inbatch, lac_knob_int(ctx, LAC_KNOB_MF_CUDA_INBATCH_SEEN, 1) != 0);
        const int met = bk.fn ? lac_mf_cuda_inbatch_met(negatives, bk.lanes) : 0;
        if (bk.fn && forced == -2 && negatives > 2 * met) {
            lac_log(ctx, LAC_LOG_INFO, "mf CUDA implicit: %d negatives drawn (in-batch would meet %d)", negatives, met);
        } else if (bk.fn) {
            k = bk;
            lac_log(ctx, LAC_LOG_INFO, "mf CUDA implicit: in-batch negatives, %d lanes a group, %d of %d groups a warp%s",
                    k.lanes, met, 32 / k.lanes, k.inbatch == 2 ? ", seen items passed over" : "");
        } else {
            lac_log(ctx, LAC_LOG_INFO, "mf CUDA implicit: no in-batch kernel for k = %d with %lld lanes",
                    call->factors.k, (long long)inbatch);
        }
    }
    if (!k.fn)
        return lac_error(ctx, LAC_ERR_UNSUPPORTED, "implicit feedback on CUDA takes k <= %d (k = %d: --device cpu)",
                         32 * 4 * LAC_MF_MAX_PIECES, call->factors.k);
    lac_mf_cuda_implicit *m = (lac_mf_cuda_implicit *)calloc(1, sizeof *m);
    if (!m) return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "out of host memory for the CUDA implicit state");
    m->call = call;
    m->kernel = k;
    m->bpr = bpr;
    m->negatives = negatives;
    m->share = share;
    for (int i = 0; lac_knob_int(ctx, LAC_KNOB_MF_CUDA_PHASES, 0) == 1 && i < 3; i++)
        if (cudaEventCreate(&m->phase[i]) != cudaSuccess) m->phase[i] = NULL;
    *kernel = k;
    *out = m;
    return LAC_SUCCESS;
}

/* A host array to the device, then freed (after the copy). */
template <typename T>
static lac_status give(lac_ctx_t ctx, T **dst, T *src, size_t count)
{
    lac_status st = LAC_SUCCESS;
    if (!src) return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "out of host memory for the implicit arrays");
    if (cudaMalloc((void **)dst, (count ? count : 1) * sizeof(T)) != cudaSuccess) {
        *dst = NULL;
        st = lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "out of device memory for the implicit arrays");
    } else if (count && cudaMemcpy(*dst, src, count * sizeof(T), cudaMemcpyHostToDevice) != cudaSuccess) {
        st = lac_error(ctx, LAC_ERR_CUDA, "CUDA copy of the implicit arrays failed");
    }
    free(src);
    return st;
}

/* The users' items (ascending, given: freed here) and the items' weights to
 * the device. */
static lac_status upload_seen(lac_ctx_t ctx, lac_mf_cuda_implicit *m, int32_t *items)
{
    const lac_mf_data *d = m->call->data;
    if (m->call->neg_cum) {
        const size_t words = (size_t)lac_mf_cum_words(d->num_items);   /* with the guide */
        uint64_t *cum = (uint64_t *)malloc(words * sizeof *cum);
        if (cum) memcpy(cum, m->call->neg_cum, words * sizeof *cum);
        lac_status st = give(ctx, &m->neg_cum, cum, words);
        if (st != LAC_SUCCESS) {
            free(items);
            return st;
        }
    }
    int64_t *start = (int64_t *)malloc((size_t)(d->num_users + 1) * sizeof *start);
    if (start) memcpy(start, d->row_start, (size_t)(d->num_users + 1) * sizeof *start);
    if (!start || !items) free(items), items = NULL;
    lac_status st = give(ctx, &m->seen_start, start, (size_t)(d->num_users + 1));
    if (st != LAC_SUCCESS) {
        free(items);
        return st;
    }
    return give(ctx, &m->seen_items, items, (size_t)d->nnz);
}

/* The warp copies' tables (lac_mf_cuda_draw_args.seen_table): each user's
 * items hashed into a power of two of at least twice as many slots, so
 * that a pool's item is tested in a probe or two (a binary search of the
 * user's items took a dozen dependent loads at every round's start). */
static lac_status upload_seen_tables(lac_ctx_t ctx, lac_mf_cuda_implicit *m)
{
    const lac_mf_data *d = m->call->data;
    const int64_t nu = d->num_users;
    int64_t *start = (int64_t *)malloc((size_t)(nu + 1) * sizeof *start);
    if (!start) return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "out of host memory for the users' item tables");
    start[0] = 0;
    for (int64_t u = 0; u < nu; u++) {
        const int64_t n = d->row_start[u + 1] - d->row_start[u];
        int64_t cap = n ? 2 : 0;
        while (cap && cap < 2 * n) cap *= 2;
        start[u + 1] = start[u] + cap;
    }
    const int64_t slots = start[nu];
    int32_t *table = (int32_t *)malloc((size_t)(slots ? slots : 1) * sizeof *table);
    if (table) {
        for (int64_t x = 0; x < slots; x++) table[x] = -1;
        for (int64_t u = 0; u < nu; u++) {
            const uint32_t cap = (uint32_t)(start[u + 1] - start[u]);
            int32_t *t = table + start[u];
            for (int64_t a = d->row_start[u]; a < d->row_start[u + 1]; a++) {
                uint32_t h = lac_mf_seen_slot(d->col[a], cap);
                while (t[h] >= 0 && t[h] != d->col[a]) h = (h + 1) & (cap - 1);
                t[h] = d->col[a];
            }
        }
    }
    lac_status st = give(ctx, &m->seen_table_start, start, (size_t)(nu + 1));
    if (st != LAC_SUCCESS) {
        free(table);
        return st;
    }
    return give(ctx, &m->seen_table, table, (size_t)slots);
}

/* Each item's interactions in d (calloc'd; NULL: out of memory). */
static int64_t *item_counts(const lac_mf_data *d)
{
    int64_t *count = (int64_t *)calloc((size_t)(d->num_items ? d->num_items : 1), sizeof *count);
    for (int64_t x = 0; count && x < d->nnz; x++) count[d->col[x]]++;
    return count;
}

/* In-batch negatives' weights (lac_mf_inbatch_weights; count: each
 * item's interactions): the call's law over the positives', times the
 * negatives asked over those a cell meets (a warp's other groups, at
 * most). */
static lac_status upload_inbatch_weights(lac_ctx_t ctx, lac_mf_cuda_implicit *m, const int64_t *count,
                                         const int32_t *row_item, int64_t rows)
{
    const int met = lac_mf_cuda_inbatch_met(m->negatives, m->kernel.lanes);
    float *weight = (float *)malloc((size_t)(rows ? rows : 1) * sizeof *weight);
    if (!weight) return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "out of host memory for the in-batch negatives' weights");
    lac_mf_inbatch_weights(m->call->data, m->call->neg_cum, count, row_item, rows,
                           met > 0 ? (double)m->negatives / met : 1.0, weight);
    return give(ctx, &m->row_weight, weight, (size_t)rows);
}

/* In-batch negatives' seen test (kernel.inbatch 2): the most interacted
 * items ranked (all where the users' bits fit in LAC_MF_INBATCH_SEEN_BYTES,
 * else as many as fit, at least LAC_MF_INBATCH_SEEN_MIN), each row's
 * item's rank (row_item: the rows' items), and each user's bits of the
 * ranked items it has. Such negatives come in proportion to the items'
 * interactions, so most of them are ranked; the bits stay in L2, where a
 * hash table of every user's items did not: its probes cost 23% of the
 * epoch. */
static lac_status upload_seen_bits(lac_ctx_t ctx, lac_mf_cuda_implicit *m, const int64_t *count,
                                   const int32_t *row_item, int64_t rows)
{
    const lac_mf_data *d = m->call->data;
    const int64_t ni = d->num_items, nu = d->num_users, fit = LAC_MF_INBATCH_SEEN_BYTES / 4 / (nu ? nu : 1);
    int64_t words = (ni + 31) / 32;
    if (words > fit) words = fit > LAC_MF_INBATCH_SEEN_MIN / 32 ? fit : LAC_MF_INBATCH_SEEN_MIN / 32;
    if (words < 1) words = 1;
    m->seen_words = (int)words;
    int64_t *order = (int64_t *)malloc((size_t)(ni ? ni : 1) * sizeof *order);
    int32_t *rank = (int32_t *)malloc((size_t)(ni ? ni : 1) * sizeof *rank);
    int32_t *row_rank = (int32_t *)malloc((size_t)(rows ? rows : 1) * sizeof *row_rank);
    uint32_t *bits = (uint32_t *)calloc((size_t)(nu ? nu : 1) * (size_t)words, sizeof *bits);
    if (!order || !rank || !row_rank || !bits) {
        free(order), free(rank), free(row_rank), free(bits);
        return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "out of host memory for the in-batch negatives' seen test");
    }
    const lac_status ordered = lac_mf_order_by_count(ctx, count, ni, order);
    if (ordered != LAC_SUCCESS) {
        free(order), free(rank), free(row_rank), free(bits);
        return ordered;
    }
    for (int64_t j = 0; j < ni; j++) rank[j] = -1;
    for (int64_t r = 0; r < ni && r < 32 * words; r++) rank[order[r]] = (int32_t)r;
    for (int64_t x = 0; x < rows; x++) row_rank[x] = rank[row_item[x]];
    for (int64_t u = 0; u < nu; u++)
        for (int64_t x = d->row_start[u]; x < d->row_start[u + 1]; x++) {
            const int32_t r = rank[d->col[x]];
            if (r >= 0) bits[u * words + r / 32] |= 1u << (r % 32);
        }
    free(order), free(rank);
    const lac_status st = give(ctx, &m->row_rank, row_rank, (size_t)rows);
    if (st != LAC_SUCCESS) {
        free(bits);
        return st;
    }
    return give(ctx, &m->seen_bits, bits, (size_t)(nu * words));
}

/* The in-batch kernel's arrays: the seen test's (kernel.inbatch 2) and the
 * negatives' weights (unless LACUNA_MF_CUDA_INBATCH_WEIGHT=0), both from
 * the items' interactions, counted once. */
static lac_status upload_inbatch(lac_ctx_t ctx, lac_mf_cuda_implicit *m, const int32_t *row_item, int64_t rows)
{
    int64_t *count = item_counts(m->call->data);
    if (!count) return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "out of host memory for the items' interactions");
    lac_status st = m->kernel.inbatch == 2 ? upload_seen_bits(ctx, m, count, row_item, rows) : LAC_SUCCESS;
    if (st == LAC_SUCCESS && lac_knob_int(ctx, LAC_KNOB_MF_CUDA_INBATCH_WEIGHT, 1) != 0)
        st = upload_inbatch_weights(ctx, m, count, row_item, rows);
    free(count);
    return st;
}

lac_status lac_mf_cuda_implicit_upload(lac_ctx_t ctx, lac_mf_cuda_implicit *m, const lac_mf_schedule *sch)
{
    const lac_mf_data *d = m->call->data;
    const int64_t ni = d->num_items, rows = sch->rows;
    m->steps = sch->steps;
    m->cells = sch->groups * sch->steps;
    LAC_CUDA_CHECK(ctx, cudaStreamSynchronize(ctx->cuda->stream));
    LAC_CHECK(upload_seen(ctx, m, lac_mf_sorted_items(d)));
    if (m->kernel.copies) LAC_CHECK(upload_seen_tables(ctx, m));
    {   /* every cell's user */
        int32_t *cu = (int32_t *)malloc((size_t)(m->cells ? m->cells : 1) * sizeof *cu);
        if (cu)
            for (int64_t g = 0; g < sch->groups; g++) {
                int64_t run = sch->group_first_run[g];
                int32_t user = -1;
                for (int64_t t = 0; t < sch->steps; t++) {
                    int32_t c = sch->code[g * sch->steps + t];
                    if (c >= 0 && (c & LAC_MF_RUN_START)) user = sch->run_user[run++];
                    cu[g * sch->steps + t] = c >= 0 ? user : -1;
                }
            }
        LAC_CHECK(give(ctx, &m->cell_user, cu, (size_t)m->cells));
    }
    {   /* item rows and replicas */
        int32_t *row_item = (int32_t *)malloc((size_t)(rows ? rows : 1) * sizeof *row_item);
        int32_t *first = (int32_t *)malloc((size_t)(ni ? ni : 1) * sizeof *first);
        int32_t *count = (int32_t *)malloc((size_t)(ni ? ni : 1) * sizeof *count);
        if (row_item && first && count) {
            for (int64_t j = 0; j < ni; j++) row_item[j] = (int32_t)j, first[j] = 0, count[j] = 1;
            for (int64_t h = 0; h < sch->hot_items; h++) {
                int32_t j = sch->hot_item[h];
                first[j] = sch->hot_first[h];
                count[j] = sch->hot_count[h];
                for (int32_t r = 1; r < count[j]; r++) row_item[first[j] + r - 1] = j;
            }
        }
        if (!row_item || !first || !count) {
            free(row_item), free(first), free(count);
            return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "out of host memory for the implicit arrays");
        }
        if (m->kernel.inbatch) LAC_CHECK(upload_inbatch(ctx, m, row_item, rows));
        LAC_CHECK(give(ctx, &m->row_item, row_item, (size_t)rows));
        LAC_CHECK(give(ctx, &m->rep_first, first, (size_t)ni));
        LAC_CHECK(give(ctx, &m->rep_count, count, (size_t)ni));
    }
    /* the copies draw in the epoch; in-batch negatives are not drawn */
    size_t draws = m->kernel.copies || m->kernel.inbatch ? 0 : (size_t)m->cells * (size_t)m->negatives;
    if (cudaMalloc((void **)&m->neg, (draws ? draws : 1) * sizeof(int32_t)) != cudaSuccess) {
        m->neg = NULL;
        return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "out of device memory for %zu negatives (%d a rating)", draws,
                         m->negatives);
    }
    if (m->kernel.pool > 0) {   /* every block's pools, one a round */
        const int64_t blocks = sch->groups / m->kernel.groups_per_block;
        m->rounds = (int)((m->steps + m->kernel.round_steps - 1) / m->kernel.round_steps);
        if (m->rounds < 1) m->rounds = 1;
        m->pools = blocks * m->rounds;
        const size_t slots = m->kernel.copies ? 1 : (size_t)(m->pools ? m->pools : 1) * (size_t)m->kernel.pool;
        if (cudaMalloc((void **)&m->pool_item, slots * sizeof(int32_t)) != cudaSuccess) m->pool_item = NULL;
        if (cudaMalloc((void **)&m->pool_row, slots * sizeof(int32_t)) != cudaSuccess) m->pool_row = NULL;
        if (!m->pool_item || !m->pool_row)
            return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "out of device memory for %zu pooled negatives", slots);
    }
    if (m->call->negative_scale && !m->bpr) {   /* a part's share of one process's negatives (mf_parts.cu) */
        float *scale = (float *)malloc((size_t)(d->num_users ? d->num_users : 1) * sizeof *scale);
        if (scale && d->num_users) memcpy(scale, m->call->negative_scale, (size_t)d->num_users * sizeof *scale);
        LAC_CHECK(give(ctx, &m->user_scale, scale, (size_t)d->num_users));
    }
    if ((m->share > 1 || m->user_scale) &&
        cudaMalloc((void **)&m->neg_weight, (size_t)(m->cells ? m->cells : 1) * sizeof(float)) != cudaSuccess) {
        m->neg_weight = NULL;
        return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "out of device memory for the negatives' weights");
    }
    return LAC_SUCCESS;
}

lac_status lac_mf_cuda_implicit_epoch(lac_ctx_t ctx, lac_mf_cuda_implicit *m, const lac_mf_cuda_epoch_args *base,
                                      int epoch, unsigned blocks)
{
    lac_mf_cuda_draw_args dr;
    dr.code = base->code;
    dr.cell_user = m->cell_user;
    dr.row_item = m->row_item;
    dr.rep_first = m->rep_first;
    dr.rep_count = m->rep_count;
    dr.seen_start = m->seen_start;
    dr.seen_items = m->seen_items;
    dr.cells = m->cells;
    dr.steps = m->steps;
    dr.num_items = m->call->data->num_items;
    dr.seed = m->call->seed;
    dr.epoch = epoch;
    dr.negatives = m->negatives;
    dr.share = m->share;
    dr.neg = m->neg;
    dr.neg_weight = m->neg_weight;
    dr.user_scale = m->user_scale;
    dr.neg_cum = m->neg_cum;
    dr.rating = m->alone ? base->rating : NULL;
    dr.alone = (m->negatives + m->share - 1) / m->share;
    dr.pool_item = m->pool_item;
    dr.pool_row = m->pool_row;
    dr.pools = m->pools;
    dr.pool = m->kernel.pool;
    dr.round_steps = m->kernel.round_steps;
    dr.rounds = m->rounds;
    dr.groups_per_block = m->kernel.groups_per_block;
    dr.seen_table_start = m->seen_table_start;
    dr.seen_table = m->seen_table;
    lac_mf_cuda_implicit_args a;
    a.base = *base;
    a.neg = m->neg;
    a.neg_weight = m->neg_weight;
    a.negatives = m->negatives;
    a.bpr = m->bpr;
    a.pool_row = m->pool_row;
    a.pool = m->kernel.pool;
    a.round_steps = m->kernel.round_steps;
    a.rounds = m->rounds;
    a.draws = dr;
    a.perm_a = 1, a.perm_b = 0;
    a.row_rank = m->row_rank;
    a.seen_bits = m->seen_bits;
    a.seen_words = m->seen_words;
    a.row_weight = m->row_weight;
    if (m->kernel.inbatch)
        lac_mf_cuda_implicit_inbatch_map(m->call->seed, epoch, m->cells / (m->steps > 0 ? m->steps : 1), &a.perm_a,
                                         &a.perm_b);
    if (!m->phase[0] || !m->phase[1] || !m->phase[2]) return lac_mf_cuda_implicit_launch(ctx, &m->kernel, blocks, &dr, &a, NULL);
    /* the draws and the epoch kernel timed apart (a measurement) */
    float draws_ms = 0.0f, epoch_ms = 0.0f;
    LAC_CUDA_CHECK(ctx, cudaEventRecord(m->phase[0], ctx->cuda->stream));
    LAC_CHECK(lac_mf_cuda_implicit_launch(ctx, &m->kernel, blocks, &dr, &a, m->phase[1]));
    LAC_CUDA_CHECK(ctx, cudaEventRecord(m->phase[2], ctx->cuda->stream));
    LAC_CUDA_CHECK(ctx, cudaEventSynchronize(m->phase[2]));
    LAC_CUDA_CHECK(ctx, cudaEventElapsedTime(&draws_ms, m->phase[0], m->phase[1]));
    LAC_CUDA_CHECK(ctx, cudaEventElapsedTime(&epoch_ms, m->phase[1], m->phase[2]));
    lac_log(ctx, LAC_LOG_INFO, "mf CUDA implicit epoch %d: draws %.3f ms, epoch kernel %.3f ms", epoch, draws_ms, epoch_ms);
    return LAC_SUCCESS;
}

void lac_mf_cuda_implicit_cells_free(lac_mf_data *c)
{
    free(c->row_start);
    free(c->col);
    free(c->val);
    free(c->row_order);
    memset(c, 0, sizeof *c);
}

lac_status lac_mf_cuda_implicit_alone_cells(lac_ctx_t ctx, lac_mf_cuda_implicit *m, lac_mf_data *c)
{
    const lac_mf_data *d = m->call->data;
    const float *scale = m->bpr ? NULL : m->call->negative_scale;
    const int64_t nu = d->num_users;
    memset(c, 0, sizeof *c);
    int64_t more = 0;
    for (int64_t u = 0; scale && u < nu; u++) more += d->row_start[u + 1] == d->row_start[u] && scale[u] > 0.0f;
    if (!more || !d->num_items) return LAC_SUCCESS;
    *c = *d;
    c->nnz = d->nnz + more;
    c->row_start = (int64_t *)malloc((size_t)(nu + 1) * sizeof *c->row_start);
    c->row_order = (int32_t *)malloc((size_t)(nu ? nu : 1) * sizeof *c->row_order);
    c->col = (int32_t *)malloc((size_t)c->nnz * sizeof *c->col);
    c->val = (float *)malloc((size_t)c->nnz * sizeof *c->val);
    c->neg_cum = NULL;
    if (!c->row_start || !c->row_order || !c->col || !c->val) {
        lac_mf_cuda_implicit_cells_free(c);
        return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "out of host memory for the implicit cells");
    }
    /* users by count, most first, still (a zero count became one, after every other) */
    if (nu) memcpy(c->row_order, d->row_order, (size_t)nu * sizeof *c->row_order);
    c->row_start[0] = 0;
    for (int64_t u = 0; u < nu; u++) {
        const int64_t lo = d->row_start[u], n = d->row_start[u + 1] - lo, w = c->row_start[u];
        memcpy(c->col + w, d->col + lo, (size_t)n * sizeof *c->col);
        memcpy(c->val + w, d->val + lo, (size_t)n * sizeof *c->val);
        const int add = n == 0 && scale[u] > 0.0f;
        if (add) {   /* placeholders spread over the items (the schedule's popular ones stay its own) */
            c->col[w] = (int32_t)(u % d->num_items);
            c->val[w] = -1.0f;
        }
        c->row_start[u + 1] = w + n + add;
    }
    m->alone = 1;
    return LAC_SUCCESS;
}

/* The neighbourhood model. */

lac_status lac_mf_cuda_implicit_nbr_begin(lac_ctx_t ctx, const lac_mf_call *call, lac_mf_cuda_implicit **out,
                                          lac_mf_data *c)
{
    const lac_mf_data *d = call->data;
    const int64_t nu = d->num_users;
    const int bpr = call->loss == LAC_MF_LOSS_BPR;
    lac_mf_cuda_implicit *m = (lac_mf_cuda_implicit *)calloc(1, sizeof *m);
    if (!m) return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "out of host memory for the CUDA implicit state");
    m->call = call;
    m->bpr = bpr;
    m->negatives = bpr ? 1 : call->negatives;
    m->share = bpr || call->share < 1 ? 1 : call->share;
    *out = m;
    memset(c, 0, sizeof *c);
    c->num_users = nu;
    c->num_items = d->num_items;
    c->mean = d->mean;
    c->min = d->min;
    c->max = d->max;
    int32_t *items = lac_mf_sorted_items(d);
    c->row_start = (int64_t *)malloc((size_t)(nu + 1) * sizeof *c->row_start);
    c->row_order = (int32_t *)malloc((size_t)(nu ? nu : 1) * sizeof *c->row_order);
    if (!items || !c->row_start || !c->row_order) {
        free(items);
        return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "out of host memory for the implicit cells");
    }
    if (nu) memcpy(c->row_order, d->row_order, (size_t)nu * sizeof *c->row_order);
    int first, size;
    int32_t key;
    c->row_start[0] = 0;
    /* a part's users weigh their negatives by negative_scale (mf_parts.cu):
     * none where 0; a user with no positive in the part takes `alone`
     * negatives' cells of its own, `negatives` x scale in all */
    const float *scale = bpr ? NULL : call->negative_scale;
    const int alone = (m->negatives + m->share - 1) / m->share;
    for (int64_t u = 0; u < nu; u++) {   /* each interaction and its negatives */
        const int64_t n = d->row_start[u + 1] - d->row_start[u];
        int64_t cells = n;
        if (bpr) {   /* the pair's three cells */
            c->row_start[u + 1] = c->row_start[u] + 3 * n;
            continue;
        }
        for (int64_t r = 0; r < n && (!scale || scale[u] > 0.0f); r++)
            cells += lac_mf_share(r, n, m->share, m->negatives, 0, &first, &size, &key);
        if (n == 0 && scale && scale[u] > 0.0f) cells = alone;
        c->row_start[u + 1] = c->row_start[u] + cells;
    }
    c->nnz = c->row_start[nu];
    c->col = (int32_t *)malloc((size_t)(c->nnz ? c->nnz : 1) * sizeof *c->col);
    c->val = (float *)malloc((size_t)(c->nnz ? c->nnz : 1) * sizeof *c->val);
    if (!c->col || !c->val) {
        free(items);
        return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "out of host memory for %lld implicit cells", (long long)c->nnz);
    }
    for (int64_t u = 0; u < nu; u++) {
        const int64_t lo = d->row_start[u], n = d->row_start[u + 1] - lo;
        int64_t w = c->row_start[u];
        for (int64_t x = 0; n == 0 && x < c->row_start[u + 1] - w; x++) {   /* placeholders, drawn */
            c->col[w + x] = 0;
            c->val[w + x] = -scale[u] * (float)m->negatives / (float)alone;
        }
        for (int64_t a = lo; a < lo + n; a++) {
            const int32_t j = d->col[a];
            const int64_t rank = (int64_t)(std::lower_bound(items + lo, items + lo + n, j) - (items + lo));
            const int cnt = bpr ? 1 : !scale || scale[u] > 0.0f ? lac_mf_share(rank, n, m->share, m->negatives, j, &first, &size, &key) : 0;
            c->col[w] = j;
            c->val[w++] = d->val[a];
            if (bpr) {   /* the negative (drawn), the positive again */
                c->col[w] = j;
                c->val[w++] = -d->val[a];
                c->col[w] = j;
                c->val[w++] = 0.0f;
                continue;
            }
            for (int b = 0; b < cnt; b++) {   /* a placeholder: the item is drawn every epoch */
                c->col[w] = j;
                c->val[w++] = -(float)size * (scale ? scale[u] : 1.0f);
            }
        }
    }
    free(items);
    return LAC_SUCCESS;
}

lac_status lac_mf_cuda_implicit_nbr_upload(lac_ctx_t ctx, lac_mf_cuda_implicit *m, const lac_mf_schedule *sch)
{
    /* the negatives' cells, each with the draw's key and t of the
     * interaction it follows (also across a row cut into runs) */
    const lac_mf_call *call = m->call;
    lac_mf_negative_cells nc;
    LAC_CHECK(lac_mf_schedule_negatives(ctx, call->data, sch, m->share, m->negatives,
                                        m->bpr ? NULL : call->negative_scale, &nc));
    m->nbr_count = nc.count;
    lac_status st = LAC_SUCCESS;
    if (cudaStreamSynchronize(ctx->cuda->stream) != cudaSuccess)
        st = lac_error(ctx, LAC_ERR_CUDA, "CUDA stream failed before the implicit arrays");
    if (st == LAC_SUCCESS) st = upload_seen(ctx, m, lac_mf_sorted_items(call->data));
    if (st == LAC_SUCCESS) st = give(ctx, &m->nbr_cell, nc.cell, (size_t)nc.count), nc.cell = NULL;
    if (st == LAC_SUCCESS) st = give(ctx, &m->nbr_user, nc.user, (size_t)nc.count), nc.user = NULL;
    if (st == LAC_SUCCESS) st = give(ctx, &m->nbr_key, nc.key, (size_t)nc.count), nc.key = NULL;
    if (st == LAC_SUCCESS) st = give(ctx, &m->nbr_t, nc.t, (size_t)nc.count), nc.t = NULL;
    lac_mf_negative_cells_free(&nc);
    return st;
}

lac_status lac_mf_cuda_implicit_nbr_draw(lac_ctx_t ctx, lac_mf_cuda_implicit *m, int32_t *code, int epoch)
{
    lac_mf_cuda_nbr_draw_args a;
    a.code = code;
    a.cell = m->nbr_cell;
    a.user = m->nbr_user;
    a.key = m->nbr_key;
    a.t = m->nbr_t;
    a.seen_start = m->seen_start;
    a.seen_items = m->seen_items;
    a.count = m->nbr_count;
    a.num_items = m->call->data->num_items;
    a.seed = m->call->seed;
    a.epoch = epoch;
    a.neg_cum = m->neg_cum;
    return lac_mf_cuda_implicit_launch_nbr_draws(ctx, &a);
}
