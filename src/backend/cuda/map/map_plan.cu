/* map plans on the CUDA backend: the bridge checked and sorted by target once
 * (cub radix sort, stable, so each target's sources stay in ascending row
 * order), then every execute is a contention-free, fixed-order segmented
 * reduction in float64, rounded once into T. Also serves deterministic one-shot
 * calls through a temporary plan where the exact fixed-point path
 * (map_fixed.cu, tried first) declines.
 *
 * Long segments (a skewed bridge's hot targets) would serialise on one group
 * of threads, so each target's run of sorted positions is cut into pieces of at
 * most PIECE positions. One group of G lanes reduces one piece, lane l taking
 * positions l, l+G, ... in turn and the lanes then combining in a fixed
 * butterfly; a target of several pieces sums its pieces' float64 partials in
 * piece order. G and PIECE depend on (m, n) only, so the summation order, and
 * hence every bit of T, is the same from run to run and between a plan and a
 * deterministic one-shot call. A host bridge on a context of several devices
 * is planned per share instead (map_plan_multi.cu). */
#include "backend/cuda/map/map_cuda.cuh"

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAP_PIECE 2048

/* The device plan as kept in struct lac_map_plan's `device`. */
typedef struct {
    map_device_plan base;     /* sorted plan (order NULL until built, when `local` is set) */
    map_local_plan *local;    /* chunk-local plan (few targets), or NULL */
    int64_t *piece_offsets;   /* n + 1: first piece of each target */
    int64_t *piece_target;    /* pieces: the target of each piece */
    int64_t pieces;
    int64_t m, n;
    int device;
    int32_t *narrow;          /* the checked bridge as int32 (m): one-shot and fixed-point executes */
    map_multi_plan *multi;    /* a host bridge split across the context's shares (the rest unused), or NULL */
} cuda_plan;

/* ------------------------------------------------------------------------ */
/* Build kernels                                                             */
/* ------------------------------------------------------------------------ */
__device__ __forceinline__ void plan_flag(unsigned long long *fault, unsigned long long row)
{
    if (row < *(volatile unsigned long long *)fault) atomicMin(fault, row);
}

template <class I>
__global__ void map_check_bridge_kernel(const I *bridge, int64_t m, int64_t n, unsigned long long *fault)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < m; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = (int64_t)bridge[i];
        if (r < 0 || r >= n) plan_flag(fault, (unsigned long long)i);
    }
}

template <class I> __global__ void map_keys_kernel(const I *bridge, int64_t m, unsigned int *keys)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < m; i += (int64_t)gridDim.x * blockDim.x)
        keys[i] = (unsigned int)bridge[i];
}

template <class I> __global__ void map_narrow_kernel(const I *bridge, int64_t m, int32_t *out)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < m; i += (int64_t)gridDim.x * blockDim.x)
        out[i] = (int32_t)bridge[i];
}

template <class O> __global__ void map_iota_kernel(O *v, int64_t m)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < m; i += (int64_t)gridDim.x * blockDim.x)
        v[i] = (O)i;
}

/* offsets[j] = first sorted position whose key is >= j. Thread k fills the
 * targets between key[k-1] and key[k]; thread m the ones after the last key. */
template <class O>
__global__ void map_offsets_kernel(const unsigned int *sorted, int64_t m, int64_t n, O *offsets)
{
    for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k <= m; k += (int64_t)gridDim.x * blockDim.x) {
        int64_t prev = k > 0 ? (int64_t)sorted[k - 1] : -1;
        int64_t cur = k < m ? (int64_t)sorted[k] : n;
        for (int64_t j = prev + 1; j <= cur; j++) offsets[j] = (O)k;
    }
}

template <class O> __global__ void map_piece_counts_kernel(const O *offsets, int64_t n, int64_t *counts)
{
    for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < n; j += (int64_t)gridDim.x * blockDim.x) {
        int64_t len = (int64_t)offsets[j + 1] - (int64_t)offsets[j];
        counts[j] = len > 0 ? (len + MAP_PIECE - 1) / MAP_PIECE : 1;   /* an empty target keeps one piece */
    }
}

static __global__ void map_piece_targets_kernel(const int64_t *piece_offsets, int64_t n, int64_t *piece_target)
{
    for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < n; j += (int64_t)gridDim.x * blockDim.x)
        for (int64_t p = piece_offsets[j]; p < piece_offsets[j + 1]; p++) piece_target[p] = j;
}

