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

/* Every function of this header carries LAC_API: the shared library exports
 * these and nothing else (it is built with hidden visibility). */
#if defined(_WIN32)
#define LAC_API
#else
#define LAC_API __attribute__((visibility("default")))
#endif

/* Parameter structs begin with `struct_size`, which lac_X_params_default()
 * sets to the caller's sizeof (NCCL's ncclConfig_t pattern): a library newer
 * than the caller fills the fields the caller's struct lacks with their
 * defaults, so structs can grow without breaking compiled callers. Start every
 * params struct from its lac_X_params_default(); one whose struct_size is 0 is
 * LAC_ERR_ARGUMENT. The defaults are filled in by lac_X_params_init(params,
 * sizeof *params), which the inline lac_X_params_default() calls. */

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
    LAC_ERR_MPI = -105,           /* an MPI call failed */
    LAC_ERR_INTERNAL = -199       /* a bug in Lacuna: please report it */
};

/* A short constant description of a status ("index out of range"). */
LAC_API const char *lac_status_string(lac_status status);

/* ------------------------------------------------------------------------ */
/* Version and build                                                         */
/* ------------------------------------------------------------------------ */
/* "0.1.0" */
LAC_API const char *lac_version(void);
/* One line per fact, "key: value": version, compiler, openmp, blas, cuda, mpi. */
LAC_API const char *lac_build_info(void);

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
    size_t struct_size;               /* sizeof: set by lac_ctx_params_default() */
    lac_backend backend;
    int num_devices;                  /* CUDA devices of the context: 0 (device 0; under
                                         mpirun, the host's k-th rank takes device
                                         k mod the host's devices), 1,
                                         or several: impute splits its SVT across them
                                         in proportion to their speed, map its calls
                                         on host arrays by rows, mf its plain model's
                                         blocks */
    int device_ids[LAC_MAX_DEVICES];  /* CUDA ordinals, device_ids[0] first; a device
                                         may repeat (two shares of one device) */
    int threads;                      /* CPU threads; 0: OpenMP's default */
    lac_log_fn log;                   /* NULL: silent unless LACUNA_LOG is set */
    void *log_user;
    lac_log_level log_level;          /* messages above this level are dropped */
    const char *knobs;                /* NULL, or "NAME=VALUE,..." overriding the LACUNA_*
                                         environment for this context (tuning knobs,
                                         docs/knobs.md; NAME with or without "LACUNA_");
                                         copied at create */
} lac_ctx_params;

LAC_API void lac_ctx_params_init(lac_ctx_params *params, size_t struct_size);
static inline lac_ctx_params lac_ctx_params_default(void)
{
    lac_ctx_params p;
    lac_ctx_params_init(&p, sizeof p);
    return p;
}
/* NULL when the parameters are valid, else a constant message. */
LAC_API const char *lac_ctx_params_check(const lac_ctx_params *params);

/* On failure *ctx is NULL and lac_last_error(NULL) holds the detail. */
LAC_API lac_status lac_ctx_create(const lac_ctx_params *params, lac_ctx_t *ctx);
LAC_API void lac_ctx_destroy(lac_ctx_t *ctx);

/* The backend this context resolved to (never AUTO). */
LAC_API lac_backend lac_ctx_backend(lac_ctx_t ctx);
/* CPU threads this context uses. */
LAC_API int lac_ctx_threads(lac_ctx_t ctx);
/* This process's rank among the context's MPI ranks, and how many there are
 * (0 and 1 for one process). In an MPI build a context joins the job when the
 * process was started by mpirun (knob LACUNA_DIST); map then splits the rows
 * of S and R by ranges across the ranks and every rank gets the whole T, and
 * mf trains rating blocks on every rank and gives every rank the whole model
 * (docs/scaling.md). */
LAC_API int lac_ctx_rank(lac_ctx_t ctx);
LAC_API int lac_ctx_ranks(lac_ctx_t ctx);
/* Detail of the last failure on this context ("" when none); with a NULL ctx,
 * the calling thread's last failure outside any context (e.g. in create). */
LAC_API const char *lac_last_error(lac_ctx_t ctx);
/* Waits for the context's device work to finish (no-op on the CPU). */
LAC_API lac_status lac_ctx_synchronize(lac_ctx_t ctx);

/* Devices this build can use: 0 without CUDA or without a device. */
LAC_API int lac_cuda_device_count(void);
/* "NVIDIA H100 80GB HBM3, sm_90, 132 SMs, 79.1 GiB" into buf. */
LAC_API lac_status lac_cuda_device_describe(int device, char *buf, size_t len);

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
    /* The library's record of memory it allocated or mapped (lac_*_load,
     * lac_array_alloc); NULL for caller arrays. Opaque: copy an array with
     * lac_array_view to get a non-owning descriptor of the same data. */
    struct lac_array_owner *owner;
} lac_array;

LAC_API size_t lac_dtype_size(lac_dtype dtype);
LAC_API const char *lac_dtype_name(lac_dtype dtype);   /* "float32", ... */
LAC_API int64_t lac_array_count(const lac_array *a);   /* product of the shape (0 with a zero size; INT64_MAX past it) */
/* Views over caller memory, for convenience. */
LAC_API lac_array lac_array_vector(void *data, lac_dtype dtype, int64_t length);
LAC_API lac_array lac_array_matrix(void *data, lac_dtype dtype, int64_t rows, int64_t cols);
/* Allocates a zeroed host array (release with lac_array_release). */
LAC_API lac_status lac_array_alloc(lac_ctx_t ctx, lac_dtype dtype, int ndim, const int64_t *shape,
                           lac_array *out);
/* The same data, shape and memory without ownership: releasing the view
 * leaves the data alone. */
LAC_API lac_array lac_array_view(const lac_array *a);
/* Frees what the library allocated or mapped; leaves caller arrays alone. */
LAC_API void lac_array_release(lac_array *a);

/* Device memory on the context's first device. */
LAC_API lac_status lac_device_alloc(lac_ctx_t ctx, size_t bytes, void **ptr);
LAC_API lac_status lac_device_free(lac_ctx_t ctx, void *ptr);
/* Page-locked host memory: faster transfers, needed for overlapped streaming. */
LAC_API lac_status lac_host_alloc_pinned(lac_ctx_t ctx, size_t bytes, void **ptr);
LAC_API lac_status lac_host_free_pinned(lac_ctx_t ctx, void *ptr);
/* Copies bytes between any two memories; synchronous. */
LAC_API lac_status lac_memcpy(lac_ctx_t ctx, void *dst, lac_memory dst_memory, const void *src,
                      lac_memory src_memory, size_t bytes);

/* ------------------------------------------------------------------------ */
/* Files                                                                     */
/* ------------------------------------------------------------------------ */
/* Every file the library writes (lac_npy_save, lac_text_save, lac_bytes_save,
 * lac_ratings_write, lac_mf_model_save, lac_gft_save) is written atomically:
 * into an unnamed temporary file in the target's folder (O_TMPFILE; a named
 * "PATH.tmp.XXXXXX" where the file system has none, removed on failure and on
 * SIGHUP/SIGINT/SIGQUIT/SIGPIPE/SIGTERM/SIGXFSZ when those signals have their
 * default action), flushed, synced and renamed over the target. A failure
 * leaves an existing file untouched, same bytes and same inode. A symbolic
 * link is followed: the file it names is replaced and the link stays. "-"
 * writes to standard output, and a path that names a device, FIFO or socket
 * is written in place (never replaced by a regular file); neither can be
 * taken back after a failure. A folder is LAC_ERR_IO.
 *
 * Output sets: between lac_outputs_begin and lac_outputs_commit, the files
 * written through ctx are written and synced as they come but renamed over
 * their targets only in lac_outputs_commit, all together, so that a run
 * whose later step fails leaves every file that existed before it exactly as
 * it was: lac_outputs_abort (and lac_ctx_destroy) removes them. Until then
 * the targets still hold their old contents (an input read during the run is
 * the old file). lac_outputs_commit names every file first and renames them
 * after, so a full disk or a missing right fails before anything is
 * replaced. Direct writes (standard output, devices, FIFOs) happen at once.
 * lac_outputs_commit without an open set does nothing. On a context of
 * several MPI ranks only rank 0's commit names the files; the other ranks'
 * commits drop theirs (every rank computes the same outputs). */
