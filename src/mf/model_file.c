/* The mf model file: a versioned little-endian binary with a fixed header
 * (dimensions, hyper-parameters, section sizes), the arrays, the id maps, and
 * an FNV-1a 64 checksum of everything before it. Saved atomically; loading
 * checks size, version and checksum before trusting any field.
 *
 *   magic "LACUNAMF" | u32 version | u32 header bytes | header | P | Q |
 *   user_bias | item_bias | rated_start | rated_items | user ids | item ids |
 *   u64 checksum
 * P and Q are stored unpadded (k floats a row); ids are NUL-terminated. */
#include "io/io_internal.h"
#include "mf/mf_internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MODEL_MAGIC "LACUNAMF"
#define MODEL_VERSION 1u

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

    lac_atomic_file af;
    LAC_CHECK(lac_atomic_open(ctx, path, &af));
    fnv f = {1469598103934665603ull};
    uint32_t version = MODEL_VERSION, header_bytes = (uint32_t)sizeof h;
    int ok = put(af.fp, &f, MODEL_MAGIC, 8) && put(af.fp, &f, &version, 4) && put(af.fp, &f, &header_bytes, 4) &&
             put(af.fp, &f, &h, sizeof h);
    for (int64_t u = 0; ok && u < m->num_users; u++) ok = put(af.fp, &f, m->P + u * m->stride, (size_t)m->k * 4);
    for (int64_t j = 0; ok && j < m->num_items; j++) ok = put(af.fp, &f, m->Q + j * m->stride, (size_t)m->k * 4);
    ok = ok && put(af.fp, &f, m->user_bias, (size_t)m->num_users * 4) &&
         put(af.fp, &f, m->item_bias, (size_t)m->num_items * 4) &&
         put(af.fp, &f, m->rated_start, ((size_t)m->num_users + 1) * 8) &&
         put(af.fp, &f, m->rated_items, (size_t)h.rated_count * 4) &&
         put(af.fp, &f, m->users.arena, (size_t)h.user_id_bytes) &&
         put(af.fp, &f, m->items.arena, (size_t)h.item_id_bytes);
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
    if (version != MODEL_VERSION || header_bytes != sizeof(model_header)) {
        st = lac_error(ctx, LAC_ERR_FORMAT, "%s: model version %u (header %u bytes) is not the version %u this build reads",
                       path, version, header_bytes, MODEL_VERSION);
        goto done;
    }
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
    memcpy(&h, buf + 16, sizeof h);
    /* the sizes the header promises must add up to the file's size */
    if (h.num_users < 0 || h.num_items < 0 || h.num_users > INT32_MAX || h.num_items > INT32_MAX || h.k < 1 ||
        h.k > 4096 || h.rated_count < 0 || h.user_id_bytes < 0 || h.item_id_bytes < 0 || !isfinite(h.mean)) {
        st = lac_error(ctx, LAC_ERR_FORMAT, "%s: impossible header values", path);
        goto done;
    }
    double expect = (double)fixed + 4.0 * (double)h.k * (double)(h.num_users + h.num_items) +
                    4.0 * (double)(h.num_users + h.num_items) + 8.0 * (double)(h.num_users + 1) +
                    4.0 * (double)h.rated_count + (double)h.user_id_bytes + (double)h.item_id_bytes;
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
    {
        const unsigned char *p = buf + 16 + sizeof h;
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
    }
    *out = m;
    m = NULL;
done:
    free(buf);
    lac_mf_model_destroy(&m);
    return st;
}
