/* lacuna mf predict (RMSE/MAE, one prediction a line as LIBMF's mf-predict
 * writes them) and lacuna mf recommend (top-N unrated items per user). */
#include "cli.h"
#include "json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int cmd_mf_predict(int argc, char **argv)
{
    const char *cmd = "mf predict", *files[3];
    int nfiles = 0, json = 0, threads = 0, criterion = 0;
    cli_ratings_input in;
    cli_ratings_input_init(&in, "TEST's format");
    cli_opt options[] = {
        {"--threads", NULL, CLI_INT, &threads, "N", .help = "CPU threads (default: all)", CLI_IN(0, 4096)},
        {"--json", NULL, CLI_FLAG, &json, NULL,
         .help = "{\"rmse\":..., \"mae\":..., \"count\":..., \"unknown\":..., \"skipped\":...} on stdout"},
        {"-e", NULL, CLI_INT, &criterion, "0|1", .help = "LIBMF's criterion: 0 RMSE, 1 MAE (both are printed)"},
        {0},
    };
    const cli_command command = {
        .name = cmd,
        .usage = "mf predict [options] MODEL TEST [OUT]",
        .about = "RMSE and MAE of MODEL on the ratings in TEST. OUT gets one predicted rating per\n"
                 "line, in TEST's order. Users or items the model has not seen get mu plus the\n"
                 "biases known. LIBMF's order TEST MODEL OUT is accepted too (the model file\n"
                 "tells which is which). '-' as TEST reads standard input, as OUT writes\n"
                 "standard output; gzip files are read as they are.\n",
        .tables = {options, in.options},
        .args = "MODEL TEST [OUT]",
        .min_args = 2,
        .max_args = 3,
    };
    int rc = cli_parse(&command, argc, argv, files, &nfiles);
    if (rc != CLI_OK) return rc == CLI_HELP ? CLI_OK : rc;
    if ((rc = cli_libmf_predict_order(cmd, criterion, &files[0], &files[1])) != CLI_OK) return rc;
    const cli_file inputs[] = {{"MODEL", files[0]}, {"TEST", files[1]}}, outputs[] = {{"OUT", nfiles == 3 ? files[2] : NULL}};
    if ((rc = cli_check_files(cmd, inputs, 2, outputs, 1)) != CLI_OK) return rc;
    lac_ratings_read_params rp = cli_ratings_input_params(&in);
    FILE *say = nfiles == 3 && !strcmp(files[2], "-") ? stderr : stdout;   /* OUT has stdout */
    lac_ctx_t ctx;
    rc = cli_make_context(cmd, "cpu", threads, &ctx);
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
    } else if ((rc = cli_commit_outputs(cmd, ctx)) != CLI_OK) {
        /* the message is out; OUT is as it was */
    } else if (json) {
        cli_json j;
        cli_json_begin(&j, say);
        cli_json_real(&j, "rmse", rmse, "%.6g");
        cli_json_real(&j, "mae", mae, "%.6g");
        cli_json_int(&j, "count", lac_ratings_count(test));
        cli_json_int(&j, "unknown", unknown);
        cli_json_int(&j, "skipped", lac_ratings_skipped(test));
        cli_json_end(&j);
    } else {
        fprintf(say, "RMSE = %.4f, MAE = %.4f over %lld ratings", rmse, mae, (long long)lac_ratings_count(test));
        if (unknown) fprintf(say, " (%lld with a user or item the model has not seen)", (long long)unknown);
        fprintf(say, "\n");
    }
done:
    free(pred);
    lac_ratings_destroy(&test);
    lac_mf_model_destroy(&model);
    lac_ctx_destroy(&ctx);
    return rc;
}

int cmd_mf_recommend(int argc, char **argv)
{
    const char *cmd = "mf recommend", *model_path = NULL, *user_list = NULL;
    int json = 0, all = 0, threads = 0;
    int64_t n = 10;
    cli_opt options[] = {
        {"--users", NULL, CLI_STRING, &user_list, "ID,ID,...", .help = "these users (default: --all)"},
        {"--all", NULL, CLI_FLAG, &all, NULL, .help = "every user of the model"},
        {"-n", NULL, CLI_INT64, &n, "N", .help = "items per user", CLI_IN(1, 1000000), .show_default = 1},
        {"--threads", NULL, CLI_INT, &threads, "N", .help = "CPU threads (default: all)", CLI_IN(0, 4096)},
        {"--json", NULL, CLI_FLAG, &json, NULL, .help = "one JSON object per user"},
        {0},
    };
    const cli_command command = {
        .name = cmd,
        .usage = "mf recommend [options] MODEL",
        .about = "Top-N items per user by predicted rating, leaving out what the user rated in\n"
                 "training. One line per recommendation: user item score.\n",
        .tables = {options},
        .args = "MODEL",
        .min_args = 1,
        .max_args = 1,
    };
    int rc = cli_parse(&command, argc, argv, &model_path, NULL);
    if (rc != CLI_OK) return rc == CLI_HELP ? CLI_OK : rc;
    const cli_file inputs[] = {{"MODEL", model_path}};
    if ((rc = cli_check_files(cmd, inputs, 1, NULL, 0)) != CLI_OK) return rc;
    /* Of --users and --all, the one given last counts. */
    if (all && cli_find(&command, "--all")->seen > cli_find(&command, "--users")->seen) user_list = NULL;
    lac_ctx_t ctx;
    rc = cli_make_context(cmd, "cpu", threads, &ctx);
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
        rc = cli_usage_error(cmd, "out of memory for %lld x %lld recommendations", (long long)count, (long long)n);
        goto done;
    }
    st = lac_mf_recommend(ctx, model, count, users, n, items, scores);
    if (st < 0) {
        rc = cli_status_error(cmd, ctx, st);
        goto done;
    }
    for (int64_t i = 0; i < count; i++) {
        const char *uid = lac_mf_model_user_id(model, users[i]);
        cli_json line;
        if (json) {
            cli_json_begin(&line, stdout);
            cli_json_string(&line, "user", uid);
            cli_json_array(&line, "items");
        }
        for (int64_t r = 0; r < n; r++) {
            int64_t j = items[i * n + r];
            if (j < 0) break;
            if (json) {
                cli_json_object(&line, NULL);
                cli_json_string(&line, "item", lac_mf_model_item_id(model, j));
                cli_json_real(&line, "score", scores[i * n + r], "%.4f");
                cli_json_close(&line);
            } else {
                printf("%s\t%s\t%.4f\n", uid, lac_mf_model_item_id(model, j), scores[i * n + r]);
            }
        }
        if (json) cli_json_end(&line);
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
