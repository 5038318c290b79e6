#!/usr/bin/env bash
# The tool's entry points: help, version, info, unknown commands, exit codes.
set -u
tool=$1
fails=0; passes=0
check() { if eval "$2"; then passes=$((passes+1)); else echo "FAIL: $1"; fails=$((fails+1)); fi; }

out=$("$tool" --help); rc=$?
check "--help exits 0" "[ $rc -eq 0 ]"
for c in info map impute mf; do check "--help lists $c" "grep -q '^  $c ' <<<\"\$out\""; done
"$tool" >/dev/null 2>&1; rc=$?
check "no command exits 2" "[ $rc -eq 2 ]"
err=$("$tool" frobnicate 2>&1 >/dev/null); rc=$?
check "unknown command exits 2" "[ $rc -eq 2 ]"
check "unknown command is named" "grep -q frobnicate <<<\"\$err\""
out=$("$tool" info); rc=$?
check "info exits 0" "[ $rc -eq 0 ]"
check "info prints the version" "grep -q '^lacuna [0-9]*\.[0-9]*\.[0-9]*' <<<\"\$out\""
check "info prints the cuda line" "grep -q '^cuda: ' <<<\"\$out\""
check "info prints the device count" "grep -q '^cuda devices: [0-9]' <<<\"\$out\""
check "info prints the mpi line" "grep -q '^mpi: ' <<<\"\$out\""
json=$("$tool" info --json); rc=$?
check "info --json exits 0" "[ $rc -eq 0 ]"
check "info --json says whether MPI is built in" "grep -Eq '\"mpi\":(true|false)' <<<\"\$json\""
check "info --json agrees with the mpi line" \
    "[ \"\$(grep -q '^mpi: yes' <<<\"\$out\" && echo true || echo false)\" = \"\$(grep -o '\"mpi\":[a-z]*' <<<\"\$json\" | cut -d: -f2)\" ]"
check "info --json has one rank outside mpirun" "grep -q '\"ranks\":1' <<<\"\$json\""
"$tool" info --bogus >/dev/null 2>&1; rc=$?
check "info with a bad option exits 2" "[ $rc -eq 2 ]"
v=$("$tool" --version)
check "--version matches info" "grep -qF \"\$v\" <<<\"\$out\""
echo "$passes passed, $fails failed"
[ $fails -eq 0 ]
