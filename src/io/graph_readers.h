/* The graph file readers (src/io/graph_*.c) as lac_graph_load dispatches to
 * them: each parses its format into raw edge lines and hands them to the one
 * builder of src/data (data/graph.h). */
#ifndef LACUNA_IO_GRAPH_READERS_H
#define LACUNA_IO_GRAPH_READERS_H

#include "data/graph.h"

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* SNAP-style edge lists (graph_edgelist.c); fp is open at the file's start,
 * params are checked. */
lac_status lac_graph_read_edge_list(lac_ctx_t ctx, const char *path, FILE *fp, const lac_graph_params *params,
                                    lac_graph_t *out);

/* Matrix Market coordinate matrices (graph_mtx.c); fp is open at the file's start. */
lac_status lac_graph_read_matrix_market(lac_ctx_t ctx, const char *path, FILE *fp, lac_graph_t *out);

#ifdef __cplusplus
}
#endif
#endif
