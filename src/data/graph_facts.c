/* Facts of a built graph that need a pass over it: its connected components
 * and its fingerprint (a hash of n, the pairs and their weights, which ties a
 * cached basis to the graph it was computed from). */
#include "data/graph.h"

#include <stdlib.h>
#include <string.h>

/* splitmix64 finaliser: the fingerprint's mixing step. */
static uint64_t mix64(uint64_t h, uint64_t v)
{
    uint64_t z = h ^ (v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2));
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

uint64_t lac_graph_fingerprint(const struct lac_graph *g)
{
    uint64_t h = mix64(0x6c6163756e61ull, (uint64_t)g->n);
    int64_t entries = g->offsets[g->n];
    for (int64_t v = 0; v <= g->n; v++) h = mix64(h, (uint64_t)g->offsets[v]);
    for (int64_t e = 0; e < entries; e++) {
        uint64_t bits;
        memcpy(&bits, &g->weights[e], sizeof bits);
        h = mix64(mix64(h, (uint64_t)g->neighbors[e]), bits);
    }
    return h;
}

static int64_t find_root(int64_t *parent, int64_t v)
{
    while (parent[v] != v) {
        parent[v] = parent[parent[v]];
        v = parent[v];
    }
    return v;
}

lac_status lac_graph_count_components(lac_ctx_t ctx, struct lac_graph *g)
{
    int64_t *parent = lac_malloc(ctx, (size_t)(g->n > 0 ? g->n : 1) * sizeof *parent);
    if (!parent) return LAC_ERR_OUT_OF_MEMORY;
    for (int64_t v = 0; v < g->n; v++) parent[v] = v;
    int64_t components = g->n;
    for (int64_t v = 0; v < g->n; v++)
        for (int64_t e = g->offsets[v]; e < g->offsets[v + 1]; e++) {
            int64_t a = find_root(parent, v), b = find_root(parent, g->neighbors[e]);
            if (a != b) {
                parent[a < b ? b : a] = a < b ? a : b;
                components--;
            }
        }
    free(parent);
    g->info.components = components;
    return LAC_SUCCESS;
}
