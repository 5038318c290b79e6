#!/usr/bin/env bash
# What a run does to the files around it (docs/reliability.md): outputs are
# staged and renamed over their targets together at the end, so a failure
# anywhere leaves every file that existed before with the same bytes and the
# same inode; writes go through symbolic links to their targets, and devices,
# FIFOs and '-' are written in place; an output that is one of the run's
# inputs (or another output) is refused with exit 2 before anything is read;
# --cache never replaces a file that is not a basis cache; and no killed run
# leaves a temporary file behind (not even SIGKILL, where O_TMPFILE works).
set -u
tool=$(readlink -f "$1")
fails=0; passes=0
check() { if eval "$2"; then passes=$((passes+1)); else echo "FAIL: $1"; fails=$((fails+1)); fi; }
dir=$(mktemp -d "${LACUNA_TEST_TMPDIR:-/tmp}/cli_outputs.XXXXXX")
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$dir"; }
trap cleanup EXIT
cd "$dir" || exit 1
export LACUNA_CACHE_DIR="$dir/cache"

# keep FILE...: remember each file's bytes and inode; kept FILE...: both unchanged.
keep() { for f in "$@"; do cp -p "$f" "$f.orig"; stat -c %i "$f" > "$f.ino"; done; }
kept() {
  for f in "$@"; do
    cmp -s "$f" "$f.orig" && [ "$(stat -c %i "$f")" = "$(cat "$f.ino")" ] && [ -f "$f" ] || return 1
  done
}
litter() { find "$dir" -name '*.tmp.*' | grep -q .; }
# Devices to write to. As root, nodes of our own (a tool that replaced its
# output by a regular file would otherwise replace the machine's /dev/null).
null=/dev/null full=/dev/full
if [ "$(id -u)" = 0 ] && mknod -m 666 "$dir/null" c 1 3 2>/dev/null && mknod -m 666 "$dir/full" c 1 7 2>/dev/null; then
  null=$dir/null full=$dir/full
fi

printf '1\n2\n3\n4\n-5\n' > S.txt
printf '2\n0\n2\n2\n0\n' > R.txt
printf 'not an npy file, but the user'"'"'s own\n' > P1.npy
mkdir adir

# --- staged outputs: a later failure leaves every earlier file as it was ---
keep P1.npy
"$tool" map --plan --bridge R.txt --source S.txt --source S.txt --out P1.npy --out adir --quiet 2>err.txt; rc=$?
check "map --plan, second --out a folder: exit 1" "[ $rc -eq 1 ] && grep -q 'adir' err.txt"
check "map --plan: the first --out keeps its bytes and inode" "kept P1.npy"
"$tool" map --plan --bridge R.txt --source S.txt --source S.txt --out P1.npy --out "$full" --quiet 2>err.txt; rc=$?
check "map --plan, second --out /dev/full: exit 1" "[ $rc -eq 1 ] && grep -q 'No space' err.txt"
check "map --plan: the first --out is untouched again" "kept P1.npy"
check "/dev/full is still a character device" "[ -c $full ]"
# --accumulate reads every --out first, so the second fails only when written:
# past a file size limit (SIGXFSZ ignored, so the write says EFBIG).
printf '10\n20\n30\n' > T1.txt
awk 'BEGIN { for (r = 0; r < 5; r++) { for (c = 0; c < 100; c++) printf "1 "; print "" } }' > S100.txt
awk 'BEGIN { for (r = 0; r < 3; r++) { for (c = 0; c < 100; c++) printf "0.1 "; print "" } }' > T2.txt
keep T1.txt T2.txt
(trap '' XFSZ; ulimit -f 2; exec "$tool" map --plan --accumulate --bridge R.txt --source S.txt --source S100.txt \
  --out T1.txt --out T2.txt --quiet) 2>err.txt; rc=$?
check "map --plan --accumulate, second --out past the size limit: exit 1" "[ $rc -eq 1 ] && grep -q 'too large' err.txt"
check "map --plan --accumulate: both accumulators are untouched" "kept T1.txt T2.txt"
"$tool" map --plan --bridge R.txt --source S.txt --source S.txt --out ok1.npy --out ok2.npy --quiet; rc=$?
check "map --plan writes both outputs when all succeeds" "[ $rc -eq 0 ] && [ -s ok1.npy ] && cmp -s ok1.npy ok2.npy"
check "no temporary file is left after the runs" "! litter"