LAC_API lac_status lac_outputs_begin(lac_ctx_t ctx);
LAC_API lac_status lac_outputs_commit(lac_ctx_t ctx);
LAC_API void lac_outputs_abort(lac_ctx_t ctx);

/* NumPy .npy: float32/float64/int32/int64/bool, little-endian, C order,
 * format versions 1.0, 2.0 and 3.0. Anything else is LAC_ERR_FORMAT with the
 * reason. LAC_NPY_MMAP maps the file read-only instead of reading it (for data
 * larger than memory; the array must then not be written). A folder given as
 * a file is LAC_ERR_ARGUMENT, for every reader. */
#define LAC_NPY_MMAP 1u
LAC_API lac_status lac_npy_load(lac_ctx_t ctx, const char *path, unsigned flags, lac_array *out);
/* Writes atomically (see "Files" above). Host arrays only. */
LAC_API lac_status lac_npy_save(lac_ctx_t ctx, const char *path, const lac_array *a);

/* Plain text columns: numbers separated by whitespace or commas, one row a line;
 * '#' starts a comment; every row must have the same count. One column gives a
 * vector, several a (rows, cols) matrix. Integers must be exact in int64. */
LAC_API lac_status lac_text_load(lac_ctx_t ctx, const char *path, lac_dtype dtype, lac_array *out);
/* One row a line; atomic as lac_npy_save. */
LAC_API lac_status lac_text_save(lac_ctx_t ctx, const char *path, const lac_array *a);
/* size bytes from data, as they are (an SVG picture, an HTML page); atomic
 * as lac_npy_save and staged in an open output set like every other output. */
LAC_API lac_status lac_bytes_save(lac_ctx_t ctx, const char *path, const void *data, size_t size);

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
 * makes its target NaN for every op but COUNT (which ignores S; a NaN weight
 * makes a weighted count NaN); LAC_NAN_SKIP treats such an element as absent
 * (it is not counted either; a NaN S[i, c] drops column c of row i, a NaN w[i]
 * the whole row); LAC_NAN_ERROR rejects the call, naming the first NaN's
 * position (row order; w[i] before S[i, :]), with T untouched.
 *
 * deterministic: bit-identical T from run to run and across thread counts and
 * devices of the same kind (fixed-order sums, rounded once); on the CUDA
 * backend it costs a sort of the bridge (amortised by a plan) and a segmented
 * pass; on the CPU backend it folds a fixed number of row blocks and merges
 * them in block order (about the cost of a plain call; the same accumulator
 * precision, see docs/map.md). MIN/MAX and unweighted COUNT do not depend on
 * the order anyway.
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
    size_t struct_size;               /* sizeof: set by lac_map_params_default() */
    lac_map_op op;
    int accumulate;          /* fold into T instead of overwriting it */
    int deterministic;       /* bit-identical results (see above) */
    lac_nan_policy nan_policy;
    double empty_value;      /* value of targets nothing maps to (overwrite mode) */
    int64_t chunk_elements;  /* out-of-core chunk, elements; 0: chosen by Lacuna */
} lac_map_params;

LAC_API void lac_map_params_init(lac_map_params *params, size_t struct_size);
static inline lac_map_params lac_map_params_default(void)
{
    lac_map_params p;
    lac_map_params_init(&p, sizeof p);
    return p;
}
LAC_API const char *lac_map_params_check(const lac_map_params *params);
LAC_API const char *lac_map_op_name(lac_map_op op);            /* "sum", ... */
/* Parses "sum|mean|min|max|count"; LAC_ERR_ARGUMENT for anything else. */
LAC_API lac_status lac_map_op_parse(const char *name, lac_map_op *op);

/* weights may be NULL. */
LAC_API lac_status lac_map(lac_ctx_t ctx, const lac_map_params *params, const lac_array *source,
                   const lac_array *bridge, const lac_array *weights, lac_array *target);

/* A plan for one bridge used many times: built once (the bridge is checked
 * once), then every execute is a contention-free, deterministic map. The plan
 * keeps its own copy of what it needs: the bridge array may be freed after
 * create. */
typedef struct lac_map_plan *lac_map_plan_t;

LAC_API lac_status lac_map_plan_create(lac_ctx_t ctx, const lac_array *bridge, int64_t num_targets,
                               lac_map_plan_t *plan);
LAC_API void lac_map_plan_destroy(lac_map_plan_t *plan);
LAC_API int64_t lac_map_plan_num_sources(lac_map_plan_t plan);
LAC_API int64_t lac_map_plan_num_targets(lac_map_plan_t plan);
/* As lac_map with the plan's bridge; params->deterministic is implied unless
 * the plan's determinism is switched off (below). */
LAC_API lac_status lac_map_plan_execute(lac_ctx_t ctx, lac_map_plan_t plan, const lac_map_params *params,
                                const lac_array *source, const lac_array *weights,
                                lac_array *target);
/* Determinism as an option of the plan (on by default): switched off, each
 * execute without params->deterministic takes the backend's fastest path over
 * the checked bridge and may differ from run to run in the last bits (on the
 * CUDA backend the one-shot kernels over the plan's int32 copy of the bridge:
 * never slower than lac_map). LAC_ERR_ARGUMENT for a NULL plan. */
LAC_API lac_status lac_map_plan_set_deterministic(lac_map_plan_t plan, int deterministic);

/* ------------------------------------------------------------------------ */
/* impute: convolutional imputation of graph-tensors                         */
/* ------------------------------------------------------------------------ */

/* graphs ----------------------------------------------------------------- */
/* Undirected weighted graphs, read from SNAP edge lists or Matrix Market files
 * (docs/impute.md, "Graph files"). Rules shared by every reader:
 *  - the pair {u, v} has the largest weight among the lines joining u and v in
 *    either direction (an unweighted line weighs 1); repeated lines count once;
 *  - directed input (a SNAP "Directed" header, a non-symmetric Matrix Market
 *    "general" matrix, or an edge list listing some pairs both ways and others
 *    one way, or with two different weights) is symmetrised that way, with a
 *    warning; an edge list listing every pair once is the SNAP convention for
 *    undirected graphs and needs no warning;
 *  - self-loops and zero weights are dropped and counted; negative, NaN or
 *    infinite weights are LAC_ERR_FORMAT naming the line;
 *  - edge-list ids: without num_vertices, ids that are exactly 0..n-1 are the
 *    vertex numbers, any other set of ids is remapped in ascending order
 *    (vertex k is the k-th smallest id; lac_graph_vertex_of_id maps back);
 *    with num_vertices, ids must lie in [0, num_vertices) and vertices no
 *    line names are isolated;
 *  - isolated vertices (degree 0) and disconnected graphs are allowed. */
typedef struct lac_graph *lac_graph_t;

typedef enum {
    LAC_GRAPH_AUTO = 0,            /* Matrix Market when the file starts with %%MatrixMarket */
    LAC_GRAPH_EDGE_LIST = 1,       /* "u v" or "u v w" lines, '#' or '%' comments */
    LAC_GRAPH_MATRIX_MARKET = 2    /* coordinate pattern|real|integer, general|symmetric */
} lac_graph_format;

typedef struct {
    size_t struct_size;               /* sizeof: set by lac_graph_params_default() */
    lac_graph_format format;
    int64_t num_vertices;          /* edge lists: 0 = from the ids (see above) */
} lac_graph_params;

typedef struct {
    int64_t num_vertices;
    int64_t num_edges;             /* undirected pairs {u, v}, u != v */
    int64_t lines;                 /* edge lines (entries) read */
    int64_t self_loops;            /* lines with u == v, dropped */
    int64_t zero_weight;           /* lines with weight 0, dropped */
    int64_t repeated;              /* lines naming an ordered pair already seen */
    int64_t isolated_vertices;     /* degree 0: D^-1/2 is taken as 0 there */
    int64_t components;            /* connected components, isolated vertices included */
    int directed;                  /* the input was directed and has been symmetrised */
    int remapped;                  /* the ids were remapped to 0..n-1 */
    int weighted;                  /* the file had weights */
    uint64_t fingerprint;          /* hash of n, the pairs and their weights */
} lac_graph_info;

