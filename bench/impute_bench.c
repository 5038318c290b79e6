/* impute_bench: the paper's ego-Facebook protocol (50 x 50 x N graph-tensors of
 * rank 5 on the shipped graph, slice sampling at several observed ratios) through
 * the public API. Prints, for each ratio: rMSE (all slices and missing slices),
 * the iterations, the time of the run and of each phase (GFT, SVT, iGFT) against
 * the phase's floor (its flops over the GEMM rate measured in this run), and the
 * eigendecomposition against its floor. The peer, numpy (what a user would
 * otherwise write) runs the same algorithm in the same run through
 * /usr/bin/python3: its eigendecomposition of the same Laplacian and a few of
 * its iterations on the same size, for a per-phase ratio.
 *
 *   impute_bench [--graph FILE] [--ratios 0.5,0.6,0.7,0.8,0.9] [--seeds 1] [--first-seed 1]
 *                [--m 50] [--n 50] [--rank 5] [--precision single|double]
 *                [--iters C] [--inner T] [--decay c] [--tol e] [--accelerate 0|1]
 *                [--threads N] [--no-peer] [--peer-iters 3] [--figures FILE]
 *
 * rMSE = ‖G_est - G‖_F / ‖G‖_F over all slices (the paper's definition; the
 * estimate at every vertex) and over the missing slices only; averaged over
 * --seeds data sets; "unseen" is the part of that error carried by frequencies
 * whose eigenvector lies (almost) only on missing vertices. The flop counts: GEMM 2·M·N·K; GFT and iGFT per
 * iteration 2·(m·n)·N·N_missing each (plus the one-off U^T P_Ω(G) and the
 * final iGFT, 2·(m·n)·N² each); SVD of an m x n slice (m >= n) with vectors
 * 4m²n + 8mn² + 9n³ (Golub & Van Loan, R-SVD); syevd with vectors
 * (4/3 + 2)·N³ (tridiagonal reduction and back-transformation). */
#include "bench_util.h"
#include "lacuna/lacuna.h"
#include "impute/cpu/impute_cpu.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RATIOS 16

typedef struct {
    const char *graph;
    double ratios[MAX_RATIOS];
    int num_ratios;
    int seeds;
    int first_seed;
    int64_t m, n, rank;
    lac_dtype precision;
    lac_impute_params params;
    int threads;
    int peer;
    int peer_iters;
    const char *figures;   /* JSON lines for `lacuna report` */
} options;

static int parse(int argc, char **argv, options *o)
{
    memset(o, 0, sizeof *o);
    o->graph = "data/ego-facebook/facebook_combined.txt";
    double defaults[5] = {0.5, 0.6, 0.7, 0.8, 0.9};
    memcpy(o->ratios, defaults, sizeof defaults);
    o->num_ratios = 5;
    o->seeds = 1;
    o->first_seed = 1;
    o->m = o->n = 50;
    o->rank = 5;
    o->precision = LAC_FLOAT32;
    o->params = lac_impute_params_default();
    o->peer = 1;
    o->peer_iters = 3;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--no-peer") == 0) {
            o->peer = 0;
            continue;
        }
        if (!v) {
            fprintf(stderr, "impute_bench: %s needs a value (or is unknown)\n", a);
            return 2;
        }
        i++;
        if (strcmp(a, "--graph") == 0) o->graph = v;
        else if (strcmp(a, "--ratios") == 0) {
            o->num_ratios = 0;
            for (char *s = (char *)v; *s && o->num_ratios < MAX_RATIOS;) {
                char *end;
                o->ratios[o->num_ratios++] = strtod(s, &end);
                s = *end == ',' ? end + 1 : end;
                if (end == s && *s) break;
            }
        } else if (strcmp(a, "--seeds") == 0) o->seeds = atoi(v);
        else if (strcmp(a, "--first-seed") == 0) o->first_seed = atoi(v);
        else if (strcmp(a, "--m") == 0) o->m = atoll(v);
        else if (strcmp(a, "--n") == 0) o->n = atoll(v);
        else if (strcmp(a, "--rank") == 0) o->rank = atoll(v);
        else if (strcmp(a, "--precision") == 0) o->precision = strcmp(v, "double") == 0 ? LAC_FLOAT64 : LAC_FLOAT32;
        else if (strcmp(a, "--iters") == 0) o->params.steps = atoll(v);
        else if (strcmp(a, "--inner") == 0) o->params.inner = atoll(v);
        else if (strcmp(a, "--decay") == 0) o->params.decay = atof(v);
        else if (strcmp(a, "--tol") == 0) o->params.tol = atof(v);
        else if (strcmp(a, "--accelerate") == 0) o->params.accelerate = atoi(v);
        else if (strcmp(a, "--threads") == 0) o->threads = atoi(v);
        else if (strcmp(a, "--peer-iters") == 0) o->peer_iters = atoi(v);
        else if (strcmp(a, "--figures") == 0) o->figures = v;
        else {
            fprintf(stderr, "impute_bench: unknown option %s\n", a);
            return 2;
        }
    }
    const char *why = lac_impute_params_check(&o->params);
    if (why || o->seeds < 1 || o->num_ratios < 1) {
        fprintf(stderr, "impute_bench: %s\n", why ? why : "--seeds and --ratios need at least one value");
        return 2;
    }
    return 0;
}

