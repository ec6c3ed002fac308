#!/usr/bin/env bash
# check_no_overwrite.sh MINIPIPE DECK DIR: an existing dump in a fresh DIR is refused on every rank
# (exit 2, one message naming the key, the file and --force) and left untouched with nothing
# else written next to it; with --force it is replaced by an HDF5 dump.
set -u
bin=$1 deck=$2 dir=$3
rm -rf "$dir" && mkdir -p "$dir" || exit 1
f="$dir/exists.h5"
echo keep > "$f"
bash "$(dirname "$0")/../expect_fail.sh" --np 2 --must "key 'output.dump'" --must "value '$f'" \
  --must "the file exists; refusing to overwrite it without --force" -- "$bin" run --deck "$deck" --dump "$f" || exit 1
[ "$(cat "$f")" = keep ] || { echo "FAIL: the existing file was modified"; exit 1; }
[ "$(ls -A "$dir")" = exists.h5 ] || { echo "FAIL: left behind in $dir: $(ls -A "$dir")"; exit 1; }
mpiexec -n 2 "$bin" run --deck "$deck" --dump "$f" --force --train.steps 1 >/dev/null || { echo "FAIL: --force run failed"; exit 1; }
h5dump -H "$f" >/dev/null 2>&1 || { echo "FAIL: --force did not replace it with an HDF5 dump"; exit 1; }
[ "$(ls -A "$dir")" = exists.h5 ] || { echo "FAIL: left behind in $dir after --force: $(ls -A "$dir")"; exit 1; }
echo PASS
