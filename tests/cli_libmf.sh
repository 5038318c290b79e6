#!/usr/bin/env bash
# LIBMF users at the command line: LIBMF's mf-train and mf-predict spellings
# give the model of lacuna's own options (-l2 L,L, -l1 0, -f 0, -r, -s, -p,
# -n, --disk, MODEL left out, TEST MODEL OUT), what lacuna does not do is
# refused with exit 2 and a message naming it (never "cannot open 5");
# gzip inputs and '-' (standard input and output) read and write as files do.
set -u
tool=$(readlink -f "$1")
work=$(mktemp -d "${LACUNA_TEST_TMPDIR:-/tmp}/cli_libmf.XXXXXX")
trap 'rm -rf "$work"' EXIT
fails=0; passes=0
check() { if eval "$2"; then passes=$((passes+1)); else echo "FAIL: $1"; fails=$((fails+1)); fi; }
cd "$work" || exit 1

"$tool" mf gen --users 200 --items 100 --ratings 5000 --seed 3 all.txt 2>/dev/null
"$tool" mf split --seed 4 all.txt train.txt test.txt >/dev/null 2>&1
O="--device cpu --deterministic --quiet -k 8 -t 5"
T="--threads 2"

# --- the same model under LIBMF's spellings ---------------------------------
"$tool" mf train $O --l2 0.05 --alpha 0.08 --threads 2 --valid test.txt train.txt ours.bin
"$tool" mf train $O -l2 0.05,0.05 -l1 0 -f 0 -r 0.08 -s 2 -n 16 --disk -p test.txt train.txt libmf.bin; rc=$?
check "LIBMF's mf-train options are accepted" "[ $rc -eq 0 ]"
check "and give the model of lacuna's own" "cmp -s ours.bin libmf.bin"
"$tool" mf train $O $T --l2 0.05 --alpha 0.08 -v test.txt train.txt v.bin
check "-v FILE is --valid FILE" "cmp -s ours.bin v.bin"
"$tool" mf train $O $T -l2 0.05 -r 0.08 -p test.txt train.txt; rc=$?
check "MODEL left out: TRAIN's name + .model, as LIBMF writes it" "[ $rc -eq 0 ] && cmp -s ours.bin train.txt.model"

refused() {   # refused NAME PATTERN ARGS...: exit 2, PATTERN on stderr, never 'cannot open'
  local name=$1 pattern=$2; shift 2
  err=$("$tool" "$@" 2>&1 >/dev/null); rc=$?
  check "$name: exit 2" "[ $rc -eq 2 ]"
  check "$name: says '$pattern'" "grep -q -- \"\$pattern\" <<<\"\$err\" && ! grep -q 'cannot open' <<<\"\$err\""
}
refused "-v 5 (LIBMF's folds)" "cross-validation folds" mf train $O -v 5 train.txt m.bin
refused "-l2 P,Q unequal" "one lambda for P and Q" mf train $O -l2 0.05,0.01 train.txt m.bin
refused "-l1 non-zero" "no L1 regularisation" mf train $O -l1 0.1 train.txt m.bin
refused "-f 5" "squared error only" mf train $O -f 5 train.txt m.bin
refused "--nmf" "no non-negative factorisation" mf train $O --nmf train.txt m.bin
refused "-p and -v" "give one" mf train $O -p test.txt -v test.txt train.txt m.bin
refused "-e 2" "RMSE (LIBMF's -e 0) and MAE" mf predict -e 2 test.txt ours.bin p.txt
refused "TRAIN - without MODEL" "give MODEL" mf train $O -
check "no model from a refused run" "[ ! -e m.bin ]"
echo 5 > 5   # a file named 5 is a validation file, LIBMF or not
err=$("$tool" mf train $O -v 5 train.txt m5.bin 2>&1); rc=$?
check "-v 5 with a file named 5 reads it" "[ $rc -eq 2 ] && grep -q '5:1' <<<\"\$err\""

"$tool" mf predict ours.bin test.txt p1.txt > r1.txt
"$tool" mf predict test.txt ours.bin p2.txt > r2.txt; rc=$?
check "mf-predict's order TEST MODEL OUT gives the same" "[ $rc -eq 0 ] && cmp -s p1.txt p2.txt && cmp -s r1.txt r2.txt"
"$tool" mf predict -e 1 test.txt ours.bin p3.txt >/dev/null; rc=$?
check "-e 1 (MAE) is accepted" "[ $rc -eq 0 ] && cmp -s p1.txt p3.txt"
check "predict prints RMSE = as mf-predict does" "grep -q '^RMSE = 0\.[0-9]*' r1.txt"

# --- gzip and '-' -----------------------------------------------------------
gzip -c train.txt > train.txt.gz
gzip -c test.txt > test.gz
"$tool" mf train $O $T --l2 0.05 --alpha 0.08 --valid test.gz train.txt.gz gz.bin
check "gzip TRAIN and --valid train the same model" "cmp -s ours.bin gz.bin"
"$tool" mf train $O $T --l2 0.05 --alpha 0.08 --valid test.txt - stdin.bin < train.txt.gz
check "TRAIN - reads standard input (gzip or not)" "cmp -s ours.bin stdin.bin"
"$tool" mf train $O $T --l2 0.05 --alpha 0.08 --valid - train.txt pipe.bin < test.txt
check "--valid - reads standard input" "cmp -s ours.bin pipe.bin"
cat test.txt | "$tool" mf predict ours.bin - - > p4.txt
check "predict MODEL - - : TEST from stdin, OUT to stdout" "cmp -s p1.txt p4.txt"
"$tool" mf predict ours.bin <(gzip -c test.txt) p5.txt >/dev/null
check "a pipe (process substitution) of gzip data reads as a file" "cmp -s p1.txt p5.txt"
gzip -c ours.bin > ours.bin.gz
"$tool" mf predict ours.bin.gz test.txt p6.txt >/dev/null
check "a gzip MODEL loads" "cmp -s p1.txt p6.txt"
head -c 300 train.txt.gz > cut.gz
refused "truncated gzip" "damaged gzip data" mf train $O cut.gz m.bin
refused "two inputs from stdin" "only one input can be standard input" mf train $O --valid - - m.bin

echo "$passes passed, $fails failed"
[ $fails -eq 0 ]
