/* The mf SGD schedule (src/mf/schedule.c) on the CPU, against simple
 * references written here: every rating dealt exactly once, in runs of at most
 * run_max cut from rows in count order; the longest-first deal the same as a
 * linear scan for the least loaded group, with loads within one run of each
 * other; replica rows only for items over the threshold, as many as the
 * documented formula says, and group g on row g mod R; the threshold the least
 * that fits the budget; the same schedule every time; edge cases (one user,
 * empty rows, one giant item, more groups than ratings, no ratings); the CPU
 * grid's round-robin deal, the seeded stratum order and a rotation's block
 * of the ratings. */
#include "cpu_context.h"
#include "harness.h"
#include "lacuna/lacuna.h"
#include "mf/schedule.h"

static lac_ctx_t ctx;

/* ------------------------------------------------------------ test data */

static const int64_t *sort_counts;
static int by_count_desc(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    if (sort_counts[x] != sort_counts[y]) return sort_counts[x] > sort_counts[y] ? -1 : 1;
    return x < y ? -1 : x > y;
}

/* Reference order: indices by count, most first, ties by index. */
static int64_t *reference_order(const int64_t *count, int64_t n)
{
    int64_t *order = malloc(sizeof *order * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) order[i] = i;
    sort_counts = count;
    qsort(order, (size_t)n, sizeof *order, by_count_desc);
    return order;
}

/* Rows ordered by a qsort here, independent of the library's counting sort. */
static void finish_data(lac_mf_data *d)
{
    int64_t *count = malloc(sizeof *count * (size_t)(d->num_users ? d->num_users : 1));
    for (int64_t u = 0; u < d->num_users; u++) count[u] = d->row_start[u + 1] - d->row_start[u];
    int64_t *order = reference_order(count, d->num_users);
    d->row_order = malloc(sizeof *d->row_order * (size_t)(d->num_users ? d->num_users : 1));
    for (int64_t r = 0; r < d->num_users; r++) d->row_order[r] = (int32_t)order[r];
    free(order);
    free(count);
    d->nnz = d->row_start[d->num_users];
}

/* A CSR of ratings with distinct items in each row (the data layout's
 * promise): users with counts[u] ratings each, items drawn with a skew (item j about
 * 1/(j+1) as likely: a few popular ones), distinct within a row. */
static lac_mf_data skewed_data(int64_t users, int64_t items, const int64_t *counts, unsigned long long seed)
{
    lac_mf_data d;
    memset(&d, 0, sizeof d);
    d.num_users = users;
    d.num_items = items;
    d.row_start = calloc((size_t)users + 1, sizeof *d.row_start);
    for (int64_t u = 0; u < users; u++) d.row_start[u + 1] = d.row_start[u] + counts[u];
    int64_t n = d.row_start[users];
    d.col = malloc(sizeof *d.col * (size_t)(n ? n : 1));
    d.val = malloc(sizeof *d.val * (size_t)(n ? n : 1));
    int64_t *stamp = malloc(sizeof *stamp * (size_t)items);
    for (int64_t j = 0; j < items; j++) stamp[j] = -1;
    for (int64_t u = 0; u < users; u++)
        for (int64_t a = d.row_start[u]; a < d.row_start[u + 1]; a++) {
            int64_t j;
            do {
                double x = harness_rand_uniform(&seed);
                j = (int64_t)(pow((double)items + 1.0, x)) - 1;   /* log-uniform: popular low indices */
                if (j >= items) j = items - 1;
                if (stamp[j] == u) j = (int64_t)(harness_rand_uniform(&seed) * (double)items) % items;
            } while (stamp[j] == u);
            stamp[j] = u;
            d.col[a] = (int32_t)j;
            d.val[a] = (float)(1 + (a * 7 + u) % 9) * 0.5f;
        }
    free(stamp);
    finish_data(&d);
    return d;
}

static void free_data(lac_mf_data *d)
{
    free(d->row_start);
    free(d->col);
    free(d->val);
    free(d->row_order);
    memset(d, 0, sizeof *d);
}

static lac_mf_schedule_params params(int64_t groups, int64_t run_max, int64_t hot)
{
    lac_mf_schedule_params p;
    p.groups = groups;
    p.run_max = run_max;
    p.hot = hot;
    p.replica_budget = 1e12;
    p.row_bytes = 128;
    p.step_multiple = 8;
    p.run_unit = 1;
    return p;
}

/* ------------------------------------------------- the reference deal */

typedef struct {
    int64_t user, src, len;   /* src: first rating, a CSR index */
} run_t;

/* Runs as the schedule documents them: rows in count order, cut into pieces
 * of run_max (the last shorter), dealt longest first (stable) each to the
 * least loaded group found by a linear scan (ties: lowest group). Returns the
 * runs of each group in deal order: group_runs[g][0 .. group_n[g]). */
