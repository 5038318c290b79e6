/* mf_bench: SGD matrix factorisation on generated ratings shaped like
 * MovieLens-10M (69,878 x 10,677, ~9.9 M) or Netflix (480,189 x 17,770,
 * ~99 M), 90/10 random split. For each k it trains up to --epochs epochs with
 * validation after each (no early stop) and prints: the SGD epoch alone
 * (median of a short run without validation) and with validation, rating
 * updates/s, the best validation RMSE, the epoch and time (epochs x median
 * epoch with validation) at which the validation RMSE first comes within 1% of
 * that best, the floor, and the peer measured in the same run: on the CPU a
 * serial SGD loop (the same update rule, plain C, one thread); on CUDA this
 * library's CPU path with every host thread.
 *
 *   mf_bench [--shape ml10m|netflix|small] [--scale F] [-k 32,128] [--epochs 100]
 *            [--device cpu|cuda|cuda:0,1] [--threads N] [--peer-epochs 2] [--deterministic]
 *            [--users N --items N --ratings N] [--seed S] [--json] [--figures FILE]
 *            [--implicit] [--implicit-as NEG:SHARE,...] [--neg-pools P[:A:C],...] [--inbatch L[:G[:S[:W]]],...]
 *
 * --scale F keeps a fraction F of the users and ratings (items kept), for the
 * Netflix shape on a small machine. Floor: the larger of (a) the bytes an epoch
 * must stream (8 per rating + each factor row read and written once) over the
 * copy bandwidth measured here and (b) the epoch's flops (8 k per update:
 * 2k for u.v, 6k for the two row updates) over the float multiply-add rate
 * measured here with the same vector width. On CUDA the floor is (a) with the
 * device copy bandwidth (the item rows themselves are re-read from L2).
 *
 * --device cuda:0,0 (or cuda:0,1, ...): a context of several devices, or
 * shares of one; the plain model then trains by the block rotation over them
 * (on one device this measures the split's cost, not a speed-up).
 *
 * --implicit: for each k also an epoch of implicit feedback on the same
 * training pairs read as interactions (cross-entropy with 4 negatives, and
 * BPR with one; the tool's implicit beta; median of a short run), beside
 * the explicit epoch (issue 14's target: within 2x) and its floor: the
 * bytes it must move (8 per cell, 8 per negative: drawn, written and read
 * back, each factor row read and written once) over the copy bandwidth;
 * and on CUDA the same epoch on this library's CPU path (the peer).
 *
 * --neg-pools 0,32,64 (CUDA): the cross-entropy epoch also with each of
 * these blocks' pools of negatives (LACUNA_MF_CUDA_NEG_POOL; 0: none), in
 * turn, twice over, each in a context of its own; P:A:C also sets
 * LACUNA_MF_CUDA_NEG_POOL_ADD=A (1: warp copies) and
 * LACUNA_MF_CUDA_NEG_POOL_CELLS=C (cells of a round per pool row).
 * --inbatch -1,0,4,8:16896,0:0:0 (CUDA): likewise with in-batch negatives
 * (LACUNA_MF_CUDA_INBATCH=L, L lanes a group, 0: chosen by k, -1: drawn
 * negatives instead; :G also LACUNA_MF_CUDA_GROUPS=G, the groups in
 * flight, 0 the default; :S LACUNA_MF_CUDA_INBATCH_SEEN=S, default 1; :W
 * LACUNA_MF_CUDA_INBATCH_WEIGHT=W, default 1). The default epoch of
 * cross-entropy on one device is in-batch (weighted, lanes by k). */
#include "bench_util.h"
#include "lacuna/lacuna.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_K 8
#define MAX_EPOCHS 1000

/* Host copy bandwidth (bytes/s moved, read + write) with `threads` threads. */
static double host_copy_bandwidth(int threads)
{
    size_t n = (size_t)32 << 20;   /* 128 MiB per array */
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    if (!a || !b) {
        free(a);
        free(b);
        return NAN;
    }
#pragma omp parallel for num_threads(threads)
    for (size_t i = 0; i < n; i++) a[i] = (float)i, b[i] = 0;
    double best = 0;
    for (int rep = 0; rep < 4; rep++) {
        double t = now_s();
#pragma omp parallel for num_threads(threads)
        for (size_t i = 0; i < n; i++) b[i] = a[i];
        t = now_s() - t;
        double bw = 2.0 * (double)n * sizeof(float) / t;
        if (bw > best) best = bw;
    }
    free(a);
    free(b);
    return best;
}

