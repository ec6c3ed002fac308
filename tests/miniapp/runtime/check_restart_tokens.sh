#!/usr/bin/env bash
# check_restart_tokens.sh MINIPIPE MAKE_TOKENS DECK OUTDIR: a checkpoint records its training data;
# a restart from a moved copy of the token file continues, one from other tokens is refused (exit 2,
# naming data.path) instead of silently training on other data.
set -u
bin=$1 make=$2 deck=$3 dir=$4
rm -rf "$dir"; mkdir -p "$dir"
fail() { echo "FAIL: $*"; exit 1; }
xc() { bash "$(dirname "$0")/../expect_code.sh" "$@"; }
"$make" "$dir/a.h5" rows 13 8 32 > /dev/null || fail "make_tokens a"
"$make" "$dir/b.h5" rows 14 8 32 > /dev/null || fail "make_tokens b"
tok=(--data.source hdf5 --data.dataset rows)
"$bin" run --deck "$deck" "${tok[@]}" --data.path "$dir/a.h5" --train.steps 2 --checkpoint.path "$dir/ck.h5" \
  > "$dir/a.log" || fail "the checkpointed run exited $?"
mkdir -p "$dir/moved" && cp "$dir/a.h5" "$dir/moved/a.h5"
"$bin" run --deck "$deck" "${tok[@]}" --data.path "$dir/moved/a.h5" --train.steps 3 --restart "$dir/ck.h5" \
  > "$dir/moved.log" || fail "a restart from a moved copy of the same tokens exited $?"
xc 2 "key 'data.path' has value \".*b.h5\" whose data \(hdf5 tokens \[14, 9\].*is not what the checkpoint .*ck.h5 was trained on \(hdf5 tokens \[13, 9\]" -- \
  "$bin" run --deck "$deck" "${tok[@]}" --data.path "$dir/b.h5" --train.steps 3 --restart "$dir/ck.h5" || exit 1
echo PASS
