/* NumPy .npy reader and writer (format versions 1.0, 2.0, 3.0).
 * Supported: little-endian float32/float64/int32/int64 and bool, C order. */
#include "io/io_internal.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define NPY_MAGIC "\x93NUMPY"
#define NPY_MAGIC_LEN 6
#define NPY_MAX_HEADER (1 << 20)

static const char *skip_space(const char *p)
{
    while (*p && isspace((unsigned char)*p)) p++;
    return p;
}

/* Finds the value text after 'key': in the header dictionary. */
static const char *dict_value(const char *header, const char *key)
{
    char pattern[32];
    snprintf(pattern, sizeof pattern, "'%s'", key);
    const char *p = strstr(header, pattern);
    if (!p) {
        snprintf(pattern, sizeof pattern, "\"%s\"", key);
        p = strstr(header, pattern);
    }
    if (!p) return NULL;
    p = skip_space(p + strlen(pattern));
    if (*p != ':') return NULL;
    return skip_space(p + 1);
}

static lac_status parse_descr(lac_ctx_t ctx, const char *path, const char *v, lac_dtype *dtype)
{
    if (!v || (*v != '\'' && *v != '"'))
        return lac_error(ctx, LAC_ERR_FORMAT, "%s: header has no 'descr' string (structured dtypes are not supported)", path);
    char quote = *v++;
    char d[16] = {0};
    size_t n = 0;
    while (*v && *v != quote && n < sizeof d - 1) d[n++] = *v++;
    char order = d[0];
    const char *code = d + 1;
    int little = order == '<' || order == '|' || order == '=';
    if (order == '>' && strcmp(code, "b1") != 0 && strcmp(code, "u1") != 0)
        return lac_error(ctx, LAC_ERR_FORMAT, "%s: big-endian data ('%s') is not supported; convert with arr.astype(arr.dtype.newbyteorder('<'))", path, d);
    if (!little && order != '>')
        return lac_error(ctx, LAC_ERR_FORMAT, "%s: unrecognised dtype '%s'", path, d);
    if (strcmp(code, "f4") == 0) *dtype = LAC_FLOAT32;
    else if (strcmp(code, "f8") == 0) *dtype = LAC_FLOAT64;
    else if (strcmp(code, "i4") == 0) *dtype = LAC_INT32;
    else if (strcmp(code, "i8") == 0) *dtype = LAC_INT64;
    else if (strcmp(code, "b1") == 0) *dtype = LAC_BOOL;
    else
        return lac_error(ctx, LAC_ERR_DTYPE, "%s: dtype '%s' is not supported (use float32, float64, int32, int64 or bool)", path, d);
    return LAC_SUCCESS;
}

static lac_status parse_shape(lac_ctx_t ctx, const char *path, const char *v, lac_array *a)
{
    if (!v || *v != '(') return lac_error(ctx, LAC_ERR_FORMAT, "%s: header has no 'shape' tuple", path);
    v++;
    a->ndim = 0;
    for (;;) {
        v = skip_space(v);
        if (*v == ')') break;
        if (!isdigit((unsigned char)*v)) return lac_error(ctx, LAC_ERR_FORMAT, "%s: malformed shape in header", path);
        if (a->ndim == LAC_MAX_DIMS)
            return lac_error(ctx, LAC_ERR_SHAPE, "%s: more than %d dimensions", path, LAC_MAX_DIMS);
        errno = 0;
        char *end;
        long long d = strtoll(v, &end, 10);
        if (errno) return lac_error(ctx, LAC_ERR_FORMAT, "%s: shape entry too large", path);
        a->shape[a->ndim++] = d;
        v = skip_space(end);
        if (*v == ',') v++;
        else if (*v != ')') return lac_error(ctx, LAC_ERR_FORMAT, "%s: malformed shape in header", path);
    }
    if (a->ndim == 0) {   /* a scalar: a vector of one */
        a->ndim = 1;
        a->shape[0] = 1;
    }
    return LAC_SUCCESS;
}

