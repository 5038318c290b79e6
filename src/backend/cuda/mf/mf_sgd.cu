/* mf on CUDA: the host driver of CUSGD++ and its backend table (mf_backend.h),
 * handed out by the gateway. It builds the schedule on the host
 * (src/mf/schedule.c), copies it and the factors to the device, runs the
 * epochs (mf_sgd_kernels.cu), validates on the device and keeps the best
 * epoch with device-to-device copies. Nothing is kept across trainings: all
 * of it lives in the state that begin makes and end frees.
 *
 * Schedule, built once per training: users in order of rating count (heaviest
 * first), a row longer than run_max cut into runs; runs dealt to groups by
 * longest-processing-time (each to the least loaded group), so every group
 * walks a stream of about the same length. The streams are laid out group by
 * group, padded to one common length, with a flag on the first rating of each
 * run.
 *
 * Popular items: every update of v_j is a read and a write of one line of L2,
 * and the accesses to one line are served one after another, so the item
 * with the most ratings sets a floor under the epoch (measured on an H100:
 * 5.3 ms an epoch on the MovieLens-10M shape whatever the number of groups,
 * ~85 ns for each of the 62,593 ratings of its most rated item). An item with
 * more than `hot` ratings therefore gets replicas, R = ceil(count / hot) rows
 * in all; group g updates replica g mod R, and after each epoch the replicas
 * are averaged (like the split rows of u_i) and the average copied back to
 * each. Rows and biases of the replicas sit after the items' own, so the
 * kernel indexes them like any item. hot starts at 512 ratings and doubles
 * until the replica rows take at most a third of L2: more would push the
 * rows themselves out of it (measured on the Netflix shape at F = 128:
 * 22.4 ms an epoch with 40 MB of replica rows, 18.9 ms with 17 MB). Item
 * biases sit one L2 line apart for the same reason (2.7 ms an epoch instead
 * of 5.3 with nothing else changed).
 *
 * The neighbourhood model (factors.nbr_k > 0) walks the same kind of schedule
 * with its own kernel (its arrays are mf_nbr.cu's, called beside these), but
 * with LAC_MF_NBR_RATINGS_PER_GROUP ratings a group, whole rows and no
 * replicas by default: its w_j and c_j learn at rates of 0.002 from many small
 * steps, and on the MovieLens-10M shape (H200, 2026-11-24) 8,448 groups lost
 * so many of the popular items' updates (or, with atomic adds, overshot) that
 * the best validation RMSE was 0.550 against the CPU's 0.537; 1,024 groups
 * with whole rows gave 0.538, 256 gave 0.5378 (bench/RESULTS.md). With the
 * per-rating neighbour masks (mf_nbr_mask.cu) 2,048 and 4,096 groups were
 * measured again (2026-11-25): faster epochs, but worse RMSE on the ML-10M
 * shape and on planted neighbourhoods, so the default stayed; its blocks are
 * rounded down to the same number on every multiprocessor where that drops
 * few (lac_mf_cuda_nbr_even_blocks: 1,084 groups become 1,056 on an H200).
 *
 * Tuning knobs (core/knobs.h, for measurements): LACUNA_MF_CUDA_LANES,
 * _AHEAD, _GROUPS, _HOT, _RUN_MAX. */
