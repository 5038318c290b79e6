/* impute_cuda_bench: impute on one GPU, three figures.
 *
 *  1. The batched SVT alone (the backend's pass over N slices of m x n,
 *     standard normal entries, λ at half of each slice's σmax), median of
 *     --reps warm runs timed around the call, against its byte floor (read
 *     the slices, read and write the estimate, at the copy bandwidth
 *     measured here) and its flop floor (the R-SVD count 4m²n + 8mn² + 9n³
 *     a slice over the SGEMM rate measured here).
 *  2. One iteration of Algorithm 1 (GFT + SVT + iGFT + the imputation step) on
 *     a random graph of N vertices, half of them observed, rank-5 spectral
 *     slices, timed by CUDA events inside each of --iters iterations
 *     (LACUNA_IMPUTE_CUDA_PHASES): each phase's median against its floor
 *     (the GEMMs: 2·mn·N·N_missing flops over the measured rate; the SVT:
 *     its bytes and flops as in 1.; the imputation step: its bytes over the
 *     copy rate), their sum, and the whole iteration's median (the sum plus
 *     the host's time between the phases); with the default SVT path and
 *     again with the Gram route forced (LACUNA_IMPUTE_CUDA_SVT).
 *  3. The paper's ego-Facebook protocol (50 x 50 x 4039, rank 5) with the
 *     defaults: the whole run including the eigendecomposition, and its rMSE;
 *     on the Jacobi path, the sweeps of each pass and the slices whose
 *     certificate for the columns below λ was refused.
 * The peers (PyTorch's batched SVD, its gesvda driver, the Gram-matrix eigh
 * route and the GFT GEMM) run beside it in bench/torch_impute_peer.py.
 *
 *   impute_cuda_bench [--shapes 50x50x4039,64x64x2100,128x128x2000,512x512x300]
 *                     [--reps 5] [--iters 20] [--graph data/ego-facebook/facebook_combined.txt]
 *                     [--ratios 0.5,0.9] [--cap BYTES [--stream-only]] [--json]
 *
 * --cap adds, per shape, one iteration under LACUNA_CUDA_MEMORY_CAP=BYTES (the
 * streamed plan when the resident one does not fit) against its copy floor
 * (the bytes streamed in and out over the pinned bandwidth measured here);
 * --stream-only runs just that and the resident iteration beside it.
 * --devices 0,1 adds, per shape, one iteration on a context of those devices
 * (the split by frequency; ids may repeat: shares of one device);
 * --split-only runs just that and the one-device iteration beside it.
 * --also KNOBS adds, per shape, the SVT alone and one iteration on a context
 * with those knobs ("IMPUTE_CUDA_SUBSPACE=off": the Gram route's full
 * eigensolve every pass); --fp32-only leaves out the TF32, 3xTF32 and
 * forced-Gram iterations; --svt-only runs just 1. (every shape, each
 * context). Iterations on the Gram route print what the
 * subspace pass certified (slice-passes over the timed iterations).
 */
#include "bench_util.h"
#include "impute/impute_backend.h"
#include "lacuna/lacuna.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef LACUNA_HAVE_CUDA
#include <cublas_v2.h>
#include <cuda_runtime.h>
#endif

typedef struct {
    int64_t m, n, N;
} shape;

static lac_ctx_t gpu, gpu_cold, gpu_gram;   /* gpu_cold: every SVT pass starts cold, keeping no V (the pass
                                              without V, docs/impute.md); gpu_gram: the Gram route */
static lac_ctx_t gpu_iter, gpu_also_iter;    /* gpu and gpu_also with the phase clock (LACUNA_IMPUTE_CUDA_PHASES) */
static lac_ctx_t gpu_capped;                 /* --cap: LACUNA_CUDA_MEMORY_CAP, the streamed plan */
static lac_ctx_t gpu_split;                  /* --devices: a context of several devices */
static lac_ctx_t gpu_also;                   /* --also: a context with those knobs */
static const char *also_knobs;
/* The subspace pass's debug lines, summed: passes, slices certified, zero, full. */
static long long sub_sum[4];
/* The Jacobi path's debug lines: passes, their mean sweeps summed, the most. */
static double jac_sum[3];
/* Each pass's mean sweeps and refused certificates, while tracing (the protocol). */
enum { TRACE_MAX = 4096 };
static double trace_sweeps[TRACE_MAX];
static long long trace_refused[TRACE_MAX];
static long long trace_sharp[TRACE_MAX];   /* proved by Cholesky where Gershgorin was refused */
static int tracing, trace_count;
/* While tracing: the timed lines the library logs (basis, set-up, finish),
 * and each iteration's end (seconds since the call began) and λ step. */
