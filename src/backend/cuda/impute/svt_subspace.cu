/* The Gram route's rank-exploiting pass: only the singular triplets above λ
 * matter to S_λ, so a warm pass refines the previous pass's top right
 * singular vectors instead of solving every Gram matrix in full.
 *
 * Per slice (float64), with B = AᵀA (p x p) and V the previous pass's top q
 * eigenvectors of B (q: the largest rank the stored eigenvalues give for
 * this λ, plus oversampling):
 *   filter   Z = T_d(2B/c - I) V, a Chebyshev polynomial that damps [0, c]
 *            (c below λ², from the previous pass's q-th eigenvalue), in
 *            rounds of degree 2, each followed by Cholesky QR (twice at the
 *            end);
 *   Ritz     H = QᵀBQ, H = Y diag(θ) Yᵀ (batched eigensolver on q x q),
 *            X = QY, the kept pairs θ_j > λ² and their residual R = BX - Xθ;
 *   certify  with P = I - X_r X_rᵀ (the kept vectors only) and
 *            M = P B P: B differs from X_r θ_r X_rᵀ + M by the coupling R_r,
 *            and h(μ) = (1 - λ/√μ)₊ is 1/(2λ²)-Lipschitz, so
 *            ‖A h(B) - A X_r h(θ_r) X_rᵀ‖_F ≤ σmax ‖R_r‖_F / (√2 λ²) once
 *            λ_max(M) ≤ λ² (h(M) = 0). The residual must keep that below
 *            2^-21 ‖A‖_F; λ_max(M) ≤ λ² is proved by tr(M) ≤ λ² (cheap,
 *            for slices with little beyond the kept rank) or by a
 *            successful Cholesky of (λ²(1 + η) - δ) I - M, δ the rounding
 *            bound of the factorisation (η keeps the part of M just above
 *            λ² below the same tolerance). A slice with tr(B) ≤ λ² is 0.
 * A slice that fails any step (rank reaching q, a residual too large, the
 * certificate refused, a factorisation failing) goes, with the others that
 * failed, to the full path (svt_gram.cu) in one compacted batch: the answer
 * is never a different one, only its cost. */
#include "backend/cuda/impute/impute_cuda.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <new>

namespace {

/* Tolerances of the certificate (see the banner). */
#define SUB_TAU LAC_SVT_TAU   /* 2^-21: result error over ‖A‖_F */
#define SUB_EPS DBL_EPSILON

enum { S_TRACE = 0, S_LAM2, S_CUT, S_SHIFT, S_SIGMA, S_TRACE_OK, S_POWER, S_THETA_MAX, S_SCALARS = 8 };

/* The cold pass (no stored vectors): the filter damps [0, COLD_CUT λ²]; the
 * block is half of p; the power steps that bound σmax² before the filter; the
 * growth of the block's condition number allowed between two
 * orthonormalisations (e^COLD_GROWTH); Ritz values closer than
 * COLD_CLUSTER·θmax are refined as one cluster. A block whose condition
 * number may have grown by e^COLD_ONCE at most since its last
 * orthonormalisation needs one Cholesky QR at the end, not two (its columns
 * then orthonormal to κ² ε ≈ 1e-10, far below the certificate's 2^-21). */
#define COLD_CUT 0.7
#define COLD_POWER_STEPS 6
#define COLD_GROWTH 13.8
#define COLD_CLUSTER 1e-4
#define COLD_ONCE 6.9
/* Ritz problems up to this size are solved in float64; wider ones in float32
 * and refined (ritz_refined). */
#define RITZ64_MOST 128
#define COLD_START_GROWTH 1.8   /* ln of a Gaussian p x p/2 block's condition number, about 6 */
enum { ST_OPEN = 0, ST_ZERO = 1, ST_FAIL = 2 };

unsigned grid_for(int64_t n)
{
    int64_t g = (n + 255) / 256;
    return (unsigned)(g < 1 ? 1 : g > 8192 ? 8192 : g);
}

/* The rank each slice's stored eigenvalues give for its λ (the leading run
 * above λ²), their largest in *r_max. */
__global__ void stored_rank(const double *theta, int64_t p, int64_t count, const double *lambda, int *r_max)
{
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < count; k += (int64_t)gridDim.x * blockDim.x) {
        const double l2 = lambda[k] * lambda[k];
        int r = 0;
        while (r < p && theta[k * p + r] > l2) r++;
        atomicMax(r_max, r);
    }
}

/* One block a slice: tr(B), λ², the filter's cut, the starting status. */
__global__ void slice_scalars(const double *g, int64_t p, int64_t q, const double *lambda, const double *theta,
                              double cold_cut, double *scal, int *status)
{
    __shared__ double part[32];
    const int64_t k = blockIdx.x;
    double tr = 0;
    for (int64_t i = threadIdx.x; i < p; i += blockDim.x) tr += g[k * p * p + i * (p + 1)];
    for (int off = 16; off > 0; off >>= 1) tr += __shfl_xor_sync(0xffffffffu, tr, off);
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = tr;
    __syncthreads();
    if (threadIdx.x) return;
    tr = 0;
    for (int w = 0; w < (int)(blockDim.x + 31) / 32; w++) tr += part[w];
    double *s = scal + k * S_SCALARS;
    const double l2 = lambda[k] * lambda[k];
    s[S_TRACE] = tr;
    s[S_LAM2] = l2;
    double cut = theta ? theta[k * p + q - 1] : cold_cut * l2;   /* cold: no stored eigenvalues */
    if (!(cut < 0.95 * l2)) cut = 0.95 * l2;
    if (!(cut > 1e-3 * l2)) cut = 1e-3 * l2;
    s[S_CUT] = cut;
    /* Every σ² ≤ tr(B) (rounded relatively by p ε at most): all below λ. */
    if (!(tr <= DBL_MAX) || !(l2 > 0)) status[k] = ST_FAIL;
    else status[k] = tr * (1 + 4 * p * SUB_EPS) <= l2 ? ST_ZERO : ST_OPEN;
}

/* gs = 2B/c - I: [0, c] onto [-1, 1]. */
__global__ void filter_matrix(const double *g, double *gs, int64_t p, int64_t n, const double *scal)
{
    const int64_t pp = p * p;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n * pp; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t k = i / pp, e = i % pp;
        gs[i] = 2 * g[i] / scal[k * S_SCALARS + S_CUT] - (e % p == e / p ? 1.0 : 0.0);
    }
}

__global__ void note_info(const int *info, int *status, int64_t n)
{
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < n; k += (int64_t)gridDim.x * blockDim.x)
        if (info[k] != 0 && status[k] == ST_OPEN) status[k] = ST_FAIL;
}

__global__ void fill_pointers(double **out, double *base, int64_t stride, int64_t n)
{
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < n; k += (int64_t)gridDim.x * blockDim.x)
        out[k] = base + k * stride;
}

/* The kept count of each slice (θ ascending: the last ones above λ²), the
 * chunk's largest in *r_max. */
__global__ void count_kept(const double *w, int64_t q, int64_t n, const double *scal, const int *status, int *kept,
                           int *r_max)
{
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < n; k += (int64_t)gridDim.x * blockDim.x) {
        const double l2 = scal[k * S_SCALARS + S_LAM2];
        int r = 0;
        while (r < q && w[k * q + q - 1 - r] > l2) r++;
        kept[k] = status[k] == ST_ZERO ? 0 : r;
        if (status[k] == ST_OPEN) atomicMax(r_max, r);
    }
}

/* One block a slice: the kept pairs' residual ‖BX_r - X_r θ_r‖_F (bx = BX),
 * the shrink factors, σmax, the trace certificate and the shift of the
 * Cholesky one; and the factors [X_r | W] and [W | X_r] of the rank-2r
 * correction X_r Wᵀ + W X_rᵀ, W = BX_r - X_r θ_r / 2, that makes
 * B - (that) = P B P (columns beyond a slice's own rank zero). */
