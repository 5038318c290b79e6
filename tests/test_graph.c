/* Graph readers: SNAP edge lists and Matrix Market files written here, the
 * merge/symmetrise/remap rules, every rejected form (with its line), vertex
 * sets, and the normalised Laplacian against a dense loop written here. */
#include "harness.h"
#include "lacuna/lacuna.h"

#include <stdint.h>
#include <sys/stat.h>

static lac_ctx_t ctx;

static void write_file(const char *path, const char *text)
{
    FILE *fp = fopen(path, "w");
    fputs(text, fp);
    fclose(fp);
}

/* Loads text as a graph file; returns the status. */
static int load_text(const char *text, const lac_graph_params *params, lac_graph_t *g)
{
    char path[512];
    harness_temp_path(path, sizeof path, "graph.txt");
    write_file(path, text);
    int st = lac_graph_load(ctx, path, params, g);
    remove(path);
    return st;
}

/* Dense adjacency from the Laplacian: A_uv = -L_uv sqrt(d_u d_v) is not
 * recoverable without degrees, so tests compare Laplacians built from a
 * dense adjacency they write themselves. */
static void dense_laplacian(int n, const double *adj, double *L)
{
    double d[64];
    for (int u = 0; u < n; u++) {
        d[u] = 0;
        for (int v = 0; v < n; v++) d[u] += adj[u * n + v];
    }
    for (int u = 0; u < n; u++)
        for (int v = 0; v < n; v++) {
            double su = d[u] > 0 ? 1 / sqrt(d[u]) : 0, sv = d[v] > 0 ? 1 / sqrt(d[v]) : 0;
            L[u * n + v] = (u == v ? 1.0 : 0.0) - su * adj[u * n + v] * sv;
        }
}

static double laplacian_max_diff(lac_graph_t g, int n, const double *adj)
{
    double expected[64 * 64], got[64 * 64];
    dense_laplacian(n, adj, expected);
    lac_array L = lac_array_matrix(got, LAC_FLOAT64, n, n);
    if (lac_graph_laplacian(ctx, g, &L) != 0) return INFINITY;
    double worst = 0;
    for (int i = 0; i < n * n; i++) worst = fmax(worst, fabs(got[i] - expected[i]));
    return worst;
}

TEST(snap_edge_list_with_comments_and_any_whitespace)
{
    lac_graph_t g = NULL;
    CHECK_OK(ctx, load_text("# Undirected graph (each unordered pair of nodes is saved once): toy\n"
                            "# FromNodeId\tToNodeId\n"
                            "0\t1\n"
                            "1   2\n"
                            "\n"
                            "  2 3 # trailing comment\n"
                            "3,0\n",
                            NULL, &g));
    lac_graph_info info = lac_graph_get_info(g);
    CHECK_INT(info.num_vertices, 4);
    CHECK_INT(info.num_edges, 4);
    CHECK_INT(info.lines, 4);
    CHECK_INT(info.directed, 0);
    CHECK_INT(info.remapped, 0);
    CHECK_INT(info.components, 1);
    CHECK_INT(info.isolated_vertices, 0);
    double adj[16] = {0, 1, 0, 1, 1, 0, 1, 0, 0, 1, 0, 1, 1, 0, 1, 0};
    CHECK(laplacian_max_diff(g, 4, adj) < 1e-15);
    lac_graph_destroy(&g);
    CHECK(g == NULL);
}

TEST(weights_duplicates_self_loops_and_zero_weights)
{
    lac_graph_t g = NULL;
    /* 0-1 listed twice (max weight 2.5 kept), 1-2 both ways with one weight,
     * a self-loop and a zero weight dropped. */
    CHECK_OK(ctx, load_text("0 1 1.5\n0 1 2.5\n1 2 0.5\n2 1 0.5\n2 2 7\n0 2 0\n", NULL, &g));
    lac_graph_info info = lac_graph_get_info(g);
    CHECK_INT(info.num_vertices, 3);
    CHECK_INT(info.num_edges, 2);
    CHECK_INT(info.self_loops, 1);
    CHECK_INT(info.zero_weight, 1);
    CHECK_INT(info.repeated, 1);
    CHECK_INT(info.weighted, 1);
    CHECK_INT(info.directed, 1);   /* 1-2 both ways but 0-1 one way: a directed listing */
    double adj[9] = {0, 2.5, 0, 2.5, 0, 0.5, 0, 0.5, 0};
    CHECK(laplacian_max_diff(g, 3, adj) < 1e-15);
    lac_graph_destroy(&g);
}

