#!/usr/bin/env bash
# The architecture rules a reader can check (tests/check_architecture.py): the
# shared library exports exactly the public header's LAC_API functions, folders
# include only what the layer rules allow and never in a cycle, and getenv is
# called in one file under src/.
set -euo pipefail
root=${LACUNA_SOURCE_DIR:?}
lib=$(ls "${LACUNA_BUILD_DIR:?}"/liblacuna.so 2>/dev/null | head -1 || true)
if [ -z "$lib" ]; then
    echo "no shared library in $LACUNA_BUILD_DIR (static build): checking the sources only"
    exec /usr/bin/python3 "$root/tests/check_architecture.py" "$root/src"
fi
/usr/bin/python3 "$root/tests/check_architecture.py" "$root/src" "$lib"
# The check itself can fail: a header that names a function the library lacks.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/include/lacuna" "$tmp/src"
sed 's/^LAC_API const char \*lac_version(void);/&\nLAC_API int lac_no_such_function(void);/' \
    "$root/include/lacuna/lacuna.h" >"$tmp/include/lacuna/lacuna.h"
if /usr/bin/python3 "$root/tests/check_architecture.py" "$tmp/src" "$lib" >/dev/null; then
    echo "FAIL: the export check accepted a header with a function the library lacks"
    exit 1
fi
echo "ok"
