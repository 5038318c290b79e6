/* What every libFuzzer harness shares: the fuzz input as a file that a reader
 * opens by name, a fresh context per reader call, and the checks that hold for
 * every reader whatever the bytes (a status that is an input error, with its
 * detail; outputs untouched on failure). A failed check aborts, which libFuzzer
 * reports as a crash like any sanitizer's. Public API only. */
#ifndef LACUNA_FUZZ_COMMON_H
#define LACUNA_FUZZ_COMMON_H

#include "lacuna/lacuna.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The bytes as a file: one unnamed temporary file per process (a memfd, or
 * an unlinked file in $TMPDIR), rewritten on every call and named through
 * /proc/self/fd, so that a crash leaves nothing behind. */
const char *fuzz_file(const uint8_t *data, size_t size);

/* A CPU context of one thread, silent; one per reader call so that its last
 * error is that call's. */
lac_ctx_t fuzz_ctx_new(void);

/* A reader's status: success, or an input error (-1..-99) whose detail
 * lac_last_error(ctx) gives. A runtime failure (memory, I/O on a file that
 * is there and readable, internal) or an empty detail aborts. */
void fuzz_check_status(lac_ctx_t ctx, lac_status st, const char *call);

/* Aborts with the message: the harness's own finding. */
void fuzz_fail(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));

/* A graph from edge-list text (through lac_graph_load, so that ids are
 * remapped as a file's are); aborts when it does not load. */
lac_graph_t fuzz_graph_from_text(lac_ctx_t ctx, const char *edge_list);

/* What holds for any graph a reader returned: the facts agree with each
 * other, every vertex's id maps back to it, and (up to 64 vertices) the
 * normalised Laplacian is finite, in [-1, 1] and symmetric (to 1e-12), with
 * 1 on its diagonal. */
void fuzz_check_graph(lac_graph_t graph, const char *call);

/* The graphs the graph-dependent harnesses (basis caches, vertex sets) read
 * against; make_seeds.c writes its seeds against the same ones. */
#define FUZZ_GRAPH_PLAIN "0 1\n1 2\n2 3\n3 0\n0 2 0.5\n"
#define FUZZ_GRAPH_REMAPPED "3 17\n17 1000000\n1000000 9223372036854775807\n3 42 2.5\n"

#ifdef __cplusplus
}
#endif
#endif
