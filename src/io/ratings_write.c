/* Rating file writer: triples, MovieLens "::", u.data, CSV with a header,
 * Matrix Market coordinate; written atomically. Every id is written so that
 * the reader gets it back: CSV quotes what needs it (RFC 4180); the other
 * text formats have no quoting, so an id they cannot hold is refused before
 * anything is written. The readers are in ratings_read.c. */
#include "data/ratings.h"
#include "io/io_internal.h"

#include <string.h>

/* Why the reader of `format` would not read `id` back as written (NULL: it
 * would). The first field of a line also must not start a comment. */
static const char *unwritable(const char *id, lac_ratings_format format, int first_field)
{
    size_t len = strlen(id);
    if (len == 0) return "it is empty";
    if (strchr(id, '\r')) return "it holds a carriage return, which ends a line";
    if (format != LAC_RATINGS_CSV && strchr(id, '\n')) return "it holds a line break";
    if (format == LAC_RATINGS_TRIPLES || format == LAC_RATINGS_UDATA) {
        if (strpbrk(id, " \t")) return "it holds a space or a tab, the separator";
        if (strchr(id, ',') || strstr(id, "::")) return "it holds ',' or '::', which make the file read as CSV or MovieLens";
        if (first_field && id[0] == '#') return "it starts with '#', which starts a comment";
    } else if (format == LAC_RATINGS_MOVIELENS) {
        if (strstr(id, "::")) return "it holds '::', the separator";
        if (id[0] == ':' || id[len - 1] == ':') return "it starts or ends with ':', which joins the separator";
        if (strchr(" \t", id[0]) || strchr(" \t", id[len - 1])) return "it starts or ends with a space, which is trimmed";
    }
    return NULL;
}

/* The users' ids (first_field) or the items'. */
static lac_status check_ids(lac_ctx_t ctx, const char *path, lac_ratings_format format, const lac_idmap *map,
                            int first_field)
{
    const char *what = first_field ? "user" : "item";
    for (int64_t i = 0; i < map->count; i++) {
        const char *why = unwritable(lac_idmap_name(map, i), format, first_field);
        if (why)
            return lac_error(ctx, LAC_ERR_VALUE, "%s: %s id '%s' cannot be written as %s: %s (csv quotes it)", path, what,
                             lac_idmap_name(map, i), lac_ratings_format_name(format), why);
    }
    return LAC_SUCCESS;
}

/* An id as an RFC 4180 field: quoted when it holds a comma, a quote or a
 * line break, or starts or ends with a space or tab (which the reader trims
 * from unquoted fields), with its quotes doubled. (A carriage return is
 * refused before: the reader takes it for the end of a line.) */
static void put_csv_field(FILE *fp, const char *id)
{
    size_t len = strlen(id);
    if (!strpbrk(id, ",\"\n") && !(len && (strchr(" \t", id[0]) || strchr(" \t", id[len - 1])))) {
        fputs(id, fp);
        return;
    }
    fputc('"', fp);
    for (; *id; id++) {
        if (*id == '"') fputc('"', fp);
        fputc(*id, fp);
    }
    fputc('"', fp);
}

lac_status lac_ratings_write(lac_ctx_t ctx, const char *path, lac_ratings_format format, lac_ratings_t r)
{
    LAC_ARG_NOT_NULL(ctx, path);
    LAC_ARG_NOT_NULL(ctx, r);
    if (format < LAC_RATINGS_TRIPLES || format > LAC_RATINGS_MATRIX_MARKET)
        return lac_error(ctx, LAC_ERR_ARGUMENT, "cannot write ratings as '%s'", lac_ratings_format_name(format));
    if (format != LAC_RATINGS_MATRIX_MARKET) {   /* Matrix Market writes positions, not ids */
        LAC_CHECK(check_ids(ctx, path, format, &r->users, 1));
        LAC_CHECK(check_ids(ctx, path, format, &r->items, 0));
    }
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
        case LAC_RATINGS_CSV:
            put_csv_field(fp, u);
            fputc(',', fp);
            put_csv_field(fp, it);
            fprintf(fp, ",%.7g\n", v);
            break;
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
