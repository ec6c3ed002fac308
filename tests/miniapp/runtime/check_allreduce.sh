#!/usr/bin/env bash
# check_allreduce.sh EXPECT BASE MINIPIPE CHECKER DECK REF.h5 OUTDIR P DP SCHEDULE M [flags...]: one run
# of check_dp.sh (DP replicas of a P-rank pipeline, bitwise equal to a reference dump), whose log must
# also match the extended regex EXPECT: the variant of the gradient all-reduce asked for is the one
# that ran (the banner's line, or the bytes per gradient element that show the compact form or its
# fallback). BASE "ref": the reference is REF.h5, the one-rank run (which the reduction as it was
# before the overlap produced too). Otherwise BASE holds flags: the reference is first made by the
# same layout with those flags instead of [flags...] (for runs a test hook takes away from REF.h5).
set -u
expect=$1 base=$2
shift 2
bin=$1 check=$2 deck=$3 ref=$4 outdir=$5 p=$6 dp=$7 schedule=$8 m=$9
shift 9
mkdir -p "$outdir"
if [ "$base" != ref ]; then
  ref="$outdir/base.h5"
  rm -f "$ref"
  # shellcheck disable=SC2086
  mpiexec -n $((p * dp)) "$bin" run --deck "$deck" --schedule "$schedule" -m "$m" --pipeline.dp "$dp" \
    --dump "$ref" --force $base > "$outdir/base.log" 2>&1 || { tail -n 20 "$outdir/base.log"; echo "FAIL: the base run"; exit 1; }
fi
bash "$(dirname "$0")/check_dp.sh" "$bin" "$check" "$deck" "$ref" "$outdir" "$p" "$dp" "$schedule" "$m" "$@" || exit 1
grep -qE "$expect" "$outdir/log.txt" || {
  grep -E '^gradient all-reduce|bytes per gradient element' "$outdir/log.txt"
  echo "FAIL: the log does not show: $expect"
  exit 1
}
echo "PASS: the log shows: $expect"