__global__ void check_pairs(const double *x, const double *bx, const double *w, int64_t p, int64_t q, int64_t xs,
                            int64_t bs, int rm, const double *lambda, double *scal, int *status, const int *kept, double *factor,
                            double *ucat, double *vcat, int64_t cs)
{
    __shared__ double part[32];
    const int64_t k = blockIdx.x;
    const int r = kept[k];
    const double *xk = x + k * xs, *bk = bx + k * bs, *wk = w + k * q;
    double res = 0;
    for (int64_t i = threadIdx.x; i < p * r; i += blockDim.x) {
        const int64_t j = q - r + i / p, row = i % p;
        const double d = bk[row + j * p] - wk[j] * xk[row + j * p];
        res += d * d;
    }
    for (int64_t i = threadIdx.x; i < p * rm; i += blockDim.x) {
        const int64_t c = i / p, row = i % p, j = q - rm + c;
        const bool on = j >= q - r;
        const double xv = on ? xk[row + j * p] : 0, wv = on ? bk[row + j * p] - 0.5 * wk[j] * xk[row + j * p] : 0;
        ucat[k * cs + row + c * p] = xv;
        ucat[k * cs + row + (rm + c) * p] = wv;
        vcat[k * cs + row + c * p] = wv;
        vcat[k * cs + row + (rm + c) * p] = xv;
    }
    for (int64_t j = threadIdx.x; j < q; j += blockDim.x) {
        const bool on = j >= q - r && status[k] != ST_ZERO;
        factor[k * q + j] = on ? 1 - lambda[k] / sqrt(wk[j]) : 0;
    }
    for (int off = 16; off > 0; off >>= 1) res += __shfl_xor_sync(0xffffffffu, res, off);
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = res;
    __syncthreads();
    if (threadIdx.x) return;
    res = 0;
    for (int v = 0; v < (int)(blockDim.x + 31) / 32; v++) res += part[v];
    res = sqrt(res);
    double *s = scal + k * S_SCALARS;
    const double tr = s[S_TRACE], l2 = s[S_LAM2], top = wk[q - 1];
    double kept_sum = 0;
    for (int j = 0; j < r; j++) kept_sum += wk[q - 1 - j];
    s[S_SIGMA] = top >= 0 && top <= DBL_MAX ? sqrt(top) : sqrt(tr);
    s[S_TRACE_OK] = 0;
    if (status[k] != ST_OPEN) return;
    /* σmax² ≤ θmax + 2‖R‖ once M is certified; ‖A‖_F² = tr(B). */
    const double sigma_sq = top + 2 * res;
    const bool finite = res <= DBL_MAX && top <= DBL_MAX && kept_sum <= DBL_MAX;
    if (!finite || r >= q || res > 1.4142135623730951 * SUB_TAU * l2 * sqrt(tr / sigma_sq)) {
        status[k] = ST_FAIL;
        return;
    }
    /* η and δ (Cholesky's backward error (p+1) p ε ‖K‖ and the rounding of
     * forming K, ‖K‖ ≤ tr(B) + λ²): lac_svt_certificate_shift. */
    const double shift = lac_svt_certificate_shift(l2, tr, (double)p, (double)(p + 1) * p, tr + l2);
    if (!(shift > l2)) {
        status[k] = ST_FAIL;
        return;
    }
    s[S_SHIFT] = shift;
    /* λ_max(M) ≤ tr(M) = tr(B) - Σ θ_r (M is PSD). */
    s[S_TRACE_OK] = (tr - kept_sum) + 4 * p * SUB_EPS * tr <= shift ? 1 : 0;
}

/* K = shift·I - M, M in g as (correction) - B by the GEMM before. */
__global__ void shift_diagonal(double *g, int64_t p, int64_t n, const double *scal)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n * p; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t k = i / p, d = i % p;
        g[k * p * p + d * (p + 1)] += scal[k * S_SCALARS + S_SHIFT];
    }
}

/* The verdict: a slice is done (skip[k] = 0) when zero by trace, or open and
 * certified by trace or Cholesky; its σmax into sigma. */
__global__ void verdict(int *status, const int *info, const double *scal, int *skip, double *sigma, int64_t n)
{
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < n; k += (int64_t)gridDim.x * blockDim.x) {
        const double *s = scal + k * S_SCALARS;
        if (status[k] == ST_OPEN && !(s[S_TRACE_OK] != 0 || info[k] == 0)) status[k] = ST_FAIL;
        skip[k] = status[k] == ST_FAIL;
        sigma[k] = s[S_SIGMA];
    }
}

/* The certified slices' Ritz pairs (ascending, q of them) as the kept
 * vectors (descending, the first q columns of p x p) and values. */
__global__ void keep_ritz(const double *x, const double *w, int64_t p, int64_t q, int64_t xs, int64_t n,
                          const int *status, double *v, double *theta, int64_t first)
{
    const int64_t pq = p * q;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n * pq; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t k = i / pq, e = i % pq, row = e % p, col = e / p;
        if (status[k] != ST_OPEN) continue;   /* failed: the full path's; zero: the old ones */
        v[(first + k) * p * p + row + col * p] = x[k * xs + row + (q - 1 - col) * p];
        if (row == 0) theta[(first + k) * p + col] = w[k * q + q - 1 - col];
    }
}

template <typename REAL>
__global__ void gather_slices(REAL *dst, const REAL *src, const int *slot, int64_t size, int64_t stride, int64_t n)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n * size; i += (int64_t)gridDim.x * blockDim.x)
        dst[i] = src[slot[i / size] * stride + i % size];
}

template <typename REAL>
__global__ void scatter_slices(REAL *dst, const REAL *src, const int *slot, int64_t size, int64_t stride, int64_t n)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n * size; i += (int64_t)gridDim.x * blockDim.x)
        dst[slot[i / size] * stride + i % size] = src[i];
}

/* A cold pass's start: a p x q block of standard normal values a slice (ld
 * apart in a column, stride apart between slices), from a counter-based hash
 * so that the start is the same on every run and grid. */
__device__ inline double cold_uniform(unsigned long long x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    x ^= x >> 31;
    return ((double)(x >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

__global__ void cold_random(double *z, int64_t p, int64_t q, int64_t ld, int64_t stride, int64_t n)
{
    const int64_t pq = p * q;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n * pq; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t k = i / pq, e = i % pq, row = e % p, col = e / p;
        const double u = cold_uniform(2 * (unsigned long long)e), v = cold_uniform(2 * (unsigned long long)e + 1);
        z[k * stride + row + col * ld] = sqrt(-2 * log(u)) * cospi(2 * v);
    }
}

/* One block a slice: v = w / ‖w‖, ‖w‖ into scal[S_POWER] (after the last
 * power step ‖B v‖ for a unit v: at most σmax²). */
__global__ void power_normalise(const double *w, double *v, int64_t p, double *scal)
{
    __shared__ double part[32];
    const int64_t k = blockIdx.x;
    double sum = 0;
    for (int64_t i = threadIdx.x; i < p; i += blockDim.x) sum += w[k * p + i] * w[k * p + i];
    for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = sum;
    __syncthreads();
    sum = 0;
    for (int u = 0; u < (int)(blockDim.x + 31) / 32; u++) sum += part[u];
    const double norm = sqrt(sum);
    const double inv = norm > 0 && norm <= DBL_MAX ? 1 / norm : 0;
    for (int64_t i = threadIdx.x; i < p; i += blockDim.x) v[k * p + i] = w[k * p + i] * inv;
    if (threadIdx.x == 0) scal[k * S_SCALARS + S_POWER] = norm;
}

/* The chunk's fastest growth a filter degree, acosh(2 σ²/c - 1) with σ² a
 * quarter above the power steps' estimate, as 1/1024ths in *gmax: the
 * filter's largest column grows by e^growth a degree, its wanted ones by at
 * least 1, so the block's condition number by at most that. */
__global__ void filter_growth(const double *scal, const int *status, int64_t n, int *gmax)
{
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < n; k += (int64_t)gridDim.x * blockDim.x) {
        if (status[k] != ST_OPEN) continue;
        const double *s = scal + k * S_SCALARS;
        const double t = 2 * 1.25 * s[S_POWER] / s[S_CUT] - 1;
        const double g = t > 1 && t <= DBL_MAX ? acosh(t) : t > 1 ? 1e6 : 0;
        atomicMax(gmax, (int)fmin(ceil(g * 1024), 1e9));
    }
}

__global__ void fill_identity(double *t, int64_t q, int64_t n)
{
    const int64_t qq = q * q;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n * qq; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t e = i % qq;
        t[i] = e % q == e / q ? 1.0 : 0.0;
    }
}

