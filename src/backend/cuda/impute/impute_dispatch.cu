/* impute on CUDA: the host driver and the backend table (impute_backend.h),
 * handed out by the gateway.
 *
 * Setup uploads the basis and the observed data once; from then on the
 * iteration stays on the device: the GFT is a copy of C = P_Ω(G) U plus one
 * GEMM over the incomplete vertices, the SVT one batched pass
 * (svt_jacobi.cu, or svt_gram.cu for slices too big for shared memory), the
 * iGFT one GEMM and one element-wise kernel. Each phase reads back only its
 * figures (per-slice sums, the missing error's partial sums), added on the
 * host in a fixed order so that a run repeats bit for bit. The output is
 * downloaded once, at the end. Precision follows the basis (float32 or
 * float64); every phase of a state uses the precision fixed at setup. */
#include "backend/cuda/impute/impute_cuda.h"

#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <new>
#include <functional>
#include <thread>
#include <vector>

namespace {

cublasStatus_t axpy(cublasHandle_t h, int64_t n, float alpha, const float *x, float *y)
{
    return cublasSaxpy_64(h, n, &alpha, x, 1, y, 1);
}

cublasStatus_t axpy(cublasHandle_t h, int64_t n, double alpha, const double *x, double *y)
{
    return cublasDaxpy_64(h, n, &alpha, x, 1, y, 1);
}

template <typename REAL> cudaDataType real_type();
template <> cudaDataType real_type<float>() { return CUDA_R_32F; }
template <> cudaDataType real_type<double>() { return CUDA_R_64F; }

template <typename T> lac_status device_alloc(lac_ctx_t ctx, T **p, int64_t count)
{
    LAC_CUDA_CHECK(ctx, cudaMalloc((void **)p, (size_t)(count > 0 ? count : 1) * sizeof(T)));
    return LAC_SUCCESS;
}

lac_status split_tf32(lac_ctx_t ctx, const float *a, float *hi, float *lo, int64_t count)
{
    return lac_impute_cuda_split_tf32(ctx, a, hi, lo, count);
}

lac_status split_tf32(lac_ctx_t ctx, const double *, double *, double *, int64_t)
{
    return lac_error(ctx, LAC_ERR_INTERNAL, "3xTF32 asked for float64 operands");
}

/* The largest min(m, n) the Jacobi SVT takes by default (see setup). */
#define JACOBI_MAX_SIDE 96

/* Bytes of device memory the Gram path may use for its chunks. */
size_t gram_budget(lac_ctx_t ctx, size_t bound = SIZE_MAX)
{
    size_t free_bytes = 0, total = 0;
    if (cudaMemGetInfo(&free_bytes, &total) != cudaSuccess) return (size_t)1 << 30 < bound ? (size_t)1 << 30 : bound;
    size_t budget = free_bytes / 2;
    if (budget > ((size_t)4 << 30)) budget = (size_t)4 << 30;
    return budget < bound ? budget : bound;
}

/* The SVT slices [first, first + count) that another device of the context
 * (a share) thresholds: its copies of Ĝ and of the truth's slices, its part
 * of the estimate (kept there between passes, copied back after each), λ,
 * the figures and the Jacobi vectors. */
template <typename REAL> struct svt_part {
    int share = 0, device = 0;
    int64_t first = 0, count = 0;
    REAL *a = nullptr, *out = nullptr, *truth = nullptr;
    double *lambda = nullptr, *stats = nullptr, *v = nullptr;
    lac_svt_gram_cache *gram_cache = nullptr;
    /* The GFT split by columns: this part's columns of U_I (ni x count) and
     * of C (mn x count), X_I's copy and this part's iGFT product (mn x ni). */
    REAL *u = nullptr, *c = nullptr, *x = nullptr, *xp = nullptr;
    void release()
    {
        int current = 0;
        cudaGetDevice(&current);
        cudaSetDevice(device);
        cudaFree(a);
        cudaFree(out);
        cudaFree(truth);
        cudaFree(lambda);
        cudaFree(stats);
        cudaFree(v);
        cudaFree(u);
        cudaFree(c);
        cudaFree(x);
        cudaFree(xp);
        lac_svt_gram_cache_free(gram_cache);
        cudaSetDevice(current);
    }
};

template <typename REAL> struct impute_cuda {
    lac_impute_problem problem;
    int64_t N, mn, ni;
    REAL *u = nullptr, *u_inc = nullptr, *c = nullptr, *ghat = nullptr, *gest = nullptr;
    REAL *x_inc = nullptr, *x_est = nullptr, *x_new = nullptr, *true_hat = nullptr, *true_inc = nullptr;
    unsigned char *obs_inc = nullptr;
    double *lambda = nullptr, *stats = nullptr, *partial = nullptr;
    double *v = nullptr;   /* each slice's right singular vectors, the next pass's start (Jacobi, or the Gram
                              route's subspace pass) */
    bool keep_vectors = false;
    lac_svt_gram_cache *gram_cache = nullptr;   /* Gram path: its buffers, kept between passes */
    size_t svt_budget = 0;                      /* the plan's bound on the Gram path's chunks */
    int v_valid = 0;
    int warm_start = 1;    /* LACUNA_IMPUTE_CUDA_WARM */
    double *stats_host = nullptr, *partial_host = nullptr;   /* pinned */
    bool jacobi = true;
    int gemm_mode = LAC_GEMM_FP32;   /* the GFT and iGFT GEMMs (problem.gemm_tf32; float32 only) */
    REAL *u_inc_hi = nullptr, *u_inc_lo = nullptr;   /* 3xTF32: U_I split once */
    REAL *a_hi = nullptr, *a_lo = nullptr;           /* 3xTF32: the other operand, split a GEMM */
    int64_t own = 0;                      /* slices [0, own) thresholded on the first device */
    svt_part<REAL> parts[LAC_MAX_DEVICES];   /* [1, part_count): the other shares' */
    int part_count = 1;
    bool gft_split = false;               /* each share also runs its columns' GFT and iGFT */
    REAL *recv = nullptr;                 /* a share's iGFT product, received on the first device */
    lac_phase_clock *clock = nullptr;     /* the handle's (LACUNA_IMPUTE_CUDA_PHASES), or NULL */

    ~impute_cuda()
    {
        for (int i = 1; i < part_count; i++) parts[i].release();
        cudaFree(recv);
        cudaFree(u);
        cudaFree(u_inc);
        cudaFree(c);
        cudaFree(ghat);
        cudaFree(gest);
        if (x_est != x_inc) cudaFree(x_est);
        if (x_new != x_inc) cudaFree(x_new);
        cudaFree(x_inc);
        cudaFree(true_hat);
        cudaFree(true_inc);
        cudaFree(obs_inc);
        cudaFree(lambda);
        cudaFree(stats);
        cudaFree(partial);
        cudaFree(v);
        cudaFree(u_inc_hi);
        cudaFree(u_inc_lo);
        cudaFree(a_hi);
        cudaFree(a_lo);
        lac_svt_gram_cache_free(gram_cache);
        cudaFreeHost(stats_host);
        cudaFreeHost(partial_host);
    }
};

/* The vertices' slices of a host tensor into dst (mn x N on the device):
 * the observed part only when mask is set, in chunks of vertices through a
 * staging buffer so that a float64 tensor needs no full-size copy. */
template <typename REAL>
lac_status upload_tensor(lac_ctx_t ctx, const lac_impute_problem *pr, const void *host, lac_dtype dtype, REAL *dst,
                         int mask)
{
    cudaStream_t stream = ctx->cuda->stream;
    const int64_t N = pr->N, mn = pr->m * pr->n;
    const size_t esize = lac_dtype_size(dtype);
    int64_t chunk = (int64_t)(((size_t)256 << 20) / ((size_t)mn * esize + 1));
    if (chunk < 1) chunk = 1;
    if (chunk > N) chunk = N;
    void *staging = nullptr;
    unsigned char *state = nullptr, *entry = nullptr;
    lac_status st = LAC_SUCCESS;
    LAC_CUDA_CHECK_GOTO(ctx, cudaMalloc(&staging, (size_t)(chunk * mn) * esize), st, done);
    if (mask) {
        LAC_CUDA_CHECK_GOTO(ctx, cudaMalloc((void **)&state, (size_t)chunk), st, done);
        if (pr->entry_observed) LAC_CUDA_CHECK_GOTO(ctx, cudaMalloc((void **)&entry, (size_t)(chunk * mn)), st, done);
    }
    for (int64_t v = 0; v < N; v += chunk) {
        const int64_t n = N - v < chunk ? N - v : chunk;
        LAC_CUDA_CHECK_GOTO(ctx, cudaMemcpyAsync(staging, (const char *)host + (size_t)(v * mn) * esize,
                                                 (size_t)(n * mn) * esize, cudaMemcpyHostToDevice, stream),
                            st, done);
        if (mask) {
            LAC_CUDA_CHECK_GOTO(ctx, cudaMemcpyAsync(state, pr->vertex_state + v, (size_t)n, cudaMemcpyHostToDevice, stream),
                                st, done);
            if (entry)
                LAC_CUDA_CHECK_GOTO(ctx, cudaMemcpyAsync(entry, pr->entry_observed + v * mn, (size_t)(n * mn),
                                                         cudaMemcpyHostToDevice, stream),
                                    st, done);
        }
        LAC_CHECK_GOTO(lac_impute_cuda_load<REAL>(ctx, dst + v * mn, staging, dtype, n, mn, state, entry, mask), st, done);
    }
    LAC_CUDA_CHECK_GOTO(ctx, cudaStreamSynchronize(stream), st, done);
done:
    cudaStreamSynchronize(stream);
    cudaFree(staging);
    cudaFree(state);
    cudaFree(entry);
    return st;
}

/* The SVT's slices split across the context's shares in proportion to their
 * speed, the first device keeping [0, own); each other share gets its
 * buffers (the estimate's part zeroed, the truth's slices copied once). */
template <typename REAL> lac_status split_svt(lac_ctx_t ctx, impute_cuda<REAL> *s)
{
    lac_cuda_state *first = ctx->cuda;
    const int shares = first->share_count;
    const int64_t N = s->N, mn = s->mn, p = s->problem.m < s->problem.n ? s->problem.m : s->problem.n;
    int64_t start[LAC_MAX_DEVICES + 1];
    lac_cuda_share_split(first, N, start);
    s->own = start[1 < shares ? 1 : shares];
    s->part_count = shares;
    /* 3xTF32 keeps its split operands on the first device: its GEMMs stay there. */
    s->gft_split = shares > 1 && s->ni > 0 && s->gemm_mode != LAC_GEMM_3XTF32;
    if (s->gft_split) LAC_CHECK(device_alloc(ctx, &s->recv, mn * s->ni));
    for (int i = 1; i < shares; i++) {
        svt_part<REAL> &part = s->parts[i];
        part.share = i;
        part.device = first->shares[i]->device;
        part.first = start[i];
        part.count = start[i + 1] - start[i];
        lac_cuda_share_scope scope(ctx, i);
        cudaStream_t stream = ctx->cuda->stream;
        const int64_t n = part.count;
        LAC_CHECK(device_alloc(ctx, &part.a, n * mn));
        LAC_CHECK(device_alloc(ctx, &part.out, n * mn));
        LAC_CHECK(device_alloc(ctx, &part.lambda, n));
        LAC_CHECK(device_alloc(ctx, &part.stats, n * LAC_SVT_STATS));
        if (s->keep_vectors) LAC_CHECK(device_alloc(ctx, &part.v, n * p * p));
        LAC_CUDA_CHECK(ctx, cudaMemsetAsync(part.out, 0, (size_t)(n * mn) * sizeof(REAL), stream));
        if (s->gft_split) {
            const int64_t ni = s->ni;
            LAC_CHECK(device_alloc(ctx, &part.u, ni * n));
            LAC_CHECK(device_alloc(ctx, &part.c, mn * n));
            LAC_CHECK(device_alloc(ctx, &part.x, mn * ni));
            LAC_CHECK(device_alloc(ctx, &part.xp, mn * ni));
            /* U_I is ni x N column-major and C mn x N: a part's columns are contiguous. */
            LAC_CUDA_CHECK(ctx, cudaMemcpyPeerAsync(part.u, part.device, s->u_inc + part.first * ni, first->device,
                                                    (size_t)(ni * n) * sizeof(REAL), stream));
            LAC_CUDA_CHECK(ctx, cudaMemcpyPeerAsync(part.c, part.device, s->c + part.first * mn, first->device,
                                                    (size_t)(mn * n) * sizeof(REAL), stream));
        }
        if (s->true_hat) {
            LAC_CHECK(device_alloc(ctx, &part.truth, n * mn));
            LAC_CUDA_CHECK(ctx, cudaMemcpyPeerAsync(part.truth, part.device, s->true_hat + part.first * mn, first->device,
                                                    (size_t)(n * mn) * sizeof(REAL), stream));
        }
        LAC_CUDA_CHECK(ctx, cudaStreamSynchronize(stream));
    }
    if (shares > 1)
        lac_log(ctx, LAC_LOG_INFO, "impute (cuda): the SVT's %lld slices split across %d devices, %lld on the first%s",
                (long long)N, shares, (long long)s->own, s->gft_split ? "; the GFT split by the same columns" : "");
    return LAC_SUCCESS;
}

/* Jacobi in shared memory for small slices; beyond JACOBI_MAX_SIDE the
 * Gram route is faster inside an iteration even where Jacobi fits (H200:
 * 128 x 128 x 2000 26.0 ms against 32.7; 64 x 64 x 2100 7.8 against 4.8;
 * bench/RESULTS.md). */
template <typename REAL> bool use_jacobi(lac_ctx_t ctx, const lac_impute_problem *pr)
{
    const bool fits = lac_svt_jacobi_fits<REAL>(ctx->cuda->prop, pr->n, pr->m);
    const char *path = lac_knob_string(ctx, LAC_KNOB_IMPUTE_CUDA_SVT);
    const int64_t side = pr->m < pr->n ? pr->m : pr->n;
    if (path && strcmp(path, "gram") == 0) return false;
    if (path && strcmp(path, "jacobi") == 0) return fits;
    return fits && side <= JACOBI_MAX_SIDE;
}

/* The memory plan against LACUNA_CUDA_MEMORY_CAP, or the device's free
 * memory less a margin for the libraries' own workspaces. */
template <typename REAL> lac_status plan_for(lac_ctx_t ctx, const lac_impute_problem *pr, lac_impute_plan *plan)
{
    const bool jacobi = use_jacobi<REAL>(ctx, pr);
    const int64_t p = pr->m < pr->n ? pr->m : pr->n, ni = pr->num_incomplete;
    lac_impute_footprint f;
    memset(&f, 0, sizeof f);
    f.N = pr->N;
    f.mn = pr->m * pr->n;
    f.ni = ni;
    f.real_size = sizeof(REAL);
    f.tensor_size = lac_dtype_size(pr->tensor_dtype);
    if (pr->truth && lac_dtype_size(pr->truth_dtype) > f.tensor_size) f.tensor_size = lac_dtype_size(pr->truth_dtype);
    if (sizeof(REAL) > f.tensor_size) f.tensor_size = sizeof(REAL);   /* finish's tiles stage the estimate */
    f.truth = pr->truth != nullptr;
    f.momentum = pr->momentum;
    f.entry_mask = pr->entry_observed != nullptr && ni > 0;
    f.split_tf32 = sizeof(REAL) == sizeof(float) && pr->gemm_tf32 == LAC_GEMM_3XTF32 && ni > 0;
    f.svt_slice_bytes = jacobi ? (size_t)(p * p) * sizeof(double) : 0;
    f.svt_resident_slice_bytes = !jacobi && lac_svt_subspace_on<REAL>(ctx) ? (size_t)(p * p) * sizeof(double) : 0;
    if (!jacobi) lac_svt_gram_bytes(ctx, pr->n, pr->m, &f.svt_work_slice, &f.svt_work_fixed);
    f.stats_slice = LAC_SVT_STATS * sizeof(double);
    size_t free_bytes = 0, total = 0;
    LAC_CUDA_CHECK(ctx, cudaMemGetInfo(&free_bytes, &total));
    size_t margin = free_bytes / 20 > ((size_t)256 << 20) ? free_bytes / 20 : (size_t)256 << 20;
    size_t available = free_bytes > margin ? free_bytes - margin : 0;
    const char *cap_text = lac_knob_string(ctx, LAC_KNOB_CUDA_MEMORY_CAP);
    uint64_t cap = 0;
    const bool capped = cap_text && *cap_text;
    if (capped && lac_parse_bytes(cap_text, &cap) != 0)
        return lac_error(ctx, LAC_ERR_VALUE, "LACUNA_CUDA_MEMORY_CAP=%s is not a byte count (digits, optionally k, M, G or T)",
                         cap_text);
    if (capped && cap < available) available = (size_t)cap;
    lac_impute_plan_make(&f, available, plan);
    if (plan->mode == LAC_IMPUTE_TOO_SMALL) {
        const bool by_cap = capped && cap <= available;
        return lac_error(ctx, by_cap ? LAC_ERR_VALUE : LAC_ERR_OUT_OF_MEMORY,
                         "impute (cuda): %zu bytes of device memory (%s) is below the %zu bytes a streamed run of this "
                         "tensor needs with one frequency a slab (%zu of them for the incomplete vertices' slices, "
                         "which stay on the device; the resident plan needs %zu)",
                         available, by_cap ? "LACUNA_CUDA_MEMORY_CAP" : "free", plan->min_bytes, plan->fixed_bytes,
                         plan->resident_bytes);
    }
    const double mb = 1.0 / (1 << 20);
    if (plan->mode == LAC_IMPUTE_STREAMED)
        lac_log(ctx, LAC_LOG_INFO,
                "impute (cuda): the resident plan needs %.1f MB of %.1f MB: streamed from pinned host memory in slabs "
                "of %lld frequencies (%.1f MB on the device)",
                (double)plan->resident_bytes * mb, (double)available * mb, (long long)plan->slab,
                (double)(plan->fixed_bytes + plan->slab_bytes) * mb);
    return LAC_SUCCESS;
}

template <typename REAL>
lac_status setup(lac_ctx_t ctx, const lac_impute_problem *pr, size_t svt_budget, impute_cuda<REAL> **out,
                 double *truth_sq, double *truth_missing_sq)
{
    impute_cuda<REAL> *s = new (std::nothrow) impute_cuda<REAL>();
    if (!s) return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "impute state");
    s->problem = *pr;
    const int64_t N = s->N = pr->N, mn = s->mn = pr->m * pr->n, ni = s->ni = pr->num_incomplete;
    cudaStream_t stream = ctx->cuda->stream;
    cublasHandle_t blas;
    int64_t *index = nullptr;
    unsigned char *obs_host = nullptr;
    lac_status st = LAC_SUCCESS;
    LAC_CHECK_GOTO(lac_cuda_cublas(ctx, &blas), st, fail);
    s->jacobi = use_jacobi<REAL>(ctx, pr);
    s->svt_budget = svt_budget;
    s->warm_start = lac_knob_int(ctx, LAC_KNOB_IMPUTE_CUDA_WARM, 1) != 0;
    s->gemm_mode = sizeof(REAL) == sizeof(float) ? pr->gemm_tf32 : LAC_GEMM_FP32;
    /* The Jacobi path keeps V only for the warm start (without it a cold
     * pass does not carry V at all); the Gram route for its subspace pass. */
    s->keep_vectors = s->jacobi ? s->warm_start : lac_svt_subspace_on<REAL>(ctx);
    if (s->keep_vectors) {
        const int64_t p = pr->m < pr->n ? pr->m : pr->n;
        LAC_CHECK_GOTO(device_alloc(ctx, &s->v, N * p * p), st, fail);
    }

