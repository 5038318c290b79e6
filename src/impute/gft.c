/* The graph Fourier basis: the eigendecomposition L = U diag(w) U^T of the
 * normalised Laplacian (on the context's backend), made canonical inside its
 * degenerate eigenspaces (gft_canonical.c) so that every backend gives the
 * same basis, and when to use its cache file (src/io/basis_cache.c) so that
 * repeated runs on one graph skip the eigendecomposition. */
#include "impute/impute_front.h"
#include "io/basis_cache.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void gft_free(struct lac_gft *g)
{
    if (!g) return;
    free(g->vectors);
    free(g->eigenvalues);
    free(g);
}

static struct lac_gft *gft_alloc(lac_ctx_t ctx, int64_t n, lac_dtype precision)
{
    struct lac_gft *g = lac_calloc(ctx, 1, sizeof *g);
    if (!g) return NULL;
    g->n = n;
    g->precision = precision;
    size_t count, bytes;
    if (lac_mul_overflows((size_t)n, (size_t)n, &count) || lac_mul_overflows(count, lac_dtype_size(precision), &bytes)) {
        lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "a %lld x %lld basis overflows", (long long)n, (long long)n);
        free(g);
        return NULL;
    }
    g->vectors = lac_malloc(ctx, bytes > 0 ? bytes : 1);
    g->eigenvalues = lac_malloc(ctx, (size_t)(n > 0 ? n : 1) * sizeof(double));
    if (!g->vectors || !g->eigenvalues) {
        gft_free(g);
        return NULL;
    }
    return g;
}

static lac_status check_precision(lac_ctx_t ctx, lac_dtype precision)
{
    if (precision != LAC_FLOAT32 && precision != LAC_FLOAT64)
        return lac_error(ctx, LAC_ERR_DTYPE, "precision must be float32 or float64, not %s", lac_dtype_name(precision));
    return LAC_SUCCESS;
}

lac_status lac_gft_create(lac_ctx_t ctx, lac_graph_t graph, lac_dtype precision, lac_gft_t *out)
{
    LAC_ARG_NOT_NULL(ctx, ctx);
    LAC_ARG_NOT_NULL(ctx, graph);
    LAC_ARG_NOT_NULL(ctx, out);
    LAC_CHECK(check_precision(ctx, precision));
    const lac_impute_backend *backend;
    LAC_CHECK(lac_impute_backend_for(ctx, "this build has no CUDA graph Fourier basis; use the CPU", NULL, &backend));
    int64_t n = lac_graph_num_vertices(graph);
    if (n < 1) return lac_error(ctx, LAC_ERR_VALUE, "the graph has no vertices");
    /* The eigendecomposition runs in float64 whatever the basis' precision
     * (a float64 working copy, then the basis): in float32 the eigenvectors of
     * eigenvalues closer than ~1e-4 are not determined (ego-Facebook has
     * hundreds such pairs), so two solvers' float32 bases differ there by
     * O(1) whatever is done afterwards; in float64 only the true eigenspaces
     * are degenerate, and the canonical basis is the same to ~1e-10. */
    double bytes = (double)n * (double)n * (double)(8 + (precision == LAC_FLOAT32 ? 4 : 0)), memory = lac_host_memory();
    if (memory > 0 && bytes > memory)
        return lac_error(ctx, LAC_ERR_UNSUPPORTED, "the graph's %lld vertices need a %lld x %lld basis, %.3g GB, more than this "
                         "machine's %.3g GB", (long long)n, (long long)n, (long long)n, 1e-9 * bytes, 1e-9 * memory);
    struct lac_gft *g = gft_alloc(ctx, n, precision);
    if (!g) return LAC_ERR_OUT_OF_MEMORY;
    double *u = precision == LAC_FLOAT64 ? (double *)g->vectors : lac_malloc(ctx, (size_t)n * (size_t)n * sizeof *u);
    if (!u) {
        gft_free(g);
        return LAC_ERR_OUT_OF_MEMORY;
    }
    double t0 = omp_get_wtime();
    lac_array L = lac_array_matrix(u, LAC_FLOAT64, n, n);
    lac_status st = lac_graph_laplacian(ctx, graph, &L);
    /* L is symmetric, so its row-major layout is also the column-major one
     * syevd reads; U comes back column-major in place. */
    if (st >= 0) st = backend->eigen(ctx, LAC_FLOAT64, n, u, 1, g->eigenvalues);
    double t1 = omp_get_wtime();
    int64_t groups = 0;
    if (st >= 0) st = lac_gft_canonicalize(ctx, LAC_FLOAT64, n, u, g->eigenvalues, &groups);
    if (st >= 0 && precision == LAC_FLOAT32) {
        float *v = g->vectors;
#pragma omp parallel for num_threads(lac_threads(ctx)) schedule(static)
        for (int64_t i = 0; i < n * n; i++) v[i] = (float)u[i];
    }
    if ((void *)u != g->vectors) free(u);
    if (st < 0) {
        gft_free(g);
        return st;
    }
    g->seconds = omp_get_wtime() - t0;
    g->graph_fingerprint = lac_graph_get_info(graph).fingerprint;
    lac_log(ctx, LAC_LOG_INFO, "graph Fourier basis: N = %lld, %s, %.2f s (canonical: %lld degenerate eigenspaces, %.3f s), "
            "eigenvalues [%.6g, %.6g]", (long long)n, lac_dtype_name(precision), g->seconds, (long long)groups,
            omp_get_wtime() - t1, g->eigenvalues[0], g->eigenvalues[n - 1]);
    *out = g;
    return LAC_SUCCESS;
}

