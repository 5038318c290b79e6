/* The CPU backend's arithmetic, written once for both precisions: included by
 * impute_cpu.c with REAL = float or double, F(name) adding the suffix, and the
 * matching BLAS/LAPACK names (GEMM, GESDD, SYEVD). Not a header of its own. */

/* The backend's state between phases. Matrices are column-major; a tensor is
 * an (mn x N) matrix whose column v is vertex v's m x n slice in row-major
 * order, which LAPACK sees as the n x m transpose (same singular values, and
 * S_λ commutes with the transpose). */
typedef struct {
    lac_impute_problem problem;
    int64_t N, mn, ni;         /* vertices, entries a slice, incomplete vertices */
    int64_t rows, cols, p;     /* the LAPACK view of one slice: rows = n, cols = m, p = min */
    int threads;
    REAL *u;                   /* the basis (borrowed), N x N */
    REAL *u_inc;               /* U restricted to the incomplete rows, ni x N */
    REAL *c;                   /* U^T P_Ω(G), the constant part of every GFT */
    REAL *ghat;                /* the current GFT (destroyed by the SVT) */
    REAL *gest;                /* Ĝest */
    REAL *x_inc;               /* what line 7 imputes on the incomplete vertices, mn x ni */
    REAL *x_est;               /* P_Ω⊥(G^est) there: x_inc itself, or with momentum its own buffer */
    REAL *x_new;               /* with momentum: the iGFT's output before extrapolation */
    unsigned char *obs_inc;    /* entry masks of the incomplete vertices, or NULL */
    REAL *true_hat;            /* U^T G for the truth, or NULL */
    REAL *true_inc;            /* the truth on the incomplete vertices, or NULL */
    lapack_int lwork;
    REAL *work;                /* per thread: s, U, VT, R, LAPACK work */
    lapack_int *iwork;         /* per thread: 8p, then 4p for the Gram path */
    int64_t work_stride;
    double *gram_work;         /* per thread: the Gram path's float64 buffers */
    int64_t gram_stride;
} F(cpu_state);

static REAL F(load)(const void *data, lac_dtype dtype, int64_t i)
{
    return dtype == LAC_FLOAT32 ? (REAL)((const float *)data)[i] : (REAL)((const double *)data)[i];
}

static void F(cpu_release)(void *opaque)
{
    F(cpu_state) *s = opaque;
    if (!s) return;
    free(s->u_inc);
    free(s->c);
    free(s->ghat);
    free(s->gest);
    if (s->x_est != s->x_inc) free(s->x_est);
    free(s->x_inc);
    if (s->x_new != s->x_inc) free(s->x_new);
    free(s->obs_inc);
    free(s->true_hat);
    free(s->true_inc);
    free(s->work);
    free(s->iwork);
    free(s->gram_work);
    free(s);
}

static REAL *F(alloc)(lac_ctx_t ctx, int64_t count)
{
    size_t bytes;
    if (lac_mul_overflows((size_t)(count > 0 ? count : 1), sizeof(REAL), &bytes)) {
        lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "buffer of %lld elements overflows", (long long)count);
        return NULL;
    }
    return lac_malloc(ctx, bytes);
}

/* out (mn x N) = in · U (GFT) or in · U^T (iGFT), all threads to the GEMM. */
static void F(gemm_basis)(int threads, const REAL *u, int64_t N, int64_t mn, const REAL *in, REAL *out, int inverse)
{
    blas_threads_scope scope = blas_threads_begin(threads);
    GEMM(CblasColMajor, CblasNoTrans, inverse ? CblasTrans : CblasNoTrans, (blasint)mn, (blasint)N, (blasint)N,
         (REAL)1, in, (blasint)mn, u, (blasint)N, (REAL)0, out, (blasint)mn);
    blas_threads_end(scope);
}