    LAC_CHECK_GOTO(device_alloc(ctx, &s->u, N * N), st, fail);
    LAC_CHECK_GOTO(device_alloc(ctx, &s->u_inc, ni * N), st, fail);
    LAC_CHECK_GOTO(device_alloc(ctx, &s->c, mn * N), st, fail);
    LAC_CHECK_GOTO(device_alloc(ctx, &s->ghat, mn * N), st, fail);
    LAC_CHECK_GOTO(device_alloc(ctx, &s->gest, mn * N), st, fail);
    LAC_CHECK_GOTO(device_alloc(ctx, &s->x_inc, mn * ni), st, fail);
    s->x_est = s->x_new = s->x_inc;
    if (pr->momentum) {
        LAC_CHECK_GOTO(device_alloc(ctx, &s->x_est, mn * ni), st, fail);
        LAC_CHECK_GOTO(device_alloc(ctx, &s->x_new, mn * ni), st, fail);
    }
    LAC_CHECK_GOTO(device_alloc(ctx, &s->lambda, N), st, fail);
    LAC_CHECK_GOTO(device_alloc(ctx, &s->stats, N * LAC_SVT_STATS), st, fail);
    LAC_CHECK_GOTO(device_alloc(ctx, &s->partial, LAC_IMPUTE_CUDA_PARTIALS), st, fail);
    LAC_CUDA_CHECK_GOTO(ctx, cudaMallocHost((void **)&s->stats_host, (size_t)(N * LAC_SVT_STATS) * sizeof(double)), st,
                        fail);
    LAC_CUDA_CHECK_GOTO(ctx, cudaMallocHost((void **)&s->partial_host, LAC_IMPUTE_CUDA_PARTIALS * sizeof(double)), st,
                        fail);