#include "backend/cuda/mf/mf_cuda.h"
#include "backend/cuda/mf/mf_implicit_cuda.h"
#include "backend/cuda/mf/mf_multi_cuda.h"
#include "backend/cuda/mf/mf_parts_cuda.h"
#include "backend/cuda/mf/mf_nbr_cuda.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct lac_mf_state {
    lac_mf_call call;         /* the host factors: download's destination */
    int64_t num_users, num_items, nnz, runs, valid_count;
    int k, stride;
    float mean, lambda, lambda_bias, rating_min, rating_max;
    int use_bias;
    /* the schedule */
    lac_mf_cuda_kernel kernel;
    int64_t groups, steps;
    unsigned blocks;
    int64_t rows, hot_items;  /* item rows with replicas; items that have replicas */
    /* device */
    int32_t *code;
    float *rating;
    int64_t *group_first_run;
    int32_t *run_user;
    float *run_weight;
    int32_t *hot_item, *hot_first, *hot_count;   /* per hot item: its index, first replica row, rows in all */
    float *P, *Q, *user_bias;
    float *item_bias;        /* LAC_MF_BIAS_STRIDE apart */
    float *best;             /* P, Q, biases of the kept epoch, allocated on first keep */
    int32_t *valid_user, *valid_item;
    float *valid_rating;
    double *sums;            /* LAC_MF_SSE_SLOTS training partial sums, then as many validation */
    lac_mf_cuda_nbr *nbr;    /* the neighbourhood model's arrays; NULL for the plain one */
    lac_mf_cuda_implicit *implicit;   /* implicit feedback's; NULL for ratings */
    lac_mf_cuda_multi *multi; /* a training over several devices (mf_multi.cu); then nothing else is set */
    lac_mf_cuda_part *part;   /* a part of the items over MPI ranks (mf_parts.cu); then nothing else is set */
};

/* A part's model lives in the rotation's host arrays (mf_parts.cu). */
static lac_status part_has_no_model(lac_ctx_t ctx)
{
    return lac_error(ctx, LAC_ERR_INTERNAL, "mf CUDA: a part of the items keeps no model of its own");
}

static lac_status replicas(lac_ctx_t ctx, lac_mf_state *s, int spread)
{
    return lac_mf_cuda_launch_replicas(ctx, s->hot_item, s->hot_first, s->hot_count, s->hot_items, s->Q, s->item_bias,
                                       s->stride, spread);
}

static void free_state(lac_mf_state *s)
{
    if (!s) return;
    if (s->multi || s->part) {
        free(s);
        return;
    }
    lac_mf_cuda_nbr_end(s->nbr);
    lac_mf_cuda_implicit_end(s->implicit);
    void *ptrs[] = {s->code, s->rating, s->group_first_run, s->run_user, s->run_weight, s->hot_item, s->hot_first,
                    s->hot_count, s->P, s->Q, s->user_bias, s->item_bias, s->best, s->valid_user, s->valid_item,
                    s->valid_rating, s->sums};
    for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0]; i++)
        if (ptrs[i]) cudaFree(ptrs[i]);
    free(s);
}

template <typename T>
static lac_status upload(lac_ctx_t ctx, T **dst, const T *src, size_t count)
{
    size_t bytes = (count ? count : 1) * sizeof(T);
    LAC_CUDA_CHECK(ctx, cudaMalloc((void **)dst, bytes));
    if (count) LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(*dst, src, count * sizeof(T), cudaMemcpyHostToDevice, ctx->cuda->stream));
    return LAC_SUCCESS;
}

/* A tuning knob: its value when it is a whole number >= 1, else fallback. */
static int64_t knob(lac_ctx_t ctx, lac_knob which, int64_t fallback)
{
    int64_t v = lac_knob_int(ctx, which, fallback);
    return v >= 1 ? v : fallback;
}

