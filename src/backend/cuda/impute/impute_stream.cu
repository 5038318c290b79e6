/* impute on CUDA out of core: the streamed plan (impute_cuda.h) for tensors
 * whose resident plan does not fit the device (or LACUNA_CUDA_MEMORY_CAP).
 *
 * What is indexed by frequency lives in pinned host memory: C = P_Ω(G) U,
 * the estimate Ĝest, the truth's Ĝtrue, U_I (the incomplete vertices' rows
 * of U, ni x N) and the Jacobi vectors. What is indexed by incomplete vertex
 * stays on the device: X_I, the iGFT's product, the momentum's previous X_I,
 * the truth's and the entry masks. One pass over slabs of w frequencies K
 * does, per slab: Ĝ_K = C_K + X_I U_I,K (a GEMM over the slab's columns),
 * Ĝest_K = S_λ(Ĝ_K), and X_new += Ĝest_K U_I,Kᵀ (accumulated on the device).
 * Two buffer sets alternate: slab j+1 is copied in on one copy stream while
 * slab j is computed, and slab j's estimate goes back on the other copy
 * stream. Only the iGFT's sum over slabs is added in another order than the
 * resident plan's one GEMM (float rounding). The one-off products with the
 * whole U (setup's C and Ĝtrue, finish's estimate) go by w x w tiles of U. */
#include "backend/cuda/impute/impute_cuda.h"

#include <stdlib.h>
#include <string.h>

#include <new>

