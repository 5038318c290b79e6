/* map on a CUDA context of several devices (GPU test, label "cuda"): two and
 * three shares of device 0 (device ids 0,0 and 0,0,0) against a float64
 * reference written here and against a one-device context: every op, float32
 * and float64, int32 and int64 bridges, weights, accumulate, empty targets,
 * host arrays (split by rows across the shares, also out of core in small
 * chunks) and device arrays (on the first device), plans, deterministic calls
 * (bit-identical run to run and to one device; split in exact fixed point:
 * SUM / COUNT / MEAN with one device's bits, the CPU's on exact data, a
 * range too wide for the words whole on the first device; plans of host
 * bridges planned per share, one device's bits), and bad indices /
 * NaN naming the same first position as one device with T untouched. The split is seen
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

/* float32 within a few ulps of the sum's scale. */
static double tolerance(lac_dtype vt) { return vt == LAC_FLOAT32 ? 2e-5 : 1e-12; }

/* The scale of each slot's error: the reference over |S|, |w| and |T0|
 * (for a sum, the sum of its terms' magnitudes). A skewed bridge's hot
 * targets take ~17,000 terms whose sum may be near 0; a float32 sum of them
 * in the device's order is off by ~1e-5 of the terms' magnitude. */
static void error_scale(const case_data *d, const lac_map_params *p, double *scale)
{
    case_data a = *d;
    a.S = malloc(sizeof(double) * (size_t)(d->m * d->b + 1));
    a.w = malloc(sizeof(double) * (size_t)(d->m + 1));
    a.T0 = malloc(sizeof(double) * (size_t)(d->n * d->b + 1));
    for (int64_t i = 0; i < d->m * d->b; i++) a.S[i] = fabs(d->S[i]);
    for (int64_t i = 0; i < d->m; i++) a.w[i] = fabs(d->w[i]);
    for (int64_t k = 0; k < d->n * d->b; k++) a.T0[k] = fabs(d->T0[k]);
    reference(&a, p, scale);
    free(a.S), free(a.w), free(a.T0);
}

/* Max over slots of |got - ref| / max(1, |ref|, scale); past the tolerance,
 * the worst slot printed. */
static double worst(const void *raw, lac_dtype vt, const double *ref, const double *scale, int64_t count)
{
    double e = 0;
    int64_t where = -1;
    for (int64_t k = 0; k < count; k++) {
        const double g = value_at(raw, vt, k), r = ref[k];
        double x;
        if (isnan(g) || isnan(r)) x = isnan(g) && isnan(r) ? 0.0 : INFINITY;
        else x = fabs(g - r) / fmax(1.0, fmax(fabs(r), isfinite(scale[k]) ? fabs(scale[k]) : 0.0));
        if (x > e) e = x, where = k;
    }
    if (e > tolerance(vt) && where >= 0)
        printf("    worst at slot %lld: %.9g against %.9g (scale %.9g)\n", (long long)where, value_at(raw, vt, where),
               ref[where], scale[where]);
    return e;
}


/* One call on a several-device context against the reference and against
 * the one-device context (exact for MIN / MAX / unweighted COUNT). */
static void check_against_one(int g, const case_data *d, const lac_map_params *p, lac_memory mem, int plan, int want_split,
                              const char *what)
{
    const int64_t slots = d->n * d->b;
    const size_t bytes = (size_t)slots * lac_dtype_size(d->vt);
    double *ref = malloc(sizeof(double) * (size_t)(slots + 1)), *scale = malloc(sizeof(double) * (size_t)(slots + 1));
    void *got = malloc(bytes + 1), *base = malloc(bytes + 1);
    reference(d, p, ref);
    error_scale(d, p, scale);
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
        double e = worst(got, d->vt, ref, scale, slots);
        if (e > tolerance(d->vt)) HARNESS_FAIL("%s: off the reference by %g", label, e);
        const int exact = p->op == LAC_MAP_MIN || p->op == LAC_MAP_MAX || (p->op == LAC_MAP_COUNT && !d->weighted);
        if (exact && memcmp(got, base, bytes) != 0) HARNESS_FAIL("%s: differs from one device", label);
        if (!exact) {
            double *ones = calloc((size_t)slots + 1, sizeof(double));
            for (int64_t k = 0; k < slots; k++) ones[k] = value_at(base, d->vt, k);
            if (worst(got, d->vt, ones, scale, slots) > tolerance(d->vt)) HARNESS_FAIL("%s: off one device", label);
            free(ones);
        }
    }
    if (want_split >= 0 && (split > 0) != want_split)
        HARNESS_FAIL("%s: %s split across the shares", label, want_split ? "not" : "unexpectedly");
    free(ref);
    free(scale);
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

