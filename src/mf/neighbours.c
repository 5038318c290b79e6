/* Top-K item neighbours, the front end (nbr_backend.h is the backends'
 * contract): parameters and checks, the ratings laid out both ways, the LSH
 * codes summed per item through lac_map (simLSH's signed accumulation, the
 * random projections of RP_cos, minHash's minima), the bucket keys, and the
 * result object with its recall and text file. */
#include "io/io_internal.h"
#include "mf/mf_internal.h"

#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* Columns of codes summed per lac_map call, and ratings per call: the call
 * stays below map's serial threshold, so that the threads here each run
 * whole calls (one 64-bit hash gives a user's 64 simLSH bits). */
#define CODE_COLS 64
#define UNIT_RATINGS 448
#define CODES_GROUP_BYTES ((double)(2 << 20))   /* codes held at once when they are not kept */

static const char *const method_names[] = {"simlsh", "gsm", "rpcos", "minhash", "random", "simlsh-centred"};

static lac_mf_nbr_params nbr_defaults(void)
{
    lac_mf_nbr_params p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    p.method = LAC_MF_NBR_SIMLSH;
    p.k = 32;
    p.p = 3;
    p.q = 100;
    p.bits = 8;
    p.psi_power = 2;
    p.shrink = 100.0;
    p.seed = 1;
    return p;
}

LAC_PARAMS_INIT(lac_mf_nbr_params, nbr_defaults())

const char *lac_mf_nbr_params_check(const lac_mf_nbr_params *given)
{
    LAC_PARAMS_CHECK_BEGIN(lac_mf_nbr_params, given, nbr_defaults());
    if (p->method < LAC_MF_NBR_SIMLSH || p->method > LAC_MF_NBR_SIMLSH_CENTRED)
        return "method must be simlsh, gsm, rpcos, minhash, random or simlsh-centred";
    if (p->k < 1 || p->k > 4096) return "K (neighbours) must be in [1, 4096]";
    if (p->p < 1 || p->p > 64) return "p (codes per key) must be in [1, 64]";
    if (p->q < 1 || p->q > 100000) return "q (keys per item) must be in [1, 100000]";
    if (p->bits < 1 || p->bits > 32) return "bits (G) must be in [1, 32]";
    if (p->psi_power < 1 || p->psi_power > 4) return "psi_power must be in [1, 4]";
    if (!(p->shrink >= 0) || !isfinite(p->shrink)) return "shrink must be finite and >= 0";
    return NULL;
}

const char *lac_mf_nbr_method_name(lac_mf_nbr_method m)
{
    return (m >= LAC_MF_NBR_SIMLSH && m <= LAC_MF_NBR_SIMLSH_CENTRED) ? method_names[m] : "unknown";
}

lac_status lac_mf_nbr_method_parse(const char *name, lac_mf_nbr_method *m)
{
    if (!name || !m) return lac_error(NULL, LAC_ERR_ARGUMENT, "name or method is NULL");
    for (int i = 0; i <= LAC_MF_NBR_SIMLSH_CENTRED; i++)
        if (strcmp(name, method_names[i]) == 0) {
            *m = (lac_mf_nbr_method)i;
            return LAC_SUCCESS;
        }
    return lac_error(NULL, LAC_ERR_ARGUMENT, "unknown neighbour method '%s' (simlsh, gsm, rpcos, minhash, random, "
                                             "simlsh-centred)", name);
}

/* ------------------------------------------------------------------------ */
/* The ratings both ways                                                      */
/* ------------------------------------------------------------------------ */
void lac_mf_nbr_data_free(lac_nbr_data *d)
{
    if (!d) return;
    free(d->item_start);
    free(d->item_user);
    free(d->item_val);
    free(d->user_start);
    free(d->user_item);
    free(d->user_val);
    memset(d, 0, sizeof *d);
}

int64_t lac_mf_nbr_data_bytes(const lac_nbr_data *d)
{
    if (!d->item_start) return 0;   /* the caller's triples */
    int64_t items = (d->num_items + 1) * 8 + d->nnz * 8;
    return d->user_start ? 2 * items + (d->num_users - d->num_items) * 8 : items;
}

/* A stable counting sort of n entries by key[i] < nkeys, the entries in
 * `chunks` runs of consecutive indices, one per thread: start (nkeys + 1)
 * and, for each run c and key k, the slot of the run's first entry of k at
 * cursor[c * nkeys + k]. Entries of one key keep their order. */
static lac_status counting_cursors(lac_ctx_t ctx, int64_t n, const int32_t *key, int64_t nkeys, int chunks,
                                   int64_t *start, int64_t **cursor)
{
    int64_t *cur = lac_calloc(ctx, (size_t)chunks * (size_t)(nkeys ? nkeys : 1), sizeof *cur);
    if (!cur) return LAC_ERR_OUT_OF_MEMORY;
#pragma omp parallel for num_threads(chunks) schedule(static, 1)
    for (int c = 0; c < chunks; c++) {
        int64_t *h = cur + (size_t)c * (size_t)nkeys;
        for (int64_t i = n * c / chunks; i < n * (c + 1) / chunks; i++) h[key[i]]++;
    }
    int64_t run = 0;
    for (int64_t k = 0; k < nkeys; k++) {
        start[k] = run;
        for (int c = 0; c < chunks; c++) {
            int64_t cnt = cur[(size_t)c * (size_t)nkeys + (size_t)k];
            cur[(size_t)c * (size_t)nkeys + (size_t)k] = run;
            run += cnt;
        }
    }
    start[nkeys] = run;
    *cursor = cur;
    return LAC_SUCCESS;
}

/* The layouts from n entries (user[i], item[i], val[i]) in any order, by
 * stable counting sorts on every thread: item-major (users ascending, a
 * repeated pair's last entry kept), then, with_users, user-major from it. */
static lac_status nbr_layout(lac_ctx_t ctx, int64_t n, const int32_t *user, const int32_t *item, const float *val,
                             int64_t nu, int64_t ni, int with_users, lac_nbr_data *out)
{
    lac_nbr_data d;
    memset(&d, 0, sizeof d);
    d.num_users = nu;
    d.num_items = ni;
    int threads = lac_threads(ctx);
    size_t nz = (size_t)(n ? n : 1);
    int64_t *cur = NULL;
    int32_t *owner = NULL;
    lac_status st = LAC_SUCCESS;
    d.item_start = lac_calloc(ctx, (size_t)ni + 1, sizeof *d.item_start);
    d.item_user = lac_malloc(ctx, nz * sizeof *d.item_user);
    d.item_val = lac_malloc(ctx, nz * sizeof *d.item_val);
    if (!d.item_start || !d.item_user || !d.item_val) {
        st = LAC_ERR_OUT_OF_MEMORY;
        goto fail;
    }
    LAC_CHECK_GOTO(counting_cursors(ctx, n, item, ni, threads, d.item_start, &cur), st, fail);
#pragma omp parallel for num_threads(threads) schedule(static, 1)
    for (int c = 0; c < threads; c++) {
        int64_t *h = cur + (size_t)c * (size_t)ni;
        for (int64_t i = n * c / threads; i < n * (c + 1) / threads; i++) {
            int64_t at = h[item[i]]++;
            d.item_user[at] = user[i];
            d.item_val[at] = val[i];
        }
    }
    free(cur);
    cur = NULL;
    LAC_CHECK_GOTO(lac_nbr_tidy_rows(ctx, ni, d.item_start, d.item_user, d.item_val, threads), st, fail);
    d.nnz = d.item_start[ni];
    if (with_users) {
        nz = (size_t)(d.nnz ? d.nnz : 1);
        d.user_start = lac_calloc(ctx, (size_t)nu + 1, sizeof *d.user_start);
        d.user_item = lac_malloc(ctx, nz * sizeof *d.user_item);
        d.user_val = lac_malloc(ctx, nz * sizeof *d.user_val);
        owner = lac_malloc(ctx, nz * sizeof *owner);
        if (!d.user_start || !d.user_item || !d.user_val || !owner) {
            st = LAC_ERR_OUT_OF_MEMORY;
            goto fail;
        }
#pragma omp parallel for num_threads(threads) schedule(dynamic, 256)
        for (int64_t j = 0; j < ni; j++)
            for (int64_t a = d.item_start[j]; a < d.item_start[j + 1]; a++) owner[a] = (int32_t)j;
        /* scanning item-major entries keeps each user's items ascending */
        LAC_CHECK_GOTO(counting_cursors(ctx, d.nnz, d.item_user, nu, threads, d.user_start, &cur), st, fail);
#pragma omp parallel for num_threads(threads) schedule(static, 1)
        for (int c = 0; c < threads; c++) {
            int64_t *h = cur + (size_t)c * (size_t)nu;
            for (int64_t a = d.nnz * c / threads; a < d.nnz * (c + 1) / threads; a++) {
                int64_t at = h[d.item_user[a]]++;
                d.user_item[at] = owner[a];
                d.user_val[at] = d.item_val[a];
            }
        }
    }
    free(cur);
    free(owner);
    *out = d;
    return LAC_SUCCESS;
fail:
    free(cur);
    free(owner);
    lac_mf_nbr_data_free(&d);
    return st;
}

lac_status lac_mf_nbr_data_build(lac_ctx_t ctx, const lac_mf_data *m, int with_users, lac_nbr_data *out)
{
    int32_t *user = lac_malloc(ctx, (size_t)(m->nnz ? m->nnz : 1) * sizeof *user);
    if (!user) return LAC_ERR_OUT_OF_MEMORY;
#pragma omp parallel for num_threads(lac_threads(ctx)) schedule(dynamic, 256)
    for (int64_t u = 0; u < m->num_users; u++)
        for (int64_t a = m->row_start[u]; a < m->row_start[u + 1]; a++) user[a] = (int32_t)u;
    lac_status st = nbr_layout(ctx, m->nnz, user, m->col, m->val, m->num_users, m->num_items, with_users, out);
    free(user);
    return st;
}

/* ------------------------------------------------------------------------ */
/* LSH codes through lac_map                                                  */
/* ------------------------------------------------------------------------ */
static int is_bits_method(lac_mf_nbr_method m) { return m != LAC_MF_NBR_MINHASH; }

/* Columns of codes: G per code for the sign methods, one per min-hash. */
static int64_t code_columns(const lac_mf_nbr_params *p)
{
    return (int64_t)p->p * p->q * (is_bits_method(p->method) ? p->bits : 1);
}

float lac_mf_nbr_source(const lac_mf_nbr_params *p, int64_t user, int64_t col)
{
    if (p->method == LAC_MF_NBR_SIMLSH || p->method == LAC_MF_NBR_SIMLSH_CENTRED)
        return (lac_nbr_user_word(p->seed, user, col / CODE_COLS) >> (col % CODE_COLS)) & 1 ? 1.0f : -1.0f;
    if (p->method == LAC_MF_NBR_RPCOS) {   /* Box-Muller: columns 2c and 2c + 1 share a draw */
        uint64_t h = lac_nbr_user_word(p->seed, user, (uint64_t)(col & ~(int64_t)1) * 2654435761ull + 1);
        double u1 = ((double)(h >> 40) + 0.5) * 0x1.0p-24, u2 = ((double)(h & 0xFFFFFF) + 0.5) * 0x1.0p-24;
        double rad = sqrt(-2.0 * log(u1)), a = 6.283185307179586 * u2;
        return (float)(rad * (col & 1 ? sin(a) : cos(a)));
    }
    return (float)(lac_nbr_user_word(p->seed, user, (uint64_t)col * 40503ull + 7) >> 40);
}

float lac_mf_nbr_weight(const lac_mf_nbr_params *p, float rating, double item_mean)
{
    double r = rating, rp = r;
    for (int e = 1; e < p->psi_power; e++) rp *= r;
    return (float)(p->method == LAC_MF_NBR_SIMLSH ? rp : p->method == LAC_MF_NBR_SIMLSH_CENTRED ? r - item_mean : r);
}

void lac_mf_nbr_codes_add(const lac_mf_nbr_params *p, float *row, int64_t cols, int64_t user, float weight)
{
    if (p->method == LAC_MF_NBR_MINHASH) {
        for (int64_t c = 0; c < cols; c++) {
            float h = lac_mf_nbr_source(p, user, c);
            row[c] = h < row[c] ? h : row[c];
        }
    } else if (p->method == LAC_MF_NBR_RPCOS) {
        for (int64_t c = 0; c < cols; c++) row[c] += weight * lac_mf_nbr_source(p, user, c);
    } else {   /* simLSH: one hash a 64 columns, as user_rows */
        for (int64_t c0 = 0; c0 < cols; c0 += CODE_COLS) {
            uint64_t w = lac_nbr_user_word(p->seed, user, c0 / CODE_COLS);
            for (int64_t c = c0; c < cols && c < c0 + CODE_COLS; c++) row[c] += (w >> (c % CODE_COLS)) & 1 ? weight : -weight;
        }
    }
}

static int is_sign_method(const lac_mf_nbr_params *p)
{
    return p->method == LAC_MF_NBR_SIMLSH || p->method == LAC_MF_NBR_SIMLSH_CENTRED;
}

/* simLSH's signs of user u for columns [c0, c0 + cw): one hash gives the 64
 * bits of an aligned block. */
static void sign_row(const lac_mf_nbr_params *p, int64_t u, int64_t c0, int cw, float *r)
{
    for (int c = 0; c < cw;) {
        int64_t col = c0 + c;
        int off = (int)(col % CODE_COLS), n = CODE_COLS - off < cw - c ? CODE_COLS - off : cw - c;
        uint64_t w = lac_nbr_user_word(p->seed, u, col / CODE_COLS) >> off;
        for (int x = 0; x < n; x++) r[c + x] = (float)(int)(((w >> x) & 1) * 2) - 1.0f;
        c += n;
    }
}

/* The users' source rows for columns [c0, c0 + cw) (lac_mf_nbr_source). */
static void user_rows(const lac_mf_nbr_params *p, int64_t num_users, int64_t c0, int cw, float *rows, int threads)
{
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t u = 0; u < num_users; u++) {
        float *r = rows + u * cw;
        if (is_sign_method(p))
            sign_row(p, u, c0, cw, r);
        else
            for (int c = 0; c < cw; c++) r[c] = lac_mf_nbr_source(p, u, c0 + c);
    }
}

