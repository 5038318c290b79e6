/* The graph Fourier basis: the eigendecomposition L = U diag(w) U^T of the
 * normalised Laplacian, and its cache file (validated on load, written
 * atomically) so that repeated runs on one graph skip the eigendecomposition. */
#include "impute/impute_internal.h"
#include "io/io_internal.h"

#include <errno.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Cache file layout, little-endian:
 *   0  "LACGFT" 0 1        magic and format version 1
 *   8  u64 N
 *  16  u32 element bytes (4 or 8), u32 zero
 *  24  u64 the graph's fingerprint
 *  32  u64 checksum of everything after the header
 *  40  N float64 eigenvalues, then N*N elements of U column-major */
static const unsigned char cache_magic[8] = {'L', 'A', 'C', 'G', 'F', 'T', 0, 1};
enum { CACHE_HEADER = 40 };

static void put_u64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_u64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* A fast 64-bit checksum over whole words (and the tail bytes). */
static uint64_t checksum_update(uint64_t h, const void *data, size_t bytes)
{
    const unsigned char *p = data;
    size_t words = bytes / 8;
    for (size_t i = 0; i < words; i++) {
        uint64_t w;
        memcpy(&w, p + 8 * i, 8);
        h = (h ^ w) * 0x100000001B3ull;
        h ^= h >> 29;
    }
    for (size_t i = words * 8; i < bytes; i++) h = (h ^ p[i]) * 0x100000001B3ull;
    return h;
}

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
    if (ctx->backend == LAC_BACKEND_CUDA && ctx->params.backend == LAC_BACKEND_CUDA)
        return lac_error(ctx, LAC_ERR_UNSUPPORTED, "the CUDA backend has no graph Fourier basis yet; use the CPU");
    int64_t n = lac_graph_num_vertices(graph);
    if (n < 1) return lac_error(ctx, LAC_ERR_VALUE, "the graph has no vertices");
    struct lac_gft *g = gft_alloc(ctx, n, precision);
    if (!g) return LAC_ERR_OUT_OF_MEMORY;
    double t0 = omp_get_wtime();
    lac_array L = lac_array_matrix(g->vectors, precision, n, n);
    lac_status st = lac_graph_laplacian(ctx, graph, &L);
    /* L is symmetric, so its row-major layout is also the column-major one
     * syevd reads; U comes back column-major in place. */
    if (st >= 0) st = lac_impute_cpu_eigen(ctx, precision, n, g->vectors, 1, g->eigenvalues);
    if (st < 0) {
        gft_free(g);
        return st;
    }
    g->seconds = omp_get_wtime() - t0;
    g->graph_fingerprint = lac_graph_get_info(graph).fingerprint;
    lac_log(ctx, LAC_LOG_INFO, "graph Fourier basis: N = %lld, %s, %.2f s, eigenvalues [%.6g, %.6g]", (long long)n,
            lac_dtype_name(precision), g->seconds, g->eigenvalues[0], g->eigenvalues[n - 1]);
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
    lac_dtype precision = eigenvalues->dtype;
    void *a = lac_malloc(ctx, (size_t)n * (size_t)n * lac_dtype_size(precision));
    double *w = lac_malloc(ctx, (size_t)n * sizeof *w);
    lac_status st = (!a || !w) ? LAC_ERR_OUT_OF_MEMORY : LAC_SUCCESS;
    if (st >= 0) {
        lac_array L = lac_array_matrix(a, precision, n, n);
        st = lac_graph_laplacian(ctx, graph, &L);
    }
    if (st >= 0) st = lac_impute_cpu_eigen(ctx, precision, n, a, 0, w);
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
    size_t esize = lac_dtype_size(gft->precision);
    size_t vec_bytes = (size_t)gft->n * (size_t)gft->n * esize, val_bytes = (size_t)gft->n * sizeof(double);
    unsigned char header[CACHE_HEADER];
    memset(header, 0, sizeof header);
    memcpy(header, cache_magic, 8);
    put_u64(header + 8, (uint64_t)gft->n);
    put_u64(header + 16, (uint64_t)esize);
    put_u64(header + 24, gft->graph_fingerprint);
    uint64_t sum = checksum_update(0xcbf29ce484222325ull, gft->eigenvalues, val_bytes);
    put_u64(header + 32, checksum_update(sum, gft->vectors, vec_bytes));

    lac_atomic_file af;
    LAC_CHECK(lac_atomic_open(ctx, path, &af));
    if (fwrite(header, 1, sizeof header, af.fp) != sizeof header ||
        fwrite(gft->eigenvalues, 1, val_bytes, af.fp) != val_bytes ||
        fwrite(gft->vectors, 1, vec_bytes, af.fp) != vec_bytes) {
        lac_atomic_abort(&af);
        return lac_error(ctx, LAC_ERR_IO, "writing %s failed", path);
    }
    return lac_atomic_commit(ctx, &af);
}

