/* mf parameters and the model: defaults and checks, allocation, accessors,
 * the learning-rate schedule (eq. 7), id look-ups. */
#include "mf/mf_internal.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static lac_mf_params mf_defaults(void)
{
    lac_mf_params p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    p.k = 32;
    p.lambda = 0.03;
    p.lambda_bias = 0.01;
    p.alpha = 0.1;
    p.beta = 0.5;
    p.epochs = 40;
    p.use_bias = 1;
    p.patience = 2;
    p.min_gain = 1e-4;
    p.deterministic = 0;
    p.seed = 1;
    p.model = LAC_MF_MODEL_PLAIN;
    p.neighbours = lac_mf_nbr_params_default();
    /* Table 5 of the paper, MovieLens column; beta as its section 5.3 */
    p.rates = (lac_mf_groups){0.035, 0.035, 0.035, 0.035, 0.002, 0.002};
    p.lambdas = (lac_mf_groups){0.02, 0.02, 0.02, 0.02, 0.002, 0.002};
    p.beta_groups = 0.3;
    p.implicit = 0;
    p.loss = LAC_MF_LOSS_XENT;
    p.negatives = 4;
    p.weighted = 0;
    p.negative_share = 1;
    p.negative_exponent = -1.0;
    p.negative_correction = 1.0;
    return p;
}

LAC_PARAMS_INIT(lac_mf_params, mf_defaults())

double lac_mf_negative_exponent(const lac_mf_params *p)
{
    if (p->negative_exponent >= 0) return p->negative_exponent;
    return p->model == LAC_MF_MODEL_PLAIN ? 0.75 : 0.0;
}

const char *lac_mf_params_check(const lac_mf_params *given)
{
    LAC_PARAMS_CHECK_BEGIN(lac_mf_params, given, mf_defaults());
    if (p->k < 1 || p->k > 4096) return "k (factors) must be in [1, 4096]";
    if (!(p->lambda >= 0) || !isfinite(p->lambda)) return "lambda must be finite and >= 0";
    if (!(p->lambda_bias >= 0) || !isfinite(p->lambda_bias)) return "lambda_bias must be finite and >= 0";
    if (!(p->alpha > 0) || !isfinite(p->alpha)) return "alpha (learning rate) must be finite and > 0";
    if (!(p->beta >= 0) || !isfinite(p->beta)) return "beta must be finite and >= 0";
    if (p->epochs < 1) return "epochs must be >= 1";
    if (p->patience < 1) return "patience must be >= 1";
    if (!(p->min_gain >= 0) || !isfinite(p->min_gain)) return "min_gain must be finite and >= 0";
    if (p->model != LAC_MF_MODEL_PLAIN && p->model != LAC_MF_MODEL_NEIGHBOURHOOD)
        return "model must be plain or neighbourhood";
    if (p->implicit != 0 && p->implicit != 1) return "implicit must be 0 or 1";
    if (p->loss != LAC_MF_LOSS_XENT && p->loss != LAC_MF_LOSS_BPR) return "loss must be xent or bpr";
    if (p->negatives < 1 || p->negatives > 1000) return "negatives must be in [1, 1000]";
    if (p->warm_epochs < 0 || p->warm_epochs > 1000000) return "warm_epochs must be in [0, 1000000]";
    if (p->weighted != 0 && p->weighted != 1) return "weighted must be 0 or 1";
    if (p->negative_share < 1 || p->negative_share > LAC_MF_SHARE_MAX) return "negative_share must be in [1, 64]";
    if (!(p->negative_exponent >= 0 && p->negative_exponent <= 2) && p->negative_exponent != -1.0)
        return "negative_exponent must be in [0, 2] (or -1: the model's default)";
    if (!(p->negative_correction >= 0 && p->negative_correction <= 1)) return "negative_correction must be in [0, 1]";
    if (p->model == LAC_MF_MODEL_NEIGHBOURHOOD) {
        const char *why = lac_mf_nbr_params_check(&p->neighbours);
        if (why) return why;
        if (p->neighbours.k > 1024) return "K (neighbours) must be at most 1024 for the neighbourhood model";
        const double *r = &p->rates.b, *l = &p->lambdas.b;
        for (int g = 0; g < 6; g++) {
            if (!(r[g] >= 0) || !isfinite(r[g])) return "rates (per group) must be finite and >= 0";
            if (!(l[g] >= 0) || !isfinite(l[g])) return "lambdas (per group) must be finite and >= 0";
        }
        if (!(p->beta_groups >= 0) || !isfinite(p->beta_groups)) return "beta_groups must be finite and >= 0";
    }
    return NULL;
}

