/* A tiny test harness: each test file is one executable (one ctest entry) that
 * runs its TEST functions and prints every failed check with the values that
 * differed. */
#ifndef LACUNA_TESTS_HARNESS_H
#define LACUNA_TESTS_HARNESS_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int harness_failed_checks;
static int harness_failed_tests;
static int harness_passed_tests;
static const char *harness_current;

#define TEST(name) static void name(void)

/* LACUNA_TEST_ONLY=text runs only the tests whose names contain text. */
#define RUN(name)                                                          \
    do {                                                                   \
        int before_ = harness_failed_checks;                               \
        const char *only_ = getenv("LACUNA_TEST_ONLY");                    \
        if (only_ && *only_ && !strstr(#name, only_)) break;               \
        harness_current = #name;                                           \
        name();                                                            \
        if (harness_failed_checks == before_) {                            \
            harness_passed_tests++;                                        \
            printf("  ok    %s\n", #name);                                 \
        } else {                                                           \
            harness_failed_tests++;                                        \
            printf("  FAIL  %s\n", #name);                                 \
        }                                                                  \
        fflush(stdout);                                                    \
    } while (0)

static inline int harness_finish(void)
{
    printf("%d passed, %d failed\n", harness_passed_tests, harness_failed_tests);
    return harness_failed_tests ? 1 : 0;
}

#define HARNESS_FAIL(...)                                                  \
    do {                                                                   \
        harness_failed_checks++;                                           \
        printf("    %s:%d: in %s: ", __FILE__, __LINE__, harness_current); \
        printf(__VA_ARGS__);                                               \
        printf("\n");                                                      \
    } while (0)

#define CHECK(cond)                                                        \
    do {                                                                   \
        if (!(cond)) HARNESS_FAIL("CHECK(%s) failed", #cond);              \
    } while (0)

#define CHECK_INT(a, b)                                                    \
    do {                                                                   \
        long long a_ = (long long)(a), b_ = (long long)(b);                \
        if (a_ != b_) HARNESS_FAIL("%s == %s: %lld != %lld", #a, #b, a_, b_); \
    } while (0)

/* |a - b| <= tol * max(1, |b|): relative for large values, absolute near 0. */
#define CHECK_NEAR(a, b, tol)                                              \
    do {                                                                   \
        double a_ = (double)(a), b_ = (double)(b), t_ = (double)(tol);     \
        double s_ = fabs(b_) > 1.0 ? fabs(b_) : 1.0;                       \
        if (!(fabs(a_ - b_) <= t_ * s_) && !(isnan(a_) && isnan(b_)))      \
            HARNESS_FAIL("%s ~ %s: %.17g vs %.17g (tol %g)", #a, #b, a_, b_, t_); \
    } while (0)

#define CHECK_STR_CONTAINS(haystack, needle)                               \
    do {                                                                   \
        const char *h_ = (haystack), *n_ = (needle);                       \
        if (!h_ || !strstr(h_, n_)) HARNESS_FAIL("'%s' does not contain '%s'", h_ ? h_ : "(null)", n_); \
    } while (0)

/* A lacuna call's status, with the context's last error when it differs. */
#define CHECK_STATUS(ctx, expr, expected)                                  \
    do {                                                                   \
        int s_ = (expr);                                                   \
        if (s_ != (expected))                                              \
            HARNESS_FAIL("%s returned %d, expected %d (%s)", #expr, s_, (int)(expected), lac_last_error(ctx)); \
    } while (0)

#define CHECK_OK(ctx, expr) CHECK_STATUS(ctx, expr, 0)

/* Deterministic test data: splitmix64. */
static inline unsigned long long harness_rand_u64(unsigned long long *state)
{
    unsigned long long z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static inline double harness_rand_uniform(unsigned long long *state)
{
    return (double)(harness_rand_u64(state) >> 11) * (1.0 / 9007199254740992.0);
}

/* A fresh temporary path under the build's test folder (or /tmp). */
static inline void harness_temp_path(char *buf, size_t len, const char *name)
{
    const char *dir = getenv("LACUNA_TEST_TMPDIR");
    snprintf(buf, len, "%s/lacuna-test-%d-%s", dir && *dir ? dir : "/tmp", (int)getpid(), name);
}

/* Rating triples built up one at a time (the ratings tests' generators). */
typedef struct {
    int64_t n, cap, *u, *i;
    float *r;
} harness_triples;

static inline void harness_triples_push(harness_triples *t, int64_t u, int64_t i, float r)
{
    if (t->n == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 1024;
        t->u = (int64_t *)realloc(t->u, (size_t)t->cap * sizeof *t->u);
        t->i = (int64_t *)realloc(t->i, (size_t)t->cap * sizeof *t->i);
        t->r = (float *)realloc(t->r, (size_t)t->cap * sizeof *t->r);
        if (!t->u || !t->i || !t->r) abort();
    }
    t->u[t->n] = u;
    t->i[t->n] = i;
    t->r[t->n++] = r;
}

static inline void harness_triples_free(harness_triples *t)
{
    free(t->u);
    free(t->i);
    free(t->r);
    memset(t, 0, sizeof *t);
}

#endif
