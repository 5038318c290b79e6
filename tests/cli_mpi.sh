#!/usr/bin/env bash
# lacuna map and impute over MPI ranks (src/dist): `mpirun -np 2` and `-np 3
# --oversubscribe` (odd splits) give map's T of one process (within float64
# rounding for sums, exactly for min/max/count), the same bits from run to
# run, the error message of one process with the position in the whole input,
# and only rank 0 writes; impute's completion is one process's, bit for bit.
# Skipped (77) without MPI in the build or mpirun.
set -u
tool=$1
py=/usr/bin/python3
. "$(dirname "$0")/mpi_common.sh" cli_mpi

"$py" - <<'PY'
import numpy as np
rng = np.random.default_rng(15)
m, n = 40009, 997
S = rng.standard_normal(m); S[::1013] = np.nan
np.save("S.npy", S)
np.save("S32.npy", rng.standard_normal((m, 3)).astype(np.float32))
R = rng.integers(0, n - 3, m); R[-1] = n - 4   # the last 3 targets stay empty
np.save("R.npy", R); np.save("R32.npy", R.astype(np.int32))
np.save("W.npy", rng.random(m)); np.save("W32.npy", rng.random(m).astype(np.float32))
np.save("Sclean.npy", np.nan_to_num(S))
Rbad = R.copy(); Rbad[30001] = n + 5; np.save("Rbad.npy", Rbad)
# Over 2^20 rows a rank: float32 values are widened and mapped in pieces.
big = 2300003
Sbig = rng.standard_normal(big).astype(np.float32); Sbig[::100003] = np.nan
np.save("Sbig.npy", Sbig); np.save("Rbig.npy", rng.integers(0, 997, big).astype(np.int32))
np.save("Wbig.npy", rng.random(big).astype(np.float32))
PY

# name | options | tolerance (0: exact)
cases=(
  "sum|--source Sclean.npy --bridge R.npy --deterministic|1e-13"
  "sum, NaN propagated, empty -1|--source S.npy --bridge R32.npy --empty -1|1e-13"
  "weighted mean, float32 matrix, NaN skipped|--source S32.npy --bridge R.npy --weights W32.npy --op mean --nan skip --empty nan|1e-6"
  "min, empty nan|--source S.npy --bridge R.npy --op min --nan skip --empty nan|0"
  "max, weights, NaN propagated|--source S.npy --bridge R.npy --weights W.npy --op max|0"
  "weighted count, NaN skipped, empty 7|--source S.npy --bridge R.npy --weights W.npy --op count --nan skip --empty 7|1e-13"
  "count|--source S32.npy --bridge R.npy --op count|0"
  "float32 sum in pieces, deterministic|--source Sbig.npy --bridge Rbig.npy --nan skip --deterministic|1e-6"
  "float32 weighted mean in pieces|--source Sbig.npy --bridge Rbig.npy --weights Wbig.npy --op mean|1e-6"
)
k=0
for c in "${cases[@]}"; do
    IFS='|' read -r name opts tol <<<"$c"
    k=$((k + 1))
    "$tool" map $opts --targets 997 --out one$k.npy --quiet
    nps="3"; [ $k -le 2 ] || [ $k -ge 8 ] && nps="2 3"   # -np 2 for a few, the odd split for all
    for np in $nps; do
        mpi $np "$tool" map $opts --targets 997 --out np$np.$k.npy --quiet; rc=$?
        check "$name: -np $np exits 0" "[ $rc -eq 0 ]"
        check "$name: -np $np equals one process" "compare np$np.$k.npy one$k.npy $tol"
    done
done

# An independent reference for the first case: NumPy's own sum.
"$py" -c "
import numpy as np
S, R = np.load('Sclean.npy'), np.load('R.npy')
np.save('ref.npy', np.bincount(R, weights=S, minlength=997))"
check "-np 3 sum equals numpy's bincount" "compare np3.1.npy ref.npy 1e-12"

# Plans over ranks: each rank plans its own rows (in pieces past 2^20 rows).
"$tool" map --plan --source Sclean.npy --source S32.npy --bridge R.npy --targets 997 --deterministic \
    --out plan1a.npy --out plan1b.npy --quiet
