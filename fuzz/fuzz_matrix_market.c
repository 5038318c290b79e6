/* libFuzzer harness: lac_graph_load of Matrix Market graphs, as
 * LAC_GRAPH_MATRIX_MARKET and as LAC_GRAPH_AUTO (Matrix Market when the
 * banner is there, else an edge list). A failure leaves *out NULL; a graph
 * that loads passes fuzz_check_graph. (Matrix Market ratings are read by the
 * ratings harness.) */
#include "fuzz_common.h"

static void load(const char *path, lac_graph_format format)
{
    lac_graph_params p = lac_graph_params_default();
    p.format = format;
    lac_graph_t g = NULL;
    lac_ctx_t ctx = fuzz_ctx_new();
    lac_status st = lac_graph_load(ctx, path, &p, &g);
    fuzz_check_status(ctx, st, "lac_graph_load");
    lac_ctx_destroy(&ctx);
    if (st != LAC_SUCCESS) {
        if (g) fuzz_fail("lac_graph_load failed (%d) and set *out", st);
        return;
    }
    fuzz_check_graph(g, "lac_graph_load");
    lac_graph_destroy(&g);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file(data, size);
    load(path, LAC_GRAPH_MATRIX_MARKET);
    load(path, LAC_GRAPH_AUTO);
    return 0;
}