TEST(directed_input_is_symmetrised_with_the_larger_weight)
{
    lac_graph_t g = NULL;
    CHECK_OK(ctx, load_text("# Directed graph (each unordered pair of nodes is saved once)\n0 1 1\n1 0 3\n1 2 2\n", NULL, &g));
    lac_graph_info info = lac_graph_get_info(g);
    CHECK_INT(info.directed, 1);
    double adj[9] = {0, 3, 0, 3, 0, 2, 0, 2, 0};
    CHECK(laplacian_max_diff(g, 3, adj) < 1e-15);
    lac_graph_destroy(&g);
}

TEST(sparse_ids_are_remapped_in_ascending_order)
{
    lac_graph_t g = NULL;
    CHECK_OK(ctx, load_text("100 7\n7 5000\n", NULL, &g));
    lac_graph_info info = lac_graph_get_info(g);
    CHECK_INT(info.num_vertices, 3);
    CHECK_INT(info.remapped, 1);
    int64_t v = -1, id = -1;
    CHECK_OK(ctx, lac_graph_vertex_of_id(ctx, g, 7, &v));
    CHECK_INT(v, 0);
    CHECK_OK(ctx, lac_graph_vertex_of_id(ctx, g, 5000, &v));
    CHECK_INT(v, 2);
    CHECK_OK(ctx, lac_graph_id_of_vertex(ctx, g, 1, &id));
    CHECK_INT(id, 100);
    CHECK_STATUS(ctx, lac_graph_vertex_of_id(ctx, g, 8, &v), LAC_ERR_RANGE);
    /* vertex 0 (id 7) joins both others: the adjacency in remapped order */
    double adj[9] = {0, 1, 1, 1, 0, 0, 1, 0, 0};
    CHECK(laplacian_max_diff(g, 3, adj) < 1e-15);
    lac_graph_destroy(&g);
}

TEST(num_vertices_keeps_ids_and_isolates_the_rest)
{
    lac_graph_t g = NULL;
    lac_graph_params p = lac_graph_params_default();
    p.num_vertices = 5;
    CHECK_OK(ctx, load_text("1 2\n3 3\n", &p, &g));
    lac_graph_info info = lac_graph_get_info(g);
    CHECK_INT(info.num_vertices, 5);
    CHECK_INT(info.isolated_vertices, 3);   /* 0, 3 (self-loop only) and 4 */
    CHECK_INT(info.components, 4);
    /* isolated vertices: D^-1/2 = 0, so their Laplacian row is the identity's */
    double adj[25] = {0};
    adj[1 * 5 + 2] = adj[2 * 5 + 1] = 1;
    CHECK(laplacian_max_diff(g, 5, adj) < 1e-15);
    lac_graph_destroy(&g);
    p.num_vertices = 3;
    CHECK_STATUS(ctx, load_text("0 1\n1 3\n", &p, &g), LAC_ERR_RANGE);
    CHECK_STR_CONTAINS(lac_last_error(ctx), ":2:");
    CHECK(g == NULL);
}

TEST(edge_list_errors_name_the_line)
{
    lac_graph_t g = NULL;
    CHECK_STATUS(ctx, load_text("0 1\n1 x\n", NULL, &g), LAC_ERR_FORMAT);
    CHECK_STR_CONTAINS(lac_last_error(ctx), ":2:");
    CHECK_STATUS(ctx, load_text("0 1\n\n1 2 3 4\n", NULL, &g), LAC_ERR_FORMAT);
    CHECK_STR_CONTAINS(lac_last_error(ctx), ":3:");
    CHECK_STATUS(ctx, load_text("0 1 -2\n", NULL, &g), LAC_ERR_FORMAT);
    CHECK_STR_CONTAINS(lac_last_error(ctx), "negative");
    CHECK_STATUS(ctx, load_text("0 1 nan\n", NULL, &g), LAC_ERR_FORMAT);
    CHECK_STATUS(ctx, load_text("-1 1\n", NULL, &g), LAC_ERR_FORMAT);
    CHECK_STATUS(ctx, load_text("0 1 2e\n", NULL, &g), LAC_ERR_FORMAT);
    CHECK_STATUS(ctx, load_text("# nothing\n", NULL, &g), LAC_ERR_VALUE);
    CHECK(g == NULL);
    CHECK_STATUS(ctx, lac_graph_load(ctx, "/nonexistent/graph.txt", NULL, &g), LAC_ERR_IO);
}

