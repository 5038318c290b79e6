#!/usr/bin/env bash
# make install's result is usable: headers, library, tool and pkg-config file
# land under the prefix, and a program built with pkg-config links and runs.
set -u
build=${LACUNA_BUILD_DIR:?}
src=${LACUNA_SOURCE_DIR:?}
prefix=$(mktemp -d "${LACUNA_TEST_TMPDIR:-/tmp}/install.XXXXXX")
trap 'rm -rf "$prefix"' EXIT
fails=0; passes=0
check() { if eval "$2"; then passes=$((passes+1)); else echo "FAIL: $1"; fails=$((fails+1)); fi; }

cmake --install "$build" --prefix "$prefix" >/dev/null
check "header installed" "[ -f '$prefix/include/lacuna/lacuna.h' ]"
check "tool installed" "[ -x '$prefix/bin/lacuna' ]"
pc=$(find "$prefix" -name lacuna.pc | head -1)
check "pkg-config file installed" "[ -n '$pc' ]"
if [ -n "$pc" ]; then
  export PKG_CONFIG_PATH=$(dirname "$pc")
  flags=$(pkg-config --cflags --libs lacuna)
  libdir=$(pkg-config --variable=libdir lacuna)
  # Sanitizer builds need the runtime in the example too.
  extra=""; grep -q 'LACUNA_SANITIZE:BOOL=ON' "$build/CMakeCache.txt" && extra="-fsanitize=address,undefined"
  cc -std=c11 $extra "$src/examples/map_hello.c" $flags -o "$prefix/map_hello" 2>&1
  check "example builds against the installed library" "[ -x '$prefix/map_hello' ]"
  out=$(LD_LIBRARY_PATH="$libdir" "$prefix/map_hello" 2>&1); rc=$?
  check "example runs" "[ $rc -eq 0 ]"
  check "example prints the mapped sums (2 5), got '$out'" "[ \"\$out\" = '2 5' ]"
fi
echo "$passes passed, $fails failed"
[ $fails -eq 0 ]
