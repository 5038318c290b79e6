/* map front end: parameters, argument checks and backend dispatch for
 * T[R[i]] op= w[i] * S[i] (one-shot and planned). Backends get a checked
 * lac_map_call through their table (map_backend.h). */
#include "map/map_backend.h"
#include "map/map_front.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const op_names[] = {"sum", "mean", "min", "max", "count"};

static lac_map_params map_defaults(void)
{
    lac_map_params p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    p.op = LAC_MAP_SUM;
    p.nan_policy = LAC_NAN_PROPAGATE;
    p.empty_value = 0.0;
    return p;
}

LAC_PARAMS_INIT(lac_map_params, map_defaults())

const char *lac_map_params_check(const lac_map_params *given)
{
    LAC_PARAMS_CHECK_BEGIN(lac_map_params, given, map_defaults());
    if (p->op < LAC_MAP_SUM || p->op > LAC_MAP_COUNT) return "op must be sum, mean, min, max or count";
    if (p->nan_policy < LAC_NAN_PROPAGATE || p->nan_policy > LAC_NAN_ERROR)
        return "nan_policy must be propagate, skip or error";
    if (p->op == LAC_MAP_MEAN && p->accumulate)
        return "mean cannot accumulate (it would need the previous counts): map sum and count instead";
    if (p->chunk_elements < 0) return "chunk_elements must be >= 0";
    return NULL;
}

const char *lac_map_op_name(lac_map_op op)
{
    return (op >= LAC_MAP_SUM && op <= LAC_MAP_COUNT) ? op_names[op] : "unknown";
}

lac_status lac_map_op_parse(const char *name, lac_map_op *op)
{
    if (!name || !op) return lac_error(NULL, LAC_ERR_ARGUMENT, "name or op is NULL");
    for (int i = 0; i <= LAC_MAP_COUNT; i++)
        if (strcmp(name, op_names[i]) == 0) {
            *op = (lac_map_op)i;
            return LAC_SUCCESS;
        }
    return lac_error(NULL, LAC_ERR_ARGUMENT, "unknown op '%s' (sum, mean, min, max, count)", name);
}

/* The one place a backend is picked: the context's. */
static lac_status backend_for(lac_ctx_t ctx, const lac_map_backend **out)
{
    *out = ctx->backend == LAC_BACKEND_CUDA ? lac_map_backend_cuda() : &lac_map_cpu_backend;
    if (!*out) return lac_error(ctx, LAC_ERR_NOT_COMPILED, "this build has no CUDA backend");
    return LAC_SUCCESS;
}

/* Shape, dtype and memory checks shared by lac_map and lac_map_plan_execute.
 * bridge may be NULL (planned calls): then m comes from the plan. */
