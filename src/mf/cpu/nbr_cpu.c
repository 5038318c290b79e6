/* CPU backend of the neighbour search (nbr_backend.h), OpenMP:
 *  - exact GSM: blocks of items j1 against every later item j2 > j1, their
 *    co-rating sums (n, sx, sy, sxx, syy, sxy) gathered through the users who
 *    rated j1 (item-major rows) and those users' items (user-major rows);
 *    each pair is scored once and offered to both items' heaps of the thread
 *    that scored it; the threads' heaps are merged per item at the end. Memory:
 *    a block's sums (about 32 MB a thread) and a K-heap per item per thread.
 *    The sums of a pair are added in user order by one thread: the result is
 *    the same for any thread count.
 *  - buckets: each table's items sorted by key; for each item the members of
 *    its buckets counted in a dense per-thread array. */
#include "core/topk.h"
#include "mf/nbr_backend.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#define GSM_BLOCK_BYTES ((size_t)32 << 20)   /* a block's sums, per thread */

typedef struct {
    double s;
    int32_t item;
} scored;

/* a before b: higher S, then lower index */
static inline int better(scored a, scored b) { return a.s > b.s || (a.s == b.s && a.item < b.item); }

LAC_TOPK_DEFINE(top, scored, better)

static int cmp_scored(const void *a, const void *b)
{
    scored x = *(const scored *)a, y = *(const scored *)b;
    return better(x, y) ? -1 : better(y, x) ? 1 : 0;
}

typedef struct {
    double n, sx, sy, sxx, syy, sxy;
} cosums;

/* Pairs (j1, j2 > j1) for j1 in [lo, hi): sums, scores, offers to both heaps. */
static void gsm_block(const lac_nbr_data *d, double shrink, int k, int64_t lo, int64_t hi, cosums *acc, scored *heaps,
                      int64_t *sizes)
{
    int64_t ni = d->num_items;
    int64_t width = ni - lo;   /* columns j2 in [lo, ni) */
    memset(acc, 0, (size_t)(hi - lo) * (size_t)width * sizeof *acc);
    for (int64_t j1 = lo; j1 < hi; j1++) {
        cosums *row = acc + (j1 - lo) * width;   /* row[j2 - lo] */
        for (int64_t a = d->item_start[j1]; a < d->item_start[j1 + 1]; a++) {
            int32_t u = d->item_user[a];
            double x = d->item_val[a], xx = x * x;
            const int32_t *items = d->user_item + d->user_start[u];
            const float *vals = d->user_val + d->user_start[u];
            int64_t len = d->user_start[u + 1] - d->user_start[u];
            /* the user's items after j1 (ascending): binary search */
            int64_t b = 0, e = len;
            while (b < e) {
                int64_t mid = (b + e) / 2;
                if (items[mid] <= j1) b = mid + 1;
                else e = mid;
            }
            for (int64_t t = b; t < len; t++) {
                double y = vals[t];
                cosums *c = row + (items[t] - lo);
                c->n += 1.0;
                c->sx += x;
                c->sy += y;
                c->sxx += xx;
                c->syy += y * y;
                c->sxy += x * y;
            }
        }
        for (int64_t j2 = j1 + 1; j2 < ni; j2++) {
            const cosums *c = row + (j2 - lo);
            if (c->n == 0.0) continue;
            double s = lac_nbr_shrunk_pearson(c->n, c->sx, c->sy, c->sxx, c->syy, c->sxy, shrink);
            top_offer(heaps + j1 * k, sizes + j1, k, (scored){s, (int32_t)j2});
            top_offer(heaps + j2 * k, sizes + j2, k, (scored){s, (int32_t)j1});
        }
    }
}

/* Item j's final list from its candidates (every thread's heap), with the
 * items never rated together with j entering at S = 0 where they belong. */