static void reference_deal(const lac_mf_data *d, int64_t groups, int64_t run_max, run_t ***group_runs,
                           int64_t **group_n, int64_t **group_load)
{
    int64_t runs = 0;
    for (int64_t u = 0; u < d->num_users; u++) runs += (d->row_start[u + 1] - d->row_start[u] + run_max - 1) / run_max;
    run_t *all = malloc(sizeof *all * (size_t)(runs ? runs : 1));
    int64_t n = 0;
    for (int64_t r = 0; r < d->num_users; r++) {
        int64_t u = d->row_order[r];
        for (int64_t a = d->row_start[u]; a < d->row_start[u + 1]; a += run_max, n++) {
            all[n].user = u;
            all[n].src = a;
            all[n].len = a + run_max < d->row_start[u + 1] ? run_max : d->row_start[u + 1] - a;
        }
    }
    int64_t *len = malloc(sizeof *len * (size_t)(runs ? runs : 1));
    for (int64_t i = 0; i < runs; i++) len[i] = all[i].len;
    int64_t *order = reference_order(len, runs);
    *group_runs = calloc((size_t)groups, sizeof **group_runs);
    *group_n = calloc((size_t)groups, sizeof **group_n);
    *group_load = calloc((size_t)groups, sizeof **group_load);
    for (int64_t g = 0; g < groups; g++) (*group_runs)[g] = malloc(sizeof(run_t) * (size_t)(runs ? runs : 1));
    for (int64_t i = 0; i < runs; i++) {
        int64_t best = 0;
        for (int64_t g = 1; g < groups; g++)
            if ((*group_load)[g] < (*group_load)[best]) best = g;
        (*group_runs)[best][(*group_n)[best]++] = all[order[i]];
        (*group_load)[best] += all[order[i]].len;
    }
    free(order);
    free(len);
    free(all);
}

/* The item a stream row stands for, and which of its rows it is (0: its own). */
static int64_t row_item(const lac_mf_schedule *s, int64_t num_items, int64_t row, int64_t *replica)
{
    *replica = 0;
    if (row < num_items) return row;
    for (int64_t h = 0; h < s->hot_items; h++)
        if (row >= s->hot_first[h] && row < s->hot_first[h] + s->hot_count[h] - 1) {
            *replica = row - s->hot_first[h] + 1;
            return s->hot_item[h];
        }
    return -1;
}

/* The expected rows of an item of `count` ratings (the documented formula). */
static int64_t expected_rows(int64_t count, int64_t hot, int64_t groups)
{
    if (count <= hot) return 1;
    int64_t r = (count + hot - 1) / hot;
    r = r < 256 ? r : 256;
    return r < groups ? r : groups;
}