/* The schedule's arrays and the factors on the device. */
static lac_status upload_all(lac_ctx_t ctx, lac_mf_state *s, const lac_mf_call *call, const lac_mf_schedule *sch)
{
    const lac_mf_factors *f = &call->factors;
    size_t pu = (size_t)s->num_users * (size_t)s->stride, qi = (size_t)s->num_items * (size_t)s->stride;
    size_t rows_q = (size_t)s->rows * (size_t)s->stride;
    size_t cells = (size_t)s->groups * (size_t)s->steps;
    cudaStream_t stream = ctx->cuda->stream;
    LAC_CHECK(upload(ctx, &s->code, (const int32_t *)sch->code, cells));
    LAC_CHECK(upload(ctx, &s->rating, (const float *)sch->rating, cells));
    LAC_CHECK(upload(ctx, &s->group_first_run, (const int64_t *)sch->group_first_run, (size_t)s->groups));
    LAC_CHECK(upload(ctx, &s->run_user, (const int32_t *)sch->run_user, (size_t)s->runs));
    LAC_CHECK(upload(ctx, &s->run_weight, (const float *)sch->run_weight, (size_t)s->runs));
    LAC_CHECK(upload(ctx, &s->P, (const float *)f->P, pu));
    LAC_CUDA_CHECK(ctx, cudaMalloc((void **)&s->Q, (rows_q ? rows_q : 1) * sizeof(float)));
    if (qi) LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(s->Q, f->Q, qi * sizeof(float), cudaMemcpyHostToDevice, stream));
    LAC_CHECK(upload(ctx, &s->user_bias, (const float *)f->user_bias, (size_t)s->num_users));
    LAC_CUDA_CHECK(ctx, cudaMalloc((void **)&s->item_bias, ((size_t)s->rows + 1) * LAC_MF_BIAS_STRIDE * sizeof(float)));
    if (s->num_items)
        LAC_CUDA_CHECK(ctx, cudaMemcpy2DAsync(s->item_bias, LAC_MF_BIAS_STRIDE * sizeof(float), f->item_bias,
                                              sizeof(float), sizeof(float), (size_t)s->num_items,
                                              cudaMemcpyHostToDevice, stream));
    LAC_CHECK(upload(ctx, &s->hot_item, (const int32_t *)sch->hot_item, (size_t)s->hot_items));
    LAC_CHECK(upload(ctx, &s->hot_first, (const int32_t *)sch->hot_first, (size_t)s->hot_items));
    LAC_CHECK(upload(ctx, &s->hot_count, (const int32_t *)sch->hot_count, (size_t)s->hot_items));
    LAC_CHECK(replicas(ctx, s, 1));
    if (call->valid) {
        s->valid_count = call->valid->count;
        LAC_CHECK(upload(ctx, &s->valid_user, (const int32_t *)call->valid->user, (size_t)s->valid_count));
        LAC_CHECK(upload(ctx, &s->valid_item, (const int32_t *)call->valid->item, (size_t)s->valid_count));
        LAC_CHECK(upload(ctx, &s->valid_rating, (const float *)call->valid->val, (size_t)s->valid_count));
    }
    LAC_CUDA_CHECK(ctx, cudaMalloc((void **)&s->sums, 2 * LAC_MF_SSE_SLOTS * sizeof(double)));
    /* the host arrays must outlive the asynchronous copies */
    LAC_CUDA_CHECK(ctx, cudaStreamSynchronize(stream));
    return LAC_SUCCESS;
}

static lac_mf_cuda_epoch_args epoch_args(const lac_mf_state *s, float lr);

