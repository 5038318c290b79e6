/* Atomic file writes (io_internal.h): an unnamed temporary file in the
 * target's folder, named and renamed over the target once complete; a named
 * temporary where the file system has no O_TMPFILE; devices, FIFOs and "-"
 * written in place. Symbolic links are followed to the file they name. */
#define _GNU_SOURCE   /* O_TMPFILE, linkat's AT_SYMLINK_FOLLOW */
#include "io/io_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum { MAX_LINK_HOPS = 40, TMP_SUFFIX = 16 };   /* ".tmp.XXXXXX" and the NUL */

static lac_status out_of_memory(lac_ctx_t ctx, lac_atomic_file *af, const char *path)
{
    lac_atomic_abort(af);
    return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "out of memory opening %s", path);
}

static lac_status io_failure(lac_ctx_t ctx, lac_atomic_file *af, int err, const char *what, const char *path)
{
    lac_status st = lac_error(ctx, LAC_ERR_IO, "%s %s: %s", what, path, strerror(err));
    lac_atomic_abort(af);
    return st;
}

/* path with its symbolic links followed, as a new string; a link to a file
 * that does not exist yet gives that file (the output is made there). NULL
 * with errno set on failure. */
static char *follow_links(const char *path)
{
    char *cur = strdup(path);
    for (int hops = 0; cur; hops++) {
        struct stat sb;
        if (lstat(cur, &sb) != 0 || !S_ISLNK(sb.st_mode)) return cur;
        char link[PATH_MAX];
        ssize_t n = hops < MAX_LINK_HOPS ? readlink(cur, link, sizeof link - 1) : (errno = ELOOP, -1);
        if (n < 0) {
            int e = errno;
            free(cur);
            errno = e;
            return NULL;
        }
        link[n] = '\0';
        /* A relative link is relative to the folder that holds it. */
        const char *slash = strrchr(cur, '/');
        size_t keep = link[0] == '/' || !slash ? 0 : (size_t)(slash - cur) + 1;
        char *next = malloc(keep + (size_t)n + 1);
        if (next) {
            memcpy(next, cur, keep);
            memcpy(next + keep, link, (size_t)n + 1);
        }
        free(cur);
        cur = next;
    }
    errno = ENOMEM;
    return NULL;
}

/* The folder that holds path, as a new string. */
static char *folder_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash) return strdup(".");
    return strndup(path, slash == path ? 1 : (size_t)(slash - path));
}

/* mkstemp makes the file 0600; outputs get the usual 0666 less the umask. */
static void use_default_mode(int fd)
{
    mode_t mask = umask(0);
    umask(mask);
    (void)fchmod(fd, 0666 & ~mask);
}

/* An O_TMPFILE file in folder, or -1 where the file system (or the knob)
 * says no, or nothing could name it later: linkat names it through
 * /proc/self/fd, or without /proc by the AT_EMPTY_PATH form, which needs
 * CAP_DAC_READ_SEARCH (taken here as being root). */
static int open_unnamed(lac_ctx_t ctx, const char *folder)
{
#ifdef O_TMPFILE
    if (lac_knob_int(ctx, LAC_KNOB_IO_TMPFILE, 1) == 0) return -1;
    int fd = open(folder, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);
    if (fd < 0) return -1;
    char proc[32];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    if (access(proc, F_OK) == 0 || geteuid() == 0) return fd;
    close(fd);
#endif
    return -1;
}

/* Gives the open unnamed file fd the name `name`. */
static int link_unnamed(int fd, const char *name)
{
    char proc[32];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    if (linkat(AT_FDCWD, proc, AT_FDCWD, name, AT_SYMLINK_FOLLOW) == 0) return 0;
    if (errno != ENOENT || access("/proc/self/fd", F_OK) == 0) return -1;
    return linkat(fd, "", AT_FDCWD, name, AT_EMPTY_PATH);
}

/* "TARGET.tmp.XXXXXX" with six characters that differ from call to call. */
static void temporary_name(char *buf, size_t len, const char *target)
{
    static const char chars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    static unsigned long long counter;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    unsigned long long z = (unsigned long long)ts.tv_nsec ^ ((unsigned long long)ts.tv_sec << 30) ^
                           ((unsigned long long)getpid() << 16) ^ (__atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED) * 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    char tail[7];
    for (int i = 0; i < 6; i++, z /= 62) tail[i] = chars[z % 62];
    tail[6] = '\0';
    snprintf(buf, len, "%s.tmp.%s", target, tail);
}

