/* lac_mf_train_checkpointed through the public API: 10 epochs without a
 * break and 5 + 5 resumed give the same model bytes (deterministic CPU); a
 * checkpoint of another k, seed or data is LAC_ERR_ARGUMENT; a caller's
 * older, shorter lac_mf_checkpoint_params (struct_size) gets the defaults. */
#include "cpu_context.h"
#include "harness.h"
#include "lacuna/lacuna.h"
#include "core/hash.h"

#include <stddef.h>

static lac_ctx_t ctx;

static unsigned char *slurp(const char *path, long *size)
{
    FILE *fp = fopen(path, "rb");
    unsigned char *buf = NULL;
    *size = -1;
    if (fp && fseek(fp, 0, SEEK_END) == 0 && (*size = ftell(fp)) > 0 && fseek(fp, 0, SEEK_SET) == 0 &&
        (buf = malloc((size_t)*size)) && fread(buf, 1, (size_t)*size, fp) != (size_t)*size) {
        free(buf);
        buf = NULL;
    }
    if (fp) fclose(fp);
    return buf;
}

static int same_files(const char *a, const char *b)
{
    long na, nb;
    unsigned char *x = slurp(a, &na), *y = slurp(b, &nb);
    int same = x && y && na == nb && memcmp(x, y, (size_t)na) == 0;
    free(x);
    free(y);
    return same;
}

static lac_ratings_t generated(uint64_t seed)
{
    lac_mf_gen_params g = lac_mf_gen_params_default();
    g.users = 400;
    g.items = 150;
    g.ratings = 12000;
    g.seed = seed;
    lac_ratings_t r = NULL;
    CHECK_OK(ctx, lac_mf_generate(ctx, &g, &r));
    return r;
}

static void train_to(const lac_mf_params *p, const lac_mf_checkpoint_params *ck, lac_ratings_t r, const char *path)
{
    lac_mf_model_t m = NULL;
    CHECK_OK(ctx, lac_mf_train_checkpointed(ctx, p, ck, r, NULL, NULL, NULL, &m, NULL));
    if (m) CHECK_OK(ctx, lac_mf_model_save(ctx, path, m));
    lac_mf_model_destroy(&m);
}

TEST(five_and_five_resumed_is_ten)
{
    lac_ratings_t r = generated(3), other = generated(4);
    char ck_path[512], straight[512], resumed[512];
    harness_temp_path(ck_path, sizeof ck_path, "api.ck");
    harness_temp_path(straight, sizeof straight, "straight.bin");
    harness_temp_path(resumed, sizeof resumed, "resumed.bin");
    remove(ck_path);
    lac_mf_params p = lac_mf_params_default();
    p.k = 12;
    p.deterministic = 1;
    p.epochs = 10;
    train_to(&p, NULL, r, straight);
    lac_mf_checkpoint_params ck = lac_mf_checkpoint_params_default();
    CHECK_INT(ck.every, 1);
    CHECK_INT(ck.resume, 0);
    ck.path = ck_path;
    ck.every = 2;
    p.epochs = 5;
    train_to(&p, &ck, r, resumed);
    CHECK(!same_files(straight, resumed));
    ck.resume = 1;
    p.epochs = 10;
    train_to(&p, &ck, r, resumed);
    CHECK(same_files(straight, resumed));

    /* a version 2 file (one process, its header without the rank count)
     * resumes the same: the 5-epoch checkpoint rewritten in that layout */
    p.epochs = 5;
    ck.resume = 0;
    train_to(&p, &ck, r, resumed);
    long n = 0;
    unsigned char *v3 = slurp(ck_path, &n);
    CHECK(v3 != NULL && n > 24);
    if (v3 && n > 24) {
        uint32_t version, header_bytes;
        memcpy(&version, v3 + 8, 4);
        memcpy(&header_bytes, v3 + 12, 4);
        CHECK_INT(version, 3);
        uint32_t v2 = 2, v2_header = header_bytes - 8;   /* less the rank count and its spare word */
        FILE *fp = fopen(ck_path, "wb");
        uint64_t h = LAC_HASH_SEED;
        unsigned char head[16];
        memcpy(head, v3, 8);
        memcpy(head + 8, &v2, 4);
        memcpy(head + 12, &v2_header, 4);
        h = lac_fnv1a64(h, head, 16);
        h = lac_fnv1a64(h, v3 + 16, v2_header);
        h = lac_fnv1a64(h, v3 + 16 + header_bytes, (size_t)n - 16 - header_bytes - 8);
        CHECK(fp && fwrite(head, 1, 16, fp) == 16 && fwrite(v3 + 16, 1, v2_header, fp) == v2_header &&
              fwrite(v3 + 16 + header_bytes, 1, (size_t)n - 16 - header_bytes - 8, fp) ==
                  (size_t)n - 16 - header_bytes - 8 &&
              fwrite(&h, 8, 1, fp) == 1);
        if (fp) fclose(fp);
        free(v3);
    }
    ck.resume = 1;
    p.epochs = 10;
    train_to(&p, &ck, r, resumed);
    CHECK(same_files(straight, resumed));

    /* what does not fit is refused, naming it */
    lac_mf_model_t m = NULL;
    p.k = 13;
    CHECK_STATUS(ctx, lac_mf_train_checkpointed(ctx, &p, &ck, r, NULL, NULL, NULL, &m, NULL), LAC_ERR_ARGUMENT);
    CHECK_STR_CONTAINS(lac_last_error(ctx), "k 12, this run has 13");
    p.k = 12;
    p.seed = 2;
    CHECK_STATUS(ctx, lac_mf_train_checkpointed(ctx, &p, &ck, r, NULL, NULL, NULL, &m, NULL), LAC_ERR_ARGUMENT);
    CHECK_STR_CONTAINS(lac_last_error(ctx), "seed");
    p.seed = 1;
    CHECK_STATUS(ctx, lac_mf_train_checkpointed(ctx, &p, &ck, other, NULL, NULL, NULL, &m, NULL), LAC_ERR_ARGUMENT);
    CHECK_STR_CONTAINS(lac_last_error(ctx), "other training ratings");
    ck.path = NULL;
    CHECK_STATUS(ctx, lac_mf_train_checkpointed(ctx, &p, &ck, r, NULL, NULL, NULL, &m, NULL), LAC_ERR_ARGUMENT);
    CHECK(m == NULL);

    /* an older caller's struct: struct_size up to `path` only, every = 1 and no resume assumed */
    lac_mf_checkpoint_params older;
    memset(&older, 0x5a, sizeof older);
    older.struct_size = offsetof(lac_mf_checkpoint_params, every);
    older.path = ck_path;
    remove(ck_path);
    p.epochs = 3;
    train_to(&p, &older, r, resumed);
    FILE *fp = fopen(ck_path, "rb");
    CHECK(fp != NULL);
    if (fp) fclose(fp);
    remove(ck_path);
    remove(straight);
    remove(resumed);
    lac_ratings_destroy(&r);
    lac_ratings_destroy(&other);
}

int main(void)
{
    if (!(ctx = cpu_context(2))) return 1;
    RUN(five_and_five_resumed_is_ten);
    lac_ctx_destroy(&ctx);
    return harness_finish();
}
