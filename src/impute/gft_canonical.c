/* The canonical GFT basis: inside an eigenspace of repeated eigenvalues any
 * orthonormal basis is an eigenbasis, and LAPACK, cuSOLVER or another thread
 * count return different ones; the per-frequency SVT is not invariant to that
 * choice. Each numerically degenerate eigenspace's basis is therefore replaced
 * by one that depends only on its projector P = Q Q^T (docs/impute.md,
 * "The canonical basis"):
 *   - eigenvalues (ascending) whose consecutive gaps are <= tau form a group,
 *     tau = 2 sqrt(N) eps max|w| with eps the precision's machine epsilon;
 *   - for a group of d vectors Q (N x d), greedy column selection of P: the
 *     vertex whose column of P has the largest residual norm (ties within a
 *     relative sqrt(eps) going to the lowest vertex), Gram-Schmidt of those
 *     columns in that order; each vector is positive at its pivot vertex.
 * Column i of P is Q q_i with q_i = Q^T e_i (row i of Q), so the selection is
 * a column-pivoted QR of Q^T (d x N) in R^d, O(N d^2), and the new basis is
 * Q R with R the orthonormalised pivot rows. For d = 1 it fixes the sign. */
#include "impute/impute_front.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static double machine_epsilon(lac_dtype precision)
{
    return precision == LAC_FLOAT32 ? (double)FLT_EPSILON : DBL_EPSILON;
}

double lac_gft_degenerate_tolerance(lac_dtype precision, int64_t n, const double *eigenvalues)
{
    if (n < 1) return 0;
    double scale = fmax(fabs(eigenvalues[0]), fabs(eigenvalues[n - 1]));
    if (!(scale > 0)) scale = 1;
    return 2.0 * sqrt((double)n) * machine_epsilon(precision) * scale;
}

/* A simple eigenvalue's vector: positive at its largest entry (ties within
 * tie relative going to the lowest vertex), as the general case gives for d = 1. */
static void fix_sign(lac_dtype precision, int64_t n, void *vectors, int64_t k, double tie)
{
    double top = 0;
    for (int64_t i = 0; i < n; i++) top = fmax(top, fabs(lac_load_real(vectors, precision, i + k * n)));
    int64_t p = 0;
    while (p < n && fabs(lac_load_real(vectors, precision, p + k * n)) < top * (1 - tie)) p++;
    if (p == n || lac_load_real(vectors, precision, p + k * n) > 0) return;
    for (int64_t i = 0; i < n; i++) {
        if (precision == LAC_FLOAT32) ((float *)vectors)[i + k * n] = -((float *)vectors)[i + k * n];
        else ((double *)vectors)[i + k * n] = -((double *)vectors)[i + k * n];
    }
}

/* The group [k0, k0 + d): rows of Q into a (N x d, row-major), the pivoted
 * Gram-Schmidt in R^d into r (d x d, column j = the j-th direction), then the
 * new vectors Q r written back. work: N doubles of squared residual norms, N
 * bytes of pick marks. */
