/* The tool's option parser and help printer (see options.h). */
#include "options.h"

#include "cli.h"

#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define HELP_WIDTH 80
#define HELP_MAX_COLUMN 24   /* options wider than this start their help on the next line */

/* Every entry of every table of cmd, sections included. */
#define FOR_EACH_ENTRY(cmd, o)                                                                       \
    for (cli_opt *const *table_ = (cmd)->tables; table_ < (cmd)->tables + CLI_MAX_TABLES && *table_; \
         table_++)                                                                                   \
        for (cli_opt *o = *table_; o->kind != CLI_END; o++)

static bool takes_value(const cli_opt *o) { return o->kind != CLI_FLAG && o->kind != CLI_SECTION; }

/* The option spelt name[0..len), in any table. */
static cli_opt *lookup(const cli_command *cmd, const char *name, size_t len)
{
    FOR_EACH_ENTRY(cmd, o) {
        if (o->kind == CLI_SECTION) continue;
        if (strlen(o->name) == len && strncmp(o->name, name, len) == 0) return o;
        if (o->alias && strlen(o->alias) == len && strncmp(o->alias, name, len) == 0) return o;
    }
    return NULL;
}

const cli_opt *cli_find(const cli_command *cmd, const char *name) { return lookup(cmd, name, strlen(name)); }

static bool is_option(const char *a) { return a[0] == '-' && a[1] != '\0'; }

/* ------------------------------------------------------------------------ */
/* Values                                                                    */
/* ------------------------------------------------------------------------ */
/* Bounds as a person writes them: 4096, not 4096.000000 or 4.096e+03. */
static void format_bound(char *buf, size_t len, double v)
{
    if (v == floor(v) && fabs(v) < 1e15) snprintf(buf, len, "%.0f", v);
    else snprintf(buf, len, "%g", v);
}

/* Checks v against the option's range; the message quotes the text given. */
static int check_range(const char *cmd, const char *name, const cli_opt *o, double v, const char *text)
{
    if (!(o->min < o->max)) return CLI_OK;
    bool open_lo = o->open & CLI_OPEN_MIN, open_hi = o->open & CLI_OPEN_MAX;
    bool ok = (open_lo ? v > o->min : v >= o->min) && (open_hi ? v < o->max : v <= o->max);
    if (ok) return CLI_OK;
    char lo[32], hi[32];
    format_bound(lo, sizeof lo, o->min);
    format_bound(hi, sizeof hi, o->max);
    if (isinf(o->max))
        return cli_usage_error(cmd, "%s must be %s %s, got %s", name, open_lo ? ">" : ">=", lo, text);
    if (isinf(o->min))
        return cli_usage_error(cmd, "%s must be %s %s, got %s", name, open_hi ? "<" : "<=", hi, text);
    return cli_usage_error(cmd, "%s must be in %c%s, %s%c, got %s", name, open_lo ? '(' : '[', lo, hi,
                           open_hi ? ')' : ']', text);
}

static int parse_integer(const char *cmd, const char *name, const cli_opt *o, const char *text)
{
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (!*text || isspace((unsigned char)*text) || *end)
        return cli_usage_error(cmd, "%s needs an integer, got '%s'", name, text);
    /* An explicit range says more than "out of range" (strtoll saturates, so
     * a huge value fails it too); the type's range is checked after it. */
    bool fits = errno == 0 && (o->kind == CLI_INT64 || (v >= INT_MIN && v <= INT_MAX));
    if (check_range(cmd, name, o, (double)v, text) != CLI_OK) return CLI_USAGE;
    if (!fits) return cli_usage_error(cmd, "%s needs an integer, got '%s' (out of range)", name, text);
    if (o->kind == CLI_INT) *(int *)o->dest = (int)v;
    else *(int64_t *)o->dest = v;
    return CLI_OK;
}

static int parse_real(const char *cmd, const char *name, const cli_opt *o, const char *text)
{
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (!*text || isspace((unsigned char)*text) || *end)
        return cli_usage_error(cmd, "%s needs a%s number, got '%s'", name, o->kind == CLI_DOUBLE ? " finite" : "",
                               text);
    if (o->kind == CLI_DOUBLE) {
        /* Underflow (1e-400) reads as 0 or a subnormal, which is fine. */
        if (!isfinite(v) || (errno == ERANGE && fabs(v) > DBL_MIN))
            return cli_usage_error(cmd, "%s needs a finite number, got '%s'", name, text);
    }
    if (check_range(cmd, name, o, v, text) != CLI_OK) return CLI_USAGE;
    *(double *)o->dest = v;
    return CLI_OK;
}

static int parse_choice(const char *cmd, const char *name, const cli_opt *o, const char *text)
{
    for (int i = 0; o->choices[i]; i++)
        if (strcmp(text, o->choices[i]) == 0) {
            *(int *)o->dest = i;
            return CLI_OK;
        }
    fprintf(stderr, "lacuna %s: unknown %s '%s' (", cmd, name, text);
    for (int i = 0; o->choices[i]; i++) fprintf(stderr, "%s%s", i ? ", " : "", o->choices[i]);
    fprintf(stderr, ")\n");
    return CLI_USAGE;
}