__global__ void narrow(float *dst, const double *src, int64_t count)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < count; i += (int64_t)gridDim.x * blockDim.x)
        dst[i] = (float)src[i];
}

__global__ void widen_f(double *dst, const float *src, int64_t count)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < count; i += (int64_t)gridDim.x * blockDim.x)
        dst[i] = (double)src[i];
}

/* One refinement step of the float32 Ritz vectors Y (Ogita and Aishima's
 * RefSyEv): with G = YᵀY and S = YᵀHY, θ_i = S_ii / G_ii; one block a slice,
 * θ into theta and max |θ| into scal[S_THETA_MAX]. */
__global__ void refine_values(const double *S, const double *G, double *theta, int64_t q, double *scal)
{
    __shared__ double part[32];
    const int64_t k = blockIdx.x, qq = q * q;
    double top = 0;
    for (int64_t i = threadIdx.x; i < q; i += blockDim.x) {
        const double th = S[k * qq + i * (q + 1)] / G[k * qq + i * (q + 1)];
        theta[k * q + i] = th;
        top = fmax(top, fabs(th));
    }
    for (int off = 16; off > 0; off >>= 1) top = fmax(top, __shfl_xor_sync(0xffffffffu, top, off));
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = top;
    __syncthreads();
    if (threadIdx.x) return;
    top = 0;
    for (int u = 0; u < (int)(blockDim.x + 31) / 32; u++) top = fmax(top, part[u]);
    scal[k * S_SCALARS + S_THETA_MAX] = top;
}

/* ... and the correction F in place of G: with E = I - G, F_ij = (S_ij +
 * θ_j E_ij) / (θ_j - θ_i) for i ≠ j apart by more than the cluster width,
 * else E_ij / 2; then Y + YF is orthonormal and diagonalises H to second
 * order in Y's error. */
__global__ void refine_factor(double *G, const double *S, const double *theta, int64_t q, int64_t n, const double *scal)
{
    const int64_t qq = q * q;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n * qq; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t k = i / qq, e = i % qq, row = e % q, col = e / q;
        const double E = (row == col ? 1.0 : 0.0) - G[i];
        const double gap = theta[k * q + col] - theta[k * q + row];
        const double width = COLD_CLUSTER * scal[k * S_SCALARS + S_THETA_MAX];
        G[i] = row != col && fabs(gap) > width ? (S[i] + theta[k * q + col] * E) / gap : E / 2;
    }
}

} // namespace

struct lac_svt_subspace {
    int64_t count = 0, p = 0;
    double *theta = nullptr;   /* count x p: each slice's eigenvalues of B, descending */
    /* The stored pairs are a cold pass's: q of them a slice, the rest never
     * written, so the next warm pass takes the full eigensolve (which stores
     * all p) instead of reading them. */
    bool partial = false;
    /* A chunk's buffers, made for `chunk` slices of rows x cols and block q. */
    int64_t rows = 0, cols = 0, chunk = 0, q = 0;
    double *a = nullptr, *g = nullptr, *gs = nullptr, *z0 = nullptr, *z1 = nullptr, *t = nullptr, *x = nullptr;
    double *c = nullptr, *h = nullptr, *w = nullptr, *factor = nullptr, *scal = nullptr, *sigma = nullptr;
    double **pz = nullptr, **pc = nullptr, **pg = nullptr;
    /* A cold pass's and a wide block's own (extras = true): the inverse
     * factor and its pointers, two q x q scratch matrices, the power step's
     * vectors, the float32 Ritz problem and its solver's workspace. */
    bool extras = false;
    double *tinv = nullptr, *ta = nullptr, *tb = nullptr, *pv = nullptr, *pw = nullptr;
    double **pt = nullptr;
    float *h32 = nullptr, *w32 = nullptr;
    void *work32 = nullptr, *host_work32 = nullptr;
    size_t work32_bytes = 0, host32_bytes = 0;
    cusolverDnParams_t params32 = nullptr;
    int *status = nullptr, *info = nullptr, *kept = nullptr, *skip = nullptr, *slot = nullptr;
    int *r_max = nullptr;   /* made with the state */
    int *status_host = nullptr, *slot_host = nullptr;
    void *work = nullptr, *host_work = nullptr;
    size_t work_bytes = 0, host_bytes = 0;
    cusolverDnParams_t params = nullptr;
    /* The fallback's compacted slices (REAL) and their figures. */
    void *ca = nullptr, *cout = nullptr, *ctruth = nullptr;
    double *clambda = nullptr, *cstats = nullptr;
    double *theta_at(int64_t first) { return theta + first * p; }
    void release_chunk()
    {
        double *d[] = {a, g, gs, z0, z1, t, x, c, h, w, factor, scal, sigma, clambda, cstats, tinv, ta, tb, pv, pw};
        for (double *p_ : d) cudaFree(p_);
        cudaFree(pz);
        cudaFree(pc);
        cudaFree(pg);
        cudaFree(pt);
        cudaFree(h32);
        cudaFree(w32);
        cudaFree(work32);
        free(host_work32);
        if (params32) cusolverDnDestroyParams(params32);
        tinv = ta = tb = pv = pw = nullptr;
        pt = nullptr;
        h32 = w32 = nullptr;
        work32 = host_work32 = nullptr;
        params32 = nullptr;
        extras = false;
        int *i[] = {status, info, kept, skip, slot};
        for (int *p_ : i) cudaFree(p_);
        cudaFree(work);
        cudaFree(ca);
        cudaFree(cout);
        cudaFree(ctruth);
        free(host_work);
        free(status_host);
        free(slot_host);
        if (params) cusolverDnDestroyParams(params);
        a = g = gs = z0 = z1 = t = x = c = h = w = factor = scal = sigma = clambda = cstats = nullptr;
        pz = pc = pg = nullptr;
        status = info = kept = skip = slot = status_host = slot_host = nullptr;
        work = host_work = ca = cout = ctruth = nullptr;
        params = nullptr;
        rows = cols = chunk = q = 0;
    }
    ~lac_svt_subspace()
    {
        release_chunk();
        cudaFree(theta);
        cudaFree(r_max);
    }
};

void lac_svt_subspace_free(lac_svt_subspace *sub)
{
    delete sub;
}

template <typename REAL> bool lac_svt_subspace_on(lac_ctx_t ctx)
{
    const char *knob = lac_knob_string(ctx, LAC_KNOB_IMPUTE_CUDA_SUBSPACE);
    if (knob && (strcmp(knob, "0") == 0 || strcmp(knob, "off") == 0)) return false;
    if (sizeof(REAL) == sizeof(float)) return true;
    /* float64 asks for float64 rounding, below the certificate's 2^-21: on request only. */
    return knob && strcmp(knob, "force") == 0;
}

template bool lac_svt_subspace_on<float>(lac_ctx_t);
template bool lac_svt_subspace_on<double>(lac_ctx_t);

