/* mf over MPI ranks: the paper's rotation (section 4.2, Fig. 5; DSGD/NOMAD)
 * with ranks as the workers. Users and items are dealt by rating count to P
 * user blocks and P item blocks (lac_mf_deal_blocks), so blocks hold about
 * the same number of ratings; rank p owns user block p and, in sub-epoch s,
 * trains block (p, (p + s) mod P) through the inner table (one inner state
 * per item block, call.item_part), then hands that item block's parameters
 * (v_j, bhat_j and, for the neighbourhood model, w_j and c_j) to rank p - 1,
 * which trains it next. No two ranks touch one user row or one item row at
 * once; after P sub-epochs every block has been trained once and item block
 * b is back at rank b. An early epoch is R such turns of the ring (rounds,
 * lac_mf_rounds_at), turn r
 * over the r-th slice of each block's users (lac_mf_rounds), so that the P
 * pieces of a user's row are trained close together in time: one turn of
 * whole blocks converged 1-2% worse (docs/scaling.md). The user-side parameters (u_i, b_i) and R^K(i; j) stay
 * with the user's rank. The residuals' baselines bhat_j1 are the item biases
 * as this rank last held them (at most an epoch old): the item biases (or,
 * with validation, the whole item blocks) are allgathered after each epoch,
 * so that every rank starts an epoch from the same, whole state, which a
 * checkpoint holds and a resumed training starts from.
 * With validation the item blocks are gathered after each epoch, each rank
 * predicts its own users' entries and the squared errors are summed over the
 * ranks, so every rank sees the same RMSE and stops at the same epoch. */
#include "core/knobs.h"
#include "dist/comm.h"
#include "mf/mf_backend.h"
#include "mf/schedule.h"

#include <math.h>
#include <omp.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>

struct lac_mf_state {
    const lac_mf_backend *inner;
    lac_mf_call call;          /* the whole training's: the model's arrays, all the ratings */
    lac_mf_data mine;          /* this rank's users' rows (whole), the others empty; global indices */
    int32_t *user_block, *item_block;
    int64_t *block_user_start, *block_item_start;   /* P + 1 */
    int32_t *block_users, *block_items;             /* rows by block, ascending within one */
    lac_mf_state **part;       /* P inner states: this rank's users x item block b */
    float *buffer;             /* packed rows: two item blocks, or every block for a gather */
    lac_mf_eval valid;         /* this rank's users' validation entries (unknown users: rank 0's) */
    float *kept[6];            /* P, Q, b, bhat (, W, C) of the kept epoch */
    int rounds;                /* turns of the ring an epoch */
    int items_whole;           /* every item row here is current (gathered after the last epoch) */
    double seconds_train, seconds_pass;   /* this rank's time in its blocks and in the ring */
    double cpu_train;          /* the process's CPU seconds in its blocks (apart from a busy host's waits) */
};

static double cpu_seconds(void)
{
    struct timespec t;
    return clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t) == 0 ? (double)t.tv_sec + 1e-9 * (double)t.tv_nsec : 0.0;
}

/* Floats a row travels with: the factors, the bias and (items of the
 * neighbourhood model) w_j and c_j. */
static int row_floats(const lac_mf_factors *f, int items) { return f->k + 1 + (items ? 2 * f->nbr_k : 0); }

static void pack(const lac_mf_factors *f, int items, const int32_t *rows, int64_t n, float *out)
{
    const int k = f->k, K = items ? f->nbr_k : 0, w = row_floats(f, items);
    const float *F = items ? f->Q : f->P, *bias = items ? f->item_bias : f->user_bias;
    for (int64_t r = 0; r < n; r++) {
        int64_t x = rows[r];
        float *o = out + r * w;
        memcpy(o, F + x * f->stride, (size_t)k * sizeof *o);
        o[k] = bias[x];
        if (K) {
            memcpy(o + k + 1, f->W + x * K, (size_t)K * sizeof *o);
            memcpy(o + k + 1 + K, f->C + x * K, (size_t)K * sizeof *o);
        }
    }
}

