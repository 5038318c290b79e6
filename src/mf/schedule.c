/* The SGD schedule of mf (schedule.h): the CUSGD++ deal of runs to lane
 * groups with popular items' replicas, the CPU's block grid and stratum
 * order, the count ordering both use, and the rating blocks of the
 * rotations. Host only, no device calls. */
#include "mf/schedule.h"
#include "core/random.h"

#include <stdlib.h>
#include <string.h>

lac_status lac_mf_order_by_count(lac_ctx_t ctx, const int64_t *count, int64_t n, int64_t *order)
{
    int64_t max_count = 0;
    for (int64_t i = 0; i < n; i++) max_count = count[i] > max_count ? count[i] : max_count;
    int64_t *bucket = lac_calloc(ctx, (size_t)max_count + 2, sizeof *bucket);
    if (!bucket) return LAC_ERR_OUT_OF_MEMORY;
    for (int64_t i = 0; i < n; i++) bucket[max_count - count[i] + 1]++;
    for (int64_t c = 1; c <= max_count + 1; c++) bucket[c] += bucket[c - 1];
    for (int64_t i = 0; i < n; i++) order[bucket[max_count - count[i]]++] = i;
    free(bucket);
    return LAC_SUCCESS;
}

lac_status lac_mf_block_data(lac_ctx_t ctx, const lac_mf_data *d, const int32_t *users, int64_t nu,
                             const int32_t *item_local, int64_t ni, lac_mf_data *o)
{
    memset(o, 0, sizeof *o);
    o->num_users = nu;
    o->num_items = ni;
    o->mean = d->mean;
    o->min = d->min;
    o->max = d->max;
    o->row_start = lac_calloc(ctx, (size_t)nu + 1, sizeof *o->row_start);
    o->row_order = lac_malloc(ctx, (size_t)(nu ? nu : 1) * sizeof *o->row_order);
    int64_t *len = lac_malloc(ctx, (size_t)(nu ? nu : 1) * sizeof *len);
    int64_t *order = lac_malloc(ctx, (size_t)(nu ? nu : 1) * sizeof *order);
    lac_status st = o->row_start && o->row_order && len && order ? LAC_SUCCESS : LAC_ERR_OUT_OF_MEMORY;
    for (int64_t u = 0; st == LAC_SUCCESS && u < nu; u++) {
        const int64_t x = users[u];
        len[u] = 0;
        for (int64_t a = d->row_start[x]; a < d->row_start[x + 1]; a++) len[u] += item_local[d->col[a]] >= 0;
        o->row_start[u + 1] = o->row_start[u] + len[u];
    }
    if (st == LAC_SUCCESS) {
        o->nnz = o->row_start[nu];
        o->col = lac_malloc(ctx, (size_t)(o->nnz ? o->nnz : 1) * sizeof *o->col);
        o->val = lac_malloc(ctx, (size_t)(o->nnz ? o->nnz : 1) * sizeof *o->val);
        if (!o->col || !o->val) st = LAC_ERR_OUT_OF_MEMORY;
    }
    for (int64_t u = 0, at = 0; st == LAC_SUCCESS && u < nu; u++) {
        const int64_t x = users[u];
        for (int64_t a = d->row_start[x]; a < d->row_start[x + 1]; a++)
            if (item_local[d->col[a]] >= 0) {
                o->col[at] = item_local[d->col[a]];
                o->val[at++] = d->val[a];
            }
    }
    if (st == LAC_SUCCESS) st = lac_mf_order_by_count(ctx, len, nu, order);
    for (int64_t r = 0; st == LAC_SUCCESS && r < nu; r++) o->row_order[r] = (int32_t)order[r];
    free(len);
    free(order);
    if (st != LAC_SUCCESS) lac_mf_block_data_free(o);
    return st;
}

void lac_mf_block_data_free(lac_mf_data *o)
{
    free(o->row_start);
    free(o->row_order);
    free(o->col);
    free(o->val);
    o->row_start = NULL;
    o->row_order = NULL;
    o->col = NULL;
    o->val = NULL;
}

int64_t lac_mf_replica_rows(int64_t count, int64_t hot, int64_t groups)
{
    int64_t n = (count + hot - 1) / hot;
    if (n > LAC_MF_MAX_REPLICAS) n = LAC_MF_MAX_REPLICAS;
    if (n > groups) n = groups;
    return n < 1 ? 1 : n;
}

