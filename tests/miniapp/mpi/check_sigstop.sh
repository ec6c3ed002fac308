#!/usr/bin/env bash
# check_sigstop.sh MINIPIPE DECK OUTDIR: rank 1 of a 2-rank run is stopped (SIGSTOP). With
# pipeline.timeout = 5, rank 0 must name what it waits for and from whom, and the job must end
# non-zero within 60 s with no dump under the final name.
set -u
bin=$1 deck=$2 dir=$3
rm -rf "$dir"; mkdir -p "$dir"
f=$dir/d.h5
# dump_level loss: as in check_signals.sh, the launch's disk check then asks for 0.4 GB, not 43 GiB.
mpiexec -n 2 "$bin" run --deck "$deck" --schedule 1f1b -m 2 --train.steps 100000 --pipeline.timeout 5 \
  --dump "$f" --output.dump_level loss >"$dir/run.log" 2>&1 &
mp=$!
for _ in $(seq 300); do ls "$dir" | grep -q '^d\.h5\.tmp' && break; sleep 0.1; done
sleep 0.5
rank1=""
for p in $(pgrep -f -- "$bin run --deck $deck --schedule 1f1b"); do
  tr '\0' '\n' < /proc/$p/environ 2>/dev/null | grep -qx 'OMPI_COMM_WORLD_RANK=1' && rank1=$p
done
[ -n "$rank1" ] || { echo "FAIL: rank 1 not found"; kill -9 $mp; exit 1; }
kill -STOP "$rank1"
for _ in $(seq 600); do kill -0 $mp 2>/dev/null || break; sleep 0.1; done
if kill -0 $mp 2>/dev/null; then
  echo "FAIL: still running 60 s after SIGSTOP of rank 1"; kill -CONT "$rank1"; kill -9 "$rank1" $mp; exit 1
fi
wait $mp; rc=$?
tail -n 8 "$dir/run.log"
[ $rc -ne 0 ] || { echo "FAIL: exit code 0"; exit 1; }
# A point-to-point wait names its peer (rank 1); a collective names what it waited for.
grep -Eq "rank 0 waited 5 s for .*(from rank 1|every rank|rank 1)" "$dir/run.log" ||
  { echo "FAIL: the wait and the peer are not named"; exit 1; }
[ -e "$f" ] && { echo "FAIL: a file carries the dump's name"; exit 1; }
ls "$dir" | grep -q '^d\.h5\.tmp' && { echo "FAIL: temporary left"; exit 1; }
echo PASS
