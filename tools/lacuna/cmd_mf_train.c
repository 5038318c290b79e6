/* lacuna mf train: LIBMF-like options, a progress line per epoch on a
 * terminal, a --json summary. */
#include "cli.h"
#include "json.h"
#include "plot.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int epochs_max;
    int quiet;
    cli_curve curve;   /* for --plot */
    FILE *log;         /* --log, written as training goes */
    int implicit;      /* train_rmse is the mean loss */
    double last_loss;
} progress_state;

static int on_epoch(int epoch, double train_rmse, double valid_rmse, double seconds, void *user)
{
    progress_state *s = user;
    cli_curve_add(&s->curve, (const double[CLI_MF_CURVE_WIDTH]){epoch, train_rmse, valid_rmse, seconds});
    if (s->log) {
        fprintf(s->log, "%d %.9g %.9g %.9g\n", epoch, train_rmse, valid_rmse, seconds);
        fflush(s->log);
    }
    s->last_loss = train_rmse;
    if (s->quiet) return 0;
    if (s->implicit)
        cli_progress("epoch %d/%d  loss %.4f  %.2f s", epoch, s->epochs_max, train_rmse, seconds);
    else if (isnan(valid_rmse))
        cli_progress("epoch %d/%d  train RMSE %.4f  %.2f s", epoch, s->epochs_max, train_rmse, seconds);
    else
        cli_progress("epoch %d/%d  train RMSE %.4f  valid RMSE %.4f  %.2f s", epoch, s->epochs_max, train_rmse,
                     valid_rmse, seconds);
    return 0;
}

/* What the search chooses: what the command line leaves open (LIBMF's
 * spellings count), for the plain model, without checkpoints. */
static int search_bits(const cli_command *c, int kind, int implicit, int off)
{
    if (off || kind != LAC_MF_MODEL_PLAIN) return 0;
    int bits = 0;
    if (implicit) {   /* lac_mf_tune: l2 and the correction (k and alpha as given) */
        if (!cli_find(c, "--l2")->seen && !cli_find(c, "-l2")->seen) bits |= LAC_MF_TUNE_LAMBDA;
        if (!cli_find(c, "--negative-correction")->seen) bits |= LAC_MF_TUNE_CORRECTION;
        return bits;
    }
    if (!cli_find(c, "-k")->seen) bits |= LAC_MF_TUNE_K;
    if (!cli_find(c, "--l2")->seen && !cli_find(c, "-l2")->seen) bits |= LAC_MF_TUNE_LAMBDA;
    if (!cli_find(c, "--alpha")->seen && !cli_find(c, "-r")->seen) bits |= LAC_MF_TUNE_ALPHA;
    return bits;
}

static const char *search_names(int bits)
{
    static const struct {
        int bit;
        const char *name;
    } names[] = {{LAC_MF_TUNE_K, "k"},
                 {LAC_MF_TUNE_LAMBDA, "l2"},
                 {LAC_MF_TUNE_ALPHA, "alpha"},
                 {LAC_MF_TUNE_CORRECTION, "negative correction"}};
    static char text[64];
    size_t at = 0;
    text[0] = 0;
    for (int x = 0; x < 4; x++)
        if (bits & names[x].bit)
            at += (size_t)snprintf(text + at, sizeof text - at, "%s%s", at ? ", " : "", names[x].name);
    return text;
}

/* What was chosen and why: the held-out RMSE against the starting values'. */
static void print_search(const lac_mf_params *p, const lac_mf_tune_report *t)
{
    if (!t->searched) {
        printf("too few ratings to hold some out: the defaults as they are\n");
        return;
    }
    if (p->implicit) {
        printf("chose l2 %g, negative correction %g: held-out NDCG@10 %.4f against %.4f with the defaults (%d trials "
               "on %lld held-out interactions, %.2f s; --l2, --negative-correction fix them, --no-search keeps the "
               "defaults)\n",
               p->lambda, p->negative_correction, t->ndcg, t->start_ndcg, t->trials, (long long)t->holdout, t->seconds);
        return;
    }
    printf("chose k %d, l2 %g, alpha %g, %d epochs: held-out RMSE %.4f against %.4f with the defaults (%d trials on "
           "%lld held-out ratings, %.2f s; -k, --l2, --alpha fix them, --no-search keeps the defaults)\n",
           p->k, p->lambda, p->alpha, p->epochs, t->rmse, t->start_rmse, t->trials, (long long)t->holdout, t->seconds);
}

