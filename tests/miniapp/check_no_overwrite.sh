#!/usr/bin/env bash
# check_no_overwrite.sh MINIPIPE DECK FILE: an existing dump is refused on every rank (non-zero
# exit, message naming the file and --force) and left untouched; with --force it is replaced.
set -u
bin=$1 deck=$2 f=$3
echo keep > "$f"
bash "$(dirname "$0")/expect_fail.sh" "exists.*--force" -- mpiexec -n 2 "$bin" run --deck "$deck" --dump "$f" \
  || exit 1
[ "$(cat "$f")" = keep ] || { echo "FAIL: the existing file was modified"; exit 1; }
[ -e "$f.tmp" ] && { echo "FAIL: $f.tmp left behind"; exit 1; }
mpiexec -n 2 "$bin" run --deck "$deck" --dump "$f" --force --train.steps 1 >/dev/null || { echo "FAIL: --force run failed"; exit 1; }
h5dump -H "$f" >/dev/null 2>&1 || { echo "FAIL: --force did not replace it with an HDF5 dump"; exit 1; }
echo PASS