lac_status lac_gft_load(lac_ctx_t ctx, const char *path, lac_graph_t graph, lac_dtype precision, lac_gft_t *out)
{
    LAC_ARG_NOT_NULL(ctx, path);
    LAC_ARG_NOT_NULL(ctx, graph);
    LAC_ARG_NOT_NULL(ctx, out);
    LAC_CHECK(check_precision(ctx, precision));
    lac_graph_info info = lac_graph_get_info(graph);
    FILE *fp = fopen(path, "rb");
    if (!fp) return lac_error(ctx, LAC_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    lac_status st = LAC_SUCCESS;
    struct lac_gft *g = NULL;
    unsigned char header[CACHE_HEADER];
    struct stat sb;
    if (fstat(fileno(fp), &sb) != 0 || fread(header, 1, sizeof header, fp) != sizeof header ||
        memcmp(header, cache_magic, 8) != 0) {
        st = lac_error(ctx, LAC_ERR_FORMAT, "%s is not a graph Fourier basis cache (bad header)", path);
        goto done;
    }
    uint64_t n = get_u64(header + 8), esize = get_u64(header + 16), fp64 = get_u64(header + 24);
    if (esize != 4 && esize != 8) {
        st = lac_error(ctx, LAC_ERR_FORMAT, "%s: element size %llu is neither 4 nor 8", path, (unsigned long long)esize);
        goto done;
    }
    if (n != (uint64_t)info.num_vertices) {
        st = lac_error(ctx, LAC_ERR_VALUE, "%s holds a basis of %llu vertices; the graph has %lld", path,
                       (unsigned long long)n, (long long)info.num_vertices);
        goto done;
    }
    if (fp64 != info.fingerprint) {
        st = lac_error(ctx, LAC_ERR_VALUE, "%s was made from another graph (fingerprint %016llx, this graph %016llx)", path,
                       (unsigned long long)fp64, (unsigned long long)info.fingerprint);
        goto done;
    }
    if (esize != lac_dtype_size(precision)) {
        st = lac_error(ctx, LAC_ERR_VALUE, "%s holds a %s basis; %s was asked for", path, esize == 4 ? "float32" : "float64",
                       lac_dtype_name(precision));
        goto done;
    }
    size_t vec_bytes = (size_t)n * (size_t)n * esize, val_bytes = (size_t)n * sizeof(double);
    if ((uint64_t)sb.st_size != CACHE_HEADER + val_bytes + vec_bytes) {
        st = lac_error(ctx, LAC_ERR_FORMAT, "%s has %lld bytes; a basis of N = %llu needs %zu", path, (long long)sb.st_size,
                       (unsigned long long)n, (size_t)CACHE_HEADER + val_bytes + vec_bytes);
        goto done;
    }
    g = gft_alloc(ctx, (int64_t)n, precision);
    if (!g) {
        st = LAC_ERR_OUT_OF_MEMORY;
        goto done;
    }
    if (fread(g->eigenvalues, 1, val_bytes, fp) != val_bytes || fread(g->vectors, 1, vec_bytes, fp) != vec_bytes) {
        st = lac_error(ctx, LAC_ERR_IO, "reading %s failed", path);
        goto done;
    }
    uint64_t sum = checksum_update(0xcbf29ce484222325ull, g->eigenvalues, val_bytes);
    if (checksum_update(sum, g->vectors, vec_bytes) != get_u64(header + 32)) {
        st = lac_error(ctx, LAC_ERR_FORMAT, "%s is damaged (checksum mismatch)", path);
        goto done;
    }
    g->graph_fingerprint = fp64;
    g->seconds = 0;
    *out = g;
    g = NULL;
done:
    gft_free(g);
    fclose(fp);
    return st;
}

lac_status lac_gft_load_or_create(lac_ctx_t ctx, lac_graph_t graph, lac_dtype precision, const char *path,
                                  lac_gft_t *out, int *from_cache)
{
    LAC_ARG_NOT_NULL(ctx, graph);
    LAC_ARG_NOT_NULL(ctx, out);
    if (from_cache) *from_cache = 0;
    if (path) {
        struct stat sb;
        if (stat(path, &sb) == 0) {
            lac_status st = lac_gft_load(ctx, path, graph, precision, out);
            if (st >= 0) {
                if (from_cache) *from_cache = 1;
                lac_log(ctx, LAC_LOG_INFO, "graph Fourier basis from the cache %s", path);
                return st;
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
                double x = gft->precision == LAC_FLOAT32 ? ((const float *)gft->vectors)[v + k * n]
                                                         : ((const double *)gft->vectors)[v + k * n];
                if (vectors->dtype == LAC_FLOAT32) ((float *)vectors->data)[v * n + k] = (float)x;
                else ((double *)vectors->data)[v * n + k] = x;
            }
    return LAC_SUCCESS;
}