LAC_API void lac_graph_params_init(lac_graph_params *params, size_t struct_size);
static inline lac_graph_params lac_graph_params_default(void)
{
    lac_graph_params p;
    lac_graph_params_init(&p, sizeof p);
    return p;
}
/* params may be NULL (defaults). */
LAC_API lac_status lac_graph_load(lac_ctx_t ctx, const char *path, const lac_graph_params *params, lac_graph_t *out);
/* From caller arrays of vertex numbers in [0, num_vertices) (int32 or int64
 * vectors of one length) and optional float64 weights, by the same rules. */
LAC_API lac_status lac_graph_from_edges(lac_ctx_t ctx, int64_t num_vertices, const lac_array *sources,
                                const lac_array *targets, const lac_array *weights, lac_graph_t *out);
LAC_API void lac_graph_destroy(lac_graph_t *graph);
LAC_API lac_graph_info lac_graph_get_info(lac_graph_t graph);   /* zeroed for NULL */
LAC_API int64_t lac_graph_num_vertices(lac_graph_t graph);
/* The file's id of vertex v, and the vertex of a file id (LAC_ERR_RANGE when
 * no vertex has it). */
LAC_API lac_status lac_graph_id_of_vertex(lac_ctx_t ctx, lac_graph_t graph, int64_t vertex, int64_t *id);
LAC_API lac_status lac_graph_vertex_of_id(lac_ctx_t ctx, lac_graph_t graph, int64_t id, int64_t *vertex);
/* The normalised Laplacian L = I - D^-1/2 A D^-1/2 (D_ii = sum_j A_ij, and
 * D^-1/2 = 0 at isolated vertices, so L_ii = 1 there) into a caller N x N
 * float32 or float64 array. */
LAC_API lac_status lac_graph_laplacian(lac_ctx_t ctx, lac_graph_t graph, lac_array *laplacian);
/* Eigenvalues of L only, ascending, into a caller float32 or float64 vector
 * of N (syevd without vectors: a fraction of lac_gft_create's cost). */
LAC_API lac_status lac_graph_laplacian_eigenvalues(lac_ctx_t ctx, lac_graph_t graph, lac_array *eigenvalues);
/* A vertex set from a text file of ids (the file's ids, as in the graph; any
 * whitespace or commas, '#' comments): mask[v] = 1 for each vertex named.
 * mask: caller bool vector of N. Unknown ids are LAC_ERR_RANGE and malformed
 * ones LAC_ERR_FORMAT, naming the line; a file naming no vertex is
 * LAC_ERR_VALUE. The mask is untouched on failure. */
LAC_API lac_status lac_graph_load_vertex_set(lac_ctx_t ctx, lac_graph_t graph, const char *path, lac_array *mask);

/* graph Fourier transform ------------------------------------------------- */
/* The GFT basis of a graph: L = U diag(w) U^T with U orthogonal (LAPACK
 * syevd), eigenvalues w ascending. The GFT of a graph-tensor G (N slices
 * G(v)) is Ĝ(k) = sum_v U[v, k] G(v), i.e. Ĝ = U^T G; the inverse is G = U Ĝ.
 * precision LAC_FLOAT32 or LAC_FLOAT64 (the eigendecomposition runs in it).
 * U is canonical inside each repeated (numerically degenerate) eigenvalue's
 * eigenspace: a function of the eigenspace alone, whatever rotation or signs
 * the eigensolver returned, so every backend gives the same basis
 * (docs/impute.md, "The canonical basis"). */
typedef struct lac_gft *lac_gft_t;

LAC_API lac_status lac_gft_create(lac_ctx_t ctx, lac_graph_t graph, lac_dtype precision, lac_gft_t *out);
/* A cache file: U and w with the graph's fingerprint, N and the precision,
 * written atomically (at once, even inside an output set). A path that holds
 * something other than a basis cache is LAC_ERR_ARGUMENT, never replaced. */
LAC_API lac_status lac_gft_save(lac_ctx_t ctx, lac_gft_t gft, const char *path);
/* Loads a cache file and checks it against the graph and the precision (and
 * its own checksum): any mismatch is LAC_ERR_VALUE saying which, a damaged
 * file or one of a later format LAC_ERR_FORMAT. A file of an earlier format
 * (whose basis was the solver's, or canonical by an earlier rule) is made
 * canonical on load, and rewritten by lac_gft_load_or_create. */
LAC_API lac_status lac_gft_load(lac_ctx_t ctx, const char *path, lac_graph_t graph, lac_dtype precision, lac_gft_t *out);
/* lac_gft_load when `path` holds a valid cache, else lac_gft_create and (when
 * path is not NULL) lac_gft_save; *from_cache (may be NULL) says which. A cache
 * that does not fit is logged and rebuilt; failing to write it is a warning.
 * A path that holds something other than a basis cache (a tensor, a folder)
 * is LAC_ERR_ARGUMENT before any work. */
LAC_API lac_status lac_gft_load_or_create(lac_ctx_t ctx, lac_graph_t graph, lac_dtype precision, const char *path,
                                  lac_gft_t *out, int *from_cache);
LAC_API void lac_gft_destroy(lac_gft_t *gft);
LAC_API int64_t lac_gft_size(lac_gft_t gft);
LAC_API lac_dtype lac_gft_precision(lac_gft_t gft);
/* Seconds the eigendecomposition took (0 for a loaded cache). */
LAC_API double lac_gft_seconds(lac_gft_t gft);
/* Copies of w (vector of N) and U (N x N, row v = vertex v, column k =
 * frequency k), in any float dtype; either may be NULL. */
LAC_API lac_status lac_gft_copy(lac_ctx_t ctx, lac_gft_t gft, lac_array *eigenvalues, lac_array *vectors);

/* imputation ------------------------------------------------------------- */
/* Algorithm 1 of Zhou & Zhang (2021), after Sun, Yan & Donoho (ICML 2018).
 * A graph-tensor is an (N, m, n) array, vertex-major: slice v is vertex v's
 * m x n matrix. Observed set Ω, given as
 *  - a bool vector of N (slice sampling: vertex v observed or not),
 *  - a bool (N, m, n) array (entry-wise sampling), or
 *  - NULL: the NaN entries of the tensor are the missing ones.
 * With a mask, unobserved entries may hold anything (NaN included) and
 * observed ones must be finite (else LAC_ERR_VALUE naming the entry).
 *
 * Iteration (t counts over all steps; G^est_0 = 0):
 *   G^imp = P_Ω(G) + P_Ω⊥(G^est_{t-1})                   line 7
 *   Ĝ = U^T G^imp                                         line 8 (GFT)
 *   Ĝ^est(k) = S_λk(Ĝ(k)) = A (Σ - λk)_+ B^T per k        line 9, Algorithm 2
 *   G^est_t = U Ĝ^est                                     line 10 (iGFT)
 * λ^1_k = the largest singular value of the first Ĝ(k) (or params.lambda for
 * every k), λ^{j+1} = decay · λ^j for j = 1..steps; step j iterates until
 * ‖G^est_t - G^est_{t-1}‖² / ‖G^est_{t-1}‖² <= tol (t >= 2) or `inner`
 * iterations, and everything stops after max_iterations. The change is
 * measured in the spectral domain, equal by orthogonality of U.
 * The GFT and iGFT are GEMMs with the tensor as an (m·n) x N matrix; the
 * observed part U^T P_Ω(G) is formed once, and only the rows of the vertices
 * that are not fully observed are transformed back on each iteration. */
typedef enum {
    LAC_IMPUTE_COMPLETED = 0,      /* observed entries as given, missing ones from the estimate */
    LAC_IMPUTE_ESTIMATE = 1        /* the estimate G^est everywhere (the paper's output) */
} lac_impute_output;

/* One iteration, for progress and logs. */
typedef struct {
    int64_t iteration;             /* t, from 1 */
    int64_t step;                  /* j, from 1 */
    double lambda_scale;           /* λ^j_k / λ^1_k = decay^(j-1) */
    double lambda_max;             /* max_k λ^j_k */
    double change;                 /* ‖G_t - G_{t-1}‖² / ‖G_{t-1}‖²; NaN when undefined */
    double mean_rank;              /* mean over k of the rank of Ĝ^est(k) */
    double seconds;                /* since the call began */
    double rmse_all;               /* ‖G^est - G‖_F / ‖G‖_F against truth; NaN without */
    double rmse_missing;           /* the same over the missing entries only */
    int selecting;                 /* 1 on the hold-out path of params.select_fraction (no
                                      truth errors there), 0 on the fit to all the data */
} lac_impute_iteration;

