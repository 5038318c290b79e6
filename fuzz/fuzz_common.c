/* The harnesses' shared helpers (fuzz_common.h). */
#define _GNU_SOURCE
#include "fuzz_common.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Every undefined behaviour is fatal, with its stack, however the harness is
 * run (the code is built recoverable so that run.sh can suppress known ones). */
const char *__ubsan_default_options(void);
const char *__ubsan_default_options(void) { return "halt_on_error=1:print_stacktrace=1"; }

static int file_fd = -1;
static char file_path[64];

static void open_file(void)
{
#ifdef MFD_CLOEXEC
    file_fd = memfd_create("lacuna-fuzz", MFD_CLOEXEC);
#endif
    if (file_fd < 0) {
        const char *dir = getenv("TMPDIR");
        char name[4096];
        snprintf(name, sizeof name, "%s/lacuna-fuzz.XXXXXX", dir && *dir ? dir : "/tmp");
        file_fd = mkstemp(name);
        if (file_fd < 0) fuzz_fail("cannot make a temporary file in %s: %s", name, strerror(errno));
        unlink(name);
    }
    snprintf(file_path, sizeof file_path, "/proc/self/fd/%d", file_fd);
}

const char *fuzz_file(const uint8_t *data, size_t size)
{
    if (file_fd < 0) open_file();
    if (ftruncate(file_fd, 0) != 0) fuzz_fail("ftruncate: %s", strerror(errno));
    size_t done = 0;
    while (done < size) {
        ssize_t w = pwrite(file_fd, data + done, size - done, (off_t)done);
        if (w <= 0) fuzz_fail("writing the input file: %s", strerror(errno));
        done += (size_t)w;
    }
    return file_path;
}

lac_ctx_t fuzz_ctx_new(void)
{
    lac_ctx_params p = lac_ctx_params_default();
    p.backend = LAC_BACKEND_CPU;
    p.threads = 1;
    lac_ctx_t ctx = NULL;
    if (lac_ctx_create(&p, &ctx) != LAC_SUCCESS) fuzz_fail("lac_ctx_create: %s", lac_last_error(NULL));
    return ctx;
}

void fuzz_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("lacuna fuzz check failed: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    abort();
}

void fuzz_check_status(lac_ctx_t ctx, lac_status st, const char *call)
{
    if (st == LAC_SUCCESS) return;
    const char *detail = lac_last_error(ctx);
    if (st > 0 || st < -99)
        fuzz_fail("%s returned %d (%s): not an input error; detail: %s", call, st, lac_status_string(st), detail);
    if (!detail || !*detail) fuzz_fail("%s returned %d (%s) with no detail in lac_last_error", call, st, lac_status_string(st));
}

lac_graph_t fuzz_graph_from_text(lac_ctx_t ctx, const char *edge_list)
{
    lac_graph_params p = lac_graph_params_default();
    p.format = LAC_GRAPH_EDGE_LIST;
    lac_graph_t g = NULL;
    lac_status st = lac_graph_load(ctx, fuzz_file((const uint8_t *)edge_list, strlen(edge_list)), &p, &g);
    if (st != LAC_SUCCESS) fuzz_fail("the harness's graph does not load: %s", lac_last_error(ctx));
    return g;
}

void fuzz_check_graph(lac_graph_t g, const char *call)
{
    if (!g) fuzz_fail("%s succeeded with a NULL graph", call);
    lac_graph_info info = lac_graph_get_info(g);
    int64_t n = info.num_vertices;
    if (n < 1 || lac_graph_num_vertices(g) != n) fuzz_fail("%s: %lld vertices", call, (long long)n);
    if (info.num_edges < 0 || info.isolated_vertices < 0 || info.isolated_vertices > n || info.components < 1 ||
        info.components > n || info.lines < 0 || info.self_loops < 0 || info.zero_weight < 0 || info.repeated < 0)
        fuzz_fail("%s: inconsistent facts (edges %lld, isolated %lld, components %lld of %lld vertices)", call,
                  (long long)info.num_edges, (long long)info.isolated_vertices, (long long)info.components, (long long)n);
    if (info.num_edges > n * (n - 1) / 2) fuzz_fail("%s: %lld edges among %lld vertices", call, (long long)info.num_edges, (long long)n);
    lac_ctx_t ctx = fuzz_ctx_new();
    for (int64_t v = 0; v < n; v = v < 255 ? v + 1 : (v < n - 1 ? n - 1 : n)) {
        int64_t id = -1, back = -1;
        if (lac_graph_id_of_vertex(ctx, g, v, &id) != LAC_SUCCESS) fuzz_fail("%s: vertex %lld has no id", call, (long long)v);
        if (lac_graph_vertex_of_id(ctx, g, id, &back) != LAC_SUCCESS || back != v)
            fuzz_fail("%s: vertex %lld has id %lld, which maps to %lld", call, (long long)v, (long long)id, (long long)back);
    }
    if (n <= 64) {
        double L[64 * 64];
        lac_array a = lac_array_matrix(L, LAC_FLOAT64, n, n);
        if (lac_graph_laplacian(ctx, g, &a) != LAC_SUCCESS) fuzz_fail("%s: laplacian: %s", call, lac_last_error(ctx));
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < n; j++) {
                double x = L[i * n + j];
                /* symmetric up to rounding: -d_i^-1/2 w d_j^-1/2 is multiplied in
                 * another order for (j, i), and may underflow in one of them */
                if (!(x >= -1.0000001 && x <= 1.0000001) || !(fabs(x - L[j * n + i]) <= 1e-12) || (i == j && x != 1.0))
                    fuzz_fail("%s: Laplacian[%lld][%lld] = %g (transposed %g)", call, (long long)i, (long long)j, x, L[j * n + i]);
            }
    }
    lac_ctx_destroy(&ctx);
}
