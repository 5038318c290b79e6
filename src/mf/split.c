/* Seeded holdout split of ratings into train and test, random or per user;
 * both halves keep the original order and the same id maps. */
#include "mf/mf_internal.h"
#include "core/random.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static lac_mf_split_params mf_split_defaults(void)
{
    lac_mf_split_params p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    p.fraction = 0.1;
    p.seed = 1;
    return p;
}

LAC_PARAMS_INIT(lac_mf_split_params, mf_split_defaults())

static double unit(uint64_t seed, uint64_t i) { return (double)(lac_mix64(seed * 0x9e3779b97f4a7c15ull + i + 1) >> 11) * 0x1.0p-53; }

lac_status lac_mf_split(lac_ctx_t ctx, const lac_mf_split_params *params, lac_ratings_t r, lac_ratings_t *train,
                        lac_ratings_t *test)
{
    LAC_ARG_NOT_NULL(ctx, params);
    LAC_ARG_NOT_NULL(ctx, r);
    LAC_ARG_NOT_NULL(ctx, train);
    LAC_ARG_NOT_NULL(ctx, test);
    LAC_ADOPT_PARAMS(ctx, "split", lac_mf_split_params, params, mf_split_defaults());
    if (!params->leave_last && !(params->fraction > 0.0 && params->fraction < 1.0))
        return lac_error(ctx, LAC_ERR_ARGUMENT, "split fraction %g must be in (0, 1)", params->fraction);
    int64_t n = r->count;
    lac_status st = LAC_SUCCESS;
    unsigned char *to_test = lac_calloc(ctx, (size_t)(n ? n : 1), 1);
    lac_ratings_t a = NULL, b = NULL;
    if (!to_test) return LAC_ERR_OUT_OF_MEMORY;
    if (params->leave_last) {
        /* the rating of each user with the largest timestamp (no timestamp
         * counts as older than any; ties: the later line) */
        int64_t nu = r->users.count, *last = lac_malloc(ctx, (size_t)(nu ? nu : 1) * sizeof *last),
                *count = lac_calloc(ctx, (size_t)(nu ? nu : 1), sizeof *count);
        if (!last || !count) {
            free(last);
            free(count);
            free(to_test);
            return LAC_ERR_OUT_OF_MEMORY;
        }
        for (int64_t i = 0; i < n; i++) {
            int64_t u = r->user[i];
            double t = r->time ? r->time[i] : NAN, b = count[u] && r->time ? r->time[last[u]] : NAN;
            int later = isnan(t) ? isnan(b) : isnan(b) || t >= b;
            if (!count[u]++ || later) last[u] = i;
        }
        for (int64_t u = 0; u < nu; u++)
            if (count[u] > 1) to_test[last[u]] = 1;
        free(last);
        free(count);
    } else if (!params->per_user) {
        for (int64_t i = 0; i < n; i++) to_test[i] = unit(params->seed, (uint64_t)i) < params->fraction;
    } else {
        /* each user's ratings in a seeded random order; the first
         * round(fraction * count) of them go to test, never all of them */
        int64_t nu = r->users.count;
        int64_t *start = lac_calloc(ctx, (size_t)nu + 1, sizeof *start);
        int64_t *idx = lac_malloc(ctx, (size_t)(n ? n : 1) * sizeof *idx);
        double *key = lac_malloc(ctx, (size_t)(n ? n : 1) * sizeof *key);
        if (!start || !idx || !key) {
            free(start);
            free(idx);
            free(key);
            free(to_test);
            return LAC_ERR_OUT_OF_MEMORY;
        }
        for (int64_t i = 0; i < n; i++) start[r->user[i] + 1]++;
        for (int64_t u = 0; u < nu; u++) start[u + 1] += start[u];
        int64_t *fill = lac_malloc(ctx, (size_t)(nu ? nu : 1) * sizeof *fill);
        if (!fill) {
            free(start);
            free(idx);
            free(key);
            free(to_test);
            return LAC_ERR_OUT_OF_MEMORY;
        }
        memcpy(fill, start, (size_t)nu * sizeof *fill);
        for (int64_t i = 0; i < n; i++) {
            idx[fill[r->user[i]]++] = i;
            key[i] = unit(params->seed, (uint64_t)i);
        }
        free(fill);
        for (int64_t u = 0; u < nu; u++) {
            int64_t c = start[u + 1] - start[u];
            int64_t take = (int64_t)llround(params->fraction * (double)c);
            if (take >= c) take = c - 1;
            /* the `take` smallest keys: a partial selection sort (users are small) */
            for (int64_t t = 0; t < take; t++) {
                int64_t best = start[u] + t;
                for (int64_t x = best + 1; x < start[u + 1]; x++)
                    if (key[idx[x]] < key[idx[best]]) best = x;
                int64_t tmp = idx[best];
                idx[best] = idx[start[u] + t];
                idx[start[u] + t] = tmp;
                to_test[tmp] = 1;
            }
        }
        free(start);
        free(idx);
        free(key);
    }
    int64_t nt = 0;
    for (int64_t i = 0; i < n; i++) nt += to_test[i];
    LAC_CHECK_GOTO(lac_ratings_new(ctx, n - nt, &a), st, fail);
    LAC_CHECK_GOTO(lac_ratings_new(ctx, nt, &b), st, fail);
    LAC_CHECK_GOTO(lac_idmap_copy(ctx, &r->users, &a->users), st, fail);
    LAC_CHECK_GOTO(lac_idmap_copy(ctx, &r->items, &a->items), st, fail);
    LAC_CHECK_GOTO(lac_idmap_copy(ctx, &r->users, &b->users), st, fail);
    LAC_CHECK_GOTO(lac_idmap_copy(ctx, &r->items, &b->items), st, fail);
    for (int64_t i = 0; i < n; i++)
        LAC_CHECK_GOTO(lac_ratings_push(ctx, to_test[i] ? b : a, r->user[i], r->item[i], r->value[i]), st, fail);
    free(to_test);
    *train = a;
    *test = b;
    return LAC_SUCCESS;
fail:
    free(to_test);
    lac_ratings_destroy(&a);
    lac_ratings_destroy(&b);
    return st;
}
