/* The GPU imputation's memory plan (stream_plan.h): the resident plan's
 * bytes, counted buffer by buffer as the CUDA setup makes them, and the
 * streamed plan's slab. */
#include "impute/stream_plan.h"

#include <stdlib.h>

/* The upload's staging chunk (src/backend/cuda/impute/impute_dispatch.cu). */
#define STAGING_BYTES ((size_t)256 << 20)
#define PARTIAL_BYTES ((size_t)512 * sizeof(double))

static size_t resident_base(const lac_impute_footprint *f)
{
    const size_t N = (size_t)f->N, mn = (size_t)f->mn, ni = (size_t)f->ni, r = f->real_size;
    size_t b = r * (N * N + ni * N + 3 * mn * N + mn * ni * (f->momentum ? 3 : 1));
    if (f->truth) b += r * (mn * N + mn * ni);
    if (f->split_tf32) b += r * 2 * (ni * N + mn * N);
    if (f->entry_mask) b += mn * ni;
    b += N * (sizeof(double) + f->stats_slice + f->svt_slice_bytes + f->svt_resident_slice_bytes) + PARTIAL_BYTES +
         ni * sizeof(int64_t);
    size_t chunk = STAGING_BYTES / (mn * f->tensor_size + 1);
    if (chunk < 1) chunk = 1;
    if (chunk > N) chunk = N;
    b += chunk * (mn * f->tensor_size + 1 + (f->entry_mask ? mn : 0));
    return b;
}

/* The incomplete vertices' slices: X_I, the iGFT's product, the previous
 * X_I (momentum), the truth's (with truth) and the entry masks. */
static size_t streamed_fixed(const lac_impute_footprint *f)
{
    const size_t mn = (size_t)f->mn, ni = (size_t)f->ni;
    size_t b = f->real_size * mn * ni * (2 + (f->momentum ? 1 : 0) + (f->truth ? 1 : 0));
    if (f->entry_mask) b += mn * ni;
    return b + PARTIAL_BYTES + ni * sizeof(int64_t);
}

size_t lac_impute_plan_slab_bytes(const lac_impute_footprint *f, int64_t width)
{
    const size_t w = (size_t)width, mn = (size_t)f->mn, ni = (size_t)f->ni, r = f->real_size;
    /* Two buffer sets: U_I's, C's (Ĝ in place), Ĝest's and the truth's
     * columns, λ, the figures and the SVT state; one Gram chunk. */
    size_t per = r * (ni + 2 * mn + (f->truth ? mn : 0)) + sizeof(double) + f->stats_slice + f->svt_slice_bytes;
    size_t iteration = 2 * w * per + w * f->svt_work_slice + f->svt_work_fixed;
    /* The tiles of U-products (setup's C and Ĝtrue, finish's estimate):
     * staging in the tensor's type and masks, a tile in, a U block, a tile out. */
    size_t tiles = w * mn * f->tensor_size + w + (f->entry_mask ? w * mn : 0) + r * (2 * mn * w + w * w);
    return iteration + tiles;
}

void lac_impute_plan_make(const lac_impute_footprint *f, size_t available, lac_impute_plan *plan)
{
    const size_t base = resident_base(f);
    plan->fixed_bytes = streamed_fixed(f);
    plan->min_bytes = plan->fixed_bytes + lac_impute_plan_slab_bytes(f, 1);
    plan->slab = 0;
    plan->slab_bytes = 0;
    plan->svt_budget = 0;
    /* The Gram path wants room for a few slices a chunk beside the rest. */
    const int64_t few = f->N < 16 ? f->N : 16;
    plan->resident_bytes = base + f->svt_work_fixed + (size_t)few * f->svt_work_slice;
    if (plan->resident_bytes <= available) {
        plan->mode = LAC_IMPUTE_RESIDENT;
        plan->svt_budget = available - base;
        return;
    }
    if (plan->min_bytes > available) {
        plan->mode = LAC_IMPUTE_TOO_SMALL;
        return;
    }
    /* The widest slab that fits, at most a quarter of the frequencies so
     * that copies have compute to overlap. */
    int64_t lo = 1, hi = (f->N + 3) / 4;
    if (hi < 1) hi = 1;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo + 1) / 2;
        if (plan->fixed_bytes + lac_impute_plan_slab_bytes(f, mid) <= available) lo = mid;
        else hi = mid - 1;
    }
    plan->mode = LAC_IMPUTE_STREAMED;
    plan->slab = lo;
    plan->slab_bytes = lac_impute_plan_slab_bytes(f, lo);
    plan->svt_budget = (size_t)lo * f->svt_work_slice + f->svt_work_fixed;
}
