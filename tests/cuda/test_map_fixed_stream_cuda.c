/* Deterministic maps of host arrays that do not fit the device (GPU test,
 * label "cuda"): with LACUNA_CUDA_MEMORY_CAP at 256k, SUM / COUNT / MEAN rows
 * stream twice in chunks through the fixed-point words, on one device and
 * on two shares of device 0. Each result is compared with the same call on
 * an uncapped one-device context (the whole copy: bits equal) and with a
 * float64 reference written here; the streaming is seen through the log. A
 * bad bridge entry or a NaN names one device's first position with T
 * untouched; a malformed cap is refused. Fresh random data each run (seed
 * printed; LACUNA_TEST_SEED replays one). */
#include "harness.h"
#include "lacuna/lacuna.h"

#include <stdint.h>

static lac_ctx_t whole;               /* device 0, no cap: rows copied whole */
static lac_ctx_t capped[2];           /* cap 1M: device 0; ids 0,0 */
static int streamed;                  /* log lines saying rows were streamed */
static unsigned long long rng;

#include "cuda/map_case.h"

static void count_streamed(lac_log_level level, const char *message, void *user)
{
    (void)level, (void)user;
    if (strstr(message, "streamed in chunks")) streamed++;
}

/* T's bytes of one call (T starting at d->T0) into raw; the status. */
static int run(lac_ctx_t ctx, const case_data *d, const lac_map_params *p, void *raw)
{
    double *out = malloc(sizeof(double) * (size_t)(d->n * d->b + 1));
    int st = run_case(ctx, d, p, LAC_MEM_HOST, RUN_MAP, out, raw);
    free(out);
    return st;
}

static void check_streamed(int g, const case_data *d, const lac_map_params *p)
{
    const int64_t slots = d->n * d->b;
    const size_t bytes = (size_t)slots * lac_dtype_size(d->vt);
    void *got = malloc(bytes + 1), *base = malloc(bytes + 1);
    double *ref = malloc(sizeof(double) * (size_t)(slots + 1)), *as_double = malloc(sizeof(double) * (size_t)(slots + 1));
    char label[240];
    snprintf(label, sizeof label, "%s, op %s, %s, %s, w %d, m %lld, n %lld, b %lld, acc %d, chunk %lld",
             g ? "two shares" : "one device", lac_map_op_name(p->op), d->vt == LAC_FLOAT32 ? "f32" : "f64",
             d->it == LAC_INT32 ? "i32" : "i64", d->weighted, (long long)d->m, (long long)d->n, (long long)d->b,
             p->accumulate, (long long)p->chunk_elements);
    const int before = streamed;
    int st = run(capped[g], d, p, got);
    const int chunks_logged = streamed - before;
    int st1 = run(whole, d, p, base);
    if (st != LAC_SUCCESS || st1 != LAC_SUCCESS) {
        HARNESS_FAIL("%s: status %d / %d (%s / %s)", label, st, st1, lac_last_error(capped[g]), lac_last_error(whole));
    } else {
        if (memcmp(got, base, bytes) != 0) HARNESS_FAIL("%s: differs from the whole copy", label);
        reference(d, p, ref);
        for (int64_t k = 0; k < slots; k++) as_double[k] = value_at(got, d->vt, k);
        int64_t where;
        const double e = compare(as_double, ref, slots, &where);
        if (e > (d->vt == LAC_FLOAT32 ? 2e-5 : 1e-12)) HARNESS_FAIL("%s: off the reference by %g at %lld", label, e, (long long)where);
    }
    if (chunks_logged != (g ? 2 : 1)) HARNESS_FAIL("%s: %d streamed parts logged", label, chunks_logged);
    free(got);
    free(base);
    free(ref);
    free(as_double);
}

/* Every dtype pair and weighting, one and two columns, few targets (words in
 * shared memory) and many (L2), a skewed bridge, accumulate, empty targets,
 * chunks that do not divide the rows. */
TEST(streamed_deterministic_sums_have_the_bits_of_the_whole_copy)
{
    static const lac_map_op sums[] = {LAC_MAP_SUM, LAC_MAP_COUNT, LAC_MAP_MEAN};
    const int quick = map_test_quick();
    for (int g = 0; g < 2; g++)
        for (int vt = 0; vt < 2; vt++)
            for (int it = 0; it < 2; it++)
                for (int weighted = 0; weighted < 2; weighted++) {
                    const int shape = (vt + 2 * it + weighted + g) % 4;
                    if (quick && shape != 1 && shape != 2) continue;
                    const int64_t m = 120000 + 1 + 7 * shape;
                    const int64_t n = shape == 0 ? 7 : shape == 1 ? 300 : shape == 2 ? 40000 : 150000;
                    case_data d;
                    case_make(&d, m, n, shape == 1 ? 2 : 1, vt ? LAC_FLOAT64 : LAC_FLOAT32, it ? LAC_INT64 : LAC_INT32,
                              weighted, shape == 2);
                    for (int o = 0; o < 3; o++)
                        for (int acc = 0; acc < 2; acc++) {
                            if (acc && sums[o] == LAC_MAP_MEAN) continue;
                            lac_map_params p = lac_map_params_default();
                            p.op = sums[o];
                            p.deterministic = 1;
                            p.accumulate = acc;
                            p.empty_value = -7.5;
                            p.chunk_elements = shape == 3 ? 0 : 9001 + 1000 * shape;   /* 0: the default, one chunk */
                            check_streamed(g, &d, &p);
                        }
                    case_free(&d);
                }
}

