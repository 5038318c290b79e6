/* Context: resolves the backend, owns the thread count, the log sink, the
 * knobs and the device backend's state (made once and reused). */
#include "core/internal.h"
#include "core/comm.h"
#include "core/device.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

void lac_log_stderr(lac_log_level level, const char *message, void *user);
int lac_log_level_from_env(const char *value);

static lac_ctx_params ctx_defaults(void)
{
    lac_ctx_params p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    p.backend = LAC_BACKEND_AUTO;
    p.log_level = LAC_LOG_WARN;
    return p;
}

LAC_PARAMS_INIT(lac_ctx_params, ctx_defaults())

const char *lac_ctx_params_check(const lac_ctx_params *given)
{
    LAC_PARAMS_CHECK_BEGIN(lac_ctx_params, given, ctx_defaults());
    if (p->backend < LAC_BACKEND_AUTO || p->backend > LAC_BACKEND_CUDA)
        return "backend must be auto, cpu or cuda";
    if (p->num_devices < 0 || p->num_devices > LAC_MAX_DEVICES)
        return "num_devices must be in [0, LAC_MAX_DEVICES]";
    for (int i = 0; i < p->num_devices; i++)
        if (p->device_ids[i] < 0) return "device ids must be >= 0";
    if (p->threads < 0) return "threads must be >= 0 (0: OpenMP's default)";
    if (p->log_level < LAC_LOG_ERROR || p->log_level > LAC_LOG_DEBUG)
        return "log_level must be error, warn, info or debug";
    return NULL;
}

lac_status lac_ctx_create(const lac_ctx_params *params, lac_ctx_t *out)
{
    if (!out) return lac_error(NULL, LAC_ERR_ARGUMENT, "ctx is NULL");
    *out = NULL;
    lac_ctx_params p = ctx_defaults();
    const char *why = params ? lac_params_adopt(params, &p, sizeof p, &p) : NULL;
    if (!why) why = lac_ctx_params_check(&p);
    if (why) return lac_error(NULL, LAC_ERR_ARGUMENT, "context parameters: %s", why);

    lac_ctx_t ctx = calloc(1, sizeof *ctx);
    if (!ctx) return lac_error(NULL, LAC_ERR_OUT_OF_MEMORY, "could not allocate a context");
    ctx->params = p;
    ctx->params.knobs = NULL;   /* the caller's string may not outlive the call: see ctx->knob_text */
    ctx->ranks = 1;
    ctx->threads = p.threads > 0 ? p.threads : omp_get_max_threads();
    ctx->log = p.log;
    ctx->log_user = p.log_user;
    ctx->log_level = p.log_level;
    int env_level = lac_log_level_from_env(lac_knob_string(NULL, LAC_KNOB_LOG));
    if (!ctx->log && env_level >= 0) {
        ctx->log = lac_log_stderr;
        ctx->log_level = (lac_log_level)env_level;
    }
    why = lac_knobs_load(ctx, p.knobs);
    if (why) {
        lac_knobs_free(ctx);
        free(ctx);
        return lac_error(NULL, LAC_ERR_ARGUMENT, "context parameters: %s", why);
    }

    lac_status joined = lac_comm_open(ctx);
    if (joined < 0) {
        lac_error(NULL, joined, "%s", ctx->last_error);
        lac_knobs_free(ctx);
        free(ctx);
        return joined;
    }

    const lac_device_backend *cuda = lac_device_backend_cuda();
    lac_backend want = p.backend;
    if (want == LAC_BACKEND_AUTO) want = cuda && cuda->device_count() > 0 ? LAC_BACKEND_CUDA : LAC_BACKEND_CPU;
    ctx->backend = want;
    if (want == LAC_BACKEND_CUDA) {
        lac_status st = cuda ? cuda->ctx_init(ctx)
                             : lac_error(ctx, LAC_ERR_NOT_COMPILED, "this build has no CUDA backend");
        if (st < 0) {
            lac_error(NULL, st, "%s", ctx->last_error);
            lac_comm_close(ctx);
            lac_knobs_free(ctx);
            free(ctx);
            return st;
        }
    }
    lac_log(ctx, LAC_LOG_INFO, "context: backend %s, %d CPU threads",
            want == LAC_BACKEND_CUDA ? "cuda" : "cpu", ctx->threads);
    *out = ctx;
    return LAC_SUCCESS;
}

void lac_ctx_destroy(lac_ctx_t *ctx)
{
    if (!ctx || !*ctx) return;
    if ((*ctx)->outputs && (*ctx)->outputs_abort) (*ctx)->outputs_abort(*ctx);   /* staged outputs are dropped */
    const lac_device_backend *device = lac_ctx_device(*ctx);
    if (device) device->ctx_fini(*ctx);
    lac_comm_close(*ctx);
    lac_knobs_free(*ctx);
    free(*ctx);
    *ctx = NULL;
}

lac_backend lac_ctx_backend(lac_ctx_t ctx) { return ctx ? ctx->backend : LAC_BACKEND_CPU; }

int lac_ctx_threads(lac_ctx_t ctx) { return lac_threads(ctx); }

int lac_ctx_rank(lac_ctx_t ctx) { return ctx ? ctx->rank : 0; }

int lac_ctx_ranks(lac_ctx_t ctx) { return ctx ? ctx->ranks : 1; }

lac_status lac_ctx_synchronize(lac_ctx_t ctx)
{
    LAC_ARG_NOT_NULL(ctx, ctx);
    const lac_device_backend *device = lac_ctx_device(ctx);
    return device ? device->synchronize(ctx) : LAC_SUCCESS;
}

int lac_cuda_device_count(void)
{
    const lac_device_backend *cuda = lac_device_backend_cuda();
    return cuda ? cuda->device_count() : 0;
}

lac_status lac_cuda_device_describe(int device, char *buf, size_t len)
{
    if (!buf || len == 0) return lac_error(NULL, LAC_ERR_ARGUMENT, "buf is NULL or empty");
    const lac_device_backend *cuda = lac_device_backend_cuda();
    if (!cuda) return lac_error(NULL, LAC_ERR_NOT_COMPILED, "this build has no CUDA backend");
    int count = cuda->device_count();
    if (device < 0 || device >= count)
        return lac_error(NULL, LAC_ERR_RANGE, "device %d is outside [0, %d)", device, count);
    return cuda->describe(NULL, device, buf, len);
}
