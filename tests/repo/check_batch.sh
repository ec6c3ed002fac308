#!/usr/bin/env bash
# check_batch.sh SOURCE_DIR MINIPIPE MPIEXEC OUTDIR: runs the Slurm and Flux scripts' launch line
# locally through mpiexec on 2 ranks and checks each dump bitwise against a one-rank run; checks
# the srun / flux lines they would use on a cluster (dry run) and that a bad setting is refused.
# A second launch into the same MP_OUT is refused (exit 2) before it truncates the first
# one's log, and SIGTERM / SIGINT to a batch script exits 128 + the signal, not mpiexec's 1.
set -u
src=$1 bin=$2 mpiexec=$3 out=$4
deck=$src/inputs/tiny.toml
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$out" && mkdir -p "$out"
"$bin" run --deck "$deck" --train.steps 2 --schedule sequential -m 1 --dump "$out/ref.h5" >/dev/null ||
  fail "reference run"
# The log is never written through a symlink: a dangling link at MP_OUT/minipipe.log is refused
# (exit 2) before anything runs, its target not created; --force replaces the link itself, and a
# target that exists is left as it was.
mkdir -p "$out/link"
ln -s "$out/link_target.log" "$out/link/minipipe.log"
MINIPIPE_LAUNCHER=mpiexec MPIEXEC=$mpiexec MP_BIN=$bin MP_RANKS_PER_NODE=2 MP_OUT=$out/link \
  bash "$src/scripts/batch/slurm_cpu.sh" "$deck" --train.steps 1 >"$out/link.log" 2>&1
rc=$?
cat "$out/link.log"
[ -e "$out/link_target.log" ] && fail "the batch script wrote its log through a dangling symlink"
[ $rc -eq 2 ] || fail "a dangling symlink at MP_OUT/minipipe.log: exit $rc, expected 2"
grep -q "minipipe.log exists (a symlink to .*refusing to overwrite it without --force" "$out/link.log" ||
  fail "the refusal does not say the log's name is a symlink"
echo "keep" >"$out/link_target.log"
MINIPIPE_LAUNCHER=mpiexec MPIEXEC=$mpiexec MP_BIN=$bin MP_RANKS_PER_NODE=2 MP_OUT=$out/link \
  bash "$src/scripts/batch/slurm_cpu.sh" "$deck" --train.steps 1 --force >"$out/link_force.log" 2>&1 ||
  { cat "$out/link_force.log"; fail "--force over a symlinked log exited $?"; }
[ "$(cat "$out/link_target.log")" = keep ] || fail "--force wrote through the symlink into its target"
[ -L "$out/link/minipipe.log" ] && fail "--force left the symlink in place"
grep -q '^verification: PASS' "$out/link/minipipe.log" || fail "--force: the new log has no verdict"
echo "symlink at MP_OUT/minipipe.log: refused without --force, replaced (target untouched) with it"
for script in slurm_cpu flux_cpu slurm_gpu flux_gpu; do
  MINIPIPE_LAUNCHER=mpiexec MPIEXEC=$mpiexec MP_BIN=$bin MP_RANKS_PER_NODE=2 MP_OUT=$out/$script MP_DUMP_LEVEL=full \
    bash "$src/scripts/batch/$script.sh" "$deck" --train.steps 2 --schedule 1f1b -m 2 >"$out/$script.log" 2>&1 ||
    { cat "$out/$script.log"; fail "$script.sh exited $?"; }
  grep -m1 '^launch: ' "$out/$script.log"
  for f in dump.h5 report.json timeline.svg trace.json minipipe.log; do
    [ -s "$out/$script/$f" ] || fail "$script.sh left no $f in MP_OUT"
  done
  h5diff --exclude-path /meta "$out/ref.h5" "$out/$script/dump.h5" >/dev/null ||
    fail "$script.sh: the 2-rank 1F1B dump differs from the one-rank run"
  echo "$script.sh: 2 ranks through mpiexec, dump bitwise equal to the one-rank run"
done
grep -q "bind_gpu.sh" "$out/slurm_gpu.log" || fail "slurm_gpu.sh under mpiexec does not bind GPUs by local rank"

line=$(MP_DRY_RUN=1 MINIPIPE_LAUNCHER=srun MP_BIN=$bin MP_NODES=2 MP_RANKS_PER_NODE=4 MP_CPUS_PER_RANK=16 \
  MP_CUDA_AWARE=on MP_OUT=$out/dry bash "$src/scripts/batch/slurm_gpu.sh" "$deck")