int64_t lac_mf_schedule_blocks(int64_t want, int64_t per_block, int64_t resident)
{
    int64_t blocks = (want + per_block - 1) / per_block;
    if (blocks > resident) blocks = resident;
    if (blocks < 1) blocks = 1;
    return blocks;
}

/* A binary min-heap of groups on (load, group): the root is the least loaded. */
void lac_mf_deal_lpt(const int64_t *len, int64_t n, int64_t groups, int64_t *load, int64_t *heap, int64_t *group_of)
{
    for (int64_t g = 0; g < groups; g++) load[g] = 0, heap[g] = g;
#define LESS(x, y) (load[x] < load[y] || (load[x] == load[y] && (x) < (y)))
    for (int64_t r = 0; r < n; r++) {
        int64_t g = heap[0];
        group_of[r] = g;
        load[g] += len[r];
        for (int64_t i = 0;;) {   /* sift the root down */
            int64_t l = 2 * i + 1, m = i;
            if (l < groups && LESS(heap[l], heap[m])) m = l;
            if (l + 1 < groups && LESS(heap[l + 1], heap[m])) m = l + 1;
            if (m == i) break;
            int64_t t = heap[i];
            heap[i] = heap[m];
            heap[m] = t;
            i = m;
        }
    }
#undef LESS
}

void lac_mf_schedule_free(lac_mf_schedule *s)
{
    if (!s) return;
    free(s->code);
    free(s->rating);
    free(s->group_first_run);
    free(s->run_user);
    free(s->run_weight);
    free(s->hot_item);
    free(s->hot_first);
    free(s->hot_count);
    memset(s, 0, sizeof *s);
}

/* Popular items: each item's rows (replica_count) and first replica row
 * (replica_first), the threshold, and the list of items with replicas. */
static lac_status deal_replicas(lac_ctx_t ctx, const lac_mf_data *d, const lac_mf_schedule_params *p,
                                lac_mf_schedule *s, int32_t *replica_count, int32_t *replica_first)
{
    for (int64_t a = 0; a < d->nnz; a++) replica_count[d->col[a]]++;
    int64_t hot = p->hot;
    if (hot == 0) {
        /* more replica rows than the budget would push the rows themselves out of L2 */
        for (hot = LAC_MF_HOT_RATINGS;; hot *= 2) {
            int64_t extra = 0;
            for (int64_t j = 0; j < d->num_items; j++) extra += lac_mf_replica_rows(replica_count[j], hot, s->groups) - 1;
            if ((double)extra * p->row_bytes <= p->replica_budget || hot > d->nnz) break;
        }
    }
    s->hot = hot;
    s->rows = d->num_items;
    for (int64_t j = 0; j < d->num_items; j++) {
        int64_t n = lac_mf_replica_rows(replica_count[j], hot, s->groups);
        replica_count[j] = (int32_t)n;
        replica_first[j] = (int32_t)s->rows;   /* rows of replicas 1 .. n-1 */
        s->rows += n - 1;
        s->hot_items += n > 1;
    }
    if (s->rows > LAC_MF_ITEM_MASK)
        return lac_error(ctx, LAC_ERR_UNSUPPORTED, "mf CUDA: %lld item rows with replicas, more than %d",
                         (long long)s->rows, LAC_MF_ITEM_MASK);
    s->hot_item = malloc((size_t)(s->hot_items + 1) * sizeof *s->hot_item);
    s->hot_first = malloc((size_t)(s->hot_items + 1) * sizeof *s->hot_first);
    s->hot_count = malloc((size_t)(s->hot_items + 1) * sizeof *s->hot_count);
    if (!s->hot_item || !s->hot_first || !s->hot_count)
        return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "out of host memory for %lld popular items",
                         (long long)s->hot_items);
    for (int64_t j = 0, h = 0; j < d->num_items; j++)
        if (replica_count[j] > 1) {
            s->hot_item[h] = (int32_t)j;
            s->hot_first[h] = replica_first[j];
            s->hot_count[h] = replica_count[j];
            h++;
        }
    return LAC_SUCCESS;
}

