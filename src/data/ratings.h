/* Ratings in memory (lac_ratings_t): the triples as dense indices plus the two
 * id maps (user and item id text -> dense index). Shared by the rating file
 * readers and writers (src/io/ratings_*.c) and the mf capability (src/mf). */
#ifndef LACUNA_DATA_RATINGS_H
#define LACUNA_DATA_RATINGS_H

#include "core/internal.h"
#include "data/idmap.h"

#ifdef __cplusplus
extern "C" {
#endif

struct lac_ratings {
    int64_t count, cap;
    int32_t *user, *item;     /* dense indices into users / items */
    float *value;
    lac_idmap users, items;
    int64_t skipped;          /* malformed lines skipped when read */
    double *time;             /* count timestamps (a line's 4th field when numeric, else NaN), as
                               * read; NULL when no line had one */
};

/* An empty ratings set with room for cap entries. */
lac_status lac_ratings_new(lac_ctx_t ctx, int64_t cap, lac_ratings_t *out);
/* Appends one entry (grows the arrays). */
lac_status lac_ratings_push(lac_ctx_t ctx, lac_ratings_t r, int32_t user, int32_t item, float value);

#ifdef __cplusplus
}
#endif
#endif
