#!/usr/bin/env bash
# check_auto_split.sh MINIPIPE DECK OUTDIR: on a heavy-head deck at p = 2, the auto split (from a
# profiled cost file) beats the even split in the simulator (tune's simulated makespans) and in
# measured runs, where what it balances is measured: the slowest stage's compute time of a step
# (the report's stage_compute_seconds, best of 5 alternating launches each), about 30% lower here.
# The measured makespan is printed too but not asserted: at this size (~15 ms steps, 2 ranks on 2
# shared cores) it varies by up to 2x between launches, more than the ~15% the split buys.
set -u
bin=$1 deck=$2 out=$3
rm -rf "$out" && mkdir -p "$out" || exit 1
mpiexec -n 2 "$bin" profile --deck "$deck" --repeat 3 --out "$out/costs.json" > "$out/profile.log" 2>&1 \
  || { cat "$out/profile.log"; echo "FAIL: profile exited non-zero"; exit 1; }
"$bin" tune --deck "$deck" -p 2 --costs "$out/costs.json" --schedules 1f1b --top 1000 > "$out/tune.log" 2>&1 \
  || { cat "$out/tune.log"; echo "FAIL: tune exited non-zero"; exit 1; }
# Rows: "#  1f1b  v  m  split  recompute  pred  makespan ..."; the even and the auto split at m = 4,
# no recompute; their simulated makespans.
L=$(awk -F= '$1 ~ /^n_layer *$/ { gsub(/ /, "", $2); print $2 }' "$deck")
half="$((L / 2))/$((L - L / 2))"
even=$(awk -v h="$half" '$2 == "1f1b" && $4 == 4 && $5 == h && $6 == "none" { print $8; exit }' "$out/tune.log")
auto=$(awk '$2 == "1f1b" && $4 == 4 && $6 == "auto" && $7 == "none" { print $5, $9; exit }' "$out/tune.log")
echo "simulated 1f1b m=4 makespan: even $half $even ms; auto ${auto:-?} ms"
[ -n "$even" ] && [ -n "$auto" ] || { cat "$out/tune.log"; echo "FAIL: tune lacks the even or auto row"; exit 1; }
awk -v e="$even" -v a="${auto#* }" 'BEGIN { exit !(a < e) }' || { echo "FAIL: auto split not faster in the simulator"; exit 1; }
best() { sort -g | head -1; }
for k in 1 2 3 4 5; do
  for split in even auto; do
    args=()
    [ $split = auto ] && args=(--pipeline.layers_per_stage auto --pipeline.costs "$out/costs.json")
    mpiexec -n 2 "$bin" run --deck "$deck" "${args[@]}" --json "$out/$split$k.json" --force > "$out/$split$k.log" 2>&1 \
      || { tail "$out/$split$k.log"; echo "FAIL: $split run exited non-zero"; exit 1; }
    grep -oE '"makespan": [0-9.e+-]+' "$out/$split$k.json" | grep -oE '[0-9.e+-]+$' >> "$out/$split.times"
    grep -oE '"stage_compute_seconds": \[[^]]*\]' "$out/$split$k.json" | grep -oE '[0-9][0-9.e+-]*' |
      sort -g | tail -1 >> "$out/$split.slowest"
  done
done
grep "auto split" "$out/auto1.log"
for f in even.times auto.times even.slowest auto.slowest; do
  [ "$(wc -l < "$out/$f")" -eq 5 ] || { echo "FAIL: $f has not 5 values (a report lacks makespan or stage_compute_seconds)"; exit 1; }
done
echo "measured makespan (best of 5, not asserted): even $(best < "$out/even.times") s, auto $(best < "$out/auto.times") s"
e=$(best < "$out/even.slowest") a=$(best < "$out/auto.slowest")
echo "measured slowest stage compute per step (best of 5): even $e s, auto $a s"
awk -v e="$e" -v a="$a" 'BEGIN { exit !(a < 0.9 * e) }' ||
  { echo "FAIL: the auto split's slowest stage is not 10% faster than the even split's"; exit 1; }
echo PASS
