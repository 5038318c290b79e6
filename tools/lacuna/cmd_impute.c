/* lacuna impute: convolutional imputation of graph-tensors.
 *   run  completes an (N, m, n) .npy tensor on a graph (Algorithm 1)
 *   gen  makes the paper's synthetic data on any graph
 * Both share the graph options and the cache of the graph Fourier basis. */
#include "cli.h"
#include "json.h"
#include "plot.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CMD "impute"

typedef struct {
    const char *verb;
    const char *graph, *cache, *device;
    const char *tensor, *observed, *out, *truth, *log, *plot, *select;
    int64_t vertices, m, n, rank, seed, select_seed;
    int threads, no_cache, json, quiet;
    int graph_format, precision, output, dtype;   /* indices into the lists below; dtype -1: the precision's */
    double ratio;
    lac_impute_params params;
} impute_options;

/* ------------------------------------------------------------------------ */
/* Arguments                                                                 */
/* ------------------------------------------------------------------------ */
/* Choices of the CLI_ENUM options, and what each index stands for. */
static const char *const graph_formats[] = {"auto", "edges", "mtx", NULL};           /* lac_graph_format order */
static const char *const outputs[] = {"completed", "estimate", NULL};                /* lac_impute_output order */
static const char *const precisions[] = {"single", "double", NULL};
static const char *const dtypes[] = {"float32", "float64", NULL};
static const char *const gemm_modes[] = {"fp32", "tf32", "3xtf32", NULL};                /* lac_gemm_mode order */
static const lac_dtype dtype_of[] = {LAC_FLOAT32, LAC_FLOAT64};                      /* for both lists */

static const char about[] =
    "Fills the missing slices (or entries) of a graph-tensor: an (N, m, n) array whose\n"
    "slice v is vertex v's m x n matrix, by convolutional imputation (low-rank\n"
    "spectral slices under the graph Fourier transform of the normalised Laplacian).\n";
static const char footer[] =
    "rMSE = |G_est - G|_F / |G|_F over all slices, and over the missing entries only.\n"
    "Exit status: 0 success, 1 runtime failure, 2 usage or input error (then no output\n"
    "file is written). See docs/impute.md.\n";
#define RUN_USAGE "impute run --graph G --tensor X.npy --out Y.npy [options]"
#define GEN_USAGE "impute gen --graph G --out X.npy --truth Z.npy --observed ids.txt [options]"

