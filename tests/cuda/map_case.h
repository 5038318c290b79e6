/* map GPU tests' shared cases: test data made in doubles and converted to a
 * case's dtypes, the float64 reference of lacuna.h's semantics, one call run
 * on a context (host or device arrays, one-shot or a plan) and the error
 * against the reference. The including test defines
 * `static unsigned long long rng;` (the data's random state) first. */
#ifndef LACUNA_TESTS_CUDA_MAP_CASE_H
#define LACUNA_TESTS_CUDA_MAP_CASE_H

#include "harness.h"
#include "lacuna/lacuna.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The run's seed into rng: new data each run, printed; LACUNA_TEST_SEED
 * replays one. */
static inline void map_test_seed(void)
{
    const char *seed_env = getenv("LACUNA_TEST_SEED");
    rng = seed_env ? strtoull(seed_env, NULL, 10) : (unsigned long long)time(NULL) ^ ((unsigned long long)getpid() << 20);
    printf("seed %llu (LACUNA_TEST_SEED replays it)\n", rng);
}

/* LACUNA_TEST_QUICK set (not 0): a representative subset (the sanitizers' runs). */
static inline int map_test_quick(void)
{
    const char *quick_env = getenv("LACUNA_TEST_QUICK");
    return quick_env && strcmp(quick_env, "0") != 0 && *quick_env;
}

/* ------------------------------------------------------------------------ */
/* Test data: doubles here, converted to the dtypes of a case                */
/* ------------------------------------------------------------------------ */
typedef struct {
    int64_t m, n, b;
    lac_dtype vt, it;
    int weighted;
    double *S, *w;       /* m x b, m */
    int64_t *R;          /* m */
    double *T0;          /* n x b: T's values before the call */
} case_data;

static inline void case_free(case_data *d)
{
    free(d->S);
    free(d->w);
    free(d->R);
    free(d->T0);
    memset(d, 0, sizeof *d);
}

/* skew: 0 uniform bridge; 1 half of the rows on three hot targets (long
 * segments, equal keys within a warp). */
static inline void case_make(case_data *d, int64_t m, int64_t n, int64_t b, lac_dtype vt, lac_dtype it, int weighted, int skew)
{
    memset(d, 0, sizeof *d);
    d->m = m, d->n = n, d->b = b, d->vt = vt, d->it = it, d->weighted = weighted;
    d->S = malloc(sizeof(double) * (size_t)(m * b + 1));
    d->w = malloc(sizeof(double) * (size_t)(m + 1));
    d->R = malloc(sizeof(int64_t) * (size_t)(m + 1));
    d->T0 = malloc(sizeof(double) * (size_t)(n * b + 1));
    for (int64_t i = 0; i < m * b; i++) d->S[i] = 2.0 * harness_rand_uniform(&rng) - 1.0;
    for (int64_t i = 0; i < m; i++) {
        d->w[i] = 0.5 + harness_rand_uniform(&rng);
        int64_t r = (int64_t)(harness_rand_u64(&rng) % (unsigned long long)n);
        if (skew && harness_rand_uniform(&rng) < 0.5) r = (int64_t)(harness_rand_u64(&rng) % 3) * (n / 3);
        d->R[i] = r;
    }
    for (int64_t k = 0; k < n * b; k++) d->T0[k] = 4.0 * harness_rand_uniform(&rng) - 2.0;
    if (vt == LAC_FLOAT32) {   /* the reference sees what the GPU sees */
        for (int64_t i = 0; i < m * b; i++) d->S[i] = (float)d->S[i];
        for (int64_t i = 0; i < m; i++) d->w[i] = (float)d->w[i];
        for (int64_t k = 0; k < n * b; k++) d->T0[k] = (float)d->T0[k];
    }
}

static inline void *to_dtype(const double *src, int64_t count, lac_dtype vt)
{
    void *out = malloc((size_t)(count > 0 ? count : 1) * lac_dtype_size(vt));
    for (int64_t i = 0; i < count; i++) {
        if (vt == LAC_FLOAT32) ((float *)out)[i] = (float)src[i];
        else ((double *)out)[i] = src[i];
    }
    return out;
}

