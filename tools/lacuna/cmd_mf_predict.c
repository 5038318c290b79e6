/* lacuna mf predict (RMSE/MAE, one prediction a line as LIBMF's mf-predict
 * writes them) and lacuna mf recommend (top-N unrated items per user). */
#include "cli.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void predict_usage(FILE *out)
{
    fprintf(out,
            "usage: lacuna mf predict [options] MODEL TEST [OUT]\n"
            "  OUT gets one predicted rating per line, in TEST's order.\n"
            "  Users or items the model has not seen get mu plus the biases known.\n"
            "  --format F   TEST's format (default auto)\n"
            "  --skip-bad   skip malformed lines (counted) instead of failing\n"
            "  --threads N\n"
            "  --json       {\"rmse\":..., \"mae\":..., \"count\":...} on stdout\n");
}

int cmd_mf_predict(int argc, char **argv)
{
    const char *cmd = "mf predict", *files[3];
    int nfiles = 0, json = 0;
    long long threads = 0;
    lac_ratings_read_params rp = lac_ratings_read_params_default();
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            predict_usage(stdout);
            return CLI_OK;
        }
        if (a[0] != '-' || !a[1]) {
            if (nfiles == 3) return cli_usage_error(cmd, "too many files ('%s'): MODEL TEST [OUT]", a);
            files[nfiles++] = a;
            continue;
        }
        if (!strcmp(a, "--json")) { json = 1; continue; }
        if (!strcmp(a, "--skip-bad")) { rp.skip_bad = 1; continue; }
        if (!v) return cli_usage_error(cmd, "%s needs a value", a);
        i++;
        if (!strcmp(a, "--format")) {
            if (lac_ratings_format_parse(v, &rp.format) < 0)
                return cli_usage_error(cmd, "unknown --format '%s' (auto, triples, movielens, udata, csv, mm)", v);
        } else if (!strcmp(a, "--threads")) {
            if (!cli_parse_int64(cmd, a, v, &threads) || threads < 0 || threads > 4096)
                return cli_usage_error(cmd, "--threads must be in [0, 4096]");
        } else {
            return cli_usage_error(cmd, "unknown option '%s' (see --help)", a);
        }
    }
    if (nfiles < 2) return cli_usage_error(cmd, "needs MODEL TEST [OUT] (see --help)");
    lac_ctx_t ctx;
    int rc = cli_make_context(cmd, "cpu", (int)threads, &ctx);
    if (rc) return rc;
    lac_mf_model_t model = NULL;
    lac_ratings_t test = NULL;
    float *pred = NULL;
    double rmse = NAN, mae = NAN;
    int64_t unknown = 0;
    lac_status st = lac_mf_model_load(ctx, files[0], &model);
    if (st == LAC_SUCCESS) st = lac_ratings_read(ctx, files[1], &rp, &test);
    if (st == LAC_SUCCESS) {
        pred = malloc((size_t)lac_ratings_count(test) * sizeof *pred);
        if (!pred) {
            fprintf(stderr, "lacuna %s: out of memory\n", cmd);
            rc = CLI_RUNTIME;
            goto done;
        }
        st = lac_mf_predict(ctx, model, test, pred, &rmse, &mae, &unknown);
    }
    if (st == LAC_SUCCESS && nfiles == 3) {
        lac_array v = lac_array_vector(pred, LAC_FLOAT32, lac_ratings_count(test));
        st = lac_text_save(ctx, files[2], &v);
    }
    if (st < 0) {
        rc = cli_status_error(cmd, ctx, st);
    } else if (json) {
        printf("{\"rmse\":%.6g,\"mae\":%.6g,\"count\":%lld,\"unknown\":%lld,\"skipped\":%lld}\n", rmse, mae,
               (long long)lac_ratings_count(test), (long long)unknown, (long long)lac_ratings_skipped(test));
    } else {
        printf("RMSE = %.4f, MAE = %.4f over %lld ratings", rmse, mae, (long long)lac_ratings_count(test));
        if (unknown) printf(" (%lld with a user or item the model has not seen)", (long long)unknown);
        printf("\n");
    }
done:
    free(pred);
    lac_ratings_destroy(&test);
    lac_mf_model_destroy(&model);
    lac_ctx_destroy(&ctx);
    return rc;
}

