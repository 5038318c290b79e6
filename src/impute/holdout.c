/* λ chosen by hold-out validation (lacuna.h, params.select_fraction): which
 * observed vertices or entries are hidden, the problem without them, and an
 * estimate's error on them. The walk down the λ path is impute.c's; all of it
 * goes through the backend table, so every backend validates alike. */
#include "impute/impute_front.h"
#include "core/random.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void lac_impute_holdout_release(lac_impute_holdout *h)
{
    free(h->vertex_state);
    free(h->entry_mask);
    free(h->incomplete);
    free(h->held_vertices);
    free(h->estimate);
    memset(h, 0, sizeof *h);
}

/* Selection sampling (Knuth's algorithm S): unit i of `remaining` is taken
 * with probability needed / remaining, so exactly `needed` are, in order. */
static int take(uint64_t *rng, int64_t *needed, int64_t remaining)
{
    double u = (double)(lac_splitmix64(rng) >> 11) * (1.0 / 9007199254740992.0);
    if (u * (double)remaining >= (double)*needed) return 0;
    (*needed)--;
    return 1;
}

lac_status lac_impute_holdout_make(lac_ctx_t ctx, const lac_impute_problem *full, double fraction, uint64_t seed,
                                   lac_impute_holdout *h)
{
    memset(h, 0, sizeof *h);
    const int64_t N = full->N, mn = full->m * full->n;
    const unsigned char *given = full->entry_observed;   /* set exactly when some vertex is partial */
    h->entries = given != NULL;
    h->given = given;
    int64_t units = 0;
    if (h->entries) {
        for (int64_t i = 0; i < N * mn; i++) units += given[i] != 0;
    } else {
        for (int64_t v = 0; v < N; v++) units += full->vertex_state[v] == LAC_VERTEX_OBSERVED;
    }
    const char *unit = h->entries ? "entries" : "vertices";
    if (units < 2)
        return lac_error(ctx, LAC_ERR_VALUE, "hold-out validation needs at least 2 observed %s to hide some and fit the "
                         "rest; there %s %lld", unit, units == 1 ? "is" : "are", (long long)units);
    int64_t count = llround(fraction * (double)units);
    if (count < 1) count = 1;
    if (count > units - 1) count = units - 1;
    h->count = count;

    uint64_t rng = seed ^ 0x6C616D6264610000ull;   /* a stream of its own */
    lac_splitmix64(&rng);
    h->vertex_state = lac_malloc(ctx, (size_t)N);
    if (!h->vertex_state) return LAC_ERR_OUT_OF_MEMORY;
    memcpy(h->vertex_state, full->vertex_state, (size_t)N);
    int64_t needed = count, remaining = units;
    if (h->entries) {
        h->entry_mask = lac_malloc(ctx, (size_t)(N * mn));
        if (!h->entry_mask) return LAC_ERR_OUT_OF_MEMORY;
        for (int64_t i = 0; i < N * mn; i++) {
            h->entry_mask[i] = given[i] != 0;
            if (h->entry_mask[i] && take(&rng, &needed, remaining--)) h->entry_mask[i] = 0;
        }
        int partial = 0;
        for (int64_t v = 0; v < N; v++) {
            int64_t seen = 0;
            for (int64_t e = 0; e < mn; e++) seen += h->entry_mask[v * mn + e];
            h->vertex_state[v] = seen == mn ? LAC_VERTEX_OBSERVED : seen == 0 ? LAC_VERTEX_MISSING : LAC_VERTEX_PARTIAL;
            partial |= h->vertex_state[v] == LAC_VERTEX_PARTIAL;
        }
        if (!partial) {   /* the contract's mask is for partial vertices only */
            free(h->entry_mask);
            h->entry_mask = NULL;
        }
    } else {
        h->held_vertices = lac_malloc(ctx, (size_t)count * sizeof *h->held_vertices);
        if (!h->held_vertices) return LAC_ERR_OUT_OF_MEMORY;
        for (int64_t v = 0, k = 0; v < N; v++)
            if (full->vertex_state[v] == LAC_VERTEX_OBSERVED && take(&rng, &needed, remaining--)) {
                h->vertex_state[v] = LAC_VERTEX_MISSING;
                h->held_vertices[k++] = v;
            }
    }
    int64_t incomplete = 0;
    for (int64_t v = 0; v < N; v++) incomplete += h->vertex_state[v] != LAC_VERTEX_OBSERVED;
    h->incomplete = lac_malloc(ctx, (size_t)incomplete * sizeof *h->incomplete);
    size_t bytes = (size_t)(N * mn) * lac_dtype_size(full->tensor_dtype);
    h->estimate = lac_malloc(ctx, bytes);
    if (!h->incomplete || !h->estimate) return LAC_ERR_OUT_OF_MEMORY;
    for (int64_t v = 0, k = 0; v < N; v++)
        if (h->vertex_state[v] != LAC_VERTEX_OBSERVED) h->incomplete[k++] = v;

    h->problem = *full;
    h->problem.vertex_state = h->vertex_state;
    h->problem.entry_observed = h->entry_mask;
    h->problem.num_incomplete = incomplete;
    h->problem.incomplete = h->incomplete;
    h->problem.truth = NULL;
    return LAC_SUCCESS;
}

/* (estimate - G)^2 and G^2 summed over entries [from, to) that are held out. */
static void accumulate(const lac_impute_holdout *h, int64_t from, int64_t to, double *err, double *norm, int64_t *count)
{
    const lac_impute_problem *pr = &h->problem;
    for (int64_t i = from; i < to; i++) {
        if (h->entries && !(h->given[i] && !(h->entry_mask && h->entry_mask[i]))) continue;
        double g = lac_load_real(pr->tensor, pr->tensor_dtype, i);
        double d = lac_load_real(h->estimate, pr->tensor_dtype, i) - g;
        *err += d * d;
        *norm += g * g;
        (*count)++;
    }
}

lac_status lac_impute_holdout_error(lac_ctx_t ctx, const lac_impute_backend *backend, void *state, lac_impute_holdout *h,
                                    double *error)
{
    const lac_impute_problem *pr = &h->problem;
    /* COMPLETED: the walk's estimate on every entry it does not observe, the
     * held-out ones included; finish leaves the state as it was. */
    double unused = 0;
    LAC_CHECK(backend->finish(ctx, state, LAC_IMPUTE_COMPLETED, h->estimate, pr->tensor_dtype, &unused));
    const int64_t mn = pr->m * pr->n;
    double err = 0, norm = 0;
    int64_t count = 0;
    if (h->entries) accumulate(h, 0, pr->N * mn, &err, &norm, &count);
    else
        for (int64_t k = 0; k < h->count; k++)
            accumulate(h, h->held_vertices[k] * mn, (h->held_vertices[k] + 1) * mn, &err, &norm, &count);
    *error = norm > 0 ? sqrt(err / norm) : sqrt(err / (double)(count > 0 ? count : 1));
    return LAC_SUCCESS;
}
