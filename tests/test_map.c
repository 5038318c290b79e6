/* map on the CPU backend: every op x value dtype x index dtype x weights x
 * columns x accumulate against a float64 reference loop written here; the
 * private-accumulator and the shared-atomic paths; deterministic results
 * bit-identical across thread counts and equal to plans; every bad input
 * rejected with the first offending position and T left byte for byte as it
 * was; m = 0; targets nothing maps to. */
#include "harness.h"
#include "lacuna/lacuna.h"
#include "map/cpu/map_cpu.h"   /* the CPU plan's layout, checked below */

#include <stdbool.h>
#include <stdint.h>

static lac_ctx_t ctx;        /* 2 threads */
static lac_ctx_t ctx_one;    /* 1 thread */

static lac_ctx_t make_ctx(int threads)
{
    lac_ctx_params p = lac_ctx_params_default();
    p.backend = LAC_BACKEND_CPU;
    p.threads = threads;
    lac_ctx_t c = NULL;
    if (lac_ctx_create(&p, &c) != LAC_SUCCESS) {
        printf("cannot create a %d-thread context: %s\n", threads, lac_last_error(NULL));
        exit(1);
    }
    return c;
}

/* ------------------------------------------------------------------------ */
/* Test data and the reference                                               */
/* ------------------------------------------------------------------------ */
typedef struct {
    int64_t m, n, b;
    lac_dtype vt, it;
    bool weighted;
    void *S, *R, *w;      /* in the call's dtypes */
    double *Sd, *wd;      /* the same values as doubles */
    int64_t *Rd;
} map_data;

static double value_at(const void *p, lac_dtype dt, int64_t k)
{
    return dt == LAC_FLOAT32 ? (double)((const float *)p)[k] : ((const double *)p)[k];
}

static void store(void *p, lac_dtype dt, int64_t k, double v)
{
    if (dt == LAC_FLOAT32) ((float *)p)[k] = (float)v;
    else ((double *)p)[k] = v;
}

/* Random data; `hot` of the rows go to target 0 (contention), and targets
 * above n_used get nothing (empty targets). */
static map_data data_make(int64_t m, int64_t n, int64_t b, lac_dtype vt, lac_dtype it, bool weighted, uint64_t seed)
{
    map_data d;
    memset(&d, 0, sizeof d);
    d.m = m, d.n = n, d.b = b, d.vt = vt, d.it = it, d.weighted = weighted;
    size_t vs = lac_dtype_size(vt);
    d.S = malloc((size_t)(m * b) * vs + 8);
    d.R = malloc((size_t)m * lac_dtype_size(it) + 8);
    d.w = weighted ? malloc((size_t)m * vs + 8) : NULL;
    d.Sd = malloc((size_t)(m * b) * sizeof(double) + 8);
    d.wd = malloc((size_t)m * sizeof(double) + 8);
    d.Rd = malloc((size_t)m * sizeof(int64_t) + 8);
    unsigned long long st = seed;
    int64_t n_used = n > 4 ? n - n / 4 : n;
    for (int64_t i = 0; i < m; i++) {
        int64_t r = harness_rand_uniform(&st) < 0.05 ? 0 : (int64_t)(harness_rand_uniform(&st) * (double)n_used);
        d.Rd[i] = r;
        if (it == LAC_INT32) ((int32_t *)d.R)[i] = (int32_t)r;
        else ((int64_t *)d.R)[i] = r;
        for (int64_t c = 0; c < b; c++) {
            store(d.S, vt, i * b + c, 4.0 * harness_rand_uniform(&st) - 2.0);
            d.Sd[i * b + c] = value_at(d.S, vt, i * b + c);
        }
        d.wd[i] = 1.0;
        if (weighted) {
            store(d.w, vt, i, 0.25 + harness_rand_uniform(&st));
            d.wd[i] = value_at(d.w, vt, i);
        }
    }
    return d;
}

static void data_free(map_data *d)
{
    free(d->S), free(d->R), free(d->w), free(d->Sd), free(d->wd), free(d->Rd);
    memset(d, 0, sizeof *d);
}

static void set_source(map_data *d, int64_t k, double v)
{
    store(d->S, d->vt, k, v);
    d->Sd[k] = value_at(d->S, d->vt, k);
}

static void set_bridge(map_data *d, int64_t i, int64_t r)
{
    d->Rd[i] = r;
    if (d->it == LAC_INT32) ((int32_t *)d->R)[i] = (int32_t)r;
    else ((int64_t *)d->R)[i] = r;
}

static lac_array source_array(const map_data *d)
{
    return d->b > 1 ? lac_array_matrix(d->S, d->vt, d->m, d->b) : lac_array_vector(d->S, d->vt, d->m);
}

static lac_array target_array(const map_data *d, void *T)
{
    return d->b > 1 ? lac_array_matrix(T, d->vt, d->n, d->b) : lac_array_vector(T, d->vt, d->n);
}

/* The specification of lacuna.h as a plain float64 loop over the rows in
 * order. T holds the old values (accumulate) and receives the result as
 * doubles in ref; scale[k] = sum of |x| of target k (for tolerances). */
static void reference_map(const map_data *d, const lac_map_params *p, const void *T_old, double *ref, double *scale)
{
    int64_t nt = d->n * d->b;
    double *acc = malloc((size_t)nt * sizeof *acc + 8), *wsum = malloc((size_t)nt * sizeof *wsum + 8);
    char *seen = calloc((size_t)nt + 1, 1);
    for (int64_t k = 0; k < nt; k++) {
        acc[k] = p->op == LAC_MAP_MIN ? INFINITY : p->op == LAC_MAP_MAX ? -INFINITY : 0.0;
        wsum[k] = 0;
        scale[k] = 0;
    }
    for (int64_t i = 0; i < d->m; i++) {
        double wi = d->weighted ? d->wd[i] : 1.0;
        for (int64_t c = 0; c < d->b; c++) {
            double s = d->Sd[i * d->b + c];
            if (p->nan_policy == LAC_NAN_SKIP && (isnan(s) || isnan(wi))) continue;
            double x = p->op == LAC_MAP_COUNT ? wi : wi * s;
            int64_t k = d->Rd[i] * d->b + c;
            if (p->op == LAC_MAP_MIN) {
                if (isnan(x) || x < acc[k]) acc[k] = x;
            } else if (p->op == LAC_MAP_MAX) {
                if (isnan(x) || x > acc[k]) acc[k] = x;
            } else {
                acc[k] += x;
            }
            wsum[k] += wi;
            scale[k] += fabs(x);
            seen[k] = 1;
        }
    }
    for (int64_t k = 0; k < nt; k++) {
        if (p->accumulate) {
            double old = value_at(T_old, d->vt, k);
            if (p->op == LAC_MAP_MIN) ref[k] = (isnan(acc[k]) || acc[k] < old) ? acc[k] : old;
            else if (p->op == LAC_MAP_MAX) ref[k] = (isnan(acc[k]) || acc[k] > old) ? acc[k] : old;
            else ref[k] = old + acc[k];
            scale[k] += fabs(old);
        } else if (!seen[k]) {
            ref[k] = p->empty_value;
        } else {
            ref[k] = p->op == LAC_MAP_MEAN ? acc[k] / wsum[k] : acc[k];
        }
    }
    free(acc), free(wsum), free(seen);
}

