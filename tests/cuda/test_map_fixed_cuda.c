/* Deterministic map on the CUDA backend in exact fixed point (GPU test, label
 * "cuda"; src/backend/cuda/map/map_fixed.cu): T bit-identical across runs,
 * grid sizes (LACUNA_MAP_CUDA_FIXED_GRID), shared-memory and L2 words, plans
 * on device and host arrays and the one-shot call; SUM equal to the exact
 * sum rounded once (data whose float64 sum is exact, and within half an ulp
 * plus the reference's own error on full-mantissa data); cancellation,
 * infinities, NaN, float32 overflow; a range too wide for the words takes the
 * sorted path and gives its bits; faults leave T untouched; few float32
 * targets in one launch (map_fixed_few.cu) give the two passes' bits, also
 * when a value falls outside the window its sample gave.
 * LACUNA_TEST_QUICK=1: fewer combinations and rows. */
#include "harness.h"
#include "lacuna/lacuna.h"

#include <float.h>
#include <stdint.h>
#include <time.h>

static unsigned long long rng;
static int quick;

#include "cuda/map_case.h"

/* Contexts with the knobs the tests vary: [0] the defaults. */
static const char *const ctx_knobs[] = {
    "",
    "MAP_CUDA_FIXED_GRID=1",
    "MAP_CUDA_FIXED_GRID=7,MAP_CUDA_FIXED=global",
    "MAP_CUDA_FIXED_GRID=333",
    "MAP_CUDA_FIXED_SELECT=0",   /* the one-launch kernel without selected addresses */
    "MAP_CUDA_FIXED_CARRY=0",    /* its words added by 64-bit atomics, not by halves and a carry */
};
#define CTXS (int)(sizeof ctx_knobs / sizeof *ctx_knobs)
static lac_ctx_t gpu[CTXS];
static lac_ctx_t sorted_gpu;   /* MAP_CUDA_FIXED=0: the sorted float64 path */
static lac_ctx_t twopass_gpu;  /* MAP_CUDA_FIXED=shared: the range pass, then the words (not the one-launch pass) */
static lac_ctx_t cpu;

static int64_t rows(int64_t m) { return quick ? m / 4 : m; }

/* Runs the call on every knob context, one-shot and as plans (device and host
 * arrays), twice on the defaults; fails unless all give the same bytes, which
 * go to raw. Returns the status (the same everywhere, or -1000). */
static int run_everywhere(const case_data *d, const lac_map_params *p, void *raw, const char *what)
{
    size_t bytes = (size_t)(d->n * d->b) * lac_dtype_size(d->vt);
    unsigned char *other = malloc(bytes);
    double *got = malloc(sizeof(double) * (size_t)(d->n * d->b));
    int st = run_case(gpu[0], d, p, LAC_MEM_DEVICE, RUN_MAP, got, raw);
    int same = 1;
    for (int k = 0; k < CTXS + 3; k++) {
        lac_ctx_t ctx = k < CTXS ? gpu[k] : gpu[0];
        run_kind kind = k < CTXS ? RUN_MAP : RUN_PLAN;
        lac_memory mem = k == CTXS + 2 ? LAC_MEM_HOST : LAC_MEM_DEVICE;
        if (k == CTXS + 2 && d->m * d->b > 200000 && quick) continue;
        int s = run_case(ctx, d, p, mem, kind, got, other);
        if (s != st) {
            HARNESS_FAIL("%s: status %d on run %d, %d on the first (%s)", what, s, k, st, lac_last_error(ctx));
            same = 0;
        } else if (st == 0 && memcmp(raw, other, bytes) != 0) {
            HARNESS_FAIL("%s: run %d (%s) differs from the first", what, k,
                         k < CTXS ? ctx_knobs[k] : k == CTXS ? "plan, device" : k == CTXS + 1 ? "plan again" : "plan, host");
            same = 0;
        }
    }
    free(other);
    free(got);
    return same ? st : -1000;
}

static double value_bits(const void *raw, lac_dtype vt, int64_t k) { return value_at(raw, vt, k); }

/* The reference rounded to the dtype, compared bit for bit (NaN any NaN). */
static int equal_to_rounded(const void *raw, const double *ref, int64_t count, lac_dtype vt, int64_t *bad)
{
    for (int64_t k = 0; k < count; k++) {
        double g = value_bits(raw, vt, k);
        double r = vt == LAC_FLOAT32 ? (double)(float)ref[k] : ref[k];
        if (isnan(r) && isnan(g)) continue;
        if (memcmp(&g, &r, sizeof g) != 0) {
            *bad = k;
            return 0;
        }
    }
    return 1;
}