namespace {

template <typename T> lac_status device_buffer(lac_ctx_t ctx, T **p, int64_t count)
{
    LAC_CUDA_CHECK(ctx, cudaMalloc((void **)p, (size_t)(count > 0 ? count : 1) * sizeof(T)));
    return LAC_SUCCESS;
}

template <typename T> lac_status host_buffer(lac_ctx_t ctx, T **p, int64_t count)
{
    LAC_CUDA_CHECK(ctx, cudaMallocHost((void **)p, (size_t)(count > 0 ? count : 1) * sizeof(T)));
    return LAC_SUCCESS;
}

/* One slab's device buffers and the events that order its copies. */
template <typename REAL> struct slab_set {
    REAL *u = nullptr, *c = nullptr, *est = nullptr, *truth = nullptr;
    double *lambda = nullptr, *stats = nullptr, *v = nullptr;
    cudaEvent_t loaded = nullptr, computed = nullptr, drained = nullptr;
};

template <typename REAL> struct stream_state {
    lac_impute_problem problem;
    int64_t N = 0, mn = 0, ni = 0, w = 0, p = 0;
    bool jacobi = true, tf32 = false;
    int warm_start = 1, v_valid = 0;
    size_t svt_budget = 0;
    /* Pinned host, by frequency. */
    REAL *h_c = nullptr, *h_est = nullptr, *h_truth = nullptr, *h_u = nullptr;
    double *h_v = nullptr, *h_stats = nullptr, *h_lambda = nullptr, *h_partial = nullptr;
    /* Device, by incomplete vertex. */
    REAL *x_inc = nullptr, *x_new = nullptr, *x_est = nullptr, *true_inc = nullptr;
    unsigned char *obs_inc = nullptr;
    double *partial = nullptr;
    slab_set<REAL> set[2];
    /* The tiles of the products with the whole U. */
    unsigned char *staging = nullptr, *t_state = nullptr, *t_entry = nullptr;
    REAL *t_in = nullptr, *t_u = nullptr, *t_out = nullptr;
    lac_svt_gram_cache *gram_cache = nullptr;

    ~stream_state()
    {
        for (slab_set<REAL> &b : set) {
            cudaFree(b.u);
            cudaFree(b.c);
            cudaFree(b.est);
            cudaFree(b.truth);
            cudaFree(b.lambda);
            cudaFree(b.stats);
            cudaFree(b.v);
            if (b.loaded) cudaEventDestroy(b.loaded);
            if (b.computed) cudaEventDestroy(b.computed);
            if (b.drained) cudaEventDestroy(b.drained);
        }
        cudaFree(x_inc);
        cudaFree(x_new);
        if (x_est != x_inc) cudaFree(x_est);
        cudaFree(true_inc);
        cudaFree(obs_inc);
        cudaFree(partial);
        cudaFree(staging);
        cudaFree(t_state);
        cudaFree(t_entry);
        cudaFree(t_in);
        cudaFree(t_u);
        cudaFree(t_out);
        lac_svt_gram_cache_free(gram_cache);
        cudaFreeHost(h_c);
        cudaFreeHost(h_est);
        cudaFreeHost(h_truth);
        cudaFreeHost(h_u);
        cudaFreeHost(h_v);
        cudaFreeHost(h_stats);
        cudaFreeHost(h_lambda);
        cudaFreeHost(h_partial);
    }
};

template <typename REAL> lac_dtype dtype_of() { return sizeof(REAL) == sizeof(float) ? LAC_FLOAT32 : LAC_FLOAT64; }

/* out (mn x N, host) = in · U (inverse 0) or in · Uᵀ (inverse 1) for a host
 * in (mn x N of in_dtype; its observed part only when mask is set), tile by
 * tile: out[:, J] = Σ_I in[:, I] B_IJ with B_IJ = U[I, J] or U[J, I]ᵀ, the
 * sum on the device, each output tile downloaded once. */
template <typename REAL>
lac_status tiled_product(lac_ctx_t ctx, stream_state<REAL> *s, const void *in, lac_dtype in_dtype, int mask, int inverse,
                         REAL *out)
{
    const lac_impute_problem *pr = &s->problem;
    const int64_t N = s->N, mn = s->mn, w = s->w;
    const size_t esize = lac_dtype_size(in_dtype);
    const REAL *u = (const REAL *)pr->gft->vectors;
    cudaStream_t stream = ctx->cuda->stream;
    cublasHandle_t blas;
    LAC_CHECK(lac_cuda_cublas(ctx, &blas));
    for (int64_t j0 = 0; j0 < N; j0 += w) {
        const int64_t nj = N - j0 < w ? N - j0 : w;
        for (int64_t i0 = 0; i0 < N; i0 += w) {
            const int64_t nb = N - i0 < w ? N - i0 : w;
            LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(s->staging, (const char *)in + (size_t)(i0 * mn) * esize,
                                                (size_t)(nb * mn) * esize, cudaMemcpyHostToDevice, stream));
            if (mask) {
                LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(s->t_state, pr->vertex_state + i0, (size_t)nb, cudaMemcpyHostToDevice,
                                                    stream));
                if (pr->entry_observed)
                    LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(s->t_entry, pr->entry_observed + i0 * mn, (size_t)(nb * mn),
                                                        cudaMemcpyHostToDevice, stream));
            }
            LAC_CHECK(lac_impute_cuda_load<REAL>(ctx, s->t_in, s->staging, in_dtype, nb, mn, s->t_state,
                                                 pr->entry_observed ? s->t_entry : nullptr, mask));
            const int64_t rows = inverse ? nj : nb, cols = inverse ? nb : nj;
            const int64_t r0 = inverse ? j0 : i0, c0 = inverse ? i0 : j0;
            LAC_CUDA_CHECK(ctx, cudaMemcpy2DAsync(s->t_u, (size_t)rows * sizeof(REAL), u + r0 + c0 * N,
                                                  (size_t)N * sizeof(REAL), (size_t)rows * sizeof(REAL), (size_t)cols,
                                                  cudaMemcpyHostToDevice, stream));
            LAC_CUBLAS_CHECK(ctx, lac_gemm(blas, CUBLAS_OP_N, inverse ? CUBLAS_OP_T : CUBLAS_OP_N, mn, nj, nb, (REAL)1,
                                           s->t_in, mn, s->t_u, rows, i0 == 0 ? (REAL)0 : (REAL)1, s->t_out, mn));
        }
        LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(out + j0 * mn, s->t_out, (size_t)(nj * mn) * sizeof(REAL),
                                            cudaMemcpyDeviceToHost, stream));
    }
    LAC_CUDA_CHECK(ctx, cudaStreamSynchronize(stream));
    return LAC_SUCCESS;
}