/* Everything a schedule promises, checked against the reference. */
static void check_schedule(const lac_mf_data *d, const lac_mf_schedule_params *p, const lac_mf_schedule *s)
{
    const int64_t G = p->groups;
    CHECK_INT(s->groups, G);
    /* run_max: the parameter, cut to half a group's share but not under 32,
     * then down to a multiple of run_unit */
    int64_t share = (d->nnz + G - 1) / G, run_max = p->run_max;
    if (run_max > share / 2) run_max = share / 2 > 32 ? share / 2 : 32;
    if (p->run_unit > 1) run_max = run_max < p->run_unit ? p->run_unit : run_max / p->run_unit * p->run_unit;
    CHECK_INT(s->run_max, run_max);

    /* replicas: only items over the threshold, as many rows as documented */
    int64_t *item_count = calloc((size_t)d->num_items + 1, sizeof *item_count);
    for (int64_t a = 0; a < d->nnz; a++) item_count[d->col[a]]++;
    int64_t rows = d->num_items, hot_items = 0;
    for (int64_t j = 0; j < d->num_items; j++) {
        int64_t r = expected_rows(item_count[j], s->hot, G);
        rows += r - 1;
        hot_items += r > 1;
    }
    CHECK_INT(s->rows, rows);
    CHECK_INT(s->hot_items, hot_items);
    int64_t next_row = d->num_items;
    for (int64_t h = 0; h < s->hot_items; h++) {
        int64_t j = s->hot_item[h];
        CHECK(item_count[j] > s->hot);
        CHECK_INT(s->hot_count[h], expected_rows(item_count[j], s->hot, G));
        CHECK(h == 0 || s->hot_item[h] > s->hot_item[h - 1]);
        CHECK_INT(s->hot_first[h], next_row);   /* replica rows packed after the items' own */
        next_row += s->hot_count[h] - 1;
    }
    if (p->hot) CHECK_INT(s->hot, p->hot);

    /* the streams, decoded: every cell, run by run */
    run_t **ref_runs;
    int64_t *ref_n, *ref_load;
    reference_deal(d, G, run_max, &ref_runs, &ref_n, &ref_load);
    CHECK(s->steps % p->step_multiple == 0 && s->steps >= p->step_multiple);
    CHECK_INT(s->group_first_run[0], 0);
    CHECK_INT(s->group_first_run[G], s->runs);
    int64_t *seen = calloc((size_t)d->nnz + 1, sizeof *seen);
    int64_t max_load = 0, min_load = INT64_MAX, longest = 0, total_runs = 0;
    int bad = 0;
    for (int64_t g = 0; g < G && !bad; g++) {
        const int32_t *code = s->code + g * s->steps;
        const float *rating = s->rating + g * s->steps;
        int64_t load = 0, run = s->group_first_run[g] - 1, k = -1, pos = 0, end = 0;
        for (int64_t t = 0; t < s->steps; t++) {
            if (code[t] == LAC_MF_PAD) {
                CHECK(rating[t] == 0.0f);
                if (pos != end) {
                    HARNESS_FAIL("group %lld: a run cut short at step %lld", (long long)g, (long long)t);
                    bad = 1;
                }
                for (int64_t x = t; x < s->steps; x++)
                    if (code[x] != LAC_MF_PAD) bad = 1;
                if (bad) HARNESS_FAIL("group %lld: a run after padding", (long long)g);
                break;
            }
            if (code[t] & LAC_MF_RUN_START) {
                if (pos != end) bad = 1;
                run++;
                k++;
                if (k >= ref_n[g]) {
                    HARNESS_FAIL("group %lld: more runs than the reference deal", (long long)g);
                    bad = 1;
                    break;
                }
                const run_t *want = &ref_runs[g][k];
                if (s->run_user[run] != want->user) {
                    HARNESS_FAIL("group %lld run %lld: user %d, reference %lld", (long long)g, (long long)k,
                                 s->run_user[run], (long long)want->user);
                    bad = 1;
                    break;
                }
                int64_t row_len = d->row_start[want->user + 1] - d->row_start[want->user];
                double weight = row_len > run_max ? (double)want->len / (double)row_len : 1.0;
                CHECK_NEAR(s->run_weight[run], weight, 1e-6);
                pos = want->src;
                end = want->src + want->len;
                longest = want->len > longest ? want->len : longest;
            } else if (pos >= end) {
                HARNESS_FAIL("group %lld step %lld: a run longer than its reference", (long long)g, (long long)t);
                bad = 1;
                break;
            }
            int64_t replica, item = row_item(s, d->num_items, code[t] & LAC_MF_ITEM_MASK, &replica);
            if (item != d->col[pos] || rating[t] != d->val[pos]) {
                HARNESS_FAIL("group %lld step %lld: (item %lld, %g), the data has (%d, %g)", (long long)g,
                             (long long)t, (long long)item, rating[t], d->col[pos], d->val[pos]);
                bad = 1;
                break;
            }
            CHECK_INT(replica, g % expected_rows(item_count[item], s->hot, G));
            seen[pos]++;
            pos++;
            load++;
        }
        if (k + 1 != ref_n[g]) {
            HARNESS_FAIL("group %lld: %lld runs, the reference deal %lld", (long long)g, (long long)(k + 1),
                         (long long)ref_n[g]);
            bad = 1;
        }
        CHECK_INT(s->group_first_run[g + 1] - s->group_first_run[g], k + 1);
        CHECK_INT(load, ref_load[g]);
        total_runs += k + 1;
        max_load = load > max_load ? load : max_load;
        min_load = load < min_load ? load : min_load;
    }
    CHECK_INT(total_runs, s->runs);
    /* every rating exactly once */
    int64_t missing = 0, twice = 0;
    for (int64_t a = 0; a < d->nnz; a++) missing += seen[a] == 0, twice += seen[a] > 1;
    if (missing || twice)
        HARNESS_FAIL("%lld ratings never dealt, %lld dealt more than once", (long long)missing, (long long)twice);
    /* the balance LPT promises: no group more than the longest run over another */
    if (G > 0 && max_load - min_load > longest)
        HARNESS_FAIL("loads %lld .. %lld differ by more than the longest run %lld", (long long)min_load,
                     (long long)max_load, (long long)longest);
    CHECK_INT(s->steps, max_load == 0 ? p->step_multiple
                                      : (max_load + p->step_multiple - 1) / p->step_multiple * p->step_multiple);
    for (int64_t g = 0; g < G; g++) free(ref_runs[g]);
    free(ref_runs);
    free(ref_n);
    free(ref_load);
    free(seen);
    free(item_count);
}

static void build_and_check(const lac_mf_data *d, const lac_mf_schedule_params *p)
{
    lac_mf_schedule s;
    CHECK_OK(ctx, lac_mf_schedule_build(ctx, d, p, &s));
    check_schedule(d, p, &s);
    lac_mf_schedule_free(&s);
}

