"""Lacuna from Python: fills the gaps in big, incomplete graph and sparse data.

    lacuna.map(S, R, n, op="sum", weights=None, out=None, deterministic=False, device="auto") -> ndarray
    lacuna.MapPlan(R, n).execute(S)
    lacuna.impute(graph, X, observed=None, device="auto", **options) -> ndarray
    lacuna.MF(k=32, ...).fit(users, items, ratings).predict(users, items)
    lacuna.rank(), lacuna.ranks()   # under mpirun: this process's MPI rank, and how many

A ctypes binding of the public C header (include/lacuna/lacuna.h) of
liblacuna; numpy arrays go in and out without copies where their layout and
dtype allow. Failures raise lacuna.LacunaError (lacuna.LacunaInputError, also a
ValueError, for the caller's mistakes). See docs/python.md.

The library is looked for in $LACUNA_LIBRARY, then as liblacuna.so in this
package's folder or beside it, then as the system's liblacuna.so.0.
"""
from . import _core, _lib
from ._core import LacunaError, LacunaInputError, LacunaUnsupportedError
from ._impute import Graph, impute
from ._map import MapPlan, map
from ._mf import MF

__version__ = "0.1.0"

for _cls in (LacunaError, LacunaInputError, LacunaUnsupportedError, Graph, MapPlan, MF):
    _cls.__module__ = __name__   # lacuna.LacunaInputError in tracebacks and reprs
del _cls

__all__ = ["map", "MapPlan", "impute", "Graph", "MF", "LacunaError", "LacunaInputError", "LacunaUnsupportedError",
           "library_version", "build_info", "cuda_device_count", "library_path", "rank", "ranks"]

library_path = _lib.library_path


def library_version():
    """The loaded library's version ("0.1.0")."""
    return _lib.text(_lib.lib.lac_version())


def build_info():
    """The loaded library's build facts as a dict (version, compiler, openmp, blas, cuda, mpi...)."""
    out = {}
    for line in (_lib.text(_lib.lib.lac_build_info()) or "").splitlines():
        key, sep, value = line.partition(":")
        if sep:
            out[key.strip()] = value.strip()
    return out


def cuda_device_count():
    """CUDA devices this build of the library can use (0 without CUDA)."""
    return _lib.lib.lac_cuda_device_count()


def rank():
    """This process's rank among the MPI ranks the library works with (0 in
    one process; under mpirun with an MPI build, 0 .. ranks() - 1)."""
    return _core.context("cpu").rank


def ranks():
    """How many MPI ranks the library works with: 1 in one process; under
    mpirun, map, impute and MF.fit split their work across them (docs/scaling.md)."""
    return _core.context("cpu").ranks
