/* lacuna report: one self-contained HTML page (inline CSS and SVG, nothing
 * fetched) from the benchmarks' JSON lines, a line per figure:
 *   {"capability": "map", "case": "m=40M n=10k uniform", "value": 3.2,
 *    "unit": "ms", "floor": 2.9, "peer": "serial loop", "peer_value": 41.0,
 *    "machine": "...", "date": "2025-01-31"}
 * Each capability gets its machine and date, a bar chart per unit (the
 * figure, its floor and its peer for every case) and a table. */
#include "cli.h"
#include "jsonl.h"
#include "svg_plot.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char *capability, *name, *unit, *peer, *machine, *date;
    double value, floor, peer_value;   /* NaN: not given */
} figure;

typedef struct {
    figure *items;
    int count, cap;
} figures;

static void figure_free(figure *f)
{
    free(f->capability), free(f->name), free(f->unit), free(f->peer), free(f->machine), free(f->date);
}

/* The member key as a string: required ones must be there and non-empty,
 * optional ones may be absent or null (*out stays NULL). */
static const char *take_string(const jsonl_object *o, const char *key, bool required, char **out)
{
    const jsonl_member *m = jsonl_get(o, key);
    if (!m || m->kind == JSONL_NULL) return required ? "missing" : NULL;
    if (m->kind != JSONL_STRING) return "must be a string";
    if (required && !m->string[0]) return "is empty";
    if (!(*out = strdup(m->string))) return "out of memory";
    return NULL;
}

static const char *take_number(const jsonl_object *o, const char *key, bool required, double *out)
{
    const jsonl_member *m = jsonl_get(o, key);
    *out = NAN;
    if (!m || m->kind == JSONL_NULL) return required ? "missing" : NULL;
    if (m->kind != JSONL_NUMBER) return "must be a number";
    if (!isfinite(m->number)) return "is out of range";
    *out = m->number;
    return NULL;
}

/* One line's figure; the message says what is wrong with it. */
static bool read_figure(const jsonl_object *o, figure *f, char *why, size_t why_len)
{
    *f = (figure){0};
    struct {
        const char *key;
        char **text;
        double *number;
        bool required;
    } fields[] = {
        {"capability", &f->capability, NULL, true}, {"case", &f->name, NULL, true},
        {"value", NULL, &f->value, true},           {"unit", &f->unit, NULL, true},
        {"floor", NULL, &f->floor, false},          {"peer", &f->peer, NULL, false},
        {"peer_value", NULL, &f->peer_value, false}, {"machine", &f->machine, NULL, false},
        {"date", &f->date, NULL, false},
    };
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        const char *bad = fields[i].text ? take_string(o, fields[i].key, fields[i].required, fields[i].text)
                                         : take_number(o, fields[i].key, fields[i].required, fields[i].number);
        if (bad) {
            snprintf(why, why_len, "\"%s\" %s", fields[i].key, bad);
            figure_free(f);
            return false;
        }
    }
    if (!isnan(f->peer_value) && !f->peer && !(f->peer = strdup("peer"))) {
        snprintf(why, why_len, "out of memory");
        figure_free(f);
        return false;
    }
    return true;
}