lac_status lac_npy_load(lac_ctx_t ctx, const char *path, unsigned flags, lac_array *out)
{
    LAC_ARG_NOT_NULL(ctx, path);
    LAC_ARG_NOT_NULL(ctx, out);
    lac_status st = LAC_SUCCESS;
    char *header = NULL;
    void *block = NULL;
    lac_array a;
    memset(&a, 0, sizeof a);

    /* through the shared opener: a folder refused, gzip and "-" read into a
     * temporary file, whose descriptor serves as the file's own */
    int fd;
    LAC_CHECK(lac_open_input_fd(ctx, path, &fd));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        st = lac_error(ctx, LAC_ERR_IO, "cannot stat %s: %s", path, strerror(errno));
        goto done;
    }
    unsigned char pre[12];
    ssize_t got = pread(fd, pre, sizeof pre, 0);
    if (got < 10 || memcmp(pre, NPY_MAGIC, NPY_MAGIC_LEN) != 0) {
        st = lac_error(ctx, LAC_ERR_FORMAT, "%s is not a .npy file (no \\x93NUMPY magic)", path);
        goto done;
    }
    int major = pre[6];
    size_t header_len, data_offset;
    if (major == 1) {
        header_len = (size_t)pre[8] | ((size_t)pre[9] << 8);
        data_offset = 10 + header_len;
    } else if (major == 2 || major == 3) {
        if (got < 12) {
            st = lac_error(ctx, LAC_ERR_FORMAT, "%s: truncated .npy header", path);
            goto done;
        }
        header_len = (size_t)pre[8] | ((size_t)pre[9] << 8) | ((size_t)pre[10] << 16) | ((size_t)pre[11] << 24);
        data_offset = 12 + header_len;
    } else {
        st = lac_error(ctx, LAC_ERR_FORMAT, "%s: .npy format version %d.%d is not supported (1.0, 2.0, 3.0 are)", path, major, pre[7]);
        goto done;
    }
    if ((off_t)data_offset > sb.st_size) {
        st = lac_error(ctx, LAC_ERR_FORMAT, "%s: truncated .npy header", path);
        goto done;
    }
    if (header_len > NPY_MAX_HEADER) {   /* numpy writes a few hundred bytes; a dictionary, not data */
        st = lac_error(ctx, LAC_ERR_FORMAT, "%s: a .npy header of %zu bytes (this reader takes up to %d)", path,
                       header_len, NPY_MAX_HEADER);
        goto done;
    }
    header = malloc(header_len + 1);
    if (!header) {
        st = lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "out of memory reading %s", path);
        goto done;
    }
    if (pread(fd, header, header_len, (off_t)(data_offset - header_len)) != (ssize_t)header_len) {
        st = lac_error(ctx, LAC_ERR_IO, "%s: could not read the header", path);
        goto done;
    }
    header[header_len] = '\0';

    LAC_CHECK_GOTO(parse_descr(ctx, path, dict_value(header, "descr"), &a.dtype), st, done);
    const char *fortran = dict_value(header, "fortran_order");
    if (!fortran) {
        st = lac_error(ctx, LAC_ERR_FORMAT, "%s: header has no 'fortran_order'", path);
        goto done;
    }
    if (strncmp(fortran, "True", 4) == 0) {
        st = lac_error(ctx, LAC_ERR_FORMAT, "%s: Fortran-ordered arrays are not supported; save np.ascontiguousarray(a)", path);
        goto done;
    }
    LAC_CHECK_GOTO(parse_shape(ctx, path, dict_value(header, "shape"), &a), st, done);

    /* The elements of the non-empty sizes must count in int64 too: a zero
     * size makes the bytes 0 after a product that wrapped. */
    size_t bytes = lac_dtype_size(a.dtype);
    int64_t elements = 1;
    for (int d = 0; d < a.ndim; d++)
        if (lac_mul_overflows(bytes, (size_t)a.shape[d], &bytes) ||
            (a.shape[d] && __builtin_mul_overflow(elements, a.shape[d], &elements))) {
            st = lac_error(ctx, LAC_ERR_FORMAT, "%s: shape overflows", path);
            goto done;
        }
    if ((uint64_t)sb.st_size < data_offset || (uint64_t)sb.st_size - data_offset < bytes) {   /* no wrap-around */
        st = lac_error(ctx, LAC_ERR_FORMAT, "%s is truncated: the header promises %zu data bytes, the file has %lld",
                       path, bytes, (long long)(sb.st_size - (off_t)data_offset));
        goto done;
    }

    if (flags & LAC_NPY_MMAP) {
        size_t map_len = data_offset + bytes;
        void *m = mmap(NULL, map_len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            st = lac_error(ctx, LAC_ERR_IO, "cannot map %s: %s", path, strerror(errno));
            goto done;
        }
        a.data = (char *)m + data_offset;
        LAC_CHECK_GOTO(lac_array_own_mmap(ctx, &a, m, map_len), st, done);
    } else {
        block = lac_malloc(ctx, bytes);
        if (!block) {
            st = LAC_ERR_OUT_OF_MEMORY;
            goto done;
        }
        size_t done_bytes = 0;
        while (done_bytes < bytes) {
            ssize_t r = pread(fd, (char *)block + done_bytes, bytes - done_bytes, (off_t)(data_offset + done_bytes));
            if (r <= 0) {
                st = lac_error(ctx, LAC_ERR_IO, "reading %s failed: %s", path, r < 0 ? strerror(errno) : "unexpected end of file");
                goto done;
            }
            done_bytes += (size_t)r;
        }
        a.data = block;
        void *handed = block;
        block = NULL;
        LAC_CHECK_GOTO(lac_array_own_malloc(ctx, &a, handed, bytes), st, done);
    }
    if (a.dtype == LAC_BOOL) {   /* numpy bools are bytes 0/1; reject anything else */
        const unsigned char *b = a.data;
        for (size_t i = 0; i < bytes; i++)
            if (b[i] > 1) {
                st = lac_error(ctx, LAC_ERR_FORMAT, "%s: bool element %zu has byte value %u", path, i, b[i]);
                lac_array_release(&a);
                goto done;
            }
    }
    a.memory = LAC_MEM_HOST;
    *out = a;