static char trace_lines[8][256];
static int trace_line_count;
static double trace_end[TRACE_MAX];
static int trace_step[TRACE_MAX], trace_iters;
static int trace_progress(const lac_impute_iteration *it, void *user)
{
    (void)user;
    if (trace_iters < TRACE_MAX) {
        trace_end[trace_iters] = it->seconds;
        trace_step[trace_iters++] = (int)it->step;
    }
    return 0;
}
/* The phase clock's line (LACUNA_IMPUTE_CUDA_PHASES): iterations, then the
 * medians of GFT, SVT, iGFT, the imputation step (-1: inside the iGFT) and
 * the whole iteration, in ms. */
static double phases[6];
static int phases_seen;
static void note_slab(const char *message);

static void note_subspace(lac_log_level level, const char *message, void *user)
{
    (void)level;
    (void)user;
    note_slab(message);
    if (tracing && trace_line_count < 8 &&
        (strstr(message, "graph Fourier basis: N") || strstr(message, "impute (cuda): set-up") ||
         strstr(message, "impute (cuda): finish") || strstr(message, "impute (cuda): eigendecomposition")))
        snprintf(trace_lines[trace_line_count++], sizeof trace_lines[0], "%s", message);
    const char *ph = strstr(message, "phases by CUDA events over ");
    if (ph) {
        long long n = 0;
        const char *g = strstr(ph, ": GFT "), *v = strstr(ph, ", SVT "), *i = strstr(ph, ", iGFT ");
        const char *st = strstr(ph, "imputation step "), *w = strstr(ph, "whole iteration ");
        if (sscanf(ph, "phases by CUDA events over %lld", &n) == 1 && g && v && i && st && w) {
            phases[0] = (double)n;
            phases[1] = atof(g + 6);
            phases[2] = atof(v + 6);
            phases[3] = atof(i + 7);
            phases[4] = strncmp(st + 16, "inside", 6) == 0 ? -1 : atof(st + 16);
            phases[5] = atof(w + 16);
            phases_seen = 1;
        }
    }
    const char *at = strstr(message, "SVT by subspace");
    const char *c = at ? strstr(at, "filter degree ") : NULL;
    long long cert, of, zero, full;
    if (c && sscanf(strchr(c, ':') + 2, "%lld of %lld slices certified (%lld zero by trace), %lld", &cert, &of, &zero,
                    &full) == 4) {
        sub_sum[0]++;
        sub_sum[1] += cert;
        sub_sum[2] += zero;
        sub_sum[3] += full;
    }
    const char *j = strstr(message, "SVT by Jacobi");
    const char *sw = j ? strstr(j, "sweeps mean ") : NULL;
    double mean, most;
    long long refused = 0, sharp = 0;
    const char *ch = sw ? strstr(sw, "Gershgorin was refused on ") : NULL;
    if (ch) sharp = atoll(ch + strlen("Gershgorin was refused on "));
    if (sw && sscanf(sw, "sweeps mean %lf, max %lf, certificate refused on %lld", &mean, &most, &refused) >= 2) {
        jac_sum[0]++;
        jac_sum[1] += mean;
        if (most > jac_sum[2]) jac_sum[2] = most;
        if (tracing && trace_count < TRACE_MAX) {
            trace_sweeps[trace_count] = mean;
            trace_sharp[trace_count] = sharp;
            trace_refused[trace_count++] = refused;
        }
    }
}
/* The Jacobi sweeps since `before` (jac_sum's first two). */
static void print_sweeps(const double before[2])
{
    if (jac_sum[0] > before[0])
        printf("      Jacobi sweeps a slice: mean %.2f over %.0f passes, most %.0f\n",
               (jac_sum[1] - before[1]) / (jac_sum[0] - before[0]), jac_sum[0] - before[0], jac_sum[2]);
}
static const char *stream_cap;
static long long stream_slab;   /* the slab width the streamed plan logged */

static void note_slab(const char *message)
{
    const char *at = strstr(message, "in slabs of ");
    if (at && stream_slab != atoll(at + strlen("in slabs of "))) {
        stream_slab = atoll(at + strlen("in slabs of "));
        printf("      %s\n", message);
    }
}
static int json;

static double gaussian(unsigned long long *s)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    double u1 = ((*s >> 11) + 0.5) * (1.0 / 9007199254740992.0);
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    double u2 = (*s >> 11) * (1.0 / 9007199254740992.0);
    return sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2);
}

/* The device's rates, measured here: SGEMM (flop/s) on a square problem and
 * device-to-device copy bandwidth (bytes/s, read + write); NaN without CUDA. */
static double sgemm_rate = NAN, copy_rate = NAN;
/* Pinned host-to-device and device-to-host bandwidth (bytes/s), the floor of
 * a streamed iteration. */
static double h2d_rate = NAN, d2h_rate = NAN;

#ifdef LACUNA_HAVE_CUDA

