/* The graph Fourier basis cache file (io/basis_cache.h): validated on read
 * against the graph and precision it must belong to, written atomically. */
#include "io/basis_cache.h"
#include "core/hash.h"
#include "io/io_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Cache file layout, little-endian:
 *   0  "LACGFT" 0 V        magic and format version V: 3 holds the canonical
 *                          basis (docs/impute.md), 2 (older) the one of an
 *                          earlier rule, 1 the solver's own
 *   8  u64 N
 *  16  u32 element bytes (4 or 8), u32 zero
 *  24  u64 the graph's fingerprint
 *  32  u64 checksum of everything after the header
 *  40  N float64 eigenvalues, then N*N elements of U column-major */
static const unsigned char cache_magic[8] = {'L', 'A', 'C', 'G', 'F', 'T', 0, LAC_BASIS_CACHE_VERSION};
enum { CACHE_HEADER = 40 };

static void put_u64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_u64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

lac_status lac_basis_cache_replaceable(lac_ctx_t ctx, const char *path)
{
    struct stat sb;
    if (stat(path, &sb) != 0) return LAC_SUCCESS;
    unsigned char head[6] = {0};
    FILE *fp = S_ISREG(sb.st_mode) ? fopen(path, "rb") : NULL;
    size_t got = fp ? fread(head, 1, sizeof head, fp) : 0;
    if (fp) fclose(fp);
    if (got == sizeof head && memcmp(head, cache_magic, sizeof head) == 0) return LAC_SUCCESS;
    return lac_error(ctx, LAC_ERR_ARGUMENT, "%s exists and is not a graph Fourier basis cache: not replacing it", path);
}

lac_status lac_basis_cache_write(lac_ctx_t ctx, const char *path, const lac_basis_cache_key *key,
                                 const double *eigenvalues, const void *vectors)
{
    LAC_CHECK(lac_basis_cache_replaceable(ctx, path));
    size_t esize = lac_dtype_size(key->precision);
    size_t vec_bytes = (size_t)key->n * (size_t)key->n * esize, val_bytes = (size_t)key->n * sizeof(double);
    unsigned char header[CACHE_HEADER];
    memset(header, 0, sizeof header);
    memcpy(header, cache_magic, 8);
    put_u64(header + 8, (uint64_t)key->n);
    put_u64(header + 16, (uint64_t)esize);
    put_u64(header + 24, key->fingerprint);
    uint64_t sum = lac_hash_words(LAC_HASH_SEED, eigenvalues, val_bytes);
    put_u64(header + 32, lac_hash_words(sum, vectors, vec_bytes));

    lac_atomic_file af;
    LAC_CHECK(lac_atomic_open(ctx, path, &af));
    if (fwrite(header, 1, sizeof header, af.fp) != sizeof header ||
        fwrite(eigenvalues, 1, val_bytes, af.fp) != val_bytes ||
        fwrite(vectors, 1, vec_bytes, af.fp) != vec_bytes) {
        lac_atomic_abort(&af);
        return lac_error(ctx, LAC_ERR_IO, "writing %s failed", path);
    }
    return lac_atomic_commit_now(ctx, &af);
}

lac_status lac_basis_cache_read(lac_ctx_t ctx, const char *path, const lac_basis_cache_key *key, double **eigenvalues,
                                void **vectors, int *version)
{
    FILE *fp;
    LAC_CHECK(lac_open_input(ctx, path, &fp));
    lac_status st = LAC_SUCCESS;
    double *values = NULL;
    void *basis = NULL;
    unsigned char header[CACHE_HEADER];
    struct stat sb;
    if (fstat(fileno(fp), &sb) != 0 || fread(header, 1, sizeof header, fp) != sizeof header ||
        memcmp(header, cache_magic, 7) != 0) {
        st = lac_error(ctx, LAC_ERR_FORMAT, "%s is not a graph Fourier basis cache (bad header)", path);
        goto done;
    }
    if (header[7] < 1 || header[7] > LAC_BASIS_CACHE_VERSION) {
        st = lac_error(ctx, LAC_ERR_FORMAT, "%s is a basis cache of format %d; this version reads formats 1 to %d", path,
                       header[7], LAC_BASIS_CACHE_VERSION);
        goto done;
    }
    uint64_t n = get_u64(header + 8), esize = get_u64(header + 16), fp64 = get_u64(header + 24);
    if (esize != 4 && esize != 8) {
        st = lac_error(ctx, LAC_ERR_FORMAT, "%s: element size %llu is neither 4 nor 8", path, (unsigned long long)esize);
        goto done;
    }
    if (n != (uint64_t)key->n) {
        st = lac_error(ctx, LAC_ERR_VALUE, "%s holds a basis of %llu vertices; the graph has %lld", path,
                       (unsigned long long)n, (long long)key->n);
        goto done;
    }
    if (fp64 != key->fingerprint) {
        st = lac_error(ctx, LAC_ERR_VALUE, "%s was made from another graph (fingerprint %016llx, this graph %016llx)", path,
                       (unsigned long long)fp64, (unsigned long long)key->fingerprint);
        goto done;
    }
    if (esize != lac_dtype_size(key->precision)) {
        st = lac_error(ctx, LAC_ERR_VALUE, "%s holds a %s basis; %s was asked for", path, esize == 4 ? "float32" : "float64",
                       lac_dtype_name(key->precision));
        goto done;
    }
    size_t vec_bytes = (size_t)n * (size_t)n * esize, val_bytes = (size_t)n * sizeof(double);
    if ((uint64_t)sb.st_size != CACHE_HEADER + val_bytes + vec_bytes) {
        st = lac_error(ctx, LAC_ERR_FORMAT, "%s has %lld bytes; a basis of N = %llu needs %zu", path, (long long)sb.st_size,
                       (unsigned long long)n, (size_t)CACHE_HEADER + val_bytes + vec_bytes);
        goto done;
    }
    basis = lac_malloc(ctx, vec_bytes > 0 ? vec_bytes : 1);
    values = lac_malloc(ctx, val_bytes > 0 ? val_bytes : sizeof(double));
    if (!basis || !values) {
        st = LAC_ERR_OUT_OF_MEMORY;
        goto done;
    }
    if (fread(values, 1, val_bytes, fp) != val_bytes || fread(basis, 1, vec_bytes, fp) != vec_bytes) {
        st = lac_error(ctx, LAC_ERR_IO, "reading %s failed", path);
        goto done;
    }
    uint64_t sum = lac_hash_words(LAC_HASH_SEED, values, val_bytes);
    if (lac_hash_words(sum, basis, vec_bytes) != get_u64(header + 32)) {
        st = lac_error(ctx, LAC_ERR_FORMAT, "%s is damaged (checksum mismatch)", path);
        goto done;
    }
    *eigenvalues = values;
    *vectors = basis;
    *version = header[7];
    values = NULL;
    basis = NULL;
done:
    free(values);
    free(basis);
    fclose(fp);
    return st;
}
