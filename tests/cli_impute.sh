#!/usr/bin/env bash
# lacuna impute from the command line: gen then run on a small graph, the
# basis cache, --json, and every bad input (exit status 2, no output file).
set -uo pipefail
tool="$1"
dir=$(mktemp -d "${LACUNA_TEST_TMPDIR:-/tmp}/cli-impute.XXXXXX")
trap 'rm -rf "$dir"' EXIT
export LACUNA_CACHE_DIR="$dir/cache"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# A connected graph of 40 vertices with sparse ids (ring plus chords).
{
  echo "# Undirected graph: test ring"
  for v in $(seq 0 39); do echo "$((v * 10 + 5)) $((((v + 1) % 40) * 10 + 5))"; done
  for v in $(seq 0 7); do echo "$((v * 10 + 5)) $((((v * 7 + 13) % 40) * 10 + 5))"; done
} >"$dir/g.txt"

# gen: the paper's synthetic data
"$tool" impute gen --graph "$dir/g.txt" --m 6 --n 5 --rank 1 --observed-ratio 0.75 --seed 3 --precision double \
  --out "$dir/x.npy" --truth "$dir/z.npy" --observed "$dir/ids.txt" --quiet || fail "gen exited $?"
for f in x.npy z.npy ids.txt; do [ -s "$dir/$f" ] || fail "gen did not write $f"; done
[ "$(wc -l <"$dir/ids.txt")" = 30 ] || fail "ids.txt should list round(0.75 * 40) = 30 ids, has $(wc -l <"$dir/ids.txt")"
grep -qx 5 "$dir/ids.txt" || grep -qx 15 "$dir/ids.txt" || fail "ids.txt should hold the file's ids (5, 15, ...)"
[ -n "$(ls "$dir/cache")" ] || fail "gen wrote no basis cache"

# run with the id list, the truth and --json
out=$("$tool" impute run --graph "$dir/g.txt" --tensor "$dir/x.npy" --observed "$dir/ids.txt" --truth "$dir/z.npy" \
  --out "$dir/y.npy" --precision double --iters 12 --inner 30 --accelerate --log "$dir/log.txt" --json 2>"$dir/err.txt")
rc=$?
[ $rc = 0 ] || fail "run exited $rc: $(cat "$dir/err.txt")"
[ -s "$dir/y.npy" ] || fail "run wrote no output"
echo "$out" | grep -q '"iterations":' || fail "no iterations in JSON: $out"
echo "$out" | grep -q '"seconds":' || fail "no seconds in JSON: $out"
echo "$out" | grep -q '"basis_cached":true' || fail "the basis should come from the cache gen wrote: $out"
rmse=$(echo "$out" | sed -n 's/.*"rmse_missing":\([^,}]*\).*/\1/p')
[ -n "$rmse" ] && awk -v r="$rmse" 'BEGIN { exit !(r < 0.05) }' || fail "rmse_missing $rmse should be < 0.05: $out"
echo "$out" | grep -q '"rmse_all":' || fail "no rmse_all in JSON: $out"
iters=$(echo "$out" | sed -n 's/.*"iterations":\([0-9]*\).*/\1/p')
[ "$(wc -l <"$dir/log.txt")" = "$iters" ] || fail "the log should have one line per iteration ($iters)"
[ "$(awk '{ print NF; exit }' "$dir/log.txt")" = 8 ] || fail "log lines should have 8 columns"

# NaN-marked slices instead of an id list give the same output
"$tool" impute run --graph "$dir/g.txt" --tensor "$dir/x.npy" --out "$dir/y2.npy" --precision double --iters 12 \
  --inner 30 --accelerate --quiet || fail "NaN-marked run exited $?"
cmp -s "$dir/y.npy" "$dir/y2.npy" || fail "NaN-marked slices and the id list should give the same output"

