/* map on a CUDA context of several devices (GPU test, label "cuda"): two and
 * three shares of device 0 (device ids 0,0 and 0,0,0) against a float64
 * reference written here and against a one-device context: every op, float32
 * and float64, int32 and int64 bridges, weights, accumulate, empty targets,
 * host arrays (split by rows across the shares, also out of core in small
 * chunks) and device arrays (on the first device), plans, deterministic calls
 * (bit-identical run to run and to one device), and bad indices / NaN naming
 * the same first position as one device with T untouched. The split is seen
 * through the context's log. Fresh random data each run (seed printed;
 * LACUNA_TEST_SEED replays one). */
#include "harness.h"
#include "lacuna/lacuna.h"

#include <stdint.h>
#include <time.h>

static lac_ctx_t one;                 /* device 0 */
static lac_ctx_t multi[2];            /* ids 0,0 and 0,0,0 */
static const int share_counts[2] = {2, 3};
static int splits;                    /* log lines saying a call was split */
static unsigned long long rng;

#include "cuda/map_case.h"

static void count_splits(lac_log_level level, const char *message, void *user)
{
    (void)level, (void)user;
    if (strstr(message, "rows split across")) splits++;
}

/* One call on ctx (plan: a plan made and executed) with T starting at
 * d->T0; T's bytes land in raw. Returns the status. */
static int run(lac_ctx_t ctx, const case_data *d, const lac_map_params *p, lac_memory mem, int plan, void *raw)
{
    double *out = malloc(sizeof(double) * (size_t)(d->n * d->b + 1));
    int st = run_case(ctx, d, p, mem, plan ? RUN_PLAN : RUN_MAP, out, raw);
    free(out);
    return st;
}

/* Max over targets of |got - ref| / max(1, |ref|). */
static double worst(const void *raw, lac_dtype vt, const double *ref, int64_t count)
{
    double *got = malloc(sizeof(double) * (size_t)(count + 1));
    for (int64_t k = 0; k < count; k++) got[k] = value_at(raw, vt, k);
    int64_t where;
    double e = compare(got, ref, count, &where);
    free(got);
    return e;
}

/* Sums of ~30 terms: float32 within a few ulps of the sum's scale. */
static double tolerance(lac_dtype vt) { return vt == LAC_FLOAT32 ? 2e-5 : 1e-12; }

/* One call on a several-device context against the reference and against
 * the one-device context (exact for MIN / MAX / unweighted COUNT). */
static void check_against_one(int g, const case_data *d, const lac_map_params *p, lac_memory mem, int plan, int want_split,
                              const char *what)
{
    const int64_t slots = d->n * d->b;
    const size_t bytes = (size_t)slots * lac_dtype_size(d->vt);
    double *ref = malloc(sizeof(double) * (size_t)(slots + 1));
    void *got = malloc(bytes + 1), *base = malloc(bytes + 1);
    reference(d, p, ref);
    const int before = splits;
    int st = run(multi[g], d, p, mem, plan, got);
    const int split = splits - before;
    int st1 = run(one, d, p, LAC_MEM_HOST, 0, base);
    char label[200];
    snprintf(label, sizeof label, "%s, %d shares, op %d, %s, %s, w %d, b %lld, %s%s", what, share_counts[g], (int)p->op,
             d->vt == LAC_FLOAT32 ? "f32" : "f64", d->it == LAC_INT32 ? "i32" : "i64", d->weighted, (long long)d->b,
             mem == LAC_MEM_DEVICE ? "device" : "host", plan ? ", plan" : "");
    if (st != LAC_SUCCESS || st1 != LAC_SUCCESS) {
        HARNESS_FAIL("%s: status %d / %d (%s)", label, st, st1, lac_last_error(multi[g]));
    } else {
        double e = worst(got, d->vt, ref, slots);
        if (e > tolerance(d->vt)) HARNESS_FAIL("%s: off the reference by %g", label, e);
        const int exact = p->op == LAC_MAP_MIN || p->op == LAC_MAP_MAX || (p->op == LAC_MAP_COUNT && !d->weighted);
        if (exact && memcmp(got, base, bytes) != 0) HARNESS_FAIL("%s: differs from one device", label);
        if (!exact) {
            double *ones = calloc((size_t)slots + 1, sizeof(double));
            for (int64_t k = 0; k < slots; k++) ones[k] = value_at(base, d->vt, k);
            if (worst(got, d->vt, ones, slots) > tolerance(d->vt)) HARNESS_FAIL("%s: off one device", label);
            free(ones);
        }
    }
    if (want_split >= 0 && (split > 0) != want_split)
        HARNESS_FAIL("%s: %s split across the shares", label, want_split ? "not" : "unexpectedly");
    free(ref);
    free(got);
    free(base);
}