/* A run of whole items (ratings contiguous in item-major order) summed by
 * lac_map calls of at most UNIT_RATINGS rows each; at most UNIT_RATINGS items
 * (items without ratings take no rows). */
typedef struct {
    int64_t item_lo, item_hi;
} unit;

/* Columns [c_begin, c_end) of every item's codes into codes (items x
 * (c_end - c_begin)). */
static lac_status code_sums(lac_ctx_t ctx, const lac_mf_nbr_params *p, const lac_nbr_data *d, float *codes,
                            int64_t c_begin, int64_t c_end, int64_t *peak)
{
    const int64_t cols = c_end - c_begin;
    int threads = lac_threads(ctx);
    /* Calls this small cost a device more (a launch and two copies each) than
     * the sums themselves: with a CUDA context they run on the host's threads,
     * through a host context. Either context maps in this process only: the
     * calls come from the search's threads, where a map over MPI ranks cannot
     * run, and under mpirun every rank searches whole (a search's many small
     * maps would cost more in reductions than they save). */
    lac_ctx_t host = ctx, own = NULL;
    const int ranks = ctx->ranks;
    if (ctx->backend == LAC_BACKEND_CUDA) {
        lac_ctx_params hp = lac_ctx_params_default();
        hp.backend = LAC_BACKEND_CPU;
        hp.threads = threads;
        hp.log = ctx->log;
        hp.log_user = ctx->log_user;
        hp.log_level = ctx->log_level;
        hp.knobs = "LACUNA_DIST=off";
        if (lac_ctx_create(&hp, &own) != LAC_SUCCESS)
            return lac_error(ctx, LAC_ERR_INTERNAL, "a host context for the code sums: %s", lac_last_error(NULL));
        host = own;
    }
    host->ranks = 1;
    int64_t ni = d->num_items, nunits = 0;
    lac_map_op op = p->method == LAC_MF_NBR_MINHASH ? LAC_MAP_MIN : LAC_MAP_SUM;
    float empty = op == LAC_MAP_MIN ? INFINITY : 0.0f;
    /* simLSH's signs (a hash a 64 columns) are made where they are used;
     * the other methods' sources cost more and are made once per user */
    const int signs = is_sign_method(p);
    unit *units = lac_malloc(ctx, (size_t)(ni ? ni : 1) * sizeof *units);
    double *mean = lac_malloc(ctx, (size_t)(ni ? ni : 1) * sizeof *mean);
    float *rows = signs ? lac_malloc(ctx, 1) : lac_malloc(ctx, (size_t)(d->num_users ? d->num_users : 1) * CODE_COLS * sizeof *rows);
    if (!units || !mean || !rows) {
        free(units);
        free(mean);
        free(rows);
        ctx->ranks = ranks;
        lac_ctx_destroy(&own);
        return LAC_ERR_OUT_OF_MEMORY;
    }
    for (int64_t j = 0; j < ni;) {
        int64_t hi = j + 1;
        while (hi < ni && hi - j < UNIT_RATINGS && d->item_start[hi + 1] - d->item_start[j] <= UNIT_RATINGS) hi++;
        units[nunits++] = (unit){j, hi};
        j = hi;
    }
    /* the items' means (simlsh-centred's weights r - mean); the weights,
     * psi(r) for simLSH, r for RP_cos, are made a call's rows at a time */
    for (int64_t j = 0; j < ni; j++) {
        double m = 0.0;
        int64_t lo = d->item_start[j], hi = d->item_start[j + 1];
        for (int64_t a = lo; a < hi; a++) m += d->item_val[a];
        mean[j] = hi > lo ? m / (double)(hi - lo) : 0.0;
    }
    *peak = (int64_t)((size_t)ni * (sizeof *units + sizeof *mean) + (signs ? 0 : (size_t)d->num_users * CODE_COLS * 4) +
                      (size_t)threads * UNIT_RATINGS * (2 * CODE_COLS + 2) * 4);
    lac_status st = LAC_SUCCESS;
    lac_map_params mp = lac_map_params_default();
    mp.op = op;
    mp.accumulate = 1;
    for (int64_t c0 = 0; c0 < cols && st == LAC_SUCCESS; c0 += CODE_COLS) {
        int cw = (int)(cols - c0 < CODE_COLS ? cols - c0 : CODE_COLS);
        if (!signs) user_rows(p, d->num_users, c_begin + c0, cw, rows, threads);
#pragma omp parallel num_threads(threads)
        {
            float *src = malloc((size_t)UNIT_RATINGS * (size_t)cw * sizeof *src);
            float *tgt = malloc((size_t)UNIT_RATINGS * (size_t)cw * sizeof *tgt);
            int32_t *bridge = malloc((size_t)UNIT_RATINGS * sizeof *bridge);
            float *weight = malloc((size_t)UNIT_RATINGS * sizeof *weight);
            lac_status mine = (src && tgt && bridge && weight) ? LAC_SUCCESS : LAC_ERR_OUT_OF_MEMORY;
#pragma omp for schedule(dynamic, 4)
            for (int64_t x = 0; x < nunits; x++) {
                if (mine != LAC_SUCCESS) continue;
                int64_t ilo = units[x].item_lo, ihi = units[x].item_hi;
                int64_t nt = ihi - ilo;
                for (int64_t e = 0; e < nt * cw; e++) tgt[e] = empty;
                for (int64_t a0 = d->item_start[ilo]; a0 < d->item_start[ihi] && mine == LAC_SUCCESS;
                     a0 += UNIT_RATINGS) {
                    int64_t a1 = a0 + UNIT_RATINGS < d->item_start[ihi] ? a0 + UNIT_RATINGS : d->item_start[ihi];
                    int64_t j = ilo;
                    for (int64_t a = a0; a < a1; a++) {
                        while (d->item_start[j + 1] <= a) j++;
                        bridge[a - a0] = (int32_t)(j - ilo);
                        weight[a - a0] = lac_mf_nbr_weight(p, d->item_val[a], mean[j]);
                        if (signs)
                            sign_row(p, d->item_user[a], c_begin + c0, cw, src + (a - a0) * cw);
                        else
                            memcpy(src + (a - a0) * cw, rows + (int64_t)d->item_user[a] * cw, (size_t)cw * sizeof *src);
                    }
                    lac_array S = {.data = src, .dtype = LAC_FLOAT32, .ndim = 2, .shape = {a1 - a0, cw}};
                    lac_array R = {.data = bridge, .dtype = LAC_INT32, .ndim = 1, .shape = {a1 - a0}};
                    lac_array W = {.data = weight, .dtype = LAC_FLOAT32, .ndim = 1, .shape = {a1 - a0}};
                    lac_array T = {.data = tgt, .dtype = LAC_FLOAT32, .ndim = 2, .shape = {nt, cw}};
                    mine = lac_map(host, &mp, &S, &R, op == LAC_MAP_MIN ? NULL : &W, &T);
                }
                for (int64_t j = ilo; j < ihi; j++)
                    memcpy(codes + j * cols + c0, tgt + (j - ilo) * cw, (size_t)cw * sizeof *tgt);
            }
            if (mine != LAC_SUCCESS) {
#pragma omp critical(lac_nbr_codes)
                if (st == LAC_SUCCESS) st = mine;
            }
            free(src);
            free(tgt);
            free(bridge);
            free(weight);
        }
    }
    free(units);
    free(mean);
    free(rows);
    if (st < 0 && own) st = lac_error(ctx, st, "%s", lac_last_error(own));
    ctx->ranks = ranks;
    lac_ctx_destroy(&own);
    return st;
}

