#!/usr/bin/env bash
# bench/impute_table.py: the GPU impute figures joined with PyTorch's in the
# same run, each ratio and verdict against the issue's targets computed by
# hand here; a run without figures is exit 1 with a message.
set -u
root=${LACUNA_SOURCE_DIR:?}
py=/usr/bin/python3
work=$(mktemp -d "${LACUNA_TEST_TMPDIR:-/tmp}/cli_bench_tables.XXXXXX")
trap 'rm -rf "$work"' EXIT
fails=0; passes=0
check() { if eval "$2"; then passes=$((passes+1)); else echo "FAIL: $1"; fails=$((fails+1)); fi; }
cd "$work"
table="$py $root/bench/impute_table.py"

cat >run.jsonl <<'JSON'
measured: SGEMM 51.3 TFLOP/s (a text line between the figures)
{"capability":"impute","case":"svt","start":"cold","m":50,"n":50,"N":4039,"ms":4.0,"mean_rank":20.4}
{"capability":"impute","case":"svt","start":"warm","m":50,"n":50,"N":4039,"ms":1.8,"mean_rank":20.4}
{"capability":"impute","case":"svt","start":"cold","m":64,"n":64,"N":2100,"ms":2.5,"mean_rank":26.0}
{"capability":"impute","case":"svt","start":"cold","m":512,"n":512,"N":300,"ms":100.0,"mean_rank":202}
{"capability":"impute","case":"iteration","svt_path":"default","gemm":"fp32","m":50,"n":50,"N":4039,"ms":4.5}
{"capability":"impute","case":"iteration","svt_path":"default","gemm":"tf32","m":50,"n":50,"N":4039,"ms":1.0}
{"capability":"impute","case":"iteration","svt_path":"default","gemm":"fp32","m":64,"n":64,"N":2100,"ms":3.5}
{"capability":"impute","case":"ego-facebook","gemm":"fp32","ratio":0.5,"s":0.8,"run_s":0.65,"iterations":108,"rmse":0.0339}
{"peer": "torch", "m": 50, "n": 50, "N": 4039, "svd_ms": 4000.0, "gesvda_ms": 11.0}
{"peer": "torch", "m": 512, "n": 512, "N": 300, "svd_ms": 6000.0, "gesvda_ms": 120.0}
JSON
$table run.jsonl >out.txt; rc=$?
check "exit 0 with figures" "[ $rc -eq 0 ]"
# 50 x 50: 4000 / 4 = 1000x svd, 11 / 4 = 2.75x gesvda < 3: missed.
check "50x50 ratios and verdict" "grep -q '^| 50x50x4039 | 4.000 | 1.800 | 4000.0 | 1000 | 11.00 | 2.75 | missed |' out.txt"
# 512 x 512: 6000 / 100 = 60x svd < 100: missed (gesvda is judged at 50 x 50 only).
check "512x512 ratios and verdict" "grep -q '^| 512x512x300 | 100.000 | - | 6000.0 | 60 | 120.00 | 1.20 | missed |' out.txt"
check "64x64 without a peer" "grep -q '^| 64x64x2100 | 2.500 | - | - | - | - | - | no peer in this run |' out.txt"
# Iterations: fp32 only (the tf32 line is left out); 4.5 <= 5 met, 3.5 > 3 missed.
check "iteration 50 met" "grep -q '^| 50x50x4039 | 4.500 | 5 | met |' out.txt"
check "iteration 64 missed" "grep -q '^| 64x64x2100 | 3.500 | 3 | missed |' out.txt"
check "tf32 iteration left out" "! grep -q '^| 50x50x4039 | 1.000 ' out.txt"
check "ego-Facebook against 0.6 s" "grep -q 'ego-Facebook at ratio 0.50: 0.800 s incl. eigendecomposition (target 0.6 s: missed)' out.txt"

# 50 x 50 at 3.5 ms: 11 / 3.5 = 3.14x gesvda, 1143x svd: met.
sed 's/"ms":4.0,/"ms":3.5,/' run.jsonl >faster.jsonl
$table faster.jsonl >faster.txt
check "50x50 met at 3.5 ms" "grep -q '^| 50x50x4039 | 3.500 | 1.800 | 4000.0 | 1143 | 11.00 | 3.14 | met |' faster.txt"

echo '{"peer": "torch", "case": "eigh 4039", "ms": 86.0}' >none.jsonl
$table none.jsonl >none.txt 2>none.err; rc=$?
check "no figures: exit 1 and a message" "[ $rc -eq 1 ] && grep -q 'no impute figures in none.jsonl' none.err && [ ! -s none.txt ]"

echo "cli_bench_tables: $passes passed, $fails failed"
[ $fails -eq 0 ]
