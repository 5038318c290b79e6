#!/usr/bin/env bash
# Speed-up over CPU ranks on one host, every capability: P ranks of one
# thread each (mpirun -np P) against one process of one thread and one
# process of P threads (what a user of one machine would run instead), for
# P in $NPS, with the whole job's wall time beside each capability's own
# figure:
#   map     lacuna map --json median_ms (rank 0, the ranks' reduction included;
#           reading excluded), M float32 rows, int32 bridge, SUM, N targets
#   impute  lacuna impute run --json seconds (the iteration, basis from the
#           cache), the ego-Facebook graph with M_IMP x M_IMP slices
#   mf      lacuna mf train --log: seconds an epoch over the epochs after the
#           first (reading, set-up and the neighbour search left out), plain
#           and neighbourhood models, generated ratings, validation RMSE
# Every run is on the CPU backend (--device cpu), also on a GPU machine.
# Run it on a host with at least max($NPS) free cores: oversubscribed ranks
# measure the host, not the ranks (bench/RESULTS.md).
# Usage: bench/mpi_scaling.sh LACUNA [GRAPH]
#   NPS="1 2 4 8"  MAP_M=40000000  MAP_N="10000 500000"  M_IMP=20
#   MF_USERS=40000 MF_ITEMS=6000 MF_RATINGS=4000000 MF_EPOCHS=12
set -eu
tool=$(realpath "$1"); graph=$(realpath "${2:-data/ego-facebook/facebook_combined.txt}")
nps=${NPS:-1 2 4 8}
py=/usr/bin/python3   # Debian's, with numpy; else the first python3 on PATH that has it
"$py" -c 'import numpy' 2>/dev/null || py=python3
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader
export OMPI_MCA_mpi_yield_when_idle=1 OMP_PROC_BIND=false
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
cd "$dir"
export LACUNA_CACHE_DIR="$dir/cache"
field() { grep -o "\"$1\":[0-9.e-]*" | head -1 | cut -d: -f2; }
wall() { local t0 t1; t0=$(date +%s.%N); "$@"; t1=$(date +%s.%N); "$py" -c "print('%.2f' % ($t1 - $t0))" >"$dir/wall"; }
ranks() { local np=$1; shift; if [ "$np" = 1 ]; then "$@"; else mpirun -np "$np" --bind-to none -x LACUNA_CACHE_DIR "$@"; fi; }
# row CAPABILITY CASE HOW P FIGURE UNIT WALL BASE: one line, speed-up against BASE
row() { "$py" -c "
b = '$8'; f = '$5'
print('%s\t%s\t%s\t%s\t%s %s\t%s s\t%s' % ('$1', '$2', '$3', '$4', f, '$6', '$7',
      ('%.2fx' % (float(b) / float(f))) if b and f and float(f) > 0 else '-'))"; }
printf 'capability\tcase\thow\tP\tfigure\twall (job)\tspeed-up vs 1 thread\n'

# map
m=${MAP_M:-40000000}
"$py" -c "
import numpy as np
rng = np.random.default_rng(1)
np.save('S.npy', rng.standard_normal($m, dtype=np.float32))
for n in '${MAP_N:-10000 500000}'.split(): np.save('R%s.npy' % n, rng.integers(0, int(n), $m, dtype=np.int32))"
for n in ${MAP_N:-10000 500000}; do
    a="map --source S.npy --bridge R$n.npy --targets $n --repeat 5 --json --quiet --device cpu"
    base=""
    for np in $nps; do
        wall ranks "$np" "$tool" $a --threads 1 >out.json; t=$(field median_ms <out.json)
        [ "$np" = 1 ] && base=$t
        row map "${m} rows -> $n" "ranks x 1 thread" "$np" "$t" ms "$(cat wall)" "$base"
        [ "$np" = 1 ] && continue
        wall "$tool" $a --threads "$np" >out.json
        row map "${m} rows -> $n" "1 process" "$np" "$(field median_ms <out.json)" ms "$(cat wall)" "$base"
    done
done

# impute
k=${M_IMP:-20}
"$tool" impute gen --graph "$graph" --m "$k" --n "$k" --rank 3 --observed-ratio 0.5 --seed 3 \
    --out x.npy --truth z.npy --observed ids.txt --quiet
a="impute run --graph $graph --tensor x.npy --observed ids.txt --truth z.npy --iters 3 --inner 10 --out y.npy --json --quiet --device cpu"
"$tool" $a >/dev/null   # the basis into the cache, on every thread
base=""
for np in $nps; do
    wall ranks "$np" "$tool" $a --threads 1 >out.json
    t=$(field seconds <out.json); [ "$np" = 1 ] && base=$t
    row impute "ego-Facebook ${k}x${k}, 21 iterations (rmse $(field rmse_missing <out.json))" "ranks x 1 thread" "$np" "$t" s \
        "$(cat wall)" "$base"
    [ "$np" = 1 ] && continue
    wall "$tool" $a --threads "$np" >out.json
    row impute "ego-Facebook ${k}x${k}, 21 iterations (rmse $(field rmse_missing <out.json))" "1 process" "$np" \
        "$(field seconds <out.json)" s "$(cat wall)" "$base"
done

# mf
"$tool" mf gen --users "${MF_USERS:-40000}" --items "${MF_ITEMS:-6000}" --ratings "${MF_RATINGS:-4000000}" \
    --clusters 20 --seed 4 all.txt 2>/dev/null
"$tool" mf split all.txt train.txt valid.txt --seed 2 2>/dev/null
per_epoch() { "$py" -c "
rows = [l.split() for l in open('log.txt') if not l.startswith('#')]
print('%.4f' % ((float(rows[-1][3]) - float(rows[0][3])) / max(len(rows) - 1, 1)))"; }
for model in plain neighbourhood; do
    a="mf train train.txt m.model --valid valid.txt --model $model --no-search --epochs ${MF_EPOCHS:-12} --patience 100 --json --quiet --log log.txt --device cpu"
    base=""
    for np in $nps; do
        wall ranks "$np" "$tool" $a --threads 1 >out.json; t=$(per_epoch); [ "$np" = 1 ] && base=$t
        row mf "$model, $(wc -l <train.txt) ratings (valid rmse $(field valid_rmse <out.json))" "ranks x 1 thread" "$np" "$t" \
            "s/epoch" "$(cat wall)" "$base"
        [ "$np" = 1 ] && continue
        wall "$tool" $a --threads "$np" >out.json
        row mf "$model, $(wc -l <train.txt) ratings (valid rmse $(field valid_rmse <out.json))" "1 process" "$np" "$(per_epoch)" \
            "s/epoch" "$(cat wall)" "$base"
    done
done