    LAC_CUDA_CHECK_GOTO(ctx, cudaMemcpyAsync(s->u, pr->gft->vectors, (size_t)(N * N) * sizeof(REAL),
                                             cudaMemcpyHostToDevice, stream),
                        st, fail);
    if (ni > 0) {
        LAC_CHECK_GOTO(device_alloc(ctx, &index, ni), st, fail);
        LAC_CUDA_CHECK_GOTO(ctx, cudaMemcpyAsync(index, pr->incomplete, (size_t)ni * sizeof(int64_t),
                                                 cudaMemcpyHostToDevice, stream),
                            st, fail);
        /* U_I: the incomplete vertices' rows, so that the GFT and iGFT of the
         * changing part cost ni/N of full ones. */
        LAC_CHECK_GOTO(lac_impute_cuda_gather_rows<REAL>(ctx, s->u_inc, s->u, index, ni, N, N), st, fail);
        if (s->gemm_mode == LAC_GEMM_3XTF32) {
            LAC_CHECK_GOTO(device_alloc(ctx, &s->u_inc_hi, ni * N), st, fail);
            LAC_CHECK_GOTO(device_alloc(ctx, &s->u_inc_lo, ni * N), st, fail);
            LAC_CHECK_GOTO(device_alloc(ctx, &s->a_hi, mn * N), st, fail);
            LAC_CHECK_GOTO(device_alloc(ctx, &s->a_lo, mn * N), st, fail);
            LAC_CHECK_GOTO(split_tf32(ctx, s->u_inc, s->u_inc_hi, s->u_inc_lo, ni * N), st, fail);
        }
    }
    /* C = P_Ω(G) U. */
    LAC_CHECK_GOTO(upload_tensor<REAL>(ctx, pr, pr->tensor, pr->tensor_dtype, s->ghat, 1), st, fail);
    {
        cublasStatus_t bs = lac_gemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, mn, N, N, (REAL)1, s->ghat, mn, s->u, N, (REAL)0, s->c, mn);
        if (bs != CUBLAS_STATUS_SUCCESS) {
            st = lac_cublas_fail(ctx, (int)bs, "C = P(G) U", __FILE__, __LINE__);
            goto fail;
        }
    }
    if (pr->entry_observed && ni > 0) {
        LAC_CHECK_GOTO(device_alloc(ctx, &s->obs_inc, mn * ni), st, fail);
        obs_host = (unsigned char *)malloc((size_t)(mn * ni));
        if (!obs_host) {
            st = lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "entry masks of %lld vertices", (long long)ni);
            goto fail;
        }
        for (int64_t i = 0; i < ni; i++) memcpy(obs_host + i * mn, pr->entry_observed + pr->incomplete[i] * mn, (size_t)mn);
        LAC_CUDA_CHECK_GOTO(ctx, cudaMemcpyAsync(s->obs_inc, obs_host, (size_t)(mn * ni), cudaMemcpyHostToDevice, stream),
                            st, fail);
    }
    LAC_CUDA_CHECK_GOTO(ctx, cudaMemsetAsync(s->x_inc, 0, (size_t)(mn * ni) * sizeof(REAL), stream), st, fail);
    if (s->x_est != s->x_inc)
        LAC_CUDA_CHECK_GOTO(ctx, cudaMemsetAsync(s->x_est, 0, (size_t)(mn * ni) * sizeof(REAL), stream), st, fail);
    LAC_CUDA_CHECK_GOTO(ctx, cudaMemsetAsync(s->gest, 0, (size_t)(mn * N) * sizeof(REAL), stream), st, fail);

    if (pr->truth) {
        LAC_CHECK_GOTO(device_alloc(ctx, &s->true_hat, mn * N), st, fail);
        LAC_CHECK_GOTO(device_alloc(ctx, &s->true_inc, mn * ni), st, fail);
        LAC_CHECK_GOTO(upload_tensor<REAL>(ctx, pr, pr->truth, pr->truth_dtype, s->ghat, 0), st, fail);
        cublasStatus_t bs = lac_gemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, mn, N, N, (REAL)1, s->ghat, mn, s->u, N, (REAL)0,
                                 s->true_hat, mn);
        if (bs != CUBLAS_STATUS_SUCCESS) {
            st = lac_cublas_fail(ctx, (int)bs, "U^T G", __FILE__, __LINE__);
            goto fail;
        }
        /* The norms errors are relative to, in float64 on the device (the
         * truth's REAL values, as the host's loop read them). */
        LAC_CHECK_GOTO(lac_impute_cuda_sq_sum<REAL>(ctx, mn * N, s->ghat, nullptr, nullptr, s->partial, s->partial_host,
                                                    truth_sq),
                       st, fail);
        if (ni > 0) {
            LAC_CHECK_GOTO(lac_impute_cuda_gather_columns<REAL>(ctx, s->true_inc, s->ghat, index, ni, mn), st, fail);
            LAC_CHECK_GOTO(lac_impute_cuda_sq_sum<REAL>(ctx, mn * ni, s->true_inc, nullptr, s->obs_inc, s->partial,
                                                        s->partial_host, truth_missing_sq),
                           st, fail);
        } else {
            *truth_missing_sq = 0;
        }
    }
    LAC_CUDA_CHECK_GOTO(ctx, cudaStreamSynchronize(stream), st, fail);
    LAC_CHECK_GOTO(split_svt<REAL>(ctx, s), st, fail);
    cudaFree(index);
    free(obs_host);
    *out = s;
    return LAC_SUCCESS;
fail:
    cudaStreamSynchronize(stream);
    cudaFree(index);
    free(obs_host);
    delete s;
    return st;
}

/* C = A op(U_I) + beta C, A m x k (lda m), for the loop's GFT (op N) and iGFT
 * (op T), in the problem's GEMM mode; U_I from element u_at on (a range of
 * its columns, op N, or of its rows, op T: a rank's part). 3xTF32: A = A_hi +
 * A_lo and U_I the same, C = A_lo U_hi + A_hi U_lo + A_hi U_hi on TF32 tensor
 * cores (the small terms first), dropping only A_lo U_lo (~2^-22 relative). */
template <typename REAL>
lac_status loop_gemm(lac_ctx_t ctx, impute_cuda<REAL> *s, cublasOperation_t tb, int64_t m, int64_t n, int64_t k,
                     const REAL *a, REAL beta, REAL *c, int64_t u_at = 0)
{
    cublasHandle_t blas;
    LAC_CHECK(lac_cuda_cublas(ctx, &blas));
    lac_math_mode_scope mode(blas, s->gemm_mode != LAC_GEMM_FP32);
    const int64_t ldb = s->ni;
    if (s->gemm_mode != LAC_GEMM_3XTF32) {
        LAC_CUBLAS_CHECK(ctx, lac_gemm(blas, CUBLAS_OP_N, tb, m, n, k, (REAL)1, a, m, s->u_inc + u_at, ldb, beta, c, m));
        return LAC_SUCCESS;
    }
    LAC_CHECK(split_tf32(ctx, a, s->a_hi, s->a_lo, m * k));
    const REAL *u_hi = s->u_inc_hi + u_at, *u_lo = s->u_inc_lo + u_at;
    LAC_CUBLAS_CHECK(ctx, lac_gemm(blas, CUBLAS_OP_N, tb, m, n, k, (REAL)1, s->a_lo, m, u_hi, ldb, beta, c, m));
    LAC_CUBLAS_CHECK(ctx, lac_gemm(blas, CUBLAS_OP_N, tb, m, n, k, (REAL)1, s->a_hi, m, u_lo, ldb, (REAL)1, c, m));
    LAC_CUBLAS_CHECK(ctx, lac_gemm(blas, CUBLAS_OP_N, tb, m, n, k, (REAL)1, s->a_hi, m, u_hi, ldb, (REAL)1, c, m));
    return LAC_SUCCESS;
}

