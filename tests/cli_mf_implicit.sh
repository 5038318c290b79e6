#!/usr/bin/env bash
# lacuna mf train --implicit end to end: both losses and both models train,
# --json has the implicit keys, recommend works on the model; the held-out
# search of l2 and the negatives' correction by default; the refusals
# (--valid, --loss or --negative-share without --implicit, a weight that is not > 0) exit 2
# and write no model; interaction pairs ("user item" lines) for --implicit, evaluate and split --pairs.
set -u
tool=$1
work=$(mktemp -d "${LACUNA_TEST_TMPDIR:-/tmp}/cli_mf_implicit.XXXXXX")
trap 'rm -rf "$work"' EXIT
fails=0; passes=0
check() { if eval "$2"; then passes=$((passes+1)); else echo "FAIL: $1"; fails=$((fails+1)); fi; }
cd "$work"

"$tool" mf gen --users 300 --items 120 --ratings 9000 --seed 3 all.txt 2>/dev/null
awk '$3 >= 4' all.txt > seen.txt
for model in plain neighbourhood; do
    for loss in xent bpr; do
        out=$("$tool" mf train --implicit --loss $loss --model $model -K 8 -k 8 -t 5 --threads 2 --json seen.txt $model-$loss.model); rc=$?
        check "$model $loss exits 0" "[ $rc -eq 0 ] && [ -s $model-$loss.model ]"
        check "$model $loss --json has the loss" "grep -q '\"loss\":\"$loss\".*\"train_loss\":[0-9]' <<<\"\$out\""
        rec=$("$tool" mf recommend $model-$loss.model --users 1 -n 3)
        check "$model $loss recommends" "[ \$(grep -c '^1	' <<<\"\$rec\") -eq 3 ]"
    done
done
"$tool" mf train --implicit --weighted -k 8 -t 3 --quiet all.txt weighted.model; rc=$?
check "--weighted takes the ratings as weights" "[ $rc -eq 0 ]"
"$tool" mf train --implicit --valid seen.txt -t 2 seen.txt no1.model >/dev/null 2>&1; rc=$?
check "--implicit --valid exits 2" "[ $rc -eq 2 ] && [ ! -e no1.model ]"
"$tool" mf train --loss bpr -t 2 seen.txt no2.model >/dev/null 2>&1; rc=$?
check "--loss without --implicit exits 2" "[ $rc -eq 2 ] && [ ! -e no2.model ]"
"$tool" mf train --negative-share 4 -t 2 seen.txt no5.model >/dev/null 2>&1; rc=$?
check "--negative-share without --implicit exits 2" "[ $rc -eq 2 ] && [ ! -e no5.model ]"
"$tool" mf train --implicit --negative-share 65 -t 2 seen.txt no6.model >/dev/null 2>&1; rc=$?
check "--negative-share 65 exits 2" "[ $rc -eq 2 ] && [ ! -e no6.model ]"
out=$("$tool" mf train --implicit --negatives 4 --negative-share 4 -k 4 -t 2 --json seen.txt shared.model 2>/dev/null); rc=$?
check "--negative-share trains, --json says it" "[ $rc -eq 0 ] && grep -q '\"negative_share\":4' <<<\"\$out\""
# the search (l2 and the negatives' correction on held-out interactions) is the default; --no-search keeps C = 1
out=$("$tool" mf train --implicit -k 4 -t 3 --json seen.txt searched.model 2>/dev/null); rc=$?
check "--implicit searches l2 and the correction by default, --json says what it chose" \
    "[ $rc -eq 0 ] && grep -q '\"searched\":\[\"l2\",\"negative_correction\"\]' <<<\"\$out\" && grep -Eq '\"negative_correction\":[01],' <<<\"\$out\" && grep -q '\"holdout_ndcg\":0\.' <<<\"\$out\""