static lac_status F(cpu_setup)(lac_ctx_t ctx, const lac_impute_problem *pr, void **out, double *truth_sq,
                               double *truth_missing_sq)
{
    F(cpu_state) *s = lac_calloc(ctx, 1, sizeof *s);
    if (!s) return LAC_ERR_OUT_OF_MEMORY;
    s->problem = *pr;
    s->N = pr->N;
    s->mn = pr->m * pr->n;
    s->ni = pr->num_incomplete;
    s->rows = pr->n;
    s->cols = pr->m;
    s->p = pr->m < pr->n ? pr->m : pr->n;
    s->threads = lac_threads(ctx);
    s->u = pr->gft->vectors;
    int64_t N = s->N, mn = s->mn, ni = s->ni;
    lac_status st = LAC_SUCCESS;

    s->u_inc = F(alloc)(ctx, ni * N);
    s->c = F(alloc)(ctx, mn * N);
    s->ghat = F(alloc)(ctx, mn * N);
    s->gest = F(alloc)(ctx, mn * N);
    s->x_inc = F(alloc)(ctx, mn * ni);
    s->x_est = s->x_new = s->x_inc;
    if (!s->u_inc || !s->c || !s->ghat || !s->gest || !s->x_inc) {
        st = LAC_ERR_OUT_OF_MEMORY;
        goto fail;
    }
    if (pr->momentum) {
        s->x_est = F(alloc)(ctx, mn * ni);
        s->x_new = F(alloc)(ctx, mn * ni);
        if (!s->x_est || !s->x_new) {
            st = LAC_ERR_OUT_OF_MEMORY;
            goto fail;
        }
    }
    if (pr->entry_observed) {
        s->obs_inc = lac_malloc(ctx, (size_t)(mn * ni));
        if (!s->obs_inc) {
            st = LAC_ERR_OUT_OF_MEMORY;
            goto fail;
        }
    }

    /* U_I: the incomplete vertices' rows of U, so that the GFT and iGFT of
     * the changing part cost ni/N of full ones. */
#pragma omp parallel for num_threads(s->threads) schedule(static)
    for (int64_t k = 0; k < N; k++)
        for (int64_t i = 0; i < ni; i++) s->u_inc[i + k * ni] = s->u[pr->incomplete[i] + k * N];

    /* P_Ω(G) into ghat (a free buffer now), then C = P_Ω(G) U. */
#pragma omp parallel for num_threads(s->threads) schedule(static)
    for (int64_t v = 0; v < N; v++) {
        REAL *col = s->ghat + v * mn;
        unsigned char state = pr->vertex_state[v];
        for (int64_t e = 0; e < mn; e++) {
            int observed = state == LAC_VERTEX_OBSERVED ||
                           (state == LAC_VERTEX_PARTIAL && pr->entry_observed[v * mn + e]);
            col[e] = observed ? F(load)(pr->tensor, pr->tensor_dtype, v * mn + e) : (REAL)0;
        }
    }
    F(gemm_basis)(s->threads, s->u, N, mn, s->ghat, s->c, 0);

#pragma omp parallel for num_threads(s->threads) schedule(static)
    for (int64_t i = 0; i < ni; i++) {
        if (s->obs_inc) memcpy(s->obs_inc + i * mn, pr->entry_observed + pr->incomplete[i] * mn, (size_t)mn);
        memset(s->x_inc + i * mn, 0, (size_t)mn * sizeof(REAL));
        if (s->x_est != s->x_inc) memset(s->x_est + i * mn, 0, (size_t)mn * sizeof(REAL));
    }
    memset(s->gest, 0, (size_t)(mn * N) * sizeof(REAL));

    if (pr->truth) {
        s->true_hat = F(alloc)(ctx, mn * N);
        s->true_inc = F(alloc)(ctx, mn * ni);
        if (!s->true_hat || !s->true_inc) {
            st = LAC_ERR_OUT_OF_MEMORY;
            goto fail;
        }
        double all = 0, missing = 0;
#pragma omp parallel for num_threads(s->threads) schedule(static) reduction(+ : all)
        for (int64_t i = 0; i < mn * N; i++) {
            double t = F(load)(pr->truth, pr->truth_dtype, i);
            s->ghat[i] = (REAL)t;
            all += t * t;
        }
        F(gemm_basis)(s->threads, s->u, N, mn, s->ghat, s->true_hat, 0);
#pragma omp parallel for num_threads(s->threads) schedule(static) reduction(+ : missing)
        for (int64_t i = 0; i < ni; i++) {
            int64_t v = pr->incomplete[i];
            for (int64_t e = 0; e < mn; e++) {
                double t = F(load)(pr->truth, pr->truth_dtype, v * mn + e);
                s->true_inc[i * mn + e] = (REAL)t;
                if (!s->obs_inc || !s->obs_inc[i * mn + e]) missing += t * t;
            }
        }
        *truth_sq = all;
        *truth_missing_sq = missing;
    }

    /* One workspace per thread for Algorithm 2: s (p), U (rows x p),
     * VT (p x cols), the result R (rows x cols) and LAPACK's work. */
    {
        REAL query = 0;
        lapack_int iquery = 0;
        lapack_int info = GESDD(LAPACK_COL_MAJOR, 'S', (lapack_int)s->rows, (lapack_int)s->cols, NULL,
                                (lapack_int)s->rows, NULL, NULL, (lapack_int)s->rows, NULL, (lapack_int)s->p, &query,
                                -1, &iquery);
        if (info != 0) {
            st = lac_error(ctx, LAC_ERR_INTERNAL, "gesdd workspace query failed (info %d)", (int)info);
            goto fail;
        }
        /* At least the documented minimum for jobz = 'S' (a float32 query can
         * round below it). */
        int64_t lo = s->p, hi = s->rows > s->cols ? s->rows : s->cols;
        int64_t minimum = 3 * lo + (hi > 4 * lo * lo + 4 * lo ? hi : 4 * lo * lo + 4 * lo);
        s->lwork = (lapack_int)((double)query * 1.0001) + 1;
        if (s->lwork < minimum) s->lwork = (lapack_int)minimum;
        s->work_stride = s->p + s->rows * s->p + s->p * s->cols + s->rows * s->cols + (int64_t)s->lwork;
        s->work_stride = (s->work_stride + 15) / 16 * 16;   /* keep each thread's block on its own lines */
        s->work = F(alloc)(ctx, s->work_stride * s->threads);
        s->iwork = lac_malloc(ctx, (size_t)(12 * s->p * s->threads) * sizeof *s->iwork);
        int64_t big = s->rows > s->cols ? s->rows : s->cols;
        s->gram_stride = 2 * s->rows * s->cols + 2 * s->p * s->p + big * s->p + 6 * s->p + 64 * s->p;
        s->gram_stride = (s->gram_stride + 7) / 8 * 8;
        s->gram_work = lac_malloc(ctx, (size_t)(s->gram_stride * s->threads) * sizeof(double));
        if (!s->work || !s->iwork || !s->gram_work) {
            st = LAC_ERR_OUT_OF_MEMORY;
            goto fail;
        }
    }
    *out = s;
    return LAC_SUCCESS;
fail:
    F(cpu_release)(s);
    return st;
}

