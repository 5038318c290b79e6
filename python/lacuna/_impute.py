"""impute: convolutional imputation of graph-tensors (lac_graph_*, lac_gft_*,
lac_impute)."""
import ctypes
import math
import os
import threading

import numpy as np

from . import _core, _lib
from ._core import check, input_error
from ._lib import lib

_PRECISIONS = {"single": _lib.LAC_FLOAT32, "float32": _lib.LAC_FLOAT32, "double": _lib.LAC_FLOAT64,
               "float64": _lib.LAC_FLOAT64}
_GRAPH_FORMATS = {"auto": _lib.LAC_GRAPH_AUTO, "edges": _lib.LAC_GRAPH_EDGE_LIST,
                  "edge_list": _lib.LAC_GRAPH_EDGE_LIST, "mtx": _lib.LAC_GRAPH_MATRIX_MARKET,
                  "matrix_market": _lib.LAC_GRAPH_MATRIX_MARKET}
_OUTPUTS = {"completed": _lib.LAC_IMPUTE_COMPLETED, "estimate": _lib.LAC_IMPUTE_ESTIMATE}


def _precision(value):
    if isinstance(value, str) and value in _PRECISIONS:
        return _PRECISIONS[value]
    try:
        dt = np.dtype(value)
    except TypeError:
        dt = None
    if dt == np.float32:
        return _lib.LAC_FLOAT32
    if dt == np.float64:
        return _lib.LAC_FLOAT64
    raise input_error("precision must be 'single' (float32) or 'double' (float64), not %r" % (value,))


class Graph(_core.Closeable):
    """An undirected weighted graph for impute, and its graph Fourier basis
    (computed once per precision, on first use, and kept).

    source: a SNAP edge list or Matrix Market path, or an (E, 2) array of
    vertex numbers (with optional weights, E float64 values).
    num_vertices: edge lists: ids are vertex numbers in [0, num_vertices);
    arrays: default max + 1 (impute() passes the tensor's N).
    format: 'auto', 'edges' or 'mtx' (paths only).
    cache: a basis cache file (read when it fits the graph, else written).
    """

    def __init__(self, source, num_vertices=None, weights=None, format="auto", cache=None):
        self._handle = None
        self._destroy = lib.lac_graph_destroy
        self._gft_destroy = lib.lac_gft_destroy
        self._bases = {}
        self._lock = threading.Lock()
        self.cache = None if cache is None else os.fspath(cache)
        ctx = _core.context("cpu")   # graphs live on the host, whatever the device of impute
        handle = _lib.lac_graph_t()
        if isinstance(source, (str, bytes, os.PathLike)):
            if weights is not None:
                raise input_error("weights go with an edge array; a graph file carries its own")
            if format not in _GRAPH_FORMATS:
                raise input_error("format must be 'auto', 'edges' or 'mtx', not %r" % (format,))
            p = _lib.params(_lib.lac_graph_params, "lac_graph_params_init")
            p.format = _GRAPH_FORMATS[format]
            p.num_vertices = _count(num_vertices, "num_vertices")
            check(lib.lac_graph_load(ctx.handle, _core.fspath(source, "graph"), ctypes.byref(p),
                                     ctypes.byref(handle)), ctx)
        else:
            E = _core.as_index(source, "edges")
            if E.ndim != 2 or E.shape[1] != 2:
                raise input_error("edges must be an (E, 2) array of vertex pairs, not shape %s" % (E.shape,),
                                  _lib.LAC_ERR_SHAPE)
            if num_vertices is None:
                num_vertices = int(E.max()) + 1 if E.size else 0
            u = np.ascontiguousarray(E[:, 0])
            v = np.ascontiguousarray(E[:, 1])
            du, dv = _core.describe(u), _core.describe(v)
            w = None
            if weights is not None:
                w = _core.as_float(weights, "weights", np.float64)
            dw = _core.describe(w) if w is not None else None
            check(lib.lac_graph_from_edges(ctx.handle, _count(num_vertices, "num_vertices"), ctypes.byref(du),
                                           ctypes.byref(dv), ctypes.byref(dw) if dw is not None else None,
                                           ctypes.byref(handle)), ctx)
        self._handle = handle

    def _live(self):
        if self._handle is None:
            raise input_error("the graph is closed")
        return self._handle

    @property
    def num_vertices(self):
        return lib.lac_graph_num_vertices(self._live())

    @property
    def info(self):
        """lac_graph_info as a dict (vertices, edges, self-loops, components...)."""
        i = lib.lac_graph_get_info(self._live())
        return {name: getattr(i, name) for name, _ in i._fields_}

    def vertex_of_id(self, ids):
        """The vertex numbers of the file's ids (a LacunaInputError for an unknown id)."""
        ctx = _core.context("cpu")
        ids = _core.as_index(ids, "ids")
        out = np.empty(ids.shape, np.int64)
        v = _lib.c_int64()
        for k, i in enumerate(ids.flat):
            check(lib.lac_graph_vertex_of_id(ctx.handle, self._live(), int(i), ctypes.byref(v)), ctx)
            out.flat[k] = v.value
        return out

    def laplacian(self, dtype=np.float64):
        """The normalised Laplacian I - D^-1/2 A D^-1/2 as an N x N array."""
        ctx = _core.context("cpu")
        N = self.num_vertices
        L = np.empty((N, N), dtype=np.dtype(dtype))
        if L.dtype not in (np.float32, np.float64):
            raise input_error("dtype must be float32 or float64", _lib.LAC_ERR_DTYPE)
        d = _core.describe(L)
        check(lib.lac_graph_laplacian(ctx.handle, self._live(), ctypes.byref(d)), ctx)
        return L

    def basis(self, precision=np.float64, threads=0):
        """(eigenvalues w, eigenvectors U) of the Laplacian, L = U diag(w) U^T
        (computed once per precision and kept for impute)."""
        prec = _precision(precision)
        ctx = _core.context("cpu", threads)
        gft = self._gft(ctx, prec)
        N = self.num_vertices
        dt = np.float32 if prec == _lib.LAC_FLOAT32 else np.float64
        w, U = np.empty(N, dt), np.empty((N, N), dt)
        dw, dU = _core.describe(w), _core.describe(U)
        check(lib.lac_gft_copy(ctx.handle, gft, ctypes.byref(dw), ctypes.byref(dU)), ctx)
        return w, U

    def _gft(self, ctx, precision):
        """The basis in `precision`, computed (or read from the cache) once."""
        with self._lock:
            gft = self._bases.get(precision)
            if gft is None:
                gft = _lib.lac_gft_t()
                if self.cache is not None:
                    cached = ctypes.c_int()
                    check(lib.lac_gft_load_or_create(ctx.handle, self._live(), precision,
                                                     _core.fspath(self.cache, "cache"), ctypes.byref(gft),
                                                     ctypes.byref(cached)), ctx)
                else:
                    check(lib.lac_gft_create(ctx.handle, self._live(), precision, ctypes.byref(gft)), ctx)
                self._bases[precision] = gft
            return gft

    def close(self):
        for gft in self._bases.values():
            self._gft_destroy(ctypes.byref(gft))
        self._bases = {}
        if self._handle is not None:
            self._destroy(ctypes.byref(self._handle))
            self._handle = None

    def __repr__(self):
        if self._handle is None:
            return "Graph(closed)"
        i = self.info
        return "Graph(num_vertices=%d, num_edges=%d)" % (i["num_vertices"], i["num_edges"])


