/* The knob registry (knobs.h): the one getenv of the library. */
#include "core/internal.h"
#include "core/knobs.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name;
    const char *help;
} knob_table[LAC_KNOB_COUNT] = {
    [LAC_KNOB_LOG] = {"LACUNA_LOG", "error|warn|info|debug: messages to stderr when no log callback is set"},
    [LAC_KNOB_IO_TMPFILE] = {"LACUNA_IO_TMPFILE", "0: outputs go through named temporary files, not unnamed ones"},
    [LAC_KNOB_GRAPH_ISOLATED] = {"LACUNA_GRAPH_ISOLATED",
                                 "vertices without an edge a Matrix Market graph may have (default 1048576)"},
    [LAC_KNOB_MAP_CUDA_FEW] = {"LACUNA_MAP_CUDA_FEW", "0: map few targets with the general kernel"},
    [LAC_KNOB_MAP_CUDA_WARM] = {"LACUNA_MAP_CUDA_WARM", "0: no per-lane accumulators of warm targets (few-target and one-launch deterministic kernels)"},
    [LAC_KNOB_MAP_CUDA_HOT] = {"LACUNA_MAP_CUDA_HOT", "cap on the hot targets of the few-target kernel"},
    [LAC_KNOB_MAP_CUDA_HOT_TABLE] = {"LACUNA_MAP_CUDA_HOT_TABLE", "0: hot targets in registers, no per-block index"},
    [LAC_KNOB_MAP_CUDA_COPIES] = {"LACUNA_MAP_CUDA_COPIES", "most private target copies per block"},
    [LAC_KNOB_MAP_CUDA_PER_SM] = {"LACUNA_MAP_CUDA_PER_SM", "privatised blocks per SM (general kernel)"},
    [LAC_KNOB_MAP_CUDA_PREFETCH] = {"LACUNA_MAP_CUDA_PREFETCH", "L2 prefetch steps of the few-target kernel (0: none)"},
    [LAC_KNOB_MAP_CUDA_ROLL] = {"LACUNA_MAP_CUDA_ROLL", "1: rolled inner loop in the few-target kernel"},
    [LAC_KNOB_MAP_CUDA_SELECT] = {"LACUNA_MAP_CUDA_SELECT", "0: three branches instead of one selected address"},
    [LAC_KNOB_MAP_CUDA_STRATEGY] = {"LACUNA_MAP_CUDA_STRATEGY", "global|cluster1..cluster16|pair: force where targets live (pair: a float32 weighted MEAN's (sum w S, sum w) pairs in L2)"},
    [LAC_KNOB_MAP_CUDA_PLAN] = {"LACUNA_MAP_CUDA_PLAN", "sorted: build every plan as a sorted plan"},
    [LAC_KNOB_MAP_CUDA_PLAN_ACC] = {"LACUNA_MAP_CUDA_PLAN_ACC", "f32: float32 private copies in float32 plans"},
    [LAC_KNOB_MAP_CUDA_PLAN_CHUNK] = {"LACUNA_MAP_CUDA_PLAN_CHUNK", "rows of a chunk-local plan's chunk"},
    [LAC_KNOB_MAP_CUDA_PLAN_GRID] = {"LACUNA_MAP_CUDA_PLAN_GRID", "blocks of a plan's execute (tests)"},
    [LAC_KNOB_MAP_CUDA_PART] = {"LACUNA_MAP_CUDA_PART", "1: many targets through the range-partitioned kernel (opt-in); profile: also log its phase times"},
    [LAC_KNOB_MAP_CUDA_PART_TILES] = {"LACUNA_MAP_CUDA_PART_TILES", "8192-row tiles a block partitions per chunk (many targets)"},
    [LAC_KNOB_MAP_CUDA_FIXED] = {"LACUNA_MAP_CUDA_FIXED", "0: deterministic sums through the sorted plan, not in fixed point; shared|global: force the two-pass scheme and where its words live"},
    [LAC_KNOB_MAP_CUDA_FIXED_GRID] = {"LACUNA_MAP_CUDA_FIXED_GRID", "blocks of the fixed-point deterministic pass (tests)"},
    [LAC_KNOB_MF_CUDA_LANES] = {"LACUNA_MF_CUDA_LANES", "lanes that share a user row (CUSGD++, the neighbourhood model)"},
    [LAC_KNOB_MF_CUDA_AHEAD] = {"LACUNA_MF_CUDA_AHEAD", "item rows loaded ahead (CUSGD++)"},
    [LAC_KNOB_MF_CUDA_GROUPS] = {"LACUNA_MF_CUDA_GROUPS", "user groups in flight (CUSGD++)"},
    [LAC_KNOB_MF_CUDA_HOT] = {"LACUNA_MF_CUDA_HOT", "ratings that make an item hot (replicated rows)"},
    [LAC_KNOB_MF_CUDA_RUN_MAX] = {"LACUNA_MF_CUDA_RUN_MAX", "most ratings in one run of the work deal"},
    [LAC_KNOB_IMPUTE_CUDA_WARM] = {"LACUNA_IMPUTE_CUDA_WARM", "0: the GPU SVT starts every pass cold (no warm start)"},
    [LAC_KNOB_DIST] = {"LACUNA_DIST", "auto|on|off: join the MPI job (auto: only when started by mpirun; on: always, MPI builds)"},
    [LAC_KNOB_IMPUTE_CUDA_SVT] = {"LACUNA_IMPUTE_CUDA_SVT", "jacobi|gram: force the GPU SVT's path (Jacobi only where it fits)"},
    [LAC_KNOB_CUDA_MEMORY_CAP] = {"LACUNA_CUDA_MEMORY_CAP",
                                  "bytes (k/M/G/T: powers of 1024) of device memory impute, and a deterministic map's copy of host arrays, may use; beyond, they stream"},
    [LAC_KNOB_NBR_CUDA_GSM] = {"LACUNA_NBR_CUDA_GSM", "fp16: the GPU's exact GSM with fp16 GEMMs also where int8 ones are exact"},
    [LAC_KNOB_NBR_CUDA_GSM_USERS] = {"LACUNA_NBR_CUDA_GSM_USERS", "users a GEMM of the GPU's exact GSM sums over at once (0: all)"},
    [LAC_KNOB_NBR_CUDA_CHUNK] = {"LACUNA_NBR_CUDA_CHUNK",
                                 "ratings a chunk of the GPU simLSH's uploads (its sort takes an eighth as many slots a group)"},
    [LAC_KNOB_NBR_CUDA_STAGING] = {"LACUNA_NBR_CUDA_STAGING", "pinned|pageable: the host buffers the GPU simLSH's chunks are gathered into"},
    [LAC_KNOB_IMPUTE_CUDA_SUBSPACE] = {"LACUNA_IMPUTE_CUDA_SUBSPACE",
                                       "off|on|force: the GPU SVT's certified shortcuts (Gram subspace pass, Jacobi pairs below lambda; on: float32; force: also float64)"},
    [LAC_KNOB_IMPUTE_CUDA_FILTER] = {"LACUNA_IMPUTE_CUDA_FILTER", "degree of the subspace pass's Chebyshev filter (default 4)"},
    [LAC_KNOB_IMPUTE_CUDA_SUBSPACE_MAX] = {"LACUNA_IMPUTE_CUDA_SUBSPACE_MAX",
                                           "largest subspace block, percent of min(m, n) (default 75; beyond: the full eigensolve)"},
    [LAC_KNOB_MAP_CUDA_FIXED_SELECT] = {"LACUNA_MAP_CUDA_FIXED_SELECT",
                                        "0: the one-launch deterministic kernel adds warm and other targets' rows on two branches, "
                                        "hot and warm targets' low words at the target"},
    [LAC_KNOB_MF_CUDA_NBR_MASK] = {"LACUNA_MF_CUDA_NBR_MASK",
                                   "0: the GPU neighbourhood model searches each user's ratings every epoch (no per-rating masks)"},
    [LAC_KNOB_IMPUTE_CUDA_PHASES] = {"LACUNA_IMPUTE_CUDA_PHASES",
                                     "1: time each phase of every GPU impute iteration with CUDA events and log the medians (measurement)"},
    [LAC_KNOB_MF_DIST_ROUNDS] = {"LACUNA_MF_DIST_ROUNDS",
                                 "most rounds of user slices in mf's first two epochs over MPI ranks (default and most 512; "
                                 "1: whole blocks a turn, for measuring the slices' cost)"},
    [LAC_KNOB_MAP_CUDA_FIXED_CARRY] = {"LACUNA_MAP_CUDA_FIXED_CARRY",
                                       "0: the one-launch deterministic kernel adds its 64-bit words by 64-bit shared atomics "
                                       "(a compare-and-store loop), not by their 32-bit halves and a carry"},
    [LAC_KNOB_MAP_CUDA_MEAN_MARK] = {"LACUNA_MAP_CUDA_MEAN_MARK",
                                     "0: the weighted MEAN stores a hit byte a row (few targets) or takes the general path "
                                     "(many) instead of telling hit targets by a weight sum that left -0.0"},
    [LAC_KNOB_MF_CUDA_NEG_POOL] = {"LACUNA_MF_CUDA_NEG_POOL",
                                   "rows of a block's pool of negatives for implicit feedback on CUDA (16, 32 or 64; 0: "
                                   "each cell's own draws from all the items)"},
    [LAC_KNOB_MF_CUDA_PHASES] = {"LACUNA_MF_CUDA_PHASES",
                                 "1: time the draws and the epoch kernel of implicit feedback on CUDA apart with CUDA "
                                 "events and log them each epoch (measurement)"},
    [LAC_KNOB_MF_CUDA_NEG_POOL_ADD] = {"LACUNA_MF_CUDA_NEG_POOL_ADD",
                                       "1: with a pool of 16 or 32 negatives, each warp steps its own copy of the "
                                       "pool's rows and their changes are added to memory once a round; the cells' "
                                       "negatives are drawn in the epoch kernel"},
    [LAC_KNOB_MF_CUDA_NEG_POOL_CELLS] = {"LACUNA_MF_CUDA_NEG_POOL_CELLS",
                                         "cells of a round per row of a block's pool of negatives (default 8)"},
    [LAC_KNOB_IMPUTE_CUDA_VLESS] = {"LACUNA_IMPUTE_CUDA_VLESS",
                                    "0: a cold Jacobi SVT pass whose vectors are not kept carries V all the same"},
    [LAC_KNOB_IMPUTE_CUDA_LANES] = {"LACUNA_IMPUTE_CUDA_LANES",
                                    "lanes of a pair in the GPU's Jacobi SVT: 1, 2, 4, 8, 16 or 32 (0: chosen by the slice's shape)"},
    [LAC_KNOB_MF_CUDA_INBATCH] = {"LACUNA_MF_CUDA_INBATCH",
                                  "implicit feedback on CUDA (cross-entropy): a cell's negatives are the positives of the "
                                  "next groups of its warp at the same step (the default on one device with a "
                                  "negatives' exponent of at least 0.5 and at least half the negatives met); the value is the lanes a group (4 or 8; 0: chosen "
                                  "by k), -1 draws the negatives instead"},
    [LAC_KNOB_MF_CUDA_INBATCH_SEEN] = {"LACUNA_MF_CUDA_INBATCH_SEEN",
                                       "0: with in-batch negatives, an item the user has seen is a negative all the "
                                       "same (no test of the user's bits of the most interacted items)"},
    [LAC_KNOB_MF_CUDA_INBATCH_WEIGHT] = {"LACUNA_MF_CUDA_INBATCH_WEIGHT",
                                         "0: in-batch negatives weigh 1 each, in their own law (the items' "
                                         "interactions); by default each weighs the call's law over that one, times the "
                                         "negatives asked over those met"},
    [LAC_KNOB_IMPUTE_CUDA_COLD] = {"LACUNA_IMPUTE_CUDA_COLD",
                                   "smallest min(m, n) whose cold passes on the Gram route start the certified subspace pass "
                                   "from random vectors (default 128; 0: never, the full eigensolve)"},
    [LAC_KNOB_IMPUTE_CUDA_COLD_FILTER] = {"LACUNA_IMPUTE_CUDA_COLD_FILTER",
                                          "degree of the cold subspace pass's Chebyshev filter (default 14)"},
};

