/* libFuzzer harness: lac_gft_load of basis cache files against a small fixed
 * graph (FUZZ_GRAPH_PLAIN), as float32 and float64. Each input is read as it
 * is, and again with its checksum (header bytes 32..39, over everything after
 * the 40-byte header) recomputed, so that mutations get past it. A basis that
 * loads has the graph's size and copies out; a failure leaves *out NULL. */
#include "fuzz_common.h"

#include <stdlib.h>
#include <string.h>

static lac_graph_t graph;

static void load(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file(data, size);
    static const lac_dtype precisions[] = {LAC_FLOAT32, LAC_FLOAT64};
    for (int i = 0; i < 2; i++) {
        lac_gft_t gft = NULL;
        lac_ctx_t ctx = fuzz_ctx_new();
        lac_status st = lac_gft_load(ctx, path, graph, precisions[i], &gft);
        fuzz_check_status(ctx, st, "lac_gft_load");
        if (st != LAC_SUCCESS) {
            if (gft) fuzz_fail("lac_gft_load failed (%d) and set *out", st);
            lac_ctx_destroy(&ctx);
            continue;
        }
        int64_t n = lac_graph_num_vertices(graph);
        if (lac_gft_size(gft) != n || lac_gft_precision(gft) != precisions[i])
            fuzz_fail("lac_gft_load: size %lld, precision %d", (long long)lac_gft_size(gft), (int)lac_gft_precision(gft));
        double w[16], U[16 * 16];
        lac_array wa = lac_array_vector(w, LAC_FLOAT64, n), Ua = lac_array_matrix(U, LAC_FLOAT64, n, n);
        if (lac_gft_copy(ctx, gft, &wa, &Ua) != LAC_SUCCESS) fuzz_fail("lac_gft_copy: %s", lac_last_error(ctx));
        lac_gft_destroy(&gft);
        lac_ctx_destroy(&ctx);
    }
}

/* The cache's checksum (src/io/basis_cache.c): 64-bit words, then the tail bytes. */
static uint64_t cache_checksum(const uint8_t *p, size_t bytes)
{
    uint64_t h = 0xcbf29ce484222325ull;
    size_t words = bytes / 8;
    for (size_t i = 0; i < words; i++) {
        uint64_t w;
        memcpy(&w, p + 8 * i, 8);
        h = (h ^ w) * 0x100000001B3ull;
        h ^= h >> 29;
    }
    for (size_t i = words * 8; i < bytes; i++) h = (h ^ p[i]) * 0x100000001B3ull;
    return h;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!graph) {
        lac_ctx_t ctx = fuzz_ctx_new();
        graph = fuzz_graph_from_text(ctx, FUZZ_GRAPH_PLAIN);
        lac_ctx_destroy(&ctx);
        if (lac_graph_num_vertices(graph) > 16) fuzz_fail("the harness's graph is too large");
    }
    load(data, size);
    if (size < 40) return 0;
    uint64_t h = cache_checksum(data + 40, size - 40);
    uint8_t sum[8];
    for (int i = 0; i < 8; i++) sum[i] = (uint8_t)(h >> (8 * i));
    if (memcmp(data + 32, sum, 8) == 0) return 0;
    uint8_t *fixed = malloc(size);
    memcpy(fixed, data, size);
    memcpy(fixed + 32, sum, 8);
    load(fixed, size);
    free(fixed);
    return 0;
}