lac_status lac_mf_cuda_one_begin(lac_ctx_t ctx, const lac_mf_call *call, lac_mf_state **out)
{
    LAC_CHECK(lac_cuda_use_device(ctx));
    const lac_mf_data *d = call->data;
    const lac_mf_factors *f = &call->factors;
    if (d->num_items > LAC_MF_ITEM_MASK)
        return lac_error(ctx, LAC_ERR_UNSUPPORTED, "mf CUDA: %lld items, more than the %d the schedule can index",
                         (long long)d->num_items, LAC_MF_ITEM_MASK);
    lac_mf_state *s = (lac_mf_state *)calloc(1, sizeof *s);
    if (!s) return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "out of host memory for the CUDA mf state");
    s->call = *call;
    s->num_users = d->num_users;
    s->num_items = d->num_items;
    s->nnz = d->nnz;
    s->k = f->k;
    s->stride = f->stride;
    s->mean = (float)f->mean;
    s->lambda = (float)call->lambda;
    s->lambda_bias = (float)call->lambda_bias;
    s->use_bias = call->use_bias;
    s->rating_min = f->rating_min;
    s->rating_max = f->rating_max;
    lac_status st = LAC_SUCCESS;
    lac_mf_schedule sch;
    memset(&sch, 0, sizeof sch);
    int per_sm = 0;

    /* implicit feedback with the neighbourhood model: its kernel on a stream
     * of the interactions and their negatives' cells; the plain model's on a
     * block of the items: and cells without a positive (mf_implicit_cuda.h) */
    lac_mf_data cells;
    memset(&cells, 0, sizeof cells);
    const lac_mf_data *sd = d;   /* what the schedule deals */

    /* the kernel and the number of groups in flight */
    int inbatch = 0;
    if (call->implicit && !f->nbr_k) {   /* its own kernel, the same schedule */
        lac_mf_cuda_implicit_kernel ik;
        LAC_CHECK_GOTO(lac_mf_cuda_implicit_begin(ctx, &s->call, s->stride / 4, &s->implicit, &ik), st, fail);
        LAC_CHECK_GOTO(lac_mf_cuda_implicit_occupancy(ctx, &ik, &per_sm), st, fail);
        s->kernel.fn = NULL;
        s->kernel.lanes = ik.lanes;
        s->kernel.groups_per_block = ik.groups_per_block;
        inbatch = ik.inbatch;
        /* a block of the items: users without a positive there take a cell of negatives */
        LAC_CHECK_GOTO(lac_mf_cuda_implicit_alone_cells(ctx, s->implicit, &cells), st, fail);
        if (cells.row_start) sd = &cells;
    } else if (f->nbr_k) {   /* its own kernel; s->kernel keeps only the group shape */
        lac_mf_cuda_nbr_kernel nk;
        LAC_CHECK_GOTO(lac_mf_cuda_nbr_begin(ctx, &s->call, s->stride / 4, &s->nbr, &nk), st, fail);
        LAC_CHECK_GOTO(lac_mf_cuda_nbr_occupancy(ctx, &nk, &per_sm), st, fail);
        s->kernel.fn = NULL;
        s->kernel.lanes = nk.lanes;
        s->kernel.groups_per_block = nk.groups_per_block;
        if (call->implicit) {
            LAC_CHECK_GOTO(lac_mf_cuda_implicit_nbr_begin(ctx, &s->call, &s->implicit, &cells), st, fail);
            sd = &cells;
        }
    } else {
        s->kernel = lac_mf_cuda_choose_kernel(s->stride / 4, (int)knob(ctx, LAC_KNOB_MF_CUDA_LANES, 0),
                                              (int)knob(ctx, LAC_KNOB_MF_CUDA_AHEAD, 1));
        LAC_CHECK_GOTO(lac_mf_cuda_occupancy(ctx, &s->kernel, &per_sm), st, fail);
    }
    {
        int64_t resident = (int64_t)(per_sm > 0 ? per_sm : 1) * ctx->cuda->prop.multiProcessorCount;
        /* in-batch negatives: twice the groups (a step's shared-memory work
         * waits less with more warps; measured 1.19 against 1.56 ms at k = 32) */
        const int64_t per_group = s->nbr ? LAC_MF_NBR_RATINGS_PER_GROUP
                                  : inbatch ? LAC_MF_RATINGS_PER_GROUP / 2 : LAC_MF_RATINGS_PER_GROUP;
        int64_t want = knob(ctx, LAC_KNOB_MF_CUDA_GROUPS, sd->nnz / per_group);
        int64_t blocks = lac_mf_schedule_blocks(want, s->kernel.groups_per_block, resident);
        if (s->nbr && !call->implicit && knob(ctx, LAC_KNOB_MF_CUDA_GROUPS, 0) <= 0)
            blocks = lac_mf_cuda_nbr_even_blocks(ctx, blocks);
        s->blocks = (unsigned)blocks;
        s->groups = blocks * s->kernel.groups_per_block;
    }
    {
        lac_mf_schedule_params sp;
        sp.groups = s->groups;
        sp.run_max = knob(ctx, LAC_KNOB_MF_CUDA_RUN_MAX, s->nbr ? sd->nnz + 1 : LAC_MF_RUN_MAX);
        /* the neighbourhood model: no replicas unless asked for (averaged,
         * they slow the learning of the popular items' rows; measured) */
        sp.hot = knob(ctx, LAC_KNOB_MF_CUDA_HOT, s->nbr ? sd->nnz + 1 : 0);
        sp.replica_budget = ctx->cuda->prop.l2CacheSize / 3.0;
        sp.row_bytes = (double)s->stride * sizeof(float);
        sp.step_multiple = LAC_MF_CODE_AHEAD;
        sp.run_unit = s->nbr && call->implicit && call->loss == LAC_MF_LOSS_BPR ? 3 : 1;   /* BPR's pairs whole */
        LAC_CHECK_GOTO(lac_mf_schedule_build(ctx, sd, &sp, &sch), st, fail);
    }
    s->steps = sch.steps;
    s->runs = sch.runs;
    s->rows = sch.rows;
    s->hot_items = sch.hot_items;
    lac_log(ctx, LAC_LOG_INFO,
            "mf CUDA: %d lanes a user, %lld groups in %u blocks, %lld runs (at most %lld ratings), %lld steps a "
            "group (%.1f%% padding), %lld popular items (over %lld ratings) with %lld replica rows",
            s->kernel.lanes, (long long)s->groups, s->blocks, (long long)s->runs, (long long)sch.run_max,
            (long long)s->steps, 100.0 * (1.0 - (double)sd->nnz / ((double)s->groups * (double)s->steps)),
            (long long)s->hot_items, (long long)sch.hot, (long long)(s->rows - d->num_items));
    LAC_CHECK_GOTO(upload_all(ctx, s, call, &sch), st, fail);
    if (s->nbr) {   /* the masks walk the uploaded streams */
        lac_mf_cuda_epoch_args a = epoch_args(s, 0.0f);
        LAC_CHECK_GOTO(lac_mf_cuda_nbr_upload(ctx, s->nbr, &sch, &a), st, fail);
    }
    if (s->implicit && s->nbr)
        LAC_CHECK_GOTO(lac_mf_cuda_implicit_nbr_upload(ctx, s->implicit, &sch), st, fail);
    else if (s->implicit)
        LAC_CHECK_GOTO(lac_mf_cuda_implicit_upload(ctx, s->implicit, &sch), st, fail);
