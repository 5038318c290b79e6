/* --plot pictures (see plot.h). */
#include "plot.h"

#include "cli.h"
#include "svg_plot.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

bool cli_curve_add(cli_curve *c, const double *row)
{
    if (c->count == c->cap) {
        int64_t cap = c->cap ? 2 * c->cap : 64;
        double *grown = realloc(c->rows, (size_t)cap * (size_t)c->width * sizeof *grown);
        if (!grown) return false;
        c->rows = grown;
        c->cap = cap;
    }
    memcpy(c->rows + c->count++ * c->width, row, (size_t)c->width * sizeof *row);
    return true;
}

void cli_curve_free(cli_curve *c)
{
    free(c->rows);
    c->rows = NULL;
    c->count = c->cap = 0;
}

/* A quantity: up to three curves (columns of the rows) on one value axis. */
typedef struct {
    const char *label;
    const char *names[3];
    int columns[3];
    int count;
} quantity;

typedef struct {
    const char *title;
    int width;                       /* numbers per row */
    int x_iteration, x_seconds;      /* the columns of the two x axes */
    const char *iteration_label;
    const quantity *quantities;
    int num_quantities;
} picture;

static bool column_has_data(const double *rows, int64_t count, int width, int column)
{
    for (int64_t i = 0; i < count; i++)
        if (isfinite(rows[i * width + column])) return true;
    return false;
}

#define PANEL_WIDTH 480.0
#define PANEL_HEIGHT 330.0

static int save_picture(const char *cmd, lac_ctx_t ctx, const char *path, const picture *p, const double *rows,
                        int64_t count)
{
    /* Quantities with no finite value (rMSE without --truth) are left out;
     * the first is always drawn, if only to say "no data". */
    const quantity *shown[8];
    int num_shown = 0;
    for (int q = 0; q < p->num_quantities && num_shown < 8; q++) {
        bool any = q == 0;
        for (int s = 0; s < p->quantities[q].count; s++)
            any = any || column_has_data(rows, count, p->width, p->quantities[q].columns[s]);
        if (any) shown[num_shown++] = &p->quantities[q];
    }
    svg_buf b = {0};
    svg_begin(&b, 2 * PANEL_WIDTH, num_shown * PANEL_HEIGHT, p->title);
    for (int q = 0; q < num_shown; q++) {
        const quantity *qt = shown[q];
        for (int axis = 0; axis < 2; axis++) {
            svg_series series[3];
            for (int s = 0; s < qt->count; s++)
                series[s] = (svg_series){qt->names[s], rows ? rows + (axis ? p->x_seconds : p->x_iteration) : NULL,
                                         rows ? rows + qt->columns[s] : NULL, count, p->width};
            char title[160];
            snprintf(title, sizeof title, "%s by %s", qt->label, axis ? "time" : p->iteration_label);
            svg_line_chart_spec spec = {title, axis ? "seconds" : p->iteration_label, qt->label, series, qt->count};
            svg_line_chart(&b, axis * PANEL_WIDTH, q * PANEL_HEIGHT, PANEL_WIDTH, PANEL_HEIGHT, &spec);
        }
    }
    svg_end(&b);
    int rc = CLI_OK;
    if (b.failed) {
        fprintf(stderr, "lacuna %s: out of memory drawing %s\n", cmd, path);
        rc = CLI_RUNTIME;
    } else {
        lac_status st = lac_bytes_save(ctx, path, b.data, b.len);
        if (st < 0) rc = cli_status_error(cmd, ctx, st);
    }
    svg_buf_free(&b);
    return rc;
}

int cli_plot_mf_train(const char *cmd, lac_ctx_t ctx, const char *path, const double *rows, int64_t count)
{
    static const quantity rmse = {"RMSE", {"train", "validation"}, {1, 2}, 2};
    const picture p = {"lacuna mf train: RMSE by epoch and by time", CLI_MF_CURVE_WIDTH, 0, 3, "epoch", &rmse, 1};
    return save_picture(cmd, ctx, path, &p, rows, count);
}

int cli_plot_impute_run(const char *cmd, lac_ctx_t ctx, const char *path, const double *rows, int64_t count)
{
    static const quantity quantities[] = {
        {"relative change", {"change"}, {3}, 1},
        {"rMSE", {"all slices", "missing entries"}, {6, 7}, 2},
    };
    const picture p = {"lacuna impute run: convergence by iteration and by time", CLI_IMPUTE_CURVE_WIDTH, 0, 5,
                       "iteration", quantities, 2};
    return save_picture(cmd, ctx, path, &p, rows, count);
}
