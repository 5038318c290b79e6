/* The 64-bit hashes of the binary files (basis caches, mf checkpoints): one
 * definition each, since a file written with one must be read with the same. */
#ifndef LACUNA_CORE_HASH_H
#define LACUNA_CORE_HASH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define LAC_HASH_SEED 0xcbf29ce484222325ull

/* Fast, over whole words and then the tail bytes: the value depends on how
 * the bytes are cut into calls (hash the same pieces to check). */
static inline uint64_t lac_hash_words(uint64_t h, const void *data, size_t bytes)
{
    const unsigned char *p = data;
    size_t words = bytes / 8;
    for (size_t i = 0; i < words; i++) {
        uint64_t w;
        memcpy(&w, p + 8 * i, 8);
        h = (h ^ w) * 0x100000001B3ull;
        h ^= h >> 29;
    }
    for (size_t i = words * 8; i < bytes; i++) h = (h ^ p[i]) * 0x100000001B3ull;
    return h;
}

/* FNV-1a 64 over bytes: the same however the bytes are cut into calls. */
static inline uint64_t lac_fnv1a64(uint64_t h, const void *data, size_t bytes)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < bytes; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

#endif
