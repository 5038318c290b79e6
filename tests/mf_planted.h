/* Generated interactions with planted preferences, split leave-one-out, and
 * most-popular's HR@10 on them (tests/test_mf_implicit.c, the CUDA tests),
 * and a model's HR@10 / NDCG@10 on them. Include after harness.h and lacuna.h. */
#ifndef LACUNA_TESTS_MF_PLANTED_H
#define LACUNA_TESTS_MF_PLANTED_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Interactions (ids 1-based integers) split leave-one-out: each user's
 * last one is held out. */
typedef struct {
    harness_triples train;
    int64_t users, items;
    int64_t *held;            /* per user id: the held-out item id, 0 none */
} loo;

/* Planted preferences: items fall in `groups` clusters (item i in cluster
 * i mod groups) with a popularity within each (weight 1 / (1 + rank)); every
 * user likes two clusters and takes `per_user` distinct items, 85 % from its
 * clusters and the rest from all items, each by popularity. */
static uint64_t next(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double unit01(uint64_t *s) { return (double)(next(s) >> 11) * (1.0 / 9007199254740992.0); }

/* An item of cluster c (or of all, c < 0) by popularity 1 / (1 + its rank). */
static int64_t draw_item(uint64_t *s, int64_t items, int groups, int c)
{
    int64_t n = c < 0 ? items : (items - c + groups - 1) / groups;
    double total = 0.0;
    for (int64_t r = 0; r < n; r++) total += 1.0 / (1.0 + r);
    double x = unit01(s) * total;
    int64_t r = 0;
    for (; r < n - 1; r++) {
        x -= 1.0 / (1.0 + r);
        if (x <= 0) break;
    }
    return c < 0 ? r + 1 : r * groups + c + 1;   /* ids from 1 */
}

static void make_loo(loo *d, int64_t users, int64_t items, int per_user, int groups, uint64_t seed)
{
    memset(d, 0, sizeof *d);
    d->users = users;
    d->items = items;
    d->held = calloc((size_t)users + 1, sizeof *d->held);
    unsigned char *taken = calloc((size_t)items + 1, 1);
    uint64_t s = seed;
    for (int64_t uid = 1; uid <= users; uid++) {
        int like[2] = {(int)(next(&s) % (uint64_t)groups), (int)(next(&s) % (uint64_t)groups)};
        int64_t got[256];
        int n = 0;
        for (int tries = 0; n < per_user && tries < 50 * per_user; tries++) {
            int64_t i = unit01(&s) < 0.85 ? draw_item(&s, items, groups, like[next(&s) & 1]) : draw_item(&s, items, groups, -1);
            if (taken[i]) continue;
            taken[i] = 1;
            got[n++] = i;
        }
        for (int x = 0; x < n; x++) {
            taken[got[x]] = 0;
            if (x == n - 1) d->held[uid] = got[x];   /* the last taken is held out */
            else harness_triples_push(&d->train, uid, got[x], 1.0f);
        }
    }
    free(taken);
}

/* HR@10 of most-popular: items by training count (ties: lower id), the
 * user's own training items left out. */
static double hr_popular(const loo *d)
{
    int64_t *pop = calloc((size_t)d->items + 1, sizeof *pop);
    for (int64_t x = 0; x < d->train.n; x++) pop[d->train.i[x]]++;
    int64_t hits = 0, n = 0;
    unsigned char *mine = calloc((size_t)d->items + 1, 1);
    for (int64_t uid = 1; uid <= d->users; uid++) {
        if (!d->held[uid]) continue;
        for (int64_t x = 0; x < d->train.n; x++)
            if (d->train.u[x] == uid) mine[d->train.i[x]] = 1;
        int64_t better = 0, h = d->held[uid];
        for (int64_t i = 1; i <= d->items; i++)
            if (!mine[i] && i != h && (pop[i] > pop[h] || (pop[i] == pop[h] && i < h))) better++;
        hits += better < 10;
        n++;
        memset(mine, 0, (size_t)d->items + 1);
    }
    free(pop);
    free(mine);
    return (double)hits / (double)n;
}

/* HR@10 and NDCG@10 of m on the held-out interactions (full ranking, lac_mf_rank_evaluate). */
static inline void loo_rank(lac_ctx_t ctx, lac_mf_model_t m, const loo *d, lac_mf_rank_report *rep)
{
    int64_t n = 0, *u = malloc(sizeof(int64_t) * (size_t)d->users), *i = malloc(sizeof(int64_t) * (size_t)d->users);
    float *one = malloc(sizeof(float) * (size_t)d->users);
    for (int64_t uid = 1; uid <= d->users; uid++)
        if (d->held[uid]) u[n] = uid, i[n] = d->held[uid], one[n++] = 1.0f;
    lac_ratings_t test = NULL;
    CHECK_OK(ctx, lac_ratings_from_arrays(ctx, n, u, i, one, &test));
    lac_mf_rank_params rp = lac_mf_rank_params_default();
    rp.negatives = 0;
    CHECK_OK(ctx, lac_mf_rank_evaluate(ctx, &rp, m, test, rep));
    lac_ratings_destroy(&test);
    free(u);
    free(i);
    free(one);
}

#endif
