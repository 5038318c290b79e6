/* Writes the binary seeds of the corpus (fuzz/corpus/): .npy files of every
 * dtype, version and shape the reader takes and a few it refuses, mf models,
 * and basis caches of the harness's graph. The text seeds are written by
 * hand. Run from the build: fuzz_make_seeds fuzz/corpus */
#include "fuzz_common.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *root;

static void check(lac_ctx_t ctx, lac_status st, const char *what)
{
    if (st < 0) fuzz_fail("%s: %s", what, lac_last_error(ctx));
}

static void write_file(const char *harness, const char *name, const void *data, size_t size)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", root, harness);
    mkdir(path, 0777);
    snprintf(path, sizeof path, "%s/%s/%s", root, harness, name);
    FILE *fp = fopen(path, "wb");
    if (!fp || fwrite(data, 1, size, fp) != size || fclose(fp) != 0) fuzz_fail("writing %s: %s", path, strerror(errno));
}

static char *path_of(const char *harness, const char *name)
{
    static char path[4096];
    snprintf(path, sizeof path, "%s/%s", root, harness);
    mkdir(path, 0777);
    snprintf(path, sizeof path, "%s/%s/%s", root, harness, name);
    unlink(path);
    return path;
}

/* A .npy file as numpy writes it: magic, version, little-endian header
 * length, the dictionary padded with spaces and a newline to a multiple of 64. */
static void npy(const char *name, int major, const char *dict, const void *data, size_t bytes)
{
    unsigned char buf[1024];
    size_t pre = major == 1 ? 10 : 12, len = strlen(dict);
    size_t total = (pre + len + 1 + 63) / 64 * 64, hl = total - pre;
    memcpy(buf, "\x93NUMPY", 6);
    buf[6] = (unsigned char)major;
    buf[7] = 0;
    for (size_t i = 0; i < pre - 8; i++) buf[8 + i] = (unsigned char)(hl >> (8 * i));
    memcpy(buf + pre, dict, len);
    memset(buf + pre + len, ' ', hl - len - 1);
    buf[total - 1] = '\n';
    if (bytes) memcpy(buf + total, data, bytes);
    write_file("npy", name, buf, total + bytes);
}

static void npy_seeds(void)
{
    float f4[3] = {1.5f, -2.0f, 3.25f};
    double f8[4] = {1, 2, 3, 4};
    int32_t i4[4] = {0, 1, -1, 2147483647};
    int64_t i8[4] = {0, 7, -9, 1};
    unsigned char b1[3] = {1, 0, 1};
    npy("float32_vector.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", f4, sizeof f4);
    npy("float64_matrix.npy", 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 2), }", f8, sizeof f8);
    npy("int32_vector.npy", 1, "{'descr': '<i4', 'fortran_order': False, 'shape': (4,), }", i4, sizeof i4);
    npy("int64_4d.npy", 1, "{'descr': '<i8', 'fortran_order': False, 'shape': (2, 2, 1, 1), }", i8, sizeof i8);
    npy("bool_vector.npy", 1, "{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", b1, sizeof b1);
    npy("scalar.npy", 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (), }", f8, 8);
    npy("empty.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (0,), }", NULL, 0);
    npy("version2.npy", 2, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", f4, sizeof f4);
    npy("version3.npy", 3, "{\"descr\": \"<i8\", \"fortran_order\": False, \"shape\": (2, 2), }", i8, sizeof i8);
    npy("big_endian.npy", 1, "{'descr': '>f4', 'fortran_order': False, 'shape': (3,), }", f4, sizeof f4);
    npy("fortran.npy", 1, "{'descr': '<f8', 'fortran_order': True, 'shape': (2, 2), }", f8, sizeof f8);
    npy("truncated.npy", 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (9,), }", f8, sizeof f8);
    npy("five_dims.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 3), }", f4, sizeof f4);
    npy("uint8.npy", 1, "{'descr': '|u1', 'fortran_order': False, 'shape': (3,), }", b1, sizeof b1);
    unsigned char bad_bool[3] = {1, 2, 0};
    npy("bool_bad_byte.npy", 1, "{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", bad_bool, sizeof bad_bool);
}

static void model_seeds(lac_ctx_t ctx)
{
    static const char *ratings[] = {
        "1 1 5\n1 2 3\n2 1 4\n2 3 1\n3 2 2\n3 3 5\n",
        "alice matrix 5\nalice heat 3.5\nbob matrix 1\ncarol heat 4\ncarol up 2\n",
    };
    static const char *names[] = {"small_k2.lmf", "string_ids_k3.lmf"};
    for (int i = 0; i < 2; i++) {
        lac_ratings_read_params rp = lac_ratings_read_params_default();
        lac_ratings_t r = NULL;
        check(ctx, lac_ratings_read(ctx, fuzz_file((const uint8_t *)ratings[i], strlen(ratings[i])), &rp, &r), "ratings");
        lac_mf_params p = lac_mf_params_default();
        p.k = 2 + i;
        p.epochs = 3;
        p.seed = 1;
        p.use_bias = i;
        lac_mf_model_t m = NULL;
        check(ctx, lac_mf_train(ctx, &p, r, NULL, NULL, NULL, &m, NULL), "train");
        check(ctx, lac_mf_model_save(ctx, path_of("mf_model", names[i]), m), "save");
        lac_mf_model_destroy(&m);
        lac_ratings_destroy(&r);
    }
}

static void gft_seeds(lac_ctx_t ctx)
{
    lac_graph_t g = fuzz_graph_from_text(ctx, FUZZ_GRAPH_PLAIN);
    lac_gft_t gft = NULL;
    check(ctx, lac_gft_create(ctx, g, LAC_FLOAT32, &gft), "gft float32");
    check(ctx, lac_gft_save(ctx, gft, path_of("gft_cache", "float32.cache")), "save");
    lac_gft_destroy(&gft);
    check(ctx, lac_gft_create(ctx, g, LAC_FLOAT64, &gft), "gft float64");
    check(ctx, lac_gft_save(ctx, gft, path_of("gft_cache", "float64.cache")), "save");
    lac_gft_destroy(&gft);
    lac_graph_destroy(&g);
    /* a cache of another graph (its fingerprint and size differ) */
    g = fuzz_graph_from_text(ctx, "0 1\n1 2\n");
    check(ctx, lac_gft_create(ctx, g, LAC_FLOAT64, &gft), "gft other");
    check(ctx, lac_gft_save(ctx, gft, path_of("gft_cache", "other_graph.cache")), "save");
    lac_gft_destroy(&gft);
    lac_graph_destroy(&g);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s CORPUS_DIR (fuzz/corpus)\n", argv[0]);
        return 2;
    }
    root = argv[1];
    lac_ctx_t ctx = fuzz_ctx_new();
    npy_seeds();
    model_seeds(ctx);
    gft_seeds(ctx);
    lac_ctx_destroy(&ctx);
    return 0;
}