/* Called after every iteration; a nonzero return stops the run (the result
 * so far is written out and the call returns LAC_INFO_NOT_CONVERGED). */
typedef int (*lac_impute_progress_fn)(const lac_impute_iteration *it, void *user);

/* λ chosen by hold-out validation (params.select_fraction = f > 0):
 *  1. a fraction f of the observed vertices is hidden (of the observed
 *     entries instead when some vertex is partly observed): round(f · count),
 *     at least 1 and leaving at least 1, drawn uniformly with select_seed;
 *  2. the λ path (the schedule above, all `steps`) is walked on the rest with
 *     warm starts, and after each step the hold-out error
 *     ‖G^est - G‖_F / ‖G‖_F over the hidden entries is recorded (the plain
 *     root mean square when they are all zero);
 *  3. the step j* with the lowest error is kept (ties: the larger λ), and the
 *     fit on all the data walks the schedule again down to step j*: λ_k =
 *     decay^(j*-1) λ^1_k with λ^1_k from all the data.
 * Fewer than 2 observed vertices (or entries) is LAC_ERR_VALUE. The report
 * goes to params.selection when it is given; the result's iterations and
 * steps are the fit's, its times cover both walks, and the progress callback
 * sees both (lac_impute_iteration.selecting). The hold-out error is read
 * through the backend's finish, so every backend validates alike. */
typedef struct {
    size_t struct_size;            /* sizeof: set by lac_impute_selection_default() */
    double *curve;                 /* in: room for curve_capacity numbers, or NULL: curve[j-1] gets the
                                      hold-out error after λ step j, NaN past the steps walked */
    int64_t curve_capacity;
    int entries;                   /* out: 1 when entries were held out, 0 when vertices were */
    int64_t held_out;              /* vertices (or entries) held out */
    int64_t steps;                 /* λ steps walked on the hold-out path */
    int64_t chosen_step;           /* j*, from 1 */
    double chosen_scale;           /* decay^(j*-1): λ_k / λ^1_k */
    double chosen_lambda_max;      /* max_k λ_k of the fit to all the data at step j* */
    double chosen_error;           /* the hold-out error at j* */
} lac_impute_selection;

static inline lac_impute_selection lac_impute_selection_default(void)
{
    lac_impute_selection s;
    s.struct_size = sizeof s;
    s.curve = NULL;
    s.curve_capacity = 0;
    s.entries = 0;
    s.held_out = s.steps = s.chosen_step = 0;
    s.chosen_scale = s.chosen_lambda_max = s.chosen_error = 0;
    return s;
}

typedef struct {
    size_t struct_size;               /* sizeof: set by lac_impute_params_default() */
    double decay;                  /* c in (0, 1); default 0.35 */
    int64_t steps;                 /* C >= 1, the λ values; default 10 */
    int64_t inner;                 /* T >= 1, iterations per λ at most; default 12 */
    double tol;                    /* ε >= 0, relative; default 1e-8 */
    int64_t max_iterations;        /* over all steps; 0 = steps · inner */
    double lambda;                 /* λ^1 for every frequency; 0 = σ_max per frequency */
    int accelerate;                /* 1 (default): line 7 imputes the extrapolation
                                      X_t + θ_t (X_t - X_{t-1}) on the missing entries
                                      (accelerated proximal gradient, FISTA's θ carried
                                      across the λ steps); 0: the paper's iteration */
    lac_impute_output output;
    lac_impute_progress_fn progress;
    void *progress_user;
    double select_fraction;        /* in (0, 1): choose the λ step by hold-out validation
                                      (above); 0 (default): walk all `steps` */
    uint64_t select_seed;          /* which vertices or entries are held out; default 1 */
    lac_impute_selection *selection;   /* where the choice is reported, or NULL */
    int gemm_tf32;                 /* a lac_gemm_mode: the CUDA backend's GFT and iGFT GEMMs
                                      on FP32 cores (LAC_GEMM_FP32, the default), on TF32
                                      tensor cores (LAC_GEMM_TF32: ~10 bits of mantissa in
                                      the products) or as 3xTF32 (LAC_GEMM_3XTF32: split
                                      operands, about FP32's accuracy); float32 bases only,
                                      docs/impute.md gives the accuracy each costs. The CPU
                                      ignores it. */
} lac_impute_params;

/* How a GPU runs the imputation's float32 GEMMs (lac_impute_params.gemm_tf32). */
typedef enum { LAC_GEMM_FP32 = 0, LAC_GEMM_TF32 = 1, LAC_GEMM_3XTF32 = 2 } lac_gemm_mode;

typedef struct {
    int64_t iterations;
    int64_t steps;                 /* λ values used */
    int converged;                 /* the last step met the tolerance */
    double change;                 /* of the last iteration */
    double seconds;                /* the whole call */
    double seconds_gft;            /* line 8, and the one-off U^T P_Ω(G) */
    double seconds_svt;            /* line 9 */
    double seconds_igft;           /* line 10, and the output */
    int64_t observed_vertices;     /* fully observed */
    int64_t partial_vertices;      /* some entries observed (entry-wise masks) */
    int64_t missing_vertices;      /* no entry observed */
    double rmse_all, rmse_missing; /* of the final estimate; NaN without truth */
} lac_impute_result;

LAC_API void lac_impute_params_init(lac_impute_params *params, size_t struct_size);
static inline lac_impute_params lac_impute_params_default(void)
{
    lac_impute_params p;
    lac_impute_params_init(&p, sizeof p);
    return p;
}
LAC_API const char *lac_impute_params_check(const lac_impute_params *params);

/* The checks lac_impute makes of tensor, observed and truth (and of the
 * backend), for a graph of num_vertices vertices, without a basis: lets a
 * caller reject bad input before paying for the eigendecomposition. */
LAC_API lac_status lac_impute_check(lac_ctx_t ctx, int64_t num_vertices, const lac_array *tensor, const lac_array *observed,
                            const lac_array *truth);

/* tensor: (N, m, n) float32 or float64 host array, N = the basis' size; the
 * computation runs in the basis' precision. observed: see above (may be NULL).
 * truth: optional (N, m, n) float array, for errors. out: caller (N, m, n)
 * array of tensor's dtype (may be tensor itself). result may be NULL.
 * Bad input (shapes, an empty observed set, NaN in observed data) leaves out
 * untouched. On a CUDA context the whole iteration runs on the device
 * (docs/impute.md); the result equals the CPU's to the precision's rounding. */
LAC_API lac_status lac_impute(lac_ctx_t ctx, const lac_impute_params *params, lac_gft_t gft, const lac_array *tensor,
                      const lac_array *observed, const lac_array *truth, lac_array *out,
                      lac_impute_result *result);

/* The paper's synthetic data on any graph: Ĝ(k) = A_k B_k^T with A_k (m x r)
 * and B_k (n x r) i.i.d. standard normal, G = U Ĝ (iGFT), and
 * round(observed_ratio · N) vertices drawn uniformly as observed. Seeded and
 * identical for any thread count. truth: caller (N, m, n) float array;
 * observed: caller bool vector of N (may be NULL). */
typedef struct {
    size_t struct_size;               /* sizeof: set by lac_impute_gen_params_default() */
    int64_t m, n, rank;
    double observed_ratio;         /* in (0, 1] */
    uint64_t seed;
} lac_impute_gen_params;

LAC_API void lac_impute_gen_params_init(lac_impute_gen_params *params, size_t struct_size);
static inline lac_impute_gen_params lac_impute_gen_params_default(void)
{
    lac_impute_gen_params p;
    lac_impute_gen_params_init(&p, sizeof p);
    return p;
}

LAC_API lac_status lac_impute_generate(lac_ctx_t ctx, const lac_impute_gen_params *params, lac_gft_t gft,
                               lac_array *truth, lac_array *observed);

