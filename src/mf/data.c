/* The training data layout: ratings grouped by user (CSR with 32-bit item
 * indices), repeated (user, item) pairs resolved, rows listed by count. */
#include "mf/mf_internal.h"
#include "mf/schedule.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

void lac_mf_data_free(lac_mf_data *d)
{
    if (!d) return;
    free(d->row_start);
    free(d->col);
    free(d->val);
    free(d->row_order);
    free(d->neg_cum);
    memset(d, 0, sizeof *d);
}

/* Users by rating count, most first (ties keep index order). */
static lac_status order_rows(lac_ctx_t ctx, lac_mf_data *d)
{
    int64_t nu = d->num_users;
    int64_t *count = lac_malloc(ctx, (size_t)(nu ? nu : 1) * sizeof *count);
    int64_t *order = lac_malloc(ctx, (size_t)(nu ? nu : 1) * sizeof *order);
    lac_status st = count && order ? LAC_SUCCESS : LAC_ERR_OUT_OF_MEMORY;
    if (st == LAC_SUCCESS) {
        for (int64_t u = 0; u < nu; u++) count[u] = d->row_start[u + 1] - d->row_start[u];
        st = lac_mf_order_by_count(ctx, count, nu, order);
    }
    if (st == LAC_SUCCESS)
        for (int64_t r = 0; r < nu; r++) d->row_order[r] = (int32_t)order[r];
    free(count);
    free(order);
    return st;
}

lac_status lac_mf_data_build(lac_ctx_t ctx, lac_ratings_t r, lac_mf_data *out)
{
    lac_mf_data d;
    memset(&d, 0, sizeof d);
    d.num_users = r->users.count;
    d.num_items = r->items.count;
    int64_t n = r->count, nu = d.num_users, ni = d.num_items;
    int threads = lac_threads(ctx);
    lac_status st = LAC_SUCCESS;
    int32_t *stamps = NULL;

    d.row_start = lac_calloc(ctx, (size_t)nu + 1, sizeof *d.row_start);
    d.col = lac_malloc(ctx, (size_t)(n ? n : 1) * sizeof *d.col);
    d.val = lac_malloc(ctx, (size_t)(n ? n : 1) * sizeof *d.val);
    d.row_order = lac_malloc(ctx, (size_t)(nu ? nu : 1) * sizeof *d.row_order);
    stamps = lac_malloc(ctx, (size_t)threads * (size_t)(ni ? ni : 1) * sizeof *stamps);
    if (!d.row_start || !d.col || !d.val || !d.row_order || !stamps) {
        st = LAC_ERR_OUT_OF_MEMORY;
        goto fail;
    }
    /* counting sort by user keeps the read order within a row */
    for (int64_t i = 0; i < n; i++) d.row_start[r->user[i] + 1]++;
    for (int64_t u = 0; u < nu; u++) d.row_start[u + 1] += d.row_start[u];
    {
        int64_t *fill = lac_malloc(ctx, (size_t)(nu ? nu : 1) * sizeof *fill);
        if (!fill) {
            st = LAC_ERR_OUT_OF_MEMORY;
            goto fail;
        }
        memcpy(fill, d.row_start, (size_t)nu * sizeof *fill);
        for (int64_t i = 0; i < n; i++) {
            int64_t at = fill[r->user[i]]++;
            d.col[at] = r->item[i];
            d.val[at] = r->value[i];
        }
        free(fill);
    }
    /* Repeated pairs: walk each row backwards so the last rating wins, mark
     * the items seen (a per-thread stamp array), then close the gaps. */
    int64_t *kept = lac_calloc(ctx, (size_t)nu + 1, sizeof *kept);
    if (!kept) {
        st = LAC_ERR_OUT_OF_MEMORY;
        goto fail;
    }
    for (int64_t i = 0; i < threads * (ni ? ni : 1); i++) stamps[i] = -1;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 256)
    for (int64_t u = 0; u < nu; u++) {
        int32_t *seen = stamps + (int64_t)omp_get_thread_num() * (ni ? ni : 1);
        int64_t lo = d.row_start[u], hi = d.row_start[u + 1], w = hi;
        for (int64_t a = hi - 1; a >= lo; a--) {
            int32_t j = d.col[a];
            if (seen[j] == (int32_t)u) continue;
            seen[j] = (int32_t)u;
            w--;
            d.col[w] = j;
            d.val[w] = d.val[a];
        }
        kept[u + 1] = hi - w;
    }
    for (int64_t u = 0; u < nu; u++) kept[u + 1] += kept[u];
    if (kept[nu] != n) {
        for (int64_t u = 0; u < nu; u++) {
            int64_t c = kept[u + 1] - kept[u], from = d.row_start[u + 1] - c;
            memmove(d.col + kept[u], d.col + from, (size_t)c * sizeof *d.col);
            memmove(d.val + kept[u], d.val + from, (size_t)c * sizeof *d.val);
        }
    }
    d.duplicates = n - kept[nu];
    free(d.row_start);
    d.row_start = kept;
    d.nnz = kept[nu];
    free(stamps);
    stamps = NULL;

    double sum = 0.0;
    float lo = d.nnz ? d.val[0] : 0.0f, hi = lo;
    for (int64_t a = 0; a < d.nnz; a++) {
        sum += d.val[a];
        if (d.val[a] < lo) lo = d.val[a];
        if (d.val[a] > hi) hi = d.val[a];
    }
    d.mean = d.nnz ? sum / (double)d.nnz : 0.0;
    d.min = lo;
    d.max = hi;
    LAC_CHECK_GOTO(order_rows(ctx, &d), st, fail);
    *out = d;
    return LAC_SUCCESS;
fail:
    free(stamps);
    lac_mf_data_free(&d);
    return st;
}