fail:
    if (st != LAC_SUCCESS) cudaStreamSynchronize(ctx->cuda->stream);
    lac_mf_schedule_free(&sch);
    lac_mf_cuda_implicit_cells_free(&cells);
    if (st != LAC_SUCCESS) {
        free_state(s);
        return st;
    }
    *out = s;
    return LAC_SUCCESS;
}

/* The sum of LAC_MF_SSE_SLOTS partial sums on the device, in slot order. */
static lac_status sum_slots(lac_ctx_t ctx, const double *slots, double *sum)
{
    cudaStream_t stream = ctx->cuda->stream;
    double part[LAC_MF_SSE_SLOTS], total = 0.0;
    LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(part, slots, sizeof part, cudaMemcpyDeviceToHost, stream));
    LAC_CUDA_CHECK(ctx, cudaStreamSynchronize(stream));
    for (int i = 0; i < LAC_MF_SSE_SLOTS; i++) total += part[i];
    *sum = total;
    return LAC_SUCCESS;
}

/* The epoch's arguments at learning rate lr. */
static lac_mf_cuda_epoch_args epoch_args(const lac_mf_state *s, float lr)
{
    lac_mf_cuda_epoch_args a;
    a.code = s->code;
    a.rating = s->rating;
    a.group_first_run = s->group_first_run;
    a.run_user = s->run_user;
    a.run_weight = s->run_weight;
    a.steps = s->steps;
    a.P = s->P;
    a.Q = s->Q;
    a.user_bias = s->user_bias;
    a.item_bias = s->item_bias;
    a.stride = s->stride;
    a.mean = s->mean;
    a.lr = lr;
    a.shrink = 1.0f - lr * s->lambda;
    a.shrink_b = 1.0f - lr * s->lambda_bias;
    a.use_bias = s->use_bias;
    a.sse = s->sums;
    return a;
}

lac_status lac_mf_cuda_one_launch(lac_ctx_t ctx, lac_mf_state *s, float lr, int epoch)
{
    cudaStream_t stream = ctx->cuda->stream;
    LAC_CUDA_CHECK(ctx, cudaMemsetAsync(s->sums, 0, LAC_MF_SSE_SLOTS * sizeof(double), stream));
    if (s->runs > 0) {
        lac_mf_cuda_epoch_args a = epoch_args(s, lr);
        if (s->nbr && s->implicit) LAC_CHECK(lac_mf_cuda_implicit_nbr_draw(ctx, s->implicit, s->code, epoch));
        if (s->nbr) LAC_CHECK(lac_mf_cuda_nbr_epoch(ctx, s->nbr, &a, lr, s->blocks));
        else if (s->implicit) LAC_CHECK(lac_mf_cuda_implicit_epoch(ctx, s->implicit, &a, epoch, s->blocks));
        else LAC_CHECK(lac_mf_cuda_launch_epoch(ctx, &s->kernel, s->blocks, &a));
        LAC_CHECK(replicas(ctx, s, 0));
    }
    return LAC_SUCCESS;
}

