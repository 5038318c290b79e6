/* Building a graph from raw edge lines: merge repeated lines, symmetrise
 * directed input, count what was dropped, lay the pairs out in compressed
 * rows. Every source of edges ends here: the file readers (src/io/graph_*.c)
 * and caller arrays (lac_graph_from_edges). */
#include "data/graph.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *lac_graph_check_weight(double w)
{
    if (isnan(w)) return "the weight is NaN";
    if (isinf(w)) return "the weight is infinite";
    if (w < 0) return "the weight is negative (the normalised Laplacian needs weights >= 0)";
    return NULL;
}

/* Lines sorted by their unordered pair, then by direction, so that one pass
 * sees every line of a pair together. */
typedef struct {
    int64_t a, b;      /* a < b */
    double w;
    int forward;       /* the line was written a -> b */
} pair_line;

static int cmp_pair_line(const void *x, const void *y)
{
    const pair_line *p = x, *q = y;
    if (p->a != q->a) return p->a < q->a ? -1 : 1;
    if (p->b != q->b) return p->b < q->b ? -1 : 1;
    if (p->forward != q->forward) return p->forward > q->forward ? -1 : 1;
    return 0;
}

lac_status lac_graph_build(lac_ctx_t ctx, int64_t n, lac_graph_edge *edges, int64_t count,
                           const lac_graph_input *input, int64_t *ids, lac_graph_t *out)
{
    lac_status st = LAC_SUCCESS;
    pair_line *lines = NULL;
    /* n comes from a file's header or a caller: offsets and the builder's
     * counts take 16 bytes a vertex before any edge. */
    double memory = lac_host_memory();
    if (memory > 0 && 16.0 * ((double)n + 1) > memory) {
        free(ids);
        return lac_error(ctx, LAC_ERR_UNSUPPORTED, "%s: a graph of %lld vertices needs %.3g GB, more than this machine's %.3g GB",
                         input && input->source ? input->source : "graph", (long long)n, 16e-9 * ((double)n + 1),
                         1e-9 * memory);
    }
    struct lac_graph *g = lac_calloc(ctx, 1, sizeof *g);
    if (!g) {
        free(ids);
        return LAC_ERR_OUT_OF_MEMORY;
    }
    g->n = n;
    g->ids = ids;
    lines = lac_malloc(ctx, (size_t)(count > 0 ? count : 1) * sizeof *lines);
    g->offsets = lac_calloc(ctx, (size_t)n + 1, sizeof *g->offsets);
    if (!lines || !g->offsets) {
        st = LAC_ERR_OUT_OF_MEMORY;
        goto fail;
    }
    for (int64_t i = 0; i < count; i++) {
        int forward = edges[i].u < edges[i].v;
        lines[i].a = forward ? edges[i].u : edges[i].v;
        lines[i].b = forward ? edges[i].v : edges[i].u;
        lines[i].w = edges[i].w;
        lines[i].forward = forward;
    }
    qsort(lines, (size_t)count, sizeof *lines, cmp_pair_line);

    /* One pass per pair: its weight, whether it was listed both ways, and
     * whether the two directions disagree. Pairs are compacted in place. */
    int64_t pairs = 0, both_ways = 0, one_way = 0, repeated = 0, unequal = 0;
    for (int64_t i = 0; i < count;) {
        int64_t j = i;
        double w_fwd = -1, w_bwd = -1;
        int64_t fwd_lines = 0, bwd_lines = 0;
        while (j < count && lines[j].a == lines[i].a && lines[j].b == lines[i].b) {
            if (lines[j].forward) {
                fwd_lines++;
                if (lines[j].w > w_fwd) w_fwd = lines[j].w;
            } else {
                bwd_lines++;
                if (lines[j].w > w_bwd) w_bwd = lines[j].w;
            }
            j++;
        }
        repeated += (fwd_lines > 1 ? fwd_lines - 1 : 0) + (bwd_lines > 1 ? bwd_lines - 1 : 0);
        if (fwd_lines && bwd_lines) {
            both_ways++;
            if (w_fwd != w_bwd) unequal++;
        } else {
            one_way++;
        }
        lines[pairs].a = lines[i].a;
        lines[pairs].b = lines[i].b;
        lines[pairs].w = w_fwd > w_bwd ? w_fwd : w_bwd;
        pairs++;
        i = j;
    }

    g->info.num_vertices = n;
    g->info.num_edges = pairs;
    g->info.lines = input->lines;
    g->info.self_loops = input->self_loops;
    g->info.zero_weight = input->zero_weight;
    g->info.repeated = repeated;
    g->info.weighted = input->weighted;
    g->info.remapped = ids != NULL;
    g->info.directed = input->declared_directed || unequal > 0 || (both_ways > 0 && one_way > 0) ||
                       (input->strict_symmetry && one_way > 0);

    /* Compressed rows: row a gets its pairs (c, a), c < a, before its pairs
     * (a, b), b > a, and both come in ascending order from the sort. */
    for (int64_t p = 0; p < pairs; p++) {
        g->offsets[lines[p].a + 1]++;
        g->offsets[lines[p].b + 1]++;
    }
    for (int64_t v = 0; v < n; v++) g->offsets[v + 1] += g->offsets[v];
    size_t entries = (size_t)(2 * pairs > 0 ? 2 * pairs : 1);
    g->neighbors = lac_malloc(ctx, entries * sizeof *g->neighbors);
    g->weights = lac_malloc(ctx, entries * sizeof *g->weights);
    int64_t *fill = lac_malloc(ctx, (size_t)(n > 0 ? n : 1) * sizeof *fill);
    if (!g->neighbors || !g->weights || !fill) {
        free(fill);
        st = LAC_ERR_OUT_OF_MEMORY;
        goto fail;
    }
    memcpy(fill, g->offsets, (size_t)n * sizeof *fill);
    for (int64_t p = 0; p < pairs; p++) {
        int64_t a = lines[p].a, b = lines[p].b;
        g->neighbors[fill[a]] = b;
        g->weights[fill[a]++] = lines[p].w;
        g->neighbors[fill[b]] = a;
        g->weights[fill[b]++] = lines[p].w;
    }
    free(fill);
    free(lines);
    lines = NULL;

    for (int64_t v = 0; v < n; v++)
        if (g->offsets[v + 1] == g->offsets[v]) g->info.isolated_vertices++;
    LAC_CHECK_GOTO(lac_graph_count_components(ctx, g), st, fail);
    g->info.fingerprint = lac_graph_fingerprint(g);

    const char *src = input->source ? input->source : "graph";
    if (g->info.directed)
        lac_log(ctx, LAC_LOG_WARN, "%s: directed input, symmetrised (each pair keeps its largest weight)", src);
    if (g->info.self_loops)
        lac_log(ctx, LAC_LOG_WARN, "%s: %lld self-loops ignored", src, (long long)g->info.self_loops);
    if (g->info.isolated_vertices)
        lac_log(ctx, LAC_LOG_WARN, "%s: %lld isolated vertices (D^-1/2 = 0 there: their Laplacian row is the identity's)",
                src, (long long)g->info.isolated_vertices);
    lac_log(ctx, LAC_LOG_INFO, "%s: %lld vertices, %lld edges, %lld components", src, (long long)n, (long long)pairs,
            (long long)g->info.components);
    *out = g;
    return LAC_SUCCESS;
fail:
    free(lines);
    lac_graph_destroy(&g);
    return st;
}

