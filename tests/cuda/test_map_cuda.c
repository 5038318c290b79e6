/* map on the CUDA backend (GPU test, label "cuda"): every op x value dtype x
 * index dtype x weights x columns x accumulate x host/device memory x
 * reduction strategy against a float64 reference written here, on fresh random
 * data each run (seed printed; LACUNA_TEST_SEED replays one); the CPU backend
 * as a second reference where it answers; NaN policies and empty values;
 * deterministic runs bit-identical and equal to a plan's; bad inputs give the
 * status and the smallest offending position with T untouched; the out-of-core
 * path forced with small chunks, from pageable and pinned memory.
 *
 * LACUNA_TEST_QUICK=1 runs a representative subset for slow tools
 * (compute-sanitizer racecheck, bench/device.sh): every test and every
 * kernel path (each op, dtype, strategy, few-target path, plan grid and
 * memory kind at least once), on fewer combinations and fewer rows. */
#include "harness.h"
#include "lacuna/lacuna.h"
#include "lacuna/lacuna_cuda.h"

#include <stdint.h>
#include <time.h>

static lac_ctx_t gpu;
static lac_ctx_t cpu;
static unsigned long long rng;
static int cpu_answers = -1;   /* -1 unknown, 0 the CPU backend has no map yet, 1 it has */
static int quick;              /* LACUNA_TEST_QUICK=1: the subset above */

/* Rows of a case: a quick run takes 1/div of them. */
static int64_t rows(int64_t m, int64_t div) { return quick ? m / div : m; }

#include "cuda/map_case.h"

/* The cases of the one-launch paths, o = 0..3: sum, weighted sum
 * accumulated, count with empty targets -2, weighted count; o = 4 (the
 * few-target path only): weighted mean with empty targets -3. */
static lac_map_params sum_count_case(int o, case_data *d)
{
    lac_map_params p = lac_map_params_default();
    p.op = o < 2 ? LAC_MAP_SUM : o < 4 ? LAC_MAP_COUNT : LAC_MAP_MEAN;
    d->weighted = o % 2 || o == 4;
    p.accumulate = o == 1;
    p.empty_value = o == 2 ? -2.0 : o == 4 ? -3.0 : 0.0;
    return p;
}

static const char *strategies[] = {"auto", "global", "cluster1", "cluster4"};

/* Contexts with one knob more than gpu's (gpu_knobs): the environment is
 * read once a process, so a forced strategy or plan grid needs a context of
 * its own. Made on first use, destroyed at the end. */
static const char *gpu_knobs = "";
static struct {
    char knobs[128];
    lac_ctx_t ctx;
} knob_ctxs[24];
#define KNOB_CTXS (int)(sizeof knob_ctxs / sizeof *knob_ctxs)

static lac_ctx_t knob_ctx(const char *name, const char *value)
{
    char want[128];
    snprintf(want, sizeof want, "%s%s%s=%s", gpu_knobs, *gpu_knobs ? "," : "", name, value);
    int i = 0;
    for (; i < KNOB_CTXS && knob_ctxs[i].ctx; i++)
        if (strcmp(knob_ctxs[i].knobs, want) == 0) return knob_ctxs[i].ctx;
    lac_ctx_params cp = lac_ctx_params_default();
    cp.backend = LAC_BACKEND_CUDA;
    cp.knobs = want;
    if (i == KNOB_CTXS || lac_ctx_create(&cp, &knob_ctxs[i].ctx) != LAC_SUCCESS) {
        HARNESS_FAIL("no context with %s (%s)", want, lac_last_error(NULL));
        if (i < KNOB_CTXS) knob_ctxs[i].ctx = NULL;
        return gpu;
    }
    snprintf(knob_ctxs[i].knobs, sizeof knob_ctxs[i].knobs, "%s", want);
    return knob_ctxs[i].ctx;
}

/* gpu becomes a context forcing strategy s; "auto" brings the one before back. */
static lac_ctx_t strategy_base;
static void set_strategy(const char *s)
{
    if (strcmp(s, "auto") == 0) {
        if (strategy_base) gpu = strategy_base;
        strategy_base = NULL;
        return;
    }
    if (!strategy_base) strategy_base = gpu;
    gpu = knob_ctx("MAP_CUDA_STRATEGY", s);
}

/* ------------------------------------------------------------------------ */
/* Tests                                                                     */
/* ------------------------------------------------------------------------ */
TEST(every_op_dtype_layout_and_memory_matches_float64_reference)
{
    static const lac_map_op ops[] = {LAC_MAP_SUM, LAC_MAP_MEAN, LAC_MAP_MIN, LAC_MAP_MAX, LAC_MAP_COUNT};
    int failures = 0, runs = 0;
    for (int skew = 0; skew < 2; skew++)
        for (int vt = 0; vt < 2; vt++)
            for (int it = 0; it < 2; it++)
                for (int weighted = 0; weighted < 2; weighted++)
                    for (int64_t b = 1; b <= 3; b += 2) {
                        /* quick: 2 of the 32 combinations, each value of each factor once */
                        if (quick && !(vt == skew && it == skew && weighted == skew && (b == 3) == skew)) continue;
                        case_data d;
                        int64_t m = 3000 + (int64_t)(harness_rand_u64(&rng) % 4000);
                        int64_t n = 1 + (int64_t)(harness_rand_u64(&rng) % 900);
                        lac_dtype vtype = vt ? LAC_FLOAT64 : LAC_FLOAT32, itype = it ? LAC_INT64 : LAC_INT32;
                        case_make(&d, m, n, b, vtype, itype, weighted, skew);
                        double *ref = malloc(sizeof(double) * (size_t)(n * b)), *got = malloc(sizeof(double) * (size_t)(n * b));
                        double *cpu_out = malloc(sizeof(double) * (size_t)(n * b));
                        for (int o = 0; o < 5; o++)
                            for (int acc = 0; acc < 2; acc++) {
                                if (acc && ops[o] == LAC_MAP_MEAN) continue;
                                lac_map_params p = lac_map_params_default();
                                p.op = ops[o];
                                p.accumulate = acc;
                                p.empty_value = (o % 2) ? -7.5 : 0.0;
                                reference(&d, &p, ref);
                                double tol = vt ? 1e-10 : 2e-4;
                                if (cpu_answers != 0) {
                                    int st = run_case(cpu, &d, &p, LAC_MEM_HOST, RUN_MAP, cpu_out, NULL);
                                    if (cpu_answers < 0) cpu_answers = st == LAC_SUCCESS;
                                    if (cpu_answers) {
                                        int64_t worst = -1;
                                        double e = compare(cpu_out, ref, n * b, &worst);
                                        if (!(e <= tol)) {
                                            HARNESS_FAIL("CPU backend differs from the reference: op %s %s %s weights %d b %lld acc %d "
                                                         "empty %g skew %d (m %lld n %lld) err %g at slot %lld: got %.9g want %.9g",
                                                         lac_map_op_name(p.op), lac_dtype_name(vtype), lac_dtype_name(itype),
                                                         weighted, (long long)b, acc, p.empty_value, skew, (long long)m,
                                                         (long long)n, e, (long long)worst, worst >= 0 ? cpu_out[worst] : 0.0,
                                                         worst >= 0 ? ref[worst] : 0.0);
                                            failures++;
                                        }
                                    }
                                }
                                for (int mem = 0; mem < 2; mem++)
                                    for (int s = 0; s < 4; s++) {
                                        set_strategy(strategies[s]);
                                        int st = run_case(gpu, &d, &p, mem ? LAC_MEM_DEVICE : LAC_MEM_HOST, RUN_MAP, got, NULL);
                                        runs++;
                                        int64_t worst = -1;
                                        double e = st == LAC_SUCCESS ? compare(got, ref, n * b, &worst) : INFINITY;
                                        if (!(e <= tol) && failures < 20) {
                                            failures++;
                                            HARNESS_FAIL("op %s %s %s weights %d b %lld acc %d empty %g skew %d %s strategy %s "
                                                         "(m %lld n %lld): status %d (%s), err %g at slot %lld: got %.9g want %.9g",
                                                         lac_map_op_name(p.op), lac_dtype_name(vtype), lac_dtype_name(itype),
                                                         weighted, (long long)b, acc, p.empty_value, skew, mem ? "device" : "host",
                                                         strategies[s], (long long)m, (long long)n, st, lac_last_error(gpu), e,
                                                         (long long)worst, worst >= 0 ? got[worst] : 0.0,
                                                         worst >= 0 ? ref[worst] : 0.0);
                                        }
                                    }
                            }
                        set_strategy("auto");
                        free(ref);
                        free(got);
                        free(cpu_out);
                        case_free(&d);
                    }
    printf("    %d GPU runs compared%s\n", runs, cpu_answers == 1 ? " (and the CPU backend)" : " (CPU backend has no map yet)");
}