static void unpack(const lac_mf_factors *f, int items, const int32_t *rows, int64_t n, const float *in)
{
    const int k = f->k, K = items ? f->nbr_k : 0, w = row_floats(f, items);
    float *F = items ? f->Q : f->P, *bias = items ? f->item_bias : f->user_bias;
    for (int64_t r = 0; r < n; r++) {
        int64_t x = rows[r];
        const float *o = in + r * w;
        memcpy(F + x * f->stride, o, (size_t)k * sizeof *o);
        bias[x] = o[k];
        if (K) {
            memcpy(f->W + x * K, o + k + 1, (size_t)K * sizeof *o);
            memcpy(f->C + x * K, o + k + 1 + K, (size_t)K * sizeof *o);
        }
    }
}

/* Every rank's block b = rank of the users (items 0) or items (1) of f (the
 * training's arrays or a copy shaped as them) to every rank: each packs its
 * own, all of them gathered in rank order, unpacked. */
static lac_status gather_rows(lac_ctx_t ctx, lac_mf_state *s, const lac_mf_factors *f, int items)
{
    const int64_t *start = items ? s->block_item_start : s->block_user_start;
    const int32_t *rows = items ? s->block_items : s->block_users;
    const int w = row_floats(f, items), me = ctx->rank;
    float *mine = s->buffer + start[me] * w;
    pack(f, items, rows + start[me], start[me + 1] - start[me], mine);
    LAC_CHECK(lac_dist_allgatherv(ctx, NULL, (start[me + 1] - start[me]) * w, sizeof(float), s->buffer, NULL));
    for (int b = 0; b < ctx->ranks; b++)
        if (b != me) unpack(f, items, rows + start[b], start[b + 1] - start[b], s->buffer + start[b] * w);
    return LAC_SUCCESS;
}

/* Every rank's item biases of its own block to every rank (the
 * neighbourhood model's baselines; 4 bytes an item, against the ring's
 * 4 (k + 1 + 2 K) an item and turn). */
static lac_status gather_item_biases(lac_ctx_t ctx, lac_mf_state *s)
{
    const lac_mf_factors *f = &s->call.factors;
    const int64_t *start = s->block_item_start;
    const int32_t *rows = s->block_items;
    const int me = ctx->rank;
    for (int64_t r = start[me]; r < start[me + 1]; r++) s->buffer[r] = f->item_bias[rows[r]];
    LAC_CHECK(lac_dist_allgatherv(ctx, NULL, start[me + 1] - start[me], sizeof(float), s->buffer, NULL));
    for (int64_t r = 0; r < f->num_items; r++)
        if (r < start[me] || r >= start[me + 1]) f->item_bias[rows[r]] = s->buffer[r];
    return LAC_SUCCESS;
}

/* Rows of each block, ascending: a counting sort of block_of. */
static lac_status list_blocks(lac_ctx_t ctx, const int32_t *block_of, int64_t n, int P, int64_t **start,
                              int32_t **rows)
{
    *start = lac_calloc(ctx, (size_t)P + 2, sizeof **start);
    *rows = lac_malloc(ctx, (size_t)(n ? n : 1) * sizeof **rows);
    if (!*start || !*rows) return LAC_ERR_OUT_OF_MEMORY;
    for (int64_t x = 0; x < n; x++) (*start)[block_of[x] + 2]++;
    for (int b = 0; b < P; b++) (*start)[b + 2] += (*start)[b + 1];
    for (int64_t x = 0; x < n; x++) (*rows)[(*start)[block_of[x] + 1]++] = (int32_t)x;
    return LAC_SUCCESS;
}

/* This rank's users' rows of the training data (the neighbourhood terms see
 * a user's whole row); the row order stays the global one. */
