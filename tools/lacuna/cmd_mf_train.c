/* lacuna mf train: LIBMF-like options, a progress line per epoch on a
 * terminal, a --json summary. */
#include "cli.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void train_usage(FILE *out)
{
    lac_mf_params d = lac_mf_params_default();
    fprintf(out,
            "usage: lacuna mf train [options] TRAIN MODEL\n"
            "  -k K             factors (default %d)\n"
            "  -l2 L            L2 regularisation of the factors (default %g)\n"
            "  --l2-bias L      of the biases (default %g)\n"
            "  -a ALPHA         initial learning rate, eq. (7) (default %g)\n"
            "  -b BETA          learning-rate decay alpha / (1 + beta t^1.5) (default %g)\n"
            "  -t, --epochs N   at most N epochs (default %d)\n"
            "  -v, --valid FILE validation ratings: RMSE each epoch, early stop, best kept\n"
            "  --patience N     epochs without gain before stopping (default %d)\n"
            "  --no-bias        plain u_i . v_j, no mu + b_i + bhat_j\n"
            "  --deterministic  identical models for a seed and thread count (CPU)\n"
            "  --seed S         (default %llu)\n"
            "  --threads N      CPU threads (default: all)\n"
            "  --device D       auto|cpu|cuda|cuda:N (default auto)\n"
            "  --format F       input format (default auto)\n"
            "  --skip-bad       skip malformed lines (counted) instead of failing\n"
            "  --json           one line of JSON on stdout\n"
            "  --quiet          no progress\n",
            d.k, d.lambda, d.lambda_bias, d.alpha, d.beta, d.epochs, d.patience, (unsigned long long)d.seed);
}

typedef struct {
    int epochs_max;
    int quiet;
} progress_state;

static int on_epoch(int epoch, double train_rmse, double valid_rmse, double seconds, void *user)
{
    const progress_state *s = user;
    if (s->quiet) return 0;
    if (isnan(valid_rmse))
        cli_progress("epoch %d/%d  train RMSE %.4f  %.2f s", epoch, s->epochs_max, train_rmse, seconds);
    else
        cli_progress("epoch %d/%d  train RMSE %.4f  valid RMSE %.4f  %.2f s", epoch, s->epochs_max, train_rmse,
                     valid_rmse, seconds);
    return 0;
}

static void json_number(const char *key, double v, int last)
{
    if (isfinite(v)) printf("\"%s\":%.6g%s", key, v, last ? "" : ",");
    else printf("\"%s\":null%s", key, last ? "" : ",");
}

