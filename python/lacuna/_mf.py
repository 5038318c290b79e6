"""mf: matrix factorisation of sparse ratings (lac_ratings_*, lac_mf_*)."""
import ctypes
import os
import re
import struct
import tempfile
import threading

import numpy as np

from . import _core, _lib
from ._core import check, input_error
from ._lib import lib

_MODELS = ("plain", "neighbourhood", "neighborhood")
_INT_ID = re.compile(r"-?(0|[1-9][0-9]*)\Z")
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


# --------------------------------------------------------------------------
# Ids: integers go to the library as int64 (lac_ratings_from_arrays); strings
# through a temporary RFC 4180 CSV file that lac_ratings_read reads back, the
# one public way to hand the library text ids.
# --------------------------------------------------------------------------
def _ids(x, name):
    """('int', int64 array) or ('str', list of str) for a 1-D sequence of ids."""
    a = np.asarray(x)
    if a.ndim == 0:
        a = a.reshape(1)
    if a.ndim != 1:
        raise input_error("%s must be a vector of ids, not %d-d" % (name, a.ndim), _lib.LAC_ERR_SHAPE)
    if a.dtype.kind in "iu":
        return "int", _core.as_index(a, name)
    if a.size == 0:
        return "int", np.zeros(0, np.int64)
    if a.dtype.kind == "U":
        return "str", [str(s) for s in a]
    if a.dtype.kind == "S":
        return "str", [s.decode("utf-8") for s in a]
    if a.dtype.kind == "O":
        out = []
        for i, s in enumerate(a):
            if isinstance(s, (bool, np.bool_)) or not isinstance(s, (str, bytes, int, np.integer)):
                raise input_error("%s[%d] = %r: ids are integers or strings" % (name, i, s), _lib.LAC_ERR_DTYPE)
            out.append(s.decode("utf-8") if isinstance(s, bytes) else str(s))
        return "str", out
    raise input_error("%s has dtype %s: ids are integers or strings" % (name, a.dtype), _lib.LAC_ERR_DTYPE)


def _id_text(kind, ids):
    return [str(int(v)) for v in ids] if kind == "int" else ids


def _csv_field(s, name, i):
    if s == "":
        raise input_error("%s[%d] is an empty id" % (name, i), _lib.LAC_ERR_VALUE)
    if "\0" in s or "\r" in s:
        raise input_error("%s[%d] = %r: an id cannot hold NUL or carriage-return characters" % (name, i, s))
    return '"' + s.replace('"', '""') + '"'


class _Ratings:
    """A lac_ratings_t made from arrays (or read from a file); destroyed on close."""

    def __init__(self, ctx, users, items=None, ratings=None, path=None, format="auto", skip_bad=False, pairs=False):
        self.handle = _lib.lac_ratings_t()
        if path is not None:   # pairs: "user item" lines read as rating 1 (interactions)
            self._read(ctx, _core.fspath(path, "ratings file"), format, skip_bad, pairs)
            return
        ku, u = _ids(users, "users")
        ki, it = _ids(items, "items")
        if len(u) != len(it):
            raise input_error("users has %d ids but items has %d" % (len(u), len(it)), _lib.LAC_ERR_SHAPE)
        if ratings is None:
            r = np.zeros(len(u), np.float32)
        else:
            r = _core.as_float(ratings, "ratings", np.float32)
            if r.ndim == 0:
                r = r.reshape(1)
            if r.shape != (len(u),):
                raise input_error("ratings has shape %s but there are %d (user, item) pairs" % (r.shape, len(u)),
                                  _lib.LAC_ERR_SHAPE)
            bad = ~np.isfinite(r)
            if bad.any():
                i = int(np.argmax(bad))
                raise input_error("ratings[%d] = %r is not finite" % (i, float(r[i])), _lib.LAC_ERR_VALUE)
        if ku == "int" and ki == "int":
            check(lib.lac_ratings_from_arrays(ctx.handle, len(u), u.ctypes.data, it.ctypes.data, r.ctypes.data,
                                              ctypes.byref(self.handle)), ctx)
            return
        fd, tmp = tempfile.mkstemp(prefix="lacuna-ratings-", suffix=".csv")
        try:
            with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
                us, its = _id_text(ku, u), _id_text(ki, it)
                for i in range(len(us)):
                    f.write("%s,%s,%r\n" % (_csv_field(us[i], "users", i), _csv_field(its[i], "items", i),
                                            float(r[i])))
            self._read(ctx, tmp.encode(), "csv", False, False)
        finally:
            os.unlink(tmp)

    def _read(self, ctx, path, format, skip_bad, pairs):
        p = _lib.params(_lib.lac_ratings_read_params, "lac_ratings_read_params_init")
        if not isinstance(format, str):
            raise input_error("format must be a name (auto, triples, movielens, udata, csv, mm), not %r" % (format,))
        fmt = _lib.c_enum()
        check(lib.lac_ratings_format_parse(format.encode(), ctypes.byref(fmt)))
        p.format = fmt.value
        p.skip_bad = 1 if skip_bad else 0
        p.pairs = 1 if pairs else 0
        check(lib.lac_ratings_read(ctx.handle, path, ctypes.byref(p), ctypes.byref(self.handle)), ctx)

    @property
    def count(self):
        return lib.lac_ratings_count(self.handle)

    def close(self):
        if self.handle:
            lib.lac_ratings_destroy(ctypes.byref(self.handle))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def _as_ratings(ctx, data, name, pairs=False):
    """A _Ratings from a path or a (users, items, ratings) tuple."""
    if isinstance(data, (str, bytes, os.PathLike)):
        return _Ratings(ctx, None, path=data, pairs=pairs)
    if isinstance(data, (tuple, list)) and len(data) == 3:
        return _Ratings(ctx, data[0], data[1], data[2])
    raise input_error("%s must be a ratings file path or a (users, items, ratings) tuple" % name)


