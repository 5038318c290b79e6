/* map on the CUDA backend, host side: the accumulator layout of a call, the
 * reduction strategy (where each block keeps its private copy of the target,
 * from the device's shared memory and occupancy), kernel preparation and the
 * scratch sizes. The kernels and their launches are map_reduce_kernels.cu's. */
#include "backend/cuda/map/map_cuda.cuh"

#include <math.h>
#include <stdlib.h>
#include <string.h>

extern "C" map_layout lac_map_layout_for(const lac_map_call *call)
{
    map_layout L;
    memset(&L, 0, sizeof L);
    const lac_map_params *p = &call->params;
    bool empty_is_zero = p->empty_value == 0.0 && !signbit(p->empty_value);
    L.kind = p->op == LAC_MAP_MIN ? MAP_KIND_MIN : p->op == LAC_MAP_MAX ? MAP_KIND_MAX : MAP_KIND_ADD;
    if (L.kind == MAP_KIND_ADD) {
        L.track_weight = p->op == LAC_MAP_MEAN;
        /* As lac_map_needs_flags in the CPU backend: only where the sums
         * cannot tell an empty target. */
        if (p->op == LAC_MAP_SUM) L.track_hits = !p->accumulate && !empty_is_zero;
        else if (p->op == LAC_MAP_COUNT) L.track_hits = call->weights && !p->accumulate && !empty_is_zero;
        else L.track_hits = call->weights != NULL;
    }
    L.arrays = 1 + L.track_weight + L.track_hits;
    L.acc_size = lac_dtype_size(call->value_dtype);
    return L;
}

/* Kernel attributes and occupancy answers cost tens of microseconds a query,
 * as much as a whole small map: they are kept as the context's kernel facts
 * (map_cuda_ctx_state): MAP_FACT_PREPARED once a kernel's limits are raised,
 * MAP_FACT_CLUSTERS per (cluster size, shared memory), key -1 for the blocks
 * per SM of the plain launch. */
static int fact_find(lac_ctx_t ctx, const void *kernel, map_fact_kind kind, int key, size_t smem, int *out)
{
    int64_t v[2];
    if (!lac_map_fact_find(ctx, kernel, kind, key, smem, v)) return 0;
    *out = (int)v[0];
    return 1;
}

static void fact_put(lac_ctx_t ctx, const void *kernel, map_fact_kind kind, int key, size_t smem, int value)
{
    const int64_t v[2] = {value, 0};
    lac_map_fact_put(ctx, kernel, kind, key, smem, v);
}

/* Lets the kernel take the device's whole shared memory and clusters of 16. */
lac_status lac_map_prepare_kernel(lac_ctx_t ctx, const void *kernel)
{
    int unused;
    if (fact_find(ctx, kernel, MAP_FACT_PREPARED, 0, 0, &unused)) return LAC_SUCCESS;
    /* The opt-in limit covers static and dynamic shared memory together. */
    cudaFuncAttributes attr;
    LAC_CUDA_CHECK(ctx, cudaFuncGetAttributes(&attr, kernel));
    LAC_CUDA_CHECK(ctx, cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             (int)(ctx->cuda->prop.sharedMemPerBlockOptin - attr.sharedSizeBytes)));
    LAC_CUDA_CHECK(ctx, cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    fact_put(ctx, kernel, MAP_FACT_PREPARED, 0, 0, 1);
    return LAC_SUCCESS;
}

extern "C" lac_status lac_map_coop_limits(lac_ctx_t ctx, const void *kernel, map_fact_kind kind, int block, size_t smem,
                                          size_t *smem_max, int *per_sm)
{
    int64_t known[2];
    if (lac_map_fact_find(ctx, kernel, kind, smem > 0, smem, known)) {
        *smem_max = (size_t)known[0];
        *per_sm = (int)known[1];
        return LAC_SUCCESS;
    }
    cudaFuncAttributes attr;
    LAC_CUDA_CHECK(ctx, cudaFuncGetAttributes(&attr, kernel));
    size_t max_dyn = ctx->cuda->prop.sharedMemPerBlockOptin - attr.sharedSizeBytes;
    LAC_CUDA_CHECK(ctx, cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)max_dyn));
    int count = 0;
    if (smem > 0) LAC_CUDA_CHECK(ctx, cudaOccupancyMaxActiveBlocksPerMultiprocessor(&count, kernel, block, smem));
    const int64_t fact[2] = {(int64_t)max_dyn, count};
    lac_map_fact_put(ctx, kernel, kind, smem > 0, smem, fact);
    *smem_max = max_dyn;
    *per_sm = count;
    return LAC_SUCCESS;
}