"$tool" map --plan --source Sbig.npy --bridge Rbig.npy --weights Wbig.npy --op mean --targets 997 --out plan1c.npy --quiet
for np in 2 3; do
    mpi $np "$tool" map --plan --source Sclean.npy --source S32.npy --bridge R.npy --targets 997 --deterministic \
        --out plan$np.a.npy --out plan$np.b.npy --quiet; rc=$?
    check "--plan, two sources, -np $np: equals one process" \
        "[ $rc -eq 0 ] && compare plan$np.a.npy plan1a.npy 1e-13 && compare plan$np.b.npy plan1b.npy 1e-6"
    mpi $np "$tool" map --plan --source Sbig.npy --bridge Rbig.npy --weights Wbig.npy --op mean --targets 997 \
        --out plan$np.c.npy --quiet; rc=$?
    check "--plan, float32 weighted mean in pieces, -np $np: equals one process" \
        "[ $rc -eq 0 ] && compare plan$np.c.npy plan1c.npy 1e-6"
done
mpi 3 "$tool" map --source S32.npy --bridge R.npy --targets 997 --deterministic --out shot3.npy --quiet
check "-np 3: a deterministic plan and a one-shot call give the same bits" "cmp -s plan3.b.npy shot3.npy"
errn=$(mpi 3 "$tool" map --plan --source S.npy --bridge Rbad.npy --targets 997 --out badplan.npy 2>&1); rc=$?
check "--plan, bad bridge, 3 ranks: exit 2, bridge[30001] named, no file" \
    "[ $rc -eq 2 ] && grep -q 'bridge\[30001\]' <<<\"\$errn\" && [ ! -e badplan.npy ]"
errn=$(mpi 3 "$tool" map --plan --source S.npy --bridge R.npy --nan error --targets 997 --out badplan.npy 2>&1); rc=$?
check "--plan, NaN under --nan error, 3 ranks: exit 2, source[0] named, no file" \
    "[ $rc -eq 2 ] && grep -q 'source\[0\] is NaN' <<<\"\$errn\" && [ ! -e badplan.npy ]"

# Deterministic: the same bits from run to run (and --accumulate folds into T).
mpi 3 "$tool" map --source S32.npy --bridge R.npy --weights W32.npy --deterministic --out again.npy --quiet
mpi 3 "$tool" map --source S32.npy --bridge R.npy --weights W32.npy --deterministic --out again2.npy --quiet
check "-np 3 --deterministic is bit-identical run to run" "cmp -s again.npy again2.npy"
cp one1.npy acc1.npy; cp one1.npy accn.npy
"$tool" map --source Sclean.npy --bridge R.npy --out acc1.npy --accumulate --quiet
mpi 2 "$tool" map --source Sclean.npy --bridge R.npy --out accn.npy --accumulate --quiet
check "--accumulate over 2 ranks equals one process" "compare accn.npy acc1.npy 1e-13"

# Rank 0 alone writes and reports; --json says how many ranks.
out=$(mpi 3 "$tool" map --source Sclean.npy --bridge R.npy --targets 997 --json)
check "one --json line from 3 ranks" "[ \$(grep -c '\"median_ms\"' <<<\"\$out\") -eq 1 ]"
check "--json names the ranks" "grep -q '\"ranks\":3' <<<\"\$out\""
out=$(LACUNA_LOG=info mpi 2 -x LACUNA_LOG "$tool" info 2>&1 >/dev/null)
check "two ranks on one host are its ranks 0 and 1 (each takes that GPU of the host by default)" \
    "grep -q 'rank 0 of 2 MPI ranks (0 of 2 on this host)' <<<\"\$out\" && grep -q 'rank 1 of 2 MPI ranks (1 of 2 on this host)' <<<\"\$out\""
out=$(mpi 2 "$tool" info --json)
check "info --json under mpirun: one line, mpi true, 2 ranks" \
    "[ \$(grep -c '\"mpi\":true' <<<\"\$out\") -eq 1 ] && grep -q '\"ranks\":2' <<<\"\$out\""

# Errors: the message of one process (the position in the whole input), exit 2, no output.
err1=$("$tool" map --source S.npy --bridge Rbad.npy --targets 997 --out bad.npy 2>&1); rc1=$?
errn=$(mpi 3 "$tool" map --source S.npy --bridge Rbad.npy --targets 997 --out bad.npy 2>&1); rcn=$?
check "bad bridge: one process exits 2" "[ $rc1 -eq 2 ]"
check "bad bridge: 3 ranks exit 2" "[ $rcn -eq 2 ]"
check "bad bridge: the message names bridge[30001]" "grep -q 'bridge\[30001\]' <<<\"\$errn\""
check "bad bridge: every rank says what one process says" \
    "[ \"\$(grep -c -F \"\$err1\" <<<\"\$errn\")\" -ge 1 ]"
