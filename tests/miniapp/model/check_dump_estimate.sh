#!/usr/bin/env bash
# check_dump_estimate.sh MINIPIPE DECK OUTDIR: the up-front dump size estimate is an
# upper bound of the real file within 25% (plus 128 KiB of fixed overhead) at every dump level and
# two step counts, so the refusal of a dump that cannot fit (bad_dump_cannot_fit) refuses what would
# not fit and little else.
set -u
bin=$1 deck=$2 dir=$3
rm -rf "$dir"; mkdir -p "$dir"
fail() { echo "FAIL: $*"; exit 1; }
for level in loss grads full kernels; do
  for steps in 1 4; do
    f=$dir/${level}_$steps.h5
    est=$("$bin" run --deck "$deck" --train.steps $steps --output.dump_level $level --dump "$f" |
      sed -n 's/^dump size estimate: \([0-9]*\) bytes.*/\1/p')
    [ -n "$est" ] || fail "no estimate printed at level $level"
    real=$(stat -c %s "$f")
    echo "level $level, $steps steps: estimate $est bytes, file $real bytes"
    [ "$est" -ge "$real" ] || fail "the estimate is below the real size"
    [ "$est" -le $((real * 5 / 4 + 131072)) ] || fail "the estimate is over 1.25 x the real size + 128 KiB"
  done
done
echo PASS
