#!/usr/bin/env bash
# check_schedule.sh MINIPIPE DECK REF.h5 OUTDIR P SCHEDULE [extra run args...]:
# runs SCHEDULE on P ranks for every m in {1,2,4,8} it accepts (one launch, a sweep) and checks
# each dump against the one-rank sequential reference with h5diff --exclude-path /meta.
set -u
bin=$1 deck=$2 ref=$3 outdir=$4 p=$5 schedule=$6; shift 6
mkdir -p "$outdir"
ms=()
for m in 1 2 4 8; do
  "$bin" schedule --schedule "$schedule" -p "$p" -m "$m" >/dev/null 2>&1 && ms+=("$m")
done
[ ${#ms[@]} -gt 0 ] || { echo "FAIL: $schedule accepts no m in {1,2,4,8} at p=$p"; exit 1; }
mlist=$(IFS=,; echo "${ms[*]}")
echo "schedule $schedule, p=$p, m in {$mlist}"
rm -f "$outdir"/run_*.h5
mpiexec -n "$p" "$bin" run --deck "$deck" --schedule "$schedule" --pipeline.microbatches "$mlist" \
  --pipeline.chunks 0 --dump "$outdir/run.h5" --force "$@" || { echo "FAIL: run exited $?"; exit 1; }
status=0
for m in "${ms[@]}"; do
  f="$outdir/run_${schedule}_m${m}.h5"
  [ ${#ms[@]} -eq 1 ] && f="$outdir/run.h5"
  if h5diff --exclude-path /meta "$ref" "$f" >/dev/null; then
    echo "m=$m: bitwise identical to the one-rank reference"
  else
    echo "FAIL m=$m: differs from the reference:"; "$bin" compare "$ref" "$f" | tail -n 15; status=1
  fi
done
exit $status
