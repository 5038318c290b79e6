/* --plot: a run's convergence curves as an SVG picture (svg_plot.h), drawn
 * from the rows its --log holds, each quantity against the iteration and
 * against time. The file joins the command's output set (lac_bytes_save). */
#ifndef LACUNA_TOOL_PLOT_H
#define LACUNA_TOOL_PLOT_H

#include "lacuna/lacuna.h"

#include <stdbool.h>
#include <stdint.h>

/* Rows of `width` numbers recorded as a run reports them. */
typedef struct {
    double *rows;
    int64_t count, cap;
    int width;
} cli_curve;
/* Appends a row; false when memory runs out (the row is lost, the run goes on). */
bool cli_curve_add(cli_curve *c, const double *row);
void cli_curve_free(cli_curve *c);

/* mf train's rows: epoch, train RMSE, validation RMSE (NaN without one), seconds. */
enum { CLI_MF_CURVE_WIDTH = 4 };
/* impute run's rows, as --log writes them: iteration step lambda_max change
 * mean_rank seconds rmse_all rmse_missing. */
enum { CLI_IMPUTE_CURVE_WIDTH = 8 };

/* Write the picture to path. Returns CLI_OK, or the exit code after the
 * message ("lacuna <cmd>: ..."). */
int cli_plot_mf_train(const char *cmd, lac_ctx_t ctx, const char *path, const double *rows, int64_t count);
int cli_plot_impute_run(const char *cmd, lac_ctx_t ctx, const char *path, const double *rows, int64_t count);

#endif
