#!/usr/bin/env bash
# One harness's fuzz pass: the ctest entry fuzz_NAME (make test) and make fuzz.
#   1. replays every input of fuzz/regressions/NAME/: each must pass, except
#      those named KNOWN-* (found, reported, not fixed yet), which must still
#      fail (a KNOWN- input that passes is fixed: rename it so that it is
#      replayed from then on); their reports are the known findings;
#   2. fuzzes for SECONDS (FUZZ_SECONDS in the environment overrides it) from
#      the seeds in fuzz/corpus/NAME and what earlier runs kept in WORK/corpus,
#      inputs up to MAX_LEN bytes, with fuzz/dict/NAME.dict when there is one.
#      Known undefined behaviour and leaks are suppressed (known-ubsan.supp,
#      known-lsan.supp); any other known finding that comes up again is noted
#      and the fuzzing goes on. A new crash, leak, hang (10 s), out-of-memory
#      (2 GB) or failed harness check fails the pass; its input is kept in
#      WORK/artifacts/ to become a regression (docs/fuzzing.md).
# usage: run.sh BINARY NAME MAX_LEN SECONDS WORK
set -u
if [ $# -ne 5 ]; then
  echo "usage: $0 BINARY NAME MAX_LEN SECONDS WORK" >&2
  exit 2
fi
bin=$1 name=$2 max_len=$3 seconds=${FUZZ_SECONDS:-$4} work=$5
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
seeds=$here/corpus/$name regressions=$here/regressions/$name dict=$here/dict/$name.dict

export ASAN_OPTIONS="detect_leaks=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
limits=(-timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=2048 -max_len="$max_len")

mkdir -p "$work/corpus" "$work/artifacts"
rm -f "$work/summary.txt"

# What a report is about: a failed harness check (its message, numbers
# blanked), or the sanitizer's kind of error and the first three library
# functions on its stack.
signature() {
  local check kind frames
  check=$(sed -n 's/^lacuna fuzz check failed: //p' "$1" | head -1 | sed 's/[0-9][0-9]*/N/g')
  if [ -n "$check" ]; then
    echo "check: $check"
    return
  fi
  if grep -a -q 'detected memory leaks' "$1"; then
    kind=leak
  else
    kind=$(sed -n 's/^SUMMARY: [A-Za-z]*: \([A-Za-z-]*\).*/\1/p' "$1" | head -1)
  fi
  frames=$(grep -a -E '^ +#[0-9]+ 0x[0-9a-f]+ in [^ ]+ [^ ]*/src/' "$1" | head -3 | awk '{print $4}' | paste -sd'<' -)
  echo "${kind:-crash} in ${frames:-?}"
}

# 1. Regressions.
replay=() known=() known_sigs=()
if [ -d "$regressions" ]; then
  for f in "$regressions"/*; do
    [ -f "$f" ] || continue
    case $(basename "$f") in
      KNOWN-*) known+=("$f") ;;
      README*|.*) ;;
      *) replay+=("$f") ;;
    esac
  done
fi
if [ ${#replay[@]} -gt 0 ]; then
  if ! "$bin" "${limits[@]}" "${replay[@]}" >"$work/replay.log" 2>&1; then
    cat "$work/replay.log"
    echo "fuzz_$name: FAILED: a regression input of fuzz/regressions/$name/ fails again" >&2
    exit 1
  fi
  echo "fuzz_$name: ${#replay[@]} regression inputs pass"
fi
for f in "${known[@]+"${known[@]}"}"; do
  if "$bin" "${limits[@]}" "$f" >"$work/known.log" 2>&1; then
    echo "fuzz_$name: FAILED: $(basename "$f") passes now: the bug is fixed, so rename it without KNOWN-" >&2
    echo "  (git mv fuzz/regressions/$name/$(basename "$f") fuzz/regressions/$name/$(basename "$f" | sed 's/^KNOWN-//'))" >&2
    echo "  and delete its entry from fuzz/known-*.supp if it has one" >&2
    exit 1
  fi
  known_sigs+=("$(signature "$work/known.log")")
  echo "fuzz_$name: known, not fixed yet: $(basename "$f"): ${known_sigs[-1]}"
done

# 2. Fuzzing. A kept corpus that has grown past 2000 inputs is minimised
# first (libFuzzer's -merge), so that reading it back does not eat the pass.
if [ "$(find "$work/corpus" -type f | wc -l)" -gt 2000 ]; then
  rm -rf "$work/corpus.min" && mkdir -p "$work/corpus.min"
  if "$bin" "${limits[@]}" -merge=1 "$work/corpus.min" "$work/corpus" >"$work/merge.log" 2>&1; then
    rm -rf "$work/corpus" && mv "$work/corpus.min" "$work/corpus"
  fi
fi
[ -f "$here/known-ubsan.supp" ] && UBSAN_OPTIONS="$UBSAN_OPTIONS:suppressions=$here/known-ubsan.supp"
[ -f "$here/known-lsan.supp" ] && export LSAN_OPTIONS="suppressions=$here/known-lsan.supp:${LSAN_OPTIONS:-}"
dict_flag=()
[ -f "$dict" ] && dict_flag=(-dict="$dict")
start=$(date +%s)
deadline=$((start + seconds))
runs=0 refound=0
while :; do
  left=$((deadline - $(date +%s)))
  [ $left -ge 1 ] || break
  log=$work/fuzz.log
  "$bin" "${limits[@]}" "${dict_flag[@]+"${dict_flag[@]}"}" -max_total_time="$left" -print_final_stats=1 \
    -artifact_prefix="$work/artifacts/" "$work/corpus" "$seeds" >"$log" 2>&1
  rc=$?
  n=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  runs=$((runs + ${n:-0}))
  [ $rc -eq 0 ] && break
  sig=$(signature "$log")
  artifact=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -1)
  is_known=0
  for k in "${known_sigs[@]+"${known_sigs[@]}"}"; do
    [ "$k" = "$sig" ] && is_known=1
  done
  if [ $is_known = 1 ] && [ $refound -lt 50 ]; then
    refound=$((refound + 1))
    echo "fuzz_$name: a known finding again ($sig); fuzzing on"
    [ -n "$artifact" ] && rm -f "$artifact"
    continue
  fi
  grep -a -v -E '^#[0-9]+\s' "$log" | tail -80
  echo "fuzz_$name: FAILED after $(( $(date +%s) - start ))s (exit $rc): $sig" >&2
  if [ -n "$artifact" ]; then
    echo "  the input: $artifact" >&2
    echo "  replay it: $bin $artifact" >&2
    echo "  keep it:   cp $artifact $regressions/<what-it-is> (KNOWN-<what-it-is> until it is fixed)" >&2
  fi
  exit 1
done
cov=$(grep -a -o 'cov: [0-9]*' "$work/fuzz.log" | tail -1)
summary="fuzz_$name: $runs runs in $(( $(date +%s) - start ))s, ${cov:-cov: ?}, $(find "$work/corpus" -type f | wc -l) inputs kept in $work/corpus"
[ $refound -gt 0 ] && summary="$summary; known findings came up $refound times"
echo "$summary" | tee "$work/summary.txt"
