#!/usr/bin/env bash
# check_kernel_path.sh MPIEXEC MINIPIPE DECK OUTDIR: a whole run on 2 ranks with the deterministic
# kernels' device path (train.kernel_path = device) must dump the same bits as the host path.
set -uo pipefail
mpiexec=$1 bin=$2 deck=$3 outdir=$4
rm -rf "$outdir" && mkdir -p "$outdir" || exit 1
for path in host device; do
  "$mpiexec" -n 2 "$bin" run --deck "$deck" --schedule 1f1b -m 4 --train.kernel_path $path \
    --dump "$outdir/$path.h5" > "$outdir/$path.log" 2>&1
  rc=$?
  [ $rc -eq 0 ] || { tail -n 20 "$outdir/$path.log"; echo "FAIL: kernel_path=$path run exited $rc"; exit 1; }
  grep '^step' "$outdir/$path.log"
done
"$bin" compare "$outdir/host.h5" "$outdir/device.h5" > "$outdir/compare.log"
rc=$?
tail -n 3 "$outdir/compare.log"
[ $rc -eq 0 ] && echo "PASS: device-path dump equals the host-path dump bitwise"
exit $rc
