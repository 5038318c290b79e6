/* Batched singular-value soft-thresholding, one block a slice, the slice in
 * shared memory: one-sided (Hestenes) Jacobi.
 *
 * The slice is held as W (L x p, L >= p: the transpose when it is wide),
 * scaled by its largest entry so that squares neither overflow nor
 * underflow. Each sweep visits every column pair once in round-robin order
 * (p/2 disjoint pairs a step, p-1 steps); a group of G lanes takes a pair,
 * sums α = ‖w_i‖², β = ‖w_j‖², γ = w_iᵀw_j with shuffles and rotates the two
 * columns so that they become orthogonal. Sweeps stop when no pair needed a
 * rotation (|γ| <= tol·sqrt(αβ)), or after a cap (then the columns are
 * orthogonal to a little more than tol: the result is still used; Jacobi
 * has no "failed to converge").
 * Only the triplets above λ matter: with λ known and a warm start, pairs
 * of two columns well below it are left unrotated, and once the others have
 * converged the columns below λ are proved to hide no singular value above
 * it: Gershgorin on their Gram block first (cheap, float sums), then, where
 * that fails, a Cholesky factorisation in float64 of λ²(1 + η) − δ less that
 * block (the subspace pass's rule, lac_svt_certificate_shift: Gershgorin sums
 * |γ| over the whole block and fails once an iteration moves the slice by
 * about 1% of λ², while the block's largest eigenvalue moves with the
 * change's 2-norm). Where both fail every pair is rotated again (the slice's
 * sweeps then carry LAC_SVT_REFUSED; LAC_SVT_SHARP where Cholesky proved what
 * Gershgorin could not; both counted in the pass's debug line).
 * LACUNA_IMPUTE_CUDA_SUBSPACE=off turns this off (as the Gram route's
 * subspace pass; float64 only with force).
 *
 * The columns are then W = A V = U Σ, so σ_i = ‖w_i‖; V (float64) takes the
 * same rotations and is kept between passes (the warm start), and
 * S_λ(A) = Σ_{σ_i > λ} (1 - λ/σ_i) w_i v_iᵀ is rebuilt from the kept columns.
 * A pass whose vectors are not kept (no warm start reads them) first runs
 * without V, two thirds of a rotated pair's bytes, and on Rᵀ of A = Q R
 * (fewer sweeps): the rotated columns are then w'_i = σ_i v_i, and
 * S_λ(A) = Σ_{σ_i > λ} (1 - λ/σ_i)/σ_i² (A w'_i) w'_iᵀ, the products taken
 * for the kept columns once the sweeps end. w'_i's rounding (~eps·σmax,
 * absolute) then reaches the result multiplied by σmax/σ_i instead of 1, so
 * that answer stands only where every kept σ_i is at least σmax/4
 * (VLESS_RATIO). The other slices are marked and a second launch, whose
 * blocks leave every unmarked slice at once, does them with V; slices where
 * λ is below ‖A‖_F / (4 sqrt(p)), so below σmax/4, are marked before their
 * sweeps.
 * The sweeps are bound by shared-memory traffic, not latency (H200: 4 or 7
 * blocks an SM made no difference; removing bank conflicts did), V's float64
 * columns most of a rotation's: the column strides keep a warp's pairs on
 * distinct banks, and a pair's W columns stay in registers from its sums to
 * its rotation.
 * The same pass writes the result over the previous estimate and leaves
 * the per-slice change, norms, truth error, σmax and rank (impute_cuda.h). */
#include "backend/cuda/impute/impute_cuda.h"

#include <float.h>
#include <math.h>

