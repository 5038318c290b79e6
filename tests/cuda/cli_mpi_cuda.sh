#!/usr/bin/env bash
# GPU ranks: lacuna map and impute with --device cuda under `mpirun -np 2` and
# `-np 3` (all ranks on the machine's first GPU, shares of one device as in the
# other CUDA tests). Each rank maps its rows on the GPU and the partial targets
# are reduced over MPI; impute's ranks share one basis. Results equal one GPU
# process's (float rounding of the different sums for map's float sums,
# exactly for min/max/count), the CPU's within float tolerance, and
# --deterministic gives the same bits from run to run; mf trains ratings and
# implicit feedback (both models) by the rotation over GPU ranks. Skipped
# (77) without a GPU, MPI in the build, mpirun or numpy.
set -u
tool=$1
if "$tool" info --json | grep -q '"cuda_devices":0'; then echo "SKIP: no GPU"; exit 77; fi
py=$(command -v python3 || echo /usr/bin/python3)
"$py" -c 'import numpy' 2>/dev/null || py=/usr/bin/python3
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../mpi_common.sh" cli_mpi_cuda
# Some container runtimes refuse cross-process memory reads: copy through shared memory.
export OMPI_MCA_btl_vader_single_copy_mechanism=none

"$py" - <<'PY'
import numpy as np
rng = np.random.default_rng(16)
m, n = 3000017, 20011
np.save("S.npy", rng.standard_normal(m))
np.save("S32.npy", rng.standard_normal((m, 2)).astype(np.float32))
R = rng.integers(0, n, m); np.save("R.npy", R); np.save("R32.npy", R.astype(np.int32))
np.save("W32.npy", rng.random(m).astype(np.float32))
np.save("ref.npy", np.bincount(R, weights=np.load("S.npy"), minlength=n))
PY

# name | options | tolerance against one GPU process (0: exact)
cases=(
  "float64 sum|--source S.npy --bridge R.npy|1e-12"
  "float32 weighted mean, two columns|--source S32.npy --bridge R32.npy --weights W32.npy --op mean|1e-5"
  "max|--source S.npy --bridge R32.npy --op max|0"
  "count, empty -1|--source S32.npy --bridge R.npy --op count --empty -1|0"
  "float32 sum, deterministic|--source S32.npy --bridge R.npy --deterministic|1e-5"
)
k=0
for c in "${cases[@]}"; do
    IFS='|' read -r name opts tol <<<"$c"
    k=$((k + 1))
    "$tool" map $opts --targets 20011 --device cuda --out one$k.npy --quiet
    "$tool" map $opts --targets 20011 --device cpu --threads 4 --out cpu$k.npy --quiet
    check "$name: one GPU process equals the CPU" "compare one$k.npy cpu$k.npy $tol"
    for np in 2 3; do
        mpi $np "$tool" map $opts --targets 20011 --device cuda --out np$np.$k.npy --quiet; rc=$?
        check "$name: -np $np GPU ranks exit 0" "[ $rc -eq 0 ]"
        check "$name: -np $np GPU ranks equal one GPU process" "compare np$np.$k.npy one$k.npy $tol"
    done
done
check "-np 3 GPU float64 sum equals numpy's bincount" "compare np3.1.npy ref.npy 1e-12"
mpi 3 "$tool" map --source S32.npy --bridge R.npy --deterministic --targets 20011 --device cuda --out again.npy --quiet
check "-np 3 GPU --deterministic: the same bits run to run" "cmp -s again.npy np3.5.npy"
out=$(mpi 2 "$tool" map --source S.npy --bridge R.npy --targets 20011 --device cuda --json)
check "GPU ranks: one --json line naming 2 ranks and the cuda backend" \
    "[ \$(grep -c '\"median_ms\"' <<<\"\$out\") -eq 1 ] && grep -q '\"ranks\":2' <<<\"\$out\" && grep -q 'cuda' <<<\"\$out\""

