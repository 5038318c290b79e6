/* LIBMF's option spellings for mf train and mf predict (cli.h): what means
 * the same here is accepted, what lacuna does not do is refused with a
 * message that says so, and the one clash (LIBMF's -v is cross-validation
 * folds, lacuna's -v a validation file) is told apart by its argument. */
#include "cli.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

void cli_libmf_train_init(cli_libmf_train *t, lac_mf_params *p, int *threads)
{
    memset(t, 0, sizeof *t);
    t->params = p;
    cli_opt options[] = {
        {.kind = CLI_SECTION, .help = "LIBMF's mf-train spellings (-k, -t and --quiet above are LIBMF's too):"},
        {"-l2", NULL, CLI_STRING, &t->l2, "L[,L]", .help = "--l2 (one lambda for P and Q)"},
        {"-l1", NULL, CLI_STRING, &t->l1, "L[,L]", .help = "L1 terms: only 0 (LIBMF's default)"},
        {"-f", NULL, CLI_INT, &t->loss, "LOSS", .help = "loss: only 0, squared error (LIBMF's default)"},
        {"-r", NULL, CLI_DOUBLE, &p->alpha, "ETA", .help = "--alpha, the initial learning rate"},
        {"-s", NULL, CLI_INT, threads, "N", .help = "--threads", CLI_IN(0, 4096)},
        {"-p", NULL, CLI_STRING, &t->p, "P|FILE",
         .help = "a number: LSH codes per bucket key of the neighbourhood model (default 3); a file: --valid FILE"},
        {"-v", NULL, CLI_STRING, &t->v, "FILE", .help = "--valid FILE; LIBMF's -v FOLDS (cross-validation) is refused"},
        {"-n", NULL, CLI_INT, &t->bins, "BINS", .help = "accepted, not used (the grid has 2 x threads blocks a side)"},
        {"--disk", NULL, CLI_FLAG, &t->disk, NULL, .help = "accepted, not used (training data stays in memory)"},
        {"--nmf", NULL, CLI_FLAG, &t->nmf, NULL, .help = "refused: no non-negative factorisation"},
        {0},
    };
    memcpy(t->options, options, sizeof options);
}

/* "L" or "L,L" (P's, then Q's) into a and b; 0 when malformed. */
static int lambdas(const char *text, double *a, double *b)
{
    char *end;
    *a = strtod(text, &end);
    if (end == text) return 0;
    *b = *a;
    if (*end == ',') {
        const char *q = end + 1;
        *b = strtod(q, &end);
        if (end == q) return 0;
    }
    return *end == '\0' && *a >= 0 && *b >= 0 && *a == *a && *b == *b;
}

static int is_count(const char *s)
{
    if (!*s) return 0;
    for (; *s; s++)
        if (*s < '0' || *s > '9') return 0;
    return 1;
}

int cli_libmf_train_apply(cli_libmf_train *t, const char *cmd, const char **valid_path)
{
    double a, b;
    if (t->nmf) return cli_usage_error(cmd, "--nmf: lacuna has no non-negative factorisation (LIBMF's --nmf)");
    if (t->loss != 0)
        return cli_usage_error(cmd, "-f %d: lacuna fits squared error only (LIBMF's loss 0)", t->loss);
    if (t->l1) {
        if (!lambdas(t->l1, &a, &b)) return cli_usage_error(cmd, "-l1 '%s': expected L or L,L (numbers >= 0)", t->l1);
        if (a != 0 || b != 0)
            return cli_usage_error(cmd, "-l1 %s: lacuna has no L1 regularisation (only LIBMF's default, -l1 0)", t->l1);
    }
    if (t->l2) {
        if (!lambdas(t->l2, &a, &b)) return cli_usage_error(cmd, "-l2 '%s': expected L or L,L (numbers >= 0)", t->l2);
        if (a != b)
            return cli_usage_error(cmd, "-l2 %s: lacuna uses one lambda for P and Q; give one value", t->l2);
        t->params->lambda = a;
    }
    if (t->v && is_count(t->v)) {
        struct stat sb;
        if (stat(t->v, &sb) != 0)
            return cli_usage_error(cmd, "-v %s: LIBMF's -v is cross-validation folds, which lacuna does not run; "
                                   "lacuna's -v names a validation file (LIBMF's -p)", t->v);
    }
    if (t->p && is_count(t->p)) {   /* the paper's p, not LIBMF's -p FILE */
        long v = strtol(t->p, NULL, 10);
        if (v < 1 || v > 64) return cli_usage_error(cmd, "-p %s: LSH codes per bucket key must be in [1, 64]", t->p);
        t->params->neighbours.p = (int)v;
        t->p = NULL;
    }
    const char *given[3] = {*valid_path, t->p, t->v}, *names[3] = {"--valid", "-p", "-v"};
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < i; j++)
            if (given[i] && given[j])
                return cli_usage_error(cmd, "%s and %s both name validation ratings: give one", names[j], names[i]);
    if (t->p) *valid_path = t->p;
    if (t->v) *valid_path = t->v;
    return CLI_OK;
}

/* A file that starts as an mf model does. */
static int looks_like_model(const char *path)
{
    char head[8];
    FILE *fp = strcmp(path, "-") ? fopen(path, "rb") : NULL;
    size_t got = fp ? fread(head, 1, sizeof head, fp) : 0;
    if (fp) fclose(fp);
    return got == sizeof head && memcmp(head, "LACUNAMF", 8) == 0;
}

int cli_libmf_predict_order(const char *cmd, int criterion, const char **model, const char **test)
{
    if (criterion != 0 && criterion != 1)
        return cli_usage_error(cmd, "-e %d: lacuna reports RMSE (LIBMF's -e 0) and MAE (-e 1) only", criterion);
    if (!looks_like_model(*model) && looks_like_model(*test)) {   /* LIBMF's order: TEST MODEL OUT */
        const char *m = *test;
        *test = *model;
        *model = m;
    }
    return CLI_OK;
}