/* ------------------------------------------------------------------------ */
/* mf: matrix factorisation for sparse ratings                                */
/* ------------------------------------------------------------------------ */
/* Ratings: (user, item, rating) triples with the users' own ids. Ids (strings
 * or sparse integers) map to dense indices 0.. in order of first appearance;
 * the map travels with the ratings and, after training, with the model.
 *
 * Formats read (LAC_RATINGS_AUTO guesses from the first data line):
 *   TRIPLES       "user item rating" separated by spaces or tabs (LIBMF)
 *   MOVIELENS     "user::item::rating::timestamp" (ratings.dat)
 *   UDATA         "user<TAB>item<TAB>rating<TAB>timestamp" (u.data)
 *   CSV           "userId,movieId,rating,..." with a header line
 *   MATRIX_MARKET "%%MatrixMarket matrix coordinate real|integer general"
 * '#' lines are comments in TRIPLES. Policies: a malformed line is
 * LAC_ERR_FORMAT naming file and line (or is counted and skipped with
 * skip_bad); a NaN or infinite rating is a malformed line; an input with no
 * ratings is LAC_ERR_VALUE. Duplicate (user, item) pairs are kept as read;
 * training keeps the last of them (a later rating replaces an earlier one). */
typedef struct lac_ratings *lac_ratings_t;

typedef enum {
    LAC_RATINGS_AUTO = 0,
    LAC_RATINGS_TRIPLES = 1,
    LAC_RATINGS_MOVIELENS = 2,
    LAC_RATINGS_UDATA = 3,
    LAC_RATINGS_CSV = 4,
    LAC_RATINGS_MATRIX_MARKET = 5
} lac_ratings_format;

LAC_API const char *lac_ratings_format_name(lac_ratings_format format);   /* "triples", ... */
/* Parses "auto|triples|movielens|udata|csv|mm". */
LAC_API lac_status lac_ratings_format_parse(const char *name, lac_ratings_format *format);

typedef struct {
    size_t struct_size;               /* sizeof: set by lac_ratings_read_params_default() */
    lac_ratings_format format;
    int skip_bad;             /* count and skip malformed lines instead of failing */
    int pairs;                /* interaction data: a line of two fields, "user item" (TRIPLES,
                                 MOVIELENS "user::item", CSV "user,item"), reads as rating 1; for
                                 implicit training and ranking, where a rating is only "seen".
                                 Default 0: every line needs its rating */
} lac_ratings_read_params;

LAC_API void lac_ratings_read_params_init(lac_ratings_read_params *params, size_t struct_size);
static inline lac_ratings_read_params lac_ratings_read_params_default(void)
{
    lac_ratings_read_params p;
    lac_ratings_read_params_init(&p, sizeof p);
    return p;
}
LAC_API lac_status lac_ratings_read(lac_ctx_t ctx, const char *path, const lac_ratings_read_params *params,
                            lac_ratings_t *out);
/* From caller arrays: ids are integers (kept as their decimal text). */
LAC_API lac_status lac_ratings_from_arrays(lac_ctx_t ctx, int64_t count, const int64_t *users, const int64_t *items,
                                   const float *ratings, lac_ratings_t *out);
/* Writes atomically; TRIPLES, MOVIELENS, UDATA (timestamp 0), CSV or MATRIX_MARKET
 * (Matrix Market uses the dense indices + 1 and loses the ids). */
LAC_API lac_status lac_ratings_write(lac_ctx_t ctx, const char *path, lac_ratings_format format, lac_ratings_t ratings);
LAC_API void lac_ratings_destroy(lac_ratings_t *ratings);

LAC_API int64_t lac_ratings_count(lac_ratings_t ratings);
LAC_API int64_t lac_ratings_num_users(lac_ratings_t ratings);
LAC_API int64_t lac_ratings_num_items(lac_ratings_t ratings);
/* Lines skipped as malformed (skip_bad) when read. */
LAC_API int64_t lac_ratings_skipped(lac_ratings_t ratings);
/* Entry i as dense indices; LAC_ERR_RANGE outside [0, count). */
LAC_API lac_status lac_ratings_get(lac_ratings_t ratings, int64_t i, int64_t *user, int64_t *item, float *rating);
/* The id text of a dense user or item index, NULL outside the range. */
LAC_API const char *lac_ratings_user_id(lac_ratings_t ratings, int64_t user);
LAC_API const char *lac_ratings_item_id(lac_ratings_t ratings, int64_t item);

/* Holdout split, seeded. fraction of the ratings goes to test: each rating
 * independently (per_user = 0), or that fraction of every user's ratings
 * (per_user = 1; users with one rating keep it in train). leave_last = 1:
 * leave-one-out by time instead, each user's latest rating to test (the
 * largest timestamp, the 4th field read; ties and ratings without one: the
 * later line), users with one rating keep it; fraction and seed unused. Ids
 * are kept. */
typedef struct {
    size_t struct_size;               /* sizeof: set by lac_mf_split_params_default() */
    double fraction;          /* in (0, 1); default 0.1 */
    int per_user;
    uint64_t seed;
    int leave_last;           /* default 0 */
} lac_mf_split_params;

LAC_API void lac_mf_split_params_init(lac_mf_split_params *params, size_t struct_size);
static inline lac_mf_split_params lac_mf_split_params_default(void)
{
    lac_mf_split_params p;
    lac_mf_split_params_init(&p, sizeof p);
    return p;
}
LAC_API lac_status lac_mf_split(lac_ctx_t ctx, const lac_mf_split_params *params, lac_ratings_t ratings,
                        lac_ratings_t *train, lac_ratings_t *test);

/* Generated ratings shaped like MovieLens/Netflix: power-law user activity and
 * item popularity, a rank-`rank` signal with biases plus Gaussian noise, rounded
 * to the scale. The same seed gives the same ratings whatever the threads. */
typedef struct {
    size_t struct_size;               /* sizeof: set by lac_mf_gen_params_default() */
    int64_t users, items, ratings;  /* ratings: the target count (a few % fewer after dedup) */
    int rank;                       /* true rank of the signal; default 10 */
    double noise;                   /* std. dev. of the noise; default 0.5 */
    int half_stars;                 /* 1: 0.5-5 in steps of 0.5 (MovieLens); 0: 1-5 (Netflix) */
    double activity_exponent;       /* Zipf exponent of user activity; default 0.8 */
    double popularity_exponent;     /* Zipf exponent of item popularity; default 1.0 */
    uint64_t seed;
    /* Planted item neighbourhoods: item j belongs to cluster j mod
     * item_clusters, and every user has an effect ~ N(0, cluster_strength^2)
     * per cluster added to its ratings of the cluster's items (structure
     * beyond the rank-`rank` signal). 0 clusters (default): none. */
    int item_clusters;
    double cluster_strength;        /* default 0.8 */
} lac_mf_gen_params;

LAC_API void lac_mf_gen_params_init(lac_mf_gen_params *params, size_t struct_size);
static inline lac_mf_gen_params lac_mf_gen_params_default(void)
{
    lac_mf_gen_params p;
    lac_mf_gen_params_init(&p, sizeof p);
    return p;
}
LAC_API const char *lac_mf_gen_params_check(const lac_mf_gen_params *params);
LAC_API lac_status lac_mf_generate(lac_ctx_t ctx, const lac_mf_gen_params *params, lac_ratings_t *out);

/* Top-K item neighbours S^K(j) (the neighbourhood model's, CULSH-MF):
 *   SIMLSH   the paper's simLSH (eq. 3): every user gets G random bits per
 *            hashing; an item's G-bit code is the sign of
 *            sum_i psi(r_ij) (2 H_i - 1), psi(r) = r^psi_power, summed per item
 *            by lac_map; p codes make a bucket key (coarse), q keys per item
 *            (fine); the K items sharing a bucket with j most often are kept
 *            (ties: lower index), random items fill when fewer than K.
 *   SIMLSH_CENTRED  the same with psi(r) = r - (the item's mean rating).
 *   GSM      exact: S = n/(n + shrink) rho, n the users who rated both items,
 *            rho their Pearson correlation (each item centred by its mean
 *            over those users; 0 when n < 2 or a variance is 0); top K by S,
 *            ties to the lower index. Blocked co-rating sums, O(N K) memory
 *            besides the blocks: never an N x N matrix.
 *   RPCOS    random Gaussian projections of the ratings (cosine LSH), banded
 *            like SIMLSH (G bits a code, p codes a key, q keys).
 *   MINHASH  Jaccard of the sets of users: p min-hashes a key, q keys.
 *   RANDOM   K distinct random items.
 * Buckets with more than LAC_MF_NBR_MAX_BUCKET items are passed over (a key
 * that many share says nothing). Results depend only on the ratings and the
 * parameters (not on threads). */
