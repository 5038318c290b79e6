#!/usr/bin/env bash
# docs/lacuna.1 renders without a warning under groff -ww (every warning)
# and man -l, and names every command, verb and option that `lacuna --help`
# lists, as docs/guide.md does (tests/docs_options.py). A page with an
# unknown macro must draw a warning, so the check can fail.
# Exit 77 (ctest SKIP_RETURN_CODE) when neither groff nor man is installed;
# the options are still checked first.
set -u
tool=$1
root=${LACUNA_SOURCE_DIR:?}
page=$root/docs/lacuna.1
work=$(mktemp -d "${LACUNA_TEST_TMPDIR:-/tmp}/docs_man.XXXXXX")
trap 'rm -rf "$work"' EXIT
fails=0; passes=0
check() { if eval "$2"; then passes=$((passes+1)); else echo "FAIL: $1"; fails=$((fails+1)); fi; }

/usr/bin/python3 "$root/tests/docs_options.py" "$tool" "$root/docs/guide.md" "$page"
check "the guide and the man page name every command and option" "[ $? -eq 0 ]"

if ! command -v groff >/dev/null && ! command -v man >/dev/null; then
    echo "$passes passed, $fails failed"
    [ $fails -eq 0 ] || exit 1
    echo "SKIP: neither groff nor man is installed (apt-get install groff-base man-db)"
    exit 77
fi
if command -v groff >/dev/null; then
    groff -man -Tutf8 -ww -z "$page" >"$work/groff.err" 2>&1; rc=$?
    check "groff -ww renders it without a warning: $(head -3 "$work/groff.err")" "[ $rc -eq 0 ] && [ ! -s '$work/groff.err' ]"
    sed 's/^\.SH EXIT STATUS/.XX nonsense\n&/' "$page" >"$work/bad.1"
    groff -man -Tutf8 -ww -z "$work/bad.1" >"$work/bad.err" 2>&1
    check "an unknown macro draws a warning" "[ -s '$work/bad.err' ]"
fi
if command -v man >/dev/null; then
    LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -l "$page" >"$work/man.txt" 2>"$work/man.err"; rc=$?
    check "man -l renders it without a warning: $(head -3 "$work/man.err")" "[ $rc -eq 0 ] && [ ! -s '$work/man.err' ]"
    check "the rendered page has its sections" \
          "grep -q '^NAME' '$work/man.txt' && grep -q '^EXIT STATUS' '$work/man.txt' && grep -q -- '--plot FILE.svg' '$work/man.txt'"
fi
echo "$passes passed, $fails failed"
[ $fails -eq 0 ]
