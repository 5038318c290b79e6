/* Internal I/O helpers shared by every reader and writer. */
#ifndef LACUNA_IO_INTERNAL_H
#define LACUNA_IO_INTERNAL_H

#include "core/internal.h"

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Atomic output: everything is written to a temporary file beside the target
 * and renamed over it on commit, so a failure (or a crash) never leaves a
 * half-written file at `path`. */
typedef struct {
    FILE *fp;
    char *path;
    char *tmp_path;
} lac_atomic_file;

lac_status lac_atomic_open(lac_ctx_t ctx, const char *path, lac_atomic_file *af);
/* Flushes, syncs, closes and renames; on any failure removes the temporary. */
lac_status lac_atomic_commit(lac_ctx_t ctx, lac_atomic_file *af);
/* Closes and removes the temporary; safe on a zeroed or committed handle. */
void lac_atomic_abort(lac_atomic_file *af);

/* The token rule of plain text files (text columns, vertex sets): splits a
 * line in place at whitespace and commas, a '#' ending it; *tokens (grown as
 * needed, *cap entries) points into line. Returns the count, or -1 when out
 * of memory. */
int64_t lac_text_tokens(char *line, char ***tokens, size_t *cap);

#ifdef __cplusplus
}
#endif
#endif
