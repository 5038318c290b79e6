/* Implicit feedback's device arrays for one training (mf_implicit_cuda.h):
 * each user's items ascending (the negatives' test), every stream cell's
 * user, the item rows' items and the popular items' replicas (the draws
 * key on the item and write the group's row), the room for the draws; the
 * epoch's launches. mf_sgd.cu, the table, calls these beside its own. */
#include "backend/cuda/mf/mf_implicit_cuda.h"

#include <stdlib.h>
#include <string.h>

struct lac_mf_cuda_implicit {
    const lac_mf_call *call;
    lac_mf_cuda_implicit_kernel kernel;
    int negatives, bpr;
    int64_t cells, steps;
    int64_t *seen_start;
    int32_t *seen_items, *cell_user, *row_item, *rep_first, *rep_count, *neg;
};

void lac_mf_cuda_implicit_end(lac_mf_cuda_implicit *m)
{
    if (!m) return;
    void *ptrs[] = {m->seen_start, m->seen_items, m->cell_user, m->row_item, m->rep_first, m->rep_count, m->neg};
    for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0]; i++)
        if (ptrs[i]) cudaFree(ptrs[i]);
    free(m);
}

lac_status lac_mf_cuda_implicit_begin(lac_ctx_t ctx, const lac_mf_call *call, int pieces,
                                      lac_mf_cuda_implicit **out, lac_mf_cuda_implicit_kernel *kernel)
{
    lac_mf_cuda_implicit_kernel k = lac_mf_cuda_implicit_choose(pieces);
    if (!k.fn)
        return lac_error(ctx, LAC_ERR_UNSUPPORTED, "implicit feedback on CUDA takes k <= %d (k = %d: --device cpu)",
                         32 * 4 * LAC_MF_MAX_PIECES, call->factors.k);
    lac_mf_cuda_implicit *m = (lac_mf_cuda_implicit *)calloc(1, sizeof *m);
    if (!m) return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "out of host memory for the CUDA implicit state");
    m->call = call;
    m->kernel = k;
    m->bpr = call->loss == LAC_MF_LOSS_BPR;
    m->negatives = m->bpr ? 1 : call->negatives;
    *kernel = k;
    *out = m;
    return LAC_SUCCESS;
}

/* A host array to the device, then freed (after the copy). */
template <typename T>
static lac_status give(lac_ctx_t ctx, T **dst, T *src, size_t count)
{
    lac_status st = LAC_SUCCESS;
    if (!src) return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "out of host memory for the implicit arrays");
    if (cudaMalloc((void **)dst, (count ? count : 1) * sizeof(T)) != cudaSuccess) {
        *dst = NULL;
        st = lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "out of device memory for the implicit arrays");
    } else if (count && cudaMemcpy(*dst, src, count * sizeof(T), cudaMemcpyHostToDevice) != cudaSuccess) {
        st = lac_error(ctx, LAC_ERR_CUDA, "CUDA copy of the implicit arrays failed");
    }
    free(src);
    return st;
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

