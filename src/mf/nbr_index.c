/* The bucket index of the LSH neighbour searches (nbr_backend.h's
 * lac_nbr_index): each table's buckets that count (two items or more, at
 * most max_bucket), their members, and each item's bucket, built a few
 * tables at a time so that a search can drop a table's keys once they are
 * in. Shared by the front end (src/mf/neighbours.c, streamed) and the CPU
 * backend's counting (src/mf/cpu/nbr_cpu.c, from whole key arrays). */
#include "mf/nbr_backend.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

int lac_nbr_cmp_keyed(const void *a, const void *b)
{
    const lac_nbr_keyed *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return (x->item > y->item) - (x->item < y->item);
}

lac_status lac_nbr_index_init(lac_ctx_t ctx, lac_nbr_index *ix, int64_t tables, int64_t stride)
{
    memset(ix, 0, sizeof *ix);
    size_t cells = (size_t)tables * (size_t)stride;
    ix->tables = tables;
    ix->stride = stride;
    ix->lo = lac_malloc(ctx, (cells ? cells : 1) * sizeof *ix->lo);
    ix->base = lac_calloc(ctx, (size_t)tables + 1, sizeof *ix->base);
    if (!ix->lo || !ix->base) {
        lac_nbr_index_free(ix);
        return LAC_ERR_OUT_OF_MEMORY;
    }
    return LAC_SUCCESS;
}

lac_status lac_nbr_index_append(lac_ctx_t ctx, lac_nbr_index *ix, const int32_t *member, int64_t len)
{
    int64_t at = ix->base[ix->filled];
    if (at + len > ix->cap) {
        int64_t cap = ix->cap ? ix->cap : 1024;
        while (cap < at + len) cap *= 2;
        int32_t *grown = realloc(ix->member, (size_t)cap * sizeof *grown);
        if (!grown) return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "the bucket index: %lld members",
                                     (long long)(at + len));
        ix->member = grown;
        ix->cap = cap;
    }
    if (len) memcpy(ix->member + at, member, (size_t)len * sizeof *member);
    ix->base[ix->filled + 1] = at + len;
    ix->filled++;
    return LAC_SUCCESS;
}

lac_status lac_nbr_index_add_keys(lac_ctx_t ctx, lac_nbr_index *ix, const uint64_t *keys, int64_t n, int64_t ni,
                                  int max_bucket, int threads)
{
    /* a table per thread at a time, its members appended in table order */
    int64_t batch = threads < 1 ? 1 : threads;
    size_t nz = (size_t)(ni ? ni : 1);
    lac_nbr_keyed *tmp = lac_malloc(ctx, (size_t)batch * nz * sizeof *tmp);
    int32_t *mem = lac_malloc(ctx, (size_t)batch * nz * sizeof *mem);
    int64_t *len = lac_malloc(ctx, (size_t)batch * sizeof *len);
    lac_status st = tmp && mem && len ? LAC_SUCCESS : LAC_ERR_OUT_OF_MEMORY;
    const int64_t first = ix->filled;   /* appends move filled on */
    for (int64_t t0 = 0; t0 < n && st == LAC_SUCCESS; t0 += batch) {
        int64_t nb = n - t0 < batch ? n - t0 : batch;
#pragma omp parallel for num_threads((int)nb) schedule(static, 1)
        for (int64_t b = 0; b < nb; b++) {
            lac_nbr_keyed *kt = tmp + (size_t)b * nz;
            int32_t *mt = mem + (size_t)b * nz;
            int32_t *lo = ix->lo + (first + t0 + b) * ix->stride;
            const uint64_t *key = keys + (t0 + b) * ni;
            for (int64_t j = 0; j < ni; j++) kt[j] = (lac_nbr_keyed){key[j], (int32_t)j};
            qsort(kt, (size_t)ni, sizeof *kt, lac_nbr_cmp_keyed);
            int64_t m = 0;
            for (int64_t a = 0; a < ni;) {
                int64_t e = a + 1;
                while (e < ni && kt[e].key == kt[a].key) e++;
                int counts = e - a > 1 && e - a <= max_bucket;
                for (int64_t x = a; x < e; x++) {
                    lo[kt[x].item] = counts ? (int32_t)m : -1;
                    if (counts) mt[m + x - a] = kt[x].item | (x + 1 == e ? LAC_NBR_BUCKET_END : 0);
                }
                if (counts) m += e - a;
                a = e;
            }
            len[b] = m;
        }
        for (int64_t b = 0; b < nb && st == LAC_SUCCESS; b++) st = lac_nbr_index_append(ctx, ix, mem + (size_t)b * nz, len[b]);
    }
    free(tmp);
    free(mem);
    free(len);
    return st;
}

int64_t lac_nbr_index_bytes(const lac_nbr_index *ix)
{
    return ix->tables * ix->stride * 4 + (ix->tables + 1) * 8 + ix->cap * 4;
}

void lac_nbr_index_free(lac_nbr_index *ix)
{
    if (!ix) return;
    free(ix->lo);
    free(ix->base);
    free(ix->member);
    memset(ix, 0, sizeof *ix);
}
