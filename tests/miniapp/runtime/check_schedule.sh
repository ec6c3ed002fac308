#!/usr/bin/env bash
# check_schedule.sh MINIPIPE CHECKER DECK REF.h5 OUTDIR P SCHEDULE [extra run args...]:
# runs SCHEDULE on P ranks for every m in $MINIPIPE_TEST_MS (default 1 2 4 8) it accepts with
# $MINIPIPE_TEST_V chunks (default 0: the schedule's own) in one launch (a sweep) into a fresh
# OUTDIR; each dump must hold every dataset docs/design.md §5 promises (CHECKER --schema-only) and be bit
# for bit the one-rank sequential reference (`minipipe compare`: bit patterns, so -0 != +0 and
# NaN payloads count, and a dataset in one file only is a difference).
set -uo pipefail
bin=$1 check=$2 deck=$3 ref=$4 outdir=$5 p=$6 schedule=$7; shift 7
rm -rf "$outdir" && mkdir -p "$outdir" || exit 1
candidates=${MINIPIPE_TEST_MS:-1 2 4 8} v=${MINIPIPE_TEST_V:-0}
ms=()
for m in $candidates; do
  "$bin" schedule --schedule "$schedule" -p "$p" -m "$m" -v "$v" >/dev/null 2>&1 && ms+=("$m")
done
[ ${#ms[@]} -gt 0 ] || { echo "FAIL: $schedule accepts no m in {$candidates} at p=$p, v=$v"; exit 1; }
mlist=$(IFS=,; echo "${ms[*]}")
echo "schedule $schedule, p=$p, v=$v, m in {$mlist}"
mpiexec -n "$p" "$bin" run --deck "$deck" --schedule "$schedule" --pipeline.microbatches "$mlist" \
  --pipeline.chunks "$v" --dump "$outdir/run.h5" --force "$@" > "$outdir/run.log" 2>&1
rc=$?
[ $rc -eq 0 ] || { tail -n 30 "$outdir/run.log"; echo "FAIL: run exited $rc"; exit 1; }
status=0
for m in "${ms[@]}"; do
  f="$outdir/run_${schedule}_m${m}.h5"
  [ ${#ms[@]} -eq 1 ] && f="$outdir/run.h5"
  "$check" --schema-only "$f" > "$outdir/schema_m$m.log" || { cat "$outdir/schema_m$m.log"; status=1; continue; }
  if "$bin" compare "$ref" "$f" > "$outdir/compare_m$m.log"; then
    echo "m=$m: schema complete; bitwise identical to the one-rank reference ($(grep summary "$outdir/compare_m$m.log" | cut -d';' -f1))"
  else
    echo "FAIL m=$m: differs from the reference:"; tail -n 15 "$outdir/compare_m$m.log"; status=1
  fi
done
exit $status
