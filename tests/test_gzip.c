/* gzip-compressed inputs: every reader (ratings in each format, edge lists,
 * Matrix Market graphs, text columns, .npy read and mapped, vertex sets, mf
 * models) reads a file compressed by gzip(1) exactly as it reads the plain
 * file, whatever the name (gzip is known by its magic bytes); a plain file
 * named .gz is read as it is; damaged or truncated gzip data is an input
 * error naming the file; a header's sizes are checked against the
 * decompressed bytes. */
#include "harness.h"
#include "lacuna/lacuna.h"

#include <stdint.h>

static lac_ctx_t ctx;

static void write_file(const char *path, const char *text)
{
    FILE *fp = fopen(path, "wb");
    if (!fp) return;
    fputs(text, fp);
    fclose(fp);
}

/* gz: `path` compressed by gzip(1) -9 (the reference compressor). */
static int gzip_to(const char *path, const char *gz)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "gzip -9 -c '%s' > '%s'", path, gz);
    return system(cmd) == 0;
}

static void temp(char *buf, const char *name) { harness_temp_path(buf, 512, name); }

/* A plain file with text, and its gzip under two names: NAME.gz and one
 * without the suffix (the magic decides). */
static int plain_and_gz(const char *name, const char *text, char *plain, char *gz, char *disguised)
{
    char n[256];
    temp(plain, name);
    snprintf(n, sizeof n, "%s.gz", name);
    temp(gz, n);
    snprintf(n, sizeof n, "gz-as-%s", name);
    temp(disguised, n);
    write_file(plain, text);
    return gzip_to(plain, gz) && gzip_to(plain, disguised);
}

static void same_ratings(lac_ratings_t a, lac_ratings_t b)
{
    CHECK(a && b);
    if (!a || !b) return;
    CHECK_INT(lac_ratings_count(b), lac_ratings_count(a));
    for (int64_t i = 0; i < lac_ratings_count(a); i++) {
        int64_t ua, ia, ub, ib;
        float ra, rb;
        CHECK_OK(ctx, lac_ratings_get(a, i, &ua, &ia, &ra));
        CHECK_OK(ctx, lac_ratings_get(b, i, &ub, &ib, &rb));
        if (strcmp(lac_ratings_user_id(a, ua), lac_ratings_user_id(b, ub)) ||
            strcmp(lac_ratings_item_id(a, ia), lac_ratings_item_id(b, ib)) || ra != rb) {
            HARNESS_FAIL("rating %lld differs", (long long)i);
            return;
        }
    }
}

TEST(ratings_in_every_format)
{
    static const struct {
        const char *name, *text;
    } files[] = {
        {"r.txt", "# triples\n1 10 4\n2 10 3.5\n1 11 5\n"},
        {"r.dat", "1::10::4::978300760\n2::10::3.5::978300761\n1::11::5::978300762\n"},
        {"r.tsv", "1\t10\t4\t881250949\n2\t10\t3.5\t881250950\n1\t11\t5\t881250951\n"},
        {"r.csv", "userId,movieId,rating,timestamp\n1,10,4,1\n\"2,b\",10,3.5,2\n1,11,5,3\n"},
        {"r.mtx", "%%MatrixMarket matrix coordinate real general\n2 11 3\n1 10 4\n2 10 3.5\n1 11 5\n"},
    };
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        char plain[512], gz[512], disguised[512];
        CHECK(plain_and_gz(files[f].name, files[f].text, plain, gz, disguised));
        lac_ratings_t a = NULL, b = NULL, c = NULL;
        CHECK_OK(ctx, lac_ratings_read(ctx, plain, NULL, &a));
        CHECK_OK(ctx, lac_ratings_read(ctx, gz, NULL, &b));
        CHECK_OK(ctx, lac_ratings_read(ctx, disguised, NULL, &c));
        CHECK_INT(lac_ratings_count(a), 3);
        same_ratings(a, b);
        same_ratings(a, c);
        lac_ratings_destroy(&a);
        lac_ratings_destroy(&b);
        lac_ratings_destroy(&c);
        remove(plain);
        remove(gz);
        remove(disguised);
    }
}

static void same_graph(const char *plain, const char *gz)
{
    lac_graph_t a = NULL, b = NULL;
    CHECK_OK(ctx, lac_graph_load(ctx, plain, NULL, &a));
    CHECK_OK(ctx, lac_graph_load(ctx, gz, NULL, &b));
    lac_graph_info ia = lac_graph_get_info(a), ib = lac_graph_get_info(b);
    CHECK(ia.num_vertices > 0);
    CHECK_INT(ib.num_vertices, ia.num_vertices);
    CHECK_INT(ib.num_edges, ia.num_edges);
    CHECK_INT(ib.lines, ia.lines);
    CHECK(ib.fingerprint == ia.fingerprint);
    lac_graph_destroy(&a);
    lac_graph_destroy(&b);
}