out=$("$tool" mf train --implicit -k 4 -t 3 --json --no-search seen.txt fixed.model 2>/dev/null); rc=$?
check "--no-search trains with the correction 1 and searches nothing" \
    "[ $rc -eq 0 ] && grep -q '\"negative_correction\":1,' <<<\"\$out\" && ! grep -q '\"search\"' <<<\"\$out\""
out=$("$tool" mf train --implicit -k 4 -t 3 --json --negative-correction 0.5 seen.txt half.model 2>/dev/null); rc=$?
check "--negative-correction fixes it, the search takes l2 only" \
    "[ $rc -eq 0 ] && grep -q '\"negative_correction\":0.5,' <<<\"\$out\" && grep -q '\"searched\":\[\"l2\"\]' <<<\"\$out\""
"$tool" mf train --negative-correction 0.5 -t 2 seen.txt no7.model >/dev/null 2>&1; rc=$?
check "--negative-correction without --implicit exits 2" "[ $rc -eq 2 ] && [ ! -e no7.model ]"
"$tool" mf train --implicit --negative-correction 1.5 -t 2 seen.txt no8.model >/dev/null 2>&1; rc=$?
check "--negative-correction 1.5 exits 2" "[ $rc -eq 2 ] && [ ! -e no8.model ]"
printf '1 1 1\n1 2 0\n2 1 3\n' > zero.txt
"$tool" mf train --implicit --weighted -k 2 -t 2 zero.txt no4.model >/dev/null 2>&1; rc=$?
check "a weight of 0 exits 2" "[ $rc -eq 2 ] && [ ! -e no4.model ]"
"$tool" mf update plain-xent.model seen.txt no5.model >/dev/null 2>&1; rc=$?
check "update of an implicit model exits 2" "[ $rc -eq 2 ] && [ ! -e no5.model ]"

# interaction pairs: 'user item' lines train --implicit, evaluate and split --pairs as a rating of 1
awk '{print $1, $2}' seen.txt > pairs.txt
awk '{print $1, $2, 1}' seen.txt > ones.txt
"$tool" mf train --implicit --deterministic --no-search -k 4 -t 3 --quiet pairs.txt pairs.model; rc=$?
"$tool" mf train --implicit --deterministic --no-search -k 4 -t 3 --quiet ones.txt ones.model
check "pairs train --implicit as ratings of 1 do (the same model bytes)" "[ $rc -eq 0 ] && cmp -s pairs.model ones.model"
"$tool" mf train --no-search -t 2 pairs.txt no9.model >/dev/null 2>err.txt; rc=$?
check "explicit training refuses pairs and says where they are read" \
    "[ $rc -ne 0 ] && [ ! -e no9.model ] && grep -q 'split --pairs' err.txt"
"$tool" mf split pairs.txt x.txt y.txt >/dev/null 2>&1; rc=$?
check "split without --pairs refuses pairs" "[ $rc -ne 0 ] && [ ! -e x.txt ] && [ ! -e y.txt ]"
"$tool" mf split --pairs --leave-last pairs.txt ptrain.txt ptest.txt 2>/dev/null; rc=$?
check "split --pairs writes a rating of 1" \
    "[ $rc -eq 0 ] && [ -s ptest.txt ] && awk '\$3 != 1 {bad = 1} END {exit bad}' ptrain.txt ptest.txt"
awk '{print $1, $2}' ptest.txt > ptest_pairs.txt
"$tool" mf train --implicit --deterministic --no-search -k 4 -t 3 --quiet ptrain.txt held.model
a=$("$tool" mf evaluate --negatives 0 --json held.model ptest.txt); b=$("$tool" mf evaluate --negatives 0 --json held.model ptest_pairs.txt)
check "evaluate reads a pairs TEST as its rated lines" "grep -q '\"users\":[1-9]' <<<\"\$a\" && [ \"\$a\" = \"\$b\" ]"

echo "$passes passed, $fails failed"
[ $fails -eq 0 ]