check "bad bridge: no output file" "[ ! -e bad.npy ]"
mpi 2 "$tool" map --source S.npy --bridge R.npy --nan error --targets 997 --out bad.npy >/dev/null 2>&1; rc=$?
check "NaN under --nan error over 2 ranks exits 2" "[ $rc -eq 2 ] && [ ! -e bad.npy ]"

# impute: the SVT's spectral slices split over the ranks; every slice's SVD is
# the one process's, so the completion is the same bits.
export LACUNA_CACHE_DIR="$dir/cache"
{ for v in $(seq 0 39); do echo "$((v * 10 + 5)) $((((v + 1) % 40) * 10 + 5))"; done
  for v in $(seq 0 7); do echo "$((v * 10 + 5)) $((((v * 7 + 13) % 40) * 10 + 5))"; done; } > g.txt
"$tool" impute gen --graph g.txt --m 6 --n 5 --rank 1 --observed-ratio 0.75 --seed 3 --precision double \
    --out x.npy --truth z.npy --observed ids.txt --quiet
for prec in double single; do
    a="impute run --graph g.txt --tensor x.npy --observed ids.txt --truth z.npy --precision $prec --iters 4 --inner 10 --accelerate --threads 1"
    one=$("$tool" $a --out imp1.$prec.npy --json --quiet)
    for np in 2 3; do
        out=$(mpi $np -x LACUNA_CACHE_DIR "$tool" $a --out imp$np.$prec.npy --json --quiet); rc=$?
        check "impute $prec -np $np exits 0" "[ $rc -eq 0 ]"
        check "impute $prec -np $np: the same completion, bit for bit" "cmp -s imp$np.$prec.npy imp1.$prec.npy"
        check "impute $prec -np $np: one --json line, the same iterations and errors" \
            "[ \"\$(sed 's/\"seconds[a-z_]*\":[0-9.e-]*,//g; s/\"basis_cached\":[a-z]*,//g' <<<\"\$out\")\" = \"\$(sed 's/\"seconds[a-z_]*\":[0-9.e-]*,//g; s/\"basis_cached\":[a-z]*,//g' <<<\"\$one\")\" ]"
    done
done
# Partial vertices (entries missing inside observed slices) and lambda chosen
# by hold-out: the GFT, SVT and iGFT split, the same bits.
$py -c "import numpy as np; x = np.load('x.npy'); x[np.random.default_rng(5).random(x.shape) < 0.2] = np.nan; np.save('xp.npy', x)"
a="impute run --graph g.txt --tensor xp.npy --precision double --iters 4 --inner 10 --select-lambda holdout:0.2 --threads 1"
"$tool" $a --out impp1.npy --quiet
for np in 2 3; do
    mpi $np -x LACUNA_CACHE_DIR "$tool" $a --out impp$np.npy --quiet; rc=$?
    check "impute, partial vertices and --select-lambda, -np $np: the same completion, bit for bit" \
        "[ $rc -eq 0 ] && cmp -s impp$np.npy impp1.npy"
done
# A fresh cache: rank 0 solves once, writes the cache and sends the basis.
rm -rf "$dir/cache"
LACUNA_LOG=info mpi 3 -x LACUNA_CACHE_DIR -x LACUNA_LOG "$tool" impute run --graph g.txt --tensor x.npy \
    --observed ids.txt --precision double --iters 4 --inner 10 --threads 1 --out impfresh.npy --quiet 2> fresh.log; rc=$?
"$tool" impute run --graph g.txt --tensor x.npy --observed ids.txt --precision double --iters 4 --inner 10 \
    --threads 1 --out impfresh1.npy --json --quiet > fresh.json
check "impute with a fresh cache over 3 ranks" "[ $rc -eq 0 ] && cmp -s impfresh.npy impfresh1.npy"
check "one basis solved over 3 ranks" "[ \$(grep -c 'graph Fourier basis: N = 40' fresh.log) -eq 1 ]"
check "the basis the ranks cached is used after" "grep -q '\"basis_cached\":true' fresh.json"

echo "$passes passed, $fails failed"
[ $fails -eq 0 ]
