#!/usr/bin/env bash
# check_memory_v.sh MINIPIPE DECK OUTDIR: on 4 ranks with m = 8, the peak activation bytes the
# run itself stores (JSON report, largest over ranks) order 1F1B > V-Half > V-Min, the memory
# statement of arXiv 2405.15362 (p, (p+2)/2 and (p+4)/3 = 4, 3 and 2 micro-batches at p = 4).
set -u
bin=$1 deck=$2 outdir=$3
mkdir -p "$outdir"
mpiexec -n 4 "$bin" run --deck "$deck" --schedule 1f1b,v-half,v-min -m 8 --json "$outdir/mem.json" --force \
  > "$outdir/run.log" 2>&1 || { tail -n 20 "$outdir/run.log"; echo "FAIL: run exited non-zero"; exit 1; }
python3 - "$outdir/mem.json" <<'PY'
import json, sys
runs = json.load(open(sys.argv[1]))["runs"]
peak = {r["schedule"]: max(k["peak_stored_bytes"] for k in r["ranks"]) for r in runs}
held = {r["schedule"]: max(k["peak_stored_microbatches"] for k in r["ranks"]) for r in runs}
print("peak stored bytes (max over ranks):", peak)
print("peak stored (stage, micro-batch) pairs:", held)
ok = peak["1f1b"] > peak["v-half"] > peak["v-min"]
# 1F1B stores whole-rank micro-batches, the V schedules half-size chunk-micro-batches.
ok = ok and held == {"1f1b": 4, "v-half": 6, "v-min": 4}
print("PASS" if ok else "FAIL: expected 1F1B > V-Half > V-Min in bytes, and 4 / 6 / 4 stored pairs")
sys.exit(0 if ok else 1)
PY
