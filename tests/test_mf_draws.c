/* The negatives' draws by weight (src/mf/mf_backend.h): the guided search
 * with the reciprocal's remainder picks exactly the item of a plain `%` and
 * a binary search over the cumulative weights, for random weights with
 * zero-weight items, one item, and totals from 1 to near 2^64. */
#include "harness.h"
#include "mf/mf_internal.h"

#include <stdint.h>

/* The rule without the table's index: bits % total, then the first item
 * whose cumulative weight exceeds it. */
static int32_t plain_pick(const uint64_t *cum, int64_t n, uint64_t bits)
{
    const uint64_t x = bits % cum[n - 1];
    int64_t lo = 0, hi = n - 1;
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (cum[mid] > x) hi = mid;
        else lo = mid + 1;
    }
    return (int32_t)lo;
}

static uint64_t rng_state = 12345;
static uint64_t next_u64(void) { return lac_splitmix64(&rng_state); }

#define BITS_MAX ((1ull << 53) - 1)

/* A table of n items from weights w (cumulated here), then many draws of
 * bits: random, around multiples of the total and of every item's bounds,
 * and the 53-bit range's ends. Returns the mismatches. */
static int64_t compare(const uint64_t *w, int64_t n)
{
    uint64_t *cum = calloc((size_t)lac_mf_cum_words(n), sizeof *cum);
    uint64_t c = 0;
    for (int64_t j = 0; j < n; j++) cum[j] = c += w[j];
    lac_mf_cum_index(cum, n);
    const uint64_t total = cum[n - 1];
    int64_t bad = 0;
    uint64_t probe[16] = {0, 1, 2, BITS_MAX, BITS_MAX - 1, total - 1, total, total + 1, 2 * total - 1,
                          BITS_MAX - BITS_MAX % total, BITS_MAX - BITS_MAX % total - 1, 1ull << 52,
                          (1ull << 52) - 1, total / 2, 3 * total, 3 * total - 1};
    for (int x = 0; x < 16; x++) {
        const uint64_t b = probe[x] & BITS_MAX;
        bad += lac_mf_cum_pick(cum, n, b) != plain_pick(cum, n, b);
    }
    for (int x = 0; x < 20000; x++) {
        const uint64_t b = next_u64() >> 11;
        bad += lac_mf_cum_pick(cum, n, b) != plain_pick(cum, n, b);
    }
    /* every item's bounds, at several multiples of the total */
    for (int64_t j = 0; j < n && j < 4096; j++)
        for (uint64_t q = 0; q < 3 && (q == 0 || total <= BITS_MAX / q); q++) {
            for (int d = -1; d <= 1; d++) {
                const uint64_t b = (q * total + cum[j] + (uint64_t)(int64_t)d) & BITS_MAX;
                bad += lac_mf_cum_pick(cum, n, b) != plain_pick(cum, n, b);
            }
        }
    free(cum);
    return bad;
}

/* n random weights below 2^bits (at least 1 in all), a share `zeros` of them 0. */
static int64_t random_case(int64_t n, int bits, double zeros)
{
    uint64_t *w = malloc((size_t)n * sizeof *w);
    uint64_t sum = 0;
    for (int64_t j = 0; j < n; j++) {
        const int zero = (double)(next_u64() >> 11) * 0x1p-53 < zeros;
        w[j] = zero ? 0 : (bits >= 64 ? next_u64() : next_u64() >> (64 - bits));
        sum += w[j];
    }
    if (!sum) w[n / 2] = 1;
    const int64_t bad = compare(w, n);
    free(w);
    return bad;
}

TEST(guided_search_matches_plain_search)
{
    const int64_t sizes[] = {1, 2, 3, 5, 8, 17, 100, 1000, 10677};
    const int widths[] = {1, 4, 20, 31, 40};   /* ML-10M's table: about 2^40 in all */
    for (int a = 0; a < 9; a++)
        for (int b = 0; b < 5; b++)
            for (int z = 0; z < 3; z++) {
                const int64_t bad = random_case(sizes[a], widths[b], z * 0.4);
                if (bad) HARNESS_FAIL("n %lld, weights < 2^%d, zeros %.1f: %lld draws differ", (long long)sizes[a],
                                      widths[b], z * 0.4, (long long)bad);
            }
}

TEST(edge_tables)
{
    uint64_t one[1] = {1}, big_one[1] = {UINT64_MAX}, mid_one[1] = {(1ull << 53) + 3};
    CHECK(compare(one, 1) == 0);
    CHECK(compare(big_one, 1) == 0);
    CHECK(compare(mid_one, 1) == 0);
    /* zeros first and last, one weighted item between */
    uint64_t lone[7] = {0, 0, 0, 5, 0, 0, 0};
    CHECK(compare(lone, 7) == 0);
    /* totals past the 53-bit draws: only the first items can be drawn */
    uint64_t huge[4] = {1ull << 40, 1ull << 62, 1ull << 62, (1ull << 63) - (1ull << 40) - 1};   /* total 2^64 - 1 */
    CHECK(compare(huge, 4) == 0);
    uint64_t near53[5] = {1, (1ull << 52) - 1, 1, (1ull << 51) + 7, 0};
    CHECK(compare(near53, 5) == 0);
    /* many light items behind one heavy one (most of a bucket's items) */
    uint64_t skew[300];
    for (int j = 0; j < 300; j++) skew[j] = j == 0 ? 1ull << 40 : (uint64_t)(j % 3);
    CHECK(compare(skew, 300) == 0);
    /* no weight at all: every draw the last item, no division by 0 */
    uint64_t *cum = calloc((size_t)lac_mf_cum_words(3), sizeof *cum);
    lac_mf_cum_index(cum, 3);
    CHECK(lac_mf_cum_pick(cum, 3, 0) == 2);
    CHECK(lac_mf_cum_pick(cum, 3, BITS_MAX) == 2);
    free(cum);
}

/* The draws by seed go through the table the same way: item from
 * lac_mf_draw_negative against the plain rule on lac_mf_draw_bits. */
TEST(draw_negative_uses_the_rule)
{
    const int64_t n = 10677;
    uint64_t *cum = malloc((size_t)lac_mf_cum_words(n) * sizeof *cum);
    uint64_t c = 0;
    for (int64_t j = 0; j < n; j++) cum[j] = c += 1 + (uint64_t)(1e9 / (double)(j + 1));   /* Zipf-like */
    lac_mf_cum_index(cum, n);
    int64_t bad = 0;
    for (int a = 0; a < 50000; a++) {
        const uint64_t seed = lac_mf_draw_seed(7, a % 5, a % 977);
        const int32_t j = a % 1000;
        const int t = a % 11, r = a % 32;
        bad += lac_mf_draw_negative(cum, seed, j, t, r, n) != plain_pick(cum, n, lac_mf_draw_bits(seed, j, t, r));
    }
    CHECK(bad == 0);
    CHECK(lac_mf_draw_negative(NULL, 99, 3, 1, 0, n) == lac_mf_draw_item(99, 3, 1, 0, n));
    free(cum);
}

int main(void)
{
    RUN(guided_search_matches_plain_search);
    RUN(edge_tables);
    RUN(draw_negative_uses_the_rule);
    return harness_finish();
}
