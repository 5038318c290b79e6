/* Atomic file writes: temporary file in the same folder, then rename. */
#include "io/io_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* mkstemp makes the file 0600; outputs get the usual 0666 less the umask. */
static void use_default_mode(int fd)
{
    mode_t mask = umask(0);
    umask(mask);
    (void)fchmod(fd, 0666 & ~mask);
}

lac_status lac_atomic_open(lac_ctx_t ctx, const char *path, lac_atomic_file *af)
{
    LAC_ARG_NOT_NULL(ctx, path);
    LAC_ARG_NOT_NULL(ctx, af);
    memset(af, 0, sizeof *af);
    size_t len = strlen(path);
    if (len == 0) return lac_error(ctx, LAC_ERR_ARGUMENT, "output path is empty");
    af->path = strdup(path);
    af->tmp_path = malloc(len + 16);
    if (!af->path || !af->tmp_path) {
        lac_atomic_abort(af);
        return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "out of memory opening %s", path);
    }
    snprintf(af->tmp_path, len + 16, "%s.tmp.XXXXXX", path);
    int fd = mkstemp(af->tmp_path);
    if (fd < 0) {
        int e = errno;
        free(af->tmp_path);
        af->tmp_path = NULL;
        lac_atomic_abort(af);
        return lac_error(ctx, LAC_ERR_IO, "cannot create %s: %s", path, strerror(e));
    }
    use_default_mode(fd);
    af->fp = fdopen(fd, "wb");
    if (!af->fp) {
        close(fd);
        lac_atomic_abort(af);
        return lac_error(ctx, LAC_ERR_IO, "cannot open %s for writing", path);
    }
    return LAC_SUCCESS;
}

lac_status lac_atomic_commit(lac_ctx_t ctx, lac_atomic_file *af)
{
    LAC_ARG_NOT_NULL(ctx, af);
    if (!af->fp) return lac_error(ctx, LAC_ERR_ARGUMENT, "atomic file is not open");
    int failed = ferror(af->fp) || fflush(af->fp) != 0 || fsync(fileno(af->fp)) != 0;
    int e = errno;
    failed |= fclose(af->fp) != 0;
    af->fp = NULL;
    if (!failed && rename(af->tmp_path, af->path) != 0) {
        e = errno;
        failed = 1;
    }
    if (failed) {
        lac_status st = lac_error(ctx, LAC_ERR_IO, "writing %s failed: %s", af->path, strerror(e));
        lac_atomic_abort(af);
        return st;
    }
    free(af->tmp_path);
    free(af->path);
    memset(af, 0, sizeof *af);
    return LAC_SUCCESS;
}

void lac_atomic_abort(lac_atomic_file *af)
{
    if (!af) return;
    if (af->fp) fclose(af->fp);
    if (af->tmp_path) unlink(af->tmp_path);
    free(af->tmp_path);
    free(af->path);
    memset(af, 0, sizeof *af);
}
