/* Predictions of an evaluation set from a model's factors, on the host:
 * clamped to the training range, RMSE and MAE summed in a fixed order. Used by
 * predict (src/mf/predict.c) and by the CPU backend's validation. */
#include "mf/mf_backend.h"

#include <math.h>
#include <stdlib.h>

#define EVAL_CHUNK 65536

lac_status lac_mf_eval_factors(lac_ctx_t ctx, const lac_mf_factors *m, const lac_mf_eval *e, float *predictions,
                               double *rmse, double *mae)
{
    int64_t chunks = (e->count + EVAL_CHUNK - 1) / EVAL_CHUNK;
    double *part = lac_calloc(ctx, (size_t)(chunks ? chunks : 1) * 2, sizeof *part);
    if (!part) return LAC_ERR_OUT_OF_MEMORY;
#pragma omp parallel for num_threads(lac_threads(ctx)) schedule(dynamic, 1)
    for (int64_t c = 0; c < chunks; c++) {
        double sq = 0.0, ab = 0.0;
        int64_t end = (c + 1) * EVAL_CHUNK < e->count ? (c + 1) * EVAL_CHUNK : e->count;
        for (int64_t i = c * EVAL_CHUNK; i < end; i++) {
            float s = lac_mf_factors_score(m, e->user[i], e->item[i]);
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