lac_status lac_graph_laplacian_eigenvalues(lac_ctx_t ctx, lac_graph_t graph, lac_array *eigenvalues)
{
    LAC_ARG_NOT_NULL(ctx, ctx);
    LAC_ARG_NOT_NULL(ctx, graph);
    LAC_ARG_NOT_NULL(ctx, eigenvalues);
    int64_t n = lac_graph_num_vertices(graph);
    LAC_CHECK(check_precision(ctx, eigenvalues->dtype));
    if (eigenvalues->ndim != 1 || eigenvalues->shape[0] != n)
        return lac_error(ctx, LAC_ERR_SHAPE, "eigenvalues must be a vector of %lld", (long long)n);
    if (eigenvalues->memory != LAC_MEM_HOST || !eigenvalues->data)
        return lac_error(ctx, LAC_ERR_ARGUMENT, "eigenvalues must be a host array");
    if (n < 1) return lac_error(ctx, LAC_ERR_VALUE, "the graph has no vertices");
    /* No refusal: until impute has a CUDA table the spectrum is computed on the
     * CPU whatever the context, as it always was. */
    const lac_impute_backend *backend;
    LAC_CHECK(lac_impute_backend_for(ctx, NULL, NULL, &backend));
    lac_dtype precision = eigenvalues->dtype;
    void *a = lac_malloc(ctx, (size_t)n * (size_t)n * lac_dtype_size(precision));
    double *w = lac_malloc(ctx, (size_t)n * sizeof *w);
    lac_status st = (!a || !w) ? LAC_ERR_OUT_OF_MEMORY : LAC_SUCCESS;
    if (st >= 0) {
        lac_array L = lac_array_matrix(a, precision, n, n);
        st = lac_graph_laplacian(ctx, graph, &L);
    }
    if (st >= 0) st = backend->eigen(ctx, precision, n, a, 0, w);
    if (st >= 0)
        for (int64_t i = 0; i < n; i++) {
            if (precision == LAC_FLOAT32) ((float *)eigenvalues->data)[i] = (float)w[i];
            else ((double *)eigenvalues->data)[i] = w[i];
        }
    free(a);
    free(w);
    return st;
}

