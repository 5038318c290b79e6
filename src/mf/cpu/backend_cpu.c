/* The CPU backend's table: the ratings laid out block by block for the
 * epochs of sgd_cpu.c, validation on the host, the kept epoch as a host copy.
 * The factors are the model's own arrays, trained in place. Two schedules
 * (the layout serves both):
 *  - Hogwild (default): one block; threads take whole users in count order, a
 *    chunk at a time, and share V without locks, as the CUSGD++ lane groups do.
 *  - deterministic: a B x B grid of blocks (users x items), LIBMF/DSGD style,
 *    B = 2 x threads, users and items dealt to it by src/mf/schedule.c, the
 *    strata of the first epochs passed in rounds of user slices (lac_mf_rounds). */
#include "mf/cpu/mf_cpu.h"
#include "mf/schedule.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

static void cpu_end(lac_ctx_t ctx, lac_mf_state *s)
{
    (void)ctx;
    if (!s) return;
    free(s->block_seg);
    free(s->seg_user);
    free(s->seg_start);
    free(s->item);
    free(s->val);
    free(s->block_sse);
    free(s->chunk_sse);
    free(s->stratum_order);
    for (int i = 0; i < 6; i++) free(s->kept[i]);
    free(s->bhat_epoch);
    free(s->seen);
    free(s->rank);
    free(s->part_items);
    free(s->part_cum);
    free(s->part_users);
    free(s->valid_start);
    free(s->valid_order);
    free(s->valid_pred);
    free(s);
}

/* Each user's ratings split by column block: counted (fill 0) or written in
 * block order (fill 1). A block's segments are its users in count order.
 * With call.item_part, only the ratings of the call's part of the items. */
static void place_rows(lac_mf_state *s, const lac_mf_data *d, const int32_t *row_block, const int32_t *col_block,
                       int64_t *cnt, int64_t *segs, int64_t *row_cnt, int64_t *write_at, int fill)
{
    int B = s->blocks;
    const int32_t *part = s->call.item_part;
    for (int64_t r = 0; r < d->num_users; r++) {
        int32_t u = d->row_order[r];
        int64_t base = (int64_t)row_block[u] * B;
        for (int c = 0; c < B; c++) row_cnt[c] = 0;
        for (int64_t a = d->row_start[u]; a < d->row_start[u + 1]; a++)
            if (!part || part[d->col[a]] == s->call.part) row_cnt[col_block[d->col[a]]]++;
        for (int c = 0; c < B; c++) {
            if (!row_cnt[c]) continue;
            if (!fill) {
                cnt[base + c] += row_cnt[c];
                segs[base + c]++;
                continue;
            }
            int64_t sg = segs[base + c]++;
            s->seg_user[sg] = u;
            s->seg_start[sg] = cnt[base + c];
            write_at[c] = cnt[base + c];
            cnt[base + c] += row_cnt[c];
        }
        if (!fill) continue;
        for (int64_t a = d->row_start[u]; a < d->row_start[u + 1]; a++) {
            int32_t j = d->col[a];
            if (part && part[j] != s->call.part) continue;
            int64_t at = write_at[col_block[j]]++;
            s->item[at] = j;
            s->val[at] = d->val[a];
        }
    }
}

