/* nbr_bench: the item neighbour search and the neighbourhood model (CULSH-MF)
 * on generated ratings shaped like MovieLens-10M (69,878 x 10,677, ~9.9 M) or
 * a ratings file, 90/10 random split. It prints, for the search on the
 * training part:
 *   - exact GSM top-K: seconds, peak bytes; floor: its co-rating work (six
 *     float64 adds per user and pair of the user's items, counted here) over
 *     the add rate measured here with every thread;
 *   - each approximate method: seconds, peak bytes, recall against the exact
 *     lists; floor (LSH methods): the code sums' multiply-adds (ratings x
 *     p x q x G) over the same rate; peer: the exact search;
 * and for training (k factors, early stopping on the held-out part, at most
 * --epochs epochs): plain MF and the neighbourhood model with the methods of
 * --train-methods: seconds, best validation RMSE, epochs and seconds to come
 * within 1% of it (with and without the set-up before the first epoch: the
 * layout, the search, the uploads; the epochs' share is the time to that
 * epoch less the first epoch's set-up, taken as its time less the mean
 * epoch's); peer: plain MF. --device cuda runs the search and the training
 * on the GPU (the CPU's figures come from a second run with --device cpu);
 * the search's floors, host add rates, are left out there (NaN): the GPU's
 * floors are its GEMM and add rates (bench/RESULTS.md).
 *
 *   nbr_bench [--shape ml10m|small] [--ratings-file F] [--scale F] [-K 32] [-p 3] [-q 100]
 *             [-k 32] [--methods simlsh,rpcos,minhash,random,simlsh-centred] [--no-gsm]
 *             [--train-methods gsm,simlsh] [--epochs 40] [--threads N] [--seed S]
 *             [--clusters C] [--device cpu|cuda] [--warm-epochs N] [--trace] [--json] [--figures FILE]
 * --trace: each training's validation RMSE and seconds by epoch.
 * --warm-epochs: the neighbourhood model's warm start (lac_mf_params), whose
 * plain epochs (and their validation) count in the epochs' time to 1%; their
 * set-up (the plain training's uploads) counts as set-up, as the model's own. */
#include "bench_util.h"
#include "lacuna/lacuna.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_EPOCHS 1000

/* float64 adds a second, all threads: independent vector accumulators. */
static double add_rate(int threads)
{
    double best = 0;
    for (int rep = 0; rep < 3; rep++) {
        double t = now_s(), sink = 0;
        const long n = 1L << 26;
#pragma omp parallel num_threads(threads) reduction(+ : sink)
        {
            double a[16] = {0};
            for (long i = 0; i < n / 16; i++)
                for (int x = 0; x < 16; x++) a[x] += (double)x * 1e-9;
            for (int x = 0; x < 16; x++) sink += a[x];
        }
        t = now_s() - t;
        double r = (double)n * threads / t;
        if (sink > 0 && r > best) best = r;
    }
    return best;
}

typedef struct {
    int epochs;
    double rmse[MAX_EPOCHS + 1], seconds[MAX_EPOCHS + 1];
} trace;

static int record(int epoch, double train_rmse, double valid_rmse, double seconds, void *user)
{
    (void)train_rmse;
    trace *t = user;
    if (epoch <= MAX_EPOCHS) {
        t->rmse[epoch] = valid_rmse;
        t->seconds[epoch] = seconds;
        t->epochs = epoch;
    }
    return 0;
}

static int split_list(char *s, char **out, int max)
{
    int n = 0;
    for (char *tok = strtok(s, ","); tok && n < max; tok = strtok(NULL, ",")) out[n++] = tok;
    return n;
}

