/* Hyper-parameters from the data: a held-out share of the training ratings,
 * line searches over lambda, alpha and k with trials that stop early on it.
 * The defaults were tuned on generated data; real, sparse data wants more
 * regularisation (docs/mf.md, "Chosen from the data"). Trials start from
 * cold: started warm from the best model so far (early-stopped, so at its
 * best), a trial with more regularisation never beat it and the search kept
 * the defaults (measured on the MovieLens-100k shape, docs/mf.md). */
#include "mf/mf_internal.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#define TUNE_MIN_RATINGS 100
#define TUNE_K_MIN 4
#define TUNE_K_MAX 256

static lac_mf_tune_params tune_defaults(void)
{
    lac_mf_tune_params p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    p.search = LAC_MF_TUNE_K | LAC_MF_TUNE_LAMBDA | LAC_MF_TUNE_ALPHA;
    p.holdout = 0.1;
    p.seed = 1;
    return p;
}

LAC_PARAMS_INIT(lac_mf_tune_params, tune_defaults())

typedef struct {
    lac_ctx_t ctx;
    lac_ratings_t fit, hold;
    lac_mf_params best;           /* the best trial's parameters */
    double best_rmse;
    int best_epochs;              /* the best trial's best epoch */
    lac_mf_tune_report *rep;
} search;

/* Trains p on the fit share; it becomes the best when its held-out RMSE
 * beats the best by more than min_gain. A diverged trial loses. */
static lac_status trial(search *s, const lac_mf_params *p, int *better)
{
    lac_mf_model_t m = NULL;
    lac_mf_report r;
    *better = 0;
    lac_status st = lac_mf_train(s->ctx, p, s->fit, s->hold, NULL, NULL, &m, &r);
    double rmse = INFINITY;
    if (st == LAC_ERR_VALUE) {   /* diverged (the data are known not to be empty) */
        lac_clear_error(s->ctx);
        r.best_epoch = 0;
    } else if (st != LAC_SUCCESS) {
        return st;
    } else {
        rmse = r.valid_rmse;
    }
    lac_mf_tune_report *rep = s->rep;
    if (rep->trials < LAC_MF_TUNE_MAX_TRIALS)
        rep->trial[rep->trials] = (lac_mf_tune_trial){p->k, p->lambda, p->alpha, rmse, r.best_epoch};
    rep->trials++;
    lac_log(s->ctx, LAC_LOG_INFO, "mf tune: k %d lambda %g alpha %g: held-out RMSE %.5f at epoch %d", p->k,
            p->lambda, p->alpha, rmse, r.best_epoch);
    lac_mf_model_destroy(&m);
    if (rmse < s->best_rmse * (1.0 - p->min_gain)) {
        s->best = *p;
        s->best_rmse = rmse;
        s->best_epochs = r.best_epoch;
        *better = 1;
    }
    return LAC_SUCCESS;
}

/* One of k, lambda, alpha of p times `by`; 0 when it leaves the range. */
static int step(lac_mf_params *p, int what, double by)
{
    if (what == LAC_MF_TUNE_K) {
        int k = (int)lround(p->k * by);
        if (k == p->k || k < TUNE_K_MIN || k > TUNE_K_MAX) return 0;
        p->k = k;
    } else if (what == LAC_MF_TUNE_LAMBDA) {
        p->lambda = p->lambda > 0 ? p->lambda * by : 0.01;
    } else {
        p->alpha *= by;
    }
    return 1;
}

/* Up by `by` while that gains, at most `steps` times; down when the first
 * step up did not gain. */
static lac_status line(search *s, int what, double by, int steps)
{
    for (int dir = 0; dir < 2; dir++) {
        int moved = 0;
        for (int t = 0; t < steps; t++) {
            lac_mf_params p = s->best;
            if (!step(&p, what, dir ? 1.0 / by : by)) break;
            int better;
            LAC_CHECK(trial(s, &p, &better));
            if (!better) break;
            moved = 1;
        }
        if (moved) break;
    }
    return LAC_SUCCESS;
}

lac_status lac_mf_tune(lac_ctx_t ctx, const lac_mf_tune_params *tune, lac_mf_params *params, lac_ratings_t train,
                       lac_mf_tune_report *report)
{
    LAC_ARG_NOT_NULL(ctx, ctx);
    LAC_ARG_NOT_NULL(ctx, tune);
    LAC_ARG_NOT_NULL(ctx, params);
    LAC_ARG_NOT_NULL(ctx, train);
    LAC_ADOPT_PARAMS(ctx, "mf tune", lac_mf_tune_params, tune, tune_defaults());
    if (!(tune->holdout > 0.0 && tune->holdout <= 0.5))
        return lac_error(ctx, LAC_ERR_ARGUMENT, "holdout %g must be in (0, 0.5]", tune->holdout);
    const char *why = lac_mf_params_check(params);
    if (why) return lac_error(ctx, LAC_ERR_ARGUMENT, "mf parameters: %s", why);
    double t0 = omp_get_wtime();
    lac_mf_tune_report rep;
    memset(&rep, 0, sizeof rep);
    rep.start_rmse = rep.rmse = NAN;
    int what = tune->search & (LAC_MF_TUNE_K | LAC_MF_TUNE_LAMBDA | LAC_MF_TUNE_ALPHA);
    if (params->model != LAC_MF_MODEL_PLAIN) what &= LAC_MF_TUNE_K;   /* its rates and lambdas are per group */
    if (params->implicit) what = 0;   /* the search ranks by held-out RMSE */
    if (train->count < TUNE_MIN_RATINGS || !what) {
        rep.seconds = omp_get_wtime() - t0;
        if (report) *report = rep;
        return LAC_SUCCESS;
    }
    search s = {ctx, NULL, NULL, *params, INFINITY, 0, &rep};
    lac_mf_split_params sp = lac_mf_split_params_default();
    sp.fraction = tune->holdout;
    sp.seed = tune->seed;
    lac_status st = lac_mf_split(ctx, &sp, train, &s.fit, &s.hold);
    int better;
    if (st != LAC_SUCCESS || s.hold->count == 0 || s.fit->count == 0) goto done;   /* too few: nothing searched */
    rep.searched = what;
    rep.holdout = s.hold->count;
    LAC_CHECK_GOTO(trial(&s, params, &better), st, done);
    rep.start_rmse = s.best_rmse;
    if (what & LAC_MF_TUNE_LAMBDA) LAC_CHECK_GOTO(line(&s, LAC_MF_TUNE_LAMBDA, 2.0, 6), st, done);
    if (what & LAC_MF_TUNE_ALPHA) LAC_CHECK_GOTO(line(&s, LAC_MF_TUNE_ALPHA, 2.0, 2), st, done);
    if (what & LAC_MF_TUNE_K) LAC_CHECK_GOTO(line(&s, LAC_MF_TUNE_K, 2.0, 3), st, done);
    if (what & LAC_MF_TUNE_LAMBDA) LAC_CHECK_GOTO(line(&s, LAC_MF_TUNE_LAMBDA, sqrt(2.0), 1), st, done);
    rep.rmse = s.best_rmse;
    rep.epochs = s.best_epochs > 0 ? s.best_epochs : 1;
    *params = s.best;
    params->epochs = rep.epochs;
done:
    rep.seconds = omp_get_wtime() - t0;
    if (report && st == LAC_SUCCESS) *report = rep;
    lac_ratings_destroy(&s.fit);
    lac_ratings_destroy(&s.hold);
    return st;
}
