/* mf training front end: checks, data layout, model initialisation, the epoch
 * loop with the learning rate of eq. (7), validation and early stopping with
 * the best model kept; the epochs themselves run on one backend table
 * (mf_backend.h): the CPU's (src/mf/cpu/) or CUSGD++ (src/backend/cuda/mf/). */
#include "mf/mf_internal.h"
#include "mf/checkpoint.h"
#include "core/random.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#define LAC_MF_CUDA_MIN_AUTO_RATINGS 250000   /* below it, --device auto trains on the CPU */

static float uniform01(uint64_t *s) { return (float)(lac_splitmix64(s) >> 40) * (1.0f / 16777216.0f); }

/* Initial factors, one seeded stream per row (the same for any thread count).
 * With biases the factors model the residual: small and centred. Without,
 * u_i . v_j must start near mu: entries in [0, 2c) with k c^2 = mu. */
static void init_rows(float *rows, int64_t n, int k, int stride, uint64_t seed, uint64_t salt, int use_bias,
                      double mean, const int64_t *has_ratings_count, int threads)
{
    float c = use_bias ? 0.1f : (float)sqrt(fabs(mean) / k);
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t r = 0; r < n; r++) {
        float *row = rows + r * stride;
        if (has_ratings_count && has_ratings_count[r] == 0) continue;   /* unseen: stays 0 */
        uint64_t s = seed ^ (salt + (uint64_t)r * 0xd1342543de82ef95ull);
        for (int f = 0; f < k; f++) {
            float x = uniform01(&s);
            row[f] = use_bias ? c * 1.7320508f * (2.0f * x - 1.0f) : 2.0f * c * x;
        }
    }
}

/* RMSE of the model on its training data, fixed-order sums. The
 * neighbourhood model finds a user's ratings in a dense row (NaN elsewhere),
 * one load a neighbour. */
static double train_rmse(lac_ctx_t ctx, lac_mf_model_t m, const lac_mf_data *d)
{
    int64_t nu = d->num_users, chunk = 1024, chunks = (nu + chunk - 1) / chunk;
    double *part = calloc((size_t)(chunks ? chunks : 1), sizeof *part);
    if (!part) return NAN;
    lac_mf_factors f = lac_mf_model_factors(m);
    int failed = 0;   /* a thread without its row */
#pragma omp parallel num_threads(lac_threads(ctx))
    {
        float *seen = m->nbr_k ? malloc((size_t)(m->num_items ? m->num_items : 1) * sizeof *seen) : NULL;
        if (m->nbr_k && !seen) failed = 1;
        for (int64_t j = 0; seen && j < m->num_items; j++) seen[j] = NAN;
#pragma omp for schedule(dynamic, 1)
        for (int64_t c = 0; c < chunks; c++) {
            double sq = 0.0;
            for (int64_t u = c * chunk; u < nu && u < (c + 1) * chunk; u++) {
                if (seen)
                    for (int64_t a = d->row_start[u]; a < d->row_start[u + 1]; a++) seen[d->col[a]] = d->val[a];
                for (int64_t a = d->row_start[u]; a < d->row_start[u + 1]; a++) {
                    float s = lac_mf_rule(m->mean, m->P, m->Q, m->user_bias, m->item_bias, m->k, m->stride, u, d->col[a]);
                    if (m->nbr_k) s += seen ? lac_mf_nbr_term(&f, u, d->col[a], seen) : NAN;
                    s = s < m->rating_min ? m->rating_min : s > m->rating_max ? m->rating_max : s;
                    double e = (double)d->val[a] - s;
                    sq += e * e;
                }
                if (seen)
                    for (int64_t a = d->row_start[u]; a < d->row_start[u + 1]; a++) seen[d->col[a]] = NAN;
            }
            part[c] = sq;
        }
        free(seen);
    }
    if (failed) {
        free(part);
        return NAN;
    }
    double sq = 0.0;
    for (int64_t c = 0; c < chunks; c++) sq += part[c];
    free(part);
    return d->nnz ? sqrt(sq / (double)d->nnz) : NAN;
}