/* The environment as the process first saw it: read once. */
static const char *environment[LAC_KNOB_COUNT];
static pthread_once_t environment_once = PTHREAD_ONCE_INIT;

static void read_environment(void)
{
    for (int k = 0; k < LAC_KNOB_COUNT; k++) {
        const char *v = getenv(knob_table[k].name);
        environment[k] = v ? strdup(v) : NULL;
    }
}

int lac_launcher_ranks(void)
{
    static const char *const sizes[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "MPI_LOCALNRANKS"};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        const char *v = getenv(sizes[k]);
        if (v && *v) return atoi(v) > 0 ? atoi(v) : 1;
    }
    return getenv("PMIX_RANK") ? 1 : 0;
}

const char *lac_knob_name(lac_knob knob)
{
    return knob >= 0 && knob < LAC_KNOB_COUNT ? knob_table[knob].name : "unknown";
}

const char *lac_knob_help(lac_knob knob)
{
    return knob >= 0 && knob < LAC_KNOB_COUNT ? knob_table[knob].help : "";
}

const char *lac_knob_string(const struct lac_ctx *ctx, lac_knob knob)
{
    if (knob < 0 || knob >= LAC_KNOB_COUNT) return NULL;
    if (ctx && ctx->knobs[knob]) return ctx->knobs[knob];
    pthread_once(&environment_once, read_environment);
    return environment[knob];
}