/* Half an ulp of v in dtype vt. */
static double half_ulp(double v, lac_dtype vt)
{
    int e;
    frexp(fabs(v) > 0 ? v : (vt == LAC_FLOAT32 ? FLT_MIN : DBL_MIN), &e);
    return ldexp(0.5, e - (vt == LAC_FLOAT32 ? 24 : 53));
}

/* ------------------------------------------------------------------------ */
/* Exact data: every float64 sum of the test is exact                        */
/* ------------------------------------------------------------------------ */
/* Values are integers times powers of two, in two groups far apart (mode 0:
 * one group; 1: about 67 bits from the top of one to the bottom of the
 * other, two words; 2: about 93 bits, three words). Each group's sum per
 * target is exact in float64 (few rows a target, few bits a value), so the
 * exact sum is G1 + G2 and its correct rounding is known. big[i] marks the
 * rows of the upper group. */
static void exact_data(case_data *d, int mode, unsigned char *big)
{
    const int f32 = d->vt == LAC_FLOAT32;
    const int64_t span = f32 ? ((int64_t)1 << 23) : ((int64_t)1 << 30);
    for (int64_t i = 0; i < d->m * d->b; i++) {
        int64_t v = (int64_t)(harness_rand_u64(&rng) % (unsigned long long)(2 * span)) - span;
        int up = mode > 0 && harness_rand_u64(&rng) % 2;
        int e = up ? 10 + (int)(harness_rand_u64(&rng) % 8) : (mode == 2 ? -47 : -27) + (int)(harness_rand_u64(&rng) % 8);
        if (big) big[i] = (unsigned char)up;
        d->S[i] = ldexp((double)v, e - (f32 ? 23 : 30));
    }
    for (int64_t i = 0; i < d->m; i++) {
        d->w[i] = ldexp((double)(1 + harness_rand_u64(&rng) % 8), -3);
        d->R[i] = (int64_t)(harness_rand_u64(&rng) % (unsigned long long)(d->n - 5));   /* 5 empty targets */
        if (harness_rand_uniform(&rng) < 0.1) d->R[i] = (int64_t)(harness_rand_u64(&rng) % 3) * (d->n / 4);   /* 3 hot */
    }
}

/* g1 + g2 rounded once to vt: IEEE addition for float64; for float32 the
 * float64 sum rounded to odd first, so that the second rounding is exact. */
static double round_sum(double g1, double g2, lac_dtype vt)
{
    double s = g1 + g2;
    if (vt == LAC_FLOAT64) return s;
    double bb = s - g1, err = (g1 - (s - bb)) + (g2 - bb);   /* TwoSum */
    if (err != 0.0) {
        uint64_t u;
        memcpy(&u, &s, sizeof u);
        if ((u & 1u) == 0) s = nextafter(s, err > 0 ? INFINITY : -INFINITY);
    }
    return (double)(float)s;
}

/* The expected T of an exact-data case (the rules of lacuna.h). */
static void exact_expected(const case_data *d, const unsigned char *big, const lac_map_params *p, double *out)
{
    int64_t slots = d->n * d->b;
    double *g = calloc((size_t)(2 * slots + 1), sizeof *g), *wsum = calloc((size_t)slots + 1, sizeof *wsum);
    int64_t *hits = calloc((size_t)slots + 1, sizeof *hits);
    for (int64_t i = 0; i < d->m; i++)
        for (int64_t c = 0; c < d->b; c++) {
            double w = d->weighted ? d->w[i] : 1.0, s = d->S[i * d->b + c];
            double x = p->op == LAC_MAP_COUNT ? w : w * s;
            int64_t k = d->R[i] * d->b + c;
            g[2 * k + (p->op != LAC_MAP_COUNT && big[i * d->b + c])] += x;
            wsum[k] += w;
            hits[k]++;
        }
    for (int64_t k = 0; k < slots; k++) {
        double sum = g[2 * k] + g[2 * k + 1];
        if (p->accumulate) out[k] = d->T0[k] + sum;
        else if (!hits[k]) out[k] = p->empty_value;
        else if (p->op == LAC_MAP_MEAN) out[k] = sum / wsum[k];
        else out[k] = round_sum(g[2 * k], g[2 * k + 1], d->vt);
    }
    free(g), free(wsum), free(hits);
}

