#!/usr/bin/env bash
# lacuna mf train over MPI ranks (src/dist/mf_dist.c): `mpirun -np 2` and
# `-np 3 --oversubscribe` train the plain and the neighbourhood model by the
# block rotation, reach the validation RMSE of one process within TOL and
# beat a biases-only
# baseline computed here with NumPy; rank 0 writes the whole model once (its
# predictions give the RMSE the training reported), --deterministic is the
# same bits from run to run, checkpoints written by rank 0 resume to the
# bytes of a run without a break (and across rank counts); implicit feedback
# (both models, both losses) ranks held-out items as one process does, its
# checkpoints too. Skipped (77) without MPI in the build or mpirun.
set -u
tool=$1
py=/usr/bin/python3
here=$(cd "$(dirname "$0")" && pwd)
. "$here/mpi_common.sh" cli_mpi_mf
# Here (one thread a rank: the same every run) the ranks measured within 0.35%
# of one process (plain +0.32% / +0.31%, neighbourhood +0.24% / +0.28% at 2 /
# 3 ranks); one process's spread over seeds is 0.7% (plain) and 1.1%. Whole
# blocks from the first epoch (no rounds, lac_mf_rounds_at) measured +1.7% /
# +1.9% (plain) and +0.8% / +1.05% on these data.
TOL=0.01

"$tool" mf gen --users 6000 --items 1000 --ratings 200000 --clusters 10 --seed 7 all.txt 2>/dev/null
"$tool" mf split all.txt train.txt valid.txt --seed 3 >/dev/null

