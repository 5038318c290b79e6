/* The communicator over MPI (dist/comm.h): joining the job when a context is
 * made (core/comm.h), and the collectives the distributed front ends use. */
#include "dist/comm.h"
#include "core/comm.h"

#include <limits.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct lac_comm {
    MPI_Comm comm;   /* a duplicate of MPI_COMM_WORLD: our messages never meet the caller's */
};

/* Largest piece one MPI call moves, in bytes (MPI counts are int). */
#define PIECE_BYTES ((int64_t)1 << 30)
/* Elements one all-to-all round of lac_dist_allreduce reduces. */
#define REDUCE_WINDOW ((int64_t)1 << 24)

/* MPI_Init is ours to undo only when we made it; MPI itself is per process. */
static void finalize_at_exit(void)
{
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
}

lac_status lac_comm_open(lac_ctx_t ctx)
{
    ctx->comm = NULL;
    ctx->rank = 0;
    ctx->ranks = 1;
    const char *mode = lac_knob_string(ctx, LAC_KNOB_DIST);
    if (mode && strcmp(mode, "off") == 0) return LAC_SUCCESS;
    if (mode && *mode && strcmp(mode, "on") != 0 && strcmp(mode, "auto") != 0)
        return lac_error(ctx, LAC_ERR_ARGUMENT, "LACUNA_DIST='%s': give auto, on or off", mode);
    int initialized = 0;
    MPI_Initialized(&initialized);
    bool launched = lac_launcher_ranks() > 0;
    if (!initialized && !launched && !(mode && strcmp(mode, "on") == 0)) return LAC_SUCCESS;   /* a plain run */
    if (!initialized) {
        int provided;
        if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
            return lac_error(ctx, LAC_ERR_MPI, "MPI_Init_thread failed");
        atexit(finalize_at_exit);
    }
    struct lac_comm *c = calloc(1, sizeof *c);
    if (!c) return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "could not allocate the communicator");
    if (MPI_Comm_dup(MPI_COMM_WORLD, &c->comm) != MPI_SUCCESS) {
        free(c);
        return lac_error(ctx, LAC_ERR_MPI, "MPI_Comm_dup failed");
    }
    MPI_Comm_rank(c->comm, &ctx->rank);
    MPI_Comm_size(c->comm, &ctx->ranks);
    ctx->comm = c;
    /* the ranks that share this host, in rank order */
    MPI_Comm host;
    int host_ranks = 1;
    ctx->host_rank = 0;
    if (MPI_Comm_split_type(c->comm, MPI_COMM_TYPE_SHARED, ctx->rank, MPI_INFO_NULL, &host) == MPI_SUCCESS) {
        MPI_Comm_rank(host, &ctx->host_rank);
        MPI_Comm_size(host, &host_ranks);
        MPI_Comm_free(&host);
    }
    lac_log(ctx, LAC_LOG_INFO, "context: rank %d of %d MPI ranks (%d of %d on this host)", ctx->rank, ctx->ranks,
            ctx->host_rank, host_ranks);
    return LAC_SUCCESS;
}

void lac_comm_close(lac_ctx_t ctx)
{
    if (!ctx->comm) return;
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Comm_free(&ctx->comm->comm);
    free(ctx->comm);
    ctx->comm = NULL;
}

void lac_dist_range(lac_ctx_t ctx, int64_t count, int rank, int64_t *lo, int64_t *hi)
{
    *lo = lac_range_start(count, rank, ctx->ranks);
    *hi = lac_range_start(count, rank + 1, ctx->ranks);
}

