/* I/O: .npy files written byte by byte here (independent of the writer),
 * round trips, every rejected form, atomic writes, text columns; output sets
 * (staged until committed, dropped on failure), writes through symbolic
 * links and into devices and FIFOs, folders refused as files, the basis
 * cache that never replaces another file. */
#include "harness.h"
#include "lacuna/lacuna.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>

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

/* ---- output sets, links, devices --------------------------------------- */
static void write_bytes(const char *path, const char *text)
{
    FILE *fp = fopen(path, "wb");
    fputs(text, fp);
    fclose(fp);
}

/* Whether path holds exactly text. */
static int holds(const char *path, const char *text)
{
    char buf[256] = {0};
    FILE *fp = fopen(path, "rb");
    if (!fp) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, fp);
    fclose(fp);
    return n == strlen(text) && memcmp(buf, text, n) == 0;
}

static long long inode_of(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 ? (long long)sb.st_ino : -1;
}

/* Files of folder whose name has ".tmp." in it: temporaries left behind. */
static int temporaries_in(const char *folder)
{
    DIR *d = opendir(folder);
    int count = 0;
    for (struct dirent *e; d && (e = readdir(d));) count += strstr(e->d_name, ".tmp.") != NULL;
    if (d) closedir(d);
    return count;
}

static void remove_folder(const char *folder)
{
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", folder);
    if (system(cmd) != 0) HARNESS_FAIL("cannot remove %s", folder);
}

/* A fresh folder for one test. */
static void make_folder(char *folder, size_t len, const char *name)
{
    harness_temp_path(folder, len, name);
    remove_folder(folder);
    mkdir(folder, 0755);
}

static float three_values[3] = {1, 2, 3};

static int holds_three_values(const char *path)
{
    lac_array back;
    if (lac_npy_load(ctx, path, 0, &back) != LAC_SUCCESS) return 0;
    int ok = back.dtype == LAC_FLOAT32 && back.shape[0] == 3 && memcmp(back.data, three_values, sizeof three_values) == 0;
    lac_array_release(&back);
    return ok;
}

TEST(output_set_renames_every_file_at_commit)
{
    char folder[512], a[600], b[600];
    make_folder(folder, sizeof folder, "set");
    snprintf(a, sizeof a, "%s/a.npy", folder);
    snprintf(b, sizeof b, "%s/b.txt", folder);
    write_bytes(a, "the old a");
    long long inode = inode_of(a);
    lac_array x = lac_array_vector(three_values, LAC_FLOAT32, 3);
    CHECK_OK(ctx, lac_outputs_begin(ctx));
    CHECK_STATUS(ctx, lac_outputs_begin(ctx), LAC_ERR_ARGUMENT);
    CHECK_OK(ctx, lac_npy_save(ctx, a, &x));
    CHECK_OK(ctx, lac_text_save(ctx, b, &x));
    /* staged: the old file as it was, the new one not there, no name in the folder */
    CHECK(holds(a, "the old a"));
    CHECK_INT(inode_of(a), inode);
    CHECK(!file_exists(b));
    CHECK_INT(temporaries_in(folder), 0);
    CHECK_OK(ctx, lac_outputs_commit(ctx));
    CHECK(holds_three_values(a));
    CHECK(holds(b, "1\n2\n3\n"));
    CHECK_INT(temporaries_in(folder), 0);
    CHECK_OK(ctx, lac_outputs_commit(ctx));   /* none open: nothing to do */
    CHECK_OK(ctx, lac_npy_save(ctx, b, &x));  /* outside a set: at once */
    CHECK(holds_three_values(b));
    remove_folder(folder);
}

