/* Ranking metrics (HR, NDCG, precision, recall, MAP at n) of a model on test
 * pairs: the sampled-negatives protocol of Neural Collaborative Filtering and
 * full ranking (lacuna.h says how each figure is defined). Per-user figures
 * are summed in user order: the same result for any thread count. */
#include "core/random.h"
#include "mf/mf_internal.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

static lac_mf_rank_params rank_defaults(void)
{
    lac_mf_rank_params p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    p.n = 10;
    p.negatives = 99;
    p.seed = 1;
    return p;
}

LAC_PARAMS_INIT(lac_mf_rank_params, rank_defaults())

enum { HR, NDCG, PREC, REC, AP, FIGURES };

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static int has(const int32_t *sorted, int64_t n, int32_t j)
{
    return n > 0 && bsearch(&j, sorted, (size_t)n, sizeof j, cmp_i32) != NULL;
}

/* Full ranking: the user's top n (from recommend) against its test items. */
static void full_figures(const int64_t *top, int n, const int32_t *rel, int64_t nrel, double *f)
{
    double dcg = 0, idcg = 0, ap = 0;
    int64_t hits = 0;
    for (int r = 0; r < n; r++) {
        if (r < nrel) idcg += 1.0 / log2(r + 2.0);
        if (top[r] < 0 || !has(rel, nrel, (int32_t)top[r])) continue;
        hits++;
        dcg += 1.0 / log2(r + 2.0);
        ap += (double)hits / (r + 1.0);
    }
    f[HR] = hits > 0;
    f[NDCG] = dcg / idcg;
    f[PREC] = (double)hits / n;
    f[REC] = (double)hits / (double)nrel;
    f[AP] = ap / (double)(nrel < n ? nrel : n);
}

/* Sampled negatives: each test item against `negatives` items the user did
 * not rate and does not have in test. mark: num_items stamps of this thread. */
static void sampled_figures(lac_mf_model_t m, const lac_mf_rank_params *p, int64_t u, const int32_t *rel, int64_t nrel,
                            int64_t *mark, int64_t *stamp, int32_t *pool, double *f)
{
    const int32_t *rated = m->rated_items + m->rated_start[u];
    int64_t nrated = m->rated_start[u + 1] - m->rated_start[u];
    memset(f, 0, FIGURES * sizeof *f);
    for (int64_t t = 0; t < nrel; t++) {
        int64_t s = ++*stamp;   /* marks this case's excluded and chosen items */
        for (int64_t a = 0; a < nrated; a++) mark[rated[a]] = s;
        for (int64_t a = 0; a < nrel; a++) mark[rel[a]] = s;
        int64_t free_items = m->num_items - nrated - nrel, count = 0;
        if (free_items <= 2 * (int64_t)p->negatives) {
            /* few left: all of them, or a seeded partial shuffle of them */
            for (int64_t j = 0; j < m->num_items; j++)
                if (mark[j] != s) pool[count++] = (int32_t)j;
            uint64_t st = lac_mix64(p->seed ^ ((uint64_t)u * 0x9e3779b97f4a7c15ull) ^ ((uint64_t)rel[t] << 32));
            int64_t want = count < p->negatives ? count : p->negatives;
            for (int64_t a = 0; a < want; a++) {
                int64_t b = a + (int64_t)(lac_splitmix64(&st) % (uint64_t)(count - a));
                int32_t x = pool[a];
                pool[a] = pool[b];
                pool[b] = x;
            }
            count = want;
        } else {
            uint64_t st = lac_mix64(p->seed ^ ((uint64_t)u * 0x9e3779b97f4a7c15ull) ^ ((uint64_t)rel[t] << 32));
            while (count < p->negatives) {
                int64_t j = (int64_t)(lac_splitmix64(&st) % (uint64_t)m->num_items);
                if (mark[j] == s) continue;
                mark[j] = s;
                pool[count++] = (int32_t)j;
            }
        }
        float target = lac_mf_score(m, u, rel[t]);
        int64_t r = 0;
        for (int64_t a = 0; a < count; a++) r += lac_mf_score(m, u, pool[a]) >= target;
        if (r < p->n) {
            f[HR] += 1;
            f[NDCG] += 1.0 / log2(r + 2.0);
            f[PREC] += 1.0 / p->n;
            f[REC] += 1;
            f[AP] += 1.0 / (r + 1.0);
        }
    }
    for (int g = 0; g < FIGURES; g++) f[g] /= (double)nrel;
}

