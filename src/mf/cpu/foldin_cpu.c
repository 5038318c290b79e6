/* CPU backend of mf: the rows of an online update solved in closed form
 * (lac_mf_fold_call, mf_backend.h). With everything else fixed, eq. (1) is
 * r_hat = a + x . theta for one row's parameters theta:
 *   user i:  theta = (b_i, u_i), x = (1 - |R^K|^-1/2 sum_{R^K} w_{j,k}, v_j),
 *            a = mu + bhat_j + |R^K|^-1/2 sum (r_{i,j1} - mu - bhat_j1) w_{j,k} + |N^K|^-1/2 sum c_{j,k}
 *            (the plain model: x = (1, v_j), a = mu + bhat_j);
 *   item j:  theta = (bhat_j, v_j, w_j, c_j), x = (1, u_i, |R^K|^-1/2 residuals on R^K,
 *            |N^K|^-1/2 on N^K), a = mu + b_i.
 * Each row is a ridge regression, its normal equations solved by Cholesky in
 * double; the regulariser of a parameter is its group's lambda times the
 * ratings whose SGD step would shrink it (rule 5 minimises exactly that sum),
 * plus FOLD_PRIOR_RATINGS for the biases and factors.
 * Rows are independent: threads take them whole. */
#include "mf/cpu/mf_cpu.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#define FOLD_EPS 1e-6   /* keeps the system definite where a parameter has no rating */
/* The biases' and factors' regulariser counts this many ratings more than a
 * row has: the exact ridge solution of a row with a handful of ratings
 * overfits them where SGD's few small steps do not (MovieTweetings, 3.5
 * ratings a user, a tenth of the users folded in: test RMSE 0.011 above a
 * retrain without it, 0.006 with it; 0.0077 and 0.0075 on the
 * MovieLens-100k shape). */
#define FOLD_PRIOR_RATINGS 10.0

/* Solves A x = b in place (A symmetric positive definite, n x n, lower
 * triangle used); 0 when A is not. */
static int cholesky_solve(double *A, double *b, int n)
{
    for (int j = 0; j < n; j++) {
        double d = A[j * n + j];
        for (int k = 0; k < j; k++) d -= A[j * n + k] * A[j * n + k];
        if (!(d > 0)) return 0;
        d = sqrt(d);
        A[j * n + j] = d;
        for (int i = j + 1; i < n; i++) {
            double s = A[i * n + j];
            for (int k = 0; k < j; k++) s -= A[i * n + k] * A[j * n + k];
            A[i * n + j] = s / d;
        }
    }
    for (int i = 0; i < n; i++) {
        double s = b[i];
        for (int k = 0; k < i; k++) s -= A[i * n + k] * b[k];
        b[i] = s / A[i * n + i];
    }
    for (int i = n - 1; i >= 0; i--) {
        double s = b[i];
        for (int k = i + 1; k < n; k++) s -= A[k * n + i] * b[k];
        b[i] = s / A[i * n + i];
    }
    return 1;
}

/* One row's ridge regression, min sum (y - x . theta)^2 + theta^T D theta.
 * While it has fewer ratings m than parameters n (a new user's handful),
 * the ratings are kept and the dual form solved, theta = D^-1 X^T alpha with
 * (X D^-1 X^T + I) alpha = y: an m x m system instead of n x n (k 16 and 3.5
 * ratings a row: the solves were 70% of an update of MovieTweetings). From
 * n ratings on, the normal equations (X^T X + D) theta = X^T y. */
typedef struct {
    int n;
    int64_t m;        /* ratings added */
    double *A, *rhs;  /* n x n, n: the normal equations, once m reaches n */
    double *X, *y;    /* n x n, n: the first ratings' rows and targets */
} ridge;

static void ridge_reset(ridge *r, int n)
{
    r->n = n;
    r->m = 0;
}

/* Adds x x^T (lower triangle) and y x to the normal equations. */
static void accumulate(double *A, double *rhs, const double *x, int n, double y)
{
    for (int i = 0; i < n; i++) {
        double xi = x[i];
        if (xi == 0.0) continue;
        rhs[i] += y * xi;
        double *row = A + (int64_t)i * n;
        for (int k = 0; k <= i; k++) row[k] += xi * x[k];
    }
}

/* The n kept rows into the normal equations. */
static void ridge_flush(ridge *r)
{
    const int n = r->n;
    memset(r->A, 0, (size_t)n * n * sizeof *r->A);
    memset(r->rhs, 0, (size_t)n * sizeof *r->rhs);
    for (int i = 0; i < n; i++) accumulate(r->A, r->rhs, r->X + (int64_t)i * n, n, r->y[i]);
}

static void ridge_add(ridge *r, const double *x, double y)
{
    const int n = r->n;
    if (r->m < n) {
        memcpy(r->X + r->m * n, x, (size_t)n * sizeof *x);
        r->y[r->m++] = y;
        return;
    }
    if (r->m == n) ridge_flush(r);
    accumulate(r->A, r->rhs, x, n, y);
    r->m++;
}

