/* lacuna map: T[R[i]] op= w[i] * S[i] from files, one-shot or with a plan that
 * serves several sources against one bridge; times the mapping alone
 * (--repeat, --json). Inputs are memory-mapped .npy files or text columns. */
#include "cli.h"
#include "json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define CMD "map"
#define MAX_SOURCES CLI_MAX_REPEATS
/* Without --out, T is printed whole up to this many rows, else summarised. */
#define PRINT_ALL_ROWS 50
#define TEXT_OF(x) #x
#define TEXT(x) TEXT_OF(x)

typedef struct {
    cli_strings sources, outs;
    const char *bridge, *weights, *device;
    int64_t targets;   /* -1: from the data */
    lac_map_params params;
    int plan, plan_fast, json, quiet, threads;
    int64_t repeat;
} map_options;

/* ------------------------------------------------------------------------ */
/* Arguments                                                                 */
/* ------------------------------------------------------------------------ */
static const char *const nan_policies[] = {"propagate", "skip", "error", NULL};   /* LAC_NAN_* order */

static int parse_args(int argc, char **argv, map_options *o)
{
    memset(o, 0, sizeof *o);
    o->params = lac_map_params_default();
    o->targets = -1;
    o->repeat = 1;
    o->device = "auto";
    const char *ops[LAC_MAP_COUNT + 2] = {NULL};
    for (int i = 0; i <= LAC_MAP_COUNT; i++) ops[i] = lac_map_op_name((lac_map_op)i);
    int op = o->params.op, nan = o->params.nan_policy;
    cli_opt options[] = {
        {"--source", NULL, CLI_STRINGS, &o->sources, "FILE",
         .help = "S: float32/float64 .npy, or text columns (.txt/.csv/.tsv, read as float64); repeat it with --plan"},
        {"--bridge", NULL, CLI_STRING, &o->bridge, "FILE",
         .help = "R: int32/int64 .npy, or one text column of integers"},
        {"--weights", NULL, CLI_STRING, &o->weights, "FILE", .help = "w: one weight per source row, S's dtype"},
        {"--targets", NULL, CLI_INT64, &o->targets, "N",
         .help = "n, the number of targets (default: max(R) + 1, or the rows of the --out file with --accumulate)",
         CLI_AT_LEAST(0)},
        {"--op", NULL, CLI_ENUM, &op, NULL,
         .help = "mean = sum(w S)/sum(w), count = sum(w) (the number of rows without weights)", .choices = ops,
         .show_default = 1},
        {"--out", NULL, CLI_STRINGS, &o->outs, "FILE",
         .help = "write T (.npy, or text by extension); without it T is printed (whole up to " TEXT(PRINT_ALL_ROWS)
         " rows, else a summary). With --plan give one --out per --source, in the same order"},
        {"--accumulate", NULL, CLI_FLAG, &o->params.accumulate, NULL,
         .help = "fold into the T already in the --out file (sum/count add, min/max compare; not with mean)"},
        {"--empty", NULL, CLI_NUMBER, &o->params.empty_value, "VALUE",
         .help = "value of targets nothing maps to, nan and inf included (default 0)"},
        {"--nan", NULL, CLI_ENUM, &nan, NULL, .help = "what NaN in S or w does", .choices = nan_policies,
         .show_default = 1},
        {"--deterministic", NULL, CLI_FLAG, &o->params.deterministic, NULL,
         .help = "bit-identical T across runs and thread counts (each target's rows added in row order in float64; "
         "on the CPU about the cost of one serial pass)"},
        {"--plan", NULL, CLI_FLAG, &o->plan, NULL,
         .help = "check the bridge once, then map every --source with it (deterministic); the build is timed apart"},
        {"--plan-fast", NULL, CLI_FLAG, &o->plan_fast, NULL,
         .help = "--plan without its determinism (unless --deterministic): each source takes the fastest path over the "
         "checked bridge, never slower than one-shot calls; the last bits may differ from run to run"},
        {"--device", NULL, CLI_STRING, &o->device, "D", .help = "auto|cpu|cuda|cuda:N", .show_default = 1},
        {"--threads", NULL, CLI_INT, &o->threads, "N", .help = "CPU threads (default: all)", CLI_IN(0, 4096)},
        {"--repeat", NULL, CLI_INT64, &o->repeat, "N", .help = "run the mapping N times; report the median",
         CLI_IN(1, 1000000), .show_default = 1},
        {"--json", NULL, CLI_FLAG, &o->json, NULL,
         .help = "one line of JSON on stdout: {\"m\", \"n\", \"op\", \"device\", \"median_ms\"} (the mapping alone, no "
         "file I/O); with --plan one line per source, adding \"source\" and \"plan_build_ms\""},
        {"--quiet", NULL, CLI_FLAG, &o->quiet, NULL, .help = "no notes on stderr"},
        {0},
    };
    const cli_command cmd = {
        .name = CMD,
        .usage = "map --source S --bridge R [options]\n"
                 "map --plan --bridge R --source S1 --source S2 ... [--out T1 --out T2 ...]",
        .about = "Maps values from a source to a target through a bridge: for each row i,\n"
                 "T[R[i]] op= w[i] * S[i]. S is a vector (m) or a matrix (m x b, b columns\n"
                 "sharing the bridge); R holds m target indices in [0, n).\n",
        .tables = {options},
        .footer = "Exit status: 0 success, 1 runtime failure, 2 usage or input error (then no\n"
                  "output file is written). See docs/map.md.\n",
    };
    int rc = cli_parse(&cmd, argc, argv, NULL, NULL);
    if (rc != CLI_OK) return rc;
    o->params.op = (lac_map_op)op;
    o->params.nan_policy = (lac_nan_policy)nan;
    if (!o->bridge) return cli_usage_error(CMD, "--bridge is required (see lacuna map --help)");
    if (o->sources.count == 0) return cli_usage_error(CMD, "--source is required (see lacuna map --help)");
    if (o->plan_fast) o->plan = 1;
    if (!o->plan && o->sources.count > 1) return cli_usage_error(CMD, "several --source files need --plan");
    if (o->outs.count > 0 && o->outs.count != o->sources.count)
        return cli_usage_error(CMD, "%d --out for %d --source: give one per source, in order", o->outs.count,
                               o->sources.count);
    if (o->params.accumulate && o->outs.count == 0)
        return cli_usage_error(CMD, "--accumulate needs --out (the T to fold into)");
    const char *why = lac_map_params_check(&o->params);
    if (why) return cli_usage_error(CMD, "%s", why);
    /* With --accumulate each --out is read as well, but only as its own T. */
    cli_file inputs[CLI_MAX_FILES], outputs[CLI_MAX_REPEATS];
    int num_inputs = 0;
    inputs[num_inputs++] = (cli_file){"--bridge", o->bridge};
    inputs[num_inputs++] = (cli_file){"--weights", o->weights};
    for (int k = 0; k < o->sources.count; k++) inputs[num_inputs++] = (cli_file){"--source", o->sources.values[k]};
    for (int k = 0; k < o->outs.count; k++) outputs[k] = (cli_file){"--out", o->outs.values[k]};
    return cli_check_files(CMD, inputs, num_inputs, outputs, o->outs.count);
}