lac_status lac_map_check_call(lac_ctx_t ctx, const lac_map_params *params, const lac_array *source,
                              const lac_array *bridge, const lac_array *weights, const lac_array *target,
                              int64_t plan_m, int64_t plan_n, lac_map_call *call)
{
    LAC_ARG_NOT_NULL(ctx, ctx);
    LAC_ARG_NOT_NULL(ctx, params);
    LAC_ARG_NOT_NULL(ctx, source);
    LAC_ARG_NOT_NULL(ctx, target);
    LAC_ADOPT_PARAMS(ctx, "map", lac_map_params, params, map_defaults());
    const char *why = lac_map_params_check(params);
    if (why) return lac_error(ctx, LAC_ERR_ARGUMENT, "map parameters: %s", why);

    if (source->dtype != LAC_FLOAT32 && source->dtype != LAC_FLOAT64)
        return lac_error(ctx, LAC_ERR_DTYPE, "source is %s; map takes float32 or float64 values",
                         lac_dtype_name(source->dtype));
    if (target->dtype != source->dtype)
        return lac_error(ctx, LAC_ERR_DTYPE, "target is %s but source is %s: they must match",
                         lac_dtype_name(target->dtype), lac_dtype_name(source->dtype));
    if (weights && weights->dtype != source->dtype)
        return lac_error(ctx, LAC_ERR_DTYPE, "weights are %s but source is %s: they must match",
                         lac_dtype_name(weights->dtype), lac_dtype_name(source->dtype));
    if (bridge && bridge->dtype != LAC_INT32 && bridge->dtype != LAC_INT64)
        return lac_error(ctx, LAC_ERR_DTYPE, "bridge is %s; it must be int32 or int64", lac_dtype_name(bridge->dtype));

    if (source->ndim != 1 && source->ndim != 2)
        return lac_error(ctx, LAC_ERR_SHAPE, "source must be a vector (m) or a matrix (m x b), not %d-d", source->ndim);
    if (target->ndim != source->ndim)
        return lac_error(ctx, LAC_ERR_SHAPE, "target is %d-d but source is %d-d", target->ndim, source->ndim);
    for (int d = 0; d < source->ndim; d++)
        if (source->shape[d] < 0 || target->shape[d] < 0)
            return lac_error(ctx, LAC_ERR_SHAPE, "negative array length");
    int64_t m = source->shape[0], n = target->shape[0];
    int64_t b = source->ndim == 2 ? source->shape[1] : 1;
    if (source->ndim == 2 && target->shape[1] != b)
        return lac_error(ctx, LAC_ERR_SHAPE, "source has %lld columns but target has %lld", (long long)b,
                         (long long)target->shape[1]);
    if (b < 1) return lac_error(ctx, LAC_ERR_SHAPE, "source has no columns");
    if (bridge) {
        if (bridge->ndim != 1) return lac_error(ctx, LAC_ERR_SHAPE, "bridge must be a vector, not %d-d", bridge->ndim);
        if (bridge->shape[0] != m)
            return lac_error(ctx, LAC_ERR_SHAPE, "bridge has %lld entries but source has %lld rows",
                             (long long)bridge->shape[0], (long long)m);
    } else {
        if (m != plan_m)
            return lac_error(ctx, LAC_ERR_SHAPE, "source has %lld rows but the plan's bridge has %lld", (long long)m,
                             (long long)plan_m);
        if (n != plan_n)
            return lac_error(ctx, LAC_ERR_SHAPE, "target has %lld rows but the plan maps to %lld", (long long)n,
                             (long long)plan_n);
    }
    if (weights && (weights->ndim != 1 || weights->shape[0] != m))
        return lac_error(ctx, LAC_ERR_SHAPE, "weights must be a vector of %lld (one per source row)", (long long)m);
    if (n == 0 && m > 0) return lac_error(ctx, LAC_ERR_SHAPE, "target is empty but there are %lld sources", (long long)m);

    lac_memory mem = source->memory;
    if (target->memory != mem || (bridge && bridge->memory != mem) || (weights && weights->memory != mem))
        return lac_error(ctx, LAC_ERR_ARGUMENT, "source, bridge, weights and target must all be host or all device arrays");
    if (mem == LAC_MEM_DEVICE && ctx->backend != LAC_BACKEND_CUDA)
        return lac_error(ctx, LAC_ERR_ARGUMENT, "device arrays need a context with the CUDA backend");
    if ((m > 0 && (!source->data || (bridge && !bridge->data))) || (n > 0 && !target->data) ||
        (weights && m > 0 && !weights->data))
        return lac_error(ctx, LAC_ERR_ARGUMENT, "an array's data is NULL");

    memset(call, 0, sizeof *call);
    call->params = *params;
    call->source = source->data;
    call->bridge = bridge ? bridge->data : NULL;
    call->weights = weights ? weights->data : NULL;
    call->target = target->data;
    call->value_dtype = source->dtype;
    call->index_dtype = bridge ? bridge->dtype : LAC_INT64;
    call->m = m;
    call->n = n;
    call->b = b;
    call->memory = mem;
    return LAC_SUCCESS;
}

lac_status lac_map(lac_ctx_t ctx, const lac_map_params *params, const lac_array *source, const lac_array *bridge,
                   const lac_array *weights, lac_array *target)
{
    LAC_ARG_NOT_NULL(ctx, bridge);
    lac_map_call call;
    LAC_CHECK(lac_map_check_call(ctx, params, source, bridge, weights, target, 0, 0, &call));
    const lac_map_backend *backend;
    LAC_CHECK(backend_for(ctx, &backend));
    return ctx->ranks > 1 ? lac_map_dist(ctx, backend, &call) : backend->map(ctx, &call);
}

