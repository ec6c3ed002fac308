#!/usr/bin/env bash
# check_divergence.sh MINIPIPE DECK OUTDIR: SGD with lr 10 diverges. The run must stop with
# exit 3 naming the first non-finite tensor (step, stage, layer, micro-batch, tensor, NaN / inf /
# out of range), and the dump must keep every completed step with /meta stopped_early = 1,
# completed_steps and stop_reason.
set -u
bin=$1 deck=$2 dir=$3
rm -rf "$dir"; mkdir -p "$dir"
f=$dir/d.h5
out=$(mpiexec -n 2 "$bin" run --deck "$deck" --schedule 1f1b -m 2 --train.optimizer sgd --train.lr 10 \
  --train.steps 30 --dump "$f" --json "$dir/r.json" 2>&1); rc=$?
echo "$out" | tail -n 8
[ $rc -eq 3 ] || { echo "FAIL: exit code $rc, expected 3"; exit 1; }
# Whichever check trips first (the finite check names NaN / inf before the step, the exact
# accumulator names the step first) depends on the model's bits.
echo "$out" | grep -Eq "step [0-9]+.*stage [0-9]+.*(NaN|inf|out of range)|(NaN|inf) at element [0-9]+ of step [0-9]+ / stage [0-9]+ / .*micro-batch [0-9]+" ||
  { echo "FAIL: no tensor named"; exit 1; }
[ -f "$f" ] || { echo "FAIL: the dump of the completed steps is gone"; exit 1; }
echo "$out" | grep -q "^verification: FAIL (the run diverged: " || { echo "FAIL: no verification FAIL line"; exit 1; }
grep -q '"verification": "FAIL (the run diverged: ' "$dir/r.json" || { echo "FAIL: the JSON lacks the verdict"; exit 1; }
h5dump -a /meta/stopped_early "$f" | grep -q "(0): 1" || { echo "FAIL: /meta stopped_early != 1"; exit 1; }
done_steps=$(h5dump -a /meta/completed_steps "$f" | sed -n 's/.*(0): \([0-9]*\).*/\1/p')
groups=$(h5ls "$f" | grep -c '^step_')
[ "$groups" -eq "$done_steps" ] || { echo "FAIL: $groups step groups but completed_steps = $done_steps"; exit 1; }
echo PASS
