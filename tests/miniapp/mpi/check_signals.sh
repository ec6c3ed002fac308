#!/usr/bin/env bash
# check_signals.sh MINIPIPE DECK OUTDIR MODE: a 2-rank run writing a dump is hit while its
# temporary exists. MODE term: SIGTERM to mpiexec; kill9: SIGKILL to rank 1. Every rank must
# be gone within 30 s, mpiexec must exit non-zero, no file may carry the dump's name, and no
# temporary may be left (rank 0 removes it in its SIGTERM handler).
set -u
bin=$1 deck=$2 dir=$3 mode=$4
rm -rf "$dir"; mkdir -p "$dir"
f=$dir/d.h5
# Open MPI's mpiexec forwards SIGTERM and SIGKILLs the ranks 1 s later (odls_base_sigkill_timeout);
# on a loaded 2-core machine rank 0's handler has been seen not to run within that second. The
# test is about what the handler does, so it gives the ranks 3 s (mpiexec waits that long even when
# the ranks are gone, so more costs suite time).
export OMPI_MCA_odls_base_sigkill_timeout=3
# dump_level loss: the run has a dump's temporary from its start, and the launch's disk check
# (which sizes the whole 100000 steps) asks for 0.4 GB free where the full level asked for 43 GiB.
mpiexec -n 2 "$bin" run --deck "$deck" --train.steps 100000 --dump "$f" --output.dump_level loss \
  >"$dir/run.log" 2>&1 &
mp=$!
for _ in $(seq 300); do ls "$dir" | grep -q '^d\.h5\.tmp' && break; sleep 0.1; done
ls "$dir" | grep -q '^d\.h5\.tmp' || { echo "FAIL: no temporary appeared"; kill -9 $mp; exit 1; }
sleep 0.5
ranks=$(pgrep -f -- "$bin run --deck $deck --train.steps 100000 --dump $f" | grep -v "^$mp\$")
rank1=""
for p in $ranks; do
  tr '\0' '\n' < /proc/$p/environ 2>/dev/null | grep -qx 'OMPI_COMM_WORLD_RANK=1' && rank1=$p
done
echo "mpiexec $mp, ranks: $(echo $ranks), rank 1: $rank1"
case $mode in
  term) kill -TERM $mp ;;
  kill9) [ -n "$rank1" ] || { echo "FAIL: rank 1 not found"; kill -9 $mp; exit 1; }; kill -9 "$rank1" ;;
esac
for _ in $(seq 300); do kill -0 $mp 2>/dev/null || break; sleep 0.1; done
if kill -0 $mp 2>/dev/null; then echo "FAIL: mpiexec still running after 30 s"; kill -9 $mp $ranks; exit 1; fi
wait $mp; rc=$?
tail -n 6 "$dir/run.log"
echo "mpiexec exit code: $rc"
[ $rc -ne 0 ] || { echo "FAIL: exit code 0"; exit 1; }
# A rank may take a moment after mpiexec to be reaped; a zombie counts as gone.
alive() { [ -e /proc/$1 ] && ! grep -q '^[0-9]* ([^)]*) Z' /proc/$1/stat 2>/dev/null; }
for p in $ranks; do
  for _ in $(seq 100); do alive "$p" || break; sleep 0.1; done
  alive "$p" && { echo "FAIL: rank process $p survived"; kill -9 "$p"; exit 1; }
done
[ -e "$f" ] && { echo "FAIL: a file carries the dump's name"; exit 1; }
ls "$dir" | grep -q '^d\.h5\.tmp' && { echo "FAIL: temporary left: $(ls "$dir")"; exit 1; }
echo PASS
