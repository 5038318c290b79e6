/* lacuna mf: the verbs (gen, split, train, predict, recommend, evaluate, neighbours) and the two
 * data verbs, gen and split. Training is in cmd_mf_train.c, predict and
 * recommend in cmd_mf_predict.c. */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

int cmd_mf_train(int argc, char **argv);
int cmd_mf_predict(int argc, char **argv);
int cmd_mf_recommend(int argc, char **argv);
int cmd_mf_neighbours(int argc, char **argv);
int cmd_mf_evaluate(int argc, char **argv);
int cmd_mf_update(int argc, char **argv);

static void usage(FILE *out)
{
    fprintf(out,
            "usage: lacuna mf <verb> [options] files...\n"
            "\n"
            "Matrix factorisation of sparse ratings by SGD (CUSGD++ on CUDA).\n"
            "\n"
            "verbs:\n"
            "  gen [options] OUT                 generated ratings (MovieLens/Netflix shape)\n"
            "  split [options] IN TRAIN TEST     seeded holdout split\n"
            "  train [options] TRAIN MODEL       fit a model (LIBMF-like options)\n"
            "  predict [options] MODEL TEST [OUT]  RMSE/MAE on TEST, predictions to OUT\n"
            "  recommend [options] MODEL         top-N unrated items per user\n"
            "  evaluate [options] MODEL TEST     HR, NDCG, precision, recall, MAP at N\n"
            "  neighbours [options] TRAIN OUT    top-K similar items per item (simLSH, GSM, ...)\n"
            "  update [options] MODEL NEW OUT    fold new ratings (users, items) into a model\n"
            "\n"
            "`lacuna mf <verb> --help` for a verb's options. Formats read: triples\n"
            "(user item rating), MovieLens u::i::r::t, u.data, CSV with header, Matrix\n"
            "Market; see docs/mf.md.\n");
}

static const char *const shapes[] = {"small", "ml10m", "netflix", NULL};
enum { SHAPE_SMALL, SHAPE_ML10M, SHAPE_NETFLIX };   /* small: the library's defaults */
static const char *const star_kinds[] = {"whole", "half", NULL};   /* index = half_stars */

