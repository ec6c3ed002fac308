#!/usr/bin/env bash
# check_fast.sh MINIPIPE DECK OUTDIR: fast mode (vendor GEMM, libm) against deterministic mode on
# 2 ranks: every dataset within 1e-4 relative in the max norm (max|fast - det| <= 1e-4 * max|det|
# per dataset; see CompareOptions::norm_rtol). SGD, because AdamW divides by sqrt(v): a gradient
# that is zero in exact arithmetic (the key bias's) becomes a full-size step of either sign from
# rounding noise, so updated parameters after AdamW are not a well-conditioned comparison.
set -u
bin=$1 deck=$2 outdir=$3
mkdir -p "$outdir"
for mode in deterministic fast; do
  mpiexec -n 2 "$bin" run --deck "$deck" --schedule 1f1b -m 2 --train.mode $mode --train.optimizer sgd \
    --train.lr 0.1 --dump "$outdir/$mode.h5" --force | tail -n 3 || { echo "FAIL: $mode run exited non-zero"; exit 1; }
done
"$bin" compare --norm-rtol 1e-4 "$outdir/deterministic.h5" "$outdir/fast.h5" | tail -n 5
exit "${PIPESTATUS[0]}"