static const lac_map_op ops[] = {LAC_MAP_SUM, LAC_MAP_MEAN, LAC_MAP_MIN, LAC_MAP_MAX, LAC_MAP_COUNT};

/* Host arrays are split: every op, dtype pair and weighting, on both contexts. */
TEST(host_arrays_split_across_shares_match_reference_and_one_device)
{
    for (int g = 0; g < 2; g++)
        for (int vt = 0; vt < 2; vt++)
            for (int it = 0; it < 2; it++)
                for (int weighted = 0; weighted < 2; weighted++) {
                    case_data d;
                    case_make(&d, 150000, 4000, (vt + it + weighted) % 2 ? 2 : 1, vt ? LAC_FLOAT64 : LAC_FLOAT32,
                               it ? LAC_INT64 : LAC_INT32, weighted, 0);
                    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
                        lac_map_params p = lac_map_params_default();
                        p.op = ops[o];
                        check_against_one(g, &d, &p, LAC_MEM_HOST, 0, 1, "host");
                        if (p.op != LAC_MAP_MEAN && weighted == vt) {
                            p.accumulate = 1;
                            check_against_one(g, &d, &p, LAC_MEM_HOST, 0, 1, "host, accumulate");
                        }
                    }
                    case_free(&d);
                }
}

/* More targets than rows: empty targets get empty_value; out-of-core chunks
 * inside each share's range. */
TEST(empty_targets_and_out_of_core_chunks_per_share)
{
    for (int g = 0; g < 2; g++)
        for (int vt = 0; vt < 2; vt++) {
            case_data d;
            case_make(&d, 120000, 300000, 1, vt ? LAC_FLOAT64 : LAC_FLOAT32, LAC_INT32, 1, 0);
            for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
                lac_map_params p = lac_map_params_default();
                p.op = ops[o];
                p.empty_value = -7.5;
                check_against_one(g, &d, &p, LAC_MEM_HOST, 0, 1, "empty targets");
                p.chunk_elements = 7001;   /* several chunks a share, a short last one */
                check_against_one(g, &d, &p, LAC_MEM_HOST, 0, 1, "out of core");
            }
            case_free(&d);
        }
}

/* Device arrays, plans and small calls stay on the first device. */
TEST(device_arrays_plans_and_small_calls_stay_on_the_first_device)
{
    for (int g = 0; g < 2; g++)
        for (int vt = 0; vt < 2; vt++) {
            case_data d;
            case_make(&d, 150000, 5000, 1, vt ? LAC_FLOAT64 : LAC_FLOAT32, vt ? LAC_INT32 : LAC_INT64, vt, 0);
            for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
                lac_map_params p = lac_map_params_default();
                p.op = ops[o];
                check_against_one(g, &d, &p, LAC_MEM_DEVICE, 0, 0, "device arrays");
                check_against_one(g, &d, &p, LAC_MEM_DEVICE, 1, 0, "device arrays");
                check_against_one(g, &d, &p, LAC_MEM_HOST, 1, 0, "host arrays");
            }
            case_free(&d);
            case_make(&d, 1000, 50, 1, vt ? LAC_FLOAT64 : LAC_FLOAT32, LAC_INT32, 0, 0);
            lac_map_params p = lac_map_params_default();
            check_against_one(g, &d, &p, LAC_MEM_HOST, 0, 0, "small call");
            case_free(&d);
        }
}

/* Deterministic calls: the same bits run to run, and the bits of one device. */
TEST(deterministic_is_bit_identical_and_equals_one_device)
{
    for (int g = 0; g < 2; g++)
        for (int vt = 0; vt < 2; vt++)
            for (int mem = 0; mem < 2; mem++) {
                case_data d;
                case_make(&d, 150000, 3000, 1, vt ? LAC_FLOAT64 : LAC_FLOAT32, LAC_INT32, 1, 0);
                const size_t bytes = (size_t)d.n * lac_dtype_size(d.vt);
                void *a = malloc(bytes), *b = malloc(bytes), *c = malloc(bytes);
                lac_map_params p = lac_map_params_default();
                p.op = LAC_MAP_MEAN;
                p.deterministic = 1;
                lac_memory where = mem ? LAC_MEM_DEVICE : LAC_MEM_HOST;
                CHECK_OK(multi[g], run(multi[g], &d, &p, where, 0, a));
                CHECK_OK(multi[g], run(multi[g], &d, &p, where, 0, b));
                CHECK_OK(one, run(one, &d, &p, where, 0, c));
                if (memcmp(a, b, bytes) != 0) HARNESS_FAIL("%d shares, vt %d, mem %d: runs differ", share_counts[g], vt, mem);
                if (memcmp(a, c, bytes) != 0)
                    HARNESS_FAIL("%d shares, vt %d, mem %d: differs from one device", share_counts[g], vt, mem);
                free(a);
                free(b);
                free(c);
                case_free(&d);
            }
}

