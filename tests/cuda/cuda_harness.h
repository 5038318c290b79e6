/* The CUDA tests' common start (beside tests/harness.h). */
#ifndef LACUNA_TESTS_CUDA_HARNESS_H
#define LACUNA_TESTS_CUDA_HARNESS_H

#include "lacuna/lacuna.h"

#include <stdio.h>

/* A CUDA context in *gpu and a CPU one of cpu_threads threads (0: all) in
 * *cpu. Returns 1 to run the tests; else 0 with *exit_status what main
 * returns: 0 when the machine has no CUDA device (skipped), 1 when a
 * context cannot be made. */
static inline int harness_cuda_start(lac_ctx_t *gpu, lac_ctx_t *cpu, int cpu_threads, int *exit_status)
{
    *exit_status = 0;
    if (lac_cuda_device_count() == 0) {
        printf("no CUDA device: skipped\n");
        return 0;
    }
    *exit_status = 1;
    lac_ctx_params p = lac_ctx_params_default();
    p.backend = LAC_BACKEND_CUDA;
    if (lac_ctx_create(&p, gpu) != 0) {
        printf("no CUDA context: %s\n", lac_last_error(NULL));
        return 0;
    }
    p.backend = LAC_BACKEND_CPU;
    p.threads = cpu_threads;
    if (lac_ctx_create(&p, cpu) != 0) {
        printf("no CPU context: %s\n", lac_last_error(NULL));
        return 0;
    }
    return 1;
}

#endif
