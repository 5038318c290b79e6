/* The neighbourhood model's device arrays for one training (mf_nbr_cuda.h):
 * S^K of every item row of the schedule, w_j | c_j of every item (a replica
 * row of v_j updates its item's: replicas averaged would slow the learning
 * of w_j and c_j, measured), R(i) with its ratings, bhat at the epoch's
 * start; for the masked kernel the masks of the streams' cells
 * (mf_nbr_mask.cu) and each row's slots' bhat; the epoch and validation
 * launches; the kept epoch's W and C; the copies to and
 * from the host's num_items x K arrays. mf_sgd.cu, the table, calls these
 * beside its own for P, Q and the biases. */
#include "backend/cuda/mf/mf_nbr_cuda.h"

#include <stdlib.h>
#include <string.h>

struct lac_mf_cuda_nbr {
    const lac_mf_call *call;       /* the front end's: factors.nbr, W, C, rated_* */
    lac_mf_cuda_nbr_kernel kernel;
    int K;
    int64_t num_users, num_items, rows;
    int32_t *nbr;                  /* rows x K */
    float *WC;                     /* num_items x 2K */
    int32_t *wc_row;               /* rows: the item of each row */
    float *kept;                   /* num_items x 2K, allocated on first keep */
    int64_t *rated_start;
    int32_t *rated_items;
    float *rated_vals;
    float *bhat;                   /* num_items */
    lac_mf_cuda_nbr_masks masks;   /* the masked kernel's */
    float *slot_bhat;              /* rows x K, the masked kernel's */
    /* the validation pairs' masks (with the masked kernel), made on the
     * first validation of these pairs; tried: made or not to be made */
    lac_mf_cuda_nbr_masks valid_masks;
    const int32_t *valid_user, *valid_item;
    int64_t valid_count;
    int valid_tried;
};

void lac_mf_cuda_nbr_end(lac_mf_cuda_nbr *n)
{
    if (!n) return;
    lac_mf_cuda_nbr_masks_free(&n->masks);
    lac_mf_cuda_nbr_masks_free(&n->valid_masks);
    void *ptrs[] = {n->nbr,         n->WC,          n->wc_row,     n->kept,     n->rated_start,
                    n->rated_items, n->rated_vals,  n->bhat,       n->slot_bhat};
    for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0]; i++)
        if (ptrs[i]) cudaFree(ptrs[i]);
    free(n);
}

lac_status lac_mf_cuda_nbr_begin(lac_ctx_t ctx, const lac_mf_call *call, int pieces, lac_mf_cuda_nbr **out,
                                 lac_mf_cuda_nbr_kernel *kernel)
{
    const lac_mf_factors *f = &call->factors;
    lac_mf_cuda_nbr *n = (lac_mf_cuda_nbr *)calloc(1, sizeof *n);
    if (!n) return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "out of host memory for the CUDA neighbourhood state");
    n->call = call;
    n->K = f->nbr_k;
    n->num_users = f->num_users;
    n->num_items = f->num_items;
    /* the masks only for cells that stay the same every epoch (implicit
     * feedback draws its negatives' cells anew) */
    const int masked = !call->implicit && lac_knob_int(ctx, LAC_KNOB_MF_CUDA_NBR_MASK, 1) != 0;
    n->kernel = lac_mf_cuda_nbr_choose(pieces, f->nbr_k, masked, (int)lac_knob_int(ctx, LAC_KNOB_MF_CUDA_LANES, 0));
    *kernel = n->kernel;
    *out = n;
    return LAC_SUCCESS;
}

int64_t lac_mf_cuda_nbr_even_blocks(lac_ctx_t ctx, int64_t blocks)
{
    const int64_t sms = ctx->cuda->prop.multiProcessorCount;
    if (sms > 0 && blocks > sms && blocks % sms <= sms / 4) blocks -= blocks % sms;
    return blocks;
}

template <typename T>
static lac_status to_device(lac_ctx_t ctx, T **dst, const T *src, size_t count)
{
    LAC_CUDA_CHECK(ctx, cudaMalloc((void **)dst, (count ? count : 1) * sizeof(T)));
    if (count) LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(*dst, src, count * sizeof(T), cudaMemcpyHostToDevice, ctx->cuda->stream));
    return LAC_SUCCESS;
}

/* W and C (num_items x K each, host) into / out of a device array of
 * num_items x 2K. */
