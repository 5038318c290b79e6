/* Top-N recommendation: every item scored for a user, the items rated in
 * training left out, the n best kept in a small heap (ties: lower index). */
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

/* Min-heap on "better": the root is the worst kept item. */
static void sift_down(scored *h, int64_t n, int64_t i)
{
    for (;;) {
        int64_t l = 2 * i + 1, r = l + 1, w = i;
        if (l < n && better(h[w], h[l])) w = l;
        if (r < n && better(h[w], h[r])) w = r;
        if (w == i) return;
        scored t = h[i];
        h[i] = h[w];
        h[w] = t;
        i = w;
    }
}

static void sift_up(scored *h, int64_t i)
{
    while (i > 0) {
        int64_t parent = (i - 1) / 2;
        if (!better(h[parent], h[i])) return;
        scored t = h[i];
        h[i] = h[parent];
        h[parent] = t;
        i = parent;
    }
}

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
            scored s = {lac_mf_score(m, u, j), j};
            if (size < keep) {
                h[size] = s;
                sift_up(h, size++);
            } else if (better(s, h[0])) {
                h[0] = s;
                sift_down(h, size, 0);
            }
        }
        /* heap sort: repeatedly move the worst to the end */
        for (int64_t end = size - 1; end > 0; end--) {
            scored t = h[0];
            h[0] = h[end];
            h[end] = t;
            sift_down(h, end, 0);
        }
        for (int64_t r = 0; r < n; r++) {
            items[i * n + r] = r < size ? h[r].item : -1;
            if (scores) scores[i * n + r] = r < size ? h[r].score : 0.0f;
        }
    }
    free(heaps);
    return LAC_SUCCESS;
}