# no --truth: no rmse keys
out=$("$tool" impute run --graph "$dir/g.txt" --tensor "$dir/x.npy" --out "$dir/y3.npy" --iters 3 --json --quiet)
echo "$out" | grep -q rmse && fail "rmse keys without --truth: $out"

# --gemm: the JSON names the mode; the CPU ignores it (same output as fp32)
out=$("$tool" impute run --graph "$dir/g.txt" --tensor "$dir/x.npy" --out "$dir/y4.npy" --iters 3 --gemm 3xtf32 --json --quiet)
echo "$out" | grep -q '"gemm":"3xtf32"' || fail "--gemm 3xtf32: the JSON should say gemm 3xtf32: $out"
cmp -s "$dir/y3.npy" "$dir/y4.npy" || fail "--gemm 3xtf32 on the CPU should not change the output"

# --select-lambda: the hold-out curve in the JSON and a table on stderr; the fit is the schedule stopped at
# the kept step; the same seed gives the same output
out=$("$tool" impute run --graph "$dir/g.txt" --tensor "$dir/x.npy" --observed "$dir/ids.txt" --out "$dir/ys.npy" \
  --precision double --iters 8 --decay 0.4 --select-lambda holdout:0.25 --select-seed 4 --json 2>"$dir/err.txt")
rc=$?
[ $rc = 0 ] || fail "--select-lambda run exited $rc: $(cat "$dir/err.txt")"
grep -q "hold-out rMSE" "$dir/err.txt" || fail "--select-lambda: no table on stderr: $(cat "$dir/err.txt")"
grep -q "<- kept" "$dir/err.txt" || fail "--select-lambda: the table marks no kept step"
if [ -x /usr/bin/python3 ]; then
  chosen=$(/usr/bin/python3 - "$out" <<'PY'
import json, sys
j = json.loads(sys.argv[1])
s = j["lambda_selection"]
assert s["fraction"] == 0.25 and s["method"] == "holdout" and s["held_out_unit"] == "vertices", s
assert s["held_out"] == round(0.25 * 30), s          # 30 observed vertices
curve = s["curve"]
assert len(curve) == 8, curve
errors = [c["holdout_rmse"] for c in curve]
k = min(range(len(errors)), key=lambda i: (errors[i], i))
assert s["chosen_step"] == k + 1 and j["steps"] == k + 1, (s, j["steps"])
assert abs(curve[k]["lambda_scale"] - 0.4 ** k) < 1e-12 and abs(s["chosen_scale"] - 0.4 ** k) < 1e-12, s
assert s["holdout_rmse"] == errors[k] and s["chosen_lambda_max"] > 0, s
print(k + 1)
PY
) || fail "--select-lambda JSON: $out"
  if [ -n "$chosen" ]; then
    "$tool" impute run --graph "$dir/g.txt" --tensor "$dir/x.npy" --observed "$dir/ids.txt" --out "$dir/yc.npy" \
      --precision double --iters "$chosen" --decay 0.4 --quiet || fail "run to the kept step exited $?"
    cmp -s "$dir/ys.npy" "$dir/yc.npy" || fail "--select-lambda should equal the schedule stopped at step $chosen"
  fi
fi
"$tool" impute run --graph "$dir/g.txt" --tensor "$dir/x.npy" --observed "$dir/ids.txt" --out "$dir/ys2.npy" \
  --precision double --iters 8 --decay 0.4 --select-lambda holdout:0.25 --select-seed 4 --quiet ||
  fail "second --select-lambda run exited $?"
cmp -s "$dir/ys.npy" "$dir/ys2.npy" || fail "--select-lambda with one seed should give one output"
out=$("$tool" impute run --graph "$dir/g.txt" --tensor "$dir/x.npy" --observed "$dir/ids.txt" --out "$dir/ys3.npy" \
  --iters 3 --select-lambda holdout --json --quiet)
