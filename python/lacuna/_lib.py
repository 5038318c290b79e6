"""The shared library: where it is found, the structs of include/lacuna/lacuna.h
mirrored field by field, and the prototypes of the functions this package calls.

Only what the public header declares (LAC_API) is used. Every params struct is
started exactly as the header's inline lac_X_params_default() does: a zeroed
struct handed to lac_X_params_init(&p, sizeof p), so the library fills the
defaults and records how much of the struct this binding knows.
tests/test_lacuna.py compiles a small C program against the header and checks
every struct's size and every field's offset, and the enum values, against
these mirrors.
"""
import ctypes
import ctypes.util
import os

from ctypes import (POINTER, Structure, byref, c_char_p, c_double, c_int, c_int64, c_size_t,
                    c_uint64, c_void_p, CFUNCTYPE, sizeof)

# --------------------------------------------------------------------------
# Constants (the header's enums; checked against the header by the tests)
# --------------------------------------------------------------------------
LAC_SUCCESS = 0
LAC_INFO_NOT_CONVERGED = 1
LAC_ERR_ARGUMENT = -1
LAC_ERR_RANGE = -2
LAC_ERR_SHAPE = -3
LAC_ERR_DTYPE = -4
LAC_ERR_FORMAT = -5
LAC_ERR_VALUE = -6
LAC_ERR_UNSUPPORTED = -7
LAC_ERR_OUT_OF_MEMORY = -100
LAC_ERR_IO = -101
LAC_ERR_CUDA = -102
LAC_ERR_NOT_COMPILED = -103
LAC_ERR_NO_DEVICE = -104
LAC_ERR_MPI = -105
LAC_ERR_INTERNAL = -199

LAC_BACKEND_AUTO = 0
LAC_BACKEND_CPU = 1
LAC_BACKEND_CUDA = 2

LAC_LOG_ERROR = 0
LAC_LOG_WARN = 1
LAC_LOG_INFO = 2
LAC_LOG_DEBUG = 3

LAC_MAX_DEVICES = 16
LAC_MAX_DIMS = 4

LAC_FLOAT32 = 0
LAC_FLOAT64 = 1
LAC_INT32 = 2
LAC_INT64 = 3
LAC_BOOL = 4

LAC_MEM_HOST = 0
LAC_MEM_DEVICE = 1

LAC_NPY_MMAP = 1

LAC_MAP_SUM = 0
LAC_MAP_MEAN = 1
LAC_MAP_MIN = 2
LAC_MAP_MAX = 3
LAC_MAP_COUNT = 4

LAC_NAN_PROPAGATE = 0
LAC_NAN_SKIP = 1
LAC_NAN_ERROR = 2

LAC_GRAPH_AUTO = 0
LAC_GRAPH_EDGE_LIST = 1
LAC_GRAPH_MATRIX_MARKET = 2

LAC_IMPUTE_COMPLETED = 0
LAC_IMPUTE_ESTIMATE = 1

LAC_RATINGS_AUTO = 0
LAC_RATINGS_TRIPLES = 1
LAC_RATINGS_MOVIELENS = 2
LAC_RATINGS_UDATA = 3
LAC_RATINGS_CSV = 4
LAC_RATINGS_MATRIX_MARKET = 5

LAC_MF_NBR_SIMLSH = 0
LAC_MF_NBR_GSM = 1
LAC_MF_NBR_RPCOS = 2
LAC_MF_NBR_MINHASH = 3
LAC_MF_NBR_RANDOM = 4
LAC_MF_NBR_SIMLSH_CENTRED = 5
LAC_MF_NBR_MAX_BUCKET = 4096

LAC_MF_MODEL_PLAIN = 0
LAC_MF_MODEL_NEIGHBOURHOOD = 1
LAC_MF_LOSS_XENT = 0
LAC_MF_LOSS_BPR = 1

# Every constant above, by its C name (for the header check).
CONSTANTS = {k: v for k, v in dict(globals()).items() if k.startswith("LAC_")}

c_enum = c_int   # the header's enums are int-sized (checked by the struct test)