int64_t lac_knob_int(const struct lac_ctx *ctx, lac_knob knob, int64_t fallback)
{
    const char *v = lac_knob_string(ctx, knob);
    if (!v || !*v) return fallback;
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    return errno || *end ? fallback : (int64_t)x;
}

int lac_parse_bytes(const char *text, uint64_t *bytes)
{
    if (!text || !isdigit((unsigned char)*text)) return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno) return -1;
    unsigned shift = 0;
    switch (*end) {
    case '\0': break;
    case 'k': case 'K': shift = 10; end++; break;
    case 'm': case 'M': shift = 20; end++; break;
    case 'g': case 'G': shift = 30; end++; break;
    case 't': case 'T': shift = 40; end++; break;
    default: return -1;
    }
    if (*end != '\0' || (shift && v > (~0ULL >> shift))) return -1;
    *bytes = (uint64_t)v << shift;
    return 0;
}

static int knob_by_name(const char *name, size_t len)
{
    if (len > 7 && strncmp(name, "LACUNA_", 7) == 0) name += 7, len -= 7;
    for (int k = 0; k < LAC_KNOB_COUNT; k++) {
        const char *full = knob_table[k].name + 7;
        if (strlen(full) == len && strncmp(full, name, len) == 0) return k;
    }
    return -1;
}