/* The model's shape, maps, training items and initial factors. */
static lac_status model_from_data(lac_ctx_t ctx, const lac_mf_params *p, lac_ratings_t train, const lac_mf_data *d,
                                  double unit, lac_mf_model_t *out)
{
    lac_mf_model_t m;
    LAC_CHECK(lac_mf_model_alloc(ctx, d->num_users, d->num_items, p->k, &m));
    lac_status st = LAC_SUCCESS;
    m->params = *p;
    m->mean = p->use_bias ? d->mean : 0.0;
    m->rating_min = d->min;
    m->rating_max = d->max;
    LAC_CHECK_GOTO(lac_idmap_copy(ctx, &train->users, &m->users), st, fail);
    LAC_CHECK_GOTO(lac_idmap_copy(ctx, &train->items, &m->items), st, fail);
    m->rated_items = lac_malloc(ctx, (size_t)(d->nnz ? d->nnz : 1) * sizeof *m->rated_items);
    int64_t *item_count = lac_calloc(ctx, (size_t)d->num_items + 1, sizeof *item_count);
    if (!m->rated_items || !item_count) {
        free(item_count);
        st = LAC_ERR_OUT_OF_MEMORY;
        goto fail;
    }
    memcpy(m->rated_start, d->row_start, ((size_t)d->num_users + 1) * sizeof *m->rated_start);
    memcpy(m->rated_items, d->col, (size_t)d->nnz * sizeof *m->rated_items);
    for (int64_t a = 0; a < d->nnz; a++) item_count[d->col[a]]++;
    int64_t *user_count = lac_malloc(ctx, ((size_t)d->num_users + 1) * sizeof *user_count);
    if (!user_count) {
        free(item_count);
        st = LAC_ERR_OUT_OF_MEMORY;
        goto fail;
    }
    for (int64_t u = 0; u < d->num_users; u++) user_count[u] = d->row_start[u + 1] - d->row_start[u];
    int centred = p->use_bias || p->implicit;   /* implicit: logits start near 0 */
    init_rows(m->P, m->num_users, m->k, m->stride, p->seed, 0x1234567ull, centred, d->mean / unit, user_count,
              lac_threads(ctx));
    init_rows(m->Q, m->num_items, m->k, m->stride, p->seed, 0x7654321ull << 20, centred, d->mean / unit,
              item_count, lac_threads(ctx));
    free(user_count);
    free(item_count);
    *out = m;
    return LAC_SUCCESS;
fail:
    lac_mf_model_destroy(&m);
    return st;
}

/* Each user's training items in ascending order (recommend's exclusion
 * list; with their ratings for the neighbourhood model, whose R(i) they are):
 * the layouts of the neighbour search, a transpose to item-major and back. */
static lac_status sort_rated_items(lac_ctx_t ctx, lac_mf_model_t m, const lac_mf_data *d, lac_nbr_data *both)
{
    LAC_CHECK(lac_mf_nbr_data_build(ctx, d, 1, both));
    memcpy(m->rated_items, both->user_item, (size_t)d->nnz * sizeof *m->rated_items);
    if (m->params.model == LAC_MF_MODEL_NEIGHBOURHOOD) {
        m->rated_vals = lac_malloc(ctx, (size_t)(d->nnz ? d->nnz : 1) * sizeof *m->rated_vals);
        if (!m->rated_vals) return LAC_ERR_OUT_OF_MEMORY;
        memcpy(m->rated_vals, both->user_val, (size_t)d->nnz * sizeof *m->rated_vals);
    }
    return LAC_SUCCESS;
}

/* S^K(j) for the neighbourhood model, searched on the training ratings; the
 * LSH sums stay with the model (online updates add to them). */
static lac_status find_neighbours(lac_ctx_t ctx, lac_mf_model_t m, const lac_nbr_data *both)
{
    lac_mf_nbr_t n = NULL;
    /* Over MPI ranks every rank holds all the ratings and searches them whole
     * (its map calls stay in the process, neighbours.c); the training keeps
     * rank 0's lists. */
    LAC_CHECK(lac_mf_nbr_search(ctx, &m->params.neighbours, both, 1, &n));
    lac_status st = lac_mf_model_alloc_nbr(ctx, m, n->k);
    if (st == LAC_SUCCESS) {
        memcpy(m->nbr, n->list, (size_t)n->num_items * (size_t)n->k * sizeof *m->nbr);
        m->codes = n->codes;
        m->code_cols = n->code_cols;
        m->keys = n->keys;
        n->codes = NULL;
        n->keys = NULL;
        lac_log(ctx, LAC_LOG_INFO, "mf: %d neighbours per item by %s in %.3f s", n->k,
                lac_mf_nbr_method_name(n->params.method), n->seconds);
    }
    lac_mf_nbr_destroy(&n);
    return st;
}

