/* libFuzzer harness: lac_graph_load of edge lists, as LAC_GRAPH_EDGE_LIST
 * (ids from the file, and with num_vertices = 64 given) and as
 * LAC_GRAPH_AUTO (which sends anything but a Matrix Market banner here).
 * A failure leaves *out NULL; a graph that loads passes fuzz_check_graph. */
#include "fuzz_common.h"

static void load(const char *path, lac_graph_format format, int64_t num_vertices)
{
    lac_graph_params p = lac_graph_params_default();
    p.format = format;
    p.num_vertices = num_vertices;
    lac_graph_t g = NULL;
    lac_ctx_t ctx = fuzz_ctx_new();
    lac_status st = lac_graph_load(ctx, path, &p, &g);
    fuzz_check_status(ctx, st, "lac_graph_load");
    lac_ctx_destroy(&ctx);
    if (st != LAC_SUCCESS) {
        if (g) fuzz_fail("lac_graph_load failed (%d) and set *out", st);
        return;
    }
    if (num_vertices > 0 && lac_graph_num_vertices(g) != num_vertices)
        fuzz_fail("lac_graph_load: %lld vertices where %lld were given", (long long)lac_graph_num_vertices(g),
                  (long long)num_vertices);
    fuzz_check_graph(g, "lac_graph_load");
    lac_graph_destroy(&g);
    if (g) fuzz_fail("lac_graph_destroy left the handle set");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file(data, size);
    load(path, LAC_GRAPH_EDGE_LIST, 0);
    load(path, LAC_GRAPH_EDGE_LIST, 64);
    load(path, LAC_GRAPH_AUTO, 0);
    return 0;
}
