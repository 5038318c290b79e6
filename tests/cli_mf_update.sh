#!/usr/bin/env bash
# lacuna mf update end to end: new users and items folded into a plain and a
# neighbourhood model (--json keys, the RMSE on the new ratings and on
# --valid falls, recommend knows the new users), OUT_MODEL may be MODEL, and
# bad input exits 2 leaving OUT_MODEL as it was.
set -u
tool=$1
work=$(mktemp -d "${LACUNA_TEST_TMPDIR:-/tmp}/cli_mf_update.XXXXXX")
trap 'rm -rf "$work"' EXIT
fails=0; passes=0
check() { if eval "$2"; then passes=$((passes+1)); else echo "FAIL: $1"; fails=$((fails+1)); fi; }
num() { sed "s/.*\"$1\":\([-0-9.e]*\).*/\1/" <<<"$2"; }
cd "$work"

"$tool" mf gen --users 400 --items 150 --ratings 14000 --seed 4 --clusters 5 all.txt 2>/dev/null
"$tool" mf split --fraction 0.1 --seed 2 all.txt train.txt test.txt 2>/dev/null
# users 1..40 and items 1..10 arrive later
awk '$1 > 40 && $2 > 10' train.txt > base.txt
awk '$1 <= 40 || $2 <= 10' train.txt > new.txt

for kind in plain neighbourhood; do
    "$tool" mf train --device cpu --quiet --threads 2 -k 8 -K 8 -t 15 --model $kind base.txt $kind.model
    out=$("$tool" mf update --json --threads 2 --valid test.txt $kind.model new.txt $kind.upd); rc=$?
    check "$kind: update exits 0" "[ $rc -eq 0 ]"
    check "$kind: --json keys" "grep -q '\"seconds\":.*\"ratings\":$(wc -l < new.txt),\"new_users\":40,\"new_items\":10,\"replaced\":0,\"rmse_before\":.*\"rmse_after\":.*\"valid_rmse_before\":.*\"valid_rmse_after\":.*\"users\":400,\"items\":150' <<<\"\$out\""
    check "$kind: RMSE on the new ratings falls" "awk -v a=$(num rmse_before "$out") -v b=$(num rmse_after "$out") 'BEGIN{exit !(b < a - 0.1)}'"
    check "$kind: RMSE on --valid falls" "awk -v a=$(num valid_rmse_before "$out") -v b=$(num valid_rmse_after "$out") 'BEGIN{exit !(b < a)}'"
    # the JSON's valid RMSE is what predict says of the written model
    pr=$("$tool" mf predict --json $kind.upd test.txt)
    check "$kind: predict agrees" "awk -v a=$(num rmse "$pr") -v b=$(num valid_rmse_after "$out") 'BEGIN{exit !((a-b)^2 < 1e-10)}'"
    rec=$("$tool" mf recommend $kind.upd --users 3 -n 4)
    check "$kind: recommend knows a new user" "[ \$(grep -c '^3	' <<<\"\$rec\") -eq 4 ]"
done

cp plain.model inplace.model
"$tool" mf update --quiet inplace.model new.txt inplace.model; rc=$?
check "OUT_MODEL may be MODEL" "[ $rc -eq 0 ] && ! cmp -s inplace.model plain.model"

cp plain.upd keep.model; cp keep.model keep.orig
printf '1 2 3\nthis is not a rating\n' > bad.txt
err=$("$tool" mf update plain.model bad.txt keep.model 2>&1); rc=$?
check "malformed NEW_RATINGS exits 2" "[ $rc -eq 2 ]"
check "the message names the line" "grep -q 'bad.txt' <<<\"\$err\""
check "OUT_MODEL untouched" "cmp -s keep.model keep.orig"
"$tool" mf update new.txt new.txt keep.model >/dev/null 2>&1; rc=$?
check "a MODEL that is no model exits 2" "[ $rc -eq 2 ] && cmp -s keep.model keep.orig"
"$tool" mf update plain.model new.txt new.txt >/dev/null 2>&1; rc=$?
check "OUT_MODEL over NEW_RATINGS refused" "[ $rc -eq 2 ]"
"$tool" mf update --sweeps -1 plain.model new.txt keep.model >/dev/null 2>&1; rc=$?
check "--sweeps -1 exits 2" "[ $rc -eq 2 ] && cmp -s keep.model keep.orig"
"$tool" mf update plain.model new.txt >/dev/null 2>&1; rc=$?
check "a missing OUT_MODEL exits 2" "[ $rc -eq 2 ]"

echo "$passes passed, $fails failed"
[ $fails -eq 0 ]
