/* libFuzzer harness: lac_ratings_read with every lac_ratings_format (AUTO,
 * TRIPLES, MOVIELENS, UDATA, CSV, MATRIX_MARKET), each strict, with
 * skip_bad and with interaction pairs. On success every rating is finite
 * and its dense indices and ids are in range; skip_bad never reads fewer
 * ratings than the strict reader, and pairs read what the strict reader
 * reads (they only admit more lines); a failure leaves *out NULL. */
#include "fuzz_common.h"

#include <math.h>
#include <string.h>

static lac_status read_ratings(const char *path, lac_ratings_format format, int skip_bad, int pairs, int64_t *count)
{
    lac_ratings_read_params p = lac_ratings_read_params_default();
    p.format = format;
    p.skip_bad = skip_bad;
    p.pairs = pairs;
    lac_ratings_t r = NULL;
    lac_ctx_t ctx = fuzz_ctx_new();
    lac_status st = lac_ratings_read(ctx, path, &p, &r);
    fuzz_check_status(ctx, st, "lac_ratings_read");
    lac_ctx_destroy(&ctx);
    const char *name = lac_ratings_format_name(format);
    if (st != LAC_SUCCESS) {
        if (r) fuzz_fail("lac_ratings_read(%s) failed (%d) and set *out", name, st);
        return st;
    }
    int64_t n = lac_ratings_count(r), users = lac_ratings_num_users(r), items = lac_ratings_num_items(r);
    if (n < 1 || users < 1 || items < 1 || users > n || items > n || lac_ratings_skipped(r) < 0 ||
        (!skip_bad && lac_ratings_skipped(r) != 0))
        fuzz_fail("lac_ratings_read(%s): %lld ratings, %lld users, %lld items, %lld skipped", name, (long long)n,
                  (long long)users, (long long)items, (long long)lac_ratings_skipped(r));
    for (int64_t i = 0; i < n; i++) {
        int64_t u = -1, it = -1;
        float v = NAN;
        if (lac_ratings_get(r, i, &u, &it, &v) != LAC_SUCCESS || u < 0 || u >= users || it < 0 || it >= items || !isfinite(v))
            fuzz_fail("lac_ratings_read(%s): rating %lld is (%lld, %lld, %g)", name, (long long)i, (long long)u,
                      (long long)it, (double)v);
    }
    for (int64_t u = 0; u < users; u++) {
        const char *id = lac_ratings_user_id(r, u);
        if (!id || !*id) fuzz_fail("lac_ratings_read(%s): user %lld has no id", name, (long long)u);
    }
    for (int64_t it = 0; it < items; it++) {
        const char *id = lac_ratings_item_id(r, it);
        if (!id || !*id) fuzz_fail("lac_ratings_read(%s): item %lld has no id", name, (long long)it);
    }
    if (lac_ratings_user_id(r, users) || lac_ratings_item_id(r, -1))
        fuzz_fail("lac_ratings_read(%s): an id outside the range", name);
    *count = n;
    lac_ratings_destroy(&r);
    return st;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file(data, size);
    for (int f = LAC_RATINGS_AUTO; f <= LAC_RATINGS_MATRIX_MARKET; f++) {
        int64_t strict = 0, skipping = 0, paired = 0;
        lac_status a = read_ratings(path, (lac_ratings_format)f, 0, 0, &strict);
        lac_status b = read_ratings(path, (lac_ratings_format)f, 1, 0, &skipping);
        lac_status c = read_ratings(path, (lac_ratings_format)f, 0, 1, &paired);
        if (a == LAC_SUCCESS && (b != LAC_SUCCESS || skipping != strict))
            fuzz_fail("lac_ratings_read(%s): %lld ratings strict, status %d and %lld with skip_bad",
                      lac_ratings_format_name((lac_ratings_format)f), (long long)strict, b, (long long)skipping);
        if (a == LAC_SUCCESS && (c != LAC_SUCCESS || paired != strict))
            fuzz_fail("lac_ratings_read(%s): %lld ratings strict, status %d and %lld with pairs",
                      lac_ratings_format_name((lac_ratings_format)f), (long long)strict, c, (long long)paired);
    }
    return 0;
}
