/* Implicit feedback, the front end's part: the interactions' weights, the
 * logit's range, the negatives' distribution and the correction for it
 * after training (the losses are the backends', src/mf/cpu/implicit_cpu.c). */
#include "mf/mf_internal.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>

/* Cumulative integer weights n_j^e (n_j: item j's interactions, at least 1,
 * so that every item can be drawn), scaled to about 2^40 in all: integers,
 * so that every backend draws the same items from them; with their guide
 * (lac_mf_cum_index). */
static lac_status negative_table(lac_ctx_t ctx, double exponent, lac_mf_data *d)
{
    const int64_t ni = d->num_items;
    double *w = calloc((size_t)(ni ? ni : 1), sizeof *w);
    d->neg_cum = malloc((size_t)lac_mf_cum_words(ni) * sizeof *d->neg_cum);
    if (!w || !d->neg_cum) {
        free(w);
        free(d->neg_cum);
        d->neg_cum = NULL;
        return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "out of memory for the negatives' weights of %lld items",
                         (long long)ni);
    }
    for (int64_t a = 0; a < d->nnz; a++) w[d->col[a]] += 1.0;
    double total = 0.0;
    for (int64_t j = 0; j < ni; j++) total += w[j] = pow(w[j] > 1.0 ? w[j] : 1.0, exponent);
    const double scale = 1099511627776.0 / total;   /* 2^40 */
    uint64_t c = 0;
    for (int64_t j = 0; j < ni; j++) {
        const double x = floor(w[j] * scale + 0.5);
        c += x >= 1.0 ? (uint64_t)x : 1u;
        d->neg_cum[j] = c;
    }
    lac_mf_cum_index(d->neg_cum, ni);
    free(w);
    return LAC_SUCCESS;
}

lac_status lac_mf_implicit_data(lac_ctx_t ctx, const lac_mf_params *p, lac_mf_data *d)
{
    for (int64_t a = 0; a < d->nnz; a++) {
        if (!p->weighted) {
            d->val[a] = 1.0f;
        } else if (!(d->val[a] > 0.0f)) {
            int64_t u = 0;
            while (d->row_start[u + 1] <= a) u++;
            return lac_error(ctx, LAC_ERR_VALUE, "implicit weights must be > 0: user %lld (dense index) has %g",
                             (long long)u, (double)d->val[a]);
        }
    }
    d->mean = 0.0;
    d->min = -FLT_MAX;
    d->max = FLT_MAX;
    free(d->neg_cum);
    d->neg_cum = NULL;
    const double exponent = lac_mf_negative_exponent(p);
    return exponent > 0.0 && d->num_items > 0 ? negative_table(ctx, exponent, d) : LAC_SUCCESS;
}

lac_status lac_mf_negative_correct(lac_ctx_t ctx, lac_mf_model_t m, double by)
{
    const double e = by * m->params.negative_exponent;
    if (!(e > 0.0)) return LAC_SUCCESS;
    const int64_t nnz = m->rated_start[m->num_users];
    int64_t *n = lac_calloc(ctx, (size_t)m->num_items + 1, sizeof *n);
    if (!n) return LAC_ERR_OUT_OF_MEMORY;
    for (int64_t a = 0; a < nnz; a++) n[m->rated_items[a]]++;
    for (int64_t j = 0; j < m->num_items; j++) m->item_bias[j] += (float)(e * log(n[j] > 1 ? (double)n[j] : 1.0));
    free(n);
    return LAC_SUCCESS;
}