/* Reads the verb and its options into o; CLI_HELP after printing the help. */
static int parse_args(int argc, char **argv, impute_options *o)
{
    memset(o, 0, sizeof *o);
    o->params = lac_impute_params_default();
    o->device = "auto";
    o->m = o->n = 50;
    o->rank = 5;
    o->seed = 1;
    o->ratio = 0.8;
    o->output = o->params.output;
    o->dtype = -1;
    o->select_seed = 1;
    cli_opt graph[] = {
        {.kind = CLI_SECTION, .help = "graph (both verbs):"},
        {"--graph", NULL, CLI_STRING, &o->graph, "FILE",
         .help = "SNAP edge list ('u v' or 'u v w' lines, '#' comments) or Matrix Market (coordinate, "
                 "pattern/real, general/symmetric)"},
        {"--graph-format", NULL, CLI_ENUM, &o->graph_format, NULL,
         .help = "auto tells them by the %%MatrixMarket banner", .choices = graph_formats, .show_default = 1},
        {"--vertices", NULL, CLI_INT64, &o->vertices, "N",
         .help = "edge lists: ids are vertex numbers in [0, N) (vertices with no edge are isolated); default: ids "
                 "0..n-1 as they are, any other ids remapped in ascending order",
         CLI_AT_LEAST(1)},
        {"--precision", NULL, CLI_ENUM, &o->precision, NULL,
         .help = "of the eigendecomposition and the iteration; single as in the paper", .choices = precisions,
         .show_default = 1},
        {"--cache", NULL, CLI_STRING, &o->cache, "FILE",
         .help = "the graph Fourier basis cache (default: one file per graph and precision under "
                 "$LACUNA_CACHE_DIR, $XDG_CACHE_HOME/lacuna or ~/.cache/lacuna); checked against the graph on load"},
        {"--no-cache", NULL, CLI_FLAG, &o->no_cache, NULL, .help = "always compute the basis, write no cache"},
        {"--device", NULL, CLI_STRING, &o->device, "D",
         .help = "auto|cpu|cuda|cuda:N (default auto: a GPU when impute has a backend there, else the CPU)"},
        {"--threads", NULL, CLI_INT, &o->threads, "N", .help = "CPU threads (default: all)", CLI_AT_LEAST(1)},
        {"--quiet", NULL, CLI_FLAG, &o->quiet, NULL, .help = "no progress or notes on stderr"},
        {0},
    };
    cli_opt run_options[] = {
        {.kind = CLI_SECTION, .help = "run:"},
        {"--tensor", NULL, CLI_STRING, &o->tensor, "FILE",
         .help = "X: (N, m, n) float32/float64 .npy, slice v = vertex v"},
        {"--observed", NULL, CLI_STRING, &o->observed, "FILE",
         .help = "the observed set: a text file of vertex ids (the graph's ids), a bool .npy of N (vertices) or of "
                 "(N, m, n) (entries); default: the NaN entries of X are the missing ones"},
        {"--out", NULL, CLI_STRING, &o->out, "FILE", .help = "the completed tensor (.npy, X's dtype)"},
        {"--output", NULL, CLI_ENUM, &o->output, NULL,
         .help = "observed entries as given and the estimate elsewhere, or the estimate everywhere",
         .choices = outputs, .show_default = 1},
        {"--truth", NULL, CLI_STRING, &o->truth, "FILE",
         .help = "(N, m, n) ground truth: adds errors to the log and summary"},
        {"--iters", NULL, CLI_INT64, &o->params.steps, "C", .help = "lambda values (outer iterations), the paper's C",
         CLI_AT_LEAST(1), .show_default = 1},
        {"--inner", NULL, CLI_INT64, &o->params.inner, "T", .help = "iterations per lambda at most, the paper's T",
         CLI_AT_LEAST(1), .show_default = 1},
        {"--decay", NULL, CLI_DOUBLE, &o->params.decay, "c", .help = "lambda^{j+1} = c lambda^j, in (0, 1)",
         .show_default = 1},
        {"--tol", NULL, CLI_DOUBLE, &o->params.tol, "EPS",
         .help = "a lambda's iterations stop when |G_t - G_t-1|^2 <= EPS |G_t-1|^2", .show_default = 1},
        {"--max-iters", NULL, CLI_INT64, &o->params.max_iterations, "N",
         .help = "cap on all iterations (default C x T)", CLI_AT_LEAST(1)},
        {"--lambda", NULL, CLI_DOUBLE, &o->params.lambda, "L",
         .help = "lambda^1 for every frequency (default: each spectral slice's largest singular value)", CLI_ABOVE(0)},
        {"--select-lambda", NULL, CLI_STRING, &o->select, "holdout[:F]",
         .help = "choose how far down the lambda schedule to go by hold-out validation: hide a fraction F (default "
                 "0.1) of the observed vertices (of the observed entries when some vertex is partly observed), walk the "
                 "schedule on the rest, keep the lambda with the lowest error on the hidden part, then fit all the data"},
        {"--select-seed", NULL, CLI_INT64, &o->select_seed, "S", .help = "which vertices or entries --select-lambda hides",
         .show_default = 1},
        {"--accelerate", NULL, CLI_FLAG, &o->params.accelerate, NULL,
         .help = "impute the extrapolation X_t + theta (X_t - X_t-1) of the accelerated proximal gradient (the "
                 "default)"},
        {"--no-accelerate", NULL, CLI_FLAG, &o->params.accelerate, NULL,
         .help = "the paper's iteration: impute X_t itself", .off = 1},
        {"--tf32", NULL, CLI_FLAG, &o->params.gemm_tf32, NULL,
         .help = "on a GPU, the GFT and iGFT GEMMs on TF32 tensor cores (float32 bases): faster, ~1e-4 relative error "
                 "in the products (docs/impute.md); the CPU ignores it; the same as --gemm tf32"},
        {"--gemm", NULL, CLI_ENUM, &o->params.gemm_tf32, NULL, .choices = gemm_modes,
         .help = "on a GPU, how the GFT and iGFT GEMMs run with float32 bases: fp32 (the default), tf32 (as --tf32) or "
                 "3xtf32 (three TF32 products of split operands: about fp32's accuracy on tensor cores); the CPU "
                 "ignores it"},
        {"--log", NULL, CLI_STRING, &o->log, "FILE",
         .help = "one line per iteration: iteration step lambda_max change mean_rank seconds rmse_all rmse_missing "
                 "(NaN without --truth)"},
        {"--plot", NULL, CLI_STRING, &o->plot, "FILE.svg",
         .help = "the relative change (and rMSE with --truth) by iteration and by time, as an SVG picture"},
        {"--json", NULL, CLI_FLAG, &o->json, NULL,
         .help = "one line of JSON on stdout: iterations, seconds, rmse_all and rmse_missing (with --truth), and more"},
        {0},
    };
    cli_opt gen_options[] = {
        {.kind = CLI_SECTION, .help = "gen (the paper's synthetic data, Section 6.1.1):"},
        {"--m", NULL, CLI_INT64, &o->m, "M", .help = "rows of a slice", CLI_AT_LEAST(1), .show_default = 1},
        {"--n", NULL, CLI_INT64, &o->n, "N", .help = "columns of a slice", CLI_AT_LEAST(1), .show_default = 1},
        {"--rank", NULL, CLI_INT64, &o->rank, "R", .help = "rank of each spectral slice, at most min(m, n)",
         CLI_AT_LEAST(1), .show_default = 1},
        {"--observed-ratio", NULL, CLI_DOUBLE, &o->ratio, "P", .help = "fraction of vertices observed", CLI_IN(0, 1),
         .open = CLI_OPEN_MIN, .show_default = 1},
        {"--seed", NULL, CLI_INT64, &o->seed, "S", .help = "random seed", .show_default = 1},
        {"--out", NULL, CLI_STRING, &o->out, "FILE", .help = "X: the truth with NaN in the unobserved slices"},
        {"--truth", NULL, CLI_STRING, &o->truth, "FILE", .help = "Z: the complete tensor"},
        {"--observed", NULL, CLI_STRING, &o->observed, "FILE", .help = "the observed vertex ids, one a line"},
        {"--dtype", NULL, CLI_ENUM, &o->dtype, NULL, .help = "for X and Z (default: the precision's)",
         .choices = dtypes},
        {0},
    };
    const cli_command both = {
        .name = CMD,
        .usage = RUN_USAGE "\n" GEN_USAGE,
        .about = about,
        .tables = {graph, run_options, gen_options},
        .footer = footer,
    };
    if (argc < 2) {
        cli_help(stderr, &both);
        return CLI_USAGE;
    }
    o->verb = argv[1];
    if (strcmp(o->verb, "--help") == 0 || strcmp(o->verb, "-h") == 0 || strcmp(o->verb, "help") == 0) {
        cli_help(stdout, &both);
        return CLI_HELP;
    }
    bool is_run = strcmp(o->verb, "run") == 0;
    if (!is_run && strcmp(o->verb, "gen") != 0)
        return cli_usage_error(CMD, "unknown verb '%s' (run, gen; --help for the options)", o->verb);
    const cli_command verb = {
        .name = is_run ? CMD " run" : CMD " gen",
        .usage = is_run ? RUN_USAGE : GEN_USAGE,
        .about = about,
        .tables = {graph, is_run ? run_options : gen_options},
        .footer = footer,
    };
    int rc = cli_parse(&verb, argc - 1, argv + 1, NULL, NULL);
    if (rc != CLI_OK) return rc;
    o->params.output = (lac_impute_output)o->output;
    if (o->select) {
        const char *spec = o->select;
        if (strncmp(spec, "holdout", 7) != 0 || (spec[7] != '\0' && spec[7] != ':'))
            return cli_usage_error(CMD, "--select-lambda '%s': the method is holdout or holdout:FRACTION", spec);
        o->params.select_fraction = 0.1;
        if (spec[7] == ':') {
            char *end;
            double f = strtod(spec + 8, &end);
            if (end == spec + 8 || *end || !(f > 0 && f < 1))
                return cli_usage_error(CMD, "--select-lambda '%s': FRACTION must be a number in (0, 1)", spec);
            o->params.select_fraction = f;
        }
        o->params.select_seed = (uint64_t)o->select_seed;
    }
    const char *why = lac_impute_params_check(&o->params);
    if (why) return cli_usage_error(CMD, "%s", why);
    if (!o->graph) return cli_usage_error(CMD, "--graph is required");
    if (!o->out) return cli_usage_error(CMD, "--out is required");
    /* --cache is read and may be written: it must be neither an input nor an output. */
    const char *cache = o->no_cache ? NULL : o->cache;
    if (is_run) {
        if (!o->tensor) return cli_usage_error(CMD, "run needs --tensor");
        const cli_file inputs[] = {{"--graph", o->graph}, {"--tensor", o->tensor}, {"--observed", o->observed},
                                   {"--truth", o->truth}};
        const cli_file outputs[] = {{"--out", o->out}, {"--log", o->log}, {"--plot", o->plot}, {"--cache", cache}};
        return cli_check_files(CMD, inputs, 4, outputs, 4);
    }
    if (!o->truth || !o->observed) return cli_usage_error(CMD, "gen needs --truth and --observed besides --out");
    if (o->rank > (o->m < o->n ? o->m : o->n))
        return cli_usage_error(CMD, "--rank %lld exceeds min(m, n) = %lld", (long long)o->rank,
                               (long long)(o->m < o->n ? o->m : o->n));
    const cli_file inputs[] = {{"--graph", o->graph}};
    const cli_file outputs[] = {{"--out", o->out}, {"--truth", o->truth}, {"--observed", o->observed}, {"--cache", cache}};
    return cli_check_files(CMD, inputs, 1, outputs, 4);
}