static inline void *index_to_dtype(const int64_t *src, int64_t count, lac_dtype it)
{
    void *out = malloc((size_t)(count > 0 ? count : 1) * lac_dtype_size(it));
    for (int64_t i = 0; i < count; i++) {
        if (it == LAC_INT32) ((int32_t *)out)[i] = (int32_t)src[i];
        else ((int64_t *)out)[i] = src[i];
    }
    return out;
}

/* Writes src (count values) into dst as vt; returns dst. */
static inline void *to_dtype_keep(void *dst, const double *src, int64_t count, lac_dtype vt)
{
    for (int64_t k = 0; k < count; k++) {
        if (vt == LAC_FLOAT32) ((float *)dst)[k] = (float)src[k];
        else ((double *)dst)[k] = src[k];
    }
    return dst;
}

static inline double value_at(const void *p, lac_dtype vt, int64_t k)
{
    return vt == LAC_FLOAT32 ? (double)((const float *)p)[k] : ((const double *)p)[k];
}

/* ------------------------------------------------------------------------ */
/* The float64 reference: the semantics of lacuna.h, written plainly          */
/* ------------------------------------------------------------------------ */
static inline void reference(const case_data *d, const lac_map_params *p, double *out)
{
    int64_t slots = d->n * d->b;
    /* Sums are compensated (Neumaier): hot targets take hundreds of thousands
     * of terms, where a plain float64 sum drifts past the tolerance while the
     * GPU's fixed-point sums are exact. */
    double *acc = calloc((size_t)slots + 1, sizeof *acc), *wsum = calloc((size_t)slots + 1, sizeof *wsum);
    double *carry = calloc((size_t)slots + 1, sizeof *carry);
    int64_t *hits = calloc((size_t)slots + 1, sizeof *hits);
    for (int64_t k = 0; k < slots; k++)
        acc[k] = p->op == LAC_MAP_MIN ? INFINITY : p->op == LAC_MAP_MAX ? -INFINITY : 0.0;
    for (int64_t i = 0; i < d->m; i++)
        for (int64_t c = 0; c < d->b; c++) {
            double s = d->S[i * d->b + c], w = d->weighted ? d->w[i] : 1.0;
            if (p->nan_policy == LAC_NAN_SKIP && (isnan(s) || isnan(w))) continue;
            double x = p->op == LAC_MAP_COUNT ? w : w * s;
            int64_t k = d->R[i] * d->b + c;
            if (p->op == LAC_MAP_MIN) acc[k] = (isnan(x) || x < acc[k]) ? x : acc[k];
            else if (p->op == LAC_MAP_MAX) acc[k] = (isnan(x) || x > acc[k]) ? x : acc[k];
            else {
                double t = acc[k] + x;
                if (isfinite(t))   /* an infinite or NaN sum carries nothing */
                    carry[k] += fabs(acc[k]) >= fabs(x) ? (acc[k] - t) + x : (x - t) + acc[k];
                acc[k] = t;
            }
            wsum[k] += w;
            hits[k]++;
        }
    for (int64_t k = 0; k < slots; k++) {
        if (p->op != LAC_MAP_MIN && p->op != LAC_MAP_MAX && isfinite(acc[k])) acc[k] += carry[k];
        double old = d->T0[k];
        if (p->accumulate) {
            if (p->op == LAC_MAP_SUM || p->op == LAC_MAP_COUNT) out[k] = old + acc[k];
            else if (!hits[k]) out[k] = old;
            else if (isnan(old) || isnan(acc[k])) out[k] = NAN;
            else out[k] = p->op == LAC_MAP_MIN ? fmin(old, acc[k]) : fmax(old, acc[k]);
        } else if (!hits[k]) {
            out[k] = p->empty_value;
        } else {
            out[k] = p->op == LAC_MAP_MEAN ? acc[k] / wsum[k] : acc[k];
        }
    }
    free(acc);
    free(wsum);
    free(carry);
    free(hits);
}

/* ------------------------------------------------------------------------ */
/* Running one case on a context, host or device memory                      */
/* ------------------------------------------------------------------------ */
typedef enum { RUN_MAP, RUN_PLAN } run_kind;

