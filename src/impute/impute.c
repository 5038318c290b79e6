/* impute front end: parameters, argument checks, the observed set, the one
 * place a backend table is picked, and Algorithm 1's outer loops (the λ
 * schedule, convergence, progress, timing). The arithmetic of each phase is
 * the backend's (impute_backend.h). */
#include "impute/impute_front.h"

#include <math.h>
#include <omp.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

static lac_impute_params impute_defaults(void)
{
    lac_impute_params p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    /* Not the paper's (which states C = 20 only): with acceleration, ten λ
     * values 0.35 apart reach the paper's accuracy in about 110 iterations;
     * a steeper decay (0.25 over 8) left more error at ratio 0.5 and spent
     * more time in the SVT, whose rank jumps each time λ drops
     * (bench/RESULTS.md). */
    p.decay = 0.35;
    p.steps = 10;
    p.inner = 12;
    p.tol = 1e-8;
    p.max_iterations = 0;
    p.lambda = 0;
    p.accelerate = 1;
    p.output = LAC_IMPUTE_COMPLETED;
    p.select_fraction = 0;
    p.select_seed = 1;
    p.selection = NULL;
    return p;
}

LAC_PARAMS_INIT(lac_impute_params, impute_defaults())

const char *lac_impute_params_check(const lac_impute_params *given)
{
    LAC_PARAMS_CHECK_BEGIN(lac_impute_params, given, impute_defaults());
    if (!(p->decay > 0 && p->decay < 1)) return "decay c must be in (0, 1)";
    if (p->steps < 1) return "steps C must be >= 1";
    if (p->inner < 1) return "inner T must be >= 1";
    if (!(p->tol >= 0) || isinf(p->tol)) return "tol must be a finite number >= 0";
    if (p->max_iterations < 0) return "max_iterations must be >= 0 (0: steps x inner)";
    if (!(p->lambda >= 0) || isinf(p->lambda)) return "lambda must be a finite number >= 0 (0: the largest singular value)";
    if (p->accelerate != 0 && p->accelerate != 1) return "accelerate must be 0 or 1";
    if (p->gemm_tf32 < LAC_GEMM_FP32 || p->gemm_tf32 > LAC_GEMM_3XTF32)
        return "gemm_tf32 must be LAC_GEMM_FP32, LAC_GEMM_TF32 or LAC_GEMM_3XTF32";
    if (p->output != LAC_IMPUTE_COMPLETED && p->output != LAC_IMPUTE_ESTIMATE) return "output must be completed or estimate";
    if (!(p->select_fraction == 0 || (p->select_fraction > 0 && p->select_fraction < 1)))
        return "select_fraction must be in (0, 1), the share of observed vertices (or entries) held out; 0: no selection";
    return NULL;
}

static lac_status check_tensor(lac_ctx_t ctx, const char *what, const lac_array *a, int64_t N)
{
    if (a->dtype != LAC_FLOAT32 && a->dtype != LAC_FLOAT64)
        return lac_error(ctx, LAC_ERR_DTYPE, "%s is %s; graph-tensors are float32 or float64", what, lac_dtype_name(a->dtype));
    if (a->ndim != 3) return lac_error(ctx, LAC_ERR_SHAPE, "%s must be (N, m, n), not %d-d", what, a->ndim);
    if (a->shape[0] != N)
        return lac_error(ctx, LAC_ERR_SHAPE, "%s has %lld slices but the graph has %lld vertices", what, (long long)a->shape[0],
                         (long long)N);
    if (a->shape[1] < 1 || a->shape[2] < 1)
        return lac_error(ctx, LAC_ERR_SHAPE, "%s has empty slices (%lld x %lld)", what, (long long)a->shape[1],
                         (long long)a->shape[2]);
    if (a->memory != LAC_MEM_HOST) return lac_error(ctx, LAC_ERR_ARGUMENT, "%s must be a host array", what);
    if (!a->data) return lac_error(ctx, LAC_ERR_ARGUMENT, "%s data is NULL", what);
    return LAC_SUCCESS;
}

/* Names entry i of an (N, m, n) tensor as [v, row, col]. */
static lac_status report_entry(lac_ctx_t ctx, lac_status st, const char *what, int64_t i, int64_t m, int64_t n,
                               const char *why)
{
    int64_t v = i / (m * n), e = i % (m * n);
    return lac_error(ctx, st, "%s[%lld, %lld, %lld] %s", what, (long long)v, (long long)(e / n), (long long)(e % n), why);
}

