/* The neighbourhood model's masks (mf_nbr_cuda.h): which of the K neighbours
 * S^K(j) of a stream cell's item the cell's user has rated (R^K(i;j) of
 * eq. 1) and those ratings, found once before training by the binary
 * searches the searching kernel makes every epoch; the same for the
 * validation set's pairs, which the validation reads. Four passes over the
 * cells: each cell's user (a warp per stream, the run starts counted by a
 * ballot), each cell's bits (a warp per cell, a lane per neighbour), the
 * offsets (an exclusive sum of the bits' counts), the ratings (a warp per
 * cell again, each set bit's rating at the offset plus the set bits below
 * it). */
#include "backend/cuda/mf/mf_nbr_cuda.h"

#include <cub/device/device_scan.cuh>
#include <stdint.h>
#include <string.h>

/* The user of every cell of a stream (-1 on padding). */
static __global__ void cell_users(const int32_t *__restrict__ code, const int64_t *__restrict__ group_first_run,
                                  const int32_t *__restrict__ run_user, int64_t groups, int64_t steps,
                                  int32_t *__restrict__ user)
{
    const int lane = threadIdx.x & 31;
    const int64_t g = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    if (g >= groups) return;
    const int32_t *c = code + g * steps;
    int32_t *out = user + g * steps;
    int64_t next_run = group_first_run[g];   /* the run the next start opens */
    for (int64_t t0 = 0; t0 < steps; t0 += 32) {
        const int64_t t = t0 + lane;
        const int32_t cd = t < steps ? c[t] : LAC_MF_PAD;
        const unsigned starts = __ballot_sync(0xffffffffu, cd >= 0 && (cd & LAC_MF_RUN_START));
        const int64_t run = next_run - 1 + __popc(starts & (0xffffffffu >> (31 - lane)));
        if (t < steps) out[t] = (cd >= 0 && run >= 0) ? run_user[run] : -1;
        next_run += __popc(starts);
    }
}

struct mask_args {
    const int32_t *code, *user, *nbr;
    int K;
    const int64_t *rated_start;
    const int32_t *rated_items;
    const float *rated_vals;
    int64_t cells;
};

/* A warp per cell: lane k < K searches neighbour k in the user's ratings.
 * Pass 0 writes the bits and their count; pass 1 the ratings of the bits. */
template <int PASS>
static __global__ void cell_masks(mask_args a, uint32_t *__restrict__ mask, uint32_t *__restrict__ count,
                                  const uint32_t *__restrict__ moff, float *__restrict__ mvals)
{
    const int lane = threadIdx.x & 31;
    const int64_t warps = ((int64_t)gridDim.x * blockDim.x) >> 5;
    for (int64_t c = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5; c < a.cells; c += warps) {
        const int32_t u = a.user[c], cd = a.code[c];
        if (PASS == 1 && mask[c] == 0) continue;
        int at = -1;
        int64_t lo = 0;
        if (u >= 0 && cd >= 0 && lane < a.K) {
            const int32_t n = a.nbr[(int64_t)(cd & LAC_MF_ITEM_MASK) * a.K + lane];
            lo = a.rated_start[u];
            if (n >= 0) at = find_item(a.rated_items + lo, (int)(a.rated_start[u + 1] - lo), n);
        }
        const unsigned bits = __ballot_sync(0xffffffffu, at >= 0);
        if (PASS == 0) {
            if (lane == 0) {
                mask[c] = bits;
                count[c] = (uint32_t)__popc(bits);
            }
        } else if (at >= 0) {
            mvals[moff[c] + __popc(bits & ((1u << lane) - 1u))] = a.rated_vals[lo + at];
        }
    }
}

void lac_mf_cuda_nbr_masks_free(lac_mf_cuda_nbr_masks *m)
{
    if (m->mask) cudaFree(m->mask);
    if (m->moff) cudaFree(m->moff);
    if (m->mvals) cudaFree(m->mvals);
    m->mask = m->moff = NULL;
    m->mvals = NULL;
    m->rated = 0;
}

/* cudaMalloc, where running out of memory is an answer, not an error. */
static cudaError_t try_alloc(void **p, size_t bytes)
{
    cudaError_t e = cudaMalloc(p, bytes ? bytes : 4);
    if (e != cudaSuccess) {
        *p = NULL;
        (void)cudaGetLastError();
    }
    return e;
}

/* The masks of cells whose items (with their run-start bit; < 0: none) and
 * users (< 0: none) are on the device. */
