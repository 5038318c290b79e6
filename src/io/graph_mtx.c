/* Matrix Market graphs: "%%MatrixMarket matrix coordinate F S" with field F
 * pattern, real, integer or double and symmetry S general or symmetric; the
 * square matrix is the adjacency matrix (1-based indices). */
#include "io/graph_readers.h"

#include "core/knobs.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define LAC_GRAPH_ISOLATED_DEFAULT (1 << 20)

static void lower_in_place(char *s)
{
    for (; *s; s++) *s = (char)tolower((unsigned char)*s);
}

/* A line that holds no entry: blank, or a '%' comment. */
static int no_entry(const char *line)
{
    while (*line && isspace((unsigned char)*line)) line++;
    return *line == '%' || *line == '\0';
}

lac_status lac_graph_read_matrix_market(lac_ctx_t ctx, const char *path, FILE *fp, lac_graph_t *out)
{
    lac_status st = LAC_SUCCESS;
    char *line = NULL;
    size_t line_cap = 0;
    lac_graph_edge *edges = NULL;
    int64_t lineno = 0;
    lac_graph_input input;
    memset(&input, 0, sizeof input);
    input.source = path;

    if (getline(&line, &line_cap, fp) < 0) {
        st = lac_error(ctx, LAC_ERR_FORMAT, "%s is empty", path);
        goto done;
    }
    lineno = 1;
    char banner[32], object[32], layout[32], field[32], symmetry[32];
    if (sscanf(line, "%31s %31s %31s %31s %31s", banner, object, layout, field, symmetry) != 5 ||
        strcmp(banner, "%%MatrixMarket") != 0) {
        st = lac_error(ctx, LAC_ERR_FORMAT, "%s:1: expected '%%%%MatrixMarket matrix coordinate <field> <symmetry>'", path);
        goto done;
    }
    lower_in_place(object);
    lower_in_place(layout);
    lower_in_place(field);
    lower_in_place(symmetry);
    if (strcmp(object, "matrix") != 0) {
        st = lac_error(ctx, LAC_ERR_FORMAT, "%s:1: object '%s' is not a matrix", path, object);
        goto done;
    }
    if (strcmp(layout, "coordinate") != 0) {
        st = lac_error(ctx, LAC_ERR_UNSUPPORTED, "%s:1: '%s' (dense) Matrix Market is not read as a graph; use coordinate", path, layout);
        goto done;
    }
    int pattern = strcmp(field, "pattern") == 0;
    if (!pattern && strcmp(field, "real") != 0 && strcmp(field, "integer") != 0 && strcmp(field, "double") != 0) {
        st = lac_error(ctx, LAC_ERR_UNSUPPORTED, "%s:1: field '%s' is not a graph's (pattern, real or integer)", path, field);
        goto done;
    }
    int symmetric = strcmp(symmetry, "symmetric") == 0;
    if (!symmetric && strcmp(symmetry, "general") != 0) {
        st = lac_error(ctx, LAC_ERR_UNSUPPORTED, "%s:1: symmetry '%s' is not supported (general or symmetric)", path, symmetry);
        goto done;
    }
    input.weighted = !pattern;
    input.strict_symmetry = !symmetric;

    long long rows = -1, cols = -1, nnz = -1;
    while (getline(&line, &line_cap, fp) >= 0) {
        lineno++;
        const char *p = line;
        while (*p && isspace((unsigned char)*p)) p++;
        if (*p == '%' || *p == '\0') continue;
        if (sscanf(p, "%lld %lld %lld", &rows, &cols, &nnz) != 3 || rows < 0 || cols < 0 || nnz < 0) {
            st = lac_error(ctx, LAC_ERR_FORMAT, "%s:%lld: expected the size line 'rows cols entries'", path, (long long)lineno);
            goto done;
        }
        break;
    }
    if (nnz < 0) {
        st = lac_error(ctx, LAC_ERR_FORMAT, "%s: no size line", path);
        goto done;
    }
    if (rows != cols) {
        st = lac_error(ctx, LAC_ERR_SHAPE, "%s:%lld: the matrix is %lld x %lld; an adjacency matrix is square", path,
                       (long long)lineno, rows, cols);
        goto done;
    }
    if (rows == 0) {
        st = lac_error(ctx, LAC_ERR_VALUE, "%s: the graph has no vertices", path);
        goto done;
    }
    /* The size line is checked against the file before it sizes anything:
     * an entry takes 4 bytes at the least ("1 1" and a line break). */
    struct stat sb;
    long here = ftell(fp);
    if (fstat(fileno(fp), &sb) == 0 && S_ISREG(sb.st_mode) && here >= 0 &&
        (double)nnz > ((double)sb.st_size - (double)here + 1) / 4) {
        st = lac_error(ctx, LAC_ERR_FORMAT, "%s:%lld: the size line promises %lld entries; the %lld bytes after it hold %.0f at most",
                       path, (long long)lineno, nnz, (long long)(sb.st_size - here), ((double)sb.st_size - (double)here + 1) / 4);
        goto done;
    }
    /* Each entry touches two vertices at most: the rest have no edge, and a
     * size line asking for very many of them (10^9 vertices in 75 bytes) is
     * taken for a mistake, not sized, unless LACUNA_GRAPH_ISOLATED allows it. */
    int64_t isolated_max = lac_knob_int(ctx, LAC_KNOB_GRAPH_ISOLATED, LAC_GRAPH_ISOLATED_DEFAULT);
    if (isolated_max < 0) isolated_max = LAC_GRAPH_ISOLATED_DEFAULT;
    if ((double)rows - 2.0 * (double)nnz > (double)isolated_max) {
        st = lac_error(ctx, LAC_ERR_FORMAT,
                       "%s:%lld: the size line asks for %lld vertices, but its %lld entries touch %.0f at most: more "
                       "than %lld vertices without an edge (LACUNA_GRAPH_ISOLATED allows more)",
                       path, (long long)lineno, rows, nnz, 2.0 * (double)nnz, (long long)isolated_max);
        goto done;
    }
    int64_t count = 0, entries = 0, cap = nnz < 65536 ? nnz : 65536;
    edges = lac_malloc(ctx, (size_t)(cap > 0 ? cap : 1) * sizeof *edges);
    if (!edges) {
        st = LAC_ERR_OUT_OF_MEMORY;
        goto done;
    }
    while (getline(&line, &line_cap, fp) >= 0) {
        lineno++;
        if (no_entry(line)) continue;
        if (entries == nnz) {
            st = lac_error(ctx, LAC_ERR_FORMAT, "%s:%lld: more entries than the %lld the size line says", path,
                           (long long)lineno, nnz);
            goto done;
        }
        char *p = line;
        while (*p && isspace((unsigned char)*p)) p++;
        char *end;
        errno = 0;
        long long i = strtoll(p, &end, 10);
        long long j = end != p ? strtoll(end, &end, 10) : 0;
        if (errno || end == p) {
            st = lac_error(ctx, LAC_ERR_FORMAT, "%s:%lld: expected 'row col%s'", path, (long long)lineno, pattern ? "" : " value");
            goto done;
        }
        double w = 1.0;
        if (!pattern) {
            char *vend;
            w = strtod(end, &vend);
            if (vend == end) {
                st = lac_error(ctx, LAC_ERR_FORMAT, "%s:%lld: entry has no value", path, (long long)lineno);
                goto done;
            }
            end = vend;
        }
        while (*end && isspace((unsigned char)*end)) end++;
        if (*end) {
            st = lac_error(ctx, LAC_ERR_FORMAT, "%s:%lld: unexpected text '%.20s' after the entry", path, (long long)lineno, end);
            goto done;
        }
        if (i < 1 || i > rows || j < 1 || j > cols) {
            st = lac_error(ctx, LAC_ERR_RANGE, "%s:%lld: entry (%lld, %lld) is outside 1..%lld", path, (long long)lineno, i, j,
                           rows);
            goto done;
        }
        const char *why = lac_graph_check_weight(w);
        if (why) {
            st = lac_error(ctx, LAC_ERR_FORMAT, "%s:%lld: %s", path, (long long)lineno, why);
            goto done;
        }
        entries++;
        if (!lac_graph_input_count(&input, i, j, w)) continue;
        if (count == cap) {   /* grows with what the file holds, not with what its size line says */
            cap = 2 * cap < nnz ? 2 * cap : nnz;
            lac_graph_edge *grown = realloc(edges, (size_t)cap * sizeof *edges);
            if (!grown) {
                st = lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "out of memory for %lld edges of %s", (long long)cap, path);
                goto done;
            }
            edges = grown;
        }
        edges[count].u = i - 1;
        edges[count].v = j - 1;
        edges[count++].w = w;
    }
    if (ferror(fp)) {
        st = lac_error(ctx, LAC_ERR_IO, "reading %s failed", path);
        goto done;
    }
    if (entries < nnz) {
        st = lac_error(ctx, LAC_ERR_FORMAT, "%s: the size line promises %lld entries, the file has %lld", path, nnz,
                       (long long)entries);
        goto done;
    }
    /* A symmetric file stores one triangle: the builder mirrors every pair, so
     * it is an undirected listing; a general one must list both halves. */
    st = lac_graph_build(ctx, rows, edges, count, &input, NULL, out);
done:
    free(edges);
    free(line);
    return st;
}
