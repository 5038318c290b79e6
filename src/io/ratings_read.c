/* Rating readers: whitespace triples (LIBMF), MovieLens "::", u.data (tab +
 * timestamp), CSV (RFC 4180 quoting, an optional header), Matrix Market
 * coordinate; with `pairs`, interaction lines "user item" as rating 1. Every
 * malformed line is an error naming file and line, or is counted and
 * skipped. */
#include "data/ratings.h"
#include "io/io_internal.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static lac_ratings_read_params ratings_read_defaults(void)
{
    lac_ratings_read_params p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    p.format = LAC_RATINGS_AUTO;
    return p;
}

LAC_PARAMS_INIT(lac_ratings_read_params, ratings_read_defaults())

typedef struct {
    const char *start;
    size_t len;
} field;

#define MAX_FIELDS 8

/* Splits a CSV line into fields by RFC 4180, unquoting in place: a field
 * whose first character (after spaces) is '"' is quoted, "" in it is a
 * quote and commas and line breaks are text, and only spaces may follow its
 * closing quote; an unquoted field is trimmed of spaces and tabs and may hold
 * no quote. Returns the field count (up to MAX_FIELDS kept), or -1 with *why. */
static int split_csv(char *line, field *f, const char **why)
{
    int n = 0;
    char *p = line;
    for (;;) {
        while (*p == ' ' || *p == '\t') p++;
        char *start = p, *end;
        if (*p == '"') {
            char *w = start = ++p;
            for (;; p++) {
                if (!*p) {
                    *why = "a quoted field has no closing quote";
                    return -1;
                }
                if (*p == '"' && p[1] != '"') break;
                *w++ = *p;
                p += *p == '"';   /* "" is one quote */
            }
            end = w;
            for (p++; *p == ' ' || *p == '\t'; p++) {}
            if (*p && *p != ',') {
                *why = "text after a quoted field's closing quote";
                return -1;
            }
        } else {
            while (*p && *p != ',' && *p != '"') p++;
            if (*p == '"') {
                *why = "a quote inside an unquoted field (quote the whole field, doubling its quotes)";
                return -1;
            }
            end = p;
            while (end > start && (end[-1] == ' ' || end[-1] == '\t')) end--;
        }
        if (n < MAX_FIELDS) f[n] = (field){start, (size_t)(end - start)};
        n++;
        if (*p != ',') return n;
        p++;
    }
}

/* Splits line into fields by the format's separator; returns the field count
 * (up to MAX_FIELDS; more are counted but not kept). */
static int split_fields(const char *line, lac_ratings_format format, field *f)
{
    int n = 0;
    const char *p = line;
    if (format == LAC_RATINGS_TRIPLES || format == LAC_RATINGS_UDATA || format == LAC_RATINGS_MATRIX_MARKET) {
        for (;;) {
            while (*p == ' ' || *p == '\t') p++;
            if (!*p) break;
            const char *s = p;
            while (*p && *p != ' ' && *p != '\t') p++;
            if (n < MAX_FIELDS) f[n] = (field){s, (size_t)(p - s)};
            n++;
        }
        return n;
    }
    const char *sep = format == LAC_RATINGS_MOVIELENS ? "::" : ",";
    size_t seplen = strlen(sep);
    for (;;) {
        const char *e = strstr(p, sep);
        size_t len = e ? (size_t)(e - p) : strlen(p);
        /* CSV fields may carry spaces around them */
        const char *s = p;
        while (len && (*s == ' ' || *s == '\t')) s++, len--;
        while (len && (s[len - 1] == ' ' || s[len - 1] == '\t')) len--;
        if (n < MAX_FIELDS) f[n] = (field){s, len};
        n++;
        if (!e) break;
        p = e + seplen;
    }
    return n;
}

/* The field as a C string in buf; 0 when it is empty or does not fit. */
static int field_text(field f, char *buf, size_t cap)
{
    if (f.len == 0 || f.len >= cap) return 0;
    memcpy(buf, f.start, f.len);
    buf[f.len] = '\0';
    return 1;
}

static int parse_rating(field f, float *out)
{
    char buf[64];
    if (!field_text(f, buf, sizeof buf)) return 0;
    char *end;
    errno = 0;
    double v = strtod(buf, &end);
    if (*end || errno == ERANGE || !isfinite(v) || !isfinite((float)v)) return 0;
    *out = (float)v;
    return 1;
}