int cmd_mf_train(int argc, char **argv)
{
    const char *cmd = "mf train", *files[2], *valid_path = NULL, *device = "auto";
    int nfiles = 0, json = 0, quiet = 0;
    long long threads = 0;
    lac_mf_params p = lac_mf_params_default();
    lac_ratings_read_params rp = lac_ratings_read_params_default();
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            train_usage(stdout);
            return CLI_OK;
        }
        if (a[0] != '-' || !a[1]) {
            if (nfiles == 2) return cli_usage_error(cmd, "too many files ('%s'): TRAIN MODEL", a);
            files[nfiles++] = a;
            continue;
        }
        if (!strcmp(a, "--no-bias")) { p.use_bias = 0; continue; }
        if (!strcmp(a, "--deterministic")) { p.deterministic = 1; continue; }
        if (!strcmp(a, "--json")) { json = 1; continue; }
        if (!strcmp(a, "--quiet")) { quiet = 1; continue; }
        if (!strcmp(a, "--skip-bad")) { rp.skip_bad = 1; continue; }
        if (!v) return cli_usage_error(cmd, "%s needs a value", a);
        i++;
        long long n;
        if (!strcmp(a, "-k")) {
            if (!cli_parse_int64(cmd, a, v, &n)) return CLI_USAGE;
            if (n < 1 || n > 4096) return cli_usage_error(cmd, "-k must be in [1, 4096]");
            p.k = (int)n;
        } else if (!strcmp(a, "-l2") || !strcmp(a, "--l2")) {
            if (!cli_parse_double(cmd, a, v, &p.lambda)) return CLI_USAGE;
        } else if (!strcmp(a, "--l2-bias")) {
            if (!cli_parse_double(cmd, a, v, &p.lambda_bias)) return CLI_USAGE;
        } else if (!strcmp(a, "-a") || !strcmp(a, "--alpha")) {
            if (!cli_parse_double(cmd, a, v, &p.alpha)) return CLI_USAGE;
        } else if (!strcmp(a, "-b") || !strcmp(a, "--beta")) {
            if (!cli_parse_double(cmd, a, v, &p.beta)) return CLI_USAGE;
        } else if (!strcmp(a, "-t") || !strcmp(a, "--epochs")) {
            if (!cli_parse_int64(cmd, a, v, &n)) return CLI_USAGE;
            if (n < 1 || n > 1000000) return cli_usage_error(cmd, "%s must be in [1, 1000000]", a);
            p.epochs = (int)n;
        } else if (!strcmp(a, "-v") || !strcmp(a, "--valid")) {
            valid_path = v;
        } else if (!strcmp(a, "--patience")) {
            if (!cli_parse_int64(cmd, a, v, &n)) return CLI_USAGE;
            if (n < 1 || n > 1000000) return cli_usage_error(cmd, "--patience must be >= 1");
            p.patience = (int)n;
        } else if (!strcmp(a, "--seed")) {
            if (!cli_parse_int64(cmd, a, v, &n)) return CLI_USAGE;
            p.seed = (uint64_t)n;
        } else if (!strcmp(a, "--threads")) {
            if (!cli_parse_int64(cmd, a, v, &threads) || threads < 0 || threads > 4096)
                return cli_usage_error(cmd, "--threads must be in [0, 4096]");
        } else if (!strcmp(a, "--device")) {
            device = v;
        } else if (!strcmp(a, "--format")) {
            if (lac_ratings_format_parse(v, &rp.format) < 0)
                return cli_usage_error(cmd, "unknown --format '%s' (auto, triples, movielens, udata, csv, mm)", v);
        } else {
            return cli_usage_error(cmd, "unknown option '%s' (see --help)", a);
        }
    }
    if (nfiles != 2) return cli_usage_error(cmd, "needs TRAIN MODEL (see --help)");
    const char *why = lac_mf_params_check(&p);
    if (why) return cli_usage_error(cmd, "%s", why);
    cli_progress_enable(!quiet);
    if (p.deterministic && !strcmp(device, "auto")) device = "cpu";   /* CUDA training is never bit-reproducible */

    lac_ctx_t ctx;
    int rc = cli_make_context(cmd, device, (int)threads, &ctx);
    if (rc) return rc;
    lac_ratings_t train = NULL, valid = NULL;
    lac_mf_model_t model = NULL;
    lac_mf_report rep;
    progress_state ps = {p.epochs, quiet};
    lac_status st = lac_ratings_read(ctx, files[0], &rp, &train);
    if (st == LAC_SUCCESS && valid_path) st = lac_ratings_read(ctx, valid_path, &rp, &valid);
    if (st == LAC_SUCCESS) st = lac_mf_train(ctx, &p, train, valid, on_epoch, &ps, &model, &rep);
    cli_progress_done();
    if (st == LAC_SUCCESS) st = lac_mf_model_save(ctx, files[1], model);
    if (st < 0) {
        rc = cli_status_error(cmd, ctx, st);
    } else if (json) {
        printf("{\"epochs\":%d,\"best_epoch\":%d,", rep.epochs, rep.best_epoch);
        json_number("seconds", rep.seconds, 0);
        json_number("train_rmse", rep.train_rmse, 0);
        json_number("valid_rmse", rep.valid_rmse, 0);
        printf("\"k\":%d,\"ratings\":%lld,\"users\":%lld,\"items\":%lld,\"duplicates\":%lld,\"skipped\":%lld,"
               "\"backend\":\"%s\"}\n",
               p.k, (long long)lac_ratings_count(train), (long long)lac_ratings_num_users(train),
               (long long)lac_ratings_num_items(train), (long long)rep.duplicates,
               (long long)(lac_ratings_skipped(train) + lac_ratings_skipped(valid)), cli_backend_name(ctx));
    } else if (!quiet) {
        printf("trained %d epochs (kept epoch %d) in %.2f s on %s: train RMSE %.4f", rep.epochs, rep.best_epoch,
               rep.seconds, cli_backend_name(ctx), rep.train_rmse);
        if (valid) printf(", valid RMSE %.4f", rep.valid_rmse);
        printf("\n");
        if (rep.duplicates) printf("%lld repeated (user, item) pairs: the last rating kept\n", (long long)rep.duplicates);
        if (lac_ratings_skipped(train) + lac_ratings_skipped(valid))
            printf("%lld malformed lines skipped\n", (long long)(lac_ratings_skipped(train) + lac_ratings_skipped(valid)));
    }
    lac_mf_model_destroy(&model);
    lac_ratings_destroy(&train);
    lac_ratings_destroy(&valid);
    lac_ctx_destroy(&ctx);
    return rc;
}
