#!/usr/bin/env bash
# mf train over MPI ranks on one host: seconds an epoch and the validation
# RMSE for one process and for mpirun -np 2 and -np 3 (oversubscribed on
# fewer cores), one thread a rank, the plain and the neighbourhood model, on
# generated ratings (lacuna mf gen, 10% held out). Seconds an epoch: from the
# --log, (t_last - t_first) / (epochs - 1), so that reading and set-up (and
# the neighbour search) stay out; the user CPU seconds of the whole run (all
# ranks); each rank's time in its blocks (wall and CPU) and in the ring from
# LACUNA_LOG=debug (one process: the CPU of its epochs, its run's less a
# one-epoch run's). Usage: bench/mpi_mf.sh LACUNA [USERS ITEMS RATINGS]
# (default 20000 3000 1000000).
set -eu
tool=$1; users=${2:-20000}; items=${3:-3000}; ratings=${4:-1000000}
py=/usr/bin/python3
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader
export OMPI_MCA_mpi_yield_when_idle=1
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
"$tool" mf gen --users "$users" --items "$items" --ratings "$ratings" --clusters 20 --seed 4 "$dir/all.txt" 2>/dev/null
"$tool" mf split "$dir/all.txt" "$dir/train.txt" "$dir/valid.txt" --seed 2 2>/dev/null
per_epoch() { "$py" -c "
rows = [l.split() for l in open('$1') if not l.startswith('#')]
print('%.4f' % ((float(rows[-1][3]) - float(rows[0][3])) / max(len(rows) - 1, 1)))"; }
field() { grep -o "\"$1\":[0-9.e-]*" "$2" | cut -d: -f2; }
printf 'model\tranks\tepochs\tbest\tvalid_rmse\ts/epoch\tuser CPU s\tper rank: blocks s (CPU s) / ring s\n'
for model in plain neighbourhood; do
    for np in 1 2 3; do
        a="mf train $dir/train.txt $dir/m.model --valid $dir/valid.txt --model $model --no-search --threads 1 --json --quiet --log $dir/log.txt"
        if [ "$np" = 1 ]; then /usr/bin/time -f %U -o "$dir/cpu.txt" "$tool" $a > "$dir/out.json" 2>/dev/null
        else LACUNA_LOG=debug /usr/bin/time -f %U -o "$dir/cpu.txt" mpirun -np "$np" --oversubscribe --bind-to none \
            -x LACUNA_LOG "$tool" $a > "$dir/out.json" 2> "$dir/err.txt"; fi
        split=""
        if [ "$np" = 1 ]; then   # the CPU of the epochs: the run's less a one-epoch run's, scaled
            /usr/bin/time -f %U -o "$dir/cpu1.txt" "$tool" ${a/--log $dir\/log.txt/--log $dir/log1.txt} --epochs 1 \
                > /dev/null 2>&1
            n=$(field epochs "$dir/out.json")
            split=$("$py" -c "print('epochs %.3f cpu' % (($(tail -1 "$dir/cpu.txt") - $(tail -1 "$dir/cpu1.txt")) * $n / max($n - 1, 1)))")
        fi
        [ "$np" = 1 ] || split=$(grep -o 'rank [0-9] of [0-9]: [0-9.]* s in its blocks ([0-9.]* s of CPU), [0-9.]* s passing' \
            "$dir/err.txt" | sed 's/ of [0-9]: / /; s/ s in its blocks (/ (/; s/ s of CPU), / cpu) \/ /; s/ s passing//' |
            sort | tr '\n' ' ')
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$model" "$np" "$(field epochs "$dir/out.json")" \
            "$(field best_epoch "$dir/out.json")" "$(field valid_rmse "$dir/out.json")" "$(per_epoch "$dir/log.txt")" \
            "$(tail -1 "$dir/cpu.txt")" "$split"
    done
done
