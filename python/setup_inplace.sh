#!/usr/bin/env bash
# Readies the Python package in place (what `make python` runs): links the
# built liblacuna.so into python/lacuna/, where the package looks for it, so
# that from the repository
#     PYTHONPATH=python /usr/bin/python3 -c 'import lacuna'
# works without LACUNA_LIBRARY. Usage: python/setup_inplace.sh [BUILD_DIR]
# (default: build). The link is relative, so the checkout may move.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
build=${1:-build}
case "$build" in /*) ;; *) build="$root/$build" ;; esac
lib="$build/liblacuna.so"
if [ ! -e "$lib" ]; then
    echo "setup_inplace.sh: no $lib: build the library first (make build)" >&2
    exit 1
fi
ln -sfn "$(realpath -s --relative-to="$here/lacuna" "$lib")" "$here/lacuna/liblacuna.so"
if /usr/bin/python3 -c 'import numpy' 2>/dev/null; then
    PYTHONPATH="$here" PYTHONDONTWRITEBYTECODE=1 LACUNA_LIBRARY= /usr/bin/python3 -c \
        'import lacuna; print("lacuna %s (library %s) ready: PYTHONPATH=python /usr/bin/python3" % (lacuna.__version__, lacuna.library_path))'
else
    echo "setup_inplace.sh: linked $lib; /usr/bin/python3 has no numpy (apt-get install python3-numpy)" >&2
fi
