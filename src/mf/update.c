/* mf online updates (lac_mf_update, the paper's Algorithm 4): new ratings
 * folded into a trained model. The id maps and arrays grow, each
 * user's training items take the new ones, the neighbourhood model's LSH
 * sums take the new ratings and new items get S^K(j) among all items; then
 * the new rows are solved in closed form with the rest fixed (the backend's
 * fold_in) and a few SGD epochs run over the touched rows (the backend's
 * epochs). The model is grown in place (lac_mf_update: in a copy), so that
 * the cost follows the update's size: only the changed items' sums are
 * added to and keyed again, and no array of the model is copied whole. The
 * plain model's solves and sweeps run on a sub-model of the touched rows
 * alone (the users and items of the new ratings, in the new ratings' own
 * indices), so that nothing the update does not change is scaled, indexed or
 * scheduled. */
#include "mf/mf_internal.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#define FOLD_MAX_DIM 512   /* an item's w_j, c_j are solved with v_j up to this size of system */
/* New ratings a thread: a small update runs on fewer threads, whose parallel
 * regions would cost more than they save (measured: 9,755 new ratings of a
 * plain model, 4.7 ms on one thread and 53 ms on two of a loaded 2-core host). */
#define UPDATE_RATINGS_PER_THREAD 20000
#define UPDATE_NBR_RATINGS_PER_THREAD 2000

static lac_mf_update_params update_defaults(void)
{
    lac_mf_update_params p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    p.rounds = 2;
    p.sweeps = 2;
    return p;
}

LAC_PARAMS_INIT(lac_mf_update_params, update_defaults())

const char *lac_mf_update_params_check(const lac_mf_update_params *given)
{
    LAC_PARAMS_CHECK_BEGIN(lac_mf_update_params, given, update_defaults());
    if (p->rounds < 1 || p->rounds > 100) return "rounds must be in [1, 100]";
    if (p->sweeps < 0 || p->sweeps > 1000) return "sweeps must be in [0, 1000]";
    return NULL;
}

/* Dense indices of from's ids in the updated model: the model's, or the
 * next new index in order of first appearance (*added counts them). */
static int32_t *extend_map(lac_ctx_t ctx, const lac_idmap *from, const lac_idmap *model, int64_t *added)
{
    int32_t *t = lac_malloc(ctx, (size_t)(from->count ? from->count : 1) * sizeof *t);
    if (!t) return NULL;
    *added = 0;
    for (int64_t i = 0; i < from->count; i++) {
        const char *name = lac_idmap_name(from, i);
        int64_t at = lac_idmap_find(model, name, strlen(name));
        t[i] = (int32_t)(at >= 0 ? at : model->count + (*added)++);
    }
    return t;
}

static lac_status add_ids(lac_ctx_t ctx, const lac_idmap *from, const int32_t *index, lac_idmap *to)
{
    for (int64_t i = 0; i < from->count; i++) {
        if (index[i] < to->count) continue;
        const char *name = lac_idmap_name(from, i);
        int32_t got;
        LAC_CHECK(lac_idmap_intern(ctx, to, name, strlen(name), &got));
        if (got != index[i]) return lac_error(ctx, LAC_ERR_INTERNAL, "mf update: id '%s' got index %d, not %d", name, got, index[i]);
    }
    return LAC_SUCCESS;
}

/* The model's training ratings before the update (an in-place update
 * replaces them with the merged ones). */
typedef struct {
    int64_t num_users, num_items;
    int64_t *rated_start;
    int32_t *rated_items;
    float *rated_vals;
} before;

/* The training rating of user u for item j before the update, NaN when
 * none (or the model keeps no ratings). */
static float old_rating(const before *m, int64_t u, int32_t j)
{
    if (u >= m->num_users || !m->rated_vals) return NAN;
    const int32_t *items = m->rated_items + m->rated_start[u];
    int64_t lo = 0, len = m->rated_start[u + 1] - m->rated_start[u], hi = len;
    while (lo < hi) {
        int64_t mid = (lo + hi) / 2;
        if (items[mid] < j) lo = mid + 1;
        else hi = mid;
    }
    return lo < len && items[lo] == j ? m->rated_vals[m->rated_start[u] + lo] : NAN;
}

typedef struct {
    int32_t item;
    float val;
} rated_pair;

static int by_item(const void *a, const void *b)
{
    int32_t x = ((const rated_pair *)a)->item, y = ((const rated_pair *)b)->item;
    return (x > y) - (x < y);
}