/* ------------------------------------------------------------------------ */
/* Files                                                                     */
/* ------------------------------------------------------------------------ */
static bool is_text_path(const char *path)
{
    const char *dot = strrchr(path, '.');
    return dot && (strcasecmp(dot, ".txt") == 0 || strcasecmp(dot, ".csv") == 0 || strcasecmp(dot, ".tsv") == 0);
}

/* An input's kind by its name, a trailing .gz left out (S.txt.gz is text). */
static bool is_text_input(const char *path)
{
    size_t n = strlen(path);
    if (n < 4 || strcasecmp(path + n - 3, ".gz") != 0) return is_text_path(path);
    char bare[4096];
    snprintf(bare, sizeof bare, "%.*s", (int)(n - 3), path);
    return is_text_path(bare);
}

/* .npy files are mapped (inputs may exceed memory); text is parsed as
 * text_dtype. gzip and '-' (standard input, .npy) are read by the library.
 * Any failure is an input error (exit 2). */
static int load_input(lac_ctx_t ctx, const char *what, const char *path, lac_dtype text_dtype, lac_array *out)
{
    lac_status st = is_text_input(path) ? lac_text_load(ctx, path, text_dtype, out)
                                       : lac_npy_load(ctx, path, LAC_NPY_MMAP, out);
    if (st < 0) {
        fprintf(stderr, "lacuna %s: cannot read %s '%s': %s: %s\n", CMD, what, path, lac_status_string(st),
                lac_last_error(ctx));
        return CLI_USAGE;
    }
    return CLI_OK;
}