/* Enough targets that the privatised copy spans a cluster (and spills to
 * global atomics when forced onto one block). */
TEST(many_targets_cluster_and_hybrid_paths)
{
    static const char *forced[] = {"auto", "cluster2", "cluster8", "cluster16", "cluster1", "global"};
    case_data d;
    int64_t n = 150000 + (int64_t)(harness_rand_u64(&rng) % 1000);
    case_make(&d, rows(2000000, 8), n, 1, LAC_FLOAT32, LAC_INT32, 1, 0);
    double *ref = malloc(sizeof(double) * (size_t)n), *got = malloc(sizeof(double) * (size_t)n);
    for (int o = 0; o < 3; o++) {
        lac_map_params p = lac_map_params_default();
        p.op = o == 0 ? LAC_MAP_SUM : o == 1 ? LAC_MAP_MEAN : LAC_MAP_MAX;
        if (quick && o == 1) continue;
        reference(&d, &p, ref);
        for (int s = 0; s < 6; s++) {
            set_strategy(forced[s]);
            int st = run_case(gpu, &d, &p, LAC_MEM_DEVICE, RUN_MAP, got, NULL);
            int64_t worst = -1;
            double e = st == LAC_SUCCESS ? compare(got, ref, n, &worst) : INFINITY;
            if (!(e <= 2e-4))
                HARNESS_FAIL("op %s strategy %s: status %d (%s) err %g", lac_map_op_name(p.op), forced[s], st,
                             lac_last_error(gpu), e);
        }
    }
    set_strategy("auto");
    free(ref);
    free(got);
    case_free(&d);
}

/* A skewed bridge large enough for the hot-target sampling: half of the rows
 * on three targets, few and many targets, device and streamed host memory. */
TEST(hot_targets_of_a_skewed_bridge)
{
    for (int vt = 0; vt < 2; vt++)
        for (int it = 0; it < 2; it++)
            for (int big = 0; big < 2; big++) {
                if (quick && vt != it) continue;
                case_data d;
                int64_t n = big ? 300000 : 5000;
                lac_dtype vtype = vt ? LAC_FLOAT64 : LAC_FLOAT32;
                case_make(&d, rows(600000, 4) + (int64_t)(harness_rand_u64(&rng) % 100), n, 1, vtype,
                          it ? LAC_INT64 : LAC_INT32, 1, 1);
                double *ref = malloc(sizeof(double) * (size_t)n), *got = malloc(sizeof(double) * (size_t)n);
                for (int o = 0; o < 4; o++) {
                    lac_map_params p = lac_map_params_default();
                    p.op = o < 2 ? LAC_MAP_SUM : LAC_MAP_COUNT;
                    d.weighted = o % 2;
                    p.accumulate = big;
                    p.chunk_elements = 200000;
                    reference(&d, &p, ref);
                    for (int mem = 0; mem < 2; mem++) {
                        int st = run_case(gpu, &d, &p, mem ? LAC_MEM_DEVICE : LAC_MEM_HOST, RUN_MAP, got, NULL);
                        int64_t worst = -1;
                        double e = st == LAC_SUCCESS ? compare(got, ref, n, &worst) : INFINITY;
                        /* float32 sums of ~300k values on one target: relative rounding ~1e-4. */
                        if (!(e <= (vt ? 1e-9 : 2e-3)))
                            HARNESS_FAIL("skewed %s %s n %lld op %s weights %d %s: status %d (%s) err %g at %lld", lac_dtype_name(vtype),
                                         it ? "int64" : "int32", (long long)n, lac_map_op_name(p.op), d.weighted,
                                         mem ? "device" : "host", st, lac_last_error(gpu), e, (long long)worst);
                    }
                }
                free(ref);
                free(got);
                case_free(&d);
            }
}

TEST(nan_policies_and_empty_values)
{
    for (int vt = 0; vt < 2; vt++)
        for (int policy = 0; policy < 2; policy++)
            for (int o = 0; o < 5; o++)
                for (int mem = 0; mem < 2; mem++) {
                    case_data d;
                    lac_dtype vtype = vt ? LAC_FLOAT64 : LAC_FLOAT32;
                    case_make(&d, 5000, 400, 2, vtype, LAC_INT32, 1, 0);
                    /* NaN in some source elements and some weights. */
                    for (int64_t i = 0; i < d.m; i += 37) d.S[i * d.b + (i % 2)] = NAN;
                    for (int64_t i = 5; i < d.m; i += 101) d.w[i] = NAN;
                    lac_map_params p = lac_map_params_default();
                    p.op = (lac_map_op)o;
                    p.nan_policy = policy ? LAC_NAN_SKIP : LAC_NAN_PROPAGATE;
                    p.empty_value = 3.25;
                    /* Leave a few targets empty. */
                    for (int64_t i = 0; i < d.m; i++)
                        if (d.R[i] % 50 == 7) d.R[i] = 0;
                    double ref[800], got[800];
                    reference(&d, &p, ref);
                    int st = run_case(gpu, &d, &p, mem ? LAC_MEM_DEVICE : LAC_MEM_HOST, RUN_MAP, got, NULL);
                    int64_t worst = -1;
                    double e = st == LAC_SUCCESS ? compare(got, ref, 800, &worst) : INFINITY;
                    if (!(e <= (vt ? 1e-10 : 2e-4)))
                        HARNESS_FAIL("%s policy %s op %s %s: status %d (%s) err %g at %lld: got %g want %g",
                                     lac_dtype_name(vtype), policy ? "skip" : "propagate", lac_map_op_name(p.op),
                                     mem ? "device" : "host", st, lac_last_error(gpu), e, (long long)worst,
                                     worst >= 0 ? got[worst] : 0, worst >= 0 ? ref[worst] : 0);
                    case_free(&d);
                }
}

TEST(deterministic_is_bit_identical_and_equals_the_plan)
{
    for (int vt = 0; vt < 2; vt++)
        for (int o = 0; o < 5; o++)
            for (int skew = 0; skew < 2; skew++) {
                if (quick && (o % 2 || skew != vt)) continue;
                case_data d;
                lac_dtype vtype = vt ? LAC_FLOAT64 : LAC_FLOAT32;
                /* Skewed: hot targets of thousands of rows span several pieces. */
                case_make(&d, 30000, 500, 2, vtype, skew ? LAC_INT64 : LAC_INT32, 1, skew);
                lac_map_params p = lac_map_params_default();
                p.op = (lac_map_op)o;
                p.deterministic = 1;
                p.accumulate = p.op != LAC_MAP_MEAN && skew;
                size_t bytes = (size_t)(d.n * d.b) * lac_dtype_size(vtype);
                unsigned char *r1 = malloc(bytes), *r2 = malloc(bytes), *r3 = malloc(bytes), *r4 = malloc(bytes);
                double *ref = malloc(sizeof(double) * (size_t)(d.n * d.b)), *got = malloc(sizeof(double) * (size_t)(d.n * d.b));
                reference(&d, &p, ref);
                int s1 = run_case(gpu, &d, &p, LAC_MEM_DEVICE, RUN_MAP, got, r1);
                int s2 = run_case(gpu, &d, &p, LAC_MEM_DEVICE, RUN_MAP, got, r2);
                int s3 = run_case(gpu, &d, &p, LAC_MEM_DEVICE, RUN_PLAN, got, r3);
                int s4 = run_case(gpu, &d, &p, LAC_MEM_HOST, RUN_PLAN, got, r4);
                CHECK_INT(s1, 0);
                CHECK_INT(s2, 0);
                CHECK_INT(s3, 0);
                CHECK_INT(s4, 0);
                if (memcmp(r1, r2, bytes) != 0) HARNESS_FAIL("op %s %s: two deterministic runs differ", lac_map_op_name(p.op), lac_dtype_name(vtype));
                if (memcmp(r1, r3, bytes) != 0) HARNESS_FAIL("op %s %s: plan differs from deterministic one-shot", lac_map_op_name(p.op), lac_dtype_name(vtype));
                if (memcmp(r3, r4, bytes) != 0) HARNESS_FAIL("op %s %s: host-memory plan differs from device-memory plan", lac_map_op_name(p.op), lac_dtype_name(vtype));
                int64_t worst = -1;
                double e = compare(got, ref, d.n * d.b, &worst);
                /* float64 accumulation rounded once: float32 results within an ulp or two. */
                if (!(e <= (vt ? 1e-12 : 1e-6)))
                    HARNESS_FAIL("op %s %s skew %d: deterministic err %g at %lld", lac_map_op_name(p.op), lac_dtype_name(vtype), skew, e, (long long)worst);
                free(r1), free(r2), free(r3), free(r4), free(ref), free(got);
                case_free(&d);
            }
}