/* Table t's bucket key of an item whose codes for tables [t_begin, ...)
 * start at c: it folds its p codes (G sign bits each, or p min-hashes). */
static uint64_t bucket_key(const lac_mf_nbr_params *p, const float *c)
{
    int bitsm = is_bits_method(p->method), per = bitsm ? p->bits : 1;
    uint64_t key = LAC_NBR_KEY0;
    for (int x = 0; x < p->p; x++) {
        uint64_t code = 0;
        if (bitsm)
            for (int g = 0; g < per; g++) code |= (uint64_t)(c[x * per + g] >= 0.0f) << g;   /* Upsilon */
        else   /* an item without ratings keeps +inf */
            code = c[x] < 16777216.0f ? (uint64_t)c[x] : 0xFFFFFFFFull;
        key = lac_nbr_key_fold(key, x, code);
    }
    return key;
}

/* Bucket keys of tables [t_begin, t_end), whose codes are codes' columns
 * (items x cols). */
static void bucket_keys(const lac_mf_nbr_params *p, int64_t ni, const float *codes, int64_t cols, int64_t t_begin,
                        int64_t t_end, uint64_t *keys)
{
    int64_t per = p->p * (is_bits_method(p->method) ? p->bits : 1);
    for (int64_t t = t_begin; t < t_end; t++)
        for (int64_t j = 0; j < ni; j++) keys[t * ni + j] = bucket_key(p, codes + j * cols + (t - t_begin) * per);
}

