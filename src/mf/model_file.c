/* The mf model file: a versioned little-endian binary with a fixed header
 * (dimensions, hyper-parameters, section sizes), the arrays, the id maps, and
 * an FNV-1a 64 checksum of everything before it. Saved atomically; loading
 * checks size, version and checksum before trusting any field.
 *
 *   magic "LACUNAMF" | u32 version | u32 header bytes | header | P | Q |
 *   user_bias | item_bias | rated_start | rated_items | user ids | item ids |
 *   [neighbourhood sections] | u64 checksum
 * P and Q are stored unpadded (k floats a row); ids are NUL-terminated.
 * Version 2 appends to version 1's header the model kind and
 * the neighbourhood model's parameters; a neighbourhood model then holds
 * rated_vals (rated_count floats), S^K (items x K int32), W, C (items x K
 * floats each) and the search's per-item sums (items x code_cols floats).
 * The header's implicit word (0 in older files) records implicit-feedback
 * training. Version 3 appends the number of tables whose
 * bucket keys follow the sums (tables x items u64, 0 tables: none), so that
 * an online update keys only the items it changes; older files (versions 1
 * and 2) still load, a neighbourhood model's keys computed from its sums.
 * Version 4 appends implicit training's negative_exponent (older implicit
 * models were trained with uniform negatives: 0); version 5 (written now)
 * the negatives' correction folded into the item biases (older implicit
 * models had none: 0). */
#include "io/io_internal.h"
#include "mf/mf_internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MODEL_MAGIC "LACUNAMF"
#define MODEL_VERSION 5u

typedef struct {
    int64_t num_users, num_items;
    int32_t k, use_bias;
    double lambda, lambda_bias, alpha, beta, mean;
    float rating_min, rating_max;
    int32_t epochs, deterministic;
    uint64_t seed;
    int64_t rated_count;
    int64_t user_id_bytes, item_id_bytes;
} model_header;

/* Version 2's addition to the header. */
typedef struct {
    int32_t kind, nbr_k;
    int32_t method, p, q, bits, psi_power;
    int32_t implicit;   /* implicit feedback: bit 0 on, bit 1 BPR, bit 2 weighted, bits 8-23 negatives, 24-30 negative_share (0: 1); 0: explicit */
    double shrink;
    uint64_t nbr_seed;
    double rates[6], lambdas[6], beta_groups;
    int64_t code_cols;
} model_header2;

/* Version 3's addition. */
typedef struct {
    int64_t key_tables;
} model_header3;

/* Version 4's. */
typedef struct {
    double negative_exponent;
} model_header4;

/* Version 5's. */
typedef struct {
    double negative_correction;
} model_header5;

typedef struct {
    uint64_t h;
} fnv;

static void fnv_add(fnv *f, const void *data, size_t n)
{
    const unsigned char *p = data;
    uint64_t h = f->h;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
    f->h = h;
}

static int put(FILE *fp, fnv *f, const void *data, size_t n)
{
    fnv_add(f, data, n);
    return n == 0 || fwrite(data, 1, n, fp) == n;
}

