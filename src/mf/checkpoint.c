/* The mf checkpoint file: a little-endian binary beside the model file's
 * format, holding what a training needs to go on:
 *
 *   magic "LACUNACK" | u32 version | u32 header bytes | header |
 *   [S^K(j): num_items x K int32, the neighbourhood model] |
 *   P | Q | user_bias | item_bias | [W | C] |
 *   [the kept epoch's P | Q | biases | W | C] | u64 checksum of all before it
 *
 * The header holds the model kind, the parameters, the epoch loop's progress
 * (lac_mf_progress) and fingerprints of the training data (ratings and id
 * maps) and of the validation set; P and Q are stored unpadded. The ids and
 * each user's rated items are not stored: a resumed training reads the same
 * training file again, which the fingerprint checks. Written atomically and
 * at once (never part of an output set: a checkpoint is worth keeping when
 * the run fails later). */
#include "mf/checkpoint.h"
#include "io/io_internal.h"
#include "core/hash.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define CK_MAGIC "LACUNACK"
#define CK_VERSION 3u   /* 3: the header ends with the rank count; version 2 files (one process) are read */

typedef struct {
    int32_t kind, k;
    int64_t num_users, num_items, nnz, valid_count;
    uint64_t data_hash, valid_hash;
    double lambda, lambda_bias, alpha, beta, min_gain;
    int32_t use_bias, deterministic, patience, threads;
    uint64_t seed;
    int32_t epoch, best_epoch, since_best, has_kept;
    /* the neighbourhood model (nbr_k 0 for the plain one) */
    int32_t nbr_k, nbr_method, nbr_p, nbr_q, nbr_bits, nbr_psi;
    double nbr_shrink, rates[6], lambdas[6], beta_groups;
    uint64_t nbr_seed;
    double best, last_train, last_valid, seconds;
    int32_t ranks, spare;   /* version 3: the MPI ranks that wrote it */
} ck_header;
#define CK_V2_HEADER_BYTES offsetof(ck_header, ranks)

static uint64_t data_hash(const lac_mf_run *run)
{
    const lac_mf_data *d = run->data;
    uint64_t h = lac_hash_words(LAC_HASH_SEED, d->row_start, ((size_t)d->num_users + 1) * sizeof *d->row_start);
    h = lac_hash_words(h, d->col, (size_t)d->nnz * sizeof *d->col);
    h = lac_hash_words(h, d->val, (size_t)d->nnz * sizeof *d->val);
    h = lac_hash_words(h, run->model->users.arena, (size_t)run->model->users.arena_len);
    return lac_hash_words(h, run->model->items.arena, (size_t)run->model->items.arena_len);
}

static uint64_t valid_hash(const lac_mf_eval *v)
{
    if (!v) return 0;
    uint64_t h = lac_hash_words(LAC_HASH_SEED, v->user, (size_t)v->count * sizeof *v->user);
    h = lac_hash_words(h, v->item, (size_t)v->count * sizeof *v->item);
    return lac_hash_words(h, v->val, (size_t)v->count * sizeof *v->val);
}