TEST(exact_data_gives_the_exact_sum_rounded_once_everywhere)
{
    static const lac_map_op ops[] = {LAC_MAP_SUM, LAC_MAP_COUNT, LAC_MAP_MEAN};
    const int64_t ns[] = {300, 40000};   /* shared-memory words; L2 words */
    int64_t agree = 0, total = 0;
    for (int vt = 0; vt < 2; vt++)
        for (int it = 0; it < 2; it++)
            for (int weighted = 0; weighted < 2; weighted++)
                for (int64_t b = 1; b <= 3; b += 2)
                    for (int ni = 0; ni < 2; ni++) {
                        if (quick && (it != weighted || (b == 3) != (vt != ni))) continue;
                        case_data d;
                        lac_dtype vtype = vt ? LAC_FLOAT64 : LAC_FLOAT32;
                        int mode = (vt + it + weighted + (int)b / 3 + ni) % 3;
                        case_make(&d, rows(120000) + 3, ns[ni], b, vtype, it ? LAC_INT64 : LAC_INT32, weighted, 0);
                        unsigned char *big = malloc((size_t)(d.m * d.b));
                        exact_data(&d, mode, big);
                        size_t bytes = (size_t)(d.n * d.b) * lac_dtype_size(vtype);
                        unsigned char *raw = malloc(bytes), *cpu_raw = malloc(bytes);
                        double *want = malloc(sizeof(double) * (size_t)(d.n * d.b)), *got = malloc(sizeof(double) * (size_t)(d.n * d.b));
                        for (int o = 0; o < 3; o++)
                            for (int acc = 0; acc < 2; acc++) {
                                if (acc && ops[o] == LAC_MAP_MEAN) continue;
                                lac_map_params p = lac_map_params_default();
                                p.op = ops[o];
                                p.deterministic = 1;
                                p.accumulate = acc;
                                p.empty_value = acc ? 0.0 : -7.5;
                                char what[192];
                                snprintf(what, sizeof what, "exact (mode %d) %s %s weights %d b %lld n %lld op %s acc %d", mode,
                                         lac_dtype_name(vtype), it ? "int64" : "int32", weighted, (long long)b, (long long)d.n,
                                         lac_map_op_name(p.op), acc);
                                exact_expected(&d, big, &p, want);
                                if (run_everywhere(&d, &p, raw, what) != 0) continue;
                                int64_t bad = -1;
                                if (!equal_to_rounded(raw, want, d.n * d.b, vtype, &bad))
                                    HARNESS_FAIL("%s: T[%lld] = %.17g, the exact result rounded is %.17g", what, (long long)bad,
                                                 value_bits(raw, vtype, bad), want[bad]);
                                CHECK_OK(cpu, run_case(cpu, &d, &p, LAC_MEM_HOST, RUN_MAP, got, cpu_raw));
                                for (int64_t k = 0; k < d.n * d.b; k++) {
                                    double a = value_bits(raw, vtype, k), c = value_bits(cpu_raw, vtype, k);
                                    agree += memcmp(&a, &c, sizeof a) == 0;
                                    total++;
                                }
                                /* One group (mode 0): the CPU's float64 sums are exact too. */
                                if (mode == 0 && memcmp(raw, cpu_raw, bytes) != 0) HARNESS_FAIL("%s: the CPU backend's bits differ", what);
                            }
                        free(raw), free(cpu_raw), free(want), free(got), free(big);
                        case_free(&d);
                    }
    printf("  CPU and GPU deterministic bits agree on %lld of %lld targets (exact data)\n", (long long)agree, (long long)total);
}

/* ------------------------------------------------------------------------ */
/* Full-mantissa data: bit-identical, within half an ulp of the exact sum    */
/* ------------------------------------------------------------------------ */
/* SUM references in long double (64-bit significand on x86-64) and each
 * target's error bound: half an ulp of T's dtype plus the reference's own
 * rounding, count * 2^-63 * sum |x|. */
static void long_double_sums(const case_data *d, const lac_map_params *p, double *ref, double *bound)
{
    int64_t slots = d->n * d->b;
    long double *acc = calloc((size_t)slots + 1, sizeof *acc);
    double *abs_sum = calloc((size_t)slots + 1, sizeof *abs_sum);
    int64_t *count = calloc((size_t)slots + 1, sizeof *count);
    for (int64_t i = 0; i < d->m; i++)
        for (int64_t c = 0; c < d->b; c++) {
            /* w_i S_i as the backend forms it: a float64 product (exact for float32). */
            double w = d->weighted ? d->w[i] : 1.0;
            long double x = p->op == LAC_MAP_COUNT ? w : w * d->S[i * d->b + c];
            int64_t k = d->R[i] * d->b + c;
            acc[k] += x;
            abs_sum[k] += fabs((double)x);
            count[k]++;
        }
    for (int64_t k = 0; k < slots; k++) {
        ref[k] = count[k] ? (double)acc[k] : p->empty_value;
        bound[k] = count[k] ? half_ulp(ref[k], d->vt) * 1.0000001 + ldexp((double)count[k] * abs_sum[k], -63) : 0.0;
    }
    free(acc), free(abs_sum), free(count);
}