static lac_status F(cpu_gft)(lac_ctx_t ctx, void *opaque)
{
    (void)ctx;
    F(cpu_state) *s = opaque;
    memcpy(s->ghat, s->c, (size_t)(s->mn * s->N) * sizeof(REAL));
    if (s->ni == 0) return LAC_SUCCESS;
    blas_threads_scope scope = blas_threads_begin(s->threads);
    /* Ĝ = C + X_I U_I (Algorithm 1 lines 7-8): one GEMM. */
    GEMM(CblasColMajor, CblasNoTrans, CblasNoTrans, (blasint)s->mn, (blasint)s->N, (blasint)s->ni, (REAL)1, s->x_inc,
         (blasint)s->mn, s->u_inc, (blasint)s->ni, (REAL)1, s->ghat, (blasint)s->mn);
    blas_threads_end(scope);
    return LAC_SUCCESS;
}

/* S_λ of one slice through its Gram matrix, in float64: B = AᵀA (or AAᵀ,
 * the smaller), B = Q T Qᵀ (sytrd), T's eigenvalues (sterf) give the
 * singular values σ_j = sqrt(μ_j), and only the r eigenvectors with σ_j > λ
 * are formed (stein, ormtr): R = A V diag(1 - λ/σ) Vᵀ (= U (Σ - λ)₊ Vᵀ).
 * About half the cost of gesdd at low rank. Squaring loses what lies below
 * ~1e-8 σmax, so the caller falls back to gesdd when λ < 1e-6 σmax, and when
 * the rank is high or T splits. Returns the rank, or -1 for "use gesdd". */
