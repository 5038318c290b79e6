/* The context's communicator, seen from the core: joining the MPI job when a
 * context is made and leaving it when it is destroyed. src/dist/ defines these
 * in an MPI build (LACUNA_HAVE_MPI); without MPI a context is one process and
 * says so when it is asked for more. */
#ifndef LACUNA_CORE_COMM_H
#define LACUNA_CORE_COMM_H

#include "core/internal.h"

#include <string.h>

#ifdef LACUNA_HAVE_MPI
/* Sets ctx->comm, rank and ranks per the LACUNA_DIST knob (auto: MPI only when
 * a launcher started the process). */
lac_status lac_comm_open(lac_ctx_t ctx);
void lac_comm_close(lac_ctx_t ctx);
#else
static inline lac_status lac_comm_open(lac_ctx_t ctx)
{
    const char *mode = lac_knob_string(ctx, LAC_KNOB_DIST);
    ctx->rank = 0;
    ctx->ranks = 1;
    if (mode && strcmp(mode, "on") == 0)
        return lac_error(ctx, LAC_ERR_NOT_COMPILED, "LACUNA_DIST=on but this build has no MPI (-DLACUNA_MPI=ON)");
    if ((!mode || strcmp(mode, "off") != 0) && lac_launcher_ranks() > 1)
        return lac_error(ctx, LAC_ERR_NOT_COMPILED,
                         "started as one of %d MPI ranks, but this build has no MPI (build with -DLACUNA_MPI=ON, "
                         "or set LACUNA_DIST=off to run every rank alone)",
                         lac_launcher_ranks());
    return LAC_SUCCESS;
}
static inline void lac_comm_close(lac_ctx_t ctx) { (void)ctx; }
#endif

#endif