TEST(bytes_save_writes_them_as_they_are_in_the_set)
{
    char folder[512], a[600], missing[600];
    make_folder(folder, sizeof folder, "bytes");
    snprintf(a, sizeof a, "%s/p.svg", folder);
    snprintf(missing, sizeof missing, "%s/no/such/p.svg", folder);
    static const char picture[] = "<svg>\0binary\n</svg>";
    CHECK_OK(ctx, lac_bytes_save(ctx, a, picture, sizeof picture));
    FILE *fp = fopen(a, "rb");
    char back[64] = {0};
    size_t n = fp ? fread(back, 1, sizeof back, fp) : 0;
    if (fp) fclose(fp);
    CHECK_INT(n, sizeof picture);
    CHECK(memcmp(back, picture, sizeof picture) == 0);
    CHECK_OK(ctx, lac_bytes_save(ctx, a, NULL, 0));   /* empty */
    CHECK(holds(a, ""));
    CHECK_STATUS(ctx, lac_bytes_save(ctx, a, NULL, 3), LAC_ERR_ARGUMENT);
    /* staged in a set, dropped with it */
    write_bytes(a, "the old picture");
    CHECK_OK(ctx, lac_outputs_begin(ctx));
    CHECK_OK(ctx, lac_bytes_save(ctx, a, "new", 3));
    CHECK(holds(a, "the old picture"));
    CHECK_STATUS(ctx, lac_bytes_save(ctx, missing, "new", 3), LAC_ERR_IO);
    lac_outputs_abort(ctx);
    CHECK(holds(a, "the old picture"));
    CHECK_INT(temporaries_in(folder), 0);
    remove_folder(folder);
}

TEST(failed_output_set_keeps_every_file_as_it_was)
{
    char folder[512], a[600], b[600], missing[600];
    make_folder(folder, sizeof folder, "setfail");
    snprintf(a, sizeof a, "%s/a.npy", folder);
    snprintf(b, sizeof b, "%s/b.npy", folder);
    snprintf(missing, sizeof missing, "%s/no/such/folder.npy", folder);
    write_bytes(a, "the old a");
    write_bytes(b, "the old b");
    long long inode_a = inode_of(a), inode_b = inode_of(b);
    lac_array x = lac_array_vector(three_values, LAC_FLOAT32, 3);
    CHECK_OK(ctx, lac_outputs_begin(ctx));
    CHECK_OK(ctx, lac_npy_save(ctx, a, &x));
    CHECK_OK(ctx, lac_npy_save(ctx, b, &x));
    CHECK_STATUS(ctx, lac_npy_save(ctx, missing, &x), LAC_ERR_IO);
    lac_outputs_abort(ctx);
    CHECK(holds(a, "the old a") && holds(b, "the old b"));
    CHECK_INT(inode_of(a), inode_a);
    CHECK_INT(inode_of(b), inode_b);
    CHECK_INT(temporaries_in(folder), 0);
    /* lac_ctx_destroy drops what a set still holds */
    lac_ctx_params p = lac_ctx_params_default();
    p.backend = LAC_BACKEND_CPU;
    lac_ctx_t other = NULL;
    CHECK_OK(NULL, lac_ctx_create(&p, &other));
    CHECK_OK(other, lac_outputs_begin(other));
    CHECK_OK(other, lac_npy_save(other, a, &x));
    lac_ctx_destroy(&other);
    CHECK(holds(a, "the old a"));
    CHECK_INT(inode_of(a), inode_a);
    remove_folder(folder);
}

TEST(named_temporaries_when_the_knob_says_so)
{
    char folder[512], a[600];
    make_folder(folder, sizeof folder, "named");
    snprintf(a, sizeof a, "%s/a.npy", folder);
    write_bytes(a, "the old a");
    lac_ctx_params p = lac_ctx_params_default();
    p.backend = LAC_BACKEND_CPU;
    p.knobs = "IO_TMPFILE=0";
    lac_ctx_t named = NULL;
    CHECK_OK(NULL, lac_ctx_create(&p, &named));
    lac_array x = lac_array_vector(three_values, LAC_FLOAT32, 3);
    CHECK_OK(named, lac_outputs_begin(named));
    CHECK_OK(named, lac_npy_save(named, a, &x));
    CHECK_INT(temporaries_in(folder), 1);   /* a.npy.tmp.XXXXXX while staged */
    lac_outputs_abort(named);
    CHECK_INT(temporaries_in(folder), 0);
    CHECK(holds(a, "the old a"));
    CHECK_OK(named, lac_npy_save(named, a, &x));
    CHECK(holds_three_values(a));
    CHECK_INT(temporaries_in(folder), 0);
    lac_ctx_destroy(&named);
    remove_folder(folder);
}

