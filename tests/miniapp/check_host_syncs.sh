#!/usr/bin/env bash
# check_host_syncs.sh MPIEXEC MINIPIPE DECK OUTDIR: the host synchronizations of a step (the run
# report's host_syncs_per_step, counted by kernels/types.hpp's host_sync_count) do not grow with
# the number of layers (no host sync per layer: non-finite checks and optimizer checks are device
# flags read once per step), and stay within a bound set by the rank's actions and transfers.
set -uo pipefail
mpiexec=$1 bin=$2 deck=$3 dir=$4
rm -rf "$dir" && mkdir -p "$dir" || exit 1
m=4
declare -A syncs
for layers in 2 4; do
  for path in auto off; do
    "$mpiexec" -n 2 "$bin" run --deck "$deck" --schedule 1f1b -m $m --model.n_layer $layers --train.steps 2 \
      --pipeline.cuda_aware $path --json "$dir/r_${layers}_$path.json" > "$dir/r_${layers}_$path.log" 2>&1
    rc=$?
    [ $rc -eq 0 ] || { tail -n 20 "$dir/r_${layers}_$path.log"; echo "FAIL: run with $layers layers, $path exited $rc"; exit 1; }
    syncs[$layers,$path]=$(grep -o '"host_syncs_per_step": [0-9]*' "$dir/r_${layers}_$path.json" | awk '{print $2}' | paste -sd' ')
    echo "n_layer $layers, cuda_aware $path: host syncs per step by rank: ${syncs[$layers,$path]}"
  done
done
for path in auto off; do
  [ -n "${syncs[2,$path]}" ] || { echo "FAIL: no host_syncs_per_step in the JSON report"; exit 1; }
  [ "${syncs[2,$path]}" = "${syncs[4,$path]}" ] ||
    { echo "FAIL: cuda_aware $path: host syncs grow with the layers (${syncs[2,$path]} vs ${syncs[4,$path]})"; exit 1; }
done
# 1F1B, p = 2, m = 4: each rank runs 2m compute actions (one fence each, for per-action timing)
# and m sends (a fence before MPI reads the buffer); host staging adds one copy per transfer (m
# sent, m received). Once per step: the tokens and targets upload (2), the loss copies (2), the
# stage's overflow flags (1), the boundary finite checks (1) and the optimizer's checks (1), read
# once each, and the fence before the optimizer (1): 8, plus 2 of slack.
for path in auto off; do
  staged=0
  [ "$path" = off ] && staged=$((2 * m))
  bound=$((3 * m + 10 + staged))
  for n in ${syncs[4,$path]}; do
    [ "$n" -le "$bound" ] || { echo "FAIL: cuda_aware $path: $n host syncs in a step, bound $bound"; exit 1; }
  done
done
echo "PASS: host syncs per step independent of the layer count and within the bound"
