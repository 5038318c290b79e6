/* How much device memory a GPU imputation needs, resident or streamed, and
 * the frequency slab that fits a budget (stream_plan.c). Pure arithmetic on
 * host values, so that the CPU build tests it; the CUDA backend
 * (src/backend/cuda/impute/) fills the footprint and follows the plan. */
#ifndef LACUNA_IMPUTE_STREAM_PLAN_H
#define LACUNA_IMPUTE_STREAM_PLAN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What the buffers are made of: sizes in elements and bytes per element. */
typedef struct {
    int64_t N, mn, ni;          /* vertices = frequencies, m·n, incomplete vertices */
    size_t real_size;           /* 4 or 8: the computation's precision */
    size_t tensor_size;         /* bytes per element of the given tensor (upload staging) */
    int truth, momentum, entry_mask, split_tf32;
    size_t svt_slice_bytes;     /* SVT state kept per slice between passes (Jacobi: its p x p vectors) */
    size_t svt_work_slice;      /* SVT workspace per slice of a chunk (Gram path), 0 for none */
    size_t svt_work_fixed;      /* and what a chunk of any size needs besides */
    size_t stats_slice;         /* per-slice figures (LAC_SVT_STATS doubles) */
    size_t svt_resident_slice_bytes; /* kept per slice by the resident plan only (the Gram route's
                                        vectors for its subspace pass; the streamed plan has none) */
} lac_impute_footprint;

enum { LAC_IMPUTE_RESIDENT = 0, LAC_IMPUTE_STREAMED = 1, LAC_IMPUTE_TOO_SMALL = -1 };

typedef struct {
    int mode;                   /* LAC_IMPUTE_* */
    int64_t slab;               /* streamed: frequencies per slab (at most ceil(N/4), for overlap) */
    size_t resident_bytes;      /* the resident plan's need (with a Gram chunk of 16 slices) */
    size_t fixed_bytes;         /* streamed: what stays on the device (the incomplete vertices' slices) */
    size_t slab_bytes;          /* streamed: what `slab` adds (two buffer sets, or setup's tiles) */
    size_t min_bytes;           /* streamed with one frequency a slab: below this nothing runs */
    size_t svt_budget;          /* bytes the Gram path's chunks may use */
} lac_impute_plan;

/* Resident when it fits `available` bytes, else streamed with the widest
 * slab that fits, else TOO_SMALL (min_bytes says what one slab needs). */
void lac_impute_plan_make(const lac_impute_footprint *f, size_t available, lac_impute_plan *plan);

/* The bytes one streamed slab of w frequencies needs beyond fixed_bytes:
 * the larger of the iteration's two buffer sets and setup's tiles. */
size_t lac_impute_plan_slab_bytes(const lac_impute_footprint *f, int64_t w);

#ifdef __cplusplus
}
#endif
#endif