/* A rejected streamed call: one device's status and message, T untouched. */
static void check_rejected(int g, const case_data *d, const lac_map_params *p, const char *want, const char *what)
{
    const size_t bytes = (size_t)(d->n * d->b) * lac_dtype_size(d->vt);
    void *before = to_dtype(d->T0, d->n * d->b, d->vt), *got = malloc(bytes), *base = malloc(bytes);
    char message[512];
    int st1 = run(whole, d, p, base);
    snprintf(message, sizeof message, "%s", lac_last_error(whole));
    int st = run(capped[g], d, p, got);
    if (st != st1 || st >= 0) HARNESS_FAIL("%s, g %d: status %d, whole copy %d", what, g, st, st1);
    else if (strcmp(lac_last_error(capped[g]), message) != 0)
        HARNESS_FAIL("%s, g %d: '%s', whole copy '%s'", what, g, lac_last_error(capped[g]), message);
    else if (!strstr(message, want)) HARNESS_FAIL("%s: '%s' does not name '%s'", what, message, want);
    if (memcmp(before, got, bytes) != 0) HARNESS_FAIL("%s, g %d: T was changed", what, g);
    free(before);
    free(got);
    free(base);
}

TEST(streamed_bad_index_and_nan_name_the_first_position)
{
    for (int g = 0; g < 2; g++) {
        case_data d;
        case_make(&d, 150000, 4000, 1, LAC_FLOAT32, g ? LAC_INT64 : LAC_INT32, 1, 0);
        lac_map_params p = lac_map_params_default();
        p.deterministic = 1;
        p.op = LAC_MAP_MEAN;
        p.chunk_elements = 10007;
        /* An entry in a later chunk (and the last share) and an earlier one. */
        d.R[140000] = d.n + 5;
        d.R[80000] = -4;
        check_rejected(g, &d, &p, "bridge[80000] = -4", "bad index");
        d.R[80000] = 1;
        p.op = LAC_MAP_SUM;
        p.accumulate = 1;
        check_rejected(g, &d, &p, "bridge[140000]", "bad index in a late chunk (accumulate)");
        d.R[140000] = 2;
        p.nan_policy = LAC_NAN_ERROR;
        d.w[130000] = NAN;
        d.S[20000] = NAN;
        check_rejected(g, &d, &p, "source[20000", "NaN source");
        d.S[20000] = 0.5;
        check_rejected(g, &d, &p, "weights[130000", "NaN weight in a late chunk");
        case_free(&d);
    }
}

TEST(a_malformed_memory_cap_is_refused)
{
    lac_ctx_params cp = lac_ctx_params_default();
    cp.backend = LAC_BACKEND_CUDA;
    cp.knobs = "CUDA_MEMORY_CAP=12Q";
    lac_ctx_t bad = NULL;
    CHECK_OK(NULL, lac_ctx_create(&cp, &bad));
    case_data d;
    case_make(&d, 5000, 100, 1, LAC_FLOAT32, LAC_INT32, 0, 0);
    lac_map_params p = lac_map_params_default();
    p.deterministic = 1;
    const size_t bytes = (size_t)d.n * sizeof(float);
    void *before = to_dtype(d.T0, d.n, d.vt), *got = malloc(bytes);
    int st = run(bad, &d, &p, got);
    if (st != LAC_ERR_VALUE || !strstr(lac_last_error(bad), "LACUNA_CUDA_MEMORY_CAP=12Q"))
        HARNESS_FAIL("cap 12Q: status %d '%s'", st, lac_last_error(bad));
    if (memcmp(before, got, bytes) != 0) HARNESS_FAIL("cap 12Q: T was changed");
    free(before);
    free(got);
    case_free(&d);
    lac_ctx_destroy(&bad);
}

int main(void)
{
    map_test_seed();
    lac_ctx_params cp = lac_ctx_params_default();
    cp.backend = LAC_BACKEND_CUDA;
    if (lac_ctx_create(&cp, &whole) != LAC_SUCCESS) {
        printf("no CUDA context (%s): nothing to test here\n", lac_last_error(NULL));
        return 77;
    }
    for (int g = 0; g < 2; g++) {
        lac_ctx_params mp = lac_ctx_params_default();
        mp.backend = LAC_BACKEND_CUDA;
        mp.num_devices = g ? 2 : 1;   /* two shares of device 0 */
        mp.knobs = "CUDA_MEMORY_CAP=256k";
        mp.log = count_streamed;
        mp.log_level = LAC_LOG_DEBUG;
        if (lac_ctx_create(&mp, &capped[g]) != LAC_SUCCESS) {
            printf("no capped context (%d shares): %s\n", g + 1, lac_last_error(NULL));
            return 1;
        }
    }
    RUN(streamed_deterministic_sums_have_the_bits_of_the_whole_copy);
    RUN(streamed_bad_index_and_nan_name_the_first_position);
    RUN(a_malformed_memory_cap_is_refused);
    for (int g = 0; g < 2; g++) lac_ctx_destroy(&capped[g]);
    lac_ctx_destroy(&whole);
    return harness_finish();
}