static ck_header header_of(const lac_mf_run *run)
{
    const lac_mf_params *p = run->params;
    ck_header h;
    memset(&h, 0, sizeof h);
    h.kind = (int32_t)p->model;   /* lac_mf_model_kind: a checkpoint of one kind never resumes another */
    h.k = p->k;
    h.num_users = run->data->num_users;
    h.num_items = run->data->num_items;
    h.nnz = run->data->nnz;
    h.valid_count = run->valid ? run->valid->count : -1;
    h.data_hash = data_hash(run);
    h.valid_hash = valid_hash(run->valid);
    h.lambda = p->lambda;
    h.lambda_bias = p->lambda_bias;
    h.alpha = p->alpha;
    h.beta = p->beta;
    h.min_gain = p->min_gain;
    h.use_bias = p->use_bias;
    h.deterministic = p->deterministic;
    h.patience = p->patience;
    h.threads = run->threads;
    h.ranks = run->ranks;
    h.seed = p->seed;
    if (p->model == LAC_MF_MODEL_NEIGHBOURHOOD) {
        const lac_mf_groups *g[2] = {&p->rates, &p->lambdas};
        h.nbr_k = run->model->nbr_k;
        h.nbr_method = (int32_t)p->neighbours.method;
        h.nbr_p = p->neighbours.p;
        h.nbr_q = p->neighbours.q;
        h.nbr_bits = p->neighbours.bits;
        h.nbr_psi = p->neighbours.psi_power;
        h.nbr_shrink = p->neighbours.shrink;
        h.nbr_seed = p->neighbours.seed;
        for (int i = 0; i < 2; i++) {
            double *to = i ? h.lambdas : h.rates;
            to[0] = g[i]->b, to[1] = g[i]->bhat, to[2] = g[i]->u, to[3] = g[i]->v, to[4] = g[i]->w, to[5] = g[i]->c;
        }
        h.beta_groups = p->beta_groups;
    }
    return h;
}

lac_status lac_mf_checkpoint_replaceable(lac_ctx_t ctx, const char *path)
{
    struct stat sb;
    if (stat(path, &sb) != 0) return LAC_SUCCESS;   /* not there: created */
    char head[8] = {0};
    FILE *fp = S_ISREG(sb.st_mode) ? fopen(path, "rb") : NULL;
    size_t got = fp ? fread(head, 1, sizeof head, fp) : 0;
    if (fp) fclose(fp);
    if (got == sizeof head && memcmp(head, CK_MAGIC, 8) == 0) return LAC_SUCCESS;
    return lac_error(ctx, LAC_ERR_ARGUMENT, "%s exists and is not an mf checkpoint: not replacing it", path);
}

void lac_mf_checkpoint_scratch_free(lac_mf_factors *f)
{
    free(f->P);
    free(f->Q);
    free(f->user_bias);
    free(f->item_bias);
    free(f->W);
    free(f->C);
    memset(f, 0, sizeof *f);
}

/* Host arrays shaped like the model's (rows padded to its stride; W and C
 * for the neighbourhood model). */
static lac_status factors_alloc(lac_ctx_t ctx, lac_mf_model_t m, lac_mf_factors *f)
{
    *f = lac_mf_model_factors(m);
    size_t pu = (size_t)m->num_users * (size_t)m->stride, qi = (size_t)m->num_items * (size_t)m->stride;
    size_t nk = (size_t)m->num_items * (size_t)m->nbr_k;
    f->P = lac_calloc(ctx, pu + 1, sizeof(float));
    f->Q = lac_calloc(ctx, qi + 1, sizeof(float));
    f->user_bias = lac_calloc(ctx, (size_t)m->num_users + 1, sizeof(float));
    f->item_bias = lac_calloc(ctx, (size_t)m->num_items + 1, sizeof(float));
    f->W = m->nbr_k ? lac_calloc(ctx, nk + 1, sizeof(float)) : NULL;
    f->C = m->nbr_k ? lac_calloc(ctx, nk + 1, sizeof(float)) : NULL;
    if (f->P && f->Q && f->user_bias && f->item_bias && (!m->nbr_k || (f->W && f->C))) return LAC_SUCCESS;
    lac_mf_checkpoint_scratch_free(f);
    return LAC_ERR_OUT_OF_MEMORY;
}

typedef struct {
    FILE *fp;
    uint64_t h;
    int ok;
} ck_writer;

static void put(ck_writer *w, const void *data, size_t n)
{
    if (!w->ok || n == 0) return;
    w->h = lac_fnv1a64(w->h, data, n);
    w->ok = fwrite(data, 1, n, w->fp) == n;
}

