#!/usr/bin/env bash
# check_auto_split.sh MINIPIPE DECK OUTDIR: on a heavy-head deck at p = 2, the auto split (from a
# profiled cost file) beats the even split in the simulator (tune's predictions) and in measured
# runs: the best of 3 alternating launches each, pipeline makespan of the last step. The margin
# the split buys here (~30-40%) is far beyond this shared machine's launch-to-launch noise (~10%).
set -u
bin=$1 deck=$2 out=$3
rm -rf "$out" && mkdir -p "$out" || exit 1
mpiexec -n 2 "$bin" profile --deck "$deck" --repeat 3 --out "$out/costs.json" > "$out/profile.log" 2>&1 \
  || { cat "$out/profile.log"; echo "FAIL: profile exited non-zero"; exit 1; }
"$bin" tune --deck "$deck" -p 2 --costs "$out/costs.json" --schedules 1f1b --top 1000 > "$out/tune.log" 2>&1 \
  || { cat "$out/tune.log"; echo "FAIL: tune exited non-zero"; exit 1; }
# Rows: "#  1f1b  v  m  split  recompute  pred ..."; the even 3/3 and the auto split at m = 4, none.
even=$(awk '$2 == "1f1b" && $4 == 4 && $5 == "3/3" && $6 == "none" { print $7; exit }' "$out/tune.log")
auto=$(awk '$2 == "1f1b" && $4 == 4 && $6 == "auto" && $7 == "none" { print $5, $8; exit }' "$out/tune.log")
echo "simulated 1f1b m=4: even 3/3 $even ms; auto ${auto:-?}"
[ -n "$even" ] && [ -n "$auto" ] || { cat "$out/tune.log"; echo "FAIL: tune lacks the even or auto row"; exit 1; }
awk -v e="$even" -v a="${auto#* }" 'BEGIN { exit !(a < e) }' || { echo "FAIL: auto split not faster in the simulator"; exit 1; }
best() { sort -g | head -1; }
for k in 1 2 3; do
  for split in even auto; do
    args=()
    [ $split = auto ] && args=(--pipeline.layers_per_stage auto --pipeline.costs "$out/costs.json")
    mpiexec -n 2 "$bin" run --deck "$deck" "${args[@]}" --json "$out/$split$k.json" --force > "$out/$split$k.log" 2>&1 \
      || { tail "$out/$split$k.log"; echo "FAIL: $split run exited non-zero"; exit 1; }
    grep -oE '"makespan": [0-9.e+-]+' "$out/$split$k.json" | grep -oE '[0-9.e+-]+$' >> "$out/$split.times"
  done
done
grep "auto split" "$out/auto1.log"
e=$(best < "$out/even.times") a=$(best < "$out/auto.times")
echo "measured makespan (best of 3): even $e s, auto $a s"
awk -v e="$e" -v a="$a" 'BEGIN { exit !(a < e) }' || { echo "FAIL: auto split not faster when measured"; exit 1; }
echo PASS
