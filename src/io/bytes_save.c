/* Bytes the caller made (a picture, a report page), written as every other
 * output: atomically, staged in the context's output set. */
#include "io/io_internal.h"

lac_status lac_bytes_save(lac_ctx_t ctx, const char *path, const void *data, size_t size)
{
    LAC_ARG_NOT_NULL(ctx, path);
    if (size && !data) return lac_error(ctx, LAC_ERR_ARGUMENT, "lac_bytes_save: data is NULL");
    lac_atomic_file af;
    LAC_CHECK(lac_atomic_open(ctx, path, &af));
    if (size && fwrite(data, 1, size, af.fp) != size) {
        lac_atomic_abort(&af);
        return lac_error(ctx, LAC_ERR_IO, "cannot write %s", path);
    }
    return lac_atomic_commit(ctx, &af);
}
