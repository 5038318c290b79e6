/* What the impute front end's files (impute.c, holdout.c, gft.c,
 * gft_canonical.c, generate.c) share beyond the backend contract: the one
 * place a backend table is picked, the canonical basis and the hold-out set. */
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

/* Hold-out validation of λ (holdout.c): a problem with some observed vertices
 * (or entries, when the full problem has an entry mask) hidden. */
typedef struct {
    lac_impute_problem problem;   /* the full one less the held-out part, without truth */
    int entries;                  /* entries were held out (else vertices) */
    int64_t count;                /* how many */
    unsigned char *vertex_state;  /* of problem */
    unsigned char *entry_mask;    /* of problem, or NULL when no vertex of it is partial */
    int64_t *incomplete;          /* of problem */
    int64_t *held_vertices;       /* vertices: the held-out ones, ascending */
    const unsigned char *given;   /* entries: the full problem's mask */
    void *estimate;               /* N*m*n of the tensor's dtype, for finish */
} lac_impute_holdout;

/* round(fraction * observed units), at least 1 and leaving 1, drawn with seed;
 * LAC_ERR_VALUE when fewer than 2 units are observed. Release h even on failure. */
lac_status lac_impute_holdout_make(lac_ctx_t ctx, const lac_impute_problem *full, double fraction, uint64_t seed,
                                   lac_impute_holdout *h);
/* The relative error ‖est - G‖/‖G‖ over the held-out entries of the estimate
 * the state holds now (the root mean square when G is 0 there). */
lac_status lac_impute_holdout_error(lac_ctx_t ctx, const lac_impute_backend *backend, void *state, lac_impute_holdout *h,
                                    double *error);
void lac_impute_holdout_release(lac_impute_holdout *h);

#ifdef __cplusplus
}
#endif
#endif
