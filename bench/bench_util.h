/* Timing helpers shared by the benchmarks: a monotonic clock and the median
 * of repeated measurements. */
#ifndef LACUNA_BENCH_UTIL_H
#define LACUNA_BENCH_UTIL_H

#include <math.h>
#include <stdlib.h>
#include <time.h>

static inline double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of n values (sorts them in place); NaN for none. */
static inline double median(double *v, int n)
{
    if (n <= 0) return NAN;
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

#endif