lac_status lac_svt_subspace_seed(lac_ctx_t ctx, lac_svt_gram_cache **cache, int64_t count, int64_t p, double **theta)
{
    if (!*cache) {
        *cache = new (std::nothrow) lac_svt_gram_cache;
        if (!*cache) return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "Gram SVT buffers");
    }
    lac_svt_subspace *&sub = (*cache)->sub;
    if (sub && (sub->count != count || sub->p != p)) {
        LAC_CUDA_CHECK(ctx, cudaStreamSynchronize(ctx->cuda->stream));
        delete sub;
        sub = nullptr;
    }
    if (!sub) {
        sub = new (std::nothrow) lac_svt_subspace;
        if (!sub) return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "subspace SVT state");
        sub->count = count;
        sub->p = p;
        LAC_CUDA_CHECK(ctx, cudaMalloc(&sub->theta, (size_t)(count * p) * sizeof(double)));
        LAC_CUDA_CHECK(ctx, cudaMalloc(&sub->r_max, sizeof(int)));
    }
    sub->partial = false;   /* the caller's pass stores the pairs now */
    *theta = sub->theta;
    return LAC_SUCCESS;
}

namespace {

template <typename T> lac_status dev(lac_ctx_t ctx, T **p, int64_t count)
{
    LAC_CUDA_CHECK(ctx, cudaMalloc((void **)p, (size_t)(count > 0 ? count : 1) * sizeof(T)));
    return LAC_SUCCESS;
}

/* Buffers for chunks of n slices of rows x cols with block q. */
template <typename REAL>
lac_status sub_alloc(lac_ctx_t ctx, cusolverDnHandle_t solver, lac_svt_subspace &s, int64_t n, int64_t rows,
                     int64_t cols, int64_t q, bool cold)
{
    const int64_t p = s.p, side = rows > cols ? rows : cols, size = rows * cols, zs = side * 2 * q;
    s.rows = rows;
    s.cols = cols;
    s.chunk = n;
    s.q = q;
    LAC_CHECK(dev(ctx, &s.a, n * size));
    LAC_CHECK(dev(ctx, &s.g, n * p * p));
    LAC_CHECK(dev(ctx, &s.gs, n * p * p));
    LAC_CHECK(dev(ctx, &s.z0, n * zs));
    LAC_CHECK(dev(ctx, &s.z1, n * zs));
    LAC_CHECK(dev(ctx, &s.t, n * zs));
    LAC_CHECK(dev(ctx, &s.x, n * p * q));
    LAC_CHECK(dev(ctx, &s.c, n * q * q));
    LAC_CHECK(dev(ctx, &s.h, n * q * q));
    LAC_CHECK(dev(ctx, &s.w, n * q));
    LAC_CHECK(dev(ctx, &s.factor, n * q));
    LAC_CHECK(dev(ctx, &s.scal, n * S_SCALARS));
    LAC_CHECK(dev(ctx, &s.sigma, n));
    LAC_CHECK(dev(ctx, &s.pz, n));
    LAC_CHECK(dev(ctx, &s.pc, n));
    LAC_CHECK(dev(ctx, &s.pg, n));
    LAC_CHECK(dev(ctx, &s.status, n));
    LAC_CHECK(dev(ctx, &s.info, n));
    LAC_CHECK(dev(ctx, &s.kept, n));
    LAC_CHECK(dev(ctx, &s.skip, n));
    LAC_CHECK(dev(ctx, &s.slot, n));
    LAC_CHECK(dev(ctx, &s.clambda, n));
    LAC_CHECK(dev(ctx, &s.cstats, n * LAC_SVT_STATS));
    LAC_CUDA_CHECK(ctx, cudaMalloc(&s.ca, (size_t)(n * size) * sizeof(REAL)));
    LAC_CUDA_CHECK(ctx, cudaMalloc(&s.cout, (size_t)(n * size) * sizeof(REAL)));
    LAC_CUDA_CHECK(ctx, cudaMalloc(&s.ctruth, (size_t)(n * size) * sizeof(REAL)));
    LAC_CHECK(lac_syev_batched_workspace(ctx, solver, CUDA_R_64F, q, s.h, s.w, n, &s.params, &s.work, &s.work_bytes,
                                         &s.host_work, &s.host_bytes));
    s.status_host = (int *)malloc((size_t)n * sizeof(int));
    s.slot_host = (int *)malloc((size_t)n * sizeof(int));
    if (!s.status_host || !s.slot_host)
        return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "host buffers of the subspace SVT");
    s.extras = cold || q > RITZ64_MOST;
    if (!s.extras) return LAC_SUCCESS;
    LAC_CHECK(dev(ctx, &s.tinv, n * q * q));
    LAC_CHECK(dev(ctx, &s.ta, n * q * q));
    LAC_CHECK(dev(ctx, &s.tb, n * q * q));
    LAC_CHECK(dev(ctx, &s.pv, n * p));
    LAC_CHECK(dev(ctx, &s.pw, n * p));
    LAC_CHECK(dev(ctx, &s.pt, n));
    LAC_CHECK(dev(ctx, &s.h32, n * q * q));
    LAC_CHECK(dev(ctx, &s.w32, n * q));
    return lac_syev_batched_workspace(ctx, solver, CUDA_R_32F, q, s.h32, s.w32, n, &s.params32, &s.work32,
                                      &s.work32_bytes, &s.host_work32, &s.host32_bytes);
}

size_t sub_slice_bytes(int64_t rows, int64_t cols, int64_t q, size_t real, bool cold)
{
    const int64_t p = cols <= rows ? cols : rows, side = rows > cols ? rows : cols, size = rows * cols;
    const bool extras = cold || q > RITZ64_MOST;
    const size_t extra_bytes =
        extras ? (size_t)(3 * q * q + 2 * p) * sizeof(double) + (size_t)(q * q + q) * sizeof(float) + sizeof(double *) : 0;
    return (size_t)(size + 2 * p * p + 3 * side * 2 * q + p * q + 2 * q * q + 2 * q + S_SCALARS + 2 + LAC_SVT_STATS) *
               sizeof(double) +
           3 * (size_t)size * real + 3 * sizeof(double *) + 6 * sizeof(int) + extra_bytes;
}

#define SUB_BLAS(call, what)                                                                   \
    do {                                                                                       \
        cublasStatus_t bs_ = (call);                                                           \
        if (bs_ != CUBLAS_STATUS_SUCCESS) return lac_cublas_fail(ctx, (int)bs_, what, __FILE__, __LINE__); \
    } while (0)
#define SUB_SOLVER(call, what)                                                                 \
    do {                                                                                       \
        cusolverStatus_t cs_ = (call);                                                         \
        if (cs_ != CUSOLVER_STATUS_SUCCESS) return lac_cusolver_fail(ctx, (int)cs_, what, __FILE__, __LINE__); \
    } while (0)

/* L into s.c (lower, through s.pc), with L Lᵀ = ZᵀZ for the p x q block at z
 * (ld lz, zs apart); slices whose factorisation fails are marked. */
lac_status factor_block(lac_ctx_t ctx, cublasHandle_t blas, cusolverDnHandle_t solver, lac_svt_subspace &s,
                        const double *z, int64_t lz, int64_t zs, int64_t p, int64_t q, int64_t n)
{
    const double one = 1, zero = 0;
    SUB_BLAS(cublasDgemmStridedBatched_64(blas, CUBLAS_OP_T, CUBLAS_OP_N, q, q, p, &one, z, lz, zs, z, lz, zs, &zero, s.c,
                                          q, q * q, n),
             "Cholesky QR: ZᵀZ");
    SUB_SOLVER(cusolverDnDpotrfBatched(solver, CUBLAS_FILL_MODE_LOWER, (int)q, s.pc, (int)q, s.info, (int)n),
               "Cholesky QR: potrfBatched");
    note_info<<<grid_for(n), 256, 0, ctx->cuda->stream>>>(s.info, s.status, n);
    LAC_CUDA_CHECK_LAUNCH(ctx);
    return LAC_SUCCESS;
}