/* ---------------------------------------------------------------- tests */

TEST(lpt_deal_matches_a_linear_scan)
{
    unsigned long long seed = 11;
    int64_t sizes[] = {1, 2, 7, 64, 1000};
    for (int c = 0; c < 5; c++) {
        int64_t groups = sizes[c], n = 3000;
        int64_t *len = malloc(sizeof *len * (size_t)n), *load = malloc(sizeof *load * (size_t)groups);
        int64_t *heap = malloc(sizeof *heap * (size_t)groups), *group_of = malloc(sizeof *group_of * (size_t)n);
        int64_t *ref = calloc((size_t)groups, sizeof *ref);
        for (int64_t i = 0; i < n; i++) len[i] = 1 + (int64_t)(harness_rand_uniform(&seed) * 512);
        lac_mf_deal_lpt(len, n, groups, load, heap, group_of);
        int64_t longest = 0;
        for (int64_t i = 0; i < n; i++) {
            int64_t best = 0;
            for (int64_t g = 1; g < groups; g++)
                if (ref[g] < ref[best]) best = g;
            if (group_of[i] != best) {
                HARNESS_FAIL("%lld groups: item %lld to group %lld, the linear scan says %lld", (long long)groups,
                             (long long)i, (long long)group_of[i], (long long)best);
                break;
            }
            ref[best] += len[i];
            longest = len[i] > longest ? len[i] : longest;
        }
        int64_t lo = INT64_MAX, hi = 0;
        for (int64_t g = 0; g < groups; g++) {
            CHECK_INT(load[g], ref[g]);
            lo = load[g] < lo ? load[g] : lo;
            hi = load[g] > hi ? load[g] : hi;
        }
        CHECK(hi - lo <= longest);
        free(len);
        free(load);
        free(heap);
        free(group_of);
        free(ref);
    }
}

TEST(order_by_count_is_a_stable_descending_sort)
{
    unsigned long long seed = 5;
    int64_t n = 5000;
    int64_t *count = malloc(sizeof *count * (size_t)n), *order = malloc(sizeof *order * (size_t)n);
    for (int64_t i = 0; i < n; i++) count[i] = (int64_t)(harness_rand_uniform(&seed) * 40);   /* many ties */
    CHECK_OK(ctx, lac_mf_order_by_count(ctx, count, n, order));
    int64_t *ref = reference_order(count, n);
    int64_t differ = 0;
    for (int64_t i = 0; i < n; i++) differ += order[i] != ref[i];
    CHECK_INT(differ, 0);
    CHECK_OK(ctx, lac_mf_order_by_count(ctx, count, 0, order));   /* nothing to order */
    free(ref);
    free(count);
    free(order);
}

TEST(skewed_data_every_rating_once_balanced_as_the_reference)
{
    int64_t users = 3000, items = 800;
    int64_t *counts = malloc(sizeof *counts * (size_t)users);
    unsigned long long seed = 3;
    for (int64_t u = 0; u < users; u++) {   /* Zipf-like activity: a few heavy users, rows up to 700 */
        double x = harness_rand_uniform(&seed);
        counts[u] = 1 + (int64_t)(700.0 * x * x * x * x);
    }
    lac_mf_data d = skewed_data(users, items, counts, 9);
    int64_t groups[] = {1, 7, 64, 512};
    int64_t run_max[] = {512, 512, 100, 40};
    for (int c = 0; c < 4; c++) {
        lac_mf_schedule_params p = params(groups[c], run_max[c], 0);
        build_and_check(&d, &p);
        p.hot = 300;   /* a fixed threshold: the popular items get replicas */
        build_and_check(&d, &p);
        p.run_unit = 3;   /* BPR's pairs on CUDA: runs of whole triples */
        build_and_check(&d, &p);   /* s.run_max checked against the rounding */
    }
    lac_mf_schedule_params p = params(7, 2, 0);   /* a run_max under the unit: one whole triple a run */
    p.run_unit = 3;
    build_and_check(&d, &p);
    free_data(&d);
    free(counts);
}