static lac_status copy_wc(lac_ctx_t ctx, const lac_mf_cuda_nbr *n, float *dev, float *W, float *C, int to_dev)
{
    if (!n->num_items || !n->K) return LAC_SUCCESS;
    size_t row = (size_t)n->K * sizeof(float), dpitch = 2 * row;
    cudaStream_t st = ctx->cuda->stream;
    cudaMemcpyKind kind = to_dev ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost;
    if (to_dev) {
        LAC_CUDA_CHECK(ctx, cudaMemcpy2DAsync(dev, dpitch, W, row, row, (size_t)n->num_items, kind, st));
        LAC_CUDA_CHECK(ctx, cudaMemcpy2DAsync(dev + n->K, dpitch, C, row, row, (size_t)n->num_items, kind, st));
    } else {
        LAC_CUDA_CHECK(ctx, cudaMemcpy2DAsync(W, row, dev, dpitch, row, (size_t)n->num_items, kind, st));
        LAC_CUDA_CHECK(ctx, cudaMemcpy2DAsync(C, row, dev + n->K, dpitch, row, (size_t)n->num_items, kind, st));
    }
    LAC_CUDA_CHECK(ctx, cudaStreamSynchronize(st));
    return LAC_SUCCESS;
}

lac_status lac_mf_cuda_nbr_upload(lac_ctx_t ctx, lac_mf_cuda_nbr *n, const lac_mf_schedule *sch,
                                  const lac_mf_cuda_epoch_args *base)
{
    const lac_mf_factors *f = &n->call->factors;
    n->rows = sch->rows;
    size_t K = (size_t)n->K, rows = (size_t)n->rows;
    /* S^K of every row: a replica row has its item's list */
    int32_t *lists = (int32_t *)malloc((rows ? rows : 1) * K * sizeof *lists);
    if (!lists) return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "out of host memory for the neighbour lists");
    memcpy(lists, f->nbr, (size_t)n->num_items * K * sizeof *lists);
    for (int64_t h = 0; h < sch->hot_items; h++)
        for (int32_t r = 1; r < sch->hot_count[h]; r++)
            memcpy(lists + (size_t)(sch->hot_first[h] + r - 1) * K, f->nbr + (size_t)sch->hot_item[h] * K,
                   K * sizeof *lists);
    lac_status st = to_device(ctx, &n->nbr, (const int32_t *)lists, rows * K);
    if (st == LAC_SUCCESS) st = lac_cuda_synchronize(ctx);   /* lists must outlive the copy */
    free(lists);
    LAC_CHECK(st);
    {   /* every row of an item updates the item's w_j | c_j */
        int32_t *own = (int32_t *)malloc((rows ? rows : 1) * sizeof *own);
        if (!own) return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "out of host memory for the row map");
        for (int64_t r = 0; r < n->num_items; r++) own[r] = (int32_t)r;
        for (int64_t h = 0; h < sch->hot_items; h++)
            for (int32_t r = 1; r < sch->hot_count[h]; r++) own[sch->hot_first[h] + r - 1] = sch->hot_item[h];
        st = to_device(ctx, &n->wc_row, (const int32_t *)own, rows);
        if (st == LAC_SUCCESS) st = lac_cuda_synchronize(ctx);
        free(own);
        LAC_CHECK(st);
    }
    LAC_CUDA_CHECK(ctx, cudaMalloc((void **)&n->WC, (size_t)(n->num_items ? n->num_items : 1) * 2 * K * sizeof(float)));
    LAC_CHECK(copy_wc(ctx, n, n->WC, f->W, f->C, 1));
    LAC_CHECK(to_device(ctx, &n->rated_start, (const int64_t *)f->rated_start, (size_t)n->num_users + 1));
    /* R(i) is the users' whole rows: more than the call's ratings when those
     * are one block of a rotation */
    const size_t rated = (size_t)f->rated_start[n->num_users];
    LAC_CHECK(to_device(ctx, &n->rated_items, f->rated_items, rated));
    LAC_CHECK(to_device(ctx, &n->rated_vals, f->rated_vals, rated));
    LAC_CUDA_CHECK(ctx, cudaMalloc((void **)&n->bhat, (size_t)(n->num_items ? n->num_items : 1) * sizeof(float)));
    LAC_CUDA_CHECK(ctx, cudaStreamSynchronize(ctx->cuda->stream));
    if (n->kernel.masked) {
        int built = 0;
        LAC_CHECK(lac_mf_cuda_nbr_masks_build(ctx, base, sch->groups, n->nbr, n->K, n->rated_start, n->rated_items,
                                              n->rated_vals, &n->masks, &built));
        if (built)
            LAC_CUDA_CHECK(ctx, cudaMalloc((void **)&n->slot_bhat, (rows ? rows : 1) * K * sizeof(float)));
        if (built)
            lac_log(ctx, LAC_LOG_INFO, "mf CUDA: neighbour masks of %lld cells, %lld of their neighbours rated",
                    (long long)(sch->groups * sch->steps), (long long)n->masks.rated);
        else {   /* the same lanes and groups, searching */
            lac_log(ctx, LAC_LOG_INFO, "mf CUDA: no neighbour masks (K > 32, offsets past 32 bits or memory): "
                                       "the epochs search each user's ratings");
            n->kernel = lac_mf_cuda_nbr_choose(base->stride / 4, n->K, 0, n->kernel.lanes);
        }
    }
    return LAC_SUCCESS;
}