lac_status lac_gft_save(lac_ctx_t ctx, lac_gft_t gft, const char *path)
{
    LAC_ARG_NOT_NULL(ctx, gft);
    LAC_ARG_NOT_NULL(ctx, path);
    lac_basis_cache_key key = {gft->n, gft->precision, gft->graph_fingerprint};
    return lac_basis_cache_write(ctx, path, &key, gft->eigenvalues, gft->vectors);
}

/* lac_gft_load; *old says the file held a basis of an earlier format (the
 * solver's own, or canonical by an earlier rule), made canonical here. */
static lac_status gft_load(lac_ctx_t ctx, const char *path, lac_graph_t graph, lac_dtype precision, lac_gft_t *out,
                           int *old)
{
    LAC_ARG_NOT_NULL(ctx, path);
    LAC_ARG_NOT_NULL(ctx, graph);
    LAC_ARG_NOT_NULL(ctx, out);
    LAC_CHECK(check_precision(ctx, precision));
    lac_graph_info info = lac_graph_get_info(graph);
    lac_basis_cache_key key = {info.num_vertices, precision, info.fingerprint};
    double *eigenvalues = NULL;
    void *vectors = NULL;
    int version = 0;
    LAC_CHECK(lac_basis_cache_read(ctx, path, &key, &eigenvalues, &vectors, &version));
    *old = version < LAC_BASIS_CACHE_VERSION;
    lac_status st = *old ? lac_gft_canonicalize(ctx, precision, info.num_vertices, vectors, eigenvalues, NULL) : LAC_SUCCESS;
    if (*old && st >= 0)
        lac_log(ctx, LAC_LOG_INFO, "%s holds a basis of cache format %d: made canonical on load", path, version);
    struct lac_gft *g = st >= 0 ? lac_calloc(ctx, 1, sizeof *g) : NULL;
    if (!g) {
        free(eigenvalues);
        free(vectors);
        return st < 0 ? st : LAC_ERR_OUT_OF_MEMORY;
    }
    g->n = info.num_vertices;
    g->precision = precision;
    g->vectors = vectors;
    g->eigenvalues = eigenvalues;
    g->graph_fingerprint = info.fingerprint;
    g->seconds = 0;
    *out = g;
    return LAC_SUCCESS;
}

lac_status lac_gft_load(lac_ctx_t ctx, const char *path, lac_graph_t graph, lac_dtype precision, lac_gft_t *out)
{
    int old;
    return gft_load(ctx, path, graph, precision, out, &old);
}

/* lac_gft_load_or_create in this process alone. */
static lac_status load_or_create_here(lac_ctx_t ctx, lac_graph_t graph, lac_dtype precision, const char *path,
                                      lac_gft_t *out, int *from_cache)
{
    if (path) {
        /* A file that is not a cache is refused before the work, not replaced after it. */
        LAC_CHECK(lac_basis_cache_replaceable(ctx, path));
        struct stat sb;
        if (stat(path, &sb) == 0) {
            int old = 0;
            lac_status st = gft_load(ctx, path, graph, precision, out, &old);
            if (st >= 0) {
                if (from_cache) *from_cache = 1;
                lac_log(ctx, LAC_LOG_INFO, "graph Fourier basis from the cache %s", path);
                /* An old-format cache is rewritten with the canonical basis it now holds. */
                if (old && lac_gft_save(ctx, *out, path) < 0)
                    lac_log(ctx, LAC_LOG_WARN, "could not rewrite the cache: %s", lac_last_error(ctx));
                lac_clear_error(ctx);
                return LAC_SUCCESS;
            }
            if (st == LAC_ERR_OUT_OF_MEMORY) return st;
            lac_log(ctx, LAC_LOG_WARN, "cache not used, recomputing: %s", lac_last_error(ctx));
        }
    }
    LAC_CHECK(lac_gft_create(ctx, graph, precision, out));
    if (path && lac_gft_save(ctx, *out, path) < 0)
        lac_log(ctx, LAC_LOG_WARN, "could not write the cache: %s", lac_last_error(ctx));
    lac_clear_error(ctx);
    return LAC_SUCCESS;
}