/* The backend that trains this call, picked once: the context's, except that
 * the automatic choice keeps small problems on the CPU, where a GPU's start-up
 * and per-epoch launches are not repaid. Measured on an H100: CUSGD++ reaches
 * the CPU path's validation RMSE within 0.001 on 270 K ratings (and 8.9 M)
 * with an epoch 6x shorter than 16 host cores'; smaller problems were not
 * measured. NULL with the error recorded when the backend cannot take it. */
static const lac_mf_backend *pick_backend(lac_ctx_t ctx, const lac_mf_params *p, int64_t ratings, lac_status *st)
{
    if (ctx->backend != LAC_BACKEND_CUDA) return &lac_mf_cpu_backend;
    /* over MPI ranks the automatic choice trains each rank's blocks on the
     * CPU; --device cuda on the rank's GPU (mf_parts.cu) */
    if (ctx->ranks > 1 && ctx->params.backend == LAC_BACKEND_AUTO) return &lac_mf_cpu_backend;
    const lac_mf_backend *cuda = lac_mf_backend_cuda();
    if (!cuda) {
        *st = lac_error(ctx, LAC_ERR_NOT_COMPILED, "this build has no CUDA backend for mf");
        return NULL;
    }
    if (p->model == LAC_MF_MODEL_NEIGHBOURHOOD && !cuda->neighbourhood) {
        if (ctx->params.backend == LAC_BACKEND_AUTO) return &lac_mf_cpu_backend;
        *st = lac_error(ctx, LAC_ERR_UNSUPPORTED, "the neighbourhood model trains on the CPU only in this build");
        return NULL;
    }
    if (p->deterministic && !cuda->deterministic) {
        *st = lac_error(ctx, LAC_ERR_UNSUPPORTED,
                        "deterministic training is CPU-only (CUSGD++ updates v_j from many warps at once)");
        return NULL;
    }
    if (ctx->params.backend == LAC_BACKEND_AUTO && ratings < LAC_MF_CUDA_MIN_AUTO_RATINGS) return &lac_mf_cpu_backend;
    return cuda;
}

/* The neighbourhood model's warm start (lac_mf_params.warm_epochs): the
 * plain model's epochs on the model's own P, Q and biases, W and C left at
 * 0 so that the model is the plain one meanwhile. A plain epoch costs a
 * fraction of a neighbourhood one (K weights and their neighbours' ratings
 * a rating), so the neighbourhood epochs start near the plain optimum and
 * have only their terms to learn. With validation it stops when an epoch
 * gains less than WARM_MIN_GAIN, its best epoch kept. */
#define WARM_MIN_GAIN 1e-3
static lac_status warm_start(lac_ctx_t ctx, const lac_mf_params *params, const lac_mf_backend *be, lac_mf_model_t m,
                             const lac_mf_data *data, const lac_mf_eval *valid, int *epochs, double *seconds,
                             double *best_rmse)
{
    lac_mf_params plain = *params;
    plain.model = LAC_MF_MODEL_PLAIN;
    lac_mf_call call = lac_mf_model_call(m, data, valid);
    call.factors.kind = LAC_MF_MODEL_PLAIN;
    call.factors.nbr_k = 0;
    call.factors.nbr = NULL;
    call.factors.W = call.factors.C = NULL;
    lac_mf_state *state = NULL;
    double best = INFINITY;
    int e = 0, best_epoch = 0;
    lac_status st = be->begin(ctx, &call, &state);
    double e0 = omp_get_wtime();
    *seconds = 0.0;
    for (; st == LAC_SUCCESS && e < params->warm_epochs; e++) {
        double sse = 0.0, vr = NAN;
        st = be->epoch(ctx, state, (float)lac_mf_learning_rate(&plain, e), e, &sse);
        if (st == LAC_SUCCESS && valid) st = be->valid_rmse(ctx, state, &vr);
        if (st != LAC_SUCCESS) break;
        if (!isfinite(sse)) {
            st = lac_error(ctx, LAC_ERR_VALUE, "the warm start diverged at epoch %d: lower alpha (%g)", e + 1,
                           params->alpha);
            break;
        }
        if (!valid) continue;
        int gained = vr < best * (1.0 - WARM_MIN_GAIN);
        if (vr < best) {
            best = vr;
            best_epoch = e + 1;
            st = be->keep(ctx, state, 0);
        }
        if (!gained) {
            e++;
            break;
        }
    }
    if (st == LAC_SUCCESS && valid && best_epoch && best_epoch != e) st = be->keep(ctx, state, 1);
    *seconds = omp_get_wtime() - e0;
    *best_rmse = best;
    if (st == LAC_SUCCESS) st = be->download(ctx, state);
    be->end(ctx, state);
    *epochs = e;
    if (st == LAC_SUCCESS)
        lac_log(ctx, LAC_LOG_INFO, "mf: warm start, %d plain epochs (best %d, validation RMSE %g)", e, best_epoch, best);
    return st;
}