/* Compares T with the reference; returns the number of differing elements
 * (and prints the first few). Sums are compared with a tolerance that grows
 * with the magnitude of what was added; MIN/MAX must be exact. */
static int compare(const map_data *d, const lac_map_params *p, const void *T, const double *ref, const double *scale,
                   const char *label)
{
    double eps = d->vt == LAC_FLOAT32 ? 1e-5 : 1e-12;
    int bad = 0;
    for (int64_t k = 0; k < d->n * d->b; k++) {
        double got = value_at(T, d->vt, k);
        double want = value_at(&(double){ref[k]}, LAC_FLOAT64, 0);
        if (d->vt == LAC_FLOAT32) want = (double)(float)want;
        double tol = (p->op == LAC_MAP_MIN || p->op == LAC_MAP_MAX) ? 0.0 : eps * (1.0 + scale[k]);
        bool ok = (isnan(got) && isnan(want)) || fabs(got - want) <= tol;
        if (!ok && bad++ < 3)
            HARNESS_FAIL("%s: T[%lld] = %.17g, reference %.17g (tol %g)", label, (long long)k, got, want, tol);
    }
    return bad;
}

static void *target_filled(const map_data *d, double value)
{
    void *T = malloc((size_t)(d->n * d->b) * lac_dtype_size(d->vt) + 8);
    for (int64_t k = 0; k < d->n * d->b; k++) store(T, d->vt, k, value + 0.001 * (double)(k % 7));
    return T;
}

/* ------------------------------------------------------------------------ */
/* The matrix of cases                                                       */
/* ------------------------------------------------------------------------ */
static void run_matrix(lac_ctx_t c, int64_t m, int64_t n, const char *path_name)
{
    static const lac_dtype vts[] = {LAC_FLOAT32, LAC_FLOAT64};
    static const lac_dtype its[] = {LAC_INT32, LAC_INT64};
    static const int64_t bs[] = {1, 3};
    uint64_t seed = 1;
    for (int iv = 0; iv < 2; iv++)
        for (int ii = 0; ii < 2; ii++)
            for (int weighted = 0; weighted < 2; weighted++)
                for (int ib = 0; ib < 2; ib++) {
                    map_data d = data_make(bs[ib] > 1 ? m / 3 : m, n, bs[ib], vts[iv], its[ii], weighted, seed++);
                    lac_array S = source_array(&d), R = lac_array_vector(d.R, d.it, d.m);
                    lac_array W = lac_array_vector(d.w, d.vt, d.m);
                    double *ref = malloc((size_t)(n * d.b) * sizeof *ref), *scale = malloc((size_t)(n * d.b) * sizeof *scale);
                    for (int op = LAC_MAP_SUM; op <= LAC_MAP_COUNT; op++)
                        for (int accumulate = 0; accumulate < 2; accumulate++)
                            for (int det = 0; det < 2; det++) {
                                if (op == LAC_MAP_MEAN && accumulate) continue;
                                lac_map_params p = lac_map_params_default();
                                p.op = (lac_map_op)op;
                                p.accumulate = accumulate;
                                p.deterministic = det;
                                p.empty_value = -3.5;
                                void *T = target_filled(&d, 0.5);
                                lac_array TA = target_array(&d, T);
                                reference_map(&d, &p, T, ref, scale);
                                char label[200];
                                snprintf(label, sizeof label, "%s %s %s %s weights=%d b=%lld accumulate=%d det=%d", path_name,
                                         lac_map_op_name(p.op), lac_dtype_name(d.vt), lac_dtype_name(d.it), weighted,
                                         (long long)d.b, accumulate, det);
                                lac_status st = lac_map(c, &p, &S, &R, weighted ? &W : NULL, &TA);
                                if (st != LAC_SUCCESS) HARNESS_FAIL("%s: status %d (%s)", label, st, lac_last_error(c));
                                else compare(&d, &p, T, ref, scale, label);
                                free(T);
                            }
                    free(ref), free(scale);
                    data_free(&d);
                }
}

/* Many sources per target: each thread keeps private accumulators. */
TEST(every_case_matches_reference_private_path) { run_matrix(ctx, 36000, 300, "private"); }

/* Past 1 MB of float64 accumulators with private copies: float32 sources'
 * weighted and b-column sums take float32 accumulators unless deterministic
 * (b = 3 rows are m / 3, so both widths keep private copies). */
TEST(every_case_matches_reference_float32_private_path) { run_matrix(ctx, 300000, 140000, "float32 private"); }

/* Far more targets than sources: shared scratch with atomics. */
TEST(every_case_matches_reference_atomic_path) { run_matrix(ctx, 36000, 100000, "atomic"); }

/* Below the parallel threshold, and one thread. */
TEST(every_case_matches_reference_serial_path)
{
    run_matrix(ctx, 300, 40, "small");
    run_matrix(ctx_one, 20000, 500, "one-thread");
}

/* The float32 SUM fast path over many targets adds in float32 (private and
 * atomic); check both index dtypes and both paths against the reference. */
TEST(float32_sum_over_many_targets)
{
    static const int64_t sizes[][2] = {{80000, 150000}, {40000, 150000}};   /* private, atomic */
    lac_ctx_t cs[2] = {ctx, ctx_one};
    for (int is = 0; is < 2; is++)
        for (int ii = 0; ii < 2; ii++)
            for (int ic = 0; ic < 2; ic++) {
                map_data d = data_make(sizes[is][0], sizes[is][1], 1, LAC_FLOAT32, ii ? LAC_INT64 : LAC_INT32, false, 31 + (uint64_t)is);
                lac_array S = source_array(&d), R = lac_array_vector(d.R, d.it, d.m);
                double *ref = malloc((size_t)d.n * sizeof *ref), *scale = malloc((size_t)d.n * sizeof *scale);
                for (int accumulate = 0; accumulate < 2; accumulate++) {
                    lac_map_params p = lac_map_params_default();
                    p.accumulate = accumulate;
                    void *T = target_filled(&d, 1.0);
                    lac_array TA = target_array(&d, T);
                    reference_map(&d, &p, T, ref, scale);
                    CHECK_OK(cs[ic], lac_map(cs[ic], &p, &S, &R, NULL, &TA));
                    char label[120];
                    snprintf(label, sizeof label, "m=%lld n=%lld %s threads=%d accumulate=%d", (long long)d.m, (long long)d.n,
                             lac_dtype_name(d.it), lac_ctx_threads(cs[ic]), accumulate);
                    compare(&d, &p, T, ref, scale, label);
                    free(T);
                }
                free(ref), free(scale);
                data_free(&d);
            }
}