static lac_status save_output(lac_ctx_t ctx, const char *path, const lac_array *T)
{
    return is_text_path(path) ? lac_text_save(ctx, path, T) : lac_npy_save(ctx, path, T);
}

/* The host's memory in bytes (0 when unknown). */
static double host_memory(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (double)pages * (double)page : 0;
}

/* max(R) + 1 (0 for an empty bridge) into *n; a negative entry is left to
 * lac_map to report with its position. Without --targets a bridge value
 * decides how large T is, so one that asks for more targets than memory
 * holds (8 bytes each at the least) is an input error, not an allocation
 * that fails. */
static int default_targets(const lac_array *R, const char *path, int64_t *n)
{
    int64_t m = R->ndim == 1 ? R->shape[0] : 0, top = -1;
    if (R->dtype == LAC_INT32)
        for (int64_t i = 0; i < m; i++) top = ((const int32_t *)R->data)[i] > top ? ((const int32_t *)R->data)[i] : top;
    else if (R->dtype == LAC_INT64)
        for (int64_t i = 0; i < m; i++) top = ((const int64_t *)R->data)[i] > top ? ((const int64_t *)R->data)[i] : top;
    double memory = host_memory();
    if (top == INT64_MAX || (memory > 0 && 8.0 * ((double)top + 1) > memory))
        return cli_usage_error(CMD,
                               "bridge '%s' holds %lld: max(R) + 1 targets would need %.3g GB, more than this machine's "
                               "%.3g GB; give --targets N (the bridge's values must lie in [0, N))",
                               path, (long long)top, 8e-9 * ((double)top + 1), 1e-9 * memory);
    *n = top + 1;
    return CLI_OK;
}

/* T for one source: the --out file's array with --accumulate, else a new one. */
static int make_target(lac_ctx_t ctx, const map_options *o, const char *out_path, const lac_array *S, int64_t n,
                       lac_array *T)
{
    if (o->params.accumulate) {
        lac_status st = is_text_path(out_path) ? lac_text_load(ctx, out_path, S->dtype, T) : lac_npy_load(ctx, out_path, 0, T);
        if (st < 0) {
            fprintf(stderr, "lacuna %s: --accumulate: cannot read '%s': %s: %s\n", CMD, out_path, lac_status_string(st),
                    lac_last_error(ctx));
            return CLI_USAGE;
        }
        /* A one-column text file reads as a vector; a b-column source needs n x b. */
        int64_t want_cols = S->ndim == 2 ? S->shape[1] : 0, cols = T->ndim == 2 ? T->shape[1] : 0;
        if (T->dtype != S->dtype || T->ndim != S->ndim || T->shape[0] != n || cols != want_cols) {
            fprintf(stderr, "lacuna %s: --accumulate: '%s' holds %s %lld x %lld, the mapping needs %s %lld x %lld\n", CMD,
                    out_path, lac_dtype_name(T->dtype), (long long)T->shape[0], (long long)(cols ? cols : 1),
                    lac_dtype_name(S->dtype), (long long)n, (long long)(want_cols ? want_cols : 1));
            lac_array_release(T);
            return CLI_USAGE;
        }
        return CLI_OK;
    }
    int64_t shape[2] = {n, S->ndim == 2 ? S->shape[1] : 1};
    lac_status st = lac_array_alloc(ctx, S->dtype, S->ndim == 2 ? 2 : 1, shape, T);
    return st < 0 ? cli_status_error(CMD, ctx, st) : CLI_OK;
}

static double element(const lac_array *T, int64_t k)
{
    return T->dtype == LAC_FLOAT32 ? (double)((const float *)T->data)[k] : ((const double *)T->data)[k];
}

