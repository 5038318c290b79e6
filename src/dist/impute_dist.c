/* impute's SVT over MPI ranks: the N spectral slices are split by ranges,
 * each rank thresholds its own (the backend's svt_part), then the ranks
 * gather each other's Ĝest slices so that every rank holds the whole
 * estimate for the iGFT. Each slice's SVD is the same computation as in one
 * process, so the estimate is too; the stats are summed in rank order. */
#include "dist/comm.h"
#include "impute/impute_backend.h"

#include <omp.h>

lac_status lac_impute_svt_dist(lac_ctx_t ctx, const lac_impute_backend *backend, void *state, int64_t N,
                               const double *lambda, double *sigma_max, lac_impute_svt_stats *stats)
{
    if (ctx->ranks == 1 || !backend->svt_part || !backend->estimate)
        return backend->svt(ctx, state, lambda, sigma_max, stats);
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