TEST(hot_threshold_is_the_least_that_fits_the_budget)
{
    int64_t users = 4000, items = 300;
    int64_t *counts = malloc(sizeof *counts * (size_t)users);
    for (int64_t u = 0; u < users; u++) counts[u] = 20 + u % 40;
    lac_mf_data d = skewed_data(users, items, counts, 21);
    int64_t *item_count = calloc((size_t)items, sizeof *item_count);
    for (int64_t a = 0; a < d.nnz; a++) item_count[d.col[a]]++;
    double budgets[] = {1e12, 128.0 * 40, 128.0 * 3, 0.0};
    int64_t G = 64;
    for (int c = 0; c < 4; c++) {
        lac_mf_schedule_params p = params(G, 512, 0);
        p.replica_budget = budgets[c];
        lac_mf_schedule s;
        CHECK_OK(ctx, lac_mf_schedule_build(ctx, &d, &p, &s));
        check_schedule(&d, &p, &s);
        /* 512 x 2^n, and the least such that fits the budget (or over nnz) */
        int64_t h = 512;
        for (;; h *= 2) {
            int64_t extra = 0;
            for (int64_t j = 0; j < items; j++) extra += expected_rows(item_count[j], h, G) - 1;
            if ((double)extra * p.row_bytes <= p.replica_budget || h > d.nnz) break;
        }
        CHECK_INT(s.hot, h);
        if (c == 0) CHECK_INT(s.hot, 512);
        if (c == 3) CHECK_INT(s.hot_items, 0);   /* no room: no replicas */
        lac_mf_schedule_free(&s);
    }
    free(item_count);
    free_data(&d);
    free(counts);
}

TEST(the_same_schedule_every_time)
{
    int64_t users = 500, items = 200;
    int64_t *counts = malloc(sizeof *counts * (size_t)users);
    for (int64_t u = 0; u < users; u++) counts[u] = 1 + (u * 37) % 150;
    lac_mf_data d = skewed_data(users, items, counts, 4);
    lac_mf_schedule_params p = params(48, 64, 50);
    lac_mf_schedule a, b;
    CHECK_OK(ctx, lac_mf_schedule_build(ctx, &d, &p, &a));
    CHECK_OK(ctx, lac_mf_schedule_build(ctx, &d, &p, &b));
    CHECK_INT(a.steps, b.steps);
    CHECK_INT(a.runs, b.runs);
    CHECK_INT(a.hot_items, b.hot_items);
    size_t cells = (size_t)a.groups * (size_t)a.steps;
    CHECK(memcmp(a.code, b.code, cells * sizeof *a.code) == 0);
    CHECK(memcmp(a.rating, b.rating, cells * sizeof *a.rating) == 0);
    CHECK(memcmp(a.run_user, b.run_user, (size_t)a.runs * sizeof *a.run_user) == 0);
    CHECK(memcmp(a.run_weight, b.run_weight, (size_t)a.runs * sizeof *a.run_weight) == 0);
    CHECK(memcmp(a.group_first_run, b.group_first_run, ((size_t)a.groups + 1) * sizeof *a.group_first_run) == 0);
    CHECK(memcmp(a.hot_item, b.hot_item, (size_t)a.hot_items * sizeof *a.hot_item) == 0);
    lac_mf_schedule_free(&a);
    lac_mf_schedule_free(&b);
    free_data(&d);
    free(counts);
}

TEST(edge_one_user)
{
    int64_t counts[1] = {5000};
    lac_mf_data d = skewed_data(1, 6000, counts, 8);
    int64_t groups[] = {1, 16, 200};
    for (int c = 0; c < 3; c++) {
        lac_mf_schedule_params p = params(groups[c], 512, 0);
        build_and_check(&d, &p);
    }
    free_data(&d);
}

TEST(edge_empty_rows)
{
    int64_t counts[8] = {0, 30, 0, 0, 700, 1, 0, 0};
    lac_mf_data d = skewed_data(8, 900, counts, 2);
    lac_mf_schedule_params p = params(16, 512, 0);
    build_and_check(&d, &p);
    free_data(&d);
    /* no ratings at all: no runs, one padded step block per group */
    int64_t none[3] = {0, 0, 0};
    d = skewed_data(3, 4, none, 1);
    p = params(4, 512, 0);
    lac_mf_schedule s;
    CHECK_OK(ctx, lac_mf_schedule_build(ctx, &d, &p, &s));
    check_schedule(&d, &p, &s);
    CHECK_INT(s.runs, 0);
    CHECK_INT(s.steps, 8);
    lac_mf_schedule_free(&s);
    free_data(&d);
}

TEST(edge_one_giant_item)
{
    /* every user rates item 0 once: one item with all the ratings */
    int64_t users = 20000;
    lac_mf_data d;
    memset(&d, 0, sizeof d);
    d.num_users = users;
    d.num_items = 1;
    d.row_start = malloc(sizeof *d.row_start * (size_t)(users + 1));
    d.col = calloc((size_t)users, sizeof *d.col);
    d.val = malloc(sizeof *d.val * (size_t)users);
    for (int64_t u = 0; u <= users; u++) d.row_start[u] = u;
    for (int64_t u = 0; u < users; u++) d.val[u] = (float)(u % 5 + 1);
    finish_data(&d);
    int64_t groups[] = {1, 40, 1000};
    for (int c = 0; c < 3; c++) {
        lac_mf_schedule_params p = params(groups[c], 512, 16);   /* 1250 rows asked: capped at 256 and the groups */
        lac_mf_schedule s;
        CHECK_OK(ctx, lac_mf_schedule_build(ctx, &d, &p, &s));
        check_schedule(&d, &p, &s);
        int64_t want = groups[c] < 256 ? groups[c] : 256;
        CHECK_INT(s.rows, want);
        CHECK_INT(s.hot_items, want > 1);
        lac_mf_schedule_free(&s);
    }
    free_data(&d);
}

