#!/usr/bin/env bash
# The Python package (python/lacuna) against this build's library:
# python/tests/test_lacuna.py under Debian's python3 (every function, the
# errors, numpy references, the header check), then the two ways of readying
# it: python/setup_inplace.sh on a copy of python/, and python/install.sh into
# a scratch prefix, each imported without LACUNA_LIBRARY.
set -u
src=${LACUNA_SOURCE_DIR:?}
build=${LACUNA_BUILD_DIR:?}
tool=$(realpath -s "${1:-$build/lacuna}")
py=/usr/bin/python3
fails=0; passes=0
check() { if eval "$2"; then passes=$((passes+1)); else echo "FAIL: $1"; fails=$((fails+1)); fi; }

if ! $py -c 'import numpy' 2>/dev/null; then
    echo "FAIL: $py has no numpy (apt-get install python3-numpy; make deps does)"
    exit 1
fi
lib="$build/liblacuna.so"
if [ ! -e "$lib" ]; then
    echo "no shared library in $build (static build): the Python package needs liblacuna.so; skipped"
    exit 0
fi
dir=$(mktemp -d "${LACUNA_TEST_TMPDIR:-/tmp}/cli_python.XXXXXX")
trap 'rm -rf "$dir"' EXIT
export PYTHONDONTWRITEBYTECODE=1   # no __pycache__ in the source tree
unset LACUNA_LIBRARY
# A sanitizer build: the interpreter is not built with the sanitizers, so
# their runtimes must load first; the interpreter's own leaks are not ours.
if grep -q 'LACUNA_SANITIZE:BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null; then
    cc=$(sed -n 's/^CMAKE_C_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt"); cc=${cc:-cc}
    export LD_PRELOAD="$($cc -print-file-name=libasan.so) $($cc -print-file-name=libubsan.so)"
    export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
fi

# --- the test file -------------------------------------------------------------
LACUNA_LIBRARY="$lib" LACUNA_TOOL="$tool" LACUNA_TEST_TMPDIR="$dir" PYTHONPATH="$src/python" \
    $py "$src/python/tests/test_lacuna.py" 2>&1; rc=$?
check "python/tests/test_lacuna.py passes" "[ $rc -eq 0 ]"

# --- make python: the library linked in place (on a copy of python/) --------------
mkdir -p "$dir/inplace"
cp -r "$src/python" "$dir/inplace/python"
rm -f "$dir/inplace/python/lacuna/liblacuna.so"
out=$(bash "$dir/inplace/python/setup_inplace.sh" "$build" 2>&1); rc=$?
check "setup_inplace.sh succeeds: $out" "[ $rc -eq 0 ]"
check "setup_inplace.sh links the library beside the package" "[ -L '$dir/inplace/python/lacuna/liblacuna.so' ]"
got=$(cd "$dir/inplace" && PYTHONPATH=python $py -c \
      'import lacuna; print(lacuna.library_path, lacuna.map([1.0, 2.0, 3.0], [1, 0, 1], 2).tolist())' 2>&1)
check "PYTHONPATH=python imports lacuna and finds the library beside it, got '$got'" \
      "[ \"\$got\" = '$dir/inplace/python/lacuna/liblacuna.so [2.0, 4.0]' ]"
bash "$dir/inplace/python/setup_inplace.sh" "$dir/no-build" >/dev/null 2>&1; rc=$?
check "setup_inplace.sh without a built library fails" "[ $rc -ne 0 ]"

# --- make install: the package lands beside the installed library ---------------------
prefix="$dir/prefix"
cmake --install "$build" --prefix "$prefix" >/dev/null 2>&1
site="$prefix/site"
out=$(PYTHON_SITEDIR="$site" bash "$src/python/install.sh" "$prefix" 2>&1); rc=$?
check "install.sh succeeds: $out" "[ $rc -eq 0 ]"
check "the package is installed" "[ -f '$site/lacuna/__init__.py' ] && [ -f '$site/lacuna/_lib.py' ]"
# prints whether the library loaded lies under argv[1], and its version
loaded='import lacuna, os, sys
print(os.path.realpath(lacuna.library_path).startswith(sys.argv[1] + "/"), lacuna.library_version())'
got=$(cd "$dir" && PYTHONPATH="$site" $py -c "$loaded" "$(realpath "$prefix")" 2>&1)
check "the installed package loads the installed library, got '$got'" "[ \"\$got\" = 'True 0.1.0' ]"
out=$(bash "$src/python/install.sh" "$dir/prefix2" 2>&1); rc=$?
check "install.sh without an installed library fails" "[ $rc -ne 0 ]"
# a staged install (DESTDIR) for /usr/local: Debian's site folder under the stage
stage="$dir/stage"
DESTDIR="$stage" cmake --install "$build" --prefix /usr/local >/dev/null 2>&1
DESTDIR="$stage" bash "$src/python/install.sh" /usr/local >/dev/null 2>&1; rc=$?
ver=$($py -c 'import sys; print("%d.%d" % sys.version_info[:2])')
site="$stage/usr/local/lib/python$ver/dist-packages"
check "install.sh honours DESTDIR" "[ $rc -eq 0 ] && [ -f '$site/lacuna/__init__.py' ]"
got=$(cd "$dir" && PYTHONPATH="$site" $py -c "$loaded" "$(realpath "$stage")" 2>&1)
check "the staged package links the staged library, got '$got'" "[ \"\$got\" = 'True 0.1.0' ]"

echo "$passes passed, $fails failed"
[ $fails -eq 0 ]