echo "$line"
for want in "srun --nodes=2 --ntasks=8 --ntasks-per-node=4 --cpus-per-task=16 --cpu-bind=cores --gpus-per-task=1 --gpu-bind=closest" \
  "--pipeline.cuda_aware on" "OMP_NUM_THREADS=16" "OMPI_MCA_pml=ucx" "MPICH_GPU_SUPPORT_ENABLED=1" "--output.dump $out/dry/dump.h5"; do
  echo "$line" | grep -qF -- "$want" || fail "slurm_gpu.sh dry run lacks '$want'"
done
line=$(MP_DRY_RUN=1 MINIPIPE_LAUNCHER=flux MP_BIN=$bin MP_NODES=2 MP_RANKS_PER_NODE=4 MP_OUT=$out/dry \
  bash "$src/scripts/batch/flux_gpu.sh" "$deck")
echo "$line"
echo "$line" | grep -qF -- "flux run --nodes=2 --ntasks=8 --cores-per-task=1 -o cpu-affinity=per-task --gpus-per-task=1 -o gpu-affinity=per-task" ||
  fail "flux_gpu.sh dry run has the wrong flux line"
[ -e "$out/dry" ] && fail "a dry run created MP_OUT"
MINIPIPE_LAUNCHER=aprun MP_BIN=$bin MP_OUT=$out/bad bash "$src/scripts/batch/slurm_cpu.sh" "$deck" >"$out/bad.log" 2>&1
rc=$?
if [ $rc -ne 2 ] || ! grep -q "allowed: srun | flux | mpiexec" "$out/bad.log"; then
  cat "$out/bad.log"
  fail "unknown launcher: exit $rc"
fi
# The first launch's log (with its FOM and verdict) survives a second launch into MP_OUT.
log=$out/slurm_cpu/minipipe.log
before=$(cksum < "$log")
grep -q '^verification: PASS' "$log" || fail "the first launch's log has no verdict"
MINIPIPE_LAUNCHER=mpiexec MPIEXEC=$mpiexec MP_BIN=$bin MP_RANKS_PER_NODE=2 MP_OUT=$out/slurm_cpu \
  bash "$src/scripts/batch/slurm_cpu.sh" "$deck" --train.steps 2 >"$out/again.log" 2>&1
rc=$?
cat "$out/again.log"
[ $rc -eq 2 ] || fail "a second launch into the same MP_OUT exited $rc, expected 2"
grep -q "minipipe.log exists .*refusing to overwrite it without --force" "$out/again.log" ||
  fail "the refusal does not name the log"
[ "$(cksum < "$log")" = "$before" ] || fail "the first launch's log was changed"

# SIGTERM and SIGINT to the batch script: passed on to the run, exit 128 + signal.
for sig in TERM INT; do
  o=$out/signal_$sig
  # Job control on: a background job of a script would otherwise start with SIGINT ignored (as
  # under a terminal's Ctrl-C the script is in the foreground and gets it).
  set -m
  MINIPIPE_LAUNCHER=mpiexec MPIEXEC=$mpiexec MP_BIN=$bin MP_RANKS_PER_NODE=2 MP_OUT=$o OMPI_MCA_odls_base_sigkill_timeout=3 \
    bash "$src/scripts/batch/slurm_cpu.sh" "$deck" --train.steps 100000 >"$out/signal_$sig.log" 2>&1 &
  pid=$!
  set +m
  for _ in $(seq 300); do grep -q '^step' "$o/minipipe.log" 2>/dev/null && break; sleep 0.1; done
  grep -q '^step' "$o/minipipe.log" 2>/dev/null || { kill -9 $pid; fail "SIG$sig: the run never started"; }
  kill -$sig $pid
  for _ in $(seq 300); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
  kill -0 $pid 2>/dev/null && { kill -9 $pid; fail "SIG$sig: the batch script still runs after 30 s"; }
  wait $pid
  rc=$?
  tail -n 3 "$out/signal_$sig.log"
  want=$((128 + $(kill -l $sig)))
  [ $rc -eq $want ] || fail "SIG$sig to the batch script: exit $rc, expected $want"
  for _ in $(seq 100); do pgrep -f -- "$bin run --deck $deck .*--output.dump $o/" > /dev/null || break; sleep 0.1; done
  pgrep -fa -- "$bin run --deck $deck .*--output.dump $o/" && fail "SIG$sig: a rank survived 10 s after the script"
  echo "SIG$sig to slurm_cpu.sh: exit $rc"
done
echo PASS