static void recommend_usage(FILE *out)
{
    fprintf(out,
            "usage: lacuna mf recommend [options] MODEL\n"
            "  Top-N items per user by predicted rating, leaving out what the user\n"
            "  rated in training. One line per recommendation: user item score.\n"
            "  --users ID,ID,...  these users (default: --all)\n"
            "  --all              every user of the model\n"
            "  -n N               items per user (default 10)\n"
            "  --threads N\n"
            "  --json             one JSON object per user\n");
}

int cmd_mf_recommend(int argc, char **argv)
{
    const char *cmd = "mf recommend", *model_path = NULL, *user_list = NULL;
    int json = 0;
    long long n = 10, threads = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            recommend_usage(stdout);
            return CLI_OK;
        }
        if (a[0] != '-' || !a[1]) {
            if (model_path) return cli_usage_error(cmd, "one MODEL, got '%s' and '%s'", model_path, a);
            model_path = a;
            continue;
        }
        if (!strcmp(a, "--json")) { json = 1; continue; }
        if (!strcmp(a, "--all")) { user_list = NULL; continue; }
        if (!v) return cli_usage_error(cmd, "%s needs a value", a);
        i++;
        if (!strcmp(a, "--users")) {
            user_list = v;
        } else if (!strcmp(a, "-n")) {
            if (!cli_parse_int64(cmd, a, v, &n) || n < 1 || n > 1000000) return cli_usage_error(cmd, "-n must be in [1, 1000000]");
        } else if (!strcmp(a, "--threads")) {
            if (!cli_parse_int64(cmd, a, v, &threads) || threads < 0 || threads > 4096)
                return cli_usage_error(cmd, "--threads must be in [0, 4096]");
        } else {
            return cli_usage_error(cmd, "unknown option '%s' (see --help)", a);
        }
    }
    if (!model_path) return cli_usage_error(cmd, "needs MODEL (see --help)");
    lac_ctx_t ctx;
    int rc = cli_make_context(cmd, "cpu", (int)threads, &ctx);
    if (rc) return rc;
    lac_mf_model_t model = NULL;
    int64_t *users = NULL, *items = NULL, count = 0;
    float *scores = NULL;
    char *list = NULL;
    lac_status st = lac_mf_model_load(ctx, model_path, &model);
    if (st < 0) {
        rc = cli_status_error(cmd, ctx, st);
        goto done;
    }
    if (user_list) {
        list = strdup(user_list);
        users = malloc((strlen(user_list) / 2 + 2) * sizeof *users);
        if (!list || !users) {
            rc = cli_usage_error(cmd, "out of memory");
            goto done;
        }
        for (char *save = NULL, *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            int64_t u = lac_mf_model_user_index(model, tok);
            if (u < 0) {
                rc = cli_usage_error(cmd, "user '%s' is not in the model", tok);
                goto done;
            }
            users[count++] = u;
        }
    } else {
        count = lac_mf_model_num_users(model);
        users = malloc((size_t)(count ? count : 1) * sizeof *users);
        if (!users) {
            rc = cli_usage_error(cmd, "out of memory");
            goto done;
        }
        for (int64_t u = 0; u < count; u++) users[u] = u;
    }
    items = malloc((size_t)(count ? count : 1) * (size_t)n * sizeof *items);
    scores = malloc((size_t)(count ? count : 1) * (size_t)n * sizeof *scores);
    if (!items || !scores) {
        rc = cli_usage_error(cmd, "out of memory for %lld x %lld recommendations", (long long)count, n);
        goto done;
    }
    st = lac_mf_recommend(ctx, model, count, users, n, items, scores);
    if (st < 0) {
        rc = cli_status_error(cmd, ctx, st);
        goto done;
    }
    for (int64_t i = 0; i < count; i++) {
        const char *uid = lac_mf_model_user_id(model, users[i]);
        if (json) printf("{\"user\":\"%s\",\"items\":[", uid);
        int first = 1;
        for (int64_t r = 0; r < n; r++) {
            int64_t j = items[i * n + r];
            if (j < 0) break;
            if (json) {
                printf("%s{\"item\":\"%s\",\"score\":%.4f}", first ? "" : ",", lac_mf_model_item_id(model, j),
                       scores[i * n + r]);
            } else {
                printf("%s\t%s\t%.4f\n", uid, lac_mf_model_item_id(model, j), scores[i * n + r]);
            }
            first = 0;
        }
        if (json) printf("]}\n");
    }
done:
    free(list);
    free(users);
    free(items);
    free(scores);
    lac_mf_model_destroy(&model);
    lac_ctx_destroy(&ctx);
    return rc;
}