static int64_t F(svt_gram)(const F(cpu_state) *s, const REAL *a, double lambda, double *ws, lapack_int *iws, REAL *out)
{
    const int64_t rows = s->rows, cols = s->cols, p = s->p, big = rows > cols ? rows : cols;
    const int right = cols <= rows;   /* B = AᵀA: eigenvectors are right singular vectors */
    double *ad = ws, *b = ad + rows * cols, *z = b + p * p, *t = z + p * p, *rd = t + big * p;
    double *d = rd + rows * cols, *e = d + p, *tau = e + p, *w = tau + p, *dc = w + p, *ec = dc + p, *work = ec + p;
    lapack_int *iblock = iws, *isplit = iblock + p, *ifail = isplit + p, *iwork = ifail + p;
    for (int64_t i = 0; i < rows * cols; i++) ad[i] = (double)a[i];
    cblas_dsyrk(CblasColMajor, CblasUpper, right ? CblasTrans : CblasNoTrans, (blasint)p, (blasint)(right ? rows : cols),
                1.0, ad, (blasint)rows, 0.0, b, (blasint)p);
    if (LAPACKE_dsytrd_work(LAPACK_COL_MAJOR, 'U', (lapack_int)p, b, (lapack_int)p, d, e, tau, work,
                            (lapack_int)(64 * p)) != 0)
        return -1;
    for (int64_t i = 0; i + 1 < p; i++)   /* stein below is given one block: T must not split */
        if (fabs(e[i]) <= 1e-14 * (fabs(d[i]) + fabs(d[i + 1])) || !isfinite(e[i])) return -1;
    memcpy(dc, d, (size_t)p * sizeof *d);
    memcpy(ec, e, (size_t)p * sizeof *e);
    if (LAPACKE_dsterf_work((lapack_int)p, dc, ec) != 0) return -1;   /* ascending */
    double mu_max = dc[p - 1] > 0 ? dc[p - 1] : 0;
    if (lambda * lambda >= mu_max) {
        memset(out, 0, (size_t)(rows * cols) * sizeof(REAL));
        return 0;
    }
    if (lambda < 1e-6 * sqrt(mu_max)) return -1;
    int64_t r = 0;
    while (r < p && dc[p - 1 - r] > lambda * lambda) r++;
    if (r > 16 && 2 * r > p) return -1;
    for (int64_t j = 0; j < r; j++) {   /* stein wants them ascending within the block */
        w[j] = dc[p - r + j];
        iblock[j] = 1;
    }
    isplit[0] = (lapack_int)p;
    if (LAPACKE_dstein_work(LAPACK_COL_MAJOR, (lapack_int)p, d, e, (lapack_int)r, w, iblock, isplit, z, (lapack_int)p,
                            work, iwork, ifail) != 0)
        return -1;
    if (LAPACKE_dormtr_work(LAPACK_COL_MAJOR, 'L', 'U', 'N', (lapack_int)p, (lapack_int)r, b, (lapack_int)p, tau, z,
                            (lapack_int)p, work, (lapack_int)(64 * p)) != 0)
        return -1;
    if (right) {
        /* t = A V (rows x r), scaled by 1 - λ/σ, then R = t Vᵀ. */
        cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, (blasint)rows, (blasint)r, (blasint)cols, 1.0, ad,
                    (blasint)rows, z, (blasint)p, 0.0, t, (blasint)rows);
        for (int64_t j = 0; j < r; j++) {
            double f = 1 - lambda / sqrt(w[j]);
            for (int64_t i = 0; i < rows; i++) t[i + j * rows] *= f;
        }
        cblas_dgemm(CblasColMajor, CblasNoTrans, CblasTrans, (blasint)rows, (blasint)cols, (blasint)r, 1.0, t,
                    (blasint)rows, z, (blasint)p, 0.0, rd, (blasint)rows);
    } else {
        /* t = Uᵀ A (r x cols), scaled by 1 - λ/σ, then R = U t. */
        cblas_dgemm(CblasColMajor, CblasTrans, CblasNoTrans, (blasint)r, (blasint)cols, (blasint)rows, 1.0, z,
                    (blasint)p, ad, (blasint)rows, 0.0, t, (blasint)r);
        for (int64_t j = 0; j < r; j++) {
            double f = 1 - lambda / sqrt(w[j]);
            for (int64_t i = 0; i < cols; i++) t[j + i * r] *= f;
        }
        cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, (blasint)rows, (blasint)cols, (blasint)r, 1.0, z,
                    (blasint)p, t, (blasint)r, 0.0, rd, (blasint)rows);
    }
    for (int64_t i = 0; i < rows * cols; i++) out[i] = (REAL)rd[i];
    return r;
}