def _ids_array(texts):
    """int64 when every id is an integer's canonical text, else an object array of str."""
    if all(_INT_ID.match(t) and _INT64_MIN <= int(t) <= _INT64_MAX for t in texts):
        return np.array([int(t) for t in texts], dtype=np.int64)
    out = np.empty(len(texts), dtype=object)
    out[:] = texts
    return out


# --------------------------------------------------------------------------
# The model file (docs/mf.md, "Model file"): the public header has no call
# that hands out the factors, so they are read from a saved model.
# --------------------------------------------------------------------------
_MAGIC = b"LACUNAMF"
_HEADER = struct.Struct("<qqiidddddffiiQqqq")   # num_users .. item_id_bytes
_HEADER2_SIZE = 160                              # version 2's addition (src/mf/model_file.c)
_HEADER3_SIZE = 8                                # version 3's: the bucket keys' table count
_HEADER4_SIZE = 8                                # version 4's: implicit training's negative exponent
_HEADER5_SIZE = 8                                # version 5's: the negatives' correction


def _read_model_bytes(data):
    if data[:8] != _MAGIC:
        raise _core.LacunaError("not a Lacuna mf model", _lib.LAC_ERR_FORMAT)
    version, header_bytes = struct.unpack_from("<II", data, 8)
    if (version, header_bytes) not in ((1, _HEADER.size), (2, _HEADER.size + _HEADER2_SIZE),
                                       (3, _HEADER.size + _HEADER2_SIZE + _HEADER3_SIZE),
                                       (4, _HEADER.size + _HEADER2_SIZE + _HEADER3_SIZE + _HEADER4_SIZE),
                                       (5, _HEADER.size + _HEADER2_SIZE + _HEADER3_SIZE + _HEADER4_SIZE
                                        + _HEADER5_SIZE)):
        raise _core.LacunaError("mf model file version %d (header %d bytes): this package reads versions 1 to 5"
                                % (version, header_bytes), _lib.LAC_ERR_UNSUPPORTED)
    (num_users, num_items, k, use_bias, lam, lam_b, alpha, beta, mean, rmin, rmax, epochs, deterministic, seed,
     rated, ub, ib) = _HEADER.unpack_from(data, 16)
    off = 16 + header_bytes   # versions 2 to 5 add the model kind, the neighbourhood model's parameters, keys

    def take(dtype, count):
        nonlocal off
        a = np.frombuffer(data, dtype=dtype, count=count, offset=off)
        off += a.nbytes
        return a

    P = take("<f4", num_users * k).reshape(num_users, k)
    Q = take("<f4", num_items * k).reshape(num_items, k)
    bu = take("<f4", num_users)
    bi = take("<f4", num_items)
    return {"P": P, "Q": Q, "user_bias": bu, "item_bias": bi, "mean": mean, "rating_range": (rmin, rmax),
            "epochs": epochs}


