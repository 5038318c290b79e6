#!/usr/bin/env bash
# make bench: the CPU benchmarks at the sizes the report quotes for a CPU.
# Usage: bash bench/cpu.sh BUILD_DIR   (LACUNA_BENCH_THREADS overrides the threads)
# Writes BUILD_DIR/bench/figures.jsonl (a JSON line per figure) and
# BUILD_DIR/report.html (lacuna report of them).
set -euo pipefail
build=${1:-build}
bench="$build/bench"
threads=${LACUNA_BENCH_THREADS:-$(nproc 2>/dev/null || echo 2)}
# Every figure also as a JSON line, and the page `lacuna report` makes of them.
figures="$build/bench/figures.jsonl"
report="$build/report.html"
: >"$figures"

echo "== map: 40M sources -> 10k and 500k targets, float32 sum, $threads thread(s): one-shot, deterministic and plan side by side"
"$bench/map_bench" -m 40M -n 10k,500k --dist uniform,zipf -w 2 -r 9 --mode atomic,deterministic,plan --check \
    --threads "$threads" --figures "$figures"
echo
echo "== map: the same shapes, each against its own floor: weighted sum, weighted mean, float64, int64 bridge, 4 columns"
for variant in "--weights" "--weights --op mean" "--dtype float64" "--index int64" "--cols 4"; do
    # shellcheck disable=SC2086
    "$bench/map_bench" -m 40M -n 10k,500k --dist uniform -w 1 -r 7 --mode atomic,deterministic,plan --check $variant \
        --threads "$threads" --figures "$figures"
done
echo
echo "== map: smaller sources, many targets"
"$bench/map_bench" -m 4M -n 100k,1M --dist uniform,zipf -w 2 -r 10 --threads "$threads" --figures "$figures"
echo
echo "== impute: the paper's ego-Facebook protocol (50 x 50 x 4039, rank 5), with the numpy peer"
"$bench/impute_bench" --graph "$(dirname "$0")/../data/ego-facebook/facebook_combined.txt" \
    --ratios 0.5,0.7,0.9 --seeds 1 --threads "$threads" --figures "$figures"
echo
echo "== mf: a fifth of the MovieLens-10M shape, k = 32, 30 epochs, with the serial-loop peer"
"$bench/mf_bench" --shape ml10m --scale 0.2 -k 32 --epochs 30 --threads "$threads" --figures "$figures"
echo
echo "== mf neighbours: a fifth of the MovieLens-10M shape, K = 32 (simLSH p = 3, q = 100), the neighbourhood model beside plain MF"
"$bench/nbr_bench" --shape ml10m --scale 0.2 --epochs 60 --threads "$threads" --figures "$figures"
echo
"$build/lacuna" report "$figures" -o "$report"
echo "== the report: $report (figures in $figures)"
