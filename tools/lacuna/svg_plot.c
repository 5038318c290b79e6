/* The SVG writer (see svg_plot.h). Sizes are in CSS pixels; text widths are
 * estimated from the font size, which is all the layout needs. */
#include "svg_plot.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void svg_printf(svg_buf *b, const char *fmt, ...)
{
    if (b->failed) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        size_t room = b->cap - b->len;
        int n = vsnprintf(b->data ? b->data + b->len : NULL, room, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->failed = true;
            return;
        }
        if ((size_t)n < room) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = b->cap ? b->cap : 4096;
        while (cap - b->len <= (size_t)n) cap *= 2;
        char *grown = realloc(b->data, cap);
        if (!grown) {
            b->failed = true;
            return;
        }
        b->data = grown;
        b->cap = cap;
    }
}

void svg_escaped(svg_buf *b, const char *s)
{
    for (; s && *s; s++) {
        switch (*s) {
        case '&': svg_printf(b, "&amp;"); break;
        case '<': svg_printf(b, "&lt;"); break;
        case '>': svg_printf(b, "&gt;"); break;
        case '"': svg_printf(b, "&quot;"); break;
        default:
            /* XML 1.0 allows no control characters but tab, newline, return. */
            if ((unsigned char)*s < 0x20 && *s != '\t' && *s != '\n' && *s != '\r') svg_printf(b, "?");
            else svg_printf(b, "%c", *s);
        }
    }
}

void svg_buf_free(svg_buf *b)
{
    free(b->data);
    *b = (svg_buf){0};
}

void svg_begin(svg_buf *b, double width, double height, const char *title)
{
    svg_printf(b,
               "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
               "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" font-size=\"11\">\n<title>",
               width, height, width, height);
    svg_escaped(b, title);
    svg_printf(b, "</title>\n<rect width=\"100%%\" height=\"100%%\" fill=\"#ffffff\"/>\n");
}

void svg_end(svg_buf *b)
{
    svg_printf(b, "</svg>\n");
}

/* ------------------------------------------------------------------------ */
/* Axes                                                                      */
/* ------------------------------------------------------------------------ */
#define MAX_TICKS 24

typedef struct {
    double lo, hi;      /* the ends; log10 of them on a log axis */
    bool log;
    double step;        /* between ticks (decades on a log axis) */
    double ticks[MAX_TICKS];
    int num_ticks;
} axis;