done:
    free(block);
    free(header);
    close(fd);
    return st;
}

static const char *npy_descr(lac_dtype dtype)
{
    switch (dtype) {
    case LAC_FLOAT32: return "<f4";
    case LAC_FLOAT64: return "<f8";
    case LAC_INT32: return "<i4";
    case LAC_INT64: return "<i8";
    case LAC_BOOL: return "|b1";
    default: return NULL;
    }
}

lac_status lac_npy_save(lac_ctx_t ctx, const char *path, const lac_array *a)
{
    LAC_ARG_NOT_NULL(ctx, path);
    LAC_ARG_NOT_NULL(ctx, a);
    const char *descr = npy_descr(a->dtype);
    if (!descr) return lac_error(ctx, LAC_ERR_DTYPE, "cannot save dtype %d", (int)a->dtype);
    if (a->memory != LAC_MEM_HOST) return lac_error(ctx, LAC_ERR_ARGUMENT, "lac_npy_save takes host arrays");
    if (a->ndim < 1 || a->ndim > LAC_MAX_DIMS) return lac_error(ctx, LAC_ERR_SHAPE, "ndim %d is not supported", a->ndim);
    int64_t count = lac_array_count(a);
    if (count > 0 && !a->data) return lac_error(ctx, LAC_ERR_ARGUMENT, "array data is NULL");

    char dict[512];
    int len = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
    for (int d = 0; d < a->ndim; d++)
        len += snprintf(dict + len, sizeof dict - (size_t)len, a->ndim == 1 ? "%lld," : (d ? ", %lld" : "%lld"),
                        (long long)a->shape[d]);
    len += snprintf(dict + len, sizeof dict - (size_t)len, "), }");
    /* Pad with spaces so that magic + length + header is a multiple of 64. */
    size_t total = 10 + (size_t)len + 1;
    size_t padded = (total + 63) / 64 * 64;
    size_t header_len = padded - 10;

    lac_atomic_file af;
    LAC_CHECK(lac_atomic_open(ctx, path, &af));
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0,
                             (unsigned char)(header_len & 0xff), (unsigned char)(header_len >> 8)};
    fwrite(pre, 1, sizeof pre, af.fp);
    fwrite(dict, 1, (size_t)len, af.fp);
    for (size_t i = 10 + (size_t)len; i < padded - 1; i++) fputc(' ', af.fp);
    fputc('\n', af.fp);
    size_t bytes = (size_t)count * lac_dtype_size(a->dtype);
    if (bytes && fwrite(a->data, 1, bytes, af.fp) != bytes) {
        lac_atomic_abort(&af);
        return lac_error(ctx, LAC_ERR_IO, "writing %s failed", path);
    }
    return lac_atomic_commit(ctx, &af);
}
