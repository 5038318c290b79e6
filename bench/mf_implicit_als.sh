#!/usr/bin/env bash
# Issue 14's ranking target: `lacuna mf train --implicit` against implicit
# feedback ALS (Hu, Koren & Volinsky 2008) with the same k, on generated data
# of the MovieLens-100k shape (943 x 1682, 100 K whole-star ratings), full
# ranking. The peer is bench/als_implicit_peer.py (numpy, the `implicit`
# package's algorithm and defaults; the package itself is not installable
# here). Interactions: ratings >= 4; one per user held out at random.
#   bash bench/mf_implicit_als.sh [build/lacuna]   (SEEDS="1 2", KS="16 32 64",
#   TSEEDS="1 2 3": training seeds of both, Lacuna and ALS, on each data seed (default: the data's),
#   GEN="--clusters 20": extra `mf gen` options, e.g. planted item clusters;
#   LAC_OPTS: extra `mf train` options, e.g. "--negatives 2 --negative-share 4")
set -u -o pipefail
tool=${1:-build/lacuna}
py=${PYTHON:-/usr/bin/python3}
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1} OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}   # k x k solves: threads only contend
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
printf '%4s %5s %4s %9s %9s %9s %9s %9s %9s\n' seed train k lac_hr lac_ndcg als_hr als_ndcg pop_hr pop_ndcg
for seed in ${SEEDS:-1 2}; do
    "$tool" mf gen --users 943 --items 1682 --ratings 100000 --stars whole --seed "$seed" ${GEN:-} "$dir/all.txt" 2>/dev/null || exit 1
    "$py" "$here/als_implicit_peer.py" split "$dir/all.txt" "$dir/train.txt" "$dir/test.txt" --seed "$seed" || exit 1
    for k in ${KS:-16 32 64}; do for ts in ${TSEEDS:-$seed}; do
        "$tool" mf train --implicit -k "$k" --seed "$ts" ${LAC_OPTS:-} --quiet "$dir/train.txt" "$dir/m.model" || exit 1
        lac=$("$tool" mf evaluate "$dir/m.model" "$dir/test.txt" -n 10 --negatives 0 --json) || exit 1
        als=$("$py" "$here/als_implicit_peer.py" als "$dir/train.txt" "$dir/test.txt" -k "$k" --seed "$ts") || exit 1
        "$py" -c 'import json,sys; a=json.loads(sys.argv[4]); b=json.loads(sys.argv[5]); print("%4s %5s %4s %9.4f %9.4f %9.4f %9.4f %9.4f %9.4f" % (sys.argv[1], sys.argv[2], sys.argv[3], a["hr"], a["ndcg"], b["hr"], b["ndcg"], b["pop_hr"], b["pop_ndcg"]))' \
            "$seed" "$ts" "$k" "$lac" "$als"
    done; done
done
