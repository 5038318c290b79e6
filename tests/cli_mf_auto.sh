#!/usr/bin/env bash
# lacuna mf out of the box: train without hyper-parameters searches those not
# given (and says so, --json "search"), explicit ones stay as given;
# --log FILE streams a header and a line per epoch.
set -u
tool=$1
work=$(mktemp -d "${LACUNA_TEST_TMPDIR:-/tmp}/cli_mf_auto.XXXXXX")
trap 'rm -rf "$work"' EXIT
fails=0; passes=0
check() { if eval "$2"; then passes=$((passes+1)); else echo "FAIL: $1"; fails=$((fails+1)); fi; }
cd "$work"

"$tool" mf gen --users 300 --items 150 --ratings 9000 --noise 1.0 --stars whole --seed 4 all.txt 2>/dev/null
"$tool" mf split --fraction 0.2 --seed 5 all.txt train.txt test.txt 2>/dev/null
D="--device cpu --deterministic --threads 1"

# --- the search ---------------------------------------------------------------
out=$("$tool" mf train $D train.txt auto.bin 2>/dev/null); rc=$?
check "train without hyper-parameters exits 0" "[ $rc -eq 0 ]"
check "it says what it chose and why" "grep -q '^chose k [0-9]*, l2 [0-9.e-]*, alpha [0-9.e-]*, [0-9]* epochs: held-out RMSE [0-9.]* against [0-9.]* with the defaults' <<<\"\$out\""
j=$("$tool" mf train $D --json train.txt auto2.bin 2>/dev/null)
check "--json has the search" "grep -q '\"search\":{\"searched\":\\[\"k\",\"l2\",\"alpha\"\\],\"k\":[0-9]*,\"l2\":[0-9.e-]*,\"alpha\":[0-9.e-]*,\"epochs\":[0-9]*,\"holdout\":[0-9]*,\"holdout_rmse\":[0-9.]*,\"default_rmse\":[0-9.]*,\"trials\":[0-9]*,\"seconds\":[0-9.e-]*}' <<<\"\$j\""
check "deterministic: the same model twice" "cmp -s auto.bin auto2.bin"
k=$(sed 's/.*"search":{[^}]*"k":\([0-9]*\).*/\1/' <<<"$j")
check "the model has the chosen k" "grep -q '\"k\":$k,' <<<\"\$j\""
hr=$(sed 's/.*"holdout_rmse":\([0-9.]*\).*/\1/' <<<"$j"); dr=$(sed 's/.*"default_rmse":\([0-9.]*\).*/\1/' <<<"$j")
check "the choice beats the defaults on the held-out ratings" "awk -v a=$hr -v b=$dr 'BEGIN{exit !(a < b)}'"
"$tool" mf train $D --quiet --no-search train.txt def.bin
a=$("$tool" mf predict --json auto.bin test.txt | sed 's/.*"rmse":\([0-9.]*\).*/\1/')
b=$("$tool" mf predict --json def.bin test.txt | sed 's/.*"rmse":\([0-9.]*\).*/\1/')
check "and on the test set (noisy data: the defaults overfit; $a < $b)" "awk -v a=$a -v b=$b 'BEGIN{exit !(a < b)}'"
j=$("$tool" mf train $D --json -k 12 --l2 0.05 train.txt m.bin 2>/dev/null)
check "-k and --l2 given: only alpha searched" "grep -q '\"searched\":\\[\"alpha\"\\],\"k\":12,\"l2\":0.05,' <<<\"\$j\""
j=$("$tool" mf train $D --json -k 12 -l2 0.05 -r 0.1 train.txt m.bin 2>/dev/null)
check "all given (LIBMF's spellings too): no search" "! grep -q '\"search\"' <<<\"\$j\""
j=$("$tool" mf train $D --json --no-search train.txt m.bin 2>/dev/null)
check "--no-search: no search" "! grep -q '\"search\"' <<<\"\$j\" && grep -q '\"k\":32,' <<<\"\$j\""
j=$("$tool" mf train $D --json --checkpoint ck.bin train.txt m.bin 2>/dev/null)
check "--checkpoint: no search" "! grep -q '\"search\"' <<<\"\$j\""
head -50 train.txt > tiny.txt
out=$("$tool" mf train $D tiny.txt m.bin 2>/dev/null); rc=$?
check "too few ratings: the defaults, said so" "[ $rc -eq 0 ] && grep -q 'too few ratings' <<<\"\$out\""

# --- scales other than 1-5 ----------------------------------------------------
awk '{print $1, $2, ($3 - 1) * 25}' train.txt > train100.txt
awk '{print $1, $2, ($3 - 1) * 25}' test.txt > test100.txt
"$tool" mf train $D --quiet --no-search train100.txt m100.bin 2>err.txt; rc=$?
check "0-100 trains with the defaults (no divergence)" "[ $rc -eq 0 ] && ! grep -q diverged err.txt"
c=$("$tool" mf predict --json m100.bin test100.txt | sed 's/.*"rmse":\([0-9.]*\).*/\1/')
check "0-100: RMSE/25 near 1-5's ($c / 25 vs $b)" "awk -v c=$c -v b=$b 'BEGIN{exit !(c / 25 < b * 1.1)}'"