lac_status lac_mf_cuda_one_sse(lac_ctx_t ctx, lac_mf_state *s, double *train_sse)
{
    return sum_slots(ctx, s->sums, train_sse);
}

lac_status lac_mf_cuda_one_spread(lac_ctx_t ctx, lac_mf_state *s) { return replicas(ctx, s, 1); }

lac_mf_cuda_one_arrays lac_mf_cuda_one_get_arrays(const lac_mf_state *s)
{
    lac_mf_cuda_one_arrays a = {s->P,           s->Q,           s->user_bias, s->item_bias, s->num_users, s->num_items,
                                s->stride,      lac_mf_cuda_nbr_wc(s->nbr), s->nbr ? s->call.factors.nbr_k : 0};
    return a;
}

static lac_status cuda_epoch(lac_ctx_t ctx, lac_mf_state *s, float lr, int epoch, double *train_sse)
{
    if (s->multi) return lac_mf_cuda_multi_epoch(ctx, s->multi, lr, epoch, train_sse);
    if (s->part) return lac_mf_cuda_part_epoch(ctx, s->part, lr, epoch, train_sse);
    LAC_CHECK(lac_mf_cuda_one_launch(ctx, s, lr, epoch));
    return lac_mf_cuda_one_sse(ctx, s, train_sse);
}

static lac_status cuda_begin(lac_ctx_t ctx, const lac_mf_call *call, lac_mf_state **out)
{
    if (!call->item_part && !lac_mf_cuda_multi_wanted(ctx, call)) return lac_mf_cuda_one_begin(ctx, call, out);
    LAC_CHECK(lac_cuda_use_device(ctx));
    lac_mf_state *s = (lac_mf_state *)calloc(1, sizeof *s);
    if (!s) return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "out of host memory for the CUDA mf state");
    lac_status st = call->item_part ? lac_mf_cuda_part_begin(ctx, call, &s->part)
                                    : lac_mf_cuda_multi_begin(ctx, call, &s->multi);
    if (st != LAC_SUCCESS) {
        free(s);
        return st;
    }
    *out = s;
    return LAC_SUCCESS;
}

static lac_status cuda_valid_rmse(lac_ctx_t ctx, lac_mf_state *s, double *rmse)
{
    if (s->part) return part_has_no_model(ctx);
    if (s->multi) return lac_mf_cuda_multi_valid_rmse(ctx, s->multi, rmse);
    cudaStream_t stream = ctx->cuda->stream;
    if (s->valid_count == 0) {
        *rmse = NAN;
        return LAC_SUCCESS;
    }
    double *sums = s->sums + LAC_MF_SSE_SLOTS;
    LAC_CUDA_CHECK(ctx, cudaMemsetAsync(sums, 0, LAC_MF_SSE_SLOTS * sizeof(double), stream));
    if (s->nbr) {
        lac_mf_cuda_epoch_args a = epoch_args(s, 0.0f);
        LAC_CHECK(lac_mf_cuda_nbr_validation(ctx, s->nbr, &a, s->valid_user, s->valid_item, s->valid_rating,
                                             s->valid_count, s->k, s->rating_min, s->rating_max, sums));
    } else {
        LAC_CHECK(lac_mf_cuda_launch_validation(ctx, s->valid_user, s->valid_item, s->valid_rating, s->valid_count,
                                                s->P, s->Q, s->user_bias, s->item_bias, s->k, s->stride, s->mean,
                                                s->rating_min, s->rating_max, sums));
    }
    double sse = 0.0;
    LAC_CHECK(sum_slots(ctx, sums, &sse));
    *rmse = sqrt(sse / (double)s->valid_count);
    return LAC_SUCCESS;
}