lac_status lac_mf_schedule_build(lac_ctx_t ctx, const lac_mf_data *d, const lac_mf_schedule_params *p,
                                 lac_mf_schedule *out)
{
    lac_mf_schedule s;
    memset(&s, 0, sizeof s);
    s.groups = p->groups;
    lac_status st = LAC_SUCCESS;
    const int64_t groups = s.groups;
    int64_t *run_len = NULL, *run_src = NULL, *order = NULL, *deal_len = NULL, *run_group = NULL;
    int64_t *slot_of = NULL, *load = NULL, *heap = NULL;
    int64_t runs = 0, share, run_max;

    int32_t *replica_count = calloc((size_t)d->num_items + 1, sizeof *replica_count);
    int32_t *replica_first = calloc((size_t)d->num_items + 1, sizeof *replica_first);
    if (!replica_count || !replica_first) {
        st = lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "out of host memory for %lld item counts", (long long)d->num_items);
        goto fail;
    }
    LAC_CHECK_GOTO(deal_replicas(ctx, d, p, &s, replica_count, replica_first), st, fail);

    /* runs: users in count order, each cut into pieces of at most run_max,
     * run_max small enough against a group's share for the deal to balance */
    share = (d->nnz + groups - 1) / groups;
    run_max = p->run_max;
    if (run_max > share / 2) run_max = share / 2 > 32 ? share / 2 : 32;
    if (p->run_unit > 1) run_max = run_max < p->run_unit ? p->run_unit : run_max - run_max % p->run_unit;
    s.run_max = run_max;
    for (int64_t r = 0; r < d->num_users; r++) {
        int64_t u = d->row_order[r], len = d->row_start[u + 1] - d->row_start[u];
        runs += (len + run_max - 1) / run_max;
    }
    s.runs = runs;
    /* runs in count order (run_src: first rating, a CSR index) */
    run_len = malloc((size_t)(runs + 1) * sizeof *run_len);
    run_src = malloc((size_t)(runs + 1) * sizeof *run_src);
    order = malloc((size_t)(runs + 1) * sizeof *order);
    deal_len = malloc((size_t)(runs + 1) * sizeof *deal_len);
    run_group = malloc((size_t)(runs + 1) * sizeof *run_group);
    slot_of = malloc((size_t)(runs + 1) * sizeof *slot_of);
    load = malloc((size_t)groups * sizeof *load);
    heap = malloc((size_t)groups * sizeof *heap);
    s.group_first_run = calloc((size_t)groups + 1, sizeof *s.group_first_run);
    s.run_user = malloc((size_t)(runs + 1) * sizeof *s.run_user);
    s.run_weight = malloc((size_t)(runs + 1) * sizeof *s.run_weight);
    if (!run_len || !run_src || !order || !deal_len || !run_group || !slot_of || !load || !heap ||
        !s.group_first_run || !s.run_user || !s.run_weight) {
        st = lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "out of host memory for %lld runs", (long long)runs);
        goto fail;
    }
    {
        int64_t n = 0;
        for (int64_t r = 0; r < d->num_users; r++) {
            int64_t u = d->row_order[r], lo = d->row_start[u], hi = d->row_start[u + 1];
            for (int64_t a = lo; a < hi; a += run_max, n++) {
                run_src[n] = a;
                run_len[n] = a + run_max < hi ? run_max : hi - a;
            }
        }
    }
    /* the deal order: longest first (ties keep the count order) */
    LAC_CHECK_GOTO(lac_mf_order_by_count(ctx, run_len, runs, order), st, fail);
    for (int64_t i = 0; i < runs; i++) deal_len[i] = run_len[order[i]];
    lac_mf_deal_lpt(deal_len, runs, groups, load, heap, run_group);
    {
        /* each group's stream: its runs in deal order, padded to `steps` */
        int64_t steps = 0, *first = s.group_first_run;
        for (int64_t g = 0; g < groups; g++) steps = load[g] > steps ? load[g] : steps;
        steps = (steps + p->step_multiple - 1) / p->step_multiple * p->step_multiple;
        if (steps < p->step_multiple) steps = p->step_multiple;
        s.steps = steps;
        size_t cells = (size_t)groups * (size_t)steps;
        s.code = malloc(cells * sizeof *s.code);
        s.rating = malloc(cells * sizeof *s.rating);
        if (!s.code || !s.rating) {
            st = lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "out of host memory for the mf schedule (%lld x %lld)",
                           (long long)groups, (long long)steps);
            goto fail;
        }
        for (size_t x = 0; x < cells; x++) s.code[x] = LAC_MF_PAD, s.rating[x] = 0.0f;
        for (int64_t i = 0; i < runs; i++) first[run_group[i] + 1]++;
        for (int64_t g = 0; g < groups; g++) first[g + 1] += first[g];
        int64_t *filled = load, *next_slot = heap;   /* reused: the deal is done */
        for (int64_t g = 0; g < groups; g++) filled[g] = 0, next_slot[g] = first[g];
        for (int64_t i = 0; i < runs; i++) {
            const int64_t r = order[i], g = run_group[i], a0 = run_src[r];
            slot_of[r] = next_slot[g]++;
            int32_t *cg = s.code + g * steps;
            float *rg = s.rating + g * steps;
            for (int64_t a = a0; a < a0 + run_len[r]; a++, filled[g]++) {
                const int32_t j = d->col[a], replica = (int32_t)(g % replica_count[j]);
                const int32_t row = replica == 0 ? j : replica_first[j] + replica - 1;
                cg[filled[g]] = row | (a == a0 ? LAC_MF_RUN_START : 0);
                rg[filled[g]] = d->val[a];
            }
        }
        /* each run's user and share of the row */
        int64_t n = 0;
        for (int64_t r = 0; r < d->num_users; r++) {
            int64_t u = d->row_order[r], lo = d->row_start[u], hi = d->row_start[u + 1];
            for (int64_t a = lo; a < hi; a += run_max, n++) {
                s.run_user[slot_of[n]] = (int32_t)u;
                s.run_weight[slot_of[n]] = hi - lo > run_max ? (float)run_len[n] / (float)(hi - lo) : 1.0f;
            }
        }
    }
