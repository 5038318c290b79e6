/* map over MPI ranks: the rows of S, R and w are split by ranges, each rank
 * maps its own rows through the backend table into partial targets (float64
 * sums, or the values themselves for MIN/MAX), the partials are reduced in
 * rank order (dist/comm.h) and every rank finishes T with the same lines as
 * the CPU backend (map/map_arith.h). A rank reads only its own rows, so
 * memory-mapped .npy inputs are read once across the job. A plan over ranks
 * keeps this rank's rows of the bridge, cut into the pieces a call maps at a
 * time, each a plan of the backend's own. */
#include "dist/comm.h"
#include "map/map_arith.h"
#include "map/map_backend.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* Rows a float32 call widens at a time: one reused buffer (a copy of the
 * whole range would cost more in page faults than the mapping), but enough
 * rows that each call's O(n) set-up and merge stays small against its pass. */
#define WIDEN_ROWS ((int64_t)1 << 20)

static void widen(const void *values, lac_dtype dtype, int64_t count, double *out)
{
    for (int64_t k = 0; k < count; k++) out[k] = lac_load_real(values, dtype, k);
}

/* This rank's part of a plan: rows [lo, hi) of the bridge, in pieces of
 * `piece` rows (the last one shorter), piece k planned as parts[k]; and a
 * copy of the rows, which the touched flags and error positions read. */
struct lac_map_dist_plan {
    int64_t lo, hi, piece, count;
    struct lac_map_plan *parts;
    void *bridge;
    lac_dtype index_dtype;   /* of bridge (a planned call carries none) */
};

/* Rows a call over [lo, hi) maps at a time: all of them, or with float32
 * values widened to float64 pieces of WIDEN_ROWS (or 4 n) rows. */
static int64_t piece_rows(int64_t rows, int64_t n, bool wide)
{
    int64_t piece = rows;
    if (wide && piece > WIDEN_ROWS) piece = 4 * n > WIDEN_ROWS ? 4 * n : WIDEN_ROWS;
    return piece < 1 ? 1 : piece;
}

/* Maps rows [lo, hi) of c into the partial target part->target (and MEAN's
 * sum of weights into wsum) through the table, or through the plan's pieces
 * (dp), widening float32 values to float64 piece by piece; the first piece
 * overwrites, the next ones fold in. */
static lac_status map_part(lac_ctx_t ctx, const lac_map_backend *table, const lac_map_call *c, lac_map_call *part,
                           double *wsum, int64_t lo, int64_t hi, const struct lac_map_dist_plan *dp)
{
    const size_t vs = lac_dtype_size(c->value_dtype), is = lac_dtype_size(c->index_dtype);
    /* Even COUNT under NaN propagation, which never reads S, gets a widened
     * source: a backend may still copy S whole (the CUDA backend streams host
     * arrays to the device), and a float32 buffer read as float64 runs past
     * its end. */
    const bool wide = part->value_dtype != c->value_dtype, wide_source = wide;
    const int64_t piece = dp ? dp->piece : piece_rows(hi - lo, c->n, wide);
    double *buffer = NULL;
    if (wide_source || (wide && c->weights)) {
        buffer = malloc((size_t)piece * (size_t)(wide_source ? c->b + 1 : 1) * sizeof *buffer);
        if (!buffer) return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "map over MPI ranks: no memory to widen %lld rows",
                                      (long long)piece);
    }
    lac_status st = LAC_SUCCESS;
    for (int64_t at = lo, k = 0; st == LAC_SUCCESS && (at < hi || at == lo); at += piece, k++) {
        const int64_t len = hi - at < piece ? hi - at : piece;
        part->m = len;
        part->bridge = dp ? NULL : (const char *)c->bridge + at * (int64_t)is;
        part->bridge_checked = dp != NULL;
        part->source = (const char *)c->source + at * c->b * (int64_t)vs;
        part->weights = c->weights ? (const char *)c->weights + at * (int64_t)vs : NULL;
        if (wide_source) {
            widen(part->source, c->value_dtype, len * c->b, buffer);
            part->source = buffer;
        }
        if (wide && c->weights) {
            double *w = wide_source ? buffer + piece * c->b : buffer;
            widen(part->weights, c->value_dtype, len, w);
            part->weights = w;
        }
        part->params.accumulate = at > lo;
        st = dp ? table->plan_execute(ctx, &dp->parts[k], part) : table->map(ctx, part);
        if (st == LAC_SUCCESS && wsum) {
            lac_map_call count = *part;   /* MEAN's sum of weights: COUNT skips exactly what SUM skips */
            count.params.op = LAC_MAP_COUNT;
            count.target = wsum;
            st = dp ? table->plan_execute(ctx, &dp->parts[k], &count) : table->map(ctx, &count);
        }
    }
    free(buffer);
    return st;
}