TEST(writes_go_through_links_and_into_devices_and_fifos)
{
    char folder[512], real[600], link[600], dangling[600], made[600], fifo[600], got[600], plain[600];
    make_folder(folder, sizeof folder, "links");
    snprintf(real, sizeof real, "%s/real.npy", folder);
    snprintf(link, sizeof link, "%s/link.npy", folder);
    snprintf(dangling, sizeof dangling, "%s/dangling.npy", folder);
    snprintf(made, sizeof made, "%s/made.npy", folder);
    snprintf(fifo, sizeof fifo, "%s/fifo", folder);
    snprintf(got, sizeof got, "%s/got.npy", folder);
    snprintf(plain, sizeof plain, "%s/plain.npy", folder);
    lac_array x = lac_array_vector(three_values, LAC_FLOAT32, 3);
    write_bytes(real, "old");
    CHECK(symlink("real.npy", link) == 0);   /* relative: to the link's folder */
    CHECK_OK(ctx, lac_npy_save(ctx, link, &x));
    struct stat sb;
    char to[64] = {0};
    CHECK(lstat(link, &sb) == 0 && S_ISLNK(sb.st_mode));
    CHECK(readlink(link, to, sizeof to - 1) == 8 && strcmp(to, "real.npy") == 0);
    CHECK(holds_three_values(real));
    CHECK(symlink("made.npy", dangling) == 0);
    CHECK_OK(ctx, lac_npy_save(ctx, dangling, &x));
    CHECK(lstat(dangling, &sb) == 0 && S_ISLNK(sb.st_mode));
    CHECK(holds_three_values(made));
    /* As root, device nodes of our own: a writer that replaced its output by
     * a regular file would otherwise replace the machine's /dev/null. */
    char null[600] = "/dev/null", full[600] = "/dev/full";
    if (geteuid() == 0) {
        snprintf(null, sizeof null, "%s/null", folder);
        snprintf(full, sizeof full, "%s/full", folder);
        if (mknod(null, S_IFCHR | 0666, makedev(1, 3)) != 0 || mknod(full, S_IFCHR | 0666, makedev(1, 7)) != 0) {
            snprintf(null, sizeof null, "/dev/null");
            snprintf(full, sizeof full, "/dev/full");
        }
    }
    CHECK_OK(ctx, lac_npy_save(ctx, null, &x));
    CHECK(stat(null, &sb) == 0 && S_ISCHR(sb.st_mode));
    CHECK_STATUS(ctx, lac_npy_save(ctx, full, &x), LAC_ERR_IO);
    CHECK(stat(full, &sb) == 0 && S_ISCHR(sb.st_mode));
    /* a FIFO is written in place: its reader gets the file's bytes */
    CHECK(mkfifo(fifo, 0600) == 0);
    pid_t child = fork();
    if (child == 0) {
        int in = open(fifo, O_RDONLY), out = open(got, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        char buf[4096];
        for (ssize_t n; (n = read(in, buf, sizeof buf)) > 0;)
            if (write(out, buf, (size_t)n) != n) _exit(1);
        _exit(0);
    }
    CHECK_OK(ctx, lac_npy_save(ctx, fifo, &x));
    int status = -1;
    waitpid(child, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(stat(fifo, &sb) == 0 && S_ISFIFO(sb.st_mode));
    CHECK(holds_three_values(got));
    CHECK_OK(ctx, lac_npy_save(ctx, plain, &x));
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "cmp -s '%s' '%s'", got, plain);
    CHECK(system(cmd) == 0);
    CHECK_INT(temporaries_in(folder), 0);
    remove_folder(folder);
}

TEST(folders_are_refused_as_files)
{
    char folder[512];
    make_folder(folder, sizeof folder, "folder");
    lac_array a;
    CHECK_STATUS(ctx, lac_npy_load(ctx, folder, 0, &a), LAC_ERR_ARGUMENT);
    CHECK_STR_CONTAINS(lac_last_error(ctx), "is a directory");
    CHECK_STATUS(ctx, lac_text_load(ctx, folder, LAC_FLOAT64, &a), LAC_ERR_ARGUMENT);
    lac_ratings_t r = NULL;
    CHECK_STATUS(ctx, lac_ratings_read(ctx, folder, NULL, &r), LAC_ERR_ARGUMENT);
    lac_graph_t g = NULL;
    CHECK_STATUS(ctx, lac_graph_load(ctx, folder, NULL, &g), LAC_ERR_ARGUMENT);
    lac_array x = lac_array_vector(three_values, LAC_FLOAT32, 3);
    CHECK_STATUS(ctx, lac_npy_save(ctx, folder, &x), LAC_ERR_IO);
    struct stat sb;
    CHECK(stat(folder, &sb) == 0 && S_ISDIR(sb.st_mode));
    remove_folder(folder);
}

TEST(npy_header_longer_than_the_reader_takes)
{
    /* A version 2 header of 2 MiB in a file that has the bytes: refused
     * before the header is read into memory. */
    char path[512];
    harness_temp_path(path, sizeof path, "longheader.npy");
    const char *dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }";
    size_t header = 2u << 20;
    FILE *fp = fopen(path, "wb");
    unsigned char pre[12] = {0x93, 'N', 'U', 'M', 'P', 'Y', 2, 0, (unsigned char)(header & 0xff),
                             (unsigned char)((header >> 8) & 0xff), (unsigned char)((header >> 16) & 0xff),
                             (unsigned char)(header >> 24)};
    fwrite(pre, 1, sizeof pre, fp);
    fputs(dict, fp);
    for (size_t i = strlen(dict); i < header - 1; i++) fputc(' ', fp);
    fputc('\n', fp);
    fwrite(three_values, 4, 1, fp);
    fclose(fp);
    lac_array a;
    CHECK_STATUS(ctx, lac_npy_load(ctx, path, 0, &a), LAC_ERR_FORMAT);
    CHECK_STR_CONTAINS(lac_last_error(ctx), "header of");
    remove(path);
}