/* Runs lac_map (or a plan built and executed) and returns T as doubles in out
 * (T starts as d->T0). Returns the status. */
static inline int run_case(lac_ctx_t ctx, const case_data *d, const lac_map_params *p, lac_memory mem, run_kind kind,
                    double *out, void *raw_out)
{
    size_t vs = lac_dtype_size(d->vt), is = lac_dtype_size(d->it);
    void *hS = to_dtype(d->S, d->m * d->b, d->vt), *hw = to_dtype(d->w, d->m, d->vt);
    void *hR = index_to_dtype(d->R, d->m, d->it), *hT = to_dtype(d->T0, d->n * d->b, d->vt);
    void *S = hS, *w = hw, *R = hR, *T = hT;
    size_t s_bytes = (size_t)(d->m * d->b) * vs, t_bytes = (size_t)(d->n * d->b) * vs;
    if (mem == LAC_MEM_DEVICE) {
        lac_device_alloc(ctx, s_bytes + 16, &S);
        lac_device_alloc(ctx, (size_t)d->m * vs + 16, &w);
        lac_device_alloc(ctx, (size_t)d->m * is + 16, &R);
        lac_device_alloc(ctx, t_bytes + 16, &T);
        lac_memcpy(ctx, S, LAC_MEM_DEVICE, hS, LAC_MEM_HOST, s_bytes);
        lac_memcpy(ctx, w, LAC_MEM_DEVICE, hw, LAC_MEM_HOST, (size_t)d->m * vs);
        lac_memcpy(ctx, R, LAC_MEM_DEVICE, hR, LAC_MEM_HOST, (size_t)d->m * is);
        lac_memcpy(ctx, T, LAC_MEM_DEVICE, hT, LAC_MEM_HOST, t_bytes);
    }
    lac_array as = d->b > 1 ? lac_array_matrix(S, d->vt, d->m, d->b) : lac_array_vector(S, d->vt, d->m);
    lac_array at = d->b > 1 ? lac_array_matrix(T, d->vt, d->n, d->b) : lac_array_vector(T, d->vt, d->n);
    lac_array ar = lac_array_vector(R, d->it, d->m), aw = lac_array_vector(w, d->vt, d->m);
    as.memory = at.memory = ar.memory = aw.memory = mem;
    int st;
    if (kind == RUN_MAP) {
        st = lac_map(ctx, p, &as, &ar, d->weighted ? &aw : NULL, &at);
    } else {
        lac_map_plan_t plan = NULL;
        st = lac_map_plan_create(ctx, &ar, d->n, &plan);
        if (st == LAC_SUCCESS) st = lac_map_plan_execute(ctx, plan, p, &as, d->weighted ? &aw : NULL, &at);
        lac_map_plan_destroy(&plan);
    }
    if (mem == LAC_MEM_DEVICE) {
        lac_ctx_synchronize(ctx);
        lac_memcpy(ctx, hT, LAC_MEM_HOST, T, LAC_MEM_DEVICE, t_bytes);
        lac_device_free(ctx, S);
        lac_device_free(ctx, w);
        lac_device_free(ctx, R);
        lac_device_free(ctx, T);
    }
    for (int64_t k = 0; k < d->n * d->b; k++) out[k] = value_at(hT, d->vt, k);
    if (raw_out) memcpy(raw_out, hT, t_bytes);
    free(hS);
    free(hw);
    free(hR);
    free(hT);
    return st;
}

/* Max over targets of |got - ref| / max(1, |ref|), NaN where ref is: must match. */
static inline double compare(const double *got, const double *ref, int64_t count, int64_t *worst)
{
    double err = 0;
    *worst = -1;
    for (int64_t k = 0; k < count; k++) {
        double e;
        if (isnan(ref[k]) || isnan(got[k])) e = (isnan(ref[k]) && isnan(got[k])) ? 0.0 : INFINITY;
        else e = fabs(got[k] - ref[k]) / (fabs(ref[k]) > 1.0 ? fabs(ref[k]) : 1.0);
        if (e > err || (*worst < 0 && e > 0)) {
            err = e;
            *worst = k;
        }
    }
    return err;
}

#endif