template <typename REAL>
lac_status allocate(lac_ctx_t ctx, stream_state<REAL> *s, size_t stage_size)
{
    const lac_impute_problem *pr = &s->problem;
    const int64_t N = s->N, mn = s->mn, ni = s->ni, w = s->w, p = s->p;
    LAC_CHECK(host_buffer(ctx, &s->h_c, mn * N));
    LAC_CHECK(host_buffer(ctx, &s->h_est, mn * N));
    LAC_CHECK(host_buffer(ctx, &s->h_u, ni * N));
    LAC_CHECK(host_buffer(ctx, &s->h_stats, N * LAC_SVT_STATS));
    LAC_CHECK(host_buffer(ctx, &s->h_lambda, N));
    LAC_CHECK(host_buffer(ctx, &s->h_partial, LAC_IMPUTE_CUDA_PARTIALS));
    if (pr->truth) LAC_CHECK(host_buffer(ctx, &s->h_truth, mn * N));
    if (s->jacobi && s->warm_start) LAC_CHECK(host_buffer(ctx, &s->h_v, N * p * p));   /* the warm start's V */
    LAC_CHECK(device_buffer(ctx, &s->x_inc, mn * ni));
    LAC_CHECK(device_buffer(ctx, &s->x_new, mn * ni));
    s->x_est = s->x_inc;
    if (pr->momentum) LAC_CHECK(device_buffer(ctx, &s->x_est, mn * ni));
    if (pr->truth) LAC_CHECK(device_buffer(ctx, &s->true_inc, mn * ni));
    if (pr->entry_observed && ni > 0) LAC_CHECK(device_buffer(ctx, &s->obs_inc, mn * ni));
    LAC_CHECK(device_buffer(ctx, &s->partial, LAC_IMPUTE_CUDA_PARTIALS));
    for (slab_set<REAL> &b : s->set) {
        LAC_CHECK(device_buffer(ctx, &b.u, ni * w));
        LAC_CHECK(device_buffer(ctx, &b.c, mn * w));
        LAC_CHECK(device_buffer(ctx, &b.est, mn * w));
        if (pr->truth) LAC_CHECK(device_buffer(ctx, &b.truth, mn * w));
        LAC_CHECK(device_buffer(ctx, &b.lambda, w));
        LAC_CHECK(device_buffer(ctx, &b.stats, w * LAC_SVT_STATS));
        if (s->jacobi && s->warm_start) LAC_CHECK(device_buffer(ctx, &b.v, w * p * p));
        LAC_CUDA_CHECK(ctx, cudaEventCreateWithFlags(&b.loaded, cudaEventDisableTiming));
        LAC_CUDA_CHECK(ctx, cudaEventCreateWithFlags(&b.computed, cudaEventDisableTiming));
        LAC_CUDA_CHECK(ctx, cudaEventCreateWithFlags(&b.drained, cudaEventDisableTiming));
    }
    LAC_CHECK(device_buffer(ctx, &s->staging, (int64_t)((size_t)(w * mn) * stage_size)));
    LAC_CHECK(device_buffer(ctx, &s->t_state, w));
    if (pr->entry_observed) LAC_CHECK(device_buffer(ctx, &s->t_entry, w * mn));
    LAC_CHECK(device_buffer(ctx, &s->t_in, mn * w));
    LAC_CHECK(device_buffer(ctx, &s->t_u, w * w));
    LAC_CHECK(device_buffer(ctx, &s->t_out, mn * w));
    return LAC_SUCCESS;
}

/* The incomplete vertices' slices of the truth (as REAL) and their entry
 * masks onto the device, w vertices at a time through the staging buffer. */
template <typename REAL> lac_status upload_incomplete(lac_ctx_t ctx, stream_state<REAL> *s)
{
    const lac_impute_problem *pr = &s->problem;
    const int64_t mn = s->mn, ni = s->ni, w = s->w;
    cudaStream_t stream = ctx->cuda->stream;
    for (int64_t i0 = 0; i0 < ni; i0 += w) {
        const int64_t nb = ni - i0 < w ? ni - i0 : w;
        for (int64_t i = i0; i < i0 + nb; i++) {
            const int64_t v = pr->incomplete[i];
            if (s->obs_inc)
                LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(s->obs_inc + i * mn, pr->entry_observed + v * mn, (size_t)mn,
                                                    cudaMemcpyHostToDevice, stream));
            if (pr->truth) {
                const size_t esize = lac_dtype_size(pr->truth_dtype);
                LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(s->staging + (size_t)((i - i0) * mn) * esize,
                                                    (const char *)pr->truth + (size_t)(v * mn) * esize, (size_t)mn * esize,
                                                    cudaMemcpyHostToDevice, stream));
            }
        }
        if (pr->truth)
            LAC_CHECK(lac_impute_cuda_load<REAL>(ctx, s->true_inc + i0 * mn, s->staging, pr->truth_dtype, nb, mn, nullptr,
                                                 nullptr, 0));
        /* The staging buffer is reused by the next chunk. */
        LAC_CUDA_CHECK(ctx, cudaStreamSynchronize(stream));
    }
    return LAC_SUCCESS;
}

