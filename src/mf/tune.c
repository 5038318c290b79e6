/* Hyper-parameters from the data: a held-out share of the training ratings,
 * line searches over lambda, alpha and k with trials that stop early on it.
 * The defaults were tuned on generated data; real, sparse data wants more
 * regularisation (docs/mf.md, "Chosen from the data"). Trials start from
 * cold: started warm from the best model so far (early-stopped, so at its
 * best), a trial with more regularisation never beat it and the search kept
 * the defaults (measured on the MovieLens-100k shape, docs/mf.md).
 * Implicit feedback: a share of each user's interactions held out, trials
 * ranked by their NDCG@10 on it (docs/mf.md, "Implicit feedback"). */
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
    p.search = LAC_MF_TUNE_K | LAC_MF_TUNE_LAMBDA | LAC_MF_TUNE_ALPHA | LAC_MF_TUNE_CORRECTION;
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
    int implicit;                 /* trials ranked by held-out NDCG@10, lower score better: 1 - NDCG */
    int correction;               /* implicit: negative_correction searched (0 or 1) */
    double *best_users;           /* the best trial's paired figures: NDCG@10 of each held-out user
                                     (implicit), squared error of each held-out rating (explicit) */
    int64_t hold_users;           /* how many (the same in every trial) */
} search;

/* (mf_internal.h) Trials often differ by less than the held-out share's
 * noise: with a plain "better", the implicit search on MovieTweetings at
 * k = 32 left the defaults on one training seed of three for NDCG@10 0.0936
 * against 0.0925 (1,224 held-out interactions), which cost 0.08 HR@10 under
 * 99 sampled negatives, and the explicit one wandered from k 8 to k 32 with
 * the search seed (bench/RESULTS.md, "implicit search: steps on evidence",
 * "The explicit search on evidence too"). */
int lac_mf_tune_clear_gain(const double *a, const double *b, int64_t users)
{
    if (users < 2) return 0;
    double mean = 0, sq = 0;
    for (int64_t x = 0; x < users; x++) mean += a[x] - b[x];
    mean /= (double)users;
    for (int64_t x = 0; x < users; x++) {
        double d = a[x] - b[x] - mean;
        sq += d * d;
    }
    return mean > 2.0 * sqrt(sq / (double)(users - 1) / (double)users);
}

/* An implicit trial: the held-out NDCG@10 (full ranking) of p trained on the
 * fit share, and each held-out user's in *users (malloc'd; NULL when it
 * diverged: then *ndcg is NaN). With the correction searched, the model at 0
 * and at 1 (the correction only moves the item biases: one training): the
 * correction, the default, is dropped only on a clear gain. */
static lac_status implicit_trial(search *s, lac_mf_params *p, double *ndcg, double **users)
{
    lac_mf_model_t m = NULL;
    lac_mf_params q = *p;
    if (s->correction) q.negative_correction = 0.0;
    *ndcg = NAN;
    *users = NULL;
    lac_status st = lac_mf_train(s->ctx, &q, s->fit, NULL, NULL, NULL, &m, NULL);
    if (st == LAC_ERR_VALUE) {   /* diverged */
        lac_clear_error(s->ctx);
        return LAC_SUCCESS;
    }
    if (st != LAC_SUCCESS) return st;
    lac_mf_rank_params rp = lac_mf_rank_params_default();
    rp.negatives = 0;
    lac_mf_rank_report r, rc;
    double *without = NULL, *with = NULL, **kept = &without;
    st = lac_mf_rank_users(s->ctx, &rp, m, s->hold, &r, &without);
    if (st == LAC_SUCCESS) *ndcg = r.ndcg, s->hold_users = r.users;
    if (st == LAC_SUCCESS && s->correction && m->params.negative_exponent > 0) {
        st = lac_mf_negative_correct(s->ctx, m, 1.0);
        if (st == LAC_SUCCESS) st = lac_mf_rank_users(s->ctx, &rp, m, s->hold, &rc, &with);
        if (st == LAC_SUCCESS) {   /* the same model and held-out share: the same users in the same order */
            int drop = lac_mf_tune_clear_gain(without, with, r.users);
            lac_log(s->ctx, LAC_LOG_INFO, "mf tune: lambda %g: held-out NDCG@10 %.5f without the correction, %.5f with: %s",
                    p->lambda, r.ndcg, rc.ndcg, drop ? "dropped" : "kept");
            p->negative_correction = drop ? 0.0 : 1.0;
            if (!drop) *ndcg = rc.ndcg, kept = &with;
        }
    }
    if (st == LAC_SUCCESS) *users = *kept, *kept = NULL;
    else *ndcg = NAN;
    free(without);
    free(with);
    lac_mf_model_destroy(&m);
    return st;
}