static lac_mf_checkpoint_params checkpoint_defaults(void)
{
    lac_mf_checkpoint_params p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    p.every = 1;
    return p;
}

LAC_PARAMS_INIT(lac_mf_checkpoint_params, checkpoint_defaults())

lac_status lac_mf_train(lac_ctx_t ctx, const lac_mf_params *params, lac_ratings_t train, lac_ratings_t valid,
                        lac_mf_epoch_fn on_epoch, void *on_epoch_user, lac_mf_model_t *out, lac_mf_report *report)
{
    return lac_mf_train_checkpointed(ctx, params, NULL, train, valid, on_epoch, on_epoch_user, out, report);
}

lac_status lac_mf_train_checkpointed(lac_ctx_t ctx, const lac_mf_params *params,
                                     const lac_mf_checkpoint_params *checkpoint, lac_ratings_t train,
                                     lac_ratings_t valid, lac_mf_epoch_fn on_epoch, void *on_epoch_user,
                                     lac_mf_model_t *out, lac_mf_report *report)
{
    LAC_ARG_NOT_NULL(ctx, ctx);
    LAC_ARG_NOT_NULL(ctx, params);
    LAC_ARG_NOT_NULL(ctx, train);
    LAC_ARG_NOT_NULL(ctx, out);
    LAC_ADOPT_PARAMS(ctx, "mf", lac_mf_params, params, lac_mf_params_default());
    lac_mf_checkpoint_params no_checkpoint = checkpoint_defaults();
    if (!checkpoint) checkpoint = &no_checkpoint;
    LAC_ADOPT_PARAMS(ctx, "mf checkpoint", lac_mf_checkpoint_params, checkpoint, checkpoint_defaults());
    const char *why = lac_mf_params_check(params);
    if (why) return lac_error(ctx, LAC_ERR_ARGUMENT, "mf parameters: %s", why);
    const char *ck_path = checkpoint->path;
    if (ck_path && checkpoint->every < 1)
        return lac_error(ctx, LAC_ERR_ARGUMENT, "checkpoint every %d epochs: must be >= 1", checkpoint->every);
    if (checkpoint->resume && !ck_path) return lac_error(ctx, LAC_ERR_ARGUMENT, "resume without a checkpoint path");
    /* rank 0 writes the checkpoint: its view of the path is the one that counts */
    if (ck_path && !checkpoint->resume)
        LAC_CHECK(lac_mf_dist_agree(ctx, ctx->rank == 0 ? lac_mf_checkpoint_replaceable(ctx, ck_path) : LAC_SUCCESS));
    lac_mf_params eff = *params;
    if (eff.model == LAC_MF_MODEL_NEIGHBOURHOOD) eff.use_bias = 1;   /* eq. (1) has mu + b_i + bhat_j */
    eff.negative_exponent = lac_mf_negative_exponent(&eff);
    params = &eff;
    if (train->count == 0) return lac_error(ctx, LAC_ERR_VALUE, "the training ratings are empty");
    if (valid && valid->count == 0) return lac_error(ctx, LAC_ERR_VALUE, "the validation ratings are empty");
    if (params->implicit && valid)
        return lac_error(ctx, LAC_ERR_ARGUMENT, "implicit feedback takes no validation ratings (rank held-out "
                                                "interactions instead)");
    lac_status st = LAC_SUCCESS;
    const lac_mf_backend *be = pick_backend(ctx, params, train->count, &st);
    if (!be) return st;

    double t0 = omp_get_wtime();
    lac_mf_data data;
    lac_mf_model_t m = NULL;
    lac_mf_eval veval;
    lac_mf_call call;
    lac_mf_state *state = NULL;
    lac_mf_checkpoint ck;
    lac_mf_factors ck_scratch;
    lac_mf_run run;
    memset(&veval, 0, sizeof veval);
    memset(&ck, 0, sizeof ck);
    memset(&ck_scratch, 0, sizeof ck_scratch);
    /* the state of the epoch loop, as a checkpoint holds it */
    lac_mf_progress pr = {0, 0, 0, INFINITY, NAN, NAN, 0.0};
    lac_nbr_data both;
    memset(&both, 0, sizeof both);
    double unit = 1.0;   /* lac_mf_rating_unit */
    int warm_epochs = 0;
    double warm_seconds = 0.0, warm_best = INFINITY;
    lac_mf_factors warm_factors;
    float *warm_kept[6] = {NULL};

    LAC_CHECK(lac_mf_data_build(ctx, train, &data));
    if (data.duplicates)
        lac_log(ctx, LAC_LOG_INFO, "mf: %lld repeated (user, item) pairs: the last rating of each kept",
                (long long)data.duplicates);
    if (params->implicit) LAC_CHECK_GOTO(lac_mf_implicit_data(ctx, params, &data), st, done);
    unit = params->implicit ? 1.0 : lac_mf_rating_unit(data.min, data.max);
    LAC_CHECK_GOTO(model_from_data(ctx, params, train, &data, unit, &m), st, done);
    LAC_CHECK_GOTO(sort_rated_items(ctx, m, &data, &both), st, done);
    if (params->model == LAC_MF_MODEL_NEIGHBOURHOOD) LAC_CHECK_GOTO(find_neighbours(ctx, m, &both), st, done);
    lac_mf_nbr_data_free(&both);
    if (valid) LAC_CHECK_GOTO(lac_mf_eval_map(ctx, m, valid, &veval), st, done);
    if (unit != 1.0) {   /* the neighbour search above saw the ratings as given */
        lac_log(ctx, LAC_LOG_INFO, "mf: ratings from %g to %g trained in units of %g", data.min, data.max, unit);
        lac_mf_scale_floats(data.val, data.nnz, 1.0 / unit);
        data.mean /= unit;
        data.min = (float)(data.min / unit);
        data.max = (float)(data.max / unit);
        lac_mf_scale_floats(veval.val, veval.count, 1.0 / unit);
        lac_mf_model_scale(m, 1.0 / unit, 0);
    }
    run = (lac_mf_run){params, &data, valid ? &veval : NULL, m, lac_threads(ctx), ctx->ranks};
    if (checkpoint->resume) {
        LAC_CHECK_GOTO(lac_mf_dist_agree(ctx, lac_mf_checkpoint_read(ctx, ck_path, &run, &ck)), st, done);
        pr = ck.progress;
        t0 -= pr.seconds;
    }

    if (params->model == LAC_MF_MODEL_NEIGHBOURHOOD && params->warm_epochs > 0 && !params->implicit) {
        if (checkpoint->resume || ctx->ranks > 1) {
            lac_log(ctx, LAC_LOG_INFO, "mf: no warm start %s", checkpoint->resume ? "when resuming" : "over MPI ranks");
        } else {
            LAC_CHECK_GOTO(warm_start(ctx, params, be, m, &data, valid ? &veval : NULL, &warm_epochs, &warm_seconds,
                                      &warm_best),
                           st, done);
            /* kept in case the neighbourhood epochs never beat it (measured
             * on planted neighbourhoods: they can end above plain MF) */
            warm_factors = lac_mf_model_factors(m);
            warm_factors.nbr_k = 0;
            if (valid) LAC_CHECK_GOTO(lac_mf_kept_alloc(ctx, &warm_factors, warm_kept), st, done);
            if (valid) lac_mf_kept_copy(&warm_factors, warm_kept, 0);
        }
    }
    call = lac_mf_model_call(m, &data, valid ? &veval : NULL);
    LAC_CHECK_GOTO(lac_mf_dist_begin(ctx, &call, &be, &state), st, done);   /* over MPI ranks: the rotation */
    if (checkpoint->resume) LAC_CHECK_GOTO(lac_mf_checkpoint_apply(ctx, &ck, be, state), st, done);

    /* a resumed training that had stopped early stops again at once */
    int stopped = valid && pr.since_best >= params->patience;
    int epoch;
    for (epoch = pr.epoch; epoch < params->epochs && !stopped; epoch++) {
        float lr = (float)lac_mf_learning_rate(params, epoch);
        double sse = 0.0, vr = NAN;
        LAC_CHECK_GOTO(be->epoch(ctx, state, lr, epoch, &sse), st, done);
        if (valid) LAC_CHECK_GOTO(be->valid_rmse(ctx, state, &vr), st, done);
        pr.last_train = params->implicit ? sse / (double)data.nnz : sqrt(sse / (double)data.nnz);
        pr.last_valid = vr;
        if (!isfinite(pr.last_train)) {
            st = lac_error(ctx, LAC_ERR_VALUE,
                           "training diverged at epoch %d (training RMSE %g): lower the learning rate (alpha = %g)",
                           epoch + 1, pr.last_train * unit, params->alpha);
            goto done;
        }
        if (valid) {
            if (vr < pr.best * (1.0 - params->min_gain)) {
                pr.best = vr;
                pr.best_epoch = epoch + 1;
                pr.since_best = 0;
                LAC_CHECK_GOTO(be->keep(ctx, state, 0), st, done);
            } else if (++pr.since_best >= params->patience) {
                stopped = 1;
            }
        }
        pr.epoch = epoch + 1;
        pr.seconds = omp_get_wtime() - t0;
        if (on_epoch && on_epoch(epoch + 1, pr.last_train * unit, vr * unit, pr.seconds, on_epoch_user)) stopped = 1;
        if (ck_path && (pr.epoch % checkpoint->every == 0 || stopped || pr.epoch == params->epochs))
            LAC_CHECK_GOTO(lac_mf_checkpoint_save(ctx, ck_path, &run, &pr, be, state, &ck_scratch), st, done);
    }
    int epochs_run = pr.epoch, best_epoch = valid ? pr.best_epoch : epochs_run;
    double last_valid = pr.last_valid;
    if (valid && best_epoch != epochs_run) {
        LAC_CHECK_GOTO(be->keep(ctx, state, 1), st, done);
        last_valid = pr.best;
    }
    LAC_CHECK_GOTO(be->download(ctx, state), st, done);
    if (params->implicit) LAC_CHECK_GOTO(lac_mf_negative_correct(ctx, m, params->negative_correction), st, done);
    if (warm_kept[0] && warm_best < last_valid) {   /* the warm start's model, W = C = 0 */
        lac_log(ctx, LAC_LOG_INFO, "mf: the warm start's model kept (validation RMSE %g against %g)", warm_best,
                last_valid);
        lac_mf_kept_copy(&warm_factors, warm_kept, 1);
        size_t nk = (size_t)m->num_items * (size_t)m->nbr_k;
        memset(m->W, 0, nk * sizeof *m->W);
        memset(m->C, 0, nk * sizeof *m->C);
        last_valid = warm_best;
        best_epoch = 0;
    }
    m->epochs = best_epoch;
    lac_mf_report rep;
    memset(&rep, 0, sizeof rep);
    rep.epochs = epochs_run;
    rep.best_epoch = best_epoch;
    rep.train_rmse = params->implicit ? NAN : train_rmse(ctx, m, &data) * unit;
    rep.valid_rmse = valid ? last_valid * unit : NAN;
    lac_mf_model_scale(m, unit, 1);
    rep.duplicates = data.duplicates;
    rep.warm_epochs = warm_epochs;
    rep.warm_seconds = warm_seconds;
    rep.seconds = omp_get_wtime() - t0;
    if (report) *report = rep;
    *out = m;
    m = NULL;
done:
    for (int i = 0; i < 6; i++) free(warm_kept[i]);
    be->end(ctx, state);
    lac_mf_checkpoint_free(&ck);
    lac_mf_checkpoint_scratch_free(&ck_scratch);
    lac_mf_eval_free(&veval);
    lac_mf_model_destroy(&m);
    lac_mf_data_free(&data);
    lac_mf_nbr_data_free(&both);
    return st;
}