# A graph for impute: a ring of 24 vertices with chords.
{ for v in $(seq 0 23); do echo "$v $(((v + 1) % 24))"; echo "$v $(((v * 5 + 7) % 24))"; done; } > g.txt
"$tool" impute gen --graph g.txt --m 4 --n 3 --rank 1 --seed 2 --out X.npy --truth Z.npy --observed ids.txt --quiet
check "impute gen writes its three files" "[ -s X.npy ] && [ -s Z.npy ] && [ -s ids.txt ]"
cp X.npy Y.npy
keep X.npy Z.npy ids.txt Y.npy
"$tool" impute run --graph g.txt --tensor X.npy --out Y.npy --iters 2 --log nodir/log.txt --quiet 2>err.txt; rc=$?
check "impute run with --log in a missing folder: exit 1" "[ $rc -eq 1 ] && grep -q 'nodir/log.txt' err.txt"
check "impute run: the existing --out and the input tensor are untouched" "kept Y.npy X.npy"
"$tool" impute gen --graph g.txt --m 4 --n 3 --rank 1 --seed 5 --out X.npy --truth Z.npy --observed nodir/ids.txt --quiet 2>err.txt; rc=$?
check "impute gen with a failing --observed: exit 1" "[ $rc -eq 1 ]"
check "impute gen: the existing --out and --truth are untouched" "kept X.npy Z.npy"
"$tool" impute gen --graph g.txt --m 4 --n 3 --rank 1 --seed 5 --out X.npy --truth Z.npy --observed "$full" --quiet 2>err.txt; rc=$?
check "impute gen with --observed /dev/full: exit 1, --out and --truth untouched" "[ $rc -eq 1 ] && kept X.npy Z.npy"

"$tool" mf gen --users 60 --items 40 --ratings 900 --seed 4 all.txt 2>/dev/null
echo "the user's old training file" > train.txt
keep train.txt
"$tool" mf split all.txt train.txt nodir/test.txt 2>err.txt; rc=$?
check "mf split with TEST in a missing folder: exit 1, TRAIN untouched" "[ $rc -eq 1 ] && kept train.txt"
check "no temporary file is left after the failures" "! litter"

# --- symbolic links, devices, FIFOs and '-' --------------------------------
"$tool" map --source S.txt --bridge R.txt --out direct.npy --quiet
mkdir sub; echo old > sub/real.npy
ln -s sub/real.npy link.npy
"$tool" map --source S.txt --bridge R.txt --out link.npy --quiet; rc=$?
check "--out through a relative symbolic link: exit 0" "[ $rc -eq 0 ]"
check "the link stays a link to the same target" "[ -L link.npy ] && [ \"\$(readlink link.npy)\" = sub/real.npy ]"
check "the link's target holds the output" "cmp -s sub/real.npy direct.npy"
ln -s "$dir/sub/new.npy" dangling.npy
"$tool" map --source S.txt --bridge R.txt --out dangling.npy --quiet
check "a dangling link's target is created" "[ -L dangling.npy ] && cmp -s sub/new.npy direct.npy"
"$tool" map --source S.txt --bridge R.txt --out "$null" --quiet; rc=$?
check "--out /dev/null: exit 0, still a character device" "[ $rc -eq 0 ] && [ -c $null ]"
mkfifo fifo
timeout 60 cat fifo > from_fifo & pids+=($!)
"$tool" map --source S.txt --bridge R.txt --out fifo --quiet; rc=$?
wait "${pids[-1]}"
check "--out a FIFO: exit 0, the FIFO stays a FIFO" "[ $rc -eq 0 ] && [ -p fifo ]"
check "the reader of the FIFO got the output" "cmp -s from_fifo direct.npy"
"$tool" map --source S.txt --bridge R.txt --out - --quiet > from_stdout; rc=$?
check "--out - writes the output to standard output" "[ $rc -eq 0 ] && cmp -s from_stdout direct.npy && [ ! -e ./- ]"
"$tool" mf train --quiet -t 2 -k 4 all.txt model.bin
n=$("$tool" mf predict model.bin all.txt - | grep -c '^[0-9-]')
check "mf predict OUT '-' prints one prediction per rating (and RMSE)" "[ $n -eq \$(wc -l < all.txt) ]"

if [ "$(id -u)" = 0 ] && command -v unshare >/dev/null &&
   unshare --mount --propagation private sh -c 'umount -l /proc' 2>/dev/null; then
  # without /proc the unnamed file is named by linkat's AT_EMPTY_PATH form
  unshare --mount --propagation private sh -c "umount -l /proc && exec '$tool' map --source S.txt --bridge R.txt --out noproc.npy --quiet"
  check "without /proc (root): the output is written, nothing left" "cmp -s noproc.npy direct.npy && ! litter"
fi

