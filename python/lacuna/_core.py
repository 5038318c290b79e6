"""Errors, contexts, devices, numpy arrays as lac_array descriptors, and the
Ctrl-C guard for long calls with a callback.

ctypes releases the GIL for every call into the library (ctypes.CDLL), so other
Python threads run while Lacuna computes; callbacks take it back.
"""
import ctypes
import logging
import os
import signal
import threading

import numpy as np

from . import _lib
from ._lib import lib


# --------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------
class LacunaError(Exception):
    """A failed Lacuna call: `status` is the library's lac_status (negative),
    `status_name` its lac_status_string, `message` lac_last_error's detail."""

    def __init__(self, message, status=_lib.LAC_ERR_INTERNAL):
        self.status = int(status)
        self.status_name = _lib.text(lib.lac_status_string(self.status))
        self.message = message or self.status_name
        super().__init__(self.message)

    def __reduce__(self):
        return (type(self), (self.message, self.status))


class LacunaInputError(LacunaError, ValueError):
    """The caller's mistake (status -1..-99): bad argument, index out of range,
    shapes, dtype, file format, value."""


class LacunaUnsupportedError(LacunaInputError, NotImplementedError):
    """A valid request that Lacuna does not offer (LAC_ERR_UNSUPPORTED)."""


def error_class(status):
    if status == _lib.LAC_ERR_UNSUPPORTED:
        return LacunaUnsupportedError
    if -99 <= status <= -1:
        return LacunaInputError
    return LacunaError


def raise_status(status, message):
    raise error_class(status)(message, status)


def input_error(message, status=_lib.LAC_ERR_ARGUMENT):
    return error_class(status)(message, status)


def check(status, ctx=None):
    """Raises for a negative status with the library's detail; returns the status."""
    if status < 0:
        detail = _lib.text(lib.lac_last_error(ctx.handle if ctx is not None else None))
        raise_status(status, detail or _lib.text(lib.lac_status_string(status)))
    return status


# --------------------------------------------------------------------------
# Log: the library's messages go to the "lacuna" logger (unless LACUNA_LOG
# asks the library to print them itself)
# --------------------------------------------------------------------------
logger = logging.getLogger("lacuna")
_LEVELS = {_lib.LAC_LOG_ERROR: logging.ERROR, _lib.LAC_LOG_WARN: logging.WARNING, _lib.LAC_LOG_INFO: logging.INFO,
           _lib.LAC_LOG_DEBUG: logging.DEBUG}


def _on_log(level, message, user):
    try:
        logger.log(_LEVELS.get(level, logging.INFO), "%s", _lib.text(message))
    except BaseException:   # never let an exception cross back into C
        pass


_log_callback = _lib.lac_log_fn(_on_log)   # lives as long as the module


def _log_level():
    """What a new context sends up: warnings and errors always (the logger
    filters them), info and debug when the logger wants them at creation."""
    level = logger.getEffectiveLevel()
    if level <= logging.DEBUG:
        return _lib.LAC_LOG_DEBUG
    if level <= logging.INFO:
        return _lib.LAC_LOG_INFO
    return _lib.LAC_LOG_WARN


# --------------------------------------------------------------------------
# Contexts and devices
# --------------------------------------------------------------------------
def parse_device(device):
    """'auto' | 'cpu' | 'cuda' | 'cuda:N' | 'cuda:N,M,...' -> (backend, tuple of
    device ordinals or None)."""
    if not isinstance(device, str):
        raise input_error("device must be 'auto', 'cpu', 'cuda', 'cuda:N' or 'cuda:N,M,...', not %r" % (device,))
    d = device.strip().lower()
    if d == "auto":
        return _lib.LAC_BACKEND_AUTO, None
    if d == "cpu":
        return _lib.LAC_BACKEND_CPU, None
    if d == "cuda":
        return _lib.LAC_BACKEND_CUDA, None
    if d.startswith("cuda:"):
        ids = [x.strip() for x in d[5:].split(",")]
        if all(x.isdigit() for x in ids) and 0 < len(ids) <= _lib.LAC_MAX_DEVICES:
            return _lib.LAC_BACKEND_CUDA, tuple(int(x) for x in ids)
    raise input_error("device must be 'auto', 'cpu', 'cuda', 'cuda:N' or 'cuda:N,M,...', not %r" % (device,))


def check_threads(threads):
    if threads is None:
        return 0
    if isinstance(threads, bool) or not isinstance(threads, (int, np.integer)) or threads < 0:
        raise input_error("threads must be a non-negative integer (0: all), not %r" % (threads,))
    return int(threads)


