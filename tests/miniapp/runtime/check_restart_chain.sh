#!/usr/bin/env bash
# check_restart_chain.sh MINIPIPE DECK OUTDIR: a chained restart gets the uninterrupted run's
# verdict (its loss check saw only the restarted segment, whose loss rose on the tiny
# deck, and failed with exit 3), and a restart compares effective values, not spellings (here:
# model.block_size 32 = 0 on a 32-token deck is accepted; 64 is refused naming both).
set -u
bin=$1 deck=$2 dir=$3
rm -rf "$dir"; mkdir -p "$dir"
fail() { echo "FAIL: $*"; exit 1; }
xc() { bash "$(dirname "$0")/../expect_code.sh" "$@"; }
"$bin" run --deck "$deck" --train.steps 5 > "$dir/A.log" || fail "uninterrupted run exited $?"
"$bin" run --deck "$deck" --train.steps 3 --checkpoint.path "$dir/ck3.h5" > "$dir/B.log" || fail "B exited $?"
"$bin" run --deck "$deck" --train.steps 5 --restart "$dir/ck3.h5" > "$dir/C.log" 2>&1
rc=$?
grep '^step\|^verification' "$dir/C.log"
[ $rc -eq 0 ] || fail "the restart exited $rc, expected 0"
grep -qx 'verification: PASS' "$dir/C.log" || fail "the restart did not pass verification"
# The restarted segment's losses are the uninterrupted run's, so its verdict must be too.
loss() { sed -n 's/^step *\([34]\) *loss \([0-9.]*\).*/\1 \2/p' "$1"; }
if [ -z "$(loss "$dir/C.log")" ] || [ "$(loss "$dir/A.log")" != "$(loss "$dir/C.log")" ]; then
  fail "steps 3-4 differ from the uninterrupted run"
fi
grep -qx 'verification: PASS' "$dir/A.log" || fail "the uninterrupted run did not pass"
# The test needs a segment whose own loss rises (else it cannot tell the two checks apart).
read -r l3 l4 <<< "$(loss "$dir/C.log" | awk '{print $2}' | tr '\n' ' ')"
awk -v a="$l3" -v b="$l4" 'BEGIN { exit !(b >= a) }' || fail "the segment's loss fell ($l3 -> $l4): the deck no longer tests #3"

"$bin" run --deck "$deck" --train.steps 5 --restart "$dir/ck3.h5" --model.block_size 32 > "$dir/D.log" 2>&1 ||
  { tail -n 3 "$dir/D.log"; fail "block_size 32 (= the checkpoint's 0 on seq_len 32) was refused"; }
xc 2 "key 'model.block_size' has value 64 but the checkpoint .*ck3.h5 was written with 0 \(= 32\); allowed: the checkpoint's value" \
  -- "$bin" run --deck "$deck" --train.steps 5 --restart "$dir/ck3.h5" --model.block_size 64 || exit 1
echo PASS