double lac_mf_learning_rate(const lac_mf_params *p, int epoch)
{
    if (p->model == LAC_MF_MODEL_NEIGHBOURHOOD) return 1.0 / (1.0 + p->beta_groups * pow((double)epoch, 1.5));
    return p->alpha / (1.0 + p->beta * pow((double)epoch, 1.5));   /* eq. (7) */
}

lac_mf_factors lac_mf_model_factors(lac_mf_model_t m)
{
    lac_mf_factors f;
    memset(&f, 0, sizeof f);
    f.num_users = m->num_users;
    f.num_items = m->num_items;
    f.k = m->k;
    f.stride = m->stride;
    f.P = m->P;
    f.Q = m->Q;
    f.user_bias = m->user_bias;
    f.item_bias = m->item_bias;
    f.mean = m->mean;
    f.rating_min = m->rating_min;
    f.rating_max = m->rating_max;
    f.kind = m->nbr_k ? LAC_MF_MODEL_NEIGHBOURHOOD : LAC_MF_MODEL_PLAIN;
    f.nbr_k = m->nbr_k;
    f.nbr = m->nbr;
    f.W = m->W;
    f.C = m->C;
    f.rated_start = m->rated_start;
    f.rated_items = m->rated_items;
    f.rated_vals = m->rated_vals;
    return f;
}

lac_mf_call lac_mf_model_call(lac_mf_model_t m, const lac_mf_data *data, const lac_mf_eval *valid)
{
    lac_mf_call c;
    memset(&c, 0, sizeof c);
    c.data = data;
    c.valid = valid;
    c.factors = lac_mf_model_factors(m);
    c.lambda = m->params.lambda;
    c.lambda_bias = m->params.lambda_bias;
    c.use_bias = m->params.use_bias;
    c.deterministic = m->params.deterministic;
    c.seed = m->params.seed;
    c.rates = m->params.rates;
    c.lambdas = m->params.lambdas;
    c.implicit = m->params.implicit;
    c.loss = m->params.loss;
    c.negatives = m->params.negatives;
    c.share = m->params.loss == LAC_MF_LOSS_BPR ? 1 : m->params.negative_share;
    c.neg_cum = data->neg_cum;
    c.negative_exponent = m->params.implicit ? lac_mf_negative_exponent(&m->params) : 0.0;
    return c;
}

/* aligned_alloc (not posix_memalign): C11 lets realloc take its blocks, which
 * lac_mf_model_grow does. */
static void *aligned_zeroed(lac_ctx_t ctx, size_t bytes)
{
    bytes = bytes ? (bytes + 63) / 64 * 64 : 64;
    void *ptr = aligned_alloc(64, bytes);
    if (!ptr) {
        lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "out of memory allocating %zu bytes of factors", bytes);
        return NULL;
    }
    memset(ptr, 0, bytes);
    return ptr;
}

lac_status lac_mf_model_alloc(lac_ctx_t ctx, int64_t nu, int64_t ni, int k, lac_mf_model_t *out)
{
    lac_mf_model_t m = lac_calloc(ctx, 1, sizeof *m);
    if (!m) return LAC_ERR_OUT_OF_MEMORY;
    m->params = lac_mf_params_default();
    m->params.k = k;
    m->num_users = nu;
    m->num_items = ni;
    m->k = k;
    m->stride = (k + LAC_MF_ROW_ALIGN - 1) / LAC_MF_ROW_ALIGN * LAC_MF_ROW_ALIGN;
    lac_idmap_init(&m->users);
    lac_idmap_init(&m->items);
    size_t pu, qi;
    if (lac_mul_overflows((size_t)nu, (size_t)m->stride * sizeof(float), &pu) ||
        lac_mul_overflows((size_t)ni, (size_t)m->stride * sizeof(float), &qi)) {
        free(m);
        return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "factor matrices of %lld x %d do not fit in memory", (long long)nu, k);
    }
    m->P = aligned_zeroed(ctx, pu);
    m->Q = aligned_zeroed(ctx, qi);
    m->user_bias = aligned_zeroed(ctx, (size_t)nu * sizeof(float));
    m->item_bias = aligned_zeroed(ctx, (size_t)ni * sizeof(float));
    m->rated_start = lac_calloc(ctx, (size_t)nu + 1, sizeof *m->rated_start);
    if (!m->P || !m->Q || !m->user_bias || !m->item_bias || !m->rated_start) {
        lac_mf_model_destroy(&m);
        return LAC_ERR_OUT_OF_MEMORY;
    }
    *out = m;
    return LAC_SUCCESS;
}