lac_status lac_map_plan_create(lac_ctx_t ctx, const lac_array *bridge, int64_t num_targets, lac_map_plan_t *out)
{
    LAC_ARG_NOT_NULL(ctx, ctx);
    LAC_ARG_NOT_NULL(ctx, bridge);
    LAC_ARG_NOT_NULL(ctx, out);
    *out = NULL;
    if (bridge->dtype != LAC_INT32 && bridge->dtype != LAC_INT64)
        return lac_error(ctx, LAC_ERR_DTYPE, "bridge is %s; it must be int32 or int64", lac_dtype_name(bridge->dtype));
    if (bridge->ndim != 1) return lac_error(ctx, LAC_ERR_SHAPE, "bridge must be a vector, not %d-d", bridge->ndim);
    if (num_targets < 0) return lac_error(ctx, LAC_ERR_SHAPE, "num_targets = %lld is negative", (long long)num_targets);
    if (bridge->shape[0] > 0 && num_targets == 0)
        return lac_error(ctx, LAC_ERR_SHAPE, "num_targets is 0 but the bridge has %lld entries", (long long)bridge->shape[0]);
    if (bridge->shape[0] > 0 && !bridge->data) return lac_error(ctx, LAC_ERR_ARGUMENT, "bridge data is NULL");
    if (bridge->memory == LAC_MEM_DEVICE && ctx->backend != LAC_BACKEND_CUDA)
        return lac_error(ctx, LAC_ERR_ARGUMENT, "device arrays need a context with the CUDA backend");

    lac_map_plan_t plan = lac_calloc(ctx, 1, sizeof *plan);
    if (!plan) return LAC_ERR_OUT_OF_MEMORY;
    plan->m = bridge->shape[0];
    plan->n = num_targets;
    plan->backend = ctx->backend;
    plan->deterministic = 1;

    lac_map_call call;
    memset(&call, 0, sizeof call);
    call.params = lac_map_params_default();
    call.bridge = bridge->data;
    call.index_dtype = bridge->dtype;
    call.value_dtype = LAC_FLOAT32;
    call.m = plan->m;
    call.n = plan->n;
    call.b = 1;
    call.memory = bridge->memory;

    lac_status st;
    st = backend_for(ctx, &plan->table);
    if (st >= 0) st = ctx->ranks > 1 ? lac_map_dist_plan_build(ctx, plan, &call) : plan->table->plan_build(ctx, plan, &call);
    if (st < 0) {
        lac_map_plan_destroy(&plan);
        return st;
    }
    *out = plan;
    return LAC_SUCCESS;
}

void lac_map_plan_destroy(lac_map_plan_t *plan)
{
    if (!plan || !*plan) return;
    if ((*plan)->dist) lac_map_dist_plan_release(*plan);
    else if ((*plan)->table && (*plan)->state) (*plan)->table->plan_release(*plan);
    free(*plan);
    *plan = NULL;
}

int64_t lac_map_plan_num_sources(lac_map_plan_t plan) { return plan ? plan->m : 0; }

lac_status lac_map_plan_set_deterministic(lac_map_plan_t plan, int deterministic)
{
    if (!plan) return LAC_ERR_ARGUMENT;
    plan->deterministic = deterministic != 0;
    return LAC_SUCCESS;
}
int64_t lac_map_plan_num_targets(lac_map_plan_t plan) { return plan ? plan->n : 0; }

lac_status lac_map_plan_execute(lac_ctx_t ctx, lac_map_plan_t plan, const lac_map_params *params,
                                const lac_array *source, const lac_array *weights, lac_array *target)
{
    LAC_ARG_NOT_NULL(ctx, ctx);
    LAC_ARG_NOT_NULL(ctx, plan);
    if (plan->backend != ctx->backend)
        return lac_error(ctx, LAC_ERR_ARGUMENT, "the plan was built for the %s backend, this context is %s",
                         plan->backend == LAC_BACKEND_CUDA ? "cuda" : "cpu",
                         ctx->backend == LAC_BACKEND_CUDA ? "cuda" : "cpu");
    lac_map_call call;
    LAC_CHECK(lac_map_check_call(ctx, params, source, NULL, weights, target, plan->m, plan->n, &call));
    call.params.deterministic = plan->deterministic || params->deterministic;
    return plan->dist ? lac_map_dist_plan_execute(ctx, plan, &call) : plan->table->plan_execute(ctx, plan, &call);
}
