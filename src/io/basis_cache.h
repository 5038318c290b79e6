/* The graph Fourier basis cache file: a graph's eigenvalues and eigenvectors
 * with what ties them to the graph (its fingerprint, N, the precision) and a
 * checksum. The format only; src/impute/gft.c decides when to use it. */
#ifndef LACUNA_IO_BASIS_CACHE_H
#define LACUNA_IO_BASIS_CACHE_H

#include "core/internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The format written. 3: the basis is canonical inside degenerate
 * eigenspaces (src/impute/gft_canonical.c, projected probes); 2 (canonical
 * by the earlier pivoted rule) and 1 (the solver's own) files are still
 * read, and made canonical by the caller. */
#define LAC_BASIS_CACHE_VERSION 3

/* What a cache file must match to be used. */
typedef struct {
    int64_t n;               /* vertices: eigenvalues hold n, vectors n * n */
    lac_dtype precision;     /* LAC_FLOAT32 or LAC_FLOAT64: the vectors' element type */
    uint64_t fingerprint;    /* the graph's (lac_graph_info.fingerprint) */
} lac_basis_cache_key;

/* Whether path may be written as a cache: it does not exist, or it is a
 * regular file that starts as a basis cache does (any version). Anything
 * else (a tensor, a model, a folder, a device) is LAC_ERR_ARGUMENT: a cache
 * never replaces a file that is not one. */
lac_status lac_basis_cache_replaceable(lac_ctx_t ctx, const char *path);

/* Writes n float64 eigenvalues and the n x n vectors (column-major, in the
 * key's precision) atomically, after lac_basis_cache_replaceable; the file
 * is kept even while an output set is open (it is not a run's output). */
lac_status lac_basis_cache_write(lac_ctx_t ctx, const char *path, const lac_basis_cache_key *key,
                                 const double *eigenvalues, const void *vectors);

/* Reads a file made for `key`: on success *eigenvalues (n doubles) and
 * *vectors (n * n elements) are the caller's to free and *version is the
 * file's format. A file for another N, graph or precision is LAC_ERR_VALUE
 * saying which; a damaged one or one of a later format LAC_ERR_FORMAT; an
 * unreadable one LAC_ERR_IO. */
lac_status lac_basis_cache_read(lac_ctx_t ctx, const char *path, const lac_basis_cache_key *key, double **eigenvalues,
                                void **vectors, int *version);

#ifdef __cplusplus
}
#endif
#endif
