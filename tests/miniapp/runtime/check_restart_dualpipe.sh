#!/usr/bin/env bash
# check_restart_dualpipe.sh MINIPIPE DECK OUTDIR: a checkpoint of bidirectional DualPipe (two model
# copies) holds one set of parameters and optimizer state, and a restart crosses layouts both ways.
#  A: 4 steps on one rank (the reference).  B: 2 steps of dualpipe p = 2, m = 3 with a checkpoint;
#  C: its restart as 1f1b p = 3, m = 2.  D: 2 steps of 1f1b p = 3 with a checkpoint; E: its restart
#  as dualpipe p = 3, m = 5 (both copies load the same names). Steps 2-3 of C and E equal A's.
set -u
bin=$1 deck=$2 dir=$3
rm -rf "$dir"; mkdir -p "$dir"
fail() { echo "FAIL: $*"; exit 1; }
same_steps() {  # same_steps A.h5 C.h5: the continued steps match bit for bit
  for g in /step_0002 /step_0003; do
    h5diff "$1" "$2" "$g" "$g" > /dev/null || fail "$2 $g differs from the uninterrupted run"
  done
  h5ls "$2/step_0003/params" > /dev/null || fail "$2 has no parameters after step 3"
  return 0
}
"$bin" run --deck "$deck" --train.steps 4 --dump "$dir/A.h5" > "$dir/A.log" || fail "A exited $?"
mpiexec -n 2 "$bin" run --deck "$deck" --train.steps 2 --schedule dualpipe -m 3 --checkpoint.path "$dir/ckB.h5" \
  > "$dir/B.log" 2>&1 || { tail -20 "$dir/B.log"; fail "B exited $?"; }
mpiexec -n 3 "$bin" run --deck "$deck" --train.steps 4 --schedule 1f1b -m 2 --restart "$dir/ckB.h5" \
  --dump "$dir/C.h5" > "$dir/C.log" 2>&1 || { tail -20 "$dir/C.log"; fail "C exited $?"; }
same_steps "$dir/A.h5" "$dir/C.h5"
echo "dualpipe p=2 checkpoint -> 1f1b p=3 restart: steps 2-3 bitwise equal to the uninterrupted run"
mpiexec -n 3 "$bin" run --deck "$deck" --train.steps 2 --schedule 1f1b -m 2 --checkpoint.path "$dir/ckD.h5" \
  > "$dir/D.log" 2>&1 || { tail -20 "$dir/D.log"; fail "D exited $?"; }
mpiexec -n 3 "$bin" run --deck "$deck" --train.steps 4 --schedule dualpipe -m 5 --restart "$dir/ckD.h5" \
  --dump "$dir/E.h5" > "$dir/E.log" 2>&1 || { tail -20 "$dir/E.log"; fail "E exited $?"; }
same_steps "$dir/A.h5" "$dir/E.h5"
echo "1f1b p=3 checkpoint -> dualpipe p=3 restart: steps 2-3 bitwise equal to the uninterrupted run"
echo PASS