static lac_status mpi_failed(lac_ctx_t ctx, int code, const char *what)
{
    char text[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(code, text, &len);
    return lac_error(ctx, LAC_ERR_MPI, "%s failed: %s", what, text);
}

/* acc = acc op part, element by element. */
static void combine(void *acc, const void *part, int64_t count, lac_dtype dtype, lac_dist_op op)
{
    if (op == LAC_DIST_OR) {
        for (int64_t k = 0; k < count; k++) ((uint8_t *)acc)[k] |= ((const uint8_t *)part)[k];
        return;
    }
#define COMBINE(T)                                                                         \
    do {                                                                                   \
        T *a = acc;                                                                        \
        const T *p = part;                                                                 \
        if (op == LAC_DIST_SUM)                                                            \
            for (int64_t k = 0; k < count; k++) a[k] += p[k];                              \
        else if (op == LAC_DIST_MIN)                                                       \
            for (int64_t k = 0; k < count; k++) a[k] = (p[k] < a[k] || isnan(p[k])) ? p[k] : a[k]; \
        else                                                                               \
            for (int64_t k = 0; k < count; k++) a[k] = (p[k] > a[k] || isnan(p[k])) ? p[k] : a[k]; \
    } while (0)
    if (dtype == LAC_FLOAT32) COMBINE(float);
    else COMBINE(double);
#undef COMBINE
}

lac_status lac_dist_allreduce(lac_ctx_t ctx, void *buf, int64_t count, lac_dtype dtype, lac_dist_op op)
{
    if (ctx->ranks == 1 || count == 0) return LAC_SUCCESS;
    if ((op == LAC_DIST_OR) != (dtype == LAC_BOOL) || (op != LAC_DIST_OR && dtype != LAC_FLOAT32 && dtype != LAC_FLOAT64))
        return lac_error(ctx, LAC_ERR_INTERNAL, "allreduce: op and dtype do not go together");
    const int P = ctx->ranks, me = ctx->rank;
    const size_t es = lac_dtype_size(dtype);
    const int64_t window = count < REDUCE_WINDOW ? count : REDUCE_WINDOW;
    int *counts = malloc(4 * (size_t)P * sizeof *counts);
    char *parts = malloc((size_t)(window / P + 1) * (size_t)P * es);
    if (!counts || !parts) {
        free(counts), free(parts);
        return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "allreduce: no memory for %lld elements", (long long)window);
    }
    int *send = counts, *sdisp = counts + P, *recv = counts + 2 * P, *rdisp = counts + 3 * P;
    lac_status st = LAC_SUCCESS;
    for (int64_t off = 0; off < count && st == LAC_SUCCESS; off += window) {
        const int64_t len = count - off < window ? count - off : window;
        char *base = (char *)buf + off * (int64_t)es;
        const int64_t mine_lo = lac_range_start(len, me, P), mine = lac_range_start(len, me + 1, P) - mine_lo;
        for (int j = 0; j < P; j++) {
            int64_t lo = lac_range_start(len, j, P), hi = lac_range_start(len, j + 1, P);
            send[j] = (int)((hi - lo) * (int64_t)es);
            sdisp[j] = (int)(lo * (int64_t)es);
            recv[j] = (int)(mine * (int64_t)es);
            rdisp[j] = (int)((int64_t)j * mine * (int64_t)es);
        }
        /* Rank j's copy of my segment lands in parts[j]; folded in rank order. */
        int rc = MPI_Alltoallv(base, send, sdisp, MPI_BYTE, parts, recv, rdisp, MPI_BYTE, ctx->comm->comm);
        if (rc != MPI_SUCCESS) {
            st = mpi_failed(ctx, rc, "MPI_Alltoallv");
            break;
        }
        char *acc = base + mine_lo * (int64_t)es;
        memcpy(acc, parts, (size_t)mine * es);
        for (int j = 1; j < P; j++) combine(acc, parts + (int64_t)j * mine * (int64_t)es, mine, dtype, op);
        for (int j = 0; j < P; j++) recv[j] = send[j], rdisp[j] = sdisp[j];
        rc = MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_BYTE, base, recv, rdisp, MPI_BYTE, ctx->comm->comm);
        if (rc != MPI_SUCCESS) st = mpi_failed(ctx, rc, "MPI_Allgatherv");
    }
    free(counts);
    free(parts);
    return st;
}

lac_status lac_dist_broadcast(lac_ctx_t ctx, void *buf, int64_t bytes, int root)
{
    if (ctx->ranks == 1) return LAC_SUCCESS;
    for (int64_t off = 0; off < bytes; off += PIECE_BYTES) {
        int len = (int)(bytes - off < PIECE_BYTES ? bytes - off : PIECE_BYTES);
        int rc = MPI_Bcast((char *)buf + off, len, MPI_BYTE, root, ctx->comm->comm);
        if (rc != MPI_SUCCESS) return mpi_failed(ctx, rc, "MPI_Bcast");
    }
    return LAC_SUCCESS;
}