TEST(edge_more_groups_than_ratings)
{
    int64_t counts[4] = {3, 1, 4, 2};
    lac_mf_data d = skewed_data(4, 10, counts, 6);
    lac_mf_schedule_params p = params(100, 512, 0);
    lac_mf_schedule s;
    CHECK_OK(ctx, lac_mf_schedule_build(ctx, &d, &p, &s));
    check_schedule(&d, &p, &s);
    CHECK_INT(s.runs, 4);
    CHECK_INT(s.steps, 8);
    int64_t empty = 0;
    for (int64_t g = 0; g < s.groups; g++) empty += s.group_first_run[g + 1] == s.group_first_run[g];
    CHECK_INT(empty, 96);
    lac_mf_schedule_free(&s);
    free_data(&d);
}

TEST(blocks_in_flight)
{
    CHECK_INT(lac_mf_schedule_blocks(0, 16, 1000), 1);        /* at least one */
    CHECK_INT(lac_mf_schedule_blocks(17, 16, 1000), 2);       /* whole blocks, rounded up */
    CHECK_INT(lac_mf_schedule_blocks(9766, 16, 528), 528);    /* one wave at most */
    CHECK_INT(lac_mf_replica_rows(0, 512, 64), 1);
    CHECK_INT(lac_mf_replica_rows(513, 512, 64), 2);
    CHECK_INT(lac_mf_replica_rows(1000000, 512, 64), 64);
    CHECK_INT(lac_mf_replica_rows(1000000, 512, 100000), 256);
}

TEST(cpu_grid_is_round_robin_in_count_order)
{
    int64_t users = 1000, items = 300;
    int64_t *counts = malloc(sizeof *counts * (size_t)users);
    for (int64_t u = 0; u < users; u++) counts[u] = 1 + (u * 13) % 97;
    lac_mf_data d = skewed_data(users, items, counts, 12);
    int32_t *row_block = malloc(sizeof *row_block * (size_t)users), *col_block = malloc(sizeof *col_block * (size_t)items);
    int64_t *item_count = calloc((size_t)items, sizeof *item_count);
    for (int64_t a = 0; a < d.nnz; a++) item_count[d.col[a]]++;
    int64_t *item_order = reference_order(item_count, items);
    int Bs[] = {1, 2, 8, 33};
    for (int c = 0; c < 4; c++) {
        int B = Bs[c];
        CHECK_OK(ctx, lac_mf_deal_blocks(ctx, &d, B, row_block, col_block));
        int64_t bad = 0;
        for (int64_t r = 0; r < users; r++) bad += row_block[d.row_order[r]] != r % B;
        for (int64_t r = 0; r < items; r++) bad += col_block[item_order[r]] != r % B;
        CHECK_INT(bad, 0);
        /* the ratings of row blocks differ by at most the heaviest user's */
        int64_t *load = calloc((size_t)B, sizeof *load), lo = INT64_MAX, hi = 0;
        for (int64_t u = 0; u < users; u++) load[row_block[u]] += counts[u];
        for (int b = 0; b < B; b++) lo = load[b] < lo ? load[b] : lo, hi = load[b] > hi ? load[b] : hi;
        CHECK(hi - lo <= 97);
        free(load);
    }
    free(item_order);
    free(item_count);
    free(row_block);
    free(col_block);
    free_data(&d);
    free(counts);
}

/* A rotation's block: every rating of the listed users whose item is in the
 * block, in the users' order and each row's order, renumbered; rows by count
 * (the reference sort); nothing else. */