fail:
    free(run_len);
    free(run_src);
    free(order);
    free(deal_len);
    free(run_group);
    free(slot_of);
    free(load);
    free(heap);
    free(replica_count);
    free(replica_first);
    if (st != LAC_SUCCESS) {
        lac_mf_schedule_free(&s);
        return st;
    }
    *out = s;
    return LAC_SUCCESS;
}

lac_status lac_mf_deal_blocks(lac_ctx_t ctx, const lac_mf_data *d, int blocks, int32_t *row_block, int32_t *col_block)
{
    int64_t nu = d->num_users, ni = d->num_items;
    for (int64_t r = 0; r < nu; r++) row_block[d->row_order[r]] = (int32_t)(r % blocks);
    int64_t *item_count = lac_calloc(ctx, (size_t)ni + 1, sizeof *item_count);
    int64_t *item_rank = lac_malloc(ctx, (size_t)(ni ? ni : 1) * sizeof *item_rank);
    lac_status st = item_count && item_rank ? LAC_SUCCESS : LAC_ERR_OUT_OF_MEMORY;
    if (st == LAC_SUCCESS) {
        for (int64_t a = 0; a < d->nnz; a++) item_count[d->col[a]]++;
        st = lac_mf_order_by_count(ctx, item_count, ni, item_rank);
    }
    if (st == LAC_SUCCESS)
        for (int64_t r = 0; r < ni; r++) col_block[item_rank[r]] = (int32_t)(r % blocks);
    free(item_count);
    free(item_rank);
    return st;
}

int lac_mf_rounds(int64_t users_per_block)
{
    int64_t r = (users_per_block + LAC_MF_ROUND_USERS - 1) / LAC_MF_ROUND_USERS;
    return r < 1 ? 1 : r > INT32_MAX ? INT32_MAX : (int)r;
}

void lac_mf_stratum_order(uint64_t seed, int epoch, int blocks, int *order)
{
    uint64_t rng = seed * 0x9e3779b97f4a7c15ull + (uint64_t)epoch + 1;
    for (int i = 0; i < blocks; i++) order[i] = i;
    for (int i = blocks - 1; i > 0; i--) {
        int r = (int)(lac_splitmix64(&rng) % (uint64_t)(i + 1));
        int t = order[i];
        order[i] = order[r];
        order[r] = t;
    }
}

void lac_mf_negative_cells_free(lac_mf_negative_cells *n)
{
    free(n->cell);
    free(n->user);
    free(n->key);
    free(n->t);
    memset(n, 0, sizeof *n);
}

