/* The K best of a stream, for any element type: a min-heap on "ranks before"
 * whose root is the worst kept (mf recommend, the exact neighbour search).
 * LAC_TOPK_DEFINE(name, T, better), better(a, b) true when a ranks before b,
 * defines
 *   name_offer(T *h, int64_t *size, int64_t k, T x)  keeps x if it is among the k best so far
 *   name_sort(T *h, int64_t size)                    the kept ones, best first (heap sort) */
#ifndef LACUNA_CORE_TOPK_H
#define LACUNA_CORE_TOPK_H

#include <stdint.h>

#define LAC_TOPK_DEFINE(name, T, better)                                     \
    static inline __attribute__((unused)) void name##_down(T *h, int64_t n, int64_t i)               \
    {                                                                        \
        for (;;) {                                                           \
            int64_t l = 2 * i + 1, r = l + 1, w = i;                         \
            if (l < n && better(h[w], h[l])) w = l;                          \
            if (r < n && better(h[w], h[r])) w = r;                          \
            if (w == i) return;                                              \
            T t_ = h[i];                                                     \
            h[i] = h[w];                                                     \
            h[w] = t_;                                                       \
            i = w;                                                           \
        }                                                                    \
    }                                                                        \
    static inline __attribute__((unused)) void name##_offer(T *h, int64_t *n, int64_t k, T x)        \
    {                                                                        \
        if (*n < k) {                                                        \
            int64_t i = (*n)++;                                              \
            h[i] = x;                                                        \
            while (i > 0) {                                                  \
                int64_t parent = (i - 1) / 2;                                \
                if (!better(h[parent], h[i])) break;                         \
                T t_ = h[i];                                                 \
                h[i] = h[parent];                                            \
                h[parent] = t_;                                              \
                i = parent;                                                  \
            }                                                                \
        } else if (k > 0 && better(x, h[0])) {                               \
            h[0] = x;                                                        \
            name##_down(h, k, 0);                                            \
        }                                                                    \
    }                                                                        \
    static inline __attribute__((unused)) void name##_sort(T *h, int64_t n)                          \
    {                                                                        \
        for (int64_t end = n - 1; end > 0; end--) {                          \
            T t_ = h[0];                                                     \
            h[0] = h[end];                                                   \
            h[end] = t_;                                                     \
            name##_down(h, end, 0);                                          \
        }                                                                    \
    }

#endif
