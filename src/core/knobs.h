/* The knob registry: every LACUNA_* environment variable the library reads.
 * Each is read once per process, logged at debug level when a context is
 * made, and can be overridden per context (lac_ctx_params.knobs). This is the
 * only place under src/ that calls getenv. docs/knobs.md lists them. */
#ifndef LACUNA_CORE_KNOBS_H
#define LACUNA_CORE_KNOBS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    LAC_KNOB_LOG,                /* error|warn|info|debug: log to stderr without a callback */
    LAC_KNOB_IO_TMPFILE,         /* 0: named temporary files instead of unnamed (O_TMPFILE) ones */
    LAC_KNOB_GRAPH_ISOLATED,     /* vertices without an edge a Matrix Market size line may ask for */
    LAC_KNOB_MAP_CUDA_FEW,       /* 0: no one-launch few-target kernel */
    LAC_KNOB_MAP_CUDA_WARM,      /* 0: no per-lane accumulators of warm targets */
    LAC_KNOB_MAP_CUDA_HOT,       /* cap on hot targets of the few-target kernel */
    LAC_KNOB_MAP_CUDA_HOT_TABLE, /* 0: hot targets in registers, no per-block index */
    LAC_KNOB_MAP_CUDA_COPIES,    /* most private copies per block */
    LAC_KNOB_MAP_CUDA_PER_SM,    /* privatised blocks per SM */
    LAC_KNOB_MAP_CUDA_PREFETCH,  /* L2 prefetch steps (0: none) */
    LAC_KNOB_MAP_CUDA_ROLL,      /* 1: rolled inner loop */
    LAC_KNOB_MAP_CUDA_SELECT,    /* 0: three branches instead of selected addresses */
    LAC_KNOB_MAP_CUDA_STRATEGY,  /* global | cluster1..cluster16: force a home for the targets */
    LAC_KNOB_MAP_CUDA_PLAN,      /* sorted: every plan a sorted one */
    LAC_KNOB_MAP_CUDA_PLAN_ACC,  /* f32: float32 private copies in plans (float32 values) */
    LAC_KNOB_MAP_CUDA_PLAN_CHUNK,/* rows of a plan's chunk */
    LAC_KNOB_MAP_CUDA_PLAN_GRID, /* blocks of a plan's execute (tests) */
    LAC_KNOB_MAP_CUDA_PART,      /* 1: the range-partitioned many-target kernel (opt-in) */
    LAC_KNOB_MAP_CUDA_PART_TILES,/* tiles a block partitions per chunk */
    LAC_KNOB_MAP_CUDA_FIXED,     /* 0: deterministic sums sorted, not in fixed point; shared|global: where its words live */
    LAC_KNOB_MAP_CUDA_FIXED_GRID,/* blocks of the fixed-point pass (tests) */
    LAC_KNOB_MF_CUDA_LANES,      /* lanes a user group */
    LAC_KNOB_MF_CUDA_AHEAD,      /* v_j rows loaded ahead */
    LAC_KNOB_MF_CUDA_GROUPS,     /* groups in flight */
    LAC_KNOB_MF_CUDA_HOT,        /* ratings that make an item hot (replicated) */
    LAC_KNOB_MF_CUDA_RUN_MAX,    /* ratings a run */
    LAC_KNOB_IMPUTE_CUDA_WARM,   /* 0: every Jacobi SVT pass starts cold */
    LAC_KNOB_IMPUTE_CUDA_SVT,    /* jacobi|gram: force the GPU SVT's path */
    LAC_KNOB_DIST,               /* auto|on|off: join MPI ranks (auto: when started by mpirun) */
    LAC_KNOB_CUDA_MEMORY_CAP,    /* bytes of device memory impute may use; beyond, it streams */
    LAC_KNOB_NBR_CUDA_GSM,       /* fp16: the GPU GSM's GEMMs in fp16 also for half stars */
    LAC_KNOB_NBR_CUDA_GSM_USERS, /* users a GSM GEMM sums over at once (0: all) */
    LAC_KNOB_IMPUTE_CUDA_SUBSPACE,     /* off|on|force: the Gram route's rank-exploiting pass */
    LAC_KNOB_IMPUTE_CUDA_FILTER,       /* its Chebyshev filter's degree */
    LAC_KNOB_IMPUTE_CUDA_SUBSPACE_MAX, /* its largest block, percent of min(m, n) */
    LAC_KNOB_NBR_CUDA_CHUNK,           /* ratings a chunk of the GPU simLSH's uploads */
    LAC_KNOB_NBR_CUDA_STAGING,         /* pinned|pageable: the GPU simLSH's host staging */
    LAC_KNOB_MF_CUDA_NBR_MASK,   /* 0: the neighbourhood model searches R(i) every epoch, no masks */
    LAC_KNOB_IMPUTE_CUDA_PHASES, /* 1: CUDA events around each phase of every iteration, medians logged */
    LAC_KNOB_MAP_CUDA_FIXED_SELECT, /* 0: one-launch fixed point: warm/other rows on two branches, low words at the target */
    LAC_KNOB_MF_DIST_ROUNDS,     /* most rounds of user slices in mf's first epochs over ranks (1: whole blocks) */
    LAC_KNOB_MAP_CUDA_FIXED_CARRY, /* 0: one-launch fixed point: 64-bit shared atomics, not 32-bit halves and a carry */
    LAC_KNOB_MAP_CUDA_MEAN_MARK, /* 0: few-target weighted MEAN: a hit byte a row, not the weight sum's -0.0 */
    LAC_KNOB_MF_CUDA_NEG_POOL,   /* rows of a block's pool of negatives (implicit feedback on CUDA; 0: none) */
    LAC_KNOB_MF_CUDA_PHASES,     /* 1: implicit feedback's draws and epoch kernel timed apart, logged */
    LAC_KNOB_MF_CUDA_NEG_POOL_ADD,   /* 1: the pool's rows as warp copies, their changes added once a round */
    LAC_KNOB_MF_CUDA_NEG_POOL_CELLS, /* cells of a round per pool row (default 8) */
    LAC_KNOB_IMPUTE_CUDA_VLESS,  /* 0: cold Jacobi passes whose V is not kept still carry it */
    LAC_KNOB_IMPUTE_CUDA_LANES,  /* lanes a Jacobi pair (0: chosen by the slice's shape) */
    LAC_KNOB_MF_CUDA_INBATCH,    /* lanes a group for in-batch negatives (4, 8, 0: chosen; -1: drawn negatives) */
    LAC_KNOB_MF_CUDA_INBATCH_SEEN, /* 0: in-batch negatives the user has seen are stepped all the same */
    LAC_KNOB_MF_CUDA_INBATCH_WEIGHT, /* 0: in-batch negatives weigh 1 each (their own law, exponent 1) */
    LAC_KNOB_IMPUTE_CUDA_COLD,   /* smallest min(m, n) whose cold Gram passes try the subspace pass from random (0: never) */
    LAC_KNOB_IMPUTE_CUDA_COLD_FILTER, /* that pass's Chebyshev degree */
    LAC_KNOB_COUNT
} lac_knob;