void lac_mf_nbr_keys(const lac_mf_nbr_params *p, const float *codes, int64_t num_items, const int32_t *rows,
                     int64_t num_rows, uint64_t *keys)
{
    int64_t cols = code_columns(p), per = cols / p->q;
    if (!rows) {
        bucket_keys(p, num_items, codes, cols, 0, p->q, keys);
        return;
    }
    for (int64_t r = 0; r < num_rows; r++) {
        int64_t j = rows[r];
        for (int64_t t = 0; t < p->q; t++) keys[t * num_items + j] = bucket_key(p, codes + j * cols + t * per);
    }
}

/* Every item's bucket keys (keys[t * N + j], all q tables) from the caller's
 * triples, a block of items at a time: the block's ratings gathered from
 * the triples in read order and laid out item-major as nbr_layout lays out
 * every item (so each item's codes are the same floats), its codes summed
 * and keyed, then dropped. Held at once: a block's ratings (at most
 * BLOCK_RATINGS, or one item's) and its codes (CODES_GROUP_BYTES), not the whole layout. */
#define BLOCK_RATINGS ((int64_t)1 << 19)   /* 4 MB of (user, rating) */
#define BLOCK_ITEMS ((int64_t)1 << 14)

/* Tables whose codes for `items` items fit CODES_GROUP_BYTES (one at least). */
static int64_t block_group(const lac_mf_nbr_params *p, int64_t items)
{
    int64_t per_table = code_columns(p) / p->q;
    int64_t g = (int64_t)(CODES_GROUP_BYTES / (4.0 * (double)(items ? items : 1) * per_table));
    return g < 1 ? 1 : g > p->q ? p->q : g;
}
static lac_status keys_by_blocks(lac_ctx_t ctx, const lac_mf_nbr_params *p, const lac_nbr_data *d, uint64_t *keys,
                                 int64_t *peak)
{
    const int64_t ni = d->num_items, cols = code_columns(p), per_table = cols / p->q;
    lac_nbr_blocks bl;
    LAC_CHECK(lac_nbr_blocks_init(ctx, &bl, d, BLOCK_RATINGS, BLOCK_ITEMS, lac_threads(ctx)));
    int64_t most_codes = 0;   /* the largest block's codes */
    for (int64_t j0 = 0, j1, run; j0 < ni; j0 = j1) {
        j1 = lac_nbr_blocks_next(&bl, j0, &run);
        int64_t g = block_group(p, j1 - j0) * per_table * (j1 - j0) * 4;
        most_codes = g > most_codes ? g : most_codes;
    }
    lac_nbr_data b;
    memset(&b, 0, sizeof b);
    b.num_users = d->num_users;
    b.item_start = lac_malloc(ctx, ((size_t)bl.most_items + 1) * sizeof *b.item_start);
    b.item_user = lac_malloc(ctx, (size_t)(bl.most ? bl.most : 1) * sizeof *b.item_user);
    b.item_val = lac_malloc(ctx, (size_t)(bl.most ? bl.most : 1) * sizeof *b.item_val);
    float *codes = lac_malloc(ctx, (size_t)(most_codes ? most_codes : 1));
    lac_status st = b.item_start && b.item_user && b.item_val && codes ? LAC_SUCCESS : LAC_ERR_OUT_OF_MEMORY;
    int64_t sums_peak = 0;
    for (int64_t j0 = 0, j1, run; j0 < ni && st == LAC_SUCCESS; j0 = j1) {
        j1 = lac_nbr_blocks_next(&bl, j0, &run);
        b.num_items = j1 - j0;
        st = lac_nbr_blocks_gather(ctx, &bl, j0, j1, b.item_start, b.item_user, b.item_val);
        b.nnz = st == LAC_SUCCESS ? b.item_start[b.num_items] : 0;
        /* the block's codes, a group of tables at a time */
        int64_t group = block_group(p, b.num_items);
        for (int64_t t0 = 0; t0 < p->q && st == LAC_SUCCESS; t0 += group) {
            int64_t t1 = t0 + group < p->q ? t0 + group : p->q, gcols = (t1 - t0) * per_table, sp = 0;
            st = code_sums(ctx, p, &b, codes, t0 * per_table, t1 * per_table, &sp);
            sums_peak = sp > sums_peak ? sp : sums_peak;
            for (int64_t t = t0; t < t1 && st == LAC_SUCCESS; t++)
                for (int64_t j = j0; j < j1; j++)
                    keys[t * ni + j] = bucket_key(p, codes + (j - j0) * gcols + (t - t0) * per_table);
        }
    }
    *peak = lac_nbr_blocks_bytes(&bl) + (bl.most_items + 1) * 8 + bl.most * 8 + most_codes + sums_peak;
    lac_nbr_blocks_free(&bl);
    free(codes);
    lac_mf_nbr_data_free(&b);
    return st;
}