/* ------------------------------------------------------------------------ */
/* NaN policies                                                              */
/* ------------------------------------------------------------------------ */
TEST(nan_propagate_and_skip_follow_the_reference)
{
    for (int weighted = 0; weighted < 2; weighted++)
        for (int iv = 0; iv < 2; iv++) {
            lac_dtype vt = iv ? LAC_FLOAT64 : LAC_FLOAT32;
            map_data d = data_make(20000, 300, 2, vt, LAC_INT32, weighted, 77 + (uint64_t)iv);
            for (int64_t k = 5; k < d.m * d.b; k += 997) set_source(&d, k, NAN);
            if (weighted)
                for (int64_t i = 11; i < d.m; i += 1409) {
                    store(d.w, vt, i, NAN);
                    d.wd[i] = NAN;
                }
            lac_array S = source_array(&d), R = lac_array_vector(d.R, d.it, d.m), W = lac_array_vector(d.w, vt, d.m);
            double *ref = malloc((size_t)(d.n * d.b) * sizeof *ref), *scale = malloc((size_t)(d.n * d.b) * sizeof *scale);
            for (int policy = LAC_NAN_PROPAGATE; policy <= LAC_NAN_SKIP; policy++)
                for (int op = LAC_MAP_SUM; op <= LAC_MAP_COUNT; op++)
                    for (int det = 0; det < 2; det++) {
                        lac_map_params p = lac_map_params_default();
                        p.op = (lac_map_op)op;
                        p.nan_policy = (lac_nan_policy)policy;
                        p.deterministic = det;
                        void *T = target_filled(&d, 0);
                        lac_array TA = target_array(&d, T);
                        reference_map(&d, &p, T, ref, scale);
                        char label[160];
                        snprintf(label, sizeof label, "nan %s %s %s weights=%d det=%d",
                                 policy == LAC_NAN_SKIP ? "skip" : "propagate", lac_map_op_name(p.op), lac_dtype_name(vt),
                                 weighted, det);
                        lac_status st = lac_map(ctx, &p, &S, &R, weighted ? &W : NULL, &TA);
                        if (st != LAC_SUCCESS) HARNESS_FAIL("%s: status %d (%s)", label, st, lac_last_error(ctx));
                        else compare(&d, &p, T, ref, scale, label);
                        /* Propagation must really make NaN targets (but COUNT
                         * without weights, which ignores S). */
                        if (policy == LAC_NAN_PROPAGATE && (op != LAC_MAP_COUNT || weighted)) {
                            int nans = 0;
                            for (int64_t k = 0; k < d.n * d.b; k++) nans += isnan(value_at(T, vt, k));
                            if (nans == 0) HARNESS_FAIL("%s: no NaN target", label);
                        }
                        free(T);
                    }
            free(ref), free(scale);
            data_free(&d);
        }
}

/* ------------------------------------------------------------------------ */
/* Determinism and plans                                                     */
/* ------------------------------------------------------------------------ */
/* Deterministic calls fold fixed row blocks and merge them in block order:
 * T must be the same bytes for 1, 2, 3 and 4 threads and for a plan execute
 * with the same parameters, and within rounding of the float64 reference loop.
 * The shapes take every deterministic route: float64 accumulators, the
 * float32 SUM fast path onto > 128k targets, b columns, weights, int64
 * bridges, a call too small to split (one block), and far more targets than
 * rows (the streaming pass of map_det_cpu.c). */