/* Waits for the other shares' queued work. */
template <typename REAL> lac_status svt_parts_wait(lac_ctx_t ctx, impute_cuda<REAL> *s)
{
    for (int i = 1; i < s->part_count; i++) {
        lac_cuda_share_scope scope(ctx, i);
        LAC_CUDA_CHECK(ctx, cudaStreamSynchronize(ctx->cuda->stream));
    }
    return LAC_SUCCESS;
}

/* C = A op(B) + beta C on the context's current share, FP32 or TF32. */
template <typename REAL>
lac_status share_gemm(lac_ctx_t ctx, bool tf32, cublasOperation_t tb, int64_t m, int64_t n, int64_t k, const REAL *a,
                      const REAL *b, int64_t ldb, REAL beta, REAL *c)
{
    cublasHandle_t blas;
    LAC_CHECK(lac_cuda_cublas(ctx, &blas));
    lac_math_mode_scope mode(blas, tf32);
    LAC_CUBLAS_CHECK(ctx, lac_gemm(blas, CUBLAS_OP_N, tb, m, n, k, (REAL)1, a, m, b, ldb, beta, c, m));
    return LAC_SUCCESS;
}

/* The GFT split by columns: each other share Ĝ_part = C_part + X_I U_I,part
 * into its SVT input (X_I sent over), the first device its own columns. */
template <typename REAL> lac_status gft_split(lac_ctx_t ctx, impute_cuda<REAL> *s)
{
    const int first_device = ctx->cuda->device;
    const int64_t mn = s->mn, ni = s->ni;
    const bool tf32 = s->gemm_mode == LAC_GEMM_TF32;
    lac_status st = LAC_SUCCESS;
    for (int i = 1; i < s->part_count && st == LAC_SUCCESS; i++) {
        svt_part<REAL> &part = s->parts[i];
        lac_cuda_share_scope scope(ctx, i);
        cudaStream_t stream = ctx->cuda->stream;
        cudaError_t ce = cudaMemcpyPeerAsync(part.x, part.device, s->x_inc, first_device, (size_t)(mn * ni) * sizeof(REAL),
                                             stream);
        if (ce == cudaSuccess)
            ce = cudaMemcpyAsync(part.a, part.c, (size_t)(mn * part.count) * sizeof(REAL), cudaMemcpyDeviceToDevice, stream);
        if (ce != cudaSuccess) st = lac_cuda_fail(ctx, ce, "the GFT's inputs to another device", __FILE__, __LINE__);
        else if (part.count > 0)
            st = share_gemm<REAL>(ctx, tf32, CUBLAS_OP_N, mn, part.count, ni, part.x, part.u, ni, (REAL)1, part.a);
    }
    cudaStream_t stream = ctx->cuda->stream;
    if (st == LAC_SUCCESS) {
        cudaError_t ce = cudaMemcpyAsync(s->ghat, s->c, (size_t)(mn * s->own) * sizeof(REAL), cudaMemcpyDeviceToDevice,
                                         stream);
        if (ce != cudaSuccess) st = lac_cuda_fail(ctx, ce, "C into Ĝ", __FILE__, __LINE__);
        else if (s->own > 0)
            st = share_gemm<REAL>(ctx, tf32, CUBLAS_OP_N, mn, s->own, ni, s->x_inc, s->u_inc, ni, (REAL)1, s->ghat);
    }
    lac_status waited = svt_parts_wait<REAL>(ctx, s);
    LAC_CHECK(st);
    LAC_CHECK(waited);
    LAC_CUDA_CHECK(ctx, cudaStreamSynchronize(stream));
    return LAC_SUCCESS;
}

template <typename REAL> lac_status gft(lac_ctx_t ctx, impute_cuda<REAL> *s)
{
    if (s->gft_split) return gft_split<REAL>(ctx, s);
    cudaStream_t stream = ctx->cuda->stream;
    LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(s->ghat, s->c, (size_t)(s->mn * s->N) * sizeof(REAL), cudaMemcpyDeviceToDevice,
                                        stream));
    /* Ĝ = C + X_I U_I (Algorithm 1 lines 7-8): one GEMM (three for 3xTF32). */
    if (s->ni > 0) LAC_CHECK(loop_gemm<REAL>(ctx, s, CUBLAS_OP_N, s->mn, s->N, s->ni, s->x_inc, (REAL)1, s->ghat));
    /* The front end times each phase. */
    LAC_CUDA_CHECK(ctx, cudaStreamSynchronize(stream));
    return LAC_SUCCESS;
}

/* Share i's part of an SVT pass (ctx: a context whose state is that share,
 * its device current): Ĝ's slices in, the pass, the figures and the
 * estimate's slices back to the first device (whose SVT writes only [0, own)). */
template <typename REAL>
lac_status svt_part_run(lac_ctx_t ctx, impute_cuda<REAL> *s, int i, const double *lambda, int first_device)
{
    const int64_t mn = s->mn;
    svt_part<REAL> &part = s->parts[i];
    cudaStream_t stream = ctx->cuda->stream;
    const size_t bytes = (size_t)(part.count * mn) * sizeof(REAL);
    if (!s->gft_split)   /* else the share's GFT left its slices in part.a */
        LAC_CUDA_CHECK(ctx,
                       cudaMemcpyPeerAsync(part.a, part.device, s->ghat + part.first * mn, first_device, bytes, stream));
    if (lambda)
        LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(part.lambda, lambda + part.first, (size_t)part.count * sizeof(double),
                                            cudaMemcpyHostToDevice, stream));
    LAC_CHECK(lac_svt_slices<REAL>(ctx, s->jacobi, s->problem, part.count, part.a, part.out, part.truth,
                                   lambda ? part.lambda : nullptr, part.stats, part.v, s->v_valid, gram_budget(ctx),
                                   &part.gram_cache));
    LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(s->stats_host + part.first * LAC_SVT_STATS, part.stats,
                                        (size_t)(part.count * LAC_SVT_STATS) * sizeof(double),
                                        cudaMemcpyDeviceToHost, stream));
    LAC_CUDA_CHECK(ctx, cudaMemcpyPeerAsync(s->gest + part.first * mn, first_device, part.out, part.device, bytes,
                                            stream));
    return LAC_SUCCESS;
}

/* The other shares' parts of an SVT pass, each from its own host thread: the
 * Gram path waits on its device between chunks, so from one thread the
 * devices would take turns. A thread works on a copy of the context whose
 * device state is its share (the scope of one thread would switch it for
 * all); a failure's message is copied back. Falls back to this thread when
 * no thread can be started. Returns after every part has been queued and
 * run; the first device's own part runs in `own` meanwhile. */
struct svt_share_run {
    struct lac_ctx local;
    lac_status status;
};

template <typename REAL>
lac_status svt_parts(lac_ctx_t ctx, impute_cuda<REAL> *s, const double *lambda, const std::function<lac_status()> &own)
{
    const int first_device = ctx->cuda->device;
    std::vector<svt_share_run> runs((size_t)s->part_count);
    std::vector<std::thread> threads;
    for (int i = 1; i < s->part_count; i++) {
        runs[i].local = *ctx;
        runs[i].local.cuda = ctx->cuda->shares[i];
        runs[i].status = LAC_SUCCESS;
        auto work = [&runs, s, i, lambda, first_device] {
            svt_share_run &r = runs[i];
            cudaSetDevice(r.local.cuda->device);
            r.status = svt_part_run<REAL>(&r.local, s, i, lambda, first_device);
        };
        try {
            threads.emplace_back(work);
        } catch (...) {
            work();
        }
    }
    lac_status st = own();
    for (std::thread &t : threads) t.join();
    cudaSetDevice(first_device);
    for (int i = 1; i < s->part_count; i++)
        if (runs[i].status < 0 && st >= 0) {
            memcpy(ctx->last_error, runs[i].local.last_error, sizeof ctx->last_error);
            st = runs[i].status;
        }
    return st;
}

template <typename REAL>
lac_status svt(lac_ctx_t ctx, impute_cuda<REAL> *s, const double *lambda, double *sigma_max, lac_impute_svt_stats *out)
{
    cudaStream_t stream = ctx->cuda->stream;
    const int64_t N = s->N;
    const int warm = s->v_valid;
    /* The first device's own slices, while the other shares run theirs. */
    auto own = [&]() -> lac_status {
        if (lambda)
            LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(s->lambda, lambda, (size_t)s->own * sizeof(double),
                                                cudaMemcpyHostToDevice, stream));
        return lac_svt_slices<REAL>(ctx, s->jacobi, s->problem, s->own, s->ghat, s->gest, s->true_hat,
                                    lambda ? s->lambda : nullptr, s->stats, s->v, warm,
                                    gram_budget(ctx, s->svt_budget), &s->gram_cache);
    };
    lac_status st = s->part_count > 1 ? svt_parts<REAL>(ctx, s, lambda, own) : own();
    lac_status waited = svt_parts_wait<REAL>(ctx, s);
    LAC_CHECK(st);
    LAC_CHECK(waited);
    s->v_valid = s->v != nullptr && s->warm_start;
    LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(s->stats_host, s->stats, (size_t)(s->own * LAC_SVT_STATS) * sizeof(double),
                                        cudaMemcpyDeviceToHost, stream));
    LAC_CUDA_CHECK(ctx, cudaStreamSynchronize(stream));
    return lac_impute_cuda_sum_stats(ctx, s->stats_host, N, s->jacobi, warm, sigma_max, out);
}

/* The iGFT split by columns: each share's Ĝest_part U_I,partᵀ, summed on
 * the first device in share order (run to run the same bits). */
