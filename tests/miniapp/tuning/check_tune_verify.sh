#!/usr/bin/env bash
# check_tune_verify.sh MINIPIPE DECK OUTDIR: profiles DECK on 2 ranks (with 5 runs of the 1F1B
# calibration), then `tune --verify 2 --rounds 3` and checks its output: the calibration line, a measured
# time and meas/pred on exactly the verified rows and the baseline, the noise line. Leaves
# OUTDIR/tune.log for check_tune_model.sh (prediction accuracy, pick vs baseline).
set -u
bin=$1 deck=$2 out=$3
rm -rf "$out" && mkdir -p "$out" || exit 1
fail() { echo "FAIL: $*"; exit 1; }
mpiexec -n 2 "$bin" profile --deck "$deck" --repeat 5 --calibrate 5 --out "$out/costs.json" > "$out/profile.log" 2>&1 \
  || { cat "$out/profile.log"; fail "profile exited non-zero"; }
grep -q '"calibration": {"measured": true, "ranks": 2' "$out/costs.json" || fail "the cost file has no calibration"
# Each profiled part is a pipeline stage, which adds every micro-batch's dW samples in that
# micro-batch's W (only a stage that is the whole model holds them back for its last W): no part's
# last W costs extra, so every W_tail in the file is 0.
entries=$(grep -oE '"W_tail": ' "$out/costs.json" | wc -l)
tails=$(grep -oE '"W_tail": [0-9.e+-]+' "$out/costs.json" | awk '$2 != 0' | wc -l)
[ "$entries" -gt 0 ] || fail "the cost file has no W_tail entries"
[ "$tails" -eq 0 ] || fail "$tails part(s) have a W_tail: a profiled pipeline stage held dW samples back"
mpiexec -n 2 "$bin" tune --deck "$deck" -p 2 --costs "$out/costs.json" --verify 2 --rounds 3 --steps 4 --top 3 \
  > "$out/tune.log" 2>&1 || { cat "$out/tune.log"; fail "tune --verify exited non-zero"; }
cat "$out/tune.log"
grep -Eq '^calibration: 1f1b p=2 v=1 m=8 split 4/4 recompute none, 5 runs: slowdown [0-9.]+' "$out/tune.log" \
  || fail "no calibration line"
grep -Eq '^ +# +schedule .* pred ms +makespan +bubble +peak MiB +meas ms +meas/pred$' "$out/tune.log" \
  || fail "no table header with the measured columns"
# Rows: label schedule v m split [auto] recompute pred makespan bubble peak [meas ratio].
awk '
  $1 ~ /^([0-9]+|base)$/ && NF >= 10 {
    n = NF; auto = ($6 == "auto"); cols = 10 + auto; verified = ($1 == "base" || $1 <= 2)
    if (verified && n != cols + 2) { print "FAIL: row " $1 " lacks its measured time"; bad = 1 }
    if (!verified && n != cols) { print "FAIL: row " $1 " was not verified but shows a time"; bad = 1 }
    if (verified && n == cols + 2) {
      pred = $(7 + auto); meas = $(n - 1); ratio = $n
      if (meas <= 0 || pred <= 0) { print "FAIL: row " $1 " has a non-positive time"; bad = 1 }
      if (ratio - meas / pred > 0.0015 || meas / pred - ratio > 0.0015) { print "FAIL: row " $1 " meas/pred is not meas / pred"; bad = 1 }
    }
    rows++
  }
  END { if (rows != 4) { print "FAIL: " rows " rows, expected 3 configurations and the baseline"; bad = 1 }; exit bad }
' "$out/tune.log" || exit 1
# The time budget of every printed configuration: predicted, and measured beside it on exactly the
# verified rows; each five fractions of p x makespan sum to 1 (to the printed 3 decimals).
awk '
  $1 == "budget" {
    verified = ($2 == "base" || $2 == "#1" || $2 == "#2"); has = index($0, "| meas ") > 0
    if (verified != has) { print "FAIL: budget row " $2 (has ? " shows" : " lacks") " a measured budget"; bad = 1 }
    line = $0; gsub(/[|\/]/, " ", line); n = split(line, f, " "); k = 0; sum = 0; sets = 0
    for (j = 1; j <= n; j++) if (f[j] ~ /^[0-9]+\.[0-9]+$/) { sum += f[j]; if (++k == 5) { sets++; if (sum < 0.995 || sum > 1.005) { print "FAIL: budget row " $2 " sums to " sum; bad = 1 }; k = 0; sum = 0 } }
    if (sets != (has ? 2 : 1)) { print "FAIL: budget row " $2 " has " sets " sets of five fractions"; bad = 1 }
    rows++
  }
  END { if (rows != 4) { print "FAIL: " rows " budget rows, expected 4"; bad = 1 }; exit bad }
' "$out/tune.log" || exit 1
grep -Eq '^noise: round medians of base [0-9.]+ [0-9.]+ [0-9.]+ ms; base spread [0-9.]+; largest round-to-round spread [0-9.]+' \
  "$out/tune.log" || fail "no noise line with three round medians of the baseline"
grep -Eq '^round-to-round spread of each: #1 [0-9.]+ #2 [0-9.]+ base [0-9.]+$' "$out/tune.log" \
  || fail "no round-to-round spread for each verified row"
echo PASS