/* How many clusters of this shape can be resident at once (0: none). */
static lac_status max_clusters(lac_ctx_t ctx, const void *kernel, int cluster_size, int block, size_t smem, int *out)
{
    LAC_CHECK(lac_map_prepare_kernel(ctx, kernel));
    if (fact_find(ctx, kernel, MAP_FACT_CLUSTERS, cluster_size, smem, out)) return LAC_SUCCESS;
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = cluster_size;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    cfg.gridDim = dim3(cluster_size * 64);
    cfg.blockDim = dim3(block);
    cfg.dynamicSmemBytes = smem;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    int count = 0;
    cudaError_t e = cudaOccupancyMaxActiveClusters(&count, kernel, &cfg);
    if (e != cudaSuccess) {
        cudaGetLastError();   /* an unsupported shape: treat as "does not fit" */
        count = 0;
    }
    fact_put(ctx, kernel, MAP_FACT_CLUSTERS, cluster_size, smem, count);
    *out = count;
    return LAC_SUCCESS;
}

/* SUM or COUNT with NaN propagated over one column: the case the dedicated
 * kernel (map_sum_private_kernel) serves, with its hot-target handling. */
bool lac_map_simple_sum(const map_layout *L, lac_map_op op, lac_nan_policy nan_policy, int64_t b)
{
    return L->kind == MAP_KIND_ADD && L->arrays == 1 && (op == LAC_MAP_SUM || op == LAC_MAP_COUNT) &&
           nan_policy == LAC_NAN_PROPAGATE && b == 1;
}

bool lac_map_one_launch_call(const lac_map_call *call, const map_layout *L)
{
    const lac_map_params *p = &call->params;
    return call->memory == LAC_MEM_DEVICE && lac_map_simple_sum(L, p->op, p->nan_policy, call->b) && call->m >= 1 &&
           call->n >= 1 && call->n <= INT32_MAX / 4 && lac_map_aligned16(call->source) &&
           lac_map_aligned16(call->bridge) && (!call->weights || lac_map_aligned16(call->weights));
}

/* Shared memory the dedicated kernel needs besides the private copies. */
size_t lac_map_hot_bytes(size_t value_size, int block)
{
    size_t acc = (size_t)MAP_HOT_MAX * (block / 32) * MAP_HOT_LANES * value_size;
    size_t counts = 2 * MAP_HOT_COUNT_SLOTS * sizeof(unsigned int);   /* the sample's table reuses acc */
    /* + the lookup table, + 1 KB for the kernel's static shared memory. */
    return (acc > counts ? acc : counts) + 2 * MAP_HOT_TABLE * sizeof(unsigned int) + 1024;
}

/* Shared-memory words between two arrays/copies: a multiple of 32 plus one, so
 * that a slot's copies fall in different banks. */
static int64_t pitch_for(int64_t slice) { return (slice + 31) / 32 * 32 + 1; }