static void json_search(cli_json *j, const lac_mf_params *p, const lac_mf_tune_report *t)
{
    cli_json_object(j, "search");
    cli_json_array(j, "searched");
    if (t->searched & LAC_MF_TUNE_K) cli_json_string(j, NULL, "k");
    if (t->searched & LAC_MF_TUNE_LAMBDA) cli_json_string(j, NULL, "l2");
    if (t->searched & LAC_MF_TUNE_ALPHA) cli_json_string(j, NULL, "alpha");
    if (t->searched & LAC_MF_TUNE_CORRECTION) cli_json_string(j, NULL, "negative_correction");
    cli_json_close(j);
    if (p->implicit) {
        cli_json_real(j, "negative_correction", p->negative_correction, "%.6g");
        cli_json_real(j, "holdout_ndcg", t->ndcg, "%.6g");
        cli_json_real(j, "default_ndcg", t->start_ndcg, "%.6g");
    }
    cli_json_int(j, "k", p->k);
    cli_json_real(j, "l2", p->lambda, "%.6g");
    cli_json_real(j, "alpha", p->alpha, "%.6g");
    cli_json_int(j, "epochs", p->epochs);
    cli_json_int(j, "holdout", t->holdout);
    cli_json_real(j, "holdout_rmse", t->rmse, "%.6g");
    cli_json_real(j, "default_rmse", t->start_rmse, "%.6g");
    cli_json_int(j, "trials", t->trials);
    cli_json_real(j, "seconds", t->seconds, "%.6g");
    cli_json_close(j);
}

static const char *const models[] = {"plain", "neighbourhood", NULL};
static const char *const methods[] = {"simlsh", "gsm", "rpcos", "minhash", "random", "simlsh-centred", NULL};
static const char *const losses[] = {"xent", "bpr", NULL};   /* lac_mf_loss order */