TEST(block_data_is_the_users_ratings_of_the_block_renumbered)
{
    int64_t users = 400, items = 120;
    int64_t *counts = malloc(sizeof *counts * (size_t)users);
    for (int64_t u = 0; u < users; u++) counts[u] = (u * 7) % 23;   /* some rows empty */
    lac_mf_data d = skewed_data(users, items, counts, 21);
    d.mean = 3.25;
    int32_t *local = malloc(sizeof *local * (size_t)items), *pick = malloc(sizeof *pick * (size_t)users);
    int64_t ni = 0, nu = 0;
    for (int64_t j = 0; j < items; j++) local[j] = j % 3 == 1 ? (int32_t)ni++ : -1;
    for (int64_t u = users - 1; u >= 0; u -= 2) pick[nu++] = (int32_t)u;   /* every other user, backwards */
    lac_mf_data o;
    CHECK_OK(ctx, lac_mf_block_data(ctx, &d, pick, nu, local, ni, &o));
    CHECK_INT(o.num_users, nu);
    CHECK_INT(o.num_items, ni);
    CHECK(o.mean == d.mean);
    int64_t at = 0, bad = 0;
    int64_t *len = malloc(sizeof *len * (size_t)nu);
    for (int64_t u = 0; u < nu; u++) {
        bad += o.row_start[u] != at;
        for (int64_t a = d.row_start[pick[u]]; a < d.row_start[pick[u] + 1]; a++) {
            if (local[d.col[a]] < 0) continue;
            bad += at >= o.row_start[u + 1] || o.col[at] != local[d.col[a]] || o.val[at] != d.val[a];
            at++;
        }
        len[u] = at - o.row_start[u];
    }
    bad += o.row_start[nu] != at || o.nnz != at;
    int64_t *order = reference_order(len, nu);
    for (int64_t r = 0; r < nu; r++) bad += o.row_order[r] != order[r];
    CHECK_INT(bad, 0);
    CHECK(at > 0);
    lac_mf_block_data_free(&o);
    CHECK(o.row_start == NULL && o.col == NULL);
    free(order);
    free(len);
    free(local);
    free(pick);
    free_data(&d);
    free(counts);
}

TEST(stratum_order_is_a_seeded_permutation)
{
    int a[16], b[16], differs = 0;
    for (int epoch = 0; epoch < 20; epoch++) {
        lac_mf_stratum_order(7, epoch, 16, a);
        lac_mf_stratum_order(7, epoch, 16, b);
        CHECK(memcmp(a, b, sizeof a) == 0);   /* the same for a seed and epoch */
        int seen[16] = {0};
        for (int i = 0; i < 16; i++) seen[a[i]]++;
        for (int i = 0; i < 16; i++) CHECK_INT(seen[i], 1);
        lac_mf_stratum_order(8, epoch, 16, b);
        differs += memcmp(a, b, sizeof a) != 0;
    }
    CHECK(differs > 0);   /* another seed, another order */
    lac_mf_stratum_order(7, 0, 1, a);
    CHECK_INT(a[0], 0);
}

/* The neighbourhood model's implicit stream (lac_mf_schedule_negatives):
 * cells as its CUDA backend makes them (each interaction followed by its
 * negatives' cells, item the interaction's; a user without an interaction
 * but a scale, negatives' cells alone), a schedule that cuts rows into runs
 * of 7 (so that runs start among an interaction's negatives), and every
 * negative's draw against the rule written here: its interaction's key and
 * t = first, first + size, ... (lac_mf_share), as the CPU draws them. */