lac_status lac_mf_rank_users(lac_ctx_t ctx, const lac_mf_rank_params *params, lac_mf_model_t m, lac_ratings_t test,
                             lac_mf_rank_report *report, double **user_ndcg)
{
    LAC_ARG_NOT_NULL(ctx, ctx);
    LAC_ARG_NOT_NULL(ctx, params);
    LAC_ARG_NOT_NULL(ctx, m);
    LAC_ARG_NOT_NULL(ctx, test);
    LAC_ARG_NOT_NULL(ctx, report);
    LAC_ADOPT_PARAMS(ctx, "mf rank", lac_mf_rank_params, params, rank_defaults());
    if (params->n < 1) return lac_error(ctx, LAC_ERR_ARGUMENT, "n = %d: must be >= 1", params->n);
    if (params->negatives < 0)
        return lac_error(ctx, LAC_ERR_ARGUMENT, "negatives = %d: must be >= 0 (0: full ranking)", params->negatives);
    lac_mf_eval e;
    LAC_CHECK(lac_mf_eval_map(ctx, m, test, &e));
    lac_status st = LAC_SUCCESS;
    int64_t nu = m->num_users, kept = 0, skipped = 0;
    int64_t *start = lac_calloc(ctx, (size_t)nu + 2, sizeof *start);
    int64_t *count = lac_malloc(ctx, ((size_t)nu + 1) * sizeof *count);   /* distinct test items of a user */
    int32_t *rel = lac_malloc(ctx, (size_t)(e.count ? e.count : 1) * sizeof *rel);
    double *fig = NULL;
    int64_t *users = NULL, *top = NULL;
    if (!start || !rel || !count) {
        st = LAC_ERR_OUT_OF_MEMORY;
        goto done;
    }
    /* each user's test items, known and not rated in training, ascending, once */
    for (int64_t i = 0; i < e.count; i++) {
        int32_t u = e.user[i], j = e.item[i];
        int ok = u >= 0 && j >= 0 && !has(m->rated_items + m->rated_start[u], m->rated_start[u + 1] - m->rated_start[u], j);
        if (ok) start[u + 2]++;
        else skipped++, e.user[i] = -1;
    }
    for (int64_t u = 0; u < nu; u++) start[u + 2] += start[u + 1];
    for (int64_t i = 0; i < e.count; i++)
        if (e.user[i] >= 0) rel[start[e.user[i] + 1]++] = e.item[i];
    int64_t evaluated = 0;
    for (int64_t u = 0; u < nu; u++) {
        int64_t a = start[u], b = start[u + 1], w = a;
        qsort(rel + a, (size_t)(b - a), sizeof *rel, cmp_i32);
        for (int64_t x = a; x < b; x++)
            if (x == a || rel[x] != rel[x - 1]) rel[w++] = rel[x];
        skipped += b - w;   /* a pair given twice counts once */
        count[u] = w - a;
        kept += w - a;
        evaluated += w > a;
    }
    users = lac_malloc(ctx, (size_t)(evaluated ? evaluated : 1) * sizeof *users);
    fig = lac_calloc(ctx, (size_t)(evaluated ? evaluated : 1) * FIGURES, sizeof *fig);
    if (!users || !fig) {
        st = LAC_ERR_OUT_OF_MEMORY;
        goto done;
    }
    evaluated = 0;
    for (int64_t u = 0; u < nu; u++)
        if (count[u] > 0) users[evaluated++] = u;
    int n = params->n;
    if (params->negatives == 0) {
        top = lac_malloc(ctx, (size_t)(evaluated ? evaluated : 1) * (size_t)n * sizeof *top);
        if (!top) {
            st = LAC_ERR_OUT_OF_MEMORY;
            goto done;
        }
        LAC_CHECK_GOTO(lac_mf_recommend(ctx, m, evaluated, users, n, top, NULL), st, done);
    }
    int threads = lac_threads(ctx), failed = 0;
#pragma omp parallel num_threads(threads)
    {
        int64_t *mark = NULL, stamp = 0;
        int32_t *pool = NULL;
        if (params->negatives > 0) {
            mark = calloc((size_t)(m->num_items ? m->num_items : 1), sizeof *mark);
            pool = malloc((size_t)(m->num_items ? m->num_items : 1) * sizeof *pool);
            if (!mark || !pool) {
#pragma omp atomic write
                failed = 1;
            }
        }
#pragma omp for schedule(dynamic, 16)
        for (int64_t x = 0; x < evaluated; x++) {
            int64_t u = users[x], a = start[u], nrel = count[u];
            if (params->negatives == 0) full_figures(top + x * n, n, rel + a, nrel, fig + x * FIGURES);
            else if (mark && pool) sampled_figures(m, params, u, rel + a, nrel, mark, &stamp, pool, fig + x * FIGURES);
        }
        free(mark);
        free(pool);
    }
    if (failed) {
        st = LAC_ERR_OUT_OF_MEMORY;
        goto done;
    }
    lac_mf_rank_report rep;
    memset(&rep, 0, sizeof rep);
    double sum[FIGURES] = {0};
    for (int64_t x = 0; x < evaluated; x++)
        for (int g = 0; g < FIGURES; g++) sum[g] += fig[x * FIGURES + g];
    double users_d = evaluated ? (double)evaluated : NAN;
    rep.hr = sum[HR] / users_d;
    rep.ndcg = sum[NDCG] / users_d;
    rep.precision = sum[PREC] / users_d;
    rep.recall = sum[REC] / users_d;
    rep.map = sum[AP] / users_d;
    rep.users = evaluated;
    rep.pairs = kept;
    rep.skipped = skipped;
    *report = rep;
    if (user_ndcg) {   /* the figures' NDCG column, in user order */
        for (int64_t x = 0; x < evaluated; x++) fig[x] = fig[x * FIGURES + NDCG];
        *user_ndcg = fig;
        fig = NULL;
    }
done:
    free(start);
    free(count);
    free(rel);
    free(fig);
    free(users);
    free(top);
    lac_mf_eval_free(&e);
    return st;
}

lac_status lac_mf_rank_evaluate(lac_ctx_t ctx, const lac_mf_rank_params *params, lac_mf_model_t m, lac_ratings_t test,
                                lac_mf_rank_report *report)
{
    return lac_mf_rank_users(ctx, params, m, test, report, NULL);
}