TEST(edge_lists_and_matrix_market_graphs)
{
    char plain[512], gz[512], disguised[512];
    /* a SNAP-style list, long enough that gzip really compresses it */
    char *text = malloc(200000), *at = text;
    at += sprintf(at, "# Directed graph (each unordered pair of nodes is saved once)\n# FromNodeId\tToNodeId\n");
    unsigned long long rng = 7;
    for (int i = 0; i < 5000; i++)
        at += sprintf(at, "%d\t%d\n", (int)(harness_rand_u64(&rng) % 900), (int)(harness_rand_u64(&rng) % 900) + 1000);
    CHECK(plain_and_gz("g.txt", text, plain, gz, disguised));
    same_graph(plain, gz);
    same_graph(plain, disguised);
    remove(plain);
    remove(gz);
    remove(disguised);
    CHECK(plain_and_gz("g.mtx", "%%MatrixMarket matrix coordinate real symmetric\n4 4 3\n2 1 1.5\n3 2 2\n4 1 0.5\n",
                       plain, gz, disguised));
    same_graph(plain, gz);
    same_graph(plain, disguised);
    /* a vertex set of the graph, compressed too */
    lac_graph_t g = NULL;
    CHECK_OK(ctx, lac_graph_load(ctx, gz, NULL, &g));
    char ids[512], ids_gz[512], ids_other[512];
    CHECK(plain_and_gz("ids.txt", "# observed\n1, 3\n", ids, ids_gz, ids_other));
    unsigned char m1[4] = {9, 9, 9, 9}, m2[4] = {9, 9, 9, 9};
    lac_array a1 = lac_array_vector(m1, LAC_BOOL, 4), a2 = lac_array_vector(m2, LAC_BOOL, 4);
    CHECK_OK(ctx, lac_graph_load_vertex_set(ctx, g, ids, &a1));
    CHECK_OK(ctx, lac_graph_load_vertex_set(ctx, g, ids_gz, &a2));
    CHECK(memcmp(m1, m2, 4) == 0);
    CHECK_INT(m1[0] + m1[1] + m1[2] + m1[3], 2);
    lac_graph_destroy(&g);
    remove(plain);
    remove(gz);
    remove(disguised);
    remove(ids);
    remove(ids_gz);
    remove(ids_other);
    free(text);
}

TEST(text_columns_and_npy)
{
    char plain[512], gz[512], disguised[512];
    CHECK(plain_and_gz("x.txt", "# x y\n1.5 2\n-3 4e2\n5, 6\n", plain, gz, disguised));
    lac_array a, b;
    CHECK_OK(ctx, lac_text_load(ctx, plain, LAC_FLOAT64, &a));
    CHECK_OK(ctx, lac_text_load(ctx, gz, LAC_FLOAT64, &b));
    CHECK_INT(b.shape[0], 3);
    CHECK_INT(b.shape[1], 2);
    CHECK(a.data && b.data && memcmp(a.data, b.data, 6 * sizeof(double)) == 0);
    lac_array_release(&a);
    lac_array_release(&b);
    remove(plain);
    remove(gz);
    remove(disguised);

    double v[1000];
    for (int i = 0; i < 1000; i++) v[i] = i % 17 - 0.25 * i;
    lac_array x = lac_array_matrix(v, LAC_FLOAT64, 250, 4);
    temp(plain, "x.npy");
    temp(gz, "x.npy.gz");
    CHECK_OK(ctx, lac_npy_save(ctx, plain, &x));
    CHECK(gzip_to(plain, gz));
    for (unsigned flags = 0; flags <= LAC_NPY_MMAP; flags++) {
        lac_array y;
        CHECK_OK(ctx, lac_npy_load(ctx, gz, flags, &y));
        CHECK_INT(y.shape[0], 250);
        CHECK_INT(y.shape[1], 4);
        CHECK(y.data && memcmp(y.data, v, sizeof v) == 0);
        lac_array_release(&y);
    }
    remove(plain);
    remove(gz);
}