TEST(full_mantissa_data_is_bit_identical_and_within_half_an_ulp)
{
    static const lac_map_op ops[] = {LAC_MAP_SUM, LAC_MAP_COUNT, LAC_MAP_MEAN};
    const int64_t ns[] = {500, 30000};
    int64_t agree = 0, total = 0;
    for (int vt = 0; vt < 2; vt++)
        for (int skew = 0; skew < 2; skew++)
            for (int weighted = 0; weighted < 2; weighted++)
                for (int ni = 0; ni < 2; ni++) {
                    if (quick && (skew != weighted || vt != ni)) continue;
                    case_data d;
                    lac_dtype vtype = vt ? LAC_FLOAT64 : LAC_FLOAT32;
                    int64_t b = 1 + ni;
                    case_make(&d, rows(100000) + 1, ns[ni], b, vtype, skew ? LAC_INT64 : LAC_INT32, weighted, skew);
                    size_t bytes = (size_t)(d.n * d.b) * lac_dtype_size(vtype);
                    unsigned char *raw = malloc(bytes), *cpu_raw = malloc(bytes);
                    double *ref = malloc(sizeof(double) * (size_t)(d.n * d.b)), *bound = malloc(sizeof(double) * (size_t)(d.n * d.b));
                    double *got = malloc(sizeof(double) * (size_t)(d.n * d.b));
                    for (int o = 0; o < 3; o++) {
                        lac_map_params p = lac_map_params_default();
                        p.op = ops[o];
                        p.deterministic = 1;
                        char what[160];
                        snprintf(what, sizeof what, "full %s skew %d weights %d n %lld op %s", lac_dtype_name(vtype), skew, weighted,
                                 (long long)d.n, lac_map_op_name(p.op));
                        if (run_everywhere(&d, &p, raw, what) != 0) continue;
                        if (p.op == LAC_MAP_MEAN) {
                            /* Two exact sums divided in float64, rounded: within an ulp or so. */
                            reference(&d, &p, ref);
                            for (int64_t k = 0; k < d.n * d.b; k++) got[k] = value_bits(raw, vtype, k);
                            int64_t worst = -1;
                            double e = compare(got, ref, d.n * d.b, &worst);
                            if (!(e <= (vt ? 1e-13 : 2e-7))) HARNESS_FAIL("%s: err %g at %lld", what, e, (long long)worst);
                        } else {
                            long_double_sums(&d, &p, ref, bound);
                            for (int64_t k = 0; k < d.n * d.b; k++) {
                                double g = value_bits(raw, vtype, k);
                                if (!(fabs(g - ref[k]) <= bound[k])) {
                                    HARNESS_FAIL("%s: T[%lld] = %.17g, reference %.17g, bound %g", what, (long long)k, g, ref[k], bound[k]);
                                    break;
                                }
                            }
                        }
                        CHECK_OK(cpu, run_case(cpu, &d, &p, LAC_MEM_HOST, RUN_MAP, got, cpu_raw));
                        for (int64_t k = 0; k < d.n * d.b; k++) {
                            double a = value_bits(raw, vtype, k), c = value_bits(cpu_raw, vtype, k);
                            agree += memcmp(&a, &c, sizeof a) == 0;
                            total++;
                        }
                    }
                    free(raw), free(cpu_raw), free(ref), free(bound), free(got);
                    case_free(&d);
                }
    printf("  CPU and GPU deterministic bits agree on %lld of %lld targets (full-mantissa data)\n", (long long)agree,
           (long long)total);
}

/* ------------------------------------------------------------------------ */
/* Few float32 targets in one launch (map_fixed_few.cu)                      */
/* ------------------------------------------------------------------------ */
/* Checks T of a few-target case: the bytes of the two-pass scheme
 * (twopass_gpu) and of every context and plan (run_everywhere), and against
 * the references (SUM within half an ulp of the long-double sum; MEAN and
 * COUNT within float32 rounding of the float64 reference). */
