/* Lacuna public C API: the one header a user includes.
 *
 * Conventions (see docs/architecture.md):
 *  - every call takes a context (lac_ctx_t) and returns a signed lac_status:
 *    0 success, > 0 information, -1..-99 misuse by the caller, <= -100 runtime
 *    failure; lac_last_error(ctx) gives the detail of the last failure;
 *  - sizes and counts are int64_t; outputs come last; handles are destroyed with
 *    lac_X_destroy(&h), which accepts NULL and nulls the pointer;
 *  - bad input leaves caller outputs untouched;
 *  - the library prints nothing: messages go to the context's log callback, or to
 *    stderr when LACUNA_LOG=error|warn|info|debug is set and no callback is given;
 *  - a context is used by one host thread at a time (like a cuBLAS handle); use
 *    one context per thread for concurrent work.
 * No CUDA or C++ types appear here: device memory is passed as plain pointers
 * tagged LAC_MEM_DEVICE.
 */
#ifndef LACUNA_LACUNA_H
#define LACUNA_LACUNA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LACUNA_VERSION_MAJOR 0
#define LACUNA_VERSION_MINOR 1
#define LACUNA_VERSION_PATCH 0

/* ------------------------------------------------------------------------ */
/* Status codes                                                              */
/* ------------------------------------------------------------------------ */
typedef int lac_status;
enum {
    LAC_SUCCESS = 0,
    LAC_INFO_NOT_CONVERGED = 1,   /* finished the iteration cap before the tolerance */

    LAC_ERR_ARGUMENT = -1,        /* NULL pointer, bad enum value, bad parameter */
    LAC_ERR_RANGE = -2,           /* an index outside its valid range */
    LAC_ERR_SHAPE = -3,           /* array shapes or lengths that do not agree */
    LAC_ERR_DTYPE = -4,           /* an element type the call does not take */
    LAC_ERR_FORMAT = -5,          /* a malformed or unsupported input file */
    LAC_ERR_VALUE = -6,           /* NaN/inf or an empty set where not allowed */
    LAC_ERR_UNSUPPORTED = -7,     /* valid request that this call does not offer */

    LAC_ERR_OUT_OF_MEMORY = -100, /* host or device allocation failed */
    LAC_ERR_IO = -101,            /* open/read/write/rename failed */
    LAC_ERR_CUDA = -102,          /* a CUDA, cuBLAS or cuSOLVER call failed */
    LAC_ERR_NOT_COMPILED = -103,  /* the backend asked for is not in this build */
    LAC_ERR_NO_DEVICE = -104,     /* CUDA is built in but no usable device */
    LAC_ERR_INTERNAL = -199       /* a bug in Lacuna: please report it */
};

/* A short constant description of a status ("index out of range"). */
const char *lac_status_string(lac_status status);

/* ------------------------------------------------------------------------ */
/* Version and build                                                         */
/* ------------------------------------------------------------------------ */
/* "0.1.0" */
const char *lac_version(void);
/* One line per fact, "key: value": version, compiler, openmp, blas, cuda, mpi. */
const char *lac_build_info(void);

/* ------------------------------------------------------------------------ */
/* Context                                                                   */
/* ------------------------------------------------------------------------ */
typedef struct lac_ctx *lac_ctx_t;

typedef enum {
    LAC_BACKEND_AUTO = 0,   /* CUDA when built in and a device is there, else CPU */
    LAC_BACKEND_CPU = 1,
    LAC_BACKEND_CUDA = 2
} lac_backend;

typedef enum {
    LAC_LOG_ERROR = 0,
    LAC_LOG_WARN = 1,
    LAC_LOG_INFO = 2,
    LAC_LOG_DEBUG = 3
} lac_log_level;

typedef void (*lac_log_fn)(lac_log_level level, const char *message, void *user);

#define LAC_MAX_DEVICES 16

typedef struct {
    lac_backend backend;
    int num_devices;                  /* 0: the first visible device only */
    int device_ids[LAC_MAX_DEVICES];  /* CUDA ordinals, used when num_devices > 0 */
    int threads;                      /* CPU threads; 0: OpenMP's default */
    lac_log_fn log;                   /* NULL: silent unless LACUNA_LOG is set */
    void *log_user;
    lac_log_level log_level;          /* messages above this level are dropped */
} lac_ctx_params;

lac_ctx_params lac_ctx_params_default(void);
/* NULL when the parameters are valid, else a constant message. */
const char *lac_ctx_params_check(const lac_ctx_params *params);

/* On failure *ctx is NULL and lac_last_error(NULL) holds the detail. */
lac_status lac_ctx_create(const lac_ctx_params *params, lac_ctx_t *ctx);
void lac_ctx_destroy(lac_ctx_t *ctx);