# --------------------------------------------------------------------------
# The estimator
# --------------------------------------------------------------------------
_PARAM_NAMES = ("k", "lambda", "lambda_bias", "alpha", "beta", "epochs", "use_bias", "patience", "min_gain",
                "deterministic", "seed")
_NBR_METHODS = ("simlsh", "gsm", "rpcos", "minhash", "random", "simlsh-centred")
_GROUPS = ("b", "bhat", "u", "v", "w", "c")
_LOSSES = ("xent", "bpr")   # lac_mf_loss order


class MF(_core.Closeable):
    """Matrix factorisation of sparse ratings by SGD (docs/mf.md):
    r_hat(u, i) = mu + b_u + bhat_i + p_u . q_i.

    k: factors; model: 'plain', or 'neighbourhood' (CULSH-MF, eq. 1 of the
    paper: S^K(j) found by `neighbours` ('simlsh', 'gsm', 'rpcos', 'minhash',
    'random', 'simlsh-centred'), K of them (`K`), LSH banding p x q; learning
    rates `rates` and regularisers `lambdas`: dicts over the groups b, bhat,
    u, v, w, c (defaults: the paper's Table 5), decay `beta_groups`);
    threads: CPU threads (0: all); deterministic: the same model for the same
    seed and thread count (CPU only); seed; device: 'auto', 'cpu', 'cuda' or
    'cuda:N'. Keyword-only: epochs, lambda_ (L2 of the factors), lambda_bias,
    alpha, beta (learning rate alpha / (1 + beta t^1.5)), use_bias, patience,
    min_gain (early stopping with validation), callback(dict) called after
    every epoch (a true return stops training). None keeps the library's
    default. search=True: fit chooses those of k, lambda_ and alpha left None
    on 10% of the training ratings held out (plain model; as `lacuna mf
    train` without them) and trains on all of them with the winner; search_
    says what was chosen. Ids may be any integers or strings.
    Implicit feedback (docs/mf.md): implicit=True reads every rating as an
    interaction (weighted=True: its weight), loss 'xent' (cross-entropy with
    `negatives` sampled negatives each; negative_share interactions sharing
    one draw of them) or 'bpr'; negatives drawn with probability proportional
    to (the item's interactions)^negative_exponent (0: uniform; default: 0.75
    for the plain model, 0 for the neighbourhood model), and after training
    the item biases take negative_correction x exponent x log(interactions)
    (in [0, 1]; default 1; with search=True chosen, 0 or 1, on held-out
    interactions, as is lambda_ when None); no validation set. On one GPU
    the plain model's cross-entropy takes in-batch negatives (the other
    items of the kernel's warp), weighted to `negatives` and to that law.
    warm_epochs (neighbourhood model): up to that many plain epochs first on
    its factors with W = C = 0 (lac_mf_params.warm_epochs; report_ gives
    warm_epochs and warm_seconds).
    """

    def __init__(self, k=None, model="plain", threads=0, deterministic=False, seed=None, device="auto", *,
                 epochs=None, lambda_=None, lambda_bias=None, alpha=None, beta=None, use_bias=None, patience=None,
                 min_gain=None, callback=None, neighbours=None, K=None, p=None, q=None, rates=None, lambdas=None,
                 beta_groups=None, search=False, implicit=False, loss="xent", negatives=None, weighted=False,
                 warm_epochs=None, negative_share=None, negative_exponent=None, negative_correction=None):
        if model not in _MODELS:
            raise input_error("model must be 'plain' or 'neighbourhood', not %r" % (model,))
        if model == "plain" and any(v is not None for v in (neighbours, K, p, q, rates, lambdas, beta_groups,
                                                            warm_epochs)):
            raise input_error("neighbours, K, p, q, rates, lambdas, beta_groups and warm_epochs are the "
                              "neighbourhood model's")
        _core.parse_device(device)
        self.model = model
        self.device = device
        self.threads = _core.check_threads(threads)
        self.callback = callback
        self._params = _lib.params(_lib.lac_mf_params, "lac_mf_params_init")
        # what fit chooses on 10% of the training ratings held out (lac_mf_tune)
        self._search = 0
        if search:
            for bit, value in ((_lib.LAC_MF_TUNE_K, k), (_lib.LAC_MF_TUNE_LAMBDA, lambda_),
                               (_lib.LAC_MF_TUNE_ALPHA, alpha),
                               (_lib.LAC_MF_TUNE_CORRECTION, negative_correction if implicit else 0)):
                if value is None:
                    self._search |= bit
        given = {"k": k, "lambda": lambda_, "lambda_bias": lambda_bias, "alpha": alpha, "beta": beta,
                 "epochs": epochs, "use_bias": use_bias, "patience": patience, "min_gain": min_gain,
                 "deterministic": deterministic, "seed": seed}
        for name, value in given.items():
            if value is None:
                continue
            if name in ("use_bias", "deterministic"):
                value = 1 if value else 0
            elif name in ("k", "epochs", "patience", "seed"):
                if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                    raise input_error("%s must be an integer, not %r" % (name if name != "lambda" else "lambda_",
                                                                          value))
                if name == "seed" and not 0 <= value < (1 << 64):
                    raise input_error("seed must be in [0, 2^64), not %d" % value)
                if name != "seed" and not -(1 << 31) <= value < (1 << 31):
                    raise input_error("%s = %d is out of range" % (name, value))
                value = int(value)
            else:
                value = float(value)
            setattr(self._params, name, value)
        if model != "plain":
            self._set_neighbourhood(neighbours, K, p, q, rates, lambdas, beta_groups)
        if warm_epochs is not None:
            if isinstance(warm_epochs, bool) or not isinstance(warm_epochs, (int, np.integer)) or \
                    not 0 <= warm_epochs < (1 << 31):
                raise input_error("warm_epochs must be an integer >= 0, not %r" % (warm_epochs,))
            self._params.warm_epochs = int(warm_epochs)
        self._set_implicit(implicit, loss, negatives, weighted, negative_share, negative_exponent, beta is None,
                           rates is None, beta_groups is None, negative_correction)
        why = lib.lac_mf_params_check(ctypes.byref(self._params))
        if why:
            raise input_error("mf parameters: " + _lib.text(why))
        self._model = None
        self._destroy = lib.lac_mf_model_destroy
        self._lock = threading.RLock()
        self._file = None          # the parsed model file (factors), made on demand
        self._user_ids = self._item_ids = None
        self.report_ = None
        self.search_ = None
        self.update_report_ = None
        self.history_ = []

    def _set_neighbourhood(self, neighbours, K, p, q, rates, lambdas, beta_groups):
        par = self._params
        par.model = _lib.LAC_MF_MODEL_NEIGHBOURHOOD
        nb = par.neighbours
        if neighbours is not None:
            if neighbours not in _NBR_METHODS:
                raise input_error("neighbours must be one of %s, not %r" % (", ".join(_NBR_METHODS), neighbours))
            nb.method = _NBR_METHODS.index(neighbours)
        for name, value in (("k", K), ("p", p), ("q", q)):
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 0 < value < (1 << 31):
                raise input_error("%s must be a positive integer, not %r" % ("K" if name == "k" else name, value))
            setattr(nb, name, int(value))
        for field, given in (("rates", rates), ("lambdas", lambdas)):
            if given is None:
                continue
            if not isinstance(given, dict) or set(given) - set(_GROUPS):
                raise input_error("%s must be a dict over the groups %s" % (field, ", ".join(_GROUPS)))
            for g, v in given.items():
                setattr(getattr(par, field), g, float(v))
        if beta_groups is not None:
            par.beta_groups = float(beta_groups)
        nb.seed = par.seed

    def _set_implicit(self, implicit, loss, negatives, weighted, negative_share, negative_exponent, default_beta,
                      default_rates, default_beta_groups, negative_correction=None):
        par = self._params
        if not implicit:
            if loss != "xent" or negatives is not None or weighted or negative_share is not None or \
                    negative_exponent is not None or negative_correction is not None:
                raise input_error("loss, negatives, negative_share, negative_exponent, negative_correction and "
                                  "weighted go with implicit=True")
            return
        if loss not in _LOSSES:
            raise input_error("loss must be 'xent' or 'bpr', not %r" % (loss,))
        par.implicit = 1
        par.loss = _LOSSES.index(loss)
        par.weighted = 1 if weighted else 0
        if negatives is not None:
            if isinstance(negatives, bool) or not isinstance(negatives, (int, np.integer)) or \
                    not 0 < negatives < (1 << 31):
                raise input_error("negatives must be a positive integer, not %r" % (negatives,))
            par.negatives = int(negatives)
        if negative_share is not None:
            if isinstance(negative_share, bool) or not isinstance(negative_share, (int, np.integer)) or \
                    not 0 < negative_share <= 64:
                raise input_error("negative_share must be an integer in [1, 64], not %r" % (negative_share,))
            par.negative_share = int(negative_share)
        if negative_exponent is not None:
            if isinstance(negative_exponent, bool) or not isinstance(negative_exponent, (int, float, np.integer,
                                                                                          np.floating)) or \
                    not (0 <= negative_exponent <= 2 or negative_exponent == -1):
                raise input_error("negative_exponent must be a number in [0, 2] (or -1: the model's default), not %r"
                                  % (negative_exponent,))
            par.negative_exponent = float(negative_exponent)
        if negative_correction is not None:
            if isinstance(negative_correction, bool) or not isinstance(negative_correction, (int, float, np.integer,
                                                                                              np.floating)) or \
                    not 0 <= negative_correction <= 1:
                raise input_error("negative_correction must be a number in [0, 1], not %r" % (negative_correction,))
            par.negative_correction = float(negative_correction)
        # the command line's implicit defaults (docs/mf.md): a slower decay, larger rates for eq. (1)
        if default_beta:
            par.beta = 0.1
        if default_rates:
            for g in _GROUPS:
                setattr(par.rates, g, 0.02 if g in ("w", "c") else 0.2)
        if default_beta_groups:
            par.beta_groups = 0.1

    # -- parameters -----------------------------------------------------------
    def get_params(self):
        """The training parameters (the model's after fit or load)."""
        p = self._params
        out = {name: getattr(p, name) for name in _PARAM_NAMES}
        out["lambda_"] = out.pop("lambda")
        out["use_bias"] = bool(out["use_bias"])
        out["deterministic"] = bool(out["deterministic"])
        out.update(model=self.model, threads=self.threads, device=self.device)
        if p.implicit:
            out.update(implicit=True, loss=_LOSSES[p.loss], negatives=p.negatives, weighted=bool(p.weighted),
                       negative_share=p.negative_share, negative_exponent=p.negative_exponent,
                       negative_correction=p.negative_correction)
        if p.model == _lib.LAC_MF_MODEL_NEIGHBOURHOOD:
            nb = p.neighbours
            out.update(neighbours=_NBR_METHODS[nb.method], K=nb.k, p=nb.p, q=nb.q,
                       rates={g: getattr(p.rates, g) for g in _GROUPS},
                       lambdas={g: getattr(p.lambdas, g) for g in _GROUPS}, beta_groups=p.beta_groups)
        return out

    @property
    def k(self):
        return self._params.k

    def _ctx(self):
        return _core.context(self.device, self.threads)

    def _live(self):
        if self._model is None or not self._model:
            raise input_error("the model is not fitted: call fit() or MF.load()")
        return self._model

    def _adopt(self, handle):
        with self._lock:
            if self._model:
                self._destroy(ctypes.byref(self._model))
            self._model = handle
            self._file = None
            self._user_ids = self._item_ids = None
            p = _lib.params(_lib.lac_mf_params, "lac_mf_params_init")
            check(lib.lac_mf_model_get_params(handle, ctypes.byref(p)))
            self._params = p
            self.model = "neighbourhood" if p.model == _lib.LAC_MF_MODEL_NEIGHBOURHOOD else "plain"

    # -- training ---------------------------------------------------------------
    def fit(self, users, items=None, ratings=None, valid=None, *, format="auto", skip_bad=False):
        """Trains on (users, items, ratings) arrays, or on a ratings file:
        fit(path) (format: auto, triples, movielens, udata, csv, mm). With
        implicit=True (not weighted) the interactions alone will do:
        fit(users, items), or a file of "user item" lines. valid: a path or a
        (users, items, ratings) tuple, for early stopping. Returns self;
        report_ holds the run's summary, history_ one dict per epoch. Ctrl-C
        stops training after the current epoch, keeps the model trained so far
        and raises KeyboardInterrupt."""
        ctx = self._ctx()
        seen_only = bool(self._params.implicit) and not self._params.weighted
        if items is None and ratings is None and isinstance(users, (str, bytes, os.PathLike)):
            train = _Ratings(ctx, None, path=users, format=format, skip_bad=skip_bad,
                             pairs=bool(self._params.implicit))
        elif items is not None and ratings is None and seen_only:   # every pair is an interaction
            train = _Ratings(ctx, users, items, np.ones(len(np.asarray(items)), np.float32))
        elif items is None or ratings is None:
            raise input_error("fit takes (users, items, ratings) arrays (implicit=True: (users, items) will do) "
                              "or a ratings file path")
        else:
            train = _Ratings(ctx, users, items, ratings)
        val = None
        try:
            if valid is not None:
                val = _as_ratings(ctx, valid, "valid")
            history = []
            guard = _core.Interrupt()
            callback = self.callback

            def on_epoch(epoch, train_rmse, valid_rmse, seconds, user):
                try:
                    row = {"epoch": epoch, "train_rmse": train_rmse, "valid_rmse": valid_rmse, "seconds": seconds}
                    history.append(row)
                    if guard.stop():
                        return 1
                    if callback is not None and callback(row):
                        return 1
                    return 0
                except BaseException as e:   # KeyboardInterrupt, or the callback's own error
                    guard.catch(e)
                    return 1

            fn = _lib.lac_mf_epoch_fn(on_epoch)
            handle = _lib.lac_mf_model_t()
            report = _lib.lac_mf_report()
            params = self._params
            if self._search:
                params = _lib.lac_mf_params.from_buffer_copy(self._params)
                tp = _lib.params(_lib.lac_mf_tune_params, "lac_mf_tune_params_init")
                tp.search = self._search
                tp.seed = params.seed
                tr = _lib.lac_mf_tune_report()
                check(lib.lac_mf_tune(ctx.handle, ctypes.byref(tp), ctypes.byref(params), train.handle,
                                      ctypes.byref(tr)), ctx)
                self.search_ = {"searched": [n for b, n in ((_lib.LAC_MF_TUNE_K, "k"),
                                                            (_lib.LAC_MF_TUNE_LAMBDA, "lambda_"),
                                                            (_lib.LAC_MF_TUNE_ALPHA, "alpha"),
                                                            (_lib.LAC_MF_TUNE_CORRECTION, "negative_correction"))
                                             if tr.searched & b],
                                "k": params.k, "lambda_": getattr(params, "lambda"), "alpha": params.alpha,
                                "epochs": params.epochs, "holdout": tr.holdout, "holdout_rmse": tr.rmse,
                                "default_rmse": tr.start_rmse, "trials": tr.trials, "seconds": tr.seconds}
                if params.implicit:
                    self.search_.update(negative_correction=params.negative_correction, holdout_ndcg=tr.ndcg,
                                        default_ndcg=tr.start_ndcg)
            with guard:
                st = lib.lac_mf_train(ctx.handle, ctypes.byref(params), train.handle,
                                      val.handle if val is not None else None, fn, None, ctypes.byref(handle),
                                      ctypes.byref(report))
            if st >= 0 and handle:
                self._adopt(handle)
                self.report_ = {name: getattr(report, name) for name, _ in report._fields_}
                self.history_ = history
            guard.raise_pending()
            check(st, ctx)
        finally:
            train.close()
            if val is not None:
                val.close()
        return self

    def update(self, users, items=None, ratings=None, *, rounds=None, sweeps=None, format="auto", skip_bad=False):
        """Folds new ratings into the fitted model without retraining (online
        updates, docs/mf.md): (users, items, ratings) arrays or a ratings
        file. New users and items join the model; new rows are solved with
        the rest fixed (`rounds` times), then `sweeps` SGD epochs run over
        the touched rows. Returns self; update_report_ holds seconds,
        ratings, new_users, new_items, replaced, rmse_before and rmse_after
        (the RMSE on the new ratings before and after)."""
        model = self._live()
        up = _lib.params(_lib.lac_mf_update_params, "lac_mf_update_params_init")
        for name, value in (("rounds", rounds), ("sweeps", sweeps)):
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 0 <= value < (1 << 31):
                raise input_error("%s must be a non-negative integer, not %r" % (name, value))
            setattr(up, name, int(value))
        why = lib.lac_mf_update_params_check(ctypes.byref(up))
        if why:
            raise input_error("update parameters: " + _lib.text(why))
        ctx = self._ctx()
        if items is None and ratings is None and isinstance(users, (str, bytes, os.PathLike)):
            fresh = _Ratings(ctx, None, path=users, format=format, skip_bad=skip_bad)
        elif items is None or ratings is None:
            raise input_error("update takes (users, items, ratings) arrays or a ratings file path")
        else:
            fresh = _Ratings(ctx, users, items, ratings)
        with fresh:
            handle = _lib.lac_mf_model_t()
            report = _lib.lac_mf_update_report()
            with self._lock:
                check(lib.lac_mf_update(ctx.handle, ctypes.byref(up), model, fresh.handle, ctypes.byref(handle),
                                        ctypes.byref(report)), ctx)
                self._adopt(handle)
        self.update_report_ = {name: getattr(report, name) for name, _ in report._fields_}
        return self

    # -- using the model ---------------------------------------------------------
    def predict(self, users, items):
        """Predicted ratings (float32) for pairs of ids, clamped to the training
        range; unknown users or items get mu plus the known biases."""
        scalar = np.ndim(users) == 0 and np.ndim(items) == 0
        ctx = self._ctx()
        with _Ratings(ctx, users, items) as r:
            out = np.empty(r.count, np.float32)
            check(lib.lac_mf_predict(ctx.handle, self._live(), r.handle, out.ctypes.data if out.size else None,
                                     None, None, None), ctx)
        return out[0] if scalar else out

    def evaluate(self, users, items=None, ratings=None, *, n=None, negatives=99, seed=1):
        """{'rmse', 'mae', 'unknown'} on (users, items, ratings) or a ratings file.
        With n: the ranking metrics at n instead, as `lacuna mf evaluate`:
        {'hr', 'ndcg', 'precision', 'recall', 'map', 'users', 'pairs',
        'skipped'}; negatives sampled per test item (NCF's protocol, 99), or
        0 for full ranking; ratings may then be left out (every pair counts)."""
        ctx = self._ctx()
        if n is not None and items is not None and ratings is None:
            ratings = np.ones(len(np.asarray(items)), np.float32)
        if items is None and ratings is None:
            r = _as_ratings(ctx, users, "evaluate's ratings", pairs=n is not None)
        else:
            r = _Ratings(ctx, users, items, ratings)
        if n is not None:
            for name, v, lo in (("n", n, 1), ("negatives", negatives, 0)):
                if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not lo <= v < (1 << 31):
                    raise input_error("%s must be an integer >= %d, not %r" % (name, lo, v))
            p = _lib.params(_lib.lac_mf_rank_params, "lac_mf_rank_params_init")
            p.n, p.negatives, p.seed = int(n), int(negatives), int(seed)
            rep = _lib.lac_mf_rank_report()
            with r:
                check(lib.lac_mf_rank_evaluate(ctx.handle, ctypes.byref(p), self._live(), r.handle,
                                               ctypes.byref(rep)), ctx)
            return {name: getattr(rep, name) for name, _ in rep._fields_}
        with r:
            rmse, mae, unknown = ctypes.c_double(), ctypes.c_double(), ctypes.c_int64()
            check(lib.lac_mf_predict(ctx.handle, self._live(), r.handle, None, ctypes.byref(rmse), ctypes.byref(mae),
                                     ctypes.byref(unknown)), ctx)
        return {"rmse": rmse.value, "mae": mae.value, "unknown": unknown.value}

    def recommend(self, users, n=10, *, scores=False, unknown="popular"):
        """The n best items (ids) for each user, leaving out the items the user
        rated in training: an (len(users), n) array, or (n,) for one user.
        Where fewer than n items remain, the row ends with -1 (integer ids) or
        None (string ids) and NaN scores. scores=True returns (items, scores).
        A user the model does not know gets the n items rated most often in
        training, with NaN scores (as the tool's 'popular'); unknown="raise"
        makes such a user an input error instead."""
        scalar = np.ndim(users) == 0
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
            raise input_error("n must be a positive integer, not %r" % (n,))
        if unknown not in ("popular", "raise"):
            raise input_error("unknown must be 'popular' or 'raise', not %r" % (unknown,))
        model = self._live()
        kind, ids = _ids(users, "users")
        dense = np.empty(len(ids), np.int64)
        for i, t in enumerate(_id_text(kind, ids)):
            dense[i] = lib.lac_mf_model_user_index(model, t.encode("utf-8"))
            if dense[i] < 0 and unknown == "raise":
                raise input_error("users[%d] = %r is not a user of the model" % (i, t), _lib.LAC_ERR_RANGE)
        ctx = self._ctx()
        items = np.empty((len(ids), n), np.int64)
        sc = np.empty((len(ids), n), np.float32)
        known = dense >= 0
        if known.any():
            kd = np.ascontiguousarray(dense[known])
            ki = np.empty((len(kd), n), np.int64)
            ks = np.empty((len(kd), n), np.float32)
            check(lib.lac_mf_recommend(ctx.handle, model, len(kd), kd.ctypes.data, n, ki.ctypes.data, ks.ctypes.data),
                  ctx)
            items[known], sc[known] = ki, ks
        if not known.all():
            popular = np.empty(n, np.int64)
            check(lib.lac_mf_popular(ctx.handle, model, n, popular.ctypes.data, None), ctx)
            items[~known] = popular
            sc[~known] = np.nan
        item_ids = self.item_ids
        missing = items < 0
        if item_ids.dtype == object:
            out = np.empty(items.shape, object)
            out[~missing] = item_ids[items[~missing]]
            out[missing] = None
        else:
            out = np.where(missing, -1, item_ids[np.where(missing, 0, items)]) if item_ids.size else items
        sc[missing] = np.nan
        if scalar:
            out, sc = out[0], sc[0]
        return (out, sc) if scores else out

    # -- the model's contents ------------------------------------------------------
    @property
    def num_users(self):
        return lib.lac_mf_model_num_users(self._live())

    @property
    def num_items(self):
        return lib.lac_mf_model_num_items(self._live())

    @property
    def user_ids(self):
        """The users' ids in the order of the factors' rows (int64 when every
        id is an integer, else str objects)."""
        with self._lock:
            if self._user_ids is None:
                m = self._live()
                self._user_ids = _ids_array([_lib.text(lib.lac_mf_model_user_id(m, u))
                                             for u in range(lib.lac_mf_model_num_users(m))])
            return self._user_ids

    @property
    def item_ids(self):
        with self._lock:
            if self._item_ids is None:
                m = self._live()
                self._item_ids = _ids_array([_lib.text(lib.lac_mf_model_item_id(m, j))
                                             for j in range(lib.lac_mf_model_num_items(m))])
            return self._item_ids

    def _contents(self):
        with self._lock:
            if self._file is None:
                self._file = _read_model_bytes(self._to_bytes())
            return self._file

    @property
    def user_factors(self):
        """P: (num_users, k) float32, row u for user_ids[u] (read-only)."""
        return self._contents()["P"]

    @property
    def item_factors(self):
        """Q: (num_items, k) float32, row i for item_ids[i] (read-only)."""
        return self._contents()["Q"]

    @property
    def user_bias(self):
        return self._contents()["user_bias"]

    @property
    def item_bias(self):
        return self._contents()["item_bias"]

    @property
    def global_mean(self):
        """mu (0 without biases)."""
        return self._contents()["mean"]

    @property
    def rating_range(self):
        """(min, max) of the training ratings: predictions are clamped to it."""
        return self._contents()["rating_range"]

    # -- files ---------------------------------------------------------------------
    def save(self, path):
        """Writes the model file (atomically; `lacuna mf predict` reads it)."""
        ctx = self._ctx()
        check(lib.lac_mf_model_save(ctx.handle, _core.fspath(path), self._live()), ctx)

    @classmethod
    def load(cls, path, device="auto", threads=0):
        """A fitted MF from a model file (saved by save() or `lacuna mf train`)."""
        self = cls(device=device, threads=threads)
        ctx = self._ctx()
        handle = _lib.lac_mf_model_t()
        check(lib.lac_mf_model_load(ctx.handle, _core.fspath(path), ctypes.byref(handle)), ctx)
        self._adopt(handle)
        return self

    def _to_bytes(self):
        fd, tmp = tempfile.mkstemp(prefix="lacuna-model-", suffix=".lmf")
        os.close(fd)
        try:
            self.save(tmp)
            with open(tmp, "rb") as f:
                return f.read()
        finally:
            os.unlink(tmp)

    def __reduce__(self):
        if self._model is None:
            return (_unpickle, (None, self.get_params()))
        return (_unpickle, (self._to_bytes(), self.get_params()))

    def close(self):
        with self._lock:
            if self._model:
                self._destroy(ctypes.byref(self._model))
            self._model = None

    def __repr__(self):
        if self._model is None:
            return "MF(k=%d, unfitted)" % self.k
        return "MF(k=%d, users=%d, items=%d)" % (self.k, self.num_users, self.num_items)


def _unpickle(data, params):
    if data is None:
        p = dict(params)
        kw = {key: p.pop(key) for key in ("k", "model", "threads", "deterministic", "seed", "device")}
        return MF(**kw, **p)
    fd, tmp = tempfile.mkstemp(prefix="lacuna-model-", suffix=".lmf")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        return MF.load(tmp, device=params.get("device", "auto"), threads=params.get("threads", 0))
    finally:
        os.unlink(tmp)
