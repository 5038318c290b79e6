/* Shared helpers of the lacuna command-line tool: errors and exit codes,
 * contexts from --device/--threads, terminal progress, timing. Options are
 * parsed by options.h. */
#ifndef LACUNA_TOOL_CLI_H
#define LACUNA_TOOL_CLI_H

#include "lacuna/lacuna.h"
#include "options.h"

#include <stdbool.h>
#include <stdio.h>

/* Exit codes: 0 success, 1 runtime failure, 2 usage or input error. */
enum { CLI_OK = 0, CLI_RUNTIME = 1, CLI_USAGE = 2 };

/* Prints "lacuna <cmd>: message" to stderr; returns CLI_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prints the status and the context's last error; returns the exit code that
 * fits the status (2 for caller errors, 1 for runtime failures). */
int cli_status_error(const char *cmd, lac_ctx_t ctx, lac_status st);

/* Makes a context from --device (auto|cpu|cuda|cuda:N) and --threads, with
 * an output set open on it (lac_outputs_begin): every file the command
 * writes is staged until cli_commit_outputs, and dropped with the context
 * when the command fails, so that a failure anywhere leaves every file that
 * existed before exactly as it was. */
int cli_make_context(const char *cmd, const char *device, int threads, lac_ctx_t *ctx);
/* Renames the staged outputs over their targets, together; on failure
 * (exit 1, message printed) none is. Call it when everything else
 * succeeded, before saying so. */
int cli_commit_outputs(const char *cmd, lac_ctx_t ctx);

/* The files a run names, checked before anything is read (files.c): an
 * input that is a directory, and an output that is the same file as one of
 * the inputs or as another output (compared by device and inode, so through
 * symbolic and hard links; an output not there yet by its folder and name,
 * after the links of a dangling symbolic link) are usage errors (exit 2)
 * naming both. Entries whose path is NULL or "-" are left out. */
typedef struct {
    const char *role;   /* as the user wrote it: "--source", "TRAIN" */
    const char *path;
} cli_file;
#define CLI_MAX_FILES (2 * CLI_MAX_REPEATS + 4)
int cli_check_files(const char *cmd, const cli_file *inputs, int num_inputs, const cli_file *outputs,
                    int num_outputs);
/* "cpu" or "cuda" for JSON output. */
const char *cli_backend_name(lac_ctx_t ctx);

/* The ratings formats' names in lac_ratings_format order, "auto" first, then
 * NULL: the choices of a CLI_ENUM option (+ 1 to leave out "auto"). */
#define CLI_RATINGS_FORMATS (LAC_RATINGS_MATRIX_MARKET + 1)
void cli_ratings_format_names(const char *names[CLI_RATINGS_FORMATS + 1]);

/* The ratings reader's options, --format and --skip-bad, for every verb that
 * reads ratings: a table of their own beside the verb's, .tables = {options,
 * in.options}; after cli_parse, cli_ratings_input_params gives the reader's
 * parameters. The table points into in, which stays where it was made. */
typedef struct {
    const char *formats[CLI_RATINGS_FORMATS + 1];
    int format;
    lac_ratings_read_params params;
    cli_opt options[3];
} cli_ratings_input;
void cli_ratings_input_init(cli_ratings_input *in, const char *format_help);
lac_ratings_read_params cli_ratings_input_params(const cli_ratings_input *in);

/* LIBMF's spellings (libmf.c). mf train: a table of their own beside the
 * verb's (.tables = {..., t.options}) writing into p and *threads; after
 * cli_parse, cli_libmf_train_apply refuses what lacuna does not do (-l1 but
 * 0, -f but 0, --nmf, -v FOLDS), sets lambda from -l2 and *valid_path from
 * -p or -v. mf predict: -e 0|1 (LIBMF's criterion), and LIBMF's argument
 * order TEST MODEL OUT told apart by which file is a model. */
typedef struct {
    lac_mf_params *params;
    const char *l1, *l2, *p, *v;
    int loss, bins, disk, nmf;
    cli_opt options[13];
} cli_libmf_train;
void cli_libmf_train_init(cli_libmf_train *t, lac_mf_params *p, int *threads);
int cli_libmf_train_apply(cli_libmf_train *t, const char *cmd, const char **valid_path);
int cli_libmf_predict_order(const char *cmd, int criterion, const char **model, const char **test);

/* Progress lines on stderr, only when it is a terminal and not --quiet:
 * cli_progress overwrites the line, cli_progress_done ends it. */
void cli_progress_enable(bool enabled);
/* --progress: on even when stderr is not a terminal, then a line each. */
void cli_progress_force(void);
bool cli_progress_enabled(void);
void cli_progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void cli_progress_done(void);

/* Wall-clock seconds from a monotonic clock. */
double cli_now(void);
/* Median of n values (sorts them in place). */
double cli_median(double *values, int n);

/* Subcommands (one file each). */
int cmd_info(int argc, char **argv);
int cmd_map(int argc, char **argv);
int cmd_impute(int argc, char **argv);
int cmd_mf(int argc, char **argv);
int cmd_report(int argc, char **argv);

#endif