/* A poisoned T must come back byte for byte. */
static void check_rejected(const case_data *d, const lac_map_params *p, lac_memory mem, run_kind kind, int want_status,
                           const char *want_text, const char *what)
{
    size_t bytes = (size_t)(d->n * d->b) * lac_dtype_size(d->vt);
    unsigned char *before = to_dtype(d->T0, d->n * d->b, d->vt), *after = malloc(bytes);
    double *got = malloc(sizeof(double) * (size_t)(d->n * d->b));
    int st = run_case(gpu, d, p, mem, kind, got, after);
    if (st != want_status) HARNESS_FAIL("%s: status %d, want %d (%s)", what, st, want_status, lac_last_error(gpu));
    else if (!strstr(lac_last_error(gpu), want_text))
        HARNESS_FAIL("%s: message '%s' does not name '%s'", what, lac_last_error(gpu), want_text);
    if (memcmp(before, after, bytes) != 0) HARNESS_FAIL("%s: T was changed by a rejected call", what);
    free(before);
    free(after);
    free(got);
}

TEST(bad_index_and_nan_name_the_first_position_and_leave_T)
{
    for (int mem = 0; mem < 2; mem++)
        for (int it = 0; it < 2; it++)
            for (int s = 0; s < 3; s++) {
                if (quick && mem != it) continue;
                set_strategy(strategies[s]);
                lac_memory memory = mem ? LAC_MEM_DEVICE : LAC_MEM_HOST;
                case_data d;
                case_make(&d, 20000, 300, 1, LAC_FLOAT32, it ? LAC_INT64 : LAC_INT32, 1, 0);
                d.R[15001] = 300;
                d.R[12345] = -4;
                d.R[17000] = it ? (int64_t)1 << 40 : 999;
                lac_map_params p = lac_map_params_default();
                check_rejected(&d, &p, memory, RUN_MAP, LAC_ERR_RANGE, "bridge[12345] = -4", "bad index");
                p.deterministic = 1;
                check_rejected(&d, &p, memory, RUN_MAP, LAC_ERR_RANGE, "bridge[12345] = -4", "bad index (deterministic)");
                check_rejected(&d, &p, memory, RUN_PLAN, LAC_ERR_RANGE, "bridge[12345] = -4", "bad index (plan create)");
                p.deterministic = 0;
                p.op = LAC_MAP_MIN;
                p.accumulate = 1;
                check_rejected(&d, &p, memory, RUN_MAP, LAC_ERR_RANGE, "bridge[12345] = -4", "bad index (min, accumulate)");
                case_free(&d);

                /* NaN under LAC_NAN_ERROR: the smallest row with any fault,
                 * weights named before the source of the same row. */
                case_make(&d, 20000, 300, 3, LAC_FLOAT64, it ? LAC_INT64 : LAC_INT32, 1, 0);
                d.S[9000 * 3 + 2] = NAN;
                d.R[9500] = 301;
                d.w[11000] = NAN;
                lac_map_params q = lac_map_params_default();
                q.nan_policy = LAC_NAN_ERROR;
                check_rejected(&d, &q, memory, RUN_MAP, LAC_ERR_VALUE, "source[9000, 2]", "NaN source");
                q.op = LAC_MAP_COUNT;
                check_rejected(&d, &q, memory, RUN_MAP, LAC_ERR_VALUE, "source[9000, 2]", "NaN source (count)");
                q.op = LAC_MAP_SUM;
                d.S[9000 * 3 + 2] = 1.0;
                check_rejected(&d, &q, memory, RUN_MAP, LAC_ERR_RANGE, "bridge[9500] = 301", "bad index before NaN weight");
                d.R[9500] = 1;
                check_rejected(&d, &q, memory, RUN_MAP, LAC_ERR_VALUE, "weights[11000]", "NaN weight");
                q.deterministic = 1;
                check_rejected(&d, &q, memory, RUN_MAP, LAC_ERR_VALUE, "weights[11000]", "NaN weight (deterministic)");
                check_rejected(&d, &q, memory, RUN_PLAN, LAC_ERR_VALUE, "weights[11000]", "NaN weight (plan execute)");
                case_free(&d);
            }
    set_strategy("auto");
}

TEST(out_of_core_chunks_from_pageable_and_pinned_memory)
{
    for (int pinned = 0; pinned < 2; pinned++)
        for (int o = 0; o < 5; o++) {
            if (quick && o >= 2) continue;
            case_data d;
            int64_t m = 50000 + (int64_t)(harness_rand_u64(&rng) % 1000);
            case_make(&d, m, 2000, 1, LAC_FLOAT32, LAC_INT32, o % 2, 0);
            lac_map_params p = lac_map_params_default();
            p.op = (lac_map_op)o;
            p.chunk_elements = 777 + o;   /* odd sizes: unaligned chunk starts, a short last chunk */
            p.accumulate = p.op == LAC_MAP_SUM;
            double *ref = malloc(sizeof(double) * 2000), *got = malloc(sizeof(double) * 2000);
            reference(&d, &p, ref);
            size_t vs = 4;
            void *S = NULL, *R = NULL, *w = NULL;
            float *T = malloc(2000 * sizeof(float));
            if (pinned) {
                CHECK_OK(gpu, lac_host_alloc_pinned(gpu, (size_t)m * vs, &S));
                CHECK_OK(gpu, lac_host_alloc_pinned(gpu, (size_t)m * 4, &R));
                CHECK_OK(gpu, lac_host_alloc_pinned(gpu, (size_t)m * vs, &w));
            } else {
                S = malloc((size_t)m * vs), R = malloc((size_t)m * 4), w = malloc((size_t)m * vs);
            }
            for (int64_t i = 0; i < m; i++) {
                ((float *)S)[i] = (float)d.S[i];
                ((float *)w)[i] = (float)d.w[i];
                ((int32_t *)R)[i] = (int32_t)d.R[i];
            }
            for (int k = 0; k < 2000; k++) T[k] = (float)d.T0[k];
            lac_array as = lac_array_vector(S, LAC_FLOAT32, m), ar = lac_array_vector(R, LAC_INT32, m);
            lac_array aw = lac_array_vector(w, LAC_FLOAT32, m), at = lac_array_vector(T, LAC_FLOAT32, 2000);
            CHECK_OK(gpu, lac_map(gpu, &p, &as, &ar, d.weighted ? &aw : NULL, &at));
            for (int k = 0; k < 2000; k++) got[k] = T[k];
            int64_t worst = -1;
            double e = compare(got, ref, 2000, &worst);
            if (!(e <= 2e-4)) HARNESS_FAIL("chunked op %s pinned %d: err %g at %lld", lac_map_op_name(p.op), pinned, e, (long long)worst);
            /* A bad index in a late chunk: named, and T untouched. */
            ((int32_t *)R)[m - 3] = 2000;
            float *keep = malloc(2000 * sizeof(float));
            memcpy(keep, T, 2000 * sizeof(float));
            int st = lac_map(gpu, &p, &as, &ar, d.weighted ? &aw : NULL, &at);
            CHECK_INT(st, LAC_ERR_RANGE);
            char want[64];
            snprintf(want, sizeof want, "bridge[%lld] = 2000", (long long)(m - 3));
            CHECK_STR_CONTAINS(lac_last_error(gpu), want);
            CHECK(memcmp(keep, T, 2000 * sizeof(float)) == 0);
            free(keep);
            if (pinned) {
                lac_host_free_pinned(gpu, S);
                lac_host_free_pinned(gpu, R);
                lac_host_free_pinned(gpu, w);
            } else {
                free(S), free(R), free(w);
            }
            free(T), free(ref), free(got);
            case_free(&d);
        }
}

TEST(empty_source_writes_empty_values)
{
    case_data d;
    case_make(&d, 0, 50, 1, LAC_FLOAT64, LAC_INT32, 0, 0);
    lac_map_params p = lac_map_params_default();
    p.empty_value = -1.0;
    double got[50];
    for (int mem = 0; mem < 2; mem++) {
        CHECK_OK(gpu, run_case(gpu, &d, &p, mem ? LAC_MEM_DEVICE : LAC_MEM_HOST, RUN_MAP, got, NULL));
        for (int k = 0; k < 50; k++)
            if (got[k] != -1.0) {
                HARNESS_FAIL("memory %d: T[%d] = %g, want the empty value -1", mem, k, got[k]);
                break;
            }
    }
    case_free(&d);
}

/* The few-target single-launch path on a full grid (SUM, COUNT and weighted
 * MEAN of one column in device memory, uniform and skewed bridges, float32
 * and float64; some targets empty, some with weights summing to 0) against
 * the reference, with the hot keys through the index and in registers
 * (LACUNA_MAP_CUDA_HOT_TABLE=0), a hit byte a row (LACUNA_MAP_CUDA_MEAN_MARK=0),
 * the general path (LACUNA_MAP_CUDA_FEW=0) and, for the weighted MEAN, the L2
 * pairs of many targets (LACUNA_MAP_CUDA_STRATEGY=pair), each through a
 * context's knobs;
 * then faulty and clean calls in turn, so that each of the context's two fault
 * flags is set, read and reset: a clean call after a faulty one succeeds, and
 * every faulty one names its row and leaves T as it was. */
