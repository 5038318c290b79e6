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
    int32_t count, item;
} counted;

static int cmp_counted(const void *a, const void *b)
{
    const counted *x = a, *y = b;
    if (x->count != y->count) return x->count > y->count ? -1 : 1;
    return (x->item > y->item) - (x->item < y->item);
}

/* The k most frequent of seen[0..n) (count descending, then item
 * ascending) into o, without sorting them all: counts are at most T (one a
 * table), so a histogram finds the count the k-th has; those above it are
 * sorted, and the smallest items at it taken. hist: T + 1 ints. Returns how
 * many (n when fewer than k). */
static int top_counted(counted *seen, int64_t n, int k, int64_t T, int32_t *hist, int32_t *o)
{
    if (n <= k) {
        qsort(seen, (size_t)n, sizeof *seen, cmp_counted);
        for (int64_t x = 0; x < n; x++) o[x] = seen[x].item;
        return (int)n;
    }
    memset(hist, 0, (size_t)(T + 1) * sizeof *hist);
    for (int64_t x = 0; x < n; x++) hist[seen[x].count]++;
    int64_t c = T, above = 0;
    while (above + hist[c] < k) above += hist[c--];
    int64_t a = 0;
    for (int64_t x = 0; x < n; x++)
        if (seen[x].count > c) {
            counted tmp = seen[a];
            seen[a++] = seen[x];
            seen[x] = tmp;
        }
    qsort(seen, (size_t)a, sizeof *seen, cmp_counted);
    for (int64_t x = 0; x < a; x++) o[x] = seen[x].item;
    int32_t *best = o + a;   /* the smallest items at count c, ascending */
    int need = k - (int)a, have = 0;
    for (int64_t x = a; x < n; x++) {
        if (seen[x].count != c) continue;
        int32_t item = seen[x].item;
        if (have == need && item >= best[need - 1]) continue;
        int at = have < need ? have++ : need - 1;
        while (at > 0 && best[at - 1] > item) {
            best[at] = best[at - 1];
            at--;
        }
        best[at] = item;
    }
    return k;
}

/* Each list (call->rows', else every item's, at lo's index r or j): the
 * items sharing its bucket in each table counted over the tables, the K
 * most frequent, then lac_nbr_fill's sequence. */
static lac_status count_lists(const lac_nbr_call *call, const lac_nbr_index *ix, int by_row, int threads, int32_t *out)
{
    int64_t ni = call->data->num_items, T = ix->tables, rows = call->rows ? call->num_rows : ni;
    int k = call->k;
    lac_status st = LAC_SUCCESS;
#pragma omp parallel num_threads(threads)
    {
        int32_t *count = calloc((size_t)ni + 1, sizeof *count), *hist = malloc((size_t)(T + 1) * sizeof *hist);
        counted *seen = malloc((size_t)(ni ? ni : 1) * sizeof *seen);
        if (!count || !seen || !hist) {
#pragma omp atomic write
            st = LAC_ERR_OUT_OF_MEMORY;
        }
#pragma omp for schedule(dynamic, 16)
        for (int64_t r = 0; r < rows; r++) {
            if (!count || !seen || !hist) continue;
            int64_t j = call->rows ? call->rows[r] : r, at = by_row ? r : j, n = 0;
            for (int64_t t = 0; t < T; t++) {
                int32_t lo = ix->lo[t * ix->stride + at];
                if (lo < 0) continue;
                const int32_t *mem = ix->member + ix->base[t] + lo;
                for (int64_t x = 0;; x++) {
                    int32_t m = mem[x] & ~LAC_NBR_BUCKET_END;
                    if (m != j && count[m]++ == 0) seen[n++].item = m;
                    if (mem[x] & LAC_NBR_BUCKET_END) break;
                }
            }
            for (int64_t x = 0; x < n; x++) seen[x].count = count[seen[x].item];
            for (int64_t x = 0; x < n; x++) count[seen[x].item] = 0;
            int32_t *o = out + r * k;
            int have = top_counted(seen, n, k, T, hist, o);
            lac_nbr_fill(call->seed, j, ni, k, o, have);
        }
        free(count);
        free(hist);
        free(seen);
    }
    return st;
}

/* For lists of a few rows (an update's new items) no table is sorted whole:
 * each table's items whose key is one of the rows' (a hash set of the rows'
 * keys) are grouped by key into the index, one table at a time. */