# --------------------------------------------------------------------------
# Structs, in the header's order
# --------------------------------------------------------------------------
lac_log_fn = CFUNCTYPE(None, c_enum, c_char_p, c_void_p)


class lac_ctx_params(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("backend", c_enum),
        ("num_devices", c_int),
        ("device_ids", c_int * LAC_MAX_DEVICES),
        ("threads", c_int),
        ("log", lac_log_fn),
        ("log_user", c_void_p),
        ("log_level", c_enum),
        ("knobs", c_char_p),
    ]


class lac_array(Structure):
    _fields_ = [
        ("data", c_void_p),
        ("dtype", c_enum),
        ("ndim", c_int),
        ("shape", c_int64 * LAC_MAX_DIMS),
        ("memory", c_enum),
        ("owner", c_void_p),
    ]


class lac_map_params(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("op", c_enum),
        ("accumulate", c_int),
        ("deterministic", c_int),
        ("nan_policy", c_enum),
        ("empty_value", c_double),
        ("chunk_elements", c_int64),
    ]


class lac_graph_params(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("format", c_enum),
        ("num_vertices", c_int64),
    ]


class lac_graph_info(Structure):
    _fields_ = [
        ("num_vertices", c_int64),
        ("num_edges", c_int64),
        ("lines", c_int64),
        ("self_loops", c_int64),
        ("zero_weight", c_int64),
        ("repeated", c_int64),
        ("isolated_vertices", c_int64),
        ("components", c_int64),
        ("directed", c_int),
        ("remapped", c_int),
        ("weighted", c_int),
        ("fingerprint", c_uint64),
    ]


class lac_impute_iteration(Structure):
    _fields_ = [
        ("iteration", c_int64),
        ("step", c_int64),
        ("lambda_scale", c_double),
        ("lambda_max", c_double),
        ("change", c_double),
        ("mean_rank", c_double),
        ("seconds", c_double),
        ("rmse_all", c_double),
        ("rmse_missing", c_double),
        ("selecting", c_int),
    ]


lac_impute_progress_fn = CFUNCTYPE(c_int, POINTER(lac_impute_iteration), c_void_p)


class lac_impute_selection(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("curve", POINTER(c_double)),
        ("curve_capacity", c_int64),
        ("entries", c_int),
        ("held_out", c_int64),
        ("steps", c_int64),
        ("chosen_step", c_int64),
        ("chosen_scale", c_double),
        ("chosen_lambda_max", c_double),
        ("chosen_error", c_double),
    ]


class lac_impute_params(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("decay", c_double),
        ("steps", c_int64),
        ("inner", c_int64),
        ("tol", c_double),
        ("max_iterations", c_int64),
        ("lambda", c_double),
        ("accelerate", c_int),
        ("output", c_enum),
        ("progress", lac_impute_progress_fn),
        ("progress_user", c_void_p),
        ("select_fraction", c_double),
        ("select_seed", c_uint64),
        ("selection", POINTER(lac_impute_selection)),
        ("gemm_tf32", c_int),
    ]


class lac_impute_result(Structure):
    _fields_ = [
        ("iterations", c_int64),
        ("steps", c_int64),
        ("converged", c_int),
        ("change", c_double),
        ("seconds", c_double),
        ("seconds_gft", c_double),
        ("seconds_svt", c_double),
        ("seconds_igft", c_double),
        ("observed_vertices", c_int64),
        ("partial_vertices", c_int64),
        ("missing_vertices", c_int64),
        ("rmse_all", c_double),
        ("rmse_missing", c_double),
    ]


class lac_impute_gen_params(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("m", c_int64),
        ("n", c_int64),
        ("rank", c_int64),
        ("observed_ratio", c_double),
        ("seed", c_uint64),
    ]


class lac_ratings_read_params(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("format", c_enum),
        ("skip_bad", c_int),
        ("pairs", c_int),
    ]


class lac_mf_split_params(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("fraction", c_double),
        ("per_user", c_int),
        ("seed", c_uint64),
        ("leave_last", c_int),
    ]