const char *lac_knobs_load(struct lac_ctx *ctx, const char *overrides)
{
    memset(ctx->knobs, 0, sizeof ctx->knobs);
    ctx->knob_text = NULL;
    if (overrides && *overrides) {
        /* One copy, cut in place: each override points into it. */
        char *text = strdup(overrides);
        if (!text) return "out of memory copying the knobs";
        ctx->knob_text = text;
        for (char *item = text; item && *item;) {
            char *next = strchr(item, ',');
            if (next) *next++ = '\0';
            while (*item == ' ') item++;
            if (*item) {
                char *eq = strchr(item, '=');
                if (!eq) return "knobs: every item must be NAME=VALUE";
                int k = knob_by_name(item, (size_t)(eq - item));
                if (k < 0) return "knobs: unknown name (docs/knobs.md lists them)";
                *eq = '\0';
                ctx->knobs[k] = eq + 1;
            }
            item = next;
        }
    }
    for (int k = 0; k < LAC_KNOB_COUNT; k++) {
        const char *v = lac_knob_string(ctx, (lac_knob)k);
        if (v) lac_log(ctx, LAC_LOG_DEBUG, "knob %s = %s (%s)", knob_table[k].name, v,
                       ctx->knobs[k] ? "context" : "environment");
    }
    return NULL;
}

void lac_knobs_free(struct lac_ctx *ctx)
{
    free(ctx->knob_text);
    ctx->knob_text = NULL;
    memset(ctx->knobs, 0, sizeof ctx->knobs);
}