static lac_mf_cuda_nbr_args make_args(const lac_mf_cuda_nbr *n, const lac_mf_cuda_epoch_args *base, float scale)
{
    const lac_mf_groups *g = &n->call->rates, *l = &n->call->lambdas;
    lac_mf_cuda_nbr_args a;
    a.base = *base;
    a.nbr = n->nbr;
    a.WC = n->WC;
    a.wc_row = n->rows > n->num_items ? n->wc_row : NULL;
    a.K = n->K;
    a.rated_start = n->rated_start;
    a.rated_items = n->rated_items;
    a.rated_vals = n->rated_vals;
    a.bhat = n->bhat;
    a.mask = n->masks.mask;
    a.moff = n->masks.moff;
    a.mvals = n->masks.mvals;
    a.slot_bhat = n->slot_bhat;
    a.gb = (float)(g->b * scale);
    a.gbh = (float)(g->bhat * scale);
    a.gu = (float)(g->u * scale);
    a.gv = (float)(g->v * scale);
    a.gw = (float)(g->w * scale);
    a.gc = (float)(g->c * scale);
    a.lb = (float)l->b;
    a.lbh = (float)l->bhat;
    a.lu = (float)l->u;
    a.lv = (float)l->v;
    a.lw = (float)l->w;
    a.lc = (float)l->c;
    a.implicit = !n->call->implicit ? 0 : n->call->loss == LAC_MF_LOSS_BPR ? 2 : 1;
    return a;
}

lac_status lac_mf_cuda_nbr_epoch(lac_ctx_t ctx, lac_mf_cuda_nbr *n, const lac_mf_cuda_epoch_args *base, float scale,
                                 unsigned blocks)
{
    lac_mf_cuda_nbr_args a = make_args(n, base, scale);
    if (n->kernel.masked)
        LAC_CHECK(lac_mf_cuda_nbr_launch_slot_bhat(ctx, base->item_bias, n->nbr, n->rows * n->K, n->slot_bhat));
    else
        LAC_CHECK(lac_mf_cuda_nbr_launch_bhat(ctx, base->item_bias, n->num_items, n->bhat));
    return lac_mf_cuda_nbr_launch_epoch(ctx, &n->kernel, blocks, &a);
}

lac_status lac_mf_cuda_nbr_validation(lac_ctx_t ctx, lac_mf_cuda_nbr *n, const lac_mf_cuda_epoch_args *base,
                                      const int32_t *user, const int32_t *item, const float *rating, int64_t count,
                                      int k, float lo, float hi, double *sse)
{
    if (n->kernel.masked && (!n->valid_tried || user != n->valid_user || item != n->valid_item ||
                             count != n->valid_count)) {   /* once for these pairs */
        lac_mf_cuda_nbr_masks_free(&n->valid_masks);
        int built = 0;
        LAC_CHECK(lac_mf_cuda_nbr_masks_pairs(ctx, user, item, count, n->nbr, n->K, n->rated_start, n->rated_items,
                                              n->rated_vals, &n->valid_masks, &built));
        n->valid_user = user;
        n->valid_item = item;
        n->valid_count = count;
        n->valid_tried = 1;
    }
    lac_mf_cuda_nbr_args a = make_args(n, base, 0.0f);
    return lac_mf_cuda_nbr_launch_validation(ctx, &a, user, item, rating, count, k, lo, hi,
                                             n->kernel.masked ? &n->valid_masks : NULL, sse);
}

lac_status lac_mf_cuda_nbr_keep(lac_ctx_t ctx, lac_mf_cuda_nbr *n, int restore)
{
    size_t bytes = (size_t)n->num_items * 2 * (size_t)n->K * sizeof(float);
    if (!n->kept) {
        if (restore) return lac_error(ctx, LAC_ERR_INTERNAL, "mf CUDA: restore without a kept epoch");
        LAC_CUDA_CHECK(ctx, cudaMalloc((void **)&n->kept, bytes + 4));
    }
    if (bytes)
        LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(restore ? n->WC : n->kept, restore ? n->kept : n->WC, bytes,
                                            cudaMemcpyDeviceToDevice, ctx->cuda->stream));
    return LAC_SUCCESS;
}

lac_status lac_mf_cuda_nbr_copy(lac_ctx_t ctx, lac_mf_cuda_nbr *n, int kept, float *W, float *C, int to_device)
{
    if (kept && !n->kept) {
        if (!to_device) return lac_error(ctx, LAC_ERR_INTERNAL, "mf CUDA: no kept epoch");
        size_t bytes = (size_t)n->num_items * 2 * (size_t)n->K * sizeof(float);
        LAC_CUDA_CHECK(ctx, cudaMalloc((void **)&n->kept, bytes + 4));
    }
    return copy_wc(ctx, n, kept ? n->kept : n->WC, W, C, to_device);
}

float *lac_mf_cuda_nbr_wc(const lac_mf_cuda_nbr *n) { return n ? n->WC : NULL; }