/* theta for the diagonal regulariser d (> 0); 0 when a system is not definite. */
static int ridge_solve(ridge *r, const double *d, double *theta)
{
    const int n = r->n;
    if (r->m >= n) {
        if (r->m == n) ridge_flush(r);
        for (int i = 0; i < n; i++) r->A[i * n + i] += d[i];
        if (!cholesky_solve(r->A, r->rhs, n)) return 0;
        memcpy(theta, r->rhs, (size_t)n * sizeof *theta);
        return 1;
    }
    const int m = (int)r->m;
    double *G = r->A, *alpha = r->rhs, *dinv = theta;   /* m x m, m; theta is written last */
    for (int i = 0; i < n; i++) dinv[i] = 1.0 / d[i];
    for (int a = 0; a < m; a++) {
        const double *xa = r->X + (int64_t)a * n;
        for (int b = 0; b <= a; b++) {
            const double *xb = r->X + (int64_t)b * n;
            double s = 0.0;
            for (int i = 0; i < n; i++) s += xa[i] * xb[i] * dinv[i];
            G[a * m + b] = s + (a == b);
        }
        alpha[a] = r->y[a];
    }
    if (!cholesky_solve(G, alpha, m)) return 0;
    for (int i = 0; i < n; i++) {
        double s = 0.0;
        for (int a = 0; a < m; a++) s += r->X[(int64_t)a * n + i] * alpha[a];
        theta[i] = s * dinv[i];
    }
    return 1;
}

/* Writes user u's training ratings into seen (NaN elsewhere) or clears them. */
static void mark_user(const lac_mf_factors *f, int64_t u, float *seen, int set)
{
    for (int64_t a = f->rated_start[u]; a < f->rated_start[u + 1]; a++)
        seen[f->rated_items[a]] = set ? f->rated_vals[a] : NAN;
}

/* User u's row. */
static int solve_user(const lac_mf_fold_call *c, int64_t u, ridge *R, double *x, double *reg, float *seen)
{
    const lac_mf_factors *f = &c->factors;
    const int F = f->k, S = f->stride, K = f->nbr_k, n = F + 1;
    const int bias = K || c->use_bias;
    const float mu = (float)f->mean;
    ridge_reset(R, n);
    int64_t used = 0;
    if (K) mark_user(f, u, seen, 1);
    for (int64_t a = c->user_start[u]; a < c->user_start[u + 1]; a++) {
        int32_t j = c->user_item[a];
        if (c->skip && c->skip[j]) continue;
        double base = mu + f->item_bias[j], g = bias ? 1.0 : 0.0;
        if (K) {
            const int32_t *nb = f->nbr + (int64_t)j * K;
            const float *w = f->W + (int64_t)j * K, *cc = f->C + (int64_t)j * K;
            double sw = 0, sres = 0, sc = 0;
            int nr = 0;
            for (int k = 0; k < K; k++) {
                float r1 = seen[nb[k]];
                if (r1 == r1) {
                    sw += w[k];
                    sres += (r1 - mu - f->item_bias[nb[k]]) * w[k];
                    nr++;
                } else {
                    sc += cc[k];
                }
            }
            double rr = nr ? 1.0 / sqrt((double)nr) : 0.0, rc = nr < K ? 1.0 / sqrt((double)(K - nr)) : 0.0;
            base += rr * sres + rc * sc;
            g -= rr * sw;
        }
        x[0] = g;
        for (int q = 0; q < F; q++) x[1 + q] = f->Q[(int64_t)j * S + q];
        ridge_add(R, x, c->user_val[a] - base);
        used++;
    }
    if (K) mark_user(f, u, seen, 0);
    double lb = K ? c->lambdas.b : c->lambda_bias, lu = K ? c->lambdas.u : c->lambda;
    double count = (double)used + FOLD_PRIOR_RATINGS;
    reg[0] = lb * count + FOLD_EPS;
    for (int q = 0; q < F; q++) reg[1 + q] = lu * count + FOLD_EPS;
    if (!used || !ridge_solve(R, reg, x)) return used == 0;   /* nothing to learn from: left as it is */
    if (bias) f->user_bias[u] = (float)x[0];
    for (int q = 0; q < F; q++) f->P[u * S + q] = (float)x[1 + q];
    return 1;
}

/* The training rating of user u for item n, NaN when u has none. */
static float rated(const lac_mf_factors *f, int64_t u, int32_t n)
{
    const int32_t *items = f->rated_items + f->rated_start[u];
    int64_t lo = 0, hi = f->rated_start[u + 1] - f->rated_start[u];
    while (lo < hi) {
        int64_t mid = (lo + hi) / 2;
        if (items[mid] < n) lo = mid + 1;
        else hi = mid;
    }
    return lo < f->rated_start[u + 1] - f->rated_start[u] && items[lo] == n ? f->rated_vals[f->rated_start[u] + lo]
                                                                            : NAN;
}