static void few_case_check(const case_data *d, const lac_map_params *p, const char *what)
{
    int64_t n = d->n;
    size_t bytes = (size_t)n * sizeof(float);
    unsigned char *raw = malloc(bytes), *two = malloc(bytes);
    double *ref = malloc(sizeof(double) * (size_t)n), *bound = malloc(sizeof(double) * (size_t)n);
    double *got = malloc(sizeof(double) * (size_t)n);
    if (run_everywhere(d, p, raw, what) == 0) {
        CHECK_OK(twopass_gpu, run_case(twopass_gpu, d, p, LAC_MEM_DEVICE, RUN_MAP, got, two));
        if (memcmp(raw, two, bytes) != 0) HARNESS_FAIL("%s: the one-launch bits differ from the two passes'", what);
        for (int64_t k = 0; k < n; k++) got[k] = value_bits(raw, LAC_FLOAT32, k);
        if (p->op == LAC_MAP_SUM && !p->accumulate) {
            long_double_sums(d, p, ref, bound);
            for (int64_t k = 0; k < n; k++)
                if (!(fabs(got[k] - ref[k]) <= bound[k])) {
                    HARNESS_FAIL("%s: T[%lld] = %.17g, reference %.17g, bound %g", what, (long long)k, got[k], ref[k], bound[k]);
                    break;
                }
        } else {
            reference(d, p, ref);
            int64_t worst = -1;
            double e = compare(got, ref, n, &worst);
            if (!(e <= 2e-7)) HARNESS_FAIL("%s: err %g at %lld", what, e, (long long)worst);
        }
    }
    free(raw), free(two), free(ref), free(bound), free(got);
}

TEST(few_float32_targets_in_one_launch_equal_the_two_passes)
{
    /* skew 2: a Zipf-like bridge, two hot targets (20% and 10% of the rows:
     * both words in registers) and 40 warm ones (0.75% each: per-lane
     * accumulators), the rest uniform. */
    for (int skew = 0; skew < 3; skew++)
        for (int it = 0; it < 2; it++) {
            if (quick && (skew == 2 ? it != 0 : skew != it)) continue;
            case_data d;
            int64_t n = 10000 + (int64_t)(harness_rand_u64(&rng) % 64);
            case_make(&d, rows(2000000) + (int64_t)(harness_rand_u64(&rng) % 4), n, 1, LAC_FLOAT32,
                      it ? LAC_INT64 : LAC_INT32, 0, skew == 1);
            for (int64_t i = 0; i < d.m && skew == 2; i++) {
                const double u = harness_rand_uniform(&rng);
                if (u < 0.2) d.R[i] = 3;
                else if (u < 0.3) d.R[i] = n / 2;
                else if (u < 0.6) d.R[i] = (int64_t)(harness_rand_u64(&rng) % 40) * 97 + 11;
            }
            for (int64_t i = 0; i < d.m; i++)
                if (d.R[i] % 101 == 5) d.R[i] = (d.R[i] + 1) % n;   /* empty targets */
            for (int o = 0; o < 6; o++) {
                /* SUM, SUM with empty targets -3 (counted), MEAN, COUNT, weighted
                 * COUNT, SUM accumulated */
                lac_map_params p = lac_map_params_default();
                p.deterministic = 1;
                p.op = o < 2 || o == 5 ? LAC_MAP_SUM : o == 2 ? LAC_MAP_MEAN : LAC_MAP_COUNT;
                p.empty_value = o == 1 || o == 2 ? -3.0 : 0.0;
                p.accumulate = o == 5;
                d.weighted = o == 4;
                char what[160];
                snprintf(what, sizeof what, "few targets, skew %d %s op %s weights %d empty %g acc %d", skew,
                         it ? "int64" : "int32", lac_map_op_name(p.op), d.weighted, p.empty_value, p.accumulate);
                few_case_check(&d, &p, what);
            }
            /* Values outside the window the sample gives: larger than its top
             * (the first rows scaled down), and bits below the lowest word;
             * the call falls back to the two passes, with their bits. */
            d.weighted = 0;
            lac_map_params p = lac_map_params_default();
            p.deterministic = 1;
            for (int64_t i = 0; i < 8192; i++) d.S[i] = ldexp(d.S[i], -12);
            few_case_check(&d, &p, "few targets, values above the sample's top");
            for (int64_t i = 0; i < 8192; i++) d.S[i] = ldexp(d.S[i], 12);
            d.S[d.m / 2] = ldexp(1.5, -100);
            few_case_check(&d, &p, "few targets, bits below the lowest word");
            case_free(&d);
        }
}

/* ------------------------------------------------------------------------ */
/* Adversarial values                                                        */
/* ------------------------------------------------------------------------ */
/* Large values that cancel within each target beside small ones: the exact
 * sum is the small ones' (a float sum in row order would lose them). */