int cmd_mf_train(int argc, char **argv)
{
    const char *cmd = "mf train", *files[2], *valid_path = NULL, *device = "auto", *log_path = NULL, *plot_path = NULL;
    int json = 0, quiet = 0, threads = 0, no_search = 0, progress = 0;
    lac_mf_params p = lac_mf_params_default();
    lac_mf_checkpoint_params ck = lac_mf_checkpoint_params_default();
    cli_ratings_input in;
    cli_ratings_input_init(&in, "the format of TRAIN and of --valid");
    int64_t seed = (int64_t)p.seed;
    int kind = LAC_MF_MODEL_PLAIN, method = (int)p.neighbours.method;
    cli_libmf_train libmf;
    cli_libmf_train_init(&libmf, &p, &threads);
    /* short spellings beside the long ones; LIBMF's others (and -p) in libmf's table */
    cli_opt options[] = {
        {"-k", NULL, CLI_INT, &p.k, "K", .help = "factors", CLI_IN(1, 4096), .show_default = 1},
        {"--l2", NULL, CLI_DOUBLE, &p.lambda, "L", .help = "L2 regularisation of the factors", .show_default = 1},
        {"--l2-bias", NULL, CLI_DOUBLE, &p.lambda_bias, "L", .help = "of the biases", .show_default = 1},
        {"--alpha", "-a", CLI_DOUBLE, &p.alpha, "ALPHA", .help = "initial learning rate, eq. (7)", .show_default = 1},
        {"--beta", "-b", CLI_DOUBLE, &p.beta, "BETA", .help = "learning-rate decay alpha / (1 + beta t^1.5)",
         .show_default = 1},
        {"--epochs", "-t", CLI_INT, &p.epochs, "N", .help = "at most N epochs", CLI_IN(1, 1000000), .show_default = 1},
        {"--valid", NULL, CLI_STRING, &valid_path, "FILE",
         .help = "validation ratings: RMSE each epoch, early stop, best kept"},
        {"--patience", NULL, CLI_INT, &p.patience, "N", .help = "epochs without gain before stopping",
         CLI_IN(1, 1000000), .show_default = 1},
        {"--no-bias", NULL, CLI_FLAG, &p.use_bias, NULL, .help = "plain u_i . v_j, no mu + b_i + bhat_j", .off = 1},
        {"--model", NULL, CLI_ENUM, &kind, NULL,
         .help = "plain (CUSGD++) or neighbourhood (CULSH-MF, eq. 1: per-group rates of the paper's Table 5; "
                 "alpha, beta, l2 are the plain model's)",
         .choices = models, .show_default = 1},
        {"--neighbours", NULL, CLI_ENUM, &method, NULL, .help = "neighbourhood model: how S^K(j) is found",
         .choices = methods, .show_default = 1},
        {"-K", NULL, CLI_INT, &p.neighbours.k, "K", .help = "neighbourhood model: neighbours per item", CLI_IN(1, 1024),
         .show_default = 1},
        {"-q", NULL, CLI_INT, &p.neighbours.q, "Q", .help = "LSH bucket keys per item", CLI_IN(1, 100000),
         .show_default = 1},
        {"--warm-epochs", NULL, CLI_INT, &p.warm_epochs, "N",
         .help = "neighbourhood model: up to N plain epochs first (W = C = 0; stop when one gains < 0.1% on --valid)",
         CLI_IN(0, 1000000), .show_default = 1},
        {"--implicit", NULL, CLI_FLAG, &p.implicit, NULL,
         .help = "implicit feedback: every rating is an interaction (seen; 'user item' lines too), unseen items "
                 "are sampled negatives; "
                 "r_hat is a logit (CPU)"},
        {"--loss", NULL, CLI_ENUM, &p.loss, NULL,
         .help = "--implicit: cross-entropy with sampled negatives, or BPR (one negative per interaction)",
         .choices = losses, .show_default = 1},
        {"--negatives", NULL, CLI_INT, &p.negatives, "N",
         .help = "--implicit, xent: negatives per interaction (on one GPU the plain model's are the warp's other "
                 "items at the same step, weighted to N and to the law below; docs/mf.md)",
         CLI_IN(1, 1000), .show_default = 1},
        {"--negative-share", NULL, CLI_INT, &p.negative_share, "B",
         .help = "--implicit, xent: B interactions of a user (items ascending) share one draw of negatives, each "
                 "scored once with weight B (1: every interaction its own)",
         CLI_IN(1, 64), .show_default = 1},
        {"--negative-exponent", NULL, CLI_DOUBLE, &p.negative_exponent, "E",
         .help = "--implicit: negatives drawn with probability proportional to (the item's interactions)^E, in "
                 "[0, 2] (0: uniform; default 0.75 for the plain model, 0 for the neighbourhood model)"},
        {"--negative-correction", NULL, CLI_DOUBLE, &p.negative_correction, "C",
         .help = "--implicit: after training the item biases take C x E x log(interactions), in [0, 1] (1: rank "
                 "with the popularity the draws took out; 0: the logits as trained); default: 0 or 1, chosen on "
                 "held-out interactions (1 with --no-search)"},
        {"--weighted", NULL, CLI_FLAG, &p.weighted, NULL,
         .help = "--implicit: the rating column is the interaction's weight (> 0), not just seen"},
        {"--deterministic", NULL, CLI_FLAG, &p.deterministic, NULL,
         .help = "identical models for a seed and thread count (CPU)"},
        {"--seed", NULL, CLI_INT64, &seed, "S", .help = "random seed", .show_default = 1},
        {"--threads", NULL, CLI_INT, &threads, "N", .help = "CPU threads (default: all)", CLI_IN(0, 4096)},
        {"--device", NULL, CLI_STRING, &device, "D", .help = "auto|cpu|cuda|cuda:N", .show_default = 1},
        {"--checkpoint", NULL, CLI_STRING, &ck.path, "FILE",
         .help = "training state written atomically to FILE every N epochs and after the last"},
        {"--checkpoint-every", NULL, CLI_INT, &ck.every, "N", .help = "epochs between checkpoints",
         CLI_IN(1, 1000000), .show_default = 1},
        {"--resume", NULL, CLI_FLAG, &ck.resume, NULL,
         .help = "go on from --checkpoint FILE up to --epochs in all (same data and options)"},
        {"--no-search", NULL, CLI_FLAG, &no_search, NULL,
         .help = "train with the defaults as they are; without it, k, --l2 and --alpha not given are chosen "
                 "on 10% of TRAIN held out (plain model; --implicit: --l2 and --negative-correction, on 10% of "
                 "each user's interactions)"},
        {"--json", NULL, CLI_FLAG, &json, NULL, .help = "one line of JSON on stdout"},
        {"--quiet", NULL, CLI_FLAG, &quiet, NULL, .help = "no progress"},
        {"--progress", NULL, CLI_FLAG, &progress, NULL,
         .help = "progress even when standard error is not a terminal (a line each, for logs and notebooks)"},
        {"--log", NULL, CLI_STRING, &log_path, "FILE",
         .help = "a header, then one line per epoch as training goes: epoch train_rmse valid_rmse seconds (NaN "
                 "without --valid)"},
        {"--plot", NULL, CLI_STRING, &plot_path, "FILE.svg", .help = "the RMSE by epoch and by time, as an SVG picture"},
        {0},
    };
    const cli_command command = {
        .name = cmd,
        .usage = "mf train [options] TRAIN [MODEL]",
        .about = "Fits a factor model to the ratings in TRAIN by SGD and writes it to MODEL\n"
                 "(default: TRAIN's file name + .model, as LIBMF's mf-train). '-' as TRAIN or\n"
                 "--valid reads standard input; gzip files are read as they are.\n",
        .tables = {options, in.options, libmf.options},
        .args = "TRAIN [MODEL]",
        .min_args = 1,
        .max_args = 2,
    };
    int nfiles = 0;
    char default_model[4096];
    int rc = cli_parse(&command, argc, argv, files, &nfiles);
    if (rc != CLI_OK) return rc == CLI_HELP ? CLI_OK : rc;
    if ((rc = cli_libmf_train_apply(&libmf, cmd, &valid_path)) != CLI_OK) return rc;
    if (nfiles == 1) {   /* LIBMF's default model name, in the working folder */
        const char *base = strrchr(files[0], '/') ? strrchr(files[0], '/') + 1 : files[0];
        if (!strcmp(files[0], "-") || !*base) return cli_usage_error(cmd, "give MODEL when TRAIN is '%s'", files[0]);
        snprintf(default_model, sizeof default_model, "%s.model", base);
        files[1] = default_model;
    }
    if (ck.resume && !ck.path) return cli_usage_error(cmd, "--resume needs --checkpoint FILE");
    if (p.warm_epochs && kind != LAC_MF_MODEL_NEIGHBOURHOOD)
        return cli_usage_error(cmd, "--warm-epochs is for --model neighbourhood");
    if (p.implicit && valid_path)
        return cli_usage_error(cmd, "--implicit takes no --valid (hold interactions out and rank them instead)");
    if (!p.implicit && (cli_find(&command, "--loss")->seen || cli_find(&command, "--negatives")->seen ||
                        cli_find(&command, "--weighted")->seen || cli_find(&command, "--negative-share")->seen ||
                        cli_find(&command, "--negative-exponent")->seen ||
                        cli_find(&command, "--negative-correction")->seen))
        return cli_usage_error(cmd, "--loss, --negatives, --negative-share, --negative-exponent, "
                                    "--negative-correction and --weighted go with --implicit");
    if (p.implicit) {   /* the logistic losses want a slower decay and, for eq. (1), larger rates (docs/mf.md) */
        if (!cli_find(&command, "--beta")->seen) p.beta = 0.1;
        p.rates = (lac_mf_groups){0.2, 0.2, 0.2, 0.2, 0.02, 0.02};
        p.beta_groups = 0.1;
    }
    if (ck.path && !strcmp(ck.path, "-")) return cli_usage_error(cmd, "--checkpoint must name a file, not -");
    const cli_file inputs[] = {{"TRAIN", files[0]}, {"--valid", valid_path}},
                   outputs[] = {{"MODEL", files[1]}, {"--log", log_path}, {"--plot", plot_path}, {"--checkpoint", ck.path}};
    if ((rc = cli_check_files(cmd, inputs, 2, outputs, 4)) != CLI_OK) return rc;
    p.seed = (uint64_t)seed;
    p.model = kind;
    p.neighbours.method = (lac_mf_nbr_method)method;
    p.neighbours.seed = (uint64_t)seed;
    lac_ratings_read_params rp = cli_ratings_input_params(&in);
    rp.pairs = p.implicit;   /* interactions may come as "user item" lines */
    const char *why = lac_mf_params_check(&p);
    if (why) return cli_usage_error(cmd, "%s", why);
    cli_progress_enable(!quiet);
    if (progress && !quiet) cli_progress_force();
    if (p.deterministic && !strcmp(device, "auto")) device = "cpu";   /* CUDA training is never bit-reproducible */

    lac_ctx_t ctx;
    rc = cli_make_context(cmd, device, threads, &ctx);
    if (rc) return rc;
    lac_ratings_t train = NULL, valid = NULL;
    lac_mf_model_t model = NULL;
    lac_mf_report rep;
    lac_mf_tune_report tuned;
    memset(&tuned, 0, sizeof tuned);
    lac_mf_tune_params tp = lac_mf_tune_params_default();
    tp.search = search_bits(&command, kind, p.implicit, no_search || ck.path);
    tp.seed = (uint64_t)seed;
    lac_status st = lac_ratings_read(ctx, files[0], &rp, &train);
    if (st == LAC_SUCCESS && valid_path) st = lac_ratings_read(ctx, valid_path, &rp, &valid);
    if (st == LAC_SUCCESS && tp.search) {
        cli_progress("choosing %s on %g%% of TRAIN held out ...", search_names(tp.search), 100 * tp.holdout);
        st = lac_mf_tune(ctx, &tp, &p, train, &tuned);
        cli_progress_done();
    }
    progress_state ps = {p.epochs, quiet, {.width = CLI_MF_CURVE_WIDTH}, NULL, p.implicit, NAN};
    /* over MPI ranks rank 0 writes the log (every rank sees the same epochs) */
    if (st == LAC_SUCCESS && log_path && lac_ctx_rank(ctx) == 0 &&
        !(ps.log = !strcmp(log_path, "-") ? stdout : fopen(log_path, "w"))) {
        fprintf(stderr, "lacuna %s: cannot write --log %s: %s\n", cmd, log_path, strerror(errno));
        rc = CLI_RUNTIME;
        goto cleanup;
    }
    if (ps.log) {
        if (tp.search && p.implicit)
            fprintf(ps.log, "# chose l2 %g, negative correction %g (held-out NDCG@10 %.6g, %.6g with the defaults)\n",
                    p.lambda, p.negative_correction, tuned.ndcg, tuned.start_ndcg);
        else if (tp.search)
            fprintf(ps.log, "# chose k %d, l2 %g, alpha %g, %d epochs (held-out RMSE %.6g, %.6g with the defaults)\n",
                    p.k, p.lambda, p.alpha, p.epochs, tuned.rmse, tuned.start_rmse);
        fprintf(ps.log, p.implicit ? "# epoch mean_loss valid_rmse seconds\n" : "# epoch train_rmse valid_rmse seconds\n");
        fflush(ps.log);
    }
    if (st == LAC_SUCCESS) st = lac_mf_train_checkpointed(ctx, &p, &ck, train, valid, on_epoch, &ps, &model, &rep);
    cli_progress_done();
    if (st == LAC_SUCCESS) st = lac_mf_model_save(ctx, files[1], model);
    if (st < 0) {
        rc = cli_status_error(cmd, ctx, st);
    } else if (plot_path && (rc = cli_plot_mf_train(cmd, ctx, plot_path, ps.curve.rows, ps.curve.count)) != CLI_OK) {
        /* the message is out; no file is written */
    } else if ((rc = cli_commit_outputs(cmd, ctx)) != CLI_OK) {
        /* the message is out; the model file is as it was */
    } else if (json) {
        cli_json j;
        cli_json_begin(&j, stdout);
        cli_json_int(&j, "epochs", rep.epochs);
        cli_json_int(&j, "best_epoch", rep.best_epoch);
        cli_json_real(&j, "seconds", rep.seconds, "%.6g");
        cli_json_real(&j, "train_rmse", rep.train_rmse, "%.6g");
        cli_json_real(&j, "valid_rmse", rep.valid_rmse, "%.6g");
        cli_json_int(&j, "k", p.k);
        cli_json_string(&j, "model", models[kind]);
        if (kind == LAC_MF_MODEL_NEIGHBOURHOOD) {
            cli_json_string(&j, "neighbours", methods[method]);
            cli_json_int(&j, "K", p.neighbours.k);
            cli_json_int(&j, "warm_epochs", rep.warm_epochs);
            cli_json_real(&j, "warm_seconds", rep.warm_seconds, "%.6g");
        }
        if (p.implicit) {
            cli_json_string(&j, "loss", losses[p.loss]);
            if (p.loss == LAC_MF_LOSS_XENT) {
                cli_json_int(&j, "negatives", p.negatives);
                cli_json_int(&j, "negative_share", p.negative_share);
            }
            cli_json_real(&j, "negative_exponent", lac_mf_model_params(model).negative_exponent, "%.6g");
            cli_json_real(&j, "negative_correction", p.negative_correction, "%.6g");
            cli_json_real(&j, "train_loss", ps.last_loss, "%.6g");
        }
        cli_json_int(&j, "ratings", lac_ratings_count(train));
        cli_json_int(&j, "users", lac_ratings_num_users(train));
        cli_json_int(&j, "items", lac_ratings_num_items(train));
        cli_json_int(&j, "duplicates", rep.duplicates);
        cli_json_int(&j, "skipped", lac_ratings_skipped(train) + lac_ratings_skipped(valid));
        cli_json_string(&j, "backend", cli_backend_name(ctx));
        if (tp.search) json_search(&j, &p, &tuned);
        cli_json_end(&j);
    } else if (!quiet) {
        if (tp.search) print_search(&p, &tuned);
        if (p.implicit)
            printf("trained %d epochs in %.2f s on %s (implicit, %s): mean loss %.4f", rep.epochs, rep.seconds,
                   cli_backend_name(ctx), losses[p.loss], ps.last_loss);
        else
            printf("trained %d epochs (kept epoch %d) in %.2f s on %s: train RMSE %.4f", rep.epochs, rep.best_epoch,
                   rep.seconds, cli_backend_name(ctx), rep.train_rmse);
        if (valid) printf(", valid RMSE %.4f", rep.valid_rmse);
        printf("\n");
        if (rep.duplicates) printf("%lld repeated (user, item) pairs: the last rating kept\n", (long long)rep.duplicates);
        if (lac_ratings_skipped(train) + lac_ratings_skipped(valid))
            printf("%lld malformed lines skipped\n", (long long)(lac_ratings_skipped(train) + lac_ratings_skipped(valid)));
    }
    if (ps.log && ps.log != stdout && fclose(ps.log) != 0 && rc == CLI_OK) {
        fprintf(stderr, "lacuna %s: error writing --log %s\n", cmd, log_path);
        rc = CLI_RUNTIME;
    }
cleanup:
    cli_curve_free(&ps.curve);
    lac_mf_model_destroy(&model);
    lac_ratings_destroy(&train);
    lac_ratings_destroy(&valid);
    lac_ctx_destroy(&ctx);
    return rc;
}