def _count(value, name):
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise input_error("%s must be a non-negative integer, not %r" % (name, value))
    return int(value)


# Options of impute(): name -> what it sets.
_PARAM_OPTIONS = ("decay", "steps", "inner", "tol", "max_iterations", "lambda", "accelerate", "tf32")
_GEMM_MODES = {"fp32": 0, "tf32": 1, "3xtf32": 2}   # lac_gemm_mode
_OTHER_OPTIONS = ("lambda_", "output", "precision", "truth", "out", "num_vertices", "weights", "graph_format",
                  "cache", "threads", "callback", "full_output", "select_lambda", "select_seed", "gemm")


def _select_fraction(spec):
    """select_lambda='holdout' or 'holdout:FRACTION' (as the tool's --select-lambda) -> the fraction."""
    if not isinstance(spec, str) or not (spec == "holdout" or spec.startswith("holdout:")):
        raise input_error("select_lambda must be 'holdout' or 'holdout:FRACTION', not %r" % (spec,))
    if spec == "holdout":
        return 0.1
    try:
        f = float(spec[len("holdout:"):])
    except ValueError:
        f = math.nan
    if not 0 < f < 1:
        raise input_error("select_lambda %r: FRACTION must be a number in (0, 1)" % (spec,))
    return f


def _observed(observed, graph, ctx, N, shape):
    """The observed set as a bool array (N,) or (N, m, n), or None."""
    if observed is None:
        return None
    if isinstance(observed, (str, bytes, os.PathLike)):
        path = os.fspath(observed)
        if str(path).endswith(".npy"):
            return _core.as_bool(np.load(path), "observed")
        mask = np.zeros(N, np.bool_)
        d = _core.describe(mask)
        check(lib.lac_graph_load_vertex_set(ctx.handle, graph._live(), _core.fspath(path, "observed"),
                                            ctypes.byref(d)), ctx)
        return mask
    a = np.asarray(observed)
    if a.dtype == np.bool_:
        return np.ascontiguousarray(a)
    if a.dtype.kind in "iu" or (a.size == 0 and a.dtype.kind == "f"):
        if a.ndim != 1:
            raise input_error("observed ids must be a vector, not %d-d" % a.ndim, _lib.LAC_ERR_SHAPE)
        mask = np.zeros(N, np.bool_)
        mask[graph.vertex_of_id(a)] = True
        return mask
    raise input_error("observed must be a bool mask of N or (N, m, n), a sequence of vertex ids or a path, "
                      "not dtype %s" % a.dtype, _lib.LAC_ERR_DTYPE)