TEST(few_targets_single_launch_full_grid_and_alternating_faults)
{
    /* The paths by context knobs (the environment is read once a process). */
    static const char *const knobs[] = {"MAP_CUDA_FEW=0", "MAP_CUDA_HOT_TABLE=0", "MAP_CUDA_MEAN_MARK=0",
                                        "MAP_CUDA_STRATEGY=pair"};
    enum { KNOBS = (int)(sizeof knobs / sizeof *knobs) };
    lac_ctx_t ctxs[KNOBS + 1] = {gpu};
    for (int k = 0; k < KNOBS; k++) {
        lac_ctx_params cp = lac_ctx_params_default();
        cp.backend = LAC_BACKEND_CUDA;
        cp.knobs = knobs[k];
        CHECK_OK(NULL, lac_ctx_create(&cp, &ctxs[k + 1]));
    }
    for (int vt = 0; vt < 2; vt++)
        for (int skew = 0; skew < 2; skew++) {
            if (quick && vt != skew) continue;
            case_data d;
            lac_dtype vtype = vt ? LAC_FLOAT64 : LAC_FLOAT32;
            int64_t n = 10000 + (int64_t)(harness_rand_u64(&rng) % 64);
            case_make(&d, rows(3000000, 16) + 4 * (int64_t)(harness_rand_u64(&rng) % 1000) + skew, n, 1, vtype,
                      LAC_INT32, 0, skew);
            for (int64_t i = 0; i < d.m; i++) {
                if (d.R[i] % 113 == 7) d.R[i] = (d.R[i] + 1) % n;   /* empty targets */
                if (d.R[i] % 113 == 11) d.w[i] = 0.0;               /* a weighted MEAN of 0 / 0 */
                if (d.R[i] % 113 == 13) d.w[i] = -0.0;              /* the same with -0.0: hit all the same */
            }
            double *ref = malloc(sizeof(double) * (size_t)n), *got = malloc(sizeof(double) * (size_t)n);
            for (int o = 0; o < 5; o++) {
                lac_map_params p = sum_count_case(o, &d);
                reference(&d, &p, ref);
                for (int path = 0; path <= KNOBS; path++) {
                    static const char *const paths[] = {"few-target", "general", "few-target (hot registers)",
                                                        "few-target (hit bytes)", "L2 pairs (forced)"};
                    if (!ctxs[path]) continue;
                    int st = run_case(ctxs[path], &d, &p, LAC_MEM_DEVICE, RUN_MAP, got, NULL);
                    int64_t worst = -1;
                    double e = st == LAC_SUCCESS ? compare(got, ref, n, &worst) : INFINITY;
                    /* float32 sums of up to ~500k values on one target. */
                    if (!(e <= (vt ? 1e-9 : 2e-3)))
                        HARNESS_FAIL("%s path, %s skew %d op %s weights %d acc %d (m %lld n %lld): status %d (%s) err %g "
                                     "at %lld: got %.9g want %.9g",
                                     paths[path], lac_dtype_name(vtype), skew,
                                     lac_map_op_name(p.op), d.weighted, p.accumulate, (long long)d.m, (long long)n, st,
                                     lac_last_error(gpu), e, (long long)worst, worst >= 0 ? got[worst] : 0.0,
                                     worst >= 0 ? ref[worst] : 0.0);
                }
            }
            lac_map_params p = lac_map_params_default();
            d.weighted = 0;
            int64_t bad[3] = {d.m - 2, 7, d.m / 2 + 1};
            for (int round = 0; round < 6; round++) {
                if (round % 2 == 0) {
                    int64_t row = bad[(round / 2) % 3], keep = d.R[row];
                    d.R[row] = n + round;
                    char want[80];
                    snprintf(want, sizeof want, "bridge[%lld] = %lld", (long long)row, (long long)(n + round));
                    check_rejected(&d, &p, LAC_MEM_DEVICE, RUN_MAP, LAC_ERR_RANGE, want, "few-target bad index");
                    d.R[row] = keep;
                } else {
                    reference(&d, &p, ref);
                    int st = run_case(gpu, &d, &p, LAC_MEM_DEVICE, RUN_MAP, got, NULL);
                    int64_t worst = -1;
                    double e = st == LAC_SUCCESS ? compare(got, ref, n, &worst) : INFINITY;
                    if (!(e <= (vt ? 1e-9 : 2e-3)))
                        HARNESS_FAIL("clean call after a faulty one (round %d): status %d (%s) err %g", round, st,
                                     lac_last_error(gpu), e);
                }
            }
            free(ref);
            free(got);
            case_free(&d);
        }
    for (int k = 1; k <= KNOBS; k++) lac_ctx_destroy(&ctxs[k]);
}

/* Few-target plans (the chunk-local plan): SUM and COUNT against the float64
 * reference (float64 sums rounded once), bit-identical from run to run, across
 * grid sizes (LACUNA_MAP_CUDA_PLAN_GRID) and with the deterministic one-shot
 * call; a call that plan does not serve (MEAN, MIN) runs on the sorted plan
 * it builds on first use, also correct. */
TEST(few_target_plans_are_bit_identical_across_runs_and_grids)
{
    static const char *grids[] = {"", "1", "7", "64"};
    for (int vt = 0; vt < 2; vt++)
        for (int shape = 0; shape < 2; shape++) {
            if (quick && vt != shape) continue;
            case_data d;
            lac_dtype vtype = vt ? LAC_FLOAT64 : LAC_FLOAT32;
            int64_t n = shape ? 20000 : 5000 + (int64_t)(harness_rand_u64(&rng) % 100);
            int64_t m = rows(1500000, 16) + (int64_t)(harness_rand_u64(&rng) % 5000);
            case_make(&d, m, n, 1, vtype, shape ? LAC_INT64 : LAC_INT32, 0, shape);
            size_t bytes = (size_t)n * lac_dtype_size(vtype);
            unsigned char *first = malloc(bytes), *again = malloc(bytes);
            double *ref = malloc(sizeof(double) * (size_t)n), *got = malloc(sizeof(double) * (size_t)n);
            for (int o = 0; o < 6; o++) {
                lac_map_params p = lac_map_params_default();
                p.deterministic = 1;   /* a plan's fixed-order execute */
                p.op = o < 2 ? LAC_MAP_SUM : o < 4 ? LAC_MAP_COUNT : o == 4 ? LAC_MAP_MEAN : LAC_MAP_MIN;
                d.weighted = o % 2;
                p.accumulate = o == 1 || o == 5;
                p.empty_value = o == 2 || o == 4 ? -3.0 : 0.0;
                if (quick && o != 0 && o != 3 && o != 5) continue;   /* o 0 also empties targets: kept */
                if (o == 0) /* leave some targets empty */
                    for (int64_t i = 0; i < m; i++)
                        if (d.R[i] % 97 == 5) d.R[i] = 0;
                reference(&d, &p, ref);
                for (int g = 0; g < 4; g++) {
                    lac_ctx_t c = *grids[g] ? knob_ctx("MAP_CUDA_PLAN_GRID", grids[g]) : gpu;
                    int st = run_case(c, &d, &p, LAC_MEM_DEVICE, RUN_PLAN, got, g == 0 ? first : again);
                    CHECK_INT(st, 0);
                    if (g > 0 && memcmp(first, again, bytes) != 0)
                        HARNESS_FAIL("%s n %lld op %s weights %d: grid %s differs from the default grid",
                                     lac_dtype_name(vtype), (long long)n, lac_map_op_name(p.op), d.weighted, grids[g]);
                }
                int st = run_case(gpu, &d, &p, LAC_MEM_DEVICE, RUN_PLAN, got, again);
                CHECK_INT(st, 0);
                if (memcmp(first, again, bytes) != 0)
                    HARNESS_FAIL("%s n %lld op %s: two plan runs differ", lac_dtype_name(vtype), (long long)n, lac_map_op_name(p.op));
                p.deterministic = 1;
                st = run_case(gpu, &d, &p, LAC_MEM_DEVICE, RUN_MAP, got, again);
                CHECK_INT(st, 0);
                if (memcmp(first, again, bytes) != 0)
                    HARNESS_FAIL("%s n %lld op %s: deterministic one-shot differs from the plan", lac_dtype_name(vtype),
                                 (long long)n, lac_map_op_name(p.op));
                int64_t worst = -1;
                double e = compare(got, ref, n, &worst);
                if (!(e <= (vt ? 1e-12 : 1e-6)))
                    HARNESS_FAIL("%s n %lld skew %d op %s weights %d acc %d: plan err %g at %lld: got %.9g want %.9g",
                                 lac_dtype_name(vtype), (long long)n, shape, lac_map_op_name(p.op), d.weighted,
                                 p.accumulate, e, (long long)worst, worst >= 0 ? got[worst] : 0.0,
                                 worst >= 0 ? ref[worst] : 0.0);
            }
            free(first), free(again), free(ref), free(got);
            case_free(&d);
        }
}

