/* SNAP-style edge lists: "u v" or "u v w" a line, separated by any whitespace
 * (or commas), '#' and '%' comments, non-negative integer ids that are remapped
 * to 0..n-1 when they are not already exactly that. */
#include "io/graph_readers.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int cmp_int64(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return (a > b) - (a < b);
}

/* Splits at whitespace and commas; a '#' or '%' ends the line. Returns the
 * token count (at most max; one more means "too many"). */
static int split_tokens(char *line, char **tokens, int max)
{
    int count = 0;
    char *p = line;
    for (;;) {
        while (*p && (isspace((unsigned char)*p) || *p == ',')) p++;
        if (!*p || *p == '#' || *p == '%') break;
        if (count == max + 1) break;
        tokens[count++] = p;
        while (*p && !isspace((unsigned char)*p) && *p != ',' && *p != '#' && *p != '%') p++;
        if (*p == '#' || *p == '%') {
            *p = '\0';
            break;
        }
        if (*p) *p++ = '\0';
    }
    return count;
}

static int parse_id(const char *text, int64_t *id)
{
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (errno || end == text || *end || v < 0) return 0;
    *id = v;
    return 1;
}

/* "# Directed graph (each unordered pair ...)": SNAP's header line. */
static int says_directed(const char *comment)
{
    char lower[256];
    size_t i = 0;
    for (; comment[i] && i < sizeof lower - 1; i++) lower[i] = (char)tolower((unsigned char)comment[i]);
    lower[i] = '\0';
    return strstr(lower, "directed graph") && !strstr(lower, "undirected graph");
}

lac_status lac_graph_read_edge_list(lac_ctx_t ctx, const char *path, FILE *fp, const lac_graph_params *params,
                                    lac_graph_t *out)
{
    lac_status st = LAC_SUCCESS;
    char *line = NULL;
    size_t line_cap = 0;
    lac_graph_edge *edges = NULL;
    int64_t *ids = NULL;
    int64_t count = 0, cap = 0, lineno = 0, max_id = -1;
    int seen_data = 0;
    lac_graph_input input;
    memset(&input, 0, sizeof input);
    input.source = path;

    while (getline(&line, &line_cap, fp) >= 0) {
        lineno++;
        const char *first = line;
        while (*first && isspace((unsigned char)*first)) first++;
        if ((*first == '#' || *first == '%') && !seen_data && says_directed(first)) input.declared_directed = 1;
        char *tokens[4];
        int k = split_tokens(line, tokens, 3);
        if (k == 0) continue;
        seen_data = 1;
        if (k < 2 || k > 3) {
            st = lac_error(ctx, LAC_ERR_FORMAT, "%s:%lld: expected 'u v' or 'u v weight', found %d fields", path,
                           (long long)lineno, k);
            goto done;
        }
        int64_t u, v;
        if (!parse_id(tokens[0], &u) || !parse_id(tokens[1], &v)) {
            st = lac_error(ctx, LAC_ERR_FORMAT, "%s:%lld: '%s' is not a vertex id (ids are integers >= 0)", path,
                           (long long)lineno, parse_id(tokens[0], &u) ? tokens[1] : tokens[0]);
            goto done;
        }
        double w = 1.0;
        if (k == 3) {
            char *end;
            w = strtod(tokens[2], &end);
            if (end == tokens[2] || *end) {
                st = lac_error(ctx, LAC_ERR_FORMAT, "%s:%lld: weight '%s' is not a number", path, (long long)lineno, tokens[2]);
                goto done;
            }
            const char *why = lac_graph_check_weight(w);
            if (why) {
                st = lac_error(ctx, LAC_ERR_FORMAT, "%s:%lld: %s", path, (long long)lineno, why);
                goto done;
            }
            input.weighted = 1;
        }
        if (params->num_vertices > 0 && (u >= params->num_vertices || v >= params->num_vertices)) {
            st = lac_error(ctx, LAC_ERR_RANGE, "%s:%lld: id %lld is outside [0, %lld) (the number of vertices given)", path,
                           (long long)lineno, (long long)(u >= params->num_vertices ? u : v),
                           (long long)params->num_vertices);
            goto done;
        }
        /* Every id makes a vertex, even one only on a dropped line: the line
         * is kept until the ids are known. */
        lac_graph_input_count(&input, u, v, w);
        if (u > max_id) max_id = u;
        if (v > max_id) max_id = v;
        if (count == cap) {
            int64_t ncap = cap ? 2 * cap : 4096;
            lac_graph_edge *grown = realloc(edges, (size_t)ncap * sizeof *grown);
            if (!grown) {
                st = lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "out of memory reading %s", path);
                goto done;
            }
            edges = grown;
            cap = ncap;
        }
        edges[count].u = u;
        edges[count].v = v;
        edges[count++].w = (u == v) ? -1.0 : w;   /* -1: kept only for its ids */
    }
    if (ferror(fp)) {
        st = lac_error(ctx, LAC_ERR_IO, "reading %s failed", path);
        goto done;
    }
    if (count == 0 && params->num_vertices == 0) {
        st = lac_error(ctx, LAC_ERR_VALUE, "%s has no edges (and no number of vertices was given)", path);
        goto done;
    }

    int64_t n;
    if (params->num_vertices > 0) {
        n = params->num_vertices;
    } else {
        /* Distinct ids, ascending; identity when they are exactly 0..max. */
        int64_t *all = lac_malloc(ctx, (size_t)(2 * count) * sizeof *all);
        if (!all) {
            st = LAC_ERR_OUT_OF_MEMORY;
            goto done;
        }
        for (int64_t i = 0; i < count; i++) {
            all[2 * i] = edges[i].u;
            all[2 * i + 1] = edges[i].v;
        }
        qsort(all, (size_t)(2 * count), sizeof *all, cmp_int64);
        int64_t distinct = 0;
        for (int64_t i = 0; i < 2 * count; i++)
            if (i == 0 || all[i] != all[i - 1]) all[distinct++] = all[i];
        if (max_id == distinct - 1) {   /* ids exactly 0..n-1 (no overflow at INT64_MAX) */
            free(all);
            n = distinct;
        } else {
            ids = realloc(all, (size_t)distinct * sizeof *ids);
            if (!ids) ids = all;
            n = distinct;
            for (int64_t i = 0; i < count; i++) {
                edges[i].u = (int64_t *)bsearch(&edges[i].u, ids, (size_t)n, sizeof *ids, cmp_int64) - ids;
                edges[i].v = (int64_t *)bsearch(&edges[i].v, ids, (size_t)n, sizeof *ids, cmp_int64) - ids;
            }
            lac_log(ctx, LAC_LOG_INFO, "%s: ids remapped to 0..%lld (vertex k is the k-th smallest id)", path,
                    (long long)n - 1);
        }
    }

    int64_t kept = 0;   /* drop self-loops and zero weights now that they named their vertices */
    for (int64_t i = 0; i < count; i++)
        if (edges[i].u != edges[i].v && edges[i].w > 0) edges[kept++] = edges[i];
    st = lac_graph_build(ctx, n, edges, kept, &input, ids, out);
    ids = NULL;   /* owned by the graph now, or freed by the builder */
done:
    free(ids);
    free(edges);
    free(line);
    return st;
}
