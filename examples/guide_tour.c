/* A tour of the C API, the program docs/guide.md walks through: map, impute
 * and mf on small data made here, each answer checked against a plain
 * reference (a loop, the truth, the mean rating). Exit 0 when all three agree.
 *
 *   cc -std=c11 guide_tour.c $(pkg-config --cflags --libs lacuna) -lm -o guide_tour
 */
#include <lacuna/lacuna.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* Every call returns a lac_status: < 0 is an error, whose detail
 * lac_last_error(ctx) holds ("bridge[3] = 12 is outside [0, 10)"). */
static int failed(lac_ctx_t ctx, const char *what, lac_status st)
{
    fprintf(stderr, "%s: %s: %s\n", what, lac_status_string(st), lac_last_error(ctx));
    return 1;
}

/* map: T[R[i]] += S[i] for 1000 values onto 10 targets. */
static int tour_map(lac_ctx_t ctx)
{
    enum { M = 1000, N = 10 };
    static float source[M], target[N];
    static int32_t bridge[M];
    double reference[N] = {0};
    for (int i = 0; i < M; i++) {
        source[i] = (float)(i % 7) - 3.0f;
        bridge[i] = (i * 37) % N;
        reference[bridge[i]] += source[i];
    }
    lac_array S = lac_array_vector(source, LAC_FLOAT32, M);
    lac_array R = lac_array_vector(bridge, LAC_INT32, M);
    lac_array T = lac_array_vector(target, LAC_FLOAT32, N);
    lac_map_params mp = lac_map_params_default();   /* op sum, T overwritten */
    lac_status st = lac_map(ctx, &mp, &S, &R, NULL, &T);
    if (st < 0) return failed(ctx, "lac_map", st);
    double worst = 0;
    for (int j = 0; j < N; j++) worst = fmax(worst, fabs(target[j] - reference[j]));
    printf("map: %d values onto %d targets, largest difference from a loop %g\n", M, N, worst);
    return worst > 1e-3;
}

/* impute: a 100-vertex circulant graph, 10 x 10 slices whose spectral
 * slices have rank 1, 20% of the vertices missing. */
static int tour_impute(lac_ctx_t ctx)
{
    enum { V = 100 };
    int64_t from[2 * V], to[2 * V];
    for (int v = 0; v < V; v++) {
        from[2 * v] = v, to[2 * v] = (v + 1) % V;
        from[2 * v + 1] = v, to[2 * v + 1] = (v + 3) % V;
    }
    lac_array src = lac_array_vector(from, LAC_INT64, 2 * V), dst = lac_array_vector(to, LAC_INT64, 2 * V);
    lac_graph_t graph = NULL;
    lac_gft_t gft = NULL;
    lac_array truth = {0}, observed = {0}, estimate = {0};
    int rc = 1;
    lac_status st = lac_graph_from_edges(ctx, V, &src, &dst, NULL, &graph);
    /* The graph Fourier basis: the eigenvectors of the normalised Laplacian. */
    if (st >= 0) st = lac_gft_create(ctx, graph, LAC_FLOAT64, &gft);
    int64_t shape[3] = {V, 10, 10};
    if (st >= 0) st = lac_array_alloc(ctx, LAC_FLOAT64, 3, shape, &truth);
    if (st >= 0) st = lac_array_alloc(ctx, LAC_FLOAT64, 3, shape, &estimate);
    if (st >= 0) st = lac_array_alloc(ctx, LAC_BOOL, 1, shape, &observed);
    lac_impute_gen_params gp = lac_impute_gen_params_default();
    gp.m = 10, gp.n = 10, gp.rank = 1, gp.observed_ratio = 0.8, gp.seed = 7;
    if (st >= 0) st = lac_impute_generate(ctx, &gp, gft, &truth, &observed);
    if (st < 0) {
        rc = failed(ctx, "impute set-up", st);
        goto done;
    }
    /* The tensor is the truth itself: only its observed slices are read. */
    lac_impute_params ip = lac_impute_params_default();
    lac_impute_result res;
    st = lac_impute(ctx, &ip, gft, &truth, &observed, &truth, &estimate, &res);
    if (st < 0) {
        rc = failed(ctx, "lac_impute", st);
        goto done;
    }
    printf("impute: %lld of %d vertices missing, %lld iterations, rMSE %.2e over the missing slices\n",
           (long long)res.missing_vertices, V, (long long)res.iterations, res.rmse_missing);
    rc = !(res.rmse_missing < 0.05);
done:
    lac_array_release(&observed);
    lac_array_release(&estimate);
    lac_array_release(&truth);
    lac_gft_destroy(&gft);
    lac_graph_destroy(&graph);
    return rc;
}

/* mf: generated ratings, a 10% holdout, training with validation, then the
 * held-out RMSE against predicting the training mean. */
static int tour_mf(lac_ctx_t ctx)
{
    lac_ratings_t all = NULL, train = NULL, test = NULL;
    lac_mf_model_t model = NULL;
    float *predictions = NULL;
    int rc = 1;
    lac_mf_gen_params gp = lac_mf_gen_params_default();   /* 1000 users x 500 items, 50 000 ratings */
    lac_mf_split_params sp = lac_mf_split_params_default();
    lac_status st = lac_mf_generate(ctx, &gp, &all);
    if (st >= 0) st = lac_mf_split(ctx, &sp, all, &train, &test);
    lac_mf_params p = lac_mf_params_default();
    p.k = 16;
    lac_mf_report rep;
    if (st >= 0) st = lac_mf_train(ctx, &p, train, test, NULL, NULL, &model, &rep);
    int64_t n = lac_ratings_count(test);
    double rmse = NAN;
    if (st >= 0 && !(predictions = malloc((size_t)n * sizeof *predictions))) st = -1;
    if (st >= 0) st = lac_mf_predict(ctx, model, test, predictions, &rmse, NULL, NULL);
    if (st < 0) {
        rc = failed(ctx, "mf", st);
        goto done;
    }
    double mean = 0, base = 0;
    for (int64_t i = 0; i < lac_ratings_count(train); i++) {
        int64_t u, it;
        float r;
        lac_ratings_get(train, i, &u, &it, &r);
        mean += r;
    }
    mean /= (double)lac_ratings_count(train);
    for (int64_t i = 0; i < n; i++) {
        int64_t u, it;
        float r;
        lac_ratings_get(test, i, &u, &it, &r);
        base += (r - mean) * (r - mean);
    }
    base = sqrt(base / (double)n);
    printf("mf: %d epochs (kept %d), held-out RMSE %.4f, the mean rating alone %.4f\n", rep.epochs, rep.best_epoch,
           rmse, base);
    rc = !(rmse < 0.9 * base);
done:
    free(predictions);
    lac_mf_model_destroy(&model);
    lac_ratings_destroy(&test);
    lac_ratings_destroy(&train);
    lac_ratings_destroy(&all);
    return rc;
}

int main(void)
{
    lac_ctx_t ctx;
    lac_ctx_params p = lac_ctx_params_default();   /* backend auto: CUDA where there is one */
    p.threads = 2;
    lac_status st = lac_ctx_create(&p, &ctx);
    if (st < 0) return failed(NULL, "lac_ctx_create", st);
    printf("lacuna %s\n", lac_version());
    int bad = tour_map(ctx);
    bad += tour_impute(ctx);
    bad += tour_mf(ctx);
    lac_ctx_destroy(&ctx);
    return bad ? 1 : 0;
}