/* Records the timestamp of rating i (NaN: none), growing the array. */
static lac_status note_time(lac_ctx_t ctx, double **time, int64_t *cap, int64_t i, double t)
{
    if (i >= *cap) {
        int64_t grown = *cap ? *cap * 2 : 1024;
        double *g = realloc(*time, (size_t)grown * sizeof *g);
        if (!g) return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "out of memory for timestamps");
        *time = g;
        *cap = grown;
    }
    (*time)[i] = t;
    return LAC_SUCCESS;
}

static int parse_index(field f, long long *out)
{
    char buf[32];
    if (!field_text(f, buf, sizeof buf)) return 0;
    char *end;
    errno = 0;
    long long v = strtoll(buf, &end, 10);
    if (*end || errno) return 0;
    *out = v;
    return 1;
}

/* A field that reads as a number, as a rating or a numeric id would; "nan"
 * and "inf" read as names here. */
static int looks_numeric(field f)
{
    char buf[64];
    if (!field_text(f, buf, sizeof buf)) return 0;
    char *end;
    strtod(buf, &end);
    return *end == '\0' && (isdigit((unsigned char)buf[0]) || strchr("+-.", buf[0]));
}

/* The rule for a CSV file's first line that is not a rating: it is a header
 * when it has three or more fields and each is a name (not empty, not a
 * number), as "userId,movieId,rating,timestamp"; anything else ("1,1,x") is
 * a malformed line, never dropped silently. Interaction pairs have no
 * rating to tell by: there a first line of two names ("user,item") is the
 * header, so a pairs file whose ids are names needs one. */
static int is_csv_header(const field *f, int n, int pairs)
{
    if (n < (pairs ? 2 : 3)) return 0;
    for (int i = 0; i < n && i < MAX_FIELDS; i++)
        if (f[i].len == 0 || looks_numeric(f[i])) return 0;
    return 1;
}

/* Whether a CSV line ends inside a quoted field, by split_csv's rules: its
 * record then goes on over the next line. */
static int ends_in_quotes(const char *p)
{
    int quoted = 0, field_start = 1;
    for (; *p; p++) {
        if (quoted) {
            if (*p == '"' && p[1] == '"') p++;
            else if (*p == '"') quoted = 0;
        } else if (*p == ',') {
            field_start = 1;
        } else if (field_start && *p == '"') {
            quoted = 1, field_start = 0;
        } else if (*p != ' ' && *p != '\t') {
            field_start = 0;
        }
    }
    return quoted;
}

static lac_ratings_format guess_format(const char *line)
{
    if (strncmp(line, "%%MatrixMarket", 14) == 0) return LAC_RATINGS_MATRIX_MARKET;
    if (line[strspn(line, " \t")] == '"') return LAC_RATINGS_CSV;   /* a quoted first field */
    if (strstr(line, "::")) return LAC_RATINGS_MOVIELENS;
    if (strchr(line, ',')) return LAC_RATINGS_CSV;
    field f[MAX_FIELDS];
    if (strchr(line, '\t') && split_fields(line, LAC_RATINGS_UDATA, f) == 4) return LAC_RATINGS_UDATA;
    return LAC_RATINGS_TRIPLES;
}

/* What a line of the format must look like, for a line of n fields that
 * does not; a whitespace line of two where pairs are not read says where
 * they are. */
static const char *expected_line(lac_ratings_format format, int pairs, int n)
{
    if (format == LAC_RATINGS_MOVIELENS)
        return pairs ? "expected 'user::item[::rating[::timestamp]]'" : "expected 'user::item::rating::timestamp'";
    if (format == LAC_RATINGS_CSV) return pairs ? "expected 'user,item[,rating,...]'" : "expected 'user,item,rating,...'";
    if (pairs) return "expected 'user item [rating [timestamp]]'";
    if (n == 2 && format == LAC_RATINGS_TRIPLES)
        return "expected 'user item rating [timestamp]' (lines of 'user item' interactions are read by implicit "
               "training, evaluate and split --pairs)";
    return "expected 'user item rating [timestamp]'";
}

static void chomp(char *line, ssize_t *len)
{
    while (*len > 0 && (line[*len - 1] == '\n' || line[*len - 1] == '\r')) line[--*len] = '\0';
}

/* A CSV record whose quotes are open at the end of its line goes on over the
 * next lines (a quoted line break): they join it with '\n'. -1 when the file
 * ends first, or out of memory. */