TEST(matrix_market_pattern_symmetric_and_real_general)
{
    lac_graph_t g = NULL;
    CHECK_OK(ctx, load_text("%%MatrixMarket matrix coordinate pattern symmetric\n% a path\n3 3 2\n2 1\n3 2\n", NULL, &g));
    lac_graph_info info = lac_graph_get_info(g);
    CHECK_INT(info.num_vertices, 3);
    CHECK_INT(info.num_edges, 2);
    CHECK_INT(info.directed, 0);
    double path[9] = {0, 1, 0, 1, 0, 1, 0, 1, 0};
    CHECK(laplacian_max_diff(g, 3, path) < 1e-15);
    lac_graph_destroy(&g);

    CHECK_OK(ctx, load_text("%%MatrixMarket matrix coordinate real general\n3 3 5\n1 2 2.0\n2 1 2.0\n2 3 1.0\n3 2 4.0\n1 1 9\n",
                            NULL, &g));
    info = lac_graph_get_info(g);
    CHECK_INT(info.directed, 1);    /* 2-3 has two weights */
    CHECK_INT(info.self_loops, 1);
    double adj[9] = {0, 2, 0, 2, 0, 4, 0, 4, 0};
    CHECK(laplacian_max_diff(g, 3, adj) < 1e-15);
    lac_graph_destroy(&g);

    CHECK_OK(ctx, load_text("%%MatrixMarket matrix coordinate integer general\n2 2 2\n1 2 3\n2 1 3\n", NULL, &g));
    CHECK_INT(lac_graph_get_info(g).directed, 0);
    lac_graph_destroy(&g);
}

TEST(matrix_market_errors)
{
    lac_graph_t g = NULL;
    CHECK_STATUS(ctx, load_text("%%MatrixMarket matrix coordinate pattern general\n3 4 1\n1 2\n", NULL, &g), LAC_ERR_SHAPE);
    CHECK_STATUS(ctx, load_text("%%MatrixMarket matrix coordinate pattern general\n3 3 2\n1 2\n", NULL, &g), LAC_ERR_FORMAT);
    CHECK_STR_CONTAINS(lac_last_error(ctx), "promises 2");
    CHECK_STATUS(ctx, load_text("%%MatrixMarket matrix coordinate pattern general\n3 3 1\n1 4\n", NULL, &g), LAC_ERR_RANGE);
    CHECK_STR_CONTAINS(lac_last_error(ctx), ":3:");
    CHECK_STATUS(ctx, load_text("%%MatrixMarket matrix coordinate complex general\n2 2 1\n1 2 1 0\n", NULL, &g),
                 LAC_ERR_UNSUPPORTED);
    CHECK_STATUS(ctx, load_text("%%MatrixMarket matrix array real general\n2 2\n1\n2\n3\n4\n", NULL, &g), LAC_ERR_UNSUPPORTED);
    CHECK_STATUS(ctx, load_text("%%MatrixMarket matrix coordinate real symmetric\n2 2 1\n2 1 -1\n", NULL, &g), LAC_ERR_FORMAT);
    CHECK(g == NULL);
}

TEST(matrix_market_sizes_are_checked_against_the_file)
{
    lac_graph_t g = NULL;
    /* an entry past the size line's count is an error, not an edge dropped */
    CHECK_STATUS(ctx, load_text("%%MatrixMarket matrix coordinate pattern general\n3 3 1\n1 2\n2 3\n", NULL, &g),
                 LAC_ERR_FORMAT);
    CHECK_STR_CONTAINS(lac_last_error(ctx), ":4: more entries than the 1");
    /* comments and blank lines after the last entry are fine */
    CHECK_OK(ctx, load_text("%%MatrixMarket matrix coordinate pattern general\n3 3 1\n1 2\n% end\n\n", NULL, &g));
    lac_graph_destroy(&g);
    /* sizes a 60-byte file cannot hold: input errors before any allocation */
    CHECK_STATUS(ctx, load_text("%%MatrixMarket matrix coordinate pattern general\n3 3 1000000000000\n1 2\n", NULL, &g),
                 LAC_ERR_FORMAT);
    CHECK_STR_CONTAINS(lac_last_error(ctx), "promises 1000000000000 entries");
    CHECK_STATUS(ctx, load_text("%%MatrixMarket matrix coordinate pattern general\n"
                                "1000000000000 1000000000000 1\n1 2\n", NULL, &g),
                 LAC_ERR_FORMAT);
    CHECK_STR_CONTAINS(lac_last_error(ctx), "1000000000000 vertices");
    lac_graph_params p = lac_graph_params_default();
    p.num_vertices = 1000000000000LL;
    CHECK_STATUS(ctx, load_text("0 1\n", &p, &g), LAC_ERR_UNSUPPORTED);
    CHECK(g == NULL);
}