static void gsm_finish(const lac_nbr_data *d, int k, int64_t j, scored *cand, int nc, uint8_t *mark, int32_t *out)
{
    qsort(cand, (size_t)nc, sizeof *cand, cmp_scored);
    if (nc >= k && cand[k - 1].s > 0.0) {
        for (int x = 0; x < k; x++) out[x] = cand[x].item;
        return;
    }
    /* zeros: the lowest items that share no user with j, merged in order */
    int64_t ni = d->num_items;
    for (int64_t a = d->item_start[j]; a < d->item_start[j + 1]; a++) {
        int32_t u = d->item_user[a];
        for (int64_t t = d->user_start[u]; t < d->user_start[u + 1]; t++) mark[d->user_item[t]] = 1;
    }
    mark[j] = 1;
    int taken = 0, c = 0;
    int64_t z = 0;
    while (taken < k) {
        while (z < ni && mark[z]) z++;
        scored zero = {0.0, z < ni ? (int32_t)z : INT32_MAX};
        if (c < nc && (z >= ni || better(cand[c], zero))) {
            out[taken++] = cand[c++].item;
        } else {
            out[taken++] = (int32_t)z;
            z++;
        }
    }
    for (int64_t a = d->item_start[j]; a < d->item_start[j + 1]; a++) {
        int32_t u = d->item_user[a];
        for (int64_t t = d->user_start[u]; t < d->user_start[u + 1]; t++) mark[d->user_item[t]] = 0;
    }
    mark[j] = 0;
}

static lac_status cpu_gsm_topk(lac_ctx_t ctx, lac_nbr_call *call, int32_t *out)
{
    const lac_nbr_data *d = call->data;
    int64_t ni = d->num_items;
    int k = call->k, threads = lac_threads(ctx);
    int64_t block = (int64_t)(GSM_BLOCK_BYTES / (sizeof(cosums) * (size_t)(ni ? ni : 1)));
    if (block < 1) block = 1;
    if (block > 256) block = 256;
    int64_t blocks = (ni + block - 1) / block;
    size_t heap_bytes = (size_t)threads * (size_t)ni * (size_t)k * sizeof(scored);
    size_t acc_bytes = (size_t)threads * (size_t)block * (size_t)ni * sizeof(cosums);
    scored *heaps = lac_malloc(ctx, heap_bytes ? heap_bytes : 1);
    int64_t *sizes = lac_calloc(ctx, (size_t)threads * (size_t)ni + 1, sizeof *sizes);
    cosums *acc = lac_malloc(ctx, acc_bytes ? acc_bytes : 1);
    if (!heaps || !sizes || !acc) {
        free(heaps);
        free(sizes);
        free(acc);
        return LAC_ERR_OUT_OF_MEMORY;
    }
    call->bytes = (int64_t)(heap_bytes + acc_bytes + (size_t)threads * (size_t)ni * sizeof *sizes);
#pragma omp parallel num_threads(threads)
    {
        int t = omp_get_thread_num();
        scored *h = heaps + (size_t)t * (size_t)ni * (size_t)k;
        int64_t *sz = sizes + (size_t)t * (size_t)ni;
        cosums *a = acc + (size_t)t * (size_t)block * (size_t)ni;
        /* blocks of the first items have the widest rows: hand them out first */
#pragma omp for schedule(dynamic, 1)
        for (int64_t b = 0; b < blocks; b++) {
            int64_t lo = b * block, hi = lo + block < ni ? lo + block : ni;
            gsm_block(d, call->shrink, k, lo, hi, a, h, sz);
        }
    }
    free(acc);
    lac_status st = LAC_SUCCESS;
#pragma omp parallel num_threads(threads)
    {
        scored *cand = malloc((size_t)threads * (size_t)k * sizeof *cand);
        uint8_t *mark = calloc((size_t)ni + 1, 1);
        if (!cand || !mark) {
#pragma omp atomic write
            st = LAC_ERR_OUT_OF_MEMORY;
        }
#pragma omp for schedule(dynamic, 64)
        for (int64_t j = 0; j < ni; j++) {
            if (!cand || !mark) continue;
            int nc = 0;
            for (int t = 0; t < threads; t++) {
                int n = (int)sizes[(size_t)t * (size_t)ni + (size_t)j];
                memcpy(cand + nc, heaps + ((size_t)t * (size_t)ni + (size_t)j) * (size_t)k, (size_t)n * sizeof *cand);
                nc += n;
            }
            gsm_finish(d, k, j, cand, nc, mark, out + j * k);
        }
        free(cand);
        free(mark);
    }
    free(heaps);
    free(sizes);
    if (st < 0) return lac_error(ctx, st, "out of memory merging the neighbour lists");
    return LAC_SUCCESS;
}

/* ------------------------------------------------------------------------ */
/* Buckets                                                                    */
/* ------------------------------------------------------------------------ */
typedef struct {
    uint64_t key;
    int32_t item;
} keyed;

static int cmp_keyed(const void *a, const void *b)
{
    const keyed *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return (x->item > y->item) - (x->item < y->item);
}

typedef struct {
    int32_t count, item;
} counted;

