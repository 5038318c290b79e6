/* Shared helpers of the lacuna tool (see cli.h). */
#include "cli.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "lacuna %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    return CLI_USAGE;
}

int cli_status_error(const char *cmd, lac_ctx_t ctx, lac_status st)
{
    const char *detail = lac_last_error(ctx);
    cli_progress_done();
    fprintf(stderr, "lacuna %s: %s%s%s\n", cmd, lac_status_string(st), detail && *detail ? ": " : "",
            detail ? detail : "");
    return st <= -100 ? CLI_RUNTIME : CLI_USAGE;
}

int cli_make_context(const char *cmd, const char *device, int threads, lac_ctx_t *ctx)
{
    lac_ctx_params p = lac_ctx_params_default();
    p.threads = threads;
    if (!device || strcmp(device, "auto") == 0) {
        p.backend = LAC_BACKEND_AUTO;
    } else if (strcmp(device, "cpu") == 0) {
        p.backend = LAC_BACKEND_CPU;
    } else if (strncmp(device, "cuda", 4) == 0 && (device[4] == '\0' || device[4] == ':')) {
        p.backend = LAC_BACKEND_CUDA;
        if (device[4] == ':') {
            /* cuda:N or cuda:N,M,...: several devices (one may repeat) */
            const char *at = device + 5;
            for (;;) {
                char *end;
                long id = strtol(at, &end, 10);
                if (end == at || id < 0 || id > 4096 || (*end && *end != ',') || p.num_devices == LAC_MAX_DEVICES)
                    return cli_usage_error(cmd, "bad --device '%s' (cpu, cuda, cuda:N, cuda:N,M,... up to %d)", device,
                                           LAC_MAX_DEVICES);
                p.device_ids[p.num_devices++] = (int)id;
                if (!*end) break;
                at = end + 1;
            }
        }
    } else {
        return cli_usage_error(cmd, "bad --device '%s' (auto, cpu, cuda, cuda:N, cuda:N,M,...)", device);
    }
    lac_status st = lac_ctx_create(&p, ctx);
    if (st < 0) return cli_status_error(cmd, NULL, st);
    if (lac_ctx_rank(*ctx) > 0) {
        /* Over MPI rank 0 speaks for the job: the others print nothing (their
         * files are dropped at commit, lac_outputs_commit); errors still go
         * to stderr. */
        if (!freopen("/dev/null", "w", stdout)) return cli_usage_error(cmd, "cannot silence rank %d", lac_ctx_rank(*ctx));
        cli_progress_enable(false);
    }
    if ((st = lac_outputs_begin(*ctx)) < 0) {
        int rc = cli_status_error(cmd, *ctx, st);
        lac_ctx_destroy(ctx);
        return rc;
    }
    return CLI_OK;
}

int cli_commit_outputs(const char *cmd, lac_ctx_t ctx)
{
    lac_status st = lac_outputs_commit(ctx);
    return st < 0 ? cli_status_error(cmd, ctx, st) : CLI_OK;
}

const char *cli_backend_name(lac_ctx_t ctx)
{
    return lac_ctx_backend(ctx) == LAC_BACKEND_CUDA ? "cuda" : "cpu";
}

void cli_ratings_format_names(const char *names[CLI_RATINGS_FORMATS + 1])
{
    for (int i = 0; i < CLI_RATINGS_FORMATS; i++) names[i] = lac_ratings_format_name((lac_ratings_format)i);
    names[CLI_RATINGS_FORMATS] = NULL;
}

void cli_ratings_input_init(cli_ratings_input *in, const char *format_help)
{
    cli_ratings_format_names(in->formats);
    in->params = lac_ratings_read_params_default();
    in->format = in->params.format;
    cli_opt options[] = {
        {"--format", NULL, CLI_ENUM, &in->format, NULL, .help = format_help, .choices = in->formats,
         .show_default = 1},
        {"--skip-bad", NULL, CLI_FLAG, &in->params.skip_bad, NULL,
         .help = "skip malformed lines (counted) instead of failing"},
        {0},
    };
    memcpy(in->options, options, sizeof options);
}

lac_ratings_read_params cli_ratings_input_params(const cli_ratings_input *in)
{
    lac_ratings_read_params p = in->params;
    p.format = (lac_ratings_format)in->format;
    return p;
}

static bool progress_on;
static bool progress_open;
static bool progress_lines;   /* forced on without a terminal: a line each, no overwriting */

void cli_progress_enable(bool enabled) { progress_on = enabled && isatty(STDERR_FILENO); }
void cli_progress_force(void)
{
    progress_lines = !isatty(STDERR_FILENO);
    progress_on = true;
}
bool cli_progress_enabled(void) { return progress_on; }

void cli_progress(const char *fmt, ...)
{
    if (!progress_on) return;
    va_list ap;
    if (!progress_lines) fputs("\r\033[K", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    if (progress_lines) fputc('\n', stderr);
    fflush(stderr);
    progress_open = !progress_lines;
}

void cli_progress_done(void)
{
    if (progress_open) fputc('\n', stderr);
    progress_open = false;
}

double cli_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double cli_median(double *values, int n)
{
    if (n <= 0) return NAN;
    qsort(values, (size_t)n, sizeof *values, cmp_double);
    return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}
