/* lacuna mf evaluate: ranking metrics (HR, NDCG, precision, recall, MAP at
 * n) of a model on test pairs, with NCF's sampled negatives or full ranking. */
#include "cli.h"
#include "json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int cmd_mf_evaluate(int argc, char **argv)
{
    const char *cmd = "mf evaluate", *files[2];
    int json = 0, threads = 0;
    int64_t seed = 1;
    lac_mf_rank_params p = lac_mf_rank_params_default();
    cli_ratings_input in;
    cli_ratings_input_init(&in, "TEST's format");
    cli_opt options[] = {
        {"-n", NULL, CLI_INT, &p.n, "N", .help = "the cut-off: metrics at N", CLI_IN(1, 1000000), .show_default = 1},
        {"--negatives", NULL, CLI_INT, &p.negatives, "M",
         .help = "rank each test item among M sampled items the user did not rate (Neural Collaborative "
                 "Filtering's leave-one-out protocol: 99); 0: full ranking of every item the user did not rate",
         CLI_IN(0, 100000000), .show_default = 1},
        {"--seed", NULL, CLI_INT64, &seed, "S", .help = "of the sampled negatives", .show_default = 1},
        {"--threads", NULL, CLI_INT, &threads, "N", .help = "CPU threads (default: all)", CLI_IN(0, 4096)},
        {"--json", NULL, CLI_FLAG, &json, NULL,
         .help = "{\"hr\":..., \"ndcg\":..., \"precision\":..., \"recall\":..., \"map\":..., \"users\":..., ...} on "
                 "stdout"},
        {0},
    };
    const cli_command command = {
        .name = cmd,
        .usage = "mf evaluate [options] MODEL TEST",
        .about = "Ranking metrics of MODEL on the (user, item) pairs of TEST, every one relevant\n"
                 "whatever its rating (a line may be just 'user item'): HR@N, NDCG@N, precision@N,\n"
                 "recall@N and MAP@N, the mean over users with a test item. Pairs of users or\n"
                 "items the model does not know, or rated in training, are skipped (counted).\n"
                 "`mf split --leave-last` makes the leave-one-out split by time.\n",
        .tables = {options, in.options},
        .args = "MODEL TEST",
        .min_args = 2,
        .max_args = 2,
    };
    int rc = cli_parse(&command, argc, argv, files, NULL);
    if (rc != CLI_OK) return rc == CLI_HELP ? CLI_OK : rc;
    const cli_file inputs[] = {{"MODEL", files[0]}, {"TEST", files[1]}};
    if ((rc = cli_check_files(cmd, inputs, 2, NULL, 0)) != CLI_OK) return rc;
    p.seed = (uint64_t)seed;
    lac_ratings_read_params rp = cli_ratings_input_params(&in);
    rp.pairs = 1;   /* every test pair is relevant whatever its rating: "user item" lines too */
    lac_ctx_t ctx;
    rc = cli_make_context(cmd, "cpu", threads, &ctx);
    if (rc) return rc;
    lac_mf_model_t model = NULL;
    lac_ratings_t test = NULL;
    lac_mf_rank_report r;
    lac_status st = lac_mf_model_load(ctx, files[0], &model);
    if (st == LAC_SUCCESS) st = lac_ratings_read(ctx, files[1], &rp, &test);
    if (st == LAC_SUCCESS) st = lac_mf_rank_evaluate(ctx, &p, model, test, &r);
    if (st < 0) {
        rc = cli_status_error(cmd, ctx, st);
    } else if (json) {
        cli_json j;
        cli_json_begin(&j, stdout);
        cli_json_real(&j, "hr", r.hr, "%.6g");
        cli_json_real(&j, "ndcg", r.ndcg, "%.6g");
        cli_json_real(&j, "precision", r.precision, "%.6g");
        cli_json_real(&j, "recall", r.recall, "%.6g");
        cli_json_real(&j, "map", r.map, "%.6g");
        cli_json_int(&j, "users", r.users);
        cli_json_int(&j, "n", p.n);
        cli_json_int(&j, "negatives", p.negatives);
        cli_json_int(&j, "pairs", r.pairs);
        cli_json_int(&j, "skipped", r.skipped + lac_ratings_skipped(test));
        cli_json_end(&j);
    } else {
        printf("HR@%d %.4f  NDCG@%d %.4f  precision@%d %.4f  recall@%d %.4f  MAP@%d %.4f  over %lld users (%s)\n",
               p.n, r.hr, p.n, r.ndcg, p.n, r.precision, p.n, r.recall, p.n, r.map, (long long)r.users,
               p.negatives ? "sampled negatives" : "full ranking");
        if (p.negatives) printf("each test item among %d sampled items the user did not rate\n", p.negatives);
        if (r.skipped) printf("%lld test pairs skipped (a user or item the model does not know, or rated in training)\n",
                              (long long)r.skipped);
    }
    lac_ratings_destroy(&test);
    lac_mf_model_destroy(&model);
    lac_ctx_destroy(&ctx);
    return rc;
}