/* The observed set, checked: every vertex classified, the entry mask when some
 * vertex is partially observed, observed data finite, Ω not empty. */
typedef struct {
    unsigned char *vertex_state;
    unsigned char *entry_mask;       /* owned when built from NaNs */
    const unsigned char *entries;    /* what the backend reads, or NULL */
    int64_t *incomplete;
    int64_t num_incomplete, observed, partial, missing;
} observed_set;

static void observed_release(observed_set *o)
{
    free(o->vertex_state);
    free(o->entry_mask);
    free(o->incomplete);
    memset(o, 0, sizeof *o);
}

static lac_status classify(lac_ctx_t ctx, const lac_array *tensor, const lac_array *observed, observed_set *o)
{
    const int64_t N = tensor->shape[0], m = tensor->shape[1], n = tensor->shape[2], mn = m * n;
    memset(o, 0, sizeof *o);
    int slice_mask = 0, entry_mask = 0;
    if (observed) {
        if (observed->dtype != LAC_BOOL)
            return lac_error(ctx, LAC_ERR_DTYPE, "observed is %s; it must be bool", lac_dtype_name(observed->dtype));
        if (observed->memory != LAC_MEM_HOST || !observed->data)
            return lac_error(ctx, LAC_ERR_ARGUMENT, "observed must be a host array with data");
        slice_mask = observed->ndim == 1 && observed->shape[0] == N;
        entry_mask = observed->ndim == 3 && observed->shape[0] == N && observed->shape[1] == m && observed->shape[2] == n;
        if (!slice_mask && !entry_mask)
            return lac_error(ctx, LAC_ERR_SHAPE, "observed must be a bool vector of %lld (vertices) or a (%lld, %lld, %lld) "
                             "bool array (entries)", (long long)N, (long long)N, (long long)m, (long long)n);
    }
    const unsigned char *mask = observed ? observed->data : NULL;
    o->vertex_state = lac_malloc(ctx, (size_t)N);
    if (!o->vertex_state) return LAC_ERR_OUT_OF_MEMORY;

    /* Per vertex: how many entries are observed; observed entries must be finite. */
    int64_t bad = -1, total_observed = 0;
#pragma omp parallel for num_threads(lac_threads(ctx)) schedule(static) reduction(+ : total_observed)
    for (int64_t v = 0; v < N; v++) {
        int64_t seen = 0;
        for (int64_t e = 0; e < mn; e++) {
            int64_t i = v * mn + e;
            double x = lac_load_real(tensor->data, tensor->dtype, i);
            int obs = slice_mask ? mask[v] : entry_mask ? mask[i] : !isnan(x);
            if (!obs) continue;
            seen++;
            if (!isfinite(x)) {
#pragma omp critical(lac_impute_classify)
                if (bad < 0 || i < bad) bad = i;
            }
        }
        o->vertex_state[v] = seen == mn ? LAC_VERTEX_OBSERVED : seen == 0 ? LAC_VERTEX_MISSING : LAC_VERTEX_PARTIAL;
        total_observed += seen;
    }
    if (bad >= 0) {
        double x = lac_load_real(tensor->data, tensor->dtype, bad);
        return report_entry(ctx, LAC_ERR_VALUE, "tensor", bad, m, n,
                            isnan(x) ? "is NaN but marked observed" : "is infinite (observed data must be finite)");
    }
    if (total_observed == 0)
        return lac_error(ctx, LAC_ERR_VALUE, "the observed set is empty: no vertex (or entry) is observed");

    for (int64_t v = 0; v < N; v++) {
        if (o->vertex_state[v] == LAC_VERTEX_OBSERVED) o->observed++;
        else if (o->vertex_state[v] == LAC_VERTEX_PARTIAL) o->partial++;
        else o->missing++;
    }
    o->num_incomplete = o->partial + o->missing;
    o->incomplete = lac_malloc(ctx, (size_t)(o->num_incomplete > 0 ? o->num_incomplete : 1) * sizeof *o->incomplete);
    if (!o->incomplete) return LAC_ERR_OUT_OF_MEMORY;
    for (int64_t v = 0, i = 0; v < N; v++)
        if (o->vertex_state[v] != LAC_VERTEX_OBSERVED) o->incomplete[i++] = v;

    if (o->partial > 0) {
        if (entry_mask) {
            o->entries = mask;
        } else {   /* NaN-marked entries */
            o->entry_mask = lac_malloc(ctx, (size_t)(N * mn));
            if (!o->entry_mask) return LAC_ERR_OUT_OF_MEMORY;
#pragma omp parallel for num_threads(lac_threads(ctx)) schedule(static)
            for (int64_t i = 0; i < N * mn; i++) o->entry_mask[i] = !isnan(lac_load_real(tensor->data, tensor->dtype, i));
            o->entries = o->entry_mask;
        }
    }
    return LAC_SUCCESS;
}