# impute on GPU ranks: each rank's GPU computes its frequencies' GFT and SVT
# and its vertices' iGFT, the ranks gather the rest; the completion is one GPU
# process's (float64: to rounding).
export LACUNA_CACHE_DIR="$dir/cache"
{ for v in $(seq 0 299); do echo "$v $(((v + 1) % 300))"; done
  for v in $(seq 0 59); do echo "$((v * 5)) $(((v * 37 + 11) % 300))"; done; } > g.txt
"$tool" impute gen --graph g.txt --m 12 --n 10 --rank 2 --observed-ratio 0.7 --seed 4 --precision double \
    --out x.npy --truth z.npy --observed ids.txt --quiet
for prec in double single; do
    tol=1e-9; [ $prec = single ] && tol=2e-4
    a="impute run --graph g.txt --tensor x.npy --observed ids.txt --truth z.npy --precision $prec --iters 5 --inner 10 --accelerate"
    "$tool" $a --device cuda --out imp1.$prec.npy --quiet
    "$tool" $a --device cpu --out impcpu.$prec.npy --quiet
    check "impute $prec: one GPU process equals the CPU" "compare imp1.$prec.npy impcpu.$prec.npy $tol"
    for np in 2 3; do
        LACUNA_LOG=debug mpi $np -x LACUNA_CACHE_DIR -x LACUNA_LOG "$tool" $a --device cuda --out imp$np.$prec.npy \
            --quiet 2> imp$np.$prec.log; rc=$?
        check "impute $prec, -np $np GPU ranks: exit 0, one GPU process's completion" \
            "[ $rc -eq 0 ] && compare imp$np.$prec.npy imp1.$prec.npy $tol"
        check "impute $prec, -np $np GPU ranks: the last rank thresholds only its slices and imputes only its vertices" \
            "grep -q 'impute svt rank $((np - 1)) of $np: slices \[' imp$np.$prec.log && grep -q 'impute igft rank $((np - 1)) of $np' imp$np.$prec.log"
    done
done
# Entries missing inside observed vertices and lambda chosen by hold-out.
"$py" -c "import numpy as np; x = np.load('x.npy'); x[np.random.default_rng(5).random(x.shape) < 0.2] = np.nan; np.save('xp.npy', x)"
a="impute run --graph g.txt --tensor xp.npy --precision double --iters 4 --inner 10 --select-lambda holdout:0.2"
"$tool" $a --device cuda --out impp1.npy --quiet
"$tool" $a --device cpu --out imppcpu.npy --quiet
check "impute, partial vertices and --select-lambda: one GPU process equals the CPU" "compare impp1.npy imppcpu.npy 1e-9"
mpi 3 -x LACUNA_CACHE_DIR "$tool" $a --device cuda --out impp3.npy --quiet; rc=$?
check "impute, partial vertices and --select-lambda, -np 3 GPU ranks: one GPU process's completion" \
    "[ $rc -eq 0 ] && compare impp3.npy impp1.npy 1e-9"

# mf on GPU ranks: the rotation of src/dist/mf_dist.c with each rank's blocks
# trained on its GPU (the first two epochs in rounds of user slices, as on
# CPU ranks; mf_parts.cu). Measured quality: docs/scaling.md.
TOL=0.03
"$tool" mf gen --users 20000 --items 2000 --ratings 600000 --clusters 10 --seed 7 all.txt 2>/dev/null
"$tool" mf split all.txt train.txt valid.txt --seed 3 >/dev/null
opts="--valid valid.txt --no-search --epochs 30 -k 32 --json --quiet"
"$tool" mf train train.txt one.model $opts --device cuda > one.json
"$tool" mf train train.txt cpu.model $opts --device cpu > cpu.json
r1=$(key valid_rmse one.json); rc1=$(key valid_rmse cpu.json)
for np in 2 3; do
    mpi $np "$tool" mf train train.txt np$np.model $opts --device cuda > np$np.json; rc=$?
    check "mf -np $np GPU ranks: exit 0, one --json line" "[ $rc -eq 0 ] && [ \$(grep -c valid_rmse np$np.json) -eq 1 ]"
    rn=$(key valid_rmse np$np.json)
    echo "mf: validation RMSE one GPU $r1, CPU $rc1, -np $np GPU ranks $rn"
    check "mf -np $np GPU ranks: validation RMSE $rn within $TOL of one GPU's $r1" "close $rn $r1"
    "$tool" mf predict np$np.model valid.txt --json > pred$np.json
    rp=$(key rmse pred$np.json)
    check "mf -np $np GPU ranks: the written model predicts the reported RMSE ($rp, $rn)" \
        "\"$py\" -c 'import sys; sys.exit(0 if abs($rp - $rn) <= 1e-5 * $rn else 1)'"
