/* The contract between the neighbour search front end (src/mf/neighbours.c:
 * checks, the rating layouts, the LSH codes summed through lac_map, the bucket
 * keys) and its backends: the CPU one (src/mf/cpu/nbr_cpu.c) and a CUDA one
 * (src/backend/cuda/mf/, handed out by the gateway). A backend gets:
 *   lac_nbr_data  the ratings both ways (item-major and user-major CSR,
 *                 indices ascending within a row, repeated pairs resolved);
 *   lac_nbr_call  the data, K, and what the method needs;
 * and fills out[N x K] (dense item indices, best first). Everything a
 * backend returns must be the same on every backend: exact GSM is exact
 * (ties to the lower index), bucket counts are integers, the random fill
 * comes from lac_nbr_fill_item below. */
#ifndef LACUNA_MF_NBR_BACKEND_H
#define LACUNA_MF_NBR_BACKEND_H

#include "core/internal.h"
#include "core/random.h"

#include <math.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int64_t num_users, num_items, nnz;
    int64_t *item_start;   /* num_items + 1 */
    int32_t *item_user;    /* nnz: the users of item j, ascending */
    float *item_val;
    int64_t *user_start;   /* num_users + 1 */
    int32_t *user_item;    /* nnz: the items of user i, ascending */
    float *user_val;
    /* or, with item_start NULL, the caller's triples in read order (a
     * repeated pair's last rating counts): simLSH's searches only, which
     * gather them a block of items at a time (lac_nbr_blocks) */
    const int32_t *tri_user, *tri_item;
    const float *tri_val;
} lac_nbr_data;

/* Buckets to count, table by table: for item j (or row r of an update) in
 * table t, lo[t * stride + j] is the first slot of its bucket among table
 * t's members (member + base[t]), the bucket running to the first slot
 * with LAC_NBR_BUCKET_END set; -1 where nothing is counted (j alone in its
 * bucket, or the bucket over max_bucket). Only buckets that count hold
 * members, so the index is q x N x 4 bytes plus the partnered items. */
#define LAC_NBR_BUCKET_END ((int32_t)0x80000000)
typedef struct {
    int64_t tables, stride, filled;   /* filled: tables [0, filled) are in */
    int32_t *lo;                      /* tables x stride */
    int64_t *base;                    /* tables + 1 */
    int32_t *member;                  /* items, LAC_NBR_BUCKET_END on a bucket's last */
    int64_t cap;
} lac_nbr_index;

/* A key and its item, ordered by key then item (qsort's comparator). */
typedef struct {
    uint64_t key;
    int32_t item;
} lac_nbr_keyed;
int lac_nbr_cmp_keyed(const void *a, const void *b);

/* src/mf/nbr_index.c. init: an empty index of `tables` tables of `stride`
 * lists. add_keys: tables [ix->filled, ix->filled + n) from their keys
 * (keys[(t - filled) * ni + j], every item's), each sorted by key (ties by
 * item), on `threads` threads. */
lac_status lac_nbr_index_init(lac_ctx_t ctx, lac_nbr_index *ix, int64_t tables, int64_t stride);
lac_status lac_nbr_index_add_keys(lac_ctx_t ctx, lac_nbr_index *ix, const uint64_t *keys, int64_t n, int64_t ni,
                                  int max_bucket, int threads);
/* Appends table ix->filled's members (len entries, bucket ends marked). */
lac_status lac_nbr_index_append(lac_ctx_t ctx, lac_nbr_index *ix, const int32_t *member, int64_t len);
int64_t lac_nbr_index_bytes(const lac_nbr_index *ix);
void lac_nbr_index_free(lac_nbr_index *ix);