/* The one place an impute table is picked (impute_front.h). */
lac_status lac_impute_backend_for(lac_ctx_t ctx, const char *refusal, const char *note, const lac_impute_backend **out)
{
    *out = ctx->backend == LAC_BACKEND_CUDA ? lac_impute_backend_cuda() : &lac_impute_cpu_backend;
    if (*out) return LAC_SUCCESS;
    if (refusal && ctx->params.backend != LAC_BACKEND_AUTO) return lac_error(ctx, LAC_ERR_UNSUPPORTED, "%s", refusal);
    if (note) lac_log(ctx, LAC_LOG_INFO, "%s", note);
    *out = &lac_impute_cpu_backend;
    return LAC_SUCCESS;
}

/* What lac_impute and lac_impute_check say when a CUDA context gets no table. */
static const char no_cuda_refusal[] = "this build has no CUDA backend for impute: use the CPU (--device cpu)";
static const char no_cuda_note[] = "impute: no CUDA backend in this build, running on the CPU";

/* Everything lac_impute checks before it computes; obs is filled on success. */
static lac_status check_inputs(lac_ctx_t ctx, int64_t N, const lac_array *tensor, const lac_array *observed,
                               const lac_array *truth, observed_set *obs)
{
    memset(obs, 0, sizeof *obs);
    LAC_CHECK(check_tensor(ctx, "tensor", tensor, N));
    const int64_t m = tensor->shape[1], n = tensor->shape[2];
    if (truth) {
        LAC_CHECK(check_tensor(ctx, "truth", truth, N));
        if (truth->shape[1] != m || truth->shape[2] != n)
            return lac_error(ctx, LAC_ERR_SHAPE, "truth is (%lld, %lld, %lld) but the tensor is (%lld, %lld, %lld)",
                             (long long)truth->shape[0], (long long)truth->shape[1], (long long)truth->shape[2],
                             (long long)N, (long long)m, (long long)n);
        /* The first entry that is not finite, whatever the thread count. */
        int64_t bad = -1;
        const int64_t count = N * m * n;
#pragma omp parallel for num_threads(lac_threads(ctx)) schedule(static)
        for (int64_t i = 0; i < count; i++)
            if (!isfinite(lac_load_real(truth->data, truth->dtype, i))) {
#pragma omp critical(lac_impute_truth)
                if (bad < 0 || i < bad) bad = i;
            }
        if (bad >= 0) return report_entry(ctx, LAC_ERR_VALUE, "truth", bad, m, n, "is not finite");
    }
    lac_status st = classify(ctx, tensor, observed, obs);
    if (st < 0) observed_release(obs);
    return st;
}

lac_status lac_impute_check(lac_ctx_t ctx, int64_t num_vertices, const lac_array *tensor, const lac_array *observed,
                            const lac_array *truth)
{
    LAC_ARG_NOT_NULL(ctx, ctx);
    LAC_ARG_NOT_NULL(ctx, tensor);
    const lac_impute_backend *backend;
    LAC_CHECK(lac_impute_backend_for(ctx, no_cuda_refusal, no_cuda_note, &backend));
    observed_set obs;
    LAC_CHECK(check_inputs(ctx, num_vertices, tensor, observed, truth, &obs));
    observed_release(&obs);
    return LAC_SUCCESS;
}

/* One walk down the λ schedule: setup, then up to `steps` λ values of at most
 * `inner` iterations each (Algorithm 1's loops). The state stays in w for
 * finish; with a hold-out set, the hold-out error after each step goes to
 * curve[j - 1] and w->walked counts the steps recorded. */
typedef struct {
    void *state;
    double *lambda1, *lambda;          /* N: λ^1_k, and this step's λ_k */
    double truth_sq, truth_missing_sq, missing_err_sq;
    int64_t walked;
    int stopped;
} path_walk;

static void walk_release(const lac_impute_backend *backend, path_walk *w)
{
    if (w->state) backend->release(w->state);
    free(w->lambda1);
    free(w->lambda);
    memset(w, 0, sizeof *w);
}