/* Slab j's inputs in on the first copy stream, once slab j-2 has left its set. */
template <typename REAL> lac_status load_slab(lac_ctx_t ctx, stream_state<REAL> *s, int64_t j, bool lambda)
{
    slab_set<REAL> &b = s->set[j & 1];
    const int64_t mn = s->mn, ni = s->ni, k0 = j * s->w, nk = s->N - k0 < s->w ? s->N - k0 : s->w, pp = s->p * s->p;
    cudaStream_t up = ctx->cuda->copy_streams[0];
    if (j >= 2) LAC_CUDA_CHECK(ctx, cudaStreamWaitEvent(up, b.drained, 0));
    const cudaMemcpyKind in = cudaMemcpyHostToDevice;
    LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(b.c, s->h_c + k0 * mn, (size_t)(nk * mn) * sizeof(REAL), in, up));
    LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(b.est, s->h_est + k0 * mn, (size_t)(nk * mn) * sizeof(REAL), in, up));
    if (ni > 0) LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(b.u, s->h_u + k0 * ni, (size_t)(nk * ni) * sizeof(REAL), in, up));
    if (b.truth)
        LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(b.truth, s->h_truth + k0 * mn, (size_t)(nk * mn) * sizeof(REAL), in, up));
    if (lambda) LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(b.lambda, s->h_lambda + k0, (size_t)nk * sizeof(double), in, up));
    if (b.v && s->v_valid)
        LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(b.v, s->h_v + k0 * pp, (size_t)(nk * pp) * sizeof(double), in, up));
    LAC_CUDA_CHECK(ctx, cudaEventRecord(b.loaded, up));
    return LAC_SUCCESS;
}

/* Slab j on the compute stream (GFT, SVT, the iGFT's share), then its
 * estimate, figures and vectors out on the second copy stream. */
template <typename REAL> lac_status compute_slab(lac_ctx_t ctx, stream_state<REAL> *s, int64_t j, bool lambda)
{
    slab_set<REAL> &b = s->set[j & 1];
    const int64_t mn = s->mn, ni = s->ni, k0 = j * s->w, nk = s->N - k0 < s->w ? s->N - k0 : s->w, pp = s->p * s->p;
    cudaStream_t stream = ctx->cuda->stream, down = ctx->cuda->copy_streams[1];
    cublasHandle_t blas;
    LAC_CHECK(lac_cuda_cublas(ctx, &blas));
    LAC_CUDA_CHECK(ctx, cudaStreamWaitEvent(stream, b.loaded, 0));
    if (ni > 0) {   /* Ĝ_K = C_K + X_I U_I,K, in place of C_K */
        lac_math_mode_scope mode(blas, s->tf32);
        LAC_CUBLAS_CHECK(ctx, lac_gemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, mn, nk, ni, (REAL)1, s->x_inc, mn, b.u, ni, (REAL)1,
                                       b.c, mn));
    }
    LAC_CHECK(lac_svt_slices<REAL>(ctx, s->jacobi, s->problem, nk, b.c, b.est, b.truth, lambda ? b.lambda : nullptr,
                                   b.stats, b.v, s->v_valid, s->svt_budget, &s->gram_cache));
    if (ni > 0) {   /* X_new (+)= Ĝest_K U_I,Kᵀ */
        lac_math_mode_scope mode(blas, s->tf32);
        LAC_CUBLAS_CHECK(ctx, lac_gemm(blas, CUBLAS_OP_N, CUBLAS_OP_T, mn, ni, nk, (REAL)1, b.est, mn, b.u, ni,
                                       j == 0 ? (REAL)0 : (REAL)1, s->x_new, mn));
    }
    LAC_CUDA_CHECK(ctx, cudaEventRecord(b.computed, stream));
    LAC_CUDA_CHECK(ctx, cudaStreamWaitEvent(down, b.computed, 0));
    const cudaMemcpyKind out = cudaMemcpyDeviceToHost;
    LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(s->h_est + k0 * mn, b.est, (size_t)(nk * mn) * sizeof(REAL), out, down));
    LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(s->h_stats + k0 * LAC_SVT_STATS, b.stats,
                                        (size_t)(nk * LAC_SVT_STATS) * sizeof(double), out, down));
    if (b.v)
        LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(s->h_v + k0 * pp, b.v, (size_t)(nk * pp) * sizeof(double), out, down));
    LAC_CUDA_CHECK(ctx, cudaEventRecord(b.drained, down));
    return LAC_SUCCESS;
}

