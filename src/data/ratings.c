/* The ratings set: creation, growth, release, accessors, and building one from
 * caller arrays. The file readers and writer are in src/io/ratings_*.c. */
#include "data/ratings.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

lac_status lac_ratings_new(lac_ctx_t ctx, int64_t cap, lac_ratings_t *out)
{
    lac_ratings_t r = lac_calloc(ctx, 1, sizeof *r);
    if (!r) return LAC_ERR_OUT_OF_MEMORY;
    lac_idmap_init(&r->users);
    lac_idmap_init(&r->items);
    if (cap < 16) cap = 16;
    r->user = lac_malloc(ctx, (size_t)cap * sizeof *r->user);
    r->item = lac_malloc(ctx, (size_t)cap * sizeof *r->item);
    r->value = lac_malloc(ctx, (size_t)cap * sizeof *r->value);
    r->cap = cap;
    if (!r->user || !r->item || !r->value) {
        lac_ratings_destroy(&r);
        return LAC_ERR_OUT_OF_MEMORY;
    }
    *out = r;
    return LAC_SUCCESS;
}

lac_status lac_ratings_push(lac_ctx_t ctx, lac_ratings_t r, int32_t user, int32_t item, float value)
{
    if (r->count == r->cap) {
        int64_t nc = r->cap * 2;
        int32_t *u = realloc(r->user, (size_t)nc * sizeof *u);
        if (u) r->user = u;
        int32_t *i = realloc(r->item, (size_t)nc * sizeof *i);
        if (i) r->item = i;
        float *v = realloc(r->value, (size_t)nc * sizeof *v);
        if (v) r->value = v;
        if (!u || !i || !v)
            return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "out of memory growing ratings to %lld entries", (long long)nc);
        r->cap = nc;
    }
    r->user[r->count] = user;
    r->item[r->count] = item;
    r->value[r->count] = value;
    r->count++;
    return LAC_SUCCESS;
}

void lac_ratings_destroy(lac_ratings_t *ratings)
{
    if (!ratings || !*ratings) return;
    lac_ratings_t r = *ratings;
    free(r->user);
    free(r->item);
    free(r->value);
    free(r->time);
    lac_idmap_free(&r->users);
    lac_idmap_free(&r->items);
    free(r);
    *ratings = NULL;
}

int64_t lac_ratings_count(lac_ratings_t r) { return r ? r->count : 0; }
int64_t lac_ratings_num_users(lac_ratings_t r) { return r ? r->users.count : 0; }
int64_t lac_ratings_num_items(lac_ratings_t r) { return r ? r->items.count : 0; }
int64_t lac_ratings_skipped(lac_ratings_t r) { return r ? r->skipped : 0; }
const char *lac_ratings_user_id(lac_ratings_t r, int64_t user) { return r ? lac_idmap_name(&r->users, user) : NULL; }
const char *lac_ratings_item_id(lac_ratings_t r, int64_t item) { return r ? lac_idmap_name(&r->items, item) : NULL; }

lac_status lac_ratings_get(lac_ratings_t r, int64_t i, int64_t *user, int64_t *item, float *rating)
{
    if (!r) return lac_error(NULL, LAC_ERR_ARGUMENT, "ratings is NULL");
    if (i < 0 || i >= r->count)
        return lac_error(NULL, LAC_ERR_RANGE, "rating %lld is outside [0, %lld)", (long long)i, (long long)r->count);
    if (user) *user = r->user[i];
    if (item) *item = r->item[i];
    if (rating) *rating = r->value[i];
    return LAC_SUCCESS;
}

lac_status lac_ratings_from_arrays(lac_ctx_t ctx, int64_t count, const int64_t *users, const int64_t *items,
                                   const float *ratings, lac_ratings_t *out)
{
    LAC_ARG_NOT_NULL(ctx, out);
    if (count < 0) return lac_error(ctx, LAC_ERR_SHAPE, "count = %lld is negative", (long long)count);
    if (count > 0 && (!users || !items || !ratings))
        return lac_error(ctx, LAC_ERR_ARGUMENT, "users, items or ratings is NULL");
    for (int64_t i = 0; i < count; i++)
        if (!isfinite(ratings[i]))
            return lac_error(ctx, LAC_ERR_VALUE, "ratings[%lld] is not finite", (long long)i);
    lac_ratings_t r;
    LAC_CHECK(lac_ratings_new(ctx, count, &r));
    lac_status st = LAC_SUCCESS;
    char buf[32];
    for (int64_t i = 0; i < count; i++) {
        int32_t u, it;
        int len = snprintf(buf, sizeof buf, "%lld", (long long)users[i]);
        LAC_CHECK_GOTO(lac_idmap_intern(ctx, &r->users, buf, (size_t)len, &u), st, fail);
        len = snprintf(buf, sizeof buf, "%lld", (long long)items[i]);
        LAC_CHECK_GOTO(lac_idmap_intern(ctx, &r->items, buf, (size_t)len, &it), st, fail);
        LAC_CHECK_GOTO(lac_ratings_push(ctx, r, u, it, ratings[i]), st, fail);
    }
    *out = r;
    return LAC_SUCCESS;
fail:
    lac_ratings_destroy(&r);
    return st;
}
