#!/usr/bin/env bash
# check_launch_shapes_run.sh MPIEXEC MINIPIPE DECK OUTDIR: whole runs on the device path at a GPU
# build's launch shapes (every team kernel on the simulated GPU executor, MINIPIPE_TEST_TEAM_SIM;
# kernels/team_sim.hpp), p = 1 with the threads of each team in order and p = 2 in reverse order,
# 2 steps with a full dump, must dump the bits of the host path's run (p = 1).
set -uo pipefail
mpiexec=$1 bin=$2 deck=$3 outdir=$4
rm -rf "$outdir" && mkdir -p "$outdir" || exit 1
run() {  # NAME RANKS SIM PATH
  local name=$1 np=$2 sim=$3 path=$4 sched=sequential m=1
  [ "$np" -gt 1 ] && sched=1f1b m=4
  MINIPIPE_TEST_TEAM_SIM=$sim "$mpiexec" -n "$np" "$bin" run --deck "$deck" --schedule $sched -m $m \
    --train.steps 2 --train.kernel_path "$path" --dump "$outdir/$name.h5" > "$outdir/$name.log" 2>&1
  local rc=$?
  [ $rc -eq 0 ] || { tail -n 20 "$outdir/$name.log"; echo "FAIL: run $name exited $rc"; exit 1; }
  grep '^step' "$outdir/$name.log" | sed "s/^/$name: /"
}
run host_p1 1 "" host
run gpu_shapes_p1 1 gpu device
run gpu_shapes_reverse_p2 2 gpu-reverse device
status=0
for name in gpu_shapes_p1 gpu_shapes_reverse_p2; do
  "$bin" compare "$outdir/host_p1.h5" "$outdir/$name.h5" > "$outdir/compare_$name.log"
  rc=$?
  tail -n 2 "$outdir/compare_$name.log"
  if command -v h5diff > /dev/null; then
    h5diff --exclude-path /meta "$outdir/host_p1.h5" "$outdir/$name.h5" > "$outdir/h5diff_$name.log" 2>&1 || rc=1
  fi
  if [ $rc -eq 0 ]; then echo "PASS: $name dumps the host path's bits"; else echo "FAIL: $name differs (rc $rc)"; status=1; fi
done
exit $status