/* S_λ of one slice by LAPACK gesdd (Algorithm 2 as written); with lambda < 0
 * only the singular values, *sigma_max the largest and R = 0. The slice `a`
 * is destroyed. Returns the rank; *info is gesdd's. */
static int64_t F(svt_gesdd)(const F(cpu_state) *s, REAL *a, double lambda, double *sigma_max, REAL *sv, REAL *uu,
                            REAL *vt, REAL *r, REAL *work, lapack_int *iwork, lapack_int *info)
{
    const int64_t rows = s->rows, cols = s->cols, p = s->p;
    *info = GESDD(LAPACK_COL_MAJOR, lambda >= 0 ? 'S' : 'N', (lapack_int)rows, (lapack_int)cols, a, (lapack_int)rows, sv,
                  uu, (lapack_int)rows, vt, (lapack_int)p, work, s->lwork, iwork);
    if (*info != 0) return 0;
    int64_t rank = 0;
    if (lambda >= 0) {
        REAL lam = (REAL)lambda;
        while (rank < p && sv[rank] > lam) rank++;
        /* U (Σ - λ)₊ Vᵀ over the kept singular triplets only. */
        for (int64_t j = 0; j < rank; j++) {
            REAL scale = sv[j] - lam;
            for (int64_t i = 0; i < rows; i++) uu[i + j * rows] *= scale;
        }
    } else if (sigma_max) {
        *sigma_max = p > 0 ? (double)sv[0] : 0.0;
    }
    if (rank > 0)
        GEMM(CblasColMajor, CblasNoTrans, CblasNoTrans, (blasint)rows, (blasint)cols, (blasint)rank, (REAL)1, uu,
             (blasint)rows, vt, (blasint)p, (REAL)0, r, (blasint)rows);
    else
        memset(r, 0, (size_t)(rows * cols) * sizeof(REAL));
    return rank;
}

static lac_status F(cpu_svt)(lac_ctx_t ctx, void *opaque, const double *lambda, double *sigma_max,
                             lac_impute_svt_stats *stats)
{
    F(cpu_state) *s = opaque;
    const int64_t N = s->N, mn = s->mn, rows = s->rows, cols = s->cols, p = s->p;
    double change = 0, previous = 0, truth_err = 0;
    int64_t rank_sum = 0, failed_at = -1;
    int failed_info = 0;

    /* Each frequency's SVD runs on one thread: BLAS inside it must not spawn
     * its own threads on top of ours. */
    blas_threads_scope scope = blas_threads_begin(1);
#pragma omp parallel num_threads(s->threads) reduction(+ : change, previous, truth_err, rank_sum)
    {
        int t = omp_get_thread_num();
        REAL *sv = s->work + (int64_t)t * s->work_stride;
        REAL *uu = sv + p;
        REAL *vt = uu + rows * p;
        REAL *r = vt + p * cols;
        REAL *work = r + rows * cols;
        lapack_int *iwork = s->iwork + (int64_t)t * 8 * p;
#pragma omp for schedule(dynamic, 8)
        for (int64_t k = 0; k < N; k++) {
            REAL *a = s->ghat + k * mn;
            REAL *old = s->gest + k * mn;
            int64_t rank = lambda ? F(svt_gram)(s, a, lambda[k], s->gram_work + (int64_t)t * s->gram_stride,
                                                s->iwork + (int64_t)(s->threads * 8 * p) + (int64_t)t * 4 * p, r)
                                  : -1;
            if (rank < 0) {
                lapack_int info = 0;
                rank = F(svt_gesdd)(s, a, lambda ? lambda[k] : -1, sigma_max ? &sigma_max[k] : NULL, sv, uu, vt, r,
                                    work, iwork, &info);
                if (info != 0) {
#pragma omp critical(lac_impute_svt_failure)
                    if (failed_at < 0 || k < failed_at) {
                        failed_at = k;
                        failed_info = (int)info;
                    }
                    continue;
                }
            }
            const REAL *truth = s->true_hat ? s->true_hat + k * mn : NULL;
            double dc = 0, dp = 0, dt = 0;
            for (int64_t e = 0; e < mn; e++) {
                double d = (double)r[e] - (double)old[e];
                dc += d * d;
                dp += (double)old[e] * (double)old[e];
                if (truth) {
                    double q = (double)r[e] - (double)truth[e];
                    dt += q * q;
                }
            }
            memcpy(old, r, (size_t)mn * sizeof(REAL));
            change += dc;
            previous += dp;
            truth_err += dt;
            rank_sum += rank;
        }
    }
    blas_threads_end(scope);
    if (failed_at >= 0)
        return lac_error(ctx, LAC_ERR_INTERNAL, "the SVD of spectral slice %lld did not converge (gesdd info %d)",
                         (long long)failed_at, failed_info);
    stats->change_sq = change;
    stats->previous_sq = previous;
    stats->truth_error_sq = truth_err;
    stats->rank_sum = rank_sum;
    return LAC_SUCCESS;
}