lac_status lac_atomic_open(lac_ctx_t ctx, const char *path, lac_atomic_file *af)
{
    LAC_ARG_NOT_NULL(ctx, path);
    LAC_ARG_NOT_NULL(ctx, af);
    memset(af, 0, sizeof *af);
    af->tmp_slot = -1;
    if (!*path) return lac_error(ctx, LAC_ERR_ARGUMENT, "output path is empty");
    if (!(af->path = strdup(path))) return out_of_memory(ctx, af, path);
    struct stat sb;
    int fd;
    if (strcmp(path, "-") == 0) {
        fflush(stdout);   /* what the caller printed comes first */
        af->kind = LAC_ATOMIC_DIRECT;
        if ((fd = dup(STDOUT_FILENO)) < 0) return io_failure(ctx, af, errno, "cannot write", "to standard output");
    } else if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        return io_failure(ctx, af, EISDIR, "cannot write", path);
    } else if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode)) {
        /* A device, FIFO or socket: written in place, never replaced. */
        af->kind = LAC_ATOMIC_DIRECT;
        if ((fd = open(path, O_WRONLY | O_NOCTTY | O_CLOEXEC)) < 0) return io_failure(ctx, af, errno, "cannot open", path);
    } else {
        if (!(af->target = follow_links(path))) return io_failure(ctx, af, errno, "cannot follow the links of", path);
        char *folder = folder_of(af->target);
        if (!folder) return out_of_memory(ctx, af, path);
        fd = open_unnamed(ctx, folder);
        free(folder);
        af->kind = LAC_ATOMIC_UNNAMED;
        if (fd < 0) {
            size_t len = strlen(af->target) + TMP_SUFFIX;
            if (!(af->tmp_path = malloc(len))) return out_of_memory(ctx, af, path);
            snprintf(af->tmp_path, len, "%s.tmp.XXXXXX", af->target);
            af->kind = LAC_ATOMIC_NAMED;
            if ((fd = mkstemp(af->tmp_path)) < 0) {
                int e = errno;
                free(af->tmp_path);
                af->tmp_path = NULL;
                return io_failure(ctx, af, e, "cannot create", path);
            }
            af->tmp_slot = lac_temp_register(af->tmp_path);
            use_default_mode(fd);
        }
    }
    if (!(af->fp = fdopen(fd, "wb"))) {
        close(fd);
        return io_failure(ctx, af, errno, "cannot open", path);
    }
    return LAC_SUCCESS;
}

lac_status lac_atomic_finish(lac_ctx_t ctx, lac_atomic_file *af)
{
    LAC_ARG_NOT_NULL(ctx, af);
    if (!af->fp) return lac_error(ctx, LAC_ERR_ARGUMENT, "atomic file is not open");
    errno = 0;
    int failed = ferror(af->fp);          /* an earlier write failed (errno may still say why) */
    failed |= fflush(af->fp) != 0;        /* tried even then: it says why again */
    if (!failed && af->kind != LAC_ATOMIC_DIRECT) failed = fsync(fileno(af->fp)) != 0;
    if (!failed && af->kind == LAC_ATOMIC_DIRECT) {
        /* Closed now, so that a reader of a FIFO sees the end. */
        failed = fclose(af->fp) != 0;
        af->fp = NULL;
    }
    if (failed) return io_failure(ctx, af, errno ? errno : EIO, "writing", af->path);
    return LAC_SUCCESS;
}

lac_status lac_atomic_name(lac_ctx_t ctx, lac_atomic_file *af)
{
    LAC_ARG_NOT_NULL(ctx, af);
    if (af->kind != LAC_ATOMIC_UNNAMED || af->tmp_path) return LAC_SUCCESS;
    size_t len = strlen(af->target) + TMP_SUFFIX;
    char *name = malloc(len);
    if (!name) return out_of_memory(ctx, af, af->path);
    int e = EEXIST;
    for (int attempt = 0; attempt < 100 && e == EEXIST; attempt++) {
        temporary_name(name, len, af->target);
        /* Listed before it exists, so that no moment leaves it unlisted. */
        int slot = lac_temp_register(name);
        if (link_unnamed(fileno(af->fp), name) == 0) {
            af->tmp_path = name;
            af->tmp_slot = slot;
            return LAC_SUCCESS;
        }
        e = errno;
        lac_temp_unregister(slot);
    }
    free(name);
    return io_failure(ctx, af, e, "cannot name the new", af->path);
}

lac_status lac_atomic_publish(lac_ctx_t ctx, lac_atomic_file *af)
{
    LAC_ARG_NOT_NULL(ctx, af);
    if (af->kind != LAC_ATOMIC_DIRECT) {
        if (!af->tmp_path) return lac_error(ctx, LAC_ERR_INTERNAL, "%s was published before it had a name", af->path);
        if (rename(af->tmp_path, af->target) != 0) return io_failure(ctx, af, errno, "cannot rename the new", af->path);
        lac_temp_unregister(af->tmp_slot);
        free(af->tmp_path);
        af->tmp_path = NULL;
        /* The rename itself reaches the disk with its folder's sync. */
        char *folder = folder_of(af->target);
        int dfd = folder ? open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
        if (dfd >= 0) {
            (void)fsync(dfd);
            close(dfd);
        }
        free(folder);
    }
    lac_atomic_abort(af);   /* closes what is left open; the file stays */
    return LAC_SUCCESS;
}

lac_status lac_atomic_commit_now(lac_ctx_t ctx, lac_atomic_file *af)
{
    LAC_CHECK(lac_atomic_finish(ctx, af));
    LAC_CHECK(lac_atomic_name(ctx, af));
    return lac_atomic_publish(ctx, af);
}

lac_status lac_atomic_commit(lac_ctx_t ctx, lac_atomic_file *af)
{
    LAC_ARG_NOT_NULL(ctx, af);
    if (!lac_output_set_open(ctx)) return lac_atomic_commit_now(ctx, af);
    LAC_CHECK(lac_atomic_finish(ctx, af));
    return lac_output_set_add(ctx, af);
}

void lac_atomic_abort(lac_atomic_file *af)
{
    if (!af) return;
    if (af->fp) fclose(af->fp);   /* an UNNAMED file without a name vanishes here */
    if (af->tmp_path) unlink(af->tmp_path);
    if (af->tmp_path) lac_temp_unregister(af->tmp_slot);
    free(af->tmp_path);
    free(af->target);
    free(af->path);
    memset(af, 0, sizeof *af);
    af->tmp_slot = -1;
}
