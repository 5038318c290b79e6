/* The normalised Laplacian L = I - D^-1/2 A D^-1/2 of a graph, dense, with
 * D^-1/2 = 0 at isolated vertices. */
#include "data/graph.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

lac_status lac_graph_laplacian(lac_ctx_t ctx, lac_graph_t graph, lac_array *laplacian)
{
    LAC_ARG_NOT_NULL(ctx, graph);
    LAC_ARG_NOT_NULL(ctx, laplacian);
    int64_t n = graph->n;
    if (laplacian->dtype != LAC_FLOAT32 && laplacian->dtype != LAC_FLOAT64)
        return lac_error(ctx, LAC_ERR_DTYPE, "the Laplacian is float32 or float64, not %s", lac_dtype_name(laplacian->dtype));
    if (laplacian->ndim != 2 || laplacian->shape[0] != n || laplacian->shape[1] != n)
        return lac_error(ctx, LAC_ERR_SHAPE, "the Laplacian must be %lld x %lld", (long long)n, (long long)n);
    if (laplacian->memory != LAC_MEM_HOST) return lac_error(ctx, LAC_ERR_ARGUMENT, "the Laplacian must be a host array");
    if (n > 0 && !laplacian->data) return lac_error(ctx, LAC_ERR_ARGUMENT, "the Laplacian's data is NULL");

    double *scale = lac_malloc(ctx, (size_t)(n > 0 ? n : 1) * sizeof *scale);
    if (!scale) return LAC_ERR_OUT_OF_MEMORY;
    for (int64_t v = 0; v < n; v++) {
        double degree = 0;
        for (int64_t e = graph->offsets[v]; e < graph->offsets[v + 1]; e++) degree += graph->weights[e];
        scale[v] = degree > 0 ? 1.0 / sqrt(degree) : 0.0;   /* D^-1/2, 0 at isolated vertices */
    }
    int single = laplacian->dtype == LAC_FLOAT32;
#pragma omp parallel for num_threads(lac_threads(ctx)) schedule(static)
    for (int64_t v = 0; v < n; v++) {
        if (single) {
            float *row = (float *)laplacian->data + v * n;
            memset(row, 0, (size_t)n * sizeof *row);
            row[v] = 1.0f;
            for (int64_t e = graph->offsets[v]; e < graph->offsets[v + 1]; e++)
                row[graph->neighbors[e]] = (float)(-scale[v] * graph->weights[e] * scale[graph->neighbors[e]]);
        } else {
            double *row = (double *)laplacian->data + v * n;
            memset(row, 0, (size_t)n * sizeof *row);
            row[v] = 1.0;
            for (int64_t e = graph->offsets[v]; e < graph->offsets[v + 1]; e++)
                row[graph->neighbors[e]] = -scale[v] * graph->weights[e] * scale[graph->neighbors[e]];
        }
    }
    free(scale);
    return LAC_SUCCESS;
}