lac_status lac_gft_load_or_create(lac_ctx_t ctx, lac_graph_t graph, lac_dtype precision, const char *path,
                                  lac_gft_t *out, int *from_cache)
{
    LAC_ARG_NOT_NULL(ctx, graph);
    LAC_ARG_NOT_NULL(ctx, out);
    int cached = 0;
    if (from_cache) *from_cache = 0;
    if (ctx->ranks == 1) return load_or_create_here(ctx, graph, precision, path, out, from_cache ? from_cache : &cached);
    /* Over MPI ranks the eigendecomposition runs once: rank 0 reads the cache
     * or solves (and alone writes the cache), then broadcasts the basis. */
    LAC_CHECK(check_precision(ctx, precision));
    *out = NULL;
    lac_status st = LAC_SUCCESS;
    if (ctx->rank == 0) {
        st = load_or_create_here(ctx, graph, precision, path, out, &cached);
    } else {
        *out = gft_alloc(ctx, lac_graph_num_vertices(graph), precision);
        if (!*out) st = LAC_ERR_OUT_OF_MEMORY;
    }
    st = lac_gft_share(ctx, st, *out, &cached);
    if (st < 0) {
        lac_gft_destroy(out);
        return st;
    }
    if (from_cache) *from_cache = cached;
    return LAC_SUCCESS;
}

void lac_gft_destroy(lac_gft_t *gft)
{
    if (!gft || !*gft) return;
    gft_free(*gft);
    *gft = NULL;
}

int64_t lac_gft_size(lac_gft_t gft) { return gft ? gft->n : 0; }
lac_dtype lac_gft_precision(lac_gft_t gft) { return gft ? gft->precision : LAC_FLOAT64; }
double lac_gft_seconds(lac_gft_t gft) { return gft ? gft->seconds : 0.0; }

lac_status lac_gft_copy(lac_ctx_t ctx, lac_gft_t gft, lac_array *eigenvalues, lac_array *vectors)
{
    LAC_ARG_NOT_NULL(ctx, gft);
    int64_t n = gft->n;
    if (eigenvalues) {
        LAC_CHECK(check_precision(ctx, eigenvalues->dtype));
        if (eigenvalues->ndim != 1 || eigenvalues->shape[0] != n || !eigenvalues->data || eigenvalues->memory != LAC_MEM_HOST)
            return lac_error(ctx, LAC_ERR_SHAPE, "eigenvalues must be a host vector of %lld", (long long)n);
    }
    if (vectors) {
        LAC_CHECK(check_precision(ctx, vectors->dtype));
        if (vectors->ndim != 2 || vectors->shape[0] != n || vectors->shape[1] != n || !vectors->data ||
            vectors->memory != LAC_MEM_HOST)
            return lac_error(ctx, LAC_ERR_SHAPE, "vectors must be a host %lld x %lld matrix", (long long)n, (long long)n);
    }
    if (eigenvalues)
        for (int64_t i = 0; i < n; i++) {
            if (eigenvalues->dtype == LAC_FLOAT32) ((float *)eigenvalues->data)[i] = (float)gft->eigenvalues[i];
            else ((double *)eigenvalues->data)[i] = gft->eigenvalues[i];
        }
    if (vectors)
        for (int64_t v = 0; v < n; v++)
            for (int64_t k = 0; k < n; k++) {
                double x = lac_load_real(gft->vectors, gft->precision, v + k * n);
                if (vectors->dtype == LAC_FLOAT32) ((float *)vectors->data)[v * n + k] = (float)x;
                else ((double *)vectors->data)[v * n + k] = x;
            }
    return LAC_SUCCESS;
}