static lac_status walk_path(lac_ctx_t ctx, const lac_impute_backend *backend, const lac_impute_params *params,
                            const lac_impute_problem *problem, int64_t steps, lac_impute_holdout *holdout, double *curve,
                            double t_start, lac_impute_result *res, path_walk *w)
{
    const int64_t N = problem->N;
    memset(w, 0, sizeof *w);
    w->lambda1 = lac_malloc(ctx, (size_t)N * sizeof *w->lambda1);
    w->lambda = lac_malloc(ctx, (size_t)N * sizeof *w->lambda);
    if (!w->lambda1 || !w->lambda) return LAC_ERR_OUT_OF_MEMORY;
    double t0 = omp_get_wtime();
    LAC_CHECK(backend->setup(ctx, problem, &w->state, &w->truth_sq, &w->truth_missing_sq));
    res->seconds_gft += omp_get_wtime() - t0;

    const int auto_lambda = params->lambda == 0;
    if (!auto_lambda)
        for (int64_t k = 0; k < N; k++) w->lambda1[k] = params->lambda;
    const int64_t cap = params->max_iterations > 0 ? params->max_iterations : params->steps * params->inner;
    const int truth = problem->truth != NULL;
    int64_t t = 0;
    /* FISTA's t_k. Not restarted when λ steps down: the momentum gathered on
     * the slowly converging frequencies (those seen through few observed
     * vertices) carries over, which at ratio 0.5 lowered the final error by
     * a fifth in the same iterations (bench/RESULTS.md). */
    double fista = 1;
    for (int64_t j = 1; j <= steps && t < cap && !w->stopped; j++) {
        const double scale = pow(params->decay, (double)(j - 1));
        res->steps = j;
        res->converged = 0;
        for (int64_t inner = 0; inner < params->inner && t < cap; inner++) {
            t++;
            t0 = omp_get_wtime();
            LAC_CHECK(lac_impute_gft_dist(ctx, backend, w->state, N));
            double t1 = omp_get_wtime();
            lac_impute_svt_stats stats;
            const int first = auto_lambda && t == 1;
            if (first) {
                /* λ^1_k = σmax(Ĝ(k)): thresholding there gives 0, so only the
                 * singular values are needed. */
                LAC_CHECK(lac_impute_svt_dist(ctx, backend, w->state, N, NULL, w->lambda1, &stats));
            } else {
                for (int64_t k = 0; k < N; k++) w->lambda[k] = scale * w->lambda1[k];
                LAC_CHECK(lac_impute_svt_dist(ctx, backend, w->state, N, w->lambda, NULL, &stats));
            }
            double t2 = omp_get_wtime();
            double theta = 0;
            if (params->accelerate) {
                double next = 0.5 * (1 + sqrt(1 + 4 * fista * fista));
                theta = (fista - 1) / next;
                fista = next;
            }
            LAC_CHECK(lac_impute_igft_dist(ctx, backend, w->state, problem->num_incomplete, theta, &w->missing_err_sq));
            double t3 = omp_get_wtime();
            res->seconds_gft += t1 - t0;
            res->seconds_svt += t2 - t1;
            res->seconds_igft += t3 - t2;

            /* ‖G_t - G_{t-1}‖² <= ε ‖G_{t-1}‖², t >= 2; 0 <= 0 counts (an
             * unchanged estimate, e.g. all zero at the first λ). */
            res->change = stats.previous_sq > 0 ? stats.change_sq / stats.previous_sq : NAN;
            res->converged = t >= 2 && stats.change_sq <= params->tol * stats.previous_sq;
            /* At λ^1 = σmax the estimate is 0 and stays 0 (the next GFT is the
             * same), so that step has converged after its one iteration. */
            if (first) res->converged = 1;
            res->iterations = t;
            lac_impute_iteration it;
            memset(&it, 0, sizeof it);
            it.iteration = t;
            it.step = j;
            it.lambda_scale = scale;
            it.lambda_max = 0;
            for (int64_t k = 0; k < N; k++)
                if (w->lambda1[k] * scale > it.lambda_max) it.lambda_max = w->lambda1[k] * scale;
            it.change = res->change;
            it.mean_rank = (double)stats.rank_sum / (double)N;
            it.seconds = omp_get_wtime() - t_start;
            it.rmse_all = truth && w->truth_sq > 0 ? sqrt(stats.truth_error_sq / w->truth_sq) : NAN;
            it.rmse_missing = truth && w->truth_missing_sq > 0 ? sqrt(w->missing_err_sq / w->truth_missing_sq) : NAN;
            it.selecting = holdout != NULL;
            lac_log(ctx, LAC_LOG_DEBUG, "impute%s: t %lld, step %lld, lambda max %.4g, change %.3g, rank %.2f",
                    holdout ? " (hold-out path)" : "", (long long)t, (long long)j, it.lambda_max, it.change, it.mean_rank);
            if (params->progress && params->progress(&it, params->progress_user)) {
                w->stopped = 1;
                break;
            }
            if (res->converged) break;
        }
        if (holdout && !w->stopped) {
            t0 = omp_get_wtime();
            LAC_CHECK(lac_impute_holdout_error(ctx, backend, w->state, holdout, &curve[j - 1]));
            res->seconds_igft += omp_get_wtime() - t0;
            w->walked = j;
            lac_log(ctx, LAC_LOG_INFO, "impute: lambda scale %.4g, hold-out error %.6g", scale, curve[j - 1]);
        }
    }
    return LAC_SUCCESS;
}

