#!/usr/bin/env bash
# make install's result is usable: headers, library, tool, man page and
# pkg-config file land under the prefix, and the examples built with
# pkg-config link and run.
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
check "man page installed" "[ -f '$prefix/share/man/man1/lacuna.1' ] && cmp -s '$prefix/share/man/man1/lacuna.1' '$src/docs/lacuna.1'"
if command -v man >/dev/null; then
  check "man finds it under the prefix" "MANPATH='$prefix/share/man' MANWIDTH=80 man lacuna 2>/dev/null | grep -q 'lacuna - fill the gaps'"
fi
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
  cc -std=c11 $extra "$src/examples/guide_tour.c" $flags -lm -o "$prefix/guide_tour" 2>&1
  out=$(LD_LIBRARY_PATH="$libdir" "$prefix/guide_tour" 2>&1); rc=$?
  check "the guide's C program builds and runs against the installed library" "[ $rc -eq 0 ]"
fi
echo "$passes passed, $fails failed"
[ $fails -eq 0 ]