class Closeable:
    """Objects that own library handles: closed by close(), by a with-block or
    when collected (errors while collecting are dropped)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


class Context(Closeable):
    """One lac_ctx_t. Used by one thread at a time: either through the
    per-thread cache (context()) or owned by one object with a lock."""

    def __init__(self, device="auto", threads=0):
        backend, ordinal = parse_device(device)
        p = _lib.params(_lib.lac_ctx_params, "lac_ctx_params_init")
        p.backend = backend
        if ordinal is not None:
            p.num_devices = len(ordinal)
            for i, d in enumerate(ordinal):
                p.device_ids[i] = d
        p.threads = check_threads(threads)
        if not os.environ.get("LACUNA_LOG"):
            p.log = _log_callback
            p.log_level = _log_level()
        self.handle = None
        self._destroy = lib.lac_ctx_destroy   # kept for interpreter shutdown
        handle = _lib.lac_ctx_t()
        st = lib.lac_ctx_create(ctypes.byref(p), ctypes.byref(handle))
        if st < 0:
            raise_status(st, _lib.text(lib.lac_last_error(None)))
        self.handle = handle
        self.device = device
        self.lock = threading.RLock()

    @property
    def backend(self):
        return {_lib.LAC_BACKEND_CPU: "cpu", _lib.LAC_BACKEND_CUDA: "cuda"}.get(lib.lac_ctx_backend(self.handle), "?")

    @property
    def threads(self):
        return lib.lac_ctx_threads(self.handle)

    @property
    def rank(self):
        """This process's MPI rank (0 in one process)."""
        return lib.lac_ctx_rank(self.handle)

    @property
    def ranks(self):
        """MPI ranks the context works with (1 in one process)."""
        return lib.lac_ctx_ranks(self.handle)

    def close(self):
        if self.handle is not None:
            self._destroy(ctypes.byref(self.handle))
            self.handle = None


_local = threading.local()


def context(device="auto", threads=0):
    """This thread's context for (device, threads), made on first use."""
    key = (str(device).strip().lower() if isinstance(device, str) else device, check_threads(threads))
    cache = getattr(_local, "contexts", None)
    if cache is None:
        cache = _local.contexts = {}
    ctx = cache.get(key)
    if ctx is None:
        ctx = cache[key] = Context(device, threads)
    return ctx


# --------------------------------------------------------------------------
# numpy arrays <-> lac_array
# --------------------------------------------------------------------------
DTYPES = {np.dtype(np.float32): _lib.LAC_FLOAT32, np.dtype(np.float64): _lib.LAC_FLOAT64,
          np.dtype(np.int32): _lib.LAC_INT32, np.dtype(np.int64): _lib.LAC_INT64,
          np.dtype(np.bool_): _lib.LAC_BOOL}


def describe(a):
    """A non-owning lac_array over a C-contiguous numpy array of a Lacuna dtype."""
    d = _lib.lac_array()
    d.data = a.ctypes.data if a.size else None
    d.dtype = DTYPES[a.dtype]
    if a.ndim > _lib.LAC_MAX_DIMS:
        raise input_error("arrays have at most %d dimensions, not %d" % (_lib.LAC_MAX_DIMS, a.ndim),
                          _lib.LAC_ERR_SHAPE)
    d.ndim = a.ndim
    for i, s in enumerate(a.shape):
        d.shape[i] = s
    d.memory = _lib.LAC_MEM_HOST
    d.owner = None
    if a.size == 0:
        # a valid, never read address for empty arrays (the library checks data != NULL)
        d.data = ctypes.addressof(_EMPTY)
    return d


_EMPTY = ctypes.c_double(0)


def _native(a):
    """Native byte order (a big-endian array is converted)."""
    if a.dtype.byteorder not in ("=", "|") and a.dtype.byteorder != ("<" if np.little_endian else ">"):
        return a.astype(a.dtype.newbyteorder("="))
    return a


def as_float(x, name, dtype=None):
    """float32/float64 as they are; other real numbers (ints, bools, float16)
    as float64 (float16 as float32), or as `dtype` when given."""
    a = np.asarray(x)
    if dtype is None:
        if a.dtype in (np.float32, np.float64):
            dtype = a.dtype
        elif a.dtype == np.float16:
            dtype = np.dtype(np.float32)
        elif a.dtype.kind in "biuf":
            dtype = np.dtype(np.float64)
        else:
            raise input_error("%s has dtype %s; Lacuna takes float32 or float64 values" % (name, a.dtype),
                              _lib.LAC_ERR_DTYPE)
    elif a.dtype.kind not in "biuf":
        raise input_error("%s has dtype %s; Lacuna takes float32 or float64 values" % (name, a.dtype),
                          _lib.LAC_ERR_DTYPE)
    return np.ascontiguousarray(_native(a), dtype=dtype)


