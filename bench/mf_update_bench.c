/* Online updates against a retrain (bench/RESULTS.md, "mf online updates and
 * implicit feedback"): a tenth (or --new F) of the users held out of the
 * training ratings, a model trained without them, then lac_mf_update with
 * their ratings against lac_mf_train on everything, both with the same
 * parameters. Prints the medians of wall and CPU seconds over -n repeats
 * (interleaved, so both see the same machine load), their ratio, and the
 * test RMSE (a tenth of every user's ratings held out) of the base, updated
 * and retrained models, over all test ratings and over the new users'.
 * update_s times lac_mf_update_in_place on the base model loaded from a file
 * (what `lacuna mf update MODEL NEW OUT` does; the load and save are not
 * timed); copy_s times lac_mf_update, which copies the model first.
 *
 *   mf_update_bench [--file RATINGS | --users N --items N --ratings N [--clusters C]]
 *                   [--new F[,F...]] [--model plain|neighbourhood] [-k K] [-K K]
 *                   [--epochs N] [--l2 L] [-n REPEATS] [--threads N] [--seed S] */
#include "bench_util.h"
#include "lacuna/lacuna.h"

#include <stdint.h>
#include <time.h>
#include <unistd.h>

static double cpu_s(void) { return (double)clock() / CLOCKS_PER_SEC; }

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

typedef struct {
    int64_t n;
    int64_t *u, *i;
    float *r;
} triples;

static void push(triples *t, int64_t u, int64_t i, float r)
{
    t->u[t->n] = u;
    t->i[t->n] = i;
    t->r[t->n++] = r;
}

static void alloc(triples *t, int64_t cap)
{
    t->n = 0;
    t->u = malloc((size_t)cap * sizeof *t->u);
    t->i = malloc((size_t)cap * sizeof *t->i);
    t->r = malloc((size_t)cap * sizeof *t->r);
}

static void drop(triples *t)
{
    free(t->u);
    free(t->i);
    free(t->r);
}

static lac_ratings_t make(lac_ctx_t ctx, const triples *t)
{
    lac_ratings_t r = NULL;
    if (lac_ratings_from_arrays(ctx, t->n, t->u, t->i, t->r, &r)) {
        fprintf(stderr, "mf_update_bench: %s\n", lac_last_error(ctx));
        exit(1);
    }
    return r;
}

static double rmse(lac_ctx_t ctx, lac_mf_model_t m, const triples *t)
{
    if (!t->n) return NAN;
    lac_ratings_t r = make(ctx, t);
    double e = NAN;
    lac_mf_predict(ctx, m, r, NULL, &e, NULL, NULL);
    lac_ratings_destroy(&r);
    return e;
}

static void die(lac_ctx_t ctx, const char *what)
{
    fprintf(stderr, "mf_update_bench: %s: %s\n", what, lac_last_error(ctx));
    exit(1);
}