/* Device arrays, plans of device bridges and small calls stay on the first
 * device; plans of host bridges are split (the host-array plan below). */
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
                check_against_one(g, &d, &p, LAC_MEM_HOST, 1, 1, "host arrays");
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

/* A deterministic call on a several-device context: split when want_split
 * (-1: either), the bits of the one-device context, near the reference. */
static void check_deterministic(int g, const case_data *d, const lac_map_params *p, int want_split, const char *what)
{
    const int64_t slots = d->n * d->b;
    const size_t bytes = (size_t)slots * lac_dtype_size(d->vt);
    void *got = malloc(bytes + 1), *base = malloc(bytes + 1);
    double *ref = malloc(sizeof(double) * (size_t)(slots + 1));
    const int before = splits;
    int st = run(multi[g], d, p, LAC_MEM_HOST, 0, got);
    const int split = splits - before;
    int st1 = run(one, d, p, LAC_MEM_HOST, 0, base);
    char label[240];
    snprintf(label, sizeof label, "deterministic %s, %d shares, op %s, %s, %s, w %d, m %lld, n %lld, b %lld, acc %d", what,
             share_counts[g], lac_map_op_name(p->op), d->vt == LAC_FLOAT32 ? "f32" : "f64", d->it == LAC_INT32 ? "i32" : "i64",
             d->weighted, (long long)d->m, (long long)d->n, (long long)d->b, p->accumulate);
    if (st != LAC_SUCCESS || st1 != LAC_SUCCESS) {
        HARNESS_FAIL("%s: status %d / %d (%s)", label, st, st1, lac_last_error(multi[g]));
    } else {
        if (memcmp(got, base, bytes) != 0) HARNESS_FAIL("%s: differs from one device", label);
        double *scale = malloc(sizeof(double) * (size_t)(slots + 1));
        reference(d, p, ref);
        error_scale(d, p, scale);
        double e = worst(got, d->vt, ref, scale, slots);
        if (e > tolerance(d->vt)) HARNESS_FAIL("%s: off the reference by %g", label, e);
        free(scale);
    }
    if (want_split >= 0 && (split > 0) != want_split)
        HARNESS_FAIL("%s: %s split across the shares", label, want_split ? "not" : "unexpectedly");
    free(got);
    free(base);
    free(ref);
}

/* SUM / COUNT / MEAN in exact fixed point, split: every dtype pair and
 * weighting, one and two columns, few targets (words in shared memory) and
 * many (in L2), a skewed bridge (hot targets), odd row counts, accumulate on
 * and empty targets. */
TEST(deterministic_split_gives_the_bits_of_one_device)
{
    static const lac_map_op sums[] = {LAC_MAP_SUM, LAC_MAP_COUNT, LAC_MAP_MEAN};
    for (int g = 0; g < 2; g++)
        for (int vt = 0; vt < 2; vt++)
            for (int it = 0; it < 2; it++)
                for (int weighted = 0; weighted < 2; weighted++) {
                    const int shape = (vt + 2 * it + weighted + g) % 4;
                    const int64_t m = 100000 + 1 + 7 * shape;                  /* not a multiple of 2 or 3 */
                    const int64_t n = shape == 0 ? 7 : shape == 1 ? 300 : shape == 2 ? 40000 : 250000;
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
                            check_deterministic(g, &d, &p, 1, "split");
                        }
                    case_free(&d);
                }
}

/* Data whose float64 sums are exact: the CPU backend's deterministic bits
 * too; MIN / MAX (order-free, split by the non-deterministic path) equal. */