/* Z (p x q a slice, zs apart, in *z) := Z L⁻ᵀ with ZᵀZ = L Lᵀ. */
lac_status cholesky_qr(lac_ctx_t ctx, cublasHandle_t blas, cusolverDnHandle_t solver, lac_svt_subspace &s, double *z,
                       int64_t zs, int64_t p, int64_t q, int64_t n)
{
    const double one = 1;
    LAC_CHECK(factor_block(ctx, blas, solver, s, z, p, zs, p, q, n));
    fill_pointers<<<grid_for(n), 256, 0, ctx->cuda->stream>>>(s.pz, z, zs, n);
    LAC_CUDA_CHECK_LAUNCH(ctx);
    SUB_BLAS(cublasDtrsmBatched(blas, CUBLAS_SIDE_RIGHT, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_T, CUBLAS_DIAG_NON_UNIT,
                                (int)p, (int)q, &one, s.pc, (int)q, s.pz, (int)p, (int)n),
             "Cholesky QR: trsmBatched");
    return LAC_SUCCESS;
}

/* out (rows x q, ld lo) := src (rows x q, ld ls) L⁻ᵀ, with L Lᵀ = ZᵀZ and Z
 * the p x q block at z (ld lz): the inverse factor is formed once (a
 * triangular solve on I, q x q) and applied by one GEMM, cheaper than a
 * solve on the p (or 2p) rows. Slices whose factorisation fails are marked. */
lac_status orthonormalise(lac_ctx_t ctx, cublasHandle_t blas, cusolverDnHandle_t solver, lac_svt_subspace &s,
                          const double *z, int64_t lz, const double *src, int64_t ls, int64_t rows, double *out,
                          int64_t lo, int64_t zs, int64_t p, int64_t q, int64_t n)
{
    cudaStream_t stream = ctx->cuda->stream;
    const double one = 1, zero = 0;
    LAC_CHECK(factor_block(ctx, blas, solver, s, z, lz, zs, p, q, n));
    fill_identity<<<grid_for(n * q * q), 256, 0, stream>>>(s.tinv, q, n);
    LAC_CUDA_CHECK_LAUNCH(ctx);
    SUB_BLAS(cublasDtrsmBatched(blas, CUBLAS_SIDE_RIGHT, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_T, CUBLAS_DIAG_NON_UNIT, (int)q,
                                (int)q, &one, s.pc, (int)q, s.pt, (int)q, (int)n),
             "cold filter: L⁻ᵀ");
    SUB_BLAS(cublasDgemmStridedBatched_64(blas, CUBLAS_OP_N, CUBLAS_OP_N, rows, q, q, &one, src, ls, zs, s.tinv, q, q * q,
                                          &zero, out, lo, zs, n),
             "cold filter: Z L⁻ᵀ");
    return LAC_SUCCESS;
}

/* The Ritz problem of the block Q in s.z0 (ld p): T = BQ into s.t, H = QᵀT
 * into s.h. */
lac_status ritz_matrix(lac_ctx_t ctx, cublasHandle_t blas, lac_svt_subspace &s, int64_t p, int64_t q, int64_t zs,
                       int64_t n)
{
    const int64_t pp = p * p;
    const double one = 1, zero = 0;
    SUB_BLAS(cublasDgemmStridedBatched_64(blas, CUBLAS_OP_N, CUBLAS_OP_N, p, q, p, &one, s.g, p, pp, s.z0, p, zs, &zero,
                                          s.t, p, zs, n),
             "Rayleigh-Ritz: BQ");
    SUB_BLAS(cublasDgemmStridedBatched_64(blas, CUBLAS_OP_T, CUBLAS_OP_N, q, q, p, &one, s.z0, p, zs, s.t, p, zs, &zero,
                                          s.h, q, q * q, n),
             "Rayleigh-Ritz: QᵀBQ");
    return LAC_SUCCESS;
}

/* Rayleigh–Ritz on the block Q in s.z0 (ld p) for blocks wider than
 * RITZ64_MOST: T = BQ into s.t, H = QᵀT, H = Y θ Yᵀ in float32 (cuSOLVER's
 * batched solver costs 3-4 times less there than in float64: H200, 300 of
 * 256 x 256, 12 against 27 ms), then Y refined once in float64 (Ogita and
 * Aishima), which brings the residuals to the float64 solver's: θ into s.w
 * (ascending), Y into s.ta. */
lac_status ritz_refined(lac_ctx_t ctx, cublasHandle_t blas, cusolverDnHandle_t solver, lac_svt_subspace &s, int64_t p,
                        int64_t q, int64_t zs, int64_t n)
{
    cudaStream_t stream = ctx->cuda->stream;
    const int64_t qq = q * q;
    const double one = 1, zero = 0;
    LAC_CHECK(ritz_matrix(ctx, blas, s, p, q, zs, n));
    narrow<<<grid_for(n * qq), 256, 0, stream>>>(s.h32, s.h, n * qq);
    LAC_CUDA_CHECK_LAUNCH(ctx);
    SUB_SOLVER(cusolverDnXsyevBatched(solver, s.params32, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_UPPER, q, CUDA_R_32F,
                                      s.h32, q, CUDA_R_32F, s.w32, CUDA_R_32F, s.work32, s.work32_bytes, s.host_work32,
                                      s.host32_bytes, s.info, n),
               "cusolverDnXsyevBatched (Ritz, float32)");
    note_info<<<grid_for(n), 256, 0, stream>>>(s.info, s.status, n);
    LAC_CUDA_CHECK_LAUNCH(ctx);
    widen_f<<<grid_for(n * qq), 256, 0, stream>>>(s.ta, s.h32, n * qq);
    LAC_CUDA_CHECK_LAUNCH(ctx);
    SUB_BLAS(cublasDgemmStridedBatched_64(blas, CUBLAS_OP_N, CUBLAS_OP_N, q, q, q, &one, s.h, q, qq, s.ta, q, qq, &zero,
                                          s.tb, q, qq, n),
             "Ritz refinement: HY");
    SUB_BLAS(cublasDgemmStridedBatched_64(blas, CUBLAS_OP_T, CUBLAS_OP_N, q, q, q, &one, s.ta, q, qq, s.tb, q, qq, &zero,
                                          s.c, q, qq, n),
             "Ritz refinement: YᵀHY");
    SUB_BLAS(cublasDgemmStridedBatched_64(blas, CUBLAS_OP_T, CUBLAS_OP_N, q, q, q, &one, s.ta, q, qq, s.ta, q, qq, &zero,
                                          s.tinv, q, qq, n),
             "Ritz refinement: YᵀY");
    refine_values<<<(unsigned)n, 256, 0, stream>>>(s.c, s.tinv, s.w, q, s.scal);
    LAC_CUDA_CHECK_LAUNCH(ctx);
    refine_factor<<<grid_for(n * qq), 256, 0, stream>>>(s.tinv, s.c, s.w, q, n, s.scal);
    LAC_CUDA_CHECK_LAUNCH(ctx);
    LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(s.tb, s.ta, (size_t)(n * qq) * sizeof(double), cudaMemcpyDeviceToDevice, stream));
    SUB_BLAS(cublasDgemmStridedBatched_64(blas, CUBLAS_OP_N, CUBLAS_OP_N, q, q, q, &one, s.tb, q, qq, s.tinv, q, qq, &one,
                                          s.ta, q, qq, n),
             "Ritz refinement: Y + YF");
    return LAC_SUCCESS;
}

/* A cold pass's block and Ritz pairs (no stored vectors): Q, an orthonormal
 * basis of T_d(2B/c - I) Z0 with Z0 random, into s.z0 (ld p); BQ into s.t;
 * the Ritz values θ (ascending) into s.w and the vectors Y (q x q) into s.ta.
 * The filter runs the three-term recurrence at full degree (Z_j and Z_{j-1}
 * stacked, 2p rows, ld 2p), both made orthonormal by the same transform
 * whenever the block's condition number may have grown by e^COLD_GROWTH (the
 * growth a degree bounded through power steps on B); the Ritz problem is
 * solved in float32 and its vectors refined once in float64. */