/* One few-target plan serving calls of different kinds in turn: float32 S
 * unweighted (the plan's own chunks), then weighted and float64 S (calls whose
 * ring does not fit beside wide chunks: a twin plan of narrower chunks, built
 * on first use), then the first kind again. Each against the float64
 * reference; a repeated call gives the same bits as its first run. */
TEST(one_few_target_plan_serves_unweighted_weighted_and_float64_calls)
{
    case_data d32, d64;
    const int64_t n = 4000 + (int64_t)(harness_rand_u64(&rng) % 100);
    const int64_t m = rows(700000, 4) + (int64_t)(harness_rand_u64(&rng) % 5000);
    case_make(&d32, m, n, 1, LAC_FLOAT32, LAC_INT32, 0, 0);
    case_make(&d64, m, n, 1, LAC_FLOAT64, LAC_INT32, 0, 0);
    memcpy(d64.R, d32.R, sizeof(int64_t) * (size_t)m);   /* one bridge, one plan */
    int32_t *hR = index_to_dtype(d32.R, m, LAC_INT32);
    void *R = NULL, *S32 = NULL, *S64 = NULL, *W32 = NULL, *T = NULL;
    lac_device_alloc(gpu, (size_t)m * 4 + 16, &R);
    lac_device_alloc(gpu, (size_t)m * 4 + 16, &S32);
    lac_device_alloc(gpu, (size_t)m * 4 + 16, &W32);
    lac_device_alloc(gpu, (size_t)m * 8 + 16, &S64);
    lac_device_alloc(gpu, (size_t)n * 8 + 16, &T);
    void *h32 = to_dtype(d32.S, m, LAC_FLOAT32), *w32 = to_dtype(d32.w, m, LAC_FLOAT32);
    void *h64 = to_dtype(d64.S, m, LAC_FLOAT64);
    lac_memcpy(gpu, R, LAC_MEM_DEVICE, hR, LAC_MEM_HOST, (size_t)m * 4);
    lac_memcpy(gpu, S32, LAC_MEM_DEVICE, h32, LAC_MEM_HOST, (size_t)m * 4);
    lac_memcpy(gpu, W32, LAC_MEM_DEVICE, w32, LAC_MEM_HOST, (size_t)m * 4);
    lac_memcpy(gpu, S64, LAC_MEM_DEVICE, h64, LAC_MEM_HOST, (size_t)m * 8);
    lac_array ar = lac_array_vector(R, LAC_INT32, m);
    ar.memory = LAC_MEM_DEVICE;
    lac_map_plan_t plan = NULL;
    CHECK_INT(lac_map_plan_create(gpu, &ar, n, &plan), 0);
    double *ref = malloc(sizeof(double) * (size_t)n), *got = malloc(sizeof(double) * (size_t)n);
    unsigned char *first[3] = {malloc((size_t)n * 8), malloc((size_t)n * 8), malloc((size_t)n * 8)};
    unsigned char *again = malloc((size_t)n * 8);
    static const char *kinds[3] = {"float32 unweighted", "float32 weighted", "float64 unweighted"};
    lac_map_params p = lac_map_params_default();
    p.deterministic = 1;
    for (int call = 0; call < 6 && plan; call++) {
        const int kind = call < 3 ? call : call - 3;   /* 0 1 2 0 1 2 */
        case_data *d = kind == 2 ? &d64 : &d32;
        d->weighted = kind == 1;
        const lac_dtype vt = d->vt;
        const size_t bytes = (size_t)n * lac_dtype_size(vt);
        lac_array as = lac_array_vector(kind == 2 ? S64 : S32, vt, m), aw = lac_array_vector(W32, vt, m);
        lac_array at = lac_array_vector(T, vt, n);
        as.memory = aw.memory = at.memory = LAC_MEM_DEVICE;
        int st = lac_map_plan_execute(gpu, plan, &p, &as, kind == 1 ? &aw : NULL, &at);
        if (st == LAC_SUCCESS) st = lac_ctx_synchronize(gpu);
        CHECK_INT(st, 0);
        unsigned char *raw = call < 3 ? first[kind] : again;
        lac_memcpy(gpu, raw, LAC_MEM_HOST, T, LAC_MEM_DEVICE, bytes);
        for (int64_t k = 0; k < n; k++) got[k] = value_at(raw, vt, k);
        reference(d, &p, ref);
        int64_t worst = -1;
        double e = compare(got, ref, n, &worst);
        if (!(e <= (vt == LAC_FLOAT64 ? 1e-12 : 1e-6)))
            HARNESS_FAIL("call %d (%s): err %g at %lld: got %.9g want %.9g", call, kinds[kind], e, (long long)worst,
                         worst >= 0 ? got[worst] : 0.0, worst >= 0 ? ref[worst] : 0.0);
        if (call >= 3 && memcmp(first[kind], again, bytes) != 0)
            HARNESS_FAIL("call %d (%s): bits differ from the same call's first run on this plan", call, kinds[kind]);
    }
    lac_map_plan_destroy(&plan);
    lac_device_free(gpu, R), lac_device_free(gpu, S32), lac_device_free(gpu, W32);
    lac_device_free(gpu, S64), lac_device_free(gpu, T);
    free(hR), free(h32), free(w32), free(h64), free(ref), free(got), free(again);
    for (int i = 0; i < 3; i++) free(first[i]);
    case_free(&d32);
    case_free(&d64);
}

/* Many targets through the range-partitioned kernel (map_part.cu), forced by
 * a context knob (LACUNA_MAP_CUDA_PART=1, one or three tiles a chunk): SUM and COUNT, weights, accumulate and
 * empty values against the float64 reference, uniform and skewed bridges
 * (half of the rows on three targets overflow their regions into the spill),
 * int32 and int64, float32 and float64; a bad index names its row and leaves
 * T as it was, and the next clean call succeeds. */
TEST(many_targets_partitioned_by_range)
{
    static const char *const knobs[] = {"MAP_CUDA_PART=1,MAP_CUDA_PART_TILES=1", "MAP_CUDA_PART=1,MAP_CUDA_PART_TILES=3",
                                        "MAP_CUDA_PART=1"};
    lac_ctx_t saved = gpu;
    for (int k = 0; k < 3; k++) {
        lac_ctx_t part = NULL;
        lac_ctx_params cp = lac_ctx_params_default();
        cp.backend = LAC_BACKEND_CUDA;
        cp.knobs = knobs[k];
        CHECK_OK(NULL, lac_ctx_create(&cp, &part));
        if (!part) return;
        gpu = part;
        for (int vt = 0; vt < 2; vt++)
            for (int it = 0; it < 2; it++)
                for (int skew = 0; skew < 2; skew++) {
                    if ((quick || k == 2) && !(vt == it && it == skew)) continue;
                    case_data d;
                    lac_dtype vtype = vt ? LAC_FLOAT64 : LAC_FLOAT32;
                    int64_t n = (skew ? 400000 : 70000) + (int64_t)(harness_rand_u64(&rng) % 1000);
                    int64_t m = (k == 2 ? 2400000 : rows(900000, 4)) + (int64_t)(harness_rand_u64(&rng) % 4000);
                    case_make(&d, m, n, 1, vtype, it ? LAC_INT64 : LAC_INT32, 0, skew);
                    double *ref = malloc(sizeof(double) * (size_t)n), *got = malloc(sizeof(double) * (size_t)n);
                    for (int o = 0; o < 4; o++) {
                        lac_map_params p = sum_count_case(o, &d);
                        reference(&d, &p, ref);
                        int st = run_case(gpu, &d, &p, LAC_MEM_DEVICE, RUN_MAP, got, NULL);
                        int64_t worst = -1;
                        double e = st == LAC_SUCCESS ? compare(got, ref, n, &worst) : INFINITY;
                        /* float32 sums of up to ~300k values on one hot target. */
                        if (!(e <= (vt ? 1e-9 : skew ? 2e-3 : 1e-5)))
                            HARNESS_FAIL("knobs '%s' %s %s skew %d op %s weights %d (m %lld n %lld): status %d (%s) err %g "
                                         "at %lld: got %.9g want %.9g",
                                         knobs[k], lac_dtype_name(vtype), it ? "int64" : "int32", skew,
                                         lac_map_op_name(p.op), d.weighted, (long long)m, (long long)n, st,
                                         lac_last_error(gpu), e, (long long)worst, worst >= 0 ? got[worst] : 0.0,
                                         worst >= 0 ? ref[worst] : 0.0);
                    }
                    lac_map_params p = lac_map_params_default();
                    d.weighted = 0;
                    int64_t keep1 = d.R[m - 3], keep2 = d.R[m / 3];
                    d.R[m - 3] = n;
                    d.R[m / 3] = -7;
                    char want[80];
                    snprintf(want, sizeof want, "bridge[%lld] = -7", (long long)(m / 3));
                    check_rejected(&d, &p, LAC_MEM_DEVICE, RUN_MAP, LAC_ERR_RANGE, want, "partitioned bad index");
                    d.R[m - 3] = keep1;
                    d.R[m / 3] = keep2;
                    reference(&d, &p, ref);
                    int st = run_case(gpu, &d, &p, LAC_MEM_DEVICE, RUN_MAP, got, NULL);
                    int64_t worst = -1;
                    double e = st == LAC_SUCCESS ? compare(got, ref, n, &worst) : INFINITY;
                    if (!(e <= (vt ? 1e-9 : skew ? 2e-3 : 1e-5)))
                        HARNESS_FAIL("clean partitioned call after a faulty one: status %d (%s) err %g", st, lac_last_error(gpu), e);
                    free(ref);
                    free(got);
                    case_free(&d);
                }
        gpu = saved;
        lac_ctx_destroy(&part);
    }
}