TEST(cancellation_is_exact)
{
    for (int vt = 0; vt < 2; vt++)
        for (int ni = 0; ni < 2; ni++) {
            case_data d;
            lac_dtype vtype = vt ? LAC_FLOAT64 : LAC_FLOAT32;
            int64_t n = ni ? 20000 : 200, m = rows(80000) / 4 * 4;
            case_make(&d, m, n, 1, vtype, LAC_INT32, 0, 0);
            double *want = calloc((size_t)n, sizeof *want);
            /* Rows 4j .. 4j+3 of one target: +big, small, -big, small. */
            for (int64_t i = 0; i < m; i += 4) {
                int64_t r = (int64_t)(harness_rand_u64(&rng) % (unsigned long long)n);
                double big = ldexp((double)(1 + harness_rand_u64(&rng) % 1000), vt ? 60 : 30);
                for (int j = 0; j < 4; j++) d.R[i + j] = r;
                d.S[i] = big, d.S[i + 2] = -big;
                d.S[i + 1] = ldexp((double)((int64_t)(harness_rand_u64(&rng) % 2001) - 1000), -12);
                d.S[i + 3] = ldexp((double)((int64_t)(harness_rand_u64(&rng) % 2001) - 1000), -12);
                want[r] += d.S[i + 1] + d.S[i + 3];   /* exact: units of 2^-12 */
            }
            lac_map_params p = lac_map_params_default();
            p.deterministic = 1;
            size_t bytes = (size_t)n * lac_dtype_size(vtype);
            unsigned char *raw = malloc(bytes);
            char what[96];
            snprintf(what, sizeof what, "cancellation %s n %lld", lac_dtype_name(vtype), (long long)n);
            if (run_everywhere(&d, &p, raw, what) == 0) {
                int64_t bad = -1;
                if (!equal_to_rounded(raw, want, n, vtype, &bad))
                    HARNESS_FAIL("%s: T[%lld] = %.17g, exact %.17g", what, (long long)bad, value_bits(raw, vtype, bad), want[bad]);
            }
            free(want), free(raw);
            case_free(&d);
        }
}

/* Infinities and NaN as float arithmetic has them; float32 sums past FLT_MAX
 * become inf; under LAC_NAN_SKIP NaN rows drop out; under LAC_NAN_ERROR the
 * call is rejected with T untouched. */
TEST(infinities_nan_and_overflow)
{
    for (int vt = 0; vt < 2; vt++)
        for (int ni = 0; ni < 2; ni++)
            for (int weighted = 0; weighted < 2; weighted++) {
                case_data d;
                lac_dtype vtype = vt ? LAC_FLOAT64 : LAC_FLOAT32;
                int64_t n = ni ? 30000 : 100;
                case_make(&d, rows(40000), n, 1, vtype, LAC_INT32, weighted, 0);
                exact_data(&d, 0, NULL);
                /* Scaled so that the huge values below stay within three words of the rest. */
                for (int64_t i = 0; i < d.m; i++) d.S[i] = ldexp(d.S[i], vt ? 960 : 100);
                d.R[10] = 1, d.S[10] = INFINITY;
                d.R[11] = 2, d.S[11] = -INFINITY;
                d.R[12] = 3, d.S[12] = INFINITY;
                d.R[13] = 3, d.S[13] = -INFINITY;
                d.R[14] = 4, d.S[14] = NAN;
                d.R[15] = 5, d.S[15] = NAN, d.w[15] = 1.0;
                d.R[16] = 5, d.S[16] = INFINITY;
                d.R[17] = 7, d.S[17] = 0.0, d.w[17] = INFINITY;   /* weighted: inf * 0 is NaN */
                double big = vt ? 1e308 : 3e38;
                for (int64_t i = 20; i < 26; i++) d.R[i] = 6, d.S[i] = big, d.w[i] = 1.0;
                for (int pol = 0; pol < 2; pol++) {
                    lac_map_params p = lac_map_params_default();
                    p.deterministic = 1;
                    p.nan_policy = pol ? LAC_NAN_SKIP : LAC_NAN_PROPAGATE;
                    size_t bytes = (size_t)n * lac_dtype_size(vtype);
                    unsigned char *raw = malloc(bytes);
                    double *ref = malloc(sizeof(double) * (size_t)n);
                    reference(&d, &p, ref);
                    char what[128];
                    snprintf(what, sizeof what, "inf/nan %s n %lld weights %d nan %s", lac_dtype_name(vtype), (long long)n, weighted,
                             pol ? "skip" : "propagate");
                    if (run_everywhere(&d, &p, raw, what) == 0)
                        for (int64_t k = 0; k < n; k++) {
                            double g = value_bits(raw, vtype, k), r = vtype == LAC_FLOAT32 ? (double)(float)ref[k] : ref[k];
                            int ok = isnan(r) ? isnan(g) : (isinf(r) || k < 8) ? g == r : fabs(g - r) <= half_ulp(r, vtype) * 1.0000001;
                            if (!ok) {
                                HARNESS_FAIL("%s: T[%lld] = %.17g, want %.17g", what, (long long)k, g, r);
                                break;
                            }
                        }
                    free(raw), free(ref);
                }
                /* LAC_NAN_ERROR: rejected, naming the first NaN, T untouched (one-shot and plan). */
                lac_map_params p = lac_map_params_default();
                p.deterministic = 1;
                p.nan_policy = LAC_NAN_ERROR;
                size_t bytes = (size_t)n * lac_dtype_size(vtype);
                unsigned char *before = to_dtype(d.T0, n, vtype), *after = malloc(bytes);
                double *got = malloc(sizeof(double) * (size_t)n);
                for (int kind = 0; kind < 2; kind++) {
                    int st = run_case(gpu[0], &d, &p, LAC_MEM_DEVICE, kind ? RUN_PLAN : RUN_MAP, got, after);
                    if (st != LAC_ERR_VALUE || !strstr(lac_last_error(gpu[0]), "source[14]"))
                        HARNESS_FAIL("nan error %s n %lld: status %d '%s'", lac_dtype_name(vtype), (long long)n, st, lac_last_error(gpu[0]));
                    if (memcmp(before, after, bytes) != 0) HARNESS_FAIL("nan error: T was changed by a rejected call");
                }
                free(before), free(after), free(got);
                case_free(&d);
            }
}