lac_status lac_mf_model_alloc_nbr(lac_ctx_t ctx, lac_mf_model_t m, int k)
{
    size_t cells = (size_t)m->num_items * (size_t)k;
    m->nbr_k = k;
    m->nbr = lac_calloc(ctx, cells ? cells : 1, sizeof *m->nbr);
    m->W = lac_calloc(ctx, cells ? cells : 1, sizeof *m->W);
    m->C = lac_calloc(ctx, cells ? cells : 1, sizeof *m->C);
    return m->nbr && m->W && m->C ? LAC_SUCCESS : LAC_ERR_OUT_OF_MEMORY;
}

/* Copies n bytes of *p into a new zeroed block of `bytes` (64-byte aligned
 * with aligned, else realloc'd: a large block grows without a copy). */
/* The block at *p, n bytes used, grown to `bytes`, the rest zeroed. By
 * realloc, which moves a large block by remapping its pages (no copy, no page
 * faults on them: an update of 1 % new users spent half its time here on
 * the copy); an aligned block that realloc leaves unaligned is copied once
 * more. */
static int grow_block(lac_ctx_t ctx, void **p, size_t n, size_t bytes, int aligned)
{
    if (bytes <= n) return 1;
    if (aligned) bytes = (bytes + 63) / 64 * 64;
    void *q = realloc(*p, bytes);
    if (!q) return 0;
    if (aligned && ((uintptr_t)q & 63)) {
        void *r = aligned_zeroed(ctx, bytes);
        if (!r) {
            *p = q;   /* still the block, its first n bytes kept */
            return 0;
        }
        memcpy(r, q, n);
        free(q);
        q = r;
    }
    memset((char *)q + n, 0, bytes - n);
    *p = q;
    return 1;
}

lac_status lac_mf_model_grow(lac_ctx_t ctx, lac_mf_model_t m, int64_t nu2, int64_t ni2)
{
    size_t nu = (size_t)m->num_users, ni = (size_t)m->num_items, S = (size_t)m->stride * 4, K = (size_t)m->nbr_k;
    size_t cols = m->codes ? (size_t)m->code_cols : 0, q = m->keys ? (size_t)m->params.neighbours.q : 0, cells;
    if (lac_mul_overflows((size_t)(nu2 > ni2 ? nu2 : ni2), S + cols * 4 + q * 8 + K * 12, &cells))
        return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "%lld users and %lld items do not fit in memory", (long long)nu2,
                         (long long)ni2);
    int ok = grow_block(ctx, (void **)&m->P, nu * S, (size_t)nu2 * S, 1) &&
             grow_block(ctx, (void **)&m->Q, ni * S, (size_t)ni2 * S, 1) &&
             grow_block(ctx, (void **)&m->user_bias, nu * 4, (size_t)nu2 * 4, 1) &&
             grow_block(ctx, (void **)&m->item_bias, ni * 4, (size_t)ni2 * 4, 1) &&
             (!K || (grow_block(ctx, (void **)&m->nbr, ni * K * 4, (size_t)ni2 * K * 4, 0) &&
                     grow_block(ctx, (void **)&m->W, ni * K * 4, (size_t)ni2 * K * 4, 0) &&
                     grow_block(ctx, (void **)&m->C, ni * K * 4, (size_t)ni2 * K * 4, 0))) &&
             (!cols || grow_block(ctx, (void **)&m->codes, ni * cols * 4, (size_t)ni2 * cols * 4, 0)) &&
             (!q || grow_block(ctx, (void **)&m->keys, ni * q * 8, (size_t)ni2 * q * 8, 0));
    if (!ok) return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "out of memory growing the model");
    for (size_t t = q; q && (size_t)ni2 > ni && t-- > 1;)   /* table t's keys to their new place, last first */
        memmove(m->keys + t * (size_t)ni2, m->keys + t * ni, ni * 8);
    m->num_users = nu2;
    m->num_items = ni2;
    return LAC_SUCCESS;
}

static int copy_block(lac_ctx_t ctx, void **dst, const void *src, size_t bytes)
{
    if (!src) return 1;
    *dst = lac_malloc(ctx, bytes ? bytes : 1);
    if (*dst) memcpy(*dst, src, bytes);
    return *dst != NULL;
}