static int by_value(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Each user's training items (and ratings) merged with the new ones: the
 * new ratings' user-major rows nb, row x of model user tu[x] and items
 * ti[] (NULL: nb is in the model's indices). The new rating wins a pair both
 * have. The users the new ratings leave alone are copied in runs, so the
 * work follows the new ratings (and one pass of adds over the offsets). */
static lac_status merge_rated(lac_ctx_t ctx, const before *old, lac_mf_model_t m, const lac_nbr_data *nb,
                              const int32_t *tu, const int32_t *ti, int64_t *replaced)
{
    int64_t nu = old->num_users, rows = nb->num_users, touched = 0, grow = 0;
    *replaced = 0;
    int64_t *order = lac_malloc(ctx, (size_t)(rows ? rows : 1) * sizeof *order);   /* model user << 32 | row */
    if (!order) return LAC_ERR_OUT_OF_MEMORY;
    for (int64_t x = 0; x < rows; x++) {
        int64_t len = nb->user_start[x + 1] - nb->user_start[x];
        if (!len) continue;
        order[touched++] = (int64_t)(tu ? tu[x] : x) << 32 | x;
    }
    if (tu) qsort(order, (size_t)touched, sizeof *order, by_value);
    int64_t *at = lac_malloc(ctx, (size_t)(touched ? touched : 1) * sizeof *at);   /* each touched user's row in `fresh` */
    rated_pair *fresh = NULL;
    lac_status st = at ? LAC_SUCCESS : LAC_ERR_OUT_OF_MEMORY;
    if (st == LAC_SUCCESS && (fresh = lac_malloc(ctx, (size_t)(nb->nnz ? nb->nnz : 1) * sizeof *fresh)) == NULL)
        st = LAC_ERR_OUT_OF_MEMORY;
    /* the new rows in model item order, and the merged sizes */
    for (int64_t t = 0, w = 0; st == LAC_SUCCESS && t < touched; t++) {
        int64_t u = order[t] >> 32, x = order[t] & 0xffffffff, b = nb->user_start[x], be = nb->user_start[x + 1];
        at[t] = w;
        for (int64_t y = b; y < be; y++) fresh[w + y - b] = (rated_pair){ti ? ti[nb->user_item[y]] : nb->user_item[y], nb->user_val[y]};
        if (ti) qsort(fresh + w, (size_t)(be - b), sizeof *fresh, by_item);
        int64_t a = u < nu ? old->rated_start[u] : 0, ae = u < nu ? old->rated_start[u + 1] : 0, c = w, ce = w + be - b;
        int64_t both = 0;
        while (a < ae && c < ce) {
            int32_t p = old->rated_items[a], q = fresh[c].item;
            both += p == q;
            a += p <= q;
            c += q <= p;
        }
        *replaced += both;
        grow += be - b - both;
        w = ce;
    }
    int64_t total = old->rated_start[nu] + grow;
    if (st == LAC_SUCCESS) {
        m->rated_items = lac_malloc(ctx, (size_t)(total ? total : 1) * sizeof *m->rated_items);
        if (old->rated_vals) m->rated_vals = lac_malloc(ctx, (size_t)(total ? total : 1) * sizeof *m->rated_vals);
        if (!m->rated_items || (old->rated_vals && !m->rated_vals)) st = LAC_ERR_OUT_OF_MEMORY;
    }
    /* runs of untouched users copied whole, their offsets moved by what the touched ones before them grew */
    int64_t from = 0, shift = 0, w = 0;
    for (int64_t t = 0; st == LAC_SUCCESS && t <= touched; t++) {
        int64_t u = t < touched ? order[t] >> 32 : m->num_users, stop = u < nu ? u : nu;
        if (stop > from) {
            int64_t a = old->rated_start[from], n = old->rated_start[stop] - a;
            memcpy(m->rated_items + w, old->rated_items + a, (size_t)n * sizeof *m->rated_items);
            if (m->rated_vals) memcpy(m->rated_vals + w, old->rated_vals + a, (size_t)n * sizeof *m->rated_vals);
            for (int64_t v = from; v < stop; v++) m->rated_start[v + 1] = old->rated_start[v + 1] + shift;
            w += n;
        }
        for (int64_t v = stop > from ? stop : from; v < u; v++) m->rated_start[v + 1] = w;   /* new users without ratings */
        if (t == touched) break;
        int64_t x = order[t] & 0xffffffff, len = nb->user_start[x + 1] - nb->user_start[x];
        int64_t a = u < nu ? old->rated_start[u] : 0, ae = u < nu ? old->rated_start[u + 1] : 0, c = at[t], ce = c + len;
        int64_t w0 = w;
        while (a < ae || c < ce) {
            int32_t p = a < ae ? old->rated_items[a] : INT32_MAX, q = c < ce ? fresh[c].item : INT32_MAX;
            int from_new = q <= p;
            m->rated_items[w] = from_new ? q : p;
            if (m->rated_vals) m->rated_vals[w] = from_new ? fresh[c].val : old->rated_vals[a];
            w++;
            a += p <= q;
            c += q <= p;
        }
        m->rated_start[u + 1] = w;
        shift += (w - w0) - (ae - (u < nu ? old->rated_start[u] : 0));
        from = u + 1;
    }
    free(order);
    free(at);
    free(fresh);
    return st;
}

/* The model's training ratings (merged) of the users flagged in `users` (all
 * with NULL) as grouped data. */
static lac_status rated_data(lac_ctx_t ctx, lac_mf_model_t m, const unsigned char *users, lac_mf_data *out)
{
    int64_t n = 0;
    for (int64_t u = 0; u < m->num_users; u++)
        if (!users || users[u]) n += m->rated_start[u + 1] - m->rated_start[u];
    struct lac_ratings r;
    memset(&r, 0, sizeof r);
    r.user = lac_malloc(ctx, (size_t)(n ? n : 1) * sizeof *r.user);
    r.item = lac_malloc(ctx, (size_t)(n ? n : 1) * sizeof *r.item);
    r.value = lac_malloc(ctx, (size_t)(n ? n : 1) * sizeof *r.value);
    lac_status st = r.user && r.item && r.value ? LAC_SUCCESS : LAC_ERR_OUT_OF_MEMORY;
    for (int64_t u = 0; st == LAC_SUCCESS && u < m->num_users; u++) {
        if (users && !users[u]) continue;
        for (int64_t a = m->rated_start[u]; a < m->rated_start[u + 1]; a++) {
            r.user[r.count] = (int32_t)u;
            r.item[r.count] = m->rated_items[a];
            r.value[r.count++] = m->rated_vals[a];
        }
    }
    r.users.count = m->num_users;
    r.items.count = m->num_items;
    if (st == LAC_SUCCESS) st = lac_mf_data_build(ctx, &r, out);
    free(r.user);
    free(r.item);
    free(r.value);
    return st;
}

/* The neighbourhood model's item side (the model grown in place): known
 * items keep S^K, W and C; the LSH sums take the new ratings (nb
 * item-major), the bucket keys of the items whose sums changed are keyed
 * again; new items get S^K(j) among all items. */
static lac_status update_neighbours(lac_ctx_t ctx, const before *old, lac_mf_model_t m, const lac_nbr_data *nb)
{
    const lac_mf_nbr_params *np = &m->params.neighbours;
    int K = m->nbr_k;
    int64_t ni = old->num_items, ni2 = m->num_items, added = ni2 - ni;
    int64_t cols = m->codes ? m->code_cols : 0;
    if (cols && cols != lac_mf_nbr_code_columns(np))
        return lac_error(ctx, LAC_ERR_FORMAT, "the model's LSH sums have %lld columns where its parameters make %lld",
                         (long long)cols, (long long)lac_mf_nbr_code_columns(np));
    if (cols) {
        int minhash = np->method == LAC_MF_NBR_MINHASH, centred = np->method == LAC_MF_NBR_SIMLSH_CENTRED;
        double *mean = centred ? lac_calloc(ctx, (size_t)ni2 + 1, sizeof *mean) : NULL;
        int64_t *count = centred ? lac_calloc(ctx, (size_t)ni2 + 1, sizeof *count) : NULL;
        if (centred && (!mean || !count)) {
            free(mean);
            free(count);
            return LAC_ERR_OUT_OF_MEMORY;
        }
        for (size_t x = (size_t)ni * (size_t)cols; x < (size_t)ni2 * (size_t)cols; x++) m->codes[x] = minhash ? INFINITY : 0.0f;
        if (centred) {   /* each item's mean over all its ratings, merged */
            for (int64_t a = 0; a < m->rated_start[m->num_users]; a++) {
                mean[m->rated_items[a]] += m->rated_vals[a];
                count[m->rated_items[a]]++;
            }
            for (int64_t j = 0; j < ni2; j++) mean[j] = count[j] ? mean[j] / (double)count[j] : 0.0;
        }
#pragma omp parallel for num_threads(lac_threads(ctx)) schedule(dynamic, 4)
        for (int64_t j = 0; j < ni2; j++) {
            if (nb->item_start[j + 1] == nb->item_start[j]) continue;
            float *row = m->codes + j * cols;
            double mj = centred ? mean[j] : 0.0;
            for (int64_t a = nb->item_start[j]; a < nb->item_start[j + 1]; a++) {
                int32_t u = nb->item_user[a];
                float prev = j < ni ? old_rating(old, u, (int32_t)j) : NAN;
                if (prev == prev && !minhash) lac_mf_nbr_codes_add(np, row, cols, u, -lac_mf_nbr_weight(np, prev, mj));
                lac_mf_nbr_codes_add(np, row, cols, u, lac_mf_nbr_weight(np, nb->item_val[a], mj));
            }
        }
        free(mean);
        free(count);
    }
    lac_status st = LAC_SUCCESS;
    if (cols) {   /* the bucket keys: those of the items whose sums changed keyed again (all when none kept) */
        int64_t touched = 0, all = !m->keys;
        if (all) m->keys = lac_malloc(ctx, (size_t)ni2 * (size_t)np->q * sizeof *m->keys + 8);
        int32_t *rows = lac_malloc(ctx, (size_t)(ni2 ? ni2 : 1) * sizeof *rows);
        if (!m->keys || !rows) {
            free(rows);
            return LAC_ERR_OUT_OF_MEMORY;
        }
        for (int64_t j = 0; j < ni2; j++)
            if (all || j >= ni || nb->item_start[j + 1] > nb->item_start[j]) rows[touched++] = (int32_t)j;
        lac_mf_nbr_keys(np, m->codes, ni2, rows, touched, m->keys);
        for (int64_t x = 0; x < added; x++) rows[x] = (int32_t)(ni + x);
        if (added) st = lac_mf_nbr_search_rows(ctx, np, m->keys, ni2, rows, added, m->nbr + ni * K);
        free(rows);
        return st;
    }
    if (!added) return LAC_SUCCESS;
    /* No sums kept (GSM, random, or a file without them): the search on the
     * merged ratings, its lists of the new items taken (and its sums kept). */
    lac_mf_data all;
    lac_nbr_data d;
    lac_mf_nbr_t found = NULL;
    memset(&d, 0, sizeof d);
    LAC_CHECK(rated_data(ctx, m, NULL, &all));
    st = lac_mf_nbr_data_build(ctx, &all, 1, &d);
    lac_mf_data_free(&all);
    if (st == LAC_SUCCESS) st = lac_mf_nbr_search(ctx, np, &d, 1, &found);
    if (st == LAC_SUCCESS) {
        memcpy(m->nbr + ni * K, found->list + ni * K, (size_t)added * K * sizeof *m->nbr);
        m->codes = found->codes;
        m->code_cols = found->codes ? found->code_cols : 0;
        m->keys = found->keys;
        found->codes = NULL;
        found->keys = NULL;
    }
    lac_mf_nbr_destroy(&found);
    lac_mf_nbr_data_free(&d);
    return st;
}

/* The closed-form solves of f's rows: user_rows, then item_rows, `rounds`
 * times; in the first round a user's ratings of the items flagged in
 * unsolved (new, not solved yet) are left out. The users are solved from
 * f's training rows (by_rated: the neighbourhood model keeps them) or from
 * the new ratings nb, the items from nb. */
static lac_status fold_in(lac_ctx_t ctx, const lac_mf_model_t m, const lac_mf_factors *f, const lac_nbr_data *nb,
                          int by_rated, const int32_t *user_rows, int64_t num_user_rows, const int32_t *item_rows,
                          int64_t num_item_rows, const unsigned char *unsolved, int rounds)
{
    const lac_mf_backend *be = &lac_mf_cpu_backend;
    lac_mf_fold_call c;
    memset(&c, 0, sizeof c);
    c.factors = *f;
    c.user_start = by_rated ? f->rated_start : nb->user_start;
    c.user_item = by_rated ? f->rated_items : nb->user_item;
    c.user_val = by_rated ? f->rated_vals : nb->user_val;
    c.item_start = nb->item_start;
    c.item_user = nb->item_user;
    c.item_val = nb->item_val;
    c.lambda = m->params.lambda;
    c.lambda_bias = m->params.lambda_bias;
    c.use_bias = m->params.use_bias;
    c.lambdas = m->params.lambdas;
    c.max_dim = FOLD_MAX_DIM;
    lac_status st = LAC_SUCCESS;
    for (int r = 0; r < rounds && st == LAC_SUCCESS; r++) {
        c.items = 0;
        c.rows = user_rows;
        c.num_rows = num_user_rows;
        c.skip = r == 0 ? unsolved : NULL;
        if (num_user_rows) st = be->fold_in(ctx, &c);
        c.items = 1;
        c.rows = item_rows;
        c.num_rows = num_item_rows;
        c.skip = NULL;
        if (st == LAC_SUCCESS && num_item_rows) st = be->fold_in(ctx, &c);
    }
    return st;
}

/* The neighbourhood model's solves (in the model's indices): every touched
 * user from its whole training row, then the new items. */
static lac_status fold_in_nbr(lac_ctx_t ctx, const before *old, lac_mf_model_t m, const lac_nbr_data *nb, int rounds)
{
    int64_t ni = old->num_items, new_items = m->num_items - ni, t = 0;
    for (int64_t u = 0; u < m->num_users; u++) t += nb->user_start[u + 1] > nb->user_start[u];
    int32_t *user_rows = lac_malloc(ctx, (size_t)(t ? t : 1) * sizeof *user_rows);
    int32_t *item_rows = lac_malloc(ctx, (size_t)(new_items ? new_items : 1) * sizeof *item_rows);
    unsigned char *unsolved = lac_calloc(ctx, (size_t)m->num_items + 1, 1);
    lac_status st = user_rows && item_rows && unsolved ? LAC_SUCCESS : LAC_ERR_OUT_OF_MEMORY;
    if (st == LAC_SUCCESS) {
        t = 0;
        for (int64_t u = 0; u < m->num_users; u++)
            if (nb->user_start[u + 1] > nb->user_start[u]) user_rows[t++] = (int32_t)u;
        for (int64_t x = 0; x < new_items; x++) item_rows[x] = (int32_t)(ni + x), unsolved[ni + x] = 1;
        lac_mf_factors f = lac_mf_model_factors(m);
        st = fold_in(ctx, m, &f, nb, 1, user_rows, t, item_rows, new_items, unsolved, rounds);
    }
    free(user_rows);
    free(item_rows);
    free(unsolved);
    return st;
}

/* SGD epochs of f over d: the new ratings (the plain model's sub-model; it
 * keeps no old ratings) or the touched users' whole training rows
 * (neighbourhood: R(i) is part of every prediction). */
static lac_status sweep(lac_ctx_t ctx, lac_mf_model_t m, const lac_mf_factors *f, const lac_mf_data *d, int sweeps)
{
    if (!sweeps) return LAC_SUCCESS;
    const lac_mf_backend *be = &lac_mf_cpu_backend;
    lac_mf_call call = lac_mf_model_call(m, d, NULL);
    call.factors = *f;
    lac_mf_state *state = NULL;
    lac_status st = be->begin(ctx, &call, &state);
    for (int s = 0; s < sweeps && st == LAC_SUCCESS; s++) {
        double sse = 0.0;
        st = be->epoch(ctx, state, (float)lac_mf_learning_rate(&m->params, m->epochs + s), m->epochs + s, &sse);
        if (st == LAC_SUCCESS && !isfinite(sse))
            st = lac_error(ctx, LAC_ERR_VALUE, "mf update: the SGD sweeps diverged (training RMSE %g)",
                           sqrt(sse / (double)(d->nnz ? d->nnz : 1)));
    }
    if (st == LAC_SUCCESS) st = be->download(ctx, state);
    be->end(ctx, state);
    return st;
}

/* The neighbourhood model's sweeps: over the touched users' whole rows. */
static lac_status sweep_nbr(lac_ctx_t ctx, lac_mf_model_t m, const lac_mf_data *fresh, int sweeps)
{
    if (!sweeps) return LAC_SUCCESS;
    lac_mf_data rows;
    memset(&rows, 0, sizeof rows);
    unsigned char *touched = lac_calloc(ctx, (size_t)m->num_users + 1, 1);
    if (!touched) return LAC_ERR_OUT_OF_MEMORY;
    for (int64_t u = 0; u < m->num_users; u++) touched[u] = fresh->row_start[u + 1] > fresh->row_start[u];
    lac_status st = rated_data(ctx, m, touched, &rows);
    free(touched);
    lac_mf_factors f = lac_mf_model_factors(m);
    if (st == LAC_SUCCESS) st = sweep(ctx, m, &f, &rows, sweeps);
    lac_mf_data_free(&rows);
    return st;
}

/* The plain model's sub-model: row x of its users is the model's tu[x], row
 * y of its items ti[y], in units of `unit` (the training's). */
static void *aligned_rows(lac_ctx_t ctx, int64_t rows, int stride)
{
    void *p = NULL;
    size_t bytes = (size_t)(rows ? rows : 1) * (size_t)stride * sizeof(float);
    if (posix_memalign(&p, 64, bytes) != 0) {
        lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "out of memory for the updated rows");
        return NULL;
    }
    return p;
}

static void sub_free(lac_mf_factors *f)
{
    free(f->P);
    free(f->Q);
    free(f->user_bias);
    free(f->item_bias);
}

static lac_status sub_gather(lac_ctx_t ctx, lac_mf_model_t m, const int32_t *tu, int64_t nlu, const int32_t *ti,
                             int64_t nli, double unit, lac_mf_factors *f)
{
    *f = lac_mf_model_factors(m);
    f->num_users = nlu;
    f->num_items = nli;
    f->rated_start = NULL;
    f->rated_items = NULL;
    f->rated_vals = NULL;
    f->P = aligned_rows(ctx, nlu, m->stride);
    f->Q = aligned_rows(ctx, nli, m->stride);
    f->user_bias = lac_malloc(ctx, (size_t)(nlu ? nlu : 1) * sizeof *f->user_bias);
    f->item_bias = lac_malloc(ctx, (size_t)(nli ? nli : 1) * sizeof *f->item_bias);
    if (!f->P || !f->Q || !f->user_bias || !f->item_bias) {
        sub_free(f);
        return LAC_ERR_OUT_OF_MEMORY;
    }
    const size_t row = (size_t)m->stride * sizeof(float);
    for (int64_t x = 0; x < nlu; x++) {
        memcpy(f->P + x * m->stride, m->P + (int64_t)tu[x] * m->stride, row);
        f->user_bias[x] = m->user_bias[tu[x]];
    }
    for (int64_t y = 0; y < nli; y++) {
        memcpy(f->Q + y * m->stride, m->Q + (int64_t)ti[y] * m->stride, row);
        f->item_bias[y] = m->item_bias[ti[y]];
    }
    if (unit != 1.0) {
        lac_mf_scale_floats(f->P, nlu * m->stride, sqrt(1.0 / unit));
        lac_mf_scale_floats(f->Q, nli * m->stride, sqrt(1.0 / unit));
        lac_mf_scale_floats(f->user_bias, nlu, 1.0 / unit);
        lac_mf_scale_floats(f->item_bias, nli, 1.0 / unit);
        f->mean = m->mean / unit;
        f->rating_min = (float)(m->rating_min / unit);
        f->rating_max = (float)(m->rating_max / unit);
    }
    return LAC_SUCCESS;
}

static void sub_scatter(lac_mf_model_t m, const int32_t *tu, const int32_t *ti, lac_mf_factors *f, double unit)
{
    if (unit != 1.0) {
        lac_mf_scale_floats(f->P, f->num_users * m->stride, sqrt(unit));
        lac_mf_scale_floats(f->Q, f->num_items * m->stride, sqrt(unit));
        lac_mf_scale_floats(f->user_bias, f->num_users, unit);
        lac_mf_scale_floats(f->item_bias, f->num_items, unit);
    }
    const size_t row = (size_t)m->stride * sizeof(float);
    for (int64_t x = 0; x < f->num_users; x++) {
        memcpy(m->P + (int64_t)tu[x] * m->stride, f->P + x * m->stride, row);
        m->user_bias[tu[x]] = f->user_bias[x];
    }
    for (int64_t y = 0; y < f->num_items; y++) {
        memcpy(m->Q + (int64_t)ti[y] * m->stride, f->Q + y * m->stride, row);
        m->item_bias[ti[y]] = f->item_bias[y];
    }
}

/* The plain model's solves and sweeps on the sub-model of the new ratings'
 * rows (fresh and nb in the new ratings' indices, values as given). */
static lac_status update_plain(lac_ctx_t ctx, const lac_mf_update_params *params, const before *old, lac_mf_model_t m,
                               const int32_t *tu, const int32_t *ti, lac_mf_data *fresh, lac_nbr_data *nb)
{
    int64_t nlu = nb->num_users, nli = nb->num_items, nu = 0, ni = 0;
    double unit = lac_mf_rating_unit(m->rating_min, m->rating_max);
    lac_mf_factors f;
    LAC_CHECK(sub_gather(ctx, m, tu, nlu, ti, nli, unit, &f));
    int32_t *user_rows = lac_malloc(ctx, (size_t)(nlu ? nlu : 1) * sizeof *user_rows);
    int32_t *item_rows = lac_malloc(ctx, (size_t)(nli ? nli : 1) * sizeof *item_rows);
    unsigned char *unsolved = lac_calloc(ctx, (size_t)nli + 1, 1);
    lac_status st = user_rows && item_rows && unsolved ? LAC_SUCCESS : LAC_ERR_OUT_OF_MEMORY;
    if (st == LAC_SUCCESS) {
        for (int64_t x = 0; x < nlu; x++)
            if (tu[x] >= old->num_users) user_rows[nu++] = (int32_t)x;
        for (int64_t y = 0; y < nli; y++)
            if (ti[y] >= old->num_items) item_rows[ni++] = (int32_t)y, unsolved[y] = 1;
        if (unit != 1.0) {
            lac_mf_scale_floats(fresh->val, fresh->nnz, 1.0 / unit);
            lac_mf_scale_floats(nb->user_val, nb->nnz, 1.0 / unit);
            lac_mf_scale_floats(nb->item_val, nb->nnz, 1.0 / unit);
        }
        st = fold_in(ctx, m, &f, nb, 0, user_rows, nu, item_rows, ni, unsolved, params->rounds);
    }
    if (st == LAC_SUCCESS) st = sweep(ctx, m, &f, fresh, params->sweeps);
    if (st == LAC_SUCCESS) sub_scatter(m, tu, ti, &f, unit);
    sub_free(&f);
    free(user_rows);
    free(item_rows);
    free(unsolved);
    return st;
}

/* RMSE of m on the new ratings, their ids mapped by tu and ti (rows from
 * known_users and items from known_items on unknown to m: before the update). */
static lac_status rmse_on(lac_ctx_t ctx, lac_mf_model_t m, lac_ratings_t r, const int32_t *tu, const int32_t *ti,
                          int64_t known_users, int64_t known_items, double *rmse)
{
    lac_mf_eval e;
    memset(&e, 0, sizeof e);
    size_t n = (size_t)(r->count ? r->count : 1);
    e.count = r->count;
    e.user = lac_malloc(ctx, n * sizeof *e.user);
    e.item = lac_malloc(ctx, n * sizeof *e.item);
    lac_status st = e.user && e.item ? LAC_SUCCESS : LAC_ERR_OUT_OF_MEMORY;
    for (int64_t i = 0; st == LAC_SUCCESS && i < r->count; i++) {
        int32_t u = tu[r->user[i]], j = ti[r->item[i]];
        e.user[i] = u < known_users ? u : -1;
        e.item[i] = j < known_items ? j : -1;
        e.unknown += e.user[i] < 0 || e.item[i] < 0;
    }
    e.val = r->value;
    if (st == LAC_SUCCESS) st = lac_mf_eval_host(ctx, m, &e, NULL, rmse, NULL);
    free(e.user);
    free(e.item);
    return st;
}

/* The update of m itself (its arguments checked). On failure after it
 * started changing m, m is marked broken. */
static lac_status update_model(lac_ctx_t ctx, const lac_mf_update_params *params, lac_mf_model_t m,
                               lac_ratings_t ratings, lac_mf_update_report *report)
{
    lac_mf_update_report rep;
    memset(&rep, 0, sizeof rep);
    double t0 = omp_get_wtime();
    int threads = ctx->threads;   /* restored at the end */
    int64_t per = m->nbr_k ? UPDATE_NBR_RATINGS_PER_THREAD : UPDATE_RATINGS_PER_THREAD;
    if (ratings->count / per + 1 < ctx->threads) ctx->threads = (int)(ratings->count / per + 1);
    lac_mf_data fresh;
    lac_nbr_data nb;
    memset(&fresh, 0, sizeof fresh);
    memset(&nb, 0, sizeof nb);
    struct lac_ratings mapped;
    memset(&mapped, 0, sizeof mapped);
    before old = {m->num_users, m->num_items, m->rated_start, m->rated_items, m->rated_vals};
    int started = 0;
    lac_status st = LAC_SUCCESS;
    int32_t *tu = extend_map(ctx, &ratings->users, &m->users, &rep.new_users);
    int32_t *ti = extend_map(ctx, &ratings->items, &m->items, &rep.new_items);
    if (!tu || !ti) {
        st = LAC_ERR_OUT_OF_MEMORY;
        goto done;
    }
    int64_t nu = m->num_users, ni = m->num_items, nu2 = nu + rep.new_users, ni2 = ni + rep.new_items;
    double unit = lac_mf_rating_unit(m->rating_min, m->rating_max);   /* the training's */
    if (nu2 > INT32_MAX || ni2 > INT32_MAX) {
        st = lac_error(ctx, LAC_ERR_RANGE, "mf update: more than 2^31 - 1 users or items");
        goto done;
    }
    /* the RMSE before (not timed): the new users and items unknown */
    double tb = omp_get_wtime();
    LAC_CHECK_GOTO(rmse_on(ctx, m, ratings, tu, ti, nu, ni, &rep.rmse_before), st, done);
    t0 += omp_get_wtime() - tb;
    if (m->nbr_k) {   /* the new ratings in the updated model's indices, grouped (last of a pair wins) */
        mapped.user = lac_malloc(ctx, (size_t)ratings->count * sizeof *mapped.user);
        mapped.item = lac_malloc(ctx, (size_t)ratings->count * sizeof *mapped.item);
        if (!mapped.user || !mapped.item) {
            st = LAC_ERR_OUT_OF_MEMORY;
            goto done;
        }
        for (int64_t i = 0; i < ratings->count; i++) {
            mapped.user[i] = tu[ratings->user[i]];
            mapped.item[i] = ti[ratings->item[i]];
        }
        mapped.count = ratings->count;
        mapped.value = ratings->value;
        mapped.users.count = nu2;
        mapped.items.count = ni2;
        LAC_CHECK_GOTO(lac_mf_data_build(ctx, &mapped, &fresh), st, done);
    } else {   /* in the new ratings' own indices (the sub-model's) */
        LAC_CHECK_GOTO(lac_mf_data_build(ctx, ratings, &fresh), st, done);
    }
    LAC_CHECK_GOTO(lac_mf_nbr_data_build(ctx, &fresh, 1, &nb), st, done);
    rep.ratings = fresh.nnz;

    started = 1;   /* from here on m changes */
    m->rated_start = lac_calloc(ctx, (size_t)nu2 + 1, sizeof *m->rated_start);
    m->rated_items = NULL;
    m->rated_vals = NULL;
    if (!m->rated_start) {
        st = LAC_ERR_OUT_OF_MEMORY;
        goto done;
    }
    LAC_CHECK_GOTO(lac_mf_model_grow(ctx, m, nu2, ni2), st, done);
    LAC_CHECK_GOTO(add_ids(ctx, &ratings->users, tu, &m->users), st, done);
    LAC_CHECK_GOTO(add_ids(ctx, &ratings->items, ti, &m->items), st, done);
    for (int64_t i = 0; i < ratings->count; i++) {
        m->rating_min = ratings->value[i] < m->rating_min ? ratings->value[i] : m->rating_min;
        m->rating_max = ratings->value[i] > m->rating_max ? ratings->value[i] : m->rating_max;
    }
    if (!m->nbr_k) {
        LAC_CHECK_GOTO(merge_rated(ctx, &old, m, &nb, tu, ti, &rep.replaced), st, done);
        LAC_CHECK_GOTO(update_plain(ctx, params, &old, m, tu, ti, &fresh, &nb), st, done);
    } else {
        LAC_CHECK_GOTO(merge_rated(ctx, &old, m, &nb, NULL, NULL, &rep.replaced), st, done);
        LAC_CHECK_GOTO(update_neighbours(ctx, &old, m, &nb), st, done);
        if (unit != 1.0) {   /* solved and swept in the units the model was trained in (the LSH sums are not) */
            lac_mf_scale_floats(fresh.val, fresh.nnz, 1.0 / unit);
            lac_mf_scale_floats(nb.user_val, nb.nnz, 1.0 / unit);
            lac_mf_scale_floats(nb.item_val, nb.nnz, 1.0 / unit);
            lac_mf_model_scale(m, 1.0 / unit, 1);
        }
        LAC_CHECK_GOTO(fold_in_nbr(ctx, &old, m, &nb, params->rounds), st, done);
        LAC_CHECK_GOTO(sweep_nbr(ctx, m, &fresh, params->sweeps), st, done);
        if (unit != 1.0) lac_mf_model_scale(m, unit, 1);
    }
    rep.seconds = omp_get_wtime() - t0;
    LAC_CHECK_GOTO(rmse_on(ctx, m, ratings, tu, ti, nu2, ni2, &rep.rmse_after), st, done);
    lac_log(ctx, LAC_LOG_INFO, "mf update: %lld ratings, %lld new users, %lld new items in %.3f s; RMSE on them %.4f -> %.4f",
            (long long)rep.ratings, (long long)rep.new_users, (long long)rep.new_items, rep.seconds, rep.rmse_before,
            rep.rmse_after);
    if (report) *report = rep;
done:
    ctx->threads = threads;
    if (started) {   /* the ratings before the update are the model's no more */
        free(old.rated_start);
        free(old.rated_items);
        free(old.rated_vals);
        if (st < 0) m->broken = 1;
    }
    free(tu);
    free(ti);
    free(mapped.user);
    free(mapped.item);
    lac_mf_data_free(&fresh);
    lac_mf_nbr_data_free(&nb);
    return st;
}

/* The checks both entry points share. */
static lac_status update_check(lac_ctx_t ctx, const lac_mf_update_params *params, lac_mf_model_t model,
                               lac_ratings_t ratings)
{
    const char *why = lac_mf_update_params_check(params);
    if (why) return lac_error(ctx, LAC_ERR_ARGUMENT, "mf update parameters: %s", why);
    if (model->broken)
        return lac_error(ctx, LAC_ERR_ARGUMENT, "mf update: the model is broken (an in-place update of it failed)");
    if (ratings->count == 0) return lac_error(ctx, LAC_ERR_VALUE, "the new ratings are empty");
    for (int64_t i = 0; i < ratings->count; i++)
        if (!isfinite(ratings->value[i]))
            return lac_error(ctx, LAC_ERR_VALUE, "new rating %lld is %g: ratings must be finite", (long long)i,
                             (double)ratings->value[i]);
    if (model->params.implicit)
        return lac_error(ctx, LAC_ERR_UNSUPPORTED, "online updates of implicit-feedback models are not supported yet "
                                                   "(the closed-form solves are for squared error)");
    if (model->nbr_k && !model->rated_vals)
        return lac_error(ctx, LAC_ERR_INTERNAL, "mf update: a neighbourhood model without its training ratings");
    return LAC_SUCCESS;
}

lac_status lac_mf_update(lac_ctx_t ctx, const lac_mf_update_params *params, lac_mf_model_t model,
                         lac_ratings_t ratings, lac_mf_model_t *out, lac_mf_update_report *report)
{
    LAC_ARG_NOT_NULL(ctx, ctx);
    LAC_ARG_NOT_NULL(ctx, params);
    LAC_ARG_NOT_NULL(ctx, model);
    LAC_ARG_NOT_NULL(ctx, ratings);
    LAC_ARG_NOT_NULL(ctx, out);
    LAC_ADOPT_PARAMS(ctx, "mf update", lac_mf_update_params, params, update_defaults());
    LAC_CHECK(update_check(ctx, params, model, ratings));
    double t0 = omp_get_wtime();
    lac_mf_model_t m = NULL;
    LAC_CHECK(lac_mf_model_clone(ctx, model, &m));
    double copied = omp_get_wtime() - t0;
    lac_mf_update_report rep;
    lac_status st = update_model(ctx, params, m, ratings, &rep);
    rep.seconds += copied;
    if (st < 0) {
        lac_mf_model_destroy(&m);
        return st;
    }
    if (report) *report = rep;
    *out = m;
    return LAC_SUCCESS;
}

lac_status lac_mf_update_in_place(lac_ctx_t ctx, const lac_mf_update_params *params, lac_mf_model_t model,
                                  lac_ratings_t ratings, lac_mf_update_report *report)
{
    LAC_ARG_NOT_NULL(ctx, ctx);
    LAC_ARG_NOT_NULL(ctx, params);
    LAC_ARG_NOT_NULL(ctx, model);
    LAC_ARG_NOT_NULL(ctx, ratings);
    LAC_ADOPT_PARAMS(ctx, "mf update", lac_mf_update_params, params, update_defaults());
    LAC_CHECK(update_check(ctx, params, model, ratings));
    return update_model(ctx, params, model, ratings, report);
}