TEST(deterministic_is_bit_identical_across_threads_and_equals_plans)
{
    static const int thread_counts[] = {1, 2, 3, 4};
    static const struct {
        int64_t m, n, b;
        lac_dtype vt, it;
        bool weighted, nans;
    } shapes[] = {
        {40000, 3000, 1, LAC_FLOAT32, LAC_INT32, false, false},
        {40000, 3000, 1, LAC_FLOAT32, LAC_INT64, true, false},
        {20000, 700, 2, LAC_FLOAT64, LAC_INT32, true, true},
        {20000, 700, 3, LAC_FLOAT64, LAC_INT64, false, false},
        {200000, 132000, 1, LAC_FLOAT32, LAC_INT32, false, false},
        {9000, 500, 1, LAC_FLOAT32, LAC_INT64, true, false},
        {40000, 30000, 1, LAC_FLOAT64, LAC_INT32, true, false},
    };
    lac_ctx_t ctxs[4];
    for (int t = 0; t < 4; t++) ctxs[t] = make_ctx(thread_counts[t]);
    for (size_t is = 0; is < sizeof shapes / sizeof shapes[0]; is++) {
        map_data d = data_make(shapes[is].m, shapes[is].n, shapes[is].b, shapes[is].vt, shapes[is].it,
                               shapes[is].weighted, 1234 + (uint64_t)is);
        if (shapes[is].nans)
            for (int64_t k = 7; k < d.m * d.b; k += 1201) set_source(&d, k, NAN);
        lac_dtype vt = d.vt;
        lac_array S = source_array(&d), R = lac_array_vector(d.R, d.it, d.m), W = lac_array_vector(d.w, vt, d.m);
        const lac_array *Wp = d.weighted ? &W : NULL;
        size_t bytes = (size_t)(d.n * d.b) * lac_dtype_size(vt);
        double *ref = malloc((size_t)(d.n * d.b) * sizeof *ref), *scale = malloc((size_t)(d.n * d.b) * sizeof *scale);
        lac_map_plan_t plans[4] = {NULL, NULL, NULL, NULL};
        for (int t = 0; t < 4; t++) {
            CHECK_OK(ctxs[t], lac_map_plan_create(ctxs[t], &R, d.n, &plans[t]));
            CHECK_INT(lac_map_plan_num_sources(plans[t]), d.m);
            CHECK_INT(lac_map_plan_num_targets(plans[t]), d.n);
        }
        for (int op = LAC_MAP_SUM; op <= LAC_MAP_COUNT; op++)
            for (int accumulate = 0; accumulate < 2; accumulate++)
                for (int policy = LAC_NAN_PROPAGATE; policy <= LAC_NAN_ERROR; policy++) {
                    if ((op == LAC_MAP_MEAN && accumulate) || (shapes[is].nans && policy == LAC_NAN_ERROR)) continue;
                    /* Keep it quick: the fast path is SUM's; accumulate and
                     * "error" change the kernels of SUM and MEAN only. */
                    if (d.n > 100000 && op != LAC_MAP_SUM) continue;
                    if ((accumulate || policy != LAC_NAN_PROPAGATE) && op != LAC_MAP_SUM && op != LAC_MAP_MEAN) continue;
                    lac_map_params p = lac_map_params_default();
                    p.op = (lac_map_op)op;
                    p.accumulate = accumulate;
                    p.nan_policy = (lac_nan_policy)policy;
                    /* Empty targets 0 (no flags: SUM merges with merge_sums) or not. */
                    p.empty_value = policy == LAC_NAN_PROPAGATE ? 0.0 : -2.5;
                    p.deterministic = 1;
                    char label[200];
                    snprintf(label, sizeof label, "m=%lld n=%lld b=%lld %s %s weights=%d %s accumulate=%d nan=%d",
                             (long long)d.m, (long long)d.n, (long long)d.b, lac_dtype_name(vt), lac_dtype_name(d.it),
                             d.weighted, lac_map_op_name(p.op), accumulate, policy);
                    void *first = NULL;
                    for (int t = 0; t < 4; t++) {
                        void *T = target_filled(&d, 9), *TP = target_filled(&d, 9);
                        lac_array TA = target_array(&d, T), TPA = target_array(&d, TP);
                        CHECK_OK(ctxs[t], lac_map(ctxs[t], &p, &S, &R, Wp, &TA));
                        lac_map_params pp = p;
                        pp.deterministic = 0;   /* implied by the plan */
                        CHECK_OK(ctxs[t], lac_map_plan_execute(ctxs[t], plans[t], &pp, &S, Wp, &TPA));
                        if (memcmp(T, TP, bytes) != 0)
                            HARNESS_FAIL("%s threads=%d: plan differs from the one-shot call", label, thread_counts[t]);
                        if (!first) {
                            first = T;
                            void *old = target_filled(&d, 9);
                            reference_map(&d, &p, old, ref, scale);
                            free(old);
                            compare(&d, &p, T, ref, scale, label);
                        } else {
                            if (memcmp(first, T, bytes) != 0)
                                HARNESS_FAIL("%s: %d threads differ from 1 thread", label, thread_counts[t]);
                            free(T);
                        }
                        free(TP);
                    }
                    /* And from run to run. */
                    void *again = target_filled(&d, 9);
                    lac_array AA = target_array(&d, again);
                    CHECK_OK(ctxs[1], lac_map(ctxs[1], &p, &S, &R, Wp, &AA));
                    if (memcmp(first, again, bytes) != 0) HARNESS_FAIL("%s: a second run differs", label);
                    free(again);
                    free(first);
                }
        for (int t = 0; t < 4; t++) lac_map_plan_destroy(&plans[t]);
        free(ref), free(scale);
        data_free(&d);
    }
    for (int t = 0; t < 4; t++) lac_ctx_destroy(&ctxs[t]);
}

/* Fewer targets than threads, and every row on one target (one segment). */
TEST(deterministic_with_few_targets)
{
    lac_ctx_t seven = make_ctx(7);
    for (int64_t n = 1; n <= 3; n += 2) {
        map_data d = data_make(50000, n, 1, LAC_FLOAT32, LAC_INT32, true, 4242 + (uint64_t)n);
        lac_array S = source_array(&d), R = lac_array_vector(d.R, d.it, d.m), W = lac_array_vector(d.w, d.vt, d.m);
        lac_map_params p = lac_map_params_default();
        p.deterministic = 1;
        float T1[3], T7[3];
        lac_array A1 = lac_array_vector(T1, LAC_FLOAT32, n), A7 = lac_array_vector(T7, LAC_FLOAT32, n);
        CHECK_OK(ctx_one, lac_map(ctx_one, &p, &S, &R, &W, &A1));
        CHECK_OK(seven, lac_map(seven, &p, &S, &R, &W, &A7));
        CHECK(memcmp(T1, T7, (size_t)n * sizeof(float)) == 0);
        double ref[3], scale[3];
        reference_map(&d, &p, T1, ref, scale);
        for (int64_t j = 0; j < n; j++)
            if (T7[j] != (float)ref[j]) HARNESS_FAIL("n=%lld: T[%lld] = %.9g, reference loop %.9g", (long long)n, (long long)j, T7[j], (float)ref[j]);
        data_free(&d);
    }
    lac_ctx_destroy(&seven);
}

/* The CPU plan's layout (map/cpu/map_cpu.h): a host copy of the bridge, equal to R
 * entry by entry, in the narrowest encoding that holds n (2 bytes up to 65536
 * targets, 3 up to 2^24, then int32) whatever R's index type, for 1 and 2
 * threads. Its executes equal the deterministic one-shot call bit for bit,
 * also under nan policy "error" (which the plan runs as a NaN scan then a
 * "propagate" pass). */
static int64_t kept_entry(const lac_map_cpu_plan *kept, int64_t i)
{
    const uint8_t *e = (const uint8_t *)kept->bridge + 3 * i;
    if (kept->bridge_dtype == LAC_MAP_INDEX_U16) return ((const uint16_t *)kept->bridge)[i];
    if (kept->bridge_dtype == LAC_MAP_INDEX_U24) return (int64_t)e[0] | (int64_t)e[1] << 8 | (int64_t)e[2] << 16;
    if (kept->bridge_dtype == LAC_INT32) return ((const int32_t *)kept->bridge)[i];
    return ((const int64_t *)kept->bridge)[i];
}

