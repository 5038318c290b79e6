/* lacuna mf neighbours: the K nearest items of every item (simLSH, exact GSM,
 * RP_cos, minHash, random), one line per item; --recall against exact GSM. */
#include "cli.h"
#include "json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const methods[] = {"simlsh", "gsm", "rpcos", "minhash", "random", "simlsh-centred", NULL};

int cmd_mf_neighbours(int argc, char **argv)
{
    const char *cmd = "mf neighbours", *files[2], *device = "auto";
    int json = 0, quiet = 0, threads = 0, recall = 0, method = LAC_MF_NBR_SIMLSH;
    lac_mf_nbr_params p = lac_mf_nbr_params_default();
    cli_ratings_input in;
    cli_ratings_input_init(&in, "TRAIN's format");
    int64_t seed = (int64_t)p.seed;
    cli_opt options[] = {
        {"--method", NULL, CLI_ENUM, &method, NULL,
         .help = "simlsh (the paper's), gsm (exact shrunk Pearson), rpcos, minhash, random, simlsh-centred",
         .choices = methods, .show_default = 1},
        {"-K", NULL, CLI_INT, &p.k, "K", .help = "neighbours per item", CLI_IN(1, 4096), .show_default = 1},
        {"-p", NULL, CLI_INT, &p.p, "P", .help = "codes per bucket key (coarse hashing)", CLI_IN(1, 64),
         .show_default = 1},
        {"-q", NULL, CLI_INT, &p.q, "Q", .help = "bucket keys per item (fine hashing)", CLI_IN(1, 100000),
         .show_default = 1},
        {"--bits", NULL, CLI_INT, &p.bits, "G", .help = "bits of a code", CLI_IN(1, 32), .show_default = 1},
        {"--psi", NULL, CLI_INT, &p.psi_power, "E", .help = "simlsh weights psi(r) = r^E (2 or 4 in the paper)",
         CLI_IN(1, 4), .show_default = 1},
        {"--shrink", NULL, CLI_DOUBLE, &p.shrink, "L", .help = "gsm: S = n/(n + L) rho", CLI_AT_LEAST(0),
         .show_default = 1},
        {"--recall", NULL, CLI_FLAG, &recall, NULL, .help = "also the recall against exact GSM top-K"},
        {"--seed", NULL, CLI_INT64, &seed, "S", .help = "random seed", .show_default = 1},
        {"--threads", NULL, CLI_INT, &threads, "N", .help = "CPU threads (default: all)", CLI_IN(0, 4096)},
        {"--device", NULL, CLI_STRING, &device, "D", .help = "auto|cpu|cuda|cuda:N", .show_default = 1},
        {"--json", NULL, CLI_FLAG, &json, NULL, .help = "one line of JSON on stdout"},
        {"--quiet", NULL, CLI_FLAG, &quiet, NULL, .help = "no summary"},
        {0},
    };
    const cli_command command = {
        .name = cmd,
        .usage = "mf neighbours [options] TRAIN OUT",
        .about = "Finds the K nearest items of every item of TRAIN; OUT gets one line per item: its id, then\n"
                 "its K neighbours' ids, best first.\n",
        .tables = {options, in.options},
        .args = "TRAIN OUT",
        .min_args = 2,
        .max_args = 2,
    };
    int rc = cli_parse(&command, argc, argv, files, NULL);
    if (rc != CLI_OK) return rc == CLI_HELP ? CLI_OK : rc;
    const cli_file inputs[] = {{"TRAIN", files[0]}}, outputs[] = {{"OUT", files[1]}};
    if ((rc = cli_check_files(cmd, inputs, 1, outputs, 1)) != CLI_OK) return rc;
    p.seed = (uint64_t)seed;
    p.method = (lac_mf_nbr_method)method;
    const char *why = lac_mf_nbr_params_check(&p);
    if (why) return cli_usage_error(cmd, "%s", why);
    lac_ratings_read_params rp = cli_ratings_input_params(&in);

    lac_ctx_t ctx;
    rc = cli_make_context(cmd, device, threads, &ctx);
    if (rc) return rc;
    lac_ratings_t train = NULL;
    lac_mf_nbr_t nbr = NULL, exact = NULL;
    double rec = NAN;
    lac_status st = lac_ratings_read(ctx, files[0], &rp, &train);
    if (st == LAC_SUCCESS) st = lac_mf_neighbours(ctx, &p, train, &nbr);
    if (st == LAC_SUCCESS && recall) {
        lac_mf_nbr_params g = p;
        g.method = LAC_MF_NBR_GSM;
        if (p.method == LAC_MF_NBR_GSM) rec = 1.0;
        else if ((st = lac_mf_neighbours(ctx, &g, train, &exact)) == LAC_SUCCESS)
            st = lac_mf_nbr_recall(ctx, nbr, exact, &rec);
    }
    if (st == LAC_SUCCESS) st = lac_mf_nbr_write(ctx, files[1], nbr);
    if (st < 0) {
        rc = cli_status_error(cmd, ctx, st);
    } else if ((rc = cli_commit_outputs(cmd, ctx)) != CLI_OK) {
        /* the message is out; OUT is as it was */
    } else if (json) {
        cli_json j;
        cli_json_begin(&j, stdout);
        cli_json_int(&j, "items", lac_mf_nbr_num_items(nbr));
        cli_json_int(&j, "K", lac_mf_nbr_k(nbr));
        cli_json_real(&j, "seconds", lac_mf_nbr_seconds(nbr), "%.6g");
        cli_json_int(&j, "bytes", lac_mf_nbr_bytes(nbr));
        if (recall) cli_json_real(&j, "recall", rec, "%.6g");
        cli_json_string(&j, "method", methods[method]);
        cli_json_end(&j);
    } else if (!quiet) {
        printf("%lld items, K = %d by %s in %.3f s (%.1f MB)", (long long)lac_mf_nbr_num_items(nbr), p.k,
               methods[method], lac_mf_nbr_seconds(nbr), (double)lac_mf_nbr_bytes(nbr) / 1048576.0);
        if (recall) printf(", recall against exact GSM %.4f", rec);
        printf("\n");
    }
    lac_mf_nbr_destroy(&nbr);
    lac_mf_nbr_destroy(&exact);
    lac_ratings_destroy(&train);
    lac_ctx_destroy(&ctx);
    return rc;
}