struct lac_ctx;

/* The variable's name ("LACUNA_MAP_CUDA_FEW") and what it does. */
const char *lac_knob_name(lac_knob knob);
const char *lac_knob_help(lac_knob knob);
/* The knob's value for this context: its override, else the environment as
 * read once by the process, else NULL. ctx may be NULL (environment only). */
const char *lac_knob_string(const struct lac_ctx *ctx, lac_knob knob);
/* The value as an integer; fallback when unset, empty or not a whole number. */
int64_t lac_knob_int(const struct lac_ctx *ctx, lac_knob knob, int64_t fallback);
/* A byte count as the memory-cap knob takes it: digits with an optional
 * k, M, G or T suffix (powers of 1024). 0 on success, -1 for anything else
 * (the caller reports the text). */
int lac_parse_bytes(const char *text, uint64_t *bytes);

/* Context plumbing (src/core/context.c): parses "NAME=VALUE,..." overrides
 * into the context (NULL or "" is none); returns a constant message for an
 * unknown name or a missing '=', else NULL. Logs every knob that is set. */
/* The ranks the process launcher says this job has (Open MPI's mpirun,
 * MPICH's Hydra, PMIx), 0 when no launcher started the process. */
int lac_launcher_ranks(void);

const char *lac_knobs_load(struct lac_ctx *ctx, const char *overrides);
void lac_knobs_free(struct lac_ctx *ctx);

#ifdef __cplusplus
}
#endif
#endif