/* |got - ref| over the sum of the magnitudes it adds (|T0| + Σ|w s| a
 * target; over Σw for a MEAN), at least 1: a float64 sum in any order errs
 * by up to (terms - 1) ε times that, however much its terms cancel. */
static double compare_to_magnitudes(const case_data *d, const lac_map_params *p, const double *got, const double *ref,
                                    int64_t *worst)
{
    case_data mag = *d;
    mag.S = malloc(sizeof(double) * (size_t)(d->m * d->b));
    mag.T0 = malloc(sizeof(double) * (size_t)(d->n * d->b));
    for (int64_t i = 0; i < d->m * d->b; i++) mag.S[i] = fabs(d->S[i]);
    for (int64_t k = 0; k < d->n * d->b; k++) mag.T0[k] = fabs(d->T0[k]);
    double *size = malloc(sizeof(double) * (size_t)(d->n * d->b)), err = 0;
    reference(&mag, p, size);
    *worst = -1;
    for (int64_t k = 0; k < d->n * d->b; k++) {
        const double e = fabs(got[k] - ref[k]) / (size[k] > 1.0 ? size[k] : 1.0);
        if (e > err || (isnan(e) && !isnan(err))) {
            err = e;
            *worst = k;
        }
    }
    free(mag.S);
    free(mag.T0);
    free(size);
    return err;
}

/* A range wider than three words (tiny values beside huge ones) takes the
 * sorted float64 path: the bits of a context without the fixed point, its
 * error within float64 summation's (terms that cancel: the error is measured
 * against the magnitudes summed, not the sum). */