static int cmp_counted(const void *a, const void *b)
{
    const counted *x = a, *y = b;
    if (x->count != y->count) return x->count > y->count ? -1 : 1;
    return (x->item > y->item) - (x->item < y->item);
}

static lac_status cpu_bucket_topk(lac_ctx_t ctx, lac_nbr_call *call, int32_t *out)
{
    int64_t ni = call->data->num_items, T = call->tables;
    int k = call->k, threads = lac_threads(ctx);
    size_t cells = (size_t)T * (size_t)ni;
    int32_t *member = lac_malloc(ctx, (cells ? cells : 1) * sizeof *member);   /* table t's items by key */
    int32_t *start = lac_malloc(ctx, (cells ? cells : 1) * sizeof *start);     /* bucket of (t, j): first slot */
    int32_t *end = lac_malloc(ctx, (cells ? cells : 1) * sizeof *end);
    if (!member || !start || !end) {
        free(member);
        free(start);
        free(end);
        return LAC_ERR_OUT_OF_MEMORY;
    }
    lac_status st = LAC_SUCCESS;
#pragma omp parallel num_threads(threads)
    {
        keyed *tmp = malloc((size_t)(ni ? ni : 1) * sizeof *tmp);
        if (!tmp) {
#pragma omp atomic write
            st = LAC_ERR_OUT_OF_MEMORY;
        }
#pragma omp for schedule(dynamic, 1)
        for (int64_t t = 0; t < T; t++) {
            if (!tmp) continue;
            const uint64_t *key = call->keys + t * ni;
            for (int64_t j = 0; j < ni; j++) tmp[j] = (keyed){key[j], (int32_t)j};
            qsort(tmp, (size_t)ni, sizeof *tmp, cmp_keyed);
            int32_t *mem = member + t * ni;
            for (int64_t lo = 0; lo < ni;) {
                int64_t hi = lo + 1;
                while (hi < ni && tmp[hi].key == tmp[lo].key) hi++;
                for (int64_t x = lo; x < hi; x++) {
                    mem[x] = tmp[x].item;
                    start[t * ni + tmp[x].item] = (int32_t)lo;
                    end[t * ni + tmp[x].item] = (int32_t)hi;
                }
                lo = hi;
            }
        }
        free(tmp);
    }
    if (st < 0) {
        free(member);
        free(start);
        free(end);
        return lac_error(ctx, st, "out of memory sorting the bucket keys");
    }
#pragma omp parallel num_threads(threads)
    {
        int32_t *count = calloc((size_t)ni + 1, sizeof *count);
        counted *seen = malloc((size_t)(ni ? ni : 1) * sizeof *seen);
        if (!count || !seen) {
#pragma omp atomic write
            st = LAC_ERR_OUT_OF_MEMORY;
        }
        int64_t rows = call->rows ? call->num_rows : ni;
#pragma omp for schedule(dynamic, 64)
        for (int64_t r = 0; r < rows; r++) {
            if (!count || !seen) continue;
            int64_t j = call->rows ? call->rows[r] : r, n = 0;
            for (int64_t t = 0; t < T; t++) {
                int32_t lo = start[t * ni + j], hi = end[t * ni + j];
                if (hi - lo > call->max_bucket) continue;
                const int32_t *mem = member + t * ni;
                for (int32_t x = lo; x < hi; x++) {
                    int32_t m = mem[x];
                    if (m == j) continue;
                    if (count[m]++ == 0) seen[n++].item = m;
                }
            }
            for (int64_t x = 0; x < n; x++) seen[x].count = count[seen[x].item];
            qsort(seen, (size_t)n, sizeof *seen, cmp_counted);
            int32_t *o = out + r * k;
            int have = n < k ? (int)n : k;
            for (int x = 0; x < have; x++) o[x] = seen[x].item;
            for (int64_t x = 0; x < n; x++) count[seen[x].item] = 0;
            lac_nbr_fill(call->seed, j, ni, k, o, have);
        }
        free(count);
        free(seen);
    }
    call->bytes = (int64_t)(3 * cells * sizeof(int32_t) + (size_t)threads * (size_t)ni * (sizeof(keyed) + 4 + sizeof(counted)));
    free(member);
    free(start);
    free(end);
    if (st < 0) return lac_error(ctx, st, "out of memory counting bucket neighbours");
    return LAC_SUCCESS;
}

const lac_nbr_backend lac_nbr_cpu_backend = {"cpu", cpu_gsm_topk, cpu_bucket_topk, NULL};