extern "C" lac_status lac_map_strategy_choose(lac_ctx_t ctx, const lac_map_call *call, const map_layout *L,
                                          map_strategy *out)
{
    const cudaDeviceProp *prop = &ctx->cuda->prop;
    const int64_t slots = call->n * call->b;
    const int64_t elements = call->m * call->b;
    const size_t slot_bytes = (size_t)L->arrays * L->acc_size;
    const int block = 1024;
    const bool simple = lac_map_simple_sum(L, call->params.op, call->params.nan_policy, call->b);
    const size_t budget = prop->sharedMemPerBlockOptin - (simple ? lac_map_hot_bytes(L->acc_size, block) : 0);
    memset(out, 0, sizeof *out);
    out->block = block;
    out->cluster_size = 1;
    out->copies = 1;

    /* Tuning knobs for the benchmarks (docs/map-cuda.md):
     * LACUNA_MAP_CUDA_STRATEGY = global | cluster1 .. cluster16 (cluster1: the
     * per-block private copy; larger: distributed shared memory);
     * LACUNA_MAP_CUDA_COPIES = private copies per block (skew); _PER_SM =
     * privatised blocks per SM. */
    const char *force = lac_knob_string(ctx, LAC_KNOB_MAP_CUDA_STRATEGY);
    int forced_cluster = 0, forced_global = 0;
    if (force && strcmp(force, "global") == 0) forced_global = 1;
    else if (force && strncmp(force, "cluster", 7) == 0) forced_cluster = atoi(force + 7);
    const int copies_max = (int)lac_knob_int(ctx, LAC_KNOB_MAP_CUDA_COPIES, MAP_DEFAULT_COPIES);
    const int per_sm_private = (int)lac_knob_int(ctx, LAC_KNOB_MAP_CUDA_PER_SM, 1);

    const void *kernel = lac_map_pick_reduce_kernel(call->value_dtype, call->index_dtype, L->kind);
    int cluster_size = 0;
    int64_t slice = 0;
    int copies = 1;
    if (!forced_global && slots > 0 && slots <= INT32_MAX / 4) {
        if (forced_cluster >= 1 && forced_cluster <= 16) {
            cluster_size = forced_cluster;
        } else if ((size_t)pitch_for(slots) * slot_bytes <= budget) {
            cluster_size = 1;
        } else if (!simple && !(L->kind != MAP_KIND_ADD && L->acc_size == 8)) {
            /* Measured on an H100 (bench/RESULTS.md): remote
             * distributed-shared-memory atomics and L2 atomics are each slower
             * than local shared atomics, but they run side by side; a pair or
             * quad of blocks privatising what fits, the rest going to global
             * atomics, beat either alone. Larger clusters lost. */
            cluster_size = slots <= MAP_PAIR_SLOTS ? 2 : 4;
        }
    }
    /* 64-bit min/max reductions into a cluster peer's shared memory gave wrong
     * results on the H100 (both as generic atomics and as red.shared::cluster):
     * those keys stay on one block or go global. */
    if (cluster_size > 1 && L->kind != MAP_KIND_ADD && L->acc_size == 8) cluster_size = forced_cluster ? 1 : 0;
    int clusters = 0;
    if (cluster_size > 0) {
        slice = (slots + cluster_size - 1) / cluster_size;
        int64_t max_slice = (int64_t)(budget / slot_bytes) - 64;
        if ((size_t)pitch_for(slice) * slot_bytes > budget) slice = max_slice;
        if (cluster_size == 1)
            while (copies * 2 <= copies_max && (size_t)(copies * 2) * pitch_for(slice) * slot_bytes <= budget) copies *= 2;
        size_t smem = (size_t)copies * pitch_for(slice) * slot_bytes;
        LAC_CHECK(max_clusters(ctx, kernel, cluster_size, block, smem, &clusters));
        int64_t capacity = slice * cluster_size < slots ? slice * cluster_size : slots;
        if (simple) smem += lac_map_hot_bytes(L->acc_size, block);
        int cap = prop->multiProcessorCount * (cluster_size == 1 ? per_sm_private : 1) / cluster_size;
        if (clusters > cap && cap > 0) clusters = cap;
        /* Each private copy costs a write and a read of `capacity` slots: worth
         * it only with enough elements per copy, and only while the copies
         * keep the whole GPU busy. */
        int64_t by_work = elements / (capacity * 4 > 16384 ? capacity * 4 : 16384);
        if (!forced_cluster && by_work < clusters) clusters = by_work * 2 < clusters ? 0 : (int)by_work;
        /* Too little of the target privatised to pay for the partials. */
        if (!forced_cluster && capacity < slots / 8) clusters = 0;
        if (clusters > 0) {
            out->cluster_size = cluster_size;
            out->copies = copies;
            out->slice = slice;
            out->pitch = pitch_for(slice);
            out->capacity = capacity;
            out->clusters = clusters;
            out->smem_bytes = smem;
            return LAC_SUCCESS;
        }
    }
    /* Global atomics only: a persistent grid of a few blocks per SM. */
    int per_sm = 0;
    if (!fact_find(ctx, kernel, MAP_FACT_CLUSTERS, -1, 0, &per_sm)) {
        LAC_CUDA_CHECK(ctx, cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, block, 0));
        fact_put(ctx, kernel, MAP_FACT_CLUSTERS, -1, 0, per_sm);
    }
    if (per_sm < 1) per_sm = 1;
    int64_t blocks = (int64_t)per_sm * prop->multiProcessorCount;
    int64_t by_work = (elements + (int64_t)block * 8 - 1) / ((int64_t)block * 8);
    if (by_work < blocks) blocks = by_work > 0 ? by_work : 1;
    out->cluster_size = 1;
    out->clusters = (int)blocks;
    return LAC_SUCCESS;
}

extern "C" size_t lac_map_scratch_bytes(const map_layout *L, const map_strategy *s, int64_t slots)
{
    size_t bytes = lac_map_align256((size_t)L->arrays * (size_t)slots * L->acc_size);
    if (s->capacity > 0) bytes += lac_map_align256((size_t)L->arrays * (size_t)s->clusters * (size_t)s->capacity * L->acc_size);
    return bytes + 256;   /* the fault flag */
}

extern "C" void lac_map_scratch_carve(void *base, const map_layout *L, const map_strategy *s, int64_t slots,
                                  void **scratch, void **partials, unsigned long long **fault)
{
    unsigned char *p = (unsigned char *)base;
    *scratch = p;
    p += lac_map_align256((size_t)L->arrays * (size_t)slots * L->acc_size);
    *partials = NULL;
    if (s->capacity > 0) {
        *partials = p;
        p += lac_map_align256((size_t)L->arrays * (size_t)s->clusters * (size_t)s->capacity * L->acc_size);
    }
    *fault = (unsigned long long *)p;
}