/* The peer: the same algorithm as a numpy user writes it (full GEMMs for the
 * GFT and iGFT, np.linalg.svd over the stack of slices), on the same graph and
 * size. Prints one line: eigen_s gft_s svt_s igft_s (per iteration). */
static const char *peer_script =
    "import sys, time, numpy as np\n"
    "path, m, n, r, p, iters, single = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), "
    "float(sys.argv[5]), int(sys.argv[6]), sys.argv[7] == '1'\n"
    "dt = np.float32 if single else np.float64\n"
    "e = np.loadtxt(path, dtype=np.int64, comments='#')\n"
    "N = int(e.max()) + 1\n"
    "A = np.zeros((N, N), dt); A[e[:, 0], e[:, 1]] = 1; A[e[:, 1], e[:, 0]] = 1; np.fill_diagonal(A, 0)\n"
    "d = A.sum(1); s = np.where(d > 0, 1 / np.sqrt(np.maximum(d, 1e-30)), 0).astype(dt)\n"
    "L = np.eye(N, dtype=dt) - s[:, None] * A * s[None, :]\n"
    "t = time.perf_counter(); w, U = np.linalg.eigh(L); eig = time.perf_counter() - t\n"
    "rng = np.random.default_rng(1)\n"
    "Gh = (rng.standard_normal((N, m, r)) @ rng.standard_normal((N, r, n))).astype(dt)\n"
    "G = (U @ Gh.reshape(N, -1)).reshape(N, m, n)\n"
    "obs = np.zeros(N, bool); obs[rng.choice(N, int(round(p * N)), replace=False)] = True\n"
    "Gest = np.zeros_like(G); lam = None; tg = ts = ti = 0.0\n"
    "for it in range(iters):\n"
    "    t0 = time.perf_counter()\n"
    "    Gimp = np.where(obs[:, None, None], G, Gest)\n"
    "    Ghat = (U.T @ Gimp.reshape(N, -1)).reshape(N, m, n)\n"
    "    t1 = time.perf_counter()\n"
    "    u, sv, vt = np.linalg.svd(Ghat, full_matrices=False)\n"
    "    if lam is None: lam = sv[:, 0] * 0.5\n"
    "    sv = np.maximum(sv - lam[:, None], 0)\n"
    "    Ghat_est = (u * sv[:, None, :]) @ vt\n"
    "    t2 = time.perf_counter()\n"
    "    Gest = (U @ Ghat_est.reshape(N, -1)).reshape(N, m, n)\n"
    "    t3 = time.perf_counter()\n"
    "    tg += t1 - t0; ts += t2 - t1; ti += t3 - t2\n"
    "print(eig, tg / iters, ts / iters, ti / iters)\n";