namespace {

/* Without V, the kept σ_i must be within this factor of σmax (see the top). */
constexpr double VLESS_RATIO = 4;
/* LAC_SVT_RANK of a slice the pass without V left to the pass with V. */
constexpr double AGAIN_WITH_V = -2;

template <typename REAL> struct real_traits;
template <> struct real_traits<float> {
    static constexpr float eps = FLT_EPSILON;
    static constexpr int max_sweeps = 24;
};
template <> struct real_traits<double> {
    static constexpr double eps = DBL_EPSILON;
    static constexpr int max_sweeps = 36;
};

/* Column position `pos` of the round-robin tournament at `step` (pe even):
 * position 0 stays, the others rotate. */
__device__ __forceinline__ int round_robin(int pos, int step, int pe)
{
    if (pos == 0) return 0;
    const int q = pos - 1 + step;   /* < 2 (pe - 1): one subtraction, no division */
    return (q >= pe - 1 ? q - (pe - 1) : q) + 1;
}

/* The columns (ci, cj) that pair t holds at this step, or ci = -1 when t is
 * past the pairs or the pair meets the padding column (p odd). */
__device__ __forceinline__ void step_pair(int t, int step, int pe, int pairs, int p, int *ci, int *cj)
{
    *ci = *cj = -1;
    if (t >= pairs) return;
    *ci = round_robin(t, step, pe);
    *cj = round_robin(pe - 1 - t, step, pe);
    if (*ci >= p || *cj >= p) *ci = -1;
}

/* The rotation (c, s) that zeroes the off-diagonal entry γ of the pair's
 * Gram block [α γ; γ β]. Float slices take the angle in float (its error
 * only leaves γ·eps behind, below the tolerance) and c, s in float64 from
 * it, so that V stays orthogonal to float64 across every pass it is kept;
 * float64 divisions and square roots in this chain were most of a step. */
__device__ __forceinline__ void rotation_of(float al, float be, float ga, double *c, double *s)
{
    const float zeta = (be - al) / (2 * ga);
    const float t = copysignf(1.0f, zeta) / (fabsf(zeta) + sqrtf(fmaf(zeta, zeta, 1.0f)));
    const double td = t;
    *c = rsqrt(fma(td, td, 1.0));
    *s = *c * td;
}

__device__ __forceinline__ void rotation_of(double al, double be, double ga, double *c, double *s)
{
    const double zeta = (be - al) / (2 * ga);
    const double t = (zeta >= 0 ? 1.0 : -1.0) / (fabs(zeta) + sqrt(1 + zeta * zeta));
    *c = rsqrt(fma(t, t, 1.0));
    *s = *c * t;
}

/* The same without V: c, s in the slice's precision (no float64 chain). */
__device__ __forceinline__ void rotation_in_working_precision(float al, float be, float ga, float *c, float *s)
{
    const float zeta = (be - al) / (2 * ga);
    const float t = copysignf(1.0f, zeta) / (fabsf(zeta) + sqrtf(fmaf(zeta, zeta, 1.0f)));
    *c = rsqrtf(fmaf(t, t, 1.0f));
    *s = *c * t;
}

__device__ __forceinline__ void rotation_in_working_precision(double al, double be, double ga, double *c, double *s)
{
    rotation_of(al, be, ga, c, s);
}

template <int G, typename T> __device__ __forceinline__ T group_sum(T v)
{
#pragma unroll
    for (int off = G / 2; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

/* Block-wide reduction of one value per thread (max or sum) through `scratch`
 * (32 entries); every thread gets the result. */
template <typename T, bool MAX> __device__ T block_reduce(T v, T *scratch)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
        T o = __shfl_xor_sync(0xffffffffu, v, off);
        v = MAX ? (o > v || o != o ? o : v) : v + o;   /* NaN wins */
    }
    __syncthreads();
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < warps ? scratch[lane] : (T)0;
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) {
            T o = __shfl_xor_sync(0xffffffffu, v, off);
            v = MAX ? (o > v || o != o ? o : v) : v + o;
        }
        if (lane == 0) scratch[0] = v;
    }
    __syncthreads();
    T r = scratch[0];
    __syncthreads();
    return r;
}

/* A column stride of W or V for groups of G lanes a pair: a multiple of G
 * with an odd quotient (G = 1: odd). A warp's groups hold pairs t, t+1, ...
 * whose columns are consecutive in the round-robin order, so their windows
 * of G consecutive entries then start on distinct banks (floats; float64
 * by half-warp): no bank conflicts in a step's loads and stores. With the
 * odd strides of before, the windows landed at random and most accesses
 * took two or more wavefronts; the sweeps are bound by shared memory. */
static inline int padded_stride(int n, int G)
{
    if (G >= 32) return n | 1;   /* one group a warp: any start is whole banks */
    const int q = (n + G - 1) / G;
    return (q | 1) * G;
}

/* The float64 words ahead of W: V (p x p, stride PS), or without V the
 * kept columns w'_i (p x p at most, REAL). */
template <typename REAL> __host__ __device__ size_t head_words(int PS, int p, bool vectors)
{
    return vectors ? (size_t)PS * p : ((size_t)p * p * sizeof(REAL) + 7) / 8;
}

/* Shared memory of one block: V or the kept columns, W (L x p, stride LS), the
 * kept columns and their coefficients, a reduction scratch. */
template <typename REAL> size_t shared_bytes(int LS, int PS, int p, bool vectors)
{
    return head_words<REAL>(PS, p, vectors) * sizeof(double) + (size_t)LS * p * sizeof(REAL) +
           (size_t)p * (sizeof(double) + sizeof(int)) + 64 * sizeof(double);
}

/* Element (l, c) of the slice seen as W's orientation (L x p). */
template <typename REAL>
__device__ __forceinline__ REAL slice_at(const REAL *a, int64_t rows, int transpose, int64_t l, int64_t c, int L)
{
    return transpose ? a[c + l * rows] : a[l + c * (int64_t)L];
}

/* Whether the columns below λ (α = ‖w‖² < lam2) are free of hidden
 * singular values above λ: Gershgorin on their Gram block, α_i + Σ_j |γ_ij|
 * over the others below λ, each at most lam2 (less the float sums'
 * rounding, at most L ε lam2 a product). One pass of dot products over those pairs, no rotations; every
 * thread of the block calls it. rowsum (p doubles) and alpha (p floats) are
 * scratch. */
