/* Blocks of items gathered from the ratings (nbr_backend.h's
 * lac_nbr_blocks), for the simLSH searches that never lay the ratings out
 * whole: the front end's keys_by_blocks (src/mf/neighbours.c) and the CUDA
 * search's chunks (src/backend/cuda/mf/nbr_lsh.cu). A block is a run of
 * items whose ratings fit the caller's buffers; gathered from the caller's
 * triples it costs one pass over them on every thread (slices of
 * consecutive triples, so each item's ratings keep their read order), from
 * an item-major layout a copy. Rows are then tidied as the layouts tidy
 * them (lac_nbr_tidy_rows), so a block's rows are the layout's. */
#include "mf/nbr_backend.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* One row (read order) ascending by user, a repeated user's last rating
 * kept; returns how many are kept at the front. */
static int64_t row_tidy(int32_t *user, float *val, int64_t len, uint64_t *scratch, int32_t *u2, float *v2)
{
    int sorted = 1;
    for (int64_t a = 1; a < len && sorted; a++) sorted = user[a] > user[a - 1];
    if (sorted) return len;
    for (int64_t a = 0; a < len; a++) scratch[a] = ((uint64_t)(uint32_t)user[a] << 32) | (uint64_t)a;
    qsort(scratch, (size_t)len, sizeof *scratch, cmp_u64);
    int64_t kept = 0;
    for (int64_t a = 0; a < len; a++) {
        int64_t from = (int64_t)(scratch[a] & 0xFFFFFFFFu);
        if (a + 1 < len && scratch[a + 1] >> 32 == scratch[a] >> 32) continue;   /* a later rating wins */
        u2[kept] = user[from];
        v2[kept++] = val[from];
    }
    memcpy(user, u2, (size_t)kept * sizeof *user);
    memcpy(val, v2, (size_t)kept * sizeof *val);
    return kept;
}

lac_status lac_nbr_tidy_rows(lac_ctx_t ctx, int64_t rows, int64_t *start, int32_t *user, float *val, int threads)
{
    int64_t *kept = lac_calloc(ctx, (size_t)rows + 1, sizeof *kept);
    if (!kept) return LAC_ERR_OUT_OF_MEMORY;
    int failed = 0;
#pragma omp parallel num_threads(threads < 1 ? 1 : threads)
    {
        uint64_t *scratch = NULL;
        int32_t *u2 = NULL;
        float *v2 = NULL;
        int64_t cap = 0;
#pragma omp for schedule(dynamic, 64)
        for (int64_t j = 0; j < rows; j++) {
            int64_t lo = start[j], len = start[j + 1] - lo;
            if (len > cap) {
                free(scratch);
                free(u2);
                free(v2);
                cap = len;
                scratch = malloc((size_t)cap * sizeof *scratch);
                u2 = malloc((size_t)cap * sizeof *u2);
                v2 = malloc((size_t)cap * sizeof *v2);
                if (!scratch || !u2 || !v2) {
#pragma omp atomic write
                    failed = 1;
                    cap = 0;
                }
            }
            kept[j + 1] = cap >= len ? row_tidy(user + lo, val + lo, len, scratch, u2, v2) : len;
        }
        free(scratch);
        free(u2);
        free(v2);
    }
    if (failed) {
        free(kept);
        return LAC_ERR_OUT_OF_MEMORY;
    }
    for (int64_t j = 0; j < rows; j++) kept[j + 1] += kept[j];
    if (kept[rows] != start[rows])
        for (int64_t j = 0; j < rows; j++) {
            int64_t c = kept[j + 1] - kept[j];
            memmove(user + kept[j], user + start[j], (size_t)c * sizeof *user);
            memmove(val + kept[j], val + start[j], (size_t)c * sizeof *val);
        }
    memcpy(start, kept, ((size_t)rows + 1) * sizeof *start);
    free(kept);
    return LAC_SUCCESS;
}

/* Slice s of the triples: [nnz s / slices, nnz (s + 1) / slices). */
static int64_t slice_at(const lac_nbr_blocks *b, int64_t s) { return b->data->nnz * s / (b->slices ? b->slices : 1); }