static lac_status key_rows(lac_ctx_t ctx, const lac_nbr_call *call, lac_nbr_index *ix)
{
    int64_t ni = call->data->num_items, T = call->tables, R = call->num_rows;
    lac_nbr_keyed *rk = lac_malloc(ctx, (size_t)(R ? R : 1) * sizeof *rk);   /* the rows' keys, sorted; item: the row */
    int32_t *group = lac_malloc(ctx, (size_t)(ni ? ni : 1) * sizeof *group);
    int32_t *fill = lac_malloc(ctx, (size_t)(R + 1) * sizeof *fill);
    int32_t *mem = lac_malloc(ctx, (size_t)(ni ? ni : 1) * sizeof *mem);
    int64_t mask = 1;   /* open addressing, at most half full: the keys are hashes already */
    while (mask < 2 * R) mask <<= 1;
    int32_t *slot = lac_malloc(ctx, (size_t)mask * sizeof *slot);
    mask--;
    lac_status st = rk && group && fill && mem && slot ? LAC_SUCCESS : LAC_ERR_OUT_OF_MEMORY;
    for (int64_t t = 0; t < T && st == LAC_SUCCESS; t++) {
        const uint64_t *key = call->keys + t * ni;
        int32_t *lo = ix->lo + t * R;
        for (int64_t r = 0; r < R; r++) rk[r] = (lac_nbr_keyed){key[call->rows[r]], (int32_t)r};
        qsort(rk, (size_t)R, sizeof *rk, lac_nbr_cmp_keyed);
        memset(fill, 0, (size_t)(R + 1) * sizeof *fill);
        memset(slot, 0xFF, (size_t)(mask + 1) * sizeof *slot);
        for (int64_t g = 0; g < R; g++) {   /* each distinct key: its first sorted slot */
            if (g > 0 && rk[g].key == rk[g - 1].key) continue;
            int64_t h = (int64_t)(rk[g].key & (uint64_t)mask);
            while (slot[h] >= 0) h = (h + 1) & mask;
            slot[h] = (int32_t)g;
        }
        for (int64_t j = 0; j < ni; j++) {   /* group: the first sorted slot of j's key, -1 when no row's */
            int64_t h = (int64_t)(key[j] & (uint64_t)mask);
            while (slot[h] >= 0 && rk[slot[h]].key != key[j]) h = (h + 1) & mask;
            group[j] = slot[h];
            if (group[j] >= 0) fill[group[j] + 1]++;
        }
        /* buckets that count, in the rows' key order: their slots */
        int64_t m = 0;
        for (int64_t g = 0; g < R; g++) {
            int32_t size = fill[g + 1];
            fill[g + 1] = size > 1 && size <= call->max_bucket ? (int32_t)m : -1;
            if (fill[g + 1] >= 0) m += size;
        }
        for (int64_t g = 0, first = 0; g < R; g++) {
            if (rk[g].key != rk[first].key) first = g;
            lo[rk[g].item] = fill[first + 1];
        }
        for (int64_t j = 0; j < ni; j++)
            if (group[j] >= 0 && fill[group[j] + 1] >= 0) mem[fill[group[j] + 1]++] = (int32_t)j;
        for (int64_t g = 0; g < R; g++)   /* fill[g + 1] now ends bucket g */
            if (fill[g + 1] > 0 && (g == 0 || rk[g].key != rk[g - 1].key)) mem[fill[g + 1] - 1] |= LAC_NBR_BUCKET_END;
        st = lac_nbr_index_append(ctx, ix, mem, m);
    }
    free(rk);
    free(group);
    free(fill);
    free(mem);
    free(slot);
    return st;
}

static lac_status cpu_bucket_topk(lac_ctx_t ctx, lac_nbr_call *call, int32_t *out)
{
    int64_t ni = call->data->num_items;
    int threads = lac_threads(ctx);
    int by_row = !call->index && call->rows && call->num_rows < ni / 4;
    lac_nbr_index own;
    memset(&own, 0, sizeof own);
    const lac_nbr_index *ix = call->index;
    lac_status st = LAC_SUCCESS;
    int64_t build = 0;
    if (!ix) {
        LAC_CHECK(lac_nbr_index_init(ctx, &own, call->tables, by_row ? call->num_rows : ni));
        st = by_row ? key_rows(ctx, call, &own)
                    : lac_nbr_index_add_keys(ctx, &own, call->keys, call->tables, ni, call->max_bucket, threads);
        build = by_row ? (int64_t)ni * 8 + call->num_rows * 16 : (int64_t)threads * ni * (int64_t)(sizeof(lac_nbr_keyed) + 4);
        ix = &own;
    }
    if (st == LAC_SUCCESS) st = count_lists(call, ix, by_row, threads, out);
    int64_t counting = (int64_t)threads * ni * (int64_t)(4 + sizeof(counted));
    call->bytes = lac_nbr_index_bytes(ix) + (build > counting ? build : counting);
    lac_nbr_index_free(&own);
    if (st < 0) return lac_error(ctx, st, "out of memory searching the buckets");
    return LAC_SUCCESS;
}

const lac_nbr_backend lac_nbr_cpu_backend = {"cpu", cpu_gsm_topk, cpu_bucket_topk, NULL};