static void measure_rates(void)
{
    const int n = 8192;
    float *a, *b, *c;
    cudaMalloc((void **)&a, sizeof(float) * n * n);
    cudaMalloc((void **)&b, sizeof(float) * n * n);
    cudaMalloc((void **)&c, sizeof(float) * n * n);
    cudaMemset(a, 0, sizeof(float) * n * n);
    cudaMemset(b, 0, sizeof(float) * n * n);
    cublasHandle_t h;
    cublasCreate(&h);
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    float one = 1, zero = 0, ms;
    double best = 1e30;
    for (int r = 0; r < 4; r++) {
        cudaEventRecord(e0, 0);
        cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, n, b, n, &zero, c, n);
        cudaEventRecord(e1, 0);
        cudaEventSynchronize(e1);
        cudaEventElapsedTime(&ms, e0, e1);
        if (r > 0 && ms < best) best = ms;
    }
    sgemm_rate = 2.0 * n * n * (double)n / (best * 1e-3);
    best = 1e30;
    for (int r = 0; r < 4; r++) {
        cudaEventRecord(e0, 0);
        cudaMemcpyAsync(c, a, sizeof(float) * n * n, cudaMemcpyDeviceToDevice, 0);
        cudaEventRecord(e1, 0);
        cudaEventSynchronize(e1);
        cudaEventElapsedTime(&ms, e0, e1);
        if (r > 0 && ms < best) best = ms;
    }
    copy_rate = 2.0 * sizeof(float) * n * (double)n / (best * 1e-3);
    float *host = NULL;
    if (cudaMallocHost((void **)&host, sizeof(float) * n * n) == cudaSuccess) {
        for (int dir = 0; dir < 2; dir++) {
            best = 1e30;
            for (int r = 0; r < 3; r++) {
                cudaEventRecord(e0, 0);
                if (dir == 0) cudaMemcpyAsync(a, host, sizeof(float) * n * n, cudaMemcpyHostToDevice, 0);
                else cudaMemcpyAsync(host, a, sizeof(float) * n * n, cudaMemcpyDeviceToHost, 0);
                cudaEventRecord(e1, 0);
                cudaEventSynchronize(e1);
                cudaEventElapsedTime(&ms, e0, e1);
                if (r > 0 && ms < best) best = ms;
            }
            *(dir == 0 ? &h2d_rate : &d2h_rate) = sizeof(float) * n * (double)n / (best * 1e-3);
        }
        cudaFreeHost(host);
    }
    cublasDestroy(h);
    cudaFree(a);
    cudaFree(b);
    cudaFree(c);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    printf("measured: SGEMM %.1f TFLOP/s (8192^3), copy %.2f TB/s, pinned host to device %.1f GB/s, back %.1f GB/s\n",
           sgemm_rate / 1e12, copy_rate / 1e12, h2d_rate / 1e9, d2h_rate / 1e9);
}
#endif

/* The SVT pass's floors (s): reading the slices and reading and writing the
 * estimate at the copy rate; the R-SVD flop count 4m²n + 8mn² + 9n³ a slice
 * at the SGEMM rate. */
static void svt_floors(shape s, double *bytes_s, double *flops_s)
{
    const double big = (double)(s.m > s.n ? s.m : s.n), small = (double)(s.m < s.n ? s.m : s.n);
    const double flops = (double)s.N * (4 * big * big * small + 8 * big * small * small + 9 * small * small * small);
    const double bytes = 3.0 * sizeof(float) * (double)(s.N * s.m * s.n);
    *bytes_s = bytes / copy_rate;
    *flops_s = flops / sgemm_rate;
}