/* Stores one occurrence of o, spelt name, with its value (NULL for flags). */
static int store(const cli_command *cmd, const char *name, cli_opt *o, const char *value)
{
    switch (o->kind) {
    case CLI_FLAG: *(int *)o->dest = !o->off; return CLI_OK;
    case CLI_INT:
    case CLI_INT64: return parse_integer(cmd->name, name, o, value);
    case CLI_DOUBLE:
    case CLI_NUMBER: return parse_real(cmd->name, name, o, value);
    case CLI_STRING: *(const char **)o->dest = value; return CLI_OK;
    case CLI_ENUM: return parse_choice(cmd->name, name, o, value);
    case CLI_STRINGS: {
        cli_strings *list = o->dest;
        if (list->count == CLI_MAX_REPEATS)
            return cli_usage_error(cmd->name, "%s given more than %d times", name, CLI_MAX_REPEATS);
        list->values[list->count++] = value;
        return CLI_OK;
    }
    default: return cli_usage_error(cmd->name, "internal error: option %s has no kind", name);
    }
}

/* ------------------------------------------------------------------------ */
/* Parsing                                                                   */
/* ------------------------------------------------------------------------ */
/* --help or -h standing as an option: not a value, not after "--". Looked for
 * before anything is stored, so that the help shows the defaults and a
 * mistake elsewhere on the line does not hide it. */
static bool help_asked(const cli_command *cmd, int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) return false;
        if (!is_option(a)) continue;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) return true;
        const cli_opt *o = lookup(cmd, a, strlen(a));   /* "--x=v" carries its value */
        if (o && takes_value(o)) i++;
    }
    return false;
}

int cli_parse(const cli_command *cmd, int argc, char **argv, const char **args, int *nargs)
{
    if (nargs) *nargs = 0;
    if (help_asked(cmd, argc, argv)) {
        cli_help(stdout, cmd);
        return CLI_HELP;
    }
    const char *name = cmd->name;
    int count = 0;
    bool options_done = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!options_done && strcmp(a, "--") == 0) {
            options_done = true;
            continue;
        }
        if (options_done || !is_option(a)) {
            if (count == cmd->max_args && !cmd->args)
                return cli_usage_error(name, "unexpected argument '%s' (see lacuna %s --help)", a, name);
            if (count == cmd->max_args)
                return cli_usage_error(name, "too many files ('%s'): %s (see lacuna %s --help)", a, cmd->args, name);
            args[count++] = a;
            continue;
        }
        const char *eq = strchr(a, '=');
        size_t len = eq ? (size_t)(eq - a) : strlen(a);
        cli_opt *o = lookup(cmd, a, len);
        if (!o && (strncmp(a, "--help=", 7) == 0 || strncmp(a, "-h=", 3) == 0))
            return cli_usage_error(name, "%.*s takes no value, got '%s'", (int)len, a, a);
        if (!o)
            return cli_usage_error(name, "unknown option '%.*s' (see lacuna %s --help)", (int)len, a, name);
        char spelt[64];   /* the option as typed, without "=value" */
        snprintf(spelt, sizeof spelt, "%.*s", (int)len, a);
        const char *value = NULL;
        if (!takes_value(o)) {
            if (eq) return cli_usage_error(name, "%s takes no value, got '%s'", spelt, a);
        } else if (eq) {
            value = eq + 1;
        } else if (i + 1 < argc) {
            value = argv[++i];
        } else {
            return cli_usage_error(name, "%s needs a value", spelt);
        }
        if (o->seen && takes_value(o) && o->kind != CLI_STRINGS) {
            if (strcmp(spelt, o->name) != 0)
                return cli_usage_error(name, "%s (%s) given more than once", spelt, o->name);
            return cli_usage_error(name, "%s given more than once", spelt);
        }
        if (store(cmd, spelt, o, value) != CLI_OK) return CLI_USAGE;
        o->seen = value && !eq ? i - 1 : i;
    }
    if (count < cmd->min_args) return cli_usage_error(name, "needs %s (see lacuna %s --help)", cmd->args, name);
    if (nargs) *nargs = count;
    return CLI_OK;
}