TEST(plan_keeps_a_narrow_copy_of_the_bridge)
{
    static const struct {
        int64_t n;
        lac_dtype kept;
        bool execute;   /* the last one only builds (16M targets) */
    } cases[] = {{700, LAC_MAP_INDEX_U16, true},
                 {65536, LAC_MAP_INDEX_U16, true},
                 {100000, LAC_MAP_INDEX_U24, true},
                 {(1 << 24) + 1, LAC_INT32, false}};
    lac_ctx_t cs[2] = {ctx_one, ctx};
    for (size_t in = 0; in < sizeof cases / sizeof cases[0]; in++)
        for (int ic = 0; ic < 2; ic++) {
            map_data d = data_make(50000, cases[in].n, 1, LAC_FLOAT32, ic ? LAC_INT64 : LAC_INT32, false, 606 + (uint64_t)in);
            /* The largest target in the bridge, so that every byte is used. */
            set_bridge(&d, 4321, d.n - 1);
            lac_array S = source_array(&d), R = lac_array_vector(d.R, d.it, d.m);
            lac_map_plan_t plan = NULL;
            CHECK_OK(cs[ic], lac_map_plan_create(cs[ic], &R, d.n, &plan));
            if (!plan) {
                data_free(&d);
                continue;
            }
            const lac_map_cpu_plan *kept = plan->state;
            CHECK(plan->table == &lac_map_cpu_backend);
            CHECK(kept != NULL && kept->bridge != NULL);
            CHECK_INT(kept ? (int)kept->bridge_dtype : -1, (int)cases[in].kept);
            int bad = 0;
            for (int64_t i = 0; i < d.m && kept && kept->bridge && kept->bridge_dtype == cases[in].kept; i++) {
                int64_t got = kept_entry(kept, i);
                if (got != d.Rd[i] && bad++ < 3)
                    HARNESS_FAIL("n=%lld %s bridge, threads=%d: copy[%lld] = %lld, bridge %lld", (long long)d.n,
                                 lac_dtype_name(d.it), lac_ctx_threads(cs[ic]), (long long)i, (long long)got,
                                 (long long)d.Rd[i]);
            }
            if (!cases[in].execute) {
                lac_map_plan_destroy(&plan);
                data_free(&d);
                continue;
            }
            size_t bytes = (size_t)d.n * sizeof(float);
            for (int policy = LAC_NAN_PROPAGATE; policy <= LAC_NAN_ERROR; policy += LAC_NAN_ERROR) {
                lac_map_params p = lac_map_params_default();
                p.deterministic = 1;
                p.nan_policy = (lac_nan_policy)policy;
                void *T = target_filled(&d, 3), *TP = target_filled(&d, 4);
                lac_array TA = target_array(&d, T), TPA = target_array(&d, TP);
                CHECK_OK(cs[ic], lac_map(cs[ic], &p, &S, &R, NULL, &TA));
                CHECK_OK(cs[ic], lac_map_plan_execute(cs[ic], plan, &p, &S, NULL, &TPA));
                if (memcmp(T, TP, bytes) != 0)
                    HARNESS_FAIL("n=%lld %s bridge, threads=%d, nan policy %d: plan differs from one-shot deterministic",
                                 (long long)d.n, lac_dtype_name(d.it), lac_ctx_threads(cs[ic]), policy);
                free(T), free(TP);
            }
            lac_map_plan_destroy(&plan);
            data_free(&d);
        }
}

/* A skewed bridge (most rows onto a few hundred scattered targets, past
 * 2^18 targets, 90% of the rows onto 1000): the CPU plan renumbers the targets by descending row count
 * (map_cpu.h: order). Checked: order is a permutation sorted by count, each
 * copy entry is the slot of its row's target, and every execute equals the
 * deterministic one-shot call bit for bit (sum, weighted sum, mean, max into
 * T, 3 columns, float64, nan policy "error" naming the one-shot call's
 * position, 1 and 2 threads), also when the shape sends a deterministic call
 * to the streaming pass (m < 1.5 n); with determinism off it matches the
 * reference. A spread bridge of as many targets keeps target ids in 4 bytes. */
static void skew_bridge(map_data *d, uint64_t seed)
{
    unsigned long long st = seed;
    for (int64_t i = 0; i < d->m; i++) {
        double u = harness_rand_uniform(&st);
        int64_t r = u < 0.9 ? ((int64_t)(u / 0.9 * 1000.0) * 7919) % d->n : (int64_t)(harness_rand_uniform(&st) * (double)d->n);
        set_bridge(d, i, r);
    }
}

