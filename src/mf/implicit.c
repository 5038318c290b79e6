/* Implicit feedback, the front end's part: the interactions' weights and
 * the logit's range (the losses are the backends', src/mf/cpu/implicit_cpu.c). */
#include "mf/mf_internal.h"

#include <float.h>
#include <math.h>

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
    return LAC_SUCCESS;
}