static unsigned int grid_for(lac_ctx_t ctx, int64_t work, int block)
{
    int64_t want = (work + block - 1) / block;
    int64_t cap = (int64_t)ctx->cuda->prop.multiProcessorCount * 16;
    if (want < 1) want = 1;
    return (unsigned int)(want < cap ? want : cap);
}

extern "C" lac_status lac_map_check_bridge_launch(lac_ctx_t ctx, const void *bridge, lac_dtype index_dtype, int64_t m,
                                              int64_t n, unsigned long long *fault)
{
    if (m <= 0) return LAC_SUCCESS;
    cudaStream_t st = ctx->cuda->stream;
    unsigned int grid = grid_for(ctx, m, 256);
    if (index_dtype == LAC_INT32)
        map_check_bridge_kernel<int32_t><<<grid, 256, 0, st>>>((const int32_t *)bridge, m, n, fault);
    else
        map_check_bridge_kernel<int64_t><<<grid, 256, 0, st>>>((const int64_t *)bridge, m, n, fault);
    LAC_CUDA_CHECK_LAUNCH(ctx);
    return LAC_SUCCESS;
}


template <class O>
static lac_status build_typed(lac_ctx_t ctx, const void *bridge, lac_dtype index_dtype, int64_t m, int64_t n,
                              cuda_plan *plan)
{
    cudaStream_t st = ctx->cuda->stream;
    int end_bit = 1;
    while (end_bit < 32 && ((int64_t)1 << end_bit) < n) end_bit++;

    LAC_CUDA_CHECK(ctx, cudaMalloc(&plan->base.order, (size_t)(m > 0 ? m : 1) * sizeof(O)));
    LAC_CUDA_CHECK(ctx, cudaMalloc(&plan->base.offsets, (size_t)(n + 1) * sizeof(O)));
    LAC_CUDA_CHECK(ctx, cudaMalloc(&plan->piece_offsets, (size_t)(n + 1) * sizeof(int64_t)));

    /* Workspace: keys in, keys out, values in, cub's temporary, piece counts. */
    size_t temp_bytes = 0;
    if (m > 0)
        LAC_CUDA_CHECK(ctx, cub::DeviceRadixSort::SortPairs(NULL, temp_bytes, (const unsigned int *)NULL,
                                                            (unsigned int *)NULL, (const O *)NULL, (O *)NULL, m, 0,
                                                            end_bit, st));
    size_t scan_bytes = 0;
    LAC_CUDA_CHECK(ctx, cub::DeviceScan::ExclusiveSum(NULL, scan_bytes, (const int64_t *)NULL, (int64_t *)NULL, n + 1, st));
    size_t keys_bytes = lac_map_align256((size_t)(m > 0 ? m : 1) * sizeof(unsigned int));
    size_t vals_bytes = lac_map_align256((size_t)(m > 0 ? m : 1) * sizeof(O));
    size_t counts_bytes = lac_map_align256((size_t)(n + 1) * sizeof(int64_t));
    size_t cub_bytes = lac_map_align256(temp_bytes > scan_bytes ? temp_bytes : scan_bytes);
    void *ws = NULL;
    LAC_CHECK(lac_cuda_workspace(ctx, 2 * keys_bytes + vals_bytes + counts_bytes + cub_bytes, &ws));
    unsigned char *p = (unsigned char *)ws;
    unsigned int *keys_in = (unsigned int *)p;
    p += keys_bytes;
    unsigned int *keys_out = (unsigned int *)p;
    p += keys_bytes;
    O *vals_in = (O *)p;
    p += vals_bytes;
    int64_t *counts = (int64_t *)p;
    p += counts_bytes;
    void *cub_temp = p;

    unsigned int grid = grid_for(ctx, m, 256);
    if (m > 0) {
        if (index_dtype == LAC_INT32) map_keys_kernel<int32_t><<<grid, 256, 0, st>>>((const int32_t *)bridge, m, keys_in);
        else map_keys_kernel<int64_t><<<grid, 256, 0, st>>>((const int64_t *)bridge, m, keys_in);
        LAC_CUDA_CHECK_LAUNCH(ctx);
        map_iota_kernel<O><<<grid, 256, 0, st>>>(vals_in, m);
        LAC_CUDA_CHECK_LAUNCH(ctx);
        LAC_CUDA_CHECK(ctx, cub::DeviceRadixSort::SortPairs(cub_temp, temp_bytes, keys_in, keys_out, vals_in,
                                                            (O *)plan->base.order, m, 0, end_bit, st));
    }
    map_offsets_kernel<O><<<grid_for(ctx, m + 1, 256), 256, 0, st>>>(keys_out, m, n, (O *)plan->base.offsets);
    LAC_CUDA_CHECK_LAUNCH(ctx);

    /* Pieces: counts per target, exclusive scan (n + 1 entries, the last a 0
     * that the scan turns into the total). */
    LAC_CUDA_CHECK(ctx, cudaMemsetAsync(counts + n, 0, sizeof(int64_t), st));
    if (n > 0) {
        map_piece_counts_kernel<O><<<grid_for(ctx, n, 256), 256, 0, st>>>((const O *)plan->base.offsets, n, counts);
        LAC_CUDA_CHECK_LAUNCH(ctx);
    }
    LAC_CUDA_CHECK(ctx, cub::DeviceScan::ExclusiveSum(cub_temp, scan_bytes, counts, plan->piece_offsets, n + 1, st));
    LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(&plan->pieces, plan->piece_offsets + n, sizeof(int64_t), cudaMemcpyDeviceToHost, st));
    LAC_CUDA_CHECK(ctx, cudaStreamSynchronize(st));
    LAC_CUDA_CHECK(ctx, cudaMalloc(&plan->piece_target, (size_t)(plan->pieces > 0 ? plan->pieces : 1) * sizeof(int64_t)));
    if (n > 0) {
        map_piece_targets_kernel<<<grid_for(ctx, n, 256), 256, 0, st>>>(plan->piece_offsets, n, plan->piece_target);
        LAC_CUDA_CHECK_LAUNCH(ctx);
    }
    LAC_CUDA_CHECK(ctx, cudaStreamSynchronize(st));
    return LAC_SUCCESS;
}