static void put_factors(ck_writer *w, const lac_mf_factors *f)
{
    for (int64_t u = 0; u < f->num_users; u++) put(w, f->P + u * f->stride, (size_t)f->k * 4);
    for (int64_t j = 0; j < f->num_items; j++) put(w, f->Q + j * f->stride, (size_t)f->k * 4);
    put(w, f->user_bias, (size_t)f->num_users * 4);
    put(w, f->item_bias, (size_t)f->num_items * 4);
    put(w, f->W, (size_t)f->num_items * (size_t)f->nbr_k * 4);
    put(w, f->C, (size_t)f->num_items * (size_t)f->nbr_k * 4);
}

/* Rank 0's part of a save: the file, from the factors the backend's get
 * gathered (the same calls on every rank, so that its collectives meet). */
typedef struct {
    lac_atomic_file af;
    ck_writer w;
    int open;
    lac_status st;   /* this rank's failure to write */
} ck_file;

lac_status lac_mf_checkpoint_save(lac_ctx_t ctx, const char *path, const lac_mf_run *run,
                                  const lac_mf_progress *pr, const lac_mf_backend *be, lac_mf_state *state,
                                  lac_mf_factors *scratch)
{
    const int writer = ctx->rank == 0;
    lac_status st = scratch->P ? LAC_SUCCESS : factors_alloc(ctx, run->model, scratch);
    if (st == LAC_SUCCESS && writer) st = lac_mf_checkpoint_replaceable(ctx, path);
    LAC_CHECK(lac_mf_dist_agree(ctx, st));
    ck_header h = header_of(run);
    h.epoch = pr->epoch;
    h.best_epoch = pr->best_epoch;
    h.since_best = pr->since_best;
    h.best = pr->best;
    h.last_train = pr->last_train;
    h.last_valid = pr->last_valid;
    h.seconds = pr->seconds;
    h.has_kept = run->valid && pr->best_epoch > 0;

    ck_file f;
    memset(&f, 0, sizeof f);
    if (writer && (f.st = lac_atomic_open(ctx, path, &f.af)) == LAC_SUCCESS) {
        f.open = 1;
        f.w = (ck_writer){f.af.fp, LAC_HASH_SEED, 1};
        uint32_t version = CK_VERSION, header_bytes = (uint32_t)sizeof h;
        put(&f.w, CK_MAGIC, 8);
        put(&f.w, &version, 4);
        put(&f.w, &header_bytes, 4);
        put(&f.w, &h, sizeof h);
        put(&f.w, run->model->nbr, (size_t)run->model->num_items * (size_t)run->model->nbr_k * 4);
    }
    st = be->get(ctx, state, 0, scratch);
    if (st == LAC_SUCCESS && f.open) put_factors(&f.w, scratch);
    if (st == LAC_SUCCESS && h.has_kept && (st = be->get(ctx, state, 1, scratch)) == LAC_SUCCESS && f.open)
        put_factors(&f.w, scratch);
    uint64_t sum = f.w.h;
    if (st == LAC_SUCCESS && f.open && !(f.w.ok && fwrite(&sum, 8, 1, f.af.fp) == 1))
        f.st = lac_error(ctx, LAC_ERR_IO, "writing the checkpoint %s failed: %s", path, strerror(errno));
    if (f.open && (st != LAC_SUCCESS || f.st != LAC_SUCCESS)) lac_atomic_abort(&f.af);
    else if (f.open) f.st = lac_atomic_commit_now(ctx, &f.af);
    if (st != LAC_SUCCESS) return st;   /* the gets agree their failures */
    return lac_mf_dist_agree(ctx, f.st);
}

void lac_mf_checkpoint_free(lac_mf_checkpoint *ck)
{
    lac_mf_checkpoint_scratch_free(&ck->current);
    lac_mf_checkpoint_scratch_free(&ck->kept);
    free(ck->block);
    memset(ck, 0, sizeof *ck);
}