static int cmp_item(const void *a, const void *b)
{
    const int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

int32_t *lac_mf_sorted_items(const lac_mf_data *d)
{
    int32_t *items = malloc((size_t)(d->nnz ? d->nnz : 1) * sizeof *items);
    if (!items) return NULL;
    if (d->nnz) memcpy(items, d->col, (size_t)d->nnz * sizeof *items);
    for (int64_t u = 0; u < d->num_users; u++)
        qsort(items + d->row_start[u], (size_t)(d->row_start[u + 1] - d->row_start[u]), sizeof *items, cmp_item);
    return items;
}

/* The rank of item j among a user's n items (ascending). */
static int64_t item_rank(const int32_t *items, int64_t n, int32_t j)
{
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (items[mid] < j) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

lac_status lac_mf_schedule_negatives(lac_ctx_t ctx, const lac_mf_data *d, const lac_mf_schedule *s, int share,
                                     int negatives, const float *scale, lac_mf_negative_cells *out)
{
    memset(out, 0, sizeof *out);
    const int64_t cells = s->groups * s->steps;
    int64_t count = 0;
    for (int64_t x = 0; x < cells; x++) count += s->code[x] >= 0 && s->rating[x] < 0.0f;
    const size_t c1 = (size_t)(count ? count : 1);
    int32_t *items = lac_mf_sorted_items(d);
    int32_t *row_item = malloc((size_t)(s->rows ? s->rows : 1) * sizeof *row_item);
    out->cell = malloc(c1 * sizeof *out->cell);
    out->user = malloc(c1 * sizeof *out->user);
    out->key = malloc(c1 * sizeof *out->key);
    out->t = malloc(c1 * sizeof *out->t);
    if (!items || !row_item || !out->cell || !out->user || !out->key || !out->t) {
        free(items), free(row_item);
        lac_mf_negative_cells_free(out);
        return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "out of host memory for %lld negatives' cells", (long long)count);
    }
    for (int64_t r = 0; r < s->rows; r++) row_item[r] = (int32_t)(r < d->num_items ? r : 0);
    for (int64_t h = 0; h < s->hot_items; h++)
        for (int32_t r = 1; r < s->hot_count[h]; r++) row_item[s->hot_first[h] + r - 1] = s->hot_item[h];
    int64_t at = 0;
    for (int64_t g = 0; g < s->groups; g++) {
        int64_t run = s->group_first_run[g];
        int32_t u = -1, b = 0, key = 0;
        int first = 0, size = 1;
        for (int64_t t = 0; t < s->steps; t++) {
            const int64_t x = g * s->steps + t;
            const int32_t cd = s->code[x];
            if (cd < 0) break;
            const int32_t j = row_item[cd & LAC_MF_ITEM_MASK];
            if (cd & LAC_MF_RUN_START) {
                u = s->run_user[run++];
                b = 0, first = 0, size = 1, key = -1;   /* a user without an interaction */
                const int64_t lo = d->row_start[u], n = d->row_start[u + 1] - lo;
                if (s->rating[x] < 0.0f && n > 0) {
                    /* a cut row: the rest of interaction j's negatives; the
                     * run starts at the first multiple of run_max past j's cell */
                    int64_t pos = 0;
                    for (int64_t a = lo; a < lo + n && d->col[a] != j; a++)
                        pos += 1 + (!scale || scale[u] > 0.0f
                                        ? lac_mf_share(item_rank(items + lo, n, d->col[a]), n, share, negatives,
                                                       d->col[a], &first, &size, &key)
                                        : 0);
                    lac_mf_share(item_rank(items + lo, n, j), n, share, negatives, j, &first, &size, &key);
                    b = (int32_t)((pos / s->run_max + 1) * s->run_max - pos - 1);
                }
            }
            if (s->rating[x] >= 0.0f) {   /* an interaction: its negatives follow */
                const int64_t lo = d->row_start[u], n = d->row_start[u + 1] - lo;
                lac_mf_share(item_rank(items + lo, n, j), n, share, negatives, j, &first, &size, &key);
                b = 0;
                continue;
            }
            out->cell[at] = x;
            out->user[at] = u;
            out->key[at] = key;
            out->t[at++] = first + b++ * size;
        }
    }
    free(items);
    free(row_item);
    out->count = at;
    return LAC_SUCCESS;
}