static int mf_gen(int argc, char **argv)
{
    const char *cmd = "mf gen", *out = NULL;
    lac_mf_gen_params p = lac_mf_gen_params_default();
    const char *formats[CLI_RATINGS_FORMATS + 1];
    cli_ratings_format_names(formats);
    int format = LAC_RATINGS_TRIPLES - 1;   /* an index into formats + 1: no "auto" when writing */
    int shape = SHAPE_SMALL, stars = -1, rank = -1, threads = 0;
    int64_t users = -1, items = -1, ratings = -1, seed = 1;
    double noise = -1;
    cli_opt options[] = {
        {"--shape", NULL, CLI_ENUM, &shape, NULL,
         .help = "preset sizes: small 1000 x 500, 50000 ratings; ml10m 69878 x 10677, 10M ratings, 0.5-5 stars; "
                 "netflix 480189 x 17770, 100M ratings, 1-5 stars",
         .choices = shapes, .show_default = 1},
        {"--users", NULL, CLI_INT64, &users, "N", .help = "override the preset's users", CLI_AT_LEAST(1)},
        {"--items", NULL, CLI_INT64, &items, "N", .help = "override the preset's items", CLI_AT_LEAST(2)},
        {"--ratings", NULL, CLI_INT64, &ratings, "N", .help = "override the preset's ratings", CLI_AT_LEAST(1)},
        {"--rank", NULL, CLI_INT, &rank, "R", .help = "true rank of the signal (default 10)", CLI_IN(1, 1024)},
        {"--noise", NULL, CLI_DOUBLE, &noise, "S", .help = "noise std. dev. (default 0.5)", CLI_AT_LEAST(0)},
        {"--clusters", NULL, CLI_INT, &p.item_clusters, "C",
         .help = "planted item neighbourhoods: item j in cluster j mod C, a user effect per cluster (default 0: none)",
         CLI_IN(0, 2147483647)},
        {"--cluster-strength", NULL, CLI_DOUBLE, &p.cluster_strength, "S",
         .help = "std. dev. of the per-user cluster effects", CLI_AT_LEAST(0), .show_default = 1},
        {"--stars", NULL, CLI_ENUM, &stars, NULL, .help = "1-5, or 0.5-5 in halves (default from the shape)",
         .choices = star_kinds},
        {"--seed", NULL, CLI_INT64, &seed, "S", .help = "random seed", .show_default = 1},
        {"--format", NULL, CLI_ENUM, &format, NULL, .help = "how OUT is written", .choices = formats + 1,
         .show_default = 1},
        {"--threads", NULL, CLI_INT, &threads, "N", .help = "CPU threads (default: all)", CLI_AT_LEAST(0)},
        {0},
    };
    const cli_command command = {
        .name = cmd,
        .usage = "mf gen [options] OUT",
        .about = "Writes generated ratings with the shape and skew of MovieLens or Netflix to OUT.\n",
        .tables = {options},
        .args = "OUT",
        .min_args = 1,
        .max_args = 1,
    };
    int rc = cli_parse(&command, argc, argv, &out, NULL);
    if (rc != CLI_OK) return rc == CLI_HELP ? CLI_OK : rc;
    if (shape == SHAPE_ML10M) p.users = 69878, p.items = 10677, p.ratings = 10000054, p.half_stars = 1;
    if (shape == SHAPE_NETFLIX) p.users = 480189, p.items = 17770, p.ratings = 100480507, p.half_stars = 0;
    /* The parser refuses negative sizes, rank and noise; -1 is "not given". */
    if (users >= 0) p.users = users;
    if (items >= 0) p.items = items;
    if (ratings >= 0) p.ratings = ratings;
    if (rank >= 0) p.rank = rank;
    if (noise >= 0) p.noise = noise;
    p.seed = (uint64_t)seed;
    if (stars >= 0) p.half_stars = stars;
    const char *why = lac_mf_gen_params_check(&p);
    if (why) return cli_usage_error(cmd, "%s", why);
    lac_ctx_t ctx;
    rc = cli_make_context(cmd, "cpu", threads, &ctx);
    if (rc) return rc;
    lac_ratings_t r = NULL;
    lac_status st = lac_mf_generate(ctx, &p, &r);
    if (st == LAC_SUCCESS) st = lac_ratings_write(ctx, out, (lac_ratings_format)(format + 1), r);
    if (st < 0) rc = cli_status_error(cmd, ctx, st);
    else rc = cli_commit_outputs(cmd, ctx);
    if (rc == CLI_OK) fprintf(stderr, "lacuna mf gen: %lld ratings of %lld users x %lld items to %s\n",
                 (long long)lac_ratings_count(r), (long long)p.users, (long long)p.items, out);
    lac_ratings_destroy(&r);
    lac_ctx_destroy(&ctx);
    return rc;
}

