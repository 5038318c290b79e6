# Sourced by the tests that run lacuna under mpirun (tests/cli_mpi*.sh) with
# $tool and $py set: skips (77) without MPI in the build, mpirun or numpy;
# check(), a scratch folder named after $1 that the test runs in, Open MPI's
# settings for this host, mpi NP COMMAND... (--oversubscribe, a timeout), and
# compare, key and close for the results.
if ! "$tool" info --json | grep -q '"mpi":true'; then echo "SKIP: this build has no MPI"; exit 77; fi
if ! command -v mpirun >/dev/null; then echo "SKIP: no mpirun"; exit 77; fi
if ! "$py" -c 'import numpy' 2>/dev/null; then echo "SKIP: no numpy"; exit 77; fi
fails=0; passes=0
check() { if eval "$2"; then passes=$((passes+1)); else echo "FAIL: $1"; fails=$((fails+1)); fi; }
dir=$(mktemp -d "${LACUNA_TEST_TMPDIR:-/tmp}/$1.XXXXXX")
trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 1
# Containers run the tests as root; Open MPI refuses that unless told.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Ranks waiting in a collective yield the core (more ranks than cores here).
export OMPI_MCA_mpi_yield_when_idle=1
# One host: shared memory only (probing network transports costs most of a start).
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader
# Open MPI keeps allocations to the end of the process (dlopen'd components):
# the sanitizer build checks memory errors here, and leaks in the other tests.
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
mpi() { local np=$1; shift; timeout 120 mpirun -np "$np" --oversubscribe "$@"; }
# compare A B TOL: same shape and dtype, |A - B| <= TOL * (1 + |B|), NaN where B has NaN
compare() { "$py" -c "
import numpy as np, sys
a, b = np.load('$1'), np.load('$2')
ok = a.shape == b.shape and a.dtype == b.dtype and np.array_equal(np.isnan(a), np.isnan(b))
ok = ok and bool(np.all(np.abs(np.nan_to_num(a) - np.nan_to_num(b)) <= $3 * (1 + np.abs(np.nan_to_num(b)))))
sys.exit(0 if ok else 1)"; }
# key NAME FILE: a value from a --json line
key() { "$py" -c "import json, sys; print(json.loads(open('$2').read())['$1'])"; }
# close A B: |A - B| <= TOL * B (TOL set by the test)
close() { "$py" -c "import sys; sys.exit(0 if abs($1 - $2) <= $TOL * $2 else 1)"; }