/* ------------------------------------------------------------------------ */
/* The search                                                                 */
/* ------------------------------------------------------------------------ */
static const lac_nbr_backend *nbr_backend(lac_ctx_t ctx)
{
    const lac_nbr_backend *cuda = ctx->backend == LAC_BACKEND_CUDA ? lac_nbr_backend_cuda() : NULL;
    return cuda ? cuda : &lac_nbr_cpu_backend;
}

lac_status lac_mf_nbr_search(lac_ctx_t ctx, const lac_mf_nbr_params *p, const lac_nbr_data *d, int keep_codes,
                             lac_mf_nbr_t *out)
{
    double t0 = omp_get_wtime();
    int64_t ni = d->num_items;
    if (p->k >= ni)
        return lac_error(ctx, LAC_ERR_VALUE, "K = %d neighbours needs more than %d items (there are %lld)", p->k, p->k,
                         (long long)ni);
    lac_mf_nbr_t r = lac_calloc(ctx, 1, sizeof *r);
    if (!r) return LAC_ERR_OUT_OF_MEMORY;
    lac_idmap_init(&r->items);
    r->params = *p;
    r->num_items = ni;
    r->num_users = d->num_users;
    r->k = p->k;
    r->list = lac_malloc(ctx, (size_t)ni * (size_t)p->k * sizeof *r->list);
    lac_status st = LAC_SUCCESS;
    uint64_t *keys = NULL;
    if (!r->list) {
        st = LAC_ERR_OUT_OF_MEMORY;
        goto done;
    }
    int64_t data_bytes = lac_mf_nbr_data_bytes(d), list_bytes = ni * p->k * 4;
    const lac_nbr_backend *be = nbr_backend(ctx);
    lac_nbr_call call;
    memset(&call, 0, sizeof call);
    call.data = d;
    call.k = p->k;
    call.shrink = p->shrink;
    call.seed = p->seed;
    call.max_bucket = LAC_MF_NBR_MAX_BUCKET;
    /* simLSH whole on the backend where it offers that, the sums and keys
     * too where they are kept */
    int served = 0;
    if (p->method == LAC_MF_NBR_SIMLSH && be->simlsh_topk) {
        call.p = p->p;
        call.bits = p->bits;
        call.psi_power = p->psi_power;
        call.tables = p->q;
        size_t code_bytes = 0, key_bytes = 0;
        if (keep_codes &&
            (lac_mul_overflows((size_t)ni, (size_t)code_columns(p) * sizeof(float), &code_bytes) ||
             lac_mul_overflows((size_t)ni, (size_t)p->q * sizeof *keys, &key_bytes))) {
            st = lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "%lld items x %lld code columns do not fit", (long long)ni,
                           (long long)code_columns(p));
            goto done;
        }
        if (keep_codes) {
            call.codes = lac_malloc(ctx, code_bytes ? code_bytes : 1);
            call.keys_out = lac_malloc(ctx, key_bytes ? key_bytes : 1);
            if (!call.codes || !call.keys_out) {
                free(call.codes);
                free(call.keys_out);
                st = LAC_ERR_OUT_OF_MEMORY;
                goto done;
            }
        }
        st = be->simlsh_topk(ctx, &call, r->list);
        served = st == LAC_SUCCESS && !call.declined;
        if (served && keep_codes) {
            r->codes = call.codes;
            r->code_cols = code_columns(p);
            r->keys = call.keys_out;
        } else {
            free(call.codes);
            free(call.keys_out);
        }
        call.codes = NULL;
        call.keys_out = NULL;
        call.tables = 0;
        if (st < 0) goto done;
        call.bytes += (int64_t)(code_bytes + key_bytes);
    }
    if (served) {
        r->bytes = data_bytes + list_bytes + call.bytes;
    } else if (p->method == LAC_MF_NBR_RANDOM) {
#pragma omp parallel for num_threads(lac_threads(ctx)) schedule(static)
        for (int64_t j = 0; j < ni; j++) lac_nbr_fill(p->seed, j, ni, p->k, r->list + j * p->k, 0);
        r->bytes = list_bytes;
    } else if (p->method == LAC_MF_NBR_GSM) {
        LAC_CHECK_GOTO(be->gsm_topk(ctx, &call, r->list), st, done);
        r->bytes = data_bytes + list_bytes + call.bytes;
    } else if (!d->item_start) {   /* the caller's triples: keys_by_blocks */
        int64_t sums_peak = 0;
        lac_nbr_index ix;
        memset(&ix, 0, sizeof ix);
        keys = lac_malloc(ctx, (size_t)ni * (size_t)p->q * sizeof *keys);
        if (!keys) {
            st = LAC_ERR_OUT_OF_MEMORY;
            goto done;
        }
        LAC_CHECK_GOTO(keys_by_blocks(ctx, p, d, keys, &sums_peak), st, done);
        LAC_CHECK_GOTO(lac_nbr_index_init(ctx, &ix, p->q, ni), st, done);
        st = lac_nbr_index_add_keys(ctx, &ix, keys, p->q, ni, call.max_bucket, lac_threads(ctx));
        int64_t sort_bytes = (int64_t)lac_threads(ctx) * ni * 20;
        free(keys);
        keys = NULL;
        call.tables = p->q;
        call.index = &ix;
        if (st == LAC_SUCCESS) st = be->bucket_topk(ctx, &call, r->list);
        int64_t held = lac_nbr_index_bytes(&ix);
        lac_nbr_index_free(&ix);
        if (st < 0) goto done;
        /* the keys with the sums' scratch, then with the index as it is
         * built, then the index with the counting's scratch */
        int64_t with_keys = ni * p->q * 8 + (sums_peak > held + sort_bytes ? sums_peak : held + sort_bytes);
        int64_t counting = call.bytes;
        r->bytes = list_bytes + (with_keys > counting ? with_keys : counting);
    } else {
        /* Kept codes are all summed at once; otherwise a group of tables at a
         * time (codes of at most CODES_GROUP_BYTES), keyed, and dropped. */
        int64_t cols = code_columns(p), per_table = cols / p->q, map_peak = 0;
        int64_t group = keep_codes ? p->q : (int64_t)(CODES_GROUP_BYTES / (4.0 * (double)(ni ? ni : 1) * per_table));
        group = group < 1 ? 1 : group > p->q ? p->q : group;
        size_t cells;
        if (lac_mul_overflows((size_t)ni, (size_t)(group * per_table) * sizeof(float), &cells)) {
            st = lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "%lld items x %lld code columns do not fit", (long long)ni,
                           (long long)cols);
            goto done;
        }
        /* Kept keys are all held; otherwise a group's keys go into the
         * bucket index (lac_nbr_index) and are dropped. */
        int64_t key_tables = keep_codes ? p->q : group;
        float *codes = lac_malloc(ctx, cells ? cells : 1);
        keys = lac_malloc(ctx, (size_t)ni * (size_t)key_tables * sizeof *keys);
        lac_nbr_index ix;
        memset(&ix, 0, sizeof ix);
        if (!codes || !keys || (!keep_codes && lac_nbr_index_init(ctx, &ix, p->q, ni) != LAC_SUCCESS)) {
            free(codes);
            st = LAC_ERR_OUT_OF_MEMORY;
            goto done;
        }
        int64_t index_peak = 0;
        for (int64_t t0 = 0; t0 < p->q && st == LAC_SUCCESS; t0 += group) {
            int64_t t1 = t0 + group < p->q ? t0 + group : p->q, kt0 = keep_codes ? t0 : 0;
            st = code_sums(ctx, p, d, codes, t0 * per_table, t1 * per_table, &map_peak);
            if (st == LAC_SUCCESS) bucket_keys(p, ni, codes, (t1 - t0) * per_table, kt0, kt0 + t1 - t0, keys);
            if (st == LAC_SUCCESS && !keep_codes) {
                st = lac_nbr_index_add_keys(ctx, &ix, keys, t1 - t0, ni, call.max_bucket, lac_threads(ctx));
                int64_t sort_bytes = (int64_t)lac_threads(ctx) * ni * 20;
                index_peak = sort_bytes > index_peak ? sort_bytes : index_peak;
            }
        }
        if (keep_codes) {
            r->codes = codes;
            r->code_cols = cols;
        } else {
            free(codes);
        }
        if (st < 0) {
            lac_nbr_index_free(&ix);
            goto done;
        }
        call.tables = p->q;
        call.keys = keep_codes ? keys : NULL;
        call.index = keep_codes ? NULL : &ix;
        st = be->bucket_topk(ctx, &call, r->list);
        int64_t held = keep_codes ? 0 : lac_nbr_index_bytes(&ix);
        lac_nbr_index_free(&ix);
        if (st < 0) goto done;
        /* at the peak: the codes and keys of a group, the index as it grows
         * (or all the keys), and the sums' or the counting's scratch */
        int64_t fixed = data_bytes + list_bytes + (int64_t)cells + ni * key_tables * 8 + held;
        int64_t work = map_peak > index_peak ? map_peak : index_peak;
        r->bytes = fixed + (work > call.bytes - held ? work : call.bytes - held);
        if (keep_codes) {   /* with the sums, for online updates */
            r->keys = keys;
            keys = NULL;
        }
    }
    r->seconds = omp_get_wtime() - t0;
