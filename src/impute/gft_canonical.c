/* The canonical GFT basis: inside an eigenspace of repeated eigenvalues any
 * orthonormal basis is an eigenbasis, and LAPACK, cuSOLVER or another thread
 * count return different ones; the per-frequency SVT is not invariant to that
 * choice. Each eigenspace's basis is therefore replaced by one that depends
 * only on its projector P = Q Q^T (docs/impute.md, "The canonical basis"):
 *   - eigenvalues (ascending) whose consecutive gaps are <= tau form a group,
 *     tau = 2 sqrt(N) eps max|w| with eps the precision's machine epsilon;
 *   - for a group of d vectors Q (N x d), fixed pseudo-random probes x_0,
 *     x_1, ... (a hash of probe and vertex, nothing the solver returned) are
 *     projected, y_j = P x_j, and orthonormalised in order (modified
 *     Gram-Schmidt, twice); a probe whose remainder is below sqrt(eps) |x|
 *     gives way to the next spare one. For d = 1 that fixes the sign.
 * The vectors are as spread over the vertices as a solver's: a vector that
 * sits on a few vertices cannot be recovered when they are missing. The work
 * is done in the eigenspace's coordinates (c_j = Q^T x_j, y_j = Q c_j, Q
 * orthonormal), O(N d^2); every sum runs in one thread in a fixed order, so
 * the result does not depend on the thread count either. */
#include "impute/impute_front.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Spare probes tried for one vector before the threshold is dropped. */
enum { SPARE_PROBES = 64 };

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

/* Entry v of probe t: the splitmix64 finaliser of v + (t + 1) * golden ratio,
 * scaled exactly onto [-1, 1). */
static double probe(int64_t t, int64_t v)
{
    uint64_t z = (uint64_t)v + 0x9E3779B97F4A7C15ull * ((uint64_t)t + 1);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (double)(z >> 11) * 0x1p-52 - 1.0;
}

/* c = Q^T x_t for the group's d columns starting at k0; returns |x_t|. */
static double probe_coordinates(lac_dtype precision, int64_t n, const void *vectors, int64_t k0, int64_t d, int64_t t,
                                double *c)
{
    for (int64_t j = 0; j < d; j++) c[j] = 0;
    double norm = 0;
    for (int64_t v = 0; v < n; v++) {
        double x = probe(t, v);
        norm += x * x;
        for (int64_t j = 0; j < d; j++) c[j] += lac_load_real(vectors, precision, v + (k0 + j) * n) * x;
    }
    return sqrt(norm);
}

/* The group [k0, k0 + d). probes: x_0 .. x_{d-1} (n x d column-major) and
 * their norms; r: d x d, column j the coordinates of new vector j; copy: n x d
 * doubles (unused for d = 1). parallel: whether loops may use threads. */
static void canonicalize_group(lac_ctx_t ctx, lac_dtype precision, int64_t n, void *vectors, int64_t k0, int64_t d,
                               double tie, const double *probes, const double *probe_norms, double *r, double *copy,
                               int parallel)
{
    /* d x d sums over the vertices, each in one thread */
#pragma omp parallel for num_threads(lac_threads(ctx)) schedule(static) if (parallel && n * d * d > 65536)
    for (int64_t e = 0; e < d * d; e++) {
        int64_t c = e % d, j = e / d;
        const double *x = probes + j * n;
        double s = 0;
        for (int64_t v = 0; v < n; v++) s += lac_load_real(vectors, precision, v + (k0 + c) * n) * x[v];
        r[e] = s;
    }
    int64_t spare = d;
    for (int64_t j = 0; j < d; j++) {
        double *rj = r + j * d, norm = probe_norms[j];
        for (int tries = 0;; tries++) {
            for (int pass = 0; pass < 2; pass++)
                for (int64_t p = 0; p < j; p++) {
                    double dot = 0;
                    for (int64_t c = 0; c < d; c++) dot += r[p * d + c] * rj[c];
                    for (int64_t c = 0; c < d; c++) rj[c] -= dot * r[p * d + c];
                }
            double len = 0;
            for (int64_t c = 0; c < d; c++) len += rj[c] * rj[c];
            len = sqrt(len);
            /* A remainder not far above the rounding of Q^T x (about eps |x|)
             * would carry the solver's choice: the next probe instead. */
            if (len > tie * norm || tries == SPARE_PROBES) {
                for (int64_t c = 0; c < d; c++) rj[c] = len > 0 ? rj[c] / len : (double)(c == j);
                break;
            }
            norm = probe_coordinates(precision, n, vectors, k0, d, spare++, rj);
        }
    }
    if (d == 1) {
        for (int64_t v = 0; v < n; v++) {
            if (precision == LAC_FLOAT32) ((float *)vectors)[v + k0 * n] *= (float)r[0];
            else ((double *)vectors)[v + k0 * n] *= r[0];
        }
        return;
    }
    for (int64_t c = 0; c < d; c++)
        for (int64_t v = 0; v < n; v++) copy[v * d + c] = lac_load_real(vectors, precision, v + (k0 + c) * n);
    /* the new vectors Q r */
#pragma omp parallel for num_threads(lac_threads(ctx)) schedule(static) if (parallel && n * d > 65536)
    for (int64_t v = 0; v < n; v++)
        for (int64_t j = 0; j < d; j++) {
            double x = 0;
            for (int64_t c = 0; c < d; c++) x += copy[v * d + c] * r[j * d + c];
            if (precision == LAC_FLOAT32) ((float *)vectors)[v + (k0 + j) * n] = (float)x;
            else ((double *)vectors)[v + (k0 + j) * n] = x;
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
    double *probes = lac_malloc(ctx, cells * sizeof *probes), *copy = lac_malloc(ctx, cells * sizeof *copy);
    double *r = lac_malloc(ctx, (size_t)(largest * largest) * sizeof *r);
    double *norms = lac_malloc(ctx, (size_t)largest * sizeof *norms);
    if (!probes || !copy || !r || !norms) {
        free(probes);
        free(copy);
        free(r);
        free(norms);
        return LAC_ERR_OUT_OF_MEMORY;
    }
    /* The probes every eigenspace starts from (x_j is the same for all). */
#pragma omp parallel for num_threads(lac_threads(ctx)) schedule(static)
    for (int64_t j = 0; j < largest; j++) {
        double s = 0;
        for (int64_t v = 0; v < n; v++) {
            probes[v + j * n] = probe(j, v);
            s += probes[v + j * n] * probes[v + j * n];
        }
        norms[j] = sqrt(s);
    }
    for (int64_t k0 = 0, k1; k0 < n; k0 = k1) {
        for (k1 = k0 + 1; k1 < n && eigenvalues[k1] - eigenvalues[k1 - 1] <= tau; k1++) {
        }
        if (k1 - k0 > 1) canonicalize_group(ctx, precision, n, vectors, k0, k1 - k0, tie, probes, norms, r, copy, 1);
    }
    /* Simple eigenvalues (most of them), independent of each other: signs only. */
#pragma omp parallel for num_threads(lac_threads(ctx)) schedule(static)
    for (int64_t k = 0; k < n; k++) {
        int simple = (k == 0 || eigenvalues[k] - eigenvalues[k - 1] > tau) &&
                     (k + 1 == n || eigenvalues[k + 1] - eigenvalues[k] > tau);
        double sign;
        if (simple) canonicalize_group(ctx, precision, n, vectors, k, 1, tie, probes, norms, &sign, NULL, 0);
    }
    free(probes);
    free(copy);
    free(r);
    free(norms);
    if (groups) *groups = count;
    return LAC_SUCCESS;
}