lac_status lac_mf_model_save(lac_ctx_t ctx, const char *path, lac_mf_model_t m)
{
    LAC_ARG_NOT_NULL(ctx, path);
    LAC_ARG_NOT_NULL(ctx, m);
    if (m->broken) return lac_error(ctx, LAC_ERR_ARGUMENT, "the model is broken (an in-place update of it failed): not saved");
    model_header h;
    memset(&h, 0, sizeof h);
    h.num_users = m->num_users;
    h.num_items = m->num_items;
    h.k = m->k;
    h.use_bias = m->params.use_bias;
    h.lambda = m->params.lambda;
    h.lambda_bias = m->params.lambda_bias;
    h.alpha = m->params.alpha;
    h.beta = m->params.beta;
    h.mean = m->mean;
    h.rating_min = m->rating_min;
    h.rating_max = m->rating_max;
    h.epochs = m->epochs;
    h.deterministic = m->params.deterministic;
    h.seed = m->params.seed;
    h.rated_count = m->rated_start[m->num_users];
    h.user_id_bytes = m->users.arena_len;
    h.item_id_bytes = m->items.arena_len;

    model_header2 h2;
    memset(&h2, 0, sizeof h2);
    const lac_mf_params *mp = &m->params;
    h2.kind = m->nbr_k ? LAC_MF_MODEL_NEIGHBOURHOOD : LAC_MF_MODEL_PLAIN;
    h2.nbr_k = m->nbr_k;
    h2.method = mp->neighbours.method;
    h2.p = mp->neighbours.p;
    h2.q = mp->neighbours.q;
    h2.bits = mp->neighbours.bits;
    h2.psi_power = mp->neighbours.psi_power;
    h2.shrink = mp->neighbours.shrink;
    h2.nbr_seed = mp->neighbours.seed;
    memcpy(h2.rates, &mp->rates, sizeof h2.rates);
    memcpy(h2.lambdas, &mp->lambdas, sizeof h2.lambdas);
    h2.beta_groups = mp->beta_groups;
    h2.code_cols = m->codes ? m->code_cols : 0;
    h2.implicit = mp->implicit ? 1 | (mp->loss == LAC_MF_LOSS_BPR) << 1 | mp->weighted << 2 | mp->negatives << 8 |
                                   mp->negative_share << 24 : 0;

    model_header3 h3;
    memset(&h3, 0, sizeof h3);
    h3.key_tables = m->nbr_k && h2.code_cols && m->keys ? mp->neighbours.q : 0;
    model_header4 h4;
    memset(&h4, 0, sizeof h4);
    h4.negative_exponent = mp->implicit ? mp->negative_exponent : 0.0;
    model_header5 h5;
    memset(&h5, 0, sizeof h5);
    h5.negative_correction = mp->implicit ? mp->negative_correction : 0.0;

    lac_atomic_file af;
    LAC_CHECK(lac_atomic_open(ctx, path, &af));
    fnv f = {1469598103934665603ull};
    uint32_t version = MODEL_VERSION, header_bytes = (uint32_t)(sizeof h + sizeof h2 + sizeof h3 + sizeof h4 + sizeof h5);
    int ok = put(af.fp, &f, MODEL_MAGIC, 8) && put(af.fp, &f, &version, 4) && put(af.fp, &f, &header_bytes, 4) &&
             put(af.fp, &f, &h, sizeof h) && put(af.fp, &f, &h2, sizeof h2) && put(af.fp, &f, &h3, sizeof h3) &&
             put(af.fp, &f, &h4, sizeof h4) && put(af.fp, &f, &h5, sizeof h5);
    for (int64_t u = 0; ok && u < m->num_users; u++) ok = put(af.fp, &f, m->P + u * m->stride, (size_t)m->k * 4);
    for (int64_t j = 0; ok && j < m->num_items; j++) ok = put(af.fp, &f, m->Q + j * m->stride, (size_t)m->k * 4);
    ok = ok && put(af.fp, &f, m->user_bias, (size_t)m->num_users * 4) &&
         put(af.fp, &f, m->item_bias, (size_t)m->num_items * 4) &&
         put(af.fp, &f, m->rated_start, ((size_t)m->num_users + 1) * 8) &&
         put(af.fp, &f, m->rated_items, (size_t)h.rated_count * 4) &&
         put(af.fp, &f, m->users.arena, (size_t)h.user_id_bytes) &&
         put(af.fp, &f, m->items.arena, (size_t)h.item_id_bytes);
    if (m->nbr_k) {
        size_t nk = (size_t)m->num_items * (size_t)m->nbr_k;
        ok = ok && put(af.fp, &f, m->rated_vals, (size_t)h.rated_count * 4) && put(af.fp, &f, m->nbr, nk * 4) &&
             put(af.fp, &f, m->W, nk * 4) && put(af.fp, &f, m->C, nk * 4) &&
             put(af.fp, &f, m->codes, (size_t)m->num_items * (size_t)h2.code_cols * 4) &&
             put(af.fp, &f, m->keys, (size_t)m->num_items * (size_t)h3.key_tables * 8);
    }
    uint64_t sum = f.h;
    ok = ok && fwrite(&sum, 8, 1, af.fp) == 1;
    if (!ok) {
        lac_atomic_abort(&af);
        return lac_error(ctx, LAC_ERR_IO, "writing the model to %s failed: %s", path, strerror(errno));
    }
    return lac_atomic_commit(ctx, &af);
}