typedef enum {
    LAC_MF_NBR_SIMLSH = 0,
    LAC_MF_NBR_GSM = 1,
    LAC_MF_NBR_RPCOS = 2,
    LAC_MF_NBR_MINHASH = 3,
    LAC_MF_NBR_RANDOM = 4,
    LAC_MF_NBR_SIMLSH_CENTRED = 5
} lac_mf_nbr_method;

#define LAC_MF_NBR_MAX_BUCKET 4096

/* "simlsh", "gsm", "rpcos", "minhash", "random", "simlsh-centred". */
LAC_API const char *lac_mf_nbr_method_name(lac_mf_nbr_method method);
LAC_API lac_status lac_mf_nbr_method_parse(const char *name, lac_mf_nbr_method *method);

typedef struct {
    size_t struct_size;               /* sizeof: set by lac_mf_nbr_params_default() */
    lac_mf_nbr_method method;         /* default SIMLSH */
    int k;                            /* neighbours per item; default 32 */
    int p;                            /* codes per bucket key (coarse); default 3 */
    int q;                            /* keys per item (fine); default 100 */
    int bits;                         /* G, bits of a code; default 8 */
    int psi_power;                    /* SIMLSH: psi(r) = r^psi_power, 1..4; default 2 */
    double shrink;                    /* GSM: lambda_rho; default 100 */
    uint64_t seed;                    /* default 1 */
} lac_mf_nbr_params;

LAC_API void lac_mf_nbr_params_init(lac_mf_nbr_params *params, size_t struct_size);
static inline lac_mf_nbr_params lac_mf_nbr_params_default(void)
{
    lac_mf_nbr_params p;
    lac_mf_nbr_params_init(&p, sizeof p);
    return p;
}
LAC_API const char *lac_mf_nbr_params_check(const lac_mf_nbr_params *params);

typedef struct lac_mf_nbr *lac_mf_nbr_t;

/* The K neighbours of every item of `ratings` (repeated pairs: the last
 * rating). K must be below the number of items. */
LAC_API lac_status lac_mf_neighbours(lac_ctx_t ctx, const lac_mf_nbr_params *params, lac_ratings_t ratings,
                             lac_mf_nbr_t *out);
LAC_API void lac_mf_nbr_destroy(lac_mf_nbr_t *nbr);
LAC_API int64_t lac_mf_nbr_num_items(lac_mf_nbr_t nbr);
LAC_API int lac_mf_nbr_k(lac_mf_nbr_t nbr);
/* items x K dense item indices into out (caller's), row j best first. */
LAC_API lac_status lac_mf_nbr_get(lac_mf_nbr_t nbr, int32_t *out);
LAC_API const char *lac_mf_nbr_item_id(lac_mf_nbr_t nbr, int64_t item);
/* Wall-clock seconds of the search and its peak memory (bytes it allocated). */
LAC_API double lac_mf_nbr_seconds(lac_mf_nbr_t nbr);
LAC_API int64_t lac_mf_nbr_bytes(lac_mf_nbr_t nbr);
/* Mean over items of |S^K(j) of nbr  intersected with  S^K(j) of exact| / K
 * (the same ratings, the same K). */
LAC_API lac_status lac_mf_nbr_recall(lac_ctx_t ctx, lac_mf_nbr_t nbr, lac_mf_nbr_t exact, double *recall);
/* Text, one line per item: its id, then its K neighbours' ids, best first. */
LAC_API lac_status lac_mf_nbr_write(lac_ctx_t ctx, const char *path, lac_mf_nbr_t nbr);

/* Model kinds and the neighbourhood model's per-group hyper-parameters. */
typedef enum { LAC_MF_MODEL_PLAIN = 0, LAC_MF_MODEL_NEIGHBOURHOOD = 1 } lac_mf_model_kind;
typedef struct {
    double b, bhat, u, v, w, c;
} lac_mf_groups;

/* Training: r_hat(i, j) = [mu + b_i + bhat_j +] u_i . v_j, fitted by SGD with
 * update rule (5) and learning rate gamma_t = alpha / (1 + beta t^1.5) (eq. 7).
 * CPU, deterministic = 0 (default): threads take whole users (ratings grouped
 * by user, users by count) and share the item factors without locks
 * (Hogwild): fastest, not bit-reproducible with more than one thread.
 * deterministic = 1: a B x B grid of user x item blocks (B = 2 x threads, 1
 * for one thread); strata of B disjoint blocks run in parallel with a barrier
 * between them, so the model depends only on the seed and the thread count.
 * It costs the barriers' idle time and more epochs to the same RMSE (each
 * user's ratings are visited in B pieces; see docs/mf.md for measurements).
 * CUDA (CUSGD++): a group of lanes owns a user row, keeps u_i in registers and updates
 * v_j in global memory (Hogwild over items: never bit-reproducible, so
 * deterministic = 1 is LAC_ERR_UNSUPPORTED there). A context created with
 * LAC_BACKEND_AUTO trains fewer than 250 K ratings on the CPU (docs/mf.md). */
typedef struct {
    size_t struct_size;               /* sizeof: set by lac_mf_params_default() */
    int k;                    /* factors; default 32 */
    double lambda;            /* L2 regularisation of u_i, v_j (lambda_u = lambda_v); default 0.03 */
    double lambda_bias;       /* of b_i, bhat_j; default 0.01 */
    double alpha;             /* initial learning rate (eq. 7); default 0.1 */
    double beta;              /* learning-rate decay (eq. 7); default 0.5 */
    int epochs;               /* at most; default 40 */
    int use_bias;             /* mu + b_i + bhat_j; default 1 */
    int patience;             /* with validation: stop after this many epochs without gain; default 2 */
    double min_gain;          /* relative RMSE gain that counts; default 1e-4 */
    int deterministic;        /* see above; default 0 */
    uint64_t seed;            /* initial factors and block order; default 1 */
    /* The neighbourhood model (CULSH-MF, model = LAC_MF_MODEL_NEIGHBOURHOOD):
     * r_hat(i, j) = mu + b_i + bhat_j + u_i . v_j
     *   + |R^K(i;j)|^-1/2 sum_{j1 in R^K(i;j)} (r_{i,j1} - mu - b_i - bhat_j1) w_{j,k(j1)}
     *   + |N^K(i;j)|^-1/2 sum_{j2 in N^K(i;j)} c_{j,k(j2)}
     * with S^K(j) the K neighbours of item j (found by `neighbours`), R^K(i;j)
     * those user i rated in training and N^K(i;j) the rest. Trained by SGD
     * with update rule (5): group g in {b, bhat, u, v, w, c} at learning rate
     * rates.g / (1 + beta_groups t^1.5) and regulariser lambdas.g; alpha,
     * beta, lambda, lambda_bias and use_bias are the plain model's only. */
    int model;                        /* LAC_MF_MODEL_PLAIN (default) or LAC_MF_MODEL_NEIGHBOURHOOD */
    lac_mf_nbr_params neighbours;     /* how S^K(j) is found */
    lac_mf_groups rates;              /* initial learning rates; default Table 5 (MovieLens) of the paper */
    lac_mf_groups lambdas;            /* regularisers; default Table 5 (MovieLens) */
    double beta_groups;               /* decay of eq. (7) for the groups; default 0.3 */
    /* Implicit feedback (the paper's section 5), either model: every
     * training rating is an interaction ("seen"; with weighted, its rating
     * is the interaction's weight, > 0), the items a user has not seen are
     * negatives, sampled uniformly afresh every epoch. r_hat above is a
     * logit (mu = 0). loss LAC_MF_LOSS_XENT: cross-entropy of
     * sigmoid(r_hat), each interaction weighted, `negatives` sampled
     * negatives per interaction; LAC_MF_LOSS_BPR: -log sigmoid(r_hat(i, j)
     * - r_hat(i, j')) with one sampled j' per interaction. Update rule (5)
     * with e the loss's gradient in r_hat. No validation set (rank with
     * held-out interactions instead); the epoch callback's train_rmse is
     * the mean loss. Both models train on CUDA too, with either loss. */
    int implicit;                     /* default 0 */
    int loss;                         /* lac_mf_loss; default LAC_MF_LOSS_XENT */
    int negatives;                    /* per interaction (cross-entropy); default 4 */
    int weighted;                     /* default 0: every interaction weighs 1 */
    /* The neighbourhood model, explicit ratings: before its epochs, up to
     * warm_epochs epochs of the plain model (alpha, beta, lambda) train its
     * P, Q and biases with W = C = 0 (the plain model's fast epochs; with
     * validation they stop when an epoch gains less than 0.1% and the best
     * is kept). 0 (default): none. */
    int warm_epochs;
    /* Cross-entropy's negatives shared by this many interactions: a user's
     * interactions (items ascending) in chunks of negative_share draw
     * `negatives` negatives a chunk, each scored once and stepped with the
     * chunk's summed gradient (weight: the chunk's size), so an interaction
     * costs 1 + negatives / negative_share item steps instead of 1 +
     * negatives. 1: every interaction its own negatives. BPR ignores it. */
    int negative_share;               /* default 1 */
    /* Implicit feedback's negatives are drawn with probability proportional
     * to (the item's interactions in the training data)^negative_exponent,
     * in [0, 2]: 0 uniform, 1 as popular as the item is; the same draws on
     * every backend. -1 (default): 0.75 for the plain model, 0 for the
     * neighbourhood model (what ranked best on the data of bench/RESULTS.md);
     * a trained model's parameters hold the value used. */
    double negative_exponent;         /* default -1 */
    /* Drawn that way, a negative stands for n_j^E / sum of them, and the
     * logit learns log(P(interaction) / n_j^E) + const: after training
     * bhat_j += negative_correction x E x log(n_j) (n_j at least 1), in
     * [0, 1]: 1 ranks by the estimated P(interaction) (popularity restored),
     * 0 by the logit as trained. Folded into the item biases (every
     * backend, the model file); lac_mf_tune chooses 0 or 1 on held-out
     * interactions. */
    double negative_correction;       /* default 1 */
} lac_mf_params;

