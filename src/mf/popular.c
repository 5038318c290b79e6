/* The most popular items of a model's training ratings: what recommend
 * offers a user the model does not know. */
#include "core/topk.h"
#include "mf/mf_internal.h"

#include <stdlib.h>

typedef struct {
    int64_t count, item;
} counted;

/* a before b: more ratings, then lower index */
static int more(counted a, counted b) { return a.count > b.count || (a.count == b.count && a.item < b.item); }

LAC_TOPK_DEFINE(pop, counted, more)

lac_status lac_mf_popular(lac_ctx_t ctx, lac_mf_model_t m, int64_t n, int64_t *items, int64_t *counts)
{
    LAC_ARG_NOT_NULL(ctx, ctx);
    LAC_ARG_NOT_NULL(ctx, m);
    LAC_ARG_NOT_NULL(ctx, items);
    if (n < 1) return lac_error(ctx, LAC_ERR_ARGUMENT, "n = %lld: ask for at least one item", (long long)n);
    int64_t *count = lac_calloc(ctx, (size_t)(m->num_items ? m->num_items : 1), sizeof *count);
    int64_t keep = n < m->num_items ? n : m->num_items;
    counted *h = lac_malloc(ctx, (size_t)(keep ? keep : 1) * sizeof *h);
    if (!count || !h) {
        free(count);
        free(h);
        return LAC_ERR_OUT_OF_MEMORY;
    }
    for (int64_t a = 0; a < m->rated_start[m->num_users]; a++) count[m->rated_items[a]]++;
    int64_t size = 0;
    for (int64_t j = 0; j < m->num_items; j++) pop_offer(h, &size, keep, (counted){count[j], j});
    pop_sort(h, size);
    for (int64_t r = 0; r < n; r++) {
        items[r] = r < size ? h[r].item : -1;
        if (counts) counts[r] = r < size ? h[r].count : 0;
    }
    free(count);
    free(h);
    return LAC_SUCCESS;
}
