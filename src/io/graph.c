/* The graph object: building it from raw edge lines (merge, symmetrise, count),
 * its facts (components, isolated vertices, fingerprint), id lookups and the
 * normalised Laplacian. The file readers are graph_edgelist.c and graph_mtx.c. */
#include "io/graph_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static lac_graph_params graph_defaults(void)
{
    lac_graph_params p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    p.format = LAC_GRAPH_AUTO;
    return p;
}

void lac_graph_params_init(lac_graph_params *params, size_t struct_size)
{
    lac_graph_params d = graph_defaults();
    lac_params_fill(params, struct_size, &d, sizeof d);
}

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

/* splitmix64 finaliser: the fingerprint's mixing step. */
static uint64_t mix64(uint64_t h, uint64_t v)
{
    uint64_t z = h ^ (v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2));
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t fingerprint(const struct lac_graph *g)
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

static lac_status count_components(lac_ctx_t ctx, struct lac_graph *g)
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

lac_status lac_graph_build(lac_ctx_t ctx, int64_t n, lac_graph_edge *edges, int64_t count,
                           const lac_graph_input *input, int64_t *ids, lac_graph_t *out)
{
    lac_status st = LAC_SUCCESS;
    pair_line *lines = NULL;
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
    LAC_CHECK_GOTO(count_components(ctx, g), st, fail);
    g->info.fingerprint = fingerprint(g);

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
        input.lines++;
        if (u == v) {
            input.self_loops++;
            continue;
        }
        if (w == 0) {
            input.zero_weight++;
            continue;
        }
        edges[kept].u = u;
        edges[kept].v = v;
        edges[kept++].w = w;
    }
    lac_status st = lac_graph_build(ctx, num_vertices, edges, kept, &input, NULL, out);
    free(edges);
    return st;
}

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