TEST(plan_renumbers_targets_of_a_skewed_bridge)
{
    static const struct {
        int64_t m, n, b;
        lac_dtype vt;
        bool weighted, skewed;
    } cases[] = {{800000, 400000, 1, LAC_FLOAT32, false, true}, {800000, 400000, 1, LAC_FLOAT64, true, true},
                 {800000, 400000, 3, LAC_FLOAT32, false, true}, {560000, 400000, 1, LAC_FLOAT32, false, true},
                 {800000, 400000, 1, LAC_FLOAT32, false, false}};
    static const lac_map_op ops[] = {LAC_MAP_SUM, LAC_MAP_MEAN, LAC_MAP_MAX};
    lac_ctx_t cs[2] = {ctx_one, ctx};
    for (size_t ic = 0; ic < sizeof cases / sizeof cases[0]; ic++) {
        map_data d = data_make(cases[ic].m, cases[ic].n, cases[ic].b, cases[ic].vt, LAC_INT32, cases[ic].weighted,
                               808 + (uint64_t)ic);
        if (cases[ic].skewed) skew_bridge(&d, 909 + (uint64_t)ic);
        lac_array S = source_array(&d), R = lac_array_vector(d.R, d.it, d.m);
        lac_array W = lac_array_vector(d.w, d.vt, d.m);
        const lac_array *Wp = d.weighted ? &W : NULL;
        for (int t = 0; t < 2; t++) {
            lac_map_plan_t plan = NULL;
            CHECK_OK(cs[t], lac_map_plan_create(cs[t], &R, d.n, &plan));
            if (!plan) continue;
            const lac_map_cpu_plan *kept = plan->state;
            CHECK(cases[ic].skewed == (kept->order != NULL));
            if (!kept->order) CHECK_INT((int)kept->bridge_dtype, (int)LAC_INT32);
            if (kept->order) {
                int64_t *count = calloc((size_t)d.n, sizeof *count);
                char *seen = calloc((size_t)d.n, 1);
                for (int64_t i = 0; i < d.m; i++) count[d.Rd[i]]++;
                int bad = 0;
                for (int64_t s = 0; s < d.n && bad < 3; s++) {
                    int32_t r = kept->order[s];
                    if (r < 0 || r >= d.n || seen[r]) {
                        bad++;
                        HARNESS_FAIL("order[%lld] = %d repeats or is out of range", (long long)s, r);
                        continue;
                    }
                    seen[r] = 1;
                    if (s > 0 && count[kept->order[s - 1]] < count[r]) {
                        bad++;
                        HARNESS_FAIL("order[%lld] has %lld rows, more than the slot before", (long long)s, (long long)count[r]);
                    }
                }
                for (int64_t i = 0; i < d.m && bad < 3; i++)
                    if (kept->order[kept_entry(kept, i)] != d.Rd[i]) {
                        bad++;
                        HARNESS_FAIL("copy[%lld] names slot %lld, not the slot of target %lld", (long long)i,
                                     (long long)kept_entry(kept, i), (long long)d.Rd[i]);
                    }
                free(count), free(seen);
            }
            size_t bytes = (size_t)(d.n * d.b) * lac_dtype_size(d.vt);
            for (size_t io = 0; io < sizeof ops / sizeof ops[0]; io++)
                for (int policy = LAC_NAN_PROPAGATE; policy <= LAC_NAN_ERROR; policy += LAC_NAN_ERROR) {
                    lac_map_params p = lac_map_params_default();
                    p.op = ops[io];
                    p.deterministic = 1;
                    p.accumulate = ops[io] == LAC_MAP_MAX;
                    p.nan_policy = (lac_nan_policy)policy;
                    void *T = target_filled(&d, 3), *TP = target_filled(&d, 3);
                    lac_array TA = target_array(&d, T), TPA = target_array(&d, TP);
                    CHECK_OK(cs[t], lac_map(cs[t], &p, &S, &R, Wp, &TA));
                    CHECK_OK(cs[t], lac_map_plan_execute(cs[t], plan, &p, &S, Wp, &TPA));
                    if (memcmp(T, TP, bytes) != 0)
                        HARNESS_FAIL("case %zu, op %s, threads %d, nan policy %d: plan differs from one-shot deterministic",
                                     ic, lac_map_op_name(ops[io]), t + 1, policy);
                    free(T), free(TP);
                }
            /* Without determinism: the reference. */
            lac_map_plan_set_deterministic(plan, 0);
            lac_map_params p = lac_map_params_default();
            void *T = target_filled(&d, 0);
            double *ref = malloc((size_t)(d.n * d.b) * sizeof *ref), *scale = malloc((size_t)(d.n * d.b) * sizeof *scale);
            lac_array TA = target_array(&d, T);
            CHECK_OK(cs[t], lac_map_plan_execute(cs[t], plan, &p, &S, Wp, &TA));
            reference_map(&d, &p, T, ref, scale);
            compare(&d, &p, T, ref, scale, "plan without determinism");
            /* A NaN: the same error and position as the one-shot call. */
            p.deterministic = 1;
            p.nan_policy = LAC_NAN_ERROR;
            set_source(&d, 123457 * d.b, NAN);
            char want[256];
            lac_status st = lac_map(cs[t], &p, &S, &R, Wp, &TA);
            snprintf(want, sizeof want, "%s", lac_last_error(cs[t]));
            CHECK_STATUS(cs[t], lac_map_plan_execute(cs[t], plan, &p, &S, Wp, &TA), st);
            CHECK(strcmp(want, lac_last_error(cs[t])) == 0);
            set_source(&d, 123457 * d.b, 1.0);
            free(T), free(ref), free(scale);
            lac_map_plan_destroy(&plan);
        }
        data_free(&d);
    }
}

TEST(plan_matches_one_shot_and_is_reusable)
{
    map_data d = data_make(70000, 2000, 1, LAC_FLOAT32, LAC_INT32, false, 99);
    lac_array S = source_array(&d), R = lac_array_vector(d.R, d.it, d.m);
    lac_map_plan_t plan = NULL;
    CHECK_OK(ctx, lac_map_plan_create(ctx, &R, d.n, &plan));
    /* The plan keeps its own copy: the bridge may change afterwards. */
    map_data other = data_make(70000, 2000, 1, LAC_FLOAT32, LAC_INT32, false, 99);
    memset(d.R, 0, (size_t)d.m * sizeof(int32_t));
    double *ref = malloc((size_t)d.n * sizeof *ref), *scale = malloc((size_t)d.n * sizeof *scale);
    for (int run = 0; run < 3; run++) {
        for (int64_t i = 0; i < d.m; i++) set_source(&other, i, (double)run - harness_rand_uniform(&(unsigned long long){(unsigned long long)i}));
        lac_array S2 = source_array(&other);
        lac_map_params p = lac_map_params_default();
        void *T = target_filled(&other, 0), *T1 = target_filled(&other, 0);
        lac_array TA = target_array(&other, T), T1A = target_array(&other, T1);
        lac_array R2 = lac_array_vector(other.R, other.it, other.m);
        CHECK_OK(ctx, lac_map_plan_execute(ctx, plan, &p, &S2, NULL, &TA));
        CHECK_OK(ctx, lac_map(ctx, &p, &S2, &R2, NULL, &T1A));
        reference_map(&other, &p, T, ref, scale);
        compare(&other, &p, T, ref, scale, "plan");
        compare(&other, &p, T1, ref, scale, "one-shot");
        free(T), free(T1);
    }
    (void)S;
    /* Shapes must agree with the plan. */
    lac_map_params p = lac_map_params_default();
    float small[10], Tsmall[2000];
    lac_array Sbad = lac_array_vector(small, LAC_FLOAT32, 10), Tok = lac_array_vector(Tsmall, LAC_FLOAT32, 2000);
    CHECK_STATUS(ctx, lac_map_plan_execute(ctx, plan, &p, &Sbad, NULL, &Tok), LAC_ERR_SHAPE);
    lac_map_plan_destroy(&plan);
    lac_map_plan_destroy(&plan);   /* NULL is fine */
    free(ref), free(scale);
    data_free(&d);
    data_free(&other);
}

/* ------------------------------------------------------------------------ */
/* Bad input: status, message, T untouched                                   */
/* ------------------------------------------------------------------------ */
#define POISON 0x5Au

static void *poisoned(size_t bytes)
{
    void *T = malloc(bytes);
    memset(T, POISON, bytes);
    return T;
}

static int untouched(const void *T, size_t bytes)
{
    for (size_t k = 0; k < bytes; k++)
        if (((const unsigned char *)T)[k] != POISON) return 0;
    return 1;
}

/* Runs lac_map (one-shot, det and not; 1 and 2 threads) and expects status and
 * message, with T untouched. */