/* 1. The SVT alone, through the backend table with an identity basis. */
static void bench_svt(shape s, int reps, lac_ctx_t ctx)
{
    const char *start = ctx == gpu ? "warm" : ctx == gpu_also ? "warm, --also" : "cold";
    const lac_impute_backend *be = lac_impute_backend_cuda();
    const int64_t N = s.N, mn = s.m * s.n;
    float *slices = malloc(sizeof(float) * (size_t)(N * mn)), *identity = calloc((size_t)(N * N), sizeof(float));
    double *eig = calloc((size_t)N, sizeof(double)), *lambda = malloc(sizeof(double) * (size_t)N);
    double *sigma = malloc(sizeof(double) * (size_t)N), *t = malloc(sizeof(double) * (size_t)reps);
    unsigned char *state = malloc((size_t)N);
    unsigned long long seed = 42;
    for (int64_t i = 0; i < N * mn; i++) slices[i] = (float)gaussian(&seed);
    for (int64_t v = 0; v < N; v++) {
        identity[v + v * N] = 1;
        state[v] = LAC_VERTEX_OBSERVED;
    }
    int64_t none = 0;
    struct lac_gft g = {N, LAC_FLOAT32, identity, eig, 0, 0};
    lac_impute_problem pr;
    memset(&pr, 0, sizeof pr);
    pr.precision = LAC_FLOAT32;
    pr.N = N;
    pr.m = s.m;
    pr.n = s.n;
    pr.gft = &g;
    pr.tensor = slices;
    pr.tensor_dtype = LAC_FLOAT32;
    pr.vertex_state = state;
    pr.incomplete = &none;
    void *st = NULL;
    double tsq, tmsq;
    lac_impute_svt_stats stats;
    if (be->setup(ctx, &pr, &st, &tsq, &tmsq) || be->gft(ctx, st) || be->svt(ctx, st, NULL, sigma, &stats)) {
        fprintf(stderr, "impute_cuda_bench: SVT setup failed: %s\n", lac_last_error(ctx));
        exit(1);
    }
    for (int64_t k = 0; k < N; k++) lambda[k] = 0.5 * sigma[k];
    int n_ok = 0;
    for (int r = 0; r <= reps; r++) {   /* the first is a warm-up */
        double t0 = now_s();
        if (be->svt(ctx, st, lambda, NULL, &stats)) {
            fprintf(stderr, "impute_cuda_bench: SVT failed: %s\n", lac_last_error(ctx));
            exit(1);
        }
        if (r > 0) t[n_ok++] = now_s() - t0;
    }
    double sec = median(t, n_ok), floor_bytes, floor_flops;
    svt_floors(s, &floor_bytes, &floor_flops);
    printf("svt %s %4lldx%-4lld x %6lld  %9.3f ms  bytes floor %.3f ms  flops floor %.3f ms  mean rank %.2f\n",
           start, (long long)s.m, (long long)s.n, (long long)N, sec * 1e3, floor_bytes * 1e3, floor_flops * 1e3,
           (double)stats.rank_sum / (double)N);
    if (json)
        printf("{\"capability\":\"impute\",\"case\":\"svt\",\"start\":\"%s\",\"m\":%lld,\"n\":%lld,\"N\":%lld,\"ms\":%.4f,"
               "\"floor_bytes_ms\":%.4f,\"floor_flops_ms\":%.4f,\"mean_rank\":%.3f}\n",
               start, (long long)s.m, (long long)s.n, (long long)N, sec * 1e3, floor_bytes * 1e3, floor_flops * 1e3,
               (double)stats.rank_sum / (double)N);
    be->release(st);
    free(slices);
    free(identity);
    free(eig);
    free(lambda);
    free(sigma);
    free(t);
    free(state);
}

/* A ring with random chords: connected, no special structure. */
static lac_graph_t random_graph(int64_t N, unsigned long long seed)
{
    int64_t E = 3 * N, *a = malloc(sizeof(int64_t) * (size_t)E), *b = malloc(sizeof(int64_t) * (size_t)E);
    for (int64_t v = 0; v < N; v++) {
        a[v] = v;
        b[v] = (v + 1) % N;
        for (int c = 1; c <= 2; c++) {
            seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
            a[c * N + v] = v;
            b[c * N + v] = (int64_t)((seed >> 20) % (unsigned long long)N);
            if (b[c * N + v] == v) b[c * N + v] = (v + N / 2) % N;
        }
    }
    lac_array x = lac_array_vector(a, LAC_INT64, E), y = lac_array_vector(b, LAC_INT64, E);
    lac_graph_t g = NULL;
    if (lac_graph_from_edges(gpu, N, &x, &y, NULL, &g)) {
        fprintf(stderr, "impute_cuda_bench: graph: %s\n", lac_last_error(gpu));
        exit(1);
    }
    free(a);
    free(b);
    return g;
}

/* A generated problem on `graph`: truth and observed set at `ratio`. */
typedef struct {
    lac_gft_t gft;
    lac_array truth, observed, tensor, out;
    double eigen_s;
} problem;

static void make_problem(lac_graph_t graph, int64_t m, int64_t n, double ratio, uint64_t seed, problem *p)
{
    memset(p, 0, sizeof *p);
    double t0 = now_s();
    if (lac_gft_create(gpu, graph, LAC_FLOAT32, &p->gft)) {
        fprintf(stderr, "impute_cuda_bench: basis: %s\n", lac_last_error(gpu));
        exit(1);
    }
    p->eigen_s = now_s() - t0;
    int64_t N = lac_gft_size(p->gft), shape3[3] = {N, m, n};
    lac_array_alloc(gpu, LAC_FLOAT32, 3, shape3, &p->truth);
    lac_array_alloc(gpu, LAC_BOOL, 1, shape3, &p->observed);
    lac_array_alloc(gpu, LAC_FLOAT32, 3, shape3, &p->out);
    lac_impute_gen_params gp = lac_impute_gen_params_default();
    gp.m = m;
    gp.n = n;
    gp.rank = 5;
    gp.observed_ratio = ratio;
    gp.seed = seed;
    if (lac_impute_generate(gpu, &gp, p->gft, &p->truth, &p->observed)) {
        fprintf(stderr, "impute_cuda_bench: generate: %s\n", lac_last_error(gpu));
        exit(1);
    }
}

static void free_problem(problem *p)
{
    lac_array_release(&p->truth);
    lac_array_release(&p->observed);
    lac_array_release(&p->out);
    lac_gft_destroy(&p->gft);
}

/* 2. Per iteration, each phase: a warm-up run, then one of `iters`
 * iterations on a context with the phase clock, whose medians (CUDA events
 * inside each iteration, logged when the state is released) are read from
 * the log: the one-off setup (the upload, Uᵀ P_Ω(G)) and finish (the
 * estimate's download) are in no phase. */
