#!/usr/bin/env bash
# mf train --implicit over MPI ranks on one host (src/dist/mf_dist.c with the
# part epochs of src/mf/cpu/implicit_cpu.c): HR@10 and NDCG@10 (`mf evaluate`,
# full ranking, leave-one-out) for one process over SEEDS (its spread) and for
# mpirun -np 2 and -np 3 (oversubscribed), one thread a rank, and the
# training's seconds. Data: planted preferences (tests/mf_planted.py; the
# test's 1,000 x 300 and a second shape 3,000 x 1,000, 30 items a user, 20
# clusters) and MovieTweetings (`mf split --leave-last`) when its file is
# given. Usage: bench/mpi_mf_implicit.sh LACUNA [MOVIETWEETINGS_RATINGS]
#   (SEEDS="1 2 3 4", RSEEDS="1 2": the seeds at 2 and 3 ranks, CASES: the
#   "model:loss" pairs, default all four)
set -eu
tool=$1; mt=${2:-}
py=/usr/bin/python3
here=$(cd "$(dirname "$0")" && pwd)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader
export OMPI_MCA_mpi_yield_when_idle=1
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
"$py" "$here/../tests/mf_planted.py" 1000 300 20 8 1 "$dir/planted.train" "$dir/planted.test"
"$py" "$here/../tests/mf_planted.py" 3000 1000 30 20 3 "$dir/second.train" "$dir/second.test"
sets="planted second"
if [ -n "$mt" ]; then
    "$tool" mf split --leave-last "$mt" "$dir/mt.train" "$dir/mt.test" 2>/dev/null
    sets="$sets mt"
fi
printf 'data\tmodel\tloss\tranks\tseed\thr@10\tndcg@10\tseconds\n'
for set in $sets; do
    for case in ${CASES:-plain:xent plain:bpr neighbourhood:xent neighbourhood:bpr}; do
        model=${case%:*}; loss=${case#*:}
        for np in 1 2 3; do
            seeds=${RSEEDS:-1 2}; [ "$np" = 1 ] && seeds=${SEEDS:-1 2 3 4}
            for seed in $seeds; do
                a="mf train $dir/$set.train $dir/m.model --implicit --model $model --loss $loss -k 16 -K 16 -t 20 --seed $seed --threads 1 --quiet"
                t0=$(date +%s.%N)
                if [ "$np" = 1 ]; then "$tool" $a; else mpirun -np "$np" --oversubscribe --bind-to none "$tool" $a; fi
                t1=$(date +%s.%N)
                "$tool" mf evaluate "$dir/m.model" "$dir/$set.test" --negatives 0 --json > "$dir/e.json"
                "$py" -c "import json; e = json.load(open('$dir/e.json')); print('$set\t$model\t$loss\t$np\t$seed\t%.3f\t%.4f\t%.2f' % (e['hr'], e['ndcg'], $t1 - $t0))"
            done
        done
    done
done
