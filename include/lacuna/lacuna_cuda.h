/* Lacuna's calls for CUDA programs: an optional header beside lacuna.h (which
 * stays free of CUDA) for callers that order work on their own streams. */
#ifndef LACUNA_LACUNA_CUDA_H
#define LACUNA_LACUNA_CUDA_H

#include "lacuna/lacuna.h"

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* lac_map, stream-ordered: the call is queued on `stream` (0: the legacy
 * default stream) behind the work already there, and returns without waiting
 * for the device. Arrays must all be device arrays of ctx's device, and must
 * stay valid (source, bridge and weights unchanged) until the work is done.
 *
 * Errors found on the host (shapes, dtypes, a context without CUDA, a
 * deterministic SUM/MEAN/COUNT, which sorts with synchronisations) come back
 * here with T untouched. Faults found on the device (a bridge entry outside
 * [0, n), a NaN under LAC_NAN_ERROR) leave that call's T untouched and are
 * reported by the next lac_map_cuda_synchronize, which names the first faulty
 * call's smallest offending position as lac_map would.
 *
 * No host synchronisation, allocation or read-back happens per call once the
 * context has made a call of the same shape (its workspace grows on demand),
 * so a CUDA graph can capture the calls after one such call outside the
 * capture; each replay resets its own fault flag. A context keeps one
 * workspace: calls on the same context are ordered by the caller (one stream,
 * or events between streams); a later lac_map on the context waits for the
 * stream's queued calls by itself. */
LAC_API lac_status lac_map_cuda_async(lac_ctx_t ctx, const lac_map_params *params, const lac_array *source,
                                      const lac_array *bridge, const lac_array *weights, lac_array *target,
                                      cudaStream_t stream);

/* Waits for `stream` and reports the first device fault of the
 * lac_map_cuda_async calls since the last report (LAC_ERR_RANGE,
 * LAC_ERR_VALUE, with lac_last_error naming call and position), or a CUDA
 * error; LAC_SUCCESS when there was none. Clears the report. */
LAC_API lac_status lac_map_cuda_synchronize(lac_ctx_t ctx, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif
