"""map: T[R[i]] op= w[i] * S[i] (lac_map, lac_map_plan_*)."""
import ctypes
import threading

import numpy as np

from . import _core, _lib
from ._core import check, input_error
from ._lib import lib

_NAN_POLICIES = {"propagate": _lib.LAC_NAN_PROPAGATE, "skip": _lib.LAC_NAN_SKIP, "error": _lib.LAC_NAN_ERROR}


def _parse_op(op):
    if not isinstance(op, str):
        raise input_error("op must be one of 'sum', 'mean', 'min', 'max', 'count', not %r" % (op,))
    code = _lib.c_enum()
    check(lib.lac_map_op_parse(op.encode(), ctypes.byref(code)))   # the library's message names the choices
    return code.value


def _map_params(op, deterministic, accumulate, nan, empty):
    p = _lib.params(_lib.lac_map_params, "lac_map_params_init")
    p.op = _parse_op(op)
    p.deterministic = 1 if deterministic else 0
    p.accumulate = 1 if accumulate else 0
    if nan not in _NAN_POLICIES:
        raise input_error("nan must be 'propagate', 'skip' or 'error', not %r" % (nan,))
    p.nan_policy = _NAN_POLICIES[nan]
    p.empty_value = float(empty)
    return p


def _operands(S, weights, out, n, accumulate):
    """S (float32/float64, C order), weights in S's dtype, and the target."""
    S = _core.as_float(S, "source")
    if S.ndim not in (1, 2):
        raise input_error("source must be a vector (m) or a matrix (m x b), not %d-d" % S.ndim, _lib.LAC_ERR_SHAPE)
    w = None if weights is None else _core.as_float(weights, "weights", S.dtype)
    shape = (n,) + S.shape[1:]
    if out is None:
        if accumulate:
            raise input_error("accumulate=True folds into out: give out")
        return S, w, np.empty(shape, S.dtype), None
    T, back = _core.writable_out(out, "out", S.dtype, shape)
    return S, w, T, back


def _targets(n, R):
    if n is None:
        return int(R.max()) + 1 if R.size else 0
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise input_error("n (the number of targets) must be an integer, not %r" % (n,))
    if n < 0:
        raise input_error("n = %d targets is negative" % n, _lib.LAC_ERR_SHAPE)
    return int(n)


def map(S, R, n=None, op="sum", weights=None, out=None, deterministic=False, device="auto", *,
        accumulate=False, nan="propagate", empty=0.0, threads=0):
    """T[R[i]] op= w[i] * S[i]; returns T, an (n,) or (n, b) array of S's dtype.

    S: m values or an (m, b) array (float32 or float64 are used without a copy;
    other real dtypes become float64). R: m target indices in [0, n), int32 or
    int64 (other integer dtypes become int64). n: the number of targets
    (None: max(R) + 1). op: 'sum', 'mean', 'min', 'max' or 'count'. weights: m
    values (cast to S's dtype). out: the target array, written in place and
    returned (with accumulate=True its values are folded in). deterministic:
    bit-identical results run to run. device: 'auto', 'cpu', 'cuda' or 'cuda:N'.
    nan: 'propagate', 'skip' or 'error'. empty: the value of targets nothing
    maps to. threads: CPU threads (0: all).
    """
    R = _core.as_index(R, "bridge")
    n = _targets(n, R)
    p = _map_params(op, deterministic, accumulate, nan, empty)
    S, w, T, back = _operands(S, weights, out, n, accumulate)
    if back is not None and accumulate:
        T[...] = back
    ctx = _core.context(device, threads)
    dS, dR, dT = _core.describe(S), _core.describe(R), _core.describe(T)
    dw = _core.describe(w) if w is not None else None
    check(lib.lac_map(ctx.handle, ctypes.byref(p), ctypes.byref(dS), ctypes.byref(dR),
                      ctypes.byref(dw) if dw is not None else None, ctypes.byref(dT)), ctx)
    if back is not None:
        back[...] = T
        return back
    return T


class MapPlan(_core.Closeable):
    """A plan for one bridge used many times: R is checked once, then every
    execute() is a contention-free, deterministic map. The plan keeps its own
    copy of what it needs (R may change afterwards) and its own context; it may
    be shared between threads (calls are serialised).

    deterministic=False makes determinism the plan's option instead of its
    price: each execute() takes the backend's fastest path over the checked
    bridge (never slower than lacuna.map; the last bits may differ from run to
    run), unless that call asks for determinism itself."""

    def __init__(self, R, n=None, device="auto", threads=0, *, deterministic=True):
        self._handle = None
        self._destroy = lib.lac_map_plan_destroy
        R = _core.as_index(R, "bridge")
        if R.ndim != 1:
            raise input_error("bridge must be a vector, not %d-d" % R.ndim, _lib.LAC_ERR_SHAPE)
        n = _targets(n, R)
        self._ctx = _core.Context(device, threads)
        dR = _core.describe(R)
        handle = _lib.lac_map_plan_t()
        check(lib.lac_map_plan_create(self._ctx.handle, ctypes.byref(dR), n, ctypes.byref(handle)), self._ctx)
        self._handle = handle
        self._deterministic = bool(deterministic)
        if not self._deterministic:
            check(lib.lac_map_plan_set_deterministic(handle, 0), self._ctx)
        self._lock = threading.Lock()

    def _live(self):
        if self._handle is None:
            raise input_error("the plan is closed")
        return self._handle

    @property
    def num_sources(self):
        return lib.lac_map_plan_num_sources(self._live())

    @property
    def num_targets(self):
        return lib.lac_map_plan_num_targets(self._live())

    @property
    def device(self):
        return self._ctx.backend

    @property
    def deterministic(self):
        """Whether every execute() is deterministic (the constructor's choice)."""
        return self._deterministic

    def execute(self, S, op="sum", weights=None, out=None, *, accumulate=False, nan="propagate", empty=0.0,
                deterministic=None):
        """As lacuna.map with the plan's bridge: deterministic when the plan
        is (the default), or when this call asks for it."""
        p = _map_params(op, self._deterministic if deterministic is None else bool(deterministic), accumulate, nan,
                        empty)
        with self._lock:
            handle = self._live()
            S, w, T, back = _operands(S, weights, out, lib.lac_map_plan_num_targets(handle), accumulate)
            if back is not None and accumulate:
                T[...] = back
            dS, dT = _core.describe(S), _core.describe(T)
            dw = _core.describe(w) if w is not None else None
            check(lib.lac_map_plan_execute(self._ctx.handle, handle, ctypes.byref(p), ctypes.byref(dS),
                                           ctypes.byref(dw) if dw is not None else None, ctypes.byref(dT)), self._ctx)
        if back is not None:
            back[...] = T
            return back
        return T

    __call__ = execute

    def close(self):
        """Frees the plan now (else when the object is collected)."""
        if self._handle is not None:
            self._destroy(ctypes.byref(self._handle))
            self._handle = None
        ctx = getattr(self, "_ctx", None)
        if ctx is not None:
            ctx.close()

    def __repr__(self):
        if self._handle is None:
            return "MapPlan(closed)"
        return "MapPlan(num_sources=%d, num_targets=%d, device=%r)" % (self.num_sources, self.num_targets,
                                                                       self.device)