static void plan_free(cuda_plan *p)
{
    if (!p) return;
    cudaSetDevice(p->device);
    lac_map_multi_plan_free(p->multi);
    lac_map_local_plan_free(p->local);
    cudaFree(p->narrow);
    cudaFree(p->base.order);
    cudaFree(p->base.offsets);
    cudaFree(p->piece_offsets);
    cudaFree(p->piece_target);
    cudaGetLastError();
    free(p);
}

/* Builds a plan from a device bridge known to be in [0, n). */
static lac_status plan_build(lac_ctx_t ctx, const void *bridge, lac_dtype index_dtype, int64_t m, int64_t n,
                             cuda_plan **out)
{
    *out = NULL;
    if (n > (int64_t)UINT32_MAX)
        return lac_error(ctx, LAC_ERR_UNSUPPORTED, "CUDA map plans take up to 2^32 targets, not %lld", (long long)n);
    cuda_plan *p = (cuda_plan *)calloc(1, sizeof *p);
    if (!p) return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "could not allocate a map plan");
    p->m = m;
    p->n = n;
    p->device = ctx->cuda->device;
    p->base.order_dtype = m <= INT32_MAX ? LAC_INT32 : LAC_INT64;
    /* Few targets: the chunk-local plan (map_plan_local.cu), unless
     * LACUNA_MAP_CUDA_PLAN=sorted (benchmarks and tests). */
    const char *kind = lac_knob_string(ctx, LAC_KNOB_MAP_CUDA_PLAN);
    lac_status st = LAC_SUCCESS;
    if (!(kind && strcmp(kind, "sorted") == 0)) st = lac_map_local_plan_build(ctx, bridge, index_dtype, m, n, &p->local);
    if (st >= 0 && !p->local)
        st = p->base.order_dtype == LAC_INT32 ? build_typed<int32_t>(ctx, bridge, index_dtype, m, n, p)
                                              : build_typed<int64_t>(ctx, bridge, index_dtype, m, n, p);
    if (st < 0) {
        plan_free(p);
        return st;
    }
    *out = p;
    return LAC_SUCCESS;
}

/* ------------------------------------------------------------------------ */
/* Execute: segmented fixed-order reduction                                  */
/* ------------------------------------------------------------------------ */
typedef struct {
    const void *source, *weights;
    const void *order, *offsets;
    const int64_t *piece_offsets, *piece_target;
    int64_t pieces, n, b;
    lac_map_op op;
    lac_nan_policy nan_policy;
    int accumulate, track_hits;
    double empty_value;
    int group_log2;
    double *partials;          /* 3 x pieces x b: sum (or min/max), weight sum, hits */
    void *out;                 /* T, or a result scratch when NaN may still fault */
    const void *old_target;    /* T's current values (accumulate) */
    unsigned long long *fault;
} seg_args;