static const char *const gemm_names[] = {"fp32", "tf32", "3xtf32"};   /* lac_gemm_mode order */

static lac_impute_result run_iterations(lac_ctx_t ctx, problem *p, int64_t iterations, int gemm)
{
    lac_impute_params ip = lac_impute_params_default();
    ip.gemm_tf32 = gemm;
    ip.max_iterations = iterations;
    ip.tol = 0;
    lac_impute_result r;
    if (lac_impute(ctx, &ip, p->gft, &p->truth, &p->observed, NULL, &p->out, &r) < 0) {
        fprintf(stderr, "impute_cuda_bench: impute: %s\n", lac_last_error(ctx));
        exit(1);
    }
    return r;
}

static void bench_iteration(shape s, int iters, lac_ctx_t ctx, const char *path, int gemm)
{
    lac_graph_t graph = random_graph(s.N, 5);
    problem p;
    make_problem(graph, s.m, s.n, 0.5, 1, &p);
    run_iterations(ctx, &p, 5, gemm);   /* warm-up */
    long long before[4];
    memcpy(before, sub_sum, sizeof before);
    double jac_before[2] = {jac_sum[0], jac_sum[1]};
    jac_sum[2] = 0;
    phases_seen = 0;
    lac_impute_result b = run_iterations(ctx, &p, iters, gemm);
    if (!phases_seen) {
        fprintf(stderr, "impute_cuda_bench: no phase clock line from the %s context\n", path);
        exit(1);
    }
    const double mn = (double)(s.m * s.n), N = (double)s.N;
    const double missing = (double)(b.partial_vertices + b.missing_vertices);
    const double gemm_floor = 2 * mn * N * missing / sgemm_rate;
    /* The step reads the product and X_{t-1}, writes X_t and what line 7
     * imputes (momentum, the default): four values an entry, copy_rate
     * counting reads and writes. */
    const double step_floor = 4.0 * sizeof(float) * mn * missing / copy_rate;
    double svt_bytes, svt_flops;
    svt_floors(s, &svt_bytes, &svt_flops);
    const double gft = phases[1], svt = phases[2], igft = phases[3], step = phases[4], whole = phases[5];
    const double sum = gft + svt + igft + (step > 0 ? step : 0);
    char step_text[64];
    if (step >= 0) snprintf(step_text, sizeof step_text, "%.3f (floor %.3f)", step, step_floor * 1e3);
    else snprintf(step_text, sizeof step_text, "in the iGFT");
    printf("iter  %4lldx%-4lld x %6lld  %9.3f ms a whole iteration (median of %.0f, CUDA events); phases' medians sum "
           "%.3f ms:\n      GFT %.3f (GEMM floor %.3f, %s) + SVT %.3f (%s; floors: bytes %.3f, flops %.3f) + iGFT %.3f "
           "(GEMM floor %.3f) + imputation step %s; basis %.3f s\n",
           (long long)s.m, (long long)s.n, (long long)s.N, whole, phases[0], sum, gft, gemm_floor * 1e3, gemm_names[gemm],
           svt, path, svt_bytes * 1e3, svt_flops * 1e3, igft, gemm_floor * 1e3, step_text, p.eigen_s);
    if (sub_sum[0] > before[0])
        printf("      subspace pass: %lld of %lld passes; slices certified %lld (zero by trace %lld), full eigensolve %lld\n",
               sub_sum[0] - before[0], (long long)b.iterations, sub_sum[1] - before[1], sub_sum[2] - before[2],
               sub_sum[3] - before[3]);
    print_sweeps(jac_before);
    if (strcmp(path, "streamed") == 0) {
        /* Each iteration copies in C, the previous estimate and U_I (by
         * frequency) and copies the estimate back: the copies' floor. */
        const double in = N * (2 * mn + missing) * sizeof(float), out = N * mn * sizeof(float);
        const double floor_s = fmax(in / h2d_rate, out / d2h_rate);
        printf("      streamed (LACUNA_CUDA_MEMORY_CAP=%s, slabs of %lld frequencies): %.0f MB in, %.0f MB out an "
               "iteration; copy floor %.3f ms\n",
               stream_cap, stream_slab, in / 1e6, out / 1e6, floor_s * 1e3);
        if (json)
            printf("{\"capability\":\"impute\",\"case\":\"streamed\",\"cap\":\"%s\",\"slab\":%lld,\"m\":%lld,\"n\":%lld,"
                   "\"N\":%lld,\"ms\":%.4f,\"in_mb\":%.1f,\"out_mb\":%.1f,\"copy_floor_ms\":%.4f}\n",
                   stream_cap, stream_slab, (long long)s.m, (long long)s.n, (long long)s.N, whole, in / 1e6, out / 1e6,
                   floor_s * 1e3);
    }
    if (json)
        printf("{\"capability\":\"impute\",\"case\":\"iteration\",\"svt_path\":\"%s\",\"gemm\":\"%s\",\"m\":%lld,\"n\":%lld,"
               "\"N\":%lld,\"iterations\":%.0f,\"ms\":%.4f,\"sum_ms\":%.4f,\"gft_ms\":%.4f,\"svt_ms\":%.4f,\"igft_ms\":%.4f,"
               "\"step_ms\":%.4f,\"gemm_floor_ms\":%.4f,\"svt_floor_bytes_ms\":%.4f,\"svt_floor_flops_ms\":%.4f,"
               "\"step_floor_ms\":%.4f,\"basis_s\":%.4f}\n",
               path, gemm_names[gemm], (long long)s.m, (long long)s.n, (long long)s.N, phases[0], whole, sum, gft, svt,
               igft, step, gemm_floor * 1e3, svt_bytes * 1e3, svt_flops * 1e3, step_floor * 1e3, p.eigen_s);
    free_problem(&p);
    lac_graph_destroy(&graph);
}