/* Item j's row; with full, w_j and c_j too (else they stay and enter a). */
static int solve_item(const lac_mf_fold_call *c, int64_t j, int full, ridge *R, double *x, double *reg)
{
    const lac_mf_factors *f = &c->factors;
    const int F = f->k, S = f->stride, K = f->nbr_k, n = 1 + F + (full ? 2 * K : 0);
    const int bias = K || c->use_bias;
    const float mu = (float)f->mean;
    ridge_reset(R, n);
    memset(reg, 0, (size_t)n * sizeof *reg);
    int64_t used = 0;
    for (int64_t a = c->item_start[j]; a < c->item_start[j + 1]; a++) {
        int32_t u = c->item_user[a];
        if (c->skip && c->skip[u]) continue;
        double base = mu + f->user_bias[u];
        x[0] = bias ? 1.0 : 0.0;
        for (int q = 0; q < F; q++) x[1 + q] = f->P[(int64_t)u * S + q];
        if (K) {
            const int32_t *nb = f->nbr + j * K;
            const float *w = f->W + j * K, *cc = f->C + j * K;
            int nr = 0;
            for (int k = 0; k < K; k++) nr += rated(f, u, nb[k]) == rated(f, u, nb[k]);
            double rr = nr ? 1.0 / sqrt((double)nr) : 0.0, rc = nr < K ? 1.0 / sqrt((double)(K - nr)) : 0.0;
            for (int k = 0; k < K; k++) {
                float r1 = rated(f, u, nb[k]);
                int in_r = r1 == r1;
                double xr = in_r ? rr * (r1 - mu - f->user_bias[u] - f->item_bias[nb[k]]) : 0.0;
                double xc = in_r ? 0.0 : rc;
                if (full) {
                    x[1 + F + k] = xr;
                    x[1 + F + K + k] = xc;
                    reg[1 + F + k] += in_r ? c->lambdas.w : 0.0;
                    reg[1 + F + K + k] += in_r ? 0.0 : c->lambdas.c;
                } else {
                    base += xr * w[k] + xc * cc[k];
                }
            }
        }
        ridge_add(R, x, c->item_val[a] - base);
        used++;
    }
    double count = (double)used + FOLD_PRIOR_RATINGS;
    reg[0] = (K ? c->lambdas.bhat : c->lambda_bias) * count;
    for (int q = 0; q < F; q++) reg[1 + q] = (K ? c->lambdas.v : c->lambda) * count;
    for (int i = 0; i < n; i++) reg[i] += FOLD_EPS;
    if (!used || !ridge_solve(R, reg, x)) return used == 0;
    if (bias) f->item_bias[j] = (float)x[0];
    for (int q = 0; q < F; q++) f->Q[j * S + q] = (float)x[1 + q];
    for (int k = 0; full && k < K; k++) {
        f->W[j * K + k] = (float)x[1 + F + k];
        f->C[j * K + k] = (float)x[1 + F + K + k];
    }
    return 1;
}

lac_status lac_mf_cpu_fold_in(lac_ctx_t ctx, const lac_mf_fold_call *c)
{
    const lac_mf_factors *f = &c->factors;
    const int K = f->nbr_k, full = c->items && K && 1 + f->k + 2 * K <= c->max_dim;
    const int n = 1 + f->k + (full ? 2 * K : 0);
    int failed = 0, singular = 0;
#pragma omp parallel num_threads(lac_threads(ctx))
    {
        double *A = malloc((size_t)n * n * 2 * sizeof *A), *rhs = malloc((size_t)n * 4 * sizeof *rhs);
        ridge R = {n, 0, A, rhs, A ? A + (size_t)n * n : NULL, rhs ? rhs + 3 * n : NULL};
        float *seen = K && !c->items ? malloc((size_t)(f->num_items ? f->num_items : 1) * sizeof *seen) : NULL;
        int mine = A && rhs && (seen || !K || c->items);
        if (!mine) {
#pragma omp atomic write
            failed = 1;
        }
        for (int64_t j = 0; seen && j < f->num_items; j++) seen[j] = NAN;
#pragma omp for schedule(dynamic, 16)
        for (int64_t r = 0; r < c->num_rows; r++) {
            if (!mine) continue;
            int ok = c->items ? solve_item(c, c->rows[r], full, &R, rhs + n, rhs + 2 * n)
                              : solve_user(c, c->rows[r], &R, rhs + n, rhs + 2 * n, seen);
            if (!ok) {
#pragma omp atomic write
                singular = 1;
            }
        }
        free(A);
        free(rhs);
        free(seen);
    }
    if (failed) return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "out of memory solving the updated rows");
    if (singular) lac_log(ctx, LAC_LOG_WARN, "mf update: a row's system was not definite; it keeps its values");
    return LAC_SUCCESS;
}