/* Float multiplies and adds per second with the kernel's 4-float vectors:
 * eight independent multiply-add chains per thread, all in registers. */
typedef float v4f __attribute__((vector_size(16)));

static double host_flop_rate(int threads)
{
    double best = 0;
    const long long iters = 20000000;   /* ~0.1 s: long enough to swamp the start of the threads */
    for (int rep = 0; rep < 3; rep++) {
        double t = now_s(), sink = 0;
#pragma omp parallel num_threads(threads) reduction(+ : sink)
        {
            v4f m = {0.5f, 0.5f, 0.5f, 0.5f}, c = {0.25f, 0.5f, 0.75f, 1.0f};
            v4f a0 = c, a1 = c + 1, a2 = c + 2, a3 = c + 3, a4 = c + 4, a5 = c + 5, a6 = c + 6, a7 = c + 7;
            for (long long it = 0; it < iters; it++) {
                a0 = a0 * m + c, a1 = a1 * m + c, a2 = a2 * m + c, a3 = a3 * m + c;
                a4 = a4 * m + c, a5 = a5 * m + c, a6 = a6 * m + c, a7 = a7 * m + c;
            }
            v4f acc = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;
            sink += acc[0] + acc[1] + acc[2] + acc[3];
        }
        t = now_s() - t;
        double rate = 64.0 * (double)iters * threads / t;   /* 8 vectors x 4 lanes x (mul + add) */
        if (sink == 12345.0) rate += 1;   /* keeps the loop */
        if (rate > best) best = rate;
    }
    return best;
}

typedef struct {
    int epochs;
    double seconds[MAX_EPOCHS + 1];
    double valid[MAX_EPOCHS + 1];
} trace;

static int record(int epoch, double train_rmse, double valid_rmse, double seconds, void *user)
{
    trace *t = user;
    (void)train_rmse;
    if (epoch <= MAX_EPOCHS) {
        t->seconds[epoch] = seconds;
        t->valid[epoch] = valid_rmse;
        t->epochs = epoch;
    }
    return 0;
}

/* The peer: the plain serial loop a user would write (ratings in file order). */
static double serial_sgd_epochs(const int64_t *user, const int64_t *item, const float *val, int64_t n, int64_t nu,
                                int64_t ni, int k, int epochs, double mean)
{
    float *P = malloc(sizeof(float) * (size_t)(nu * k)), *Q = malloc(sizeof(float) * (size_t)(ni * k));
    float *bu = calloc((size_t)nu, sizeof(float)), *bi = calloc((size_t)ni, sizeof(float));
    for (int64_t i = 0; i < nu * k; i++) P[i] = 0.01f * (float)(i % 7);
    for (int64_t i = 0; i < ni * k; i++) Q[i] = 0.01f * (float)(i % 5);
    double t = now_s();
    float lr = 0.01f, l = 0.05f, lb = 0.01f;
    for (int e = 0; e < epochs; e++)
        for (int64_t a = 0; a < n; a++) {
            float *p = P + user[a] * k, *q = Q + item[a] * k;
            float dot = 0;
            for (int f = 0; f < k; f++) dot += p[f] * q[f];
            float err = val[a] - ((float)mean + bu[user[a]] + bi[item[a]] + dot);
            bu[user[a]] += lr * (err - lb * bu[user[a]]);
            bi[item[a]] += lr * (err - lb * bi[item[a]]);
            for (int f = 0; f < k; f++) {
                float pf = p[f], qf = q[f];
                p[f] = pf + lr * (err * qf - l * pf);
                q[f] = qf + lr * (err * pf - l * qf);
            }
        }
    t = (now_s() - t) / epochs;
    free(P);
    free(Q);
    free(bu);
    free(bi);
    return t;
}

static int parse_list(const char *s, int *out, int max)
{
    int n = 0;
    char *copy = strdup(s), *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok && n < max; tok = strtok_r(NULL, ",", &save)) out[n++] = atoi(tok);
    free(copy);
    return n;
}