/* Each held-out rating's squared error under m (the model at its best
 * epoch), malloc'd in *errors; s->hold_users gets their count. */
static lac_status held_out_errors(search *s, lac_mf_model_t m, double **errors)
{
    *errors = NULL;
    lac_mf_eval e;
    LAC_CHECK(lac_mf_eval_map(s->ctx, m, s->hold, &e));
    float *pred = malloc((size_t)(e.count ? e.count : 1) * sizeof *pred);
    double *err = malloc((size_t)(e.count ? e.count : 1) * sizeof *err);
    lac_status st = pred && err ? lac_mf_eval_host(s->ctx, m, &e, pred, NULL, NULL)
                                : lac_error(s->ctx, LAC_ERR_OUT_OF_MEMORY, "out of memory for the held-out errors");
    if (st == LAC_SUCCESS) {
        for (int64_t i = 0; i < e.count; i++) err[i] = ((double)pred[i] - e.val[i]) * ((double)pred[i] - e.val[i]);
        s->hold_users = e.count;
        *errors = err;
        err = NULL;
    }
    free(pred);
    free(err);
    lac_mf_eval_free(&e);
    return st;
}

/* Trains p on the fit share; it becomes the best when the held-out figures
 * beat the best trial's clearly (lac_mf_tune_clear_gain, paired: each
 * rating's squared error, or each user's NDCG@10 with implicit feedback),
 * an RMSE also by more than min_gain. A diverged trial loses. */