/* ------------------------------------------------------------------------ */
/* Graph, basis and its cache                                                */
/* ------------------------------------------------------------------------ */
static lac_dtype precision_of(const impute_options *o)
{
    return dtype_of[o->precision];
}

static int load_graph(lac_ctx_t ctx, const impute_options *o, lac_graph_t *graph)
{
    lac_graph_params gp = lac_graph_params_default();
    gp.num_vertices = o->vertices;
    gp.format = (lac_graph_format)o->graph_format;
    lac_status st = lac_graph_load(ctx, o->graph, &gp, graph);
    if (st < 0) return cli_status_error(CMD, ctx, st);
    lac_graph_info info = lac_graph_get_info(*graph);
    if (!o->quiet) {
        fprintf(stderr, "lacuna impute: graph %s: %lld vertices, %lld edges, %lld component%s\n", o->graph,
                (long long)info.num_vertices, (long long)info.num_edges, (long long)info.components,
                info.components == 1 ? "" : "s");
        if (info.directed)
            fprintf(stderr, "lacuna impute: warning: the graph is directed; it was symmetrised (each pair keeps its "
                            "largest weight)\n");
        if (info.self_loops) fprintf(stderr, "lacuna impute: note: %lld self-loops ignored\n", (long long)info.self_loops);
        if (info.isolated_vertices)
            fprintf(stderr, "lacuna impute: note: %lld isolated vertices (D^-1/2 = 0 there)\n",
                    (long long)info.isolated_vertices);
        if (info.remapped)
            fprintf(stderr, "lacuna impute: note: ids remapped to 0..%lld in ascending order (slice k = k-th smallest id)\n",
                    (long long)info.num_vertices - 1);
    }
    return CLI_OK;
}