/* Every entry touches two vertices at most; a size line asking for many
 * more (10^9 vertices in 75 bytes: 8 GB of offsets) is an input error up to
 * LACUNA_GRAPH_ISOLATED vertices without an edge (default 2^20). */
static int load_with_knobs(const char *knobs, const char *text, lac_graph_t *g)
{
    lac_ctx_params p = lac_ctx_params_default();
    p.backend = LAC_BACKEND_CPU;
    p.knobs = knobs;
    lac_ctx_t c = NULL;
    CHECK_OK(NULL, lac_ctx_create(&p, &c));
    char path[512];
    harness_temp_path(path, sizeof path, "isolated.mtx");
    write_file(path, text);
    int st = lac_graph_load(c, path, NULL, g);
    if (st == LAC_ERR_FORMAT) CHECK_STR_CONTAINS(lac_last_error(c), "without an edge");
    remove(path);
    lac_ctx_destroy(&c);
    return st;
}

TEST(matrix_market_vertices_without_edges_are_bounded)
{
    lac_graph_t g = NULL;
    CHECK_STATUS(ctx, load_text("%%MatrixMarket matrix coordinate pattern general\n1000000000 1000000000 0\n", NULL, &g),
                 LAC_ERR_FORMAT);
    CHECK_STR_CONTAINS(lac_last_error(ctx), "asks for 1000000000 vertices, but its 0 entries touch 0 at most");
    CHECK(g == NULL);
    /* the bound: 2 x entries + 2^20 */
    CHECK_OK(ctx, load_text("%%MatrixMarket matrix coordinate pattern general\n1048578 1048578 1\n1 2\n", NULL, &g));
    CHECK_INT(lac_graph_num_vertices(g), 1048578);
    lac_graph_destroy(&g);
    CHECK_STATUS(ctx, load_text("%%MatrixMarket matrix coordinate pattern general\n1048579 1048579 1\n1 2\n", NULL, &g),
                 LAC_ERR_FORMAT);
    /* the knob moves it */
    const char *ten = "%%MatrixMarket matrix coordinate pattern general\n10 10 1\n1 2\n";
    CHECK_INT(load_with_knobs("GRAPH_ISOLATED=7", ten, &g), LAC_ERR_FORMAT);
    CHECK(g == NULL);
    CHECK_OK(ctx, load_with_knobs("GRAPH_ISOLATED=8", ten, &g));
    CHECK_INT(lac_graph_num_vertices(g), 10);
    lac_graph_destroy(&g);
    /* edge lists cannot be fooled so: without num_vertices, vertices are the ids seen */
    CHECK_OK(ctx, load_text("0 1000000000000\n", NULL, &g));
    CHECK_INT(lac_graph_num_vertices(g), 2);
    lac_graph_destroy(&g);
}

TEST(from_edges_matches_the_file_reader_and_fingerprints)
{
    int64_t src[4] = {0, 1, 2, 3}, dst[4] = {1, 2, 3, 0};
    lac_array s = lac_array_vector(src, LAC_INT64, 4), d = lac_array_vector(dst, LAC_INT64, 4);
    lac_graph_t a = NULL, b = NULL, c = NULL;
    CHECK_OK(ctx, lac_graph_from_edges(ctx, 4, &s, &d, NULL, &a));
    CHECK_OK(ctx, load_text("0 1\n1 2\n2 3\n3 0\n", NULL, &b));
    CHECK(lac_graph_get_info(a).fingerprint == lac_graph_get_info(b).fingerprint);
    double w[4] = {1, 1, 1, 2};
    lac_array wa = lac_array_vector(w, LAC_FLOAT64, 4);
    CHECK_OK(ctx, lac_graph_from_edges(ctx, 4, &s, &d, &wa, &c));
    CHECK(lac_graph_get_info(a).fingerprint != lac_graph_get_info(c).fingerprint);
    dst[2] = 9;
    lac_graph_t bad = NULL;
    CHECK_STATUS(ctx, lac_graph_from_edges(ctx, 4, &s, &d, NULL, &bad), LAC_ERR_RANGE);
    CHECK(bad == NULL);
    lac_graph_destroy(&a);
    lac_graph_destroy(&b);
    lac_graph_destroy(&c);
}