/* Every figure of path; blank lines are skipped. */
static int read_file(const char *cmd, const char *path, figures *all)
{
    FILE *fp = strcmp(path, "-") ? fopen(path, "r") : stdin;
    if (!fp) return cli_usage_error(cmd, "cannot open %s: %s", path, strerror(errno));
    char *line = NULL, why[256];
    size_t cap = 0;
    long number = 0;
    int rc = CLI_OK;
    ssize_t len;
    while ((len = getline(&line, &cap, fp)) >= 0) {
        number++;
        if ((size_t)len != strlen(line)) {
            rc = cli_usage_error(cmd, "%s:%ld: a NUL byte in the line", path, number);
            break;
        }
        if (strspn(line, " \t\r\n") == (size_t)len) continue;
        jsonl_object o;
        if (!jsonl_parse(line, &o, why, sizeof why)) {
            rc = cli_usage_error(cmd, "%s:%ld: not a JSON object: %s", path, number, why);
            break;
        }
        figure f;
        bool ok = read_figure(&o, &f, why, sizeof why);
        jsonl_free(&o);
        if (!ok) {
            rc = cli_usage_error(cmd, "%s:%ld: %s", path, number, why);
            break;
        }
        if (all->count == all->cap) {
            int grown_cap = all->cap ? 2 * all->cap : 64;
            figure *grown = realloc(all->items, (size_t)grown_cap * sizeof *grown);
            if (!grown) {
                figure_free(&f);
                fprintf(stderr, "lacuna %s: out of memory\n", cmd);
                rc = CLI_RUNTIME;
                break;
            }
            all->items = grown;
            all->cap = grown_cap;
        }
        all->items[all->count++] = f;
    }
    if (rc == CLI_OK && ferror(fp)) rc = cli_usage_error(cmd, "cannot read %s: %s", path, strerror(errno));
    if (rc == CLI_OK && number == 0) fprintf(stderr, "lacuna %s: note: %s is empty\n", cmd, path);
    free(line);
    if (fp != stdin) fclose(fp);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* The page                                                                  */
/* ------------------------------------------------------------------------ */
static const char style[] =
    "body{font-family:'DejaVu Sans',Helvetica,Arial,sans-serif;margin:24px auto;max-width:1000px;color:#222;"
    "padding:0 16px}\n"
    "h1{font-size:24px;margin-bottom:4px}h2{font-size:19px;margin-top:32px;border-bottom:1px solid #ddd}\n"
    "h3{font-size:15px;margin:18px 0 6px}\n"
    ".meta{color:#555;margin:4px 0}\n"
    ".key span{display:inline-block;width:12px;height:12px;margin:0 4px 0 12px;vertical-align:middle}\n"
    "table{border-collapse:collapse;margin:8px 0 16px;font-size:13px}\n"
    "th,td{border:1px solid #ddd;padding:3px 8px;text-align:right}th{background:#f4f4f4}\n"
    "td:first-child,th:first-child{text-align:left}\n"
    "svg{display:block;max-width:100%;height:auto}\n";

static bool same(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static void cell_number(svg_buf *b, double v)
{
    if (isnan(v)) svg_printf(b, "<td>-</td>");
    else svg_printf(b, "<td>%.4g</td>", v);
}

static void cell_text(svg_buf *b, const char *s)
{
    svg_printf(b, "<td>");
    svg_escaped(b, s ? s : "-");
    svg_printf(b, "</td>");
}

/* The machines and dates of a capability's figures, each told once. */
static void machines_and_dates(svg_buf *b, const figures *all, const char *capability)
{
    for (int i = 0; i < all->count; i++) {
        const figure *f = &all->items[i];
        if (strcmp(f->capability, capability) != 0) continue;
        bool told = false;
        for (int j = 0; j < i && !told; j++)
            told = !strcmp(all->items[j].capability, capability) && same(all->items[j].machine, f->machine) &&
                   same(all->items[j].date, f->date);
        if (told) continue;
        svg_printf(b, "<p class=\"meta\">machine: ");
        svg_escaped(b, f->machine ? f->machine : "not given");
        svg_printf(b, " &middot; date: ");
        svg_escaped(b, f->date ? f->date : "not given");
        svg_printf(b, "</p>\n");
    }
}

/* A unit's chart and table within a capability. */
static int unit_section(svg_buf *b, const figures *all, const char *capability, const char *unit)
{
    int n = 0;
    for (int i = 0; i < all->count; i++)
        n += !strcmp(all->items[i].capability, capability) && !strcmp(all->items[i].unit, unit);
    svg_bar_group *groups = calloc((size_t)n, sizeof *groups);
    if (!groups) return -1;
    int g = 0;
    for (int i = 0; i < all->count; i++) {
        const figure *f = &all->items[i];
        if (strcmp(f->capability, capability) || strcmp(f->unit, unit)) continue;
        svg_bar_group *gr = &groups[g++];
        gr->name = f->name;
        gr->bars[gr->num_bars++] = (svg_bar){"lacuna", f->value, 0};
        if (!isnan(f->floor)) gr->bars[gr->num_bars++] = (svg_bar){"floor", f->floor, 1};
        if (f->peer) gr->bars[gr->num_bars++] = (svg_bar){f->peer, f->peer_value, 2};
    }
    char title[256];
    snprintf(title, sizeof title, "%s, %s", capability, unit);
    svg_printf(b, "<h3>");
    svg_escaped(b, unit);
    svg_printf(b, "</h3>\n<figure>\n");
    double height = svg_bar_chart_height(n, groups);
    svg_begin(b, 960, height, title);
    svg_bar_chart(b, 0, 0, 960, title, unit, groups, n);
    svg_end(b);
    svg_printf(b, "</figure>\n<table>\n<tr><th>case</th><th>value</th><th>floor</th><th>value / floor</th><th>peer</th>"
                  "<th>peer's value</th><th>value / peer's</th></tr>\n");
    for (int i = 0; i < all->count; i++) {
        const figure *f = &all->items[i];
        if (strcmp(f->capability, capability) || strcmp(f->unit, unit)) continue;
        svg_printf(b, "<tr>");
        cell_text(b, f->name);
        cell_number(b, f->value);
        cell_number(b, f->floor);
        cell_number(b, !isnan(f->floor) && f->floor != 0 ? f->value / f->floor : NAN);
        cell_text(b, f->peer);
        cell_number(b, f->peer_value);
        cell_number(b, !isnan(f->peer_value) && f->peer_value != 0 ? f->value / f->peer_value : NAN);
        svg_printf(b, "</tr>\n");
    }
    svg_printf(b, "</table>\n");
    free(groups);
    return 0;
}

static int write_page(svg_buf *b, const figures *all, const char *const *paths, int num_paths)
{
    svg_printf(b, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                  "<title>Lacuna benchmark report</title>\n<style>\n%s</style>\n</head>\n<body>\n"
                  "<h1>Lacuna benchmark report</h1>\n<p class=\"meta\">%d figure%s from ",
               style, all->count, all->count == 1 ? "" : "s");
    for (int i = 0; i < num_paths; i++) {
        svg_printf(b, "%s<code>", i ? ", " : "");
        svg_escaped(b, paths[i]);
        svg_printf(b, "</code>");
    }
    svg_printf(b, ".</p>\n<p class=\"key\">bars:<span style=\"background:#1f77b4\"></span>Lacuna's figure"
                  "<span style=\"background:#b0b0b0\"></span>its floor (what the hardware allows)"
                  "<span style=\"background:#ff7f0e\"></span>its peer's (measured in the same run, or published)</p>\n");
    if (all->count == 0) svg_printf(b, "<p>No figures.</p>\n");
    for (int i = 0; i < all->count; i++) {
        const char *capability = all->items[i].capability;
        bool seen = false;
        for (int j = 0; j < i && !seen; j++) seen = !strcmp(all->items[j].capability, capability);
        if (seen) continue;
        svg_printf(b, "<section>\n<h2>");
        svg_escaped(b, capability);
        svg_printf(b, "</h2>\n");
        machines_and_dates(b, all, capability);
        for (int k = i; k < all->count; k++) {
            const figure *f = &all->items[k];
            if (strcmp(f->capability, capability)) continue;
            bool unit_seen = false;
            for (int j = i; j < k && !unit_seen; j++)
                unit_seen = !strcmp(all->items[j].capability, capability) && !strcmp(all->items[j].unit, f->unit);
            if (!unit_seen && unit_section(b, all, capability, f->unit) < 0) return -1;
        }
        svg_printf(b, "</section>\n");
    }
    svg_printf(b, "</body>\n</html>\n");
    return b->failed ? -1 : 0;
}

int cmd_report(int argc, char **argv)
{
    const char *cmd = "report", *out = "-", *paths[CLI_MAX_FILES];
    int nargs = 0;
    cli_opt options[] = {
        {"--out", "-o", CLI_STRING, &out, "FILE", .help = "the HTML page ('-': standard output)", .show_default = 1},
        {0},
    };
    const cli_command command = {
        .name = cmd,
        .usage = "report [options] RESULTS.jsonl... [-o report.html]",
        .about = "Writes one self-contained HTML page (inline CSS and SVG, nothing fetched) of\n"
                 "benchmark figures: for each capability the machine and date, and per unit a\n"
                 "bar chart and a table of every case's figure beside its floor and its peer.\n"
                 "RESULTS ('-': standard input) hold a JSON object per line (bench/README.md):\n"
                 "  {\"capability\": \"map\", \"case\": \"m=40M n=10k\", \"value\": 3.2, \"unit\": \"ms\",\n"
                 "   \"floor\": 2.9, \"peer\": \"serial loop\", \"peer_value\": 41,\n"
                 "   \"machine\": \"...\", \"date\": \"...\"}\n"
                 "capability, case, value and unit are required, the others may be absent or\n"
                 "null; other members are ignored and blank lines skipped. A malformed line\n"
                 "stops it with the file and line number (exit 2), and no page is written.\n",
        .tables = {options},
        .args = "RESULTS...",
        .min_args = 1,
        .max_args = CLI_MAX_FILES - 1,
    };
    int rc = cli_parse(&command, argc, argv, paths, &nargs);
    if (rc != CLI_OK) return rc == CLI_HELP ? CLI_OK : rc;
    cli_file inputs[CLI_MAX_FILES];
    for (int i = 0; i < nargs; i++) inputs[i] = (cli_file){"RESULTS", paths[i]};
    const cli_file outputs[] = {{"--out", out}};
    if ((rc = cli_check_files(cmd, inputs, nargs, outputs, 1)) != CLI_OK) return rc;

    figures all = {0};
    svg_buf page = {0};
    lac_ctx_t ctx = NULL;
    for (int i = 0; i < nargs && rc == CLI_OK; i++) rc = read_file(cmd, paths[i], &all);
    if (rc == CLI_OK && write_page(&page, &all, paths, nargs) < 0) {
        fprintf(stderr, "lacuna %s: out of memory\n", cmd);
        rc = CLI_RUNTIME;
    }
    if (rc == CLI_OK) rc = cli_make_context(cmd, "cpu", 1, &ctx);
    if (rc == CLI_OK) {
        lac_status st = lac_bytes_save(ctx, out, page.data, page.len);
        rc = st < 0 ? cli_status_error(cmd, ctx, st) : cli_commit_outputs(cmd, ctx);
    }
    lac_ctx_destroy(&ctx);
    svg_buf_free(&page);
    for (int i = 0; i < all.count; i++) figure_free(&all.items[i]);
    free(all.items);
    return rc;
}
