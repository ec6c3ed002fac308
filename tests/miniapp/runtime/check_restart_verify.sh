#!/usr/bin/env bash
# check_restart_verify.sh MINIPIPE DECK OUTDIR: a run restarted from a checkpoint, verified against
# an uninterrupted run's dump (--verify), passes: the reference's /init and its steps before the
# restart are not the run's and are not compared; the continued steps are, bitwise. A real
# difference in a continued step (the one-ULP hook) still fails, naming that step's dataset.
set -u
bin=$1 deck=$2 dir=$3
rm -rf "$dir"; mkdir -p "$dir"
fail() { echo "FAIL: $*"; exit 1; }
"$bin" run --deck "$deck" --train.steps 4 --dump "$dir/A.h5" > "$dir/A.log" 2>&1 || fail "A exited $?"
"$bin" run --deck "$deck" --train.steps 2 --checkpoint.path "$dir/ck.h5" > "$dir/B.log" 2>&1 || fail "B exited $?"
"$bin" run --deck "$deck" --train.steps 4 --restart "$dir/ck.h5" --dump "$dir/C.h5" --verify "$dir/A.h5" \
  > "$dir/C.log" 2>&1 || { tail -n 3 "$dir/C.log"; fail "the restarted run verified against A exited $?"; }
grep -qx "verification: PASS" "$dir/C.log" || fail "no clean PASS: $(grep verification "$dir/C.log")"
MINIPIPE_TEST_PERTURB=layer_00/ln1 "$bin" run --deck "$deck" --train.steps 4 --restart "$dir/ck.h5" \
  --dump "$dir/D.h5" --verify "$dir/A.h5" > "$dir/D.log" 2>&1
rc=$?
grep verification "$dir/D.log"
[ $rc -eq 3 ] || fail "a restarted run that differs in step 2 exited $rc, expected 3"
grep -q "verification: FAIL (.*first: /step_0002/" "$dir/D.log" || fail "the failure does not name a step-2 dataset"
echo PASS
