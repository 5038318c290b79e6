/* Opening a file to read, with the rules every reader shares:
 *  - a folder named where a file is expected is the caller's mistake, not a
 *    read error;
 *  - gzip data (the magic bytes 1f 8b, whatever the name) is decompressed;
 *  - "-" is standard input, and standard input, pipes and other files that
 *    cannot seek are read whole (gzip or not) first.
 * What is decompressed or read whole goes to an unnamed temporary file
 * (tmpfile(3): O_TMPFILE in /tmp, so nothing is left behind), so that every
 * reader gets a seekable FILE with a descriptor: format guesses rewind, and
 * the checks of header sizes against the file's size hold for the
 * decompressed bytes. */
#include "io/io_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

enum { SPOOL_CHUNK = 1 << 18 };

/* Copies fd (gzip or plain: zlib reads plain data as it is) into a
 * temporary file whose descriptor lands in *out; takes fd. */
static lac_status spool(lac_ctx_t ctx, const char *path, int fd, int *out)
{
    gzFile gz = gzdopen(fd, "rb");
    if (!gz) {
        close(fd);
        return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "cannot read %s: out of memory for the decompressor", path);
    }
    (void)gzbuffer(gz, SPOOL_CHUNK);
    FILE *tmp = tmpfile();
    char *buf = malloc(SPOOL_CHUNK);
    lac_status st = LAC_SUCCESS;
    if (!tmp || !buf) {
        st = !buf ? lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "out of memory reading %s", path)
                  : lac_error(ctx, LAC_ERR_IO, "cannot make a temporary file to read %s into: %s", path, strerror(errno));
        goto done;
    }
    for (;;) {
        int got = gzread(gz, buf, SPOOL_CHUNK), code = Z_OK;
        const char *why = gzerror(gz, &code);
        if (got == 0 && code == Z_BUF_ERROR) why = "it ends early: truncated?", got = -1;
        if (got < 0) {
            st = code == Z_ERRNO ? lac_error(ctx, LAC_ERR_IO, "reading %s failed: %s", path, strerror(errno))
                                 : lac_error(ctx, LAC_ERR_FORMAT, "%s: damaged gzip data (%s)", path, why);
            goto done;
        }
        if (got == 0) break;
        if (fwrite(buf, 1, (size_t)got, tmp) != (size_t)got) {
            st = lac_error(ctx, LAC_ERR_IO, "no room to decompress %s in the temporary folder: %s", path,
                           strerror(errno));
            goto done;
        }
    }
    if (fflush(tmp) != 0 || (*out = dup(fileno(tmp))) < 0 || lseek(*out, 0, SEEK_SET) != 0)
        st = lac_error(ctx, LAC_ERR_IO, "no room to decompress %s in the temporary folder: %s", path, strerror(errno));
done:
    free(buf);
    gzclose_r(gz);
    if (tmp) fclose(tmp);
    return st;
}

lac_status lac_open_input_fd(lac_ctx_t ctx, const char *path, int *out)
{
    LAC_ARG_NOT_NULL(ctx, path);
    LAC_ARG_NOT_NULL(ctx, out);
    if (strcmp(path, "-") == 0) {
        int fd = dup(STDIN_FILENO);
        if (fd < 0) return lac_error(ctx, LAC_ERR_IO, "cannot read standard input: %s", strerror(errno));
        return spool(ctx, "standard input", fd, out);
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return lac_error(ctx, LAC_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        close(fd);
        return lac_error(ctx, LAC_ERR_ARGUMENT, "%s is a directory, not a file", path);
    }
    unsigned char magic[2];
    if (!S_ISREG(sb.st_mode) || (pread(fd, magic, 2, 0) == 2 && magic[0] == 0x1f && magic[1] == 0x8b))
        return spool(ctx, path, fd, out);   /* a pipe or a device (read whole), or gzip */
    *out = fd;
    return LAC_SUCCESS;
}

lac_status lac_open_input(lac_ctx_t ctx, const char *path, FILE **fp)
{
    LAC_ARG_NOT_NULL(ctx, fp);
    int fd;
    LAC_CHECK(lac_open_input_fd(ctx, path, &fd));
    if (!(*fp = fdopen(fd, "rb"))) {
        int e = errno;
        close(fd);
        return lac_error(ctx, LAC_ERR_IO, "cannot open %s: %s", path, strerror(e));
    }
    return LAC_SUCCESS;
}