/* Hold-out validation (lacuna.h): walks the whole schedule without the
 * held-out part and returns the step whose hold-out error is lowest (ties:
 * the earlier, larger λ) in *chosen; curve gets the errors of the *walked
 * steps. */
static lac_status select_step(lac_ctx_t ctx, const lac_impute_backend *backend, const lac_impute_params *params,
                              const lac_impute_problem *problem, double t_start, lac_impute_result *res, double *curve,
                              lac_impute_holdout *holdout, int64_t *walked, int64_t *chosen, int *stopped)
{
    path_walk w;
    memset(&w, 0, sizeof w);
    lac_impute_result walk_res;
    memset(&walk_res, 0, sizeof walk_res);
    lac_status st = lac_impute_holdout_make(ctx, problem, params->select_fraction, params->select_seed, holdout);
    if (st >= 0) st = walk_path(ctx, backend, params, &holdout->problem, params->steps, holdout, curve, t_start, &walk_res, &w);
    res->seconds_gft += walk_res.seconds_gft;
    res->seconds_svt += walk_res.seconds_svt;
    res->seconds_igft += walk_res.seconds_igft;
    *stopped = w.stopped;
    *walked = w.walked;
    *chosen = 1;
    for (int64_t j = 2; j <= w.walked; j++)
        if (curve[j - 1] < curve[*chosen - 1]) *chosen = j;
    walk_release(backend, &w);
    return st;
}

/* The choice, into the caller's struct as far as its struct_size reaches. */
static void report_selection(const lac_impute_params *params, const lac_impute_holdout *holdout, const double *curve,
                             int64_t walked, int64_t chosen, const double *lambda1, int64_t N)
{
    lac_impute_selection *to = params->selection, r = *to;
    r.entries = holdout->entries;
    r.held_out = holdout->count;
    r.steps = walked;
    r.chosen_step = chosen;
    r.chosen_scale = pow(params->decay, (double)(chosen - 1));
    r.chosen_lambda_max = 0;
    for (int64_t k = 0; k < N; k++) r.chosen_lambda_max = fmax(r.chosen_lambda_max, r.chosen_scale * lambda1[k]);
    r.chosen_error = curve[chosen - 1];
    if (r.curve)
        for (int64_t j = 0; j < r.curve_capacity; j++) r.curve[j] = j < walked ? curve[j] : NAN;
    memcpy(to, &r, to->struct_size < sizeof r ? to->struct_size : sizeof r);
}

