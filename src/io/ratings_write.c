/* Rating file writer: triples, MovieLens "::", u.data, CSV with a header,
 * Matrix Market coordinate; written atomically. The readers are in
 * ratings_read.c. */
#include "data/ratings.h"
#include "io/io_internal.h"

lac_status lac_ratings_write(lac_ctx_t ctx, const char *path, lac_ratings_format format, lac_ratings_t r)
{
    LAC_ARG_NOT_NULL(ctx, path);
    LAC_ARG_NOT_NULL(ctx, r);
    if (format < LAC_RATINGS_TRIPLES || format > LAC_RATINGS_MATRIX_MARKET)
        return lac_error(ctx, LAC_ERR_ARGUMENT, "cannot write ratings as '%s'", lac_ratings_format_name(format));
    lac_atomic_file af;
    LAC_CHECK(lac_atomic_open(ctx, path, &af));
    FILE *fp = af.fp;
    if (format == LAC_RATINGS_CSV) fputs("userId,movieId,rating\n", fp);
    if (format == LAC_RATINGS_MATRIX_MARKET)
        fprintf(fp, "%%%%MatrixMarket matrix coordinate real general\n%lld %lld %lld\n", (long long)r->users.count,
                (long long)r->items.count, (long long)r->count);
    for (int64_t i = 0; i < r->count; i++) {
        const char *u = lac_idmap_name(&r->users, r->user[i]);
        const char *it = lac_idmap_name(&r->items, r->item[i]);
        double v = r->value[i];
        switch (format) {
        case LAC_RATINGS_TRIPLES: fprintf(fp, "%s %s %.7g\n", u, it, v); break;
        case LAC_RATINGS_MOVIELENS: fprintf(fp, "%s::%s::%.7g::0\n", u, it, v); break;
        case LAC_RATINGS_UDATA: fprintf(fp, "%s\t%s\t%.7g\t0\n", u, it, v); break;
        case LAC_RATINGS_CSV: fprintf(fp, "%s,%s,%.7g\n", u, it, v); break;
        default:
            fprintf(fp, "%lld %lld %.7g\n", (long long)r->user[i] + 1, (long long)r->item[i] + 1, v);
            break;
        }
    }
    if (ferror(fp)) {
        lac_atomic_abort(&af);
        return lac_error(ctx, LAC_ERR_IO, "write to %s failed", path);
    }
    return lac_atomic_commit(ctx, &af);
}
