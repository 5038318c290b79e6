/* What the impute front end's files (impute.c, gft.c, generate.c) share
 * beyond the backend contract: the one place a backend table is picked. */
#ifndef LACUNA_IMPUTE_FRONT_H
#define LACUNA_IMPUTE_FRONT_H

#include "impute/impute_backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The table that runs this context's impute work: the context's backend's.
 * While a CUDA context gets no CUDA table (impute has no GPU code yet), one
 * whose backend was AUTO runs on the CPU (logged at info level when `note` is
 * given) and one that asked for CUDA is refused with LAC_ERR_UNSUPPORTED and
 * `refusal` as the detail; with refusal NULL (entries that have always run on
 * the CPU) it runs on the CPU as well. */
lac_status lac_impute_backend_for(lac_ctx_t ctx, const char *refusal, const char *note, const lac_impute_backend **out);

#ifdef __cplusplus
}
#endif
#endif