/* Device copies of a case for the stream-ordered calls. */
typedef struct {
    void *S, *w, *R, *T;
    lac_array as, aw, ar, at;
} dev_case;

static void dev_case_make(dev_case *g, const case_data *d)
{
    size_t vs = lac_dtype_size(d->vt), is = lac_dtype_size(d->it);
    void *hS = to_dtype(d->S, d->m * d->b, d->vt), *hw = to_dtype(d->w, d->m, d->vt);
    void *hR = index_to_dtype(d->R, d->m, d->it), *hT = to_dtype(d->T0, d->n * d->b, d->vt);
    cudaMalloc(&g->S, (size_t)(d->m * d->b) * vs + 16);
    cudaMalloc(&g->w, (size_t)d->m * vs + 16);
    cudaMalloc(&g->R, (size_t)d->m * is + 16);
    cudaMalloc(&g->T, (size_t)(d->n * d->b) * vs + 16);
    cudaMemcpy(g->S, hS, (size_t)(d->m * d->b) * vs, cudaMemcpyHostToDevice);
    cudaMemcpy(g->w, hw, (size_t)d->m * vs, cudaMemcpyHostToDevice);
    cudaMemcpy(g->R, hR, (size_t)d->m * is, cudaMemcpyHostToDevice);
    cudaMemcpy(g->T, hT, (size_t)(d->n * d->b) * vs, cudaMemcpyHostToDevice);
    g->as = d->b > 1 ? lac_array_matrix(g->S, d->vt, d->m, d->b) : lac_array_vector(g->S, d->vt, d->m);
    g->at = d->b > 1 ? lac_array_matrix(g->T, d->vt, d->n, d->b) : lac_array_vector(g->T, d->vt, d->n);
    g->ar = lac_array_vector(g->R, d->it, d->m);
    g->aw = lac_array_vector(g->w, d->vt, d->m);
    g->as.memory = g->at.memory = g->ar.memory = g->aw.memory = LAC_MEM_DEVICE;
    free(hS), free(hw), free(hR), free(hT);
}

static void dev_case_target(const dev_case *g, const case_data *d, double *out, void *raw)
{
    size_t bytes = (size_t)(d->n * d->b) * lac_dtype_size(d->vt);
    void *h = malloc(bytes);
    cudaMemcpy(h, g->T, bytes, cudaMemcpyDeviceToHost);
    for (int64_t k = 0; k < d->n * d->b; k++) out[k] = value_at(h, d->vt, k);
    if (raw) memcpy(raw, h, bytes);
    free(h);
}

static void dev_case_free(dev_case *g)
{
    cudaFree(g->S), cudaFree(g->w), cudaFree(g->R), cudaFree(g->T);
}

/* lac_map_cuda_async on a stream of the caller's: calls of the three device
 * paths (few targets, many targets partitioned, the general kernel for a
 * weighted mean) queued back to back and checked after one synchronisation;
 * a faulty call between two good ones leaves its T untouched, is named by the
 * synchronisation and does not disturb the others; a captured CUDA graph
 * replayed accumulates once per replay, and a replay over a bridge made bad
 * in place is reported and leaves T as the last good replay left it. */
TEST(stream_ordered_calls_defer_faults_and_replay_in_graphs)
{
    cudaStream_t stream;
    CHECK_INT(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), 0);
    case_data d[3];
    dev_case g[3];
    lac_map_params p[3];
    int64_t shapes[3][2] = {{rows(2000000, 8), 10000}, {rows(2400000, 8), 300000}, {rows(500000, 8), 50000}};
    for (int c = 0; c < 3; c++) {
        case_make(&d[c], shapes[c][0] + c, shapes[c][1], 1, c == 2 ? LAC_FLOAT64 : LAC_FLOAT32, LAC_INT32, c == 2, c == 0);
        dev_case_make(&g[c], &d[c]);
        p[c] = lac_map_params_default();
        p[c].op = c == 2 ? LAC_MAP_MEAN : LAC_MAP_SUM;
        p[c].accumulate = c == 1;
    }
    /* Three good calls, one synchronisation. */
    for (int c = 0; c < 3; c++)
        CHECK_OK(gpu, lac_map_cuda_async(gpu, &p[c], &g[c].as, &g[c].ar, d[c].weighted ? &g[c].aw : NULL, &g[c].at, stream));
    CHECK_OK(gpu, lac_map_cuda_synchronize(gpu, stream));
    for (int c = 0; c < 3; c++) {
        double *ref = malloc(sizeof(double) * (size_t)d[c].n), *got = malloc(sizeof(double) * (size_t)d[c].n);
        reference(&d[c], &p[c], ref);
        dev_case_target(&g[c], &d[c], got, NULL);
        int64_t worst = -1;
        double e = compare(got, ref, d[c].n, &worst);
        if (!(e <= (c == 2 ? 1e-9 : 2e-3))) HARNESS_FAIL("async call %d: err %g at %lld", c, e, (long long)worst);
        free(ref), free(got);
    }
    /* good, faulty, good: the fault comes at the synchronisation. */
    {
        case_data *f = &d[1];
        size_t bytes = (size_t)f->n * lac_dtype_size(f->vt);
        unsigned char *before = malloc(bytes), *after = malloc(bytes);
        double *got = malloc(sizeof(double) * (size_t)f->n), *ref = malloc(sizeof(double) * (size_t)f->n);
        dev_case_target(&g[1], f, got, before);
        int32_t bad = (int32_t)f->n + 5, keep;
        int64_t row = f->m / 2 + 3;
        cudaMemcpy(&keep, (int32_t *)g[1].R + row, sizeof keep, cudaMemcpyDeviceToHost);
        cudaMemcpy((int32_t *)g[1].R + row, &bad, sizeof bad, cudaMemcpyHostToDevice);
        lac_map_params q = lac_map_params_default();
        CHECK_OK(gpu, lac_map_cuda_async(gpu, &q, &g[0].as, &g[0].ar, NULL, &g[0].at, stream));
        CHECK_OK(gpu, lac_map_cuda_async(gpu, &q, &g[1].as, &g[1].ar, NULL, &g[1].at, stream));
        CHECK_OK(gpu, lac_map_cuda_async(gpu, &q, &g[2].as, &g[2].ar, NULL, &g[2].at, stream));
        int st = lac_map_cuda_synchronize(gpu, stream);
        char want[80];
        snprintf(want, sizeof want, "bridge[%lld] = %d", (long long)row, bad);
        CHECK_INT(st, LAC_ERR_RANGE);
        if (!strstr(lac_last_error(gpu), want)) HARNESS_FAIL("async fault: '%s' does not name '%s'", lac_last_error(gpu), want);
        dev_case_target(&g[1], f, got, after);
        if (memcmp(before, after, bytes) != 0) HARNESS_FAIL("async fault: T of the faulty call was changed");
        CHECK_OK(gpu, lac_map_cuda_synchronize(gpu, stream));   /* reported once */
        d[2].weighted = 0;
        reference(&d[2], &q, ref);
        double *got2 = malloc(sizeof(double) * (size_t)d[2].n);
        dev_case_target(&g[2], &d[2], got2, NULL);
        int64_t worst = -1;
        double e = compare(got2, ref, d[2].n, &worst);
        if (!(e <= 1e-9)) HARNESS_FAIL("the good call after a faulty one: err %g", e);
        cudaMemcpy((int32_t *)g[1].R + row, &keep, sizeof keep, cudaMemcpyHostToDevice);

        /* A graph of one accumulating call (the calls above sized the workspace). */
        lac_map_params acc = lac_map_params_default();
        acc.accumulate = 1;
        for (int c = 0; c < 2; c++) {
            cudaGraph_t graph = NULL;
            cudaGraphExec_t exec = NULL;
            CHECK_INT(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), 0);
            int cst = lac_map_cuda_async(gpu, &acc, &g[c].as, &g[c].ar, NULL, &g[c].at, stream);
            CHECK_INT(cudaStreamEndCapture(stream, &graph), 0);
            CHECK_INT(cst, 0);
            CHECK_INT(cudaGraphInstantiate(&exec, graph, 0), 0);
            double *start = malloc(sizeof(double) * (size_t)d[c].n), *g1 = malloc(sizeof(double) * (size_t)d[c].n);
            unsigned char *raw1 = malloc((size_t)d[c].n * 8), *raw2 = malloc((size_t)d[c].n * 8);
            dev_case_target(&g[c], &d[c], start, NULL);
            for (int k = 0; k < 3; k++) CHECK_INT(cudaGraphLaunch(exec, stream), 0);
            CHECK_OK(gpu, lac_map_cuda_synchronize(gpu, stream));
            dev_case_target(&g[c], &d[c], g1, raw1);
            /* expected: start + 3 x the sums */
            lac_map_params sum = lac_map_params_default();
            double *sums = malloc(sizeof(double) * (size_t)d[c].n);
            memset(d[c].T0, 0, sizeof(double) * (size_t)d[c].n);
            sum.accumulate = 1;
            reference(&d[c], &sum, sums);
            for (int64_t k = 0; k < d[c].n; k++) sums[k] = start[k] + 3.0 * sums[k];
            int64_t worst2 = -1;
            double e2 = compare(g1, sums, d[c].n, &worst2);
            if (!(e2 <= 5e-3)) HARNESS_FAIL("graph replays (path %d): err %g at %lld", c, e2, (long long)worst2);
            /* a replay over a bad bridge: reported, T as before */
            int32_t bad2 = -9, keep2;
            int64_t row2 = d[c].m - 7;
            cudaMemcpy(&keep2, (int32_t *)g[c].R + row2, sizeof keep2, cudaMemcpyDeviceToHost);
            cudaMemcpy((int32_t *)g[c].R + row2, &bad2, sizeof bad2, cudaMemcpyHostToDevice);
            CHECK_INT(cudaGraphLaunch(exec, stream), 0);
            CHECK_INT(lac_map_cuda_synchronize(gpu, stream), LAC_ERR_RANGE);
            dev_case_target(&g[c], &d[c], g1, raw2);
            if (memcmp(raw1, raw2, (size_t)d[c].n * lac_dtype_size(d[c].vt)) != 0)
                HARNESS_FAIL("graph replay over a bad bridge (path %d) changed T", c);
            cudaMemcpy((int32_t *)g[c].R + row2, &keep2, sizeof keep2, cudaMemcpyHostToDevice);
            CHECK_INT(cudaGraphLaunch(exec, stream), 0);
            CHECK_OK(gpu, lac_map_cuda_synchronize(gpu, stream));
            dev_case_target(&g[c], &d[c], start, raw2);
            if (memcmp(raw1, raw2, (size_t)d[c].n * lac_dtype_size(d[c].vt)) == 0)
                HARNESS_FAIL("graph replay after a faulty one (path %d) did not accumulate", c);
            cudaGraphExecDestroy(exec);
            cudaGraphDestroy(graph);
            free(start), free(g1), free(raw1), free(raw2), free(sums);
        }
        free(before), free(after), free(got), free(ref), free(got2);
    }
    /* Refused on the host, nothing queued. */
    lac_map_params det = lac_map_params_default();
    det.deterministic = 1;
    CHECK_INT(lac_map_cuda_async(gpu, &det, &g[0].as, &g[0].ar, NULL, &g[0].at, stream), LAC_ERR_UNSUPPORTED);
    lac_array host = lac_array_vector(d[0].S, LAC_FLOAT64, d[0].m);
    CHECK_INT(lac_map_cuda_async(gpu, &p[0], &host, &g[0].ar, NULL, &g[0].at, stream) < 0, 1);
    if (cpu) CHECK_INT(lac_map_cuda_async(cpu, &p[0], &g[0].as, &g[0].ar, NULL, &g[0].at, stream), LAC_ERR_UNSUPPORTED);
    for (int c = 0; c < 3; c++) {
        dev_case_free(&g[c]);
        case_free(&d[c]);
    }
    cudaStreamDestroy(stream);
}

