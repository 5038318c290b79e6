/* Generated ratings shaped like MovieLens/Netflix: Zipf user activity and item
 * popularity, r = mu + b_u + b_i + p_u . q_i [+ a_{u, cluster(i)}] + noise
 * rounded to the scale.
 * Every user draws from its own seeded stream: the same data for any thread
 * count. */
#include "mf/mf_internal.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

static lac_mf_gen_params mf_gen_defaults(void)
{
    lac_mf_gen_params p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    p.users = 1000;
    p.items = 500;
    p.ratings = 50000;
    p.rank = 10;
    p.noise = 0.5;
    p.half_stars = 1;
    p.activity_exponent = 0.8;
    p.popularity_exponent = 1.0;
    p.seed = 1;
    p.item_clusters = 0;
    p.cluster_strength = 0.8;
    return p;
}

LAC_PARAMS_INIT(lac_mf_gen_params, mf_gen_defaults())

const char *lac_mf_gen_params_check(const lac_mf_gen_params *given)
{
    LAC_PARAMS_CHECK_BEGIN(lac_mf_gen_params, given, mf_gen_defaults());
    if (p->users < 1 || p->users > INT32_MAX) return "users must be in [1, 2^31)";
    if (p->items < 2 || p->items > INT32_MAX) return "items must be in [2, 2^31)";
    if (p->ratings < 1) return "ratings must be >= 1";
    if ((double)p->ratings > 0.5 * (double)p->users * (double)p->items)
        return "ratings must be at most half of users x items (the data is sparse)";
    if (p->rank < 1 || p->rank > 1024) return "rank must be in [1, 1024]";
    if (!(p->noise >= 0) || !isfinite(p->noise)) return "noise must be finite and >= 0";
    if (!(p->activity_exponent >= 0 && p->activity_exponent <= 3)) return "activity_exponent must be in [0, 3]";
    if (!(p->popularity_exponent >= 0 && p->popularity_exponent <= 3)) return "popularity_exponent must be in [0, 3]";
    if (p->item_clusters < 0 || p->item_clusters > p->items) return "item_clusters must be in [0, items]";
    if (!(p->cluster_strength >= 0) || !isfinite(p->cluster_strength)) return "cluster_strength must be finite and >= 0";
    return NULL;
}

typedef struct {
    uint64_t s;
} rng;

static uint64_t next(rng *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double uniform(rng *r) { return ((double)(next(r) >> 11) + 0.5) * 0x1.0p-53; }

static double gauss(rng *r) { return sqrt(-2.0 * log(uniform(r))) * cos(6.283185307179586 * uniform(r)); }

static rng stream(uint64_t seed, uint64_t kind, uint64_t index)
{
    rng r = {seed * 0xd1342543de82ef95ull ^ (kind << 56) ^ (index * 0x9e3779b97f4a7c15ull)};
    next(&r);
    return r;
}

/* Ratings per user: c_u = clamp(s * w_u, min_count, cap) with s found by
 * bisection so that the counts add up to the target. */
static void user_counts(const lac_mf_gen_params *p, int64_t *count)
{
    int64_t nu = p->users, cap = p->items / 2, want = p->ratings;
    int64_t min_count = want / nu / 8;
    if (min_count < 1) min_count = 1;
    if (min_count > 20) min_count = 20;   /* MovieLens keeps users with >= 20 ratings */
    if (min_count > cap) min_count = cap;
    double lo = 0.0, hi = (double)want * 4.0;
    for (int it = 0; it < 100; it++) {
        double s = 0.5 * (lo + hi), total = 0.0;
        for (int64_t u = 0; u < nu; u++) {
            double c = s * pow((double)(u + 1), -p->activity_exponent);
            total += c < min_count ? min_count : c > cap ? cap : c;
        }
        if (total < (double)want) lo = s;
        else hi = s;
    }
    for (int64_t u = 0; u < nu; u++) {
        double c = hi * pow((double)(u + 1), -p->activity_exponent);
        count[u] = c < min_count ? min_count : c > cap ? cap : (int64_t)llround(c);
    }
}

lac_status lac_mf_generate(lac_ctx_t ctx, const lac_mf_gen_params *p, lac_ratings_t *out)
{
    LAC_ARG_NOT_NULL(ctx, ctx);
    LAC_ARG_NOT_NULL(ctx, out);
    LAC_ADOPT_PARAMS(ctx, "mf generator", lac_mf_gen_params, p, mf_gen_defaults());
    const char *why = lac_mf_gen_params_check(p);
    if (why) return lac_error(ctx, LAC_ERR_ARGUMENT, "mf generator: %s", why);
    int64_t nu = p->users, ni = p->items, k = p->rank;
    int threads = lac_threads(ctx);
    lac_status st = LAC_SUCCESS;
    lac_ratings_t r = NULL;
    int64_t *count = lac_malloc(ctx, (size_t)nu * sizeof *count);
    int64_t *start = lac_malloc(ctx, ((size_t)nu + 1) * sizeof *start);
    int64_t *made = lac_malloc(ctx, (size_t)nu * sizeof *made);
    double *cdf = lac_malloc(ctx, (size_t)ni * sizeof *cdf);
    float *P = lac_malloc(ctx, (size_t)nu * (size_t)k * sizeof *P);
    float *Q = lac_malloc(ctx, (size_t)ni * (size_t)k * sizeof *Q);
    float *bu = lac_malloc(ctx, (size_t)nu * sizeof *bu);
    float *bi = lac_malloc(ctx, (size_t)ni * sizeof *bi);
    int32_t *item_of_rank = lac_malloc(ctx, (size_t)ni * sizeof *item_of_rank);
    int32_t *taken = lac_malloc(ctx, (size_t)threads * (size_t)ni * sizeof *taken);
    if (!count || !start || !made || !cdf || !P || !Q || !bu || !bi || !item_of_rank || !taken) {
        st = LAC_ERR_OUT_OF_MEMORY;
        goto done;
    }
    user_counts(p, count);
    start[0] = 0;
    for (int64_t u = 0; u < nu; u++) start[u + 1] = start[u] + count[u];
    LAC_CHECK_GOTO(lac_ratings_new(ctx, start[nu], &r), st, done);

    /* popularity: Zipf over ranks; ranks dealt to items by a seeded shuffle */
    double total = 0.0;
    for (int64_t i = 0; i < ni; i++) total += pow((double)(i + 1), -p->popularity_exponent);
    double acc = 0.0;
    for (int64_t i = 0; i < ni; i++) {
        acc += pow((double)(i + 1), -p->popularity_exponent) / total;
        cdf[i] = acc;
    }
    cdf[ni - 1] = 1.0;
    {
        rng g = stream(p->seed, 1, 0);
        for (int64_t i = 0; i < ni; i++) item_of_rank[i] = (int32_t)i;
        for (int64_t i = ni - 1; i > 0; i--) {
            int64_t j = (int64_t)(next(&g) % (uint64_t)(i + 1));
            int32_t t = item_of_rank[i];
            item_of_rank[i] = item_of_rank[j];
            item_of_rank[j] = t;
        }
    }
    /* the signal: var(p . q) = k sd^4 = 0.5, biases like MovieLens' spread */
    double sd = pow(0.5 / (double)k, 0.25);
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t u = 0; u < nu; u++) {
        rng g = stream(p->seed, 2, (uint64_t)u);
        for (int64_t f = 0; f < k; f++) P[u * k + f] = (float)(sd * gauss(&g));
        bu[u] = (float)(0.35 * gauss(&g));
    }
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t i = 0; i < ni; i++) {
        rng g = stream(p->seed, 3, (uint64_t)i);
        for (int64_t f = 0; f < k; f++) Q[i * k + f] = (float)(sd * gauss(&g));
        bi[i] = (float)(0.45 * gauss(&g));
    }
    for (int64_t i = 0; i < (int64_t)threads * ni; i++) taken[i] = -1;
    double mu = p->half_stars ? 3.5 : 3.6, step = p->half_stars ? 0.5 : 1.0, lo = p->half_stars ? 0.5 : 1.0;

