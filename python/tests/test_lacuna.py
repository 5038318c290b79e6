"""Tests of the lacuna Python package: every function, the errors included,
against independent numpy references (and the command-line tool for impute).

Run with Debian's python3 from the repository:
    LACUNA_LIBRARY=build/liblacuna.so PYTHONPATH=python /usr/bin/python3 python/tests/test_lacuna.py
(tests/cli_python.sh does this under ctest). Needs a C compiler (cc) for the
header check, and the built `lacuna` tool beside the library (or
LACUNA_TOOL) for the comparison with the command line.
"""
import atexit
import ctypes
import json
import logging
import os
import pickle
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.environ.get("LACUNA_SOURCE_DIR") or os.path.dirname(os.path.dirname(HERE))
PACKAGE_DIR = os.path.join(SOURCE_DIR, "python")
sys.path.insert(0, PACKAGE_DIR)

import lacuna  # noqa: E402
from lacuna import _core, _lib  # noqa: E402

HEADER = os.path.join(SOURCE_DIR, "include", "lacuna", "lacuna.h")
TOOL = os.path.abspath(os.environ.get("LACUNA_TOOL")
                       or os.path.join(os.path.dirname(os.path.abspath(lacuna.library_path)), "lacuna"))
NO_CUDA = lacuna.cuda_device_count() == 0


def header_text():
    """The header without its comments."""
    with open(HEADER) as f:
        text = f.read()
    return re.sub(r"/\*.*?\*/", " ", text, flags=re.S)


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


_TMP = tempfile.mkdtemp(prefix="lacuna-py-", dir=os.environ.get("LACUNA_TEST_TMPDIR"))
atexit.register(shutil.rmtree, _TMP, True)


def tmpdir():
    return tempfile.mkdtemp(dir=_TMP)


# ==========================================================================
# The binding against the header
# ==========================================================================
class TestHeader(unittest.TestCase):
    """The mirrored structs, enums and prototypes against include/lacuna/lacuna.h."""

    def test_structs_and_constants_match_the_header(self):
        lines = ["#include <lacuna/lacuna.h>", "#include <stddef.h>", "#include <stdio.h>", "int main(void) {"]
        for s in _lib.STRUCTS:
            name = s.__name__
            lines.append('printf("%s %%zu\\n", sizeof(%s));' % (name, name))
            for field, _ in s._fields_:
                lines.append('printf("%s.%s %%zu %%zu\\n", offsetof(%s, %s), sizeof(((%s *)0)->%s));'
                             % (name, field, name, field, name, field))
        for name in _lib.CONSTANTS:
            lines.append('printf("%s %%lld\\n", (long long)(%s));' % (name, name))
        lines += ["return 0;", "}"]
        d = tmpdir()
        src, exe = os.path.join(d, "layout.c"), os.path.join(d, "layout")
        with open(src, "w") as f:
            f.write("\n".join(lines) + "\n")
        cc = subprocess.run(["cc", "-std=c11", "-I", os.path.join(SOURCE_DIR, "include"), src, "-o", exe],
                            capture_output=True, text=True)
        self.assertEqual(cc.returncode, 0, "the layout program does not compile (a field renamed or gone?):\n"
                         + cc.stderr)
        out = subprocess.run([exe], capture_output=True, text=True, check=True).stdout.split("\n")
        facts = dict(line.split(" ", 1) for line in out if line)
        for s in _lib.STRUCTS:
            name = s.__name__
            self.assertEqual(int(facts[name]), ctypes.sizeof(s), "sizeof(%s): the header changed" % name)
            for field, _ in s._fields_:
                offset, size = map(int, facts["%s.%s" % (name, field)].split())
                self.assertEqual(getattr(s, field).offset, offset, "offsetof(%s, %s)" % (name, field))
                self.assertEqual(getattr(s, field).size, size, "sizeof(%s.%s)" % (name, field))
        for name, value in _lib.CONSTANTS.items():
            self.assertEqual(int(facts[name]), value, name)

    def test_every_header_struct_is_mirrored(self):
        text = header_text()
        declared = set(re.findall(r"typedef struct \{[^}]*\}\s*(lac_\w+);", text, re.S))
        mirrored = {s.__name__ for s in _lib.STRUCTS}
        self.assertEqual(declared - mirrored, set(), "structs of the header the binding does not mirror")
        self.assertEqual(mirrored - declared, set())

    def test_prototypes_match_the_header(self):
        text = header_text()
        decls = {}
        for m in re.finditer(r"LAC_API\s+([^;{]*?)\b(lac_\w+)\s*\(([^)]*)\)\s*;", text, re.S):
            args = m.group(3).strip()
            decls[m.group(2)] = 0 if args in ("", "void") else args.count(",") + 1
        for name, (_, argtypes) in _lib.PROTOTYPES.items():
            self.assertIn(name, decls, "%s is not a LAC_API function of the header" % name)
            self.assertEqual(len(argtypes), decls[name], "arguments of %s" % name)

    def test_params_start_from_the_library_defaults(self):
        p = _lib.params(_lib.lac_mf_params, "lac_mf_params_init")
        self.assertEqual(p.struct_size, ctypes.sizeof(p))
        self.assertEqual(p.k, 32)   # docs: default 32
        m = _lib.params(_lib.lac_map_params, "lac_map_params_init")
        self.assertEqual((m.struct_size, m.op, m.accumulate), (ctypes.sizeof(m), _lib.LAC_MAP_SUM, 0))


class TestPackage(unittest.TestCase):
    def test_version_and_build(self):
        self.assertEqual(lacuna.library_version(), "%d.%d.%d" % (0, 1, 0))
        self.assertIn("cuda", lacuna.build_info())
        self.assertGreaterEqual(lacuna.cuda_device_count(), 0)

    def test_library_lookup(self):
        env = dict(os.environ, PYTHONPATH=PACKAGE_DIR)
        code = "import lacuna; print(lacuna.library_path)"
        # LACUNA_LIBRARY wins, and a wrong one is an ImportError naming it
        bad = dict(env, LACUNA_LIBRARY="/nonexistent/liblacuna.so")
        r = subprocess.run([sys.executable, "-c", code], env=bad, capture_output=True, text=True)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("ImportError", r.stderr)
        self.assertIn("/nonexistent/liblacuna.so", r.stderr)
        # beside the package: a copy of the package with a link to the library
        d = tmpdir()
        pkg = os.path.join(d, "lacuna")
        os.mkdir(pkg)
        for f in os.listdir(os.path.join(PACKAGE_DIR, "lacuna")):
            if f.endswith(".py"):
                os.symlink(os.path.join(PACKAGE_DIR, "lacuna", f), os.path.join(pkg, f))
        os.symlink(os.path.abspath(lacuna.library_path), os.path.join(pkg, "liblacuna.so"))
        env2 = {k: v for k, v in env.items() if k != "LACUNA_LIBRARY"}
        env2["PYTHONPATH"] = d
        r = subprocess.run([sys.executable, "-c", code], env=env2, capture_output=True, text=True, cwd=d)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), os.path.join(pkg, "liblacuna.so"))

    def test_errors_are_classed_by_status(self):
        self.assertTrue(issubclass(lacuna.LacunaInputError, lacuna.LacunaError))
        self.assertTrue(issubclass(lacuna.LacunaInputError, ValueError))
        self.assertFalse(issubclass(lacuna.LacunaError, ValueError))
        e = _core.error_class(-2)("x", -2)
        self.assertIsInstance(e, ValueError)
        self.assertEqual(e.status_name, _lib.text(_lib.lib.lac_status_string(-2)))
        self.assertNotIsInstance(_core.error_class(-101)("x", -101), ValueError)
        e2 = pickle.loads(pickle.dumps(e))
        self.assertEqual((type(e2), e2.status, str(e2)), (type(e), -2, "x"))

    def test_devices(self):
        with self.assertRaises(lacuna.LacunaInputError) as c:
            lacuna.map([1.0], [0], 1, device="gpu")
        self.assertIn("device", str(c.exception))
        self.assertEqual(lacuna.map([1.0], [0], 1, device="cpu")[0], 1.0)
        if NO_CUDA:
            with self.assertRaises(lacuna.LacunaError) as c:
                lacuna.map([1.0], [0], 1, device="cuda")
            self.assertNotIsInstance(c.exception, ValueError)   # a runtime failure, not the caller's input
            self.assertIn(c.exception.status, (_lib.LAC_ERR_NOT_COMPILED, _lib.LAC_ERR_NO_DEVICE))
        # several devices: a list of ordinals (one may repeat); malformed lists are input errors
        self.assertEqual(_core.parse_device("cuda:0,1"), (_lib.LAC_BACKEND_CUDA, (0, 1)))
        self.assertEqual(_core.parse_device("cuda:2"), (_lib.LAC_BACKEND_CUDA, (2,)))
        for bad in ("cuda:", "cuda:0,", "cuda:a", "cuda:-1", "cuda:" + ",".join(["0"] * 17)):
            with self.assertRaises(lacuna.LacunaInputError):
                _core.parse_device(bad)

    def test_rank_and_ranks(self):
        # one process (tests/cli_mpi_mf.sh runs these under mpirun -np 2)
        self.assertEqual((lacuna.rank(), lacuna.ranks()), (0, 1))
        ctx = _core.Context("cpu")
        try:
            self.assertEqual((ctx.rank, ctx.ranks), (0, 1))
        finally:
            ctx.close()

    def test_one_context_per_thread(self):
        seen = []

        def work():
            seen.append(_core.context("cpu").handle.value)
            seen.append(_core.context("cpu").handle.value)

        t = threading.Thread(target=work)
        t.start()
        t.join()
        mine = _core.context("cpu").handle.value
        self.assertEqual(seen[0], seen[1])   # cached within a thread
        self.assertNotEqual(seen[0], mine)   # not shared across threads

    def test_gil_released_during_calls(self):
        """Another Python thread runs while the library computes."""
        rng = np.random.default_rng(0)
        S = rng.random((2_000_000, 4))
        R = rng.integers(0, 1000, len(S))
        ticks, stop = [0], threading.Event()

        def ticker():
            while not stop.is_set():
                time.sleep(0.001)
                ticks[0] += 1

        t = threading.Thread(target=ticker)
        t.start()
        time.sleep(0.01)
        start, t0 = ticks[0], time.monotonic()
        while time.monotonic() - t0 < 0.4:
            lacuna.map(S, R, 1000, threads=1, deterministic=True)
        elapsed = time.monotonic() - t0
        stop.set()
        t.join()
        # with the GIL held the ticker would wake only between calls
        self.assertGreater(ticks[0] - start, 0.2 * elapsed / 0.0011, (ticks[0] - start, elapsed))