template <typename REAL> lac_status stream_estimate(lac_ctx_t ctx, void *state, REAL *full)
{
    stream_state<REAL> *s = (stream_state<REAL> *)state;
    return tiled_product<REAL>(ctx, s, s->h_est, dtype_of<REAL>(), 0, 1, full);
}

} // namespace

template <typename REAL>
lac_status lac_impute_stream_setup(lac_ctx_t ctx, const lac_impute_problem *pr, const lac_impute_plan *plan, bool jacobi,
                                   void **state, double *truth_sq, double *truth_missing_sq)
{
    stream_state<REAL> *s = new (std::nothrow) stream_state<REAL>();
    if (!s) return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "impute state");
    s->problem = *pr;
    const int64_t N = s->N = pr->N, mn = s->mn = pr->m * pr->n, ni = s->ni = pr->num_incomplete;
    s->w = plan->slab;
    s->p = pr->m < pr->n ? pr->m : pr->n;
    s->jacobi = jacobi;
    s->svt_budget = plan->svt_budget;
    s->warm_start = lac_knob_int(ctx, LAC_KNOB_IMPUTE_CUDA_WARM, 1) != 0;
    const bool single = sizeof(REAL) == sizeof(float);
    s->tf32 = single && pr->gemm_tf32 == LAC_GEMM_TF32;
    if (single && pr->gemm_tf32 == LAC_GEMM_3XTF32)
        lac_log(ctx, LAC_LOG_INFO, "impute (cuda): streamed GEMMs run in FP32 (3xTF32 is resident only)");
    size_t stage = lac_dtype_size(pr->tensor_dtype);
    if (pr->truth && lac_dtype_size(pr->truth_dtype) > stage) stage = lac_dtype_size(pr->truth_dtype);
    if (sizeof(REAL) > stage) stage = sizeof(REAL);
    cudaStream_t stream = ctx->cuda->stream;
    lac_status st = LAC_SUCCESS;
    LAC_CHECK_GOTO(allocate<REAL>(ctx, s, stage), st, fail);
    memset(s->h_est, 0, (size_t)(mn * N) * sizeof(REAL));
    {
        const REAL *u = (const REAL *)pr->gft->vectors;
        for (int64_t k = 0; k < N; k++)
            for (int64_t i = 0; i < ni; i++) s->h_u[i + k * ni] = u[pr->incomplete[i] + k * N];
    }
    LAC_CUDA_CHECK_GOTO(ctx, cudaMemsetAsync(s->x_inc, 0, (size_t)(mn * ni) * sizeof(REAL), stream), st, fail);
    if (s->x_est != s->x_inc)
        LAC_CUDA_CHECK_GOTO(ctx, cudaMemsetAsync(s->x_est, 0, (size_t)(mn * ni) * sizeof(REAL), stream), st, fail);
    /* C = P_Ω(G) U; with truth Ĝtrue = G U and the norms errors are relative to. */
    LAC_CHECK_GOTO(tiled_product<REAL>(ctx, s, pr->tensor, pr->tensor_dtype, 1, 0, s->h_c), st, fail);
    if (pr->truth) {
        LAC_CHECK_GOTO(tiled_product<REAL>(ctx, s, pr->truth, pr->truth_dtype, 0, 0, s->h_truth), st, fail);
        lac_impute_cuda_truth_norms<REAL>(pr, truth_sq, truth_missing_sq);
    }
    LAC_CHECK_GOTO(upload_incomplete<REAL>(ctx, s), st, fail);
    LAC_CUDA_CHECK_GOTO(ctx, cudaStreamSynchronize(stream), st, fail);
    *state = s;
    return LAC_SUCCESS;
