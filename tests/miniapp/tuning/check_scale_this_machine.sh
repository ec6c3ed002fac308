#!/usr/bin/env bash
# check_scale_this_machine.sh MPIEXEC BIN DECK CLUSTER OUT: profiles DECK on 2 ranks (the
# ping-pong link measured, one calibration run at m = 4, which measures an action spread, so
# both predict with jittered simulations), then predicts with `tune -p 2` and with
# `scale --devices 2` on this machine's cluster file and the same cost file. Every p = 2, dp = 1
# configuration must get the same predicted step: the one-link model is the cluster model's case
# of one node whose link is the measured one.
set -eu
mpiexec=$1 bin=$2 deck=$3 cluster=$4 out=$5
mkdir -p "$out"
$mpiexec -n 2 "$bin" profile --deck "$deck" --pipeline.microbatches 4 --repeat 1 --calibrate 1 --out "$out/costs.json" --force > "$out/profile.log"
"$bin" tune --deck "$deck" -p 2 --costs "$out/costs.json" --top 10000 > "$out/tune.log"
"$bin" scale --deck "$deck" --cluster "$cluster" --devices 2 --costs "$out/costs.json" --top 10000 > "$out/scale.log"
# tune rows: # schedule v m split [auto] recompute pred ...; scale rows: # 2x1 order schedule v=V m=M even|auto recompute step ...
# scale models one model copy per pipeline and skips dualpipe's two (miniapp/tuning/scale_model.cpp).
awk '$1 ~ /^[0-9]+$/ && $2 != "dualpipe" { if ($6 == "auto") print $2, $3, $4, "auto", $7, $8; else print $2, $3, $4, "even", $6, $7 }' \
  "$out/tune.log" | sort -u > "$out/tune.rows"
awk '$1 ~ /^[0-9]+$/ && $2 == "2x1" { sub("v=", "", $5); sub("m=", "", $6); print $4, $5, $6, $7, $8, $9 }' \
  "$out/scale.log" | sort -u > "$out/scale.rows"
n=$(wc -l < "$out/tune.rows")
echo "tune: $n configurations at p = 2; scale: $(wc -l < "$out/scale.rows") at 2x1"
grep -m1 "calibration" "$out/tune.log" || true
[ "$n" -gt 10 ] || { echo "FAIL: too few tune rows"; exit 1; }
if ! diff "$out/tune.rows" "$out/scale.rows"; then
  echo "FAIL: tune and scale predict different steps (schedule v m split recompute ms)"
  exit 1
fi
echo "PASS: every p = 2 configuration predicted alike ($n)"