static ssize_t join_quoted_lines(FILE *fp, char **line, size_t *cap, ssize_t len, long long *lineno)
{
    char *more = NULL;
    size_t more_cap = 0;
    ssize_t got = 0;
    while (ends_in_quotes(*line)) {
        if ((got = getline(&more, &more_cap, fp)) < 0) break;
        ++*lineno;
        chomp(more, &got);
        if ((size_t)(len + got + 2) > *cap) {
            size_t grown_cap = (size_t)(len + got + 2) * 2;
            char *grown = realloc(*line, grown_cap);
            if (!grown) {
                got = -1;
                break;
            }
            *line = grown;
            *cap = grown_cap;
        }
        (*line)[len++] = '\n';
        memcpy(*line + len, more, (size_t)got + 1);
        len += got;
    }
    free(more);
    return got < 0 ? -1 : len;
}

lac_status lac_ratings_read(lac_ctx_t ctx, const char *path, const lac_ratings_read_params *params,
                            lac_ratings_t *out)
{
    LAC_ARG_NOT_NULL(ctx, path);
    LAC_ARG_NOT_NULL(ctx, out);
    lac_ratings_read_params p = lac_ratings_read_params_default();
    if (params) LAC_CHECK(lac_params_read(ctx, "ratings reader", params, &p, sizeof p, &p));
    if (p.format < LAC_RATINGS_AUTO || p.format > LAC_RATINGS_MATRIX_MARKET)
        return lac_error(ctx, LAC_ERR_ARGUMENT, "unknown ratings format %d", (int)p.format);
    FILE *fp;
    LAC_CHECK(lac_open_input(ctx, path, &fp));

    lac_ratings_t r = NULL;
    lac_status st = lac_ratings_new(ctx, 1024, &r);
    char *line = NULL;
    size_t line_cap = 0;
    ssize_t len;
    long long lineno = 0, first_line = 0, mm_rows = -1, mm_cols = -1, mm_nnz = -1;
    int mm_header = 0, csv_first = 1, any_time = 0;
    double *time = NULL;   /* the ratings' timestamps, kept when some line had one */
    int64_t time_cap = 0;
    lac_ratings_format format = p.format;
    if (st < 0) goto done;

    while ((len = getline(&line, &line_cap, fp)) >= 0) {
        first_line = ++lineno;
        chomp(line, &len);
        if (format == LAC_RATINGS_AUTO) {
            const char *s = line;
            while (*s == ' ' || *s == '\t') s++;
            if (!*s || *s == '#') continue;
            format = guess_format(line);
        }
        if (format == LAC_RATINGS_CSV && ends_in_quotes(line) && (len = join_quoted_lines(fp, &line, &line_cap, len, &lineno)) < 0) {
            st = lac_error(ctx, ferror(fp) ? LAC_ERR_IO : LAC_ERR_FORMAT, "%s:%lld: a quoted field has no closing quote",
                           path, first_line);
            goto done;
        }
        const char *why = NULL;
        if (format == LAC_RATINGS_MATRIX_MARKET) {
            if (!mm_header) {
                if (strncmp(line, "%%MatrixMarket", 14) != 0) {
                    st = lac_error(ctx, LAC_ERR_FORMAT, "%s:%lld: expected a %%%%MatrixMarket header", path, lineno);
                    goto done;
                }
                if (!strstr(line, "coordinate") || strstr(line, "pattern") || strstr(line, "complex")) {
                    st = lac_error(ctx, LAC_ERR_FORMAT,
                                   "%s:%lld: only 'matrix coordinate real|integer' Matrix Market files hold ratings",
                                   path, lineno);
                    goto done;
                }
                mm_header = 1;
                continue;
            }
            if (line[0] == '%') continue;
        } else if (format == LAC_RATINGS_TRIPLES || format == LAC_RATINGS_UDATA) {
            const char *s = line;
            while (*s == ' ' || *s == '\t') s++;
            if (*s == '#') continue;
        }
        field f[MAX_FIELDS];
        int n = format == LAC_RATINGS_CSV ? split_csv(line, f, &why) : split_fields(line, format, f);
        if (n == 0 || (n == 1 && f[0].len == 0)) continue;   /* blank line */
        int csv_header_possible = format == LAC_RATINGS_CSV && csv_first;
        if (format == LAC_RATINGS_CSV) csv_first = 0;

        if (format == LAC_RATINGS_MATRIX_MARKET && mm_rows < 0) {
            if (n != 3 || !parse_index(f[0], &mm_rows) || !parse_index(f[1], &mm_cols) || !parse_index(f[2], &mm_nnz) ||
                mm_rows < 0 || mm_cols < 0 || mm_nnz < 0) {
                st = lac_error(ctx, LAC_ERR_FORMAT, "%s:%lld: expected the size line 'rows cols entries'", path, lineno);
                goto done;
            }
            continue;
        }
        float value = 0;
        if (why) {
            /* a CSV line that does not split */
        } else if (format == LAC_RATINGS_MATRIX_MARKET) {
            long long i, j;
            if (n != 3) why = "expected 'row column value'";
            else if (!parse_index(f[0], &i) || !parse_index(f[1], &j)) why = "row or column is not an integer";
            else if (i < 1 || i > mm_rows || j < 1 || j > mm_cols) why = "row or column outside the size line's range";
            else if (!parse_rating(f[2], &value)) why = "the value is not a finite number";
            else if (r->count >= mm_nnz) why = "more entries than the size line says";
        } else {
            /* pairs: "user item" is an interaction, rating 1 (not u.data, whose lines are four fields) */
            const int pairs = p.pairs && format != LAC_RATINGS_UDATA;
            int min_fields = pairs ? 2 : 3, max_fields = format == LAC_RATINGS_TRIPLES || format == LAC_RATINGS_UDATA ? 4 : MAX_FIELDS;
            if (n < min_fields || n > max_fields) {
                why = expected_line(format, pairs, n);
            } else if (n == 2) {   /* pairs */
                if (csv_header_possible && is_csv_header(f, n, 1)) continue;
                value = 1.0f;
                if (f[0].len == 0 || f[1].len == 0) why = "empty user or item id";
            } else if (!parse_rating(f[2], &value)) {
                if (csv_header_possible && is_csv_header(f, n, 0)) continue;
                why = csv_header_possible ? "the first line is neither a header (names only) nor a rating line: "
                                            "the rating is not a finite number"
                                          : "the rating is not a finite number";
            } else if (f[0].len == 0 || f[1].len == 0) {
                why = "empty user or item id";
            }
        }
        if (why) {
            if (p.skip_bad) {
                r->skipped++;
                continue;
            }
            st = lac_error(ctx, LAC_ERR_FORMAT, "%s:%lld: %s (format %s)", path, first_line, why,
                           lac_ratings_format_name(format));
            goto done;
        }
        int32_t u, it;
        LAC_CHECK_GOTO(lac_idmap_intern(ctx, &r->users, f[0].start, f[0].len, &u), st, done);
        LAC_CHECK_GOTO(lac_idmap_intern(ctx, &r->items, f[1].start, f[1].len, &it), st, done);
        LAC_CHECK_GOTO(lac_ratings_push(ctx, r, u, it, value), st, done);
        double t = NAN;
        char stamp[64];
        if (format != LAC_RATINGS_MATRIX_MARKET && n >= 4 && field_text(f[3], stamp, sizeof stamp)) {
            char *end;
            double v = strtod(stamp, &end);
            if (!*end && isfinite(v)) t = v, any_time = 1;
        }
        LAC_CHECK_GOTO(note_time(ctx, &time, &time_cap, r->count - 1, t), st, done);
    }
    if (ferror(fp)) {
        st = lac_error(ctx, LAC_ERR_IO, "read error on %s", path);
        goto done;
    }
    if (format == LAC_RATINGS_MATRIX_MARKET && mm_nnz >= 0 && r->count + r->skipped < mm_nnz) {
        st = lac_error(ctx, LAC_ERR_FORMAT, "%s: the size line promises %lld entries but only %lld follow (truncated?)",
                       path, mm_nnz, (long long)(r->count + r->skipped));
        goto done;
    }
    if (r->count == 0) {
        st = lac_error(ctx, LAC_ERR_VALUE, "%s holds no ratings%s", path,
                       r->skipped ? " (every line was malformed)" : "");
        goto done;
    }
done:
    free(line);
    fclose(fp);
    if (st < 0) {
        free(time);
        lac_ratings_destroy(&r);
        return st;
    }
    if (any_time) r->time = time;
    else free(time);
    *out = r;
    return LAC_SUCCESS;
}
