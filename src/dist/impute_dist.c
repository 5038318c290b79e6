/* impute's phases over MPI ranks. The N spectral slices are split by
 * ranges: each rank computes its own columns of the GFT (the backend's
 * gft_part) and thresholds them (svt_part), then the ranks gather each
 * other's Ĝest slices so that every rank holds the whole estimate. The iGFT
 * is split by incomplete vertices (igft_part), and the ranks gather each
 * other's columns of what the next GFT imputes. Every column is the same
 * computation as in one process, so the result is too; the stats and
 * errors are summed in rank order. The basis is solved (or read) once, by
 * rank 0, and broadcast. */
#include "dist/comm.h"
#include "impute/impute_backend.h"

#include <omp.h>

lac_status lac_gft_share(lac_ctx_t ctx, lac_status status, struct lac_gft *g, int *from_cache)
{
    LAC_CHECK(lac_dist_agree(ctx, status));
    struct {
        double seconds;
        uint64_t fingerprint;
        int64_t n, cached;
    } head = {g->seconds, g->graph_fingerprint, g->n, *from_cache};
    LAC_CHECK(lac_dist_broadcast(ctx, &head, sizeof head, 0));
    if (head.n != g->n)   /* every rank read the same graph file */
        status = lac_error(ctx, LAC_ERR_VALUE, "rank %d's graph has %lld vertices, rank 0's %lld", ctx->rank,
                           (long long)g->n, (long long)head.n);
    LAC_CHECK(lac_dist_agree(ctx, status));
    g->seconds = head.seconds;
    g->graph_fingerprint = head.fingerprint;
    *from_cache = (int)head.cached;
    LAC_CHECK(lac_dist_broadcast(ctx, g->eigenvalues, g->n * (int64_t)sizeof(double), 0));
    return lac_dist_broadcast(ctx, g->vectors, g->n * g->n * (int64_t)lac_dtype_size(g->precision), 0);
}

/* Whether the ranks split the phases: the backend has the part entries and
 * every rank's state takes them (a rank whose device streams its tensor
 * runs whole phases, so then all do). */
static lac_status split(lac_ctx_t ctx, const lac_impute_backend *b, void *state, bool *yes)
{
    *yes = false;
    if (ctx->ranks == 1 || !b->gft_part || !b->svt_part || !b->estimate || !b->igft_part || !b->incomplete)
        return LAC_SUCCESS;
    double takes = !b->splits || b->splits(state) ? 1.0 : 0.0;
    LAC_CHECK(lac_dist_allreduce(ctx, &takes, 1, LAC_FLOAT64, LAC_DIST_MIN));
    *yes = takes == 1.0;
    return LAC_SUCCESS;
}

lac_status lac_impute_gft_dist(lac_ctx_t ctx, const lac_impute_backend *backend, void *state, int64_t N)
{
    bool yes;
    LAC_CHECK(split(ctx, backend, state, &yes));
    if (!yes) return backend->gft(ctx, state);
    int64_t lo, hi;
    lac_dist_range(ctx, N, ctx->rank, &lo, &hi);
    return lac_dist_agree(ctx, backend->gft_part(ctx, state, lo, hi));
}

lac_status lac_impute_igft_dist(lac_ctx_t ctx, const lac_impute_backend *backend, void *state, int64_t num_incomplete,
                                double momentum, double *missing_error_sq)
{
    bool yes;
    LAC_CHECK(split(ctx, backend, state, &yes));
    if (!yes) return backend->igft(ctx, state, momentum, missing_error_sq);
    int64_t lo, hi, elements;
    lac_dtype dtype;
    lac_dist_range(ctx, num_incomplete, ctx->rank, &lo, &hi);
    const double t0 = omp_get_wtime();
    lac_status st = backend->igft_part(ctx, state, lo, hi, momentum, missing_error_sq);
    const double t1 = omp_get_wtime();
    LAC_CHECK(lac_dist_agree(ctx, st));
    void *x_est = NULL;
    void *x_inc = backend->incomplete(state, &x_est, &elements, &dtype);
    const size_t size = lac_dtype_size(dtype);
    LAC_CHECK(lac_dist_allgatherv(ctx, NULL, (hi - lo) * elements, size, x_inc, NULL));
    if (x_est) LAC_CHECK(lac_dist_allgatherv(ctx, NULL, (hi - lo) * elements, size, x_est, NULL));
    LAC_CHECK(lac_dist_allreduce(ctx, missing_error_sq, 1, LAC_FLOAT64, LAC_DIST_SUM));
    lac_log(ctx, LAC_LOG_DEBUG, "impute igft rank %d of %d: vertices [%lld, %lld) of %lld, igft %.3f ms, exchange %.3f ms",
            ctx->rank, ctx->ranks, (long long)lo, (long long)hi, (long long)num_incomplete, 1e3 * (t1 - t0),
            1e3 * (omp_get_wtime() - t1));
    return LAC_SUCCESS;
}

lac_status lac_impute_svt_dist(lac_ctx_t ctx, const lac_impute_backend *backend, void *state, int64_t N,
                               const double *lambda, double *sigma_max, lac_impute_svt_stats *stats)
{
    bool yes;
    LAC_CHECK(split(ctx, backend, state, &yes));
    if (!yes) return backend->svt(ctx, state, lambda, sigma_max, stats);
    int64_t lo, hi, slice;
    lac_dtype dtype;
    lac_dist_range(ctx, N, ctx->rank, &lo, &hi);
    const double t0 = omp_get_wtime();
    lac_status st = backend->svt_part(ctx, state, lo, hi, lambda, sigma_max, stats);
    const double t1 = omp_get_wtime();
    st = lac_dist_agree(ctx, st);
    if (st < 0) return st;
    void *gest = backend->estimate(state, &slice, &dtype);
    LAC_CHECK(lac_dist_allgatherv(ctx, NULL, (hi - lo) * slice, lac_dtype_size(dtype), gest, NULL));
    if (sigma_max) LAC_CHECK(lac_dist_allgatherv(ctx, NULL, hi - lo, sizeof *sigma_max, sigma_max, NULL));
    double sums[4] = {stats->change_sq, stats->previous_sq, stats->truth_error_sq, (double)stats->rank_sum};
    LAC_CHECK(lac_dist_allreduce(ctx, sums, 4, LAC_FLOAT64, LAC_DIST_SUM));
    stats->change_sq = sums[0];
    stats->previous_sq = sums[1];
    stats->truth_error_sq = sums[2];
    stats->rank_sum = (int64_t)sums[3];
    lac_log(ctx, LAC_LOG_DEBUG, "impute svt rank %d of %d: slices [%lld, %lld), svt %.3f ms, exchange %.3f ms",
            ctx->rank, ctx->ranks, (long long)lo, (long long)hi, 1e3 * (t1 - t0), 1e3 * (omp_get_wtime() - t1));
    return LAC_SUCCESS;
}
