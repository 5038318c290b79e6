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

#define EVAL_CHUNK 65536

lac_status lac_mf_eval_host(lac_ctx_t ctx, lac_mf_model_t m, const lac_mf_eval *e, float *predictions, double *rmse,
                            double *mae)
{
    int64_t chunks = (e->count + EVAL_CHUNK - 1) / EVAL_CHUNK;
    double *part = lac_calloc(ctx, (size_t)(chunks ? chunks : 1) * 2, sizeof *part);
    if (!part) return LAC_ERR_OUT_OF_MEMORY;
#pragma omp parallel for num_threads(lac_threads(ctx)) schedule(dynamic, 1)
    for (int64_t c = 0; c < chunks; c++) {
        double sq = 0.0, ab = 0.0;
        int64_t end = (c + 1) * EVAL_CHUNK < e->count ? (c + 1) * EVAL_CHUNK : e->count;
        for (int64_t i = c * EVAL_CHUNK; i < end; i++) {
            float s = lac_mf_score(m, e->user[i], e->item[i]);
            s = s < m->rating_min ? m->rating_min : s > m->rating_max ? m->rating_max : s;
            if (predictions) predictions[i] = s;
            double d = (double)e->val[i] - (double)s;
            sq += d * d;
            ab += fabs(d);
        }
        part[2 * c] = sq;
        part[2 * c + 1] = ab;
    }
    double sq = 0.0, ab = 0.0;
    for (int64_t c = 0; c < chunks; c++) {
        sq += part[2 * c];
        ab += part[2 * c + 1];
    }
    free(part);
    double n = e->count ? (double)e->count : 1.0;
    if (rmse) *rmse = e->count ? sqrt(sq / n) : NAN;
    if (mae) *mae = e->count ? ab / n : NAN;
    return LAC_SUCCESS;
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
