/* The one SVG writer of the tool: line charts (the convergence curves of
 * --plot) and bar charts (the figures of `lacuna report`), drawn into a
 * growing text buffer that the caller saves (lac_bytes_save, so the file
 * joins the command's output set) or embeds in a page. Axes carry ticks at
 * round numbers (1, 2, 5 x 10^k) and a value axis turns logarithmic when
 * its values span two decades or more. */
#ifndef LACUNA_TOOL_SVG_PLOT_H
#define LACUNA_TOOL_SVG_PLOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Text that grows as it is written; failed is set (and the text kept as it
 * was) when memory runs out. */
typedef struct {
    char *data;
    size_t len, cap;
    bool failed;
} svg_buf;
void svg_printf(svg_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* s with &, <, > and " escaped for XML text and attributes. */
void svg_escaped(svg_buf *b, const char *s);
void svg_buf_free(svg_buf *b);

/* <svg> with its size, a <title>, the shared styles and a white ground;
 * svg_end closes it. */
void svg_begin(svg_buf *b, double width, double height, const char *title);
void svg_end(svg_buf *b);

/* A curve: n points (x[i * stride], y[i * stride]); NaN values break it. */
typedef struct {
    const char *name;   /* in the legend */
    const double *x, *y;
    int64_t n, stride;
} svg_series;

typedef struct {
    const char *title, *x_label, *y_label;
    const svg_series *series;
    int num_series;
} svg_line_chart_spec;

/* A line chart in the box (x, y, width, height) of the picture: frame, ticks
 * and their labels, axis labels, title, a legend when there are several
 * curves. A chart with no finite point says so in its box. */
void svg_line_chart(svg_buf *b, double x, double y, double width, double height, const svg_line_chart_spec *c);

/* Horizontal bars: a group per case, a bar per figure in it. */
typedef struct {
    const char *label;   /* "lacuna", "floor", the peer's name */
    double value;        /* NaN: no bar */
    int style;           /* 0 the project's figure, 1 the floor, 2 a peer */
} svg_bar;
#define SVG_MAX_BARS 3
typedef struct {
    const char *name;
    svg_bar bars[SVG_MAX_BARS];
    int num_bars;
} svg_bar_group;

/* The height a bar chart of these groups takes at svg_bar_chart. */
double svg_bar_chart_height(int num_groups, const svg_bar_group *groups);
/* A bar chart in the box (x, y, width, svg_bar_chart_height) with its value
 * axis (in unit) along the bottom. */
void svg_bar_chart(svg_buf *b, double x, double y, double width, const char *title, const char *unit,
                   const svg_bar_group *groups, int num_groups);

#endif