static lac_status cuda_keep(lac_ctx_t ctx, lac_mf_state *s, int restore)
{
    if (s->part) return part_has_no_model(ctx);
    if (s->multi) return lac_mf_cuda_multi_keep(ctx, s->multi, restore);
    size_t pu = (size_t)s->num_users * (size_t)s->stride, qi = (size_t)s->num_items * (size_t)s->stride;
    size_t total = pu + qi + (size_t)s->num_users + (size_t)s->num_items * LAC_MF_BIAS_STRIDE;
    if (!s->best) {
        if (restore) return lac_error(ctx, LAC_ERR_INTERNAL, "mf CUDA: restore without a kept epoch");
        LAC_CUDA_CHECK(ctx, cudaMalloc((void **)&s->best, total * sizeof(float) + 4));
    }
    float *parts[4] = {s->P, s->Q, s->user_bias, s->item_bias};
    size_t sizes[4] = {pu, qi, (size_t)s->num_users, (size_t)s->num_items * LAC_MF_BIAS_STRIDE};
    size_t at = 0;
    for (int i = 0; i < 4; i++) {
        float *kept = s->best + at;
        if (sizes[i])
            LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(restore ? parts[i] : kept, restore ? kept : parts[i],
                                                sizes[i] * sizeof(float), cudaMemcpyDeviceToDevice, ctx->cuda->stream));
        at += sizes[i];
    }
    if (s->nbr) LAC_CHECK(lac_mf_cuda_nbr_keep(ctx, s->nbr, restore));
    return restore ? replicas(ctx, s, 1) : LAC_SUCCESS;
}

/* The factors at P, Q, user_bias, item_bias (the current ones or the kept
 * copy, laid out alike) to host arrays shaped as the call's, or back. */
static lac_status copy_factors(lac_ctx_t ctx, lac_mf_state *s, float *P, float *Q, float *user_bias, float *item_bias,
                               const lac_mf_factors *f, int to_device)
{
    cudaStream_t stream = ctx->cuda->stream;
    size_t pu = (size_t)s->num_users * (size_t)s->stride, qi = (size_t)s->num_items * (size_t)s->stride;
    cudaMemcpyKind kind = to_device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost;
    float *dev[3] = {P, Q, user_bias}, *host[3] = {f->P, f->Q, f->user_bias};
    size_t sizes[3] = {pu, qi, (size_t)s->num_users};
    for (int i = 0; i < 3; i++)
        if (sizes[i])
            LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(to_device ? dev[i] : host[i], to_device ? host[i] : dev[i],
                                                sizes[i] * sizeof(float), kind, stream));
    if (s->num_items) {
        size_t dpitch = LAC_MF_BIAS_STRIDE * sizeof(float), hpitch = sizeof(float);
        LAC_CUDA_CHECK(ctx, cudaMemcpy2DAsync(to_device ? (void *)item_bias : (void *)f->item_bias,
                                              to_device ? dpitch : hpitch,
                                              to_device ? (const void *)f->item_bias : (const void *)item_bias,
                                              to_device ? hpitch : dpitch, sizeof(float), (size_t)s->num_items, kind,
                                              stream));
    }
    LAC_CUDA_CHECK(ctx, cudaStreamSynchronize(stream));
    return LAC_SUCCESS;
}

/* The kept copy's parts in s->best (allocated on first use). */
static lac_status kept_parts(lac_ctx_t ctx, lac_mf_state *s, float *parts[4])
{
    size_t pu = (size_t)s->num_users * (size_t)s->stride, qi = (size_t)s->num_items * (size_t)s->stride;
    size_t total = pu + qi + (size_t)s->num_users + (size_t)s->num_items * LAC_MF_BIAS_STRIDE;
    if (!s->best) LAC_CUDA_CHECK(ctx, cudaMalloc((void **)&s->best, total * sizeof(float) + 4));
    parts[0] = s->best;
    parts[1] = parts[0] + pu;
    parts[2] = parts[1] + qi;
    parts[3] = parts[2] + s->num_users;
    return LAC_SUCCESS;
}

