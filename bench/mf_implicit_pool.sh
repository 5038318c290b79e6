#!/usr/bin/env bash
# Ranking quality of implicit feedback on CUDA with and without a block's
# pool of negatives (LACUNA_MF_CUDA_NEG_POOL, docs/mf.md "Implicit
# feedback"): HR@10 and NDCG@10 (`mf evaluate`, full ranking, leave-one-out)
# of the plain model, cross-entropy, 4 negatives by popularity (the
# defaults, --no-search: l2 0.03, correction 1), k 32, 20 epochs, over SEEDS,
# and the training's seconds. Data: planted preferences (tests/mf_planted.py:
# the test's 1,000 x 300, a second shape 3,000 x 1,000 with 30 items a user
# and 20 clusters, a larger 5,000 x 2,000 with 60 and 30) and MovieTweetings
# (`mf split --leave-last`) when its file is given.
# Usage: bench/mf_implicit_pool.sh LACUNA [MOVIETWEETINGS_RATINGS]
#   (POOLS="0 32": the knob's values, 0 the unpooled kernel, P:A:C also
#   LACUNA_MF_CUDA_NEG_POOL_ADD=A and LACUNA_MF_CUDA_NEG_POOL_CELLS=C, e.g.
#   32:1:2 the warp copies at 2 cells a pool row; SEEDS="1 2 3";
#   SETS: a subset of "planted second larger mt")
set -eu
tool=$1; mt=${2:-}
py=${PYTHON:-python3}
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
sets=${SETS:-planted second larger mt}
for set in $sets; do
    case $set in
        planted) "$py" "$here/../tests/mf_planted.py" 1000 300 20 8 1 "$dir/planted.train" "$dir/planted.test" ;;
        second) "$py" "$here/../tests/mf_planted.py" 3000 1000 30 20 3 "$dir/second.train" "$dir/second.test" ;;
        larger) "$py" "$here/../tests/mf_planted.py" 5000 2000 60 30 5 "$dir/larger.train" "$dir/larger.test" ;;
        mt) [ -n "$mt" ] && "$tool" mf split --leave-last "$mt" "$dir/mt.train" "$dir/mt.test" 2>/dev/null ;;
    esac
done
printf 'data\tpool\tseed\thr@10\tndcg@10\tseconds\n'
for set in $sets; do
    [ -f "$dir/$set.train" ] || continue
    for seed in ${SEEDS:-1 2 3}; do
        for pool in ${POOLS:-0 32}; do
            IFS=: read -r size add cells <<<"$pool"
            t0=$(date +%s.%N)
            LACUNA_MF_CUDA_NEG_POOL=$size LACUNA_MF_CUDA_NEG_POOL_ADD=${add:-0} LACUNA_MF_CUDA_NEG_POOL_CELLS=${cells:-8} \
                "$tool" mf train "$dir/$set.train" "$dir/m.model" --implicit --device cuda \
                -k 32 -t 20 --seed "$seed" --no-search --quiet
            t1=$(date +%s.%N)
            "$tool" mf evaluate "$dir/m.model" "$dir/$set.test" --negatives 0 --json >"$dir/e.json"
            "$py" -c "import json; e = json.load(open('$dir/e.json')); print('$set\t$pool\t$seed\t%.4f\t%.4f\t%.2f' % (e['hr'], e['ndcg'], $t1 - $t0))"
        done
    done
done
