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

/* One user's line(s): its top items, or (popular) the most popular ones. */
static void print_user(const char *uid, lac_mf_model_t model, const int64_t *items, const float *scores,
                       const int64_t *counts, int64_t n, int json)
{
    cli_json line;
    if (json) {
        cli_json_begin(&line, stdout);
        cli_json_string(&line, "user", uid);
        if (counts) cli_json_bool(&line, "popular", true);
        cli_json_array(&line, "items");
    }
    for (int64_t r = 0; r < n; r++) {
        int64_t j = items[r];
        if (j < 0) break;
        if (json) {
            cli_json_object(&line, NULL);
            cli_json_string(&line, "item", lac_mf_model_item_id(model, j));
            if (counts) cli_json_int(&line, "ratings", counts[r]);
            else cli_json_real(&line, "score", scores[r], "%.4f");
            cli_json_close(&line);
        } else if (counts) {
            printf("%s\t%s\tpopular\n", uid, lac_mf_model_item_id(model, j));
        } else {
            printf("%s\t%s\t%.4f\n", uid, lac_mf_model_item_id(model, j), scores[r]);
        }
    }
    if (json) cli_json_end(&line);
}

/* --users ID,ID,...: each id without the spaces around it; -1 for an id
 * the model does not know. NULL after a message when an id is empty. */
static int parse_users(const char *cmd, lac_mf_model_t model, const char *text, char **list, int64_t **users,
                       const char ***ids, int64_t *count)
{
    *list = strdup(text);
    *users = malloc((strlen(text) / 2 + 2) * sizeof **users);
    *ids = malloc((strlen(text) / 2 + 2) * sizeof **ids);
    if (!*list || !*users || !*ids) return cli_usage_error(cmd, "out of memory");
    char *p = *list;
    for (;;) {
        char *comma = strchr(p, ','), *end = comma ? comma : p + strlen(p);
        while (*p == ' ' || *p == '\t') p++;
        while (end > p && (end[-1] == ' ' || end[-1] == '\t')) end--;
        *end = '\0';
        if (!*p) return cli_usage_error(cmd, "--users has an empty id (in '%s')", text);
        (*ids)[*count] = p;
        (*users)[(*count)++] = lac_mf_model_user_index(model, p);
        if (!comma) break;
        p = comma + 1;
    }
    return CLI_OK;
}

int cmd_mf_recommend(int argc, char **argv)
{
    const char *cmd = "mf recommend", *model_path = NULL, *user_list = NULL;
    int json = 0, all = 0, threads = 0, progress = 0;
    int64_t n = 10;
    cli_opt options[] = {
        {"--users", NULL, CLI_STRING, &user_list, "ID,ID,...",
         .help = "these users (default: --all); spaces around an id are dropped; a user the model does not know "
                 "gets the most popular items, marked 'popular'"},
        {"--all", NULL, CLI_FLAG, &all, NULL, .help = "every user of the model"},
        {"-n", NULL, CLI_INT64, &n, "N", .help = "items per user", CLI_IN(1, 1000000), .show_default = 1},
        {"--threads", NULL, CLI_INT, &threads, "N", .help = "CPU threads (default: all)", CLI_IN(0, 4096)},
        {"--json", NULL, CLI_FLAG, &json, NULL, .help = "one JSON object per user"},
        {"--progress", NULL, CLI_FLAG, &progress, NULL,
         .help = "users done so far on standard error even when it is not a terminal (a line each)"},
        {0},
    };
    const cli_command command = {
        .name = cmd,
        .usage = "mf recommend [options] MODEL",
        .about = "Top-N items per user by predicted rating, leaving out what the user rated in\n"
                 "training. One line per recommendation: user item score. A user the model\n"
                 "does not know gets the N items rated most often in training, with 'popular'\n"
                 "for the score (JSON: \"popular\":true and each item's \"ratings\").\n",
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
    cli_progress_enable(true);
    if (progress) cli_progress_force();
    lac_ctx_t ctx;
    rc = cli_make_context(cmd, "cpu", threads, &ctx);
    if (rc) return rc;
    enum { CHUNK = 4096 };   /* users a call: the output streams, progress between calls */
    lac_mf_model_t model = NULL;
    int64_t *users = NULL, *items = NULL, *known = NULL, *popular = NULL, *counts = NULL, count = 0, unknown = 0;
    const char **ids = NULL;
    float *scores = NULL;
    char *list = NULL;
    lac_status st = lac_mf_model_load(ctx, model_path, &model);
    if (st < 0) {
        rc = cli_status_error(cmd, ctx, st);
        goto done;
    }
    if (user_list) {
        if ((rc = parse_users(cmd, model, user_list, &list, &users, &ids, &count)) != CLI_OK) goto done;
    } else {
        count = lac_mf_model_num_users(model);
        users = malloc((size_t)(count ? count : 1) * sizeof *users);
        if (!users) {
            rc = cli_usage_error(cmd, "out of memory");
            goto done;
        }
        for (int64_t u = 0; u < count; u++) users[u] = u;
    }
    for (int64_t i = 0; i < count; i++) unknown += users[i] < 0;
    items = malloc((size_t)CHUNK * (size_t)n * sizeof *items);
    scores = malloc((size_t)CHUNK * (size_t)n * sizeof *scores);
    known = malloc((size_t)CHUNK * sizeof *known);
    popular = malloc((size_t)n * sizeof *popular);
    counts = malloc((size_t)n * sizeof *counts);
    if (!items || !scores || !known || !popular || !counts) {
        rc = cli_usage_error(cmd, "out of memory for %d x %lld recommendations", CHUNK, (long long)n);
        goto done;
    }
    if (unknown && (st = lac_mf_popular(ctx, model, n, popular, counts)) < 0) {
        rc = cli_status_error(cmd, ctx, st);
        goto done;
    }
    double t0 = cli_now();
    for (int64_t first = 0; first < count; first += CHUNK) {
        int64_t last = first + CHUNK < count ? first + CHUNK : count, nk = 0;
        for (int64_t i = first; i < last; i++)
            if (users[i] >= 0) known[nk++] = users[i];
        if ((st = lac_mf_recommend(ctx, model, nk, known, n, items, scores)) < 0) {
            rc = cli_status_error(cmd, ctx, st);
            goto done;
        }
        for (int64_t i = first, k = 0; i < last; i++) {
            if (users[i] < 0) {
                print_user(ids[i], model, popular, NULL, counts, n, json);
            } else {
                print_user(lac_mf_model_user_id(model, users[i]), model, items + k * n, scores + k * n, NULL, n, json);
                k++;
            }
        }
        if (count > CHUNK) cli_progress("%lld / %lld users, %.1f s", (long long)last, (long long)count, cli_now() - t0);
    }
    cli_progress_done();
    if (unknown)
        fprintf(stderr, "lacuna %s: %lld user%s not in the model: the %lld most popular items, marked 'popular'\n", cmd,
                (long long)unknown, unknown == 1 ? "" : "s", (long long)n);
done:
    free(list);
    free(ids);
    free(users);
    free(items);
    free(scores);
    free(known);
    free(popular);
    free(counts);
    lac_mf_model_destroy(&model);
    lac_ctx_destroy(&ctx);
    return rc;
}