typedef enum { LAC_MF_LOSS_XENT = 0, LAC_MF_LOSS_BPR = 1 } lac_mf_loss;

LAC_API void lac_mf_params_init(lac_mf_params *params, size_t struct_size);
static inline lac_mf_params lac_mf_params_default(void)
{
    lac_mf_params p;
    lac_mf_params_init(&p, sizeof p);
    return p;
}
LAC_API const char *lac_mf_params_check(const lac_mf_params *params);

typedef struct lac_mf_model *lac_mf_model_t;

/* Called after each epoch (may be NULL); valid_rmse is NaN without validation.
 * Return non-zero to stop training. */
typedef int (*lac_mf_epoch_fn)(int epoch, double train_rmse, double valid_rmse, double seconds, void *user);

typedef struct {
    int epochs;               /* run */
    int best_epoch;           /* kept (the last one without validation) */
    double seconds;           /* training time, data layout included */
    double train_rmse;        /* of the kept model on the training ratings */
    double valid_rmse;        /* of the kept model; NaN without validation */
    int64_t duplicates;       /* (user, item) pairs given more than once: the last rating kept */
    int warm_epochs;          /* plain epochs before the neighbourhood model's (warm_epochs above) */
    double warm_seconds;      /* their time (epochs and validation; in `seconds`, as is their set-up) */
} lac_mf_report;

/* valid may be NULL (no early stopping); its ids are mapped through train's.
 * report may be NULL. */
LAC_API lac_status lac_mf_train(lac_ctx_t ctx, const lac_mf_params *params, lac_ratings_t train, lac_ratings_t valid,
                        lac_mf_epoch_fn on_epoch, void *on_epoch_user, lac_mf_model_t *out,
                        lac_mf_report *report);

/* Checkpoints of a long training, for lac_mf_train_checkpointed. Every
 * `every` epochs and after the last one, the file at path is replaced
 * atomically (at once, not with an output set: it is worth keeping when a
 * later step fails) by the training's state: the model kind, the factors
 * (and the neighbourhood model's W, C and neighbour lists), the kept epoch's,
 * the epoch reached, the early-stopping state, the
 * parameters and fingerprints of the training and validation ratings (the
 * learning rate and every random draw are functions of the parameters, the
 * seed and the epoch). It is not a model file. An existing file that is not
 * a checkpoint is never replaced (LAC_ERR_ARGUMENT). With resume = 1 training
 * goes on from the file up to params->epochs in all: the same ratings (and
 * ids) for training and validation and the same parameters but epochs are
 * required, else LAC_ERR_ARGUMENT naming what differs (a missing file too).
 * On the CPU with deterministic = 1 and the same threads, a resumed training
 * gives the same bits as one without a break. Over MPI ranks every rank
 * calls it, rank 0 writes the file from the ranks' gathered state and every
 * rank reads it to resume (a path all ranks see); on the same rank count the
 * same bits, on another the training goes on from the state it holds. */
typedef struct {
    size_t struct_size;               /* sizeof: set by lac_mf_checkpoint_params_default() */
    const char *path;         /* NULL: no checkpoints */
    int every;                /* epochs between checkpoints; default 1 */
    int resume;               /* go on from path; default 0 */
} lac_mf_checkpoint_params;

LAC_API void lac_mf_checkpoint_params_init(lac_mf_checkpoint_params *params, size_t struct_size);
static inline lac_mf_checkpoint_params lac_mf_checkpoint_params_default(void)
{
    lac_mf_checkpoint_params p;
    lac_mf_checkpoint_params_init(&p, sizeof p);
    return p;
}
/* lac_mf_train with checkpoints (checkpoint may be NULL: none). */
LAC_API lac_status lac_mf_train_checkpointed(lac_ctx_t ctx, const lac_mf_params *params,
                                             const lac_mf_checkpoint_params *checkpoint, lac_ratings_t train,
                                             lac_ratings_t valid, lac_mf_epoch_fn on_epoch, void *on_epoch_user,
                                             lac_mf_model_t *out, lac_mf_report *report);
LAC_API void lac_mf_model_destroy(lac_mf_model_t *model);

LAC_API int64_t lac_mf_model_num_users(lac_mf_model_t model);
LAC_API int64_t lac_mf_model_num_items(lac_mf_model_t model);
LAC_API int lac_mf_model_k(lac_mf_model_t model);
/* The model's training parameters into *params (start it from
 * lac_mf_params_default(): struct_size says how much the caller's struct holds). */
LAC_API lac_status lac_mf_model_get_params(lac_mf_model_t model, lac_mf_params *params);
static inline lac_mf_params lac_mf_model_params(lac_mf_model_t model)
{
    lac_mf_params p = lac_mf_params_default();
    lac_mf_model_get_params(model, &p);
    return p;
}

/* Versioned binary file (header, factors, biases, id maps, rated items, checksum);
 * saved atomically; load rejects truncated or corrupted files. */
LAC_API lac_status lac_mf_model_save(lac_ctx_t ctx, const char *path, lac_mf_model_t model);
LAC_API lac_status lac_mf_model_load(lac_ctx_t ctx, const char *path, lac_mf_model_t *out);

/* One prediction per rating of `ratings` (ids mapped through the model's),
 * clamped to the training ratings' range. A user or item the model has not
 * seen gets mu plus the biases known (mu alone for both unknown).
 * predictions: count floats, or NULL. rmse, mae, unknown: may be NULL. */
LAC_API lac_status lac_mf_predict(lac_ctx_t ctx, lac_mf_model_t model, lac_ratings_t ratings, float *predictions,
                          double *rmse, double *mae, int64_t *unknown);

/* Top n items by predicted rating for each user given (dense model indices),
 * excluding the items the user rated in training. items: num_users x n dense
 * item indices (-1 where fewer than n remain), scores: the same shape or NULL. */
LAC_API lac_status lac_mf_recommend(lac_ctx_t ctx, lac_mf_model_t model, int64_t num_users, const int64_t *users,
                            int64_t n, int64_t *items, float *scores);
/* Dense index of an id, -1 when the model has not seen it. */
LAC_API int64_t lac_mf_model_user_index(lac_mf_model_t model, const char *id);
LAC_API const char *lac_mf_model_user_id(lac_mf_model_t model, int64_t user);
LAC_API const char *lac_mf_model_item_id(lac_mf_model_t model, int64_t item);

