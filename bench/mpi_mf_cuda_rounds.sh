#!/usr/bin/env bash
# What the rounds of user slices cost mf over GPU ranks, epoch by epoch, on
# the MovieLens-10M shape (lacuna mf gen: 69,878 users, 10,677 items,
# 10,000,054 ratings, 10% held out): one GPU process against `mpirun -np 2`
# (both ranks on the machine's first GPU) with the slices (the default) and
# with whole blocks a turn (LACUNA_MF_DIST_ROUNDS=1), for both models.
# Prints, per run, the validation RMSE, the best epoch, the seconds of the
# whole run and of each epoch (rank 0's --log: an epoch's seconds include
# its validation), a digest of every epoch's RMSEs, and with LACUNA_LOG=debug
# the ranks' own lines on their time in blocks and in the ring ("mf rank").
# Usage: bench/mpi_mf_cuda_rounds.sh LACUNA [DATA_DIR]
# DATA_DIR keeps the generated files between calls (default: a temporary
# one). CONFIGS="one slices whole" picks the runs, MODELS="plain
# neighbourhood" the models, EPOCHS (default 6) their epochs, SEED the seed;
# GEN_ONLY=1 only makes the data.
set -u
tool=$1; dir=${2:-}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader
export OMPI_MCA_mpi_yield_when_idle=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
if [ -z "$dir" ]; then dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT; fi
mkdir -p "$dir"
if [ ! -s "$dir/train.txt" ]; then
    "$tool" mf gen --users 69878 --items 10677 --ratings 10000054 --clusters 10 --seed 7 "$dir/all.txt" 2>/dev/null
    "$tool" mf split "$dir/all.txt" "$dir/train.txt" "$dir/valid.txt" --seed 3 >/dev/null
    rm -f "$dir/all.txt"
fi
[ "${GEN_ONLY:-0}" = 1 ] && exit 0
field() { grep -o "\"$1\":[0-9.e-]*" "$2" | cut -d: -f2; }
seed=${SEED:-1}
for model in ${MODELS:-plain neighbourhood}; do
    if [ $model = neighbourhood ]; then o="--model neighbourhood -K 16"; else o=""; fi
    o="$o --epochs ${EPOCHS:-6} --valid $dir/valid.txt --no-search -k 32 --json --quiet --device cuda --seed $seed"
    for config in ${CONFIGS:-one slices whole}; do
        rounds=; [ $config = whole ] && rounds=1
        rm -f "$dir/epochs.log"
        t0=$(date +%s.%N)
        if [ $config = one ]; then
            LACUNA_LOG=debug "$tool" mf train "$dir/train.txt" "$dir/m.model" $o --log "$dir/epochs.log" \
                > "$dir/out.json" 2> "$dir/err.txt"
        else
            LACUNA_LOG=debug LACUNA_MF_DIST_ROUNDS=$rounds timeout 250 mpirun -np 2 --oversubscribe \
                -x LACUNA_LOG -x LACUNA_MF_DIST_ROUNDS "$tool" mf train "$dir/train.txt" "$dir/m.model" $o \
                --log "$dir/epochs.log" > "$dir/out.json" 2> "$dir/err.txt"
        fi
        rc=$?
        t1=$(date +%s.%N)
        # --log's seconds run on from the first epoch: each epoch's own
        per_epoch=$(awk '$1 ~ /^[0-9]+$/ { printf "%s%.3f", sep, $4 - last; sep = " "; last = $4 }' "$dir/epochs.log" \
            2>/dev/null)
        # every epoch's RMSEs to 9 digits, as a digest (equal arithmetic, equal digests)
        digest=$(awk '$1 ~ /^[0-9]+$/ { print $2, $3 }' "$dir/epochs.log" 2>/dev/null | md5sum | cut -c1-8)
        last=$(awk '$1 ~ /^[0-9]+$/ { v = $3 } END { print v }' "$dir/epochs.log" 2>/dev/null)
        printf '%s\t%s\trc %s\tvalid_rmse %s (last %s, digest %s)\tbest_epoch %s\t%.1f s\tepochs [%s]\n' $model \
            $config $rc "$(field valid_rmse "$dir/out.json")" "$last" "$digest" "$(field best_epoch "$dir/out.json")" \
            "$(awk "BEGIN { print $t1 - $t0 }")" "$per_epoch"
        grep -E "mf rank |rounds of user slices" "$dir/err.txt" | sed 's/^/    /'
        [ $rc = 0 ] || tail -5 "$dir/err.txt" | sed 's/^/    ! /'
    done
done