int main(int argc, char **argv)
{
    const char *shape = "ml10m", *file = NULL, *figures_path = NULL, *device = "cpu";
    char methods_arg[256] = "simlsh,simlsh-centred,rpcos,minhash,random", train_arg[256] = "gsm,simlsh";
    int K = 32, p = 3, q = 100, F = 32, epochs = 40, threads = 0, json = 0, gsm = 1, clusters = 0, warm = 0;
    int trace_epochs = 0;
    double scale = 1.0;
    long long seed = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--json")) json = 1;
        else if (!strcmp(a, "--trace")) trace_epochs = 1;
        else if (!strcmp(a, "--no-gsm")) gsm = 0;
        else if (!v) {
            fprintf(stderr, "nbr_bench: %s needs a value (see the comment at the top of bench/nbr_bench.c)\n", a);
            return 2;
        } else if (!strcmp(a, "--shape")) shape = v, i++;
        else if (!strcmp(a, "--ratings-file")) file = v, i++;
        else if (!strcmp(a, "--scale")) scale = atof(v), i++;
        else if (!strcmp(a, "-K")) K = atoi(v), i++;
        else if (!strcmp(a, "-p")) p = atoi(v), i++;
        else if (!strcmp(a, "-q")) q = atoi(v), i++;
        else if (!strcmp(a, "-k")) F = atoi(v), i++;
        else if (!strcmp(a, "--methods")) snprintf(methods_arg, sizeof methods_arg, "%s", v), i++;
        else if (!strcmp(a, "--train-methods")) snprintf(train_arg, sizeof train_arg, "%s", v), i++;
        else if (!strcmp(a, "--epochs")) epochs = atoi(v), i++;
        else if (!strcmp(a, "--threads")) threads = atoi(v), i++;
        else if (!strcmp(a, "--seed")) seed = atoll(v), i++;
        else if (!strcmp(a, "--clusters")) clusters = atoi(v), i++;
        else if (!strcmp(a, "--warm-epochs")) warm = atoi(v), i++;
        else if (!strcmp(a, "--figures")) figures_path = v, i++;
        else if (!strcmp(a, "--device")) device = v, i++;
        else {
            fprintf(stderr, "nbr_bench: unknown option %s\n", a);
            return 2;
        }
    }
    if (epochs < 1 || epochs > MAX_EPOCHS || K < 1 || !(scale > 0 && scale <= 1)) {
        fprintf(stderr, "nbr_bench: bad --epochs, -K or --scale\n");
        return 2;
    }
    lac_ctx_params cp = lac_ctx_params_default();
    if (strcmp(device, "cpu") && strcmp(device, "cuda")) {
        fprintf(stderr, "nbr_bench: --device cpu or cuda\n");
        return 2;
    }
    int cuda = !strcmp(device, "cuda");
    cp.backend = cuda ? LAC_BACKEND_CUDA : LAC_BACKEND_CPU;
    cp.threads = threads;
    lac_ctx_t ctx = NULL;
    if (lac_ctx_create(&cp, &ctx) != LAC_SUCCESS) {
        fprintf(stderr, "nbr_bench: %s\n", lac_last_error(NULL));
        return 1;
    }
    int nthreads = lac_ctx_threads(ctx);
    bench_figures figures;
    if (bench_figures_open(&figures, figures_path, nthreads) < 0) return 1;

    lac_ratings_t all = NULL, train = NULL, valid = NULL;
    char data_name[200];
    lac_status st;
    if (file) {
        lac_ratings_read_params rp = lac_ratings_read_params_default();
        st = lac_ratings_read(ctx, file, &rp, &all);
        const char *base = strrchr(file, '/');
        snprintf(data_name, sizeof data_name, "%s", base ? base + 1 : file);
    } else {
        lac_mf_gen_params g = lac_mf_gen_params_default();
        if (!strcmp(shape, "ml10m")) g.users = 69878, g.items = 10677, g.ratings = 10000054, g.half_stars = 1;
        g.users = (int64_t)(g.users * scale);
        g.ratings = (int64_t)(g.ratings * scale);
        g.item_clusters = clusters;
        g.seed = (uint64_t)seed;
        st = lac_mf_generate(ctx, &g, &all);
        snprintf(data_name, sizeof data_name, "%s%s", shape, clusters ? " + clusters" : "");
    }
    if (st != LAC_SUCCESS) {
        fprintf(stderr, "nbr_bench: %s\n", lac_last_error(ctx));
        return 1;
    }
    lac_mf_split_params sp = lac_mf_split_params_default();
    sp.seed = (uint64_t)seed;
    if (lac_mf_split(ctx, &sp, all, &train, &valid) != LAC_SUCCESS) return 1;
    int64_t nnz = lac_ratings_count(train), ni = lac_ratings_num_items(train);
    double rate = add_rate(nthreads);

    /* the exact search's work: a user's pairs of items, six adds each */
    double pairs = 0;
    {
        int64_t nu = lac_ratings_num_users(train), *cnt = calloc((size_t)nu, sizeof *cnt);
        for (int64_t x = 0; x < nnz; x++) {
            int64_t u, j;
            float r;
            lac_ratings_get(train, x, &u, &j, &r);
            cnt[u]++;
        }
        for (int64_t u = 0; u < nu; u++) pairs += 0.5 * (double)cnt[u] * (double)(cnt[u] - 1);
        free(cnt);
    }
    if (!json)
        printf("# %s: %lld training ratings, %lld items, %s, %d threads, %.3g adds/s; K = %d, p = %d, q = %d\n",
               data_name, (long long)nnz, (long long)ni, device, nthreads, rate, K, p, q);

    lac_mf_nbr_params np = lac_mf_nbr_params_default();
    np.k = K;
    np.p = p;
    np.q = q;
    np.seed = (uint64_t)seed;
    lac_mf_nbr_t exact = NULL;
    double gsm_s = NAN;
    char name[256];
    if (gsm) {
        np.method = LAC_MF_NBR_GSM;
        if (lac_mf_neighbours(ctx, &np, train, &exact) != LAC_SUCCESS) {
            fprintf(stderr, "nbr_bench: gsm: %s\n", lac_last_error(ctx));
            return 1;
        }
        gsm_s = lac_mf_nbr_seconds(exact);
        double floor = cuda ? NAN : pairs * 6.0 / rate;
        if (json)
            printf("{\"data\":\"%s\",\"method\":\"gsm\",\"K\":%d,\"seconds\":%.4g,\"bytes\":%lld,\"floor_s\":%.4g,"
                   "\"threads\":%d}\n", data_name, K, gsm_s, (long long)lac_mf_nbr_bytes(exact), floor, nthreads);
        else
            printf("%-15s %9.3f s %8.1f MB  floor %7.3f s (%.1fx)  %.3g co-rated pairs\n", "gsm", gsm_s,
                   lac_mf_nbr_bytes(exact) / 1048576.0, floor, gsm_s / floor, pairs);
        snprintf(name, sizeof name, "gsm top-%d, %s, %lld ratings", K, data_name, (long long)nnz);
        bench_figure(&figures, "mf neighbours", name, gsm_s, "s", floor, NULL, NAN);
        bench_figure(&figures, "mf neighbours", name, lac_mf_nbr_bytes(exact) / 1048576.0, "MB", NAN, NULL, NAN);
    }
    char *methods[8];
    int nm = split_list(methods_arg, methods, 8);
    for (int x = 0; x < nm; x++) {
        if (lac_mf_nbr_method_parse(methods[x], &np.method) != LAC_SUCCESS) {
            fprintf(stderr, "nbr_bench: unknown method %s\n", methods[x]);
            return 2;
        }
        lac_mf_nbr_t n = NULL;
        if (lac_mf_neighbours(ctx, &np, train, &n) != LAC_SUCCESS) {
            fprintf(stderr, "nbr_bench: %s: %s\n", methods[x], lac_last_error(ctx));
            return 1;
        }
        double rec = NAN;
        if (exact) lac_mf_nbr_recall(ctx, n, exact, &rec);
        int lsh = np.method != LAC_MF_NBR_RANDOM;
        double cols = (double)p * q * (np.method == LAC_MF_NBR_MINHASH ? 1 : 8);
        double floor = lsh && !cuda ? (double)nnz * cols / rate : NAN, s = lac_mf_nbr_seconds(n);
        if (json)
            printf("{\"data\":\"%s\",\"method\":\"%s\",\"K\":%d,\"seconds\":%.4g,\"bytes\":%lld,\"recall\":%.4g,"
                   "\"floor_s\":%.4g,\"gsm_s\":%.4g,\"threads\":%d}\n", data_name, methods[x], K, s,
                   (long long)lac_mf_nbr_bytes(n), rec, floor, gsm_s, nthreads);
        else
            printf("%-15s %9.3f s %8.1f MB  floor %7.3f s (%.1fx)  recall %.4f  gsm/this %.2f\n", methods[x], s,
                   lac_mf_nbr_bytes(n) / 1048576.0, floor, s / floor, rec, gsm_s / s);
        snprintf(name, sizeof name, "%s top-%d, %s, %lld ratings", methods[x], K, data_name, (long long)nnz);
        bench_figure(&figures, "mf neighbours", name, s, "s", floor, gsm ? "exact GSM" : NULL, gsm_s);
        if (isfinite(rec)) bench_figure(&figures, "mf neighbours", name, rec, "recall of exact top-K", NAN, NULL, NAN);
        lac_mf_nbr_destroy(&n);
    }

    /* training: plain, then the neighbourhood model per method */
    char *tmethods[8];
    int nt = split_list(train_arg, tmethods, 8);
    double plain_best = NAN, plain_s = NAN;
    for (int x = -1; x < nt; x++) {
        lac_mf_params mp = lac_mf_params_default();
        mp.k = F;
        mp.epochs = epochs;
        mp.seed = (uint64_t)seed;
        const char *label = "plain";
        if (x >= 0) {
            mp.model = LAC_MF_MODEL_NEIGHBOURHOOD;
            mp.neighbours = np;
            mp.warm_epochs = warm;
            if (lac_mf_nbr_method_parse(tmethods[x], &mp.neighbours.method) != LAC_SUCCESS) return 2;
            label = tmethods[x];
        }
        trace *tr = calloc(1, sizeof *tr);
        lac_mf_model_t m = NULL;
        lac_mf_report rep;
        if (lac_mf_train(ctx, &mp, train, valid, record, tr, &m, &rep) != LAC_SUCCESS) {
            fprintf(stderr, "nbr_bench: training %s: %s\n", label, lac_last_error(ctx));
            return 1;
        }
        double best = INFINITY;
        for (int e = 1; e <= tr->epochs; e++) best = tr->rmse[e] < best ? tr->rmse[e] : best;
        if (rep.valid_rmse < best) best = rep.valid_rmse;   /* a warm start's model kept */
        for (int e = 1; trace_epochs && e <= tr->epochs; e++)
            printf("  epoch %3d  valid RMSE %.5f  %.4f s\n", e, tr->rmse[e], tr->seconds[e]);
        int hit = 0;
        for (int e = 1; e <= tr->epochs && !hit; e++)
            if (tr->rmse[e] <= 1.01 * best) hit = e;
        double to1 = hit ? tr->seconds[hit] : NAN;
        double epoch_s = tr->epochs > 1 ? (tr->seconds[tr->epochs] - tr->seconds[1]) / (tr->epochs - 1) : NAN;
        /* the warm start's plain epochs count as epochs, their set-up as set-up */
        double setup = tr->seconds[1] - epoch_s - rep.warm_seconds, to1_epochs = to1 - setup;
        if (x < 0) plain_best = best, plain_s = to1;
        if (json)
            printf("{\"data\":\"%s\",\"train\":\"%s\",\"k\":%d,\"K\":%d,\"epochs\":%d,\"seconds\":%.4g,"
                   "\"best_valid_rmse\":%.5f,\"epochs_to_1pct\":%d,\"seconds_to_1pct\":%.4g,\"epoch_s\":%.4g,"
                   "\"setup_s\":%.4g,\"epochs_s_to_1pct\":%.4g,\"warm_epochs\":%d,\"warm_s\":%.4g,"
                   "\"device\":\"%s\",\"threads\":%d}\n",
                   data_name, x < 0 ? "plain" : label, F, x < 0 ? 0 : K, rep.epochs, rep.seconds, best, hit, to1,
                   epoch_s, setup, to1_epochs, rep.warm_epochs, rep.warm_seconds, device, nthreads);
        else
            printf("train %-15s k=%d: %3d epochs %8.2f s  best valid RMSE %.4f (plain %.4f)  within 1%% at epoch %d, "
                   "%.3f s (%.4f s of epochs, %.2f ms an epoch, set-up %.3f s; warm start %d epochs %.4f s)\n",
                   x < 0 ? "plain" : label, F, rep.epochs, rep.seconds, best, plain_best, hit, to1, to1_epochs,
                   1e3 * epoch_s, setup, rep.warm_epochs, rep.warm_seconds);
        fflush(stdout);
        snprintf(name, sizeof name, "train %s%s k=%d, %s, %lld ratings, %s", x < 0 ? "plain" : "neighbourhood ",
                 x < 0 ? "" : label, F, data_name, (long long)nnz, device);
        bench_figure(&figures, "mf neighbours", name, best, "best validation RMSE", NAN, x < 0 ? NULL : "plain MF",
                     plain_best);
        bench_figure(&figures, "mf neighbours", name, to1, "s to within 1% of the best RMSE", NAN,
                     x < 0 ? NULL : "plain MF", plain_s);
        bench_figure(&figures, "mf neighbours", name, to1_epochs, "s of epochs to within 1% of the best RMSE", NAN,
                     NULL, NAN);
        lac_mf_model_destroy(&m);
        free(tr);
    }
    lac_mf_nbr_destroy(&exact);
    lac_ratings_destroy(&all);
    lac_ratings_destroy(&train);
    lac_ratings_destroy(&valid);
    bench_figures_close(&figures);
    lac_ctx_destroy(&ctx);
    return 0;
}