/* Hyper-parameters chosen from the data (what `lacuna mf train` does when
 * none are given): a seeded random share `holdout` of train is held out, the
 * rest trained with the fast trainer of ctx; lambda is searched on a doubling
 * grid from the given value, then alpha (x2, /2), then k (doubling, 4..256),
 * then lambda again (x sqrt 2); each trial stops early on the held-out
 * ratings (patience, min_gain of params). What is not in `search` stays as
 * given. params: in, the starting values (and everything else); out, the
 * chosen k, lambda, alpha and epochs (the winner's best epoch, at most the
 * given epochs). Fewer than 100 ratings: nothing is searched (searched = 0).
 * Implicit feedback (params->implicit): the share is held out of every
 * user's interactions (lac_mf_split's per_user), each trial trains the
 * given epochs and is ranked by its held-out NDCG@10 over all items
 * (lac_mf_rank_evaluate, negatives = 0), higher better; lambda and
 * negative_correction (0 or 1, both scored on each trial's model) are
 * searched, not k or alpha; epochs stay as given. */
#define LAC_MF_TUNE_K 1
#define LAC_MF_TUNE_LAMBDA 2
#define LAC_MF_TUNE_ALPHA 4
#define LAC_MF_TUNE_CORRECTION 8
#define LAC_MF_TUNE_MAX_TRIALS 40

typedef struct {
    size_t struct_size;               /* sizeof: set by lac_mf_tune_params_default() */
    int search;                       /* LAC_MF_TUNE_* bits; default all */
    double holdout;                   /* share of train held out, in (0, 0.5]; default 0.1 */
    uint64_t seed;                    /* of the holdout; default 1 */
} lac_mf_tune_params;

LAC_API void lac_mf_tune_params_init(lac_mf_tune_params *params, size_t struct_size);
static inline lac_mf_tune_params lac_mf_tune_params_default(void)
{
    lac_mf_tune_params p;
    lac_mf_tune_params_init(&p, sizeof p);
    return p;
}

typedef struct {
    int k;
    double lambda, alpha;
    double rmse;                      /* on the held-out ratings; infinite when it diverged; NaN (implicit) */
    int epochs;                       /* best epoch */
    double ndcg;                      /* implicit: held-out NDCG@10 at the better correction; NaN otherwise */
    double negative_correction;       /* implicit: that correction */
} lac_mf_tune_trial;

typedef struct {
    int searched;                     /* LAC_MF_TUNE_* bits searched */
    int64_t holdout;                  /* ratings held out */
    double start_rmse;                /* the starting parameters' held-out RMSE */
    double rmse;                      /* the winner's */
    int epochs;                       /* the winner's best epoch */
    double seconds;
    int trials;
    lac_mf_tune_trial trial[LAC_MF_TUNE_MAX_TRIALS];
    double start_ndcg, ndcg;          /* implicit: the starting parameters' and the winner's; NaN otherwise */
} lac_mf_tune_report;

LAC_API lac_status lac_mf_tune(lac_ctx_t ctx, const lac_mf_tune_params *tune, lac_mf_params *params,
                               lac_ratings_t train, lac_mf_tune_report *report);

/* Ranking metrics of a model on test pairs (every test rating is relevant,
 * whatever its value; pairs of a user or item the model does not know, or
 * rated in training, are skipped). negatives > 0: the leave-one-out protocol
 * of Neural Collaborative Filtering: each test item is ranked among
 * `negatives` items sampled (seeded, distinct) from those the user neither
 * rated in training nor has in test (all of them when fewer); its rank r is
 * the number of negatives scoring at least as high; hit = r < n, NDCG =
 * 1 / log2(r + 2) for a hit, precision = hit / n, recall = hit, AP = 1 / (r + 1)
 * for a hit; a user's figures are the mean over its test items.
 * negatives = 0: full ranking: the top n of all items the user did not rate
 * in training (ties: lower index) against the user's test items T: HR = 1
 * when one is there, precision = hits / n, recall = hits / |T|, NDCG = DCG /
 * ideal DCG (gain 1 / log2(position + 2)), AP = sum over hit positions of
 * hits so far / position, over min(|T|, n). Each figure is the mean over
 * users with a test item. */
typedef struct {
    size_t struct_size;               /* sizeof: set by lac_mf_rank_params_default() */
    int n;                            /* the cut-off; default 10 */
    int negatives;                    /* sampled negatives per test item; default 99; 0: full ranking */
    uint64_t seed;                    /* of the negatives; default 1 */
} lac_mf_rank_params;

LAC_API void lac_mf_rank_params_init(lac_mf_rank_params *params, size_t struct_size);
static inline lac_mf_rank_params lac_mf_rank_params_default(void)
{
    lac_mf_rank_params p;
    lac_mf_rank_params_init(&p, sizeof p);
    return p;
}

typedef struct {
    double hr, ndcg, precision, recall, map;   /* NaN when no user has a test item */
    int64_t users;                    /* users evaluated */
    int64_t pairs;                    /* test pairs counted */
    int64_t skipped;                  /* test pairs skipped: unknown user or item, or rated in training */
} lac_mf_rank_report;

LAC_API lac_status lac_mf_rank_evaluate(lac_ctx_t ctx, const lac_mf_rank_params *params, lac_mf_model_t model,
                                        lac_ratings_t test, lac_mf_rank_report *report);
/* Online updates (the paper's Algorithm 4): new ratings, of new users and
 * items or of known ones, folded into a trained model without retraining.
 * New users and items get indices after the model's (in order of first
 * appearance); a known (user, item) pair takes the new rating. Then:
 *   - the neighbourhood model's LSH sums get the new ratings (a replaced
 *     rating's share taken out; the centred method uses each item's mean
 *     over all its ratings for the new shares only), and each new item's
 *     S^K(j) is searched among all items (GSM: an exact search of the
 *     merged ratings); the known items keep theirs;
 *   - every new user's (neighbourhood model: every touched user's, from its
 *     whole training row), then every new item's parameters are solved in
 *     closed form with the rest fixed (eq. 1 is linear in one row's
 *     parameters: a ridge regression with SGD's regularisers, 10 ratings
 *     more for the biases and factors), `rounds`
 *     times;
 *   - `sweeps` epochs of SGD (rule 5) at the learning rate of the epoch after
 *     the model's last run over the touched rows: the new ratings (plain
 *     model) or the touched users' whole training rows (neighbourhood).
 * mu stays; the rating range widens to the new ratings'. The given model is
 * not changed; *out is a new one. CPU only. */
typedef struct {
    size_t struct_size;               /* sizeof: set by lac_mf_update_params_default() */
    int rounds;                       /* users-then-items solves; default 2 */
    int sweeps;                       /* SGD epochs over the touched rows; default 2 */
} lac_mf_update_params;

LAC_API void lac_mf_update_params_init(lac_mf_update_params *params, size_t struct_size);
static inline lac_mf_update_params lac_mf_update_params_default(void)
{
    lac_mf_update_params p;
    lac_mf_update_params_init(&p, sizeof p);
    return p;
}
LAC_API const char *lac_mf_update_params_check(const lac_mf_update_params *params);

typedef struct {
    double seconds;           /* the whole update */
    int64_t ratings;          /* new ratings used (repeated pairs: the last one) */
    int64_t new_users, new_items;
    int64_t replaced;         /* ratings of pairs the model was trained on */
    double rmse_before;       /* the given model on the new ratings (unknown ids: mu + known biases) */
    double rmse_after;        /* the updated model on them */
} lac_mf_update_report;

/* report may be NULL. */
LAC_API lac_status lac_mf_update(lac_ctx_t ctx, const lac_mf_update_params *params, lac_mf_model_t model,
                                 lac_ratings_t ratings, lac_mf_model_t *out, lac_mf_update_report *report);
/* The same update made to model itself, without copying it first (a large
 * neighbourhood model's LSH sums are most of its memory): the result equals
 * lac_mf_update's. Errors found before anything changes leave the model as
 * it was; a failure half-way (out of memory) marks it broken: it can then
 * only be destroyed (saving or updating it is refused). */
LAC_API lac_status lac_mf_update_in_place(lac_ctx_t ctx, const lac_mf_update_params *params, lac_mf_model_t model,
                                          lac_ratings_t ratings, lac_mf_update_report *report);

/* The n items rated most often in training (ties: lower index): what
 * recommend offers a user the model does not know. items: n dense indices
 * (-1 past the last item); counts: their numbers of training ratings, or NULL. */
LAC_API lac_status lac_mf_popular(lac_ctx_t ctx, lac_mf_model_t model, int64_t n, int64_t *items, int64_t *counts);

#ifdef __cplusplus
}
#endif
#endif /* LACUNA_LACUNA_H */