echo "$out" | grep -q '"fraction":0.1,' || fail "--select-lambda holdout should hold out 0.1: $out"
echo "$out" | grep -q '"held_out":3,' || fail "--select-lambda holdout should hold out round(0.1 * 30) = 3: $out"

# Bad input: exit 2 (1 for a file that cannot be read), a message, no output file.
expect_bad() {
  local what="$1" pattern="$2" want=2
  shift 2
  if [ "$1" = "--exit" ]; then want=$2; shift 2; fi
  rm -f "$dir/bad.npy"
  "$tool" impute "$@" --quiet 2>"$dir/err.txt" >/dev/null
  local rc=$?
  [ $rc = "$want" ] || fail "$what: exit $rc, expected $want ($(cat "$dir/err.txt"))"
  grep -q "$pattern" "$dir/err.txt" || fail "$what: message lacks '$pattern': $(cat "$dir/err.txt")"
  [ -e "$dir/bad.npy" ] && fail "$what: an output file was written"
  ls "$dir" | grep -q '\.tmp\.' && fail "$what: a temporary file was left"
}
expect_bad "unknown GEMM mode" "3xtf32" run --graph "$dir/g.txt" --tensor "$dir/x.npy" --out "$dir/bad.npy" --gemm bf16
echo "5 15" >"$dir/small.txt"
expect_bad "shape mismatch" "slices but the graph has 2" run --graph "$dir/small.txt" --tensor "$dir/x.npy" --out "$dir/bad.npy"
echo "5 999" >"$dir/unknown_ids.txt"
expect_bad "ids out of range" "999" run --graph "$dir/g.txt" --tensor "$dir/x.npy" --observed "$dir/unknown_ids.txt" --out "$dir/bad.npy"
echo "# nobody" >"$dir/no_ids.txt"
expect_bad "empty observed set" "names no vertex" run --graph "$dir/g.txt" --tensor "$dir/x.npy" --observed "$dir/no_ids.txt" --out "$dir/bad.npy"
# every slice NaN: an empty observed set
/usr/bin/python3 -c "import numpy as np; np.save('$dir/allnan.npy', np.full((40, 6, 5), np.nan))" 2>/dev/null &&
  expect_bad "all NaN" "empty" run --graph "$dir/g.txt" --tensor "$dir/allnan.npy" --out "$dir/bad.npy"
# NaN inside an observed slice: observe every vertex
awk '!/^#/ { print $1; print $2 }' "$dir/g.txt" | sort -un >"$dir/all_ids.txt"
expect_bad "NaN in observed data" "is NaN but marked observed" run --graph "$dir/g.txt" --tensor "$dir/x.npy" --observed "$dir/all_ids.txt" --out "$dir/bad.npy"
expect_bad "missing graph" "cannot open" --exit 1 run --graph "$dir/none.txt" --tensor "$dir/x.npy" --out "$dir/bad.npy"
expect_bad "bad option value" "decay" run --graph "$dir/g.txt" --tensor "$dir/x.npy" --out "$dir/bad.npy" --decay 2
expect_bad "unknown verb" "unknown verb" fill --graph "$dir/g.txt"
for spec in holdout:0 holdout:1 holdout:-0.5 holdout:1.5 holdout:abc holdout: holdout:0.2x kfold holdouts; do
  expect_bad "--select-lambda $spec" "select-lambda" run --graph "$dir/g.txt" --tensor "$dir/x.npy" --out "$dir/bad.npy" \
    --select-lambda "$spec"
done
echo 5 >"$dir/one_id.txt"
expect_bad "--select-lambda with one observed vertex" "at least 2 observed vertices" run --graph "$dir/g.txt" \
  --tensor "$dir/x.npy" --observed "$dir/one_id.txt" --out "$dir/bad.npy" --select-lambda holdout
printf '0 1\n1 x\n' >"$dir/broken.txt"
expect_bad "malformed graph" "broken.txt:2:" run --graph "$dir/broken.txt" --tensor "$dir/x.npy" --out "$dir/bad.npy"

