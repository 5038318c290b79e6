#!/usr/bin/env bash
# Epoch times of the neighbourhood model on one GPU: explicit ratings against
# implicit feedback (cross-entropy with 1 and 4 negatives, BPR) on the
# ML-10M shape cut to 3 M ratings (those >= 4 as interactions).
# Usage: bench/mf_nbr_implicit_epochs.sh path/to/lacuna
set -u
L=$1
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
cd "$W"
"$L" mf gen --shape ml10m --ratings 3000000 --seed 5 g.txt || exit 1
awk '$3 >= 4' g.txt > s.txt
wc -l g.txt s.txt
run() {
    name=$1
    shift
    "$L" mf train "$@" -k 32 -K 16 -t 4 --no-search --device cuda --log "$name.log" --json --quiet m.model > "$name.json"
    echo "== $name (the log's seconds are cumulative: an epoch is a step)"
    cat "$name.log"
}
run explicit g.txt --model neighbourhood
run xent1 s.txt --implicit --model neighbourhood --loss xent --negatives 1
run xent4 s.txt --implicit --model neighbourhood --loss xent
run bpr s.txt --implicit --model neighbourhood --loss bpr
