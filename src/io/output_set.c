/* Output sets (lacuna.h, lac_outputs_begin): a run's outputs are written and
 * synced as they come, kept unnamed (or under temporary names), and renamed
 * over their targets together at lac_outputs_commit, so that a failure
 * anywhere in the run leaves every existing file as it was. */
#include "io/io_internal.h"

#include <stdlib.h>
#include <string.h>

struct lac_output_set {
    lac_atomic_file *files;
    int count, cap;
};

bool lac_output_set_open(lac_ctx_t ctx) { return ctx && ctx->outputs; }

lac_status lac_output_set_add(lac_ctx_t ctx, lac_atomic_file *af)
{
    struct lac_output_set *set = ctx->outputs;
    if (set->count == set->cap) {
        int cap = set->cap ? 2 * set->cap : 8;
        lac_atomic_file *grown = realloc(set->files, (size_t)cap * sizeof *grown);
        if (!grown) {
            lac_status st = lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "out of memory keeping %s", af->path);
            lac_atomic_abort(af);
            return st;
        }
        set->files = grown;
        set->cap = cap;
    }
    set->files[set->count++] = *af;
    memset(af, 0, sizeof *af);
    af->tmp_slot = -1;
    return LAC_SUCCESS;
}

static void drop_set(struct lac_output_set *set)
{
    for (int i = 0; i < set->count; i++) lac_atomic_abort(&set->files[i]);
    free(set->files);
    free(set);
}

lac_status lac_outputs_begin(lac_ctx_t ctx)
{
    LAC_ARG_NOT_NULL(ctx, ctx);
    if (ctx->outputs) return lac_error(ctx, LAC_ERR_ARGUMENT, "an output set is already open on this context");
    if (!(ctx->outputs = lac_calloc(ctx, 1, sizeof *ctx->outputs))) return LAC_ERR_OUT_OF_MEMORY;
    ctx->outputs_abort = lac_outputs_abort;
    return LAC_SUCCESS;
}

lac_status lac_outputs_commit(lac_ctx_t ctx)
{
    LAC_ARG_NOT_NULL(ctx, ctx);
    struct lac_output_set *set = ctx->outputs;
    ctx->outputs = NULL;
    if (!set) return LAC_SUCCESS;
    if (ctx->rank != 0) {
        /* Over MPI every rank computes the same outputs; rank 0 alone names them. */
        drop_set(set);
        return LAC_SUCCESS;
    }
    /* Every file gets its name first (what can fail: room, rights), then
     * the renames run back to back. */
    lac_status st = LAC_SUCCESS;
    for (int i = 0; i < set->count && st == LAC_SUCCESS; i++) st = lac_atomic_name(ctx, &set->files[i]);
    for (int i = 0; i < set->count && st == LAC_SUCCESS; i++) st = lac_atomic_publish(ctx, &set->files[i]);
    drop_set(set);   /* what is left after a failure is removed */
    return st;
}

void lac_outputs_abort(lac_ctx_t ctx)
{
    if (!ctx || !ctx->outputs) return;
    drop_set(ctx->outputs);
    ctx->outputs = NULL;
}