template <typename REAL, int G>
__device__ bool small_block_certified(const REAL *W, int LS, int L, int p, double lam2, double *rowsum, float *alpha,
                                      int *failed)
{
    const int groups = blockDim.x / G, group = threadIdx.x / G, lane = threadIdx.x % G;
    const int pe = p + (p & 1), pairs = pe / 2;
    for (int base = 0; base < p; base += groups) {
        const int c = base + group;
        REAL s2 = 0;
        if (c < p)
            for (int l = lane; l < L; l += G) s2 += W[(size_t)c * LS + l] * W[(size_t)c * LS + l];
        s2 = group_sum<G>(s2);
        if (c < p && lane == 0) {
            alpha[c] = (float)s2;
            rowsum[c] = 0;
        }
    }
    if (threadIdx.x == 0) *failed = 0;
    __syncthreads();
    for (int step = 0; step < pe - 1; step++) {
        for (int base = 0; base < pairs; base += groups) {
            const int t = base + group;
            int ci, cj;
            step_pair(t, step, pe, pairs, p, &ci, &cj);
            if (ci >= 0 && !(alpha[ci] < lam2 && alpha[cj] < lam2)) ci = -1;   /* only pairs below lambda */
            REAL ga = 0;
            if (ci >= 0)
                for (int l = lane; l < L; l += G) ga += W[(size_t)ci * LS + l] * W[(size_t)cj * LS + l];
            ga = group_sum<G>(ga);
            if (ci >= 0 && lane == 0) {
                atomicAdd(&rowsum[ci], fabs((double)ga));
                atomicAdd(&rowsum[cj], fabs((double)ga));
            }
        }
    }
    __syncthreads();
    for (int c = threadIdx.x; c < p; c += blockDim.x)
        if (alpha[c] < lam2 && !(((double)alpha[c] + rowsum[c]) * (1 + 1e-4) +
                                     (double)p * L * real_traits<REAL>::eps * lam2 <= lam2))
            *failed = 1;
    __syncthreads();
    const bool ok = !*failed;
    __syncthreads();
    return ok;
}

/* Whether the Gram block S of the columns below λ (α < lam2) has no
 * eigenvalue above lam2·(1 + η): a Cholesky factorisation of shift·I − S in
 * float64, shift = lac_svt_certificate_shift (η and the factorisation's
 * rounding δ as the subspace pass sets them). S's entries are float64 sums of
 * exact products of W's floats, their rounding inside δ. K (b x b, stride
 * ks) is scratch: V's storage, saved by the caller; alpha (from
 * small_block_certified) picks the block, idx (p ints) holds it. Every
 * thread of the block calls it. */
template <typename REAL, int G>
__device__ bool small_block_cholesky(const REAL *W, int LS, int L, int p, double lam2, const float *alpha, int *idx,
                                     double *K, int ks, double *scratch)
{
    const int groups = blockDim.x / G, group = threadIdx.x / G, lane = threadIdx.x % G;
    __shared__ int nb;
    if (threadIdx.x == 0) {
        int b = 0;
        for (int c = 0; c < p; c++)
            if (alpha[c] < lam2) idx[b++] = c;
        nb = b;
    }
    __syncthreads();
    const int b = nb, entries = b * (b + 1) / 2;
    for (int base = 0; base < entries; base += groups) {
        const int e = base + group;
        int i = 0, j = 0;
        if (e < entries) {   /* e = j (j + 1) / 2 + i, i <= j */
            j = (int)((sqrt(8.0 * e + 1) - 1) / 2);
            while (j * (j + 1) / 2 > e) j--;
            while ((j + 1) * (j + 2) / 2 <= e) j++;
            i = e - j * (j + 1) / 2;
        }
        double g = 0;
        if (e < entries) {
            const REAL *wi = W + (size_t)idx[i] * LS, *wj = W + (size_t)idx[j] * LS;
            for (int l = lane; l < L; l += G) g += (double)wi[l] * (double)wj[l];
        }
        g = group_sum<G>(g);
        if (e < entries && lane == 0) K[(size_t)i * ks + j] = K[(size_t)j * ks + i] = -g;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        double tr = 0, fro2 = 0;
        for (int q = 0; q < b; q++) tr -= K[(size_t)q * ks + q];
        for (int c = 0; c < p; c++)
            if (!(alpha[c] < lam2)) fro2 += alpha[c];
        fro2 += tr;   /* ‖A‖_F² (scaled), for η */
        scratch[0] = lac_svt_certificate_shift(lam2, fro2, p, (double)(b + 1) * b + L, tr + lam2);
    }
    __syncthreads();
    const double shift = scratch[0];
    __syncthreads();
    if (!(shift > 0)) return false;
    for (int q = threadIdx.x; q < b; q += blockDim.x) K[(size_t)q * ks + q] += shift;
    /* Right-looking, the whole trailing square (it stays symmetric): step j
     * reads column j, writes only entries past it; one barrier a step. */
    for (int j = 0; j < b; j++) {
        __syncthreads();
        const double piv = K[(size_t)j * ks + j];
        if (!(piv > 0)) return false;   /* the same value for every thread */
        const double r = 1 / sqrt(piv);
        const int m = b - 1 - j;
        for (int e = threadIdx.x; e < m * m; e += blockDim.x) {
            const int i = j + 1 + e / m, c = j + 1 + e % m;
            K[(size_t)i * ks + c] -= (K[(size_t)i * ks + j] * r) * (K[(size_t)c * ks + j] * r);
        }
    }
    __syncthreads();
    return true;
}

/* R of W = Q R (L x p, L >= p) by Householder reflections, in place: R's
 * strict upper triangle in W's, its diagonal in diag (W's diagonal and
 * below are left as scratch). Step j: every group sums column j's squares
 * itself (no barrier for a shared norm), then applies the reflection
 * I - 2 v vᵀ / vᵀv, v = x - α e_j, α = -sign(x_j) ‖x‖, to its columns past
 * j; one barrier a step. Every thread of the block calls it. */
