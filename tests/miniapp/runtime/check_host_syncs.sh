#!/usr/bin/env bash
# check_host_syncs.sh MPIEXEC MINIPIPE DECK OUTDIR: the host synchronizations of a step (the run
# report's host_syncs_per_step, counted by kernels/types.hpp's shims) do not grow with the number
# of layers (no host sync per layer: non-finite checks and optimizer checks are device flags read
# once per step), stay within a bound set by the rank's actions and transfers, and do not grow when
# the per-action fence is turned off (profile.action_fence = false).
set -uo pipefail
mpiexec=$1 bin=$2 deck=$3 dir=$4
rm -rf "$dir" && mkdir -p "$dir" || exit 1
m=4
declare -A syncs
for layers in 2 4; do
  for path in auto off; do
    for fence in true false; do
      name=${layers}_${path}_$fence
      "$mpiexec" -n 2 "$bin" run --deck "$deck" --schedule 1f1b -m $m --model.n_layer $layers --train.steps 2 \
        --pipeline.cuda_aware $path --profile.action_fence $fence --json "$dir/r_$name.json" > "$dir/r_$name.log" 2>&1
      rc=$?
      [ $rc -eq 0 ] || { tail -n 20 "$dir/r_$name.log"; echo "FAIL: run $name exited $rc"; exit 1; }
      syncs[$layers,$path,$fence]=$(grep -o '"host_syncs_per_step": [0-9]*' "$dir/r_$name.json" | awk '{print $2}' | paste -sd' ')
      echo "n_layer $layers, cuda_aware $path, action_fence $fence: host syncs per step by rank: ${syncs[$layers,$path,$fence]}"
    done
  done
done
for path in auto off; do
  for fence in true false; do
    [ -n "${syncs[2,$path,$fence]}" ] || { echo "FAIL: no host_syncs_per_step in the JSON report"; exit 1; }
    # Host staging's count depends on when messages arrive (one transfer-instance fence may serve
    # several copies), so only the direct path must match exactly.
    if [ "$path" = auto ]; then
      [ "${syncs[2,$path,$fence]}" = "${syncs[4,$path,$fence]}" ] ||
        { echo "FAIL: cuda_aware $path, action_fence $fence: host syncs grow with the layers (${syncs[2,$path,$fence]} vs ${syncs[4,$path,$fence]})"; exit 1; }
    fi
  done
done
# 1F1B, p = 2, m = 4. Once per step on every rank: the tokens and targets upload (2), the loss
# copies (2), the stage's overflow flags (1), the boundary finite checks (1) and the optimizer's
# checks (1), read once each, and the fence before the optimizer (1): 8, plus 2 of slack.
# action_fence true: each rank's 2m compute actions are fenced (per-action times), which also
# orders each send after its producer, so a send adds no fence (it added one before: 3m + 10).
# action_fence false: a fence before each of the m sends (MPI reads the buffer) and one at the
# step's end: m + 1.
# Host staging adds at most one transfer-instance fence per transfer (m sent, m received): the
# copies run on their own instance and one fence may cover several (before: a blocking copy each).
for path in auto off; do
  staged=0
  [ "$path" = off ] && staged=$((2 * m))
  for fence in true false; do
    if [ $fence = true ]; then bound=$((2 * m + 10 + staged)); else bound=$((m + 1 + 10 + staged)); fi
    for n in ${syncs[4,$path,$fence]}; do
      [ "$n" -le "$bound" ] || { echo "FAIL: cuda_aware $path, action_fence $fence: $n host syncs in a step, bound $bound"; exit 1; }
    done
  done
  # Turning the per-action fence off never adds a host synchronization (the direct path: staging's
  # count depends on arrivals).
  [ "$path" = auto ] || continue
  read -ra on <<< "${syncs[4,$path,true]}"
  read -ra off <<< "${syncs[4,$path,false]}"
  for r in "${!on[@]}"; do
    [ "${off[$r]}" -le "${on[$r]}" ] ||
      { echo "FAIL: cuda_aware $path: rank $r has ${off[$r]} host syncs with action_fence false, ${on[$r]} with it on"; exit 1; }
  done
done
# The gradient reductions: the data-parallel all-reduce (dp = 2 x p = 2) and DualPipe's sum of the
# two model copies pack every parameter's exact limbs into one buffer, one fence and one message
# per batch, so their host syncs do not grow with the layers either (they grew by one or more per
# parameter before).
for run in "4 dp2 --pipeline.dp 2 --schedule 1f1b" "2 dualpipe --schedule dualpipe"; do
  read -r n label args <<< "$run"
  for layers in 2 4; do
    # shellcheck disable=SC2086
    "$mpiexec" -n "$n" "$bin" run --deck "$deck" $args -m $m --model.n_layer $layers --train.steps 2 \
      --json "$dir/g_${label}_$layers.json" > "$dir/g_${label}_$layers.log" 2>&1 ||
      { tail -n 20 "$dir/g_${label}_$layers.log"; echo "FAIL: run $label n_layer $layers failed"; exit 1; }
    syncs[$label,$layers]=$(grep -o '"host_syncs_per_step": [0-9]*' "$dir/g_${label}_$layers.json" | awk '{print $2}' | paste -sd' ')
    echo "$label, n_layer $layers: host syncs per step by rank: ${syncs[$label,$layers]}"
  done
  [ -n "${syncs[$label,2]}" ] && [ "${syncs[$label,2]}" = "${syncs[$label,4]}" ] ||
    { echo "FAIL: $label: host syncs grow with the layers (${syncs[$label,2]} vs ${syncs[$label,4]})"; exit 1; }
done
echo "PASS: host syncs per step independent of the layer count, within the bound, none added by action_fence = false, the gradient reductions included"
