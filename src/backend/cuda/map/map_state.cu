/* Per-context map state on the CUDA backend (map_cuda.cuh,
 * map_cuda_ctx_state): the fault words and the kernel facts, kept in the
 * context's CUDA slot and freed with it. */
#include "backend/cuda/map/map_cuda.cuh"

#include <string.h>

static void state_release(lac_ctx_t ctx, void *p)
{
    map_cuda_ctx_state *s = (map_cuda_ctx_state *)p;
    if (s->report) cudaFreeHost(s->report);
    if (s->pair) cudaFree(s->pair);
    if (s->sticky) cudaFree(s->sticky);
    if (s->async_done) cudaEventDestroy(s->async_done);
    cudaGetLastError();
}

lac_status lac_map_cuda_state(lac_ctx_t ctx, map_cuda_ctx_state **out)
{
    void *p = NULL;
    LAC_CHECK(lac_cuda_slot_get(ctx, LAC_CUDA_SLOT_MAP, sizeof(map_cuda_ctx_state), state_release, &p));
    *out = (map_cuda_ctx_state *)p;
    return LAC_SUCCESS;
}

int lac_map_fact_find(lac_ctx_t ctx, const void *kernel, map_fact_kind kind, int64_t key, size_t smem, int64_t value[2])
{
    map_cuda_ctx_state *s;
    if (lac_map_cuda_state(ctx, &s) < 0) return 0;
    for (int i = 0; i < s->fact_count; i++) {
        const map_kernel_fact *f = &s->facts[i];
        if (f->kernel == kernel && f->kind == kind && f->key == key && f->smem == smem) {
            value[0] = f->value[0];
            value[1] = f->value[1];
            return 1;
        }
    }
    return 0;
}

void lac_map_fact_put(lac_ctx_t ctx, const void *kernel, map_fact_kind kind, int64_t key, size_t smem,
                      const int64_t value[2])
{
    map_cuda_ctx_state *s;
    if (lac_map_cuda_state(ctx, &s) < 0) return;   /* asked again next time */
    if (s->fact_count == MAP_KERNEL_FACTS) s->fact_count = 0;   /* a bounded table: start over */
    map_kernel_fact f = {kernel, kind, key, smem, {value[0], value[1]}};
    s->facts[s->fact_count++] = f;
}

extern "C" unsigned long long *lac_map_fault_report_word(lac_ctx_t ctx)
{
    map_cuda_ctx_state *s;
    if (lac_map_cuda_state(ctx, &s) < 0) return NULL;
    if (!s->report && !s->report_failed) {
        void *p = NULL;
        if (cudaHostAlloc(&p, sizeof(unsigned long long), cudaHostAllocMapped) != cudaSuccess) {
            cudaGetLastError();
            s->report_failed = 1;   /* the caller falls back to a copy */
            return NULL;
        }
        s->report = (unsigned long long *)p;
    }
    return s->report;
}

extern "C" lac_status lac_map_fault_pair(lac_ctx_t ctx, unsigned long long **current, unsigned long long **next)
{
    *current = *next = NULL;
    map_cuda_ctx_state *s;
    if (lac_map_cuda_state(ctx, &s) < 0) return LAC_SUCCESS;   /* the caller resets a workspace flag instead */
    if (!s->pair) {
        void *p = NULL;
        LAC_CUDA_CHECK(ctx, cudaMalloc(&p, 2 * sizeof(unsigned long long)));
        cudaError_t e = cudaMemset(p, 0xFF, 2 * sizeof(unsigned long long));
        if (e != cudaSuccess) {
            cudaFree(p);
            LAC_CUDA_CHECK(ctx, e);
        }
        s->pair = (unsigned long long *)p;
        s->parity = 0;
    }
    *current = s->pair + s->parity;
    *next = s->pair + (1 - s->parity);
    return LAC_SUCCESS;
}

extern "C" void lac_map_fault_pair_advance(lac_ctx_t ctx)
{
    map_cuda_ctx_state *s;
    if (lac_map_cuda_state(ctx, &s) >= 0 && s->pair) s->parity = 1 - s->parity;
}