def as_index(x, name):
    """int32/int64 as they are; other integers as int64; anything else refused."""
    a = np.asarray(x)
    if a.dtype.kind not in "iu":
        if a.size == 0 and a.dtype.kind == "f":   # an empty list: np.asarray([]) is float64
            return np.zeros(a.shape, np.int64)
        raise input_error("%s has dtype %s; indices must be integers (int32 or int64)" % (name, a.dtype),
                          _lib.LAC_ERR_DTYPE)
    if a.dtype in (np.int32, np.int64):
        return np.ascontiguousarray(_native(a))
    if a.dtype == np.uint64 and a.size and a.max() > np.iinfo(np.int64).max:
        i = int(np.argmax(a > np.iinfo(np.int64).max))
        raise input_error("%s[%d] = %d does not fit in int64" % (name, i, a.flat[i]), _lib.LAC_ERR_RANGE)
    return np.ascontiguousarray(a, dtype=np.int64)


def as_bool(x, name):
    a = np.asarray(x)
    if a.dtype != np.bool_:
        raise input_error("%s has dtype %s; a mask must be bool" % (name, a.dtype), _lib.LAC_ERR_DTYPE)
    return np.ascontiguousarray(a)


def writable_out(out, name, dtype, shape):
    """(the array the library writes, the caller's array to copy it into or None).
    A C-contiguous writable array of the right dtype is written in place."""
    if not isinstance(out, np.ndarray):
        raise input_error("%s must be a numpy array, not %s" % (name, type(out).__name__))
    if out.dtype != dtype:
        raise input_error("%s has dtype %s but must be %s" % (name, out.dtype, np.dtype(dtype)), _lib.LAC_ERR_DTYPE)
    if tuple(out.shape) != tuple(shape):
        raise input_error("%s has shape %s but must be %s" % (name, tuple(out.shape), tuple(shape)),
                          _lib.LAC_ERR_SHAPE)
    if not out.flags.writeable:
        raise input_error("%s is read-only" % name)
    if out.flags.c_contiguous and out.dtype.isnative:
        return out, None
    return np.ascontiguousarray(out), out


def fspath(path, name="path"):
    try:
        p = os.fspath(path)
    except TypeError:
        raise input_error("%s must be a file path, not %s" % (name, type(path).__name__)) from None
    if isinstance(p, str):
        p = p.encode()
    if b"\0" in p:
        raise input_error("%s contains a NUL byte" % name)
    return p


# --------------------------------------------------------------------------
# Ctrl-C during a call with a callback
# --------------------------------------------------------------------------
class Interrupt:
    """Lets Ctrl-C stop a long call whose callback can say "stop".

    Python runs its SIGINT handler only between bytecodes of the main thread,
    that is, inside our callback while the library computes, and possibly at
    the callback's very first instruction, before any try block could catch
    what it raises. So in the main thread the guard swaps in a handler that
    records instead of raising: the default handler's KeyboardInterrupt, or
    whatever a custom Python handler raises (the custom handler still runs).
    The callback then returns 1 (stop), and after the call returns
    raise_pending() raises the recorded exception. The callback also catches
    what is raised in it (the user's own callback's errors). A handler of
    SIG_IGN or SIG_DFL is left alone (Ctrl-C is then ignored, or ends the
    process, as the program asked)."""

    def __init__(self):
        self.pending = None
        self._previous = None
        self._installed = False

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            try:
                current = signal.getsignal(signal.SIGINT)
                if callable(current):
                    self._previous = current
                    signal.signal(signal.SIGINT, self._record)
                    self._installed = True
            except (ValueError, TypeError):   # not the main interpreter
                self._installed = False
        return self

    def _record(self, signum, frame):
        previous = self._previous
        try:
            if previous is signal.default_int_handler:
                raise KeyboardInterrupt
            previous(signum, frame)
        except BaseException as e:
            self.catch(e)

    def __exit__(self, *exc):
        if self._installed:
            signal.signal(signal.SIGINT, self._previous)
            self._installed = False
        return False

    def stop(self):
        """For the callback: whether to tell the library to stop."""
        return self.pending is not None

    def catch(self, exc):
        if self.pending is None:
            self.pending = exc

    def raise_pending(self):
        if self.pending is not None:
            exc, self.pending = self.pending, None
            raise exc
