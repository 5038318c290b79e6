/* Status strings and the last-error detail (per context, or per thread before a
 * context exists). */
#include "core/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static _Thread_local char thread_last_error[LAC_ERROR_MAX];

const char *lac_status_string(lac_status status)
{
    switch (status) {
    case LAC_SUCCESS: return "success";
    case LAC_INFO_NOT_CONVERGED: return "stopped at the iteration cap before the tolerance";
    case LAC_ERR_ARGUMENT: return "invalid argument";
    case LAC_ERR_RANGE: return "index out of range";
    case LAC_ERR_SHAPE: return "shapes do not agree";
    case LAC_ERR_DTYPE: return "unsupported element type";
    case LAC_ERR_FORMAT: return "malformed or unsupported file";
    case LAC_ERR_VALUE: return "invalid value (NaN, infinity or empty)";
    case LAC_ERR_UNSUPPORTED: return "not supported";
    case LAC_ERR_OUT_OF_MEMORY: return "out of memory";
    case LAC_ERR_IO: return "input/output error";
    case LAC_ERR_CUDA: return "CUDA error";
    case LAC_ERR_NOT_COMPILED: return "backend not compiled into this build";
    case LAC_ERR_NO_DEVICE: return "no usable CUDA device";
    case LAC_ERR_MPI: return "an MPI call failed";
    case LAC_ERR_INTERNAL: return "internal error";
    default: return status > 0 ? "information" : "unknown status";
    }
}

lac_status lac_error(lac_ctx_t ctx, lac_status status, const char *fmt, ...)
{
    char *buf = ctx ? ctx->last_error : thread_last_error;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, LAC_ERROR_MAX, fmt, ap);
    va_end(ap);
    if (ctx) lac_log(ctx, LAC_LOG_DEBUG, "%s: %s", lac_status_string(status), buf);
    return status;
}

void lac_clear_error(lac_ctx_t ctx)
{
    (ctx ? ctx->last_error : thread_last_error)[0] = '\0';
}

const char *lac_last_error(lac_ctx_t ctx)
{
    return ctx ? ctx->last_error : thread_last_error;
}

double lac_host_memory(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (double)pages * (double)page : 0;
}

void *lac_malloc(lac_ctx_t ctx, size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p) lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "could not allocate %zu bytes of host memory", bytes);
    return p;
}

void *lac_calloc(lac_ctx_t ctx, size_t count, size_t size)
{
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (!p)
        lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "could not allocate %zu x %zu bytes of host memory",
                  count, size);
    return p;
}