template <typename REAL> lac_status igft_split(lac_ctx_t ctx, impute_cuda<REAL> *s)
{
    const int first_device = ctx->cuda->device;
    const int64_t mn = s->mn, ni = s->ni;
    const bool tf32 = s->gemm_mode == LAC_GEMM_TF32;
    lac_status st = LAC_SUCCESS;
    for (int i = 1; i < s->part_count && st == LAC_SUCCESS; i++) {
        svt_part<REAL> &part = s->parts[i];
        lac_cuda_share_scope scope(ctx, i);
        if (part.count > 0)
            st = share_gemm<REAL>(ctx, tf32, CUBLAS_OP_T, mn, ni, part.count, part.out, part.u, ni, (REAL)0, part.xp);
    }
    cudaStream_t stream = ctx->cuda->stream;
    if (st == LAC_SUCCESS) {
        if (s->own > 0)
            st = share_gemm<REAL>(ctx, tf32, CUBLAS_OP_T, mn, ni, s->own, s->gest, s->u_inc, ni, (REAL)0, s->x_new);
        else if (cudaMemsetAsync(s->x_new, 0, (size_t)(mn * ni) * sizeof(REAL), stream) != cudaSuccess)
            st = lac_error(ctx, LAC_ERR_CUDA, "clearing the iGFT product");
    }
    lac_status waited = svt_parts_wait<REAL>(ctx, s);
    LAC_CHECK(st);
    LAC_CHECK(waited);
    cublasHandle_t blas;
    LAC_CHECK(lac_cuda_cublas(ctx, &blas));
    for (int i = 1; i < s->part_count; i++) {
        svt_part<REAL> &part = s->parts[i];
        if (part.count == 0) continue;
        LAC_CUDA_CHECK(ctx, cudaMemcpyPeerAsync(s->recv, first_device, part.xp, part.device,
                                                (size_t)(mn * ni) * sizeof(REAL), stream));
        LAC_CUBLAS_CHECK(ctx, axpy(blas, mn * ni, (REAL)1, s->recv, s->x_new));
    }
    return LAC_SUCCESS;
}

template <typename REAL> lac_status igft(lac_ctx_t ctx, impute_cuda<REAL> *s, double momentum, double *missing_error_sq)
{
    *missing_error_sq = 0;
    if (s->ni == 0) return LAC_SUCCESS;
    /* G^est on the incomplete vertices: Ĝest U_Iᵀ (line 10). */
    if (s->gft_split) LAC_CHECK(igft_split<REAL>(ctx, s));
    else LAC_CHECK(loop_gemm<REAL>(ctx, s, CUBLAS_OP_T, s->mn, s->ni, s->N, s->gest, (REAL)0, s->x_new));
    lac_phase_mark(s->clock, LAC_PHASE_STEP0, ctx->cuda->stream);
    double err = 0;
    LAC_CHECK(lac_impute_cuda_impute_sum<REAL>(ctx, s->mn * s->ni, s->x_new, s->obs_inc, s->true_inc, s->x_inc, s->x_est,
                                               (REAL)momentum, s->x_est != s->x_inc, s->partial, s->partial_host, &err));
    *missing_error_sq = s->true_inc ? err : 0;
    return LAC_SUCCESS;
}

/* U Ĝest (mn x N) into the host's `full`, through ghat (free now: the last
 * GFT has been thresholded). */
template <typename REAL> lac_status resident_estimate(lac_ctx_t ctx, void *state, REAL *full)
{
    impute_cuda<REAL> *s = (impute_cuda<REAL> *)state;
    const int64_t N = s->N, mn = s->mn;
    cublasHandle_t blas;
    LAC_CHECK(lac_cuda_cublas(ctx, &blas));
    LAC_CUBLAS_CHECK(ctx, lac_gemm(blas, CUBLAS_OP_N, CUBLAS_OP_T, mn, N, N, (REAL)1, s->gest, mn, s->u, N, (REAL)0,
                                   s->ghat, mn));
    cudaStream_t stream = ctx->cuda->stream;
    LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(full, s->ghat, (size_t)(mn * N) * sizeof(REAL), cudaMemcpyDeviceToHost, stream));
    LAC_CUDA_CHECK(ctx, cudaStreamSynchronize(stream));
    return LAC_SUCCESS;
}

template <typename REAL>
lac_status finish(lac_ctx_t ctx, impute_cuda<REAL> *s, lac_impute_output output, void *out, lac_dtype out_dtype,
                  double *error_sq)
{
    lac_impute_problem pr = s->problem;
    if (pr.truth && !s->gft_split) {
        /* The error of U Ĝest against the truth on the device (ghat: the
         * estimate, c: the truth, both free now) instead of the estimate's
         * download and a host pass; the generic finish then only writes. */
        const int64_t N = s->N, mn = s->mn;
        cublasHandle_t blas;
        LAC_CHECK(lac_cuda_cublas(ctx, &blas));
        LAC_CUBLAS_CHECK(ctx, lac_gemm(blas, CUBLAS_OP_N, CUBLAS_OP_T, mn, N, N, (REAL)1, s->gest, mn, s->u, N, (REAL)0,
                                       s->ghat, mn));
        LAC_CHECK(upload_tensor<REAL>(ctx, &pr, pr.truth, pr.truth_dtype, s->c, 0));
        LAC_CHECK(lac_impute_cuda_sq_sum<REAL>(ctx, mn * N, s->ghat, s->c, nullptr, s->partial, s->partial_host, error_sq));
        pr.truth = nullptr;
    }
    return lac_impute_cuda_finish<REAL>(ctx, &pr, resident_estimate<REAL>, s, s->x_est, output, out, out_dtype, error_sq);
}

/* The Laplacian's eigendecomposition (syevd) on the device. */
template <typename REAL>
lac_status eigen(lac_ctx_t ctx, int64_t n, void *host, int vectors, double *eigenvalues)
{
    cudaStream_t stream = ctx->cuda->stream;
    cusolverDnHandle_t solver;
    LAC_CHECK(lac_cuda_cusolver(ctx, &solver));
    REAL *a = nullptr, *w = nullptr, *w_host = nullptr;
    void *dwork = nullptr, *hwork = nullptr;
    int *info = nullptr, info_host = 0;
    cusolverDnParams_t params = nullptr;
    size_t dev_bytes = 0, host_bytes = 0;
    const cusolverEigMode_t mode = vectors ? CUSOLVER_EIG_MODE_VECTOR : CUSOLVER_EIG_MODE_NOVECTOR;
    const double t0 = omp_get_wtime();
    double t1 = t0, t2 = t0;
    bool registered = false;
    lac_status st = LAC_SUCCESS;
    cusolverStatus_t cs;
    LAC_CHECK_GOTO(device_alloc(ctx, &a, n * n), st, done);
    LAC_CHECK_GOTO(device_alloc(ctx, &w, n), st, done);
    LAC_CHECK_GOTO(device_alloc(ctx, &info, 1), st, done);
    w_host = (REAL *)malloc((size_t)n * sizeof(REAL));
    if (!w_host) {
        st = lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "eigenvalues");
        goto done;
    }
    /* The matrix in and the vectors back (130 MB each at N = 4039) at the
     * pinned rate: pinning them in place cost less than the pageable copies
     * (bench/RESULTS.md); where the host refuses, the copies stay pageable. */
    registered = vectors && cudaHostRegister(host, (size_t)(n * n) * sizeof(REAL), cudaHostRegisterDefault) == cudaSuccess;
    if (!registered) cudaGetLastError();
    LAC_CUDA_CHECK_GOTO(ctx, cudaMemcpyAsync(a, host, (size_t)(n * n) * sizeof(REAL), cudaMemcpyHostToDevice, stream), st,
                        done);
    cs = cusolverDnCreateParams(&params);
    if (cs == CUSOLVER_STATUS_SUCCESS)
        cs = cusolverDnXsyevd_bufferSize(solver, params, mode, CUBLAS_FILL_MODE_UPPER, n, real_type<REAL>(), a, n,
                                         real_type<REAL>(), w, real_type<REAL>(), &dev_bytes, &host_bytes);
    if (cs != CUSOLVER_STATUS_SUCCESS) {
        st = lac_cusolver_fail(ctx, (int)cs, "syevd workspace query", __FILE__, __LINE__);
        goto done;
    }
    LAC_CUDA_CHECK_GOTO(ctx, cudaMalloc(&dwork, dev_bytes ? dev_bytes : 1), st, done);
    hwork = malloc(host_bytes ? host_bytes : 1);
    if (!hwork) {
        st = lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "syevd host workspace");
        goto done;
    }
    LAC_CUDA_CHECK_GOTO(ctx, cudaStreamSynchronize(stream), st, done);
    t1 = omp_get_wtime();
    cs = cusolverDnXsyevd(solver, params, mode, CUBLAS_FILL_MODE_UPPER, n, real_type<REAL>(), a, n, real_type<REAL>(), w,
                          real_type<REAL>(), dwork, dev_bytes, hwork, host_bytes, info);
    if (cs != CUSOLVER_STATUS_SUCCESS) {
        st = lac_cusolver_fail(ctx, (int)cs, "cusolverDnXsyevd", __FILE__, __LINE__);
        goto done;
    }
    LAC_CUDA_CHECK_GOTO(ctx, cudaMemcpyAsync(&info_host, info, sizeof(int), cudaMemcpyDeviceToHost, stream), st, done);
    LAC_CUDA_CHECK_GOTO(ctx, cudaMemcpyAsync(w_host, w, (size_t)n * sizeof(REAL), cudaMemcpyDeviceToHost, stream), st,
                        done);
    LAC_CUDA_CHECK_GOTO(ctx, cudaStreamSynchronize(stream), st, done);
    t2 = omp_get_wtime();
    if (vectors)
        LAC_CUDA_CHECK_GOTO(ctx, cudaMemcpyAsync(host, a, (size_t)(n * n) * sizeof(REAL), cudaMemcpyDeviceToHost, stream),
                            st, done);
    LAC_CUDA_CHECK_GOTO(ctx, cudaStreamSynchronize(stream), st, done);
    if (info_host != 0) {
        st = lac_error(ctx, LAC_ERR_INTERNAL, "syevd failed (info %d) for the %lld x %lld Laplacian", info_host,
                       (long long)n, (long long)n);
        goto done;
    }
    for (int64_t i = 0; i < n; i++) eigenvalues[i] = (double)w_host[i];
    lac_log(ctx, LAC_LOG_DEBUG, "impute (cuda): eigendecomposition of %lld: %.4f s, syevd %.4f s (copies %s)",
            (long long)n, omp_get_wtime() - t0, t2 - t1, registered ? "pinned in place" : "pageable");
