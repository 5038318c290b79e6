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

#include <math.h>

#define MAX_STACK_K 1024

double lac_mf_cpu_nbr_range(const lac_mf_state *s, int64_t seg_lo, int64_t seg_hi, float scale, float *seen)
{
    const lac_mf_factors *m = &s->call.factors;
    const lac_mf_data *d = s->call.data;
    const int F = m->k, S = m->stride, K = m->nbr_k;
    const lac_mf_groups *g = &s->call.rates, *l = &s->call.lambdas;
    const float gb = (float)(g->b * scale), gbh = (float)(g->bhat * scale), gu = (float)(g->u * scale),
                gv = (float)(g->v * scale), gw = (float)(g->w * scale), gc = (float)(g->c * scale);
    const float lb = (float)l->b, lbh = (float)l->bhat, lu = (float)l->u, lv = (float)l->v, lw = (float)l->w,
                lc = (float)l->c;
    const float mu = (float)m->mean;
    float resid[MAX_STACK_K];   /* K's residual, NaN for N(i) */
    double sse = 0.0;
    for (int64_t sg = seg_lo; sg < seg_hi; sg++) {
        int64_t u = s->seg_user[sg];
        for (int64_t a = d->row_start[u]; a < d->row_start[u + 1]; a++) seen[d->col[a]] = d->val[a];
        float *pu = m->P + u * S, *bu = m->user_bias + u;
        for (int64_t a = s->seg_start[sg]; a < s->seg_start[sg + 1]; a++) {
            int32_t j = s->item[a];
            float *qv = m->Q + (int64_t)j * S, *w = m->W + (int64_t)j * K, *c = m->C + (int64_t)j * K;
            const int32_t *nb = m->nbr + (int64_t)j * K;
            float dot = 0.0f;
            for (int f = 0; f < F; f++) dot += pu[f] * qv[f];
            float base = mu + *bu, sr = 0.0f, sc = 0.0f;
            int nr = 0;
            for (int k = 0; k < K; k++) {
                float x = seen[nb[k]];
                if (x == x) {
                    resid[k] = x - base - s->bhat_epoch[nb[k]];
                    sr += resid[k] * w[k];
                    nr++;
                } else {
                    resid[k] = NAN;
                    sc += c[k];
                }
            }
            int nc = K - nr;
            float rr = nr ? 1.0f / sqrtf((float)nr) : 0.0f, rc = nc ? 1.0f / sqrtf((float)nc) : 0.0f;
            float e = s->val[a] - (base + m->item_bias[j] + dot + sr * rr + sc * rc);
            sse += (double)e * e;
            *bu += gb * (e - lb * *bu);
            m->item_bias[j] += gbh * (e - lbh * m->item_bias[j]);
            for (int f = 0; f < F; f++) {
                float pf = pu[f], qf = qv[f];
                pu[f] = pf + gu * (e * qf - lu * pf);
                qv[f] = qf + gv * (e * pf - lv * qf);
            }
            float er = e * rr, ec = e * rc;
            for (int k = 0; k < K; k++) {
                if (resid[k] == resid[k]) w[k] += gw * (er * resid[k] - lw * w[k]);
                else c[k] += gc * (ec - lc * c[k]);
            }
        }
        for (int64_t a = d->row_start[u]; a < d->row_start[u + 1]; a++) seen[d->col[a]] = NAN;
    }
    return sse;
}