lac_status lac_impute(lac_ctx_t ctx, const lac_impute_params *params, lac_gft_t gft, const lac_array *tensor,
                      const lac_array *observed, const lac_array *truth, lac_array *out, lac_impute_result *result)
{
    LAC_ARG_NOT_NULL(ctx, ctx);
    LAC_ARG_NOT_NULL(ctx, params);
    LAC_ARG_NOT_NULL(ctx, gft);
    LAC_ARG_NOT_NULL(ctx, tensor);
    LAC_ARG_NOT_NULL(ctx, out);
    const double t_start = omp_get_wtime();
    LAC_ADOPT_PARAMS(ctx, "impute", lac_impute_params, params, impute_defaults());
    const char *why = lac_impute_params_check(params);
    if (why) return lac_error(ctx, LAC_ERR_ARGUMENT, "impute parameters: %s", why);
    const size_t selection_v1 = offsetof(lac_impute_selection, chosen_error) + sizeof(double);
    if (params->selection && params->selection->struct_size < selection_v1)
        return lac_error(ctx, LAC_ERR_ARGUMENT, "impute parameters: selection->struct_size is %zu; start it from "
                         "lac_impute_selection_default()", params->selection->struct_size);
    if (params->selection && params->selection->curve_capacity < 0)
        return lac_error(ctx, LAC_ERR_ARGUMENT, "impute parameters: selection->curve_capacity must be >= 0");
    const lac_impute_backend *backend;
    LAC_CHECK(lac_impute_backend_for(ctx, no_cuda_refusal, no_cuda_note, &backend));

    const int64_t N = gft->n;
    LAC_CHECK(check_tensor(ctx, "out", out, N));
    LAC_CHECK(check_tensor(ctx, "tensor", tensor, N));
    const int64_t m = tensor->shape[1], n = tensor->shape[2];
    if (out->shape[1] != m || out->shape[2] != n || out->dtype != tensor->dtype)
        return lac_error(ctx, LAC_ERR_SHAPE, "out must be (%lld, %lld, %lld) %s like the tensor", (long long)N, (long long)m,
                         (long long)n, lac_dtype_name(tensor->dtype));
    observed_set obs;
    LAC_CHECK(check_inputs(ctx, N, tensor, observed, truth, &obs));
    lac_status st;

    lac_impute_result res;
    memset(&res, 0, sizeof res);
    res.observed_vertices = obs.observed;
    res.partial_vertices = obs.partial;
    res.missing_vertices = obs.missing;
    res.rmse_all = res.rmse_missing = NAN;
    res.change = NAN;

    lac_impute_problem problem;
    memset(&problem, 0, sizeof problem);
    problem.precision = gft->precision;
    problem.N = N;
    problem.m = m;
    problem.n = n;
    problem.gft = gft;
    problem.tensor = tensor->data;
    problem.tensor_dtype = tensor->dtype;
    problem.vertex_state = obs.vertex_state;
    problem.entry_observed = obs.entries;
    problem.num_incomplete = obs.num_incomplete;
    problem.incomplete = obs.incomplete;
    problem.truth = truth ? truth->data : NULL;
    problem.truth_dtype = truth ? truth->dtype : LAC_FLOAT64;
    problem.momentum = params->accelerate;
    problem.gemm_tf32 = params->gemm_tf32;

    path_walk w;
    memset(&w, 0, sizeof w);
    lac_impute_holdout holdout;
    memset(&holdout, 0, sizeof holdout);
    double *curve = NULL;
    int64_t steps = params->steps, walked = 0;
    int stopped = 0;
    if (params->select_fraction > 0) {
        curve = lac_malloc(ctx, (size_t)params->steps * sizeof *curve);
        if (!curve) {
            st = LAC_ERR_OUT_OF_MEMORY;
            goto done;
        }
        for (int64_t j = 0; j < params->steps; j++) curve[j] = NAN;
        st = select_step(ctx, backend, params, &problem, t_start, &res, curve, &holdout, &walked, &steps, &stopped);
        if (st < 0) goto done;
    }

    LAC_CHECK_GOTO(walk_path(ctx, backend, params, &problem, steps, NULL, NULL, t_start, &res, &w), st, done);
    stopped |= w.stopped;
    double t0 = omp_get_wtime();
    double error_sq = 0;
    LAC_CHECK_GOTO(backend->finish(ctx, w.state, params->output, out->data, out->dtype, &error_sq), st, done);
    res.seconds_igft += omp_get_wtime() - t0;
    if (truth) {
        res.rmse_all = w.truth_sq > 0 ? sqrt(error_sq / w.truth_sq) : NAN;
        res.rmse_missing = w.truth_missing_sq > 0 ? sqrt(w.missing_err_sq / w.truth_missing_sq) : NAN;
    }
    if (params->selection && curve) report_selection(params, &holdout, curve, walked, steps, w.lambda1, N);
    res.seconds = omp_get_wtime() - t_start;
    if (result) *result = res;
    st = stopped ? LAC_INFO_NOT_CONVERGED : LAC_SUCCESS;
done:
    walk_release(backend, &w);
    lac_impute_holdout_release(&holdout);
    free(curve);
    observed_release(&obs);
    return st;
}