static lac_status cpu_begin(lac_ctx_t ctx, const lac_mf_call *call, lac_mf_state **out)
{
    const lac_mf_data *d = call->data;
    lac_mf_state *s = lac_calloc(ctx, 1, sizeof *s);
    if (!s) return LAC_ERR_OUT_OF_MEMORY;
    s->call = *call;
    s->threads = lac_threads(ctx);
    /* Deterministic: B = 2 blocks per thread and side balance the strata.
     * Otherwise one block: users whole, shared by the threads (Hogwild). */
    s->blocks = (s->threads == 1 || !call->deterministic) ? 1 : 2 * s->threads;
    int B = s->blocks;
    int64_t nb = (int64_t)B * B, nu = d->num_users, ni = d->num_items;
    /* item parts: the caller's slices; one process's grid: its own */
    s->rounds = call->item_part ? (call->rounds > 1 ? call->rounds : 1)
                : B > 1 && !call->implicit ? lac_mf_rounds((nu + B - 1) / B) : 1;
    lac_status st = LAC_SUCCESS;
    int32_t *row_block = lac_malloc(ctx, (size_t)(nu ? nu : 1) * sizeof *row_block);
    int32_t *col_block = lac_malloc(ctx, (size_t)(ni ? ni : 1) * sizeof *col_block);
    int64_t *cnt = lac_calloc(ctx, (size_t)nb, sizeof *cnt);
    int64_t *segs = lac_calloc(ctx, (size_t)nb, sizeof *segs);
    int64_t *row_cnt = lac_malloc(ctx, (size_t)B * sizeof *row_cnt);
    int64_t *write_at = lac_malloc(ctx, (size_t)B * sizeof *write_at);
    s->block_seg = lac_calloc(ctx, (size_t)nb + 1, sizeof *s->block_seg);
    s->block_sse = lac_calloc(ctx, (size_t)nb, sizeof *s->block_sse);
    s->stratum_order = lac_malloc(ctx, (size_t)B * sizeof *s->stratum_order);
    if (!row_block || !col_block || !cnt || !segs || !row_cnt || !write_at || !s->block_seg || !s->block_sse ||
        !s->stratum_order) {
        st = LAC_ERR_OUT_OF_MEMORY;
        goto done;
    }
    LAC_CHECK_GOTO(lac_mf_deal_blocks(ctx, d, B, row_block, col_block), st, done);

    /* counting pass: ratings and user segments per block */
    place_rows(s, d, row_block, col_block, cnt, segs, row_cnt, write_at, 0);
    int64_t total_segs = 0, placed = 0;
    for (int64_t b = 0; b < nb; b++) {
        s->block_seg[b] = total_segs;
        total_segs += segs[b];
        placed += cnt[b];
    }
    s->block_seg[nb] = total_segs;
    s->seg_user = lac_malloc(ctx, (size_t)(total_segs ? total_segs : 1) * sizeof *s->seg_user);
    s->seg_start = lac_malloc(ctx, ((size_t)total_segs + 1) * sizeof *s->seg_start);
    s->item = lac_malloc(ctx, (size_t)(placed ? placed : 1) * sizeof *s->item);
    s->val = lac_malloc(ctx, (size_t)(placed ? placed : 1) * sizeof *s->val);
    if (!s->seg_user || !s->seg_start || !s->item || !s->val) {
        st = LAC_ERR_OUT_OF_MEMORY;
        goto done;
    }
    {   /* fill pass: block b's ratings start at the sum of the earlier blocks' */
        int64_t acc = 0;
        for (int64_t b = 0; b < nb; b++) {
            int64_t c = cnt[b];
            cnt[b] = acc;   /* now: the next rating of block b */
            acc += c;
            segs[b] = s->block_seg[b];   /* now: the next segment of block b */
        }
        place_rows(s, d, row_block, col_block, cnt, segs, row_cnt, write_at, 1);
        s->seg_start[total_segs] = placed;
    }
    /* per chunk of segments (Hogwild) or of users (implicit feedback) */
    s->chunk_sse = lac_calloc(ctx, (size_t)((total_segs > nu ? total_segs : nu) / LAC_MF_HOGWILD_CHUNK + 1),
                              sizeof *s->chunk_sse);
    if (!s->chunk_sse) {
        st = LAC_ERR_OUT_OF_MEMORY;
        goto done;
    }
    if (call->factors.nbr_k || call->implicit) {
        const lac_mf_factors *f = &call->factors;
        size_t cells = (size_t)s->threads * (size_t)f->num_items;
        s->bhat_epoch = lac_malloc(ctx, (size_t)(f->num_items ? f->num_items : 1) * sizeof *s->bhat_epoch);
        s->seen = lac_malloc(ctx, (cells ? cells : 1) * sizeof *s->seen);
        if (!s->bhat_epoch || !s->seen) {
            st = LAC_ERR_OUT_OF_MEMORY;
            goto done;
        }
        for (size_t x = 0; x < cells; x++) s->seen[x] = NAN;
    }
    if (call->implicit) LAC_CHECK_GOTO(lac_mf_cpu_implicit_begin(ctx, s), st, done);
    if (call->factors.nbr_k) {
        const lac_mf_factors *f = &call->factors;
        if (call->valid) {   /* the validation entries grouped by user (counting sort) */
            const lac_mf_eval *v = call->valid;
            int64_t nu = f->num_users;
            s->valid_start = lac_calloc(ctx, (size_t)nu + 3, sizeof *s->valid_start);
            s->valid_order = lac_malloc(ctx, (size_t)(v->count ? v->count : 1) * sizeof *s->valid_order);
            s->valid_pred = lac_malloc(ctx, (size_t)(v->count ? v->count : 1) * sizeof *s->valid_pred);
            if (!s->valid_start || !s->valid_order || !s->valid_pred) {
                st = LAC_ERR_OUT_OF_MEMORY;
                goto done;
            }
            for (int64_t i = 0; i < v->count; i++) s->valid_start[(v->user[i] < 0 ? nu : v->user[i]) + 2]++;
            for (int64_t u = 0; u <= nu; u++) s->valid_start[u + 2] += s->valid_start[u + 1];
            for (int64_t i = 0; i < v->count; i++) s->valid_order[s->valid_start[(v->user[i] < 0 ? nu : v->user[i]) + 1]++] = i;
        }
    }
    if (call->valid) LAC_CHECK_GOTO(lac_mf_kept_alloc(ctx, &call->factors, s->kept), st, done);   /* the best epoch */
done:
    free(row_block);
    free(col_block);
    free(cnt);
    free(segs);
    free(row_cnt);
    free(write_at);
    if (st < 0) {
        cpu_end(ctx, s);
        return st;
    }
    *out = s;
    return LAC_SUCCESS;
}

