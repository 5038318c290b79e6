/* CPU backend of mf: SGD for the neighbourhood model (CULSH-MF, eq. 1 with
 * update rule 5 for b_i, bhat_j, u_i, v_j, w_j and c_j), on the same layout and
 * schedules as the plain model (backend_cpu.c, sgd_cpu.c). A user's ratings
 * are written into the thread's dense row `seen` (NaN where the user has no
 * rating) when its segment starts, so that each neighbour of S^K(j) is found
 * in R(i) or N(i) (the complement) with one load; the residuals
 * r_{i,j1} - mu - b_i - bhat_j1 take bhat at the epoch's start, so that
 * another thread's item updates never change what a user sees (the
 * deterministic schedule stays deterministic). O(F + K) per rating. */
#include "mf/cpu/mf_cpu.h"
#include "mf/cpu/nbr_step.h"

#include <math.h>

double lac_mf_cpu_nbr_range(const lac_mf_state *s, int64_t seg_lo, int64_t seg_hi, float scale, float *seen)
{
    const lac_mf_data *d = s->call.data;
    lac_mf_step_consts c;
    c.m = &s->call.factors;
    c.bhat_epoch = s->bhat_epoch;
    c.use_bias = 1;
    c.lr = c.shrink = c.shrink_b = 0.0f;   /* the plain rule's, unused */
    const double *rates = &s->call.rates.b, *lambdas = &s->call.lambdas.b;
    for (int g = 0; g < 6; g++) {
        c.g[g] = (float)(rates[g] * scale);
        c.l[g] = (float)lambdas[g];
    }
    float resid[LAC_MF_NBR_MAX_K], rr = 0.0f, rc = 0.0f;   /* K's residuals, NaN for N(i) */
    double sse = 0.0;
    for (int64_t sg = seg_lo; sg < seg_hi; sg++) {
        int64_t u = s->seg_user[sg];
        for (int64_t a = d->row_start[u]; a < d->row_start[u + 1]; a++) seen[d->col[a]] = d->val[a];
        for (int64_t a = s->seg_start[sg]; a < s->seg_start[sg + 1]; a++) {
            int32_t j = s->item[a];
            float e = s->val[a] - lac_mf_step_predict(&c, u, j, seen, resid, &rr, &rc);
            sse += (double)e * e;
            lac_mf_step(&c, u, j, e, resid, rr, rc);
        }
        for (int64_t a = d->row_start[u]; a < d->row_start[u + 1]; a++) seen[d->col[a]] = NAN;
    }
    return sse;
}
