/* The paper's synthetic graph-tensors (Section 6.1.1): rank-r spectral slices
 * Ĝ(k) = A_k B_k^T with i.i.d. standard normal factors, the iGFT G = U Ĝ, and
 * a uniform sample of observed vertices. Every random stream is derived from
 * (seed, purpose, index), so the data do not depend on the thread count. */
#include "impute/impute_front.h"
#include "core/random.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t stream_seed(uint64_t seed, uint64_t purpose, uint64_t index)
{
    uint64_t s = seed ^ (purpose * 0xD1B54A32D192ED03ull);
    lac_splitmix64(&s);
    s ^= index * 0x9E3779B97F4A7C15ull;
    return lac_splitmix64(&s);
}

static double uniform01(uint64_t *state)
{
    return ((double)(lac_splitmix64(state) >> 11) + 0.5) * (1.0 / 9007199254740992.0);   /* in (0, 1) */
}

/* Box-Muller: two standard normals per pair of uniforms. */
static void normals(uint64_t *state, double *out, int64_t count)
{
    for (int64_t i = 0; i < count; i += 2) {
        double r = sqrt(-2.0 * log(uniform01(state))), a = 6.283185307179586 * uniform01(state);
        out[i] = r * cos(a);
        if (i + 1 < count) out[i + 1] = r * sin(a);
    }
}

static lac_impute_gen_params gen_defaults(void)
{
    lac_impute_gen_params p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    p.m = 16;
    p.n = 16;
    p.rank = 3;
    p.observed_ratio = 0.5;
    p.seed = 1;
    return p;
}

LAC_PARAMS_INIT(lac_impute_gen_params, gen_defaults())

lac_status lac_impute_generate(lac_ctx_t ctx, const lac_impute_gen_params *params, lac_gft_t gft, lac_array *truth,
                               lac_array *observed)
{
    LAC_ARG_NOT_NULL(ctx, ctx);
    LAC_ARG_NOT_NULL(ctx, params);
    LAC_ARG_NOT_NULL(ctx, gft);
    LAC_ARG_NOT_NULL(ctx, truth);
    LAC_ADOPT_PARAMS(ctx, "impute generator", lac_impute_gen_params, params, gen_defaults());
    const int64_t N = gft->n, m = params->m, n = params->n, r = params->rank, mn = m * n;
    if (m < 1 || n < 1) return lac_error(ctx, LAC_ERR_ARGUMENT, "slices must be at least 1 x 1, not %lld x %lld", (long long)m, (long long)n);
    if (r < 1 || r > (m < n ? m : n))
        return lac_error(ctx, LAC_ERR_ARGUMENT, "rank %lld is outside [1, min(m, n) = %lld]", (long long)r, (long long)(m < n ? m : n));
    if (!(params->observed_ratio > 0 && params->observed_ratio <= 1))
        return lac_error(ctx, LAC_ERR_ARGUMENT, "observed ratio %g is outside (0, 1]", params->observed_ratio);
    if (truth->dtype != LAC_FLOAT32 && truth->dtype != LAC_FLOAT64)
        return lac_error(ctx, LAC_ERR_DTYPE, "truth must be float32 or float64");
    if (truth->ndim != 3 || truth->shape[0] != N || truth->shape[1] != m || truth->shape[2] != n)
        return lac_error(ctx, LAC_ERR_SHAPE, "truth must be (%lld, %lld, %lld)", (long long)N, (long long)m, (long long)n);
    if (truth->memory != LAC_MEM_HOST || !truth->data) return lac_error(ctx, LAC_ERR_ARGUMENT, "truth must be a host array");
    if (observed && (observed->dtype != LAC_BOOL || observed->ndim != 1 || observed->shape[0] != N ||
                     observed->memory != LAC_MEM_HOST || !observed->data))
        return lac_error(ctx, LAC_ERR_SHAPE, "observed must be a host bool vector of %lld", (long long)N);
    const lac_impute_backend *backend;
    LAC_CHECK(lac_impute_backend_for(ctx, "this build has no CUDA backend for impute: use the CPU", NULL, &backend));

    size_t esize = lac_dtype_size(gft->precision);
    void *spectral = lac_malloc(ctx, (size_t)(mn * N) * esize);
    void *spatial = lac_malloc(ctx, (size_t)(mn * N) * esize);
    if (!spectral || !spatial) {
        free(spectral);
        free(spatial);
        return LAC_ERR_OUT_OF_MEMORY;
    }
    int failed = 0;
#pragma omp parallel num_threads(lac_threads(ctx)) reduction(| : failed)
    {
        double *ab = malloc((size_t)((m + n) * r) * sizeof *ab);
        if (!ab) failed = 1;
#pragma omp for schedule(static)
        for (int64_t k = 0; k < N; k++) {
            if (!ab) continue;
            uint64_t rng = stream_seed(params->seed, 1, (uint64_t)k);
            normals(&rng, ab, (m + n) * r);
            const double *a = ab, *b = ab + m * r;   /* A: m x r, B: n x r, row-major */
            for (int64_t i = 0; i < m; i++)
                for (int64_t jj = 0; jj < n; jj++) {
                    double x = 0;
                    for (int64_t q = 0; q < r; q++) x += a[i * r + q] * b[jj * r + q];
                    if (gft->precision == LAC_FLOAT32) ((float *)spectral)[k * mn + i * n + jj] = (float)x;
                    else ((double *)spectral)[k * mn + i * n + jj] = x;
                }
        }
        free(ab);
    }
    if (failed) {
        free(spectral);
        free(spatial);
        return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "out of memory generating spectral slices");
    }
    lac_status st = backend->transform(ctx, gft, mn, spectral, spatial, 1);   /* G = U Ĝ */
    if (st >= 0) {
#pragma omp parallel for num_threads(lac_threads(ctx)) schedule(static)
        for (int64_t i = 0; i < mn * N; i++) {
            double x = lac_load_real(spatial, gft->precision, i);
            if (truth->dtype == LAC_FLOAT32) ((float *)truth->data)[i] = (float)x;
            else ((double *)truth->data)[i] = x;
        }
    }
    free(spectral);
    free(spatial);
    if (st < 0 || !observed) return st;

    /* round(p N) observed vertices (at least one): a partial Fisher-Yates shuffle. */
    int64_t count = (int64_t)llround(params->observed_ratio * (double)N);
    if (count < 1) count = 1;
    int64_t *order = lac_malloc(ctx, (size_t)N * sizeof *order);
    if (!order) return LAC_ERR_OUT_OF_MEMORY;
    for (int64_t v = 0; v < N; v++) order[v] = v;
    uint64_t rng = stream_seed(params->seed, 2, 0);
    for (int64_t i = 0; i < count; i++) {
        int64_t j = i + (int64_t)(lac_splitmix64(&rng) % (uint64_t)(N - i));
        int64_t tmp = order[i];
        order[i] = order[j];
        order[j] = tmp;
    }
    unsigned char *mask = observed->data;
    memset(mask, 0, (size_t)N);
    for (int64_t i = 0; i < count; i++) mask[order[i]] = 1;
    free(order);
    return LAC_SUCCESS;
}