/* The neighbourhood model's validation predictions user by user: the user's
 * training ratings in the thread's dense row (lac_mf_nbr_term's seen), so
 * that each neighbour costs one load instead of a search; the same values
 * and sums as lac_mf_eval_factors. */
static lac_status nbr_valid_rmse(lac_ctx_t ctx, lac_mf_state *s, double *rmse)
{
    const lac_mf_factors *f = &s->call.factors;
    const lac_mf_eval *v = s->call.valid;
    const lac_mf_data *d = s->call.data;
    int64_t nu = f->num_users;
#pragma omp parallel num_threads(s->threads)
    {
        float *seen = s->seen + (int64_t)omp_get_thread_num() * f->num_items;
#pragma omp for schedule(dynamic, 64)
        for (int64_t u = 0; u <= nu; u++) {
            int64_t lo = s->valid_start[u], hi = s->valid_start[u + 1];
            if (lo == hi) continue;
            if (u < nu)
                for (int64_t a = d->row_start[u]; a < d->row_start[u + 1]; a++) seen[d->col[a]] = d->val[a];
            for (int64_t x = lo; x < hi; x++) {
                int64_t i = s->valid_order[x], j = v->item[i];
                float p = lac_mf_rule(f->mean, f->P, f->Q, f->user_bias, f->item_bias, f->k, f->stride, v->user[i], j);
                if (u < nu && j >= 0) p += lac_mf_nbr_term(f, u, j, seen);
                s->valid_pred[i] = p < f->rating_min ? f->rating_min : p > f->rating_max ? f->rating_max : p;
            }
            if (u < nu)
                for (int64_t a = d->row_start[u]; a < d->row_start[u + 1]; a++) seen[d->col[a]] = NAN;
        }
    }
    return lac_mf_eval_reduce(ctx, v, s->valid_pred, rmse, NULL);
}

static lac_status cpu_valid_rmse(lac_ctx_t ctx, lac_mf_state *s, double *rmse)
{
    if (!s->call.valid) {
        *rmse = NAN;
        return LAC_SUCCESS;
    }
    if (s->valid_start) return nbr_valid_rmse(ctx, s, rmse);
    return lac_mf_eval_factors(ctx, &s->call.factors, s->call.valid, NULL, rmse, NULL);
}

static lac_status cpu_keep(lac_ctx_t ctx, lac_mf_state *s, int restore)
{
    if (!s->kept[0]) return lac_error(ctx, LAC_ERR_INTERNAL, "mf CPU: keep without validation");
    lac_mf_kept_copy(&s->call.factors, s->kept, restore);
    return LAC_SUCCESS;
}

/* The factors are the model's own arrays: nothing to copy. */
static lac_status cpu_download(lac_ctx_t ctx, lac_mf_state *s)
{
    (void)ctx;
    (void)s;
    return LAC_SUCCESS;
}

/* The current factors are the model's arrays; the kept ones the host copy. */
static lac_status cpu_copy(lac_ctx_t ctx, lac_mf_state *s, int kept, const lac_mf_factors *other, int put)
{
    const lac_mf_factors *f = &s->call.factors;
    if (kept && !s->kept[0]) return lac_error(ctx, LAC_ERR_INTERNAL, "mf CPU: no kept epoch without validation");
    float *mine[6], *theirs[6];
    size_t sizes[6];
    lac_mf_factors_arrays(other, theirs, sizes);
    for (int i = 0, n = lac_mf_factors_arrays(f, mine, sizes); i < n; i++) {
        float *at = kept ? s->kept[i] : mine[i];
        if (sizes[i]) memcpy(put ? at : theirs[i], put ? theirs[i] : at, sizes[i] * sizeof(float));
    }
    return LAC_SUCCESS;
}

static lac_status cpu_get(lac_ctx_t ctx, lac_mf_state *s, int kept, const lac_mf_factors *to)
{
    return cpu_copy(ctx, s, kept, to, 0);
}

static lac_status cpu_put(lac_ctx_t ctx, lac_mf_state *s, int kept, const lac_mf_factors *from)
{
    return cpu_copy(ctx, s, kept, from, 1);
}

const lac_mf_backend lac_mf_cpu_backend = {
    "cpu", 1, cpu_begin, lac_mf_cpu_epoch, cpu_valid_rmse, cpu_keep, cpu_download, cpu_end, cpu_get, cpu_put, 1,
    lac_mf_cpu_fold_in, 1, 1, 1,
};
