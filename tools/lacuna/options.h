/* The one option parser of the lacuna tool. A command declares its options in
 * tables (cli_opt: name, alias, kind, where the value goes, help) and hands
 * them to cli_parse, which reads the arguments, checks every value, collects
 * the positional arguments and prints the help text made from the tables.
 *
 * What cli_parse accepts, for every command alike:
 *   --name value, --name=value   (the value is the next argument whatever it
 *                                 looks like, so negative numbers need no '=')
 *   an alias (-t for --epochs)   the same option under another spelling
 *   --                           ends the options: the rest are positional
 *   -                            a positional argument, not an option
 *   --help, -h                   prints the help and returns CLI_HELP, wherever
 *                                it stands as an option (not as a value, not after
 *                                --), even after a mistake elsewhere on the line
 * and what it rejects, with "lacuna <command>: ..." on stderr and CLI_USAGE:
 * an unknown option, a missing value, a value given to a flag, a number with
 * trailing junk, out of range or (CLI_DOUBLE) not finite, a value outside the
 * option's range or choices, an option given twice that takes one value, and
 * too many or too few positional arguments.
 *
 * A table is an array of cli_opt ending with {0}, written
 *   {"--epochs", "-t", CLI_INT, &p.epochs, "N", .help = "at most N epochs", CLI_IN(1, 1000000)},
 * (the designated .help lets the fields after it be left out without a
 * warning). Tables are built where the variables live, so dest points at them. */
#ifndef LACUNA_TOOL_OPTIONS_H
#define LACUNA_TOOL_OPTIONS_H

#include <math.h>   /* INFINITY, for CLI_AT_LEAST and CLI_ABOVE */
#include <stdint.h>
#include <stdio.h>

typedef enum {
    CLI_END = 0,   /* ends a table: {0} */
    CLI_SECTION,   /* no option: a heading in the help (help = the heading) */
    CLI_FLAG,      /* int: takes no value; stores 1 (0 with .off); may be repeated */
    CLI_INT,       /* int: a decimal integer within int's range */
    CLI_INT64,     /* int64_t: a decimal integer */
    CLI_DOUBLE,    /* double: a finite number */
    CLI_NUMBER,    /* double: any number strtod reads, nan and inf included */
    CLI_STRING,    /* const char *: the argument itself */
    CLI_ENUM,      /* int: the index of the value in .choices */
    CLI_STRINGS,   /* cli_strings: every occurrence, in order */
} cli_kind;

/* Where CLI_STRINGS options collect their values. */
#define CLI_MAX_REPEATS 64
typedef struct {
    const char *values[CLI_MAX_REPEATS];
    int count;
} cli_strings;

/* .open: which ends of [min, max] are excluded. */
enum { CLI_OPEN_MIN = 1, CLI_OPEN_MAX = 2 };

typedef struct {
    const char *name;    /* as typed: "--source", "-k" */
    const char *alias;   /* another spelling ("-t" for "--epochs"), or NULL */
    cli_kind kind;
    void *dest;          /* the variable of the kind's type (see cli_kind) */
    const char *meta;    /* the value in the help ("FILE"); CLI_ENUM without one shows the choices */
    const char *help;    /* one paragraph ('\n' breaks a line), wrapped at 80 columns */
    /* Numbers: the accepted range when min < max, ends included unless .open
     * says otherwise (CLI_AT_LEAST, CLI_IN, CLI_ABOVE write it). */
    double min, max;
    int open;
    const char *const *choices;   /* CLI_ENUM: NULL-terminated */
    int off;                      /* CLI_FLAG: store 0 (for --no-X) */
    int show_default;             /* the help adds "(default X)" from *dest as it is before parsing */
    int seen;                     /* set by cli_parse: argv index of the last occurrence, 0: not given */
} cli_opt;

#define CLI_AT_LEAST(lo) .min = (lo), .max = INFINITY
#define CLI_ABOVE(lo) .min = (lo), .max = INFINITY, .open = CLI_OPEN_MIN
#define CLI_IN(lo, hi) .min = (lo), .max = (hi)

#define CLI_MAX_TABLES 4
typedef struct {
    const char *name;           /* "mf train": messages say "lacuna mf train: ..." */
    const char *usage;          /* after "usage: lacuna "; '\n' starts another usage line */
    const char *about;          /* printed as it is between the usage and the options, or NULL */
    cli_opt *tables[CLI_MAX_TABLES];   /* the option tables, each ending with {0}; unused ones NULL */
    const char *footer;         /* printed as it is after the options, or NULL */
    const char *args;           /* the positional arguments for messages ("TRAIN MODEL"), NULL: none */
    int min_args, max_args;     /* how many positional arguments it takes */
} cli_command;

/* Result of cli_parse besides CLI_OK (0) and CLI_USAGE (2): the help was
 * printed on stdout; the command should exit 0. */
enum { CLI_HELP = -1 };

/* Parses argv[1..argc-1] (argv[0] names the command) against cmd's tables:
 * stores each value through its option's dest, sets .seen, and puts the
 * positional arguments, in order, into args[0..*nargs-1] (room for
 * cmd->max_args; NULL when it takes none). Returns CLI_OK, CLI_HELP or
 * CLI_USAGE (after the message). Options are stored in the order given, so of
 * two options sharing a dest (--accelerate, --no-accelerate) the last wins. */
int cli_parse(const cli_command *cmd, int argc, char **argv, const char **args, int *nargs);

/* The help text: usage lines, about, every option of every table, footer. */
void cli_help(FILE *out, const cli_command *cmd);

/* The table entry for name (or alias) in cmd's tables, NULL if none: to ask
 * whether (->seen) or where an option was given. */
const cli_opt *cli_find(const cli_command *cmd, const char *name);

#endif