/* mkdir -p for the cache folder; failures surface when the cache is written. */
static void make_dirs(char *path)
{
    for (char *p = path + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            mkdir(path, 0755);
            *p = '/';
        }
    mkdir(path, 0755);
}

static void default_cache_path(lac_graph_t graph, lac_dtype precision, char *buf, size_t len)
{
    const char *dir = getenv("LACUNA_CACHE_DIR");
    char folder[4096];
    if (dir && *dir) snprintf(folder, sizeof folder, "%s", dir);
    else if (getenv("XDG_CACHE_HOME") && *getenv("XDG_CACHE_HOME"))
        snprintf(folder, sizeof folder, "%s/lacuna", getenv("XDG_CACHE_HOME"));
    else if (getenv("HOME") && *getenv("HOME")) snprintf(folder, sizeof folder, "%s/.cache/lacuna", getenv("HOME"));
    else {
        buf[0] = '\0';
        return;
    }
    make_dirs(folder);
    lac_graph_info info = lac_graph_get_info(graph);
    snprintf(buf, len, "%s/gft-%016" PRIx64 "-%lld-%s.bin", folder, info.fingerprint, (long long)info.num_vertices,
             precision == LAC_FLOAT32 ? "f32" : "f64");
}

static int make_basis(lac_ctx_t ctx, const impute_options *o, lac_graph_t graph, lac_gft_t *gft, int *cached)
{
    char path[4200];
    const char *cache = NULL;
    if (!o->no_cache) {
        if (o->cache) cache = o->cache;
        else {
            default_cache_path(graph, precision_of(o), path, sizeof path);
            if (path[0]) cache = path;
        }
    }
    if (!o->quiet && cli_progress_enabled()) cli_progress("eigendecomposition of the %lld x %lld Laplacian...",
                                                          (long long)lac_graph_num_vertices(graph),
                                                          (long long)lac_graph_num_vertices(graph));
    lac_status st = lac_gft_load_or_create(ctx, graph, precision_of(o), cache, gft, cached);
    cli_progress_done();
    if (st < 0) return cli_status_error(CMD, ctx, st);
    if (!o->quiet && lac_ctx_rank(ctx) == 0)   /* over MPI: rank 0 made it, the others were sent it */
        fprintf(stderr, "lacuna impute: graph Fourier basis %s (%.2f s)%s%s\n", *cached ? "from the cache" : "computed",
                lac_gft_seconds(*gft), cache ? ", cache " : "", cache ? cache : "");
    return CLI_OK;
}