/* touched[r * b + col] = 1 for every element of mine's rows (this rank's,
 * with their bridge) the NaN policy lets count (the bridge is already
 * checked by the rank's own pass). */
static void mark_touched(const lac_map_call *mine, uint8_t *touched)
{
    for (int64_t i = 0; i < mine->m; i++) {
        int64_t r = lac_map_bridge_at(mine, i);
        double wi = mine->weights ? lac_load_real(mine->weights, mine->value_dtype, i) : 1.0, x;
        for (int64_t col = 0; col < mine->b; col++)
            if (lac_map_element_at(mine, i, col, wi, &x) > 0) touched[r * mine->b + col] = 1;
    }
}

/* c restricted to rows [lo, hi), the bridge read from `bridge` (its rows). */
static lac_map_call rows_of(const lac_map_call *c, int64_t lo, int64_t hi, const void *bridge)
{
    const size_t vs = lac_dtype_size(c->value_dtype);
    lac_map_call mine = *c;
    mine.m = hi - lo;
    mine.bridge = bridge;
    mine.bridge_checked = 0;
    mine.source = c->source ? (const char *)c->source + lo * c->b * (int64_t)vs : NULL;   /* NULL: a plan's build */
    mine.weights = c->weights ? (const char *)c->weights + lo * (int64_t)vs : NULL;
    return mine;
}

static lac_status map_dist(lac_ctx_t ctx, const lac_map_backend *table, const lac_map_call *c,
                           const struct lac_map_dist_plan *dp)
{
    if (c->memory != LAC_MEM_HOST)
        return lac_error(ctx, LAC_ERR_UNSUPPORTED, "map over %d MPI ranks takes host arrays", ctx->ranks);
    const lac_map_params *p = &c->params;
    const bool minmax = p->op == LAC_MAP_MIN || p->op == LAC_MAP_MAX, mean = p->op == LAC_MAP_MEAN;
    const bool flags = lac_map_needs_flags(c);
    const lac_dtype part_dtype = minmax ? c->value_dtype : LAC_FLOAT64;
    const size_t ps = lac_dtype_size(part_dtype);
    const int64_t nt = c->n * c->b;
    int64_t lo, hi;
    lac_dist_range(ctx, c->m, ctx->rank, &lo, &hi);
    lac_map_call mine =
        rows_of(c, lo, hi, dp ? dp->bridge : (const char *)c->bridge + lo * (int64_t)lac_dtype_size(c->index_dtype));
    if (dp) mine.index_dtype = dp->index_dtype;

    void *acc = malloc((size_t)(nt > 0 ? nt : 1) * ps);
    double *wsum = mean ? malloc((size_t)(nt > 0 ? nt : 1) * sizeof *wsum) : NULL;
    uint8_t *touched = flags ? calloc((size_t)(nt > 0 ? nt : 1), 1) : NULL;
    lac_status st = LAC_SUCCESS;
    if (!acc || (mean && !wsum) || (flags && !touched))
        st = lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "map over MPI ranks: no memory for the partial targets (%lld x %lld)",
                       (long long)c->n, (long long)c->b);

    /* This rank's rows into partials that the reduction can fold: sums from
     * +0, MIN/MAX from their identity. */
    lac_map_call part = *c;
    part.params.op = mean ? LAC_MAP_SUM : p->op;
    part.params.empty_value = minmax ? lac_map_identity(p->op) : 0.0;
    part.target = acc;
    part.value_dtype = part_dtype;
    const double t0 = omp_get_wtime();
    if (st == LAC_SUCCESS) st = map_part(ctx, table, c, &part, wsum, lo, hi, dp);
    if (st == LAC_ERR_RANGE || st == LAC_ERR_VALUE) {
        /* The rank's message counts its own rows: name the position in the
         * whole input, as one process would (the lowest failing rank's
         * message is the one every rank reports). */
        lac_status whole = lac_map_scan_host_at(ctx, &mine, lo);
        if (whole < 0) st = whole;
    }
    if (st == LAC_SUCCESS && flags) mark_touched(&mine, touched);

    const double t1 = omp_get_wtime();
    st = lac_dist_agree(ctx, st);
    if (st == LAC_SUCCESS) st = lac_dist_allreduce(ctx, acc, nt, part_dtype, p->op == LAC_MAP_MIN ? LAC_DIST_MIN
                                                                    : p->op == LAC_MAP_MAX ? LAC_DIST_MAX : LAC_DIST_SUM);
    if (st == LAC_SUCCESS && mean) st = lac_dist_allreduce(ctx, wsum, nt, LAC_FLOAT64, LAC_DIST_SUM);
    if (st == LAC_SUCCESS && flags) st = lac_dist_allreduce(ctx, touched, nt, LAC_BOOL, LAC_DIST_OR);
    const double t2 = omp_get_wtime();
    if (st == LAC_SUCCESS) {
#pragma omp parallel for num_threads(lac_threads(ctx)) schedule(static)
        for (int64_t k = 0; k < nt; k++)
            lac_map_finalize(c, k, lac_load_real(acc, part_dtype, k), wsum ? wsum[k] : 0.0, touched ? touched[k] : -1);
    }
    lac_log(ctx, LAC_LOG_DEBUG, "map rank %d of %d: rows [%lld, %lld), pass %.3f ms, reduce %.3f ms, finish %.3f ms",
            ctx->rank, ctx->ranks, (long long)lo, (long long)hi, 1e3 * (t1 - t0), 1e3 * (t2 - t1),
            1e3 * (omp_get_wtime() - t2));
    free(acc);
    free(wsum);
    free(touched);
    return st;
}