/* The first way the checkpoint's header differs from this run, or NULL. */
static const char *mismatch(const ck_header *f, const ck_header *r, char *buf, size_t n)
{
#define DIFF(field, name, fmt, cast)                                                                      \
    if (f->field != r->field) {                                                                         \
        snprintf(buf, n, "was written with %s " fmt ", this run has " fmt, name, (cast)f->field, (cast)r->field); \
        return buf;                                                                                     \
    }
    if (f->kind != r->kind) {
        snprintf(buf, n, "holds the %s model, this run trains the %s one", f->kind ? "neighbourhood" : "plain",
                 r->kind ? "neighbourhood" : "plain");
        return buf;
    }
    DIFF(k, "k", "%d", int);
    if (f->nnz != r->nnz || f->num_users != r->num_users || f->num_items != r->num_items || f->data_hash != r->data_hash) {
        snprintf(buf, n, "was written for other training ratings (%lld ratings of %lld users and %lld items, "
                 "not these %lld of %lld and %lld)", (long long)f->nnz, (long long)f->num_users,
                 (long long)f->num_items, (long long)r->nnz, (long long)r->num_users, (long long)r->num_items);
        return buf;
    }
    if ((f->valid_count < 0) != (r->valid_count < 0)) {
        snprintf(buf, n, "was written %s validation ratings, this run has %s", f->valid_count < 0 ? "without" : "with",
                 r->valid_count < 0 ? "none" : "some");
        return buf;
    }
    if (f->valid_count != r->valid_count || f->valid_hash != r->valid_hash) {
        snprintf(buf, n, "was written for other validation ratings (%lld, this run has %lld)",
                 (long long)f->valid_count, (long long)r->valid_count);
        return buf;
    }
    DIFF(use_bias, "biases", "%d", int);
    DIFF(lambda, "lambda", "%g", double);
    DIFF(lambda_bias, "lambda_bias", "%g", double);
    DIFF(alpha, "alpha", "%g", double);
    DIFF(beta, "beta", "%g", double);
    DIFF(min_gain, "min_gain", "%g", double);
    DIFF(patience, "patience", "%d", int);
    DIFF(deterministic, "deterministic", "%d", int);
    DIFF(seed, "seed", "%llu", unsigned long long);
    DIFF(nbr_k, "K (neighbours)", "%d", int);
    DIFF(nbr_method, "neighbour method", "%d", int);
    DIFF(nbr_p, "LSH p", "%d", int);
    DIFF(nbr_q, "LSH q", "%d", int);
    DIFF(nbr_bits, "LSH bits", "%d", int);
    DIFF(nbr_psi, "psi power", "%d", int);
    DIFF(nbr_shrink, "GSM shrink", "%g", double);
    DIFF(nbr_seed, "neighbour seed", "%llu", unsigned long long);
    DIFF(beta_groups, "beta_groups", "%g", double);
    static const char *const group[6] = {"b", "bhat", "u", "v", "w", "c"};
    for (int i = 0; i < 6; i++) {
        DIFF(rates[i], group[i], "rate %g", double);
        DIFF(lambdas[i], group[i], "lambda %g", double);
    }
#undef DIFF
    return NULL;
}

static void get_factors(const unsigned char **p, lac_mf_factors *f)
{
    for (int64_t u = 0; u < f->num_users; u++, *p += (size_t)f->k * 4) memcpy(f->P + u * f->stride, *p, (size_t)f->k * 4);
    for (int64_t j = 0; j < f->num_items; j++, *p += (size_t)f->k * 4) memcpy(f->Q + j * f->stride, *p, (size_t)f->k * 4);
    memcpy(f->user_bias, *p, (size_t)f->num_users * 4);
    *p += (size_t)f->num_users * 4;
    memcpy(f->item_bias, *p, (size_t)f->num_items * 4);
    *p += (size_t)f->num_items * 4;
    size_t nk = (size_t)f->num_items * (size_t)f->nbr_k * 4;
    if (nk) memcpy(f->W, *p, nk);
    *p += nk;
    if (nk) memcpy(f->C, *p, nk);
    *p += nk;
}

