/* The one door between the C library and the CUDA backend. Front ends check
 * arguments, then call these; without CUDA in the build every entry answers
 * LAC_ERR_NOT_COMPILED so callers need no #ifdefs. Implemented by the .cu files
 * beside this header. */
#ifndef LACUNA_BACKEND_CUDA_GATEWAY_H
#define LACUNA_BACKEND_CUDA_GATEWAY_H

#include "core/internal.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef LACUNA_HAVE_CUDA
#define LAC_CUDA_ENTRY(decl, body) decl;
#else
#define LAC_CUDA_ENTRY(decl, body) static inline decl body
#define LAC_NOT_COMPILED { return lac_error(ctx, LAC_ERR_NOT_COMPILED, "this build has no CUDA backend"); }
#endif

#ifdef __cplusplus
}
#endif
#endif