static void canonicalize_group(lac_ctx_t ctx, lac_dtype precision, int64_t n, void *vectors, int64_t k0, int64_t d, double tie,
                               double *a, double *q, double *r, double *norms, unsigned char *picked)
{
    for (int64_t i = 0; i < n; i++)
        for (int64_t c = 0; c < d; c++) q[i * d + c] = lac_load_real(vectors, precision, i + (k0 + c) * n);
    memcpy(a, q, (size_t)(n * d) * sizeof *a);
    for (int64_t i = 0; i < n; i++) {
        double s = 0;
        for (int64_t c = 0; c < d; c++) s += a[i * d + c] * a[i * d + c];
        norms[i] = s;
        picked[i] = 0;
    }
    for (int64_t j = 0; j < d; j++) {
        double top = 0;
        for (int64_t i = 0; i < n; i++)
            if (!picked[i] && norms[i] > top) top = norms[i];
        /* Ties on the residual norm (squared: 2 tie relative) go to the lowest vertex. */
        int64_t p = -1;
        for (int64_t i = 0; i < n && p < 0; i++)
            if (!picked[i] && norms[i] >= top * (1 - 2 * tie)) p = i;
        for (int64_t i = 0; i < n && p < 0; i++)   /* NaN norms (a damaged cache) match nothing: the first left */
            if (!picked[i]) p = i;
        picked[p] = 1;
        double *rj = r + j * d;
        memcpy(rj, a + p * d, (size_t)d * sizeof *rj);
        /* Re-orthogonalised against the earlier directions (the residual is
         * orthogonal to them only up to the updates' rounding). */
        for (int64_t prev = 0; prev < j; prev++) {
            double dot = 0;
            for (int64_t c = 0; c < d; c++) dot += r[prev * d + c] * rj[c];
            for (int64_t c = 0; c < d; c++) rj[c] -= dot * r[prev * d + c];
        }
        double len = 0;
        for (int64_t c = 0; c < d; c++) len += rj[c] * rj[c];
        len = sqrt(len);
        for (int64_t c = 0; c < d; c++) rj[c] = len > 0 ? rj[c] / len : (double)(c == j);
        if (j + 1 == d) break;
#pragma omp parallel for num_threads(lac_threads(ctx)) schedule(static) if (n * d > 65536)
        for (int64_t i = 0; i < n; i++) {
            if (picked[i]) continue;
            double *ai = a + i * d, dot = 0, s = 0;
            for (int64_t c = 0; c < d; c++) dot += rj[c] * ai[c];
            for (int64_t c = 0; c < d; c++) {
                ai[c] -= dot * rj[c];
                s += ai[c] * ai[c];
            }
            norms[i] = s;
        }
    }
#pragma omp parallel for num_threads(lac_threads(ctx)) schedule(static) if (n * d > 65536)
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < d; j++) {
            double x = 0;
            for (int64_t c = 0; c < d; c++) x += q[i * d + c] * r[j * d + c];
            if (precision == LAC_FLOAT32) ((float *)vectors)[i + (k0 + j) * n] = (float)x;
            else ((double *)vectors)[i + (k0 + j) * n] = x;
        }
}

lac_status lac_gft_canonicalize(lac_ctx_t ctx, lac_dtype precision, int64_t n, void *vectors, const double *eigenvalues,
                                int64_t *groups)
{
    if (groups) *groups = 0;
    if (n < 1) return LAC_SUCCESS;
    const double tau = lac_gft_degenerate_tolerance(precision, n, eigenvalues);
    const double tie = sqrt(machine_epsilon(precision));
    int64_t largest = 1, count = 0;
    for (int64_t k0 = 0, k1; k0 < n; k0 = k1) {
        for (k1 = k0 + 1; k1 < n && eigenvalues[k1] - eigenvalues[k1 - 1] <= tau; k1++) {
        }
        if (k1 - k0 > largest) largest = k1 - k0;
        if (k1 - k0 > 1) count++;
    }
    size_t cells;
    if (lac_mul_overflows((size_t)n, (size_t)largest, &cells) || cells > SIZE_MAX / (2 * sizeof(double)))
        return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "an eigenspace of dimension %lld overflows", (long long)largest);
    double *a = lac_malloc(ctx, cells * sizeof *a), *q = lac_malloc(ctx, cells * sizeof *q);
    double *r = lac_malloc(ctx, (size_t)(largest * largest) * sizeof *r), *norms = lac_malloc(ctx, (size_t)n * sizeof *norms);
    unsigned char *picked = lac_malloc(ctx, (size_t)n);
    lac_status st = (a && q && r && norms && picked) ? LAC_SUCCESS : LAC_ERR_OUT_OF_MEMORY;
    if (st >= 0)
        for (int64_t k0 = 0, k1; k0 < n; k0 = k1) {
            for (k1 = k0 + 1; k1 < n && eigenvalues[k1] - eigenvalues[k1 - 1] <= tau; k1++) {
            }
            if (k1 - k0 > 1) canonicalize_group(ctx, precision, n, vectors, k0, k1 - k0, tie, a, q, r, norms, picked);
        }
    /* Simple eigenvalues (most of them), independent of each other: signs only. */
    if (st >= 0) {
#pragma omp parallel for num_threads(lac_threads(ctx)) schedule(static)
        for (int64_t k = 0; k < n; k++) {
            int simple = (k == 0 || eigenvalues[k] - eigenvalues[k - 1] > tau) &&
                         (k + 1 == n || eigenvalues[k + 1] - eigenvalues[k] > tau);
            if (simple) fix_sign(precision, n, vectors, k, tie);
        }
    }
    free(a);
    free(q);
    free(r);
    free(norms);
    free(picked);
    if (st >= 0 && groups) *groups = count;
    return st;
}