static lac_status masks_of(lac_ctx_t ctx, const int32_t *code, const int32_t *user, int64_t cells, const int32_t *nbr,
                           int K, const int64_t *rated_start, const int32_t *rated_items, const float *rated_vals,
                           lac_mf_cuda_nbr_masks *out, int *built)
{
    cudaStream_t st = ctx->cuda->stream;
    uint32_t *count = NULL, ends[2];
    void *temp = NULL;
    size_t temp_bytes = 0;
    lac_status status = LAC_SUCCESS;
    const size_t n = (size_t)cells;
    if (try_alloc((void **)&count, n * 4) != cudaSuccess || try_alloc((void **)&out->mask, n * 4) != cudaSuccess ||
        try_alloc((void **)&out->moff, n * 4) != cudaSuccess)
        goto done;
    LAC_CUDA_CHECK_GOTO(ctx, cub::DeviceScan::ExclusiveSum(NULL, temp_bytes, count, out->moff, cells, st), status,
                        done);
    if (try_alloc(&temp, temp_bytes) != cudaSuccess) goto done;
    {
        mask_args a = {code, user, nbr, K, rated_start, rated_items, rated_vals, cells};
        const int64_t warps = cells < (1 << 20) ? cells : (1 << 20);
        const unsigned blocks = (unsigned)((warps + 7) / 8);
        cell_masks<0><<<blocks, 256, 0, st>>>(a, out->mask, count, NULL, NULL);
        LAC_CUDA_CHECK_GOTO(ctx, cudaGetLastError(), status, done);
        LAC_CUDA_CHECK_GOTO(ctx, cub::DeviceScan::ExclusiveSum(temp, temp_bytes, count, out->moff, cells, st), status,
                            done);
        LAC_CUDA_CHECK_GOTO(ctx, cudaMemcpyAsync(ends, out->moff + cells - 1, 4, cudaMemcpyDeviceToHost, st), status,
                            done);
        LAC_CUDA_CHECK_GOTO(ctx, cudaMemcpyAsync(ends + 1, count + cells - 1, 4, cudaMemcpyDeviceToHost, st), status,
                            done);
        LAC_CUDA_CHECK_GOTO(ctx, cudaStreamSynchronize(st), status, done);
        out->rated = (int64_t)ends[0] + ends[1];
        if (try_alloc((void **)&out->mvals, (size_t)out->rated * sizeof(float)) != cudaSuccess) goto done;
        cell_masks<1><<<blocks, 256, 0, st>>>(a, out->mask, NULL, out->moff, out->mvals);
        LAC_CUDA_CHECK_GOTO(ctx, cudaGetLastError(), status, done);
        LAC_CUDA_CHECK_GOTO(ctx, cudaStreamSynchronize(st), status, done);
        *built = 1;
    }
done:
    if (count) cudaFree(count);
    if (temp) cudaFree(temp);
    return status;
}

/* offsets in 32 bits: at most K bits a cell */
static bool masks_fit(int64_t cells, int K)
{
    return K >= 1 && K <= 32 && cells >= 1 && (uint64_t)cells * (uint64_t)K <= UINT32_MAX;
}

lac_status lac_mf_cuda_nbr_masks_build(lac_ctx_t ctx, const lac_mf_cuda_epoch_args *base, int64_t groups,
                                       const int32_t *nbr, int K, const int64_t *rated_start,
                                       const int32_t *rated_items, const float *rated_vals,
                                       lac_mf_cuda_nbr_masks *out, int *built)
{
    memset(out, 0, sizeof *out);
    *built = 0;
    const int64_t cells = groups * base->steps;
    if (!masks_fit(cells, K)) return LAC_SUCCESS;
    int32_t *user = NULL;
    lac_status status = LAC_SUCCESS;
    if (try_alloc((void **)&user, (size_t)cells * 4) == cudaSuccess) {
        cell_users<<<(unsigned)((groups * 32 + 255) / 256), 256, 0, ctx->cuda->stream>>>(
            base->code, base->group_first_run, base->run_user, groups, base->steps, user);
        const cudaError_t e = cudaGetLastError();
        status = e != cudaSuccess ? lac_cuda_fail(ctx, e, "cell_users", __FILE__, __LINE__)
                                  : masks_of(ctx, base->code, user, cells, nbr, K, rated_start, rated_items,
                                             rated_vals, out, built);
        cudaFree(user);
    }
    if (!*built) lac_mf_cuda_nbr_masks_free(out);
    return status;
}

lac_status lac_mf_cuda_nbr_masks_pairs(lac_ctx_t ctx, const int32_t *user, const int32_t *item, int64_t count,
                                       const int32_t *nbr, int K, const int64_t *rated_start,
                                       const int32_t *rated_items, const float *rated_vals,
                                       lac_mf_cuda_nbr_masks *out, int *built)
{
    memset(out, 0, sizeof *out);
    *built = 0;
    if (!masks_fit(count, K)) return LAC_SUCCESS;
    lac_status status = masks_of(ctx, item, user, count, nbr, K, rated_start, rated_items, rated_vals, out, built);
    if (!*built) lac_mf_cuda_nbr_masks_free(out);
    return status;
}