/* 3. The paper's protocol on ego-Facebook with the defaults. */
static void bench_protocol(const char *path, double ratio, int gemm, lac_ctx_t run)
{
    lac_graph_t graph = NULL;
    lac_graph_params gp = lac_graph_params_default();
    if (lac_graph_load(gpu, path, &gp, &graph)) {
        fprintf(stderr, "impute_cuda_bench: %s\n", lac_last_error(gpu));
        exit(1);
    }
    problem p;
    make_problem(graph, 50, 50, ratio, 1, &p);
    lac_impute_params ip = lac_impute_params_default();
    ip.gemm_tf32 = gemm;
    lac_impute_result r;
    /* A warm-up run (module loading, cuBLAS handles), then the measured one
     * from a fresh basis so that the eigendecomposition is inside it. */
    lac_impute(run, &ip, p.gft, &p.truth, &p.observed, &p.truth, &p.out, &r);
    lac_gft_destroy(&p.gft);
    double jac_before[2] = {jac_sum[0], jac_sum[1]};
    jac_sum[2] = 0;
    tracing = 1;
    trace_count = 0;
    trace_line_count = 0;
    trace_iters = 0;
    ip.progress = trace_progress;
    double t0 = now_s();
    if (lac_gft_create(run, graph, LAC_FLOAT32, &p.gft) ||
        lac_impute(run, &ip, p.gft, &p.truth, &p.observed, &p.truth, &p.out, &r) < 0) {
        fprintf(stderr, "impute_cuda_bench: protocol: %s\n", lac_last_error(gpu));
        exit(1);
    }
    double total = now_s() - t0;
    tracing = 0;
    print_sweeps(jac_before);
    for (int i = 0; i < trace_line_count; i++) printf("      %s\n", trace_lines[i]);
    printf("      basis %.4f s; impute call %.4f s: GFT (with set-up) %.4f, SVT %.4f, iGFT (with finish) %.4f\n",
           lac_gft_seconds(p.gft), r.seconds, r.seconds_gft, r.seconds_svt, r.seconds_igft);
    if (trace_iters > 0) {
        printf("      first iteration ends at %.4f s; each λ step (iterations, ms, ms an iteration):", trace_end[0]);
        for (int i = 1, first = 1; i <= trace_iters; i++)
            if (i == trace_iters || trace_step[i] != trace_step[i - 1]) {
                const double ms = 1e3 * (trace_end[i - 1] - trace_end[first - 1]);
                const int n = i - first;
                if (n > 0) printf(" %d: %d, %.1f, %.2f;", trace_step[i - 1], n, ms, ms / n);
                first = i;
            }
        printf("\n      after the last iteration (finish): %.4f s\n", r.seconds - trace_end[trace_iters - 1]);
    }
    if (trace_count > 0) {
        long long refused = 0, passes_refused = 0, sharp = 0;
        printf("      sweeps a pass (slices refused their certificate):");
        for (int i = 0; i < trace_count; i++) {
            printf(trace_refused[i] ? " %.2f(%lld)" : " %.2f", trace_sweeps[i], trace_refused[i]);
            refused += trace_refused[i];
            passes_refused += trace_refused[i] > 0;
            sharp += trace_sharp[i];
        }
        printf("\n      certificates refused: %lld slice-passes in %lld of %d passes; proved by Cholesky where "
               "Gershgorin was refused: %lld\n",
               refused, passes_refused, trace_count, sharp);
    }
    if (run == gpu_also) printf("(--also %s) ", also_knobs);
    printf("ego-Facebook 50x50x4039 ratio %.2f%s: %.3f s incl. eigendecomposition (run %.3f s, %lld iterations), "
           "rmse %.4g (missing %.4g)\n",
           ratio, gemm == LAC_GEMM_TF32 ? " (TF32 GEMMs)" : gemm == LAC_GEMM_3XTF32 ? " (3xTF32 GEMMs)" : "", total, r.seconds, (long long)r.iterations, r.rmse_all, r.rmse_missing);
    if (json)
        printf("{\"capability\":\"impute\",\"case\":\"ego-facebook\",\"gemm\":\"%s\",\"ratio\":%.2f,\"s\":%.4f,\"run_s\":%.4f,"
               "\"iterations\":%lld,\"rmse\":%.6g,\"rmse_missing\":%.6g}\n",
               gemm_names[gemm], ratio, total, r.seconds, (long long)r.iterations, r.rmse_all, r.rmse_missing);
    free_problem(&p);
    lac_graph_destroy(&graph);
}