class lac_mf_gen_params(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("users", c_int64),
        ("items", c_int64),
        ("ratings", c_int64),
        ("rank", c_int),
        ("noise", c_double),
        ("half_stars", c_int),
        ("activity_exponent", c_double),
        ("popularity_exponent", c_double),
        ("seed", c_uint64),
        ("item_clusters", c_int),
        ("cluster_strength", c_double),
    ]


class lac_mf_nbr_params(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("method", c_enum),
        ("k", c_int),
        ("p", c_int),
        ("q", c_int),
        ("bits", c_int),
        ("psi_power", c_int),
        ("shrink", c_double),
        ("seed", c_uint64),
    ]


class lac_mf_groups(Structure):
    _fields_ = [(name, c_double) for name in ("b", "bhat", "u", "v", "w", "c")]


class lac_mf_params(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("k", c_int),
        ("lambda", c_double),
        ("lambda_bias", c_double),
        ("alpha", c_double),
        ("beta", c_double),
        ("epochs", c_int),
        ("use_bias", c_int),
        ("patience", c_int),
        ("min_gain", c_double),
        ("deterministic", c_int),
        ("seed", c_uint64),
        ("model", c_enum),
        ("neighbours", lac_mf_nbr_params),
        ("rates", lac_mf_groups),
        ("lambdas", lac_mf_groups),
        ("beta_groups", c_double),
        ("implicit", c_int),
        ("loss", c_int),
        ("negatives", c_int),
        ("weighted", c_int),
        ("warm_epochs", c_int),
        ("negative_share", c_int),
        ("negative_exponent", c_double),
        ("negative_correction", c_double),
    ]


lac_mf_epoch_fn = CFUNCTYPE(c_int, c_int, c_double, c_double, c_double, c_void_p)


class lac_mf_checkpoint_params(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("path", c_char_p),
        ("every", c_int),
        ("resume", c_int),
    ]


class lac_mf_report(Structure):
    _fields_ = [
        ("epochs", c_int),
        ("best_epoch", c_int),
        ("seconds", c_double),
        ("train_rmse", c_double),
        ("valid_rmse", c_double),
        ("duplicates", c_int64),
        ("warm_epochs", c_int),
        ("warm_seconds", c_double),
    ]


class lac_mf_tune_params(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("search", c_int),
        ("holdout", c_double),
        ("seed", c_uint64),
    ]


class lac_mf_tune_trial(Structure):
    _fields_ = [
        ("k", c_int),
        ("lambda", c_double),
        ("alpha", c_double),
        ("rmse", c_double),
        ("epochs", c_int),
        ("ndcg", c_double),
        ("negative_correction", c_double),
    ]


LAC_MF_TUNE_K, LAC_MF_TUNE_LAMBDA, LAC_MF_TUNE_ALPHA, LAC_MF_TUNE_CORRECTION, LAC_MF_TUNE_MAX_TRIALS = 1, 2, 4, 8, 40


class lac_mf_tune_report(Structure):
    _fields_ = [
        ("searched", c_int),
        ("holdout", c_int64),
        ("start_rmse", c_double),
        ("rmse", c_double),
        ("epochs", c_int),
        ("seconds", c_double),
        ("trials", c_int),
        ("trial", lac_mf_tune_trial * LAC_MF_TUNE_MAX_TRIALS),
        ("start_ndcg", c_double),
        ("ndcg", c_double),
    ]


class lac_mf_rank_params(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("n", c_int),
        ("negatives", c_int),
        ("seed", c_uint64),
    ]


class lac_mf_rank_report(Structure):
    _fields_ = [
        ("hr", c_double),
        ("ndcg", c_double),
        ("precision", c_double),
        ("recall", c_double),
        ("map", c_double),
        ("users", c_int64),
        ("pairs", c_int64),
        ("skipped", c_int64),
    ]


class lac_mf_update_params(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("rounds", c_int),
        ("sweeps", c_int),
    ]


