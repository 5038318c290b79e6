/* Seeded pseudo-random numbers shared by the generators and schedules:
 * splitmix64 (Steele, Lea & Flood, 2014), cheap, splittable by seeding one
 * stream per row or purpose, so that results do not depend on thread count. */
#ifndef LACUNA_CORE_RANDOM_H
#define LACUNA_CORE_RANDOM_H

#include <stdint.h>

/* Callable from CUDA kernels too (counter-based draws on the device). */
#ifdef __CUDACC__
#define LAC_RANDOM_HD __host__ __device__
#else
#define LAC_RANDOM_HD
#endif

/* The splitmix64 finaliser: a bijective mix of one 64-bit word. */
static inline LAC_RANDOM_HD uint64_t lac_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Advances *state and returns the next 64 random bits. */
static inline LAC_RANDOM_HD uint64_t lac_splitmix64(uint64_t *state)
{
    return lac_mix64(*state += 0x9E3779B97F4A7C15ull);
}

#endif