int main(int argc, char **argv)
{
    const char *file = NULL, *news = "0.1", *kind = "plain";
    int64_t users = 943, items = 1682, ratings = 100000;
    int clusters = 0, k = 32, K = 32, epochs = 20, repeats = 3, threads = 2;
    double l2 = -1;
    uint64_t seed = 1;
    for (int a = 1; a < argc; a++) {
        const char *o = argv[a], *v = a + 1 < argc ? argv[a + 1] : NULL;
        if (!v) {
            fprintf(stderr, "mf_update_bench: %s needs a value\n", o);
            return 2;
        }
        a++;
        if (!strcmp(o, "--file")) file = v;
        else if (!strcmp(o, "--users")) users = atoll(v);
        else if (!strcmp(o, "--items")) items = atoll(v);
        else if (!strcmp(o, "--ratings")) ratings = atoll(v);
        else if (!strcmp(o, "--clusters")) clusters = atoi(v);
        else if (!strcmp(o, "--new")) news = v;
        else if (!strcmp(o, "--model")) kind = v;
        else if (!strcmp(o, "-k")) k = atoi(v);
        else if (!strcmp(o, "-K")) K = atoi(v);
        else if (!strcmp(o, "--epochs")) epochs = atoi(v);
        else if (!strcmp(o, "--l2")) l2 = atof(v);
        else if (!strcmp(o, "-n")) repeats = atoi(v);
        else if (!strcmp(o, "--threads")) threads = atoi(v);
        else if (!strcmp(o, "--seed")) seed = (uint64_t)atoll(v);
        else {
            fprintf(stderr, "mf_update_bench: unknown option %s\n", o);
            return 2;
        }
    }
    lac_ctx_params cp = lac_ctx_params_default();
    cp.backend = LAC_BACKEND_CPU;
    cp.threads = threads;
    lac_ctx_t ctx;
    if (lac_ctx_create(&cp, &ctx)) return 1;
    lac_ratings_t src = NULL;
    if (file) {
        lac_ratings_read_params rp = lac_ratings_read_params_default();
        if (lac_ratings_read(ctx, file, &rp, &src)) die(ctx, file);
    } else {
        lac_mf_gen_params g = lac_mf_gen_params_default();
        g.users = users;
        g.items = items;
        g.ratings = ratings;
        g.item_clusters = clusters;
        g.seed = seed;
        if (lac_mf_generate(ctx, &g, &src)) die(ctx, "generate");
    }
    lac_mf_params p = lac_mf_params_default();
    p.k = k;
    p.epochs = epochs;
    p.seed = seed;
    if (l2 >= 0) p.lambda = l2;
    if (!strcmp(kind, "neighbourhood")) {
        p.model = LAC_MF_MODEL_NEIGHBOURHOOD;
        p.neighbours.k = K;
    }
    int64_t n = lac_ratings_count(src);
    printf("# %s: %lld ratings, %lld users, %lld items; %s model, k %d, K %d, %d epochs, %d threads\n",
           file ? file : "generated", (long long)n, (long long)lac_ratings_num_users(src),
           (long long)lac_ratings_num_items(src), kind, k, p.model ? K : 0, epochs, threads);
    printf("# new  new_ratings  retrain_s  update_s  ratio  retrain_cpu_s  update_cpu_s  cpu_ratio  "
           "rmse_base  rmse_updated  rmse_retrained  new_base  new_updated  new_retrained  copy_s  same\n");
    for (const char *f = news; f && *f; f = strchr(f, ',') ? strchr(f, ',') + 1 : NULL) {
        double frac = atof(f);
        triples base, fresh, all, test, test_new;
        alloc(&base, n);
        alloc(&fresh, n);
        alloc(&all, n);
        alloc(&test, n);
        alloc(&test_new, n);
        for (int64_t x = 0; x < n; x++) {
            int64_t u, i;
            float v;
            lac_ratings_get(src, x, &u, &i, &v);
            int is_new = (double)(mix((uint64_t)u * 31 + seed) % 100000) < 100000 * frac;
            if (mix((uint64_t)x + seed * 7919) % 10 == 0) {
                push(&test, u, i, v);
                if (is_new) push(&test_new, u, i, v);
            } else {
                push(is_new ? &fresh : &base, u, i, v);
            }
        }
        for (int64_t x = 0; x < base.n; x++) push(&all, base.u[x], base.i[x], base.r[x]);
        for (int64_t x = 0; x < fresh.n; x++) push(&all, fresh.u[x], fresh.i[x], fresh.r[x]);
        lac_ratings_t rb = make(ctx, &base), rf = make(ctx, &fresh), ra = make(ctx, &all);
        lac_mf_model_t mb = NULL;
        if (lac_mf_train(ctx, &p, rb, NULL, NULL, NULL, &mb, NULL)) die(ctx, "train");
        char path[64];
        snprintf(path, sizeof path, "/tmp/mf_update_bench.%ld.model", (long)getpid());
        if (lac_mf_model_save(ctx, path, mb)) die(ctx, "save");
        double *wt = calloc((size_t)repeats, sizeof *wt), *wu = calloc((size_t)repeats, sizeof *wu);
        double *ct = calloc((size_t)repeats, sizeof *ct), *cu = calloc((size_t)repeats, sizeof *cu);
        double *wc = calloc((size_t)repeats, sizeof *wc);
        lac_mf_model_t mf = NULL, mu = NULL, mc = NULL;
        for (int rep = 0; rep < repeats; rep++) {
            lac_mf_model_destroy(&mf);
            lac_mf_model_destroy(&mu);
            lac_mf_model_destroy(&mc);
            double t0 = now_s(), c0 = cpu_s();
            if (lac_mf_train(ctx, &p, ra, NULL, NULL, NULL, &mf, NULL)) die(ctx, "retrain");
            wt[rep] = now_s() - t0;
            ct[rep] = cpu_s() - c0;
            lac_mf_update_params up = lac_mf_update_params_default();
            if (lac_mf_model_load(ctx, path, &mu)) die(ctx, "load");
            t0 = now_s();
            c0 = cpu_s();
            if (lac_mf_update_in_place(ctx, &up, mu, rf, NULL)) die(ctx, "update");
            wu[rep] = now_s() - t0;
            cu[rep] = cpu_s() - c0;
            t0 = now_s();
            if (lac_mf_update(ctx, &up, mb, rf, &mc, NULL)) die(ctx, "update (copy)");
            wc[rep] = now_s() - t0;
        }
        remove(path);
        double e[6] = {rmse(ctx, mb, &test), rmse(ctx, mu, &test), rmse(ctx, mf, &test),
                       rmse(ctx, mb, &test_new), rmse(ctx, mu, &test_new), rmse(ctx, mf, &test_new)};
        double mwt = median(wt, repeats), mwu = median(wu, repeats), mct = median(ct, repeats), mcu = median(cu, repeats);
        /* same: the copying update's test predictions equal the in-place one's */
        int same = rmse(ctx, mc, &test) == e[1] && rmse(ctx, mc, &test_new) == e[4];
        printf("%-5g %11lld %10.3f %9.3f %6.3f %14.3f %13.3f %10.3f %10.4f %13.4f %15.4f %9.4f %12.4f %14.4f %7.3f %5d\n",
               frac, (long long)fresh.n, mwt, mwu, mwu / mwt, mct, mcu, mcu / mct, e[0], e[1], e[2], e[3], e[4], e[5],
               median(wc, repeats), same);
        fflush(stdout);
        free(wt);
        free(wu);
        free(ct);
        free(cu);
        free(wc);
        lac_mf_model_destroy(&mc);
        lac_mf_model_destroy(&mb);
        lac_mf_model_destroy(&mf);
        lac_mf_model_destroy(&mu);
        lac_ratings_destroy(&rb);
        lac_ratings_destroy(&rf);
        lac_ratings_destroy(&ra);
        drop(&base);
        drop(&fresh);
        drop(&all);
        drop(&test);
        drop(&test_new);
    }
    lac_ratings_destroy(&src);
    lac_ctx_destroy(&ctx);
    return 0;
}
