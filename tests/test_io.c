/* I/O: .npy files written byte by byte here (independent of the writer),
 * round trips, every rejected form, atomic writes, text columns. */
#include "harness.h"
#include "lacuna/lacuna.h"

#include <sys/stat.h>

static lac_ctx_t ctx;

/* Writes a .npy file by hand: magic, version, header (padded), data. */
static void write_npy_raw(const char *path, int major, const char *dict, const void *data, size_t bytes)
{
    FILE *fp = fopen(path, "wb");
    size_t pre = major == 1 ? 10 : 12;
    size_t hl = strlen(dict) + 1;
    size_t total = (pre + hl + 63) / 64 * 64;
    hl = total - pre;
    fwrite("\x93NUMPY", 1, 6, fp);
    fputc(major, fp);
    fputc(0, fp);
    fputc((int)(hl & 0xff), fp);
    fputc((int)((hl >> 8) & 0xff), fp);
    if (major != 1) {
        fputc(0, fp);
        fputc(0, fp);
    }
    fputs(dict, fp);
    for (size_t i = strlen(dict); i < hl - 1; i++) fputc(' ', fp);
    fputc('\n', fp);
    if (bytes) fwrite(data, 1, bytes, fp);
    fclose(fp);
}

static int file_exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

TEST(reads_hand_written_v1_float32_matrix)
{
    char path[512];
    harness_temp_path(path, sizeof path, "v1.npy");
    float v[6] = {1.5f, -2, 3, 4, 5e-3f, 6e7f};
    write_npy_raw(path, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", v, sizeof v);
    lac_array a;
    CHECK_OK(ctx, lac_npy_load(ctx, path, 0, &a));
    CHECK_INT(a.dtype, LAC_FLOAT32);
    CHECK_INT(a.ndim, 2);
    CHECK_INT(a.shape[0], 2);
    CHECK_INT(a.shape[1], 3);
    CHECK(memcmp(a.data, v, sizeof v) == 0);
    lac_array_release(&a);
    CHECK_OK(ctx, lac_npy_load(ctx, path, LAC_NPY_MMAP, &a));
    CHECK(memcmp(a.data, v, sizeof v) == 0);
    lac_array_release(&a);
    remove(path);
}

TEST(reads_v2_and_v3_headers_and_all_dtypes)
{
    char path[512];
    harness_temp_path(path, sizeof path, "v2.npy");
    int64_t v[3] = {-1, 1LL << 40, 7};
    write_npy_raw(path, 2, "{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }", v, sizeof v);
    lac_array a;
    CHECK_OK(ctx, lac_npy_load(ctx, path, 0, &a));
    CHECK_INT(a.dtype, LAC_INT64);
    CHECK_INT(a.ndim, 1);
    CHECK_INT(((int64_t *)a.data)[1], 1LL << 40);
    lac_array_release(&a);
    int32_t w[2] = {5, -6};
    write_npy_raw(path, 3, "{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }", w, sizeof w);
    CHECK_OK(ctx, lac_npy_load(ctx, path, 0, &a));
    CHECK_INT(a.dtype, LAC_INT32);
    CHECK_INT(((int32_t *)a.data)[1], -6);
    lac_array_release(&a);
    double d[1] = {3.25};
    write_npy_raw(path, 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (1, 1, 1), }", d, sizeof d);
    CHECK_OK(ctx, lac_npy_load(ctx, path, 0, &a));
    CHECK_INT(a.ndim, 3);
    CHECK(((double *)a.data)[0] == 3.25);
    lac_array_release(&a);
    unsigned char bb[4] = {1, 0, 0, 1};
    write_npy_raw(path, 1, "{'descr': '|b1', 'fortran_order': False, 'shape': (4,), }", bb, sizeof bb);
    CHECK_OK(ctx, lac_npy_load(ctx, path, 0, &a));
    CHECK_INT(a.dtype, LAC_BOOL);
    CHECK(memcmp(a.data, bb, 4) == 0);
    lac_array_release(&a);
    remove(path);
}

TEST(rejects_what_it_cannot_read_with_the_reason)
{
    char path[512];
    harness_temp_path(path, sizeof path, "bad.npy");
    float v[4] = {0};
    lac_array a;
    struct {
        const char *dict;
        int status;
        const char *says;
    } cases[] = {
        {"{'descr': '>f4', 'fortran_order': False, 'shape': (4,), }", LAC_ERR_FORMAT, "big-endian"},
        {"{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", LAC_ERR_FORMAT, "Fortran"},
        {"{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }", LAC_ERR_DTYPE, "not supported"},
        {"{'descr': '<u2', 'fortran_order': False, 'shape': (8,), }", LAC_ERR_DTYPE, "not supported"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (5,), }", LAC_ERR_FORMAT, "truncated"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1), }", LAC_ERR_SHAPE, "dimensions"},
        {"{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", LAC_ERR_FORMAT, "descr"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_npy_raw(path, 1, cases[i].dict, v, sizeof v);
        CHECK_STATUS(ctx, lac_npy_load(ctx, path, 0, &a), cases[i].status);
        CHECK_STR_CONTAINS(lac_last_error(ctx), cases[i].says);
    }
    write_npy_raw(path, 4, "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", v, sizeof v);
    CHECK_STATUS(ctx, lac_npy_load(ctx, path, 0, &a), LAC_ERR_FORMAT);
    CHECK_STR_CONTAINS(lac_last_error(ctx), "version");
    FILE *fp = fopen(path, "wb");
    fputs("hello world, not numpy", fp);
    fclose(fp);
    CHECK_STATUS(ctx, lac_npy_load(ctx, path, 0, &a), LAC_ERR_FORMAT);
    CHECK_STR_CONTAINS(lac_last_error(ctx), "magic");
    unsigned char bad_bool[4] = {0, 1, 2, 0};
    write_npy_raw(path, 1, "{'descr': '|b1', 'fortran_order': False, 'shape': (4,), }", bad_bool, 4);
    CHECK_STATUS(ctx, lac_npy_load(ctx, path, 0, &a), LAC_ERR_FORMAT);
    remove(path);
}

TEST(save_then_load_round_trips_every_dtype)
{
    char path[512];
    harness_temp_path(path, sizeof path, "rt.npy");
    lac_dtype dtypes[] = {LAC_FLOAT32, LAC_FLOAT64, LAC_INT32, LAC_INT64, LAC_BOOL};
    unsigned long long seed = 42;
    for (size_t t = 0; t < 5; t++) {
        int64_t shape[3] = {3, 5, 7};
        lac_array a, b;
        CHECK_OK(ctx, lac_array_alloc(ctx, dtypes[t], 3, shape, &a));
        unsigned char *bytes = a.data;
        size_t n = (size_t)lac_array_count(&a) * lac_dtype_size(dtypes[t]);
        for (size_t i = 0; i < n; i++) bytes[i] = (unsigned char)harness_rand_u64(&seed);
        if (dtypes[t] == LAC_BOOL)
            for (size_t i = 0; i < n; i++) bytes[i] &= 1;
        CHECK_OK(ctx, lac_npy_save(ctx, path, &a));
        CHECK_OK(ctx, lac_npy_load(ctx, path, 0, &b));
        CHECK_INT(b.dtype, dtypes[t]);
        CHECK_INT(b.ndim, 3);
        CHECK_INT(b.shape[2], 7);
        CHECK(memcmp(a.data, b.data, n) == 0);
        /* The header is padded so the data starts on a 64-byte boundary. */
        struct stat sb;
        stat(path, &sb);
        CHECK_INT((sb.st_size - (long long)n) % 64, 0);
        lac_array_release(&a);
        lac_array_release(&b);
    }
    remove(path);
}

TEST(failed_save_leaves_no_file_and_keeps_the_old_one)
{
    char path[512];
    lac_array a;
    float v[2] = {1, 2};
    a = lac_array_vector(v, LAC_FLOAT32, 2);
    CHECK_STATUS(ctx, lac_npy_save(ctx, "/nonexistent-dir/out.npy", &a), LAC_ERR_IO);
    CHECK(!file_exists("/nonexistent-dir/out.npy"));
    harness_temp_path(path, sizeof path, "keep.npy");
    CHECK_OK(ctx, lac_npy_save(ctx, path, &a));
    /* Outputs get the ordinary mode (0666 less the umask), not mkstemp's 0600. */
    mode_t mask = umask(022);
    CHECK_OK(ctx, lac_npy_save(ctx, path, &a));
    umask(mask);
    struct stat sb;
    CHECK(stat(path, &sb) == 0);
    CHECK_INT(sb.st_mode & 0777, 0644);
    lac_array bad = a;
    bad.dtype = (lac_dtype)9;
    CHECK_STATUS(ctx, lac_npy_save(ctx, path, &bad), LAC_ERR_DTYPE);
    lac_array back;
    CHECK_OK(ctx, lac_npy_load(ctx, path, 0, &back));
    CHECK(((float *)back.data)[1] == 2.0f);
    lac_array_release(&back);
    remove(path);
}

TEST(text_columns_load_and_save)
{
    char path[512];
    harness_temp_path(path, sizeof path, "cols.txt");
    FILE *fp = fopen(path, "w");
    fputs("# header comment\n1 2.5\n\n3,4   # trailing\n-5\t6e2\n", fp);
    fclose(fp);
    lac_array a;
    CHECK_OK(ctx, lac_text_load(ctx, path, LAC_FLOAT64, &a));
    CHECK_INT(a.ndim, 2);
    CHECK_INT(a.shape[0], 3);
    CHECK_INT(a.shape[1], 2);
    CHECK(((double *)a.data)[5] == 600.0);
    CHECK_OK(ctx, lac_text_save(ctx, path, &a));
    lac_array b;
    CHECK_OK(ctx, lac_text_load(ctx, path, LAC_FLOAT64, &b));
    CHECK(memcmp(a.data, b.data, 6 * sizeof(double)) == 0);
    lac_array_release(&a);
    lac_array_release(&b);
    fp = fopen(path, "w");
    fputs("1\n2\nx3\n", fp);
    fclose(fp);
    CHECK_STATUS(ctx, lac_text_load(ctx, path, LAC_INT64, &a), LAC_ERR_FORMAT);
    CHECK_STR_CONTAINS(lac_last_error(ctx), ":3:");
    fp = fopen(path, "w");
    fputs("1 2\n3\n", fp);
    fclose(fp);
    CHECK_STATUS(ctx, lac_text_load(ctx, path, LAC_INT64, &a), LAC_ERR_FORMAT);
    CHECK_STR_CONTAINS(lac_last_error(ctx), "first row had 2");
    fp = fopen(path, "w");
    fputs("3000000000\n", fp);
    fclose(fp);
    CHECK_STATUS(ctx, lac_text_load(ctx, path, LAC_INT32, &a), LAC_ERR_RANGE);
    CHECK_OK(ctx, lac_text_load(ctx, path, LAC_INT64, &a));
    CHECK_INT(((int64_t *)a.data)[0], 3000000000LL);
    lac_array_release(&a);
    remove(path);
}

int main(void)
{
    lac_ctx_params p = lac_ctx_params_default();
    p.backend = LAC_BACKEND_CPU;
    if (lac_ctx_create(&p, &ctx) != LAC_SUCCESS) return 1;
    RUN(reads_hand_written_v1_float32_matrix);
    RUN(reads_v2_and_v3_headers_and_all_dtypes);
    RUN(rejects_what_it_cannot_read_with_the_reason);
    RUN(save_then_load_round_trips_every_dtype);
    RUN(failed_save_leaves_no_file_and_keeps_the_old_one);
    RUN(text_columns_load_and_save);
    lac_ctx_destroy(&ctx);
    return harness_finish();
}
