/* lacuna mf: the verbs (gen, split, train, predict, recommend) and the two
 * data verbs, gen and split. Training is in cmd_mf_train.c, predict and
 * recommend in cmd_mf_predict.c. */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

int cmd_mf_train(int argc, char **argv);
int cmd_mf_predict(int argc, char **argv);
int cmd_mf_recommend(int argc, char **argv);

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
            "\n"
            "`lacuna mf <verb> --help` for a verb's options. Formats read: triples\n"
            "(user item rating), MovieLens u::i::r::t, u.data, CSV with header, Matrix\n"
            "Market; see docs/mf.md.\n");
}

static void gen_usage(FILE *out)
{
    fprintf(out,
            "usage: lacuna mf gen [options] OUT\n"
            "  --shape small|ml10m|netflix  preset sizes (default small: 1000 x 500, 50000)\n"
            "                               ml10m: 69878 x 10677, 10M ratings, 0.5-5 stars\n"
            "                               netflix: 480189 x 17770, 100M ratings, 1-5 stars\n"
            "  --users N --items N --ratings N   override the preset\n"
            "  --rank R        true rank of the signal (default 10)\n"
            "  --noise S       noise std. dev. (default 0.5)\n"
            "  --stars half|whole   0.5-5 in halves or 1-5 (default from the shape)\n"
            "  --seed S        (default 1)\n"
            "  --format F      triples|movielens|udata|csv|mm (default triples)\n"
            "  --threads N\n");
}

static int parse_format(const char *cmd, const char *text, lac_ratings_format *f)
{
    if (lac_ratings_format_parse(text, f) < 0)
        return cli_usage_error(cmd, "unknown format '%s' (auto, triples, movielens, udata, csv, mm)", text);
    return CLI_OK;
}

static int mf_gen(int argc, char **argv)
{
    const char *cmd = "mf gen", *out = NULL;
    lac_mf_gen_params p = lac_mf_gen_params_default();
    lac_ratings_format format = LAC_RATINGS_TRIPLES;
    long long users = -1, items = -1, ratings = -1, rank = -1, seed = 1, threads = 0;
    double noise = -1;
    const char *stars = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            gen_usage(stdout);
            return CLI_OK;
        }
        if (a[0] != '-' || !a[1]) {
            if (out) return cli_usage_error(cmd, "one output file, got '%s' and '%s'", out, a);
            out = a;
            continue;
        }
        if (!v) return cli_usage_error(cmd, "%s needs a value", a);
        i++;
        if (!strcmp(a, "--shape")) {
            if (!strcmp(v, "small")) {
                p = lac_mf_gen_params_default();
            } else if (!strcmp(v, "ml10m")) {
                p.users = 69878, p.items = 10677, p.ratings = 10000054, p.half_stars = 1;
            } else if (!strcmp(v, "netflix")) {
                p.users = 480189, p.items = 17770, p.ratings = 100480507, p.half_stars = 0;
            } else {
                return cli_usage_error(cmd, "unknown --shape '%s' (small, ml10m, netflix)", v);
            }
        } else if (!strcmp(a, "--users")) {
            if (!cli_parse_int64(cmd, a, v, &users)) return CLI_USAGE;
        } else if (!strcmp(a, "--items")) {
            if (!cli_parse_int64(cmd, a, v, &items)) return CLI_USAGE;
        } else if (!strcmp(a, "--ratings")) {
            if (!cli_parse_int64(cmd, a, v, &ratings)) return CLI_USAGE;
        } else if (!strcmp(a, "--rank")) {
            if (!cli_parse_int64(cmd, a, v, &rank)) return CLI_USAGE;
        } else if (!strcmp(a, "--noise")) {
            if (!cli_parse_double(cmd, a, v, &noise)) return CLI_USAGE;
        } else if (!strcmp(a, "--stars")) {
            stars = v;
        } else if (!strcmp(a, "--seed")) {
            if (!cli_parse_int64(cmd, a, v, &seed)) return CLI_USAGE;
        } else if (!strcmp(a, "--threads")) {
            if (!cli_parse_int64(cmd, a, v, &threads) || threads < 0) return cli_usage_error(cmd, "bad --threads");
        } else if (!strcmp(a, "--format")) {
            if (parse_format(cmd, v, &format)) return CLI_USAGE;
        } else {
            return cli_usage_error(cmd, "unknown option '%s' (see --help)", a);
        }
    }
    if (!out) return cli_usage_error(cmd, "missing the output file (see --help)");
    if (users >= 0) p.users = users;
    if (items >= 0) p.items = items;
    if (ratings >= 0) p.ratings = ratings;
    if (rank >= 0) p.rank = (int)rank;
    if (noise >= 0) p.noise = noise;
    p.seed = (uint64_t)seed;
    if (stars) {
        if (!strcmp(stars, "half")) p.half_stars = 1;
        else if (!strcmp(stars, "whole")) p.half_stars = 0;
        else return cli_usage_error(cmd, "--stars is half or whole, not '%s'", stars);
    }
    const char *why = lac_mf_gen_params_check(&p);
    if (why) return cli_usage_error(cmd, "%s", why);
    lac_ctx_t ctx;
    int rc = cli_make_context(cmd, "cpu", (int)threads, &ctx);
    if (rc) return rc;
    lac_ratings_t r = NULL;
    lac_status st = lac_mf_generate(ctx, &p, &r);
    if (st == LAC_SUCCESS) st = lac_ratings_write(ctx, out, format, r);
    if (st < 0) rc = cli_status_error(cmd, ctx, st);
    else fprintf(stderr, "lacuna mf gen: %lld ratings of %lld users x %lld items to %s\n",
                 (long long)lac_ratings_count(r), (long long)p.users, (long long)p.items, out);
    lac_ratings_destroy(&r);
    lac_ctx_destroy(&ctx);
    return rc;
}