fail:
    cudaStreamSynchronize(stream);
    delete s;
    return st;
}

template <typename REAL>
lac_status lac_impute_stream_svt(lac_ctx_t ctx, void *state, const double *lambda, double *sigma_max,
                                 lac_impute_svt_stats *stats)
{
    stream_state<REAL> *s = (stream_state<REAL> *)state;
    if (lambda) memcpy(s->h_lambda, lambda, (size_t)s->N * sizeof(double));
    const int64_t slabs = (s->N + s->w - 1) / s->w;
    const int warm = s->v_valid;
    lac_status st = load_slab<REAL>(ctx, s, 0, lambda != nullptr);
    for (int64_t j = 0; j < slabs && st == LAC_SUCCESS; j++) {
        if (j + 1 < slabs) st = load_slab<REAL>(ctx, s, j + 1, lambda != nullptr);
        if (st == LAC_SUCCESS) st = compute_slab<REAL>(ctx, s, j, lambda != nullptr);
    }
    /* Every copy and kernel done before the figures are read (or on failure,
     * before the buffers may be reused). */
    cudaError_t e0 = cudaStreamSynchronize(ctx->cuda->copy_streams[0]);
    cudaError_t e1 = cudaStreamSynchronize(ctx->cuda->stream);
    cudaError_t e2 = cudaStreamSynchronize(ctx->cuda->copy_streams[1]);
    LAC_CHECK(st);
    LAC_CUDA_CHECK(ctx, e0 != cudaSuccess ? e0 : e1 != cudaSuccess ? e1 : e2);
    s->v_valid = s->jacobi && s->warm_start;
    return lac_impute_cuda_sum_stats(ctx, s->h_stats, s->N, s->jacobi, warm, sigma_max, stats);
}

template <typename REAL> lac_status lac_impute_stream_igft(lac_ctx_t ctx, void *state, double momentum, double *missing_sq)
{
    stream_state<REAL> *s = (stream_state<REAL> *)state;
    *missing_sq = 0;
    if (s->ni == 0) return LAC_SUCCESS;
    double err = 0;
    LAC_CHECK(lac_impute_cuda_impute_sum<REAL>(ctx, s->mn * s->ni, s->x_new, s->obs_inc, s->true_inc, s->x_inc, s->x_est,
                                               (REAL)momentum, s->x_est != s->x_inc, s->partial, s->h_partial, &err));
    *missing_sq = s->true_inc ? err : 0;
    return LAC_SUCCESS;
}

template <typename REAL>
lac_status lac_impute_stream_finish(lac_ctx_t ctx, void *state, lac_impute_output output, void *out, lac_dtype out_dtype,
                                    double *error_sq)
{
    stream_state<REAL> *s = (stream_state<REAL> *)state;
    return lac_impute_cuda_finish<REAL>(ctx, &s->problem, stream_estimate<REAL>, s, s->x_est, output, out, out_dtype,
                                        error_sq);
}

template <typename REAL> void lac_impute_stream_release(void *state)
{
    delete (stream_state<REAL> *)state;
}

#define LAC_INSTANTIATE(REAL)                                                                                        \
    template lac_status lac_impute_stream_setup<REAL>(lac_ctx_t, const lac_impute_problem *, const lac_impute_plan *, \
                                                      bool, void **, double *, double *);                            \
    template lac_status lac_impute_stream_svt<REAL>(lac_ctx_t, void *, const double *, double *,                     \
                                                    lac_impute_svt_stats *);                                         \
    template lac_status lac_impute_stream_igft<REAL>(lac_ctx_t, void *, double, double *);                           \
    template lac_status lac_impute_stream_finish<REAL>(lac_ctx_t, void *, lac_impute_output, void *, lac_dtype,      \
                                                       double *);                                                    \
    template void lac_impute_stream_release<REAL>(void *);
LAC_INSTANTIATE(float)
LAC_INSTANTIATE(double)