done:
    free(keys);
    if (st < 0) {
        lac_mf_nbr_destroy(&r);
        return st;
    }
    *out = r;
    return LAC_SUCCESS;
}

lac_status lac_mf_nbr_search_rows(lac_ctx_t ctx, const lac_mf_nbr_params *p, const uint64_t *keys, int64_t ni,
                                  const int32_t *rows, int64_t num_rows, int32_t *out)
{
    lac_nbr_data d;
    memset(&d, 0, sizeof d);
    d.num_items = ni;
    lac_nbr_call call;
    memset(&call, 0, sizeof call);
    call.data = &d;
    call.k = p->k;
    call.seed = p->seed;
    call.max_bucket = LAC_MF_NBR_MAX_BUCKET;
    call.tables = p->q;
    call.keys = keys;
    call.rows = rows;
    call.num_rows = num_rows;
    return nbr_backend(ctx)->bucket_topk(ctx, &call, out);
}

int64_t lac_mf_nbr_code_columns(const lac_mf_nbr_params *p)
{
    return p->method == LAC_MF_NBR_GSM || p->method == LAC_MF_NBR_RANDOM ? 0 : code_columns(p);
}

lac_status lac_mf_neighbours(lac_ctx_t ctx, const lac_mf_nbr_params *params, lac_ratings_t ratings, lac_mf_nbr_t *out)
{
    LAC_ARG_NOT_NULL(ctx, ctx);
    LAC_ARG_NOT_NULL(ctx, params);
    LAC_ARG_NOT_NULL(ctx, ratings);
    LAC_ARG_NOT_NULL(ctx, out);
    LAC_ADOPT_PARAMS(ctx, "mf neighbours", lac_mf_nbr_params, params, nbr_defaults());
    const char *why = lac_mf_nbr_params_check(params);
    if (why) return lac_error(ctx, LAC_ERR_ARGUMENT, "neighbour parameters: %s", why);
    if (ratings->count == 0) return lac_error(ctx, LAC_ERR_VALUE, "the ratings are empty");
    double t0 = omp_get_wtime();
    lac_nbr_data d;
    memset(&d, 0, sizeof d);
    lac_mf_nbr_t r = NULL;
    lac_status st = LAC_SUCCESS;
    /* simLSH keys a block of items at a time from the caller's triples
     * (keys_by_blocks, or a backend's simlsh_topk in chunks; the other
     * methods' sources cost too much to make again for every block),
     * random needs none: no layout then */
    int direct = params->method == LAC_MF_NBR_RANDOM || is_sign_method(params);
    if (direct) {
        d.num_users = ratings->users.count;
        d.num_items = ratings->items.count;
        d.nnz = ratings->count;
        d.tri_user = ratings->user;
        d.tri_item = ratings->item;
        d.tri_val = ratings->value;
    } else {
        st = nbr_layout(ctx, ratings->count, ratings->user, ratings->item, ratings->value, ratings->users.count,
                        ratings->items.count, params->method == LAC_MF_NBR_GSM, &d);
        if (st < 0) return st;
        lac_log(ctx, LAC_LOG_INFO, "mf neighbours: the ratings laid out in %.3f s", omp_get_wtime() - t0);
    }
    LAC_CHECK_GOTO(lac_mf_nbr_search(ctx, params, &d, 0, &r), st, done);
    LAC_CHECK_GOTO(lac_idmap_copy(ctx, &ratings->items, &r->items), st, done);
    r->seconds = omp_get_wtime() - t0;
    *out = r;
    r = NULL;
done:
    lac_mf_nbr_destroy(&r);
    lac_mf_nbr_data_free(&d);
    return st;
}

