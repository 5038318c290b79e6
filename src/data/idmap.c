/* Id maps (user/item id text -> dense index, first-seen order). */
#include "data/idmap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void lac_idmap_init(lac_idmap *map) { memset(map, 0, sizeof *map); }

void lac_idmap_free(lac_idmap *map)
{
    if (!map) return;
    free(map->name_offset);
    free(map->arena);
    free(map->slots);
    memset(map, 0, sizeof *map);
}

static uint64_t hash_name(const char *s, size_t len)
{
    uint64_t h = 1469598103934665603ull;   /* FNV-1a, then a final mix */
    for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    return h ^ (h >> 32);
}

int64_t lac_idmap_find(const lac_idmap *map, const char *name, size_t len)
{
    if (map->slot_count == 0) return -1;
    uint64_t mask = (uint64_t)map->slot_count - 1;
    for (uint64_t s = hash_name(name, len) & mask;; s = (s + 1) & mask) {
        int32_t idx = map->slots[s];
        if (idx < 0) return -1;
        const char *have = map->arena + map->name_offset[idx];
        if (strncmp(have, name, len) == 0 && have[len] == '\0') return idx;
    }
}

static lac_status grow_slots(lac_ctx_t ctx, lac_idmap *map)
{
    int64_t ns = map->slot_count ? map->slot_count * 2 : 1024;
    int32_t *slots = lac_malloc(ctx, (size_t)ns * sizeof *slots);
    if (!slots) return LAC_ERR_OUT_OF_MEMORY;
    memset(slots, 0xff, (size_t)ns * sizeof *slots);
    uint64_t mask = (uint64_t)ns - 1;
    for (int64_t i = 0; i < map->count; i++) {
        const char *nm = map->arena + map->name_offset[i];
        uint64_t s = hash_name(nm, strlen(nm)) & mask;
        while (slots[s] >= 0) s = (s + 1) & mask;
        slots[s] = (int32_t)i;
    }
    free(map->slots);
    map->slots = slots;
    map->slot_count = ns;
    return LAC_SUCCESS;
}

lac_status lac_idmap_intern(lac_ctx_t ctx, lac_idmap *map, const char *name, size_t len, int32_t *index)
{
    int64_t found = lac_idmap_find(map, name, len);
    if (found >= 0) {
        *index = (int32_t)found;
        return LAC_SUCCESS;
    }
    if (map->count >= INT32_MAX) return lac_error(ctx, LAC_ERR_RANGE, "more than %d distinct ids", INT32_MAX);
    if ((map->count + 1) * 2 > map->slot_count) LAC_CHECK(grow_slots(ctx, map));
    if (map->count == map->name_cap) {
        int64_t nc = map->name_cap ? map->name_cap * 2 : 1024;
        int64_t *grown = realloc(map->name_offset, (size_t)nc * sizeof *grown);
        if (!grown) return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "id map: out of memory for %lld ids", (long long)nc);
        map->name_offset = grown;
        map->name_cap = nc;
    }
    if (map->arena_len + (int64_t)len + 1 > map->arena_cap) {
        int64_t nc = map->arena_cap ? map->arena_cap * 2 : 16384;
        while (nc < map->arena_len + (int64_t)len + 1) nc *= 2;
        char *grown = realloc(map->arena, (size_t)nc);
        if (!grown) return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "id map: out of memory for %lld bytes", (long long)nc);
        map->arena = grown;
        map->arena_cap = nc;
    }
    memcpy(map->arena + map->arena_len, name, len);
    map->arena[map->arena_len + (int64_t)len] = '\0';
    map->name_offset[map->count] = map->arena_len;
    map->arena_len += (int64_t)len + 1;
    uint64_t mask = (uint64_t)map->slot_count - 1;
    uint64_t s = hash_name(name, len) & mask;
    while (map->slots[s] >= 0) s = (s + 1) & mask;
    map->slots[s] = (int32_t)map->count;
    *index = (int32_t)map->count++;
    return LAC_SUCCESS;
}

lac_status lac_idmap_copy(lac_ctx_t ctx, const lac_idmap *src, lac_idmap *dst)
{
    lac_idmap_init(dst);
    if (src->count == 0) return LAC_SUCCESS;
    dst->name_offset = lac_malloc(ctx, (size_t)src->count * sizeof *dst->name_offset);
    dst->arena = lac_malloc(ctx, (size_t)src->arena_len);
    dst->slots = lac_malloc(ctx, (size_t)src->slot_count * sizeof *dst->slots);
    if (!dst->name_offset || !dst->arena || !dst->slots) {
        lac_idmap_free(dst);
        return LAC_ERR_OUT_OF_MEMORY;
    }
    memcpy(dst->name_offset, src->name_offset, (size_t)src->count * sizeof *dst->name_offset);
    memcpy(dst->arena, src->arena, (size_t)src->arena_len);
    memcpy(dst->slots, src->slots, (size_t)src->slot_count * sizeof *dst->slots);
    dst->count = dst->name_cap = src->count;
    dst->arena_len = dst->arena_cap = src->arena_len;
    dst->slot_count = src->slot_count;
    return LAC_SUCCESS;
}

lac_status lac_idmap_numbered(lac_ctx_t ctx, int64_t count, lac_idmap *map)
{
    char buf[32];
    for (int64_t i = 0; i < count; i++) {
        int len = snprintf(buf, sizeof buf, "%lld", (long long)(i + 1));
        int32_t idx;
        LAC_CHECK(lac_idmap_intern(ctx, map, buf, (size_t)len, &idx));
    }
    return LAC_SUCCESS;
}
