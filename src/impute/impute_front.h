/* What the impute front end's files (impute.c, gft.c, gft_canonical.c,
 * generate.c) share beyond the backend contract: the one place a backend
 * table is picked, and the canonical basis. */
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

/* The canonical basis (gft_canonical.c, docs/impute.md): eigenvalues
 * (ascending) closer than lac_gft_degenerate_tolerance form one eigenspace,
 * whose basis in vectors (n x n column-major, in precision) is replaced in
 * place by one that depends only on the eigenspace, not on the solver's
 * rotation or signs. *groups (may be NULL): eigenspaces of dimension > 1. */
lac_status lac_gft_canonicalize(lac_ctx_t ctx, lac_dtype precision, int64_t n, void *vectors, const double *eigenvalues,
                                int64_t *groups);
/* 2 sqrt(n) eps max|w|: the largest gap between eigenvalues of one eigenspace. */
double lac_gft_degenerate_tolerance(lac_dtype precision, int64_t n, const double *eigenvalues);

#ifdef __cplusplus
}
#endif
#endif
