/* lac_graph_load: its parameters, and the choice of reader (Matrix Market when
 * the file starts with %%MatrixMarket, else an edge list). */
#include "io/graph_readers.h"
#include "io/io_internal.h"

#include <errno.h>
#include <string.h>

static lac_graph_params graph_defaults(void)
{
    lac_graph_params p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    p.format = LAC_GRAPH_AUTO;
    return p;
}

LAC_PARAMS_INIT(lac_graph_params, graph_defaults())

lac_status lac_graph_load(lac_ctx_t ctx, const char *path, const lac_graph_params *params, lac_graph_t *out)
{
    LAC_ARG_NOT_NULL(ctx, path);
    LAC_ARG_NOT_NULL(ctx, out);
    lac_graph_params p = lac_graph_params_default();
    if (params) LAC_CHECK(lac_params_read(ctx, "graph", params, &p, sizeof p, &p));
    if (p.format < LAC_GRAPH_AUTO || p.format > LAC_GRAPH_MATRIX_MARKET)
        return lac_error(ctx, LAC_ERR_ARGUMENT, "graph format must be auto, edge list or Matrix Market");
    if (p.num_vertices < 0)
        return lac_error(ctx, LAC_ERR_ARGUMENT, "num_vertices = %lld is negative", (long long)p.num_vertices);
    FILE *fp;
    LAC_CHECK(lac_open_input(ctx, path, &fp));
    lac_graph_format format = p.format;
    if (format == LAC_GRAPH_AUTO) {
        char head[15] = {0};
        size_t got = fread(head, 1, 14, fp);
        format = got == 14 && strncmp(head, "%%MatrixMarket", 14) == 0 ? LAC_GRAPH_MATRIX_MARKET : LAC_GRAPH_EDGE_LIST;
        rewind(fp);
    }
    lac_status st;
    if (format == LAC_GRAPH_MATRIX_MARKET) {
        if (p.num_vertices > 0) {
            fclose(fp);
            return lac_error(ctx, LAC_ERR_ARGUMENT, "%s: a Matrix Market file gives its own size; do not pass num_vertices", path);
        }
        st = lac_graph_read_matrix_market(ctx, path, fp, out);
    } else {
        st = lac_graph_read_edge_list(ctx, path, fp, &p, out);
    }
    fclose(fp);
    return st;
}
