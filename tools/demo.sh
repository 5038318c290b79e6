#!/usr/bin/env bash
# make demo: runs each capability's demo (tools/demo/NN-*.sh) on shipped data,
# in order, with the built tool. Outputs go to a temporary folder.
set -euo pipefail
tool=$(realpath "$1")
here=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/lacuna-demo.XXXXXX")
trap 'rm -rf "$work"' EXIT
for part in "$here"/tools/demo/[0-9]*.sh; do
  echo "== $(basename "$part" .sh)"
  LACUNA="$tool" DATA="$here/data" WORK="$work" bash "$part"
  echo
done
