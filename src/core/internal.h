/* Internal core: the context's layout, error reporting and check macros shared
 * by every part of the library. Never included by users. */
#ifndef LACUNA_CORE_INTERNAL_H
#define LACUNA_CORE_INTERNAL_H

#include "lacuna/lacuna.h"
#include "core/knobs.h"

#include <stdarg.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LAC_ERROR_MAX 1024

struct lac_cuda_state;   /* owned by src/backend/cuda */
struct lac_output_set;   /* owned by src/io (output_set.c) */
struct lac_comm;         /* owned by src/dist (MPI builds) */

struct lac_ctx {
    lac_ctx_params params;
    lac_backend backend;          /* resolved: CPU or CUDA */
    int threads;                  /* CPU threads for OpenMP regions */
    lac_log_fn log;               /* callback, or the stderr printer from LACUNA_LOG */
    void *log_user;
    lac_log_level log_level;
    char last_error[LAC_ERROR_MAX];
    const char *knobs[LAC_KNOB_COUNT];   /* per-context overrides (core/knobs.h), or NULL */
    char *knob_text;              /* the overrides' storage */
    struct lac_cuda_state *cuda;  /* the device backend's state (streams, handles, caches); NULL on CPU */
    struct lac_output_set *outputs;       /* the open output set (lac_outputs_begin), or NULL */
    void (*outputs_abort)(lac_ctx_t ctx); /* set by src/io with it: drops it at lac_ctx_destroy */
    struct lac_comm *comm;        /* the ranks this context works with (src/dist), or NULL: one process */
    int rank, ranks;              /* this process's rank and the number of ranks (0 and 1 without MPI) */
    int host_rank;                /* its rank among the ranks on this host (the GPU it takes by default) */
};

/* Records "detail" as the last error of ctx (or of the thread when ctx is NULL),
 * logs it at LAC_LOG_DEBUG and returns status, so that callers can write
 * `return lac_error(ctx, LAC_ERR_RANGE, "bridge[%lld] = ...", ...)`. */
lac_status lac_error(lac_ctx_t ctx, lac_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
void lac_clear_error(lac_ctx_t ctx);

void lac_log(lac_ctx_t ctx, lac_log_level level, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Returns on failure; the callee has already recorded the detail. */
#define LAC_CHECK(expr)                 \
    do {                                \
        lac_status lac_s_ = (expr);     \
        if (lac_s_ < 0) return lac_s_;  \
    } while (0)

/* One cleanup label per function: st = expr; on failure jump to label. */
#define LAC_CHECK_GOTO(expr, st, label) \
    do {                                \
        (st) = (expr);                  \
        if ((st) < 0) goto label;       \
    } while (0)

/* Argument checks that name the argument (NCCL's argcheck). */
#define LAC_ARG_NOT_NULL(ctx, p)                                                    \
    do {                                                                           \
        if ((p) == NULL) return lac_error((ctx), LAC_ERR_ARGUMENT, "%s is NULL", #p); \
    } while (0)

/* Overflow-checked size arithmetic for allocations. */
static inline bool lac_mul_overflows(size_t a, size_t b, size_t *out)
{
    if (a != 0 && b > (size_t)-1 / a) return true;
    *out = a * b;
    return false;
}

/* Growable params structs (lacuna.h, "struct_size"). lac_params_fill is the
 * body of every lac_X_params_init: the defaults, cut to the caller's size.
 * lac_params_adopt copies a caller's struct over the defaults into a full-size
 * struct (out), returning a constant message when struct_size is unusable;
 * lac_params_read does the same and records the message as LAC_ERR_ARGUMENT. */
void lac_params_fill(void *params, size_t struct_size, const void *defaults, size_t full_size);
const char *lac_params_adopt(const void *given, const void *defaults, size_t full_size, void *out);
lac_status lac_params_read(lac_ctx_t ctx, const char *what, const void *given, const void *defaults, size_t full_size,
                           void *out);

/* The body of lac_T_init for params type T (e.g. LAC_PARAMS_INIT(lac_map_params,
 * map_defaults())): the defaults, cut to the caller's struct_size. */
#define LAC_PARAMS_INIT(T, defaults)                                 \
    void T##_init(T *params, size_t struct_size)                     \
    {                                                                \
        T lac_d_ = (defaults);                                       \
        lac_params_fill(params, struct_size, &lac_d_, sizeof lac_d_); \
    }

/* The start of every lac_T_check(const T *given): `p` then points at a
 * full-size copy of the caller's struct, or the check returns why it cannot. */
#define LAC_PARAMS_CHECK_BEGIN(T, given, defaults)                                   \
    T lac_d_ = (defaults), lac_adopted_;                                             \
    const char *lac_why_ = lac_params_adopt((given), &lac_d_, sizeof lac_d_, &lac_adopted_); \
    if (lac_why_) return lac_why_;                                                   \
    const T *p = &lac_adopted_

/* In a public function taking `const T *name`: points name at a full-size
 * copy of the caller's struct (defaults where the caller's is shorter), or
 * returns LAC_ERR_ARGUMENT when its struct_size is unusable. */
#define LAC_ADOPT_PARAMS(ctx, what, T, name, defaults)                                                  \
    T name##_adopted_;                                                                                   \
    do {                                                                                                 \
        T lac_d_ = (defaults);                                                                           \
        LAC_CHECK(lac_params_read((ctx), (what), (name), &lac_d_, sizeof lac_d_, &name##_adopted_));     \
        name = &name##_adopted_;                                                                         \
    } while (0)

/* This machine's memory in bytes (0 when unknown). Sizes that input files
 * ask for (a header's vertex count) are checked against it before anything
 * is allocated: a file that asks for more is an input error (LAC_ERR_UNSUPPORTED),
 * not an allocation that fails. */
double lac_host_memory(void);

/* malloc that records LAC_ERR_OUT_OF_MEMORY with the size on failure. */
void *lac_malloc(lac_ctx_t ctx, size_t bytes);
void *lac_calloc(lac_ctx_t ctx, size_t count, size_t size);

/* Hand-over of storage the library made into a lac_array, which then owns it
 * (lac_array_release gives it back). On failure the storage is given back at
 * once and LAC_ERR_OUT_OF_MEMORY returned. */
lac_status lac_array_own_malloc(lac_ctx_t ctx, lac_array *a, void *block, size_t bytes);
lac_status lac_array_own_mmap(lac_ctx_t ctx, lac_array *a, void *mapping, size_t bytes);

/* Element k of a float32 or float64 array, as a double. */
static inline double lac_load_real(const void *p, lac_dtype dtype, int64_t k)
{
    return dtype == LAC_FLOAT32 ? (double)((const float *)p)[k] : ((const double *)p)[k];
}

/* Start of part `part` of `parts` near-equal parts of [0, count). */
static inline int64_t lac_range_start(int64_t count, int part, int parts)
{
    return (int64_t)((double)count * part / parts);
}

/* Number of CPU threads a context uses, 1 for a NULL context. */
static inline int lac_threads(lac_ctx_t ctx) { return ctx ? ctx->threads : 1; }

#ifdef __cplusplus
}
#endif
#endif