class lac_mf_update_report(Structure):
    _fields_ = [
        ("seconds", c_double),
        ("ratings", c_int64),
        ("new_users", c_int64),
        ("new_items", c_int64),
        ("replaced", c_int64),
        ("rmse_before", c_double),
        ("rmse_after", c_double),
    ]


# Every struct mirrored here, by its C name (for the header check).
STRUCTS = [lac_ctx_params, lac_array, lac_map_params, lac_graph_params, lac_graph_info, lac_impute_iteration,
           lac_impute_selection, lac_impute_params, lac_impute_result, lac_impute_gen_params, lac_ratings_read_params,
           lac_mf_split_params, lac_mf_gen_params, lac_mf_nbr_params, lac_mf_groups, lac_mf_params, lac_mf_report,
           lac_mf_checkpoint_params, lac_mf_tune_params, lac_mf_tune_trial, lac_mf_tune_report,
           lac_mf_rank_params, lac_mf_rank_report, lac_mf_update_params, lac_mf_update_report]

# Opaque handles: plain pointers.
lac_ctx_t = c_void_p
lac_map_plan_t = c_void_p
lac_graph_t = c_void_p
lac_gft_t = c_void_p
lac_ratings_t = c_void_p
lac_mf_model_t = c_void_p

# --------------------------------------------------------------------------
# Prototypes: name -> (restype, argtypes), as declared in the header
# --------------------------------------------------------------------------
_st = c_int   # lac_status
_P = POINTER
PROTOTYPES = {
    "lac_status_string": (c_char_p, [_st]),
    "lac_version": (c_char_p, []),
    "lac_build_info": (c_char_p, []),
    "lac_ctx_params_init": (None, [_P(lac_ctx_params), c_size_t]),
    "lac_ctx_params_check": (c_char_p, [_P(lac_ctx_params)]),
    "lac_ctx_create": (_st, [_P(lac_ctx_params), _P(lac_ctx_t)]),
    "lac_ctx_destroy": (None, [_P(lac_ctx_t)]),
    "lac_ctx_backend": (c_enum, [lac_ctx_t]),
    "lac_ctx_threads": (c_int, [lac_ctx_t]),
    "lac_ctx_rank": (c_int, [lac_ctx_t]),
    "lac_ctx_ranks": (c_int, [lac_ctx_t]),
    "lac_last_error": (c_char_p, [lac_ctx_t]),
    "lac_cuda_device_count": (c_int, []),
    "lac_cuda_device_describe": (_st, [c_int, c_char_p, c_size_t]),
    "lac_npy_load": (_st, [lac_ctx_t, c_char_p, ctypes.c_uint, _P(lac_array)]),
    "lac_array_release": (None, [_P(lac_array)]),
    # map
    "lac_map_params_init": (None, [_P(lac_map_params), c_size_t]),
    "lac_map_params_check": (c_char_p, [_P(lac_map_params)]),
    "lac_map_op_parse": (_st, [c_char_p, _P(c_enum)]),
    "lac_map": (_st, [lac_ctx_t, _P(lac_map_params), _P(lac_array), _P(lac_array), _P(lac_array),
                      _P(lac_array)]),
    "lac_map_plan_create": (_st, [lac_ctx_t, _P(lac_array), c_int64, _P(lac_map_plan_t)]),
    "lac_map_plan_destroy": (None, [_P(lac_map_plan_t)]),
    "lac_map_plan_num_sources": (c_int64, [lac_map_plan_t]),
    "lac_map_plan_num_targets": (c_int64, [lac_map_plan_t]),
    "lac_map_plan_execute": (_st, [lac_ctx_t, lac_map_plan_t, _P(lac_map_params), _P(lac_array),
                                   _P(lac_array), _P(lac_array)]),
    "lac_map_plan_set_deterministic": (_st, [lac_map_plan_t, c_int]),
    # graphs and the GFT
    "lac_graph_params_init": (None, [_P(lac_graph_params), c_size_t]),
    "lac_graph_load": (_st, [lac_ctx_t, c_char_p, _P(lac_graph_params), _P(lac_graph_t)]),
    "lac_graph_from_edges": (_st, [lac_ctx_t, c_int64, _P(lac_array), _P(lac_array), _P(lac_array),
                                   _P(lac_graph_t)]),
    "lac_graph_destroy": (None, [_P(lac_graph_t)]),
    "lac_graph_get_info": (lac_graph_info, [lac_graph_t]),
    "lac_graph_num_vertices": (c_int64, [lac_graph_t]),
    "lac_graph_id_of_vertex": (_st, [lac_ctx_t, lac_graph_t, c_int64, _P(c_int64)]),
    "lac_graph_vertex_of_id": (_st, [lac_ctx_t, lac_graph_t, c_int64, _P(c_int64)]),
    "lac_graph_laplacian": (_st, [lac_ctx_t, lac_graph_t, _P(lac_array)]),
    "lac_graph_load_vertex_set": (_st, [lac_ctx_t, lac_graph_t, c_char_p, _P(lac_array)]),
    "lac_gft_create": (_st, [lac_ctx_t, lac_graph_t, c_enum, _P(lac_gft_t)]),
    "lac_gft_load_or_create": (_st, [lac_ctx_t, lac_graph_t, c_enum, c_char_p, _P(lac_gft_t), _P(c_int)]),
    "lac_gft_destroy": (None, [_P(lac_gft_t)]),
    "lac_gft_size": (c_int64, [lac_gft_t]),
    "lac_gft_precision": (c_enum, [lac_gft_t]),
    "lac_gft_seconds": (c_double, [lac_gft_t]),
    "lac_gft_copy": (_st, [lac_ctx_t, lac_gft_t, _P(lac_array), _P(lac_array)]),
    # impute
    "lac_impute_params_init": (None, [_P(lac_impute_params), c_size_t]),
    "lac_impute_params_check": (c_char_p, [_P(lac_impute_params)]),
    "lac_impute_check": (_st, [lac_ctx_t, c_int64, _P(lac_array), _P(lac_array), _P(lac_array)]),
    "lac_impute": (_st, [lac_ctx_t, _P(lac_impute_params), lac_gft_t, _P(lac_array), _P(lac_array),
                         _P(lac_array), _P(lac_array), _P(lac_impute_result)]),
    # ratings and mf
    "lac_ratings_read_params_init": (None, [_P(lac_ratings_read_params), c_size_t]),
    "lac_ratings_format_parse": (_st, [c_char_p, _P(c_enum)]),
    "lac_ratings_read": (_st, [lac_ctx_t, c_char_p, _P(lac_ratings_read_params), _P(lac_ratings_t)]),
    "lac_ratings_from_arrays": (_st, [lac_ctx_t, c_int64, c_void_p, c_void_p, c_void_p, _P(lac_ratings_t)]),
    "lac_ratings_destroy": (None, [_P(lac_ratings_t)]),
    "lac_ratings_count": (c_int64, [lac_ratings_t]),
    "lac_ratings_skipped": (c_int64, [lac_ratings_t]),
    "lac_mf_params_init": (None, [_P(lac_mf_params), c_size_t]),
    "lac_mf_params_check": (c_char_p, [_P(lac_mf_params)]),
    "lac_mf_train": (_st, [lac_ctx_t, _P(lac_mf_params), lac_ratings_t, lac_ratings_t, lac_mf_epoch_fn, c_void_p,
                           _P(lac_mf_model_t), _P(lac_mf_report)]),
    "lac_mf_checkpoint_params_init": (None, [_P(lac_mf_checkpoint_params), c_size_t]),
    "lac_mf_tune_params_init": (None, [_P(lac_mf_tune_params), c_size_t]),
    "lac_mf_rank_params_init": (None, [_P(lac_mf_rank_params), c_size_t]),
    "lac_mf_rank_evaluate": (_st, [lac_ctx_t, _P(lac_mf_rank_params), lac_mf_model_t, lac_ratings_t,
                                   _P(lac_mf_rank_report)]),
    "lac_mf_tune": (_st, [lac_ctx_t, _P(lac_mf_tune_params), _P(lac_mf_params), lac_ratings_t,
                          _P(lac_mf_tune_report)]),
    "lac_mf_train_checkpointed": (_st, [lac_ctx_t, _P(lac_mf_params), _P(lac_mf_checkpoint_params), lac_ratings_t,
                                        lac_ratings_t, lac_mf_epoch_fn, c_void_p, _P(lac_mf_model_t),
                                        _P(lac_mf_report)]),
    "lac_mf_model_destroy": (None, [_P(lac_mf_model_t)]),
    "lac_mf_model_num_users": (c_int64, [lac_mf_model_t]),
    "lac_mf_model_num_items": (c_int64, [lac_mf_model_t]),
    "lac_mf_model_k": (c_int, [lac_mf_model_t]),
    "lac_mf_model_get_params": (_st, [lac_mf_model_t, _P(lac_mf_params)]),
    "lac_mf_model_save": (_st, [lac_ctx_t, c_char_p, lac_mf_model_t]),
    "lac_mf_model_load": (_st, [lac_ctx_t, c_char_p, _P(lac_mf_model_t)]),
    "lac_mf_predict": (_st, [lac_ctx_t, lac_mf_model_t, lac_ratings_t, c_void_p, _P(c_double), _P(c_double),
                             _P(c_int64)]),
    "lac_mf_recommend": (_st, [lac_ctx_t, lac_mf_model_t, c_int64, c_void_p, c_int64, c_void_p, c_void_p]),
    "lac_mf_popular": (_st, [lac_ctx_t, lac_mf_model_t, c_int64, c_void_p, c_void_p]),
    "lac_mf_model_user_index": (c_int64, [lac_mf_model_t, c_char_p]),
    "lac_mf_model_user_id": (c_char_p, [lac_mf_model_t, c_int64]),
    "lac_mf_model_item_id": (c_char_p, [lac_mf_model_t, c_int64]),
    "lac_mf_update_params_init": (None, [_P(lac_mf_update_params), c_size_t]),
    "lac_mf_update_params_check": (c_char_p, [_P(lac_mf_update_params)]),
    "lac_mf_update": (_st, [lac_ctx_t, _P(lac_mf_update_params), lac_mf_model_t, lac_ratings_t, _P(lac_mf_model_t),
                            _P(lac_mf_update_report)]),
}