/* Blocks of items gathered from the ratings (src/mf/nbr_blocks.c), for the
 * simLSH searches that never lay them out whole. init: every item's count
 * (from the triples: each slice's, a slice of consecutive triples per
 * thread); blocks of at most max_items items and max_ratings ratings (one
 * item at least). next: the block from j0, its end returned, its ratings
 * (before repeated pairs go) in *run. gather: block [j0, j1) into start
 * (j1 - j0 + 1 offsets), user and val (room for its run): each item's
 * ratings ascending by user, a repeated pair's last kept, as the item-major
 * layout has them. */
typedef struct {
    const lac_nbr_data *data;
    int64_t max_ratings, max_items;
    int threads, slices;
    int64_t *count;         /* num_items + 1 */
    int32_t *slice_count;   /* slices x num_items (triples only) */
    int64_t most, most_items;   /* the largest block's run and items */
} lac_nbr_blocks;
lac_status lac_nbr_blocks_init(lac_ctx_t ctx, lac_nbr_blocks *b, const lac_nbr_data *d, int64_t max_ratings,
                               int64_t max_items, int threads);
int64_t lac_nbr_blocks_next(const lac_nbr_blocks *b, int64_t j0, int64_t *run);
lac_status lac_nbr_blocks_gather(lac_ctx_t ctx, const lac_nbr_blocks *b, int64_t j0, int64_t j1, int64_t *start,
                                 int32_t *user, float *val);
/* Host bytes of the counts and of a gather's cursors. */
int64_t lac_nbr_blocks_bytes(const lac_nbr_blocks *b);
void lac_nbr_blocks_free(lac_nbr_blocks *b);
/* Rows [start[r], start[r + 1]) of user/val in read order: each ascending by
 * user, a repeated user's last rating kept, closed up in place (start too). */
lac_status lac_nbr_tidy_rows(lac_ctx_t ctx, int64_t rows, int64_t *start, int32_t *user, float *val, int threads);

typedef struct {
    const lac_nbr_data *data;
    int k;
    double shrink;         /* GSM: lambda_rho */
    /* bucket methods: keys[t * N + j] is item j's bucket key in table t */
    int tables;
    const uint64_t *keys;
    int max_bucket;        /* larger buckets are passed over */
    uint64_t seed;         /* the random fill */
    int64_t bytes;         /* out: the backend's peak working memory */
    /* bucket methods: only these items' lists (out: num_rows x K, in this
     * order), all items their candidates (online updates); NULL: every item */
    const int32_t *rows;
    int64_t num_rows;
    /* simlsh_topk: the codes' shape (q is tables) and psi's power */
    int p, bits, psi_power;
    int declined;          /* out (simlsh_topk): 1 when the caller must key and count itself */
    /* bucket methods: the buckets already indexed (every item's, all
     * tables), in place of keys */
    const lac_nbr_index *index;
    /* simlsh_topk, where set (host memory): every item's sums, N x q p G as
     * the front end keeps them (codes[j * q p G + (t p + x) G + g]), and its
     * keys (keys_out[t * N + j]), for online updates */
    float *codes;
    uint64_t *keys_out;
} lac_nbr_call;

typedef struct {
    const char *name;
    /* Exact top-K by shrunk Pearson S (lac_nbr_shrunk_pearson), ties to the
     * lower index, items never rated together with j at S = 0. */
    lac_status (*gsm_topk)(lac_ctx_t ctx, lac_nbr_call *call, int32_t *out);
    /* For each item j (or each of call->rows): the items sharing j's bucket
     * in each table, counted over the tables; the K most frequent (ties:
     * lower index), then lac_nbr_fill_item's sequence when fewer than K. */
    lac_status (*bucket_topk)(lac_ctx_t ctx, lac_nbr_call *call, int32_t *out);
    /* simLSH from the ratings (keys as the front end makes them, then
     * bucket_topk's lists) in one go, every item; NULL, or call->declined
     * set, where the backend leaves it to the front end's lac_map sums. */
    lac_status (*simlsh_topk)(lac_ctx_t ctx, lac_nbr_call *call, int32_t *out);
} lac_nbr_backend;

