#!/usr/bin/env bash
# check_memory.sh MINIPIPE DECK OUTDIR: on 2 ranks with m = 8, rank 0 stores 8 micro-batches
# under GPipe and at most p = 2 under 1F1B, by the run's own accounting (JSON report).
set -u
bin=$1 deck=$2 outdir=$3
mkdir -p "$outdir"
mpiexec -n 2 "$bin" run --deck "$deck" --schedule gpipe,1f1b -m 8 --json "$outdir/mem.json" --force \
  || { echo "FAIL: run exited non-zero"; exit 1; }
# One rank-0 entry per run, in sweep order: gpipe then 1f1b.
peaks=($(grep -oE '"rank": 0, [^}]*"peak_stored_microbatches": [0-9]+' "$outdir/mem.json" | grep -oE '[0-9]+$'))
bytes=($(grep -oE '"rank": 0, [^}]*"peak_stored_bytes": [0-9.e+]+' "$outdir/mem.json" | grep -oE '[0-9.e+]+$'))
echo "rank 0 peak stored micro-batches: gpipe ${peaks[0]:-?} (bytes ${bytes[0]:-?}), 1f1b ${peaks[1]:-?} (bytes ${bytes[1]:-?})"
[ "${peaks[0]:-0}" = 8 ] || { echo "FAIL: GPipe should store m = 8"; exit 1; }
[ "${peaks[1]:-99}" -le 2 ] || { echo "FAIL: 1F1B should store at most p = 2"; exit 1; }
awk -v g="${bytes[0]}" -v f="${bytes[1]}" 'BEGIN { exit !(g > 2 * f) }' || { echo "FAIL: GPipe should store more than twice the bytes of 1F1B"; exit 1; }
echo PASS
