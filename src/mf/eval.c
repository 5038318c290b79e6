/* Predictions of an evaluation set from a model's factors, on the host:
 * clamped to the training range, RMSE and MAE summed in a fixed order. Used by
 * predict (src/mf/predict.c) and by the CPU backend's validation. */
#include "mf/mf_backend.h"

#include <math.h>
#include <stdlib.h>

#define EVAL_CHUNK 65536

float lac_mf_nbr_term(const lac_mf_factors *m, int64_t u, int64_t j, const float *seen)
{
    const int32_t *items = m->rated_items + m->rated_start[u];
    const float *vals = m->rated_vals + m->rated_start[u];
    int64_t len = m->rated_start[u + 1] - m->rated_start[u];
    int K = m->nbr_k, nr = 0, nc = 0;
    float base = (float)m->mean + m->user_bias[u], sr = 0.0f, sc = 0.0f;
    const int32_t *nb = m->nbr + j * K;
    const float *w = m->W + j * K, *c = m->C + j * K;
    for (int k = 0; k < K; k++) {
        int32_t n = nb[k];
        float r = NAN;
        if (seen) {
            r = seen[n];
        } else {
            int64_t lo = 0, hi = len;   /* n among the user's items (ascending) */
            while (lo < hi) {
                int64_t mid = (lo + hi) / 2;
                if (items[mid] < n) lo = mid + 1;
                else hi = mid;
            }
            if (lo < len && items[lo] == n) r = vals[lo];
        }
        if (r == r) {
            sr += (r - base - m->item_bias[n]) * w[k];
            nr++;
        } else {
            sc += c[k];
            nc++;
        }
    }
    float t = 0.0f;
    if (nr) t += sr / sqrtf((float)nr);
    if (nc) t += sc / sqrtf((float)nc);
    return t;
}

/* Predictions from m (given is NULL) or the given ones, summed in fixed
 * chunks. */
static lac_status eval_sums(lac_ctx_t ctx, const lac_mf_factors *m, const float *given, const lac_mf_eval *e,
                            float *predictions, double *rmse, double *mae)
{
    int64_t chunks = (e->count + EVAL_CHUNK - 1) / EVAL_CHUNK;
    double *part = lac_calloc(ctx, (size_t)(chunks ? chunks : 1) * 2, sizeof *part);
    if (!part) return LAC_ERR_OUT_OF_MEMORY;
#pragma omp parallel for num_threads(lac_threads(ctx)) schedule(dynamic, 1)
    for (int64_t c = 0; c < chunks; c++) {
        double sq = 0.0, ab = 0.0;
        int64_t end = (c + 1) * EVAL_CHUNK < e->count ? (c + 1) * EVAL_CHUNK : e->count;
        for (int64_t i = c * EVAL_CHUNK; i < end; i++) {
            float s;
            if (given) {
                s = given[i];
            } else {
                s = lac_mf_factors_score(m, e->user[i], e->item[i]);
                s = s < m->rating_min ? m->rating_min : s > m->rating_max ? m->rating_max : s;
            }
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

lac_status lac_mf_eval_factors(lac_ctx_t ctx, const lac_mf_factors *m, const lac_mf_eval *e, float *predictions,
                               double *rmse, double *mae)
{
    return eval_sums(ctx, m, NULL, e, predictions, rmse, mae);
}

lac_status lac_mf_eval_reduce(lac_ctx_t ctx, const lac_mf_eval *e, const float *predictions, double *rmse, double *mae)
{
    return eval_sums(ctx, NULL, predictions, e, NULL, rmse, mae);
}