extern const lac_nbr_backend lac_nbr_cpu_backend;
/* The CUDA table (src/backend/cuda/mf/nbr_gsm.cu, which hands it out):
 * exact GSM on the GPU, simLSH's keys and counts on the GPU
 * (src/backend/cuda/mf/nbr_lsh.cu) where its sums are exact; the other
 * bucket methods' counting is the CPU's. NULL without CUDA in the build. */
#ifdef LACUNA_HAVE_CUDA
const lac_nbr_backend *lac_nbr_backend_cuda(void);
#else
static inline const lac_nbr_backend *lac_nbr_backend_cuda(void) { return NULL; }
#endif

/* The CUDA table scores pairs on the device with the same function. */
#ifdef __CUDACC__
#define LAC_NBR_HOST_DEVICE __host__ __device__
#else
#define LAC_NBR_HOST_DEVICE
#endif

/* S = n/(n + shrink) rho from the co-rating sums of items x and y over their
 * n common users; rho = 0 when n < 2 or a centred variance is 0 (up to
 * rounding: below 1e-12 of the raw sum of squares). */
static inline LAC_NBR_HOST_DEVICE double lac_nbr_shrunk_pearson(double n, double sx, double sy, double sxx, double syy, double sxy,
                                            double shrink)
{
    if (n < 2) return 0.0;
    double vx = sxx - sx * sx / n, vy = syy - sy * sy / n;
    if (vx <= 1e-12 * sxx || vy <= 1e-12 * syy) return 0.0;
    double rho = (sxy - sx * sy / n) / sqrt(vx * vy);
    if (rho > 1.0) rho = 1.0;
    if (rho < -1.0) rho = -1.0;
    return n / (n + shrink) * rho;
}

/* simLSH's random strings: 64 bits of user u's string, block b (bits
 * 64 b .. 64 b + 63, bit c of the string is +1 when set, else -1). */
static inline LAC_NBR_HOST_DEVICE uint64_t lac_nbr_user_word(uint64_t seed, int64_t user, int64_t block)
{
    return lac_mix64(lac_mix64(seed ^ 0x5851F42D4C957F2Dull) ^ lac_mix64((uint64_t)user * 0x9E3779B97F4A7C15ull) ^
                     ((uint64_t)block * 0xD1342543DE82EF95ull));
}

/* A table's bucket key: LAC_NBR_KEY0 folded with its p codes in order. */
#define LAC_NBR_KEY0 0x243F6A8885A308D3ull
static inline LAC_NBR_HOST_DEVICE uint64_t lac_nbr_key_fold(uint64_t key, int x, uint64_t code)
{
    return lac_mix64(key ^ (code + ((uint64_t)x << 40)));
}

/* The t-th candidate of item j's random sequence (random method and fill):
 * any item, the caller skips j itself and repeats. */
static inline LAC_NBR_HOST_DEVICE int32_t lac_nbr_fill_item(uint64_t seed, int64_t j, int64_t t, int64_t num_items)
{
    uint64_t z = lac_mix64(seed * 0x9E3779B97F4A7C15ull ^ lac_mix64((uint64_t)j + 0x632BE59BD9B4E019ull) ^
                           ((uint64_t)t << 1));
    return (int32_t)((z >> 11) % (uint64_t)num_items);
}

/* Appends the random sequence of item j to out[0..have) until K distinct
 * items other than j are there (K < num_items). */
static inline LAC_NBR_HOST_DEVICE void lac_nbr_fill(uint64_t seed, int64_t j, int64_t num_items, int k, int32_t *out, int have)
{
    for (int64_t t = 0; have < k; t++) {
        int32_t c = lac_nbr_fill_item(seed, j, t, num_items);
        if (c == j) continue;
        int dup = 0;
        for (int x = 0; x < have && !dup; x++) dup = out[x] == c;
        if (!dup) out[have++] = c;
    }
}

#ifdef __cplusplus
}
#endif
#endif
