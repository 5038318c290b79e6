#!/usr/bin/env bash
# The pictures as a browser shows them: headless Chromium (Debian's chromium)
# loads the --plot SVGs of a tiny mf train and impute run and a report page
# from tests/fixtures/bench_results.jsonl, with no console error and a DOM
# that is no parse-error page, and renders each to PNG; tests/png_colours.py
# (zlib + struct) then finds the curves' and bars' colours in the pixels.
# A white SVG must read as blank and a broken one as not loaded, so that
# both checks can fail.
# Exit 77 (ctest SKIP_RETURN_CODE) only when chromium is not installed.
set -u
tool=$1
root=${LACUNA_SOURCE_DIR:?}
py=/usr/bin/python3
browser=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$browser" ]; then
    echo "SKIP: chromium is not installed (apt-get install chromium; make deps does)"
    exit 77
fi
work=$(mktemp -d "${LACUNA_TEST_TMPDIR:-/tmp}/render.XXXXXX")
trap 'rm -rf "$work"' EXIT
fails=0; passes=0
check() { if eval "$2"; then passes=$((passes+1)); else echo "FAIL: $1"; fails=$((fails+1)); fi; }
cd "$work"

# No sandbox (containers have no user namespaces), no GPU, a private profile,
# no first-run or network chatter; console messages go to stderr.
chrome() {
    timeout 20 "$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars --no-first-run \
        --user-data-dir="$work/profile" --disable-extensions --disable-background-networking \
        --enable-logging=stderr --v=0 "$@"
}

# render NAME FILE WIDTH HEIGHT: NAME.png, NAME.dom, NAME.log
render() {
    chrome --dump-dom "file://$work/$2" >"$1.dom" 2>"$1.log"
    chrome --screenshot="$work/$1.png" --window-size="$3,$4" "file://$work/$2" >>"$1.log" 2>&1
}

loaded_cleanly() {   # NAME: a DOM that is no parse-error page, no console error
    grep -q '<svg' "$1.dom" && ! grep -qi 'parsererror\|This page contains the following errors' "$1.dom" &&
        ! grep -E 'CONSOLE|Uncaught|Failed to load|net::ERR' "$1.log" | grep -q .
}

# --- the pictures -----------------------------------------------------------
"$tool" mf gen --users 200 --items 80 --ratings 5000 --seed 4 all.txt 2>/dev/null
"$tool" mf split --fraction 0.2 --seed 2 all.txt train.txt test.txt 2>/dev/null
"$tool" mf train --device cpu --quiet --threads 2 -k 8 -t 15 -v test.txt --plot mf.svg train.txt m.bin
$py -c "
n = 60
for i in range(n): print(i, (i + 1) % n); print(i, (i + 5) % n)" > ring.txt
"$tool" impute gen --graph ring.txt --no-cache --m 6 --n 6 --rank 2 --seed 3 --out x.npy --truth z.npy --observed obs.txt --quiet
"$tool" impute run --graph ring.txt --no-cache --tensor x.npy --truth z.npy --out y.npy --plot imp.svg --quiet
"$tool" report "$root/tests/fixtures/bench_results.jsonl" -o report.html
printf '<svg xmlns="http://www.w3.org/2000/svg" width="200" height="100"><rect width="100%%" height="100%%" fill="#ffffff"/></svg>\n' > white.svg
check "the pictures were written" "[ -s mf.svg ] && [ -s imp.svg ] && [ -s report.html ]"

render mf mf.svg 960 330
render imp imp.svg 960 660
render report report.html 1000 700
render white white.svg 200 100
printf '<svg xmlns="http://www.w3.org/2000/svg"><rect></svg>\n' > broken.svg
chrome --dump-dom "file://$work/broken.svg" >broken.dom 2>broken.log
check "a broken SVG does not pass as loaded" "! loaded_cleanly broken"
for name in mf imp report; do
    check "$name loads without errors" "loaded_cleanly $name"
done
check "the report's DOM holds its three capabilities" \
      "[ \$(grep -o '<h2>[a-z]*</h2>' report.dom | sort -u | wc -l) -eq 3 ]"

# The curves (train blue, validation red), impute's change and rMSE curves,
# the report's bars (figure blue, floor grey, peer orange).
check "mf picture: both curves drawn" "$py '$root/tests/png_colours.py' mf.png '#1f77b4:300' '#d62728:300'"
check "impute picture: its curves drawn" "$py '$root/tests/png_colours.py' imp.png '#1f77b4:600' '#d62728:200'"
check "report page: bars of the three kinds" \
      "$py '$root/tests/png_colours.py' report.png '#1f77b4:500' '#b0b0b0:300' '#ff7f0e:500'"
check "a white picture reads as blank" \
      "$py '$root/tests/png_colours.py' white.png --blank && ! $py '$root/tests/png_colours.py' white.png >/dev/null"

echo "$passes passed, $fails failed"
[ $fails -eq 0 ]
