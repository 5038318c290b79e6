/* lacuna mf update: new ratings folded into a trained model (online updates,
 * lac_mf_update), the time and the RMSE change reported. */
#include "cli.h"
#include "json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int cmd_mf_update(int argc, char **argv)
{
    const char *cmd = "mf update", *files[3], *valid_path = NULL;
    int json = 0, quiet = 0, threads = 0;
    lac_mf_update_params up = lac_mf_update_params_default();
    cli_ratings_input in;
    cli_ratings_input_init(&in, "the format of NEW_RATINGS and of --valid");
    cli_opt options[] = {
        {"--sweeps", NULL, CLI_INT, &up.sweeps, "N", .help = "SGD epochs over the touched rows after the solves",
         CLI_IN(0, 1000), .show_default = 1},
        {"--rounds", NULL, CLI_INT, &up.rounds, "N", .help = "closed-form solves of the new users, then the new items",
         CLI_IN(1, 100), .show_default = 1},
        {"--valid", NULL, CLI_STRING, &valid_path, "FILE", .help = "held-out ratings: their RMSE before and after"},
        {"--threads", NULL, CLI_INT, &threads, "N", .help = "CPU threads (default: all)", CLI_IN(0, 4096)},
        {"--json", NULL, CLI_FLAG, &json, NULL,
         .help = "{\"seconds\":..., \"ratings\":..., \"new_users\":..., \"new_items\":..., \"replaced\":..., "
                 "\"rmse_before\":..., \"rmse_after\":..., \"valid_rmse_before\":..., \"valid_rmse_after\":..., "
                 "\"users\":..., \"items\":...} on stdout"},
        {"--quiet", NULL, CLI_FLAG, &quiet, NULL, .help = "no summary"},
        {0},
    };
    const cli_command command = {
        .name = cmd,
        .usage = "mf update [options] MODEL NEW_RATINGS OUT_MODEL",
        .about = "Folds NEW_RATINGS (new users and items, or new ratings of known ones) into\n"
                 "MODEL without retraining and writes the result to OUT_MODEL (atomically;\n"
                 "OUT_MODEL may be MODEL). New rows are solved with the rest fixed, then a\n"
                 "few SGD sweeps run over the touched rows; the neighbourhood model's LSH\n"
                 "sums take the new ratings and new items get their neighbours among all\n"
                 "items. Prints the time and the RMSE on NEW_RATINGS (and --valid) before\n"
                 "and after.\n",
        .tables = {options, in.options},
        .args = "MODEL NEW_RATINGS OUT_MODEL",
        .min_args = 3,
        .max_args = 3,
    };
    int rc = cli_parse(&command, argc, argv, files, NULL);
    if (rc != CLI_OK) return rc == CLI_HELP ? CLI_OK : rc;
    /* OUT_MODEL may replace MODEL: it is read before anything is written */
    const cli_file inputs[] = {{"NEW_RATINGS", files[1]}, {"--valid", valid_path}},
                   outputs[] = {{"OUT_MODEL", files[2]}};
    if ((rc = cli_check_files(cmd, inputs, 2, outputs, 1)) != CLI_OK) return rc;
    const cli_file model_in[] = {{"MODEL", files[0]}};
    if ((rc = cli_check_files(cmd, model_in, 1, NULL, 0)) != CLI_OK) return rc;
    lac_ratings_read_params rp = cli_ratings_input_params(&in);
    lac_ctx_t ctx;
    rc = cli_make_context(cmd, "cpu", threads, &ctx);
    if (rc) return rc;
    lac_mf_model_t model = NULL, updated = NULL;
    lac_ratings_t fresh = NULL, valid = NULL;
    lac_mf_update_report rep;
    double vb = NAN, va = NAN;
    lac_status st = lac_mf_model_load(ctx, files[0], &model);
    if (st == LAC_SUCCESS) st = lac_ratings_read(ctx, files[1], &rp, &fresh);
    if (st == LAC_SUCCESS && valid_path) st = lac_ratings_read(ctx, valid_path, &rp, &valid);
    if (st == LAC_SUCCESS && valid) st = lac_mf_predict(ctx, model, valid, NULL, &vb, NULL, NULL);
    /* the loaded model is this command's own: updated in place, no copy */
    if (st == LAC_SUCCESS) st = lac_mf_update_in_place(ctx, &up, model, fresh, &rep);
    if (st == LAC_SUCCESS) {
        updated = model;
        model = NULL;
    }
    if (st == LAC_SUCCESS && valid) st = lac_mf_predict(ctx, updated, valid, NULL, &va, NULL, NULL);
    if (st == LAC_SUCCESS) st = lac_mf_model_save(ctx, files[2], updated);
    if (st < 0) {
        rc = cli_status_error(cmd, ctx, st);
    } else if ((rc = cli_commit_outputs(cmd, ctx)) != CLI_OK) {
        /* the message is out; OUT_MODEL is as it was */
    } else if (json) {
        cli_json j;
        cli_json_begin(&j, stdout);
        cli_json_real(&j, "seconds", rep.seconds, "%.6g");
        cli_json_int(&j, "ratings", rep.ratings);
        cli_json_int(&j, "new_users", rep.new_users);
        cli_json_int(&j, "new_items", rep.new_items);
        cli_json_int(&j, "replaced", rep.replaced);
        cli_json_real(&j, "rmse_before", rep.rmse_before, "%.6g");
        cli_json_real(&j, "rmse_after", rep.rmse_after, "%.6g");
        cli_json_real(&j, "valid_rmse_before", vb, "%.6g");
        cli_json_real(&j, "valid_rmse_after", va, "%.6g");
        cli_json_int(&j, "users", lac_mf_model_num_users(updated));
        cli_json_int(&j, "items", lac_mf_model_num_items(updated));
        cli_json_int(&j, "skipped", lac_ratings_skipped(fresh) + lac_ratings_skipped(valid));
        cli_json_end(&j);
    } else if (!quiet) {
        printf("updated in %.3f s: %lld ratings (%lld new users, %lld new items, %lld replaced); "
               "RMSE on them %.4f -> %.4f",
               rep.seconds, (long long)rep.ratings, (long long)rep.new_users, (long long)rep.new_items,
               (long long)rep.replaced, rep.rmse_before, rep.rmse_after);
        if (valid) printf("; valid RMSE %.4f -> %.4f", vb, va);
        printf("\n");
    }
    lac_mf_model_destroy(&model);
    lac_mf_model_destroy(&updated);
    lac_ratings_destroy(&fresh);
    lac_ratings_destroy(&valid);
    lac_ctx_destroy(&ctx);
    return rc;
}
