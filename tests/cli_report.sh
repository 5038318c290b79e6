#!/usr/bin/env bash
# lacuna report: the page from a fixture is self-contained, its bars are in
# proportion to the figures and its tables hold them; bad input is exit 2
# with the file and line, and no output is written or replaced.
set -u
tool=$1
root=${LACUNA_SOURCE_DIR:?}
py=/usr/bin/python3
work=$(mktemp -d "${LACUNA_TEST_TMPDIR:-/tmp}/cli_report.XXXXXX")
trap 'rm -rf "$work"' EXIT
fails=0; passes=0
check() { if eval "$2"; then passes=$((passes+1)); else echo "FAIL: $1"; fails=$((fails+1)); fi; }
cd "$work"

# --- report -----------------------------------------------------------------
fixture=$root/tests/fixtures/bench_results.jsonl
"$tool" report "$fixture" -o report.html; rc=$?
check "report exits 0" "[ $rc -eq 0 ] && [ -s report.html ]"
$py - report.html "$fixture" >report_check.txt 2>&1 <<'EOF'
import json, math, re, sys, xml.etree.ElementTree as ET
page = open(sys.argv[1]).read()
figs = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
ns = "{http://www.w3.org/2000/svg}"
# Nothing fetched: no src, href, url(), @import; the only URL is the SVG namespace.
assert not re.search(r"src=|href=|url\(|@import", page), "an external resource"
assert set(re.findall(r"https?://[^\"' <]+", page)) <= {"http://www.w3.org/2000/svg"}, "a URL"
svgs = re.findall(r"<svg.*?</svg>", page, re.S)
# One chart per (capability, unit).
assert len(svgs) == len({(f["capability"], f["unit"]) for f in figs}), "charts: %d" % len(svgs)
bars = 0
for s in svgs:
    root = ET.fromstring(s)
    rects = [r for r in root.iter(ns + "rect") if r.get("fill") in ("#1f77b4", "#b0b0b0", "#ff7f0e")]
    bars += len(rects)
    label = [t for t in root.iter(ns + "text") if t.get("text-anchor") == "middle" and not t.get("font-size")]
    if "(log scale)" in (label[-1].text or ""):
        continue
    # linear from zero: width proportional to the value printed beside the bar
    texts = [t for t in root.iter(ns + "text") if t.get("font-size") == "10" and t.get("text-anchor") is None]
    ratios = [float(r.get("width")) / float(t.text) for r, t in zip(rects, texts)]
    assert max(ratios) / min(ratios) < 1.02, "bars out of proportion: %s" % ratios
want = sum(1 + (f.get("floor") is not None) + (f.get("peer") is not None) for f in figs)
assert bars == want, "bars: %d, figures/floors/peers: %d" % (bars, want)
# The tables: every case with its value, the machine escaped.
for f in figs:
    assert "<td>%s</td><td>%.4g</td>" % (f["case"], f["value"]) in page, f["case"]
assert "test machine &lt;2 cores&gt; &amp; &quot;quotes&quot;" in page
print("ok")
EOF
check "report: self-contained, bars in proportion, tables hold the figures ($(tail -1 report_check.txt))" "grep -qx ok report_check.txt"

cp report.html keep.html
printf '{"capability": "map", "case": "a", "value": 1, "unit": "ms"}\n\n{"capability": "map", "case": "b", "value": "fast", "unit": "ms"}\n' > bad1.jsonl
"$tool" report bad1.jsonl -o report.html 2>err.txt; rc=$?
check "a value of the wrong type: exit 2, file and line" "[ $rc -eq 2 ] && grep -q 'bad1.jsonl:3: \"value\" must be a number' err.txt"
check "a failed report leaves the old page" "cmp -s report.html keep.html"
printf '{"capability": "map", "case": "a", "value": 1, "unit": "ms"\n' > bad2.jsonl
"$tool" report bad2.jsonl -o r2.html 2>err.txt; rc=$?
check "a malformed line: exit 2, file, line and column" "[ $rc -eq 2 ] && grep -q 'bad2.jsonl:1: not a JSON object: column' err.txt && [ ! -e r2.html ]"
printf '{"case": "a", "value": 1, "unit": "ms"}\n' > bad3.jsonl
"$tool" report bad3.jsonl -o r2.html 2>err.txt; rc=$?
check "a missing key is named" "[ $rc -eq 2 ] && grep -q 'bad3.jsonl:1: \"capability\" missing' err.txt"
printf '{"capability": "map", "case": "a", "value": 1, "unit": "ms", "unit": "s"}\n' > bad4.jsonl
"$tool" report bad4.jsonl -o r2.html 2>err.txt; rc=$?
check "a key given twice is refused" "[ $rc -eq 2 ] && grep -q 'given twice' err.txt"
"$tool" report no_such.jsonl -o r2.html 2>err.txt; rc=$?
check "an unreadable file: exit 2, named" "[ $rc -eq 2 ] && grep -q 'cannot open no_such.jsonl' err.txt && [ ! -e r2.html ]"
"$tool" report "$fixture" -o "$fixture" 2>err.txt; rc=$?
check "-o naming an input exits 2" "[ $rc -eq 2 ] && grep -q 'same file' err.txt"
out=$("$tool" report - <"$fixture"); rc=$?
check "- reads stdin, writes stdout" "[ $rc -eq 0 ] && grep -q '</html>' <<<\"\$out\""

$py "$root/tests/report_reader_check.py" "$tool" >reader_check.txt 2>&1
check "the JSON reader agrees with Python's json ($(tail -1 reader_check.txt))" "grep -qx ok reader_check.txt || { cat reader_check.txt; false; }"

echo "$passes passed, $fails failed"
[ $fails -eq 0 ]