/* Reads the id names of one map from a NUL-separated block of `bytes`. */
static lac_status ids_from_block(lac_ctx_t ctx, const char *path, const char *what, const char *block, int64_t bytes,
                                 int64_t count, lac_idmap *map)
{
    int64_t pos = 0;
    for (int64_t i = 0; i < count; i++) {
        const char *end = memchr(block + pos, '\0', (size_t)(bytes - pos));
        if (!end) return lac_error(ctx, LAC_ERR_FORMAT, "%s: the %s ids end early (id %lld)", path, what, (long long)i);
        int32_t idx;
        size_t len = (size_t)(end - (block + pos));
        LAC_CHECK(lac_idmap_intern(ctx, map, block + pos, len, &idx));
        if (idx != i) return lac_error(ctx, LAC_ERR_FORMAT, "%s: %s id '%s' appears twice", path, what, block + pos);
        pos += (int64_t)len + 1;
    }
    if (pos != bytes) return lac_error(ctx, LAC_ERR_FORMAT, "%s: extra bytes after the %s ids", path, what);
    return LAC_SUCCESS;
}

lac_status lac_mf_model_load(lac_ctx_t ctx, const char *path, lac_mf_model_t *out)
{
    LAC_ARG_NOT_NULL(ctx, path);
    LAC_ARG_NOT_NULL(ctx, out);
    FILE *fp = NULL;
    LAC_CHECK(lac_open_input(ctx, path, &fp));
    lac_status st = LAC_SUCCESS;
    unsigned char *buf = NULL;
    lac_mf_model_t m = NULL;
    long size = -1;
    if (fseek(fp, 0, SEEK_END) == 0) size = ftell(fp);
    if (size < 0 || fseek(fp, 0, SEEK_SET) != 0) {
        fclose(fp);
        return lac_error(ctx, LAC_ERR_IO, "cannot size %s", path);
    }
    size_t fixed = 8 + 4 + 4 + sizeof(model_header) + 8;
    if ((size_t)size < fixed) {
        fclose(fp);
        return lac_error(ctx, LAC_ERR_FORMAT, "%s is not an mf model (%ld bytes: too short, truncated?)", path, size);
    }
    buf = lac_malloc(ctx, (size_t)size);
    if (!buf) {
        fclose(fp);
        return LAC_ERR_OUT_OF_MEMORY;
    }
    size_t got = fread(buf, 1, (size_t)size, fp);
    fclose(fp);
    if (got != (size_t)size) {
        st = lac_error(ctx, LAC_ERR_IO, "reading %s failed", path);
        goto done;
    }
    if (memcmp(buf, MODEL_MAGIC, 8) != 0) {
        st = lac_error(ctx, LAC_ERR_FORMAT, "%s is not an mf model (no LACUNAMF magic)", path);
        goto done;
    }
    uint32_t version, header_bytes;
    memcpy(&version, buf + 8, 4);
    memcpy(&header_bytes, buf + 12, 4);
    if (!(version == 1 && header_bytes == sizeof(model_header)) &&
        !(version == 2 && header_bytes == sizeof(model_header) + sizeof(model_header2)) &&
        !(version == 3 && header_bytes == sizeof(model_header) + sizeof(model_header2) + sizeof(model_header3)) &&
        !(version == 4 && header_bytes == sizeof(model_header) + sizeof(model_header2) + sizeof(model_header3) +
                                               sizeof(model_header4)) &&
        !(version == 5 && header_bytes == sizeof(model_header) + sizeof(model_header2) + sizeof(model_header3) +
                                               sizeof(model_header4) + sizeof(model_header5))) {
        st = lac_error(ctx, LAC_ERR_FORMAT, "%s: model version %u (header %u bytes) is not a version this build reads "
                       "(1 to 5)", path, version, header_bytes);
        goto done;
    }
    if ((size_t)size < fixed + (header_bytes - sizeof(model_header))) {
        st = lac_error(ctx, LAC_ERR_FORMAT, "%s is truncated (%ld bytes)", path, size);
        goto done;
    }
    fixed += header_bytes - sizeof(model_header);
    {
        fnv f = {1469598103934665603ull};
        fnv_add(&f, buf, (size_t)size - 8);
        uint64_t stored;
        memcpy(&stored, buf + size - 8, 8);
        if (stored != f.h) {
            st = lac_error(ctx, LAC_ERR_FORMAT, "%s: checksum mismatch (the file is corrupted or truncated)", path);
            goto done;
        }
    }
    model_header h;
    model_header2 h2;
    model_header3 h3;
    model_header4 h4;
    model_header5 h5;
    memcpy(&h, buf + 16, sizeof h);
    memset(&h2, 0, sizeof h2);
    memset(&h3, 0, sizeof h3);
    memset(&h4, 0, sizeof h4);
    memset(&h5, 0, sizeof h5);
    if (version >= 2) memcpy(&h2, buf + 16 + sizeof h, sizeof h2);
    if (version >= 3) memcpy(&h3, buf + 16 + sizeof h + sizeof h2, sizeof h3);
    if (version >= 4) memcpy(&h4, buf + 16 + sizeof h + sizeof h2 + sizeof h3, sizeof h4);
    if (version >= 5) memcpy(&h5, buf + 16 + sizeof h + sizeof h2 + sizeof h3 + sizeof h4, sizeof h5);
    int nbr = h2.kind == LAC_MF_MODEL_NEIGHBOURHOOD;
    if ((h2.kind != LAC_MF_MODEL_PLAIN && !nbr) || (nbr && (h2.nbr_k < 1 || h2.nbr_k > 1024)) ||
        (!nbr && h2.nbr_k != 0) || h2.code_cols < 0 || h2.code_cols > ((int64_t)1 << 32) ||
        (h3.key_tables != 0 && (!nbr || !h2.code_cols || h3.key_tables != h2.q)) ||
        (h2.implicit & 1 && (((h2.implicit >> 8) & 0xFFFF) < 1 || ((h2.implicit >> 8) & 0xFFFF) > 1000 ||
                               ((h2.implicit >> 24) & 0x7F) > LAC_MF_SHARE_MAX)) ||
        !(h4.negative_exponent >= 0 && h4.negative_exponent <= 2) ||
        !(h5.negative_correction >= 0 && h5.negative_correction <= 1)) {
        st = lac_error(ctx, LAC_ERR_FORMAT, "%s: impossible header values (model kind)", path);
        goto done;
    }
    /* the sizes the header promises must add up to the file's size */
    if (h.num_users < 0 || h.num_items < 0 || h.num_users > INT32_MAX || h.num_items > INT32_MAX || h.k < 1 ||
        h.k > 4096 || h.rated_count < 0 || h.user_id_bytes < 0 || h.item_id_bytes < 0 || !isfinite(h.mean)) {
        st = lac_error(ctx, LAC_ERR_FORMAT, "%s: impossible header values", path);
        goto done;
    }
    double expect = (double)fixed + 4.0 * (double)h.k * (double)(h.num_users + h.num_items) +
                    4.0 * (double)(h.num_users + h.num_items) + 8.0 * (double)(h.num_users + 1) +
                    4.0 * (double)h.rated_count + (double)h.user_id_bytes + (double)h.item_id_bytes;
    if (nbr)
        expect += 4.0 * (double)h.rated_count + 12.0 * (double)h.num_items * h2.nbr_k +
                  4.0 * (double)h.num_items * (double)h2.code_cols + 8.0 * (double)h.num_items * (double)h3.key_tables;
    if (expect != (double)size) {
        st = lac_error(ctx, LAC_ERR_FORMAT, "%s: %ld bytes where the header describes %.0f", path, size, expect);
        goto done;
    }
    LAC_CHECK_GOTO(lac_mf_model_alloc(ctx, h.num_users, h.num_items, h.k, &m), st, done);
    m->params.k = h.k;
    m->params.use_bias = h.use_bias;
    m->params.lambda = h.lambda;
    m->params.lambda_bias = h.lambda_bias;
    m->params.alpha = h.alpha;
    m->params.beta = h.beta;
    m->params.deterministic = h.deterministic;
    m->params.seed = h.seed;
    m->mean = h.mean;
    m->rating_min = h.rating_min;
    m->rating_max = h.rating_max;
    m->epochs = h.epochs;
    if (version >= 2) {
        m->params.model = h2.kind;
        m->params.neighbours.method = (lac_mf_nbr_method)h2.method;
        m->params.neighbours.k = nbr ? h2.nbr_k : m->params.neighbours.k;
        m->params.neighbours.p = h2.p;
        m->params.neighbours.q = h2.q;
        m->params.neighbours.bits = h2.bits;
        m->params.neighbours.psi_power = h2.psi_power;
        m->params.neighbours.shrink = h2.shrink;
        m->params.neighbours.seed = h2.nbr_seed;
        memcpy(&m->params.rates, h2.rates, sizeof h2.rates);
        memcpy(&m->params.lambdas, h2.lambdas, sizeof h2.lambdas);
        m->params.beta_groups = h2.beta_groups;
        m->params.implicit = h2.implicit & 1;
        if (m->params.implicit) {
            m->params.loss = h2.implicit & 2 ? LAC_MF_LOSS_BPR : LAC_MF_LOSS_XENT;
            m->params.weighted = (h2.implicit >> 2) & 1;
            m->params.negatives = (h2.implicit >> 8) & 0xFFFF;
            m->params.negative_share = (h2.implicit >> 24) & 0x7F ? (h2.implicit >> 24) & 0x7F : 1;
            m->params.negative_exponent = h4.negative_exponent;
            m->params.negative_correction = h5.negative_correction;
        }
    }
    {
        const unsigned char *p = buf + 16 + header_bytes;
        for (int64_t u = 0; u < h.num_users; u++, p += (size_t)h.k * 4) memcpy(m->P + u * m->stride, p, (size_t)h.k * 4);
        for (int64_t j = 0; j < h.num_items; j++, p += (size_t)h.k * 4) memcpy(m->Q + j * m->stride, p, (size_t)h.k * 4);
        memcpy(m->user_bias, p, (size_t)h.num_users * 4);
        p += (size_t)h.num_users * 4;
        memcpy(m->item_bias, p, (size_t)h.num_items * 4);
        p += (size_t)h.num_items * 4;
        memcpy(m->rated_start, p, ((size_t)h.num_users + 1) * 8);
        p += ((size_t)h.num_users + 1) * 8;
        if (m->rated_start[0] != 0 || m->rated_start[h.num_users] != h.rated_count) {
            st = lac_error(ctx, LAC_ERR_FORMAT, "%s: the rated-items index is inconsistent", path);
            goto done;
        }
        for (int64_t u = 0; u < h.num_users; u++)
            if (m->rated_start[u + 1] < m->rated_start[u]) {
                st = lac_error(ctx, LAC_ERR_FORMAT, "%s: the rated-items index decreases at user %lld", path, (long long)u);
                goto done;
            }
        m->rated_items = lac_malloc(ctx, (size_t)(h.rated_count ? h.rated_count : 1) * 4);
        if (!m->rated_items) {
            st = LAC_ERR_OUT_OF_MEMORY;
            goto done;
        }
        memcpy(m->rated_items, p, (size_t)h.rated_count * 4);
        p += (size_t)h.rated_count * 4;
        for (int64_t a = 0; a < h.rated_count; a++)
            if (m->rated_items[a] < 0 || m->rated_items[a] >= h.num_items) {
                st = lac_error(ctx, LAC_ERR_FORMAT, "%s: rated item %lld is out of range", path, (long long)a);
                goto done;
            }
        LAC_CHECK_GOTO(ids_from_block(ctx, path, "user", (const char *)p, h.user_id_bytes, h.num_users, &m->users), st, done);
        p += h.user_id_bytes;
        LAC_CHECK_GOTO(ids_from_block(ctx, path, "item", (const char *)p, h.item_id_bytes, h.num_items, &m->items), st, done);
        p += h.item_id_bytes;
        if (nbr) {
            size_t nk = (size_t)h.num_items * (size_t)h2.nbr_k, cc = (size_t)h.num_items * (size_t)h2.code_cols;
            LAC_CHECK_GOTO(lac_mf_model_alloc_nbr(ctx, m, h2.nbr_k), st, done);
            m->rated_vals = lac_malloc(ctx, (size_t)(h.rated_count ? h.rated_count : 1) * 4);
            m->codes = h2.code_cols ? lac_malloc(ctx, cc * 4) : NULL;
            if (!m->rated_vals || (h2.code_cols && !m->codes)) {
                st = LAC_ERR_OUT_OF_MEMORY;
                goto done;
            }
            m->code_cols = h2.code_cols;
            memcpy(m->rated_vals, p, (size_t)h.rated_count * 4);
            p += (size_t)h.rated_count * 4;
            memcpy(m->nbr, p, nk * 4);
            p += nk * 4;
            memcpy(m->W, p, nk * 4);
            p += nk * 4;
            memcpy(m->C, p, nk * 4);
            p += nk * 4;
            if (cc) memcpy(m->codes, p, cc * 4);
            p += cc * 4;
            size_t kc = (size_t)h.num_items * (size_t)h3.key_tables;
            int keyable = cc && h2.p > 0 && h2.q > 0 && h2.bits > 0 && h2.bits <= 64 &&
                          h2.code_cols == lac_mf_nbr_code_columns(&m->params.neighbours);
            if (kc || keyable) {
                m->keys = lac_malloc(ctx, (size_t)h.num_items * (size_t)h2.q * 8 + 8);
                if (!m->keys) {
                    st = LAC_ERR_OUT_OF_MEMORY;
                    goto done;
                }
                if (kc) memcpy(m->keys, p, kc * 8);
                else   /* an older file: keyed here, as the training keys them */
                    lac_mf_nbr_keys(&m->params.neighbours, m->codes, h.num_items, NULL, 0, m->keys);
            }
            for (size_t x = 0; x < nk; x++)
                if (m->nbr[x] < 0 || m->nbr[x] >= h.num_items) {
                    st = lac_error(ctx, LAC_ERR_FORMAT, "%s: neighbour %zu is out of range", path, x);
                    goto done;
                }
            /* predictions search each user's items: they must ascend */
            for (int64_t u = 0; u < h.num_users; u++)
                for (int64_t a = m->rated_start[u] + 1; a < m->rated_start[u + 1]; a++)
                    if (m->rated_items[a] <= m->rated_items[a - 1]) {
                        st = lac_error(ctx, LAC_ERR_FORMAT, "%s: the rated items of user %lld do not ascend", path,
                                       (long long)u);
                        goto done;
                    }
        }
    }
    *out = m;
    m = NULL;
done:
    free(buf);
    lac_mf_model_destroy(&m);
    return st;
}
