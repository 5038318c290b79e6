/* Opening a file to read, with the one rule every reader shares: a folder
 * named where a file is expected is the caller's mistake, not a read error. */
#include "io/io_internal.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

lac_status lac_open_input(lac_ctx_t ctx, const char *path, FILE **fp)
{
    LAC_ARG_NOT_NULL(ctx, path);
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
        return lac_error(ctx, LAC_ERR_ARGUMENT, "%s is a directory, not a file", path);
    if (!(*fp = fopen(path, "rb"))) return lac_error(ctx, LAC_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    return LAC_SUCCESS;
}