static void negatives_case(int share, int negatives, int scaled)
{
    static const int64_t counts[6] = {41, 17, 0, 9, 1, 23};
    lac_mf_data d = skewed_data(6, 50, counts, 11u + (unsigned)share);
    const float scale[6] = {1.0f, 0.5f, 0.7f, 1.0f, 0.0f, 2.0f};
    const float *sc = scaled ? scale : NULL;
    const int alone = (negatives + share - 1) / share;
    /* the reference: each interaction's key, first, size and count (CSR order) */
    int32_t *rkey = malloc(sizeof *rkey * (size_t)d.nnz);
    int *rfirst = malloc(sizeof *rfirst * (size_t)d.nnz), *rsize = malloc(sizeof *rsize * (size_t)d.nnz);
    int *rcnt = malloc(sizeof *rcnt * (size_t)d.nnz);
    uint64_t *rused = calloc((size_t)d.nnz, sizeof *rused), alone_used[6] = {0};
    for (int64_t u = 0; u < d.num_users; u++)
        for (int64_t a = d.row_start[u]; a < d.row_start[u + 1]; a++) {
            int64_t rank = 0;   /* among the user's items, ascending */
            for (int64_t b = d.row_start[u]; b < d.row_start[u + 1]; b++) rank += d.col[b] < d.col[a];
            const int64_t n = d.row_start[u + 1] - d.row_start[u];
            const int64_t c = rank / share, size = n - c * share < share ? n - c * share : share;
            rfirst[a] = (int)(rank - c * share);
            rsize[a] = (int)size;
            rkey[a] = share == 1 ? d.col[a] : (int32_t)c;
            rcnt[a] = sc && sc[u] <= 0.0f ? 0
                      : rfirst[a] < negatives ? (negatives - rfirst[a] + rsize[a] - 1) / rsize[a] : 0;
        }
    /* the cells */
    lac_mf_data c;
    memset(&c, 0, sizeof c);
    c.num_users = d.num_users;
    c.num_items = d.num_items;
    c.row_start = calloc((size_t)d.num_users + 1, sizeof *c.row_start);
    c.col = malloc(sizeof *c.col * (size_t)(d.nnz * (1 + negatives) + 6 * alone));
    c.val = malloc(sizeof *c.val * (size_t)(d.nnz * (1 + negatives) + 6 * alone));
    int64_t w = 0;
    for (int64_t u = 0; u < d.num_users; u++) {
        for (int64_t a = d.row_start[u]; a < d.row_start[u + 1]; a++) {
            c.col[w] = d.col[a], c.val[w++] = d.val[a];
            for (int b = 0; b < rcnt[a]; b++) c.col[w] = d.col[a], c.val[w++] = -(float)rsize[a];
        }
        if (d.row_start[u + 1] == d.row_start[u] && sc && sc[u] > 0.0f)
            for (int b = 0; b < alone; b++) c.col[w] = 0, c.val[w++] = -1.0f;
        c.row_start[u + 1] = w;
    }
    finish_data(&c);
    lac_mf_schedule_params p = params(3, 7, 6);
    lac_mf_schedule s;
    CHECK_OK(ctx, lac_mf_schedule_build(ctx, &c, &p, &s));
    CHECK_INT(s.run_max, 7);
    lac_mf_negative_cells nc;
    CHECK_OK(ctx, lac_mf_schedule_negatives(ctx, &d, &s, share, negatives, sc, &nc));
    int64_t want = 0, cut = 0;
    for (int64_t x = 0; x < s.groups * s.steps; x++) want += s.code[x] >= 0 && s.rating[x] < 0.0f;
    CHECK_INT(nc.count, want);
    for (int64_t i = 0, last = -1; i < nc.count; i++) {
        const int64_t x = nc.cell[i], u = nc.user[i];
        CHECK(x > last && s.code[x] >= 0 && s.rating[x] < 0.0f);   /* stream order, negatives only */
        last = x;
        int64_t rep;
        const int64_t j = row_item(&s, d.num_items, s.code[x] & LAC_MF_ITEM_MASK, &rep);
        cut += (s.code[x] & LAC_MF_RUN_START) != 0 && d.row_start[u + 1] > d.row_start[u];
        if (d.row_start[u + 1] == d.row_start[u]) {   /* no interaction: key -1, t = 0 .. alone - 1 */
            CHECK_INT(nc.key[i], -1);
            CHECK(nc.t[i] >= 0 && nc.t[i] < alone && !(alone_used[u] >> nc.t[i] & 1));
            if (nc.t[i] >= 0 && nc.t[i] < 64) alone_used[u] |= 1ull << nc.t[i];
            continue;
        }
        int64_t a = d.row_start[u];
        while (a < d.row_start[u + 1] && d.col[a] != j) a++;
        CHECK(a < d.row_start[u + 1]);
        if (a >= d.row_start[u + 1]) continue;
        CHECK_INT(nc.key[i], rkey[a]);
        const int b = (nc.t[i] - rfirst[a]) / rsize[a];
        CHECK(nc.t[i] >= rfirst[a] && (nc.t[i] - rfirst[a]) % rsize[a] == 0 && b < rcnt[a]);
        if (b >= 0 && b < 64) {
            CHECK(!(rused[a] >> b & 1));   /* each once */
            rused[a] |= 1ull << b;
        }
    }
    for (int64_t u = 0; u < d.num_users; u++)
        for (int64_t a = d.row_start[u]; a < d.row_start[u + 1]; a++)
            CHECK(rused[a] == (rcnt[a] >= 64 ? ~0ull : (1ull << rcnt[a]) - 1));   /* every one drawn */
    CHECK(cut > 0);   /* some run starts among an interaction's negatives */
    lac_mf_negative_cells_free(&nc);
    lac_mf_schedule_free(&s);
    free_data(&c);
    free_data(&d);
    free(rkey), free(rfirst), free(rsize), free(rcnt), free(rused);
}

TEST(negatives_draw_as_their_interaction_across_cut_runs)
{
    for (int share = 1; share <= 3; share++)
        for (int scaled = 0; scaled < 2; scaled++) {
            negatives_case(share, 4, scaled);
            negatives_case(share, 3, scaled);
        }
}

int main(void)
{
    if (!(ctx = cpu_context(2))) return 1;
    RUN(lpt_deal_matches_a_linear_scan);
    RUN(order_by_count_is_a_stable_descending_sort);
    RUN(skewed_data_every_rating_once_balanced_as_the_reference);
    RUN(hot_threshold_is_the_least_that_fits_the_budget);
    RUN(the_same_schedule_every_time);
    RUN(edge_one_user);
    RUN(edge_empty_rows);
    RUN(edge_one_giant_item);
    RUN(edge_more_groups_than_ratings);
    RUN(blocks_in_flight);
    RUN(cpu_grid_is_round_robin_in_count_order);
    RUN(block_data_is_the_users_ratings_of_the_block_renumbered);
    RUN(stratum_order_is_a_seeded_permutation);
    RUN(negatives_draw_as_their_interaction_across_cut_runs);
    lac_ctx_destroy(&ctx);
    return harness_finish();
}