static lac_status F(cpu_igft)(lac_ctx_t ctx, void *opaque, double momentum, double *missing_error_sq)
{
    (void)ctx;
    F(cpu_state) *s = opaque;
    const int64_t mn = s->mn, ni = s->ni;
    if (ni == 0) {
        *missing_error_sq = 0;
        return LAC_SUCCESS;
    }
    blas_threads_scope scope = blas_threads_begin(s->threads);
    /* G^est on the incomplete vertices: Ĝest U_I^T (line 10). */
    GEMM(CblasColMajor, CblasNoTrans, CblasTrans, (blasint)mn, (blasint)ni, (blasint)s->N, (REAL)1, s->gest,
         (blasint)mn, s->u_inc, (blasint)ni, (REAL)0, s->x_new, (blasint)mn);
    blas_threads_end(scope);
    double err = 0;
    const REAL theta = (REAL)momentum;
    const int extrapolate = s->x_new != s->x_inc;
#pragma omp parallel for num_threads(s->threads) schedule(static) reduction(+ : err)
    for (int64_t i = 0; i < mn * ni; i++) {
        REAL x = s->x_new[i];
        if (s->obs_inc && s->obs_inc[i]) x = 0;   /* P_Ω⊥: the observed entries come from C */
        if (s->true_inc && !(s->obs_inc && s->obs_inc[i])) {
            double d = (double)x - (double)s->true_inc[i];
            err += d * d;
        }
        if (extrapolate) {
            /* Accelerated proximal gradient: impute Y = X_t + θ (X_t - X_{t-1}). */
            s->x_inc[i] = x + theta * (x - s->x_est[i]);
            s->x_est[i] = x;
        } else {
            s->x_inc[i] = x;
        }
    }
    *missing_error_sq = err;
    return LAC_SUCCESS;
}

static void F(store)(void *out, lac_dtype dtype, int64_t i, REAL value)
{
    if (dtype == LAC_FLOAT32) ((float *)out)[i] = (float)value;
    else ((double *)out)[i] = (double)value;
}

