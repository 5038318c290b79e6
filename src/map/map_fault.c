/* Fault reporting for every map backend: one wording for an out-of-range
 * bridge entry or a NaN under LAC_NAN_ERROR, and the host scan that finds the
 * smallest offending position. Below the front end, so backends never call
 * back up into it. */
#include "map/map_backend.h"

#include <math.h>

lac_status lac_map_report_bad_index(lac_ctx_t ctx, int64_t position, int64_t value, int64_t n)
{
    return lac_error(ctx, LAC_ERR_RANGE, "bridge[%lld] = %lld is outside [0, %lld)", (long long)position,
                     (long long)value, (long long)n);
}

lac_status lac_map_report_nan(lac_ctx_t ctx, const char *what, int64_t row, int64_t col)
{
    if (col >= 0)
        return lac_error(ctx, LAC_ERR_VALUE, "%s[%lld, %lld] is NaN (nan policy: error)", what, (long long)row,
                         (long long)col);
    return lac_error(ctx, LAC_ERR_VALUE, "%s[%lld] is NaN (nan policy: error)", what, (long long)row);
}

lac_status lac_map_scan_host(lac_ctx_t ctx, const lac_map_call *c) { return lac_map_scan_host_at(ctx, c, 0); }

lac_status lac_map_scan_host_at(lac_ctx_t ctx, const lac_map_call *c, int64_t offset)
{
    if (!c->bridge) return LAC_SUCCESS;   /* planned calls: the bridge was checked at build */
    /* Row by row so that the reported position is the smallest offending one,
     * whatever kind of fault it is. */
    int check_nan = c->params.nan_policy == LAC_NAN_ERROR;
    for (int64_t i = 0; i < c->m; i++) {
        int64_t r = lac_map_bridge_at(c, i);
        if (r < 0 || r >= c->n) return lac_map_report_bad_index(ctx, offset + i, r, c->n);
        if (!check_nan) continue;
        if (c->weights && isnan(lac_load_real(c->weights, c->value_dtype, i)))
            return lac_map_report_nan(ctx, "weights", offset + i, -1);
        for (int64_t col = 0; col < c->b; col++)
            if (isnan(lac_load_real(c->source, c->value_dtype, i * c->b + col)))
                return lac_map_report_nan(ctx, "source", offset + i, c->b > 1 ? col : -1);
    }
    return LAC_SUCCESS;
}

lac_status lac_map_report_flagged(lac_ctx_t ctx, const lac_map_call *call, int64_t flagged)
{
    lac_status st = lac_map_scan_host(ctx, call);
    if (st >= 0)
        st = lac_error(ctx, LAC_ERR_INTERNAL, "map: row %lld was rejected but a rescan found no fault", (long long)flagged);
    return st;
}
