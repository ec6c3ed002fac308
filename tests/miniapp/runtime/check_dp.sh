#!/usr/bin/env bash
# check_dp.sh MINIPIPE CHECKER DECK REF.h5 OUTDIR P DP SCHEDULE M: runs SCHEDULE with DP
# data-parallel replicas of a P-rank pipeline (mpiexec -n P*DP); the dump must hold every
# dataset docs/design.md §5 promises (CHECKER --schema-only) and equal the one-rank reference bit for bit
# (minipipe compare: same datasets, same bit patterns).
set -u
bin=$1 check=$2 deck=$3 ref=$4 outdir=$5 p=$6 dp=$7 schedule=$8 m=$9
shift 9
mkdir -p "$outdir"
out="$outdir/run.h5"
rm -f "$out"
set -o pipefail
mpiexec -n $((p * dp)) "$bin" run --deck "$deck" --schedule "$schedule" -m "$m" --pipeline.dp "$dp" \
  --dump "$out" --force "$@" | tee "$outdir/log.txt" || { echo "FAIL: run exited non-zero"; exit 1; }
grep -q "p = $p, dp = $dp ($((p * dp)) ranks)" "$outdir/log.txt" || { echo "FAIL: banner lacks p x dp"; exit 1; }
[ "$dp" -eq 1 ] || grep -q "replica $((dp - 1)): ranks" "$outdir/log.txt" || { echo "FAIL: no replica lines"; exit 1; }
"$check" --schema-only "$out" > "$outdir/schema.txt" || { cat "$outdir/schema.txt"; echo "FAIL: schema"; exit 1; }
"$bin" compare "$ref" "$out" > "$outdir/compare.txt"
rc=$?
tail -n 3 "$outdir/compare.txt"
[ $rc -eq 0 ] || { echo "FAIL: compare exited $rc"; exit 1; }
h5diff --exclude-path /meta "$ref" "$out" > /dev/null || { echo "FAIL: h5diff differs"; exit 1; }
echo "PASS: p=$p dp=$dp $schedule m=$m bitwise identical to the one-rank reference"