TEST(deterministic_split_equals_the_cpu_on_exact_data)
{
    lac_ctx_params cp = lac_ctx_params_default();
    cp.backend = LAC_BACKEND_CPU;
    lac_ctx_t cpu = NULL;
    CHECK_OK(NULL, lac_ctx_create(&cp, &cpu));
    static const lac_map_op all[] = {LAC_MAP_SUM, LAC_MAP_COUNT, LAC_MAP_MEAN, LAC_MAP_MIN, LAC_MAP_MAX};
    for (int g = 0; g < 2; g++)
        for (int vt = 0; vt < 2; vt++) {
            case_data d;
            case_make(&d, 120001, 900, 1, vt ? LAC_FLOAT64 : LAC_FLOAT32, LAC_INT32, 1, g);
            for (int64_t i = 0; i < d.m; i++) {   /* multiples of 2^-6 and 2^-3: exact float64 sums */
                d.S[i] = (double)((int64_t)(harness_rand_u64(&rng) % 129) - 64) / 64.0;
                d.w[i] = (double)(1 + (int64_t)(harness_rand_u64(&rng) % 16)) / 8.0;
            }
            const size_t bytes = (size_t)d.n * lac_dtype_size(d.vt);
            void *got = malloc(bytes), *want = malloc(bytes);
            double *scratch = malloc(sizeof(double) * (size_t)d.n);
            for (size_t o = 0; o < sizeof all / sizeof *all; o++) {
                lac_map_params p = lac_map_params_default();
                p.op = all[o];
                p.deterministic = 1;
                check_deterministic(g, &d, &p, 1, "exact data");
                CHECK_OK(multi[g], run(multi[g], &d, &p, LAC_MEM_HOST, 0, got));
                CHECK_OK(cpu, run_case(cpu, &d, &p, LAC_MEM_HOST, RUN_MAP, scratch, want));
                if (memcmp(got, want, bytes) != 0)
                    HARNESS_FAIL("exact data, %d shares, op %s, %s: differs from the CPU", share_counts[g],
                                 lac_map_op_name(p.op), lac_dtype_name(d.vt));
            }
            free(got), free(want), free(scratch);
            case_free(&d);
        }
    lac_ctx_destroy(&cpu);
}

/* Values too far apart for three words: the whole call on the first device,
 * whose sorted float64 path gives one device's bits. */
TEST(deterministic_range_too_wide_for_the_words_stays_on_the_first_device)
{
    for (int g = 0; g < 2; g++) {
        case_data d;
        case_make(&d, 110000, 3000, 1, LAC_FLOAT64, LAC_INT32, 0, 0);
        for (int64_t i = 0; i < d.m; i += 2) d.S[i] *= 1e-35;
        /* positive: sums without cancellation hold the float64 tolerance in any
         * order (signed terms of 1e12 cancelled past it for ~1 seed in 5) */
        for (int64_t i = 1; i < d.m; i += 2) d.S[i] = fabs(d.S[i]) * 1e12;
        lac_map_params p = lac_map_params_default();
        p.deterministic = 1;
        check_deterministic(g, &d, &p, 0, "wide range");
        case_free(&d);
    }
}

/* A plan of the host bridge on ctx, executed `executes` times (T from T0
 * each time; a deterministic plan's T must be the first's) with S, w, T in mem;
 * deterministic as the plan's flag. T's bytes land in raw. */
static int plan_run(lac_ctx_t ctx, const case_data *d, const lac_map_params *p, int deterministic, lac_memory mem,
                    int executes, void *raw)
{
    const size_t vs = lac_dtype_size(d->vt), t_bytes = (size_t)(d->n * d->b) * vs;
    void *hS = to_dtype(d->S, d->m * d->b, d->vt), *hw = to_dtype(d->w, d->m, d->vt);
    void *hR = index_to_dtype(d->R, d->m, d->it), *hT = to_dtype(d->T0, d->n * d->b, d->vt);
    void *first = malloc(t_bytes + 1);
    void *S = hS, *w = hw, *T = hT;
    if (mem == LAC_MEM_DEVICE) {
        lac_device_alloc(ctx, (size_t)(d->m * d->b) * vs + 16, &S);
        lac_device_alloc(ctx, (size_t)d->m * vs + 16, &w);
        lac_device_alloc(ctx, t_bytes + 16, &T);
        lac_memcpy(ctx, S, LAC_MEM_DEVICE, hS, LAC_MEM_HOST, (size_t)(d->m * d->b) * vs);
        lac_memcpy(ctx, w, LAC_MEM_DEVICE, hw, LAC_MEM_HOST, (size_t)d->m * vs);
    }
    lac_array ar = lac_array_vector(hR, d->it, d->m);
    lac_map_plan_t plan = NULL;
    int st = lac_map_plan_create(ctx, &ar, d->n, &plan);
    if (st == LAC_SUCCESS) st = lac_map_plan_set_deterministic(plan, deterministic);
    for (int e = 0; e < executes && st == LAC_SUCCESS; e++) {
        void *t0 = to_dtype(d->T0, d->n * d->b, d->vt);
        if (mem == LAC_MEM_DEVICE) lac_memcpy(ctx, T, LAC_MEM_DEVICE, t0, LAC_MEM_HOST, t_bytes);
        else memcpy(hT, t0, t_bytes);
        free(t0);
        lac_array as = d->b > 1 ? lac_array_matrix(S, d->vt, d->m, d->b) : lac_array_vector(S, d->vt, d->m);
        lac_array at = d->b > 1 ? lac_array_matrix(T, d->vt, d->n, d->b) : lac_array_vector(T, d->vt, d->n);
        lac_array aw = lac_array_vector(w, d->vt, d->m);
        as.memory = at.memory = aw.memory = mem;
        st = lac_map_plan_execute(ctx, plan, p, &as, d->weighted ? &aw : NULL, &at);
        if (mem == LAC_MEM_DEVICE) {
            lac_ctx_synchronize(ctx);
            lac_memcpy(ctx, hT, LAC_MEM_HOST, T, LAC_MEM_DEVICE, t_bytes);
        }
        if (e == 0) memcpy(first, hT, t_bytes);
        else if (st == LAC_SUCCESS && deterministic && memcmp(first, hT, t_bytes) != 0)
            HARNESS_FAIL("plan: execute %d differs from the first", e);
    }
    lac_map_plan_destroy(&plan);
    if (raw) memcpy(raw, hT, t_bytes);
    if (mem == LAC_MEM_DEVICE) {
        lac_device_free(ctx, S);
        lac_device_free(ctx, w);
        lac_device_free(ctx, T);
    }
    free(hS), free(hw), free(hR), free(hT), free(first);
    return st;
}

