#!/usr/bin/env bash
# mf train --checkpoint / --resume: a training broken off and resumed gives
# the model of one without a break (bit for bit, deterministic CPU), with and
# without validation and early stopping; a run killed by SIGKILL while it
# writes a checkpoint leaves the previous one whole; a checkpoint of other
# data or options is refused with exit 2, and a file that is not a checkpoint
# is never replaced.
set -u
tool=$(readlink -f "$1")
work=$(mktemp -d "${LACUNA_TEST_TMPDIR:-/tmp}/cli_checkpoint.XXXXXX")
pid=
trap '[ -n "$pid" ] && kill -9 $pid 2>/dev/null; rm -rf "$work"' EXIT
fails=0; passes=0
check() { if eval "$2"; then passes=$((passes+1)); else echo "FAIL: $1"; fails=$((fails+1)); fi; }
cd "$work" || exit 1

"$tool" mf gen --users 300 --items 200 --ratings 8000 --seed 3 all.txt 2>/dev/null
"$tool" mf split --seed 4 all.txt train.txt valid.txt >/dev/null 2>&1
O="--device cpu --deterministic --threads 2 --quiet --no-search"   # the search is off with --checkpoint: the straight runs too
K="-k 8"

# --- 10 epochs straight = 5, then resumed to 10 -----------------------------
"$tool" mf train $O $K --epochs 10 train.txt straight.bin
"$tool" mf train $O $K --epochs 5 --checkpoint c.ck train.txt five.bin; rc=$?
check "a run with --checkpoint exits 0 and writes it" "[ $rc -eq 0 ] && [ -s c.ck ]"
check "the checkpoint is not left as a temporary" "! ls *.tmp.* >/dev/null 2>&1"
out=$("$tool" mf train $O $K --epochs 10 --checkpoint c.ck --resume --json train.txt resumed.bin); rc=$?
check "--resume exits 0" "[ $rc -eq 0 ]"
check "5 + 5 resumed = 10 straight, bit for bit" "cmp -s straight.bin resumed.bin"
check "the resumed run reports 10 epochs" "grep -q '\"epochs\":10,' <<<\"\$out\""
check "and differs from the 5-epoch model" "! cmp -s five.bin resumed.bin"
"$tool" mf train $O $K --epochs 10 --checkpoint c.ck --resume train.txt again.bin
check "a checkpoint at the last epoch resumes to the same model" "cmp -s straight.bin again.bin"
"$tool" mf train $O $K --epochs 3 --checkpoint e.ck --checkpoint-every 2 train.txt x.bin
"$tool" mf train $O $K --epochs 10 --checkpoint e.ck --resume train.txt every.bin
check "--checkpoint-every 2 of 3 epochs: the last one is written too" "cmp -s straight.bin every.bin"

# --- with validation: early stopping and the kept epoch carry over ----------
V="$O -k 32 --l2 0 --alpha 0.2 --beta 0.05 -v valid.txt --patience 3"
sv=$("$tool" mf train $V --epochs 40 --json train.txt vstraight.bin)
stopped=$(sed 's/.*"epochs":\([0-9]*\),.*/\1/' <<<"$sv"); best=$(sed 's/.*"best_epoch":\([0-9]*\),.*/\1/' <<<"$sv")
check "the validation run stops early ($stopped of 40) and keeps an earlier epoch ($best)" \
  "[ \"$stopped\" -ge 5 ] && [ \"$stopped\" -lt 40 ] && [ \"$best\" -lt \"$stopped\" ]"
for e in 2 $((stopped - 2)) $((stopped - 1)) $stopped; do
  rm -f v.ck
  "$tool" mf train $V --epochs $e --checkpoint v.ck train.txt x.bin
  rv=$("$tool" mf train $V --epochs 40 --checkpoint v.ck --resume --json train.txt vresumed.bin)
  check "validation: $e epochs + resumed = straight (model and report)" \
    "cmp -s vstraight.bin vresumed.bin && [ \"\${rv%%\"seconds\"*}\" = \"\${sv%%\"seconds\"*}\" ]"
done

# --- the neighbourhood model: W, C and the neighbour lists carry over -------
N="$O -k 8 --model neighbourhood"
"$tool" mf train $N -K 10 --epochs 8 train.txt nstraight.bin
"$tool" mf train $N -K 10 --epochs 4 --checkpoint n.ck train.txt x.bin
"$tool" mf train $N -K 10 --epochs 8 --checkpoint n.ck --resume train.txt nresumed.bin
check "neighbourhood model: 4 + 4 resumed = 8 straight, bit for bit" "cmp -s nstraight.bin nresumed.bin"