__device__ __forceinline__ double seg_min(double acc, double x) { return (x < acc || isnan(x)) ? x : acc; }
__device__ __forceinline__ double seg_max(double acc, double x) { return (x > acc || isnan(x)) ? x : acc; }

__device__ __forceinline__ double seg_combine(lac_map_op op, double a, double b)
{
    if (op == LAC_MAP_MIN) return seg_min(a, b);
    if (op == LAC_MAP_MAX) return seg_max(a, b);
    return __dadd_rn(a, b);
}

/* T's new value from the float64 accumulators: the rules of lac_map_finalize
 * in the CPU backend, so that both backends agree. */
template <class V>
__device__ __forceinline__ V seg_finish(const seg_args &a, int64_t k, double acc, double wsum, double hits)
{
    if (a.accumulate) return (V)seg_combine(a.op, (double)((const V *)a.old_target)[k], acc);
    int touched;
    if (a.track_hits || a.op == LAC_MAP_MIN || a.op == LAC_MAP_MAX) touched = hits > 0.0;
    else if (a.op == LAC_MAP_MEAN) touched = wsum != 0.0;
    else if (a.op == LAC_MAP_COUNT) touched = acc != 0.0;
    else touched = 1;
    double v = !touched ? a.empty_value : a.op == LAC_MAP_MEAN ? acc / wsum : acc;
    return (V)v;
}

/* One group of G lanes per (piece, column). */
template <class V, class O> __global__ void map_segmented_kernel(seg_args a)
{
    const int G = 1 << a.group_log2;
    const int64_t gid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t unit = gid >> a.group_log2;
    const int lane = (int)(gid & (G - 1));
    const int64_t units = a.pieces * a.b;
    const bool live = unit < units;
    const V *S = (const V *)a.source;
    const V *W = (const V *)a.weights;
    const O *order = (const O *)a.order;
    const O *offsets = (const O *)a.offsets;
    const double identity = a.op == LAC_MAP_MIN ? INFINITY : a.op == LAC_MAP_MAX ? -INFINITY : 0.0;

    int64_t piece = 0, col = 0, target = 0, first_piece = 0, last_piece = 0;
    double acc = identity, wsum = 0.0, hits = 0.0;
    if (live) {
        piece = unit / a.b;
        col = unit - piece * a.b;
        target = a.piece_target[piece];
        first_piece = a.piece_offsets[target];
        last_piece = a.piece_offsets[target + 1] - 1;
        int64_t seg_begin = (int64_t)offsets[target], seg_end = (int64_t)offsets[target + 1];
        int64_t begin = seg_begin + (piece - first_piece) * MAP_PIECE;
        int64_t end = begin + MAP_PIECE < seg_end ? begin + MAP_PIECE : seg_end;
        for (int64_t k = begin + lane; k < end; k += G) {
            int64_t i = (int64_t)order[k];
            double s = (double)S[i * a.b + col];
            double w = W ? (double)W[i] : 1.0;
            if (isnan(s) || isnan(w)) {
                if (a.nan_policy == LAC_NAN_SKIP) continue;
                if (a.nan_policy == LAC_NAN_ERROR) {
                    plan_flag(a.fault, (unsigned long long)i);
                    continue;
                }
            }
            double x = a.op == LAC_MAP_COUNT ? w : __dmul_rn(w, s);
            if (a.op == LAC_MAP_MIN) acc = seg_min(acc, x);
            else if (a.op == LAC_MAP_MAX) acc = seg_max(acc, x);
            else acc = __dadd_rn(acc, x);
            wsum = __dadd_rn(wsum, w);
            hits += 1.0;
        }
    }
    /* Fixed butterfly across the group's lanes (every lane of the warp takes
     * part, live or not). */
    for (int off = G >> 1; off > 0; off >>= 1) {
        double oa = __shfl_xor_sync(0xFFFFFFFFu, acc, off, G);
        double ow = __shfl_xor_sync(0xFFFFFFFFu, wsum, off, G);
        double oh = __shfl_xor_sync(0xFFFFFFFFu, hits, off, G);
        /* Lower lane's value first, so both lanes compute the same bits. */
        bool low = (lane & off) == 0;
        acc = low ? seg_combine(a.op, acc, oa) : seg_combine(a.op, oa, acc);
        wsum = low ? __dadd_rn(wsum, ow) : __dadd_rn(ow, wsum);
        hits += oh;
    }
    if (!live || lane != 0) return;
    int64_t k = target * a.b + col;
    if (first_piece == last_piece) {
        ((V *)a.out)[k] = seg_finish<V>(a, k, acc, wsum, hits);
    } else {
        int64_t u = piece * a.b + col;
        a.partials[u] = acc;
        a.partials[units + u] = wsum;
        a.partials[2 * units + u] = hits;
    }
}