lac_status lac_dist_allgatherv(lac_ctx_t ctx, const void *mine, int64_t count, size_t elem_bytes, void *all,
                               int64_t *total)
{
    const int P = ctx->ranks;
    if (P == 1) {
        if (count && mine && all != mine) memmove(all, mine, (size_t)count * elem_bytes);
        if (total) *total = count;
        return LAC_SUCCESS;
    }
    int64_t *sizes = malloc((size_t)P * sizeof *sizes);
    int *bytes = malloc(2 * (size_t)P * sizeof *bytes);
    if (!sizes || !bytes) {
        free(sizes), free(bytes);
        return lac_error(ctx, LAC_ERR_OUT_OF_MEMORY, "allgatherv: no memory");
    }
    lac_status st = LAC_SUCCESS;
    int rc = MPI_Allgather(&count, 1, MPI_INT64_T, sizes, 1, MPI_INT64_T, ctx->comm->comm);
    if (rc != MPI_SUCCESS) st = mpi_failed(ctx, rc, "MPI_Allgather");
    int64_t at = 0;
    for (int j = 0; j < P && st == LAC_SUCCESS; j++) {
        int64_t b = sizes[j] * (int64_t)elem_bytes;
        if (b > INT_MAX || at > INT_MAX)
            st = lac_error(ctx, LAC_ERR_UNSUPPORTED, "allgatherv: %lld bytes from rank %d, more than one MPI call moves",
                           (long long)b, j);
        bytes[j] = (int)b;
        bytes[P + j] = (int)at;
        at += b;
    }
    if (st == LAC_SUCCESS) {
        rc = mine ? MPI_Allgatherv(mine, (int)(count * (int64_t)elem_bytes), MPI_BYTE, all, bytes, bytes + P, MPI_BYTE,
                                   ctx->comm->comm)
                  : MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_BYTE, all, bytes, bytes + P, MPI_BYTE, ctx->comm->comm);
        if (rc != MPI_SUCCESS) st = mpi_failed(ctx, rc, "MPI_Allgatherv");
    }
    if (st == LAC_SUCCESS && total) *total = at / (int64_t)elem_bytes;
    free(sizes);
    free(bytes);
    return st;
}

lac_status lac_dist_sendrecv(lac_ctx_t ctx, const void *send, int64_t send_bytes, int to, void *recv,
                             int64_t recv_bytes, int from)
{
    if (send_bytes > INT_MAX || recv_bytes > INT_MAX)
        return lac_error(ctx, LAC_ERR_UNSUPPORTED, "sendrecv: %lld bytes, more than one MPI call moves",
                         (long long)(send_bytes > recv_bytes ? send_bytes : recv_bytes));
    int rc = MPI_Sendrecv(send, (int)send_bytes, MPI_BYTE, to, 0, recv, (int)recv_bytes, MPI_BYTE, from, 0,
                          ctx->comm->comm, MPI_STATUS_IGNORE);
    return rc == MPI_SUCCESS ? LAC_SUCCESS : mpi_failed(ctx, rc, "MPI_Sendrecv");
}

lac_status lac_dist_agree(lac_ctx_t ctx, lac_status status)
{
    if (ctx->ranks == 1) return status;
    int failing = status < 0 ? ctx->rank : ctx->ranks;
    int rc = MPI_Allreduce(MPI_IN_PLACE, &failing, 1, MPI_INT, MPI_MIN, ctx->comm->comm);
    if (rc != MPI_SUCCESS) return mpi_failed(ctx, rc, "MPI_Allreduce");
    if (failing == ctx->ranks) return status;
    struct {
        int status;
        char message[LAC_ERROR_MAX];
    } why;
    memset(&why, 0, sizeof why);
    if (ctx->rank == failing) {
        why.status = status;
        snprintf(why.message, sizeof why.message, "%s", ctx->last_error);
    }
    rc = MPI_Bcast(&why, (int)sizeof why, MPI_BYTE, failing, ctx->comm->comm);
    if (rc != MPI_SUCCESS) return mpi_failed(ctx, rc, "MPI_Bcast");
    if (ctx->rank != failing) return lac_error(ctx, why.status, "%s", why.message);
    return status;
}