/* Plans of host bridges split across the shares: each share plans its rows;
 * deterministic executes give the one-device plan's bits, MIN / MAX too;
 * host and device arrays, executed twice; a range too wide for the words. */
TEST(plans_of_host_bridges_split_with_the_bits_of_one_device)
{
    for (int g = 0; g < 2; g++)
        for (int vt = 0; vt < 2; vt++)
            for (int weighted = 0; weighted < 2; weighted++) {
                const int shape = (vt + weighted + g) % 3;
                const int64_t n = shape == 0 ? 50 : shape == 1 ? 5000 : 200000;
                case_data d;
                case_make(&d, 100003 + 2 * shape, n, 1 + (shape == 1), vt ? LAC_FLOAT64 : LAC_FLOAT32,
                          (vt + g) % 2 ? LAC_INT64 : LAC_INT32, weighted, shape == 0);
                const size_t bytes = (size_t)(d.n * d.b) * lac_dtype_size(d.vt);
                void *got = malloc(bytes), *base = malloc(bytes);
                double *ref = malloc(sizeof(double) * (size_t)(d.n * d.b)), *scale = malloc(sizeof(double) * (size_t)(d.n * d.b));
                for (size_t o = 0; o < sizeof ops / sizeof *ops; o++)
                    for (int det = 0; det < 2; det++)
                        for (int mem = 0; mem < 2; mem++) {
                            lac_map_params p = lac_map_params_default();
                            p.op = ops[o];
                            p.accumulate = (o + det + mem) % 3 == 0 && p.op != LAC_MAP_MEAN;
                            p.empty_value = -3.25;
                            lac_memory where = mem ? LAC_MEM_DEVICE : LAC_MEM_HOST;
                            char label[200];
                            snprintf(label, sizeof label, "plan, %d shares, op %s, %s, w %d, n %lld, b %lld, det %d, %s, acc %d",
                                     share_counts[g], lac_map_op_name(p.op), lac_dtype_name(d.vt), weighted, (long long)n,
                                     (long long)d.b, det, mem ? "device" : "host", p.accumulate);
                            const int before = splits;
                            int st = plan_run(multi[g], &d, &p, det, where, 2, got);
                            const int split = splits - before;
                            int st1 = plan_run(one, &d, &p, det, where, 1, base);
                            if (st != LAC_SUCCESS || st1 != LAC_SUCCESS) {
                                HARNESS_FAIL("%s: status %d / %d (%s)", label, st, st1, lac_last_error(multi[g]));
                                continue;
                            }
                            if (!split) HARNESS_FAIL("%s: the plan was not split", label);
                            reference(&d, &p, ref);
                            error_scale(&d, &p, scale);
                            const double e = worst(got, d.vt, ref, scale, d.n * d.b);
                            if (e > tolerance(d.vt)) HARNESS_FAIL("%s: off the reference by %g", label, e);
                            /* One device's bits: deterministic executes, and MIN / MAX (order-free). */
                            if ((det || p.op == LAC_MAP_MIN || p.op == LAC_MAP_MAX) && memcmp(got, base, bytes) != 0)
                                HARNESS_FAIL("%s: differs from one device", label);
                        }
                free(got), free(base), free(ref), free(scale);
                case_free(&d);
            }
    /* Values too far apart for the words: the first device's sorted path. */
    for (int g = 0; g < 2; g++) {
        case_data d;
        case_make(&d, 110000, 3000, 1, LAC_FLOAT64, LAC_INT32, 1, 0);
        for (int64_t i = 0; i < d.m; i += 2) d.S[i] *= 1e-35;
        for (int64_t i = 1; i < d.m; i += 2) d.S[i] *= 1e12;
        const size_t bytes = (size_t)d.n * sizeof(double);
        void *got = malloc(bytes), *base = malloc(bytes);
        lac_map_params p = lac_map_params_default();
        CHECK_OK(multi[g], plan_run(multi[g], &d, &p, 1, LAC_MEM_HOST, 2, got));
        CHECK_OK(one, plan_run(one, &d, &p, 1, LAC_MEM_HOST, 1, base));
        if (memcmp(got, base, bytes) != 0) HARNESS_FAIL("plan, wide range, %d shares: differs from one device", share_counts[g]);
        free(got), free(base);
        case_free(&d);
    }
}

