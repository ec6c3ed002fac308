#!/usr/bin/env bash
# check_symlink_temp.sh MINIPIPE DECK OUTDIR: a symlink planted at "<dump>.tmp" (the old fixed
# temporary name) and at the dump itself is never written through: the victim keeps its bytes.
set -u
bin=$1 deck=$2 dir=$3
rm -rf "$dir"; mkdir -p "$dir"
echo precious > "$dir/victim"
ln -s "$dir/victim" "$dir/d.h5.tmp"
"$bin" run --deck "$deck" --train.steps 1 --dump "$dir/d.h5" >/dev/null 2>&1 || { echo "FAIL: the run failed"; exit 1; }
[ "$(cat "$dir/victim")" = precious ] || { echo "FAIL: the symlink's target was overwritten"; exit 1; }
[ -f "$dir/d.h5" ] && [ ! -L "$dir/d.h5" ] || { echo "FAIL: no regular dump"; exit 1; }
# The dump path itself a symlink to the victim: refused without --force, replaced (the link, not
# the victim) with it.
ln -s "$dir/victim" "$dir/e.h5"
bash "$(dirname "$0")/../expect_code.sh" 2 "exists.*--force" -- "$bin" run --deck "$deck" --train.steps 1 \
  --dump "$dir/e.h5" || exit 1
"$bin" run --deck "$deck" --train.steps 1 --dump "$dir/e.h5" --force >/dev/null 2>&1 || { echo "FAIL: --force"; exit 1; }
[ "$(cat "$dir/victim")" = precious ] || { echo "FAIL: --force wrote through the symlink"; exit 1; }
echo PASS
