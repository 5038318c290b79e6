/* The shipped ego-Facebook graph: its size, and the spectrum of its
 * normalised Laplacian (eigenvalues only, single precision, once): all in
 * [0, 2), the smallest ~ 0 (one component), the largest ~ 1.6062. */
#include "harness.h"
#include "lacuna/lacuna.h"

TEST(ego_facebook_graph_and_laplacian_spectrum)
{
    lac_ctx_params p = lac_ctx_params_default();
    p.backend = LAC_BACKEND_CPU;
    lac_ctx_t ctx;
    CHECK_OK(NULL, lac_ctx_create(&p, &ctx));
    const char *src = getenv("LACUNA_SOURCE_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/data/ego-facebook/facebook_combined.txt", src ? src : ".");
    lac_graph_t g = NULL;
    CHECK_OK(ctx, lac_graph_load(ctx, path, NULL, &g));
    if (!g) {
        lac_ctx_destroy(&ctx);
        return;
    }
    lac_graph_info info = lac_graph_get_info(g);
    CHECK_INT(info.num_vertices, 4039);
    CHECK_INT(info.num_edges, 88234);
    CHECK_INT(info.components, 1);
    CHECK_INT(info.isolated_vertices, 0);
    CHECK_INT(info.directed, 0);
    CHECK_INT(info.remapped, 0);

    float *w = malloc(4039 * sizeof *w);
    lac_array a = lac_array_vector(w, LAC_FLOAT32, 4039);
    CHECK_OK(ctx, lac_graph_laplacian_eigenvalues(ctx, g, &a));
    for (int i = 1; i < 4039; i++)
        if (w[i] < w[i - 1]) {
            HARNESS_FAIL("eigenvalues not ascending at %d: %g < %g", i, w[i], w[i - 1]);
            break;
        }
    CHECK(w[0] > -1e-4f && w[0] < 1e-4f);
    CHECK(w[4038] < 2.0f);
    CHECK_NEAR(w[4038], 1.6062, 1e-4);
    /* The trace of L is N (unit diagonal): the eigenvalues must sum to it. */
    double sum = 0;
    for (int i = 0; i < 4039; i++) sum += w[i];
    CHECK_NEAR(sum / 4039.0, 1.0, 1e-4);
    free(w);
    lac_graph_destroy(&g);
    lac_ctx_destroy(&ctx);
}

int main(void)
{
    RUN(ego_facebook_graph_and_laplacian_spectrum);
    return harness_finish();
}