lac_status lac_graph_from_edges(lac_ctx_t ctx, int64_t num_vertices, const lac_array *sources,
                                const lac_array *targets, const lac_array *weights, lac_graph_t *out)
{
    LAC_ARG_NOT_NULL(ctx, sources);
    LAC_ARG_NOT_NULL(ctx, targets);
    LAC_ARG_NOT_NULL(ctx, out);
    if (num_vertices < 0) return lac_error(ctx, LAC_ERR_SHAPE, "num_vertices = %lld is negative", (long long)num_vertices);
    const lac_array *ends[2] = {sources, targets};
    for (int s = 0; s < 2; s++) {
        if (ends[s]->dtype != LAC_INT32 && ends[s]->dtype != LAC_INT64)
            return lac_error(ctx, LAC_ERR_DTYPE, "%s are %s; they must be int32 or int64", s ? "targets" : "sources",
                             lac_dtype_name(ends[s]->dtype));
        if (ends[s]->ndim != 1) return lac_error(ctx, LAC_ERR_SHAPE, "%s must be a vector", s ? "targets" : "sources");
        if (ends[s]->memory != LAC_MEM_HOST) return lac_error(ctx, LAC_ERR_ARGUMENT, "edges must be host arrays");
    }
    int64_t count = sources->shape[0];
    if (targets->shape[0] != count)
        return lac_error(ctx, LAC_ERR_SHAPE, "sources has %lld entries but targets has %lld", (long long)count,
                         (long long)targets->shape[0]);
    if (weights) {
        if (weights->dtype != LAC_FLOAT64) return lac_error(ctx, LAC_ERR_DTYPE, "weights must be float64");
        if (weights->ndim != 1 || weights->shape[0] != count)
            return lac_error(ctx, LAC_ERR_SHAPE, "weights must be a vector of %lld", (long long)count);
        if (weights->memory != LAC_MEM_HOST) return lac_error(ctx, LAC_ERR_ARGUMENT, "edges must be host arrays");
    }
    if (count > 0 && (!sources->data || !targets->data || (weights && !weights->data)))
        return lac_error(ctx, LAC_ERR_ARGUMENT, "an edge array's data is NULL");

    lac_graph_edge *edges = lac_malloc(ctx, (size_t)(count > 0 ? count : 1) * sizeof *edges);
    if (!edges) return LAC_ERR_OUT_OF_MEMORY;
    lac_graph_input input;
    memset(&input, 0, sizeof input);
    input.source = "edge arrays";
    input.weighted = weights != NULL;
    int64_t kept = 0;
    for (int64_t i = 0; i < count; i++) {
        int64_t u = sources->dtype == LAC_INT32 ? ((const int32_t *)sources->data)[i] : ((const int64_t *)sources->data)[i];
        int64_t v = targets->dtype == LAC_INT32 ? ((const int32_t *)targets->data)[i] : ((const int64_t *)targets->data)[i];
        double w = weights ? ((const double *)weights->data)[i] : 1.0;
        if (u < 0 || u >= num_vertices || v < 0 || v >= num_vertices) {
            free(edges);
            return lac_error(ctx, LAC_ERR_RANGE, "edge %lld = (%lld, %lld) has a vertex outside [0, %lld)", (long long)i,
                             (long long)u, (long long)v, (long long)num_vertices);
        }
        const char *why = lac_graph_check_weight(w);
        if (why) {
            free(edges);
            return lac_error(ctx, LAC_ERR_VALUE, "edge %lld: %s", (long long)i, why);
        }
        if (!lac_graph_input_count(&input, u, v, w)) continue;
        edges[kept].u = u;
        edges[kept].v = v;
        edges[kept++].w = w;
    }
    lac_status st = lac_graph_build(ctx, num_vertices, edges, kept, &input, NULL, out);
    free(edges);
    return st;
}