/* ------------------------------------------------------------------------ */
/* Help                                                                      */
/* ------------------------------------------------------------------------ */
/* Appends to buf[0..len), *n characters long so far; stops at the end. */
static void append(char *buf, size_t len, int *n, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void append(char *buf, size_t len, int *n, const char *fmt, ...)
{
    if ((size_t)*n >= len - 1) return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(buf + *n, len - (size_t)*n, fmt, ap);
    va_end(ap);
    *n = k < 0 ? *n : (size_t)(*n + k) < len ? *n + k : (int)len - 1;
}

/* "  -t, --epochs N": the short spelling first; returns the width. */
static int format_names(char *buf, size_t len, const cli_opt *o)
{
    const char *first = o->name, *second = o->alias;
    if (second && second[1] != '-' && first[1] == '-') first = o->alias, second = o->name;
    int n = 0;
    buf[0] = '\0';
    append(buf, len, &n, "  %s", first);
    if (second) append(buf, len, &n, ", %s", second);
    if (o->meta) {
        append(buf, len, &n, " %s", o->meta);
    } else if (o->kind == CLI_ENUM) {
        for (int i = 0; o->choices[i]; i++) append(buf, len, &n, "%c%s", i ? '|' : ' ', o->choices[i]);
    } else if (takes_value(o)) {
        append(buf, len, &n, " VALUE");
    }
    return n;
}

static void format_default(char *buf, size_t len, const cli_opt *o)
{
    buf[0] = '\0';
    if (!o->show_default) return;
    switch (o->kind) {
    case CLI_INT: snprintf(buf, len, " (default %d)", *(const int *)o->dest); break;
    case CLI_INT64: snprintf(buf, len, " (default %lld)", (long long)*(const int64_t *)o->dest); break;
    case CLI_DOUBLE:
    case CLI_NUMBER: {
        /* %g, with the exponent's leading zeros dropped: 1e-8, not 1e-08 */
        char num[40], *e;
        snprintf(num, sizeof num, "%g", *(const double *)o->dest);
        if ((e = strchr(num, 'e')) != NULL) {
            char *digits = e + 1 + (e[1] == '-' || e[1] == '+');
            if (e[1] == '+') memmove(e + 1, e + 2, strlen(e + 2) + 1), digits--;
            while (digits[0] == '0' && digits[1]) memmove(digits, digits + 1, strlen(digits));
        }
        snprintf(buf, len, " (default %s)", num);
        break;
    }
    case CLI_STRING:
        if (*(const char *const *)o->dest) snprintf(buf, len, " (default %s)", *(const char *const *)o->dest);
        break;
    case CLI_ENUM: {
        int i = *(const int *)o->dest;
        if (i >= 0) snprintf(buf, len, " (default %s)", o->choices[i]);
        break;
    }
    default: break;
    }
}

/* Writes text from column `column` on (the cursor stands at `at`), wrapping
 * at word boundaries and at '\n'. */
static void print_wrapped(FILE *out, const char *text, int column, int at)
{
    while (*text) {
        int room = HELP_WIDTH - column, take = 0;
        int line = (int)strcspn(text, "\n");
        if (line <= room) {
            take = line;
        } else {
            for (int k = room; k > 0; k--)
                if (text[k] == ' ') {
                    take = k;
                    break;
                }
            if (take == 0) take = (int)strcspn(text, " \n");   /* one word longer than the room */
        }
        fprintf(out, "%*s%.*s\n", column - at, "", take, text);
        text += take;
        while (*text == ' ') text++;
        if (*text == '\n') text++;
        at = 0;
    }
}

static void write_help(FILE *out, const cli_command *cmd)
{
    const char *u = cmd->usage;
    for (int line = 0; *u; line++) {
        int len = (int)strcspn(u, "\n");
        fprintf(out, "%s lacuna %.*s\n", line ? "      " : "usage:", len, u);
        u += len + (u[len] == '\n');
    }
    if (cmd->about) fprintf(out, "\n%s", cmd->about);
    /* The help column: after the widest option that fits under the cap. */
    int column = 0;
    char names[160], dflt[96], text[1200];
    FOR_EACH_ENTRY(cmd, o) {
        if (o->kind == CLI_SECTION) continue;
        int w = format_names(names, sizeof names, o) + 2;
        if (w <= HELP_MAX_COLUMN && w > column) column = w;
    }
    bool first = true;
    FOR_EACH_ENTRY(cmd, o) {
        if (o->kind == CLI_SECTION || first) fputc('\n', out);
        first = false;
        if (o->kind == CLI_SECTION) {
            fprintf(out, "%s\n", o->help);
            continue;
        }
        int w = format_names(names, sizeof names, o);
        format_default(dflt, sizeof dflt, o);
        snprintf(text, sizeof text, "%s%s", o->help ? o->help : "", dflt);
        fputs(names, out);
        if (!text[0]) {
            fputc('\n', out);
        } else if (w + 2 > column) {
            fputc('\n', out);
            print_wrapped(out, text, column, 0);
        } else {
            print_wrapped(out, text, column, w);
        }
    }
    if (cmd->footer) fprintf(out, "\n%s", cmd->footer);
}

/* One write: a reader that stops early (grep -q) takes the whole text from
 * the pipe before it closes, so the tool is not killed by SIGPIPE. */
void cli_help(FILE *out, const cli_command *cmd)
{
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    if (!mem) {
        write_help(out, cmd);
        return;
    }
    write_help(mem, cmd);
    fclose(mem);
    fflush(out);
    for (size_t done = 0; done < len;) {   /* stdio would split it at its buffer's size */
        ssize_t n = write(fileno(out), text + done, len - done);
        if (n <= 0) break;
        done += (size_t)n;
    }
    free(text);
}