done
# checkpoints over GPU ranks: 3 epochs, then resumed to 6 (the rows are in
# the host arrays after every turn), of the quality of 6 straight ones
o="--no-search -k 32 --quiet --device cuda"
mpi 2 "$tool" mf train train.txt straight.model $o --epochs 6; rc=$?
mpi 2 "$tool" mf train train.txt half.model $o --epochs 3 --checkpoint ck.bin; rc2=$?
mpi 2 "$tool" mf train train.txt resumed.model $o --epochs 6 --checkpoint ck.bin --resume; rc3=$?
"$tool" mf predict straight.model valid.txt --json > straight.json
"$tool" mf predict resumed.model valid.txt --json > resumed.json
rs=$(key rmse straight.json); rr=$(key rmse resumed.json)
check "mf -np 2 GPU ranks: 3 + 3 resumed epochs ($rr) within $TOL of 6 straight ones ($rs)" \
    "[ $rc -eq 0 ] && [ $rc2 -eq 0 ] && [ $rc3 -eq 0 ] && close $rr $rs"
# The neighbourhood model on GPU ranks: each part keeps every item's row
# (the neighbours' baselines), R(i) of the rank's users whole. Whole blocks
# a turn in every epoch ended 0.7% / 1.0% above one GPU here; with the
# rounds of user slices 0.6-0.8% below it (one GPU's seeds spread over
# 0.4%; docs/scaling.md), so GPU ranks may end at most 0.4% above one GPU.
TOL=0.004
o="--model neighbourhood -K 16 --valid valid.txt --no-search --epochs 20 -k 32 --json --quiet"
"$tool" mf train train.txt nbr1.model $o --device cuda > nbr1.json
rb=$(key valid_rmse nbr1.json)
for np in 2 3; do
    mpi $np "$tool" mf train train.txt nbr$np.model $o --device cuda > nbr$np.json; rc=$?
    rn=$(key valid_rmse nbr$np.json)
    echo "mf neighbourhood: validation RMSE one GPU $rb, -np $np GPU ranks $rn"
    check "mf neighbourhood -np $np GPU ranks: exit 0, RMSE $rn at most $TOL above one GPU's $rb" \
        "[ $rc -eq 0 ] && \"$py\" -c 'import sys; sys.exit(0 if $rn <= (1 + $TOL) * $rb else 1)'"
    "$tool" mf predict nbr$np.model valid.txt --json > nbrpred$np.json
    rp=$(key rmse nbrpred$np.json)
    check "mf neighbourhood -np $np GPU ranks: the written model predicts the reported RMSE ($rp, $rn)" \
        "\"$py\" -c 'import sys; sys.exit(0 if abs($rp - $rn) <= 1e-5 * $rn else 1)'"