static void print_row(const lac_array *T, int64_t j, int64_t b)
{
    printf("%lld", (long long)j);
    for (int64_t c = 0; c < b; c++) printf("\t%.9g", element(T, j * b + c));
    printf("\n");
}

/* T on stdout: every row when small, else the first and last rows and a
 * summary line. */
static void print_target(const lac_array *T, const char *label)
{
    int64_t n = T->shape[0], b = T->ndim == 2 ? T->shape[1] : 1;
    if (label) printf("# %s\n", label);
    printf("# target\tvalue%s\n", b > 1 ? "s" : "");
    if (n <= PRINT_ALL_ROWS) {
        for (int64_t j = 0; j < n; j++) print_row(T, j, b);
        return;
    }
    for (int64_t j = 0; j < 10; j++) print_row(T, j, b);
    printf("...\n");
    for (int64_t j = n - 3; j < n; j++) print_row(T, j, b);
    double lo = INFINITY, hi = -INFINITY, sum = 0;
    int64_t nonzero = 0, nans = 0;
    for (int64_t k = 0; k < n * b; k++) {
        double v = element(T, k);
        if (isnan(v)) {
            nans++;
            continue;
        }
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
        sum += v;
        nonzero += v != 0;
    }
    printf("# %lld x %lld values: sum %.9g, min %.9g, max %.9g, %lld nonzero, %lld NaN (use --out to keep them all)\n",
           (long long)n, (long long)b, sum, lo, hi, (long long)nonzero, (long long)nans);
}

/* ------------------------------------------------------------------------ */
/* Timed mapping, on host arrays or on device copies                         */
/* ------------------------------------------------------------------------ */
/* Device copies of host arrays (CUDA contexts); host views otherwise. */
typedef struct {
    lac_array a;
    void *device;
} staged;

static lac_status stage(lac_ctx_t ctx, const lac_array *host, bool on_device, staged *s)
{
    s->a = lac_array_view(host);
    s->device = NULL;
    if (!on_device) return LAC_SUCCESS;
    size_t bytes = (size_t)lac_array_count(host) * lac_dtype_size(host->dtype);
    lac_status st = lac_device_alloc(ctx, bytes ? bytes : 1, &s->device);
    if (st < 0) return st;
    if (bytes && (st = lac_memcpy(ctx, s->device, LAC_MEM_DEVICE, host->data, LAC_MEM_HOST, bytes)) < 0) {
        lac_device_free(ctx, s->device);
        s->device = NULL;
        return st;
    }
    s->a.data = s->device;
    s->a.memory = LAC_MEM_DEVICE;
    return LAC_SUCCESS;
}

static void unstage(lac_ctx_t ctx, staged *s)
{
    if (s->device) lac_device_free(ctx, s->device);
    s->device = NULL;
}

/* Runs the mapping o->repeat times into T (host), returns the median time in
 * ms. With --accumulate every run starts from the same T. */
