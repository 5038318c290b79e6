#!/usr/bin/env bash
# lacuna map from the command line: results against a NumPy reference (when
# /usr/bin/python3 has numpy), text inputs against hand-computed values, the
# --json keys, --plan, --accumulate, exit codes and no output file on failure.
set -u
tool=$1
fails=0; passes=0
check() { if eval "$2"; then passes=$((passes+1)); else echo "FAIL: $1"; fails=$((fails+1)); fi; }
dir=$(mktemp -d "${LACUNA_TEST_TMPDIR:-/tmp}/cli_map.XXXXXX")
trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 1

# --- text inputs, values worked out by hand ---------------------------------
printf '1\n2\n3\n4\n-5\n' > S.txt
printf '2\n0\n2\n2\n0\n' > R.txt
printf '1\n1\n2\n1\n1\n' > w.txt
out=$("$tool" map --source S.txt --bridge R.txt --quiet); rc=$?
check "text happy path exits 0" "[ $rc -eq 0 ]"
check "default targets = max(R)+1 = 3 rows" "[ \$(grep -vc '^#' <<<\"\$out\") -eq 3 ]"
check "sum of target 0 is -3" "grep -qP '^0\t-3$' <<<\"\$out\""
check "target 1 is empty (0)" "grep -qP '^1\t0$' <<<\"\$out\""
check "sum of target 2 is 8" "grep -qP '^2\t8$' <<<\"\$out\""
out=$("$tool" map --source S.txt --bridge R.txt --weights w.txt --op mean --targets 4 --empty -1 --quiet)
check "weighted mean of target 2 is 11/4" "grep -qP '^2\t2.75$' <<<\"\$out\""
check "--targets 4 gives 4 rows, empty ones -1" "grep -qP '^3\t-1$' <<<\"\$out\""
"$tool" map --source S.txt --bridge R.txt --op count --out T.txt --quiet; rc=$?
check "count to a text file" "[ $rc -eq 0 ] && [ \"\$(tr '\n' ' ' < T.txt)\" = '2 0 3 ' ]"
"$tool" map --source S.txt --bridge R.txt --op count --out T.txt --accumulate --quiet
check "--accumulate adds to the existing T" "[ \"\$(tr '\n' ' ' < T.txt)\" = '4 0 6 ' ]"
"$tool" map --source S.txt --bridge R.txt --op count --out T.txt --accumulate --repeat 3 --quiet
check "--accumulate --repeat 3 adds once" "[ \"\$(tr '\n' ' ' < T.txt)\" = '6 0 9 ' ]"

# --- --json ------------------------------------------------------------------
json=$("$tool" map --source S.txt --bridge R.txt --repeat 3 --json --device cpu 2>/dev/null); rc=$?
check "--json exits 0" "[ $rc -eq 0 ]"
check "--json is one line" "[ \$(wc -l <<<\"\$json\") -eq 1 ]"
for key in m n op device median_ms; do check "--json has $key" "grep -q '\"$key\":' <<<\"\$json\""; done
check "--json values" "grep -q '\"m\":5,\"n\":3,\"op\":\"sum\",\"device\":\"cpu\"' <<<\"\$json\""