TEST(vertex_sets_from_id_files)
{
    lac_graph_t g = NULL;
    CHECK_OK(ctx, load_text("10 20\n20 30\n30 40\n", NULL, &g));
    char path[512];
    harness_temp_path(path, sizeof path, "ids.txt");
    unsigned char mask[4] = {7, 7, 7, 7};
    lac_array m = lac_array_vector(mask, LAC_BOOL, 4);
    write_file(path, "# observed\n10, 40\n40\n");
    CHECK_OK(ctx, lac_graph_load_vertex_set(ctx, g, path, &m));
    CHECK(mask[0] == 1 && mask[1] == 0 && mask[2] == 0 && mask[3] == 1);

    unsigned char before[4];
    memcpy(before, mask, 4);
    write_file(path, "10\n\n25\n");
    CHECK_STATUS(ctx, lac_graph_load_vertex_set(ctx, g, path, &m), LAC_ERR_RANGE);
    CHECK_STR_CONTAINS(lac_last_error(ctx), ":3:");
    write_file(path, "10\nabc\n");
    CHECK_STATUS(ctx, lac_graph_load_vertex_set(ctx, g, path, &m), LAC_ERR_FORMAT);
    write_file(path, "# none\n\n");
    CHECK_STATUS(ctx, lac_graph_load_vertex_set(ctx, g, path, &m), LAC_ERR_VALUE);
    CHECK(memcmp(before, mask, 4) == 0);
    remove(path);
    lac_graph_destroy(&g);
}

TEST(laplacian_eigenvalues_of_small_graphs)
{
    /* A 6-cycle: the normalised Laplacian is I - A/2, eigenvalues 1 - cos(2 pi k / 6). */
    lac_graph_t g = NULL;
    CHECK_OK(ctx, load_text("0 1\n1 2\n2 3\n3 4\n4 5\n5 0\n", NULL, &g));
    double w[6];
    lac_array a = lac_array_vector(w, LAC_FLOAT64, 6);
    CHECK_OK(ctx, lac_graph_laplacian_eigenvalues(ctx, g, &a));
    double expected[6] = {0, 0.5, 0.5, 1.5, 1.5, 2};
    for (int i = 0; i < 6; i++) CHECK_NEAR(w[i], expected[i], 1e-12);
    lac_graph_destroy(&g);
    /* Two components and an isolated vertex: two zero eigenvalues, and 1. */
    lac_graph_params p = lac_graph_params_default();
    p.num_vertices = 5;
    CHECK_OK(ctx, load_text("0 1\n2 3\n", &p, &g));
    double w5[5];
    a = lac_array_vector(w5, LAC_FLOAT64, 5);
    CHECK_OK(ctx, lac_graph_laplacian_eigenvalues(ctx, g, &a));
    double e5[5] = {0, 0, 1, 2, 2};
    for (int i = 0; i < 5; i++) CHECK_NEAR(w5[i], e5[i], 1e-12);
    lac_graph_destroy(&g);
}

int main(void)
{
    lac_ctx_params p = lac_ctx_params_default();
    p.backend = LAC_BACKEND_CPU;
    if (lac_ctx_create(&p, &ctx) != 0) return 1;
    RUN(snap_edge_list_with_comments_and_any_whitespace);
    RUN(weights_duplicates_self_loops_and_zero_weights);
    RUN(directed_input_is_symmetrised_with_the_larger_weight);
    RUN(sparse_ids_are_remapped_in_ascending_order);
    RUN(num_vertices_keeps_ids_and_isolates_the_rest);
    RUN(edge_list_errors_name_the_line);
    RUN(matrix_market_pattern_symmetric_and_real_general);
    RUN(matrix_market_errors);
    RUN(matrix_market_sizes_are_checked_against_the_file);
    RUN(matrix_market_vertices_without_edges_are_bounded);
    RUN(from_edges_matches_the_file_reader_and_fingerprints);
    RUN(vertex_sets_from_id_files);
    RUN(laplacian_eigenvalues_of_small_graphs);
    lac_ctx_destroy(&ctx);
    return harness_finish();
}