lac_status cold_start(lac_ctx_t ctx, cublasHandle_t blas, cusolverDnHandle_t solver, lac_svt_subspace &s, int64_t p,
                      int64_t q, int64_t zs, int64_t n, int degree)
{
    cudaStream_t stream = ctx->cuda->stream;
    const int64_t pp = p * p, qq = q * q;
    const double one = 1, zero = 0, two = 2, minus = -1;
    fill_pointers<<<grid_for(n), 256, 0, stream>>>(s.pt, s.tinv, qq, n);
    LAC_CUDA_CHECK_LAUNCH(ctx);

    /* σmax² from above: power steps from the block's first column. */
    cold_random<<<grid_for(n * p * q), 256, 0, stream>>>(s.z0, p, q, 2 * p, zs, n);
    LAC_CUDA_CHECK_LAUNCH(ctx);
    LAC_CUDA_CHECK(ctx, cudaMemcpy2DAsync(s.pv, (size_t)p * sizeof(double), s.z0, (size_t)zs * sizeof(double),
                                          (size_t)p * sizeof(double), (size_t)n, cudaMemcpyDeviceToDevice, stream));
    for (int step = 0; step < COLD_POWER_STEPS; step++) {
        SUB_BLAS(cublasDgemvStridedBatched(blas, CUBLAS_OP_N, (int)p, (int)p, &one, s.g, (int)p, pp, s.pv, 1, p, &zero,
                                           s.pw, 1, p, (int)n),
                 "cold pass: power step");
        power_normalise<<<(unsigned)n, 256, 0, stream>>>(s.pw, s.pv, p, s.scal);
        LAC_CUDA_CHECK_LAUNCH(ctx);
    }
    int gmax = 0;
    LAC_CUDA_CHECK(ctx, cudaMemsetAsync(s.r_max, 0, sizeof(int), stream));
    filter_growth<<<grid_for(n), 256, 0, stream>>>(s.scal, s.status, n, s.r_max);
    LAC_CUDA_CHECK_LAUNCH(ctx);
    LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(&gmax, s.r_max, sizeof(int), cudaMemcpyDeviceToHost, stream));
    LAC_CUDA_CHECK(ctx, cudaStreamSynchronize(stream));
    const double growth = gmax / 1024.0;   /* ln of the condition number's growth a degree, at most */
    int every = gmax > 0 ? (int)(COLD_GROWTH / growth) : degree;
    if (every < 1) every = 1;
    int last = 0;   /* the degree of the last orthonormalisation */

    /* Z_1 = X Z_0, then Z_{j+1} = 2 X Z_j - Z_{j-1} over Z_{j-1}. */
    double *za = s.z0, *zb = s.z1;
    int64_t cur = p, prev = 0;   /* row offsets of Z_j and Z_{j-1} in the stacked block */
    SUB_BLAS(cublasDgemmStridedBatched_64(blas, CUBLAS_OP_N, CUBLAS_OP_N, p, q, p, &one, s.gs, p, pp, za, 2 * p, zs, &zero,
                                          za + p, 2 * p, zs, n),
             "cold filter step");
    for (int j = 2; j <= degree; j++) {
        SUB_BLAS(cublasDgemmStridedBatched_64(blas, CUBLAS_OP_N, CUBLAS_OP_N, p, q, p, &two, s.gs, p, pp, za + cur, 2 * p,
                                              zs, &minus, za + prev, 2 * p, zs, n),
                 "cold filter step");
        const int64_t t = cur;
        cur = prev;
        prev = t;
        if (j % every == 0 && j < degree) {
            LAC_CHECK(orthonormalise(ctx, blas, solver, s, za + cur, 2 * p, za, 2 * p, 2 * p, zb, 2 * p, zs, p, q, n));
            double *t2 = za;
            za = zb;
            zb = t2;
            last = j;
        }
    }
    /* Q into s.z0: Cholesky QR, twice unless the block is well conditioned. */
    const double since = (degree - last) * growth + (last == 0 ? COLD_START_GROWTH : 0);
    if (since <= COLD_ONCE) {
        LAC_CHECK(orthonormalise(ctx, blas, solver, s, za + cur, 2 * p, za + cur, 2 * p, p, s.z0 == za ? s.t : s.z0, p,
                                 zs, p, q, n));
        if (s.z0 == za)
            LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(s.z0, s.t, (size_t)(n * zs) * sizeof(double), cudaMemcpyDeviceToDevice,
                                                stream));
    } else {
        LAC_CHECK(orthonormalise(ctx, blas, solver, s, za + cur, 2 * p, za + cur, 2 * p, p, s.t, p, zs, p, q, n));
        LAC_CHECK(orthonormalise(ctx, blas, solver, s, s.t, p, s.t, p, p, s.z0, p, zs, p, q, n));
    }

    return ritz_refined(ctx, blas, solver, s, p, q, zs, n);
}

/* A warm pass's block and Ritz pairs: from V's first q columns (v, p x p a
 * slice), rounds of T_2 (or T_1 for an odd rest) each followed by Cholesky QR,
 * then the Ritz problem, in float64 up to RITZ64_MOST (Y into s.h), else by
 * ritz_refined (Y into s.ta); Q into s.z0, BQ into s.t, θ into s.w. */
lac_status warm_start(lac_ctx_t ctx, cublasHandle_t blas, cusolverDnHandle_t solver, lac_svt_subspace &s,
                      const double *v, int64_t p, int64_t q, int64_t zs, int64_t n, int degree)
{
    cudaStream_t stream = ctx->cuda->stream;
    const int64_t pp = p * p;
    const double one = 1, zero = 0, two = 2, minus = -1;
    /* Z0 = V's first q columns; rounds of T_2 (or T_1 for an odd rest). */
    LAC_CUDA_CHECK(ctx, cudaMemcpy2DAsync(s.z0, (size_t)zs * sizeof(double), v, (size_t)pp * sizeof(double),
                                          (size_t)(p * q) * sizeof(double), (size_t)n, cudaMemcpyDeviceToDevice, stream));
    for (int left = degree; left > 0; left -= 2) {
        SUB_BLAS(cublasDgemmStridedBatched_64(blas, CUBLAS_OP_N, CUBLAS_OP_N, p, q, p, &one, s.gs, p, pp, s.z0, p, zs,
                                              &zero, s.z1, p, zs, n),
                 "filter step");
        if (left >= 2)   /* T_2 = 2 x T_1 - T_0, over Z0 */
            SUB_BLAS(cublasDgemmStridedBatched_64(blas, CUBLAS_OP_N, CUBLAS_OP_N, p, q, p, &two, s.gs, p, pp, s.z1, p,
                                                  zs, &minus, s.z0, p, zs, n),
                     "filter step");
        else
            LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(s.z0, s.z1, (size_t)(n * zs) * sizeof(double), cudaMemcpyDeviceToDevice,
                                                stream));
        LAC_CHECK(cholesky_qr(ctx, blas, solver, s, s.z0, zs, p, q, n));
    }
    LAC_CHECK(cholesky_qr(ctx, blas, solver, s, s.z0, zs, p, q, n));   /* twice: orthonormal to rounding */
    if (q > RITZ64_MOST) return ritz_refined(ctx, blas, solver, s, p, q, zs, n);

    /* Rayleigh–Ritz: T = B Q, H = Qᵀ T = Y θ Yᵀ, X = Q Y, BX = T Y. */
    LAC_CHECK(ritz_matrix(ctx, blas, s, p, q, zs, n));
    SUB_SOLVER(cusolverDnXsyevBatched(solver, s.params, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_UPPER, q, CUDA_R_64F,
                                      s.h, q, CUDA_R_64F, s.w, CUDA_R_64F, s.work, s.work_bytes, s.host_work, s.host_bytes,
                                      s.info, n),
               "cusolverDnXsyevBatched (Ritz)");
    note_info<<<grid_for(n), 256, 0, stream>>>(s.info, s.status, n);
    LAC_CUDA_CHECK_LAUNCH(ctx);
    return LAC_SUCCESS;
}