# --- ranking metrics and the leave-one-out split --------------------------------
printf '1::10::5::300\n1::11::4::100\n1::12::3::200\n2::10::2::50\n3::11::4::7\n3::12::1::7\n3::13::2::6\n' > ts.dat
"$tool" mf split --leave-last ts.dat llo_train.txt llo_test.txt 2>/dev/null; rc=$?
check "split --leave-last exits 0" "[ $rc -eq 0 ]"
check "each user's latest rating to TEST (ties: the later line)" "[ \"\$(cat llo_test.txt)\" = \"\$(printf '1 10 5\n3 12 1')\" ]"
check "a user with one rating keeps it" "grep -q '^2 10 2' llo_train.txt"
"$tool" mf split --leave-last --fraction 0.2 ts.dat a.txt b.txt 2>err.txt; rc=$?
check "--leave-last with --fraction: exit 2" "[ $rc -eq 2 ] && grep -q 'leave-last' err.txt"
"$tool" mf split --leave-last all.txt l_train.txt l_test.txt 2>/dev/null
"$tool" mf train $D --quiet --no-search -k 8 l_train.txt l.bin
j=$("$tool" mf evaluate --json l.bin l_test.txt); rc=$?
check "evaluate --json: exit 0, the keys" "[ $rc -eq 0 ] && grep -q '^{\"hr\":[0-9.e-]*,\"ndcg\":[0-9.e-]*,\"precision\":[0-9.e-]*,\"recall\":[0-9.e-]*,\"map\":[0-9.e-]*,\"users\":[0-9]*,\"n\":10,\"negatives\":99,' <<<\"\$j\""
u=$(sed 's/.*"users":\([0-9]*\).*/\1/' <<<"$j")
check "one test item a user: users = TEST's lines ($u)" "[ $u -eq \$(wc -l < l_test.txt) ]"
j0=$("$tool" mf evaluate --json --negatives 0 -n 5 l.bin l_test.txt)
check "--negatives 0 -n 5" "grep -q '\"n\":5,\"negatives\":0,' <<<\"\$j0\""
out=$("$tool" mf evaluate l.bin l_test.txt)
check "the text line names the figures" "grep -q '^HR@10 [0-9.]*  NDCG@10 [0-9.]*  precision@10 [0-9.]*  recall@10 [0-9.]*  MAP@10 [0-9.]*  over $u users' <<<\"\$out\""
"$tool" mf evaluate -n 0 l.bin l_test.txt 2>/dev/null; rc=$?
check "-n 0: exit 2" "[ $rc -eq 2 ]"
"$tool" mf evaluate l.bin missing.txt 2>/dev/null; rc=$?
check "a missing TEST: exit 1 (I/O), as predict" "[ $rc -eq 1 ]"

# --- recommend: unknown users, spaces in --users, progress ----------------------
"$tool" mf train $D --quiet --no-search -k 8 train.txt r.bin
out=$("$tool" mf recommend r.bin --users ' 1 , nosuch,7 ' -n 4 2>err.txt); rc=$?
check "recommend with an unknown user: exit 0, the others as usual" "[ $rc -eq 0 ] && [ \$(grep -c '^1	[^	]*	[0-9.-]*$' <<<\"\$out\") -eq 4 ] && [ \$(grep -c '^7	' <<<\"\$out\") -eq 4 ]"
# the 4 items with most training ratings, ties to the first seen (the model's order)
want=$(awk '{c[$2]++; if (!($2 in o)) o[$2] = n++} END {for (i in c) print c[i], o[i], i}' train.txt | sort -k1,1nr -k2,2n | head -4 | awk '{print $3}')
got=$(grep '^nosuch	' <<<"$out" | awk -F'\t' '$3 == "popular" {print $2}')
check "the unknown user gets the most popular items, marked" "[ -n \"\$got\" ] && [ \"\$got\" = \"\$want\" ]"
check "and it is said on stderr" "grep -q '1 user not in the model' err.txt"
j=$("$tool" mf recommend r.bin --users nosuch -n 2 --json 2>/dev/null)
check "--json: popular true, ratings counts" "grep -q '^{\"user\":\"nosuch\",\"popular\":true,\"items\":\[{\"item\":\"[^\"]*\",\"ratings\":[0-9]*},' <<<\"\$j\""
"$tool" mf recommend r.bin --users '1,,7' 2>err.txt >/dev/null; rc=$?
check "an empty id in --users: exit 2" "[ $rc -eq 2 ] && grep -q 'empty id' err.txt"
"$tool" mf recommend r.bin --all -n 1 --progress >/dev/null 2>err.txt; rc=$?
check "recommend --all --progress: exit 0" "[ $rc -eq 0 ]"

# --- --log and --progress without a terminal ---------------------------------------
"$tool" mf train $D --no-search -k 8 -t 6 --log run.log --progress train.txt p.bin >/dev/null 2>err.txt
check "--log: a header, then a line per epoch" "head -1 run.log | grep -q '^# epoch train_rmse valid_rmse seconds$' && [ \$(grep -vc '^#' run.log) -eq 6 ] && [ \$(grep -v '^#' run.log | awk 'NF == 4 && \$1 == NR' | wc -l) -eq 6 ]"
check "--progress without a terminal: a line per epoch, no escapes" "[ \$(grep -c '^epoch [0-9]*/6  train RMSE' err.txt) -eq 6 ] && ! grep -q \$'\\r' err.txt"
"$tool" mf train $D --no-search -k 8 -t 6 train.txt p.bin >/dev/null 2>err.txt
check "without --progress and no terminal: quiet stderr" "[ ! -s err.txt ]"
"$tool" mf train $D -k 8 -t 6 --log run2.log train.txt p.bin >/dev/null 2>&1
check "--log after a search: the choice as a comment" "grep -q '^# chose k 8, l2 ' run2.log"

echo "$passes passed, $fails failed"
[ $fails -eq 0 ]