/* W and C with the factors (the neighbourhood model). */
static lac_status copy_nbr(lac_ctx_t ctx, lac_mf_state *s, int kept, const lac_mf_factors *f, int to_device)
{
    return s->nbr ? lac_mf_cuda_nbr_copy(ctx, s->nbr, kept, f->W, f->C, to_device) : LAC_SUCCESS;
}

static lac_status cuda_download(lac_ctx_t ctx, lac_mf_state *s)
{
    if (s->part) return part_has_no_model(ctx);
    if (s->multi) return lac_mf_cuda_multi_download(ctx, s->multi);
    LAC_CHECK(copy_factors(ctx, s, s->P, s->Q, s->user_bias, s->item_bias, &s->call.factors, 0));
    return copy_nbr(ctx, s, 0, &s->call.factors, 0);
}

static lac_status cuda_get(lac_ctx_t ctx, lac_mf_state *s, int kept, const lac_mf_factors *to)
{
    if (s->part) return part_has_no_model(ctx);
    if (s->multi) return lac_mf_cuda_multi_get(ctx, s->multi, kept, to);
    if (!kept) {
        LAC_CHECK(copy_factors(ctx, s, s->P, s->Q, s->user_bias, s->item_bias, to, 0));
        return copy_nbr(ctx, s, 0, to, 0);
    }
    if (!s->best) return lac_error(ctx, LAC_ERR_INTERNAL, "mf CUDA: no kept epoch");
    float *parts[4] = {NULL, NULL, NULL, NULL};
    LAC_CHECK(kept_parts(ctx, s, parts));
    LAC_CHECK(copy_factors(ctx, s, parts[0], parts[1], parts[2], parts[3], to, 0));
    return copy_nbr(ctx, s, 1, to, 0);
}

static lac_status cuda_put(lac_ctx_t ctx, lac_mf_state *s, int kept, const lac_mf_factors *from)
{
    if (s->part) return part_has_no_model(ctx);
    if (s->multi) return lac_mf_cuda_multi_put(ctx, s->multi, kept, from);
    if (!kept) {
        LAC_CHECK(copy_factors(ctx, s, s->P, s->Q, s->user_bias, s->item_bias, from, 1));
        LAC_CHECK(copy_nbr(ctx, s, 0, from, 1));
        return replicas(ctx, s, 1);   /* the popular items' rows start from the new values */
    }
    float *parts[4] = {NULL, NULL, NULL, NULL};
    LAC_CHECK(kept_parts(ctx, s, parts));
    LAC_CHECK(copy_factors(ctx, s, parts[0], parts[1], parts[2], parts[3], from, 1));
    return copy_nbr(ctx, s, 1, from, 1);
}

lac_status lac_mf_cuda_one_keep(lac_ctx_t ctx, lac_mf_state *s, int restore) { return cuda_keep(ctx, s, restore); }

lac_status lac_mf_cuda_one_get(lac_ctx_t ctx, lac_mf_state *s, int kept, const lac_mf_factors *to)
{
    return cuda_get(ctx, s, kept, to);
}

lac_status lac_mf_cuda_one_put(lac_ctx_t ctx, lac_mf_state *s, int kept, const lac_mf_factors *from)
{
    return cuda_put(ctx, s, kept, from);
}

void lac_mf_cuda_one_end(lac_ctx_t ctx, lac_mf_state *s)
{
    if (!s) return;
    cudaStreamSynchronize(ctx->cuda->stream);
    free_state(s);
}

static void cuda_end(lac_ctx_t ctx, lac_mf_state *s)
{
    if (s && s->multi) lac_mf_cuda_multi_end(ctx, s->multi);
    if (s && s->part) lac_mf_cuda_part_end(ctx, s->part);
    lac_mf_cuda_one_end(ctx, s);
}

extern "C" const lac_mf_backend lac_mf_cuda_table = {
    "cuda", 0, cuda_begin, cuda_epoch, cuda_valid_rmse, cuda_keep, cuda_download, cuda_end, cuda_get, cuda_put, 1,
    NULL,   /* fold_in: the CPU table's */
    1,      /* parts: over MPI ranks, mf_parts.cu */
    1,      /* part_slices: a slice of the part's users a call in the first epochs, mf_parts.cu */
    1,      /* implicit_parts: both models and losses, mf_parts.cu */
};