/* ------------------------------------------------------------------------ */
/* run                                                                       */
/* ------------------------------------------------------------------------ */
typedef struct {
    double *rows;   /* 8 columns a row */
    int64_t count, cap;
    bool progress;
} iteration_log;

static int on_iteration(const lac_impute_iteration *it, void *user)
{
    iteration_log *log = user;
    if (log->progress)
        cli_progress("%siteration %lld (lambda step %lld): lambda %.4g, change %.3g, rank %.1f, %.1f s",
                     it->selecting ? "hold-out path: " : "", (long long)it->iteration, (long long)it->step, it->lambda_max,
                     it->change, it->mean_rank, it->seconds);
    if (it->selecting) return 0;   /* the log and the plot follow the fit itself */
    if (log->count == log->cap) {
        int64_t cap = log->cap ? 2 * log->cap : 64;
        double *grown = realloc(log->rows, (size_t)cap * 8 * sizeof *grown);
        if (!grown) return 0;   /* the log loses rows; the run goes on */
        log->rows = grown;
        log->cap = cap;
    }
    double *r = log->rows + log->count++ * 8;
    r[0] = (double)it->iteration;
    r[1] = (double)it->step;
    r[2] = it->lambda_max;
    r[3] = it->change;
    r[4] = it->mean_rank;
    r[5] = it->seconds;
    r[6] = it->rmse_all;
    r[7] = it->rmse_missing;
    return 0;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* The hold-out curve as a short table on stderr. */
static void print_selection(const lac_impute_params *p, const lac_impute_selection *sel)
{
    fprintf(stderr, "lacuna impute: lambda chosen by hold-out validation (%lld %s held out, %.3g of the observed ones):\n",
            (long long)sel->held_out, sel->entries ? "entries" : "vertices", p->select_fraction);
    fprintf(stderr, "  step  lambda scale  hold-out rMSE\n");
    for (int64_t k = 0; k < sel->steps; k++)
        fprintf(stderr, "  %4lld  %12.4g  %13.6g%s\n", (long long)(k + 1), pow(p->decay, (double)k), sel->curve[k],
                k + 1 == sel->chosen_step ? "  <- kept" : "");
    fprintf(stderr, "lacuna impute: fit to all the data down to step %lld (largest lambda %.6g)\n",
            (long long)sel->chosen_step, sel->chosen_lambda_max);
}

static int run(lac_ctx_t ctx, impute_options *o)
{
    int rc = CLI_OK;
    lac_status st;
    lac_graph_t graph = NULL;
    lac_gft_t gft = NULL;
    lac_array tensor = {0}, truth = {0}, mask = {0}, out = {0};
    bool have_truth = false, have_mask = false;
    iteration_log log = {0};
    lac_impute_selection sel = lac_impute_selection_default();

    if ((rc = load_graph(ctx, o, &graph)) != CLI_OK) goto done;
    const int64_t N = lac_graph_num_vertices(graph);
    if ((st = lac_npy_load(ctx, o->tensor, 0, &tensor)) < 0) goto fail;
    if (o->truth) {
        if ((st = lac_npy_load(ctx, o->truth, 0, &truth)) < 0) goto fail;
        have_truth = true;
    }
    if (o->observed) {
        if (ends_with(o->observed, ".npy")) {
            if ((st = lac_npy_load(ctx, o->observed, 0, &mask)) < 0) goto fail;
        } else {
            int64_t shape[1] = {N};
            if ((st = lac_array_alloc(ctx, LAC_BOOL, 1, shape, &mask)) < 0) goto fail;
            if ((st = lac_graph_load_vertex_set(ctx, graph, o->observed, &mask)) < 0) goto fail;
        }
        have_mask = true;
    }
    /* Reject bad input before the eigendecomposition. */
    if ((st = lac_impute_check(ctx, N, &tensor, have_mask ? &mask : NULL, have_truth ? &truth : NULL)) < 0) goto fail;

    int cached = 0;
    if ((rc = make_basis(ctx, o, graph, &gft, &cached)) != CLI_OK) goto done;
    if ((st = lac_array_alloc(ctx, tensor.dtype, 3, tensor.shape, &out)) < 0) goto fail;

    if (o->params.select_fraction > 0) {
        sel.curve = malloc((size_t)o->params.steps * sizeof *sel.curve);
        if (!sel.curve) {
            rc = cli_status_error(CMD, ctx, LAC_ERR_OUT_OF_MEMORY);
            goto done;
        }
        sel.curve_capacity = o->params.steps;
        o->params.selection = &sel;
    }
    log.progress = !o->quiet && cli_progress_enabled();
    o->params.progress = on_iteration;
    o->params.progress_user = &log;
    lac_impute_result res;
    st = lac_impute(ctx, &o->params, gft, &tensor, have_mask ? &mask : NULL, have_truth ? &truth : NULL, &out, &res);
    cli_progress_done();
    if (st < 0) goto fail;

    /* Staged, and renamed over the targets together once both are written. */
    if ((st = lac_npy_save(ctx, o->out, &out)) < 0) goto fail;
    if (o->log) {
        lac_array rows = lac_array_matrix(log.rows, LAC_FLOAT64, log.count, 8);
        if ((st = lac_text_save(ctx, o->log, &rows)) < 0) goto fail;
    }
    if (o->plot && (rc = cli_plot_impute_run(CMD, ctx, o->plot, log.rows, log.count)) != CLI_OK) goto done;
    if ((rc = cli_commit_outputs(CMD, ctx)) != CLI_OK) goto done;
    if (!o->quiet) {
        fprintf(stderr, "lacuna impute: %lld iterations over %lld lambda values in %.2f s (GFT %.2f, SVT %.2f, iGFT %.2f); "
                        "%lld observed, %lld partial, %lld missing vertices\n",
                (long long)res.iterations, (long long)res.steps, res.seconds, res.seconds_gft, res.seconds_svt,
                res.seconds_igft, (long long)res.observed_vertices, (long long)res.partial_vertices,
                (long long)res.missing_vertices);
        if (have_truth)
            fprintf(stderr, "lacuna impute: rMSE %.6g over all slices, %.6g over the missing entries\n", res.rmse_all,
                    res.rmse_missing);
        if (sel.curve) print_selection(&o->params, &sel);
    }
    if (o->json) {
        cli_json j;
        cli_json_begin(&j, stdout);
        cli_json_int(&j, "iterations", res.iterations);
        cli_json_int(&j, "steps", res.steps);
        cli_json_real(&j, "seconds", res.seconds, "%.9g");
        if (have_truth) {
            cli_json_real(&j, "rmse_all", res.rmse_all, "%.9g");
            cli_json_real(&j, "rmse_missing", res.rmse_missing, "%.9g");
        }
        cli_json_real(&j, "seconds_eigen", lac_gft_seconds(gft), "%.9g");
        cli_json_real(&j, "seconds_gft", res.seconds_gft, "%.9g");
        cli_json_real(&j, "seconds_svt", res.seconds_svt, "%.9g");
        cli_json_real(&j, "seconds_igft", res.seconds_igft, "%.9g");
        cli_json_bool(&j, "basis_cached", cached);
        cli_json_bool(&j, "converged", res.converged);
        cli_json_int(&j, "observed_vertices", res.observed_vertices);
        cli_json_int(&j, "partial_vertices", res.partial_vertices);
        cli_json_int(&j, "missing_vertices", res.missing_vertices);
        cli_json_string(&j, "precision", precisions[o->precision]);
        cli_json_string(&j, "device", cli_backend_name(ctx));
        cli_json_string(&j, "gemm", gemm_modes[o->params.gemm_tf32]);
        if (sel.curve) {
            cli_json_object(&j, "lambda_selection");
            cli_json_string(&j, "method", "holdout");
            cli_json_real(&j, "fraction", o->params.select_fraction, "%.9g");
            cli_json_int(&j, "seed", (long long)o->params.select_seed);
            cli_json_string(&j, "held_out_unit", sel.entries ? "entries" : "vertices");
            cli_json_int(&j, "held_out", sel.held_out);
            cli_json_int(&j, "chosen_step", sel.chosen_step);
            cli_json_real(&j, "chosen_scale", sel.chosen_scale, "%.9g");
            cli_json_real(&j, "chosen_lambda_max", sel.chosen_lambda_max, "%.9g");
            cli_json_real(&j, "holdout_rmse", sel.chosen_error, "%.9g");
            cli_json_array(&j, "curve");
            for (int64_t k = 0; k < sel.steps; k++) {
                cli_json_object(&j, NULL);
                cli_json_int(&j, "step", k + 1);
                cli_json_real(&j, "lambda_scale", pow(o->params.decay, (double)k), "%.9g");
                cli_json_real(&j, "holdout_rmse", sel.curve[k], "%.9g");
                cli_json_close(&j);
            }
            cli_json_close(&j);
            cli_json_close(&j);
        }
        cli_json_end(&j);
    }
    goto done;
fail:
    rc = cli_status_error(CMD, ctx, st);
done:
    free(log.rows);
    free(sel.curve);
    lac_array_release(&out);
    lac_array_release(&mask);
    lac_array_release(&truth);
    lac_array_release(&tensor);
    lac_gft_destroy(&gft);
    lac_graph_destroy(&graph);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* gen                                                                       */
/* ------------------------------------------------------------------------ */
static int gen(lac_ctx_t ctx, impute_options *o)
{
    int rc = CLI_OK;
    lac_status st;
    lac_graph_t graph = NULL;
    lac_gft_t gft = NULL;
    lac_array truth = {0}, observed = {0}, ids = {0};

    if ((rc = load_graph(ctx, o, &graph)) != CLI_OK) goto done;
    int cached = 0;
    if ((rc = make_basis(ctx, o, graph, &gft, &cached)) != CLI_OK) goto done;
    const int64_t N = lac_graph_num_vertices(graph);
    lac_dtype dtype = o->dtype < 0 ? precision_of(o) : dtype_of[o->dtype];
    int64_t shape[3] = {N, o->m, o->n};
    if ((st = lac_array_alloc(ctx, dtype, 3, shape, &truth)) < 0) goto fail;
    if ((st = lac_array_alloc(ctx, LAC_BOOL, 1, shape, &observed)) < 0) goto fail;
    lac_impute_gen_params gp = lac_impute_gen_params_default();
    gp.m = o->m, gp.n = o->n, gp.rank = o->rank, gp.observed_ratio = o->ratio, gp.seed = (uint64_t)o->seed;
    if ((st = lac_impute_generate(ctx, &gp, gft, &truth, &observed)) < 0) goto fail;

    /* Z first, then X = Z with NaN in the unobserved slices, in place; the
     * three files are staged and renamed over their targets together. */
    if ((st = lac_npy_save(ctx, o->truth, &truth)) < 0) goto fail;
    const unsigned char *obs = observed.data;
    const int64_t mn = o->m * o->n;
    int64_t count = 0;
    for (int64_t v = 0; v < N; v++) {
        if (obs[v]) {
            count++;
            continue;
        }
        for (int64_t e = 0; e < mn; e++) {
            if (dtype == LAC_FLOAT32) ((float *)truth.data)[v * mn + e] = NAN;
            else ((double *)truth.data)[v * mn + e] = NAN;
        }
    }
    if ((st = lac_npy_save(ctx, o->out, &truth)) < 0) goto fail;
    int64_t id_shape[1] = {count};
    if ((st = lac_array_alloc(ctx, LAC_INT64, 1, id_shape, &ids)) < 0) goto fail;
    for (int64_t v = 0, i = 0; v < N; v++)
        if (obs[v] && (st = lac_graph_id_of_vertex(ctx, graph, v, (int64_t *)ids.data + i++)) < 0) goto fail;
    if ((st = lac_text_save(ctx, o->observed, &ids)) < 0) goto fail;
    if ((rc = cli_commit_outputs(CMD, ctx)) != CLI_OK) goto done;
    if (!o->quiet)
        fprintf(stderr, "lacuna impute: %lld x %lld x %lld graph-tensor of rank %lld, %lld of %lld vertices observed\n",
                (long long)N, (long long)o->m, (long long)o->n, (long long)o->rank, (long long)count, (long long)N);
    goto done;
fail:
    rc = cli_status_error(CMD, ctx, st);
done:
    lac_array_release(&ids);
    lac_array_release(&observed);
    lac_array_release(&truth);
    lac_gft_destroy(&gft);
    lac_graph_destroy(&graph);
    return rc;
}

int cmd_impute(int argc, char **argv)
{
    impute_options o;
    int rc = parse_args(argc, argv, &o);
    if (rc != CLI_OK) return rc == CLI_HELP ? CLI_OK : rc;
    cli_progress_enable(!o.quiet);
    lac_ctx_t ctx = NULL;
    rc = cli_make_context(CMD, o.device, o.threads, &ctx);
    if (rc != CLI_OK) return rc;
    rc = strcmp(o.verb, "run") == 0 ? run(ctx, &o) : gen(ctx, &o);
    lac_ctx_destroy(&ctx);
    return rc;
}