# --- a checkpoint that does not fit this run: exit 2, named -----------------
refused() {   # refused NAME PATTERN ARGS...: exit 2 with PATTERN on stderr
  local name=$1 pattern=$2; shift 2
  err=$("$tool" "$@" 2>&1 >/dev/null); rc=$?
  check "$name: exit 2" "[ $rc -eq 2 ]"
  check "$name: says '$pattern'" "grep -q -- \"\$pattern\" <<<\"\$err\" && ! grep -q 'cannot open' <<<\"\$err\""
}
cp -p c.ck c.keep
refused "another training file" "written for other training ratings" mf train $O $K --epochs 10 --checkpoint c.ck --resume valid.txt m.bin
awk '{ if (NR == 7) $3 = ($3 == 1 ? 2 : 1); print }' train.txt > changed.txt
refused "one rating changed" "written for other training ratings" mf train $O $K --epochs 10 --checkpoint c.ck --resume changed.txt m.bin
sed 's/^1 /one /' train.txt > renamed.txt
refused "one user renamed" "written for other training ratings" mf train $O $K --epochs 10 --checkpoint c.ck --resume renamed.txt m.bin
refused "another k" "written with k 8, this run has 9" mf train $O -k 9 --epochs 10 --checkpoint c.ck --resume train.txt m.bin
refused "another k, larger" "written with k 8, this run has 64" mf train $O -k 64 --epochs 10 --checkpoint c.ck --resume train.txt m.bin
refused "the plain model's checkpoint, the neighbourhood model" "holds the plain model, this run trains the neighbourhood one" mf train $O $K --model neighbourhood --epochs 10 --checkpoint c.ck --resume train.txt m.bin
refused "another K" "written with K (neighbours) 10, this run has 12" mf train $N -K 12 --epochs 8 --checkpoint n.ck --resume train.txt m.bin
refused "another seed" "written with seed 1, this run has 4" mf train $O $K --seed 4 --epochs 10 --checkpoint c.ck --resume train.txt m.bin
refused "another lambda" "written with lambda 0.03" mf train $O $K --l2 0.5 --epochs 10 --checkpoint c.ck --resume train.txt m.bin
refused "validation added" "written without validation ratings" mf train $O $K -v valid.txt --epochs 10 --checkpoint c.ck --resume train.txt m.bin
refused "no checkpoint there" "no checkpoint none.ck to resume from" mf train $O $K --epochs 10 --checkpoint none.ck --resume train.txt m.bin
refused "--resume without --checkpoint" "needs --checkpoint" mf train $O $K --epochs 10 --resume train.txt m.bin
head -c 1000 c.ck > cut.ck
refused "a truncated checkpoint" "truncated or corrupted" mf train $O $K --epochs 10 --checkpoint cut.ck --resume train.txt m.bin
cp c.ck flip.ck; printf 'X' | dd of=flip.ck bs=1 seek=5000 conv=notrunc 2>/dev/null
refused "a damaged checkpoint" "checksum mismatch" mf train $O $K --epochs 10 --checkpoint flip.ck --resume train.txt m.bin
check "no model from a refused run; the checkpoint untouched" "[ ! -e m.bin ] && cmp -s c.ck c.keep"
cp -p valid.txt valid.keep
refused "--checkpoint naming a ratings file" "not an mf checkpoint: not replacing it" mf train $O $K --epochs 2 --checkpoint valid.txt train.txt m.bin
refused "--checkpoint = TRAIN" "same file as TRAIN" mf train $O $K --epochs 2 --checkpoint train.txt train.txt m.bin
refused "--checkpoint = MODEL" "are the same file" mf train $O $K --epochs 2 --checkpoint m.bin train.txt m.bin
check "the file named as --checkpoint is untouched" "cmp -s valid.txt valid.keep"

# --- SIGKILL while a checkpoint is written: the previous one stays whole ----
# Large factors (k = 1024) make writing a checkpoint most of each epoch; the
# run is killed while its unnamed temporary is open.
"$tool" mf gen --users 4000 --items 2000 --ratings 20000 --seed 2 big.txt 2>/dev/null
B="--device cpu --deterministic --threads 2 -k 1024 --quiet --no-search"
"$tool" mf train $B --epochs 12 big.txt bstraight.bin
killed_in_write() {   # killed_in_write ENV...: runs, kills -9 while a checkpoint is being written
  env "$@" "$tool" mf train $B --epochs 12 --checkpoint k.ck big.txt k.bin 2>/dev/null & pid=$!
  local seen=0
  for _ in $(seq 2000); do
    if [ -s k.ck ] && { ls -l /proc/$pid/fd 2>/dev/null | grep -q "$work/.*(deleted)" || ls k.ck.tmp.* >/dev/null 2>&1; }; then
      seen=1; break
    fi
    sleep 0.002
  done
  kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null; pid=
  [ $seen -eq 1 ]
}
rm -f k.ck
check "SIGKILL caught a run writing its second (or later) checkpoint" "killed_in_write LACUNA_IO_TMPFILE=1"
check "no temporary left (O_TMPFILE)" "! ls k.ck.tmp.* >/dev/null 2>&1"
"$tool" mf train $B --epochs 12 --checkpoint k.ck --resume big.txt kres.bin; rc=$?
check "the previous checkpoint is whole: resumed to the straight model" "[ $rc -eq 0 ] && cmp -s bstraight.bin kres.bin"
rm -f k.ck
check "the same with named temporaries (LACUNA_IO_TMPFILE=0)" "killed_in_write LACUNA_IO_TMPFILE=0"
"$tool" mf train $B --epochs 12 --checkpoint k.ck --resume big.txt kres2.bin; rc=$?
check "named temporaries: the previous checkpoint is whole too" "[ $rc -eq 0 ] && cmp -s bstraight.bin kres2.bin"

echo "$passes passed, $fails failed"
[ $fails -eq 0 ]