static lac_status timed_map(lac_ctx_t ctx, const map_options *o, lac_map_plan_t plan, const lac_array *S,
                            const lac_array *R, const lac_array *W, lac_array *T, double *median_ms)
{
    /* Over MPI ranks each rank maps its own rows of the host arrays (a rank's
     * GPU streams them in): device copies of the whole input would not split. */
    bool on_device = lac_ctx_backend(ctx) == LAC_BACKEND_CUDA && lac_ctx_ranks(ctx) == 1;
    size_t t_bytes = (size_t)lac_array_count(T) * lac_dtype_size(T->dtype);
    staged s = {0}, r = {0}, w = {0}, t = {0};
    void *pristine = NULL;
    double *times = malloc((size_t)o->repeat * sizeof *times);
    lac_status st = times ? LAC_SUCCESS : LAC_ERR_OUT_OF_MEMORY;
    if (st == LAC_SUCCESS && o->params.accumulate && o->repeat > 1) {
        pristine = malloc(t_bytes ? t_bytes : 1);
        if (!pristine) st = LAC_ERR_OUT_OF_MEMORY;
        else memcpy(pristine, T->data, t_bytes);
    }
    if (st == LAC_SUCCESS) st = stage(ctx, S, on_device, &s);
    if (st == LAC_SUCCESS && R) st = stage(ctx, R, on_device, &r);
    if (st == LAC_SUCCESS && W) st = stage(ctx, W, on_device, &w);
    if (st == LAC_SUCCESS) st = stage(ctx, T, on_device, &t);
    for (long long rep = 0; st == LAC_SUCCESS && rep < o->repeat; rep++) {
        if (rep > 0 && pristine) {
            st = lac_memcpy(ctx, t.a.data, t.a.memory, pristine, LAC_MEM_HOST, t_bytes);
            if (st < 0) break;
        }
        double t0 = cli_now();
        st = plan ? lac_map_plan_execute(ctx, plan, &o->params, &s.a, W ? &w.a : NULL, &t.a)
                  : lac_map(ctx, &o->params, &s.a, &r.a, W ? &w.a : NULL, &t.a);
        if (st == LAC_SUCCESS) st = lac_ctx_synchronize(ctx);
        times[rep] = 1e3 * (cli_now() - t0);
        if (o->repeat > 1) cli_progress("map: run %lld of %lld, %.3f ms", rep + 1, (long long)o->repeat, times[rep]);
    }
    cli_progress_done();
    if (st == LAC_SUCCESS && on_device && t_bytes)
        st = lac_memcpy(ctx, T->data, LAC_MEM_HOST, t.a.data, LAC_MEM_DEVICE, t_bytes);
    if (st == LAC_SUCCESS) *median_ms = cli_median(times, (int)o->repeat);
    unstage(ctx, &s), unstage(ctx, &r), unstage(ctx, &w), unstage(ctx, &t);
    free(pristine);
    free(times);
    return st;
}

/* ------------------------------------------------------------------------ */
/* The command                                                               */
/* ------------------------------------------------------------------------ */
static void note_done(const map_options *o, lac_ctx_t ctx, int64_t m, int64_t n, const char *source, const char *out,
                      double ms)
{
    if (o->quiet) return;
    char ranks[32] = "";
    if (lac_ctx_ranks(ctx) > 1) snprintf(ranks, sizeof ranks, " x %d MPI ranks", lac_ctx_ranks(ctx));
    fprintf(stderr, "lacuna map: %s: %lld rows -> %lld targets, %s on %s%s, %.3f ms%s%s%s\n", source,
            (long long)m, (long long)n, lac_map_op_name(o->params.op), cli_backend_name(ctx), ranks, ms,
            o->repeat > 1 ? " (median)" : "", out ? ", wrote " : "", out ? out : "");
}

