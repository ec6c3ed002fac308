#!/usr/bin/env bash
# check_action_fence.sh MPIEXEC MINIPIPE DECK OUTDIR: the per-action fence and the transfer path
# change no bit. Dumps of 1F1B at p = 2 and 3 (and ZB-H1 at p = 2, split backward) with
# profile.action_fence on and off, boundary tensors straight to MPI (cuda_aware auto) and through
# host staging on the transfer instance (off), are h5diff-identical to a p = 1 sequential run, also
# with staged sends posted as on a GPU (MINIPIPE_TEST_DEFER_STAGED_POSTS=1: at the next progress
# point or before the rank blocks; pipeline.timeout bounds a deadlock there to a failure). The
# report of a run without the fence marks per-action times unavailable (null in the JSON, n/a in the
# table) instead of printing enqueue times as action times, and a timeline is refused up front.
set -uo pipefail
mpiexec=$1 bin=$2 deck=$3 dir=$4
rm -rf "$dir" && mkdir -p "$dir" || exit 1
fail() { echo "FAIL: $*"; exit 1; }
run() {  # name ranks args...
  local name=$1 n=$2
  shift 2
  "$mpiexec" -n "$n" "$bin" run --deck "$deck" --output.dump "$dir/$name.h5" --output.json "$dir/$name.json" "$@" \
    > "$dir/$name.log" 2>&1
  local rc=$?
  [ $rc -eq 0 ] || { tail -n 20 "$dir/$name.log"; fail "run $name ($*) exited $rc"; }
}
run ref 1 --schedule sequential -m 1
for case in "2 1f1b 4" "3 1f1b 4" "2 zb-h1 5"; do
  set -- $case
  for fence in true false; do
    for path in auto off deferred; do
      name=p$1_$2_${fence}_$path
      if [ $path = deferred ]; then
        MINIPIPE_TEST_DEFER_STAGED_POSTS=1 run "$name" "$1" --schedule "$2" -m "$3" --profile.action_fence $fence \
          --pipeline.cuda_aware off --pipeline.timeout 60
      else
        run "$name" "$1" --schedule "$2" -m "$3" --profile.action_fence $fence --pipeline.cuda_aware $path
      fi
      h5diff --exclude-path /meta "$dir/ref.h5" "$dir/$name.h5" > "$dir/$name.diff" 2>&1 ||
        { head -n 20 "$dir/$name.diff"; fail "$name: the dump differs from the p = 1 sequential run"; }
      echo "$name: dump identical to the p = 1 sequential run"
    done
  done
done
# The report: per-action figures are numbers with the fence, null / n/a without it.
python3 - "$dir/p2_1f1b_true_auto.json" "$dir/p2_1f1b_false_auto.json" <<'PY' || exit 1
import json, math, sys
on, off = (json.load(open(f))["runs"][0] for f in sys.argv[1:3])
def bad(msg):
    print("FAIL:", msg); sys.exit(1)
if on["per_action_times"] is not True or off["per_action_times"] is not False:
    bad(f"per_action_times: {on['per_action_times']} with the fence, {off['per_action_times']} without")
for k in ("bubble_measured", "bubble_simulated", "imbalance"):
    if not isinstance(on[k], (int, float)) or not math.isfinite(on[k]):
        bad(f"{k} = {on[k]} with the fence")
    if off[k] is not None:
        bad(f"{k} = {off[k]} without the fence (per-action times are enqueue times: no number is right)")
if not isinstance(on["time_budget"], dict) or off["time_budget"] is not None:
    bad("time_budget: expected an object with the fence and null without")
if off["stage_compute_seconds"] is not None:
    bad("stage_compute_seconds without the fence: expected null")
for r_on, r_off in zip(on["ranks"], off["ranks"]):
    for k in ("F", "B", "busy", "idle"):
        if r_off[k] is not None or not isinstance(r_on[k], (int, float)):
            bad(f"rank {r_on['rank']} {k}: {r_on[k]} with the fence, {r_off[k]} without")
    if r_off["host_syncs_per_step"] <= 0:
        bad("host_syncs_per_step must stay measured without the fence")
if not off["step_seconds_mean"] > 0 or not off["tokens_per_second"] > 0:
    bad("step time and throughput must stay measured without the fence")
print("report: per-action figures null without the fence, numbers with it; step times measured in both")
PY
grep -q "bubble measured n/a" "$dir/p2_1f1b_false_auto.log" || fail "the run line does not say bubble measured n/a"
grep -q "per-action times unavailable" "$dir/p2_1f1b_false_auto.log" || fail "the table does not say per-action times are unavailable"
grep -q "n/a / n/a /" "$dir/p2_1f1b_false_auto.log" || fail "the table's bubble column is not n/a"
grep -q "n/a" "$dir/p2_1f1b_true_auto.log" && fail "a run with the fence prints n/a"
# A timeline of enqueue times would be wrong: refused up front (exit 2, the key named).
"$mpiexec" -n 2 "$bin" run --deck "$deck" --schedule 1f1b -m 4 --profile.action_fence false \
  --output.svg "$dir/t.svg" > "$dir/svg.log" 2>&1
rc=$?
[ $rc -eq 2 ] || fail "output.svg with action_fence false exited $rc, expected 2"
grep -q "output.svg.*unless profile.action_fence = true" "$dir/svg.log" || { cat "$dir/svg.log"; fail "no message naming the key"; }
[ -e "$dir/t.svg" ] && fail "the refused run wrote its SVG"
echo "PASS: dumps bitwise identical with the per-action fence on and off, direct and staged; report marks n/a"