/* A plan's bad bridge entry and an execute's NaN: one device's message. */
TEST(plan_bad_bridge_and_nan_name_the_first_position_across_shares)
{
    for (int g = 0; g < 2; g++) {
        case_data d;
        case_make(&d, 150000, 4000, 1, LAC_FLOAT32, g ? LAC_INT64 : LAC_INT32, 1, 0);
        lac_map_params p = lac_map_params_default();
        char message[512];
        d.R[140000] = d.n;
        d.R[90000] = -1;
        for (int k = 0; k < 2; k++) {
            int st1 = plan_run(one, &d, &p, 1, LAC_MEM_HOST, 1, NULL);
            snprintf(message, sizeof message, "%s", lac_last_error(one));
            int st = plan_run(multi[g], &d, &p, 1, LAC_MEM_HOST, 1, NULL);
            if (st >= 0 || st != st1 || strcmp(message, lac_last_error(multi[g])) != 0 ||
                !strstr(message, k ? "bridge[140000]" : "bridge[90000]"))
                HARNESS_FAIL("plan build, %d shares: %d '%s', one device %d '%s'", share_counts[g], st, lac_last_error(multi[g]),
                             st1, message);
            d.R[90000] = 3;
        }
        d.R[140000] = 7;
        p.nan_policy = LAC_NAN_ERROR;
        p.op = LAC_MAP_MEAN;
        d.S[120000] = NAN;
        const size_t bytes = (size_t)d.n * sizeof(float);
        void *before = to_dtype(d.T0, d.n, d.vt), *got = malloc(bytes);
        int st1 = plan_run(one, &d, &p, 1, LAC_MEM_HOST, 1, NULL);
        snprintf(message, sizeof message, "%s", lac_last_error(one));
        int st = plan_run(multi[g], &d, &p, 1, LAC_MEM_HOST, 1, got);
        if (st >= 0 || st != st1 || strcmp(message, lac_last_error(multi[g])) != 0 || !strstr(message, "source[120000]"))
            HARNESS_FAIL("plan NaN, %d shares: %d '%s', one device %d '%s'", share_counts[g], st, lac_last_error(multi[g]), st1,
                         message);
        if (memcmp(before, got, bytes) != 0) HARNESS_FAIL("plan NaN, %d shares: T was changed", share_counts[g]);
        free(before), free(got);
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
            /* Deterministic (split in fixed point): the same first positions. */
            lac_map_params r = lac_map_params_default();
            r.deterministic = 1;
            r.op = LAC_MAP_MEAN;
            d.R[80000] = -4;
            d.R[140000] = d.n + 5;
            check_rejected(g, &d, &r, "bridge[80000] = -4", "bad index (deterministic mean)");
            d.R[80000] = 1;
            r.op = LAC_MAP_SUM;
            r.accumulate = 1;
            check_rejected(g, &d, &r, "bridge[140000]", "bad index in the last share (deterministic, accumulate)");
            d.R[140000] = 2;
            r.nan_policy = LAC_NAN_ERROR;
            check_rejected(g, &d, &r, "source[20000", "NaN source (deterministic)");
            d.S[20000] = 0.5;
            check_rejected(g, &d, &r, "weights[130000", "NaN weight in the last share (deterministic)");
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
    RUN(deterministic_split_gives_the_bits_of_one_device);
    RUN(deterministic_split_equals_the_cpu_on_exact_data);
    RUN(deterministic_range_too_wide_for_the_words_stays_on_the_first_device);
    RUN(bad_index_and_nan_name_the_first_position_across_shares);
    RUN(plans_of_host_bridges_split_with_the_bits_of_one_device);
    RUN(plan_bad_bridge_and_nan_name_the_first_position_across_shares);
    lac_ctx_destroy(&multi[0]);
    lac_ctx_destroy(&multi[1]);
    lac_ctx_destroy(&one);
    return harness_finish();
}