static lac_status F(cpu_finish)(lac_ctx_t ctx, void *opaque, lac_impute_output output, void *out, lac_dtype out_dtype,
                                double *error_sq)
{
    F(cpu_state) *s = opaque;
    const lac_impute_problem *pr = &s->problem;
    const int64_t N = s->N, mn = s->mn;
    REAL *full = NULL;
    if (output == LAC_IMPUTE_ESTIMATE || pr->truth) {
        full = s->ghat;   /* free now: the last GFT has been thresholded */
        F(gemm_basis)(s->threads, s->u, N, mn, s->gest, full, 1);
    }
    if (pr->truth) {
        double err = 0;
#pragma omp parallel for num_threads(s->threads) schedule(static) reduction(+ : err)
        for (int64_t i = 0; i < mn * N; i++) {
            double d = (double)full[i] - F(load)(pr->truth, pr->truth_dtype, i);
            err += d * d;
        }
        *error_sq = err;
    }
    if (output == LAC_IMPUTE_ESTIMATE) {
#pragma omp parallel for num_threads(s->threads) schedule(static)
        for (int64_t i = 0; i < mn * N; i++) F(store)(out, out_dtype, i, full[i]);
        return LAC_SUCCESS;
    }
    /* COMPLETED: the given entries where observed, the estimate elsewhere.
     * Incomplete vertices are written from x_inc; out may be the tensor. */
    if (out != pr->tensor) {
        size_t esize = lac_dtype_size(out_dtype);
#pragma omp parallel for num_threads(s->threads) schedule(static)
        for (int64_t v = 0; v < N; v++)
            if (pr->vertex_state[v] == LAC_VERTEX_OBSERVED)
                memcpy((char *)out + (size_t)(v * mn) * esize, (const char *)pr->tensor + (size_t)(v * mn) * esize,
                       (size_t)mn * esize);
    }
    (void)ctx;
#pragma omp parallel for num_threads(s->threads) schedule(static)
    for (int64_t i = 0; i < s->ni; i++) {
        int64_t v = pr->incomplete[i];
        for (int64_t e = 0; e < mn; e++) {
            if (s->obs_inc && s->obs_inc[i * mn + e])
                F(store)(out, out_dtype, v * mn + e, F(load)(pr->tensor, pr->tensor_dtype, v * mn + e));
            else
                F(store)(out, out_dtype, v * mn + e, s->x_est[i * mn + e]);
        }
    }
    return LAC_SUCCESS;
}

static lac_status F(cpu_eigen)(lac_ctx_t ctx, int64_t n, void *a, int vectors, double *eigenvalues)
{
    REAL *w = F(alloc)(ctx, n);
    if (!w) return LAC_ERR_OUT_OF_MEMORY;
    /* The documented workspace sizes, not the query's: a float32 query
     * returns the size as a float, which rounds below the minimum for large N. */
    int64_t lwork = vectors ? 1 + 6 * n + 2 * n * n : 2 * n + 1, liwork = vectors ? 3 + 5 * n : 1;
    REAL *work = F(alloc)(ctx, lwork);
    lapack_int *iwork = lac_malloc(ctx, (size_t)liwork * sizeof *iwork);
    if (!work || !iwork) {
        free(w);
        free(work);
        free(iwork);
        return LAC_ERR_OUT_OF_MEMORY;
    }
    blas_threads_scope scope = blas_threads_begin(lac_threads(ctx));
    lapack_int info = SYEVD(LAPACK_COL_MAJOR, vectors ? 'V' : 'N', 'U', (lapack_int)n, (REAL *)a, (lapack_int)n, w, work,
                            (lapack_int)lwork, iwork, (lapack_int)liwork);
    blas_threads_end(scope);
    free(work);
    free(iwork);
    if (info != 0) {
        free(w);
        return lac_error(ctx, LAC_ERR_INTERNAL, "syevd failed (info %d) for the %lld x %lld Laplacian", (int)info,
                         (long long)n, (long long)n);
    }
    for (int64_t i = 0; i < n; i++) eigenvalues[i] = (double)w[i];
    free(w);
    return LAC_SUCCESS;
}

static double F(gemm_seconds)(lac_ctx_t ctx, int64_t m, int64_t n, int64_t k)
{
    REAL *a = F(alloc)(ctx, m * k), *b = F(alloc)(ctx, k * n), *c = F(alloc)(ctx, m * n);
    double seconds = -1;
    if (a && b && c) {
        for (int64_t i = 0; i < m * k; i++) a[i] = (REAL)((i % 17) - 8) / 8;
        for (int64_t i = 0; i < k * n; i++) b[i] = (REAL)((i % 13) - 6) / 6;
        blas_threads_scope scope = blas_threads_begin(lac_threads(ctx));
        for (int rep = 0; rep < 2; rep++) {   /* the first is a warm-up */
            double t0 = omp_get_wtime();
            GEMM(CblasColMajor, CblasNoTrans, CblasNoTrans, (blasint)m, (blasint)n, (blasint)k, (REAL)1, a, (blasint)m, b,
                 (blasint)k, (REAL)0, c, (blasint)m);
            seconds = omp_get_wtime() - t0;
        }
        blas_threads_end(scope);
    }
    free(a);
    free(b);
    free(c);
    return seconds;
}