static int run_peer(const options *o, double ratio, double out[4])
{
    char script_path[] = "/tmp/lacuna-impute-peer-XXXXXX";
    int fd = mkstemp(script_path);
    if (fd < 0) return -1;
    FILE *fp = fdopen(fd, "w");
    fputs(peer_script, fp);
    fclose(fp);
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s %s %lld %lld %lld %g %d %d 2>&1", script_path, o->graph,
             (long long)o->m, (long long)o->n, (long long)o->rank, ratio, o->peer_iters,
             o->precision == LAC_FLOAT32);
    FILE *pp = popen(cmd, "r");
    int got = pp ? fscanf(pp, "%lf %lf %lf %lf", &out[0], &out[1], &out[2], &out[3]) : 0;
    if (pp) pclose(pp);
    remove(script_path);
    return got == 4 ? 0 : -1;
}

/* A frequency k is barely seen when its eigenvector has less than this share
 * of its energy (sum over observed v of U[v,k]^2) on observed vertices. */
#define UNSEEN_ENERGY 0.05

/* The rMSE that losing every barely seen frequency costs: the part of the
 * error no method recovers from slice samples (bench diagnostic). */
static double identifiability_floor(lac_ctx_t ctx, lac_gft_t gft, const lac_array *basis, const lac_array *truth,
                                    const lac_array *mask, lac_array *spectral)
{
    const int64_t N = truth->shape[0], mn = truth->shape[1] * truth->shape[2];
    if (lac_impute_cpu_transform(ctx, gft, mn, truth->data, spectral->data, 0) < 0) return NAN;
    const float *u = basis->data;
    const unsigned char *obs = mask->data;
    double lost = 0, total = 0;
    for (int64_t k = 0; k < N; k++) {
        double seen = 0, energy = 0;
        for (int64_t v = 0; v < N; v++)
            if (obs[v]) seen += (double)u[v * N + k] * u[v * N + k];
        for (int64_t e = 0; e < mn; e++) {
            double x = spectral->dtype == LAC_FLOAT32 ? ((const float *)spectral->data)[k * mn + e]
                                                      : ((const double *)spectral->data)[k * mn + e];
            energy += x * x;
        }
        total += energy;
        if (seen < UNSEEN_ENERGY) lost += energy;
    }
    return total > 0 ? sqrt(lost / total) : NAN;
}