TEST(a_range_too_wide_for_the_words_takes_the_sorted_path)
{
    for (int vt = 0; vt < 2; vt++)
        for (int ni = 0; ni < 2; ni++) {
            case_data d;
            lac_dtype vtype = vt ? LAC_FLOAT64 : LAC_FLOAT32;
            int64_t n = ni ? 30000 : 300;
            case_make(&d, rows(60000), n, 1, vtype, LAC_INT32, 1, 0);
            for (int64_t i = 0; i < d.m; i += 3) d.S[i] *= vt ? 1e-200 : 1e-30;
            for (int64_t i = 1; i < d.m; i += 3) d.S[i] *= vt ? 1e200 : 1e10;
            if (vtype == LAC_FLOAT32)
                for (int64_t i = 0; i < d.m; i++) d.S[i] = (float)d.S[i];
            for (int o = 0; o < 3; o++) {
                lac_map_params p = lac_map_params_default();
                p.op = o == 0 ? LAC_MAP_SUM : o == 1 ? LAC_MAP_MEAN : LAC_MAP_SUM;
                p.accumulate = o == 2;
                p.deterministic = 1;
                size_t bytes = (size_t)n * lac_dtype_size(vtype);
                unsigned char *raw = malloc(bytes), *sorted_raw = malloc(bytes);
                double *got = malloc(sizeof(double) * (size_t)n), *ref = malloc(sizeof(double) * (size_t)n);
                char what[96];
                snprintf(what, sizeof what, "wide range %s n %lld op %d", lac_dtype_name(vtype), (long long)n, o);
                if (run_everywhere(&d, &p, raw, what) == 0) {
                    CHECK_OK(sorted_gpu, run_case(sorted_gpu, &d, &p, LAC_MEM_DEVICE, RUN_MAP, got, sorted_raw));
                    if (memcmp(raw, sorted_raw, bytes) != 0) HARNESS_FAIL("%s: differs from the sorted path", what);
                    reference(&d, &p, ref);
                    for (int64_t k = 0; k < n; k++) got[k] = value_bits(raw, vtype, k);
                    int64_t worst = -1;
                    double e = compare_to_magnitudes(&d, &p, got, ref, &worst);
                    if (!(e <= (vt ? 1e-12 : 1e-6))) HARNESS_FAIL("%s: err %g at %lld", what, e, (long long)worst);
                }
                free(raw), free(sorted_raw), free(got), free(ref);
            }
            case_free(&d);
        }
}

/* A bad bridge entry under the fixed point: rejected, named, T untouched. */
TEST(bad_index_is_named_and_leaves_T)
{
    for (int ni = 0; ni < 2; ni++) {
        case_data d;
        int64_t n = ni ? 30000 : 300;
        case_make(&d, 20000, n, 1, LAC_FLOAT32, LAC_INT32, 0, 0);
        d.R[15001] = n;
        d.R[12345] = -4;
        lac_map_params p = lac_map_params_default();
        p.deterministic = 1;
        size_t bytes = (size_t)n * 4;
        unsigned char *before = to_dtype(d.T0, n, LAC_FLOAT32), *after = malloc(bytes);
        double *got = malloc(sizeof(double) * (size_t)n);
        for (int mem = 0; mem < 2; mem++) {
            int st = run_case(gpu[0], &d, &p, mem ? LAC_MEM_HOST : LAC_MEM_DEVICE, RUN_MAP, got, after);
            if (st != LAC_ERR_RANGE || !strstr(lac_last_error(gpu[0]), "bridge[12345] = -4"))
                HARNESS_FAIL("bad index n %lld: status %d '%s'", (long long)n, st, lac_last_error(gpu[0]));
            if (memcmp(before, after, bytes) != 0) HARNESS_FAIL("bad index n %lld: T was changed", (long long)n);
        }
        free(before), free(after), free(got);
        case_free(&d);
    }
}

int main(void)
{
    map_test_seed();
    quick = map_test_quick();
    lac_ctx_params cp = lac_ctx_params_default();
    cp.backend = LAC_BACKEND_CUDA;
    for (int k = 0; k < CTXS; k++) {
        cp.knobs = ctx_knobs[k];
        if (lac_ctx_create(&cp, &gpu[k]) != LAC_SUCCESS) {
            printf("no CUDA context (%s): nothing to test here\n", lac_last_error(NULL));
            return 77;
        }
    }
    cp.knobs = "MAP_CUDA_FIXED=0";
    if (lac_ctx_create(&cp, &sorted_gpu) != LAC_SUCCESS) return 1;
    cp.knobs = "MAP_CUDA_FIXED=shared";
    if (lac_ctx_create(&cp, &twopass_gpu) != LAC_SUCCESS) return 1;
    cp.knobs = NULL;
    cp.backend = LAC_BACKEND_CPU;
    if (lac_ctx_create(&cp, &cpu) != LAC_SUCCESS) return 1;
    RUN(exact_data_gives_the_exact_sum_rounded_once_everywhere);
    RUN(full_mantissa_data_is_bit_identical_and_within_half_an_ulp);
    RUN(few_float32_targets_in_one_launch_equal_the_two_passes);
    RUN(cancellation_is_exact);
    RUN(infinities_nan_and_overflow);
    RUN(a_range_too_wide_for_the_words_takes_the_sorted_path);
    RUN(bad_index_is_named_and_leaves_T);
    for (int k = 0; k < CTXS; k++) lac_ctx_destroy(&gpu[k]);
    lac_ctx_destroy(&sorted_gpu);
    lac_ctx_destroy(&twopass_gpu);
    lac_ctx_destroy(&cpu);
    return harness_finish();
}