static lac_status my_rows(lac_ctx_t ctx, lac_mf_state *s)
{
    const lac_mf_data *d = s->call.data;
    lac_mf_data *m = &s->mine;
    *m = *d;
    m->row_start = lac_calloc(ctx, (size_t)d->num_users + 1, sizeof *m->row_start);
    m->row_order = lac_malloc(ctx, (size_t)(d->num_users ? d->num_users : 1) * sizeof *m->row_order);
    int64_t nnz = 0;
    for (int64_t u = 0; u < d->num_users; u++)
        if (s->user_block[u] == ctx->rank) nnz += d->row_start[u + 1] - d->row_start[u];
    m->col = lac_malloc(ctx, (size_t)(nnz ? nnz : 1) * sizeof *m->col);
    m->val = lac_malloc(ctx, (size_t)(nnz ? nnz : 1) * sizeof *m->val);
    if (!m->row_start || !m->row_order || !m->col || !m->val) return LAC_ERR_OUT_OF_MEMORY;
    m->nnz = nnz;
    for (int64_t u = 0, at = 0; u < d->num_users; u++) {
        if (s->user_block[u] == ctx->rank) {
            int64_t len = d->row_start[u + 1] - d->row_start[u];
            memcpy(m->col + at, d->col + d->row_start[u], (size_t)len * sizeof *m->col);
            memcpy(m->val + at, d->val + d->row_start[u], (size_t)len * sizeof *m->val);
            at += len;
        }
        m->row_start[u + 1] = at;
    }
    memcpy(m->row_order, d->row_order, (size_t)d->num_users * sizeof *m->row_order);
    return LAC_SUCCESS;
}

/* This rank's share of the validation entries: its users', and the unknown
 * users' on rank 0. */
static lac_status my_valid(lac_ctx_t ctx, lac_mf_state *s)
{
    const lac_mf_eval *v = s->call.valid;
    if (!v) return LAC_SUCCESS;
    lac_mf_eval *m = &s->valid;
    int64_t n = 0;
    for (int pass = 0; pass < 2; pass++) {
        n = 0;
        for (int64_t i = 0; i < v->count; i++) {
            int owner = v->user[i] < 0 ? 0 : s->user_block[v->user[i]];
            if (owner != ctx->rank) continue;
            if (pass) {
                m->user[n] = v->user[i];
                m->item[n] = v->item[i];
                m->val[n] = v->val[i];
            }
            n++;
        }
        if (pass) break;
        m->user = lac_malloc(ctx, (size_t)(n ? n : 1) * sizeof *m->user);
        m->item = lac_malloc(ctx, (size_t)(n ? n : 1) * sizeof *m->item);
        m->val = lac_malloc(ctx, (size_t)(n ? n : 1) * sizeof *m->val);
        if (!m->user || !m->item || !m->val) return LAC_ERR_OUT_OF_MEMORY;
    }
    m->count = n;
    return LAC_SUCCESS;
}

static void dist_end(lac_ctx_t ctx, lac_mf_state *s)
{
    if (!s) return;
    if (s->part)
        for (int b = 0; b < ctx->ranks; b++) s->inner->end(ctx, s->part[b]);
    lac_log(ctx, LAC_LOG_DEBUG, "mf rank %d of %d: %.3f s in its blocks (%.3f s of CPU), %.3f s passing item blocks",
            ctx->rank, ctx->ranks, s->seconds_train, s->cpu_train, s->seconds_pass);
    free(s->part);
    free(s->user_block);
    free(s->item_block);
    free(s->block_user_start);
    free(s->block_item_start);
    free(s->block_users);
    free(s->block_items);
    free(s->buffer);
    free(s->mine.row_start);
    free(s->mine.row_order);
    free(s->mine.col);
    free(s->mine.val);
    free(s->valid.user);
    free(s->valid.item);
    free(s->valid.val);
    for (int i = 0; i < 6; i++) free(s->kept[i]);
    free(s);
}