/* 1, 2 or 5 times a power of ten, near x > 0. */
static double nice_step(double x)
{
    double e = floor(log10(x)), f = x / pow(10, e);
    return (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * pow(10, e);
}

/* An axis over [lo, hi] (finite), about `target` ticks; integer axes take no
 * step below 1; a log axis where allowed and every value is positive and
 * they span two decades or more. */
static void axis_make(axis *a, double lo, double hi, int target, bool integer, bool allow_log)
{
    *a = (axis){0};
    if (allow_log && lo > 0 && hi / lo >= 100) {
        a->log = true;
        a->lo = floor(log10(lo) + 1e-9);
        a->hi = ceil(log10(hi) - 1e-9);
        if (a->hi <= a->lo) a->hi = a->lo + 1;
        a->step = ceil((a->hi - a->lo) / (MAX_TICKS - 2));
        if (a->step < 1) a->step = 1;
        for (double k = a->lo; k <= a->hi + 1e-9 && a->num_ticks < MAX_TICKS; k += a->step)
            a->ticks[a->num_ticks++] = k;
        return;
    }
    if (!(hi > lo)) {
        double d = lo != 0 ? fabs(lo) * 0.1 : 1;
        lo -= d, hi += d;
    }
    double step = nice_step((hi - lo) / target);
    if (integer && step < 1) step = 1;
    a->step = step;
    a->lo = floor(lo / step + 1e-9) * step;
    a->hi = ceil(hi / step - 1e-9) * step;
    if (!(a->hi > a->lo)) a->hi = a->lo + step;
    int n = (int)lround((a->hi - a->lo) / step) + 1;
    if (n > MAX_TICKS) n = MAX_TICKS;
    for (int i = 0; i < n; i++) {
        double t = a->lo + i * step;
        a->ticks[a->num_ticks++] = fabs(t) < step * 1e-9 ? 0 : t;   /* no "-0" */
    }
}

/* Where v falls between the pixel ends p0 (at lo) and p1 (at hi). */
static double axis_map(const axis *a, double v, double p0, double p1)
{
    double t = a->log ? log10(v) : v;
    return p0 + (t - a->lo) / (a->hi - a->lo) * (p1 - p0);
}

/* A tick's label as SVG text content. */
static void tick_label(svg_buf *b, const axis *a, double t)
{
    if (a->log) {
        /* Plain numbers when every tick reads well that way, else powers of ten. */
        int k = (int)lround(t);
        if (a->lo >= -3 && a->hi <= 4) svg_printf(b, "%g", pow(10, k));
        else svg_printf(b, "10<tspan dy=\"-5\" font-size=\"8\">%d</tspan>", k);
        return;
    }
    double m = fmax(fabs(a->lo), fabs(a->hi));
    if (m >= 1e6 || (m > 0 && m < 1e-4)) {
        svg_printf(b, "%.3g", t);
        return;
    }
    int decimals = a->step >= 1 ? 0 : (int)ceil(-log10(a->step) - 1e-9);
    svg_printf(b, "%.*f", decimals, t);
}

static double text_width(const char *s, double font_size)
{
    return 0.6 * font_size * (double)(s ? strlen(s) : 0);
}

static const char *const palette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"};
#define PALETTE_SIZE (int)(sizeof palette / sizeof palette[0])

static void text_at(svg_buf *b, double x, double y, const char *anchor, const char *attrs, const char *s)
{
    svg_printf(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\"%s%s>", x, y, anchor, attrs ? " " : "",
               attrs ? attrs : "");
    svg_escaped(b, s);
    svg_printf(b, "</text>\n");
}

/* ------------------------------------------------------------------------ */
/* Line charts                                                               */
/* ------------------------------------------------------------------------ */
static bool finite_point(const svg_series *s, int64_t i, bool log_y)
{
    double x = s->x[i * s->stride], y = s->y[i * s->stride];
    return isfinite(x) && isfinite(y) && (!log_y || y > 0);
}

void svg_line_chart(svg_buf *b, double x, double y, double width, double height, const svg_line_chart_spec *c)
{
    const double left = 66, right = 14, top = 30, bottom = 44;
    const double px0 = x + left, px1 = x + width - right, py0 = y + height - bottom, py1 = y + top;
    svg_printf(b, "<g class=\"chart\">\n");
    text_at(b, x + width / 2, y + 18, "middle", "font-size=\"13\" font-weight=\"bold\"", c->title);

    /* The ranges over every finite point. */
    double xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY;
    bool drawn[64] = {false};
    for (int k = 0; k < c->num_series; k++) {
        const svg_series *s = &c->series[k];
        for (int64_t i = 0; i < s->n; i++) {
            if (!finite_point(s, i, false)) continue;
            double px = s->x[i * s->stride], py = s->y[i * s->stride];
            xlo = fmin(xlo, px), xhi = fmax(xhi, px), ylo = fmin(ylo, py), yhi = fmax(yhi, py);
            if (k < 64) drawn[k] = true;
        }
    }
    svg_printf(b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#444444\"/>\n",
               px0, py1, px1 - px0, py0 - py1);
    if (!(xlo <= xhi)) {
        text_at(b, (px0 + px1) / 2, (py0 + py1) / 2, "middle", "fill=\"#888888\"", "no data");
        svg_printf(b, "</g>\n");
        return;
    }
    bool integer_x = true;
    for (int k = 0; k < c->num_series && integer_x; k++)
        for (int64_t i = 0; i < c->series[k].n; i++) {
            double v = c->series[k].x[i * c->series[k].stride];
            if (isfinite(v) && v != floor(v)) {
                integer_x = false;
                break;
            }
        }
    axis ax, ay;
    axis_make(&ax, xlo, xhi, 6, integer_x, false);
    axis_make(&ay, ylo, yhi, 5, false, true);   /* log only when every y > 0 */

    /* Grid, ticks and their labels. */
    for (int i = 0; i < ax.num_ticks; i++) {
        double t = ax.ticks[i], px = px0 + (t - ax.lo) / (ax.hi - ax.lo) * (px1 - px0);
        svg_printf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e6e6e6\"/>\n", px, py1, px, py0);
        svg_printf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#444444\"/>\n", px, py0, px, py0 + 4);
        svg_printf(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"10\">", px, py0 + 15);
        tick_label(b, &ax, t);
        svg_printf(b, "</text>\n");
    }
    for (int i = 0; i < ay.num_ticks; i++) {
        double t = ay.ticks[i], py = py0 + (t - ay.lo) / (ay.hi - ay.lo) * (py1 - py0);
        svg_printf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e6e6e6\"/>\n", px0, py, px1, py);
        svg_printf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#444444\"/>\n", px0 - 4, py, px0, py);
        svg_printf(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" font-size=\"10\">", px0 - 6, py + 3.5);
        tick_label(b, &ay, t);
        svg_printf(b, "</text>\n");
    }
    text_at(b, (px0 + px1) / 2, py0 + 34, "middle", NULL, c->x_label);
    svg_printf(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" transform=\"rotate(-90 %.1f %.1f)\">", x + 14,
               (py0 + py1) / 2, x + 14, (py0 + py1) / 2);
    svg_escaped(b, c->y_label);
    svg_printf(b, "%s</text>\n", ay.log ? " (log scale)" : "");

    /* The curves: a polyline per unbroken run, dots where points are few. */
    for (int k = 0; k < c->num_series; k++) {
        const svg_series *s = &c->series[k];
        const char *colour = palette[k % PALETTE_SIZE];
        bool open = false;
        int64_t finite = 0;
        for (int64_t i = 0; i < s->n; i++) {
            if (!finite_point(s, i, ay.log)) {
                if (open) svg_printf(b, "\"/>\n");
                open = false;
                continue;
            }
            finite++;
            double px = axis_map(&ax, s->x[i * s->stride], px0, px1), py = axis_map(&ay, s->y[i * s->stride], py0, py1);
            if (!open)
                svg_printf(b, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.8\" points=\"", colour);
            svg_printf(b, "%s%.2f,%.2f", open ? " " : "", px, py);
            open = true;
        }
        if (open) svg_printf(b, "\"/>\n");
        if (finite <= 60)
            for (int64_t i = 0; i < s->n; i++)
                if (finite_point(s, i, ay.log))
                    svg_printf(b, "<circle cx=\"%.2f\" cy=\"%.2f\" r=\"2.5\" fill=\"%s\"/>\n",
                               axis_map(&ax, s->x[i * s->stride], px0, px1), axis_map(&ay, s->y[i * s->stride], py0, py1),
                               colour);
    }

    /* The legend, top right inside the frame, for the curves drawn. */
    int entries = 0;
    double widest = 0;
    for (int k = 0; k < c->num_series && k < 64; k++)
        if (drawn[k]) entries++, widest = fmax(widest, text_width(c->series[k].name, 11));
    if (entries > 1 || (entries == 1 && c->num_series > 1)) {
        double lw = widest + 36, lh = 8 + 16.0 * entries, lx = px1 - lw - 6, ly = py1 + 6;
        svg_printf(b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#ffffff\" fill-opacity=\"0.9\" "
                      "stroke=\"#bbbbbb\"/>\n", lx, ly, lw, lh);
        double ey = ly + 14;
        for (int k = 0; k < c->num_series && k < 64; k++) {
            if (!drawn[k]) continue;
            svg_printf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2\"/>\n",
                       lx + 6, ey - 4, lx + 26, ey - 4, palette[k % PALETTE_SIZE]);
            text_at(b, lx + 30, ey, "start", NULL, c->series[k].name);
            ey += 16;
        }
    }
    svg_printf(b, "</g>\n");
}