int main(int argc, char **argv)
{
    options o;
    if (parse(argc, argv, &o)) return 2;
    lac_ctx_params cp = lac_ctx_params_default();
    cp.backend = LAC_BACKEND_CPU;
    cp.threads = o.threads;
    lac_ctx_t ctx;
    if (lac_ctx_create(&cp, &ctx) < 0) {
        fprintf(stderr, "impute_bench: %s\n", lac_last_error(NULL));
        return 1;
    }
    lac_graph_t graph = NULL;
    if (lac_graph_load(ctx, o.graph, NULL, &graph) < 0) {
        fprintf(stderr, "impute_bench: %s\n", lac_last_error(ctx));
        return 1;
    }
    const int64_t N = lac_graph_num_vertices(graph), m = o.m, n = o.n, mn = m * n;
    const char *prec = o.precision == LAC_FLOAT32 ? "single" : "double";
    bench_figures figures;
    if (bench_figures_open(&figures, o.figures, lac_ctx_threads(ctx)) < 0) return 1;
    const char *graph_name = strrchr(o.graph, '/') ? strrchr(o.graph, '/') + 1 : o.graph;
    double peer_eigen_s = NAN;
    printf("impute_bench: %s, N = %lld, %lld x %lld slices of rank %lld, %s precision, %d threads\n", o.graph,
           (long long)N, (long long)m, (long long)n, (long long)o.rank, prec, lac_ctx_threads(ctx));
    printf("parameters: C = %lld lambda values, T = %lld per lambda, c = %g, tol = %g, accelerate = %d\n",
           (long long)o.params.steps, (long long)o.params.inner, o.params.decay, o.params.tol, o.params.accelerate);

    /* The GEMM rate, on the GFT's own shape: (m·n) x N times N x N. */
    double gemm_s = lac_impute_cpu_gemm_seconds(ctx, o.precision, mn, N, N);
    double rate = 2.0 * (double)mn * (double)N * (double)N / gemm_s;
    printf("GEMM rate: %.1f GFLOP/s (%lld x %lld x %lld %s GEMM, %.3f s)\n", rate * 1e-9, (long long)mn, (long long)N,
           (long long)N, o.precision == LAC_FLOAT32 ? "sgemm" : "dgemm", gemm_s);

    lac_gft_t gft = NULL;
    if (lac_gft_create(ctx, graph, o.precision, &gft) < 0) {
        fprintf(stderr, "impute_bench: %s\n", lac_last_error(ctx));
        return 1;
    }
    double eigen_s = lac_gft_seconds(gft), eigen_floor = (10.0 / 3.0) * pow((double)N, 3) / rate;
    printf("eigendecomposition (syevd, vectors): %.2f s, floor %.2f s, %.1fx the floor\n", eigen_s, eigen_floor,
           eigen_s / eigen_floor);

    int64_t shape[3] = {N, m, n};
    lac_array truth, mask, out;
    if (lac_array_alloc(ctx, o.precision, 3, shape, &truth) < 0 || lac_array_alloc(ctx, LAC_BOOL, 1, shape, &mask) < 0 ||
        lac_array_alloc(ctx, o.precision, 3, shape, &out) < 0) {
        fprintf(stderr, "impute_bench: %s\n", lac_last_error(ctx));
        return 1;
    }
    /* For the identifiability floor: U (row v, column k) and a spectral buffer. */
    int64_t sq[2] = {N, N};
    lac_array basis, spectral;
    if (lac_array_alloc(ctx, LAC_FLOAT32, 2, sq, &basis) < 0 || lac_gft_copy(ctx, gft, NULL, &basis) < 0 ||
        lac_array_alloc(ctx, o.precision, 3, shape, &spectral) < 0) {
        fprintf(stderr, "impute_bench: %s\n", lac_last_error(ctx));
        return 1;
    }
    double big = m > n ? (double)m : (double)n, small = m > n ? (double)n : (double)m;
    double svd_flops = 4 * big * big * small + 8 * big * small * small + 9 * small * small * small;

    printf("\n%5s %9s %9s %9s %6s %8s %9s | %18s %18s %18s\n", "ratio", "rmse_all", "rmse_miss", "unseen", "iters",
           "run_s", "+eigen_s", "GFT s (floor, x)", "SVT s (floor, x)", "iGFT s (floor, x)");
    double last_per_iter[3] = {0, 0, 0};
    for (int r = 0; r < o.num_ratios; r++) {
        double ratio = o.ratios[r];
        double rmse_all = 0, rmse_miss = 0, secs = 0, phase[3] = {0, 0, 0}, floor_rmse = 0;
        int64_t iters = 0, missing = 0;
        for (int s = 0; s < o.seeds; s++) {
            lac_impute_gen_params gp = lac_impute_gen_params_default();
    gp.m = m, gp.n = n, gp.rank = o.rank, gp.observed_ratio = ratio, gp.seed = (uint64_t)(o.first_seed + s);
            lac_impute_result res;
            if (lac_impute_generate(ctx, &gp, gft, &truth, &mask) < 0 ||
                lac_impute(ctx, &o.params, gft, &truth, &mask, &truth, &out, &res) < 0) {
                fprintf(stderr, "impute_bench: %s\n", lac_last_error(ctx));
                return 1;
            }
            floor_rmse += identifiability_floor(ctx, gft, &basis, &truth, &mask, &spectral) / o.seeds;
            rmse_all += res.rmse_all / o.seeds;
            rmse_miss += res.rmse_missing / o.seeds;
            secs += res.seconds / o.seeds;
            phase[0] += res.seconds_gft / o.seeds;
            phase[1] += res.seconds_svt / o.seeds;
            phase[2] += res.seconds_igft / o.seeds;
            iters += res.iterations;
            missing = res.missing_vertices;
        }
        double it = (double)iters / o.seeds;
        double gft_flops = it * 2.0 * mn * N * missing + 2.0 * mn * N * N;
        double igft_flops = gft_flops;   /* per iteration the same, plus the final full iGFT */
        double floors[3] = {gft_flops / rate, it * N * svd_flops / rate, igft_flops / rate};
        printf("%5.2f %9.2e %9.2e %9.2e %6.1f %8.2f %9.2f | %5.2f (%5.2f %4.1fx) %5.2f (%5.2f %4.1fx) %5.2f (%5.2f %4.1fx)\n",
               ratio, rmse_all, rmse_miss, floor_rmse, it, secs, secs + eigen_s, phase[0], floors[0], phase[0] / floors[0], phase[1],
               floors[1], phase[1] / floors[1], phase[2], floors[2], phase[2] / floors[2]);
        fflush(stdout);
        for (int q = 0; q < 3; q++) last_per_iter[q] = phase[q] / it;
        /* The run against the phases' floors; rMSE against the identifiability
         * floor and the paper's Table 3 where it has the ratio. */
        static const double paper_ratios[] = {0.5, 0.6, 0.7, 0.8, 0.9}, paper_rmse[] = {0.038, 0.032, 0.018, 0.008, 0.001};
        double paper = NAN;
        for (int q = 0; q < 5; q++)
            if (fabs(ratio - paper_ratios[q]) < 1e-9) paper = paper_rmse[q];
        char name[160];
        snprintf(name, sizeof name, "%s, %lld x %lld x %lld, %s, observed %.2f", graph_name, (long long)N, (long long)m,
                 (long long)n, prec, ratio);
        bench_figure(&figures, "impute", name, secs, "s per run", floors[0] + floors[1] + floors[2], NULL, NAN);
        bench_figure(&figures, "impute", name, rmse_all, "rMSE (floor: identifiability)", floor_rmse, "paper", paper);
        if (o.peer && r == o.num_ratios - 1) {
            double peer[4];
            if (run_peer(&o, ratio, peer) < 0) {
                printf("\npeer: /usr/bin/python3 with numpy did not run; no peer ratio\n");
            } else {
                printf("\npeer (numpy %s, same algorithm, full GEMMs and np.linalg.svd; %d iterations at ratio %.2f):\n",
                       prec, o.peer_iters, ratio);
                printf("  eigendecomposition: numpy %.2f s, lacuna %.2f s: %.2fx\n", peer[0], eigen_s, peer[0] / eigen_s);
                peer_eigen_s = peer[0];
                char name[160];
                snprintf(name, sizeof name, "%s, %lld x %lld x %lld, %s, observed %.2f", graph_name, (long long)N,
                         (long long)m, (long long)n, prec, ratio);
                bench_figure(&figures, "impute", name, last_per_iter[0] + last_per_iter[1] + last_per_iter[2],
                             "s per iteration", NAN, "numpy", peer[1] + peer[2] + peer[3]);
                printf("  per iteration: GFT numpy %.3f s vs lacuna %.3f s (%.2fx), SVT %.3f vs %.3f (%.2fx), iGFT %.3f vs "
                       "%.3f (%.2fx), total %.3f vs %.3f: %.2fx\n",
                       peer[1], last_per_iter[0], peer[1] / last_per_iter[0], peer[2], last_per_iter[1],
                       peer[2] / last_per_iter[1], peer[3], last_per_iter[2], peer[3] / last_per_iter[2],
                       peer[1] + peer[2] + peer[3], last_per_iter[0] + last_per_iter[1] + last_per_iter[2],
                       (peer[1] + peer[2] + peer[3]) / (last_per_iter[0] + last_per_iter[1] + last_per_iter[2]));
            }
        }
    }
    printf("\nrMSE = |G_est - G|_F / |G|_F (estimate at every vertex; missing: over the missing slices only).\n"
           "unseen = the rMSE left if every frequency whose eigenvector has less than %.0f%% of its energy on\n"
           "observed vertices were lost entirely: sqrt(sum of those |Ghat(k)|^2 / |G|^2).\n", 100 * UNSEEN_ENERGY);
    printf("Paper, Table 3 (CPU and GPU): 0.038, 0.032, 0.018, 0.008, 0.001 at ratios 0.5, 0.6, 0.7, 0.8, 0.9.\n");
    char name[160];
    snprintf(name, sizeof name, "%s, N = %lld, %s", graph_name, (long long)N, prec);
    bench_figure(&figures, "impute", name, eigen_s, "s for the eigendecomposition", eigen_floor, "numpy", peer_eigen_s);
    bench_figures_close(&figures);
    lac_array_release(&truth);
    lac_array_release(&mask);
    lac_array_release(&out);
    lac_array_release(&basis);
    lac_array_release(&spectral);
    lac_gft_destroy(&gft);
    lac_graph_destroy(&graph);
    lac_ctx_destroy(&ctx);
    return 0;
}
