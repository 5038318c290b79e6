/* Id maps: id text -> dense index in order of first appearance (the user and
 * item ids of ratings). */
#ifndef LACUNA_DATA_IDMAP_H
#define LACUNA_DATA_IDMAP_H

#include "core/internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Names live NUL-ended in one arena; an open-addressing table of indices
 * finds them. Indices are 32-bit: the layouts and kernels use 32-bit indices. */
typedef struct {
    int64_t count;
    int64_t *name_offset;     /* count entries: where each name starts in arena */
    int64_t name_cap;
    char *arena;
    int64_t arena_len, arena_cap;
    int32_t *slots;           /* -1 empty, else a dense index */
    int64_t slot_count;       /* a power of two */
} lac_idmap;

void lac_idmap_init(lac_idmap *map);
void lac_idmap_free(lac_idmap *map);
/* Dense index of name[0..len), or -1. */
int64_t lac_idmap_find(const lac_idmap *map, const char *name, size_t len);
/* Index of name, adding it when new; LAC_ERR_OUT_OF_MEMORY or LAC_ERR_RANGE
 * (more than 2^31 - 1 ids) recorded on ctx. */
lac_status lac_idmap_intern(lac_ctx_t ctx, lac_idmap *map, const char *name, size_t len, int32_t *index);
static inline const char *lac_idmap_name(const lac_idmap *map, int64_t index)
{
    return (index >= 0 && index < map->count) ? map->arena + map->name_offset[index] : NULL;
}
/* Deep copy into an initialised, empty map. */
lac_status lac_idmap_copy(lac_ctx_t ctx, const lac_idmap *src, lac_idmap *dst);
/* Ids "1", "2", ... "count" (1-based, as MovieLens numbers them). */
lac_status lac_idmap_numbered(lac_ctx_t ctx, int64_t count, lac_idmap *map);

#ifdef __cplusplus
}
#endif
#endif