TEST(basis_cache_never_replaces_another_file)
{
    char folder[512], tensor[600], cache[600];
    make_folder(folder, sizeof folder, "cache");
    snprintf(tensor, sizeof tensor, "%s/truth.npy", folder);
    snprintf(cache, sizeof cache, "%s/basis.bin", folder);
    int64_t us[] = {0, 1, 2}, vs[] = {1, 2, 0};
    lac_array u = lac_array_vector(us, LAC_INT64, 3), v = lac_array_vector(vs, LAC_INT64, 3);
    lac_graph_t graph = NULL;
    lac_gft_t gft = NULL, again = NULL;
    CHECK_OK(ctx, lac_graph_from_edges(ctx, 3, &u, &v, NULL, &graph));
    CHECK_OK(ctx, lac_gft_create(ctx, graph, LAC_FLOAT64, &gft));
    write_bytes(tensor, "a truth tensor");
    long long inode = inode_of(tensor);
    CHECK_STATUS(ctx, lac_gft_save(ctx, gft, tensor), LAC_ERR_ARGUMENT);
    CHECK_STR_CONTAINS(lac_last_error(ctx), "not a graph Fourier basis cache");
    int cached = -1;
    CHECK_STATUS(ctx, lac_gft_load_or_create(ctx, graph, LAC_FLOAT64, tensor, &again, &cached), LAC_ERR_ARGUMENT);
    CHECK_STATUS(ctx, lac_gft_load_or_create(ctx, graph, LAC_FLOAT64, folder, &again, &cached), LAC_ERR_ARGUMENT);
    CHECK(holds(tensor, "a truth tensor"));
    CHECK_INT(inode_of(tensor), inode);
    /* a cache is written, replaced by a cache, and read back */
    CHECK_OK(ctx, lac_gft_save(ctx, gft, cache));
    CHECK_OK(ctx, lac_gft_save(ctx, gft, cache));
    CHECK_OK(ctx, lac_gft_load_or_create(ctx, graph, LAC_FLOAT64, cache, &again, &cached));
    CHECK_INT(cached, 1);
    /* inside an output set the cache is written at once all the same */
    remove(cache);
    CHECK_OK(ctx, lac_outputs_begin(ctx));
    CHECK_OK(ctx, lac_gft_save(ctx, gft, cache));
    lac_outputs_abort(ctx);
    CHECK(file_exists(cache));
    lac_gft_destroy(&again);
    lac_gft_destroy(&gft);
    lac_graph_destroy(&graph);
    remove_folder(folder);
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
    RUN(output_set_renames_every_file_at_commit);
    RUN(failed_output_set_keeps_every_file_as_it_was);
    RUN(bytes_save_writes_them_as_they_are_in_the_set);
    RUN(named_temporaries_when_the_knob_says_so);
    RUN(writes_go_through_links_and_into_devices_and_fifos);
    RUN(folders_are_refused_as_files);
    RUN(npy_header_longer_than_the_reader_takes);
    RUN(basis_cache_never_replaces_another_file);
    lac_ctx_destroy(&ctx);
    return harness_finish();
}