static void expect_rejected(const map_data *d, const lac_map_params *base, lac_status want, const char *message)
{
    lac_ctx_t cs[2] = {ctx_one, ctx};
    for (int ic = 0; ic < 2; ic++)
        for (int det = 0; det < 2; det++) {
            lac_map_params p = *base;
            p.deterministic = det;
            size_t bytes = (size_t)(d->n * d->b) * lac_dtype_size(d->vt);
            void *T = poisoned(bytes);
            lac_array S = source_array(d), R = lac_array_vector(d->R, d->it, d->m), W = lac_array_vector(d->w, d->vt, d->m);
            lac_array TA = target_array(d, T);
            lac_status st = lac_map(cs[ic], &p, &S, &R, d->w ? &W : NULL, &TA);
            if (st != want) HARNESS_FAIL("det=%d threads=%d: status %d, expected %d (%s)", det, lac_ctx_threads(cs[ic]), st, want,
                                         lac_last_error(cs[ic]));
            CHECK_STR_CONTAINS(lac_last_error(cs[ic]), message);
            if (!untouched(T, bytes)) HARNESS_FAIL("det=%d threads=%d: T was written on error", det, lac_ctx_threads(cs[ic]));
            free(T);
        }
}

TEST(bad_index_names_first_position_and_leaves_target)
{
    for (int ii = 0; ii < 2; ii++) {
        map_data d = data_make(80000, 1000, 1, LAC_FLOAT32, ii ? LAC_INT64 : LAC_INT32, false, 5);
        lac_map_params p = lac_map_params_default();
        /* Two faults in different threads' ranges: the first must be named. */
        set_bridge(&d, 70001, 1000);
        set_bridge(&d, 41234, -1);
        expect_rejected(&d, &p, LAC_ERR_RANGE, "bridge[41234] = -1 is outside [0, 1000)");
        set_bridge(&d, 41234, 3);
        expect_rejected(&d, &p, LAC_ERR_RANGE, "bridge[70001] = 1000 is outside [0, 1000)");
        /* Every op and the atomic path (many targets) too. */
        p.op = LAC_MAP_MAX;
        expect_rejected(&d, &p, LAC_ERR_RANGE, "bridge[70001]");
        /* A plan refuses the bridge too. */
        lac_array R = lac_array_vector(d.R, d.it, d.m);
        lac_map_plan_t plan = (lac_map_plan_t)&d;   /* must be reset to NULL */
        CHECK_STATUS(ctx, lac_map_plan_create(ctx, &R, d.n, &plan), LAC_ERR_RANGE);
        CHECK(plan == NULL);
        CHECK_STR_CONTAINS(lac_last_error(ctx), "bridge[70001] = 1000");
        data_free(&d);
    }
    map_data big = data_make(40000, 300000, 2, LAC_FLOAT64, LAC_INT64, true, 6);
    set_bridge(&big, 39999, 300000);
    set_bridge(&big, 20000, -5);
    lac_map_params p = lac_map_params_default();
    p.op = LAC_MAP_MEAN;
    expect_rejected(&big, &p, LAC_ERR_RANGE, "bridge[20000] = -5 is outside [0, 300000)");
    data_free(&big);
}

TEST(nan_error_names_first_position_and_leaves_target)
{
    map_data d = data_make(60000, 500, 3, LAC_FLOAT32, LAC_INT32, true, 8);
    lac_map_params p = lac_map_params_default();
    p.nan_policy = LAC_NAN_ERROR;
    set_source(&d, 50000 * 3 + 1, NAN);
    set_source(&d, 31000 * 3 + 2, NAN);
    expect_rejected(&d, &p, LAC_ERR_VALUE, "source[31000, 2] is NaN");
    store(d.w, d.vt, 30500, NAN);
    expect_rejected(&d, &p, LAC_ERR_VALUE, "weights[30500] is NaN");
    /* A NaN before a bad index is the first fault; a bad index before a NaN too. */
    set_bridge(&d, 40000, 500);
    expect_rejected(&d, &p, LAC_ERR_VALUE, "weights[30500] is NaN");
    set_bridge(&d, 100, -2);
    expect_rejected(&d, &p, LAC_ERR_RANGE, "bridge[100] = -2");
    /* The same NaNs pass under the other policies. */
    set_bridge(&d, 100, 0);
    set_bridge(&d, 40000, 0);
    p.nan_policy = LAC_NAN_SKIP;
    void *T = target_filled(&d, 0);
    lac_array S = source_array(&d), R = lac_array_vector(d.R, d.it, d.m), W = lac_array_vector(d.w, d.vt, d.m);
    lac_array TA = target_array(&d, T);
    CHECK_OK(ctx, lac_map(ctx, &p, &S, &R, &W, &TA));
    /* Planned calls check NaNs at execute time. */
    p.nan_policy = LAC_NAN_ERROR;
    lac_map_plan_t plan = NULL;
    CHECK_OK(ctx, lac_map_plan_create(ctx, &R, d.n, &plan));
    size_t bytes = (size_t)(d.n * d.b) * sizeof(float);
    void *TP = poisoned(bytes);
    lac_array TPA = target_array(&d, TP);
    CHECK_STATUS(ctx, lac_map_plan_execute(ctx, plan, &p, &S, &W, &TPA), LAC_ERR_VALUE);
    CHECK_STR_CONTAINS(lac_last_error(ctx), "weights[30500] is NaN");
    CHECK(untouched(TP, bytes));
    lac_map_plan_destroy(&plan);
    free(T), free(TP);
    data_free(&d);
}