/* Targets cut into several pieces: their partials summed in piece order. */
template <class V> __global__ void map_pieces_kernel(seg_args a)
{
    const int64_t slots = a.n * a.b;
    const int64_t units = a.pieces * a.b;
    for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < slots; k += (int64_t)gridDim.x * blockDim.x) {
        int64_t target = k / a.b, col = k - target * a.b;
        int64_t p0 = a.piece_offsets[target], p1 = a.piece_offsets[target + 1];
        if (p1 - p0 < 2) continue;
        double acc = a.partials[p0 * a.b + col], wsum = a.partials[units + p0 * a.b + col],
               hits = a.partials[2 * units + p0 * a.b + col];
        for (int64_t p = p0 + 1; p < p1; p++) {
            int64_t u = p * a.b + col;
            acc = seg_combine(a.op, acc, a.partials[u]);
            wsum = __dadd_rn(wsum, a.partials[units + u]);
            hits += a.partials[2 * units + u];
        }
        ((V *)a.out)[k] = seg_finish<V>(a, k, acc, wsum, hits);
    }
}

/* result -> T, only when no NaN was flagged (LAC_NAN_ERROR). */
template <class V> __global__ void map_commit_kernel(const V *result, V *target, int64_t slots, const unsigned long long *fault)
{
    if (*(volatile const unsigned long long *)fault != MAP_NO_FAULT) return;
    for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < slots; k += (int64_t)gridDim.x * blockDim.x)
        target[k] = result[k];
}

/* Lanes per piece: enough to spread an average segment, at most a warp. */
static int group_log2_for(int64_t m, int64_t n)
{
    int64_t avg = n > 0 ? m / n : 0;
    if (avg > MAP_PIECE) avg = MAP_PIECE;
    int lg = 0;
    while (lg < 5 && ((int64_t)4 << lg) <= avg) lg++;
    return lg;
}

/* The sorted plan of a chunk-local one, built the first time a call needs it
 * (from the local plan's words: the bridge itself is not kept). */
static lac_status plan_sorted(lac_ctx_t ctx, cuda_plan *p)
{
    if (p->base.order) return LAC_SUCCESS;
    int32_t *bridge = NULL;
    LAC_CUDA_CHECK(ctx, cudaMalloc(&bridge, (size_t)(p->m > 0 ? p->m : 1) * sizeof(int32_t)));
    lac_status st = lac_map_local_plan_bridge(ctx, p->local, bridge);
    if (st >= 0)
        st = p->base.order_dtype == LAC_INT32 ? build_typed<int32_t>(ctx, bridge, LAC_INT32, p->m, p->n, p)
                                              : build_typed<int64_t>(ctx, bridge, LAC_INT32, p->m, p->n, p);
    cudaStreamSynchronize(ctx->cuda->stream);
    cudaFree(bridge);
    cudaGetLastError();
    return st;
}