#pragma omp parallel for num_threads(threads) schedule(dynamic, 64)
    for (int64_t u = 0; u < nu; u++) {
        int32_t *mark = taken + (int64_t)omp_get_thread_num() * ni;
        rng g = stream(p->seed, 4, (uint64_t)u);
        int64_t want = count[u], got = 0, tries = 0, max_tries = 4 * want + 100;
        int64_t at = start[u];
        while (got < want && tries++ < max_tries) {
            /* inverse CDF by bisection */
            double x = uniform(&g);
            int64_t a = 0, b = ni - 1;
            while (a < b) {
                int64_t mid = (a + b) / 2;
                if (cdf[mid] < x) a = mid + 1;
                else b = mid;
            }
            int32_t j = item_of_rank[a];
            if (mark[j] == (int32_t)u) continue;
            mark[j] = (int32_t)u;
            double v = mu + bu[u] + bi[j] + p->noise * gauss(&g);
            for (int64_t f = 0; f < k; f++) v += (double)P[u * k + f] * Q[(int64_t)j * k + f];
            if (p->item_clusters > 0) {   /* the user's effect on j's cluster */
                rng cg = stream(p->seed, 5, (uint64_t)u * (uint64_t)p->item_clusters + (uint64_t)(j % p->item_clusters));
                v += p->cluster_strength * gauss(&cg);
            }
            v = lo + step * floor((v - lo) / step + 0.5);
            v = v < lo ? lo : v > 5.0 ? 5.0 : v;
            r->user[at + got] = (int32_t)u;
            r->item[at + got] = j;
            r->value[at + got] = (float)v;
            got++;
        }
        made[u] = got;
    }
    /* close the gaps left by users that drew fewer distinct items */
    int64_t w = 0;
    for (int64_t u = 0; u < nu; u++) {
        if (w != start[u]) {
            memmove(r->user + w, r->user + start[u], (size_t)made[u] * sizeof *r->user);
            memmove(r->item + w, r->item + start[u], (size_t)made[u] * sizeof *r->item);
            memmove(r->value + w, r->value + start[u], (size_t)made[u] * sizeof *r->value);
        }
        w += made[u];
    }
    r->count = w;
    LAC_CHECK_GOTO(lac_idmap_numbered(ctx, nu, &r->users), st, done);
    LAC_CHECK_GOTO(lac_idmap_numbered(ctx, ni, &r->items), st, done);
    *out = r;
    r = NULL;
done:
    lac_ratings_destroy(&r);
    free(count);
    free(start);
    free(made);
    free(cdf);
    free(P);
    free(Q);
    free(bu);
    free(bi);
    free(item_of_rank);
    free(taken);
    return st;
}
