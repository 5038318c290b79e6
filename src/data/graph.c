/* The graph object: its release, its facts, and the mapping between the
 * file's vertex ids and vertex numbers. */
#include "data/graph.h"

#include <stdlib.h>
#include <string.h>

void lac_graph_destroy(lac_graph_t *graph)
{
    if (!graph || !*graph) return;
    free((*graph)->offsets);
    free((*graph)->neighbors);
    free((*graph)->weights);
    free((*graph)->ids);
    free(*graph);
    *graph = NULL;
}

lac_graph_info lac_graph_get_info(lac_graph_t graph)
{
    lac_graph_info info;
    memset(&info, 0, sizeof info);
    return graph ? graph->info : info;
}

int64_t lac_graph_num_vertices(lac_graph_t graph) { return graph ? graph->n : 0; }

lac_status lac_graph_id_of_vertex(lac_ctx_t ctx, lac_graph_t graph, int64_t vertex, int64_t *id)
{
    LAC_ARG_NOT_NULL(ctx, graph);
    LAC_ARG_NOT_NULL(ctx, id);
    if (vertex < 0 || vertex >= graph->n)
        return lac_error(ctx, LAC_ERR_RANGE, "vertex %lld is outside [0, %lld)", (long long)vertex, (long long)graph->n);
    *id = graph->ids ? graph->ids[vertex] : vertex;
    return LAC_SUCCESS;
}

lac_status lac_graph_vertex_of_id(lac_ctx_t ctx, lac_graph_t graph, int64_t id, int64_t *vertex)
{
    LAC_ARG_NOT_NULL(ctx, graph);
    LAC_ARG_NOT_NULL(ctx, vertex);
    if (!graph->ids) {
        if (id < 0 || id >= graph->n)
            return lac_error(ctx, LAC_ERR_RANGE, "id %lld is not a vertex (ids are 0..%lld)", (long long)id,
                             (long long)graph->n - 1);
        *vertex = id;
        return LAC_SUCCESS;
    }
    int64_t lo = 0, hi = graph->n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (graph->ids[mid] < id) lo = mid + 1;
        else hi = mid;
    }
    if (lo == graph->n || graph->ids[lo] != id)
        return lac_error(ctx, LAC_ERR_RANGE, "id %lld is not a vertex of the graph", (long long)id);
    *vertex = lo;
    return LAC_SUCCESS;
}
