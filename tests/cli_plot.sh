#!/usr/bin/env bash
# --plot on mf train and impute run: every curve of the SVG, read back
# through its own tick labels, lands where --log says (tests/svg_check.py);
# an output naming an input is exit 2, and a failed run leaves the old
# picture.
set -u
tool=$1
root=${LACUNA_SOURCE_DIR:?}
py=/usr/bin/python3
work=$(mktemp -d "${LACUNA_TEST_TMPDIR:-/tmp}/cli_plot.XXXXXX")
trap 'rm -rf "$work"' EXIT
fails=0; passes=0
check() { if eval "$2"; then passes=$((passes+1)); else echo "FAIL: $1"; fails=$((fails+1)); fi; }
cd "$work"

# --- mf train ---------------------------------------------------------------
"$tool" mf gen --users 200 --items 80 --ratings 5000 --seed 4 all.txt 2>/dev/null
"$tool" mf split --fraction 0.2 --seed 2 all.txt train.txt test.txt 2>/dev/null
"$tool" mf train --device cpu --quiet --no-search --threads 2 -k 8 -t 12 -v test.txt --log mf.log --plot mf.svg train.txt m.bin; rc=$?
check "mf train --plot exits 0" "[ $rc -eq 0 ]"
check "mf --log has a header and a line per epoch" "[ \$(wc -l < mf.log) -eq 13 ] && head -1 mf.log | grep -q '^# epoch train_rmse valid_rmse seconds$' && [ \$(grep -v '^#' mf.log | awk 'NF==4' | wc -l) -eq 12 ]"
check "mf curves land where the log says" "$py '$root/tests/svg_check.py' mf.svg mf.log 0:0:1,2:lin 1:3:1,2:lin"
check "mf picture has a legend" "grep -q '>validation</text>' mf.svg"
"$tool" mf train --device cpu --quiet --no-search --threads 2 -k 8 -t 5 --log mf2.log --plot mf2.svg train.txt m2.bin
check "without --valid: the validation column is NaN" "[ \$(grep -ci nan mf2.log) -eq 5 ]"
check "without --valid: only the train curve" "$py '$root/tests/svg_check.py' mf2.svg mf2.log 0:0:1,2:lin && ! grep -q '>validation</text>' mf2.svg"

cp mf.svg keep.svg
"$tool" mf train --device cpu --quiet --plot train.txt train.txt m3.bin 2>err.txt; rc=$?
check "--plot naming the input exits 2" "[ $rc -eq 2 ] && grep -q -- '--plot' err.txt && [ ! -e m3.bin ]"
"$tool" mf train --device cpu --quiet --log same.txt --plot same.txt train.txt m3.bin 2>err.txt; rc=$?
check "--plot and --log naming one file exits 2" "[ $rc -eq 2 ] && [ ! -e same.txt ]"
printf '1 2 4\n1 3 oops\n' > bad.txt
"$tool" mf train --device cpu --quiet --plot mf.svg bad.txt m3.bin 2>/dev/null; rc=$?
check "a failed run leaves the old picture" "[ $rc -eq 2 ] && cmp -s mf.svg keep.svg"

# --- impute run -------------------------------------------------------------
$py -c "
n = 60
for i in range(n): print(i, (i + 1) % n); print(i, (i + 5) % n)" > ring.txt
"$tool" impute gen --graph ring.txt --no-cache --m 6 --n 6 --rank 2 --seed 3 --out x.npy --truth z.npy --observed obs.txt --quiet
"$tool" impute run --graph ring.txt --no-cache --tensor x.npy --truth z.npy --out y.npy --log imp.log --plot imp.svg --quiet; rc=$?
check "impute run --plot exits 0" "[ $rc -eq 0 ]"
check "impute: change (log scale) and rMSE curves land where the log says" \
      "$py '$root/tests/svg_check.py' imp.svg imp.log 0:0:3:log 1:5:3:log 2:0:6,7:auto 3:5:6,7:auto"
"$tool" impute run --graph ring.txt --no-cache --tensor x.npy --out y2.npy --log imp2.log --plot imp2.svg --quiet
check "without --truth: the change only (two charts)" \
      "[ \$(grep -c '<g class=\"chart\">' imp2.svg) -eq 2 ] && $py '$root/tests/svg_check.py' imp2.svg imp2.log 0:0:3:log"
"$tool" impute run --graph ring.txt --no-cache --tensor x.npy --out y3.npy --plot x.npy --quiet 2>err.txt; rc=$?
check "impute --plot naming the tensor exits 2" "[ $rc -eq 2 ] && grep -q 'same file' err.txt && [ ! -e y3.npy ]"

echo "$passes passed, $fails failed"
[ $fails -eq 0 ]
