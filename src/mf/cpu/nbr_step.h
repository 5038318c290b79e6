/* The CPU kernels' prediction and update rule (5) for one (user, item) pair,
 * shared by the explicit neighbourhood kernel (sgd_nbr_cpu.c: e = r - r_hat)
 * and the implicit-feedback epochs (implicit_cpu.c: e from the loss): the
 * plain rule, or eq. (1) with R^K's residuals taken from the user's dense
 * row `seen` (NaN elsewhere) and bhat at the epoch's start. */
#ifndef LACUNA_MF_CPU_NBR_STEP_H
#define LACUNA_MF_CPU_NBR_STEP_H

#include "mf/mf_backend.h"

#include <math.h>

#define LAC_MF_NBR_MAX_K 1024   /* the residuals of S^K(j) live on the stack */

typedef struct {
    const lac_mf_factors *m;
    const float *bhat_epoch;
    float lr, shrink, shrink_b;   /* plain: rule (5) as in sgd_cpu.c */
    float g[6], l[6];             /* neighbourhood: per-group rates (scaled) and lambdas */
    int use_bias;
} lac_mf_step_consts;

/* r_hat(u, j); for the neighbourhood model also the residuals of S^K(j)
 * (NaN for N(i)) and the two normalisers, for lac_mf_step(). */
static inline float lac_mf_step_predict(const lac_mf_step_consts *c, int64_t u, int32_t j, const float *seen,
                                        float *resid, float *rr, float *rc)
{
    const lac_mf_factors *m = c->m;
    const int F = m->k, S = m->stride, K = m->nbr_k;
    const float *pu = m->P + u * S, *qv = m->Q + (int64_t)j * S;
    float dot = 0.0f;
    for (int f = 0; f < F; f++) dot += pu[f] * qv[f];
    float base = (float)m->mean + (c->use_bias || K ? m->user_bias[u] : 0.0f);
    float s = base + (c->use_bias || K ? m->item_bias[j] : 0.0f) + dot;
    if (!K) return s;
    const int32_t *nb = m->nbr + (int64_t)j * K;
    const float *w = m->W + (int64_t)j * K, *cc = m->C + (int64_t)j * K;
    float sr = 0.0f, sc = 0.0f;
    int nr = 0;
    for (int k = 0; k < K; k++) {
        float x = seen[nb[k]];
        if (x == x) {
            resid[k] = x - base - c->bhat_epoch[nb[k]];
            sr += resid[k] * w[k];
            nr++;
        } else {
            resid[k] = NAN;
            sc += cc[k];
        }
    }
    *rr = nr ? 1.0f / sqrtf((float)nr) : 0.0f;
    *rc = nr < K ? 1.0f / sqrtf((float)(K - nr)) : 0.0f;
    return s + sr * *rr + sc * *rc;
}

/* Rule (5) for (u, j) with error e. */
static inline void lac_mf_step(const lac_mf_step_consts *c, int64_t u, int32_t j, float e, const float *resid,
                               float rr, float rc)
{
    const lac_mf_factors *m = c->m;
    const int F = m->k, S = m->stride, K = m->nbr_k;
    float *pu = m->P + u * S, *qv = m->Q + (int64_t)j * S;
    if (!K) {
        float st = c->lr * e;
        if (c->use_bias) {
            m->user_bias[u] = c->shrink_b * m->user_bias[u] + st;
            m->item_bias[j] = c->shrink_b * m->item_bias[j] + st;
        }
        for (int f = 0; f < F; f++) {
            float pf = pu[f], qf = qv[f];
            pu[f] = c->shrink * pf + st * qf;
            qv[f] = c->shrink * qf + st * pf;
        }
        return;
    }
    const float *g = c->g, *l = c->l;
    m->user_bias[u] += g[0] * (e - l[0] * m->user_bias[u]);
    m->item_bias[j] += g[1] * (e - l[1] * m->item_bias[j]);
    for (int f = 0; f < F; f++) {
        float pf = pu[f], qf = qv[f];
        pu[f] = pf + g[2] * (e * qf - l[2] * pf);
        qv[f] = qf + g[3] * (e * pf - l[3] * qf);
    }
    float *w = m->W + (int64_t)j * K, *cc = m->C + (int64_t)j * K;
    float er = e * rr, ec = e * rc;
    for (int k = 0; k < K; k++) {
        if (resid[k] == resid[k]) w[k] += g[4] * (er * resid[k] - l[4] * w[k]);
        else cc[k] += g[5] * (ec - l[5] * cc[k]);
    }
}

#endif