static lac_status trial(search *s, const lac_mf_params *given, int *better)
{
    lac_mf_model_t m = NULL;
    lac_mf_report r;
    lac_mf_params tried = *given, *p = &tried;
    *better = 0;
    lac_status st = LAC_SUCCESS;
    double rmse = INFINITY, ndcg = NAN, *users = NULL;
    if (s->implicit) {
        LAC_CHECK(implicit_trial(s, p, &ndcg, &users));
        rmse = ndcg >= 0 ? 1.0 - ndcg : INFINITY;   /* NaN: diverged, or nothing held out to rank */
        r.best_epoch = p->epochs;
    } else if ((st = lac_mf_train(s->ctx, p, s->fit, s->hold, NULL, NULL, &m, &r)) == LAC_ERR_VALUE) {
        /* diverged (the data are known not to be empty) */
        lac_clear_error(s->ctx);
        r.best_epoch = 0;
    } else if (st != LAC_SUCCESS) {
        return st;
    } else {
        rmse = r.valid_rmse;
        st = held_out_errors(s, m, &users);
        if (st != LAC_SUCCESS) {
            lac_mf_model_destroy(&m);
            return st;
        }
    }
    lac_mf_tune_report *rep = s->rep;
    if (rep->trials < LAC_MF_TUNE_MAX_TRIALS)
        rep->trial[rep->trials] = (lac_mf_tune_trial){p->k,        p->lambda, p->alpha, s->implicit ? NAN : rmse,
                                                      r.best_epoch, ndcg,      p->negative_correction};
    rep->trials++;
    if (s->implicit)
        lac_log(s->ctx, LAC_LOG_INFO, "mf tune: k %d lambda %g correction %g: held-out NDCG@10 %.5f", p->k, p->lambda,
                p->negative_correction, ndcg);
    else
        lac_log(s->ctx, LAC_LOG_INFO, "mf tune: k %d lambda %g alpha %g: held-out RMSE %.5f at epoch %d", p->k,
                p->lambda, p->alpha, rmse, r.best_epoch);
    lac_mf_model_destroy(&m);
    int wins = users && (!s->best_users || (s->implicit ? lac_mf_tune_clear_gain(users, s->best_users, s->hold_users)
                                                        : rmse < s->best_rmse * (1.0 - p->min_gain) &&
                                                              lac_mf_tune_clear_gain(s->best_users, users, s->hold_users)));
    if (wins) {
        s->best = *p;
        s->best_rmse = rmse;
        s->best_epochs = r.best_epoch;
        free(s->best_users);
        s->best_users = users;
        users = NULL;
        *better = 1;
    }
    free(users);
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
    rep.start_rmse = rep.rmse = rep.start_ndcg = rep.ndcg = NAN;
    int what = tune->search & (LAC_MF_TUNE_K | LAC_MF_TUNE_LAMBDA | LAC_MF_TUNE_ALPHA);
    if (params->model != LAC_MF_MODEL_PLAIN) what &= LAC_MF_TUNE_K;   /* its rates and lambdas are per group */
    /* implicit: each trial trains every epoch (no early stop on a ranking),
     * so only lambda, and the correction that needs no training of its own */
    if (params->implicit) what = (what & LAC_MF_TUNE_LAMBDA) | (tune->search & LAC_MF_TUNE_CORRECTION);
    if (train->count < TUNE_MIN_RATINGS || !what) {
        rep.seconds = omp_get_wtime() - t0;
        if (report) *report = rep;
        return LAC_SUCCESS;
    }
    search s = {ctx,  NULL, NULL, *params, INFINITY, 0, &rep, params->implicit, (what & LAC_MF_TUNE_CORRECTION) != 0,
                NULL, 0};
    lac_mf_split_params sp = lac_mf_split_params_default();
    sp.fraction = tune->holdout;
    sp.per_user = params->implicit;   /* every user keeps interactions to be ranked by */
    sp.seed = tune->seed;
    lac_status st = lac_mf_split(ctx, &sp, train, &s.fit, &s.hold);
    int better;
    if (st != LAC_SUCCESS || s.hold->count == 0 || s.fit->count == 0) goto done;   /* too few: nothing searched */
    rep.searched = what;
    rep.holdout = s.hold->count;
    LAC_CHECK_GOTO(trial(&s, params, &better), st, done);
    rep.start_rmse = s.implicit ? NAN : s.best_rmse;
    rep.start_ndcg = s.implicit ? 1.0 - s.best_rmse : NAN;
    if (what & LAC_MF_TUNE_LAMBDA) LAC_CHECK_GOTO(line(&s, LAC_MF_TUNE_LAMBDA, 2.0, 6), st, done);
    if (what & LAC_MF_TUNE_ALPHA) LAC_CHECK_GOTO(line(&s, LAC_MF_TUNE_ALPHA, 2.0, 2), st, done);
    if (what & LAC_MF_TUNE_K) LAC_CHECK_GOTO(line(&s, LAC_MF_TUNE_K, 2.0, 3), st, done);
    if (what & LAC_MF_TUNE_LAMBDA) LAC_CHECK_GOTO(line(&s, LAC_MF_TUNE_LAMBDA, sqrt(2.0), 1), st, done);
    rep.rmse = s.implicit ? NAN : s.best_rmse;
    rep.ndcg = s.implicit ? 1.0 - s.best_rmse : NAN;
    rep.epochs = s.best_epochs > 0 ? s.best_epochs : 1;
    *params = s.best;
    params->epochs = rep.epochs;
done:
    rep.seconds = omp_get_wtime() - t0;
    if (report && st == LAC_SUCCESS) *report = rep;
    lac_ratings_destroy(&s.fit);
    lac_ratings_destroy(&s.hold);
    free(s.best_users);
    return st;
}