done:
    cudaStreamSynchronize(stream);
    if (registered) cudaHostUnregister(host);
    if (params) cusolverDnDestroyParams(params);
    cudaFree(a);
    cudaFree(w);
    cudaFree(info);
    cudaFree(dwork);
    free(hwork);
    free(w_host);
    return st;
}

/* out (mn x N) = in · U or in · Uᵀ on the device, host in and out. */
template <typename REAL>
lac_status transform(lac_ctx_t ctx, const struct lac_gft *g, int64_t mn, const void *in, void *out, int inverse)
{
    cudaStream_t stream = ctx->cuda->stream;
    const int64_t N = g->n;
    REAL *u = nullptr, *x = nullptr, *y = nullptr;
    cublasHandle_t blas;
    lac_status st = LAC_SUCCESS;
    cublasStatus_t bs;
    LAC_CHECK_GOTO(lac_cuda_cublas(ctx, &blas), st, done);
    LAC_CHECK_GOTO(device_alloc(ctx, &u, N * N), st, done);
    LAC_CHECK_GOTO(device_alloc(ctx, &x, mn * N), st, done);
    LAC_CHECK_GOTO(device_alloc(ctx, &y, mn * N), st, done);
    LAC_CUDA_CHECK_GOTO(ctx, cudaMemcpyAsync(u, g->vectors, (size_t)(N * N) * sizeof(REAL), cudaMemcpyHostToDevice, stream),
                        st, done);
    LAC_CUDA_CHECK_GOTO(ctx, cudaMemcpyAsync(x, in, (size_t)(mn * N) * sizeof(REAL), cudaMemcpyHostToDevice, stream), st,
                        done);
    bs = lac_gemm(blas, CUBLAS_OP_N, inverse ? CUBLAS_OP_T : CUBLAS_OP_N, mn, N, N, (REAL)1, x, mn, u, N, (REAL)0, y, mn);
    if (bs != CUBLAS_STATUS_SUCCESS) {
        st = lac_cublas_fail(ctx, (int)bs, "basis transform", __FILE__, __LINE__);
        goto done;
    }
    LAC_CUDA_CHECK_GOTO(ctx, cudaMemcpyAsync(out, y, (size_t)(mn * N) * sizeof(REAL), cudaMemcpyDeviceToHost, stream), st,
                        done);
    LAC_CUDA_CHECK_GOTO(ctx, cudaStreamSynchronize(stream), st, done);
done:
    cudaStreamSynchronize(stream);
    cudaFree(u);
    cudaFree(x);
    cudaFree(y);
    return st;
}

/* The table: the precision and the plan are fixed at setup and recorded
 * beside the state. */
struct handle {
    lac_dtype precision;
    bool streamed;
    void *impl;
    /* Over MPI ranks (the part entries below): pinned host mirrors of Ĝest
     * (mn x N) and of X_I and its momentum copy (mn x ni) that the ranks
     * gather into. A mirror handed out by estimate or incomplete may since
     * hold the other ranks' parts, so it is stale on the device until the
     * next phase copies it back. */
    void *est_host, *inc_host, *xest_host;
    bool est_stale, inc_stale;
    lac_phase_clock *clock;   /* LACUNA_IMPUTE_CUDA_PHASES, or NULL */
};

template <typename REAL>
lac_status setup_by_plan(lac_ctx_t ctx, const lac_impute_problem *problem, handle *h, double *truth_sq,
                         double *truth_missing_sq)
{
    lac_impute_plan plan;
    LAC_CHECK(plan_for<REAL>(ctx, problem, &plan));
    h->streamed = plan.mode == LAC_IMPUTE_STREAMED;
    if (h->streamed) {
        if (ctx->cuda->share_count > 1)
            lac_log(ctx, LAC_LOG_INFO, "impute (cuda): streamed on the first device only (no split across devices)");
        return lac_impute_stream_setup<REAL>(ctx, problem, &plan, use_jacobi<REAL>(ctx, problem), &h->impl, truth_sq,
                                             truth_missing_sq);
    }
    return setup<REAL>(ctx, problem, plan.svt_budget, (impute_cuda<REAL> **)&h->impl, truth_sq, truth_missing_sq);
}

lac_status cuda_setup(lac_ctx_t ctx, const lac_impute_problem *problem, void **state, double *truth_sq,
                      double *truth_missing_sq)
{
    LAC_CHECK(lac_cuda_use_device(ctx));
    const double t0 = omp_get_wtime();
    handle *h = (handle *)calloc(1, sizeof *h);
    if (!h) return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "impute state");
    h->precision = problem->precision;
    lac_status st = problem->precision == LAC_FLOAT32
                        ? setup_by_plan<float>(ctx, problem, h, truth_sq, truth_missing_sq)
                        : setup_by_plan<double>(ctx, problem, h, truth_sq, truth_missing_sq);
    if (st < 0) {
        free(h);
        return st;
    }
    h->clock = lac_phase_clock_make(ctx);
    if (!h->streamed) {
        if (h->precision == LAC_FLOAT32) ((impute_cuda<float> *)h->impl)->clock = h->clock;
        else ((impute_cuda<double> *)h->impl)->clock = h->clock;
    }
    lac_log(ctx, LAC_LOG_DEBUG, "impute (cuda): set-up %.4f s", omp_get_wtime() - t0);
    *state = h;
    return LAC_SUCCESS;
}

/* One phase by precision and plan. */
#define LAC_BY_PLAN(h, resident_f, streamed_f)                                                      \
    ((h)->precision == LAC_FLOAT32 ? ((h)->streamed ? streamed_f<float> : resident_f<float>)     \
                                   : ((h)->streamed ? streamed_f<double> : resident_f<double>))

template <typename REAL> lac_status resident_gft(lac_ctx_t ctx, void *impl)
{
    return gft<REAL>(ctx, (impute_cuda<REAL> *)impl);
}

/* Streamed: the GFT runs inside the SVT's pass over the slabs. */
template <typename REAL> lac_status streamed_gft(lac_ctx_t, void *) { return LAC_SUCCESS; }

template <typename REAL>
lac_status resident_svt(lac_ctx_t ctx, void *impl, const double *lambda, double *sigma_max, lac_impute_svt_stats *stats)
{
    return svt<REAL>(ctx, (impute_cuda<REAL> *)impl, lambda, sigma_max, stats);
}

template <typename REAL> lac_status resident_igft(lac_ctx_t ctx, void *impl, double momentum, double *missing_sq)
{
    return igft<REAL>(ctx, (impute_cuda<REAL> *)impl, momentum, missing_sq);
}

template <typename REAL>
lac_status resident_finish(lac_ctx_t ctx, void *impl, lac_impute_output output, void *out, lac_dtype out_dtype,
                           double *error_sq)
{
    return finish<REAL>(ctx, (impute_cuda<REAL> *)impl, output, out, out_dtype, error_sq);
}

template <typename REAL> void resident_release(void *impl)
{
    delete (impute_cuda<REAL> *)impl;
}

/* ---- Over MPI ranks: each rank's range of frequencies and vertices ---- */

/* The mirrors the ranks gather into, made at the first part call. */
template <typename REAL> lac_status rank_mirrors(lac_ctx_t ctx, handle *h, impute_cuda<REAL> *s)
{
    const size_t est = (size_t)(s->mn * s->N > 0 ? s->mn * s->N : 1) * sizeof(REAL);
    const size_t inc = (size_t)(s->mn * s->ni > 0 ? s->mn * s->ni : 1) * sizeof(REAL);
    if (!h->est_host) LAC_CUDA_CHECK(ctx, cudaMallocHost(&h->est_host, est));
    if (!h->inc_host) LAC_CUDA_CHECK(ctx, cudaMallocHost(&h->inc_host, inc));
    if (s->x_est != s->x_inc && !h->xest_host) LAC_CUDA_CHECK(ctx, cudaMallocHost(&h->xest_host, inc));
    return LAC_SUCCESS;
}

/* What the ranks gathered into the mirrors back onto the device (queued on
 * the context's stream, ahead of the phase that reads it). */
template <typename REAL> lac_status rank_refresh(lac_ctx_t ctx, handle *h)
{
    if (h->streamed) return LAC_SUCCESS;
    impute_cuda<REAL> *s = (impute_cuda<REAL> *)h->impl;
    cudaStream_t stream = ctx->cuda->stream;
    const size_t inc = (size_t)(s->mn * s->ni) * sizeof(REAL);
    if (h->est_stale)
        LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(s->gest, h->est_host, (size_t)(s->mn * s->N) * sizeof(REAL),
                                            cudaMemcpyHostToDevice, stream));
    if (h->inc_stale) {
        LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(s->x_inc, h->inc_host, inc, cudaMemcpyHostToDevice, stream));
        if (h->xest_host) LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(s->x_est, h->xest_host, inc, cudaMemcpyHostToDevice, stream));
    }
    h->est_stale = h->inc_stale = false;
    return LAC_SUCCESS;
}