lac_status lac_map_dist(lac_ctx_t ctx, const lac_map_backend *table, const lac_map_call *c)
{
    return map_dist(ctx, table, c, NULL);
}

lac_status lac_map_dist_plan_execute(lac_ctx_t ctx, lac_map_plan_t plan, const lac_map_call *c)
{
    return map_dist(ctx, plan->table, c, plan->dist);
}

void lac_map_dist_plan_release(lac_map_plan_t plan)
{
    struct lac_map_dist_plan *dp = plan->dist;
    if (!dp) return;
    for (int64_t k = 0; k < dp->count; k++)
        if (dp->parts[k].state) plan->table->plan_release(&dp->parts[k]);
    free(dp->parts);
    free(dp->bridge);
    free(dp);
    plan->dist = NULL;
}

lac_status lac_map_dist_plan_build(lac_ctx_t ctx, lac_map_plan_t plan, const lac_map_call *c)
{
    lac_status st = LAC_SUCCESS;
    if (c->memory != LAC_MEM_HOST)
        st = lac_error(ctx, LAC_ERR_UNSUPPORTED, "a map plan over %d MPI ranks takes a host bridge", ctx->ranks);
    struct lac_map_dist_plan *dp = st == LAC_SUCCESS ? calloc(1, sizeof *dp) : NULL;
    plan->dist = dp;
    const size_t is = lac_dtype_size(c->index_dtype);
    if (dp) {
        lac_dist_range(ctx, c->m, ctx->rank, &dp->lo, &dp->hi);
        dp->index_dtype = c->index_dtype;
        /* float32 calls map pieces of this many rows (map_part); float64 calls
         * go through the same pieces, which only adds a fold per piece. */
        dp->piece = piece_rows(dp->hi - dp->lo, c->n, true);
        dp->count = (dp->hi - dp->lo + dp->piece - 1) / dp->piece;
        if (dp->count < 1) dp->count = 1;
        dp->parts = calloc((size_t)dp->count, sizeof *dp->parts);
        dp->bridge = malloc((size_t)(dp->hi - dp->lo > 0 ? dp->hi - dp->lo : 1) * is);
        if (dp->parts && dp->bridge)
            memcpy(dp->bridge, (const char *)c->bridge + dp->lo * (int64_t)is, (size_t)(dp->hi - dp->lo) * is);
    }
    if (st == LAC_SUCCESS && (!dp || !dp->parts || !dp->bridge))
        st = lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "map plan over MPI ranks: no memory for this rank's rows");
    for (int64_t k = 0; st == LAC_SUCCESS && k < dp->count; k++) {
        const int64_t at = dp->lo + k * dp->piece, len = dp->hi - at < dp->piece ? dp->hi - at : dp->piece;
        struct lac_map_plan *part = &dp->parts[k];
        part->m = len;
        part->n = c->n;
        part->backend = plan->backend;
        part->table = plan->table;
        part->deterministic = 1;
        lac_map_call piece = *c;
        piece.m = len;
        piece.bridge = (const char *)c->bridge + at * (int64_t)is;
        st = plan->table->plan_build(ctx, part, &piece);
        if (st == LAC_ERR_RANGE) {
            lac_map_call mine = rows_of(c, dp->lo, dp->hi, dp->bridge);
            lac_status whole = lac_map_scan_host_at(ctx, &mine, dp->lo);
            if (whole < 0) st = whole;
        }
    }
    st = lac_dist_agree(ctx, st);
    if (st < 0) lac_map_dist_plan_release(plan);
    return st;
}