int main(int argc, char **argv)
{
    const char *shapes = "50x50x4039,64x64x2100,128x128x2000,512x512x300";
    const char *graph = "data/ego-facebook/facebook_combined.txt", *ratios = "0.5,0.9";
    int stream_only = 0, split_only = 0, fp32_only = 0, svt_only = 0;
    const char *devices = NULL;
    int reps = 5, iters = 20;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) json = 1;
        else if (i + 1 < argc && strcmp(argv[i], "--shapes") == 0) shapes = argv[++i];
        else if (i + 1 < argc && strcmp(argv[i], "--reps") == 0) reps = atoi(argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "--iters") == 0) iters = atoi(argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "--graph") == 0) graph = argv[++i];
        else if (i + 1 < argc && strcmp(argv[i], "--ratios") == 0) ratios = argv[++i];
        else if (i + 1 < argc && strcmp(argv[i], "--cap") == 0) stream_cap = argv[++i];
        else if (strcmp(argv[i], "--stream-only") == 0) stream_only = 1;
        else if (i + 1 < argc && strcmp(argv[i], "--devices") == 0) devices = argv[++i];
        else if (strcmp(argv[i], "--split-only") == 0) split_only = 1;
        else if (i + 1 < argc && strcmp(argv[i], "--also") == 0) also_knobs = argv[++i];
        else if (strcmp(argv[i], "--fp32-only") == 0) fp32_only = 1;
        else if (strcmp(argv[i], "--svt-only") == 0) svt_only = 1;
        else {
            fprintf(stderr, "impute_cuda_bench: unknown option %s (see the source banner)\n", argv[i]);
            return 2;
        }
    }
    if (reps < 1 || iters < 2) {
        fprintf(stderr, "impute_cuda_bench: --reps >= 1 and --iters >= 2\n");
        return 2;
    }
    if (lac_cuda_device_count() == 0 || !lac_impute_backend_cuda()) {
        printf("impute_cuda_bench: no CUDA device or no CUDA backend: nothing to measure\n");
        return 0;
    }
    lac_ctx_params cp = lac_ctx_params_default(), base = cp;
    cp.backend = LAC_BACKEND_CUDA;
    cp.log = note_subspace;
    cp.log_level = LAC_LOG_DEBUG;
    char also_iter[512];
    if (also_knobs) {
        cp.knobs = also_knobs;
        snprintf(also_iter, sizeof also_iter, "%s,IMPUTE_CUDA_PHASES=1", also_knobs);
        if (lac_ctx_create(&cp, &gpu_also)) {
            fprintf(stderr, "impute_cuda_bench: --also %s: %s\n", also_knobs, lac_last_error(NULL));
            return 1;
        }
        cp.knobs = also_iter;
        if (lac_ctx_create(&cp, &gpu_also_iter)) {
            fprintf(stderr, "impute_cuda_bench: --also %s: %s\n", also_knobs, lac_last_error(NULL));
            return 1;
        }
        cp.knobs = NULL;
    }
    if (lac_ctx_create(&cp, &gpu)) {
        fprintf(stderr, "impute_cuda_bench: %s\n", lac_last_error(NULL));
        return 1;
    }
    cp.knobs = "IMPUTE_CUDA_PHASES=1";
    if (lac_ctx_create(&cp, &gpu_iter)) {
        fprintf(stderr, "impute_cuda_bench: %s\n", lac_last_error(NULL));
        return 1;
    }
    cp.knobs = "IMPUTE_CUDA_SVT=gram,IMPUTE_CUDA_PHASES=1";
    if (lac_ctx_create(&cp, &gpu_gram)) {
        fprintf(stderr, "impute_cuda_bench: %s\n", lac_last_error(NULL));
        return 1;
    }
    cp.log = base.log;
    cp.log_level = base.log_level;
    cp.knobs = "IMPUTE_CUDA_WARM=0";
    if (lac_ctx_create(&cp, &gpu_cold)) {
        fprintf(stderr, "impute_cuda_bench: %s\n", lac_last_error(NULL));
        return 1;
    }
    if (stream_only && !stream_cap) {
        fprintf(stderr, "impute_cuda_bench: --stream-only needs --cap BYTES\n");
        return 2;
    }
    char cap_knob[96];
    if (stream_cap) {
        snprintf(cap_knob, sizeof cap_knob, "CUDA_MEMORY_CAP=%s,IMPUTE_CUDA_PHASES=1", stream_cap);
        cp.knobs = cap_knob;
        cp.log = note_subspace;
        cp.log_level = LAC_LOG_DEBUG;
        if (lac_ctx_create(&cp, &gpu_capped)) {
            fprintf(stderr, "impute_cuda_bench: %s\n", lac_last_error(NULL));
            return 1;
        }
    }
    if (split_only && !devices) {
        fprintf(stderr, "impute_cuda_bench: --split-only needs --devices IDS\n");
        return 2;
    }
    if (devices) {
        lac_ctx_params sp = lac_ctx_params_default();
        sp.backend = LAC_BACKEND_CUDA;
        sp.knobs = "IMPUTE_CUDA_PHASES=1";
        sp.log = note_subspace;
        sp.log_level = LAC_LOG_DEBUG;
        for (const char *d = devices; *d && sp.num_devices < LAC_MAX_DEVICES;) {
            char *end;
            long id = strtol(d, &end, 10);
            if (end == d || id < 0) {
                fprintf(stderr, "impute_cuda_bench: bad --devices %s (want IDS like 0,1)\n", devices);
                return 2;
            }
            sp.device_ids[sp.num_devices++] = (int)id;
            d = *end == ',' ? end + 1 : end;
        }
        if (lac_ctx_create(&sp, &gpu_split)) {
            fprintf(stderr, "impute_cuda_bench: --devices %s: %s\n", devices, lac_last_error(NULL));
            return 1;
        }
    }