/* The backend this context resolved to (never AUTO). */
lac_backend lac_ctx_backend(lac_ctx_t ctx);
/* CPU threads this context uses. */
int lac_ctx_threads(lac_ctx_t ctx);
/* Detail of the last failure on this context ("" when none); with a NULL ctx,
 * the calling thread's last failure outside any context (e.g. in create). */
const char *lac_last_error(lac_ctx_t ctx);
/* Waits for the context's device work to finish (no-op on the CPU). */
lac_status lac_ctx_synchronize(lac_ctx_t ctx);

/* Devices this build can use: 0 without CUDA or without a device. */
int lac_cuda_device_count(void);
/* "NVIDIA H100 80GB HBM3, sm_90, 132 SMs, 79.1 GiB" into buf. */
lac_status lac_cuda_device_describe(int device, char *buf, size_t len);

/* ------------------------------------------------------------------------ */
/* Arrays: caller memory described by a plain struct                         */
/* ------------------------------------------------------------------------ */
typedef enum {
    LAC_FLOAT32 = 0,
    LAC_FLOAT64 = 1,
    LAC_INT32 = 2,
    LAC_INT64 = 3,
    LAC_BOOL = 4          /* one byte, 0 or 1 */
} lac_dtype;

typedef enum {
    LAC_MEM_HOST = 0,     /* ordinary (or pinned) host memory */
    LAC_MEM_DEVICE = 1    /* memory on the context's first CUDA device */
} lac_memory;

#define LAC_MAX_DIMS 4

/* A dense C-order array. Vectors have ndim 1. The library never frees data
 * unless the array came from a lac_*_load call (then use lac_array_release). */
typedef struct {
    void *data;
    lac_dtype dtype;
    int ndim;
    int64_t shape[LAC_MAX_DIMS];
    lac_memory memory;
    /* Ownership for arrays the library allocated; zero for caller arrays. */
    void *owned_;
    size_t owned_bytes_;
    int owned_kind_;
} lac_array;

size_t lac_dtype_size(lac_dtype dtype);
const char *lac_dtype_name(lac_dtype dtype);   /* "float32", ... */
int64_t lac_array_count(const lac_array *a);   /* product of the shape */
/* Views over caller memory, for convenience. */
lac_array lac_array_vector(void *data, lac_dtype dtype, int64_t length);
lac_array lac_array_matrix(void *data, lac_dtype dtype, int64_t rows, int64_t cols);
/* Allocates a zeroed host array (release with lac_array_release). */
lac_status lac_array_alloc(lac_ctx_t ctx, lac_dtype dtype, int ndim, const int64_t *shape,
                           lac_array *out);
/* Frees what the library allocated or mapped; leaves caller arrays alone. */
void lac_array_release(lac_array *a);

/* Device memory on the context's first device. */
lac_status lac_device_alloc(lac_ctx_t ctx, size_t bytes, void **ptr);
lac_status lac_device_free(lac_ctx_t ctx, void *ptr);
/* Page-locked host memory: faster transfers, needed for overlapped streaming. */
lac_status lac_host_alloc_pinned(lac_ctx_t ctx, size_t bytes, void **ptr);
lac_status lac_host_free_pinned(lac_ctx_t ctx, void *ptr);
/* Copies bytes between any two memories; synchronous. */
lac_status lac_memcpy(lac_ctx_t ctx, void *dst, lac_memory dst_memory, const void *src,
                      lac_memory src_memory, size_t bytes);

/* ------------------------------------------------------------------------ */
/* Files                                                                     */
/* ------------------------------------------------------------------------ */
/* NumPy .npy: float32/float64/int32/int64/bool, little-endian, C order,
 * format versions 1.0, 2.0 and 3.0. Anything else is LAC_ERR_FORMAT with the
 * reason. LAC_NPY_MMAP maps the file read-only instead of reading it (for data
 * larger than memory; the array must then not be written). */
#define LAC_NPY_MMAP 1u
lac_status lac_npy_load(lac_ctx_t ctx, const char *path, unsigned flags, lac_array *out);
/* Writes atomically (temporary file + rename): a failure leaves no partial file
 * and an existing file at path untouched. Host arrays only. */
lac_status lac_npy_save(lac_ctx_t ctx, const char *path, const lac_array *a);

/* Plain text columns: numbers separated by whitespace or commas, one row a line;
 * '#' starts a comment; every row must have the same count. One column gives a
 * vector, several a (rows, cols) matrix. Integers must be exact in int64. */
lac_status lac_text_load(lac_ctx_t ctx, const char *path, lac_dtype dtype, lac_array *out);
/* One row a line; atomic as lac_npy_save. */
lac_status lac_text_save(lac_ctx_t ctx, const char *path, const lac_array *a);

