/* Predictions for a ratings file: ids mapped through the model's maps,
 * predictions clamped to the training range, RMSE/MAE in a fixed order. */
#include "mf/mf_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void lac_mf_eval_free(lac_mf_eval *e)
{
    if (!e) return;
    free(e->user);
    free(e->item);
    free(e->val);
    memset(e, 0, sizeof *e);
}

/* Translation of one id map into another: -1 for ids the target lacks. */
static int32_t *translate(lac_ctx_t ctx, const lac_idmap *from, const lac_idmap *to)
{
    int32_t *t = lac_malloc(ctx, (size_t)(from->count ? from->count : 1) * sizeof *t);
    if (!t) return NULL;
    for (int64_t i = 0; i < from->count; i++) {
        const char *name = lac_idmap_name(from, i);
        t[i] = (int32_t)lac_idmap_find(to, name, strlen(name));
    }
    return t;
}

lac_status lac_mf_eval_map(lac_ctx_t ctx, lac_mf_model_t m, lac_ratings_t r, lac_mf_eval *out)
{
    lac_mf_eval e;
    memset(&e, 0, sizeof e);
    e.count = r->count;
    int32_t *tu = translate(ctx, &r->users, &m->users);
    int32_t *ti = translate(ctx, &r->items, &m->items);
    size_t n = (size_t)(r->count ? r->count : 1);
    e.user = lac_malloc(ctx, n * sizeof *e.user);
    e.item = lac_malloc(ctx, n * sizeof *e.item);
    e.val = lac_malloc(ctx, n * sizeof *e.val);
    if (!tu || !ti || !e.user || !e.item || !e.val) {
        free(tu);
        free(ti);
        lac_mf_eval_free(&e);
        return LAC_ERR_OUT_OF_MEMORY;
    }
    for (int64_t i = 0; i < r->count; i++) {
        e.user[i] = tu[r->user[i]];
        e.item[i] = ti[r->item[i]];
        e.val[i] = r->value[i];
        e.unknown += e.user[i] < 0 || e.item[i] < 0;
    }
    free(tu);
    free(ti);
    *out = e;
    return LAC_SUCCESS;
}

lac_status lac_mf_eval_host(lac_ctx_t ctx, lac_mf_model_t m, const lac_mf_eval *e, float *predictions, double *rmse,
                            double *mae)
{
    lac_mf_factors f = lac_mf_model_factors(m);
    return lac_mf_eval_factors(ctx, &f, e, predictions, rmse, mae);
}

lac_status lac_mf_predict(lac_ctx_t ctx, lac_mf_model_t model, lac_ratings_t ratings, float *predictions,
                          double *rmse, double *mae, int64_t *unknown)
{
    LAC_ARG_NOT_NULL(ctx, ctx);
    LAC_ARG_NOT_NULL(ctx, model);
    LAC_ARG_NOT_NULL(ctx, ratings);
    lac_mf_eval e;
    LAC_CHECK(lac_mf_eval_map(ctx, model, ratings, &e));
    double r = NAN, a = NAN;
    lac_status st = lac_mf_eval_host(ctx, model, &e, predictions, &r, &a);
    if (st == LAC_SUCCESS) {
        if (rmse) *rmse = r;
        if (mae) *mae = a;
        if (unknown) *unknown = e.unknown;
    }
    lac_mf_eval_free(&e);
    return st;
}