template <typename REAL, int G> __device__ void householder_r(REAL *W, int LS, int L, int p, double *diag)
{
    const int groups = blockDim.x / G, group = threadIdx.x / G, lane = threadIdx.x % G;
    for (int j = 0; j < p; j++) {
        const REAL *x = W + (size_t)j * LS;
        REAL n2 = 0;
        for (int l = j + lane; l < L; l += G) n2 += x[l] * x[l];
        n2 = group_sum<G>(n2);
        const REAL x0 = x[j], norm = sqrt(n2);
        const REAL alpha = x0 < 0 ? norm : -norm;
        const REAL vv = 2 * norm * (norm + fabs(x0));   /* vᵀv */
        /* The same trip count for every thread: the shuffles need whole warps. */
        for (int base = j + 1; base < p; base += groups) {
            const int c = base + group;
            REAL *y = W + (size_t)c * LS;
            REAL d = 0;
            if (c < p)
                for (int l = j + lane; l < L; l += G) d += (l == j ? x0 - alpha : x[l]) * y[l];
            d = group_sum<G>(d);
            if (c < p && vv > 0) {
                const REAL tau = 2 * d / vv;
                for (int l = j + lane; l < L; l += G) y[l] -= tau * (l == j ? x0 - alpha : x[l]);
            }
        }
        if (threadIdx.x == 0) diag[j] = (double)alpha;
        __syncthreads();
    }
}

/* VEC: V carried through the sweeps (kept in b.v when it is there; without
 * b.v, only the slices the pass without V marked). */
template <typename REAL, int G, bool VEC>
__global__ void __launch_bounds__(1024) svt_jacobi_kernel(lac_svt_batch<REAL> b, int transpose, int L, int p, int LS,
                                                          int PS, int skip_small, int only_marked)
{
    extern __shared__ double smem_d[];
    /* Column strides LS, PS from padded_stride: the groups of a warp meet
     * distinct banks. */
    double *V = smem_d;                                        /* VEC: p x p, stride PS */
    REAL *Y = reinterpret_cast<REAL *>(smem_d);                /* !VEC: kept column q's w' at q + c p */
    REAL *W = reinterpret_cast<REAL *>(smem_d + head_words<REAL>(PS, p, VEC));   /* L x p, stride LS */
    double *coef = reinterpret_cast<double *>(((uintptr_t)(W + (size_t)LS * p) + 7) & ~(uintptr_t)7);
    double *scratch = coef + p;
    int *kept_list = reinterpret_cast<int *>(scratch + 40);
    const int groups = blockDim.x / G, group = threadIdx.x / G, lane = threadIdx.x % G;
    __shared__ int kept_count, certify_failed;

    const int64_t k = blockIdx.x;
    const REAL *a = b.a + k * b.stride;
    REAL *out = b.out + k * b.stride;
    const REAL *truth = b.truth ? b.truth + k * b.stride : nullptr;
    const int64_t rows = b.rows, size = b.rows * b.cols;
    double *v_keep = b.v ? b.v + k * (int64_t)p * p : nullptr;
    if (only_marked && b.stats[k * LAC_SVT_STATS + LAC_SVT_RANK] != AGAIN_WITH_V) return;   /* done without V */

    /* The slice's largest entry: the scale that keeps squares in range. */
    double amax = 0;
    for (int64_t e = threadIdx.x; e < size; e += blockDim.x) {
        double ax = fabs((double)a[e]);
        amax = ax > amax || ax != ax ? ax : amax;   /* NaN wins */
    }
    amax = block_reduce<double, true>(amax, scratch);
    double *stats = b.stats + k * LAC_SVT_STATS;
    if (!(amax <= DBL_MAX)) {   /* NaN or infinite: the host reports the slice */
        if (threadIdx.x == 0) {
            stats[LAC_SVT_CHANGE] = stats[LAC_SVT_PREVIOUS] = stats[LAC_SVT_TRUTH] = NAN;
            stats[LAC_SVT_SIGMA_MAX] = NAN;
            stats[LAC_SVT_RANK] = -1;
            stats[LAC_SVT_SWEEPS] = 0;
        }
        return;
    }
    const double scale = amax > 0 ? 1.0 / amax : 0;

    /* V: the previous pass's right singular vectors (a warm start: the
     * slices change little from one iteration to the next, so W = A V is
     * nearly orthogonal and a sweep or two finishes it), or I. */
    const int warm = VEC && b.warm && v_keep;
    if (VEC) {
        for (int e = threadIdx.x; e < p * p; e += blockDim.x)
            V[e % p + e / p * PS] = warm ? v_keep[e] : (double)(e % p == e / p);
        __syncthreads();
    }
    double f2 = 0;   /* ‖A‖_F² (scaled), for the pass without V */
    for (int e = threadIdx.x; e < L * p; e += blockDim.x) {
        const int l = e % L, j = e / L;
        double w;
        if (warm) {
            w = 0;
            for (int c = 0; c < p; c++) w += (double)slice_at(a, rows, transpose, l, c, L) * V[c + j * PS];
        } else {
            w = (double)slice_at(a, rows, transpose, l, j, L);
        }
        W[l + j * LS] = (REAL)(w * scale);
        f2 += (w * scale) * (w * scale);
    }
    __syncthreads();
    if (!VEC && b.lambda) {
        f2 = block_reduce<double, false>(f2, scratch);
        const double bar = VLESS_RATIO * b.lambda[k] * scale;
        if (bar * bar * p < f2) {   /* λ < σmax/4: a kept σ_i below σmax/4 is likely */
            if (threadIdx.x == 0) stats[LAC_SVT_RANK] = AGAIN_WITH_V;
            return;
        }
    }

    /* Without V (always cold): W = Q R by Householder reflections, then the
     * sweeps run on Rᵀ (p x p), whose columns start much closer to
     * orthogonal than A's (a preconditioner: numpy, 50 x 50 Gaussian
     * slices, 6.25 sweeps against 8.0); its rotated columns w'_i = σ_i v_i
     * give the right singular vectors, so S_λ(A) = Σ (1 - λ/σ_i)/σ_i² ·
     * (A w'_i) w'_iᵀ. Q is never formed. */
    const int Lr = VEC ? L : p;
    if (!VEC && amax > 0) {
        householder_r<REAL, G>(W, LS, L, p, coef);
        /* Rᵀ in W's top p x p block: R[i][l] (i < l) moves to (l, i), the
         * reflections' leftovers below the diagonal go, R's diagonal from coef. */
        for (int e = threadIdx.x; e < p * p; e += blockDim.x) {
            const int i = e % p, l = e / p;
            if (i < l) {
                W[l + (size_t)i * LS] = W[i + (size_t)l * LS];
                W[i + (size_t)l * LS] = 0;
            } else if (i == l) {
                W[i + (size_t)i * LS] = (REAL)coef[i];
            }
        }
        __syncthreads();
    }

    const REAL tol = real_traits<REAL>::eps * (REAL)sqrt((double)Lr) * (REAL)8;
    const REAL tiny = real_traits<REAL>::eps * real_traits<REAL>::eps;
    const int pe = p + (p & 1), pairs = pe / 2;
    int sweep = 0;
    /* A sweep whose rotations were all below sqrt(tol) leaves the columns
     * orthogonal to about their square (the off-diagonal terms a rotation
     * reintroduces are products of two angles), below tol: no check sweep. */
    const REAL stop = sqrt(tol);
    /* Only the triplets above λ matter: pairs of two columns well below λ
     * (α < (0.8 λ)²) are not rotated, as long as the columns below λ are then
     * proved free of singular values above it (small_block_certified); if
     * not, or past half the sweep cap, every pair is rotated again. */
    const double lam_s = b.lambda && skip_small ? b.lambda[k] * scale : -1;
    const REAL small = lam_s > 0 ? (REAL)(0.64 * lam_s * lam_s) : (REAL)0;
    int skipping = small > 0 && warm;   /* from I the small block is not orthogonal: the proof would fail */
    int refused = 0, sharp = 0;
    /* Columns of up to HELD·G rows stay in registers between a pair's sums
     * and its rotation: one pass of loads less a rotation. */
    constexpr int HELD = sizeof(REAL) > 4 ? 1 : G >= 8 ? 64 / G : 8;   /* float64: registers spill */
    const bool held = sizeof(REAL) == 4 && Lr <= HELD * G;
    for (; amax > 0 && sweep < real_traits<REAL>::max_sweeps; sweep++) {
        if (skipping && sweep >= real_traits<REAL>::max_sweeps / 2) skipping = 0;
        /* This thread's pairs: any rotated, any rotated by more than `stop`;
         * the block's answer at the sweep's end, with no atomics a step. */
        int rotated = 0, big = 0;
        for (int step = 0; step < pe - 1; step++) {
            /* The same trip count for every thread: the shuffles need whole warps. */
            for (int base = 0; base < pairs; base += groups) {
                const int t = base + group;
                int ci, cj;
                step_pair(t, step, pe, pairs, p, &ci, &cj);
                REAL al = 0, be = 0, ga = 0;
                REAL xs[HELD], ys[HELD];
                if (ci >= 0) {
                    const REAL *wi = W + ci * LS, *wj = W + cj * LS;
                    if (held) {
#pragma unroll
                        for (int q = 0; q < HELD; q++) {
                            const int l = lane + q * G;
                            xs[q] = l < Lr ? wi[l] : (REAL)0;
                            ys[q] = l < Lr ? wj[l] : (REAL)0;
                            al += xs[q] * xs[q];
                            be += ys[q] * ys[q];
                            ga += xs[q] * ys[q];
                        }
                    } else {
                        for (int l = lane; l < Lr; l += G) {
                            REAL x = wi[l], y = wj[l];
                            al += x * x;
                            be += y * y;
                            ga += x * y;
                        }
                    }
                }
                al = group_sum<G>(al);
                be = group_sum<G>(be);
                ga = group_sum<G>(ga);
                /* Columns below eps·σmax (al, be < eps² after scaling) are
                 * rounding noise: rotating them would only churn. */
                const REAL norm = sqrt(al * be);
                if (ci >= 0 && ga != 0 && fmin(al, be) > tiny && fabs(ga) > tol * norm &&
                    !(skipping && al < small && be < small)) {
                    double c = 1, s = 0;
                    REAL cr, sr;
                    if (VEC) {
                        rotation_of(al, be, ga, &c, &s);
                        cr = (REAL)c, sr = (REAL)s;
                    } else {
                        rotation_in_working_precision(al, be, ga, &cr, &sr);
                    }
                    REAL *wi = W + ci * LS, *wj = W + cj * LS;
                    if (held) {
#pragma unroll
                        for (int q = 0; q < HELD; q++) {
                            const int l = lane + q * G;
                            if (l < Lr) {
                                wi[l] = cr * xs[q] - sr * ys[q];
                                wj[l] = sr * xs[q] + cr * ys[q];
                            }
                        }
                    } else {
                        for (int l = lane; l < Lr; l += G) {
                            REAL x = wi[l], y = wj[l];
                            wi[l] = cr * x - sr * y;
                            wj[l] = sr * x + cr * y;
                        }
                    }
                    if (VEC) {
                        double *vi = V + ci * PS, *vj = V + cj * PS;
                        for (int l = lane; l < p; l += G) {
                            double x = vi[l], y = vj[l];
                            vi[l] = c * x - s * y;
                            vj[l] = s * x + c * y;
                        }
                    }
                    rotated = 1;
                    big |= fabs(ga) >= stop * norm;
                }
            }
            __syncthreads();
        }
        const int any_rotated = __syncthreads_or(rotated);
        const int again = __syncthreads_or(big);
        if (!again) {
            if (skipping) {
                skipping = 0;
                float *alpha = reinterpret_cast<float *>(kept_list);
                if (!small_block_certified<REAL, G>(W, LS, Lr, p, lam_s * lam_s, coef, alpha, &certify_failed)) {
                    /* V's storage holds the factorisation: V waits in v_keep
                     * (written there at the end anyway). */
                    for (int e = threadIdx.x; e < p * p; e += blockDim.x) v_keep[e] = V[e % p + e / p * PS];
                    __syncthreads();
                    const bool proved = small_block_cholesky<REAL, G>(W, LS, Lr, p, lam_s * lam_s, alpha,
                                                                      reinterpret_cast<int *>(coef), V, PS, scratch);
                    __syncthreads();
                    for (int e = threadIdx.x; e < p * p; e += blockDim.x) V[e % p + e / p * PS] = v_keep[e];
                    __syncthreads();
                    if (!proved) {
                        refused = 1;
                        continue;   /* rotate every pair from here */
                    }
                    sharp = 1;
                }
            }
            sweep += any_rotated;   /* counted as done */
            break;
        }
    }

    /* σ_i = ‖w_i‖ (scaled); kept columns and their coefficients
     * (1 - λ/σ_i)/scale, so that S_λ(A) = Σ coef_i w_i v_iᵀ, or without V
     * (1 - λ/σ_i)/σ_i² (σ_i scaled), so that S_λ(A) = Σ coef_i (A w'_i) w'_iᵀ. */
    for (int base = 0; base < p; base += groups) {
        const int c = base + group;
        REAL s2 = 0;
        if (c < p)
            for (int l = lane; l < Lr; l += G) s2 += W[(size_t)c * LS + l] * W[(size_t)c * LS + l];
        s2 = group_sum<G>(s2);
        if (c < p && lane == 0) coef[c] = sqrt((double)s2);
    }
    __syncthreads();
    double smax = 0;
    for (int c = threadIdx.x; c < p; c += blockDim.x) smax = fmax(smax, coef[c]);
    smax = block_reduce<double, true>(smax, scratch);
    const double lambda = b.lambda ? b.lambda[k] : -1;   /* < 0: σmax only, the result 0 */
    const double lambda_scaled = lambda * scale;
    if (threadIdx.x == 0) {   /* in column order, so that the sums below do not depend on timing */
        int r = 0, close = 1;
        for (int c = 0; c < p; c++) {
            double sg = coef[c];
            /* Columns below eps·σmax were never rotated (see above): zero. */
            if (lambda >= 0 && sg > lambda_scaled && sg * sg > (double)tiny) {
                close &= sg * VLESS_RATIO >= smax;
                coef[c] = VEC ? (1 - lambda_scaled / sg) / scale : (1 - lambda_scaled / sg) / (sg * sg);
                kept_list[r++] = c;
            }
        }
        kept_count = VEC || close ? r : -1;
    }
    __syncthreads();
    const int rank = kept_count;
    if (rank < 0) {   /* a kept σ_i too far below σmax: the pass with V does this slice */
        if (threadIdx.x == 0) stats[LAC_SVT_RANK] = AGAIN_WITH_V;
        return;
    }
    if (!VEC) {   /* Y: the kept w'_i; then Z = A w'_i (float64 sums) over W, column q */
        for (int e = threadIdx.x; e < rank * p; e += blockDim.x) {
            const int c = e / rank, q = e - c * rank;
            Y[q + (size_t)c * p] = W[c + (size_t)kept_list[q] * LS];
        }
        __syncthreads();
        for (int e = threadIdx.x; e < rank * L; e += blockDim.x) {
            const int l = e % L, q = e / L;
            double z = 0;
            for (int c = 0; c < p; c++) z += (double)slice_at(a, rows, transpose, l, c, L) * (double)Y[q + (size_t)c * p];
            W[l + (size_t)q * LS] = (REAL)z;
        }
        __syncthreads();
    }

    /* R = Σ_kept coef_i w_i v_iᵀ, over the previous estimate, with the change,
     * the previous estimate's norm and the truth error folded in. */
    double change = 0, previous = 0, truth_err = 0;
    for (int e = threadIdx.x; e < L * p; e += blockDim.x) {
        const int l = e % L, c = e / L;
        double r = 0;
        for (int q = 0; q < rank; q++) {
            const int i = kept_list[q];
            r += VEC ? coef[i] * (double)W[l + i * LS] * V[c + i * PS]
                     : coef[i] * (double)W[l + q * LS] * (double)Y[q + (size_t)c * p];
        }
        const int64_t at = transpose ? c + l * rows : e;
        double old = (double)out[at];
        change += (r - old) * (r - old);
        previous += old * old;
        if (truth) {
            double q = r - (double)truth[at];
            truth_err += q * q;
        }
        out[at] = (REAL)r;
    }
    if (VEC && v_keep)
        for (int e = threadIdx.x; e < p * p; e += blockDim.x) v_keep[e] = V[e % p + e / p * PS];
    change = block_reduce<double, false>(change, scratch);
    previous = block_reduce<double, false>(previous, scratch);
    truth_err = block_reduce<double, false>(truth_err, scratch);
    if (threadIdx.x == 0) {
        stats[LAC_SVT_CHANGE] = change;
        stats[LAC_SVT_PREVIOUS] = previous;
        stats[LAC_SVT_TRUTH] = truth_err;
        stats[LAC_SVT_SIGMA_MAX] = smax * amax;
        stats[LAC_SVT_RANK] = rank;
        stats[LAC_SVT_SWEEPS] = sweep + (refused ? LAC_SVT_REFUSED : 0) + (sharp ? LAC_SVT_SHARP : 0);
    }
}