# --- bad input: exit 2, message, no output file ------------------------------
printf '2\n0\n7\n2\n0\n' > Rbad.txt
err=$("$tool" map --source S.txt --bridge Rbad.txt --targets 3 --out bad.npy 2>&1); rc=$?
check "index out of range exits 2" "[ $rc -eq 2 ]"
check "the message names bridge[2] = 7" "grep -q 'bridge\[2\] = 7 is outside \[0, 3)' <<<\"\$err\""
check "no output file on failure" "[ ! -e bad.npy ]"
printf -- '-1\n0\n' > Rneg.txt; printf '1\n2\n' > S2.txt
"$tool" map --source S2.txt --bridge Rneg.txt --out bad.npy >/dev/null 2>&1; rc=$?
check "negative index exits 2, no file" "[ $rc -eq 2 ] && [ ! -e bad.npy ]"
printf '1\n2\n3\n' > S3.txt
err=$("$tool" map --source S3.txt --bridge R.txt --out bad.npy 2>&1); rc=$?
check "mismatched lengths exit 2, no file" "[ $rc -eq 2 ] && [ ! -e bad.npy ]"
printf '1\nnan\n3\n4\n5\n' > Snan.txt
err=$("$tool" map --source Snan.txt --bridge R.txt --nan error --out bad.npy 2>&1); rc=$?
check "--nan error exits 2 naming source[1]" "[ $rc -eq 2 ] && grep -q 'source\[1\] is NaN' <<<\"\$err\" && [ ! -e bad.npy ]"
out=$("$tool" map --source Snan.txt --bridge R.txt --nan skip --quiet)
check "--nan skip drops the NaN" "grep -qP '^0\t5$' <<<\"\$out\""
"$tool" map --source S.txt --bridge R.txt --op mean --accumulate --out T.txt >/dev/null 2>&1; rc=$?
check "mean with --accumulate exits 2" "[ $rc -eq 2 ]"
"$tool" map --source S.txt --bridge R.txt --op median >/dev/null 2>&1; rc=$?
check "unknown op exits 2" "[ $rc -eq 2 ]"
"$tool" map --source missing.npy --bridge R.txt --out bad.npy >/dev/null 2>&1; rc=$?
check "missing input exits 2, no file" "[ $rc -eq 2 ] && [ ! -e bad.npy ]"
"$tool" map --bridge R.txt >/dev/null 2>&1; rc=$?
check "no --source exits 2" "[ $rc -eq 2 ]"
"$tool" map --plan --bridge R.txt --source S.txt --source S.txt --out one.npy >/dev/null 2>&1; rc=$?
check "--plan with fewer --out than --source exits 2" "[ $rc -eq 2 ] && [ ! -e one.npy ]"
"$tool" map --plan --bridge R.txt --source S.txt --source S3.txt --out p1.npy --out p2.npy >/dev/null 2>&1; rc=$?
check "--plan with one bad source writes neither output" "[ $rc -eq 2 ] && [ ! -e p1.npy ] && [ ! -e p2.npy ]"
# A bridge value that would size T beyond memory (no --targets): exit 2, no overflow in max(R) + 1
printf '1000000000000000000\n' > Rhuge.txt; printf '9223372036854775807\n' > Rmax.txt; printf '1\n' > S1.txt
for r in Rhuge.txt Rmax.txt; do
  err=$("$tool" map --source S1.txt --bridge $r --out bad.npy 2>&1); rc=$?
  check "$r without --targets exits 2 asking for --targets" "[ $rc -eq 2 ] && grep -q 'give --targets' <<<\"\$err\" && [ ! -e bad.npy ]"
done
err=$("$tool" map --source S1.txt --bridge Rmax.txt --targets 3 2>&1); rc=$?
check "with --targets it is an index out of range" "[ $rc -eq 2 ] && grep -q 'outside \[0, 3)' <<<\"\$err\""
if [ -x /usr/bin/python3 ]; then
  json=$("$tool" map --source S.txt --bridge R.txt --json --quiet)
  check "--json parses" "/usr/bin/python3 -c 'import json,sys; json.loads(sys.argv[1])' \"\$json\""
fi
"$tool" map --help >/dev/null; rc=$?
check "--help exits 0" "[ $rc -eq 0 ]"
check "--help documents the default targets" "\"$tool\" map --help | grep -q 'max(R) + 1'"

# --- NumPy reference ---------------------------------------------------------
py=/usr/bin/python3
if [ -x "$py" ] && "$py" -c 'import numpy' 2>/dev/null; then
  "$py" - <<'EOF'
import numpy as np
rng = np.random.default_rng(7)
m, n = 5000, 97
for vt in ("float32", "float64"):
    for it in ("int32", "int64"):
        np.save(f"S_{vt}.npy", (rng.random(m) * 4 - 2).astype(vt))
        np.save(f"S2_{vt}.npy", (rng.random((m, 2)) * 4 - 2).astype(vt))
        np.save(f"w_{vt}.npy", (rng.random(m) + 0.25).astype(vt))
        r = rng.integers(0, n - 5, m).astype(it)   # the last 5 targets stay empty
        np.save(f"R_{it}.npy", r)
EOF
  # ref.py checks every listed case (name|op source bridge weights n T empty)
  # in one process against np.add.at / np.minimum.at / np.maximum.at.
  cat > ref.py <<'EOF'
