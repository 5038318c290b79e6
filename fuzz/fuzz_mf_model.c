/* libFuzzer harness: lac_mf_model_load. Each input is read as it is, and
 * again with its trailing checksum recomputed (FNV-1a 64 of everything before
 * it, as the writer puts it), so that mutations reach the fields behind the
 * checksum. A model that loads has consistent sizes, ids that map back to
 * their indices, and recommends for its first user; a failure leaves *out
 * NULL. */
#include "fuzz_common.h"

#include <stdlib.h>
#include <string.h>

static void load(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file(data, size);
    lac_mf_model_t m = NULL;
    lac_ctx_t ctx = fuzz_ctx_new();
    lac_status st = lac_mf_model_load(ctx, path, &m);
    fuzz_check_status(ctx, st, "lac_mf_model_load");
    if (st != LAC_SUCCESS) {
        if (m) fuzz_fail("lac_mf_model_load failed (%d) and set *out", st);
        lac_ctx_destroy(&ctx);
        return;
    }
    int64_t users = lac_mf_model_num_users(m), items = lac_mf_model_num_items(m);
    int k = lac_mf_model_k(m);
    if (users < 0 || items < 0 || k < 1 || (uint64_t)(users + items) * (uint64_t)k * 4 > size)
        fuzz_fail("lac_mf_model_load: %lld users, %lld items, k %d from %zu bytes", (long long)users, (long long)items, k, size);
    for (int64_t u = 0; u < users; u++) {
        const char *id = lac_mf_model_user_id(m, u);
        if (!id) fuzz_fail("lac_mf_model_load: user %lld has no id", (long long)u);
        if (lac_mf_model_user_index(m, id) != u)
            fuzz_fail("lac_mf_model_load: user id '%s' maps to %lld, not %lld", id, (long long)lac_mf_model_user_index(m, id),
                      (long long)u);
    }
    for (int64_t it = 0; it < items; it++)
        if (!lac_mf_model_item_id(m, it)) fuzz_fail("lac_mf_model_load: item %lld has no id", (long long)it);
    if (lac_mf_model_user_id(m, users) || lac_mf_model_item_id(m, items)) fuzz_fail("lac_mf_model_load: an id past the end");
    if (users > 0) {
        int64_t user = 0, top[3];
        float scores[3];
        st = lac_mf_recommend(ctx, m, 1, &user, 3, top, scores);
        if (st != LAC_SUCCESS) fuzz_fail("lac_mf_recommend on a loaded model: %d: %s", st, lac_last_error(ctx));
        for (int i = 0; i < 3; i++)
            if (top[i] < -1 || top[i] >= items) fuzz_fail("lac_mf_recommend: item %lld of %lld", (long long)top[i], (long long)items);
    }
    lac_mf_model_destroy(&m);
    lac_ctx_destroy(&ctx);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    load(data, size);
    if (size < 8) return 0;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < size - 8; i++) h = (h ^ data[i]) * 1099511628211ull;
    uint8_t sum[8];
    for (int i = 0; i < 8; i++) sum[i] = (uint8_t)(h >> (8 * i));
    if (memcmp(data + size - 8, sum, 8) == 0) return 0;
    uint8_t *fixed = malloc(size);
    memcpy(fixed, data, size - 8);
    memcpy(fixed + size - 8, sum, 8);
    load(fixed, size);
    free(fixed);
    return 0;
}