/* A plan with its determinism switched off (lac_map_plan_set_deterministic):
 * its executes run the one-shot kernels over the plan's int32 copy of the
 * bridge (an int64 bridge here, freed after create), correct against the
 * reference from device and host memory, few and many targets; an execute
 * that asks for determinism is still bit-identical to the deterministic
 * one-shot call. */
TEST(plans_without_determinism_match_the_reference)
{
    for (int big = 0; big < 2; big++) {
        case_data d;
        int64_t n = big ? 300000 : 10000;
        case_make(&d, rows(1200000, 8) + 3, n, 1, LAC_FLOAT32, LAC_INT64, 1, big);
        void *hR = index_to_dtype(d.R, d.m, d.it), *R = NULL;
        lac_device_alloc(gpu, (size_t)d.m * 8, &R);
        lac_memcpy(gpu, R, LAC_MEM_DEVICE, hR, LAC_MEM_HOST, (size_t)d.m * 8);
        lac_array ar = lac_array_vector(R, LAC_INT64, d.m);
        ar.memory = LAC_MEM_DEVICE;
        lac_map_plan_t plan = NULL;
        CHECK_OK(gpu, lac_map_plan_create(gpu, &ar, n, &plan));
        lac_device_free(gpu, R);
        free(hR);
        CHECK_OK(gpu, lac_map_plan_set_deterministic(plan, 0));
        double *ref = malloc(sizeof(double) * (size_t)n), *got = malloc(sizeof(double) * (size_t)n);
        size_t bytes = (size_t)n * 4;
        unsigned char *det = malloc(bytes), *planned = malloc(bytes);
        for (int o = 0; o < 3; o++) {
            lac_map_params p = lac_map_params_default();
            p.op = o == 2 ? LAC_MAP_COUNT : LAC_MAP_SUM;
            p.accumulate = o == 1;
            reference(&d, &p, ref);
            for (int mem = 0; mem < 2; mem++) {
                lac_memory memory = mem ? LAC_MEM_HOST : LAC_MEM_DEVICE;
                size_t vs = 4;
                void *hS = to_dtype(d.S, d.m, d.vt), *hw = to_dtype(d.w, d.m, d.vt), *hT = to_dtype(d.T0, n, d.vt);
                void *S = hS, *w = hw, *T = hT;
                if (!mem) {
                    lac_device_alloc(gpu, (size_t)d.m * vs, &S);
                    lac_device_alloc(gpu, (size_t)d.m * vs, &w);
                    lac_device_alloc(gpu, bytes, &T);
                    lac_memcpy(gpu, S, LAC_MEM_DEVICE, hS, LAC_MEM_HOST, (size_t)d.m * vs);
                    lac_memcpy(gpu, w, LAC_MEM_DEVICE, hw, LAC_MEM_HOST, (size_t)d.m * vs);
                    lac_memcpy(gpu, T, LAC_MEM_DEVICE, hT, LAC_MEM_HOST, bytes);
                }
                lac_array as = lac_array_vector(S, d.vt, d.m), aw = lac_array_vector(w, d.vt, d.m), at = lac_array_vector(T, d.vt, n);
                as.memory = aw.memory = at.memory = memory;
                int st = lac_map_plan_execute(gpu, plan, &p, &as, &aw, &at);
                if (!mem) lac_memcpy(gpu, hT, LAC_MEM_HOST, T, LAC_MEM_DEVICE, bytes);
                for (int64_t k = 0; k < n; k++) got[k] = value_at(hT, d.vt, k);
                int64_t worst = -1;
                double e = st == LAC_SUCCESS ? compare(got, ref, n, &worst) : INFINITY;
                if (!(e <= (big ? 2e-3 : 1e-4)))
                    HARNESS_FAIL("plan without determinism, n %lld op %s acc %d %s: status %d (%s) err %g at %lld",
                                 (long long)n, lac_map_op_name(p.op), p.accumulate, mem ? "host" : "device", st,
                                 lac_last_error(gpu), e, (long long)worst);
                if (o == 0 && !mem) {   /* an execute asking for determinism: the deterministic call's bits */
                    lac_map_params q = p;
                    q.deterministic = 1;
                    lac_memcpy(gpu, T, LAC_MEM_DEVICE, to_dtype_keep(hT, d.T0, n, d.vt), LAC_MEM_HOST, bytes);
                    CHECK_OK(gpu, lac_map_plan_execute(gpu, plan, &q, &as, &aw, &at));
                    lac_memcpy(gpu, planned, LAC_MEM_HOST, T, LAC_MEM_DEVICE, bytes);
                    d.weighted = 1;
                    CHECK_OK(gpu, run_case(gpu, &d, &q, LAC_MEM_DEVICE, RUN_MAP, got, det));
                    if (memcmp(det, planned, bytes) != 0) HARNESS_FAIL("n %lld: a deterministic execute differs from lac_map's", (long long)n);
                }
                if (!mem) {
                    lac_device_free(gpu, S);
                    lac_device_free(gpu, w);
                    lac_device_free(gpu, T);
                }
                free(hS), free(hw), free(hT);
            }
        }
        CHECK_INT(lac_map_plan_set_deterministic(NULL, 0), LAC_ERR_ARGUMENT);
        lac_map_plan_destroy(&plan);
        free(ref), free(got), free(det), free(planned);
        case_free(&d);
    }
}