import sys, numpy as np
def check(op, S, R, w, n, T, empty):
    S, R, T = np.load(S), np.load(R), np.load(T)
    n, empty = int(n), float(empty)
    w = np.load(w).astype(np.float64) if w != "-" else np.ones(len(R))
    wb = w[:, None] if S.ndim == 2 else w
    x = S.astype(np.float64) * wb
    shape = (n,) + S.shape[1:]
    cnt = np.zeros(shape); np.add.at(cnt, R, np.ones_like(x))
    scale = np.zeros(shape); np.add.at(scale, R, np.abs(x))
    if op in ("sum", "mean", "count"):
        ref = np.zeros(shape); np.add.at(ref, R, x if op != "count" else np.broadcast_to(wb, x.shape))
        if op == "mean":
            den = np.zeros(shape); np.add.at(den, R, np.broadcast_to(wb, x.shape))
            with np.errstate(invalid="ignore", divide="ignore"): ref = ref / den
    elif op == "min": ref = np.full(shape, np.inf); np.minimum.at(ref, R, x)
    else: ref = np.full(shape, -np.inf); np.maximum.at(ref, R, x)
    ref = np.where(cnt > 0, ref, empty)
    tol = 1e-5 if S.dtype == np.float32 else 1e-12
    if T.shape != ref.shape or T.dtype != S.dtype: return f"T is {T.dtype} {T.shape}, expected {S.dtype} {ref.shape}"
    err = np.abs(T - ref) - tol * (1 + scale)
    if np.any(err > 0):
        k = np.unravel_index(np.argmax(err), err.shape)
        return f"T{list(k)} = {T[k]!r}, numpy {ref[k]!r}"
    return None
for line in open(sys.argv[1]):
    name, args = line.rstrip("\n").split("|")
    why = check(*args.split())
    print(("ok " + name) if why is None else ("FAIL " + name + ": " + why))
EOF
  : > cases.txt
  k=0
  for vt in float32 float64; do
    for it in int32 int64; do
      for op in sum mean min max count; do
        for wt in - "w_$vt.npy"; do
          for src in "S_$vt.npy" "S2_$vt.npy"; do
            k=$((k+1)); extra=(); [ "$wt" != - ] && extra=(--weights "$wt")
            "$tool" map --source "$src" --bridge "R_$it.npy" "${extra[@]}" --targets 97 --op $op --empty -2.5 \
              --out "T$k.npy" --quiet || echo "FAIL: lacuna map $op $src R_$it.npy $wt exited $?"
            echo "numpy_${op}_${src%.npy}_${it}_w${wt%.npy}|$op $src R_$it.npy $wt 97 T$k.npy -2.5" >> cases.txt
          done
        done
      done
    done
  done
  while read -r verdict name rest; do
    check "$name $rest" "[ $verdict = ok ]"
  done < <("$py" ref.py cases.txt 2>&1 || echo "FAIL ref.py crashed")
  # Deterministic one-shot, --plan and a --threads change give the same bytes.
  "$tool" map --source S_float32.npy --bridge R_int32.npy --targets 97 --deterministic --threads 1 --out d1.npy --quiet
  "$tool" map --source S_float32.npy --bridge R_int32.npy --targets 97 --deterministic --threads 2 --out d2.npy --quiet
  "$tool" map --plan --bridge R_int32.npy --targets 97 --source S_float32.npy --source S_float64.npy --out p1.npy --out p2.npy --quiet
  check "deterministic is identical across threads" "cmp -s d1.npy d2.npy"
  check "--plan equals deterministic one-shot" "cmp -s d1.npy p1.npy"
  echo "plan|sum S_float64.npy R_int32.npy - 97 p2.npy 0" > plan.txt
  check "--plan second output (float64) matches numpy" "$py ref.py plan.txt | grep -q '^ok plan'"
  # The plan's determinism as an option: --plan-fast against numpy, and with
  # --deterministic the deterministic plan's bytes.
  "$tool" map --plan-fast --bridge R_int32.npy --targets 97 --source S_float32.npy --source S_float64.npy --out f1.npy --out f2.npy --quiet
  echo "plan|sum S_float64.npy R_int32.npy - 97 f2.npy 0" > fast.txt
  check "--plan-fast (float64) matches numpy" "$py ref.py fast.txt | grep -q '^ok plan'"
  "$tool" map --plan-fast --deterministic --bridge R_int32.npy --targets 97 --source S_float32.npy --out fd1.npy --quiet
  check "--plan-fast --deterministic equals --plan" "cmp -s fd1.npy p1.npy"
  json=$("$tool" map --plan --bridge R_int32.npy --source S_float32.npy --source S_float64.npy --json --repeat 2 2>/dev/null)
  check "--plan --json prints one line per source" "[ \$(grep -c '\"plan_build_ms\":' <<<\"\$json\") -eq 2 ]"
else
  echo "skip: /usr/bin/python3 with numpy not found; NumPy comparisons not run"
fi

echo "$passes passed, $fails failed"
[ $fails -eq 0 ]
