#!/usr/bin/env bash
# mf train over GPU ranks against one GPU: validation RMSE and seconds of the
# whole run (mpirun's start, reading and the neighbour search included) of
# one GPU process over several seeds (its seed-to-seed spread) and of
# `mpirun -np 2` / `-np 3` (every rank on the machine's first GPU) on the
# data of tests/cuda/cli_mpi_cuda.sh (lacuna mf gen: 20,000 users, 2,000
# items, 600 K ratings, 10% held out), both models with the test's options.
# Usage: bench/mpi_mf_cuda.sh LACUNA [ONE_SEEDS] [RANK_SEEDS]
# (default "1 2 3 4" and "1 2"); MODELS="neighbourhood plain" (the default)
# picks the models. One line per run, tab-separated.
set -u
tool=$1; one_seeds=${2:-1 2 3 4}; rank_seeds=${3:-1 2}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader
export OMPI_MCA_mpi_yield_when_idle=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
"$tool" mf gen --users 20000 --items 2000 --ratings 600000 --clusters 10 --seed 7 "$dir/all.txt" 2>/dev/null
"$tool" mf split "$dir/all.txt" "$dir/train.txt" "$dir/valid.txt" --seed 3 >/dev/null
field() { grep -o "\"$1\":[0-9.e-]*" "$2" | cut -d: -f2; }
printf 'model\tranks\tseed\tvalid_rmse\tbest_epoch\tseconds\n'
for model in ${MODELS:-neighbourhood plain}; do
    if [ $model = neighbourhood ]; then o="--model neighbourhood -K 16 --epochs 20"; else o="--epochs 30"; fi
    o="$o --valid $dir/valid.txt --no-search -k 32 --json --quiet --device cuda"
    for np in 1 2 3; do
        seeds=$rank_seeds; [ $np = 1 ] && seeds=$one_seeds
        for s in $seeds; do
            t0=$(date +%s.%N)
            if [ $np = 1 ]; then "$tool" mf train "$dir/train.txt" "$dir/m.model" $o --seed "$s" > "$dir/out.json"
            else timeout 200 mpirun -np $np --oversubscribe "$tool" mf train "$dir/train.txt" "$dir/m.model" $o \
                --seed "$s" > "$dir/out.json"; fi
            t1=$(date +%s.%N)
            printf '%s\t%s\t%s\t%s\t%s\t%.1f\n' $model $np "$s" "$(field valid_rmse "$dir/out.json")" \
                "$(field best_epoch "$dir/out.json")" "$(awk "BEGIN { print $t1 - $t0 }")"
        done
    done
done
