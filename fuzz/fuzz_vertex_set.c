/* libFuzzer harness: lac_graph_load_vertex_set against two small fixed
 * graphs, one whose ids are its vertex numbers (FUZZ_GRAPH_PLAIN) and one
 * whose ids are remapped (FUZZ_GRAPH_REMAPPED, up to INT64_MAX). On success
 * the mask holds 0 and 1 and names at least one vertex; on failure it is
 * untouched. */
#include "fuzz_common.h"

#include <string.h>

static lac_graph_t graphs[2];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!graphs[0]) {
        lac_ctx_t ctx = fuzz_ctx_new();
        graphs[0] = fuzz_graph_from_text(ctx, FUZZ_GRAPH_PLAIN);
        graphs[1] = fuzz_graph_from_text(ctx, FUZZ_GRAPH_REMAPPED);
        lac_ctx_destroy(&ctx);
    }
    const char *path = fuzz_file(data, size);
    for (int g = 0; g < 2; g++) {
        int64_t n = lac_graph_num_vertices(graphs[g]);
        unsigned char mask[16];
        if (n > 16) fuzz_fail("the harness's graph is too large");
        memset(mask, 2, sizeof mask);
        lac_array m = lac_array_vector(mask, LAC_BOOL, n);
        lac_ctx_t ctx = fuzz_ctx_new();
        lac_status st = lac_graph_load_vertex_set(ctx, graphs[g], path, &m);
        fuzz_check_status(ctx, st, "lac_graph_load_vertex_set");
        lac_ctx_destroy(&ctx);
        int64_t named = 0;
        for (int64_t v = 0; v < n; v++) {
            if (st != LAC_SUCCESS && mask[v] != 2) fuzz_fail("lac_graph_load_vertex_set failed (%d) and wrote the mask", st);
            if (st == LAC_SUCCESS && mask[v] > 1) fuzz_fail("lac_graph_load_vertex_set: mask[%lld] = %u", (long long)v, mask[v]);
            named += mask[v] == 1;
        }
        if (st == LAC_SUCCESS && named == 0) fuzz_fail("lac_graph_load_vertex_set succeeded naming no vertex");
    }
    return 0;
}
