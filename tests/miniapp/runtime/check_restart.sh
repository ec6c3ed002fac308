#!/usr/bin/env bash
# check_restart.sh MINIPIPE TAMPER DECK OUTDIR: checkpoint/restart continues bit for bit at another
# layout, survives kill -9 during a checkpoint write, and refuses a changed deck or checkpoint.
#  A: 4 steps on one rank (the reference).  B: 2 steps, p = 2 1f1b m = 2, checkpoint at the end.
#  C: restart of B at p = 2, dp = 2, zb-h1 -> steps 2 and 3 equal A's.  D: checkpoint every step,
#  killed (SIGKILL) while writing the third -> the file still holds step 2 and restarts like B.
set -u
bin=$1 tamper=$2 deck=$3 dir=$4
rm -rf "$dir"; mkdir -p "$dir"
fail() { echo "FAIL: $*"; exit 1; }
xc() { bash "$(dirname "$0")/../expect_code.sh" "$@"; }
same_steps() {  # same_steps A.h5 C.h5: the continued steps match, and nothing before the restart
  for g in /step_0002 /step_0003; do
    h5diff "$1" "$2" "$g" "$g" > /dev/null || fail "$2 $g differs from the uninterrupted run"
  done
  h5ls "$2" | grep -q '^step_0000' && fail "$2 holds steps before the restart"
  h5ls "$2/step_0003/params" > /dev/null || fail "$2 has no parameters after step 3"
  return 0
}
step_of() { h5dump -a /manifest/step "$1" | sed -n 's/.*(0): \([0-9]*\).*/\1/p'; }

"$bin" run --deck "$deck" --train.steps 4 --dump "$dir/A.h5" > "$dir/A.log" || fail "A exited $?"
mpiexec -n 2 "$bin" run --deck "$deck" --train.steps 2 --schedule 1f1b -m 2 --checkpoint.path "$dir/ck.h5" \
  > "$dir/B.log" || fail "B exited $?"
grep -q "checkpoint: $dir/ck.h5 (after step 1)" "$dir/B.log" || fail "B did not report its checkpoint"
[ "$(step_of "$dir/ck.h5")" = 2 ] || fail "the checkpoint's manifest is not of step 2"
mpiexec -n 4 "$bin" run --deck "$deck" --train.steps 4 --schedule zb-h1 -m 2 --pipeline.dp 2 \
  --restart "$dir/ck.h5" --dump "$dir/C.h5" > "$dir/C.log" || fail "C exited $?"
same_steps "$dir/A.h5" "$dir/C.h5"
echo "restart at p=2 dp=2 zb-h1: steps 2-3 bitwise equal to the uninterrupted run"

# kill -9 of rank 0 in the middle of the third checkpoint write.
MINIPIPE_FAULT_KILL_IN_CHECKPOINT=3 mpiexec -n 2 "$bin" run --deck "$deck" --train.steps 4 --schedule gpipe -m 2 \
  --checkpoint.path "$dir/ckD.h5" --checkpoint.every 1 > "$dir/D.log" 2>&1 && fail "D was not killed"
[ "$(step_of "$dir/ckD.h5")" = 2 ] || fail "after the kill the checkpoint is not the one of step 2"
"$bin" run --deck "$deck" --train.steps 4 --restart "$dir/ckD.h5" --dump "$dir/E.h5" > "$dir/E.log" ||
  fail "restart after the kill exited $?"
same_steps "$dir/A.h5" "$dir/E.h5"
echo "kill -9 during a checkpoint write: the previous checkpoint restarts bitwise"

# Refused, with exit 2 and the reason: a deck that changes the math, too few steps, a damaged file.
xc 2 "key 'train.lr' has value 0.02 but the checkpoint .*ck.h5 was written with 0.01" -- \
  "$bin" run --deck "$deck" --train.steps 4 --train.lr 0.02 --restart "$dir/ck.h5" || exit 1
xc 2 "key 'model.n_layer' has value 4 but the checkpoint" -- \
  "$bin" run --deck "$deck" --train.steps 4 --model.n_layer 4 --restart "$dir/ck.h5" || exit 1
xc 2 "key 'train.steps' has value 2 but the checkpoint .* already holds 2 completed steps" -- \
  "$bin" run --deck "$deck" --train.steps 2 --restart "$dir/ck.h5" || exit 1
"$bin" run --deck "$deck" --train.steps 4 --checkpoint.path "$dir/ck4.h5" > /dev/null || fail "ck4 exited $?"
for t in flip mix drop; do
  cp "$dir/ck4.h5" "$dir/bad_$t.h5"
  case $t in
    flip) "$tamper" flip "$dir/bad_$t.h5" /optimizer/v/layer_03/fc_w; want="checksum does not match" ;;
    mix) "$tamper" mix "$dir/bad_$t.h5" /params/wte "$dir/ck.h5"; want="/params/wte whose checksum does not match" ;;
    drop) "$tamper" drop-manifest "$dir/bad_$t.h5"; want="has no manifest" ;;
  esac
  xc 2 "checkpoint.restart: .*bad_$t.h5 .*$want.*refusing to restart" -- \
    mpiexec -n 2 "$bin" run --deck "$deck" --train.steps 6 --schedule 1f1b --restart "$dir/bad_$t.h5" || exit 1
done
# Forged metadata: the manifest seals every value a restart reads (step, cursor, seed, shape, deck,
# data, first loss). /meta step and /manifest step forged together (the run would skip a step),
# a cursor, a seed, a deck; the manifest's own text forged too (its checksum); and, with the
# checksum recomputed by a forger who knows the format, values outside their range.
forged() {  # name regex tamper-commands (separated by ';')...
  local name=$1 want=$2
  shift 2
  cp "$dir/ck.h5" "$dir/forged_$name.h5"
  local cmd
  for cmd in "$@"; do
    # shellcheck disable=SC2086
    "$tamper" $cmd || fail "tamper $cmd"
  done
  xc 2 "checkpoint.restart: .*forged_$name.h5 $want.*refusing to restart" -- \
    "$bin" run --deck "$deck" --train.steps 4 --restart "$dir/forged_$name.h5" || exit 1
}
f=$dir/forged_
forged step "has /meta step = 3 but its manifest records 2" "set-int ${f}step.h5 /meta step 3" \
  "set-int ${f}step.h5 /manifest step 3"
forged cursor "has /meta data_cursor = 3 but its manifest records 2" "set-int ${f}cursor.h5 /meta data_cursor 3"
forged seed "has /meta seed = 7 but its manifest records" "set-int ${f}seed.h5 /meta seed 7"
forged deck "has /meta deck = [0-9a-f]{16} but its manifest records" "set-string ${f}deck.h5 /meta deck x=1"
forged sealed "has a manifest that does not match its own checksum" "set-int ${f}sealed.h5 /meta step 3" \
  "set-int ${f}sealed.h5 /manifest step 3" "edit-string ${f}sealed.h5 /manifest meta step=2 step=3"
forged range "has /meta step = 1000000000000; allowed: 1 .. 1000000" \
  "set-int ${f}range.h5 /meta step 1000000000000" "set-int ${f}range.h5 /manifest step 1000000000000" \
  "edit-string ${f}range.h5 /manifest meta step=2 step=1000000000000" "reseal ${f}range.h5"
forged cursor_range "has /meta data_cursor = 7; allowed: the step, 2" "set-int ${f}cursor_range.h5 /meta data_cursor 7" \
  "edit-string ${f}cursor_range.h5 /manifest meta data_cursor=2 data_cursor=7" "reseal ${f}cursor_range.h5"
echo PASS
