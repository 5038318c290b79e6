/* The communicator over MPI that a distributed front end uses (made from the
 * context by lac_comm_open, src/core/comm.h): the ranks, their row ranges and
 * the collectives, all through MPI's own (no transport of our own). Reductions
 * combine the ranks' parts in rank order, so a result does not depend on the
 * order messages arrive: bit-identical from run to run for a given rank count. */
#ifndef LACUNA_DIST_COMM_H
#define LACUNA_DIST_COMM_H

#include "core/internal.h"

typedef enum {
    LAC_DIST_SUM,   /* a + b */
    LAC_DIST_MIN,   /* NaN propagates (as map's MIN) */
    LAC_DIST_MAX,   /* NaN propagates (as map's MAX) */
    LAC_DIST_OR     /* bytes: a | b */
} lac_dist_op;

/* Rows [*lo, *hi) of count that rank `rank` of the context owns. */
void lac_dist_range(lac_ctx_t ctx, int64_t count, int rank, int64_t *lo, int64_t *hi);

/* buf (count elements of dtype; LAC_DIST_OR: bytes, dtype LAC_UINT8) becomes
 * part(0) op part(1) op ... op part(ranks - 1) on every rank, combined in that
 * order: each rank reduces one segment of the elements (an all-to-all), then
 * every rank gathers the segments. */
lac_status lac_dist_allreduce(lac_ctx_t ctx, void *buf, int64_t count, lac_dtype dtype, lac_dist_op op);
/* bytes of root's buf to every rank. */
lac_status lac_dist_broadcast(lac_ctx_t ctx, void *buf, int64_t bytes, int root);
/* Each rank's `mine` (its count elements of elem_bytes) laid one after the
 * other in rank order into `all` on every rank; *total (may be NULL) is the sum.
 * mine NULL: in place, the rank's elements already lie at their place in all. */
lac_status lac_dist_allgatherv(lac_ctx_t ctx, const void *mine, int64_t count, size_t elem_bytes, void *all,
                               int64_t *total);
/* A ring step: send_bytes of send to rank `to` while recv_bytes from rank
 * `from` arrive in recv (MPI_Sendrecv: no order between the pairs to
 * deadlock on). Each side under 2 GiB. */
lac_status lac_dist_sendrecv(lac_ctx_t ctx, const void *send, int64_t send_bytes, int to, void *recv,
                             int64_t recv_bytes, int from);
/* Collective: every rank passes its status; when any failed, every rank
 * returns the failure of the lowest failing rank, with its message. */
lac_status lac_dist_agree(lac_ctx_t ctx, lac_status status);

#endif