static lac_status execute_device(lac_ctx_t ctx, const cuda_plan *plan, const lac_map_call *call)
{
    if (plan->local) {
        int taken = 0;
        LAC_CHECK(lac_map_local_plan_execute(ctx, plan->local, call, &taken));
        if (taken) return LAC_SUCCESS;   /* checked bridge, NaN propagated: nothing can fault */
        LAC_CHECK(plan_sorted(ctx, (cuda_plan *)plan));
    }
    cudaStream_t st = ctx->cuda->stream;
    const int64_t slots = call->n * call->b;
    const int64_t units = plan->pieces * call->b;
    const size_t vsize = lac_dtype_size(call->value_dtype);
    const bool may_fault = call->params.nan_policy == LAC_NAN_ERROR;
    if (slots == 0) return LAC_SUCCESS;

    /* Workspace: partials, fault flag, and a result buffer when the call may
     * still fault (T must then stay untouched until the flag is read). */
    size_t part_bytes = lac_map_align256((size_t)units * 3 * sizeof(double));
    size_t result_bytes = may_fault ? lac_map_align256((size_t)slots * vsize) : 0;
    void *ws = NULL;
    LAC_CHECK(lac_cuda_workspace(ctx, part_bytes + result_bytes + 256, &ws));
    unsigned char *p = (unsigned char *)ws;
    double *partials = (double *)p;
    void *result = p + part_bytes;
    unsigned long long *fault = (unsigned long long *)(p + part_bytes + result_bytes);
    LAC_CUDA_CHECK(ctx, cudaMemsetAsync(fault, 0xFF, sizeof *fault, st));

    map_layout L = lac_map_layout_for(call);
    seg_args a;
    memset(&a, 0, sizeof a);
    a.source = call->source;
    a.weights = call->weights;
    a.order = plan->base.order;
    a.offsets = plan->base.offsets;
    a.piece_offsets = plan->piece_offsets;
    a.piece_target = plan->piece_target;
    a.pieces = plan->pieces;
    a.n = call->n;
    a.b = call->b;
    a.op = call->params.op;
    a.nan_policy = call->params.nan_policy;
    a.accumulate = call->params.accumulate;
    a.track_hits = L.track_hits;
    a.empty_value = call->params.empty_value;
    a.group_log2 = group_log2_for(plan->m, plan->n);
    a.partials = partials;
    a.out = may_fault ? result : call->target;
    a.old_target = call->target;
    a.fault = fault;

    const int block = 256;
    int64_t threads = units << a.group_log2;
    unsigned int grid = (unsigned int)((threads + block - 1) / block);
    bool f32 = call->value_dtype == LAC_FLOAT32, o32 = plan->base.order_dtype == LAC_INT32;
    if (f32 && o32) map_segmented_kernel<float, int32_t><<<grid, block, 0, st>>>(a);
    else if (f32) map_segmented_kernel<float, int64_t><<<grid, block, 0, st>>>(a);
    else if (o32) map_segmented_kernel<double, int32_t><<<grid, block, 0, st>>>(a);
    else map_segmented_kernel<double, int64_t><<<grid, block, 0, st>>>(a);
    LAC_CUDA_CHECK_LAUNCH(ctx);
    if (plan->pieces > plan->n) {
        unsigned int g2 = grid_for(ctx, slots, 256);
        if (f32) map_pieces_kernel<float><<<g2, 256, 0, st>>>(a);
        else map_pieces_kernel<double><<<g2, 256, 0, st>>>(a);
        LAC_CUDA_CHECK_LAUNCH(ctx);
    }
    if (may_fault) {
        unsigned int g3 = grid_for(ctx, slots, 256);
        if (f32) map_commit_kernel<float><<<g3, 256, 0, st>>>((const float *)result, (float *)call->target, slots, fault);
        else map_commit_kernel<double><<<g3, 256, 0, st>>>((const double *)result, (double *)call->target, slots, fault);
        LAC_CUDA_CHECK_LAUNCH(ctx);
        return lac_map_report_fault(ctx, call, fault);
    }
    return LAC_SUCCESS;
}

/* ------------------------------------------------------------------------ */
/* Host arrays: copied in whole (a plan's gather needs all of S on the device) */
/* ------------------------------------------------------------------------ */
static lac_status copies_return(lac_ctx_t ctx, const lac_map_call *call, const map_rows_dev *d)
{
    size_t t_bytes = (size_t)call->n * call->b * lac_dtype_size(call->value_dtype);
    if (t_bytes)
        LAC_CUDA_CHECK(ctx, cudaMemcpyAsync(call->target, d->target, t_bytes, cudaMemcpyDeviceToHost, ctx->cuda->stream));
    LAC_CUDA_CHECK(ctx, cudaStreamSynchronize(ctx->cuda->stream));
    return LAC_SUCCESS;
}

/* ------------------------------------------------------------------------ */
/* Entries                                                                   */
/* ------------------------------------------------------------------------ */
/* Deterministic one-shot map of device arrays: check, temporary plan, execute. */
static lac_status deterministic_device(lac_ctx_t ctx, const lac_map_call *call)
{
    void *ws = NULL;
    LAC_CHECK(lac_cuda_workspace(ctx, 256, &ws));
    unsigned long long *fault = (unsigned long long *)ws;
    LAC_CUDA_CHECK(ctx, cudaMemsetAsync(fault, 0xFF, sizeof *fault, ctx->cuda->stream));
    LAC_CHECK(lac_map_check_bridge_launch(ctx, call->bridge, call->index_dtype, call->m, call->n, fault));
    LAC_CHECK(lac_map_report_fault(ctx, call, fault));
    cuda_plan *plan = NULL;
    LAC_CHECK(plan_build(ctx, call->bridge, call->index_dtype, call->m, call->n, &plan));
    lac_status st = execute_device(ctx, plan, call);
    if (st >= 0) st = lac_cuda_synchronize(ctx);
    plan_free(plan);
    return st;
}

