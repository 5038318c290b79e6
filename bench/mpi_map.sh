#!/usr/bin/env bash
# map over MPI ranks on one host: the mapping's median time (lacuna map
# --json, rank 0, reduction included) for one process with 1 and 2 threads and
# for mpirun -np 2 and -np 4 with one thread a rank, on generated float32
# sources and int32 bridges. Usage: bench/mpi_map.sh LACUNA [M] [TARGETS...]
# (defaults: 20000000 rows onto 10000, 500000 and 5000000 targets).
set -eu
tool=$1; m=${2:-20000000}; shift $(( $# > 1 ? 2 : 1 )); targets=${*:-10000 500000 5000000}
py=/usr/bin/python3
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
"$py" -c "
import numpy as np
rng = np.random.default_rng(1)
np.save('$dir/S.npy', rng.standard_normal($m, dtype=np.float32))
for n in '$targets'.split(): np.save('$dir/R%s.npy' % n, rng.integers(0, int(n), $m, dtype=np.int32))"
ms() { grep -o '"median_ms":[0-9.]*' | cut -d: -f2; }
printf 'm\tn\t1 proc 1 thr\t1 proc 2 thr\tnp 2 x 1 thr\tnp 4 x 1 thr (oversubscribed)\n'
for n in $targets; do
    a="map --source $dir/S.npy --bridge $dir/R$n.npy --targets $n --repeat 5 --json --quiet"
    one1=$("$tool" $a --threads 1 | ms); one2=$("$tool" $a --threads 2 | ms)
    np2=$(mpirun -np 2 --bind-to none "$tool" $a --threads 1 | ms)
    np4=$(mpirun -np 4 --oversubscribe --bind-to none "$tool" $a --threads 1 | ms)
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$m" "$n" "$one1" "$one2" "$np2" "$np4"
done