lac_status lac_mf_model_clone(lac_ctx_t ctx, lac_mf_model_t src, lac_mf_model_t *out)
{
    lac_mf_model_t m = NULL;
    LAC_CHECK(lac_mf_model_alloc(ctx, src->num_users, src->num_items, src->k, &m));
    size_t nu = (size_t)src->num_users, ni = (size_t)src->num_items, S = (size_t)src->stride * 4;
    size_t rated = (size_t)src->rated_start[nu], K = (size_t)src->nbr_k;
    m->params = src->params;
    m->mean = src->mean;
    m->rating_min = src->rating_min;
    m->rating_max = src->rating_max;
    m->epochs = src->epochs;
    m->nbr_k = src->nbr_k;
    m->code_cols = src->code_cols;
    memcpy(m->P, src->P, nu * S);
    memcpy(m->Q, src->Q, ni * S);
    memcpy(m->user_bias, src->user_bias, nu * 4);
    memcpy(m->item_bias, src->item_bias, ni * 4);
    memcpy(m->rated_start, src->rated_start, (nu + 1) * 8);
    int ok = copy_block(ctx, (void **)&m->rated_items, src->rated_items, rated * 4) &&
             copy_block(ctx, (void **)&m->rated_vals, src->rated_vals, rated * 4) &&
             copy_block(ctx, (void **)&m->nbr, src->nbr, ni * K * 4) &&
             copy_block(ctx, (void **)&m->W, src->W, ni * K * 4) && copy_block(ctx, (void **)&m->C, src->C, ni * K * 4) &&
             copy_block(ctx, (void **)&m->codes, src->codes, ni * (size_t)src->code_cols * 4) &&
             copy_block(ctx, (void **)&m->keys, src->keys, ni * (size_t)src->params.neighbours.q * 8);
    lac_status st = ok ? LAC_SUCCESS : LAC_ERR_OUT_OF_MEMORY;
    if (st == LAC_SUCCESS) st = lac_idmap_copy(ctx, &src->users, &m->users);
    if (st == LAC_SUCCESS) st = lac_idmap_copy(ctx, &src->items, &m->items);
    if (st < 0) {
        lac_mf_model_destroy(&m);
        return st;
    }
    *out = m;
    return LAC_SUCCESS;
}

void lac_mf_model_destroy(lac_mf_model_t *model)
{
    if (!model || !*model) return;
    lac_mf_model_t m = *model;
    free(m->rated_vals);
    free(m->nbr);
    free(m->W);
    free(m->C);
    free(m->codes);
    free(m->keys);
    free(m->P);
    free(m->Q);
    free(m->user_bias);
    free(m->item_bias);
    free(m->rated_start);
    free(m->rated_items);
    lac_idmap_free(&m->users);
    lac_idmap_free(&m->items);
    free(m);
    *model = NULL;
}

int64_t lac_mf_model_num_users(lac_mf_model_t m) { return m ? m->num_users : 0; }
int64_t lac_mf_model_num_items(lac_mf_model_t m) { return m ? m->num_items : 0; }
int lac_mf_model_k(lac_mf_model_t m) { return m ? m->k : 0; }
lac_status lac_mf_model_get_params(lac_mf_model_t m, lac_mf_params *params)
{
    LAC_ARG_NOT_NULL(NULL, m);
    LAC_ARG_NOT_NULL(NULL, params);
    size_t size = params->struct_size;
    if (size < sizeof(size_t)) return lac_error(NULL, LAC_ERR_ARGUMENT, "params->struct_size is not set");
    lac_params_fill(params, size, &m->params, sizeof m->params);
    return LAC_SUCCESS;
}
const char *lac_mf_model_user_id(lac_mf_model_t m, int64_t u) { return m ? lac_idmap_name(&m->users, u) : NULL; }
const char *lac_mf_model_item_id(lac_mf_model_t m, int64_t j) { return m ? lac_idmap_name(&m->items, j) : NULL; }

int64_t lac_mf_model_user_index(lac_mf_model_t m, const char *id)
{
    if (!m || !id) return -1;
    return lac_idmap_find(&m->users, id, strlen(id));
}

double lac_mf_rating_unit(double min, double max)
{
    double range = max - min;
    return range > LAC_MF_UNIT_RANGE ? range / LAC_MF_UNIT_RANGE : 1.0;
}

void lac_mf_scale_floats(float *x, int64_t n, double by)
{
    for (int64_t i = 0; x && i < n; i++) x[i] = (float)(x[i] * by);
}

void lac_mf_model_scale(lac_mf_model_t m, double by, int factors)
{
    m->mean *= by;
    m->rating_min = (float)(m->rating_min * by);
    m->rating_max = (float)(m->rating_max * by);
    lac_mf_scale_floats(m->rated_vals, m->rated_vals ? m->rated_start[m->num_users] : 0, by);
    if (!factors) return;
    lac_mf_scale_floats(m->user_bias, m->num_users, by);
    lac_mf_scale_floats(m->item_bias, m->num_items, by);
    lac_mf_scale_floats(m->P, m->num_users * m->stride, sqrt(by));
    lac_mf_scale_floats(m->Q, m->num_items * m->stride, sqrt(by));
    lac_mf_scale_floats(m->C, m->C ? m->num_items * m->nbr_k : 0, by);
}