/* ------------------------------------------------------------------------ */
/* map: T[R[i]] op= w[i] * S[i]                                              */
/* ------------------------------------------------------------------------ */
/* Source S: m values (vector) or m x b (b columns sharing the bridge).
 * Bridge R: m target indices in [0, n), int32 or int64.
 * Weights w: optional, m values of S's dtype.
 * Target T: n values (vector) or n x b, same dtype as S (float32 or float64).
 *
 * ops, with x_i = w[i] * S[i] (or S[i] without weights):
 *   SUM   T[j] = sum of x_i over i with R[i] = j
 *   MEAN  T[j] = sum x_i / sum w_i (weighted mean; plain mean without weights)
 *   MIN   T[j] = min x_i          MAX  T[j] = max x_i
 *   COUNT T[j] = sum w_i (the number of i with R[i] = j without weights); S is
 *         read only for its shape and NaN policy.
 * A target no source maps to gets params.empty_value (default 0) unless
 * accumulate is set; accumulate folds into T's current values (SUM/COUNT add,
 * MIN/MAX compare); MEAN cannot accumulate (it would need the old counts).
 *
 * NaN in S (or w): LAC_NAN_PROPAGATE (default) follows IEEE arithmetic: a NaN
 * makes its target NaN for every op but COUNT; LAC_NAN_SKIP treats such an
 * element as absent (it is not counted either); LAC_NAN_ERROR rejects the call,
 * naming the first NaN's position, with T untouched.
 *
 * deterministic: bit-identical T from run to run and across thread counts and
 * devices of the same kind (fixed-order sums in float64 per target, rounded once);
 * costs a sort of the bridge (amortised by a plan) and a segmented pass.
 * MIN/MAX/COUNT are deterministic anyway.
 *
 * Errors (T untouched): R[i] outside [0, n) -> LAC_ERR_RANGE naming the first i;
 * lengths or dtypes that disagree -> LAC_ERR_SHAPE / LAC_ERR_DTYPE.
 * Memory: all arrays on the host, or all on the device (CUDA backend). Host
 * arrays on the CUDA backend stream through the device in chunks (out of core),
 * so S and R may be larger than the device's memory. */
typedef enum {
    LAC_MAP_SUM = 0,
    LAC_MAP_MEAN = 1,
    LAC_MAP_MIN = 2,
    LAC_MAP_MAX = 3,
    LAC_MAP_COUNT = 4
} lac_map_op;

typedef enum {
    LAC_NAN_PROPAGATE = 0,
    LAC_NAN_SKIP = 1,
    LAC_NAN_ERROR = 2
} lac_nan_policy;

typedef struct {
    lac_map_op op;
    int accumulate;          /* fold into T instead of overwriting it */
    int deterministic;       /* bit-identical results (see above) */
    lac_nan_policy nan_policy;
    double empty_value;      /* value of targets nothing maps to (overwrite mode) */
    int64_t chunk_elements;  /* out-of-core chunk, elements; 0: chosen by Lacuna */
} lac_map_params;

lac_map_params lac_map_params_default(void);
const char *lac_map_params_check(const lac_map_params *params);
const char *lac_map_op_name(lac_map_op op);            /* "sum", ... */
/* Parses "sum|mean|min|max|count"; LAC_ERR_ARGUMENT for anything else. */
lac_status lac_map_op_parse(const char *name, lac_map_op *op);

/* weights may be NULL. */
lac_status lac_map(lac_ctx_t ctx, const lac_map_params *params, const lac_array *source,
                   const lac_array *bridge, const lac_array *weights, lac_array *target);

/* A plan for one bridge used many times: built once (the bridge is checked and
 * sorted into segments), then every execute is a contention-free, deterministic
 * segmented reduction. The plan keeps its own copy of what it needs: the
 * bridge array may be freed after create. */
typedef struct lac_map_plan *lac_map_plan_t;

lac_status lac_map_plan_create(lac_ctx_t ctx, const lac_array *bridge, int64_t num_targets,
                               lac_map_plan_t *plan);
void lac_map_plan_destroy(lac_map_plan_t *plan);
int64_t lac_map_plan_num_sources(lac_map_plan_t plan);
int64_t lac_map_plan_num_targets(lac_map_plan_t plan);
/* As lac_map with the plan's bridge; params->deterministic is implied. */
lac_status lac_map_plan_execute(lac_ctx_t ctx, lac_map_plan_t plan, const lac_map_params *params,
                                const lac_array *source, const lac_array *weights,
                                lac_array *target);

/* ------------------------------------------------------------------------ */
/* impute: convolutional imputation of graph-tensors                         */
/* ------------------------------------------------------------------------ */
/* (declared below by the impute section) */

/* ------------------------------------------------------------------------ */
/* mf: matrix factorisation for sparse ratings                                */
/* ------------------------------------------------------------------------ */
/* (declared below by the mf section) */

#ifdef __cplusplus
}
#endif
#endif /* LACUNA_LACUNA_H */