# The baseline: mu + b_u + b_i by damped means of the training ratings.
base=$("$py" -c "
import numpy as np
t = np.loadtxt('train.txt'); v = np.loadtxt('valid.txt')
mu = t[:, 2].mean()
def means(col, resid, n):
    s = np.bincount(col, weights=resid, minlength=n); c = np.bincount(col, minlength=n)
    return s / (c + 5.0)
nu, ni = int(max(t[:, 0].max(), v[:, 0].max())) + 1, int(max(t[:, 1].max(), v[:, 1].max())) + 1
bi = means(t[:, 1].astype(int), t[:, 2] - mu, ni)
bu = means(t[:, 0].astype(int), t[:, 2] - mu - bi[t[:, 1].astype(int)], nu)
p = np.clip(mu + bu[v[:, 0].astype(int)] + bi[v[:, 1].astype(int)], t[:, 2].min(), t[:, 2].max())
print(np.sqrt(np.mean((v[:, 2] - p) ** 2)))")
below() { "$py" -c "import sys; sys.exit(0 if $1 < $2 else 1)"; }

for model in plain neighbourhood; do
    opts="--model $model --valid valid.txt --no-search --threads 1 --json --quiet"
    [ $model = plain ] || opts="$opts -K 16 --epochs 25"   # a few seconds
    "$tool" mf train train.txt one.$model $opts > one.$model.json
    r1=$(key valid_rmse one.$model.json)
    check "$model: one process beats the biases-only baseline ($r1 < $base)" "below $r1 $base"
    for np in 2 3; do
        mpi $np "$tool" mf train train.txt np$np.$model $opts > np$np.$model.json; rc=$?
        check "$model -np $np exits 0" "[ $rc -eq 0 ]"
        check "$model -np $np: one --json line" "[ \$(grep -c valid_rmse np$np.$model.json) -eq 1 ]"
        rn=$(key valid_rmse np$np.$model.json)
        echo "$model: validation RMSE one process $r1, -np $np $rn, biases-only $base"
        check "$model -np $np: validation RMSE $rn within $TOL of one process's $r1" "close $rn $r1"
        check "$model -np $np: beats the biases-only baseline" "below $rn $base"
        "$tool" mf predict np$np.$model valid.txt --json > pred$np.$model.json
        rp=$(key rmse pred$np.$model.json)
        check "$model -np $np: the written model predicts the reported RMSE ($rp, $rn)" \
            "\"$py\" -c 'import sys; sys.exit(0 if abs($rp - $rn) <= 1e-5 * $rn else 1)'"
    done
done

# The same bits from run to run (for a seed, threads and rank count; one
# thread a rank: three ranks of two threads' barriers on two cores crawl).
for k in 1 2; do
    mpi 3 "$tool" mf train train.txt det$k.model --valid valid.txt --no-search --deterministic --threads 1 --quiet
done
check "-np 3 --deterministic is bit-identical run to run" "cmp -s det1.model det2.model"

# Checkpoints over ranks: rank 0 writes one file from the gathered state;
# with --deterministic, N + N resumed epochs are the bytes of 2N straight
# ones on the same rank count (every rank starts an epoch from the gathered
# state of what it reads: the neighbourhood model's item biases, or with
# validation the item blocks, are gathered after each epoch). Smaller data:
# these are many short runs (so not every model at every rank count).
"$tool" mf gen --users 1500 --items 400 --ratings 30000 --clusters 5 --seed 9 ck_all.txt 2>/dev/null
"$tool" mf split ck_all.txt ck_train.txt ck_valid.txt --seed 4 >/dev/null
for np in 2 3; do
    models="plain neighbourhood"
    [ $np = 2 ] && models=neighbourhood-v
    for model in $models; do
        o="--model ${model%-v} --no-search --deterministic --threads 1 --quiet -k 8"
        [ $model = plain ] || o="$o -K 8"
        [ $model = neighbourhood-v ] && o="$o --valid ck_valid.txt"
        rm -f ck.bin
        mpi $np "$tool" mf train ck_train.txt straight.model $o --epochs 6
        mpi $np "$tool" mf train ck_train.txt half.model $o --epochs 3 --checkpoint ck.bin; rc=$?
        check "$model -np $np --checkpoint exits 0 and writes one checkpoint" \
            "[ $rc -eq 0 ] && [ -s ck.bin ] && [ \$(ls -a | grep -c 'ck\.bin') -eq 1 ]"
        mpi $np "$tool" mf train ck_train.txt resumed.model $o --epochs 6 --checkpoint ck.bin --resume; rc=$?
        check "$model -np $np: 3 + 3 resumed epochs are the bytes of 6 straight ones" \
            "[ $rc -eq 0 ] && cmp -s straight.model resumed.model"
    done
done
# what does not fit is refused by name (exit 2, no model, the checkpoint untouched)
o="--no-search --deterministic --threads 1 --quiet"
rm -f ck.bin
mpi 2 "$tool" mf train ck_train.txt half.model $o -k 8 --epochs 3 --checkpoint ck.bin
cp ck.bin ck.keep
rm -f other.model
mpi 2 "$tool" mf train ck_train.txt other.model $o -k 9 --epochs 6 --checkpoint ck.bin --resume 2>err.txt; rc=$?
check "-np 2 --resume with another k exits 2 naming it" "[ $rc -eq 2 ] && grep -q 'k 8, this run has 9' err.txt"
check "-np 2 --resume refused: no model, the checkpoint untouched" "[ ! -e other.model ] && cmp -s ck.bin ck.keep"
mpi 2 "$tool" mf train all.txt other.model $o -k 8 --epochs 6 --checkpoint ck.bin --resume 2>err.txt; rc=$?
check "-np 2 --resume on other ratings exits 2 naming them" "[ $rc -eq 2 ] && grep -q 'other training ratings' err.txt"
cp ck_valid.txt ck_valid.keep
mpi 2 "$tool" mf train ck_train.txt other.model $o -k 8 --epochs 6 --checkpoint ck_valid.txt 2>err.txt; rc=$?
check "-np 2 --checkpoint naming a ratings file exits 2, the file kept" \
    "[ $rc -eq 2 ] && [ ! -e other.model ] && cmp -s ck_valid.txt ck_valid.keep"
# another rank count (or one process) goes on from the whole state it holds
"$tool" mf train ck_train.txt one.model $o -k 8 --epochs 6
"$tool" mf predict one.model ck_valid.txt --json > one.json
one=$(key rmse one.json)
for np in 3 1; do
    cp ck.keep ck.bin
    rm -f moved.model
    if [ $np = 1 ]; then "$tool" mf train ck_train.txt moved.model $o -k 8 --epochs 6 --checkpoint ck.bin --resume; rc=$?
    else mpi $np "$tool" mf train ck_train.txt moved.model $o -k 8 --epochs 6 --checkpoint ck.bin --resume; rc=$?; fi
    "$tool" mf predict moved.model ck_valid.txt --json > moved.json
    rm=$(key rmse moved.json)
    check "a 2-rank checkpoint resumed on $np: exit 0, held-out RMSE $rm within $TOL of one process's $one" \
        "[ $rc -eq 0 ] && close $rm $one"
done

# Implicit feedback over ranks (the part epochs of src/mf/cpu/implicit_cpu.c:
# negatives drawn within the held item block): planted preferences
# (tests/mf_planted.py), leave-one-out; HR@10 and NDCG@10 of `mf evaluate`
# (full ranking) at 2 and 3 ranks within ITOL / NTOL of one process's mean
# over two seeds, and above twice most-popular's (counted here with NumPy).
# Measured here: one process's spread over 4 seeds is up to 0.025 HR@10
# (neighbourhood BPR) and 0.017 NDCG@10; the ranks fell inside it
# (bench/RESULTS.md, "implicit feedback over MPI ranks").
ITOL=0.04; NTOL=0.025
"$py" "$here/mf_planted.py" 1000 300 20 8 1 imp_train.txt imp_test.txt
pop=$("$py" -c "
import numpy as np
t = np.loadtxt('imp_train.txt', dtype=np.int64); h = np.loadtxt('imp_test.txt', dtype=np.int64)
count = np.bincount(t[:, 1], minlength=h[:, 1].max() + 1); order = np.argsort(-count, kind='stable')
seen = {}
for u, i, _ in t: seen.setdefault(u, set()).add(i)
hits = sum(i in [x for x in order if x not in seen[u]][:10] for u, i, _ in h)
print(hits / len(h))")
# (every model and loss, not every one at both rank counts: mpirun's starts
# are most of this test's time)
for case in plain:xent:2 plain:xent:3 plain:bpr:3 neighbourhood:xent:2 neighbourhood:bpr:3; do
    model=${case%%:*}; rest=${case#*:}; loss=${rest%:*}; np=${rest#*:}
    o="--implicit --model $model --loss $loss -k 16 -K 16 -t 20 --threads 1 --quiet --no-search"
    h1=0; n1=0
    for seed in 1 2; do
        "$tool" mf train imp_train.txt imp1.model $o --seed $seed
        "$tool" mf evaluate imp1.model imp_test.txt --negatives 0 --json > imp1.json
        h1=$("$py" -c "print($h1 + $(key hr imp1.json) / 2)"); n1=$("$py" -c "print($n1 + $(key ndcg imp1.json) / 2)")
    done
    rm -f imp.model
    mpi $np "$tool" mf train imp_train.txt imp.model $o; rc=$?
    "$tool" mf evaluate imp.model imp_test.txt --negatives 0 --json > imp.json
    hn=$(key hr imp.json); nn=$(key ndcg imp.json)
    echo "implicit $model $loss: HR@10 / NDCG@10 one process $h1 / $n1, -np $np $hn / $nn, most-popular HR@10 $pop"
    check "implicit $model $loss -np $np exits 0" "[ $rc -eq 0 ]"
    check "implicit $model $loss -np $np: HR@10 $hn within $ITOL of one process's $h1" \
        "\"$py\" -c 'import sys; sys.exit(0 if abs($hn - $h1) <= $ITOL else 1)'"
    check "implicit $model $loss -np $np: NDCG@10 $nn within $NTOL of one process's $n1" \
        "\"$py\" -c 'import sys; sys.exit(0 if abs($nn - $n1) <= $NTOL else 1)'"
    check "implicit $model $loss -np $np: HR@10 above twice most-popular's $pop" "below \$(\"$py\" -c 'print(2 * $pop)') $hn"
done
# The negatives' weight: ranking quality barely moves with it (P times one
# process's negatives measured within 0.015 HR@10), so it is checked apart.
# With a learning rate of 1e-7 nothing moves and the first epoch's mean loss
# is log 2 x (1 + negatives) when the ranks' negatives, drawn within their
# item blocks, weigh as one process's (measured within 0.03%; the
# neighbourhood model starts at logits off 0: within 0.4%; P times the
# negatives would give log 2 x (1 + 4 P)).
for case in plain:2 plain:3 neighbourhood:3; do
    model=${case%:*}; np=${case#*:}
    o="--implicit --model $model -k 16 -K 16 -t 1 -a 1e-7 --threads 1 --json --no-search"
    "$tool" mf train imp_train.txt w.model $o > w1.json
    l1=$(key train_loss w1.json)
    [ $model = plain ] && check "implicit: one process's first loss $l1 is log 2 x 5" "close $l1 3.4657359"
    mpi $np "$tool" mf train imp_train.txt w.model $o > wn.json
    ln=$(key train_loss wn.json)
    check "implicit $model -np $np: the first loss $ln (negatives' weight) within $TOL of one process's $l1" "close $ln $l1"
done
# implicit checkpoints over ranks: 3 + 3 resumed epochs are the bytes of 6
# straight ones (--deterministic)
for case in plain:xent:2 neighbourhood:bpr:3; do
    model=${case%%:*}; rest=${case#*:}; loss=${rest%:*}; np=${rest#*:}
    o="--implicit --model $model --loss $loss -k 8 -K 8 --deterministic --threads 1 --quiet --no-search"
    rm -f ck.bin
    mpi $np "$tool" mf train imp_train.txt straight.model $o --epochs 6
    mpi $np "$tool" mf train imp_train.txt half.model $o --epochs 3 --checkpoint ck.bin; rc=$?
    check "implicit $model $loss -np $np --checkpoint exits 0 and writes it" "[ $rc -eq 0 ] && [ -s ck.bin ]"
    mpi $np "$tool" mf train imp_train.txt resumed.model $o --epochs 6 --checkpoint ck.bin --resume; rc=$?
    check "implicit $model $loss -np $np: 3 + 3 resumed epochs are the bytes of 6 straight ones" \
        "[ $rc -eq 0 ] && cmp -s straight.model resumed.model"
done
# the last one's 3-rank checkpoint goes on at 2 ranks (another deal of the blocks)
rm -f moved.model
mpi 2 "$tool" mf train imp_train.txt moved.model $o --epochs 20 --checkpoint ck.bin --resume; rc=$?
"$tool" mf evaluate moved.model imp_test.txt --negatives 0 --json > moved.json
hm=$(key hr moved.json)
check "implicit: a 3-rank checkpoint resumed on 2 ranks exits 0, HR@10 $hm above twice most-popular's $pop" \
    "[ $rc -eq 0 ] && below \$(\"$py\" -c 'print(2 * $pop)') $hm"

# Python: lacuna.rank() and ranks() under mpirun, and MF.fit over the ranks
# (every rank ends with the whole model: the same validation RMSE).
lib=${LACUNA_BUILD_DIR:-$(dirname "$tool")}/liblacuna.so
if [ -n "${LACUNA_SOURCE_DIR:-}" ] && [ -e "$lib" ] && ! grep -q 'LACUNA_SANITIZE:BOOL=ON' "${LACUNA_BUILD_DIR:-.}/CMakeCache.txt" 2>/dev/null; then
    cat > fit.py <<'PY'
import numpy as np, lacuna
t = np.loadtxt("train.txt"); v = np.loadtxt("valid.txt")
m = lacuna.MF(k=32, threads=1, seed=1).fit(t[:, 0].astype(np.int64), t[:, 1].astype(np.int64), t[:, 2],
                                            valid=(v[:, 0].astype(np.int64), v[:, 1].astype(np.int64), v[:, 2]))
p = m.predict(v[:, 0].astype(np.int64), v[:, 1].astype(np.int64))
# a file a rank: mpirun may interleave the ranks' standard outputs
with open("py.%d.txt" % lacuna.rank(), "w") as f:
    print(lacuna.rank(), lacuna.ranks(), "%.6f" % np.sqrt(np.mean((v[:, 2] - p) ** 2)), file=f)
PY
    PYTHONDONTWRITEBYTECODE=1 LACUNA_LIBRARY="$lib" PYTHONPATH="$LACUNA_SOURCE_DIR/python" \
        mpi 2 -x LACUNA_LIBRARY -x PYTHONPATH -x PYTHONDONTWRITEBYTECODE "$py" fit.py; rc=$?
    cat py.*.txt > py.txt 2>/dev/null
    check "Python under -np 2 exits 0" "[ $rc -eq 0 ]"
    check "Python: ranks 0 and 1 of 2" "[ \"\$(cut -d' ' -f1,2 py.txt | sort | tr '\n' ' ')\" = '0 2 1 2 ' ]"
    check "Python: both ranks predict with the same model" "[ \$(cut -d' ' -f3 py.txt | sort -u | wc -l) -eq 1 ]"
    r1=$(key valid_rmse one.plain.json); rpy=$(head -1 py.txt | cut -d' ' -f3)
    check "Python -np 2: held-out RMSE $rpy within $TOL of one process's $r1" "close $rpy $r1"
fi

echo "$passes passed, $fails failed"
[ $fails -eq 0 ]
