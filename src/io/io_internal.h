/* Internal I/O helpers shared by every reader and writer. */
#ifndef LACUNA_IO_INTERNAL_H
#define LACUNA_IO_INTERNAL_H

#include "core/internal.h"

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Atomic output (atomic_file.c). The output lands at `target`: `path` with
 * its symbolic links followed, so a link keeps pointing where it did and the
 * file it names is replaced. Three kinds:
 *  - UNNAMED: an O_TMPFILE file in the target's folder, which has no name at
 *    all until it is complete (not even SIGKILL leaves litter), then linked
 *    under a temporary name (linkat through /proc/self/fd, or its
 *    AT_EMPTY_PATH form without /proc) and renamed over the target;
 *  - NAMED: where the folder's file system has no O_TMPFILE (or the knob
 *    LACUNA_IO_TMPFILE=0 says so), "TARGET.tmp.XXXXXX", removed on failure
 *    and on SIGHUP, SIGINT, SIGQUIT, SIGPIPE, SIGTERM and SIGXFSZ;
 *  - DIRECT: "-" (standard output) and anything that exists and is not a
 *    regular file (a device, a FIFO, a socket) is written in place, never
 *    replaced by a regular file.
 * A failure leaves an existing file at `target` untouched (same bytes, same
 * inode). */
enum { LAC_ATOMIC_UNNAMED = 1, LAC_ATOMIC_NAMED, LAC_ATOMIC_DIRECT };

typedef struct {
    FILE *fp;
    char *path;       /* as the caller named it, for messages */
    char *target;     /* the file that is replaced (path with its links followed) */
    char *tmp_path;   /* the temporary's name while it has one */
    int kind;         /* LAC_ATOMIC_* */
    int tmp_slot;     /* tmp_path's entry in the signal clean-up list, or -1 */
} lac_atomic_file;

lac_status lac_atomic_open(lac_ctx_t ctx, const char *path, lac_atomic_file *af);
/* Flushes and syncs the file, then, while an output set of ctx is open
 * (lac_outputs_begin), hands it to the set, which renames it with the others
 * at lac_outputs_commit; otherwise renames it over the target now. On any
 * failure the temporary is removed and the target left as it was. */
lac_status lac_atomic_commit(lac_ctx_t ctx, lac_atomic_file *af);
/* lac_atomic_commit that never joins an output set: for files that are not a
 * run's outputs (the basis cache), kept even when the run later fails. */
lac_status lac_atomic_commit_now(lac_ctx_t ctx, lac_atomic_file *af);
/* Closes and removes the temporary; safe on a zeroed or committed handle. */
void lac_atomic_abort(lac_atomic_file *af);

/* The two steps of publishing a file whose data is flushed and synced
 * (lac_atomic_finish), for output sets: lac_atomic_name gives an UNNAMED file
 * its temporary name (the step that can fail for want of room or rights);
 * lac_atomic_publish renames it over the target and closes it. Both leave
 * DIRECT files alone but for closing them. */
lac_status lac_atomic_finish(lac_ctx_t ctx, lac_atomic_file *af);
lac_status lac_atomic_name(lac_ctx_t ctx, lac_atomic_file *af);
lac_status lac_atomic_publish(lac_ctx_t ctx, lac_atomic_file *af);

/* Output sets (output_set.c): whether ctx has one open, and adding a
 * finished file to it (the set owns it then; *af is zeroed). */
bool lac_output_set_open(lac_ctx_t ctx);
lac_status lac_output_set_add(lac_ctx_t ctx, lac_atomic_file *af);

/* The signal clean-up list of named temporaries (temp_cleanup.c): an
 * async-signal-safe table that the handlers of the signals above walk to
 * unlink every entry before the signal takes its default course. The
 * handlers are installed on the first registration, for each signal whose
 * disposition is then the default (a caller's own handler is left alone).
 * Returns the entry, or -1 when the table is full or the path too long (the
 * file is then only removed by lac_atomic_abort). */
int lac_temp_register(const char *path);
void lac_temp_unregister(int slot);

/* Opens a file to read (input_file.c): a directory is LAC_ERR_ARGUMENT ("is
 * a directory", an input error: exit 2), a file that cannot be opened
 * LAC_ERR_IO. gzip data (magic 1f 8b) is decompressed, "-" is standard
 * input, and pipes and devices are read whole, each into an unnamed
 * temporary file: the result is always seekable, with a descriptor, and
 * damaged gzip data is LAC_ERR_FORMAT. The _fd form gives the descriptor. */
lac_status lac_open_input(lac_ctx_t ctx, const char *path, FILE **fp);
lac_status lac_open_input_fd(lac_ctx_t ctx, const char *path, int *fd);

/* The token rule of plain text files (text columns, vertex sets): splits a
 * line in place at whitespace and commas, a '#' ending it; *tokens (grown as
 * needed, *cap entries) points into line. Returns the count, or -1 when out
 * of memory. */
int64_t lac_text_tokens(char *line, char ***tokens, size_t *cap);

#ifdef __cplusplus
}
#endif
#endif
