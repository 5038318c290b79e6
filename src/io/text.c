/* Plain text columns: numbers separated by whitespace or commas, one row a line,
 * '#' comments. */
#include "io/io_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int64_t lac_text_tokens(char *line, char ***tokens, size_t *cap)
{
    char *hash = strchr(line, '#');
    if (hash) *hash = '\0';
    int64_t count = 0;
    char *save = NULL;
    for (char *tok = strtok_r(line, " \t\r\n,", &save); tok; tok = strtok_r(NULL, " \t\r\n,", &save)) {
        if ((size_t)count == *cap) {
            size_t ncap = *cap ? *cap * 2 : 16;
            char **grown = realloc(*tokens, ncap * sizeof *grown);
            if (!grown) return -1;
            *tokens = grown;
            *cap = ncap;
        }
        (*tokens)[count++] = tok;
    }
    return count;
}

lac_status lac_text_load(lac_ctx_t ctx, const char *path, lac_dtype dtype, lac_array *out)
{
    LAC_ARG_NOT_NULL(ctx, path);
    LAC_ARG_NOT_NULL(ctx, out);
    size_t esize = lac_dtype_size(dtype);
    if (esize == 0 || dtype == LAC_BOOL)
        return lac_error(ctx, LAC_ERR_DTYPE, "text columns load as float32, float64, int32 or int64");
    FILE *fp;
    LAC_CHECK(lac_open_input(ctx, path, &fp));

    lac_status st = LAC_SUCCESS;
    char *line = NULL;
    size_t line_cap = 0, tok_cap = 0, cap = 0;
    char **tokens = NULL;
    unsigned char *data = NULL;
    int64_t cols = -1, rows = 0, lineno = 0;
    while (getline(&line, &line_cap, fp) >= 0) {
        lineno++;
        int64_t count = lac_text_tokens(line, &tokens, &tok_cap);
        if (count < 0) {
            st = lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "out of memory reading %s", path);
            goto done;
        }
        if (count == 0) continue;
        if (cols < 0) cols = count;
        if (count != cols) {
            st = lac_error(ctx, LAC_ERR_FORMAT, "%s:%lld: %lld values where the first row had %lld",
                           path, (long long)lineno, (long long)count, (long long)cols);
            goto done;
        }
        if ((size_t)((rows + 1) * cols) * esize > cap) {
            size_t ncap = cap ? cap * 2 : 4096;
            while (ncap < (size_t)((rows + 1) * cols) * esize) ncap *= 2;
            unsigned char *grown = realloc(data, ncap);
            if (!grown) {
                st = lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "out of memory reading %s", path);
                goto done;
            }
            data = grown;
            cap = ncap;
        }
        for (int64_t c = 0; c < cols; c++) {
            char *end;
            errno = 0;
            unsigned char *dst = data + (size_t)(rows * cols + c) * esize;
            if (dtype == LAC_FLOAT32 || dtype == LAC_FLOAT64) {
                double v = strtod(tokens[c], &end);
                if (*end || end == tokens[c]) {
                    st = lac_error(ctx, LAC_ERR_FORMAT, "%s:%lld: '%s' is not a number", path, (long long)lineno, tokens[c]);
                    goto done;
                }
                if (dtype == LAC_FLOAT32) *(float *)dst = (float)v;
                else *(double *)dst = v;
            } else {
                long long v = strtoll(tokens[c], &end, 10);
                if (*end || end == tokens[c] || errno) {
                    st = lac_error(ctx, LAC_ERR_FORMAT, "%s:%lld: '%s' is not an integer", path, (long long)lineno, tokens[c]);
                    goto done;
                }
                if (dtype == LAC_INT32) {
                    if (v < INT32_MIN || v > INT32_MAX) {
                        st = lac_error(ctx, LAC_ERR_RANGE, "%s:%lld: %lld does not fit in int32", path, (long long)lineno, v);
                        goto done;
                    }
                    *(int32_t *)dst = (int32_t)v;
                } else {
                    *(int64_t *)dst = (int64_t)v;
                }
            }
        }
        rows++;
    }
    if (ferror(fp)) {
        st = lac_error(ctx, LAC_ERR_IO, "reading %s failed", path);
        goto done;
    }
    memset(out, 0, sizeof *out);
    out->dtype = dtype;
    if (cols <= 1) {
        out->ndim = 1;
        out->shape[0] = rows;
    } else {
        out->ndim = 2;
        out->shape[0] = rows;
        out->shape[1] = cols;
    }
    if (!data) data = malloc(1);
    out->data = data;
    void *handed = data;
    data = NULL;
    st = lac_array_own_malloc(ctx, out, handed, cap);
done:
    free(data);
    free(tokens);
    free(line);
    fclose(fp);
    return st;
}

lac_status lac_text_save(lac_ctx_t ctx, const char *path, const lac_array *a)
{
    LAC_ARG_NOT_NULL(ctx, path);
    LAC_ARG_NOT_NULL(ctx, a);
    if (a->memory != LAC_MEM_HOST) return lac_error(ctx, LAC_ERR_ARGUMENT, "lac_text_save takes host arrays");
    if (a->ndim < 1 || a->ndim > 2) return lac_error(ctx, LAC_ERR_SHAPE, "text files hold vectors or matrices, not %d-d arrays", a->ndim);
    int64_t rows = a->shape[0], cols = a->ndim == 2 ? a->shape[1] : 1;
    lac_atomic_file af;
    LAC_CHECK(lac_atomic_open(ctx, path, &af));
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t c = 0; c < cols; c++) {
            int64_t k = r * cols + c;
            const char *sep = c ? " " : "";
            switch (a->dtype) {
            case LAC_FLOAT32: fprintf(af.fp, "%s%.9g", sep, ((const float *)a->data)[k]); break;
            case LAC_FLOAT64: fprintf(af.fp, "%s%.17g", sep, ((const double *)a->data)[k]); break;
            case LAC_INT32: fprintf(af.fp, "%s%" PRId32, sep, ((const int32_t *)a->data)[k]); break;
            case LAC_INT64: fprintf(af.fp, "%s%" PRId64, sep, ((const int64_t *)a->data)[k]); break;
            case LAC_BOOL: fprintf(af.fp, "%s%d", sep, ((const unsigned char *)a->data)[k]); break;
            default:
                lac_atomic_abort(&af);
                return lac_error(ctx, LAC_ERR_DTYPE, "cannot save dtype %d", (int)a->dtype);
            }
        }
        fputc('\n', af.fp);
    }
    return lac_atomic_commit(ctx, &af);
}