/* The subspace steps over slices [first, first + n) of b; statuses in s. */
template <typename REAL>
lac_status sub_chunk(lac_ctx_t ctx, cublasHandle_t blas, cusolverDnHandle_t solver, lac_svt_subspace &s,
                     const lac_svt_batch<REAL> &b, int64_t first, int64_t n, int degree, bool cold, size_t budget,
                     lac_svt_gram_cache **cache, int64_t *certified, int64_t *zeros)
{
    cudaStream_t stream = ctx->cuda->stream;
    const int64_t rows = b.rows, cols = b.cols, size = rows * cols, p = s.p, q = s.q;
    const int right = cols <= rows;
    const int64_t len = right ? rows : cols, side = rows > cols ? rows : cols, zs = side * 2 * q, pp = p * p;
    const double one = 1, zero = 0, minus = -1;
    const double *lambda = b.lambda + first;

    LAC_CHECK(lac_svt_widen<REAL>(ctx, s.a, b.a + first * b.stride, n * size));
    SUB_BLAS(cublasDgemmStridedBatched_64(blas, right ? CUBLAS_OP_T : CUBLAS_OP_N, right ? CUBLAS_OP_N : CUBLAS_OP_T, p,
                                          p, len, &one, s.a, rows, size, s.a, rows, size, &zero, s.g, p, pp, n),
             "Gram matrices");
    slice_scalars<<<(unsigned)n, 256, 0, stream>>>(s.g, p, q, lambda, cold ? nullptr : s.theta_at(first), COLD_CUT,
                                                   s.scal, s.status);
    LAC_CUDA_CHECK_LAUNCH(ctx);
    filter_matrix<<<grid_for(n * pp), 256, 0, stream>>>(s.g, s.gs, p, n, s.scal);
    LAC_CUDA_CHECK_LAUNCH(ctx);
    fill_pointers<<<grid_for(n), 256, 0, stream>>>(s.pc, s.c, q * q, n);
    LAC_CUDA_CHECK_LAUNCH(ctx);

    /* The block and its Ritz pairs: Q in s.z0, BQ in s.t, θ in s.w, Y at y. */
    if (cold) LAC_CHECK(cold_start(ctx, blas, solver, s, p, q, zs, n, degree));
    else LAC_CHECK(warm_start(ctx, blas, solver, s, b.v + first * pp, p, q, zs, n, degree));
    const double *y = cold || q > RITZ64_MOST ? s.ta : s.h;
    SUB_BLAS(cublasDgemmStridedBatched_64(blas, CUBLAS_OP_N, CUBLAS_OP_N, p, q, q, &one, s.z0, p, zs, y, q, q * q,
                                          &zero, s.x, p, p * q, n),
             "Ritz vectors");
    SUB_BLAS(cublasDgemmStridedBatched_64(blas, CUBLAS_OP_N, CUBLAS_OP_N, p, q, q, &one, s.t, p, zs, y, q, q * q,
                                          &zero, s.z1, p, zs, n),
             "Ritz residuals");

    int rm = 0;
    LAC_CUDA_CHECK(ctx, cudaMemsetAsync(s.r_max, 0, sizeof(int), stream));
    count_kept<<<grid_for(n), 256, 0, stream>>>(s.w, q, n, s.scal, s.status, s.kept, s.r_max);
    LAC_CUDA_CHECK_LAUNCH(ctx);
    LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(&rm, s.r_max, sizeof(int), cudaMemcpyDeviceToHost, stream));
    LAC_CUDA_CHECK(ctx, cudaStreamSynchronize(stream));
    check_pairs<<<(unsigned)n, 256, 0, stream>>>(s.x, s.z1, s.w, p, q, p * q, zs, rm, lambda, s.scal, s.status, s.kept,
                                                 s.factor, s.z0, s.t, zs);
    LAC_CUDA_CHECK_LAUNCH(ctx);
    /* K = shift·I - PBP = shift·I - B + [X_r W][W X_r]ᵀ, factorised in place of B. */
    if (rm > 0)
        SUB_BLAS(cublasDgemmStridedBatched_64(blas, CUBLAS_OP_N, CUBLAS_OP_T, p, p, 2 * rm, &one, s.z0, p, zs, s.t, p,
                                              zs, &minus, s.g, p, pp, n),
                 "certificate: PBP");
    else
        SUB_BLAS(cublasDscal_64(blas, n * pp, &minus, s.g, 1), "certificate: -B");
    shift_diagonal<<<grid_for(n * p), 256, 0, stream>>>(s.g, p, n, s.scal);
    LAC_CUDA_CHECK_LAUNCH(ctx);
    fill_pointers<<<grid_for(n), 256, 0, stream>>>(s.pg, s.g, pp, n);
    LAC_CUDA_CHECK_LAUNCH(ctx);
    SUB_SOLVER(cusolverDnDpotrfBatched(solver, CUBLAS_FILL_MODE_LOWER, (int)p, s.pg, (int)p, s.info, (int)n),
               "certificate: potrfBatched");
    verdict<<<grid_for(n), 256, 0, stream>>>(s.status, s.info, s.scal, s.skip, s.sigma, n);
    LAC_CUDA_CHECK_LAUNCH(ctx);

    /* The certified slices: rebuilt, stored, their Ritz pairs kept. */
    LAC_CHECK(lac_svt_rebuild(ctx, right, rows, cols, n, rm, s.a, s.z1, s.x + (q - rm) * p, p * q, s.factor, (int)q));
    LAC_CHECK(lac_svt_store<REAL>(ctx, rm > 0 ? s.a : nullptr, b.out + first * b.stride,
                                  b.truth ? b.truth + first * b.stride : nullptr, size, b.stride, n, s.kept, s.sigma,
                                  nullptr, b.stats + first * LAC_SVT_STATS, s.skip));
    if (b.v) {
        keep_ritz<<<grid_for(n * p * q), 256, 0, stream>>>(s.x, s.w, p, q, p * q, n, s.status, b.v, s.theta, first);
        LAC_CUDA_CHECK_LAUNCH(ctx);
    }

    /* The others, compacted, by the full path. */
    LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(s.status_host, s.status, (size_t)n * sizeof(int), cudaMemcpyDeviceToHost, stream));
    LAC_CUDA_CHECK(ctx, cudaStreamSynchronize(stream));
    int64_t failed = 0;
    for (int64_t k = 0; k < n; k++) {
        if (s.status_host[k] == ST_FAIL) s.slot_host[failed++] = (int)(first + k);
        else *zeros += s.status_host[k] == ST_ZERO;
    }
    *certified += n - failed;
    if (failed == 0) return LAC_SUCCESS;
    LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(s.slot, s.slot_host, (size_t)failed * sizeof(int), cudaMemcpyHostToDevice, stream));
    REAL *ca = (REAL *)s.ca, *co = (REAL *)s.cout, *ct = b.truth ? (REAL *)s.ctruth : nullptr;
    gather_slices<REAL><<<grid_for(failed * size), 256, 0, stream>>>(ca, b.a, s.slot, size, b.stride, failed);
    gather_slices<REAL><<<grid_for(failed * size), 256, 0, stream>>>(co, b.out, s.slot, size, b.stride, failed);
    if (ct) gather_slices<REAL><<<grid_for(failed * size), 256, 0, stream>>>(ct, b.truth, s.slot, size, b.stride, failed);
    gather_slices<double><<<grid_for(failed), 256, 0, stream>>>(s.clambda, b.lambda, s.slot, 1, 1, failed);
    LAC_CUDA_CHECK_LAUNCH(ctx);
    lac_svt_batch<REAL> fb = b;   /* the failed slices, compacted; vectors to their own places */
    fb.count = failed;
    fb.a = ca;
    fb.out = co;
    fb.truth = ct;
    fb.lambda = s.clambda;
    fb.stats = s.cstats;
    fb.warm = 0;
    fb.theta = s.theta;
    fb.slot = s.slot;
    LAC_CHECK(lac_svt_gram_full<REAL>(ctx, fb, budget, cache));
    scatter_slices<REAL><<<grid_for(failed * size), 256, 0, stream>>>(b.out, co, s.slot, size, b.stride, failed);
    scatter_slices<double><<<grid_for(failed * LAC_SVT_STATS), 256, 0, stream>>>(b.stats, s.cstats, s.slot, LAC_SVT_STATS,
                                                                                  LAC_SVT_STATS, failed);
    LAC_CUDA_CHECK_LAUNCH(ctx);
    return LAC_SUCCESS;
}

