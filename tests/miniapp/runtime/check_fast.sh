#!/usr/bin/env bash
# check_fast.sh MINIPIPE DECK OUTDIR: fast mode against deterministic mode on 2 ranks, once with each
# fast-mode GEMM (train.fast_gemm = auto, which is gemm_det on a host with its SIMD microkernel, and
# blas, the vendor BLAS through Kokkos Kernels): every dataset within 5e-6 relative in the max norm
# (max|fast - det| <= 5e-6 * max|det| per dataset; see CompareOptions::norm_rtol). Measured on this
# deck: 6.4e-7 (OpenBLAS 0.3.21, x86-64), so the tolerance leaves a margin of about 8x for other BLAS
# kernels and libm versions. SGD, because AdamW divides by sqrt(v): a gradient that is zero in exact
# arithmetic (the key bias's) becomes a full-size step of either sign from rounding noise, so updated
# parameters after AdamW are not a well-conditioned comparison (the reference check covers fast AdamW).
set -uo pipefail
bin=$1 deck=$2 outdir=$3
rm -rf "$outdir" && mkdir -p "$outdir" || exit 1
run() {  # name, extra flags...
  local name=$1
  shift
  mpiexec -n 2 "$bin" run --deck "$deck" --schedule 1f1b -m 2 --train.optimizer sgd --train.lr 0.1 "$@" \
    --dump "$outdir/$name.h5" > "$outdir/$name.log" 2>&1
  local rc=$?
  [ $rc -eq 0 ] || { tail -n 20 "$outdir/$name.log"; echo "FAIL: $name run exited $rc"; exit 1; }
  grep '^step' "$outdir/$name.log"
}
run deterministic --train.mode deterministic
status=0
for gemm in auto blas; do
  run "fast_$gemm" --train.mode fast --train.fast_gemm $gemm
  # The run names the GEMM it ran: BLAS when asked for, gemm_det or BLAS under auto.
  want='^GEMM: (miniPipe gemm_det|KokkosBlas)'
  [ $gemm = blas ] && want='^GEMM: KokkosBlas'
  grep -qE "$want" "$outdir/fast_$gemm.log" || { grep '^GEMM' "$outdir/fast_$gemm.log"; echo "FAIL: $gemm ran another GEMM"; exit 1; }
  "$bin" compare --norm-rtol 5e-6 "$outdir/deterministic.h5" "$outdir/fast_$gemm.h5" > "$outdir/compare_$gemm.log"
  rc=$?
  echo "fast_gemm = $gemm:"
  tail -n 5 "$outdir/compare_$gemm.log"
  grep -qE ' [1-9][0-9]* within tolerance' "$outdir/compare_$gemm.log" ||
    { echo "FAIL: fast mode ($gemm) gave the same bits as deterministic mode"; exit 1; }
  [ $rc -eq 0 ] || status=$rc
done
exit $status