static int mf_split(int argc, char **argv)
{
    const char *cmd = "mf split", *files[3];
    lac_mf_split_params sp = lac_mf_split_params_default();
    cli_ratings_input in;
    cli_ratings_input_init(&in, "IN's format");
    int out_format = LAC_RATINGS_TRIPLES - 1;   /* an index into in.formats + 1: no "auto" when writing */
    int64_t seed = (int64_t)sp.seed;
    int pairs = 0;
    cli_opt options[] = {
        {"--fraction", NULL, CLI_DOUBLE, &sp.fraction, "F", .help = "share of the ratings for TEST", CLI_IN(0, 1),
         .open = CLI_OPEN_MIN | CLI_OPEN_MAX, .show_default = 1},
        {"--per-user", NULL, CLI_FLAG, &sp.per_user, NULL,
         .help = "that share of every user's ratings (users keep >= 1 in TRAIN)"},
        {"--leave-last", NULL, CLI_FLAG, &sp.leave_last, NULL,
         .help = "leave-one-out by time: each user's latest rating (4th field, the timestamp; ties and none: the "
                 "later line) to TEST, users with one rating keep it"},
        {"--seed", NULL, CLI_INT64, &seed, "S", .help = "random seed", .show_default = 1},
        {"--out-format", NULL, CLI_ENUM, &out_format, NULL, .help = "TRAIN's and TEST's format",
         .choices = in.formats + 1, .show_default = 1},
        {"--pairs", NULL, CLI_FLAG, &pairs, NULL,
         .help = "IN holds interactions: a 'user item' line (no rating) reads as rating 1, written so"},
        {0},
    };
    const cli_command command = {
        .name = cmd,
        .usage = "mf split [options] IN TRAIN TEST",
        .about = "Splits the ratings of IN into TRAIN and TEST, seeded.\n",
        .tables = {options, in.options},
        .args = "IN TRAIN TEST",
        .min_args = 3,
        .max_args = 3,
    };
    int rc = cli_parse(&command, argc, argv, files, NULL);
    if (rc != CLI_OK) return rc == CLI_HELP ? CLI_OK : rc;
    if (sp.leave_last && (cli_find(&command, "--per-user")->seen || cli_find(&command, "--fraction")->seen))
        return cli_usage_error(cmd, "--leave-last takes one rating per user: no --fraction or --per-user");
    const cli_file inputs[] = {{"IN", files[0]}}, outputs[] = {{"TRAIN", files[1]}, {"TEST", files[2]}};
    if ((rc = cli_check_files(cmd, inputs, 1, outputs, 2)) != CLI_OK) return rc;
    sp.seed = (uint64_t)seed;
    lac_ratings_read_params rp = cli_ratings_input_params(&in);
    rp.pairs = pairs;
    lac_ratings_format out = (lac_ratings_format)(out_format + 1);
    lac_ctx_t ctx;
    rc = cli_make_context(cmd, "cpu", 0, &ctx);
    if (rc) return rc;
    lac_ratings_t all = NULL, train = NULL, test = NULL;
    lac_status st = lac_ratings_read(ctx, files[0], &rp, &all);
    if (st == LAC_SUCCESS) st = lac_mf_split(ctx, &sp, all, &train, &test);
    if (st == LAC_SUCCESS) st = lac_ratings_write(ctx, files[1], out, train);
    if (st == LAC_SUCCESS) st = lac_ratings_write(ctx, files[2], out, test);
    if (st < 0) rc = cli_status_error(cmd, ctx, st);
    else rc = cli_commit_outputs(cmd, ctx);
    if (rc == CLI_OK) fprintf(stderr, "lacuna mf split: %lld ratings to %s, %lld to %s%s\n", (long long)lac_ratings_count(train),
                 files[1], (long long)lac_ratings_count(test), files[2],
                 lac_ratings_skipped(all) ? " (malformed lines skipped)" : "");
    lac_ratings_destroy(&all);
    lac_ratings_destroy(&train);
    lac_ratings_destroy(&test);
    lac_ctx_destroy(&ctx);
    return rc;
}

int cmd_mf(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return CLI_USAGE;
    }
    const char *verb = argv[1];
    if (!strcmp(verb, "--help") || !strcmp(verb, "-h") || !strcmp(verb, "help")) {
        usage(stdout);
        return CLI_OK;
    }
    if (!strcmp(verb, "gen")) return mf_gen(argc - 1, argv + 1);
    if (!strcmp(verb, "split")) return mf_split(argc - 1, argv + 1);
    if (!strcmp(verb, "train")) return cmd_mf_train(argc - 1, argv + 1);
    if (!strcmp(verb, "predict")) return cmd_mf_predict(argc - 1, argv + 1);
    if (!strcmp(verb, "recommend")) return cmd_mf_recommend(argc - 1, argv + 1);
    if (!strcmp(verb, "evaluate")) return cmd_mf_evaluate(argc - 1, argv + 1);
    if (!strcmp(verb, "neighbours") || !strcmp(verb, "neighbors")) return cmd_mf_neighbours(argc - 1, argv + 1);
    if (!strcmp(verb, "update")) return cmd_mf_update(argc - 1, argv + 1);
    fprintf(stderr, "lacuna mf: unknown verb '%s'\n\n", verb);
    usage(stderr);
    return CLI_USAGE;
}