def _candidates():
    """Where the library is looked for, in order."""
    env = os.environ.get("LACUNA_LIBRARY")
    if env:
        return [env]   # an explicit choice: no fallback that could hide a mistake
    here = os.path.dirname(os.path.abspath(__file__))
    found = []
    for folder in (here, os.path.dirname(here)):   # in the package, or beside it
        path = os.path.join(folder, "liblacuna.so")
        if os.path.exists(path):
            found.append(path)
    found.append("liblacuna.so.0")   # the system's, by its soname (ld.so's search)
    name = ctypes.util.find_library("lacuna")
    if name:
        found.append(name)
    return found


def _load():
    errors = []
    for path in _candidates():
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            errors.append("%s: %s" % (path, e))
            continue
        return lib, path
    raise ImportError("lacuna: cannot load the Lacuna shared library (set LACUNA_LIBRARY to liblacuna.so, run "
                      "python/setup_inplace.sh BUILD_DIR, or install the library): " + "; ".join(errors))


lib, library_path = _load()
for _name, (_res, _args) in PROTOTYPES.items():
    try:
        _fn = getattr(lib, _name)
    except AttributeError:
        raise ImportError("lacuna: %s (%s) does not export %s: the library is older than this package"
                          % (library_path, lib._name, _name)) from None
    _fn.restype = _res
    _fn.argtypes = _args


def params(struct_type, init_name):
    """A params struct started as the header's inline lac_X_params_default() does."""
    p = struct_type()
    getattr(lib, init_name)(byref(p), sizeof(p))
    return p


def text(value):
    """A C string (bytes or None) as str."""
    return None if value is None else value.decode("utf-8", "replace")