/* The median epoch (the first left out) of a short implicit training. */
static double implicit_epoch_s(lac_ctx_t ctx, const lac_mf_params *p, lac_ratings_t train, int epochs)
{
    lac_mf_params q = *p;
    q.epochs = epochs;
    q.patience = epochs;
    trace *t = calloc(1, sizeof *t);
    lac_mf_model_t m = NULL;
    double s = NAN;
    if (lac_mf_train(ctx, &q, train, NULL, record, t, &m, NULL) == LAC_SUCCESS && t->epochs > 1) {
        double d[MAX_EPOCHS];
        for (int e = 2; e <= t->epochs; e++) d[e - 2] = t->seconds[e] - t->seconds[e - 1];
        s = median(d, t->epochs - 1);
    } else {
        fprintf(stderr, "mf_bench: implicit: %s\n", lac_last_error(ctx));
    }
    lac_mf_model_destroy(&m);
    free(t);
    return s;
}

int main(int argc, char **argv)
{
    const char *shape = "ml10m", *device = "cpu", *figures_path = NULL;
    double scale = 1.0;
    int ks[MAX_K] = {32, 128}, nk = 2, epochs = 100, threads = 0, peer_epochs = 2, json = 0, deterministic = 0;
    int implicit = 0, nas = 0, as_neg[MAX_K], as_share[MAX_K], nvariants = 0;
    char variant_knobs[MAX_K][160], variant_label[MAX_K][40];   /* --neg-pools, --inbatch: a context each */
    uint64_t seed = 1;
    int64_t users = 0, items = 0, ratings = 0;   /* 0: the shape's */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--json")) { json = 1; continue; }
        if (!strcmp(a, "--deterministic")) { deterministic = 1; continue; }
        if (!strcmp(a, "--implicit")) { implicit = 1; continue; }
        if (!strcmp(a, "--help") || !v) {
            fprintf(stderr, "usage: mf_bench [--shape ml10m|netflix|small] [--scale F] [-k 32,128] [--epochs N]\n"
                            "                [--device cpu|cuda|cuda:0,1] [--threads N] [--peer-epochs N]\n"
                            "                [--deterministic]\n"
                            "                [--users N --items N --ratings N] [--seed S] [--json] [--figures FILE]\n"
                            "                [--implicit] [--implicit-as NEG:SHARE,...] [--neg-pools P[:A:C],...] [--inbatch L[:G[:S[:W]]],...]\n");
            return strcmp(a, "--help") ? 2 : 0;
        }
        i++;
        if (!strcmp(a, "--shape")) shape = v;
        else if (!strcmp(a, "--scale")) scale = atof(v);
        else if (!strcmp(a, "-k")) nk = parse_list(v, ks, MAX_K);
        else if (!strcmp(a, "--epochs")) epochs = atoi(v);
        else if (!strcmp(a, "--device")) device = v;
        else if (!strcmp(a, "--threads")) threads = atoi(v);
        else if (!strcmp(a, "--peer-epochs")) peer_epochs = atoi(v);
        else if (!strcmp(a, "--seed")) seed = (uint64_t)atoll(v);
        else if (!strcmp(a, "--implicit-as")) {   /* NEG:SHARE,... cross-entropy settings timed */
            implicit = 1;
            for (nas = 0; nas < MAX_K && v && *v; nas++) {
                char *end;
                as_neg[nas] = (int)strtol(v, &end, 10);
                as_share[nas] = *end == ':' ? (int)strtol(end + 1, &end, 10) : 1;
                v = *end == ',' ? end + 1 : NULL;
            }
        }
        else if (!strcmp(a, "--neg-pools") || !strcmp(a, "--inbatch")) {   /* P[:ADD[:CELLS]],... or LANES,... */
            implicit = 1;
            const int pool = !strcmp(a, "--neg-pools");
            for (; nvariants < MAX_K && v && *v; nvariants++) {
                char *end;
                const int x = (int)strtol(v, &end, 10);
                if (pool) {
                    const int add = *end == ':' ? (int)strtol(end + 1, &end, 10) : 0;
                    const int cells = *end == ':' ? (int)strtol(end + 1, &end, 10) : 8;
                    snprintf(variant_knobs[nvariants], sizeof variant_knobs[0],
                             "MF_CUDA_NEG_POOL=%d,MF_CUDA_NEG_POOL_ADD=%d,MF_CUDA_NEG_POOL_CELLS=%d", x, add, cells);
                    snprintf(variant_label[nvariants], sizeof variant_label[0], "pool %d:%d:%d", x, add, cells);
                } else {   /* LANES[:GROUPS[:SEEN[:WEIGHT]]]; -1: drawn negatives */
                    const long groups = *end == ':' ? strtol(end + 1, &end, 10) : 0;
                    const int seen = *end == ':' ? (int)strtol(end + 1, &end, 10) : 1;
                    const int weight = *end == ':' ? (int)strtol(end + 1, &end, 10) : 1;
                    snprintf(variant_knobs[nvariants], sizeof variant_knobs[0],
                             "MF_CUDA_INBATCH=%d,MF_CUDA_INBATCH_SEEN=%d,MF_CUDA_INBATCH_WEIGHT=%d%s%.0ld", x, seen,
                             weight, groups ? ",MF_CUDA_GROUPS=" : "", groups);
                    if (x < 0)
                        snprintf(variant_label[nvariants], sizeof variant_label[0], "drawn%s%.0ld",
                                 groups ? ", groups " : "", groups);
                    else
                        snprintf(variant_label[nvariants], sizeof variant_label[0], "inbatch %d:%ld:%d:%d", x, groups,
                                 seen, weight);
                }
                v = *end == ',' ? end + 1 : NULL;
            }
        }
        else if (!strcmp(a, "--users")) users = atoll(v);
        else if (!strcmp(a, "--items")) items = atoll(v);
        else if (!strcmp(a, "--ratings")) ratings = atoll(v);
        else if (!strcmp(a, "--figures")) figures_path = v;   /* JSON lines for `lacuna report` */
        else {
            fprintf(stderr, "mf_bench: unknown option %s\n", a);
            return 2;
        }
    }
    if (epochs < 1 || epochs > MAX_EPOCHS || nk < 1 || !(scale > 0 && scale <= 1)) {
        fprintf(stderr, "mf_bench: bad --epochs, -k or --scale\n");
        return 2;
    }
    lac_mf_gen_params g = lac_mf_gen_params_default();
    if (!strcmp(shape, "ml10m")) g.users = 69878, g.items = 10677, g.ratings = 10000054, g.half_stars = 1;
    else if (!strcmp(shape, "netflix")) g.users = 480189, g.items = 17770, g.ratings = 100480507, g.half_stars = 0;
    else if (strcmp(shape, "small")) {
        fprintf(stderr, "mf_bench: unknown shape %s\n", shape);
        return 2;
    }
    if (users > 0) g.users = users;
    if (items > 0) g.items = items;
    if (ratings > 0) g.ratings = ratings;
    g.users = (int64_t)((double)g.users * scale);
    g.ratings = (int64_t)((double)g.ratings * scale);
    g.seed = seed;

    lac_ctx_params cp = lac_ctx_params_default();
    cp.threads = threads;
    /* cuda:0,0 and the like: a context of several devices (or shares of one),
     * over which mf trains by the block rotation */
    const int on_cuda = !strncmp(device, "cuda", 4) && (device[4] == 0 || device[4] == ':');
    cp.backend = on_cuda ? LAC_BACKEND_CUDA : LAC_BACKEND_CPU;
    if (on_cuda && device[4] == ':') {
        const char *at = device + 5;
        for (char *end; *at && cp.num_devices < LAC_MAX_DEVICES; at = *end == ',' ? end + 1 : end) {
            long id = strtol(at, &end, 10);
            if (end == at || id < 0) break;
            cp.device_ids[cp.num_devices++] = (int)id;
        }
        if (*at || cp.num_devices == 0) {
            fprintf(stderr, "mf_bench: --device %s: expected cuda:ID[,ID...]\n", device);
            return 2;
        }
    }
    lac_ctx_t ctx, host;
    if (lac_ctx_create(&cp, &ctx) != LAC_SUCCESS) {
        fprintf(stderr, "mf_bench: no context for %s: %s\n", device, lac_last_error(NULL));
        return 1;
    }
    cp.backend = LAC_BACKEND_CPU;
    if (lac_ctx_create(&cp, &host) != LAC_SUCCESS) return 1;
    lac_ctx_t variant_ctx[MAX_K] = {NULL};
    for (int i = 0; i < nvariants && on_cuda; i++) {   /* a context a variant */
        lac_ctx_params pp = cp;
        pp.backend = LAC_BACKEND_CUDA;
        pp.knobs = variant_knobs[i];
        if (lac_ctx_create(&pp, &variant_ctx[i]) != LAC_SUCCESS) return 1;
    }
    int nthreads = lac_ctx_threads(host);
    bench_figures figures;
    if (bench_figures_open(&figures, figures_path, nthreads) < 0) return 1;

    double t = now_s();
    lac_ratings_t all = NULL, train = NULL, valid = NULL;
    lac_mf_split_params sp = lac_mf_split_params_default();
    sp.seed = seed;
    if (lac_mf_generate(host, &g, &all) || lac_mf_split(host, &sp, all, &train, &valid)) {
        fprintf(stderr, "mf_bench: %s\n", lac_last_error(host));
        return 1;
    }
    double gen_s = now_s() - t;
    int64_t n = lac_ratings_count(train), nu = lac_ratings_num_users(train), ni = lac_ratings_num_items(train);
    fprintf(stderr, "mf_bench: %s shape x %.3g: %lld users x %lld items, %lld train + %lld valid ratings (%.1f s to make)\n",
            shape, scale, (long long)nu, (long long)ni, (long long)n, (long long)lac_ratings_count(valid), gen_s);

    double bw = NAN, rate = NAN;
    if (!on_cuda) {
        bw = host_copy_bandwidth(nthreads);
        rate = host_flop_rate(nthreads);
    } else {
        /* device copy bandwidth: a 1 GiB device-to-device lac_memcpy */
        size_t bytes = (size_t)1 << 30;
        void *a = NULL, *b = NULL;
        if (lac_device_alloc(ctx, bytes, &a) == 0 && lac_device_alloc(ctx, bytes, &b) == 0) {
            lac_memcpy(ctx, b, LAC_MEM_DEVICE, a, LAC_MEM_DEVICE, bytes);
            double best = 0;
            for (int r = 0; r < 5; r++) {
                double t0 = now_s();
                lac_memcpy(ctx, b, LAC_MEM_DEVICE, a, LAC_MEM_DEVICE, bytes);
                lac_ctx_synchronize(ctx);
                double s = now_s() - t0;
                if (2.0 * bytes / s > best) best = 2.0 * bytes / s;
            }
            bw = best;
        }
        if (a) lac_device_free(ctx, a);
        if (b) lac_device_free(ctx, b);
    }
    if (!json) {
        printf("# %s, %d threads; copy bandwidth %.1f GB/s", device, nthreads, bw * 1e-9);
        if (!isnan(rate)) printf(", multiply-add rate %.1f Gflop/s", rate * 1e-9);
        printf("\n");
    }

    /* the peer's arrays */
    int64_t *pu = NULL, *pi = NULL;
    float *pv = NULL;
    double mean = 0;
    if (peer_epochs > 0 && !on_cuda) {
        pu = malloc(sizeof(int64_t) * (size_t)n);
        pi = malloc(sizeof(int64_t) * (size_t)n);
        pv = malloc(sizeof(float) * (size_t)n);
        for (int64_t a = 0; a < n; a++) {
            lac_ratings_get(train, a, &pu[a], &pi[a], &pv[a]);
            mean += pv[a];
        }
        mean /= (double)n;
    }
    if (!json)
        printf("%5s %9s %9s %12s %10s %9s %11s %10s %8s %10s %8s\n", "k", "sgd_ms", "+valid_ms", "updates/s",
               "best_rmse", "ep@1%", "time@1%_s", "floor_ms", "floor/t", !on_cuda ? "serial_ms" : "cpu_ms",
               "speedup");
    for (int c = 0; c < nk; c++) {
        lac_mf_params p = lac_mf_params_default();
        p.k = ks[c];
        p.epochs = epochs;
        p.patience = epochs;   /* run them all: the best of `epochs` is the target */
        p.deterministic = deterministic;
        p.seed = seed;
        trace *tr = calloc(1, sizeof *tr);
        lac_mf_model_t m = NULL;
        lac_mf_report rep;
        lac_status st = lac_mf_train(ctx, &p, train, valid, record, tr, &m, &rep);
        if (st < 0) {
            fprintf(stderr, "mf_bench: k = %d: %s: %s\n", ks[c], lac_status_string(st), lac_last_error(ctx));
            free(tr);
            continue;
        }
        double per[MAX_EPOCHS], best = INFINITY;
        for (int e = 1; e <= tr->epochs; e++) {
            per[e - 1] = tr->seconds[e] - tr->seconds[e - 1];
            if (tr->valid[e] < best) best = tr->valid[e];
        }
        double epoch_s = median(per + 1, tr->epochs - 1 > 0 ? tr->epochs - 1 : 1);
        int hit = 0;
        for (int e = 1; e <= tr->epochs && !hit; e++)
            if (tr->valid[e] <= 1.01 * best) hit = e;
        /* time to target: the epochs' own time (median epoch, validation included) */
        double to_target = hit * epoch_s;
        double bytes = 8.0 * (double)n + 8.0 * ks[c] * (double)(nu + ni);
        double flops = 8.0 * ks[c] * (double)n;
        double floor_s = bytes / bw;
        if (!isnan(rate) && flops / rate > floor_s) floor_s = flops / rate;
        /* the SGD epoch alone (no validation): a short second run */
        double sgd_s = epoch_s;
        {
            lac_mf_params q = p;
            q.epochs = 6;
            trace *t2 = calloc(1, sizeof *t2);
            lac_mf_model_t m2 = NULL;
            if (lac_mf_train(ctx, &q, train, NULL, record, t2, &m2, NULL) == LAC_SUCCESS && t2->epochs > 2) {
                double d[MAX_EPOCHS];
                for (int e = 2; e <= t2->epochs; e++) d[e - 2] = t2->seconds[e] - t2->seconds[e - 1];
                sgd_s = median(d, t2->epochs - 1);
            }
            lac_mf_model_destroy(&m2);
            free(t2);
        }
        /* the peer: on the CPU the serial loop; on CUDA this library's CPU
         * path with every host thread (epochs without validation) */
        double peer_s = NAN;
        if (peer_epochs > 0 && !on_cuda) {
            peer_s = serial_sgd_epochs(pu, pi, pv, n, nu, ni, ks[c], peer_epochs, mean);
        } else if (peer_epochs > 0) {
            lac_mf_params q = p;
            q.epochs = peer_epochs + 1;
            trace *t2 = calloc(1, sizeof *t2);
            lac_mf_model_t m2 = NULL;
            if (lac_mf_train(host, &q, train, NULL, record, t2, &m2, NULL) == LAC_SUCCESS && t2->epochs > 1) {
                double d[MAX_EPOCHS];
                for (int e = 2; e <= t2->epochs; e++) d[e - 2] = t2->seconds[e] - t2->seconds[e - 1];
                peer_s = median(d, t2->epochs - 1);
            }
            lac_mf_model_destroy(&m2);
            free(t2);
        }
        if (json)
            printf("{\"shape\":\"%s\",\"scale\":%g,\"device\":\"%s\",\"threads\":%d,\"k\":%d,\"ratings\":%lld,"
                   "\"sgd_epoch_ms\":%.4g,\"epoch_with_valid_ms\":%.4g,\"updates_per_s\":%.4g,\"best_valid_rmse\":%.5f,"
                   "\"epochs_to_1pct\":%d,\"seconds_to_1pct\":%.4g,\"wall_to_1pct\":%.4g,\"floor_ms\":%.4g,"
                   "\"peer\":\"%s\",\"peer_epoch_ms\":%.4g}\n",
                   shape, scale, device, nthreads, ks[c], (long long)n, sgd_s * 1e3, epoch_s * 1e3, (double)n / sgd_s,
                   best, hit, to_target, hit ? tr->seconds[hit] : NAN, floor_s * 1e3,
                   !on_cuda ? "serial-loop" : "lacuna-cpu", peer_s * 1e3);
        else
            printf("%5d %9.3f %9.3f %12.4g %10.5f %9d %11.4f %10.3f %8.3f %10.1f %8.2f\n", ks[c], sgd_s * 1e3,
                   epoch_s * 1e3, (double)n / sgd_s, best, hit, to_target, floor_s * 1e3, floor_s / sgd_s,
                   peer_s * 1e3, peer_s / sgd_s);
        fflush(stdout);
        char name[160];
        snprintf(name, sizeof name, "%s %s k=%d, %lld ratings", device, shape, ks[c], (long long)n);
        bench_figure(&figures, "mf", name, sgd_s * 1e3, "ms per epoch", floor_s * 1e3,
                     !on_cuda ? "serial loop" : "lacuna on the CPU", peer_s * 1e3);
        if (hit) bench_figure(&figures, "mf", name, to_target, "s to within 1% of the best RMSE", NAN, NULL, NAN);
        /* the default cross-entropy (or each --implicit-as setting), then BPR */
        for (int x = 0, runs = (nas ? nas : 1) + 1; implicit && x < runs; x++) {
            const int loss = x + 1 < runs ? LAC_MF_LOSS_XENT : LAC_MF_LOSS_BPR;
            lac_mf_params q = p;
            q.implicit = 1;
            q.loss = loss;
            if (nas && x < nas) q.negatives = as_neg[x], q.negative_share = as_share[x];
            q.beta = 0.1;   /* the tool's for implicit feedback */
            int negs = loss == LAC_MF_LOSS_BPR ? 1 : (q.negatives + q.negative_share - 1) / q.negative_share;   /* a cell */
            double imp_s = implicit_epoch_s(ctx, &q, train, 6), imp_peer = NAN;
            if (peer_epochs > 0 && on_cuda && loss == LAC_MF_LOSS_XENT && x == 0)
                imp_peer = implicit_epoch_s(host, &q, train, peer_epochs + 1);
            double imp_bytes = (8.0 + 8.0 * negs) * (double)n + 8.0 * ks[c] * (double)(nu + ni);
            printf("# implicit k=%d %s share %d: %d negative(s) a cell, epoch %.3f ms, explicit %.3f ms, ratio %.2f (target <= 2), "
                   "floor %.3f ms (floor/t %.3f), %s %.1f ms\n",
                   ks[c], loss == LAC_MF_LOSS_BPR ? "bpr" : "xent", q.negative_share, negs, imp_s * 1e3, sgd_s * 1e3, imp_s / sgd_s,
                   imp_bytes / bw * 1e3, imp_bytes / bw / imp_s, on_cuda ? "cpu" : "-", imp_peer * 1e3);
            fflush(stdout);
            for (int rep = 0, reps = 2; on_cuda && loss == LAC_MF_LOSS_XENT && x == 0 && nvariants && rep < reps; rep++)
                for (int i = 0; i < nvariants; i++) {
                    const double e = implicit_epoch_s(variant_ctx[i], &q, train, 6);
                    printf("# implicit k=%d xent %s (turn %d): epoch %.3f ms, explicit %.3f ms, ratio %.2f\n", ks[c],
                           variant_label[i], rep + 1, e * 1e3, sgd_s * 1e3, e / sgd_s);
                    fflush(stdout);
                }
            snprintf(name, sizeof name, "%s %s k=%d implicit %s %d:%d, %lld interactions", device, shape, ks[c],
                     loss == LAC_MF_LOSS_BPR ? "bpr" : "xent", q.negatives, q.negative_share, (long long)n);
            bench_figure(&figures, "mf", name, imp_s * 1e3, "ms per epoch", imp_bytes / bw * 1e3,
                         isnan(imp_peer) ? NULL : "lacuna on the CPU", imp_peer * 1e3);
        }
        lac_mf_model_destroy(&m);
        free(tr);
    }
    free(pu);
    free(pi);
    free(pv);
    lac_ratings_destroy(&all);
    lac_ratings_destroy(&train);
    lac_ratings_destroy(&valid);
    bench_figures_close(&figures);
    lac_ctx_destroy(&ctx);
    lac_ctx_destroy(&host);
    for (int i = 0; i < nvariants; i++) lac_ctx_destroy(&variant_ctx[i]);
    return 0;
}
