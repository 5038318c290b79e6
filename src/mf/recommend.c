/* Top-N recommendation: every item scored for a user, the items rated in
 * training left out, the n best kept in a small heap (ties: lower index). */
#include "core/topk.h"
#include "mf/mf_internal.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    float score;
    int64_t item;
} scored;

/* a before b in the final order: higher score, then lower index */
static int better(scored a, scored b) { return a.score > b.score || (a.score == b.score && a.item < b.item); }

LAC_TOPK_DEFINE(top, scored, better)

lac_status lac_mf_recommend(lac_ctx_t ctx, lac_mf_model_t m, int64_t num_users, const int64_t *users, int64_t n,
                            int64_t *items, float *scores)
{
    LAC_ARG_NOT_NULL(ctx, ctx);
    LAC_ARG_NOT_NULL(ctx, m);
    if (num_users < 0) return lac_error(ctx, LAC_ERR_SHAPE, "num_users = %lld is negative", (long long)num_users);
    if (n < 1) return lac_error(ctx, LAC_ERR_ARGUMENT, "n = %lld: ask for at least one item", (long long)n);
    if (num_users > 0 && (!users || !items)) return lac_error(ctx, LAC_ERR_ARGUMENT, "users or items is NULL");
    for (int64_t i = 0; i < num_users; i++)
        if (users[i] < 0 || users[i] >= m->num_users)
            return lac_error(ctx, LAC_ERR_RANGE, "users[%lld] = %lld is outside [0, %lld)", (long long)i,
                             (long long)users[i], (long long)m->num_users);
    int threads = lac_threads(ctx);
    int64_t keep = n < m->num_items ? n : m->num_items;
    scored *heaps = lac_malloc(ctx, (size_t)threads * (size_t)(keep ? keep : 1) * sizeof *heaps);
    if (!heaps) return LAC_ERR_OUT_OF_MEMORY;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 16)
    for (int64_t i = 0; i < num_users; i++) {
        scored *h = heaps + (int64_t)omp_get_thread_num() * (keep ? keep : 1);
        int64_t u = users[i], size = 0;
        const int32_t *rated = m->rated_items + m->rated_start[u];
        int64_t nrated = m->rated_start[u + 1] - m->rated_start[u], next = 0;
        for (int64_t j = 0; j < m->num_items && keep > 0; j++) {
            while (next < nrated && rated[next] < j) next++;
            if (next < nrated && rated[next] == j) continue;   /* rated in training */
            top_offer(h, &size, keep, (scored){lac_mf_score(m, u, j), j});
        }
        top_sort(h, size);
        for (int64_t r = 0; r < n; r++) {
            items[i * n + r] = r < size ? h[r].item : -1;
            if (scores) scores[i * n + r] = r < size ? h[r].score : 0.0f;
        }
    }
    free(heaps);
    return LAC_SUCCESS;
}
