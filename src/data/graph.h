/* The graph type (lac_graph_t): its layout, and the one builder that every
 * source of edges (the file readers in src/io, caller arrays) hands its raw
 * lines to, so that the merge, symmetrisation and counting rules live once
 * (data/graph_build.c). No file formats here. */
#ifndef LACUNA_DATA_GRAPH_H
#define LACUNA_DATA_GRAPH_H

#include "core/internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Undirected weighted graph in compressed rows: the neighbours of vertex v are
 * neighbors[offsets[v] .. offsets[v+1]) in ascending order, each pair stored
 * in both rows with the same weight; no self-loops, no repeated pairs. */
struct lac_graph {
    int64_t n;
    int64_t *offsets;      /* n + 1 */
    int64_t *neighbors;    /* 2 * edges */
    double *weights;       /* 2 * edges */
    int64_t *ids;          /* the file's id of each vertex (ascending), or NULL: ids are vertex numbers */
    lac_graph_info info;
};

/* One line of input (an edge list line or a Matrix Market entry), with the
 * endpoints already as vertex numbers in [0, n). */
typedef struct {
    int64_t u, v;
    double w;
} lac_graph_edge;

/* What a source knows beyond the edges. */
typedef struct {
    int64_t lines;          /* edge lines read, self-loops and zero weights included */
    int64_t self_loops;
    int64_t zero_weight;
    int declared_directed;  /* the file says so (SNAP header, Matrix Market general) */
    int strict_symmetry;    /* warn on any one-way pair (Matrix Market general) */
    int weighted;
    const char *source;     /* file name for messages */
} lac_graph_input;

/* Builds the graph from lines without self-loops or zero weights (the source
 * drops and counts those). Rules: the pair {u, v} gets the largest weight
 * among the lines that join u and v in either direction; input is taken as
 * directed, and symmetrised with a warning, when some pairs are listed in both
 * directions and others in one only, or the two directions' weights differ,
 * or the source says so. Takes ownership of `ids` (may be NULL); `edges` is
 * reordered. */
lac_status lac_graph_build(lac_ctx_t ctx, int64_t n, lac_graph_edge *edges, int64_t count,
                           const lac_graph_input *input, int64_t *ids, lac_graph_t *out);

/* Counts one line of input (lines, self-loops, zero weights) and says whether
 * it is an edge the builder takes: u != v and w > 0. */
static inline int lac_graph_input_count(lac_graph_input *input, int64_t u, int64_t v, double w)
{
    input->lines++;
    if (u == v) {
        input->self_loops++;
        return 0;
    }
    if (w == 0) {
        input->zero_weight++;
        return 0;
    }
    return 1;
}

/* The weight rule every source applies: finite and >= 0, else a message. */
const char *lac_graph_check_weight(double w);

/* Facts of a built graph (data/graph_facts.c), filled in by the builder:
 * info.components, and the hash of n, the pairs and their weights. */
lac_status lac_graph_count_components(lac_ctx_t ctx, struct lac_graph *g);
uint64_t lac_graph_fingerprint(const struct lac_graph *g);

#ifdef __cplusplus
}
#endif
#endif
