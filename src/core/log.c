/* Logging: the library prints nothing itself. Messages go to the context's
 * callback, or to stderr when LACUNA_LOG names a level. */
#include "core/internal.h"

#include <stdio.h>
#include <string.h>

static const char *level_name(lac_log_level level)
{
    switch (level) {
    case LAC_LOG_ERROR: return "error";
    case LAC_LOG_WARN: return "warn";
    case LAC_LOG_INFO: return "info";
    default: return "debug";
    }
}

void lac_log_stderr(lac_log_level level, const char *message, void *user)
{
    (void)user;
    fprintf(stderr, "lacuna[%s]: %s\n", level_name(level), message);
}

/* LACUNA_LOG=error|warn|info|debug; returns -1 when unset or unknown. */
int lac_log_level_from_env(const char *value)
{
    if (!value || !*value) return -1;
    static const char *names[] = {"error", "warn", "info", "debug"};
    for (int i = 0; i < 4; i++)
        if (strcmp(value, names[i]) == 0) return i;
    return -1;
}

void lac_log(lac_ctx_t ctx, lac_log_level level, const char *fmt, ...)
{
    if (!ctx || !ctx->log || level > ctx->log_level) return;
    char buf[LAC_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    ctx->log(level, buf, ctx->log_user);
}