done
# Implicit feedback on GPU ranks (mf_parts.cu: a part's negatives drawn from
# its items, weighted as the user's share of one process's; the
# neighbourhood model's as its stream's negatives' cells): planted
# preferences, HR@10 / NDCG@10 (`mf evaluate`, full ranking) within ITOL /
# NTOL of one GPU's (the CUDA tests' tolerance against the CPU), and the
# negatives' weight by the first epoch's mean loss at a learning rate of
# 1e-7 (log 2 x 5 for 4 negatives, within 1%).
ITOL=0.05; NTOL=0.03
"$py" "$here/../mf_planted.py" 1000 300 20 8 1 imp_train.txt imp_test.txt
for case in plain:xent plain:bpr neighbourhood:xent neighbourhood:bpr; do
    model=${case%:*}; loss=${case#*:}
    o="--implicit --model $model --loss $loss -k 16 -K 16 -t 20 --quiet --device cuda --no-search"
    rm -f imp1.model
    # one GPU with drawn negatives, as the ranks' parts train (one device's
    # default, in-batch negatives, is checked in tests/cuda/test_mf_implicit_cuda.c)
    LACUNA_MF_CUDA_INBATCH=-1 "$tool" mf train imp_train.txt imp1.model $o; rc=$?
    check "mf implicit $model $loss on one GPU: exit 0" "[ $rc -eq 0 ]"
    "$tool" mf evaluate imp1.model imp_test.txt --negatives 0 --json > imp1.json
    h1=$(key hr imp1.json); n1=$(key ndcg imp1.json)
    "$tool" mf train imp_train.txt impc.model ${o/cuda/cpu}
    "$tool" mf evaluate impc.model imp_test.txt --negatives 0 --json > impc.json
    for np in 2 3; do
        rm -f imp.model
        mpi $np "$tool" mf train imp_train.txt imp.model $o; rc=$?
        "$tool" mf evaluate imp.model imp_test.txt --negatives 0 --json > imp.json
        hn=$(key hr imp.json); nn=$(key ndcg imp.json)
        echo "mf implicit $model $loss: HR@10 / NDCG@10 one GPU $h1 / $n1, CPU $(key hr impc.json) / $(key ndcg impc.json), -np $np GPU ranks $hn / $nn"
        check "mf implicit $model $loss -np $np GPU ranks: exit 0, HR@10 $hn within $ITOL of one GPU's $h1" \
            "[ $rc -eq 0 ] && \"$py\" -c 'import sys; sys.exit(0 if abs($hn - $h1) <= $ITOL else 1)'"
        check "mf implicit $model $loss -np $np GPU ranks: NDCG@10 $nn within $NTOL of one GPU's $n1" \
            "\"$py\" -c 'import sys; sys.exit(0 if abs($nn - $n1) <= $NTOL else 1)'"
    done
done
# (the plain model: -a leaves the neighbourhood model's rates, under which
# its first epoch moves; its parts' weights are the same code's as the
# several-device rotation's, checked frozen in tests/cuda/test_mf_multi_cuda.c)
o="--implicit -k 16 -t 1 -a 1e-7 --json --device cuda --no-search"
# first_losses DATA TOL WHAT [REF]: one GPU's first loss on DATA, then -np 2
# and -np 3 GPU ranks' within TOL of REF (default: one GPU's)
first_losses() {
    local l1 ln np ref
    LACUNA_MF_CUDA_INBATCH=-1 "$tool" mf train "$1" w.model $o > w1.json
    l1=$(key train_loss w1.json); ref=${4:-$l1}; TOL=$2
    for np in 2 3; do
        mpi $np "$tool" mf train "$1" w.model $o > wn.json
        ln=$(key train_loss wn.json)
        echo "mf implicit, $3: first loss at 1e-7 one GPU $l1, -np $np GPU ranks $ln (against $ref)"
        check "mf implicit -np $np GPU ranks, $3: the first loss $ln (negatives' weight) within $TOL of $ref" \
            "close $ln $ref"
    done
}
first_losses imp_train.txt 0.01 "planted" 3.4657359   # log 2 x 5
# Users of one or two interactions: most have none in a rank's block, where
# its part still draws their share of negatives (cross-entropy: a part holds
# every user of the rank; the plain model's stream a cell of negatives only
# for such a user): the first loss within 0.2% of one GPU's.
"$py" -c '
import random
random.seed(23)
for u in range(3000):
    a = random.randrange(300)
    print(u + 1, a + 1, 1)
    if u % 2: print(u + 1, (a + 1) % 300 + 1, 1)' > sparse.txt
first_losses sparse.txt 0.002 "users of 1-2 interactions"

echo "$passes passed, $fails failed"
[ $fails -eq 0 ]