# ==========================================================================
# map
# ==========================================================================
def ref_map(S, R, n, op, w=None, empty=0.0):
    """float64 numpy reference."""
    S = np.asarray(S, np.float64)
    x = S if w is None else S * (np.asarray(w, np.float64)[:, None] if S.ndim == 2 else np.asarray(w, np.float64))
    shape = (n,) + S.shape[1:]
    counts = np.bincount(R, minlength=n).astype(np.float64)
    hit = counts > 0
    if S.ndim == 2:
        hit = hit[:, None] & np.ones(shape, bool)
    if op == "sum":
        T = np.zeros(shape)
        np.add.at(T, R, x)
    elif op == "count":
        c = np.bincount(R, weights=w, minlength=n).astype(np.float64)
        T = np.broadcast_to(c[:, None], shape).copy() if S.ndim == 2 else c
    elif op == "mean":
        T = np.zeros(shape)
        np.add.at(T, R, x)
        wsum = np.bincount(R, weights=w, minlength=n).astype(np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            T = T / (wsum[:, None] if S.ndim == 2 else wsum)
    elif op == "min":
        T = np.full(shape, np.inf)
        np.minimum.at(T, R, x)
    elif op == "max":
        T = np.full(shape, -np.inf)
        np.maximum.at(T, R, x)
    return np.where(hit, T, empty)


class TestMap(unittest.TestCase):
    def setUp(self):
        rng = np.random.default_rng(7)
        self.m, self.n = 20000, 300
        self.R = rng.integers(0, self.n - 5, self.m)   # the last 5 targets stay empty
        self.S = rng.standard_normal(self.m)
        self.S2 = rng.standard_normal((self.m, 3))
        self.w = rng.random(self.m) + 0.5

    def test_ops_against_numpy(self):
        for op in ("sum", "mean", "min", "max", "count"):
            for S in (self.S, self.S2):
                for w in (None, self.w):
                    with self.subTest(op=op, ndim=S.ndim, weighted=w is not None):
                        T = lacuna.map(S, self.R, self.n, op=op, weights=w, empty=-7.0)
                        self.assertEqual(T.shape, (self.n,) + S.shape[1:])
                        self.assertEqual(T.dtype, np.float64)
                        np.testing.assert_allclose(T, ref_map(S, self.R, self.n, op, w, -7.0), rtol=1e-9,
                                                   atol=1e-9)

    def test_float32_stays_float32(self):
        S = self.S.astype(np.float32)
        T = lacuna.map(S, self.R.astype(np.int32), self.n)
        self.assertEqual(T.dtype, np.float32)
        np.testing.assert_allclose(T, ref_map(S, self.R, self.n, "sum"), rtol=1e-4, atol=1e-3)

    def test_inputs_are_not_copied_when_they_fit(self):
        for a in (self.S, self.S.astype(np.float32), self.S2):
            self.assertIs(_core.as_float(a, "S"), a)
        for r in (self.R, self.R.astype(np.int32)):
            self.assertIs(_core.as_index(r, "R"), r)
        # other layouts and dtypes are converted
        self.assertTrue(_core.as_float(self.S2[:, 1], "S").flags.c_contiguous)
        self.assertEqual(_core.as_float(np.arange(3), "S").dtype, np.float64)
        self.assertEqual(_core.as_index(np.arange(3, dtype=np.uint16), "R").dtype, np.int64)
        T = lacuna.map(self.S2[:, 1], self.R[::1], self.n)   # a strided column
        np.testing.assert_allclose(T, ref_map(self.S2[:, 1], self.R, self.n, "sum"), rtol=1e-9, atol=1e-9)
        T = lacuna.map(np.arange(4), np.array([0, 1, 0, 1], np.uint8), 2)
        np.testing.assert_array_equal(T, [2.0, 4.0])

    def test_out_and_accumulate(self):
        out = np.full(self.n, 99.0)
        T = lacuna.map(self.S, self.R, self.n, out=out)
        self.assertIs(T, out)
        np.testing.assert_allclose(out, ref_map(self.S, self.R, self.n, "sum"), rtol=1e-9, atol=1e-9)
        before = out.copy()
        lacuna.map(self.S, self.R, self.n, out=out, accumulate=True)
        np.testing.assert_allclose(out, 2 * before, rtol=1e-9, atol=1e-9)
        # a non-contiguous out is written back
        big = np.zeros((self.n, 2))
        T = lacuna.map(self.S, self.R, self.n, out=big[:, 1])
        np.testing.assert_allclose(big[:, 1], ref_map(self.S, self.R, self.n, "sum"), rtol=1e-9, atol=1e-9)
        self.assertTrue(np.all(big[:, 0] == 0))
        with self.assertRaises(lacuna.LacunaInputError):
            lacuna.map(self.S, self.R, self.n, accumulate=True)   # accumulate needs out
        with self.assertRaises(lacuna.LacunaInputError):
            lacuna.map(self.S, self.R, self.n, op="mean", out=out, accumulate=True)

    def test_n_defaults_to_max_plus_one(self):
        T = lacuna.map([1.0, 2.0, 3.0], [2, 0, 2])
        np.testing.assert_array_equal(T, [2.0, 0.0, 4.0])

    def test_deterministic(self):
        S = self.S.astype(np.float32)
        a = lacuna.map(S, self.R, self.n, deterministic=True, threads=1)
        b = lacuna.map(S, self.R, self.n, deterministic=True, threads=2)
        c = lacuna.map(S, self.R, self.n, deterministic=True)
        self.assertEqual(a.tobytes(), b.tobytes())
        self.assertEqual(a.tobytes(), c.tobytes())

    def test_nan_policies(self):
        S = np.array([1.0, np.nan, 3.0, 4.0])
        R = np.array([0, 0, 1, 1])
        self.assertTrue(np.isnan(lacuna.map(S, R, 2)[0]))
        np.testing.assert_array_equal(lacuna.map(S, R, 2, nan="skip"), [1.0, 7.0])
        np.testing.assert_array_equal(lacuna.map(S, R, 2, nan="skip", op="count"), [1.0, 2.0])
        with self.assertRaises(lacuna.LacunaInputError) as c:
            lacuna.map(S, R, 2, nan="error")
        self.assertIn("source[1]", str(c.exception))
        with self.assertRaises(lacuna.LacunaInputError):
            lacuna.map(S, R, 2, nan="ignore")

    def test_errors(self):
        S = np.array([1.0, 2.0, 3.0, 4.0, -5.0])
        out = np.full(3, 42.0)
        # out-of-range bridge: the message names the index, out is untouched
        with self.assertRaises(lacuna.LacunaInputError) as c:
            lacuna.map(S, [2, 0, 7, 2, 0], 3, out=out)
        e = c.exception
        self.assertIsInstance(e, ValueError)
        self.assertEqual(e.status, _lib.LAC_ERR_RANGE)
        self.assertIn("bridge[2] = 7 is outside [0, 3)", str(e))
        np.testing.assert_array_equal(out, [42.0] * 3)
        with self.assertRaises(lacuna.LacunaInputError) as c:
            lacuna.map(S, [2, 0, -1, 2, 0], 3)
        self.assertIn("bridge[2] = -1", str(c.exception))
        # shapes
        with self.assertRaises(lacuna.LacunaInputError) as c:
            lacuna.map(S, [0, 1, 2], 3)
        self.assertEqual(c.exception.status, _lib.LAC_ERR_SHAPE)
        with self.assertRaises(lacuna.LacunaInputError) as c:
            lacuna.map(np.zeros((5, 2, 2)), np.zeros(5, int), 3)
        self.assertEqual(c.exception.status, _lib.LAC_ERR_SHAPE)
        with self.assertRaises(lacuna.LacunaInputError) as c:
            lacuna.map(S, np.zeros(5, int), 3, weights=[1.0, 2.0])
        self.assertEqual(c.exception.status, _lib.LAC_ERR_SHAPE)
        with self.assertRaises(lacuna.LacunaInputError) as c:
            lacuna.map(S, np.zeros(5, int), 3, out=np.zeros(4))
        self.assertEqual(c.exception.status, _lib.LAC_ERR_SHAPE)
        # dtypes
        for bad in (S.astype(np.complex128), np.array(["a"] * 5)):
            with self.assertRaises(lacuna.LacunaInputError) as c:
                lacuna.map(bad, np.zeros(5, int), 3)
            self.assertEqual(c.exception.status, _lib.LAC_ERR_DTYPE)
        with self.assertRaises(lacuna.LacunaInputError) as c:
            lacuna.map(S, np.zeros(5), 3)   # a float bridge
        self.assertEqual(c.exception.status, _lib.LAC_ERR_DTYPE)
        with self.assertRaises(lacuna.LacunaInputError) as c:
            lacuna.map(S, np.zeros(5, int), 3, out=np.zeros(3, np.float32))
        self.assertEqual(c.exception.status, _lib.LAC_ERR_DTYPE)
        with self.assertRaises(lacuna.LacunaInputError) as c:
            lacuna.map(S, np.array([0, 1, 2, 3, 2**63], np.uint64), 3)
        self.assertEqual(c.exception.status, _lib.LAC_ERR_RANGE)
        # the op
        with self.assertRaises(lacuna.LacunaInputError) as c:
            lacuna.map(S, np.zeros(5, int), 3, op="median")
        self.assertEqual(c.exception.status, _lib.LAC_ERR_ARGUMENT)
        self.assertIn("median", str(c.exception))
        self.assertIn("sum, mean, min, max, count", str(c.exception))
        with self.assertRaises(lacuna.LacunaInputError):
            lacuna.map(S, np.zeros(5, int), 3, op=1)
        with self.assertRaises(lacuna.LacunaInputError):
            lacuna.map(S, np.zeros(5, int), -1)
        ro = np.zeros(3)
        ro.flags.writeable = False
        with self.assertRaises(lacuna.LacunaInputError):
            lacuna.map(S, np.zeros(5, int), 3, out=ro)


class TestMapPlan(unittest.TestCase):
    def test_plan_against_numpy(self):
        rng = np.random.default_rng(3)
        R = rng.integers(0, 500, 30000)
        with lacuna.MapPlan(R, 512) as plan:
            self.assertEqual((plan.num_sources, plan.num_targets), (30000, 512))
            R[:] = 0   # the plan keeps its own copy
            for _ in range(3):
                S = rng.standard_normal(30000)
                T = plan.execute(S)
                # deterministic: the same call gives the same bits
                self.assertEqual(T.tobytes(), plan.execute(S).tobytes())
            R2 = np.random.default_rng(3).integers(0, 500, 30000)
            np.testing.assert_allclose(T, ref_map(S, R2, 512, "sum"), rtol=1e-9, atol=1e-9)
            S2 = rng.standard_normal((30000, 2)).astype(np.float32)
            w = rng.random(30000).astype(np.float32)
            for op in ("mean", "max", "count"):
                np.testing.assert_allclose(plan.execute(S2, op=op, weights=w), ref_map(S2, R2, 512, op, w),
                                           rtol=1e-4, atol=1e-4)
            out = np.zeros(512)
            self.assertIs(plan(S, out=out), out)
            with self.assertRaises(lacuna.LacunaInputError) as c:
                plan.execute(S[:-1])
            self.assertEqual(c.exception.status, _lib.LAC_ERR_SHAPE)
        with self.assertRaises(lacuna.LacunaInputError):
            plan.execute(S)   # closed

    def test_plan_determinism_is_an_option(self):
        rng = np.random.default_rng(11)
        R = rng.integers(0, 700, 40000)
        S = rng.standard_normal(40000)
        S32 = rng.standard_normal((40000, 3)).astype(np.float32)
        w = rng.random(40000).astype(np.float32)
        with lacuna.MapPlan(R, 700, deterministic=False) as fast, lacuna.MapPlan(R, 700) as exact:
            self.assertFalse(fast.deterministic)
            self.assertTrue(exact.deterministic)
            np.testing.assert_allclose(fast.execute(S), ref_map(S, R, 700, "sum"), rtol=1e-9, atol=1e-9)
            np.testing.assert_allclose(fast.execute(S32, op="mean", weights=w), ref_map(S32, R, 700, "mean", w),
                                       rtol=1e-4, atol=1e-4)
            # a call that asks for determinism gets the deterministic plan's bits
            self.assertEqual(fast.execute(S32, deterministic=True).tobytes(), exact.execute(S32).tobytes())
            self.assertEqual(fast.execute(S, op="max").tobytes(), exact.execute(S, op="max").tobytes())

    def test_plan_errors(self):
        with self.assertRaises(lacuna.LacunaInputError) as c:
            lacuna.MapPlan([0, 5, 1], 3)
        self.assertEqual(c.exception.status, _lib.LAC_ERR_RANGE)
        self.assertIn("bridge[1] = 5", str(c.exception))
        with self.assertRaises(lacuna.LacunaInputError) as c:
            lacuna.MapPlan(np.zeros((2, 2), int), 3)
        self.assertEqual(c.exception.status, _lib.LAC_ERR_SHAPE)
        with self.assertRaises(lacuna.LacunaInputError) as c:
            lacuna.MapPlan([0.0, 1.0], 3)
        self.assertEqual(c.exception.status, _lib.LAC_ERR_DTYPE)


# ==========================================================================
# impute
# ==========================================================================
def ring_graph(N, chords=7):
    return np.array([(i, (i + 1) % N) for i in range(N)] + [(i, (i + chords) % N) for i in range(N)])


def numpy_laplacian(N, E):
    A = np.zeros((N, N))
    A[E[:, 0], E[:, 1]] = 1
    A[E[:, 1], E[:, 0]] = 1
    d = A.sum(1)
    dis = np.where(d > 0, 1 / np.sqrt(np.where(d > 0, d, 1)), 0)
    return np.eye(N) - dis[:, None] * A * dis[None, :]


def low_rank_tensor(N, E, m, n, r, seed):
    """The paper's synthetic data, made with numpy: G = U Ĝ with rank-r spectral slices."""
    rng = np.random.default_rng(seed)
    _, U = np.linalg.eigh(numpy_laplacian(N, E))
    Gh = np.stack([rng.standard_normal((m, r)) @ rng.standard_normal((r, n)) for _ in range(N)])
    return np.einsum("vk,kmn->vmn", U, Gh)


class TestImpute(unittest.TestCase):
    N, m, n = 40, 10, 10

    def setUp(self):
        self.E = ring_graph(self.N)
        self.G = low_rank_tensor(self.N, self.E, self.m, self.n, 1, seed=11)
        rng = np.random.default_rng(5)
        self.obs = rng.random(self.N) < 0.8
        self.X = self.G.copy()
        self.X[~self.obs] = np.nan

    def rel(self, Y, mask=None):
        if mask is None:
            return np.linalg.norm(Y - self.G) / np.linalg.norm(self.G)
        return np.linalg.norm((Y - self.G)[mask]) / np.linalg.norm(self.G[mask])

    def test_recovers_low_rank_spectral_slices(self):
        Y = lacuna.impute(self.E, self.X)
        self.assertEqual((Y.shape, Y.dtype), (self.X.shape, np.float64))
        np.testing.assert_array_equal(Y[self.obs], self.G[self.obs])   # 'completed': observed as given
        self.assertLess(self.rel(Y, ~self.obs), 0.05)
        # more iterations do not get worse: the iteration converges
        Y_short = lacuna.impute(self.E, self.X, steps=2, inner=2)
        self.assertLess(self.rel(Y, ~self.obs), self.rel(Y_short, ~self.obs))

    def test_result_and_history_against_numpy(self):
        Y, info = lacuna.impute(self.E, self.X, truth=self.G, output="estimate", full_output=True)
        self.assertEqual(len(info["history"]), info["iterations"])
        self.assertEqual(info["missing_vertices"], int((~self.obs).sum()))
        self.assertEqual(info["observed_vertices"], int(self.obs.sum()))
        # the library's error against the truth equals numpy's on the returned estimate
        self.assertAlmostEqual(info["rmse_all"], self.rel(Y), places=10)
        self.assertAlmostEqual(info["rmse_missing"], self.rel(Y, ~self.obs), places=10)
        self.assertAlmostEqual(info["history"][-1]["rmse_all"], info["rmse_all"], places=10)
        self.assertFalse(np.array_equal(Y[self.obs], self.G[self.obs]))   # the estimate everywhere
        steps = [h["step"] for h in info["history"]]
        self.assertEqual(steps, sorted(steps))

    def test_against_the_command_line_tool(self):
        if not os.access(TOOL, os.X_OK):
            self.skipTest("no lacuna tool at %s" % TOOL)
        d = tmpdir()
        with open(os.path.join(d, "g.txt"), "w") as f:
            f.write("".join("%d %d\n" % (u, v) for u, v in self.E))
        with open(os.path.join(d, "ids.txt"), "w") as f:
            f.write("".join("%d\n" % v for v in np.flatnonzero(self.obs)))
        np.save(os.path.join(d, "X.npy"), self.G)
        r = subprocess.run([TOOL, "impute", "run", "--graph", "g.txt", "--tensor", "X.npy", "--observed", "ids.txt",
                            "--out", "Y.npy", "--precision", "double", "--no-cache", "--quiet"], cwd=d,
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        Y_tool = np.load(os.path.join(d, "Y.npy"))
        Y = lacuna.impute(os.path.join(d, "g.txt"), self.G, observed=os.path.join(d, "ids.txt"))
        np.testing.assert_allclose(Y, Y_tool, rtol=1e-9, atol=1e-12)
        # single precision as the tool's default
        r = subprocess.run([TOOL, "impute", "run", "--graph", "g.txt", "--tensor", "X.npy", "--observed", "ids.txt",
                            "--out", "Y32.npy", "--no-cache", "--quiet"], cwd=d, capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        Y32 = lacuna.impute(self.E, self.G, observed=np.flatnonzero(self.obs), precision="single")
        np.testing.assert_allclose(Y32, np.load(os.path.join(d, "Y32.npy")), rtol=1e-4, atol=1e-4)

    def test_observed_forms_agree(self):
        a = lacuna.impute(self.E, self.X)                                    # NaN = missing
        b = lacuna.impute(self.E, self.G, observed=self.obs)                 # vertex mask
        c = lacuna.impute(self.E, self.G, observed=list(np.flatnonzero(self.obs)))   # vertex ids
        full = np.broadcast_to(self.obs[:, None, None], self.G.shape)
        d = lacuna.impute(self.E, self.G, observed=full)                     # entry-wise mask
        for Y in (b, c, d):
            np.testing.assert_allclose(Y, a, rtol=1e-12, atol=1e-12)

    def test_graph_object_and_its_basis(self):
        g = lacuna.Graph(self.E)
        self.assertEqual(g.num_vertices, self.N)
        self.assertEqual(g.info["num_edges"], len(self.E))
        L = numpy_laplacian(self.N, self.E)
        np.testing.assert_allclose(g.laplacian(), L, atol=1e-12)
        w, U = g.basis()
        np.testing.assert_allclose(w, np.linalg.eigvalsh(L), atol=1e-10)
        np.testing.assert_allclose(U @ np.diag(w) @ U.T, L, atol=1e-10)
        Y1 = lacuna.impute(g, self.X)
        Y2 = lacuna.impute(g, self.X)   # the basis is reused
        np.testing.assert_array_equal(Y1, Y2)
        np.testing.assert_allclose(Y1, lacuna.impute(self.E, self.X), rtol=1e-12, atol=1e-12)
        X32 = self.X.astype(np.float32)
        Y32 = lacuna.impute(g, X32)
        self.assertEqual(Y32.dtype, np.float32)
        g.close()
        with self.assertRaises(lacuna.LacunaInputError):
            g.num_vertices

    def test_graph_file_ids_and_cache(self):
        d = tmpdir()
        path = os.path.join(d, "g.txt")
        ids = 100 + 10 * np.arange(self.N)   # remapped in ascending order
        with open(path, "w") as f:
            f.write("# a comment\n" + "".join("%d %d\n" % (ids[u], ids[v]) for u, v in self.E))
        g = lacuna.Graph(path, cache=os.path.join(d, "basis.bin"))
        self.assertTrue(g.info["remapped"])
        np.testing.assert_array_equal(g.vertex_of_id(ids[[3, 1]]), [3, 1])
        with self.assertRaises(lacuna.LacunaInputError) as c:
            g.vertex_of_id([105])
        self.assertEqual(c.exception.status, _lib.LAC_ERR_RANGE)
        Y = lacuna.impute(g, self.G, observed=ids[self.obs])
        np.testing.assert_allclose(Y, lacuna.impute(self.E, self.X), rtol=1e-12, atol=1e-12)
        self.assertTrue(os.path.exists(os.path.join(d, "basis.bin")))
        Y2 = lacuna.impute(path, self.G, observed=ids[self.obs], cache=os.path.join(d, "basis.bin"))
        np.testing.assert_allclose(Y2, Y, rtol=1e-12, atol=1e-12)

    def test_directed_graph_warning_reaches_logging(self):
        d = tmpdir()
        path = os.path.join(d, "g.txt")
        with open(path, "w") as f:
            f.write("0 1\n1 0\n1 2\n2 3\n")
        with self.assertLogs("lacuna", level="WARNING") as logs:
            lacuna.impute(path, np.ones((4, 2, 2)), observed=[0, 1, 2], device="cpu")
        self.assertTrue(any("symmetri" in m for m in logs.output), logs.output)

    def test_select_lambda(self):
        rng = np.random.default_rng(8)
        Xn = self.X + 0.3 * rng.standard_normal(self.X.shape)
        Y, info = lacuna.impute(self.E, Xn, select_lambda="holdout:0.25", select_seed=3, decay=0.5, steps=8,
                                full_output=True)
        sel = info["lambda_selection"]
        self.assertEqual((sel["fraction"], sel["seed"], sel["held_out_unit"]), (0.25, 3, "vertices"))
        self.assertEqual(sel["held_out"], round(0.25 * int(self.obs.sum())))
        errors = [c["holdout_rmse"] for c in sel["curve"]]
        self.assertEqual(len(errors), 8)
        self.assertEqual(sel["chosen_step"], int(np.argmin(errors)) + 1)
        self.assertEqual(info["steps"], sel["chosen_step"])
        self.assertAlmostEqual(sel["chosen_scale"], 0.5 ** (sel["chosen_step"] - 1), places=15)
        selecting = [h["selecting"] for h in info["history"]]
        self.assertEqual(selecting, sorted(selecting, reverse=True))   # the hold-out path, then the fit
        self.assertEqual(selecting.count(0), info["iterations"])
        # the fit is the schedule stopped at the kept step
        Yc = lacuna.impute(self.E, Xn, decay=0.5, steps=sel["chosen_step"])
        np.testing.assert_array_equal(Y, Yc)
        # the same as the tool's --select-lambda
        if os.access(TOOL, os.X_OK):
            d = tmpdir()
            with open(os.path.join(d, "g.txt"), "w") as f:
                f.write("".join("%d %d\n" % (u, v) for u, v in self.E))
            np.save(os.path.join(d, "X.npy"), Xn)
            r = subprocess.run([TOOL, "impute", "run", "--graph", "g.txt", "--tensor", "X.npy", "--out", "Y.npy",
                                "--precision", "double", "--no-cache", "--quiet", "--decay", "0.5", "--iters", "8",
                                "--select-lambda", "holdout:0.25", "--select-seed", "3", "--json"], cwd=d,
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            tool = json.loads(r.stdout)["lambda_selection"]
            self.assertEqual(tool["chosen_step"], sel["chosen_step"])
            np.testing.assert_allclose([c["holdout_rmse"] for c in tool["curve"]], errors, rtol=1e-7)
            np.testing.assert_array_equal(np.load(os.path.join(d, "Y.npy")), Y)
        for bad in ("holdout:0", "holdout:1", "holdout:x", "kfold", 0.5):
            with self.assertRaises(lacuna.LacunaInputError):
                lacuna.impute(self.E, Xn, select_lambda=bad)
        with self.assertRaises(lacuna.LacunaInputError):
            lacuna.impute(self.E, Xn, select_seed=2)

    def test_gemm_modes(self):
        # The CPU ignores the GPU's GEMM mode: the same completion; bad values are input errors.
        Y = lacuna.impute(self.E, self.X, device="cpu")
        for mode in ("fp32", "tf32", "3xtf32"):
            np.testing.assert_array_equal(lacuna.impute(self.E, self.X, device="cpu", gemm=mode), Y)
        np.testing.assert_array_equal(lacuna.impute(self.E, self.X, device="cpu", tf32=True), Y)
        with self.assertRaises(lacuna.LacunaInputError):
            lacuna.impute(self.E, self.X, gemm="bf16")
        with self.assertRaises(TypeError):
            lacuna.impute(self.E, self.X, gemm="tf32", tf32=True)

    def test_callback_stops(self):
        seen = []
        Y, info = lacuna.impute(self.E, self.X, callback=lambda it: seen.append(it) or len(seen) >= 3,
                                full_output=True)
        self.assertEqual(len(seen), 3)
        self.assertEqual(info["iterations"], 3)
        self.assertEqual(Y.shape, self.X.shape)

        def boom(it):
            raise RuntimeError("from the callback")
        with self.assertRaises(RuntimeError):
            lacuna.impute(self.E, self.X, callback=boom)

    def test_out(self):
        out = np.zeros_like(self.X)
        self.assertIs(lacuna.impute(self.E, self.X, out=out), out)
        X = self.X.copy()
        Y = lacuna.impute(self.E, X, out=X)   # in place
        self.assertIs(Y, X)
        np.testing.assert_allclose(X, out, rtol=1e-12, atol=1e-12)

    def test_errors(self):
        with self.assertRaises(lacuna.LacunaInputError) as c:
            lacuna.impute(self.E, self.X[0])
        self.assertEqual(c.exception.status, _lib.LAC_ERR_SHAPE)
        with self.assertRaises(lacuna.LacunaInputError) as c:
            lacuna.impute(self.E, self.X[:-1])   # N from the tensor: vertex 39 is outside [0, 39)
        self.assertEqual(c.exception.status, _lib.LAC_ERR_RANGE)
        with self.assertRaises(lacuna.LacunaInputError) as c:
            lacuna.impute(lacuna.Graph(self.E), self.X[:-1])   # N disagrees with the graph's vertices
        self.assertEqual(c.exception.status, _lib.LAC_ERR_SHAPE)
        with self.assertRaises(lacuna.LacunaInputError) as c:
            lacuna.impute(self.E, self.G, observed=self.obs[:-1])
        self.assertEqual(c.exception.status, _lib.LAC_ERR_SHAPE)
        with self.assertRaises(lacuna.LacunaInputError) as c:
            lacuna.impute(self.E, self.G, observed=np.zeros(self.N, bool))   # nothing observed
        self.assertEqual(c.exception.status, _lib.LAC_ERR_VALUE)
        with self.assertRaises(lacuna.LacunaInputError) as c:
            lacuna.impute(self.E, self.G, observed=np.ones(self.N))   # a float mask
        self.assertEqual(c.exception.status, _lib.LAC_ERR_DTYPE)
        with self.assertRaises(lacuna.LacunaInputError) as c:
            lacuna.impute(np.array([[0, 1], [1, self.N]]), self.X)   # an edge outside [0, N)
        self.assertIn(str(self.N), str(c.exception))
        with self.assertRaises(lacuna.LacunaInputError) as c:
            lacuna.impute(np.zeros((3, 3), int), self.X)
        self.assertEqual(c.exception.status, _lib.LAC_ERR_SHAPE)
        with self.assertRaises(lacuna.LacunaInputError) as c:
            lacuna.impute(self.E, self.X.astype(np.complex64))
        self.assertEqual(c.exception.status, _lib.LAC_ERR_DTYPE)
        with self.assertRaises(lacuna.LacunaInputError) as c:
            lacuna.impute(self.E, self.X, decay=2.0)
        self.assertIn("decay", str(c.exception))
        with self.assertRaises(lacuna.LacunaInputError):
            lacuna.impute(self.E, self.X, output="everything")
        with self.assertRaises(lacuna.LacunaInputError):
            lacuna.impute(self.E, self.X, precision="half")
        with self.assertRaises(TypeError):
            lacuna.impute(self.E, self.X, iterations=3)
        with self.assertRaises(lacuna.LacunaError) as c:
            lacuna.impute("/nonexistent/graph.txt", self.X)
        self.assertEqual(c.exception.status, _lib.LAC_ERR_IO)
        self.assertNotIsInstance(c.exception, ValueError)
        if NO_CUDA:
            with self.assertRaises(lacuna.LacunaError):
                lacuna.impute(self.E, self.X, device="cuda")


# ==========================================================================
# mf
# ==========================================================================
def ratings_data(seed=1, users=300, items=200, count=20000, rank=3, noise=0.3):
    """A rank-3 signal plus noise on random (user, item) pairs; ids are sparse integers."""
    rng = np.random.default_rng(seed)
    P, Q = rng.standard_normal((users, rank)), rng.standard_normal((items, rank))
    key = np.unique(rng.integers(0, users, count) * items + rng.integers(0, items, count))
    u, i = key // items, key % items
    r = np.clip(3 + 0.7 * (P[u] * Q[i]).sum(1) + rng.normal(0, noise, len(u)), 0.5, 5.5)
    perm = rng.permutation(len(u))
    test, train = perm[: len(u) // 10], perm[len(u) // 10:]
    return (u * 10 + 7, i * 3 + 1000, r), train, test


class TestMF(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        (cls.u, cls.i, cls.r), cls.tr, cls.te = ratings_data()
        cls.model = lacuna.MF(k=8, seed=3, threads=2).fit(cls.u[cls.tr], cls.i[cls.tr], cls.r[cls.tr],
                                                           valid=(cls.u[cls.te], cls.i[cls.te], cls.r[cls.te]))

    def reference_scores(self, m):
        return (m.global_mean + m.user_bias[:, None] + m.item_bias[None, :]
                + m.user_factors.astype(np.float64) @ m.item_factors.T.astype(np.float64))

    def test_fit_predict_rmse(self):
        m = self.model
        pred = m.predict(self.u[self.te], self.i[self.te])
        self.assertEqual(pred.dtype, np.float32)
        rmse = np.sqrt(np.mean((pred - self.r[self.te]) ** 2))
        self.assertLess(rmse, 0.45)   # noise 0.3; a mean-only predictor is about 1.2
        self.assertLess(rmse, 0.5 * np.std(self.r))
        ev = m.evaluate(self.u[self.te], self.i[self.te], self.r[self.te])
        self.assertAlmostEqual(ev["rmse"], rmse, places=5)
        self.assertEqual(ev["unknown"], 0)
        self.assertAlmostEqual(m.report_["valid_rmse"], ev["rmse"], places=5)
        self.assertEqual(len(m.history_), m.report_["epochs"])
        self.assertEqual(m.history_[0]["epoch"], 1)
        self.assertTrue(np.isscalar(m.predict(self.u[0], self.i[0])))

    def test_update_folds_new_users_in(self):
        u, i, r = self.u, self.i, self.r
        tr = np.zeros(len(u), bool)
        tr[self.tr] = True
        te = np.zeros(len(u), bool)
        te[self.te] = True
        users = np.unique(u)
        new = np.isin(u, users[::10])   # a tenth of the users arrive later
        m = lacuna.MF(k=8, seed=3, threads=2, epochs=15).fit(u[tr & ~new], i[tr & ~new], r[tr & ~new])
        before = m.evaluate(u[te & new], i[te & new], r[te & new])["rmse"]
        known_items = set(m.item_ids)
        keep = tr & new & np.array([x in known_items for x in i])
        m.update(u[keep], i[keep], r[keep], rounds=1, sweeps=0)
        rep = m.update_report_
        self.assertEqual(rep["new_users"], len(np.unique(u[keep])))
        self.assertEqual(rep["new_items"], 0)
        self.assertLess(rep["rmse_after"], rep["rmse_before"])
        self.assertLess(m.evaluate(u[te & new], i[te & new], r[te & new])["rmse"], before - 0.2)
        # a new user's row is the ridge solution with the items fixed (numpy)
        p = m.get_params()
        uidx = {v: k for k, v in enumerate(m.user_ids)}
        iidx = {v: k for k, v in enumerate(m.item_ids)}
        who = u[keep][0]
        rows = np.flatnonzero(keep & (u == who))
        js = np.array([iidx[x] for x in i[rows]])
        # in the units the model trained in (a range wider than 4.5: range / 4.5)
        lo, hi = m.rating_range
        unit = (hi - lo) / 4.5 if hi - lo > 4.5 else 1.0
        X = np.hstack([np.ones((len(js), 1)), m.item_factors[js].astype(np.float64) / np.sqrt(unit)])
        y = (r[rows] - m.global_mean - m.item_bias[js]) / unit
        count = len(js) + 10   # the library's prior of 10 ratings (src/mf/cpu/foldin_cpu.c)
        reg = np.diag([p["lambda_bias"] * count] + [p["lambda_"] * count] * 8)
        theta = np.linalg.solve(X.T @ X + reg, X.T @ y)
        np.testing.assert_allclose(m.user_bias[uidx[who]], unit * theta[0], atol=2e-3)
        np.testing.assert_allclose(m.user_factors[uidx[who]], np.sqrt(unit) * theta[1:], atol=2e-3)
        with self.assertRaises(lacuna.LacunaInputError):
            m.update(u[keep], i[keep], r[keep], rounds=0)

    def test_implicit_feedback(self):
        u, i, r = self.u, self.i, self.r
        m = lacuna.MF(k=8, seed=3, threads=2, epochs=5, implicit=True, loss="bpr").fit(u, i, r)
        p = m.get_params()
        self.assertTrue(p["implicit"])
        self.assertEqual(p["loss"], "bpr")
        self.assertEqual(p["beta"], 0.1)   # the implicit default
        self.assertEqual(m.recommend(u[0], n=3).shape, (3,))
        with self.assertRaises(lacuna.LacunaInputError):
            lacuna.MF(k=8, implicit=True).fit(u, i, r, valid=(u, i, r))
        with self.assertRaises(lacuna.LacunaInputError):
            lacuna.MF(k=8, loss="bpr")
        with self.assertRaises(lacuna.LacunaUnsupportedError):
            m.update(u[:5], i[:5], r[:5])
        s = lacuna.MF(k=8, seed=3, threads=2, epochs=3, implicit=True, negative_share=4).fit(u, i, r)
        self.assertEqual(s.get_params()["negative_share"], 4)
        for bad in (0, 65, True, 2.0):
            with self.assertRaises(lacuna.LacunaInputError):
                lacuna.MF(k=8, implicit=True, negative_share=bad)
        with self.assertRaises(lacuna.LacunaInputError):
            lacuna.MF(k=8, negative_share=2)
        self.assertEqual(p["negative_exponent"], 0.75)   # the default
        self.assertEqual(p["negative_correction"], 1.0)
        e = lacuna.MF(k=8, seed=3, threads=2, epochs=3, implicit=True, negative_exponent=0).fit(u, i, r)
        self.assertEqual(e.get_params()["negative_exponent"], 0.0)
        path = os.path.join(tmpdir(), "e.model")   # the model file keeps it
        e.save(path)
        self.assertEqual(lacuna.MF.load(path).get_params()["negative_exponent"], 0.0)
        self.assertEqual(pickle.loads(pickle.dumps(m)).get_params()["negative_exponent"], 0.75)
        for bad in (-0.1, 2.5, True, "1", float("nan")):
            with self.assertRaises(lacuna.LacunaInputError):
                lacuna.MF(k=8, implicit=True, negative_exponent=bad)
        with self.assertRaises(lacuna.LacunaInputError):
            lacuna.MF(k=8, negative_exponent=1)
        # interaction pairs from a file: "user item" lines train an implicit model as ratings of 1 do,
        # evaluate(path, n=...) reads them too; an explicit fit refuses them
        d = tmpdir()
        cut = len(u) - 300   # the last 300 interactions held out
        for name, fmt in (("pairs", "%d %d\n"), ("ones", "%d %d 1\n")):
            for part, rows in (("train", slice(0, cut)), ("test", slice(cut, None))):
                with open(os.path.join(d, "%s_%s.txt" % (name, part)), "w") as f:
                    f.writelines(fmt % (a, b) for a, b in zip(u[rows], i[rows]))
        kw = dict(k=4, seed=3, threads=1, epochs=3, implicit=True, deterministic=True)
        fp = lacuna.MF(**kw).fit(os.path.join(d, "pairs_train.txt"))
        fo = lacuna.MF(**kw).fit(os.path.join(d, "ones_train.txt"))
        np.testing.assert_array_equal(fp.item_factors, fo.item_factors)
        ep = fp.evaluate(os.path.join(d, "pairs_test.txt"), n=5, negatives=0)
        self.assertGreater(ep["users"], 0)
        self.assertEqual(ep, fo.evaluate(os.path.join(d, "ones_test.txt"), n=5, negatives=0))
        with self.assertRaises(lacuna.LacunaError):
            lacuna.MF(k=4, epochs=2).fit(os.path.join(d, "pairs_train.txt"))
        # and as arrays: fit(users, items) is the pairs file's model; ratings stay required elsewhere
        fa = lacuna.MF(**kw).fit(u[:cut], i[:cut])
        np.testing.assert_array_equal(fa.item_factors, fp.item_factors)
        with self.assertRaises(lacuna.LacunaInputError):
            lacuna.MF(k=4, epochs=2).fit(u, i)
        with self.assertRaises(lacuna.LacunaInputError):
            lacuna.MF(k=4, epochs=2, implicit=True, weighted=True).fit(u, i)
        # the correction for the draws, chosen with lambda_ on held-out interactions under search=True
        c = lacuna.MF(k=8, seed=3, threads=2, epochs=3, implicit=True, search=True).fit(u, i, r)
        self.assertEqual(c.search_["searched"], ["lambda_", "negative_correction"])
        self.assertIn(c.search_["negative_correction"], (0.0, 1.0))
        self.assertEqual(c.get_params()["negative_correction"], c.search_["negative_correction"])
        self.assertGreaterEqual(c.search_["holdout_ndcg"], c.search_["default_ndcg"])
        f = lacuna.MF(k=8, seed=3, threads=2, epochs=3, implicit=True, negative_correction=0.5).fit(u, i, r)
        self.assertEqual(f.get_params()["negative_correction"], 0.5)
        for bad in (-0.1, 1.5, True, "1", float("nan")):
            with self.assertRaises(lacuna.LacunaInputError):
                lacuna.MF(k=8, implicit=True, negative_correction=bad)
        with self.assertRaises(lacuna.LacunaInputError):
            lacuna.MF(k=8, negative_correction=1)

    def test_factors_explain_the_predictions(self):
        m = self.model
        self.assertEqual(m.user_factors.shape, (m.num_users, 8))
        self.assertEqual(m.item_factors.shape, (m.num_items, 8))
        self.assertEqual(m.user_factors.dtype, np.float32)
        uidx = {v: k for k, v in enumerate(m.user_ids)}
        iidx = {v: k for k, v in enumerate(m.item_ids)}
        self.assertEqual(set(uidx), set(self.u[self.tr]))
        ref = np.clip(self.reference_scores(m), *m.rating_range)
        uu, ii = self.u[self.te], self.i[self.te]
        want = ref[[uidx[x] for x in uu], [iidx[x] for x in ii]]
        np.testing.assert_allclose(m.predict(uu, ii), want, atol=1e-4)

    def test_unknown_ids(self):
        m = self.model
        ev = m.evaluate([123456, self.u[0]], [self.i[0], 99999], [3.0, 3.0])
        self.assertEqual(ev["unknown"], 2)
        p = m.predict([123456], [99999])[0]
        self.assertAlmostEqual(float(p), float(np.clip(m.global_mean, *m.rating_range)), places=5)

    def test_recommend_excludes_rated_items(self):
        m = self.model
        users = np.unique(self.u[self.tr])[:20]
        items, scores = m.recommend(users, n=10, scores=True)
        self.assertEqual(items.shape, (20, 10))
        ref = self.reference_scores(m)
        uidx = {v: k for k, v in enumerate(m.user_ids)}
        iidx = {v: k for k, v in enumerate(m.item_ids)}
        train = set(zip(self.u[self.tr].tolist(), self.i[self.tr].tolist()))
        for row, user in enumerate(users):
            rated = {i for (uu, i) in train if uu == user}
            self.assertFalse(rated & set(items[row].tolist()), "recommended a rated item")
            cols = [iidx[i] for i in items[row]]
            np.testing.assert_allclose(scores[row], ref[uidx[user], cols], atol=1e-4)
            self.assertTrue(np.all(np.diff(scores[row]) <= 0))
            others = [iidx[i] for i in m.item_ids if i not in rated and i not in set(items[row].tolist())]
            self.assertGreaterEqual(scores[row][-1] + 1e-4, ref[uidx[user], others].max())
        one = m.recommend(users[0], n=3)
        np.testing.assert_array_equal(one, items[0, :3])
        # a user the model does not know: the items rated most often in training (ties: the
        # model's order), NaN scores; the known users' rows unchanged beside it
        mixed, msc = m.recommend([users[0], -5, users[1]], n=4, scores=True)
        counts = {}
        for i in self.i[self.tr].tolist():
            counts[i] = counts.get(i, 0) + 1
        order = sorted(range(m.num_items), key=lambda k: (-counts.get(m.item_ids[k], 0), k))
        np.testing.assert_array_equal(mixed[1], [m.item_ids[k] for k in order[:4]])
        self.assertTrue(np.all(np.isnan(msc[1])))
        np.testing.assert_array_equal(mixed[0], items[0, :4])
        np.testing.assert_array_equal(mixed[2], items[1, :4])
        # more than there are unrated items: the rest is -1 / NaN
        full, sc = m.recommend(users[0], n=m.num_items + 5, scores=True)
        self.assertEqual(int((full == -1).sum()), len({i for (uu, i) in train if uu == users[0]}) + 5)
        self.assertTrue(np.all(np.isnan(sc[full == -1])))

    def test_save_load_round_trip_bit_for_bit(self):
        d = tmpdir()
        a, b = os.path.join(d, "a.lmf"), os.path.join(d, "b.lmf")
        self.model.save(a)
        m2 = lacuna.MF.load(a)
        m2.save(b)
        self.assertEqual(read_bytes(a), read_bytes(b))
        self.assertEqual(m2.user_factors.tobytes(), self.model.user_factors.tobytes())
        self.assertEqual(m2.item_factors.tobytes(), self.model.item_factors.tobytes())
        np.testing.assert_array_equal(m2.user_ids, self.model.user_ids)
        uu, ii = self.u[self.te], self.i[self.te]
        self.assertEqual(m2.predict(uu, ii).tobytes(), self.model.predict(uu, ii).tobytes())
        self.assertEqual(m2.k, 8)
        self.assertEqual(m2.get_params()["seed"], 3)
        m3 = pickle.loads(pickle.dumps(self.model))
        self.assertEqual(m3.predict(uu, ii).tobytes(), self.model.predict(uu, ii).tobytes())
        # the command-line tool reads the saved model
        if os.access(TOOL, os.X_OK):
            test = os.path.join(d, "test.txt")
            with open(test, "w") as f:
                f.write("".join("%d %d %r\n" % t for t in zip(uu[:50], ii[:50], self.r[self.te][:50])))
            r = subprocess.run([TOOL, "mf", "predict", a, test, os.path.join(d, "p.txt")], capture_output=True,
                               text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            tool = np.loadtxt(os.path.join(d, "p.txt"), usecols=-1, ndmin=1)
            np.testing.assert_allclose(tool, self.model.predict(uu[:50], ii[:50]), atol=1e-4)

    def test_string_ids(self):
        su = np.array(["user %d" % x for x in self.u])
        si = np.array(['it,em "%d"' % x for x in self.i], dtype=object)   # commas, quotes, spaces
        m = lacuna.MF(k=8, seed=3, threads=1, deterministic=True).fit(su[self.tr], si[self.tr], self.r[self.tr])
        self.assertEqual(m.user_ids.dtype, object)
        self.assertIn('it,em "%d"' % self.i[self.tr][0], set(m.item_ids))
        pred = m.predict(su[self.te], si[self.te])
        self.assertLess(np.sqrt(np.mean((pred - self.r[self.te]) ** 2)), 0.5)
        rec = m.recommend(su[self.tr][0], n=4)
        self.assertTrue(all(isinstance(x, str) for x in rec))
        # the same data with integer ids trains the same model (deterministic, one thread)
        m_int = lacuna.MF(k=8, seed=3, threads=1, deterministic=True).fit(self.u[self.tr], self.i[self.tr],
                                                                          self.r[self.tr])
        self.assertEqual(m.user_factors.tobytes(), m_int.user_factors.tobytes())
        d = tmpdir()
        m.save(os.path.join(d, "s.lmf"))
        m2 = lacuna.MF.load(os.path.join(d, "s.lmf"))
        np.testing.assert_array_equal(m2.item_ids, m.item_ids)
        self.assertEqual(m2.predict(su[self.te], si[self.te]).tobytes(), pred.tobytes())

    def test_fit_from_files(self):
        d = tmpdir()
        train, valid = os.path.join(d, "train.txt"), os.path.join(d, "valid.txt")
        for path, idx in ((train, self.tr), (valid, self.te)):
            with open(path, "w") as f:
                f.write("".join("%d %d %r\n" % t for t in zip(self.u[idx], self.i[idx], self.r[idx])))
        m = lacuna.MF(k=8, seed=3, threads=1, deterministic=True).fit(train, valid=valid)
        m2 = lacuna.MF(k=8, seed=3, threads=1, deterministic=True).fit(
            self.u[self.tr], self.i[self.tr], self.r[self.tr], valid=(self.u[self.te], self.i[self.te],
                                                                      self.r[self.te]))
        self.assertEqual(m.user_factors.tobytes(), m2.user_factors.tobytes())
        self.assertAlmostEqual(m.evaluate(valid)["rmse"], m2.report_["valid_rmse"], places=6)
        with open(os.path.join(d, "bad.txt"), "w") as f:
            f.write("1 2 3\n1 2 x\n")
        with self.assertRaises(lacuna.LacunaInputError) as c:
            lacuna.MF().fit(os.path.join(d, "bad.txt"))
        self.assertEqual(c.exception.status, _lib.LAC_ERR_FORMAT)
        self.assertIn("bad.txt:2", str(c.exception))
        m3 = lacuna.MF(k=4, epochs=2).fit(os.path.join(d, "bad.txt"), skip_bad=True)
        self.assertEqual(m3.num_users, 1)

    def test_deterministic(self):
        a = lacuna.MF(k=8, seed=5, threads=2, deterministic=True, epochs=5).fit(self.u, self.i, self.r)
        b = lacuna.MF(k=8, seed=5, threads=2, deterministic=True, epochs=5).fit(self.u, self.i, self.r)
        self.assertEqual(a.user_factors.tobytes(), b.user_factors.tobytes())
        self.assertEqual(a.item_factors.tobytes(), b.item_factors.tobytes())
        c = lacuna.MF(k=8, seed=6, threads=2, deterministic=True, epochs=5).fit(self.u, self.i, self.r)
        self.assertNotEqual(a.user_factors.tobytes(), c.user_factors.tobytes())

    def test_ranking_metrics_against_numpy(self):
        m, n = self.model, 10
        S = self.reference_scores(m)
        uix = {v: k for k, v in enumerate(m.user_ids)}
        iix = {v: k for k, v in enumerate(m.item_ids)}
        rated = {}
        for a, b in zip(self.u[self.tr], self.i[self.tr]):
            rated.setdefault(uix[a], set()).add(iix[b])
        rel = {}
        for a, b in zip(self.u[self.te], self.i[self.te]):
            if a in uix and b in iix and iix[b] not in rated.get(uix[a], ()):
                rel.setdefault(uix[a], set()).add(iix[b])
        figs = []
        for u, T in rel.items():
            s = S[u].copy()
            s[list(rated.get(u, ()))] = -np.inf
            top = np.argsort(-s, kind="stable")[:n]
            hit = np.array([j in T for j in top], float)
            gains = 1 / np.log2(np.arange(n) + 2)
            ap = (np.cumsum(hit) / np.arange(1, n + 1) * hit).sum() / min(len(T), n)
            figs.append([hit.any(), (hit * gains).sum() / gains[:min(len(T), n)].sum(), hit.sum() / n,
                         hit.sum() / len(T), ap])
        want = np.mean(figs, axis=0)
        got = m.evaluate(self.u[self.te], self.i[self.te], n=n, negatives=0)
        self.assertEqual(got["users"], len(rel))
        for name, w in zip(("hr", "ndcg", "precision", "recall", "map"), want):
            self.assertAlmostEqual(got[name], w, delta=0.005, msg=name)
        a = m.evaluate(self.u[self.te], self.i[self.te], n=n)   # 99 sampled negatives
        self.assertEqual(set(a), {"hr", "ndcg", "precision", "recall", "map", "users", "pairs", "skipped"})
        self.assertAlmostEqual(a["recall"], a["hr"], places=12)   # one relevant item a case
        self.assertAlmostEqual(a["precision"], a["hr"] / n, places=12)
        with self.assertRaises(lacuna.LacunaInputError):
            m.evaluate(self.u[self.te], self.i[self.te], n=0)

    def test_search_chooses_what_is_left_open(self):
        m = lacuna.MF(k=8, search=True, seed=5, threads=1, deterministic=True).fit(self.u[self.tr], self.i[self.tr],
                                                                                   self.r[self.tr])
        s = m.search_
        self.assertEqual(s["searched"], ["lambda_", "alpha"])
        self.assertEqual((m.k, s["k"]), (8, 8))
        p = m.get_params()
        self.assertEqual((p["lambda_"], p["alpha"], p["epochs"]), (s["lambda_"], s["alpha"], s["epochs"]))
        self.assertLessEqual(s["holdout_rmse"], s["default_rmse"])
        self.assertGreater(s["trials"], 1)
        self.assertIsNone(lacuna.MF(k=8).search_)

    def test_callback_stops(self):
        m = lacuna.MF(k=4, epochs=50, callback=lambda e: e["epoch"] >= 3).fit(self.u, self.i, self.r)
        self.assertEqual(m.report_["epochs"], 3)
        self.assertEqual([h["epoch"] for h in m.history_], [1, 2, 3])

    def test_neighbourhood_model(self):
        u, i, r = self.u[self.tr], self.i[self.tr], self.r[self.tr]
        valid = (self.u[self.te], self.i[self.te], self.r[self.te])
        m = lacuna.MF(k=8, model="neighbourhood", neighbours="gsm", K=8, seed=3, threads=2, deterministic=True,
                      epochs=6).fit(u, i, r, valid=valid)
        self.assertEqual(m.model, "neighbourhood")
        got = m.get_params()
        self.assertEqual((got["neighbours"], got["K"]), ("gsm", 8))
        self.assertAlmostEqual(got["rates"]["w"], 0.002)   # Table 5
        self.assertAlmostEqual(m.evaluate(*valid)["rmse"], m.report_["valid_rmse"], places=6)
        m2 = lacuna.MF(k=8, model="neighbourhood", neighbours="gsm", K=8, seed=3, threads=2, deterministic=True,
                       epochs=6).fit(u, i, r, valid=valid)
        self.assertEqual(m.user_factors.tobytes(), m2.user_factors.tobytes())
        d = tmpdir()
        m.save(os.path.join(d, "n.lmf"))
        back = lacuna.MF.load(os.path.join(d, "n.lmf"))
        self.assertEqual(back.model, "neighbourhood")
        pred = m.predict(self.u[self.te], self.i[self.te])
        self.assertEqual(back.predict(self.u[self.te], self.i[self.te]).tobytes(), pred.tobytes())
        with self.assertRaises(lacuna.LacunaInputError):
            lacuna.MF(model="neighbourhood", neighbours="lsh")
        with self.assertRaises(lacuna.LacunaInputError):
            lacuna.MF(model="plain", K=8)
        with self.assertRaises(lacuna.LacunaInputError):
            lacuna.MF(model="neighbourhood", rates={"x": 1.0})
        w = lacuna.MF(k=8, model="neighbourhood", neighbours="gsm", K=8, seed=3, threads=2, epochs=6,
                      warm_epochs=20).fit(u, i, r, valid=valid)
        self.assertTrue(1 <= w.report_["warm_epochs"] <= 20)
        self.assertGreater(w.report_["warm_seconds"], 0.0)
        with self.assertRaises(lacuna.LacunaInputError):
            lacuna.MF(model="plain", warm_epochs=3)
        with self.assertRaises(lacuna.LacunaInputError):
            lacuna.MF(model="neighbourhood", warm_epochs=-1)

    def test_errors(self):
        with self.assertRaises(lacuna.LacunaInputError):
            lacuna.MF(model="svd++")
        with self.assertRaises(lacuna.LacunaInputError) as c:
            lacuna.MF(k=0)
        self.assertIn("k", str(c.exception))
        with self.assertRaises(lacuna.LacunaInputError):
            lacuna.MF(k=2.5)
        with self.assertRaises(lacuna.LacunaInputError):
            lacuna.MF(device="tpu")
        with self.assertRaises(lacuna.LacunaInputError) as c:
            lacuna.MF().fit([1, 2], [1, 2, 3], [1.0, 2.0])
        self.assertEqual(c.exception.status, _lib.LAC_ERR_SHAPE)
        with self.assertRaises(lacuna.LacunaInputError) as c:
            lacuna.MF().fit([1.5, 2.5], [1, 2], [1.0, 2.0])   # float ids
        self.assertEqual(c.exception.status, _lib.LAC_ERR_DTYPE)
        with self.assertRaises(lacuna.LacunaInputError) as c:
            lacuna.MF().fit([1, 2], [1, 2], [1.0, np.nan])
        self.assertEqual(c.exception.status, _lib.LAC_ERR_VALUE)
        self.assertIn("ratings[1]", str(c.exception))
        with self.assertRaises(lacuna.LacunaInputError) as c:
            lacuna.MF().fit(["a", ""], ["x", "y"], [1.0, 2.0])
        self.assertIn("users[1]", str(c.exception))
        with self.assertRaises(lacuna.LacunaInputError) as c:
            lacuna.MF().fit([], [], [])
        self.assertEqual(c.exception.status, _lib.LAC_ERR_VALUE)
        with self.assertRaises(lacuna.LacunaInputError):
            lacuna.MF().predict([1], [2])   # not fitted
        with self.assertRaises(lacuna.LacunaInputError) as c:
            self.model.recommend([self.u[0], -5], n=3, unknown="raise")
        self.assertEqual(c.exception.status, _lib.LAC_ERR_RANGE)
        self.assertIn("users[1]", str(c.exception))
        with self.assertRaises(lacuna.LacunaInputError):
            self.model.recommend(self.u[0], n=3, unknown="skip")
        with self.assertRaises(lacuna.LacunaInputError):
            self.model.recommend(self.u[0], n=0)
        d = tmpdir()
        path = os.path.join(d, "m.lmf")
        self.model.save(path)
        data = bytearray(read_bytes(path))
        data[len(data) // 2] ^= 0xFF
        with open(path, "wb") as f:
            f.write(data)
        with self.assertRaises(lacuna.LacunaInputError) as c:
            lacuna.MF.load(path)
        self.assertEqual(c.exception.status, _lib.LAC_ERR_FORMAT)
        self.assertIn("checksum", str(c.exception))
        with self.assertRaises(lacuna.LacunaError) as c:
            lacuna.MF.load(os.path.join(d, "missing.lmf"))
        self.assertEqual(c.exception.status, _lib.LAC_ERR_IO)
        self.assertNotIsInstance(c.exception, ValueError)
        with self.assertRaises(lacuna.LacunaError) as c:
            self.model.save(os.path.join(d, "no", "such", "folder", "m.lmf"))
        self.assertEqual(c.exception.status, _lib.LAC_ERR_IO)
        if NO_CUDA:
            with self.assertRaises(lacuna.LacunaError):
                lacuna.MF(device="cuda").fit(self.u, self.i, self.r)


# ==========================================================================
# Ctrl-C
# ==========================================================================
def interrupt_after(seconds):
    """SIGINT to this process from another thread, as a terminal's Ctrl-C."""
    t = threading.Timer(seconds, os.kill, (os.getpid(), signal.SIGINT))
    t.start()
    return t


@unittest.skipUnless(threading.current_thread() is threading.main_thread(), "signals need the main thread")
class TestInterrupt(unittest.TestCase):
    def test_ctrl_c_stops_training(self):
        (u, i, r), _, _ = ratings_data(seed=2, users=2000, items=1000, count=100000)
        m = lacuna.MF(k=16, epochs=100000, threads=1)
        t0 = time.monotonic()
        interrupt_after(0.5)
        with self.assertRaises(KeyboardInterrupt):
            m.fit(u, i, r)
        elapsed = time.monotonic() - t0
        self.assertLess(elapsed, 10)
        self.assertGreater(len(m.history_), 0)              # the model of the epochs run is kept
        self.assertLess(len(m.history_), 100000)
        self.assertEqual(m.predict(u[:3], i[:3]).shape, (3,))
        self.assertIs(signal.getsignal(signal.SIGINT), signal.default_int_handler)

    def test_ctrl_c_stops_imputation(self):
        N = 120
        E = ring_graph(N)
        G = low_rank_tensor(N, E, 20, 20, 3, seed=4)
        X = G.copy()
        X[::3] = np.nan
        t0 = time.monotonic()
        interrupt_after(0.5)
        with self.assertRaises(KeyboardInterrupt):
            lacuna.impute(E, X, steps=100000, inner=100000, tol=0.0, threads=1)
        self.assertLess(time.monotonic() - t0, 10)
        self.assertIs(signal.getsignal(signal.SIGINT), signal.default_int_handler)

    def test_keyboard_interrupt_raised_in_a_callback(self):
        """A KeyboardInterrupt raised inside the callback (a custom handler) stops too."""
        def handler(signum, frame):
            raise KeyboardInterrupt

        old = signal.signal(signal.SIGINT, handler)
        try:
            (u, i, r), _, _ = ratings_data(seed=2)
            interrupt_after(0.3)
            t0 = time.monotonic()
            with self.assertRaises(KeyboardInterrupt):
                lacuna.MF(k=8, epochs=10**6, threads=1).fit(u, i, r)
            self.assertLess(time.monotonic() - t0, 10)
        finally:
            signal.signal(signal.SIGINT, old)


if __name__ == "__main__":
    logging.basicConfig(level=logging.ERROR)
    unittest.main(verbosity=int(os.environ.get("LACUNA_TEST_VERBOSITY", "1")))