lac_status lac_nbr_blocks_init(lac_ctx_t ctx, lac_nbr_blocks *b, const lac_nbr_data *d, int64_t max_ratings,
                               int64_t max_items, int threads)
{
    memset(b, 0, sizeof *b);
    const int64_t ni = d->num_items, nnz = d->nnz;
    b->data = d;
    b->max_ratings = max_ratings < 1 ? 1 : max_ratings;
    b->max_items = max_items < 1 ? 1 : max_items;
    b->threads = threads < 1 ? 1 : threads;
    b->count = lac_calloc(ctx, (size_t)ni + 1, sizeof *b->count);
    if (!b->count) return LAC_ERR_OUT_OF_MEMORY;
    if (d->item_start) {
        for (int64_t j = 0; j < ni; j++) b->count[j] = d->item_start[j + 1] - d->item_start[j];
    } else {
        /* a slice per thread, its counts an item's in int32: slices of
         * under 2^31 triples, and at most 64 MB of counts unless one slice */
        int64_t s = b->threads, most = ((int64_t)1 << 24) / (ni ? ni : 1);
        s = s > most ? (most > 1 ? most : 1) : s;
        if (nnz / s >= INT32_MAX) s = nnz / INT32_MAX + 1;
        b->slices = (int)s;
        b->slice_count = lac_calloc(ctx, (size_t)s * (size_t)(ni ? ni : 1), sizeof *b->slice_count);
        if (!b->slice_count) {
            lac_nbr_blocks_free(b);
            return LAC_ERR_OUT_OF_MEMORY;
        }
        const int32_t *item = d->tri_item;
#pragma omp parallel for num_threads(b->threads) schedule(static, 1)
        for (int64_t c = 0; c < s; c++) {
            int32_t *h = b->slice_count + c * ni;
            const int64_t a0 = slice_at(b, c), a1 = slice_at(b, c + 1);   /* held: h's stores may alias b */
            for (int64_t a = a0; a < a1; a++) h[item[a]]++;
        }
        for (int64_t c = 0; c < s; c++)
            for (int64_t j = 0; j < ni; j++) b->count[j] += b->slice_count[c * ni + j];
    }
    for (int64_t j0 = 0, j1, run; j0 < ni; j0 = j1) {
        j1 = lac_nbr_blocks_next(b, j0, &run);
        b->most = run > b->most ? run : b->most;
        b->most_items = j1 - j0 > b->most_items ? j1 - j0 : b->most_items;
    }
    return LAC_SUCCESS;
}

int64_t lac_nbr_blocks_next(const lac_nbr_blocks *b, int64_t j0, int64_t *run)
{
    const int64_t ni = b->data->num_items;
    int64_t j1 = j0;
    *run = 0;
    while (j1 < ni && j1 - j0 < b->max_items && (j1 == j0 || *run + b->count[j1] <= b->max_ratings))
        *run += b->count[j1++];
    return j1;
}

lac_status lac_nbr_blocks_gather(lac_ctx_t ctx, const lac_nbr_blocks *b, int64_t j0, int64_t j1, int64_t *start,
                                 int32_t *user, float *val)
{
    const lac_nbr_data *d = b->data;
    const int64_t ni = d->num_items, nb = j1 - j0;
    start[0] = 0;
    for (int64_t j = j0; j < j1; j++) start[j - j0 + 1] = start[j - j0] + b->count[j];
    if (d->item_start) {   /* laid out (and tidy) already */
        const int64_t a0 = d->item_start[j0], len = d->item_start[j1] - a0;
        memcpy(user, d->item_user + a0, (size_t)len * sizeof *user);
        memcpy(val, d->item_val + a0, (size_t)len * sizeof *val);
        return LAC_SUCCESS;
    }
    /* each slice's first slot of each item of the block */
    const int64_t s = b->slices;
    int64_t *cur = lac_malloc(ctx, (size_t)s * (size_t)(nb ? nb : 1) * sizeof *cur);
    if (!cur) return LAC_ERR_OUT_OF_MEMORY;
    for (int64_t j = j0; j < j1; j++) {
        int64_t at = start[j - j0];
        for (int64_t c = 0; c < s; c++) {
            cur[c * nb + (j - j0)] = at;
            at += b->slice_count[c * ni + j];
        }
    }
    const int32_t *tu = d->tri_user, *ti = d->tri_item;
    const float *tv = d->tri_val;
#pragma omp parallel for num_threads(b->threads) schedule(static, 1)
    for (int64_t c = 0; c < s; c++) {
        int64_t *h = cur + c * nb;
        const int64_t a0 = slice_at(b, c), a1 = slice_at(b, c + 1);   /* held: the stores may alias b */
        for (int64_t a = a0; a < a1; a++) {
            const uint64_t x = (uint64_t)((int64_t)ti[a] - j0);
            if (x >= (uint64_t)nb) continue;
            const int64_t at = h[x]++;
            user[at] = tu[a];
            val[at] = tv[a];
        }
    }
    free(cur);
    return lac_nbr_tidy_rows(ctx, nb, start, user, val, b->threads);
}

int64_t lac_nbr_blocks_bytes(const lac_nbr_blocks *b)
{
    return (b->data->num_items + 1) * 8 + (int64_t)b->slices * b->data->num_items * 4 +
           (int64_t)b->slices * b->most_items * 8;
}

void lac_nbr_blocks_free(lac_nbr_blocks *b)
{
    if (!b) return;
    free(b->count);
    free(b->slice_count);
    memset(b, 0, sizeof *b);
}