# --- an output that is one of the inputs: exit 2 before anything is read ---
keep S.txt R.txt all.txt model.bin X.npy Z.npy
refused() {   # refused WHAT PATTERN ARGS...: exit 2 within 10 s, message, inputs untouched
  local what=$1 pattern=$2; shift 2
  timeout 10 "$tool" "$@" > /dev/null 2> err.txt; local rc=$?
  check "$what: exit 2" "[ $rc -eq 2 ]"
  check "$what: says so" "grep -q -- '$pattern' err.txt"
  check "$what: the inputs are untouched" "kept S.txt R.txt all.txt model.bin X.npy Z.npy"
}
rm -f fifo; mkfifo never   # no writer ever: reading it would block until the timeout
refused "map --out = --source" "same file as --source" map --source S.txt --bridge never --out S.txt
ln -s S.txt S_link.txt; ln S.txt S_hard.txt
refused "map --out = --source through a symbolic link" "same file as --source" map --source S.txt --bridge never --out S_link.txt
refused "map --out = --source through a hard link" "same file as --source" map --source S.txt --bridge never --out S_hard.txt
refused "map --out = --bridge" "same file as --bridge" map --source never --bridge R.txt --out ./R.txt
refused "map: two --out the same" "are the same file" map --plan --bridge never --source S.txt --source S.txt --out a.npy --out ./a.npy
refused "mf train TRAIN = MODEL" "same file as TRAIN" mf train all.txt all.txt
refused "mf train MODEL = --valid" "same file as --valid" mf train -v all.txt never all.txt
refused "mf split TRAIN = IN" "same file as IN" mf split all.txt all.txt t.txt
refused "mf split TRAIN = TEST" "are the same file" mf split never t.txt t.txt
refused "mf predict OUT = TEST" "same file as TEST" mf predict model.bin all.txt all.txt
refused "mf predict OUT = MODEL" "same file as MODEL" mf predict model.bin never model.bin
refused "impute gen --out = --truth" "are the same file" impute gen --graph never --out Z.npy --truth Z.npy --observed i.txt
refused "impute run --out = --tensor" "same file as --tensor" impute run --graph never --tensor X.npy --out X.npy
refused "impute run --log = --truth" "same file as --truth" impute run --graph never --tensor X.npy --truth Z.npy --out y.npy --log Z.npy
refused "impute run --cache = --tensor" "same file as --tensor" impute run --graph never --tensor X.npy --out y.npy --cache X.npy
check "no output was made by a refused run" "[ ! -e a.npy ] && [ ! -e t.txt ] && [ ! -e y.npy ] && [ ! -e i.txt ]"

# --- --cache never replaces a file that is not a basis cache ----------------
refused "impute run --cache naming a truth tensor" "not a graph Fourier basis cache" impute run --graph g.txt --tensor X.npy --out y.npy --cache Z.npy --quiet
check "the tensor named as --cache is untouched" "kept Z.npy"
refused "impute gen --cache naming a folder" "not a graph Fourier basis cache" impute gen --graph g.txt --out x2.npy --truth z2.npy --observed i2.txt --cache adir --quiet
"$tool" impute run --graph g.txt --tensor X.npy --out y.npy --iters 1 --cache mine.bin --quiet; rc=$?
check "a new --cache file is written" "[ $rc -eq 0 ] && [ -s mine.bin ]"
"$tool" impute run --graph g.txt --tensor X.npy --out y.npy --iters 1 --cache mine.bin --quiet --json | grep -q '"basis_cached":true'
check "and read back" "[ \$? -eq 0 ]"
rm -f y.npy

# --- no temporary file left by a killed run ---------------------------------
# The second --out is a FIFO nobody reads: the run blocks opening it while the
# first output is staged, which is the moment to kill it.
mkfifo stuck
echo "the user's A" > A.npy
keep A.npy
start_blocked() {   # runs map in the background, waits until the first output is staged
  "$@" map --plan --bridge R.txt --source S.txt --source S.txt --out A.npy --out stuck --quiet 2>/dev/null & pid=$!
  pids+=($pid)
  for _ in $(seq 100); do
    if ls -l /proc/$pid/fd 2>/dev/null | grep -q "$dir/.*(deleted)" || ls A.npy.tmp.* >/dev/null 2>&1; then return 0; fi
    sleep 0.05
  done
  return 1
}
start_blocked "$tool"
check "an unnamed temporary is open while the run blocks" "ls -l /proc/$pid/fd | grep -q '(deleted)' && ! litter"
kill -9 $pid; wait $pid 2>/dev/null
check "SIGKILL leaves no temporary file (O_TMPFILE)" "! litter && kept A.npy"
export LACUNA_IO_TMPFILE=0   # the named fallback: OUT.tmp.XXXXXX, removed by the signal handlers
start_blocked "$tool"
check "LACUNA_IO_TMPFILE=0: a named temporary exists while the run blocks" "litter"
kill -TERM $pid; wait $pid; rc=$?
check "SIGTERM: the run dies of it (exit 143)" "[ $rc -eq 143 ]"
check "SIGTERM: the named temporary is removed" "! litter && kept A.npy"
set -m   # a background job of a script ignores SIGINT unless job control is on
start_blocked "$tool"
set +m
check "a named temporary exists again" "litter"
kill -INT $pid; wait $pid; rc=$?
check "SIGINT: the run dies of it (exit 130) and leaves nothing" "[ $rc -eq 130 ] && ! litter && kept A.npy"
"$tool" map --source S.txt --bridge R.txt --out named.npy --quiet
check "LACUNA_IO_TMPFILE=0: a run that succeeds writes its output, leaves nothing else" "cmp -s named.npy direct.npy && ! litter"
unset LACUNA_IO_TMPFILE

echo "$passes passed, $fails failed"
[ $fails -eq 0 ]