#ifdef LACUNA_HAVE_CUDA
    measure_rates();
#endif
    for (int pass = 0; pass < (svt_only ? 1 : 2); pass++)
        for (const char *c = shapes; *c;) {
            shape s;
            long long m, n, N;
            int used = 0;
            if (sscanf(c, "%lldx%lldx%lld%n", &m, &n, &N, &used) != 3 || m < 1 || n < 1 || N < 2) {
                fprintf(stderr, "impute_cuda_bench: bad shape in %s (want MxNxCOUNT)\n", c);
                return 2;
            }
            s.m = m;
            s.n = n;
            s.N = N;
            char split_name[64];
            snprintf(split_name, sizeof split_name, "devices %s", devices ? devices : "");
            if (split_only) {
                if (pass == 1) {
                    bench_iteration(s, iters, gpu_iter, "default", LAC_GEMM_FP32);
                    bench_iteration(s, iters, gpu_split, split_name, LAC_GEMM_FP32);
                }
            } else if (stream_only) {
                if (pass == 1) {
                    bench_iteration(s, iters, gpu_iter, "default", LAC_GEMM_FP32);
                    bench_iteration(s, iters, gpu_capped, "streamed", LAC_GEMM_FP32);
                }
            } else if (pass == 0) {
                bench_svt(s, reps, gpu_cold);
                bench_svt(s, reps, gpu);
                if (gpu_also) bench_svt(s, reps, gpu_also);
            }
            else {
                bench_iteration(s, iters, gpu_iter, "default", LAC_GEMM_FP32);
                if (gpu_also) bench_iteration(s, iters, gpu_also_iter, also_knobs, LAC_GEMM_FP32);
                if (!fp32_only) {
                    bench_iteration(s, iters, gpu_gram, "gram", LAC_GEMM_FP32);
                    bench_iteration(s, iters, gpu_iter, "default", LAC_GEMM_TF32);
                    bench_iteration(s, iters, gpu_iter, "default", LAC_GEMM_3XTF32);
                }
                if (gpu_capped) bench_iteration(s, iters, gpu_capped, "streamed", LAC_GEMM_FP32);
                if (gpu_split) bench_iteration(s, iters, gpu_split, split_name, LAC_GEMM_FP32);
            }
            c += used;
            if (*c == ',') c++;
        }
    for (const char *c = stream_only || split_only || svt_only ? "" : ratios; *c;) {
        char *end;
        double ratio = strtod(c, &end);
        if (end == c || !(ratio > 0 && ratio <= 1)) {
            fprintf(stderr, "impute_cuda_bench: bad ratio in %s\n", c);
            return 2;
        }
        bench_protocol(graph, ratio, LAC_GEMM_FP32, gpu);
        if (gpu_also) bench_protocol(graph, ratio, LAC_GEMM_FP32, gpu_also);
        if (!fp32_only) {
            bench_protocol(graph, ratio, LAC_GEMM_TF32, gpu);
            bench_protocol(graph, ratio, LAC_GEMM_3XTF32, gpu);
        }
        c = *end == ',' ? end + 1 : end;
    }
    lac_ctx_destroy(&gpu);
    lac_ctx_destroy(&gpu_iter);
    lac_ctx_destroy(&gpu_cold);
    lac_ctx_destroy(&gpu_gram);
    if (gpu_capped) lac_ctx_destroy(&gpu_capped);
    if (gpu_split) lac_ctx_destroy(&gpu_split);
    if (gpu_also) lac_ctx_destroy(&gpu_also);
    if (gpu_also_iter) lac_ctx_destroy(&gpu_also_iter);
    return 0;
}