/* The launch shape of a slice: lanes a pair and threads a block. */
struct jacobi_shape {
    int L, p, LS, PS, transpose, G, threads;
    size_t smem;
};

/* Lanes a pair without V: the fewest whose blocks give the SM 32 warps,
 * counting what bounds the blocks an SM there, registers (the kernel takes
 * 64 a thread) as well as shared memory (smem_blocks); else the most warps.
 * With V the shared-memory count alone (below) picks the lanes, measured
 * best there; without V it picked 8 lanes at 50 x 50 (28 warps, registers
 * for 4 blocks of 224 threads) where 4 (8 blocks of 128: 32 warps) took
 * 20% less time (H200, bench/RESULTS.md). */
static int lanes_by_warps(const cudaDeviceProp &prop, int pairs, int smem_blocks)
{
    const int regs = prop.regsPerMultiprocessor ? prop.regsPerMultiprocessor : 65536;
    const int max_threads = prop.maxThreadsPerMultiProcessor ? prop.maxThreadsPerMultiProcessor : 2048;
    const int max_blocks = prop.maxBlocksPerMultiProcessor ? prop.maxBlocksPerMultiProcessor : 16;
    int best = 1, best_warps = 0;
    for (int G = 1; G <= 32; G *= 2) {
        int threads = (pairs * G + 31) / 32 * 32;
        if (threads > 1024) break;
        int blocks = smem_blocks;
        if (blocks > regs / (threads * 64)) blocks = regs / (threads * 64);
        if (blocks > max_threads / threads) blocks = max_threads / threads;
        if (blocks > max_blocks) blocks = max_blocks;
        const int warps = blocks * threads / 32;
        if (warps >= 32) return G;
        if (warps > best_warps) best = G, best_warps = warps;
    }
    return best;
}