/* The set-up each rank does alone: blocks, its rows, buffers, inner states. */
static lac_status set_up(lac_ctx_t ctx, lac_mf_state *s)
{
    const lac_mf_call *call = &s->call;
    const lac_mf_data *d = call->data;
    const lac_mf_factors *f = &call->factors;
    const int P = ctx->ranks;
    s->user_block = lac_malloc(ctx, (size_t)(d->num_users ? d->num_users : 1) * sizeof *s->user_block);
    s->item_block = lac_malloc(ctx, (size_t)(d->num_items ? d->num_items : 1) * sizeof *s->item_block);
    s->part = lac_calloc(ctx, (size_t)P, sizeof *s->part);
    if (!s->user_block || !s->item_block || !s->part) return LAC_ERR_OUT_OF_MEMORY;
    LAC_CHECK(lac_mf_deal_blocks(ctx, d, P, s->user_block, s->item_block));
    /* the same on every rank; one round where the inner table trains whole
     * parts */
    s->rounds = s->inner->part_slices ? lac_mf_rounds((d->num_users + P - 1) / P) : 1;
    /* LACUNA_MF_DIST_ROUNDS: fewer, for measurements (1: whole blocks) */
    const int64_t asked = lac_knob_int(ctx, LAC_KNOB_MF_DIST_ROUNDS, LAC_MF_DIST_MAX_ROUNDS);
    const int cap = asked >= 1 && asked < LAC_MF_DIST_MAX_ROUNDS ? (int)asked : LAC_MF_DIST_MAX_ROUNDS;
    if (s->rounds > cap) {
        /* Each round is a pass of every item block round the ring: bound the
         * first epochs' traffic, with larger user slices. */
        lac_log(ctx, LAC_LOG_INFO, "mf over %d ranks: %d rounds of user slices capped at %d (%lld users a slice)", P,
                s->rounds, cap, (long long)(((d->num_users + P - 1) / P + cap - 1) / cap));
        s->rounds = cap;
    }
    LAC_CHECK(list_blocks(ctx, s->user_block, d->num_users, P, &s->block_user_start, &s->block_users));
    LAC_CHECK(list_blocks(ctx, s->item_block, d->num_items, P, &s->block_item_start, &s->block_items));
    LAC_CHECK(my_rows(ctx, s));
    LAC_CHECK(my_valid(ctx, s));
    /* room for a gather of either side, and for two item blocks */
    int64_t need = d->num_users * row_floats(f, 0), items = d->num_items * row_floats(f, 1), largest = 0;
    for (int b = 0; b < P; b++)
        if (s->block_item_start[b + 1] - s->block_item_start[b] > largest)
            largest = s->block_item_start[b + 1] - s->block_item_start[b];
    if (items > need) need = items;
    if (2 * largest * row_floats(f, 1) > need) need = 2 * largest * row_floats(f, 1);
    s->buffer = lac_malloc(ctx, (size_t)(need ? need : 1) * sizeof *s->buffer);
    if (!s->buffer) return LAC_ERR_OUT_OF_MEMORY;
    if (call->valid) LAC_CHECK(lac_mf_kept_alloc(ctx, f, s->kept));
    for (int b = 0; b < P; b++) {
        lac_mf_call c = *call;
        c.data = &s->mine;
        c.valid = NULL;   /* validated here, over all the ranks */
        c.item_part = s->item_block;
        c.part = b;
        c.rounds = s->rounds;
        LAC_CHECK(s->inner->begin(ctx, &c, &s->part[b]));
    }
    return LAC_SUCCESS;
}