/* The pass over every chunk with block q and filter degree `degree`; cold:
 * from random vectors (cold_start), else from the stored ones. */
template <typename REAL>
lac_status run_pass(lac_ctx_t ctx, const lac_svt_batch<REAL> &b, size_t budget, lac_svt_gram_cache **cache,
                    lac_svt_subspace &s, int64_t q, int64_t degree, bool cold)
{
    const int64_t rows = b.rows, cols = b.cols;
    cudaStream_t stream = ctx->cuda->stream;
    cublasHandle_t blas;
    cusolverDnHandle_t solver;
    LAC_CHECK(lac_cuda_cublas(ctx, &blas));
    LAC_CHECK(lac_cuda_cusolver(ctx, &solver));
    if (degree < 1) degree = 1;

    /* Chunks that fit the budget; buffers remade when the shape, the block or the start changes. */
    const size_t per = sub_slice_bytes(rows, cols, q, sizeof(REAL), cold);
    int64_t chunk = (int64_t)(budget / per);
    if (chunk < 1) chunk = 1;
    if (chunk > b.count) chunk = b.count;
    if (s.chunk && (s.rows != rows || s.cols != cols || s.q != q || s.chunk < chunk || ((cold || q > RITZ64_MOST) && !s.extras))) {
        LAC_CUDA_CHECK(ctx, cudaStreamSynchronize(stream));
        s.release_chunk();
    }
    if (!s.chunk) {
        lac_status as = sub_alloc<REAL>(ctx, solver, s, chunk, rows, cols, q, cold);
        if (as < 0) {
            s.release_chunk();
            return as;
        }
    }
    chunk = s.chunk;
    int64_t certified = 0, zeros = 0;
    lac_status st = LAC_SUCCESS;
    for (int64_t first = 0; first < b.count && st >= 0; first += chunk) {
        const int64_t n = b.count - first < chunk ? b.count - first : chunk;
        st = sub_chunk<REAL>(ctx, blas, solver, s, b, first, n, (int)degree, cold, budget, cache, &certified, &zeros);
    }
    cudaError_t ce = cudaStreamSynchronize(stream);
    if (st >= 0 && ce != cudaSuccess) st = lac_cuda_fail(ctx, ce, "subspace SVT", __FILE__, __LINE__);
    if (st >= 0)
        lac_log(ctx, LAC_LOG_DEBUG,
                "impute (cuda): SVT by subspace%s, block %lld of %lld, filter degree %lld: %lld of %lld slices "
                "certified (%lld zero by trace), %lld by the full eigensolve",
                cold ? " (cold start)" : "", (long long)q, (long long)s.p, (long long)degree, (long long)certified,
                (long long)b.count, (long long)zeros, (long long)(b.count - certified));
    return st;
}

} // namespace

template <typename REAL>
lac_status lac_svt_subspace_pass(lac_ctx_t ctx, const lac_svt_batch<REAL> &b, size_t budget, lac_svt_gram_cache **cache,
                            lac_svt_subspace **subp)
{
    lac_svt_subspace *sub = *subp;
    const int64_t rows = b.rows, cols = b.cols, p = cols <= rows ? cols : rows;
    if (!sub || sub->partial || sub->count != b.count || sub->p != p || b.stride != rows * cols)
        return LAC_INFO_NOT_CONVERGED;
    cudaStream_t stream = ctx->cuda->stream;
    lac_svt_subspace &s = *sub;

    /* The block: the largest rank the kept eigenvalues give for this λ, plus
     * a quarter (at least 8) of oversampling, in steps of 8. Near p the
     * full path costs no more. */
    int r = 0;
    LAC_CUDA_CHECK(ctx, cudaMemsetAsync(s.r_max, 0, sizeof(int), stream));
    stored_rank<<<grid_for(b.count), 256, 0, stream>>>(s.theta, p, b.count, b.lambda, s.r_max);
    LAC_CUDA_CHECK_LAUNCH(ctx);
    LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(&r, s.r_max, sizeof(int), cudaMemcpyDeviceToHost, stream));
    LAC_CUDA_CHECK(ctx, cudaStreamSynchronize(stream));
    int64_t q = r + (r / 4 > 8 ? r / 4 : 8);
    q = (q + 7) / 8 * 8;
    if (q > p) q = p;
    const int64_t most = lac_knob_int(ctx, LAC_KNOB_IMPUTE_CUDA_SUBSPACE_MAX, 75);   /* percent of p */
    if (q * 100 > most * p || q >= p) return LAC_INFO_NOT_CONVERGED;
    return run_pass<REAL>(ctx, b, budget, cache, s, q, lac_knob_int(ctx, LAC_KNOB_IMPUTE_CUDA_FILTER, 4), false);
}

template <typename REAL> bool lac_svt_subspace_cold_on(lac_ctx_t ctx, int64_t p)
{
    const int64_t from = lac_knob_int(ctx, LAC_KNOB_IMPUTE_CUDA_COLD, 128);
    return from > 0 && p >= from && lac_svt_subspace_on<REAL>(ctx);
}

template <typename REAL>
lac_status lac_svt_subspace_cold(lac_ctx_t ctx, const lac_svt_batch<REAL> &b, size_t budget, lac_svt_gram_cache **cache,
                                 lac_svt_subspace **subp)
{
    lac_svt_subspace *sub = *subp;
    const int64_t rows = b.rows, cols = b.cols, p = cols <= rows ? cols : rows;
    if (!sub || sub->count != b.count || sub->p != p || b.stride != rows * cols || !b.lambda)
        return LAC_INFO_NOT_CONVERGED;
    /* Half of p, in steps of 8: without stored eigenvalues the rank is not
     * known; slices that keep as many fall back (the certificate needs r < q). */
    const int64_t q = (p / 2 + 7) / 8 * 8;
    if (q < 8 || q >= p) return LAC_INFO_NOT_CONVERGED;
    const lac_status st =
        run_pass<REAL>(ctx, b, budget, cache, *sub, q, lac_knob_int(ctx, LAC_KNOB_IMPUTE_CUDA_COLD_FILTER, 14), true);
    if (st >= 0) sub->partial = true;
    return st;
}

template lac_status lac_svt_subspace_pass<float>(lac_ctx_t, const lac_svt_batch<float> &, size_t, lac_svt_gram_cache **,
                                            lac_svt_subspace **);
template lac_status lac_svt_subspace_pass<double>(lac_ctx_t, const lac_svt_batch<double> &, size_t, lac_svt_gram_cache **,
                                             lac_svt_subspace **);
template bool lac_svt_subspace_cold_on<float>(lac_ctx_t, int64_t);
template bool lac_svt_subspace_cold_on<double>(lac_ctx_t, int64_t);
template lac_status lac_svt_subspace_cold<float>(lac_ctx_t, const lac_svt_batch<float> &, size_t, lac_svt_gram_cache **,
                                                 lac_svt_subspace **);
template lac_status lac_svt_subspace_cold<double>(lac_ctx_t, const lac_svt_batch<double> &, size_t,
                                                  lac_svt_gram_cache **, lac_svt_subspace **);