lac_status lac_mf_cuda_implicit_upload(lac_ctx_t ctx, lac_mf_cuda_implicit *m, const lac_mf_schedule *sch)
{
    const lac_mf_data *d = m->call->data;
    const int64_t nu = d->num_users, ni = d->num_items, rows = sch->rows;
    m->steps = sch->steps;
    m->cells = sch->groups * sch->steps;
    LAC_CUDA_CHECK(ctx, cudaStreamSynchronize(ctx->cuda->stream));
    {   /* the users' items, ascending */
        int64_t *start = (int64_t *)malloc((size_t)(nu + 1) * sizeof *start);
        int32_t *items = (int32_t *)malloc((size_t)(d->nnz ? d->nnz : 1) * sizeof *items);
        if (start && items) {
            memcpy(start, d->row_start, (size_t)(nu + 1) * sizeof *start);
            if (d->nnz) memcpy(items, d->col, (size_t)d->nnz * sizeof *items);
            for (int64_t u = 0; u < nu; u++)
                qsort(items + start[u], (size_t)(start[u + 1] - start[u]), sizeof *items, cmp_i32);
        }
        if (!start || !items) free(items), items = NULL;
        LAC_CHECK(give(ctx, &m->seen_start, start, (size_t)(nu + 1)));
        LAC_CHECK(give(ctx, &m->seen_items, items, (size_t)d->nnz));
    }
    {   /* every cell's user */
        int32_t *cu = (int32_t *)malloc((size_t)(m->cells ? m->cells : 1) * sizeof *cu);
        if (cu)
            for (int64_t g = 0; g < sch->groups; g++) {
                int64_t run = sch->group_first_run[g];
                int32_t user = -1;
                for (int64_t t = 0; t < sch->steps; t++) {
                    int32_t c = sch->code[g * sch->steps + t];
                    if (c >= 0 && (c & LAC_MF_RUN_START)) user = sch->run_user[run++];
                    cu[g * sch->steps + t] = c >= 0 ? user : -1;
                }
            }
        LAC_CHECK(give(ctx, &m->cell_user, cu, (size_t)m->cells));
    }
    {   /* item rows and replicas */
        int32_t *row_item = (int32_t *)malloc((size_t)(rows ? rows : 1) * sizeof *row_item);
        int32_t *first = (int32_t *)malloc((size_t)(ni ? ni : 1) * sizeof *first);
        int32_t *count = (int32_t *)malloc((size_t)(ni ? ni : 1) * sizeof *count);
        if (row_item && first && count) {
            for (int64_t j = 0; j < ni; j++) row_item[j] = (int32_t)j, first[j] = 0, count[j] = 1;
            for (int64_t h = 0; h < sch->hot_items; h++) {
                int32_t j = sch->hot_item[h];
                first[j] = sch->hot_first[h];
                count[j] = sch->hot_count[h];
                for (int32_t r = 1; r < count[j]; r++) row_item[first[j] + r - 1] = j;
            }
        }
        if (!row_item || !first || !count) {
            free(row_item), free(first), free(count);
            return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "out of host memory for the implicit arrays");
        }
        LAC_CHECK(give(ctx, &m->row_item, row_item, (size_t)rows));
        LAC_CHECK(give(ctx, &m->rep_first, first, (size_t)ni));
        LAC_CHECK(give(ctx, &m->rep_count, count, (size_t)ni));
    }
    size_t draws = (size_t)m->cells * (size_t)m->negatives;
    if (cudaMalloc((void **)&m->neg, (draws ? draws : 1) * sizeof(int32_t)) != cudaSuccess) {
        m->neg = NULL;
        return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "out of device memory for %zu negatives (%d a rating)", draws,
                         m->negatives);
    }
    return LAC_SUCCESS;
}

lac_status lac_mf_cuda_implicit_epoch(lac_ctx_t ctx, lac_mf_cuda_implicit *m, const lac_mf_cuda_epoch_args *base,
                                      int epoch, unsigned blocks)
{
    lac_mf_cuda_draw_args dr;
    dr.code = base->code;
    dr.cell_user = m->cell_user;
    dr.row_item = m->row_item;
    dr.rep_first = m->rep_first;
    dr.rep_count = m->rep_count;
    dr.seen_start = m->seen_start;
    dr.seen_items = m->seen_items;
    dr.cells = m->cells;
    dr.steps = m->steps;
    dr.num_items = m->call->data->num_items;
    dr.seed = m->call->seed;
    dr.epoch = epoch;
    dr.negatives = m->negatives;
    dr.neg = m->neg;
    lac_mf_cuda_implicit_args a;
    a.base = *base;
    a.neg = m->neg;
    a.negatives = m->negatives;
    a.bpr = m->bpr;
    return lac_mf_cuda_implicit_launch(ctx, &m->kernel, blocks, &dr, &a);
}