TEST(shape_dtype_and_parameter_errors_leave_target)
{
    float S[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    double Sd[8] = {0};
    int32_t R[8] = {0, 1, 2, 0, 1, 2, 0, 1};
    float w[7] = {1};
    float T[3];
    size_t bytes = sizeof T;
    lac_map_params p = lac_map_params_default();
    lac_array SA = lac_array_vector(S, LAC_FLOAT32, 8), RA = lac_array_vector(R, LAC_INT32, 8);
    lac_array TA = lac_array_vector(T, LAC_FLOAT32, 3);
    memset(T, POISON, bytes);

    lac_array Rshort = lac_array_vector(R, LAC_INT32, 7);
    CHECK_STATUS(ctx, lac_map(ctx, &p, &SA, &Rshort, NULL, &TA), LAC_ERR_SHAPE);
    CHECK_STR_CONTAINS(lac_last_error(ctx), "bridge has 7 entries but source has 8 rows");
    lac_array Wshort = lac_array_vector(w, LAC_FLOAT32, 7);
    CHECK_STATUS(ctx, lac_map(ctx, &p, &SA, &RA, &Wshort, &TA), LAC_ERR_SHAPE);
    lac_array Td = lac_array_vector(Sd, LAC_FLOAT64, 3);
    CHECK_STATUS(ctx, lac_map(ctx, &p, &SA, &RA, NULL, &Td), LAC_ERR_DTYPE);
    lac_array Rf = lac_array_vector(S, LAC_FLOAT32, 8);
    CHECK_STATUS(ctx, lac_map(ctx, &p, &SA, &Rf, NULL, &TA), LAC_ERR_DTYPE);
    lac_array Si = lac_array_vector(R, LAC_INT32, 8);
    CHECK_STATUS(ctx, lac_map(ctx, &p, &Si, &RA, NULL, &TA), LAC_ERR_DTYPE);
    p.op = LAC_MAP_MEAN;
    p.accumulate = 1;
    CHECK_STATUS(ctx, lac_map(ctx, &p, &SA, &RA, NULL, &TA), LAC_ERR_ARGUMENT);
    CHECK_STR_CONTAINS(lac_last_error(ctx), "mean cannot accumulate");
    p = lac_map_params_default();
    p.op = (lac_map_op)17;
    CHECK_STATUS(ctx, lac_map(ctx, &p, &SA, &RA, NULL, &TA), LAC_ERR_ARGUMENT);
    p = lac_map_params_default();
    CHECK_STATUS(ctx, lac_map(ctx, &p, &SA, NULL, NULL, &TA), LAC_ERR_ARGUMENT);
    CHECK_STATUS(ctx, lac_map(ctx, NULL, &SA, &RA, NULL, &TA), LAC_ERR_ARGUMENT);
    lac_map_plan_t plan = NULL;
    CHECK_STATUS(ctx, lac_map_plan_create(ctx, &RA, -1, &plan), LAC_ERR_SHAPE);
    CHECK_STATUS(ctx, lac_map_plan_create(ctx, &Rf, 3, &plan), LAC_ERR_DTYPE);
    CHECK(plan == NULL);
    CHECK(untouched(T, bytes));
    lac_map_op op;
    CHECK_STATUS(NULL, lac_map_op_parse("median", &op), LAC_ERR_ARGUMENT);
    CHECK_OK(NULL, lac_map_op_parse("count", &op));
    CHECK_INT(op, LAC_MAP_COUNT);
}

/* ------------------------------------------------------------------------ */
/* Edges                                                                     */
/* ------------------------------------------------------------------------ */
TEST(no_sources_gives_empty_value_or_keeps_target)
{
    float T[4] = {1, 2, 3, 4};
    lac_array S = lac_array_vector(NULL, LAC_FLOAT32, 0), R = lac_array_vector(NULL, LAC_INT64, 0);
    lac_array TA = lac_array_vector(T, LAC_FLOAT32, 4);
    for (int op = LAC_MAP_SUM; op <= LAC_MAP_COUNT; op++)
        for (int det = 0; det < 2; det++) {
            lac_map_params p = lac_map_params_default();
            p.op = (lac_map_op)op;
            p.deterministic = det;
            p.empty_value = -1.25;
            CHECK_OK(ctx, lac_map(ctx, &p, &S, &R, NULL, &TA));
            for (int k = 0; k < 4; k++) CHECK_NEAR(T[k], -1.25, 0);
            if (op == LAC_MAP_MEAN) continue;
            p.accumulate = 1;
            T[0] = 7, T[1] = 8, T[2] = -9, T[3] = 0.5f;
            CHECK_OK(ctx, lac_map(ctx, &p, &S, &R, NULL, &TA));
            CHECK(T[0] == 7 && T[1] == 8 && T[2] == -9 && T[3] == 0.5f);
        }
    /* Zero sources and zero targets. */
    lac_array T0 = lac_array_vector(NULL, LAC_FLOAT32, 0);
    lac_map_params p = lac_map_params_default();
    CHECK_OK(ctx, lac_map(ctx, &p, &S, &R, NULL, &T0));
    lac_map_plan_t plan = NULL;
    CHECK_OK(ctx, lac_map_plan_create(ctx, &R, 4, &plan));
    CHECK_OK(ctx, lac_map_plan_execute(ctx, plan, &p, &S, NULL, &TA));
    CHECK_NEAR(T[3], 0.0, 0);
    lac_map_plan_destroy(&plan);
}

TEST(small_example_by_hand)
{
    /* Three vertices, five edges: T = per-vertex sums, counts, extremes. */
    double S[5] = {1, 2, 3, 4, -5};
    int32_t R[5] = {2, 0, 2, 2, 0};
    double w[5] = {1, 1, 2, 1, 1};
    double T[3];
    lac_array SA = lac_array_vector(S, LAC_FLOAT64, 5), RA = lac_array_vector(R, LAC_INT32, 5);
    lac_array WA = lac_array_vector(w, LAC_FLOAT64, 5), TA = lac_array_vector(T, LAC_FLOAT64, 3);
    lac_map_params p = lac_map_params_default();
    p.empty_value = -1;
    CHECK_OK(ctx, lac_map(ctx, &p, &SA, &RA, NULL, &TA));
    CHECK(T[0] == -3 && T[1] == -1 && T[2] == 8);
    p.op = LAC_MAP_MEAN;
    CHECK_OK(ctx, lac_map(ctx, &p, &SA, &RA, &WA, &TA));   /* (1 + 6 + 4) / 4 */
    CHECK(T[0] == -1.5 && T[1] == -1 && T[2] == 2.75);
    p.op = LAC_MAP_COUNT;
    CHECK_OK(ctx, lac_map(ctx, &p, &SA, &RA, NULL, &TA));
    CHECK(T[0] == 2 && T[1] == -1 && T[2] == 3);
    p.op = LAC_MAP_MIN;
    CHECK_OK(ctx, lac_map(ctx, &p, &SA, &RA, NULL, &TA));
    CHECK(T[0] == -5 && T[1] == -1 && T[2] == 1);
}

int main(void)
{
    ctx = make_ctx(2);
    ctx_one = make_ctx(1);
    RUN(small_example_by_hand);
    RUN(every_case_matches_reference_private_path);
    RUN(every_case_matches_reference_float32_private_path);
    RUN(every_case_matches_reference_atomic_path);
    RUN(every_case_matches_reference_serial_path);
    RUN(float32_sum_over_many_targets);
    RUN(nan_propagate_and_skip_follow_the_reference);
    RUN(deterministic_is_bit_identical_across_threads_and_equals_plans);
    RUN(deterministic_with_few_targets);
    RUN(plan_keeps_a_narrow_copy_of_the_bridge);
    RUN(plan_renumbers_targets_of_a_skewed_bridge);
    RUN(plan_matches_one_shot_and_is_reusable);
    RUN(bad_index_names_first_position_and_leaves_target);
    RUN(nan_error_names_first_position_and_leaves_target);
    RUN(shape_dtype_and_parameter_errors_leave_target);
    RUN(no_sources_gives_empty_value_or_keeps_target);
    lac_ctx_destroy(&ctx);
    lac_ctx_destroy(&ctx_one);
    return harness_finish();
}
