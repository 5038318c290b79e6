/* Version and build information (what was compiled in). */
#include "core/internal.h"
#include "core/device.h"

#include <openblas_config.h>
#include <stdio.h>

#ifndef LACUNA_VERSION_STRING
#define LACUNA_VERSION_STRING "0.1.0"
#endif
#ifndef LACUNA_BUILD_TYPE
#define LACUNA_BUILD_TYPE "unknown"
#endif
#ifndef LACUNA_C_COMPILER
#define LACUNA_C_COMPILER "unknown"
#endif

const char *lac_version(void) { return LACUNA_VERSION_STRING; }

const char *lac_build_info(void)
{
    static char info[1024];
    if (info[0]) return info;
    snprintf(info, sizeof info,
             "version: %s\n"
             "build: %s\n"
             "compiler: %s\n"
             "openmp: %d\n"
             "blas:%s\n"
             "lapack: LAPACKE\n"
             "cuda: %s\n"
             "mpi: %s\n",
             LACUNA_VERSION_STRING, LACUNA_BUILD_TYPE, LACUNA_C_COMPILER, _OPENMP,
             OPENBLAS_VERSION, lac_device_backend_cuda() ? lac_device_backend_cuda()->runtime_info() : "not built",
#ifdef LACUNA_HAVE_MPI
             "yes, " LACUNA_MPI_LIBRARY
#else
             "no"
#endif
    );
    return info;
}
