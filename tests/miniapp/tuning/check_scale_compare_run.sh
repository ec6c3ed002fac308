#!/usr/bin/env bash
# check_scale_compare_run.sh MPIEXEC BIN DECK CLUSTER OUT: profiles DECK on 2 ranks, runs it as
# p 2 x dp 2 on 4 ranks (JSON report), and has `scale --compare-run` print the model's step for
# that configuration beside the measured one. The runtime overlaps each stage's reduction with the
# pipeline (the model's default) and sends the compact exact form: the model is given the bytes per
# element the run reports (its JSON's allreduce_bytes_per_element, rank 0). Passes when
# both numbers are there and their ratio is within a band wide enough for a loaded 2-core machine;
# the ratio itself is for the reader (docs/cluster.md, This machine).
set -eu
mpiexec=$1 bin=$2 deck=$3 cluster=$4 out=$5
mkdir -p "$out"
$mpiexec -n 2 "$bin" profile --deck "$deck" --repeat 1 --calibrate 1 --out "$out/costs.json" --force > "$out/profile.log"
$mpiexec -n 4 "$bin" run --deck "$deck" --pipeline.dp 2 --pipeline.p 2 --train.steps 4 --json "$out/run.json" --force \
  > "$out/run.log"
bytes=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["runs"][0]["ranks"][0]["allreduce_bytes_per_element"])' "$out/run.json")
"$bin" scale --deck "$deck" --cluster "$cluster" --costs "$out/costs.json" --compare-run "$out/run.json" \
  --exact-bytes "$bytes" --top 1 > "$out/scale.log"
cat "$out/scale.log" | head -6
grep -q "this machine ($out/run.json): 2x2 dp-major 1f1b v=1 m=8 even none" "$out/scale.log" ||
  { echo "FAIL: no row for the run's configuration"; exit 1; }
ratio=$(awk '/measured \/ predicted/ { print $4 }' "$out/scale.log")
[ -n "$ratio" ] || { echo "FAIL: no ratio"; exit 1; }
awk -v r="$ratio" 'BEGIN { exit !(r > 0.2 && r < 5) }' || { echo "FAIL: measured / predicted $ratio outside 0.2 .. 5"; exit 1; }
echo "PASS: measured / predicted $ratio"
