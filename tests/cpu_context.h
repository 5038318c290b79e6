/* The CPU contexts the unit tests run on. */
#ifndef LACUNA_TESTS_CPU_CONTEXT_H
#define LACUNA_TESTS_CPU_CONTEXT_H

#include "lacuna/lacuna.h"

/* A context on the CPU backend with `threads` threads, or NULL (the
 * library's last error says why). */
static inline lac_ctx_t cpu_context(int threads)
{
    lac_ctx_params p = lac_ctx_params_default();
    p.backend = LAC_BACKEND_CPU;
    p.threads = threads;
    lac_ctx_t c = NULL;
    return lac_ctx_create(&p, &c) == LAC_SUCCESS ? c : NULL;
}

#endif