template <typename REAL>
jacobi_shape shape_for(const cudaDeviceProp &prop, int64_t rows, int64_t cols, bool vectors, int lanes = 0)
{
    jacobi_shape s;
    s.transpose = cols > rows;
    s.L = (int)(s.transpose ? cols : rows);
    s.p = (int)(s.transpose ? rows : cols);
    size_t limit = prop.sharedMemPerBlockOptin ? prop.sharedMemPerBlockOptin : prop.sharedMemPerBlock;
    s.LS = padded_stride(s.L, 1);
    s.PS = padded_stride(s.p, 1);
    s.smem = shared_bytes<REAL>(s.LS, s.PS, s.p, vectors);
    if (s.smem > limit) {
        s.smem = 0;   /* does not fit */
        return s;
    }
    /* Lanes a pair: as few as keep the SM busy. A step's cost is its warp
     * instructions, and the per-pair part (the three sums' shuffles, the
     * rotation's angle) is paid once a warp for all its pairs, so fewer lanes
     * a pair means fewer instructions; but each step ends at a barrier, and
     * the SM wants ~32 warps to hide that latency (measured on an H200: 16
     * warps an SM made 64 x 64 slices 30% slower than 64), which the blocks
     * that fit its shared memory must supply. */
    const int pairs = (s.p + (s.p & 1)) / 2;
    size_t per_sm = prop.sharedMemPerMultiprocessor ? prop.sharedMemPerMultiprocessor : limit;
    int blocks = (int)(per_sm / (s.smem + 1024));
    if (blocks < 1) blocks = 1;
    if (blocks > 16) blocks = 16;
    const int want = (32 * 32 + blocks - 1) / blocks;   /* threads a block */
    int G = 1;
    while (G < 32 && G * pairs < want) G *= 2;
    if (!vectors) G = lanes_by_warps(prop, pairs, blocks);
    if (lanes > 0) G = lanes;   /* LACUNA_IMPUTE_CUDA_LANES: a power of two up to 32 */
    int threads = (pairs * G + 31) / 32 * 32;
    if (threads > 1024) {
        threads = 1024;
        while (G > 1 && G * pairs > 4 * 1024) G /= 2;
    }
    s.G = G;
    s.threads = threads;
    /* The strides for G (a little more memory; kept odd where that would
     * not fit). */
    const size_t padded = shared_bytes<REAL>(padded_stride(s.L, G), padded_stride(s.p, G), s.p, vectors);
    if (padded <= limit) {
        s.LS = padded_stride(s.L, G);
        s.PS = padded_stride(s.p, G);
        s.smem = padded;
    }
    return s;
}