/* Bytes of one set of factors of k for users and items, as stored, with W
 * and C of K neighbours an item. */
static double factors_bytes(double k, double users, double items, double nbr_k)
{
    return 4.0 * (k + 1.0) * (users + items) + 8.0 * items * nbr_k;
}

lac_status lac_mf_checkpoint_read(lac_ctx_t ctx, const char *path, const lac_mf_run *run, lac_mf_checkpoint *out)
{
    memset(out, 0, sizeof *out);
    FILE *fp;
    struct stat sb;
    if (stat(path, &sb) != 0)
        return lac_error(ctx, LAC_ERR_ARGUMENT, "no checkpoint %s to resume from: %s", path, strerror(errno));
    LAC_CHECK(lac_open_input(ctx, path, &fp));
    size_t fixed = 16 + sizeof(ck_header) + 8;
    ck_header want = header_of(run), h;
    unsigned char head[16 + sizeof(ck_header)];
    uint32_t version, header_bytes;
    uint64_t stored;
    char why[320];
    const char *diff;
    lac_status st = LAC_SUCCESS;
    long size = -1;
    if (fseek(fp, 0, SEEK_END) == 0) size = ftell(fp);
    if (size < 0 || fseek(fp, 0, SEEK_SET) != 0) {
        fclose(fp);
        return lac_error(ctx, LAC_ERR_IO, "cannot size %s", path);
    }
    if ((size_t)size < 16 + CK_V2_HEADER_BYTES + 8 || fread(head, 1, 16 + CK_V2_HEADER_BYTES, fp) != 16 + CK_V2_HEADER_BYTES ||
        memcmp(head, CK_MAGIC, 8) != 0) {
        fclose(fp);
        return lac_error(ctx, LAC_ERR_FORMAT, "%s is not an mf checkpoint (no LACUNACK header)", path);
    }
    memcpy(&version, head + 8, 4);
    memcpy(&header_bytes, head + 12, 4);
    memset(&h, 0, sizeof h);
    h.ranks = 1;   /* version 2: one process */
    if (!((version == CK_VERSION && header_bytes == sizeof h) || (version == 2 && header_bytes == CK_V2_HEADER_BYTES))) {
        fclose(fp);
        return lac_error(ctx, LAC_ERR_FORMAT, "%s: checkpoint version %u is not one this build reads (2 or %u)", path,
                         version, CK_VERSION);
    }
    if (header_bytes == sizeof h && fread(head + 16 + CK_V2_HEADER_BYTES, 1, sizeof h - CK_V2_HEADER_BYTES, fp) !=
                                        sizeof h - CK_V2_HEADER_BYTES) {
        fclose(fp);
        return lac_error(ctx, LAC_ERR_FORMAT, "%s: truncated checkpoint header", path);
    }
    memcpy(&h, head + 16, header_bytes);
    fixed = 16 + header_bytes + 8;
    /* the sizes the header promises must add up to the file's size */
    if (h.k < 1 || h.ranks < 1 || h.k > 4096 || h.num_users < 0 || h.num_items < 0 || h.num_users > INT32_MAX ||
        h.num_items > INT32_MAX || h.nbr_k < 0 || h.nbr_k > 4096 || h.epoch < 0 || h.best_epoch < 0 ||
        h.best_epoch > h.epoch || h.since_best < 0 ||
        (double)size != (double)fixed + 4.0 * (double)h.num_items * h.nbr_k +
                            (h.has_kept ? 2.0 : 1.0) * factors_bytes(h.k, (double)h.num_users, (double)h.num_items,
                                                                     h.nbr_k)) {
        fclose(fp);
        return lac_error(ctx, LAC_ERR_FORMAT, "%s: %ld bytes where the checkpoint header describes others "
                         "(truncated or corrupted)", path, size);
    }
    /* the shape is checked before the body is read: a mismatch costs nothing */
    if (h.kind != want.kind || h.k != want.k || h.num_users != want.num_users || h.num_items != want.num_items ||
        h.nbr_k != want.nbr_k) {
        fclose(fp);
        return lac_error(ctx, LAC_ERR_ARGUMENT, "checkpoint %s %s: not resuming", path,
                         mismatch(&h, &want, why, sizeof why));
    }
    unsigned char *buf = lac_malloc(ctx, (size_t)size);
    if (!buf) {
        fclose(fp);
        return LAC_ERR_OUT_OF_MEMORY;
    }
    out->block = buf;
    size_t got = fseek(fp, 0, SEEK_SET) == 0 ? fread(buf, 1, (size_t)size, fp) : 0;
    fclose(fp);
    if (got != (size_t)size) {
        st = lac_error(ctx, LAC_ERR_IO, "reading %s failed", path);
        goto fail;
    }
    memcpy(&stored, buf + size - 8, 8);
    if (lac_fnv1a64(LAC_HASH_SEED, buf, (size_t)size - 8) != stored) {
        st = lac_error(ctx, LAC_ERR_FORMAT, "%s: checksum mismatch (the checkpoint is corrupted or truncated)", path);
        goto fail;
    }
    if ((diff = mismatch(&h, &want, why, sizeof why))) {
        st = lac_error(ctx, LAC_ERR_ARGUMENT, "checkpoint %s %s: not resuming", path, diff);
        goto fail;
    }
    if (h.ranks != want.ranks)
        lac_log(ctx, h.deterministic ? LAC_LOG_WARN : LAC_LOG_INFO,
                "mf: checkpoint %s was written by %d MPI rank%s, this run has %d: it goes on from the whole state the "
                "checkpoint holds%s", path, h.ranks, h.ranks == 1 ? "" : "s", want.ranks,
                h.deterministic ? " (the deterministic result differs from a run without a break)" : "");
    else if (h.deterministic && h.threads != want.threads)
        lac_log(ctx, LAC_LOG_WARN, "mf: checkpoint %s was written with %d threads, this run has %d: the deterministic "
                "result differs from a run without a break", path, h.threads, want.threads);
    {
        const unsigned char *p = buf + fixed - 8;
        /* the neighbour lists the factors were trained with (a search of the
         * same data and seed finds them again; these are the ones that count) */
        size_t nk = (size_t)h.num_items * (size_t)h.nbr_k * sizeof *run->model->nbr;
        if (nk && memcmp(run->model->nbr, p, nk) != 0)
            lac_log(ctx, LAC_LOG_INFO, "mf: checkpoint %s: the neighbour lists it holds are used", path);
        if (nk) memcpy(run->model->nbr, p, nk);
        p += nk;
        LAC_CHECK_GOTO(factors_alloc(ctx, run->model, &out->current), st, fail);
        get_factors(&p, &out->current);
        if (h.has_kept) {
            LAC_CHECK_GOTO(factors_alloc(ctx, run->model, &out->kept), st, fail);
            get_factors(&p, &out->kept);
        }
    }
    out->progress.epoch = h.epoch;
    out->progress.best_epoch = h.best_epoch;
    out->progress.since_best = h.since_best;
    out->progress.best = h.best;
    out->progress.last_train = h.last_train;
    out->progress.last_valid = h.last_valid;
    out->progress.seconds = h.seconds;
    free(out->block);
    out->block = NULL;
    return LAC_SUCCESS;
fail:
    lac_mf_checkpoint_free(out);
    return st;
}

lac_status lac_mf_checkpoint_apply(lac_ctx_t ctx, lac_mf_checkpoint *ck, const lac_mf_backend *be,
                                   lac_mf_state *state)
{
    lac_status st = be->put(ctx, state, 0, &ck->current);
    if (st == LAC_SUCCESS && ck->kept.P) st = be->put(ctx, state, 1, &ck->kept);
    lac_mf_checkpoint_free(ck);
    return st;
}