/* Ĝ's columns [lo, hi): C's plus X_I U_I[:, lo:hi). */
template <typename REAL> lac_status rank_gft(lac_ctx_t ctx, handle *h, int64_t lo, int64_t hi)
{
    impute_cuda<REAL> *s = (impute_cuda<REAL> *)h->impl;
    LAC_CHECK(rank_refresh<REAL>(ctx, h));
    const int64_t mn = s->mn;
    cudaStream_t stream = ctx->cuda->stream;
    LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(s->ghat + lo * mn, s->c + lo * mn, (size_t)(mn * (hi - lo)) * sizeof(REAL),
                                        cudaMemcpyDeviceToDevice, stream));
    if (s->ni > 0 && hi > lo)
        LAC_CHECK(loop_gemm<REAL>(ctx, s, CUBLAS_OP_N, mn, hi - lo, s->ni, s->x_inc, (REAL)1, s->ghat + lo * mn, lo * s->ni));
    LAC_CUDA_CHECK(ctx, cudaStreamSynchronize(stream));
    return LAC_SUCCESS;
}

/* The SVT of slices [lo, hi), their estimate into the mirror. */
template <typename REAL>
lac_status rank_svt(lac_ctx_t ctx, handle *h, int64_t lo, int64_t hi, const double *lambda, double *sigma_max,
                    lac_impute_svt_stats *out)
{
    impute_cuda<REAL> *s = (impute_cuda<REAL> *)h->impl;
    LAC_CHECK(rank_mirrors<REAL>(ctx, h, s));
    LAC_CHECK(rank_refresh<REAL>(ctx, h));
    const int64_t mn = s->mn, count = hi - lo, p = s->problem.m < s->problem.n ? s->problem.m : s->problem.n;
    const int warm = s->v_valid;
    cudaStream_t stream = ctx->cuda->stream;
    if (lambda && count > 0)
        LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(s->lambda + lo, lambda + lo, (size_t)count * sizeof(double),
                                            cudaMemcpyHostToDevice, stream));
    if (count > 0)
        LAC_CHECK(lac_svt_slices<REAL>(ctx, s->jacobi, s->problem, count, s->ghat + lo * mn, s->gest + lo * mn,
                                       s->true_hat ? s->true_hat + lo * mn : nullptr, lambda ? s->lambda + lo : nullptr,
                                       s->stats + lo * LAC_SVT_STATS, s->v ? s->v + lo * p * p : nullptr, warm,
                                       gram_budget(ctx, s->svt_budget), &s->gram_cache));
    s->v_valid = s->v != nullptr && s->warm_start;
    LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(s->stats_host + lo * LAC_SVT_STATS, s->stats + lo * LAC_SVT_STATS,
                                        (size_t)(count * LAC_SVT_STATS) * sizeof(double), cudaMemcpyDeviceToHost, stream));
    LAC_CUDA_CHECK(ctx, cudaMemcpyAsync((REAL *)h->est_host + lo * mn, s->gest + lo * mn,
                                        (size_t)(count * mn) * sizeof(REAL), cudaMemcpyDeviceToHost, stream));
    LAC_CUDA_CHECK(ctx, cudaStreamSynchronize(stream));
    return lac_impute_cuda_sum_stats(ctx, s->stats_host + lo * LAC_SVT_STATS, count, s->jacobi, warm,
                                     sigma_max ? sigma_max + lo : nullptr, out);
}

/* The iGFT and the imputation step of incomplete vertices [lo, hi), their
 * columns of X_I (and of its momentum copy) into the mirrors. */
template <typename REAL>
lac_status rank_igft(lac_ctx_t ctx, handle *h, int64_t lo, int64_t hi, double momentum, double *missing_error_sq)
{
    impute_cuda<REAL> *s = (impute_cuda<REAL> *)h->impl;
    LAC_CHECK(rank_mirrors<REAL>(ctx, h, s));
    LAC_CHECK(rank_refresh<REAL>(ctx, h));
    *missing_error_sq = 0;
    const int64_t mn = s->mn, count = hi - lo, at = lo * mn;
    if (count <= 0) return LAC_SUCCESS;
    LAC_CHECK(loop_gemm<REAL>(ctx, s, CUBLAS_OP_T, mn, count, s->N, s->gest, (REAL)0, s->x_new + at, lo));
    double err = 0;
    LAC_CHECK(lac_impute_cuda_impute_sum<REAL>(ctx, count * mn, s->x_new + at, s->obs_inc ? s->obs_inc + at : nullptr,
                                               s->true_inc ? s->true_inc + at : nullptr, s->x_inc + at, s->x_est + at,
                                               (REAL)momentum, s->x_est != s->x_inc, s->partial, s->partial_host, &err));
    *missing_error_sq = s->true_inc ? err : 0;
    cudaStream_t stream = ctx->cuda->stream;
    const size_t bytes = (size_t)(count * mn) * sizeof(REAL);
    LAC_CUDA_CHECK(ctx, cudaMemcpyAsync((REAL *)h->inc_host + at, s->x_inc + at, bytes, cudaMemcpyDeviceToHost, stream));
    if (h->xest_host)
        LAC_CUDA_CHECK(ctx, cudaMemcpyAsync((REAL *)h->xest_host + at, s->x_est + at, bytes, cudaMemcpyDeviceToHost,
                                            stream));
    LAC_CUDA_CHECK(ctx, cudaStreamSynchronize(stream));
    return LAC_SUCCESS;
}

#define LAC_BY_PRECISION(h, f) ((h)->precision == LAC_FLOAT32 ? f<float> : f<double>)

/* Only the resident plan on one device splits; a streamed plan, or several
 * devices inside the rank, run every phase whole on each rank. */
int cuda_splits(void *state)
{
    handle *h = (handle *)state;
    if (h->streamed) return 0;
    return h->precision == LAC_FLOAT32 ? ((impute_cuda<float> *)h->impl)->part_count == 1
                                       : ((impute_cuda<double> *)h->impl)->part_count == 1;
}

lac_status cuda_gft_part(lac_ctx_t ctx, void *state, int64_t k_lo, int64_t k_hi)
{
    handle *h = (handle *)state;
    LAC_CHECK(lac_cuda_use_device(ctx));
    return LAC_BY_PRECISION(h, rank_gft)(ctx, h, k_lo, k_hi);
}

lac_status cuda_svt_part(lac_ctx_t ctx, void *state, int64_t k_lo, int64_t k_hi, const double *lambda, double *sigma_max,
                         lac_impute_svt_stats *stats)
{
    handle *h = (handle *)state;
    LAC_CHECK(lac_cuda_use_device(ctx));
    return LAC_BY_PRECISION(h, rank_svt)(ctx, h, k_lo, k_hi, lambda, sigma_max, stats);
}

void *cuda_estimate(void *state, int64_t *slice_elements, lac_dtype *dtype)
{
    handle *h = (handle *)state;
    *dtype = h->precision;
    *slice_elements = h->precision == LAC_FLOAT32 ? ((impute_cuda<float> *)h->impl)->mn
                                                  : ((impute_cuda<double> *)h->impl)->mn;
    h->est_stale = true;
    return h->est_host;
}

lac_status cuda_igft_part(lac_ctx_t ctx, void *state, int64_t i_lo, int64_t i_hi, double momentum,
                          double *missing_error_sq)
{
    handle *h = (handle *)state;
    LAC_CHECK(lac_cuda_use_device(ctx));
    return LAC_BY_PRECISION(h, rank_igft)(ctx, h, i_lo, i_hi, momentum, missing_error_sq);
}

void *cuda_incomplete(void *state, void **x_est, int64_t *vertex_elements, lac_dtype *dtype)
{
    handle *h = (handle *)state;
    *dtype = h->precision;
    *vertex_elements = h->precision == LAC_FLOAT32 ? ((impute_cuda<float> *)h->impl)->mn
                                                   : ((impute_cuda<double> *)h->impl)->mn;
    *x_est = h->xest_host;
    h->inc_stale = true;
    return h->inc_host;
}

/* ---- The table's whole phases ---- */

lac_status cuda_gft(lac_ctx_t ctx, void *state)
{
    handle *h = (handle *)state;
    LAC_CHECK(lac_cuda_use_device(ctx));
    LAC_CHECK(LAC_BY_PRECISION(h, rank_refresh)(ctx, h));
    lac_phase_mark(h->clock, LAC_PHASE_GFT0, ctx->cuda->stream);
    LAC_CHECK(LAC_BY_PLAN(h, resident_gft, streamed_gft)(ctx, h->impl));
    lac_phase_mark(h->clock, LAC_PHASE_GFT1, ctx->cuda->stream);
    return LAC_SUCCESS;
}

lac_status cuda_svt(lac_ctx_t ctx, void *state, const double *lambda, double *sigma_max, lac_impute_svt_stats *stats)
{
    handle *h = (handle *)state;
    LAC_CHECK(lac_cuda_use_device(ctx));
    LAC_CHECK(LAC_BY_PRECISION(h, rank_refresh)(ctx, h));
    lac_phase_mark(h->clock, LAC_PHASE_SVT0, ctx->cuda->stream);
    LAC_CHECK(LAC_BY_PLAN(h, resident_svt, lac_impute_stream_svt)(ctx, h->impl, lambda, sigma_max, stats));
    lac_phase_mark(h->clock, LAC_PHASE_SVT1, ctx->cuda->stream);
    return LAC_SUCCESS;
}

lac_status cuda_igft(lac_ctx_t ctx, void *state, double momentum, double *missing_error_sq)
{
    handle *h = (handle *)state;
    LAC_CHECK(lac_cuda_use_device(ctx));
    LAC_CHECK(LAC_BY_PRECISION(h, rank_refresh)(ctx, h));
    lac_phase_mark(h->clock, LAC_PHASE_IGFT0, ctx->cuda->stream);
    LAC_CHECK(LAC_BY_PLAN(h, resident_igft, lac_impute_stream_igft)(ctx, h->impl, momentum, missing_error_sq));
    lac_phase_mark(h->clock, LAC_PHASE_IGFT1, ctx->cuda->stream);
    lac_phase_iteration_end(h->clock);
    return LAC_SUCCESS;
}