template <typename REAL, int G, bool VEC>
lac_status launch(lac_ctx_t ctx, const lac_svt_batch<REAL> &b, const jacobi_shape &s, int only_marked)
{
    auto kernel = svt_jacobi_kernel<REAL, G, VEC>;
    LAC_CUDA_CHECK(ctx, cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)s.smem));
    /* One launch per 2^31 - 1 slices at most (the grid's x limit). */
    for (int64_t first = 0; first < b.count; first += 2147483647LL) {
        lac_svt_batch<REAL> part = b;
        part.count = b.count - first < 2147483647LL ? b.count - first : 2147483647LL;
        part.a += first * b.stride;
        part.out += first * b.stride;
        if (part.truth) part.truth += first * b.stride;
        if (part.lambda) part.lambda += first;
        part.stats += first * LAC_SVT_STATS;
        kernel<<<(unsigned)part.count, s.threads, s.smem, ctx->cuda->stream>>>(part, s.transpose, s.L, s.p, s.LS, s.PS,
                                                                                 lac_svt_subspace_on<REAL>(ctx) ? 1 : 0,
                                                                                 only_marked);
        LAC_CUDA_CHECK_LAUNCH(ctx);
    }
    return LAC_SUCCESS;
}

template <typename REAL, bool VEC>
lac_status launch_lanes(lac_ctx_t ctx, const lac_svt_batch<REAL> &b, const jacobi_shape &s, int only_marked = 0)
{
    switch (s.G) {
    case 1: return launch<REAL, 1, VEC>(ctx, b, s, only_marked);
    case 2: return launch<REAL, 2, VEC>(ctx, b, s, only_marked);
    case 4: return launch<REAL, 4, VEC>(ctx, b, s, only_marked);
    case 8: return launch<REAL, 8, VEC>(ctx, b, s, only_marked);
    case 16: return launch<REAL, 16, VEC>(ctx, b, s, only_marked);
    default: return launch<REAL, 32, VEC>(ctx, b, s, only_marked);
    }
}

} // namespace

template <typename REAL> bool lac_svt_jacobi_fits(const cudaDeviceProp &prop, int64_t rows, int64_t cols)
{
    if (rows > 65536 || cols > 65536) return false;
    return shape_for<REAL>(prop, rows, cols, true).smem > 0;   /* the larger of the two */
}

template <typename REAL> lac_status lac_svt_jacobi(lac_ctx_t ctx, const lac_svt_batch<REAL> &b)
{
    if (b.count == 0) return LAC_SUCCESS;
    int lanes = (int)lac_knob_int(ctx, LAC_KNOB_IMPUTE_CUDA_LANES, 0);
    if (lanes < 0 || lanes > 32 || (lanes & (lanes - 1)))
        return lac_error(ctx, LAC_ERR_ARGUMENT, "LACUNA_IMPUTE_CUDA_LANES must be 1, 2, 4, 8, 16 or 32, not %d", lanes);
    jacobi_shape s = shape_for<REAL>(ctx->cuda->prop, b.rows, b.cols, true, lanes);
    if (!s.smem)
        return lac_error(ctx, LAC_ERR_INTERNAL, "a %lld x %lld slice does not fit the shared-memory SVT", (long long)b.rows,
                         (long long)b.cols);
    if (b.v || lac_knob_int(ctx, LAC_KNOB_IMPUTE_CUDA_VLESS, 1) == 0) return launch_lanes<REAL, true>(ctx, b, s);
    /* Nothing kept: without V, then with V for the slices it marked (the
     * second launch's other blocks return at once; no host round trip). */
    const jacobi_shape without = shape_for<REAL>(ctx->cuda->prop, b.rows, b.cols, false, lanes);
    LAC_CHECK((launch_lanes<REAL, false>(ctx, b, without)));
    return launch_lanes<REAL, true>(ctx, b, s, 1);
}

template bool lac_svt_jacobi_fits<float>(const cudaDeviceProp &, int64_t, int64_t);
template bool lac_svt_jacobi_fits<double>(const cudaDeviceProp &, int64_t, int64_t);
template lac_status lac_svt_jacobi<float>(lac_ctx_t, const lac_svt_batch<float> &);
template lac_status lac_svt_jacobi<double>(lac_ctx_t, const lac_svt_batch<double> &);
