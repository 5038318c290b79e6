/* map on the CUDA backend: the weighted MEAN of many float32 targets through
 * L2 pairs.
 *
 * Where the target does not fit the few-target kernel's shared memory, a
 * weighted MEAN (one column, NaN propagated, aligned device arrays) keeps one
 * pair (sum w S, sum w) a target in global memory and adds a row's pair with
 * one 8-byte vector reduction (sm_90), instead of the general kernel's three
 * accumulators (sum, weight sum, hit count) a row. The weight sums start at
 * -0.0 and add w + 0.0 (never -0.0), so a target still at -0.0 had no row, as
 * in the CPU backend and map_few.cu. The dedicated SUM kernel runs it (its
 * mode 4: hot targets of a skewed bridge in shared memory, as for sums);
 * three launches: the pairs' start values and the fault flag, the rows, and
 * the division into T (which also reports the fault). Knobs for benchmarks:
 * LACUNA_MAP_CUDA_MEAN_MARK=0 turns it off (hit counts, the general path),
 * LACUNA_MAP_CUDA_STRATEGY=pair takes it at any target count, another forced
 * strategy leaves it. */
#include "backend/cuda/map/map_cuda.cuh"

#include <math.h>
#include <string.h>

/* Each target's pair at (0, -0.0); the fault flag at MAP_NO_FAULT. */
static __global__ void mean_pair_start_kernel(float2 *pairs, int64_t n, unsigned long long *fault)
{
    const int64_t i0 = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i0 == 0) *fault = MAP_NO_FAULT;
    for (int64_t k = i0; k < n; k += (int64_t)gridDim.x * blockDim.x) pairs[k] = make_float2(0.0f, -0.0f);
}

/* T from the pairs, unless a row was flagged (then T stays as it was); the
 * fault into the mapped report word or a deferred call's sticky word. */
static __global__ void mean_pair_finish_kernel(const float2 *pairs, int64_t n, float *T, int accumulate, float empty,
                                               const unsigned long long *fault, unsigned long long *report,
                                               unsigned long long *sticky, unsigned long long tag)
{
    const unsigned long long f = *(volatile const unsigned long long *)fault;
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        if (report) *(volatile unsigned long long *)report = f;
        if (sticky && f != MAP_NO_FAULT) atomicMin(sticky, tag | f);
    }
    if (f != MAP_NO_FAULT) return;
    for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < n; k += (int64_t)gridDim.x * blockDim.x) {
        const float2 p = pairs[k];
        if (accumulate) T[k] = T[k] + p.x;   /* as map_finalize_kernel */
        else T[k] = p.y == 0.0f && signbit(p.y) ? empty : p.x / p.y;
    }
}

extern "C" lac_status lac_map_mean_pair_try(lac_ctx_t ctx, const lac_map_call *call, const map_layout *L,
                                            const map_deferred *defer, int *taken)
{
    (void)L;
    *taken = 0;
    const lac_map_params *p = &call->params;
    if (!(call->memory == LAC_MEM_DEVICE && p->op == LAC_MAP_MEAN && call->weights && call->value_dtype == LAC_FLOAT32 &&
          p->nan_policy == LAC_NAN_PROPAGATE && call->b == 1 && call->m >= 1 && call->n >= 1 &&
          call->n <= INT32_MAX / 4 && lac_map_aligned16(call->source) && lac_map_aligned16(call->bridge) &&
          lac_map_aligned16(call->weights)))
        return LAC_SUCCESS;
    if (lac_knob_int(ctx, LAC_KNOB_MAP_CUDA_MEAN_MARK, 1) == 0) return LAC_SUCCESS;
    const char *force = lac_knob_string(ctx, LAC_KNOB_MAP_CUDA_STRATEGY);
    if (force && *force && strcmp(force, "pair") != 0) return LAC_SUCCESS;

    const void *kernel = lac_map_pick_sum_kernel(call->value_dtype, call->index_dtype, 4);
    const int block = 1024;
    /* The hot targets' sums, their weight sums behind them, the lookup table. */
    const size_t smem = lac_map_hot_bytes(sizeof(float), block) + (size_t)MAP_HOT_MAX * (block / 32) * MAP_HOT_LANES * sizeof(float);
    size_t smem_max = 0;
    int per_sm = 0;
    LAC_CHECK(lac_map_coop_limits(ctx, kernel, MAP_FACT_PAIR, block, smem, &smem_max, &per_sm));
    if (per_sm < 1 || smem > smem_max) return LAC_SUCCESS;
    const int64_t sms = ctx->cuda->prop.multiProcessorCount;
    int64_t grid = per_sm * sms;
    const int64_t by_work = (call->m + (int64_t)block * 8 - 1) / ((int64_t)block * 8);
    if (by_work < grid) grid = by_work > 0 ? by_work : 1;

    const size_t pair_bytes = (size_t)call->n * sizeof(float2);
    void *ws = NULL;
    LAC_CHECK(lac_cuda_workspace(ctx, pair_bytes + 64, &ws));
    float2 *pairs = reinterpret_cast<float2 *>(ws);
    unsigned long long *fault = reinterpret_cast<unsigned long long *>((unsigned char *)ws + (pair_bytes + 7) / 8 * 8);
    cudaStream_t st = ctx->cuda->stream;
    const int eb = 256;
    const int64_t want = (call->n + eb - 1) / eb, cap = sms * 8;
    const unsigned int egrid = (unsigned int)(want < cap ? want : cap);
    mean_pair_start_kernel<<<egrid, eb, 0, st>>>(pairs, call->n, fault);
    LAC_CUDA_CHECK_LAUNCH(ctx);

    /* The dedicated kernel's arguments (global mode: no partials, no copies). */
    const void *S = call->source, *R = call->bridge, *W = call->weights;
    int64_t rows = call->m, row0 = 0, n = call->n;
    void *partials = NULL, *scratch = pairs;
    int fresh = 1, copies = 1, sample = rows >= 16 * (int64_t)MAP_HOT_SAMPLES;
    unsigned int pitch = 0;
    void *params[] = {&S, &R, &W, &rows, &row0, &n, &partials, &fresh, &copies, &pitch, &fault, &scratch, &sample};
    LAC_CUDA_CHECK(ctx, cudaLaunchKernel(kernel, dim3((unsigned int)grid), dim3(block), params, smem, st));
    LAC_CUDA_CHECK_LAUNCH(ctx);

    unsigned long long *report = defer ? NULL : lac_map_fault_report_word(ctx);
    mean_pair_finish_kernel<<<egrid, eb, 0, st>>>(pairs, call->n, reinterpret_cast<float *>(call->target), p->accumulate,
                                                  (float)p->empty_value, fault, report, defer ? defer->sticky : NULL,
                                                  defer ? defer->tag : 0);
    LAC_CUDA_CHECK_LAUNCH(ctx);
    *taken = 1;
    if (defer) return LAC_SUCCESS;
    return lac_map_report_fault_mapped(ctx, call, fault, report);
}