void lac_mf_nbr_destroy(lac_mf_nbr_t *nbr)
{
    if (!nbr || !*nbr) return;
    free((*nbr)->list);
    free((*nbr)->codes);
    free((*nbr)->keys);
    lac_idmap_free(&(*nbr)->items);
    free(*nbr);
    *nbr = NULL;
}

int64_t lac_mf_nbr_num_items(lac_mf_nbr_t n) { return n ? n->num_items : 0; }
int lac_mf_nbr_k(lac_mf_nbr_t n) { return n ? n->k : 0; }
double lac_mf_nbr_seconds(lac_mf_nbr_t n) { return n ? n->seconds : NAN; }
int64_t lac_mf_nbr_bytes(lac_mf_nbr_t n) { return n ? n->bytes : 0; }
const char *lac_mf_nbr_item_id(lac_mf_nbr_t n, int64_t j) { return n ? lac_idmap_name(&n->items, j) : NULL; }

lac_status lac_mf_nbr_get(lac_mf_nbr_t n, int32_t *out)
{
    LAC_ARG_NOT_NULL(NULL, n);
    LAC_ARG_NOT_NULL(NULL, out);
    memcpy(out, n->list, (size_t)n->num_items * (size_t)n->k * sizeof *out);
    return LAC_SUCCESS;
}