def impute(graph, X, observed=None, device="auto", **options):
    """Completes the graph-tensor X (N, m, n) on the graph (Algorithm 1 of
    Zhou & Zhang; docs/impute.md) and returns the completed tensor.

    graph: a path (SNAP edge list or Matrix Market), an (E, 2) array of vertex
    numbers, or a lacuna.Graph (whose basis is then computed once and reused).
    X: float32 or float64 (used without a copy; other real dtypes become
    float64). observed: None (the NaN entries of X are the missing ones), a
    bool mask of N vertices or of X's shape (entries), a sequence of vertex ids
    (the graph file's ids), or a path (a text file of ids, or a bool .npy).

    options: decay, steps, inner, tol, max_iterations, lambda (or lambda_),
    accelerate (as lac_impute_params; unset ones keep the library's defaults);
    output='completed'|'estimate'; precision='single'|'double' (default: X's
    dtype); truth (for errors in the callback and the result); out (an array
    like X to write into, X itself allowed); num_vertices, weights,
    graph_format, cache (for a graph given as a path or edges); threads;
    callback(dict) called after every iteration, a true return stops the run;
    tf32=True runs the GPU's GFT GEMMs on TF32 tensor cores (the tool's --tf32);
    gemm='fp32'|'tf32'|'3xtf32' (the tool's --gemm) chooses among all three;
    select_lambda='holdout' or 'holdout:FRACTION' chooses how far down the λ
    schedule to go by hold-out validation (FRACTION of the observed vertices,
    or entries, hidden; default 0.1), select_seed (default 1) which ones;
    full_output=True returns (Y, info) with info the lac_impute_result fields,
    'history' (one dict per iteration; 'selecting' marks those of the hold-out
    path) and with select_lambda 'lambda_selection' (as the tool's --json).
    Ctrl-C stops the iteration and raises KeyboardInterrupt.
    """
    for key in options:
        if key not in _PARAM_OPTIONS and key not in _OTHER_OPTIONS:
            raise TypeError("impute() got an unexpected keyword argument %r" % key)
    threads = options.get("threads", 0)
    ctx = _core.context(device, threads)

    X = _core.as_float(X, "X")
    if X.ndim != 3:
        raise input_error("X must be an (N, m, n) graph-tensor, not %d-d" % X.ndim, _lib.LAC_ERR_SHAPE)
    truth = options.get("truth")
    if truth is not None:
        truth = _core.as_float(truth, "truth")

    p = _lib.params(_lib.lac_impute_params, "lac_impute_params_init")
    if "lambda" in options and "lambda_" in options:
        raise TypeError("impute() got both lambda and lambda_")
    for key in _PARAM_OPTIONS + ("lambda_",):
        if key in options and options[key] is not None:
            value = options[key]
            field = {"lambda_": "lambda", "tf32": "gemm_tf32"}.get(key, key)
            if field in ("accelerate", "gemm_tf32"):
                value = 1 if value else 0
            elif field in ("steps", "inner", "max_iterations"):
                if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                    raise input_error("%s must be an integer, not %r" % (key, value))
                value = int(value)
            else:
                value = float(value)
            setattr(p, field, value)
    gemm = options.get("gemm", None)
    if gemm is not None:
        if options.get("tf32") is not None:
            raise TypeError("impute() got both tf32 and gemm")
        if gemm not in _GEMM_MODES:
            raise input_error("gemm must be 'fp32', 'tf32' or '3xtf32', not %r" % (gemm,))
        p.gemm_tf32 = _GEMM_MODES[gemm]
    output = options.get("output", None)
    if output is not None:
        if output not in _OUTPUTS:
            raise input_error("output must be 'completed' or 'estimate', not %r" % (output,))
        p.output = _OUTPUTS[output]
    selection, curve = None, None
    if options.get("select_lambda") is not None:
        p.select_fraction = _select_fraction(options["select_lambda"])
        seed = options.get("select_seed", 1)
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= seed < 2 ** 64:
            raise input_error("select_seed must be an integer in [0, 2^64), not %r" % (seed,))
        p.select_seed = int(seed)
        curve = (ctypes.c_double * max(p.steps, 1))()
        selection = _lib.lac_impute_selection(struct_size=ctypes.sizeof(_lib.lac_impute_selection),
                                              curve=ctypes.cast(curve, ctypes.POINTER(ctypes.c_double)),
                                              curve_capacity=p.steps)
        p.selection = ctypes.pointer(selection)
    elif options.get("select_seed") is not None:
        raise input_error("select_seed goes with select_lambda")
    why = lib.lac_impute_params_check(ctypes.byref(p))
    if why:
        raise input_error("impute parameters: " + _lib.text(why))
    precision = _precision(options["precision"]) if options.get("precision") is not None else \
        (_lib.LAC_FLOAT32 if X.dtype == np.float32 else _lib.LAC_FLOAT64)

    own_graph = not isinstance(graph, Graph)
    if own_graph:
        nv = options.get("num_vertices")
        if nv is None and not isinstance(graph, (str, bytes, os.PathLike)):
            nv = X.shape[0]   # an edge array: the tensor says how many vertices
        g = Graph(graph, num_vertices=nv, weights=options.get("weights"),
                  format=options.get("graph_format", "auto"), cache=options.get("cache"))
    else:
        for key in ("num_vertices", "weights", "graph_format", "cache"):
            if options.get(key) is not None:
                raise input_error("%s goes with a graph given as a path or edges, not a lacuna.Graph" % key)
        g = graph
    try:
        N = g.num_vertices
        mask = _observed(observed, g, ctx, N, X.shape)
        dX = _core.describe(X)
        dmask = _core.describe(mask) if mask is not None else None
        dtruth = _core.describe(truth) if truth is not None else None
        # Bad input is refused before the eigendecomposition.
        check(lib.lac_impute_check(ctx.handle, N, ctypes.byref(dX), ctypes.byref(dmask) if dmask is not None else None,
                                   ctypes.byref(dtruth) if dtruth is not None else None), ctx)
        out = options.get("out")
        if out is None:
            Y, back = np.empty(X.shape, X.dtype), None
        elif out is X or (isinstance(out, np.ndarray) and out.dtype == X.dtype and out.shape == X.shape
                          and out.ctypes.data == X.ctypes.data and out.flags.c_contiguous and out.flags.writeable):
            Y, back = out, None   # in place over the tensor (the library allows it)
        else:
            Y, back = _core.writable_out(out, "out", X.dtype, X.shape)
        dY = _core.describe(Y)
        gft = g._gft(ctx, precision)

        history = []
        callback = options.get("callback")
        guard = _core.Interrupt()

        def progress(it_ptr, user):
            try:
                it = it_ptr.contents
                row = {name: getattr(it, name) for name, _ in it._fields_}
                history.append(row)
                if guard.stop():
                    return 1
                if callback is not None and callback(row):
                    return 1
                return 0
            except BaseException as e:   # KeyboardInterrupt, or the callback's own error
                guard.catch(e)
                return 1

        p.progress = _lib.lac_impute_progress_fn(progress)
        res = _lib.lac_impute_result()
        with guard:
            st = lib.lac_impute(ctx.handle, ctypes.byref(p), gft, ctypes.byref(dX),
                                ctypes.byref(dmask) if dmask is not None else None,
                                ctypes.byref(dtruth) if dtruth is not None else None, ctypes.byref(dY),
                                ctypes.byref(res))
        guard.raise_pending()
        check(st, ctx)
    finally:
        if own_graph:
            g.close()
    if back is not None:
        back[...] = Y
        Y = back
    if options.get("full_output"):
        info = {name: getattr(res, name) for name, _ in res._fields_}
        info["converged"] = bool(info["converged"])
        info["history"] = history
        if truth is None:
            info["rmse_all"] = info["rmse_missing"] = math.nan
        if selection is not None:
            info["lambda_selection"] = {
                "method": "holdout", "fraction": p.select_fraction, "seed": p.select_seed,
                "held_out_unit": "entries" if selection.entries else "vertices", "held_out": selection.held_out,
                "chosen_step": selection.chosen_step, "chosen_scale": selection.chosen_scale,
                "chosen_lambda_max": selection.chosen_lambda_max, "holdout_rmse": selection.chosen_error,
                "curve": [{"step": k + 1, "lambda_scale": p.decay ** k, "holdout_rmse": curve[k]}
                          for k in range(selection.steps)]}
        return Y, info
    return Y