/* A rejected call: the status and message of one device, T untouched. */
static void check_rejected(int g, const case_data *d, const lac_map_params *p, const char *want, const char *what)
{
    const size_t bytes = (size_t)(d->n * d->b) * lac_dtype_size(d->vt);
    void *before = to_dtype(d->T0, d->n * d->b, d->vt), *got = malloc(bytes), *base = malloc(bytes);
    char message[512];
    int st1 = run(one, d, p, LAC_MEM_HOST, 0, base);
    snprintf(message, sizeof message, "%s", lac_last_error(one));
    int st = run(multi[g], d, p, LAC_MEM_HOST, 0, got);
    if (st != st1 || st >= 0) HARNESS_FAIL("%s, %d shares: status %d, one device %d", what, share_counts[g], st, st1);
    else if (strcmp(lac_last_error(multi[g]), message) != 0)
        HARNESS_FAIL("%s, %d shares: '%s', one device '%s'", what, share_counts[g], lac_last_error(multi[g]), message);
    else if (!strstr(message, want)) HARNESS_FAIL("%s: '%s' does not name '%s'", what, message, want);
    if (memcmp(before, got, bytes) != 0) HARNESS_FAIL("%s, %d shares: T was changed", what, share_counts[g]);
    free(before);
    free(got);
    free(base);
}

TEST(bad_index_and_nan_name_the_first_position_across_shares)
{
    for (int g = 0; g < 2; g++)
        for (int it = 0; it < 2; it++) {
            case_data d;
            case_make(&d, 150000, 4000, 1, LAC_FLOAT32, it ? LAC_INT64 : LAC_INT32, 1, 0);
            lac_map_params p = lac_map_params_default();
            /* One bad entry in the last share's range and an earlier one in
             * the middle (the second share's): the earlier is named. */
            d.R[140000] = d.n + 5;
            d.R[80000] = -4;
            check_rejected(g, &d, &p, "bridge[80000] = -4", "bad index");
            p.op = LAC_MAP_MAX;
            p.accumulate = 1;
            check_rejected(g, &d, &p, "bridge[80000] = -4", "bad index (max, accumulate)");
            d.R[80000] = 1;
            check_rejected(g, &d, &p, "bridge[140000]", "bad index in the last share");
            d.R[140000] = 2;
            lac_map_params q = lac_map_params_default();
            q.nan_policy = LAC_NAN_ERROR;
            d.w[130000] = NAN;
            d.S[20000] = NAN;
            check_rejected(g, &d, &q, "source[20000", "NaN source in the first share");
            case_free(&d);
        }
}

int main(void)
{
    map_test_seed();
    lac_ctx_params cp = lac_ctx_params_default();
    cp.backend = LAC_BACKEND_CUDA;
    if (lac_ctx_create(&cp, &one) != LAC_SUCCESS) {
        printf("no CUDA context (%s): nothing to test here\n", lac_last_error(NULL));
        return 77;
    }
    for (int g = 0; g < 2; g++) {
        lac_ctx_params mp = lac_ctx_params_default();
        mp.backend = LAC_BACKEND_CUDA;
        mp.num_devices = share_counts[g];   /* every share on device 0 */
        mp.log = count_splits;
        mp.log_level = LAC_LOG_DEBUG;
        if (lac_ctx_create(&mp, &multi[g]) != LAC_SUCCESS) {
            printf("no context of %d shares: %s\n", share_counts[g], lac_last_error(NULL));
            return 1;
        }
    }
    RUN(host_arrays_split_across_shares_match_reference_and_one_device);
    RUN(empty_targets_and_out_of_core_chunks_per_share);
    RUN(device_arrays_plans_and_small_calls_stay_on_the_first_device);
    RUN(deterministic_is_bit_identical_and_equals_one_device);
    RUN(bad_index_and_nan_name_the_first_position_across_shares);
    lac_ctx_destroy(&multi[0]);
    lac_ctx_destroy(&multi[1]);
    lac_ctx_destroy(&one);
    return harness_finish();
}