static void split_usage(FILE *out)
{
    fprintf(out,
            "usage: lacuna mf split [options] IN TRAIN TEST\n"
            "  --fraction F    share of the ratings for TEST (default 0.1)\n"
            "  --per-user      that share of every user's ratings (users keep >= 1 in TRAIN)\n"
            "  --seed S        (default 1)\n"
            "  --format F      input format (default auto)\n"
            "  --out-format F  triples|movielens|udata|csv|mm (default triples)\n"
            "  --skip-bad      skip malformed input lines (counted) instead of failing\n");
}

static int mf_split(int argc, char **argv)
{
    const char *cmd = "mf split", *files[3];
    int nfiles = 0;
    lac_mf_split_params sp = lac_mf_split_params_default();
    lac_ratings_read_params rp = lac_ratings_read_params_default();
    lac_ratings_format out_format = LAC_RATINGS_TRIPLES;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            split_usage(stdout);
            return CLI_OK;
        }
        if (a[0] != '-' || !a[1]) {
            if (nfiles == 3) return cli_usage_error(cmd, "too many files ('%s'): IN TRAIN TEST", a);
            files[nfiles++] = a;
            continue;
        }
        if (!strcmp(a, "--per-user")) {
            sp.per_user = 1;
            continue;
        }
        if (!strcmp(a, "--skip-bad")) {
            rp.skip_bad = 1;
            continue;
        }
        if (!v) return cli_usage_error(cmd, "%s needs a value", a);
        i++;
        if (!strcmp(a, "--fraction")) {
            if (!cli_parse_double(cmd, a, v, &sp.fraction)) return CLI_USAGE;
            if (!(sp.fraction > 0 && sp.fraction < 1)) return cli_usage_error(cmd, "--fraction must be in (0, 1)");
        } else if (!strcmp(a, "--seed")) {
            long long s;
            if (!cli_parse_int64(cmd, a, v, &s)) return CLI_USAGE;
            sp.seed = (uint64_t)s;
        } else if (!strcmp(a, "--format")) {
            if (parse_format(cmd, v, &rp.format)) return CLI_USAGE;
        } else if (!strcmp(a, "--out-format")) {
            if (parse_format(cmd, v, &out_format) || out_format == LAC_RATINGS_AUTO)
                return cli_usage_error(cmd, "--out-format must be a concrete format");
        } else {
            return cli_usage_error(cmd, "unknown option '%s' (see --help)", a);
        }
    }
    if (nfiles != 3) return cli_usage_error(cmd, "needs IN TRAIN TEST (see --help)");
    lac_ctx_t ctx;
    int rc = cli_make_context(cmd, "cpu", 0, &ctx);
    if (rc) return rc;
    lac_ratings_t all = NULL, train = NULL, test = NULL;
    lac_status st = lac_ratings_read(ctx, files[0], &rp, &all);
    if (st == LAC_SUCCESS) st = lac_mf_split(ctx, &sp, all, &train, &test);
    if (st == LAC_SUCCESS) st = lac_ratings_write(ctx, files[1], out_format, train);
    if (st == LAC_SUCCESS) st = lac_ratings_write(ctx, files[2], out_format, test);
    if (st < 0) rc = cli_status_error(cmd, ctx, st);
    else fprintf(stderr, "lacuna mf split: %lld ratings to %s, %lld to %s%s\n", (long long)lac_ratings_count(train),
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
    fprintf(stderr, "lacuna mf: unknown verb '%s'\n\n", verb);
    usage(stderr);
    return CLI_USAGE;
}
