/* Vertex sets from text files of ids (e.g. the observed vertices of an
 * imputation): the graph's own ids, separated by whitespace or commas, '#'
 * comments; errors name the line. */
#include "data/graph.h"
#include "io/io_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

lac_status lac_graph_load_vertex_set(lac_ctx_t ctx, lac_graph_t graph, const char *path, lac_array *mask)
{
    LAC_ARG_NOT_NULL(ctx, graph);
    LAC_ARG_NOT_NULL(ctx, path);
    LAC_ARG_NOT_NULL(ctx, mask);
    int64_t n = graph->n;
    if (mask->dtype != LAC_BOOL) return lac_error(ctx, LAC_ERR_DTYPE, "the vertex mask must be bool, not %s", lac_dtype_name(mask->dtype));
    if (mask->ndim != 1 || mask->shape[0] != n)
        return lac_error(ctx, LAC_ERR_SHAPE, "the vertex mask must be a vector of %lld", (long long)n);
    if (mask->memory != LAC_MEM_HOST || (n > 0 && !mask->data))
        return lac_error(ctx, LAC_ERR_ARGUMENT, "the vertex mask must be host memory");

    unsigned char *set = lac_calloc(ctx, (size_t)(n > 0 ? n : 1), 1);
    if (!set) return LAC_ERR_OUT_OF_MEMORY;
    FILE *fp;
    lac_status opened = lac_open_input(ctx, path, &fp);
    if (opened < 0) {
        free(set);
        return opened;
    }
    lac_status st = LAC_SUCCESS;
    char *line = NULL, **tokens = NULL;
    size_t cap = 0, tok_cap = 0;
    int64_t lineno = 0, named = 0;
    while (getline(&line, &cap, fp) >= 0) {
        lineno++;
        int64_t count = lac_text_tokens(line, &tokens, &tok_cap);
        if (count < 0) {
            st = lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "out of memory reading %s", path);
            goto done;
        }
        for (int64_t t = 0; t < count; t++) {
            const char *tok = tokens[t];
            char *end;
            errno = 0;
            long long id = strtoll(tok, &end, 10);
            if (errno || end == tok || *end) {
                st = lac_error(ctx, LAC_ERR_FORMAT, "%s:%lld: '%s' is not a vertex id", path, (long long)lineno, tok);
                goto done;
            }
            int64_t v;
            if (lac_graph_vertex_of_id(ctx, graph, id, &v) < 0) {
                st = lac_error(ctx, LAC_ERR_RANGE, "%s:%lld: id %lld is not a vertex of the graph (%lld vertices%s)", path,
                               (long long)lineno, id, (long long)n, graph->ids ? ", ids remapped" : ", ids 0..N-1");
                goto done;
            }
            set[v] = 1;
            named++;
        }
    }
    if (ferror(fp)) {
        st = lac_error(ctx, LAC_ERR_IO, "reading %s failed", path);
        goto done;
    }
    if (named == 0) {
        st = lac_error(ctx, LAC_ERR_VALUE, "%s names no vertex", path);
        goto done;
    }
    memcpy(mask->data, set, (size_t)n);
done:
    fclose(fp);
    free(tokens);
    free(line);
    free(set);
    return st;
}
