#!/usr/bin/env bash
# The worked examples of docs/guide.md run as written: the ```sh blocks of
# sections 3 (mf, from a ratings.dat), 4 (impute, a SNAP edge list and .npy
# arrays) and 5 (map, .npy arrays), in order, with the built lacuna first on
# PATH; then section 4's ```python check, whose rMSE must equal the one the
# run printed. Section 4 runs on a 60-vertex SNAP-style edge list instead of
# the 4039-vertex ego-Facebook graph (the same commands, seconds instead of
# a minute).
set -u
tool=$1
root=${LACUNA_SOURCE_DIR:?}
py=/usr/bin/python3
work=$(mktemp -d "${LACUNA_TEST_TMPDIR:-/tmp}/docs_guide.XXXXXX")
trap 'rm -rf "$work"' EXIT
fails=0; passes=0
check() { if eval "$2"; then passes=$((passes+1)); else echo "FAIL: $1"; fails=$((fails+1)); fi; }
mkdir -p "$work/bin" "$work/data/ego-facebook"
ln -s "$(cd "$(dirname "$tool")" && pwd)/$(basename "$tool")" "$work/bin/lacuna"
cd "$work"
{ echo "# a SNAP-style edge list"; $py -c "
for i in range(60): print(i, (i + 1) % 60); print(i, (i + 7) % 60)"; } > data/ego-facebook/facebook_combined.txt

# block SECTION LANGUAGE: the code blocks of that section, in order
block() {
    $py - "$root/docs/guide.md" "$1" "$2" <<'PY'
import re, sys
text = open(sys.argv[1], encoding="utf-8").read()
section = re.search(r"^## %s\. .*?(?=^## )" % sys.argv[2], text, re.S | re.M).group(0)
print("\n".join(re.findall(r"^```%s\n(.*?)^```" % sys.argv[3], section, re.S | re.M)))
PY
}
export PATH="$work/bin:$PATH" LACUNA_CACHE_DIR="$work/cache"
for s in 3 4 5; do
    block $s sh > "section$s.sh"
    check "section $s has commands" "[ -s section$s.sh ]"
    bash -e -o pipefail "section$s.sh" > "section$s.out" 2> "section$s.err"; rc=$?
    check "section $s runs as written (exit $rc: $(tail -2 section$s.err | tr '\n' ' '))" "[ $rc -eq 0 ]"
done
check "mf: a prediction per test rating" "[ \$(wc -l < predictions.txt) -eq \$(wc -l < test.dat) ] && [ -s train.svg ]"
check "mf: three recommendations for users 1 and 2" "[ \$(grep -c '^[12]	' section3.out) -eq 6 ]"
block 4 python > check4.py
got=$($py check4.py 2>&1 | tail -1)
want=$(sed -n 's/.*"rmse_missing":\([0-9.e-]*\).*/\1/p' section4.out)
check "impute: numpy's rMSE ($got) is the run's ($want)" \
      "[ -n '$want' ] && $py -c 'import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(abs(a - b) > 1e-5 * b)' '$got' '$want'"
check "map: T.npy written" "[ -s T.npy ] && grep -q '\"op\":\"mean\"' section5.out"
echo "$passes passed, $fails failed"
[ $fails -eq 0 ]