lac_status lac_mf_nbr_recall(lac_ctx_t ctx, lac_mf_nbr_t n, lac_mf_nbr_t exact, double *recall)
{
    LAC_ARG_NOT_NULL(ctx, n);
    LAC_ARG_NOT_NULL(ctx, exact);
    LAC_ARG_NOT_NULL(ctx, recall);
    if (n->num_items != exact->num_items || n->k != exact->k)
        return lac_error(ctx, LAC_ERR_SHAPE, "recall of %lld items x K = %d against %lld x K = %d: they must agree",
                         (long long)n->num_items, n->k, (long long)exact->num_items, exact->k);
    int64_t hits = 0;
    int k = n->k;
    for (int64_t j = 0; j < n->num_items; j++) {
        const int32_t *a = n->list + j * k, *b = exact->list + j * k;
        for (int x = 0; x < k; x++)
            for (int y = 0; y < k; y++)
                if (a[x] == b[y]) {
                    hits++;
                    break;
                }
    }
    *recall = n->num_items ? (double)hits / ((double)n->num_items * k) : NAN;
    return LAC_SUCCESS;
}

lac_status lac_mf_nbr_write(lac_ctx_t ctx, const char *path, lac_mf_nbr_t n)
{
    LAC_ARG_NOT_NULL(ctx, path);
    LAC_ARG_NOT_NULL(ctx, n);
    lac_atomic_file af;
    LAC_CHECK(lac_atomic_open(ctx, path, &af));
    int ok = 1;
    for (int64_t j = 0; ok && j < n->num_items; j++) {
        ok = fputs(lac_idmap_name(&n->items, j), af.fp) >= 0;
        for (int x = 0; ok && x < n->k; x++)
            ok = fprintf(af.fp, " %s", lac_idmap_name(&n->items, n->list[j * n->k + x])) > 0;
        ok = ok && fputc('\n', af.fp) != EOF;
    }
    if (!ok) {
        lac_atomic_abort(&af);
        return lac_error(ctx, LAC_ERR_IO, "writing the neighbours to %s failed: %s", path, strerror(errno));
    }
    return lac_atomic_commit(ctx, &af);
}