/* Deterministic device call: exact fixed point where the values' range
 * allows (map_fixed.cu), else the temporary sorted plan. */
static lac_status deterministic_any(lac_ctx_t ctx, const lac_map_call *call)
{
    int taken = 0;
    LAC_CHECK(lac_map_fixed_try(ctx, call, &taken));
    return taken ? LAC_SUCCESS : deterministic_device(ctx, call);
}

extern "C" lac_status lac_map_cuda_deterministic(lac_ctx_t ctx, const lac_map_call *call)
{
    if (call->memory == LAC_MEM_DEVICE) return deterministic_any(ctx, call);
    /* Host rows too large to copy whole: streamed through the fixed-point
     * words (one share, the first); the sorted path needs them whole. */
    int fits = 1;
    size_t need = 0, room = 0;
    LAC_CHECK(lac_map_rows_fit(ctx, call, call->m, 0, 1, &fits, &need, &room));
    if (!fits && lac_map_cuda_multi_fixed_serves(ctx, call)) {
        const int64_t whole[2] = {0, call->m};
        int done = 0;
        LAC_CHECK(lac_map_cuda_multi_fixed(ctx, call, 1, whole, NULL, &done));
        if (done) return LAC_SUCCESS;
    }
    map_rows_dev d;
    lac_map_call dcall;
    LAC_CHECK(lac_map_rows_copy(ctx, call, 0, call->m, NULL, 1, &d, &dcall));
    lac_status st = deterministic_any(ctx, &dcall);
    if (st >= 0) st = copies_return(ctx, call, &d);
    lac_map_rows_free(&d);
    return st;
}

lac_status lac_map_cuda_plan_build(lac_ctx_t ctx, lac_map_plan_t plan, const lac_map_call *call)
{
    LAC_CHECK(lac_cuda_use_device(ctx));
    if (lac_map_multi_plan_wanted(ctx, call)) {
        cuda_plan *p = (cuda_plan *)calloc(1, sizeof *p);
        if (!p) return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "could not allocate a map plan");
        p->m = call->m;
        p->n = call->n;
        p->device = ctx->cuda->device;
        lac_status s = lac_map_multi_plan_build(ctx, call, &p->multi);
        if (s < 0) {
            free(p);
            return s;
        }
        plan->state = p;
        return LAC_SUCCESS;
    }
    cudaStream_t st = ctx->cuda->stream;
    const void *bridge = call->bridge;
    void *copy = NULL;
    lac_status s = LAC_SUCCESS;
    cuda_plan *built = NULL;
    void *ws = NULL;
    unsigned long long *fault = NULL;
    if (call->memory == LAC_MEM_HOST && call->m > 0) {
        size_t bytes = (size_t)call->m * lac_dtype_size(call->index_dtype);
        LAC_CUDA_CHECK_GOTO(ctx, cudaMalloc(&copy, bytes), s, done);
        LAC_CUDA_CHECK_GOTO(ctx, cudaMemcpyAsync(copy, call->bridge, bytes, cudaMemcpyHostToDevice, st), s, done);
        bridge = copy;
    }
    LAC_CHECK_GOTO(lac_cuda_workspace(ctx, 256, &ws), s, done);
    fault = (unsigned long long *)ws;
    LAC_CUDA_CHECK_GOTO(ctx, cudaMemsetAsync(fault, 0xFF, sizeof *fault, st), s, done);
    LAC_CHECK_GOTO(lac_map_check_bridge_launch(ctx, bridge, call->index_dtype, call->m, call->n, fault), s, done);
    LAC_CHECK_GOTO(lac_map_report_fault(ctx, call, fault), s, done);
    LAC_CHECK_GOTO(plan_build(ctx, bridge, call->index_dtype, call->m, call->n, &built), s, done);
    plan->state = built;
    /* What a non-deterministic execute reads: the checked bridge in 4 bytes
     * an entry (the one-shot kernels skip nothing else). */
    if (call->n <= INT32_MAX && call->m > 0) {
        LAC_CUDA_CHECK_GOTO(ctx, cudaMalloc((void **)&built->narrow, (size_t)call->m * sizeof(int32_t)), s, done);
        if (call->index_dtype == LAC_INT32)
            LAC_CUDA_CHECK_GOTO(ctx, cudaMemcpyAsync(built->narrow, bridge, (size_t)call->m * sizeof(int32_t),
                                                     cudaMemcpyDeviceToDevice, st), s, done);
        else {
            map_narrow_kernel<int64_t><<<grid_for(ctx, call->m, 256), 256, 0, st>>>((const int64_t *)bridge, call->m,
                                                                                 built->narrow);
            LAC_CUDA_CHECK_GOTO(ctx, cudaGetLastError(), s, done);
        }
        LAC_CUDA_CHECK_GOTO(ctx, cudaStreamSynchronize(st), s, done);
    }