/* The float32 weighted MEAN of many targets in device memory (L2 pairs,
 * map_mean_pair.cu) against the reference and the general path
 * (LACUNA_MAP_CUDA_MEAN_MARK=0): uniform and skewed bridges (hot targets),
 * int32 and int64 bridges, empty targets, weights of 0 and -0.0 (a hit target
 * of 0 / 0), NaN values; a bad index names its row and leaves T as it was,
 * also in a stream-ordered call, and the next call is clean. */
TEST(many_target_weighted_means_through_l2_pairs)
{
    lac_ctx_t general = knob_ctx("MAP_CUDA_MEAN_MARK", "0");
    for (int skew = 0; skew < 2; skew++) {
        case_data d;
        const int64_t n = 200000 + (int64_t)(harness_rand_u64(&rng) % 64);
        case_make(&d, rows(4000000, 8) + 4 * (int64_t)(harness_rand_u64(&rng) % 1000) + skew, n, 1, LAC_FLOAT32,
                  skew ? LAC_INT64 : LAC_INT32, 1, skew);
        for (int64_t i = 0; i < d.m; i++) {
            if (d.R[i] % 113 == 7) d.R[i] = (d.R[i] + 1) % n;   /* empty targets */
            if (d.R[i] % 113 == 11) d.w[i] = 0.0;               /* 0 / 0 */
            if (d.R[i] % 113 == 13) d.w[i] = -0.0;              /* the same with -0.0: hit all the same */
            if (d.R[i] % 1009 == 17 && i % 3 == 0) d.S[i] = NAN;
        }
        lac_map_params p = sum_count_case(4, &d);
        double *ref = malloc(sizeof(double) * (size_t)n), *got = malloc(sizeof(double) * (size_t)n);
        reference(&d, &p, ref);
        int64_t empty = 0, nan_targets = 0;
        for (int64_t k = 0; k < n; k++) empty += ref[k] == -3.0, nan_targets += isnan(ref[k]);
        if (empty == 0 || nan_targets == 0) HARNESS_FAIL("case without empty (%lld) or NaN (%lld) targets", (long long)empty, (long long)nan_targets);
        for (int path = 0; path < 2; path++) {
            int st = run_case(path ? general : gpu, &d, &p, LAC_MEM_DEVICE, RUN_MAP, got, NULL);
            int64_t worst = -1;
            double e = st == LAC_SUCCESS ? compare(got, ref, n, &worst) : INFINITY;
            if (!(e <= 2e-3))
                HARNESS_FAIL("%s, skew %d (m %lld n %lld): status %d (%s) err %g at %lld: got %.9g want %.9g",
                             path ? "general path" : "L2 pairs", skew, (long long)d.m, (long long)n, st,
                             lac_last_error(gpu), e, (long long)worst, worst >= 0 ? got[worst] : 0.0,
                             worst >= 0 ? ref[worst] : 0.0);
        }
        /* A bad index: named, T untouched; then a clean call. */
        const int64_t row = d.m / 3 + 1, keep = d.R[row];
        d.R[row] = n + 2;
        char want[80];
        snprintf(want, sizeof want, "bridge[%lld] = %lld", (long long)row, (long long)(n + 2));
        check_rejected(&d, &p, LAC_MEM_DEVICE, RUN_MAP, LAC_ERR_RANGE, want, "L2 pairs bad index");
        /* the same, stream-ordered: reported at the synchronisation */
        cudaStream_t stream;
        CHECK_INT(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), 0);
        dev_case g;
        dev_case_make(&g, &d);
        size_t bytes = (size_t)n * lac_dtype_size(d.vt);
        unsigned char *before = malloc(bytes), *after = malloc(bytes);
        dev_case_target(&g, &d, got, before);
        CHECK_OK(gpu, lac_map_cuda_async(gpu, &p, &g.as, &g.ar, &g.aw, &g.at, stream));
        int st = lac_map_cuda_synchronize(gpu, stream);
        CHECK_INT(st, LAC_ERR_RANGE);
        if (!strstr(lac_last_error(gpu), want)) HARNESS_FAIL("async L2 pairs: '%s' does not name '%s'", lac_last_error(gpu), want);
        dev_case_target(&g, &d, got, after);
        if (memcmp(before, after, bytes) != 0) HARNESS_FAIL("async L2 pairs: T of the faulty call was changed");
        dev_case_free(&g);
        d.R[row] = keep;
        dev_case_make(&g, &d);
        CHECK_OK(gpu, lac_map_cuda_async(gpu, &p, &g.as, &g.ar, &g.aw, &g.at, stream));
        CHECK_OK(gpu, lac_map_cuda_synchronize(gpu, stream));
        dev_case_target(&g, &d, got, NULL);
        int64_t worst = -1;
        double e = compare(got, ref, n, &worst);
        if (!(e <= 2e-3)) HARNESS_FAIL("async L2 pairs, skew %d: err %g at %lld", skew, e, (long long)worst);
        dev_case_free(&g);
        CHECK_INT(cudaStreamDestroy(stream), 0);
        free(before), free(after);
        free(ref);
        free(got);
        case_free(&d);
    }
}

int main(void)
{
    map_test_seed();
    quick = map_test_quick();
    if (quick) printf("LACUNA_TEST_QUICK: a representative subset, fewer combinations and rows\n");
    lac_ctx_params cp = lac_ctx_params_default();
    cp.backend = LAC_BACKEND_CUDA;
    if (lac_ctx_create(&cp, &gpu) != LAC_SUCCESS) {
        printf("no CUDA context (%s): nothing to test here\n", lac_last_error(NULL));
        return 77;
    }
    cp.backend = LAC_BACKEND_CPU;
    if (lac_ctx_create(&cp, &cpu) != LAC_SUCCESS) cpu = NULL, cpu_answers = 0;
    RUN(every_op_dtype_layout_and_memory_matches_float64_reference);
    RUN(many_targets_cluster_and_hybrid_paths);
    RUN(hot_targets_of_a_skewed_bridge);
    RUN(nan_policies_and_empty_values);
    RUN(deterministic_is_bit_identical_and_equals_the_plan);
    RUN(bad_index_and_nan_name_the_first_position_and_leave_T);
    RUN(out_of_core_chunks_from_pageable_and_pinned_memory);
    RUN(empty_source_writes_empty_values);
    RUN(few_targets_single_launch_full_grid_and_alternating_faults);
    RUN(few_target_plans_are_bit_identical_across_runs_and_grids);
    RUN(one_few_target_plan_serves_unweighted_weighted_and_float64_calls);
    RUN(many_targets_partitioned_by_range);
    RUN(stream_ordered_calls_defer_faults_and_replay_in_graphs);
    RUN(many_target_weighted_means_through_l2_pairs);
    RUN(plans_without_determinism_match_the_reference);
    /* Deterministic calls and plans where the exact fixed point is off (or
     * declines a range too wide for its words): the plans' own fixed-order
     * executes, chunk-local and sorted (test_map_fixed_cuda.c tests the fixed point). */
    cp.backend = LAC_BACKEND_CUDA;
    cp.knobs = "MAP_CUDA_FIXED=0";
    lac_ctx_t fixed_point = gpu;
    if (lac_ctx_create(&cp, &gpu) == LAC_SUCCESS) {
        gpu_knobs = cp.knobs;
        RUN(deterministic_is_bit_identical_and_equals_the_plan);
        RUN(few_target_plans_are_bit_identical_across_runs_and_grids);
        RUN(one_few_target_plan_serves_unweighted_weighted_and_float64_calls);
        lac_ctx_destroy(&gpu);
    } else {
        HARNESS_FAIL("no context with MAP_CUDA_FIXED=0 (%s)", lac_last_error(NULL));
    }
    gpu = fixed_point;
    for (int i = 0; i < KNOB_CTXS; i++) lac_ctx_destroy(&knob_ctxs[i].ctx);
    lac_ctx_destroy(&gpu);
    lac_ctx_destroy(&cpu);
    return harness_finish();
}