# Sizes from a header that the file cannot back: input errors, not allocations
printf '%%%%MatrixMarket matrix coordinate pattern general\n1000000000000 1000000000000 1\n1 2\n' >"$dir/huge.mtx"
expect_bad "10^12 vertices in a 60-byte file" "1000000000000 vertices" gen --graph "$dir/huge.mtx" --out "$dir/bad.npy" --truth "$dir/bz.npy" --observed "$dir/bo.txt"
printf '%%%%MatrixMarket matrix coordinate pattern general\n3 3 1000000000000\n1 2\n' >"$dir/many.mtx"
expect_bad "10^12 entries in a 60-byte file" "promises 1000000000000 entries" gen --graph "$dir/many.mtx" --out "$dir/bad.npy" --truth "$dir/bz.npy" --observed "$dir/bo.txt"
printf '%%%%MatrixMarket matrix coordinate pattern general\n3 3 1\n1 2\n2 3\n' >"$dir/extra.mtx"
expect_bad "more entries than the size line" "more entries than the 1" run --graph "$dir/extra.mtx" --tensor "$dir/x.npy" --out "$dir/bad.npy"
if [ -x /usr/bin/python3 ]; then
  out=$("$tool" impute run --graph "$dir/g.txt" --tensor "$dir/x.npy" --truth "$dir/z.npy" --out "$dir/y5.npy" --iters 2 --json --quiet)
  /usr/bin/python3 -c 'import json,sys; json.loads(sys.argv[1])' "$out" || fail "impute run --json does not parse: $out"
fi

# --device cuda: a clear error, never a crash (no CUDA in the build, or no impute there yet)
"$tool" impute run --graph "$dir/g.txt" --tensor "$dir/x.npy" --out "$dir/bad.npy" --device cuda --quiet 2>"$dir/err.txt"
rc=$?
[ $rc = 1 ] || [ $rc = 2 ] || fail "--device cuda: exit $rc, expected 1 or 2"
grep -qi "cuda" "$dir/err.txt" || fail "--device cuda: message should name CUDA: $(cat "$dir/err.txt")"
[ -e "$dir/bad.npy" ] && fail "--device cuda wrote an output"
# several devices: the same clear error without a GPU; a malformed list is a usage error
"$tool" impute run --graph "$dir/g.txt" --tensor "$dir/x.npy" --out "$dir/bad.npy" --device cuda:0,0 --quiet 2>"$dir/err.txt"
rc=$?
[ $rc = 1 ] || [ $rc = 2 ] || fail "--device cuda:0,0: exit $rc, expected 1 or 2"
grep -qi "cuda" "$dir/err.txt" || fail "--device cuda:0,0: message should name CUDA: $(cat "$dir/err.txt")"
for bad in cuda:0, cuda:,1 cuda:0,x; do
  "$tool" impute run --graph "$dir/g.txt" --tensor "$dir/x.npy" --out "$dir/bad.npy" --device "$bad" --quiet 2>"$dir/err.txt"
  rc=$?
  [ $rc = 2 ] || fail "--device $bad: exit $rc, expected 2"
  grep -q "bad --device" "$dir/err.txt" || fail "--device $bad: $(cat "$dir/err.txt")"
done
[ -e "$dir/bad.npy" ] && fail "a bad --device wrote an output"

# A damaged cache is recomputed, not trusted.
cache=$(ls "$dir"/cache/*f64.bin | head -1)
printf 'garbage' | dd of="$cache" bs=1 seek=100 conv=notrunc 2>/dev/null
"$tool" impute run --graph "$dir/g.txt" --tensor "$dir/x.npy" --out "$dir/y4.npy" --precision double --iters 2 --json \
  --quiet | grep -q '"basis_cached":false' || fail "a damaged cache should be recomputed"

"$tool" impute --help | grep -q "impute run" || fail "--help"
if [ $failures -gt 0 ]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "cli_impute: all passed"