int cmd_map(int argc, char **argv)
{
    map_options o;
    int rc = parse_args(argc, argv, &o);
    if (rc != CLI_OK) return rc == CLI_HELP ? CLI_OK : rc;
    cli_progress_enable(!o.quiet && !o.json);

    lac_ctx_t ctx = NULL;
    lac_array R = {0}, W = {0}, S = {0};
    lac_array results[MAX_SOURCES];
    double times_ms[MAX_SOURCES] = {0};
    int64_t rows[MAX_SOURCES] = {0};
    memset(results, 0, sizeof results);
    lac_map_plan_t plan = NULL;
    if ((rc = cli_make_context(CMD, o.device, o.threads, &ctx)) != CLI_OK) return rc;

    if ((rc = load_input(ctx, "bridge", o.bridge, LAC_INT64, &R)) != CLI_OK) goto done;
    if (R.ndim != 1) {
        rc = cli_usage_error(CMD, "bridge '%s' must be one column (a vector), it is %d-d", o.bridge, R.ndim);
        goto done;
    }
    int64_t n = o.targets;
    if (n < 0 && o.params.accumulate) {
        /* The existing T says how many targets there are. */
        lac_array old;
        const char *path = o.outs.values[0];
        lac_status st = is_text_path(path) ? lac_text_load(ctx, path, LAC_FLOAT64, &old)
                                           : lac_npy_load(ctx, path, LAC_NPY_MMAP, &old);
        if (st < 0) {
            fprintf(stderr, "lacuna %s: --accumulate: cannot read '%s': %s: %s\n", CMD, path, lac_status_string(st),
                    lac_last_error(ctx));
            rc = CLI_USAGE;
            goto done;
        }
        n = old.ndim >= 1 ? old.shape[0] : 0;
        lac_array_release(&old);
    }
    if (n < 0 && (rc = default_targets(&R, o.bridge, &n)) != CLI_OK) goto done;

    double plan_build_ms = 0;
    if (o.plan) {
        staged r = {0};
        lac_status st = stage(ctx, &R, lac_ctx_backend(ctx) == LAC_BACKEND_CUDA, &r);
        double t0 = cli_now();
        if (st == LAC_SUCCESS) st = lac_map_plan_create(ctx, &r.a, n, &plan);
        if (st == LAC_SUCCESS && o.plan_fast) st = lac_map_plan_set_deterministic(plan, 0);
        if (st == LAC_SUCCESS) st = lac_ctx_synchronize(ctx);
        plan_build_ms = 1e3 * (cli_now() - t0);
        unstage(ctx, &r);
        if (st < 0) {
            rc = cli_status_error(CMD, ctx, st);
            goto done;
        }
    }

    /* Every output is staged (cli_make_context) and renamed over its target
     * only when all are written: a failure leaves every file as it was. */
    for (int k = 0; k < o.sources.count; k++) {
        const char *out = o.outs.count ? o.outs.values[k] : NULL;
        if ((rc = load_input(ctx, "source", o.sources.values[k], LAC_FLOAT64, &S)) != CLI_OK) goto done;
        if (o.weights && (rc = load_input(ctx, "weights", o.weights, S.dtype, &W)) != CLI_OK) goto done;
        if ((rc = make_target(ctx, &o, out, &S, n, &results[k])) != CLI_OK) goto done;
        lac_status st = timed_map(ctx, &o, plan, &S, plan ? NULL : &R, o.weights ? &W : NULL, &results[k], &times_ms[k]);
        if (st < 0) {
            rc = cli_status_error(CMD, ctx, st);
            goto done;
        }
        rows[k] = S.shape[0];
        lac_array_release(&S);
        lac_array_release(&W);
    }
    /* Over MPI every rank holds the whole T; rank 0 writes and reports. */
    const bool reporter = lac_ctx_rank(ctx) == 0;
    for (int k = 0; reporter && k < o.outs.count; k++) {
        lac_status st = save_output(ctx, o.outs.values[k], &results[k]);
        if (st < 0) {
            rc = cli_status_error(CMD, ctx, st);
            goto done;
        }
    }
    if ((rc = cli_commit_outputs(CMD, ctx)) != CLI_OK) goto done;
    for (int k = 0; reporter && k < o.sources.count; k++) {
        if (o.json) {
            cli_json j;
            cli_json_begin(&j, stdout);
            cli_json_int(&j, "m", rows[k]);
            cli_json_int(&j, "n", n);
            cli_json_string(&j, "op", lac_map_op_name(o.params.op));
            cli_json_string(&j, "device", cli_backend_name(ctx));
            cli_json_real(&j, "median_ms", times_ms[k], "%.6f");
            if (lac_ctx_ranks(ctx) > 1) cli_json_int(&j, "ranks", lac_ctx_ranks(ctx));
            if (o.plan) {
                cli_json_int(&j, "source", k);
                cli_json_real(&j, "plan_build_ms", plan_build_ms, "%.6f");
            }
            cli_json_end(&j);
        } else if (!o.outs.count) {
            print_target(&results[k], o.sources.count > 1 ? o.sources.values[k] : NULL);
        }
        note_done(&o, ctx, rows[k], n, o.sources.values[k], o.outs.count ? o.outs.values[k] : NULL, times_ms[k]);
    }
    if (o.plan && !o.quiet && reporter)
        fprintf(stderr, "lacuna map: plan for %lld rows -> %lld targets built in %.3f ms\n", (long long)R.shape[0],
                (long long)n, plan_build_ms);
    rc = CLI_OK;
done:
    lac_map_plan_destroy(&plan);
    lac_array_release(&S);
    lac_array_release(&W);
    for (int k = 0; k < o.sources.count; k++) lac_array_release(&results[k]);
    lac_array_release(&R);
    lac_ctx_destroy(&ctx);
    return rc;
}