lac_status cuda_finish(lac_ctx_t ctx, void *state, lac_impute_output output, void *out, lac_dtype out_dtype,
                       double *error_sq)
{
    handle *h = (handle *)state;
    LAC_CHECK(lac_cuda_use_device(ctx));
    LAC_CHECK(LAC_BY_PRECISION(h, rank_refresh)(ctx, h));
    const double t0 = omp_get_wtime();
    LAC_CHECK(LAC_BY_PLAN(h, resident_finish, lac_impute_stream_finish)(ctx, h->impl, output, out, out_dtype, error_sq));
    lac_log(ctx, LAC_LOG_DEBUG, "impute (cuda): finish %.4f s", omp_get_wtime() - t0);
    return LAC_SUCCESS;
}

void cuda_release(void *state)
{
    handle *h = (handle *)state;
    if (!h) return;
    lac_phase_clock_free(h->clock);
    LAC_BY_PLAN(h, resident_release, lac_impute_stream_release)(h->impl);
    cudaFreeHost(h->est_host);
    cudaFreeHost(h->inc_host);
    cudaFreeHost(h->xest_host);
    free(h);
}

lac_status cuda_eigen(lac_ctx_t ctx, lac_dtype precision, int64_t n, void *a, int vectors, double *eigenvalues)
{
    LAC_CHECK(lac_cuda_use_device(ctx));
    return precision == LAC_FLOAT32 ? eigen<float>(ctx, n, a, vectors, eigenvalues)
                                    : eigen<double>(ctx, n, a, vectors, eigenvalues);
}

lac_status cuda_transform(lac_ctx_t ctx, const struct lac_gft *g, int64_t mn, const void *in, void *out, int inverse)
{
    LAC_CHECK(lac_cuda_use_device(ctx));
    return g->precision == LAC_FLOAT32 ? transform<float>(ctx, g, mn, in, out, inverse)
                                       : transform<double>(ctx, g, mn, in, out, inverse);
}

} // namespace

template <typename REAL> void lac_impute_cuda_truth_norms(const lac_impute_problem *pr, double *truth_sq,
                                                          double *truth_missing_sq)
{
    const int64_t N = pr->N, mn = pr->m * pr->n, ni = pr->num_incomplete;
    /* The norms errors are relative to, in float64 from the host's truth. */
    double all = 0, missing = 0;
    int64_t next = 0;
    for (int64_t v = 0; v < N; v++) {
        const int incomplete = next < ni && pr->incomplete[next] == v;
        for (int64_t e = 0; e < mn; e++) {
            double t = (double)(REAL)lac_load_real(pr->truth, pr->truth_dtype, v * mn + e);
            all += t * t;
            if (incomplete && !(pr->entry_observed && pr->vertex_state[v] == LAC_VERTEX_PARTIAL &&
                                pr->entry_observed[v * mn + e]))
                missing += t * t;
        }
        next += incomplete;
    }
    *truth_sq = all;
    *truth_missing_sq = missing;
}

lac_status lac_impute_cuda_sum_stats(lac_ctx_t ctx, const double *stats_host, int64_t N, bool jacobi, int warm,
                                     double *sigma_max, lac_impute_svt_stats *out)
{
    lac_impute_svt_stats sum;
    memset(&sum, 0, sizeof sum);
    double sweeps = 0, sweeps_max = 0;
    int64_t refused = 0, sharp = 0;
    for (int64_t k = 0; k < N; k++) {
        const double *st = stats_host + k * LAC_SVT_STATS;
        if (st[LAC_SVT_RANK] < 0)
            return lac_error(ctx, LAC_ERR_VALUE, "spectral slice %lld is not finite: the iteration diverged", (long long)k);
        sum.change_sq += st[LAC_SVT_CHANGE];
        sum.previous_sq += st[LAC_SVT_PREVIOUS];
        sum.truth_error_sq += st[LAC_SVT_TRUTH];
        sum.rank_sum += (int64_t)st[LAC_SVT_RANK];
        if (sigma_max) sigma_max[k] = st[LAC_SVT_SIGMA_MAX];
        double sw = st[LAC_SVT_SWEEPS];
        if (sw >= LAC_SVT_SHARP) {
            sw -= LAC_SVT_SHARP;
            sharp++;
        }
        if (sw >= LAC_SVT_REFUSED) {
            sw -= LAC_SVT_REFUSED;
            refused++;
        }
        sweeps += sw;
        if (sw > sweeps_max) sweeps_max = sw;
    }
    if (jacobi)
        lac_log(ctx, LAC_LOG_DEBUG,
                "impute (cuda): SVT by Jacobi, %s start, sweeps mean %.2f, max %.0f, certificate refused on %lld slices, "
                "proved by Cholesky where Gershgorin was refused on %lld",
                warm ? "warm" : "cold", sweeps / (double)N, sweeps_max, (long long)refused, (long long)sharp);
    *out = sum;
    return LAC_SUCCESS;
}

namespace {
template <typename REAL> void store(void *out, lac_dtype dtype, int64_t i, REAL value)
{
    if (dtype == LAC_FLOAT32) ((float *)out)[i] = (float)value;
    else ((double *)out)[i] = (double)value;
}
} // namespace

template <typename REAL>
lac_status lac_impute_cuda_finish(lac_ctx_t ctx, const lac_impute_problem *pr,
                                  lac_status (*estimate)(lac_ctx_t ctx, void *state, REAL *full), void *state,
                                  const REAL *x_est, lac_impute_output output, void *out, lac_dtype out_dtype,
                                  double *error_sq)
{
    const int64_t N = pr->N, mn = pr->m * pr->n, ni = pr->num_incomplete;
    cudaStream_t stream = ctx->cuda->stream;
    if (output == LAC_IMPUTE_ESTIMATE || pr->truth) {
        REAL *full = (REAL *)malloc((size_t)(mn * N) * sizeof(REAL));
        if (!full) return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "the %lld x %lld estimate", (long long)N, (long long)mn);
        lac_status st = estimate(ctx, state, full);
        if (st < 0) {
            free(full);
            return st;
        }
        if (pr->truth) {
            double err = 0;
            for (int64_t i = 0; i < mn * N; i++) {
                double d = (double)full[i] - (double)(REAL)lac_load_real(pr->truth, pr->truth_dtype, i);
                err += d * d;
            }
            *error_sq = err;
        }
        if (output == LAC_IMPUTE_ESTIMATE)
            for (int64_t i = 0; i < mn * N; i++) store<REAL>(out, out_dtype, i, full[i]);
        free(full);
        if (output == LAC_IMPUTE_ESTIMATE) return LAC_SUCCESS;
    }
    /* COMPLETED: the given entries where observed, the estimate elsewhere;
     * out may be the tensor itself. */
    REAL *x = (REAL *)malloc((size_t)(mn * (ni > 0 ? ni : 1)) * sizeof(REAL));
    if (!x) return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "the imputed entries of %lld vertices", (long long)ni);
    cudaError_t ce = cudaMemcpyAsync(x, x_est, (size_t)(mn * ni) * sizeof(REAL), cudaMemcpyDeviceToHost, stream);
    if (ce == cudaSuccess) ce = cudaStreamSynchronize(stream);
    if (ce != cudaSuccess) {
        free(x);
        return lac_cuda_fail(ctx, ce, "download of the imputed entries", __FILE__, __LINE__);
    }
    const size_t esize = lac_dtype_size(out_dtype);
    if (out != pr->tensor)
        for (int64_t v = 0; v < N; v++)
            if (pr->vertex_state[v] == LAC_VERTEX_OBSERVED)
                memcpy((char *)out + (size_t)(v * mn) * esize, (const char *)pr->tensor + (size_t)(v * mn) * esize,
                       (size_t)mn * esize);
    const bool same_type = out_dtype == (sizeof(REAL) == sizeof(float) ? LAC_FLOAT32 : LAC_FLOAT64);
    for (int64_t i = 0; i < ni; i++) {
        const int64_t v = pr->incomplete[i];
        if (same_type && (!pr->entry_observed || pr->vertex_state[v] == LAC_VERTEX_MISSING)) {
            memcpy((char *)out + (size_t)(v * mn) * esize, x + i * mn, (size_t)mn * esize);
            continue;
        }
        for (int64_t e = 0; e < mn; e++) {
            const int64_t at = v * mn + e;
            if (pr->entry_observed && pr->entry_observed[at])
                store<double>(out, out_dtype, at, lac_load_real(pr->tensor, pr->tensor_dtype, at));
            else
                store<REAL>(out, out_dtype, at, x[i * mn + e]);
        }
    }
    free(x);
    return LAC_SUCCESS;
}


#define LAC_INSTANTIATE(REAL) \
    template void lac_impute_cuda_truth_norms<REAL>(const lac_impute_problem *, double *, double *); \
    template lac_status lac_impute_cuda_finish<REAL>(lac_ctx_t, const lac_impute_problem *, \
                                                     lac_status (*)(lac_ctx_t, void *, REAL *), void *, const REAL *, \
                                                     lac_impute_output, void *, lac_dtype, double *);
LAC_INSTANTIATE(float)
LAC_INSTANTIATE(double)
#undef LAC_INSTANTIATE

extern "C" const lac_impute_backend lac_impute_cuda_table = {
    "cuda", cuda_setup, cuda_gft, cuda_svt, cuda_igft, cuda_finish, cuda_release, cuda_eigen, cuda_transform,
    cuda_svt_part, cuda_estimate, cuda_gft_part, cuda_igft_part, cuda_incomplete, cuda_splits,
};
