/* The one door between the C library and the CUDA backend. Front ends check
 * arguments, then call these; without CUDA in the build every entry answers
 * LAC_ERR_NOT_COMPILED so callers need no #ifdefs. Implemented by the .cu files
 * beside this header. */
#ifndef LACUNA_BACKEND_CUDA_GATEWAY_H
#define LACUNA_BACKEND_CUDA_GATEWAY_H

#include "core/internal.h"
#include "map/map_internal.h"
#include "mf/mf_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef LACUNA_HAVE_CUDA
#define LAC_CUDA_ENTRY(decl, body) decl;
#else
#define LAC_CUDA_ENTRY(decl, body) static inline decl body
#define LAC_NOT_COMPILED { return lac_error(ctx, LAC_ERR_NOT_COMPILED, "this build has no CUDA backend"); }
#endif

/* map (src/backend/cuda/map_*.cu): the call is already checked by src/map. */
LAC_CUDA_ENTRY(lac_status lac_cuda_map(lac_ctx_t ctx, const lac_map_call *call), LAC_NOT_COMPILED)
LAC_CUDA_ENTRY(lac_status lac_cuda_map_plan_build(lac_ctx_t ctx, lac_map_plan_t plan,
                                                  const lac_map_call *call),
               LAC_NOT_COMPILED)
LAC_CUDA_ENTRY(lac_status lac_cuda_map_plan_execute(lac_ctx_t ctx, lac_map_plan_t plan,
                                                    const lac_map_call *call),
               LAC_NOT_COMPILED)
LAC_CUDA_ENTRY(void lac_cuda_map_plan_release(lac_map_plan_t plan), { (void)plan; })

/* mf (src/backend/cuda/mf_*.cu): CUSGD++ epochs; the call is checked by src/mf. */
LAC_CUDA_ENTRY(lac_status lac_cuda_mf_begin(lac_ctx_t ctx, const lac_mf_cuda_call *call, lac_mf_cuda_state **state),
               LAC_NOT_COMPILED)
LAC_CUDA_ENTRY(lac_status lac_cuda_mf_epoch(lac_ctx_t ctx, lac_mf_cuda_state *state, float learning_rate,
                                            double *train_sse),
               LAC_NOT_COMPILED)
LAC_CUDA_ENTRY(lac_status lac_cuda_mf_valid_rmse(lac_ctx_t ctx, lac_mf_cuda_state *state, double *rmse),
               LAC_NOT_COMPILED)
LAC_CUDA_ENTRY(lac_status lac_cuda_mf_keep(lac_ctx_t ctx, lac_mf_cuda_state *state, int restore), LAC_NOT_COMPILED)
LAC_CUDA_ENTRY(lac_status lac_cuda_mf_download(lac_ctx_t ctx, lac_mf_cuda_state *state, lac_mf_model_t model),
               LAC_NOT_COMPILED)
LAC_CUDA_ENTRY(void lac_cuda_mf_end(lac_mf_cuda_state *state), { (void)state; })

#ifdef __cplusplus
}
#endif
#endif