static lac_status dist_epoch(lac_ctx_t ctx, lac_mf_state *s, float lr, int epoch, double *train_sse)
{
    const lac_mf_factors *f = &s->call.factors;
    const int P = ctx->ranks, me = ctx->rank, w = row_floats(f, 1);
    const int64_t *start = s->block_item_start;
    int64_t largest = 0;
    for (int b = 0; b < P; b++) largest = start[b + 1] - start[b] > largest ? start[b + 1] - start[b] : largest;
    float *out = s->buffer, *in = s->buffer + largest * w;
    double sse = 0.0;
    lac_status st = LAC_SUCCESS;
    for (int turn = 0; turn < lac_mf_rounds_at(s->rounds, epoch) * P; turn++) {
        const int b = (me + turn) % P, next = (b + 1) % P;
        double t0 = omp_get_wtime(), c0 = cpu_seconds(), part = 0.0;
        /* after a failure the ring still turns, so that no rank waits forever */
        if (st == LAC_SUCCESS) st = s->inner->epoch(ctx, s->part[b], lr, epoch, &part);
        sse += part;
        double t1 = omp_get_wtime();
        s->cpu_train += cpu_seconds() - c0;
        pack(f, 1, s->block_items + start[b], start[b + 1] - start[b], out);
        LAC_CHECK(lac_dist_sendrecv(ctx, out, (start[b + 1] - start[b]) * w * (int64_t)sizeof(float), (me + P - 1) % P,
                                    in, (start[next + 1] - start[next]) * w * (int64_t)sizeof(float), (me + 1) % P));
        unpack(f, 1, s->block_items + start[next], start[next + 1] - start[next], in);
        s->seconds_train += t1 - t0;
        s->seconds_pass += omp_get_wtime() - t1;
    }
    LAC_CHECK(lac_dist_agree(ctx, st));
    LAC_CHECK(lac_dist_allreduce(ctx, &sse, 1, LAC_FLOAT64, LAC_DIST_SUM));
    *train_sse = sse;
    s->items_whole = 0;
    double t0 = omp_get_wtime();
    if (s->call.valid) {   /* validation reads every item */
        LAC_CHECK(gather_rows(ctx, s, &s->call.factors, 1));
        s->items_whole = 1;
    } else if (f->nbr_k) {
        LAC_CHECK(gather_item_biases(ctx, s));
    }
    s->seconds_pass += omp_get_wtime() - t0;
    return LAC_SUCCESS;
}

static lac_status dist_valid_rmse(lac_ctx_t ctx, lac_mf_state *s, double *rmse)
{
    const lac_mf_eval *v = s->call.valid;
    if (!v) {
        *rmse = NAN;
        return LAC_SUCCESS;
    }
    double mine = NAN, sq = 0.0;
    lac_status st = lac_mf_eval_factors(ctx, &s->call.factors, &s->valid, NULL, &mine, NULL);
    if (st == LAC_SUCCESS && s->valid.count) sq = mine * mine * (double)s->valid.count;
    LAC_CHECK(lac_dist_agree(ctx, st));
    LAC_CHECK(lac_dist_allreduce(ctx, &sq, 1, LAC_FLOAT64, LAC_DIST_SUM));
    *rmse = v->count ? sqrt(sq / (double)v->count) : NAN;
    return LAC_SUCCESS;
}

/* The kept copy: this rank's users are current, and (after an epoch with
 * validation) every item. */
static lac_status dist_keep(lac_ctx_t ctx, lac_mf_state *s, int restore)
{
    if (!s->kept[0]) return lac_error(ctx, LAC_ERR_INTERNAL, "mf over MPI ranks: keep without validation");
    lac_mf_kept_copy(&s->call.factors, s->kept, restore);
    return LAC_SUCCESS;
}

/* The whole model on every rank: the item blocks (unless just gathered) and
 * the user blocks. */
static lac_status dist_download(lac_ctx_t ctx, lac_mf_state *s)
{
    if (!s->items_whole) LAC_CHECK(gather_rows(ctx, s, &s->call.factors, 1));
    s->items_whole = 1;
    return gather_rows(ctx, s, &s->call.factors, 0);
}

static lac_status dist_begin_alone(lac_ctx_t ctx, const lac_mf_call *call, lac_mf_state **state)
{
    (void)call;
    (void)state;
    return lac_error(ctx, LAC_ERR_INTERNAL, "mf over MPI ranks starts with lac_mf_dist_begin");
}

/* The training's arrays (kept: the kept copy) copied into other (put 0) or
 * from it (1), other shaped as the training's factors. */
static lac_status copy_arrays(lac_ctx_t ctx, lac_mf_state *s, int kept, const lac_mf_factors *other, int put)
{
    if (kept && !s->kept[0]) return lac_error(ctx, LAC_ERR_INTERNAL, "mf over MPI ranks: no kept epoch (no validation)");
    float *arrays[6], *theirs[6];
    size_t floats[6], their_floats[6];
    const int n = lac_mf_factors_arrays(&s->call.factors, arrays, floats);
    lac_mf_factors_arrays(other, theirs, their_floats);
    for (int i = 0; i < n; i++) {
        float *at = kept ? s->kept[i] : arrays[i];
        if (floats[i]) memcpy(put ? at : theirs[i], put ? theirs[i] : at, floats[i] * sizeof(float));
    }
    return LAC_SUCCESS;
}

/* A checkpoint's factors (collective): the current ones (kept 0) or the
 * kept epoch's, copied into `to` and every rank's blocks gathered there, so
 * that every rank holds the whole state (rank 0 writes it). The training's
 * own arrays are left as they are: a checkpoint does not change the
 * training. */
static lac_status dist_get(lac_ctx_t ctx, lac_mf_state *s, int kept, const lac_mf_factors *to)
{
    LAC_CHECK(copy_arrays(ctx, s, kept, to, 0));
    LAC_CHECK(gather_rows(ctx, s, to, 1));
    return gather_rows(ctx, s, to, 0);
}

/* A resumed training's factors (every rank reads the same whole checkpoint):
 * the current ones into the training's arrays, every item current on every
 * rank; the kept ones into the kept copy. */
static lac_status dist_put(lac_ctx_t ctx, lac_mf_state *s, int kept, const lac_mf_factors *from)
{
    LAC_CHECK(copy_arrays(ctx, s, kept, from, 1));
    if (!kept) s->items_whole = 1;
    return LAC_SUCCESS;
}

lac_status lac_mf_dist_agree(lac_ctx_t ctx, lac_status status) { return lac_dist_agree(ctx, status); }

static const lac_mf_backend dist_table = {
    "mpi", 1, dist_begin_alone, dist_epoch, dist_valid_rmse, dist_keep, dist_download, dist_end, dist_get, dist_put,
    1, NULL, 0, 0, 0,
};

lac_status lac_mf_dist_begin(lac_ctx_t ctx, const lac_mf_call *call, const lac_mf_backend **table,
                             lac_mf_state **state)
{
    const lac_mf_backend *inner = *table;
    *state = NULL;
    if (ctx->ranks == 1) return inner->begin(ctx, call, state);
    lac_status st = LAC_SUCCESS;
    if (!inner->parts)
        st = lac_error(ctx, LAC_ERR_UNSUPPORTED, "mf over %d MPI ranks: the %s backend cannot train a part of the "
                                                 "items (--device cpu)", ctx->ranks, inner->name);
    else if (call->implicit && !inner->implicit_parts)
        st = lac_error(ctx, LAC_ERR_UNSUPPORTED, "implicit feedback over %d MPI ranks: the %s backend trains it in "
                                                 "one process only; train it over ranks with --device cpu",
                       ctx->ranks, inner->name);
    if (st < 0) return lac_dist_agree(ctx, st);
    lac_mf_state *s = lac_calloc(ctx, 1, sizeof *s);
    if (s) {
        s->inner = inner;
        s->call = *call;
        st = set_up(ctx, s);
    } else {
        st = LAC_ERR_OUT_OF_MEMORY;
    }
    st = lac_dist_agree(ctx, st);
    /* S^K(j) as rank 0 found it: one neighbour list for the whole job */
    if (st == LAC_SUCCESS && call->factors.nbr_k)
        st = lac_dist_broadcast(ctx, (int32_t *)call->factors.nbr,
                                call->factors.num_items * call->factors.nbr_k * (int64_t)sizeof(int32_t), 0);
    if (st < 0) {
        dist_end(ctx, s);
        return st;
    }
    *table = &dist_table;
    *state = s;
    return LAC_SUCCESS;
}
