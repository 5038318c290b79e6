/* lacuna: the command-line tool. `lacuna <capability> [verb] [options] files…` */
#include "cli.h"

#include <string.h>

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} command;

static const command commands[] = {
    {"info", cmd_info, "version, build and the devices Lacuna sees"},
    {"map", cmd_map, "weights mapping: T[R[i]] op= w[i] * S[i]"},
    {"impute", cmd_impute, "convolutional imputation of graph-tensors (run, gen)"},
    {"mf", cmd_mf, "matrix factorisation for sparse ratings (gen, split, train, predict, recommend)"},
    {"report", cmd_report, "an HTML page of benchmark results (bench/*.jsonl)"},
};

static void usage(FILE *out)
{
    fprintf(out,
            "usage: lacuna <command> [options]\n"
            "\n"
            "Lacuna fills the gaps in big, incomplete graph and sparse data.\n"
            "\n"
            "commands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-8s %s\n", commands[i].name, commands[i].summary);
    fprintf(out,
            "\n"
            "`lacuna <command> --help` for a command's options.\n"
            "Exit status: 0 success, 1 runtime failure, 2 usage or input error.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return CLI_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return CLI_OK;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("lacuna %s\n", lac_version());
        return CLI_OK;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(argv[1], commands[i].name) == 0) return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "lacuna: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return CLI_USAGE;
}