/* ------------------------------------------------------------------------ */
/* Bar charts                                                                */
/* ------------------------------------------------------------------------ */
#define BAR_TITLE 24.0
#define BAR_GROUP_LABEL 16.0
#define BAR_HEIGHT 15.0
#define BAR_GAP 3.0
#define BAR_GROUP_GAP 8.0
#define BAR_AXIS 38.0
#define BAR_LEFT 150.0
#define BAR_RIGHT 110.0

static const char *const bar_colours[] = {"#1f77b4", "#b0b0b0", "#ff7f0e"};

double svg_bar_chart_height(int num_groups, const svg_bar_group *groups)
{
    double h = BAR_TITLE + BAR_AXIS;
    for (int g = 0; g < num_groups; g++)
        h += BAR_GROUP_LABEL + groups[g].num_bars * (BAR_HEIGHT + BAR_GAP) + BAR_GROUP_GAP;
    return h;
}

void svg_bar_chart(svg_buf *b, double x, double y, double width, const char *title, const char *unit,
                   const svg_bar_group *groups, int num_groups)
{
    double lo = INFINITY, hi = -INFINITY;
    for (int g = 0; g < num_groups; g++)
        for (int i = 0; i < groups[g].num_bars; i++) {
            double v = groups[g].bars[i].value;
            if (isfinite(v)) lo = fmin(lo, v), hi = fmax(hi, v);
        }
    const double height = svg_bar_chart_height(num_groups, groups);
    const double px0 = x + BAR_LEFT, px1 = x + width - BAR_RIGHT;
    svg_printf(b, "<g class=\"bars\">\n");
    text_at(b, x + 4, y + 16, "start", "font-size=\"13\" font-weight=\"bold\"", title);
    if (!(lo <= hi)) {
        text_at(b, (px0 + px1) / 2, y + height / 2, "middle", "fill=\"#888888\"", "no data");
        svg_printf(b, "</g>\n");
        return;
    }
    /* Bars start at zero unless the values span decades (then a log axis
     * from the decade below the smallest); negative values start the axis
     * below zero. */
    axis ax;
    axis_make(&ax, fmin(lo, 0), fmax(hi, 0), 5, false, false);
    if (lo > 0 && hi / lo >= 100) axis_make(&ax, lo, hi, 5, false, true);
    const double plot_top = y + BAR_TITLE, plot_bottom = y + height - BAR_AXIS;
    for (int i = 0; i < ax.num_ticks; i++) {
        double t = ax.ticks[i], px = px0 + (t - ax.lo) / (ax.hi - ax.lo) * (px1 - px0);
        svg_printf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e6e6e6\"/>\n", px, plot_top, px,
                   plot_bottom);
        svg_printf(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"10\">", px, plot_bottom + 14);
        tick_label(b, &ax, t);
        svg_printf(b, "</text>\n");
    }
    svg_printf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#444444\"/>\n", px0, plot_bottom, px1,
               plot_bottom);
    svg_printf(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">", (px0 + px1) / 2, plot_bottom + 30);
    svg_escaped(b, unit);
    svg_printf(b, "%s</text>\n", ax.log ? " (log scale)" : "");

    double base = ax.log ? px0 : axis_map(&ax, 0, px0, px1), gy = plot_top;
    for (int g = 0; g < num_groups; g++) {
        text_at(b, x + 4, gy + 12, "start", "font-weight=\"bold\"", groups[g].name);
        gy += BAR_GROUP_LABEL;
        for (int i = 0; i < groups[g].num_bars; i++) {
            const svg_bar *bar = &groups[g].bars[i];
            text_at(b, px0 - 6, gy + BAR_HEIGHT - 4, "end", NULL, bar->label);
            if (isfinite(bar->value)) {
                double end = axis_map(&ax, bar->value, px0, px1), left = fmin(base, end);
                int style = bar->style >= 0 && bar->style < 3 ? bar->style : 0;
                svg_printf(b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"/>\n", left, gy,
                           fmax(fabs(end - base), 1), BAR_HEIGHT, bar_colours[style]);
                svg_printf(b, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\">%.4g</text>\n", fmax(base, end) + 4,
                           gy + BAR_HEIGHT - 4, bar->value);
            } else {
                text_at(b, px0 + 4, gy + BAR_HEIGHT - 4, "start", "font-size=\"10\" fill=\"#888888\"", "-");
            }
            gy += BAR_HEIGHT + BAR_GAP;
        }
        gy += BAR_GROUP_GAP;
    }
    svg_printf(b, "</g>\n");
}