TEST(models_read_compressed)
{
    int64_t u[6] = {1, 1, 2, 2, 3, 3}, i[6] = {1, 2, 2, 3, 1, 3};
    float r[6] = {5, 3, 4, 2, 1, 4};
    lac_ratings_t ratings = NULL;
    CHECK_OK(ctx, lac_ratings_from_arrays(ctx, 6, u, i, r, &ratings));
    lac_mf_params p = lac_mf_params_default();
    p.k = 4;
    p.epochs = 3;
    lac_mf_model_t m = NULL, back = NULL;
    CHECK_OK(ctx, lac_mf_train(ctx, &p, ratings, NULL, NULL, NULL, &m, NULL));
    char plain[512], gz[512];
    temp(plain, "m.bin");
    temp(gz, "m.bin.gz");
    CHECK_OK(ctx, lac_mf_model_save(ctx, plain, m));
    CHECK(gzip_to(plain, gz));
    CHECK_OK(ctx, lac_mf_model_load(ctx, gz, &back));
    float pa[6], pb[6];
    CHECK_OK(ctx, lac_mf_predict(ctx, m, ratings, pa, NULL, NULL, NULL));
    if (back) CHECK_OK(ctx, lac_mf_predict(ctx, back, ratings, pb, NULL, NULL, NULL));
    CHECK(back && memcmp(pa, pb, sizeof pa) == 0);
    lac_mf_model_destroy(&m);
    lac_mf_model_destroy(&back);
    lac_ratings_destroy(&ratings);
    remove(plain);
    remove(gz);
}

TEST(damaged_gzip_is_an_input_error)
{
    char plain[512], gz[512], disguised[512], cut[512];
    char *text = malloc(100000), *at = text;
    for (int k = 0; k < 4000; k++) at += sprintf(at, "%d %d %d\n", k % 97, k % 89, 1 + k % 5);
    CHECK(plain_and_gz("d.txt", text, plain, gz, disguised));
    /* truncated: the first half of the compressed bytes */
    FILE *in = fopen(gz, "rb");
    unsigned char buf[65536];
    size_t n = in ? fread(buf, 1, sizeof buf, in) : 0;
    if (in) fclose(in);
    CHECK(n > 100 && n < sizeof buf);
    temp(cut, "cut.gz");
    FILE *out = fopen(cut, "wb");
    if (out) {
        fwrite(buf, 1, n / 2, out);
        fclose(out);
    }
    lac_ratings_t r = NULL;
    CHECK_STATUS(ctx, lac_ratings_read(ctx, cut, NULL, &r), LAC_ERR_FORMAT);
    CHECK_STR_CONTAINS(lac_last_error(ctx), "damaged gzip data");
    CHECK_STR_CONTAINS(lac_last_error(ctx), "cut.gz");
    /* a byte of the deflate stream flipped */
    buf[n / 2] ^= 0x55;
    out = fopen(cut, "wb");
    if (out) {
        fwrite(buf, 1, n, out);
        fclose(out);
    }
    CHECK_STATUS(ctx, lac_ratings_read(ctx, cut, NULL, &r), LAC_ERR_FORMAT);
    CHECK_STR_CONTAINS(lac_last_error(ctx), "damaged gzip data");
    lac_graph_t g = NULL;
    CHECK_STATUS(ctx, lac_graph_load(ctx, cut, NULL, &g), LAC_ERR_FORMAT);
    lac_array a;
    CHECK_STATUS(ctx, lac_text_load(ctx, cut, LAC_FLOAT64, &a), LAC_ERR_FORMAT);
    CHECK_STATUS(ctx, lac_npy_load(ctx, cut, 0, &a), LAC_ERR_FORMAT);
    CHECK(r == NULL && g == NULL);
    /* a plain file named .gz is read as it is */
    char named[512];
    temp(named, "plain.gz");
    write_file(named, "a b 3\n");
    CHECK_OK(ctx, lac_ratings_read(ctx, named, NULL, &r));
    CHECK_INT(lac_ratings_count(r), 1);
    lac_ratings_destroy(&r);
    /* a Matrix Market size line is checked against the decompressed bytes */
    char mtx[512], mtx_gz[512], mtx_other[512];
    CHECK(plain_and_gz("many.mtx", "%%MatrixMarket matrix coordinate pattern general\n3 3 1000000\n1 2\n", mtx, mtx_gz,
                       mtx_other));
    CHECK_STATUS(ctx, lac_graph_load(ctx, mtx_gz, NULL, &g), LAC_ERR_FORMAT);
    CHECK_STR_CONTAINS(lac_last_error(ctx), "promises 1000000 entries");
    remove(plain);
    remove(gz);
    remove(disguised);
    remove(cut);
    remove(named);
    remove(mtx);
    remove(mtx_gz);
    remove(mtx_other);
    free(text);
}

int main(void)
{
    if (system("gzip --version >/dev/null 2>&1") != 0) {
        printf("no gzip(1) to make the test files: skipped\n");
        return 0;
    }
    lac_ctx_params p = lac_ctx_params_default();
    p.backend = LAC_BACKEND_CPU;
    if (lac_ctx_create(&p, &ctx) != LAC_SUCCESS) return 1;
    RUN(ratings_in_every_format);
    RUN(edge_lists_and_matrix_market_graphs);
    RUN(text_columns_and_npy);
    RUN(models_read_compressed);
    RUN(damaged_gzip_is_an_input_error);
    lac_ctx_destroy(&ctx);
    return harness_finish();
}