done:
    if (copy) {
        cudaStreamSynchronize(st);
        cudaFree(copy);
        cudaGetLastError();
    }
    return s;
}

/* A plan's deterministic execute of device arrays: the deterministic
 * one-shot call's path over the plan's checked int32 bridge (exact fixed
 * point, no range check), else the plan's own fixed-order reduction; both
 * give the deterministic one-shot call's bits. */
static lac_status execute_deterministic(lac_ctx_t ctx, const cuda_plan *p, const lac_map_call *call)
{
    if (p->narrow) {
        lac_map_call c = *call;
        c.bridge = p->narrow;
        c.index_dtype = LAC_INT32;
        c.bridge_checked = 1;
        int taken = 0;
        LAC_CHECK(lac_map_fixed_try(ctx, &c, &taken));
        if (taken) return LAC_SUCCESS;
    }
    return execute_device(ctx, p, call);
}

lac_status lac_map_cuda_plan_execute(lac_ctx_t ctx, lac_map_plan_t plan, const lac_map_call *call)
{
    LAC_CHECK(lac_cuda_use_device(ctx));
    const cuda_plan *p = (const cuda_plan *)plan->state;
    if (!p) return lac_error(ctx, LAC_ERR_ARGUMENT, "the plan has no device part (was it built on the CUDA backend?)");
    const bool order_free = call->params.op == LAC_MAP_MIN || call->params.op == LAC_MAP_MAX;
    if (p->multi) {
        if (call->memory == LAC_MEM_HOST) return lac_map_multi_plan_execute_host(ctx, p->multi, call);
        /* Device arrays (the first device's): the bridge gathered there, then the one-device paths. */
        int32_t *bridge = NULL;
        LAC_CHECK(lac_map_multi_plan_gather(ctx, p->multi, &bridge));
        lac_map_call c = *call;
        c.bridge = bridge;
        c.index_dtype = LAC_INT32;
        c.bridge_checked = 1;
        lac_status st = !call->params.deterministic || order_free ? lac_map_cuda_device(ctx, &c, NULL) : deterministic_any(ctx, &c);
        cudaStreamSynchronize(ctx->cuda->stream);
        cudaFree(bridge);
        cudaGetLastError();
        return st;
    }
    if (p->narrow && (!call->params.deterministic || order_free)) {
        /* The one-shot device paths over the checked, narrowed bridge. */
        lac_map_call c = *call;
        c.bridge = p->narrow;
        c.index_dtype = LAC_INT32;
        c.bridge_checked = 1;
        if (call->memory == LAC_MEM_DEVICE) return lac_map_cuda_device(ctx, &c, NULL);
        map_rows_dev d;
        lac_map_call dcall;
        LAC_CHECK(lac_map_rows_copy(ctx, call, 0, call->m, p->narrow, 1, &d, &dcall));   /* the bridge stays */
        lac_status st = lac_map_cuda_device(ctx, &dcall, NULL);
        if (st >= 0) st = copies_return(ctx, call, &d);
        lac_map_rows_free(&d);
        return st;
    }
    if (call->memory == LAC_MEM_DEVICE) return execute_deterministic(ctx, p, call);
    map_rows_dev d;
    lac_map_call dcall;
    LAC_CHECK(lac_map_rows_copy(ctx, call, 0, call->m, NULL, 1, &d, &dcall));
    lac_status st = execute_deterministic(ctx, p, &dcall);
    if (st >= 0) st = copies_return(ctx, call, &d);
    lac_map_rows_free(&d);
    return st;
}

void lac_map_cuda_plan_release(lac_map_plan_t plan)
{
    if (!plan || !plan->state) return;
    plan_free((cuda_plan *)plan->state);
    plan->state = NULL;
}
