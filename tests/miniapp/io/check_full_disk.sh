#!/usr/bin/env bash
# check_full_disk.sh MINIPIPE DECK OUTDIR: outputs on a 64 KiB tmpfs (needs root and mount;
# exits 77 = skipped otherwise). A dump that runs out of space, at 1 and at 2 ranks, and the
# schedule tool's and the run's SVG/JSON on a full file system: exit 3, a message naming the file and the OS
# reason, no crash, nothing left on the file system.
set -u
bin=$1 deck=$2 dir=$3
. "$(dirname "$0")/tiny_tmpfs.sh"
mount_tiny_tmpfs "$dir"
xc() { bash "$(dirname "$0")/../expect_code.sh" "$@"; }
empty() { [ -z "$(ls -A "$fs")" ] || { echo "FAIL: left on the file system: $(ls -A "$fs")"; exit 1; }; }

# A dump that cannot fit is refused up front (the size estimate): exit 2, nothing written.
xc 2 "the outputs need about .* but the file system of '$fs' has .* free" -- \
  "$bin" run --deck "$deck" --dump "$fs/d.h5" || exit 1
empty
# A file system that fills while the dump is written (the estimate passed at the start): a 4 MiB
# tmpfs, stage 0's forwards slowed by 2 s each, and a filler that takes every free byte as soon as
# the run has printed its estimate, before the first step can write: exit 3, ENOSPC, nothing left.
big=$dir/big
mkdir -p "$big"
mountpoint -q "$big" && umount "$big"
mount -t tmpfs -o size=4m tmpfs "$big" || { echo "FAIL: cannot mount a second tmpfs"; exit 1; }
trap 'umount "$dir/fs" 2>/dev/null; umount "$dir/big" 2>/dev/null' EXIT
fills_during_run() {  # ranks
  local log=$dir/fill_$1.log
  rm -f "$big/filler"
  MINIPIPE_TEST_DELAY_FORWARD=0:2000000 mpiexec -n "$1" "$bin" run --deck "$deck" --train.steps 2 \
    --dump "$big/d.h5" > "$log" 2>&1 &
  local pid=$! waited=0
  until grep -q "dump size estimate" "$log" 2>/dev/null; do
    kill -0 $pid 2>/dev/null || break
    sleep 0.05
    waited=$((waited + 1))
    [ $waited -lt 1200 ] || { kill $pid; echo "FAIL: no size estimate printed within 60 s"; exit 1; }
  done
  dd if=/dev/zero of="$big/filler" bs=4k 2>/dev/null
  wait $pid
  local rc=$?
  tail -n 5 "$log"
  [ $rc -eq 3 ] || { echo "FAIL: exit code $rc with a full file system during the run, expected 3"; exit 1; }
  grep -Eq "$big/d\.h5\.tmp\.[A-Za-z0-9]{6}: .*No space left on device" "$log" ||
    { echo "FAIL: no message naming the dump's temporary and ENOSPC"; exit 1; }
  rm -f "$big/filler"
  [ -z "$(ls -A "$big")" ] || { echo "FAIL: left on the file system: $(ls -A "$big")"; exit 1; }
}
fills_during_run 1
fills_during_run 2
# A full file system for small text outputs.
dd if=/dev/zero of="$fs/filler" bs=4k 2>/dev/null
xc 3 "cannot write $fs/t\.svg: write to .*No space left on device" -- \
  "$bin" schedule --schedule 1f1b -p 4 -m 64 --svg "$fs/t.svg" || exit 1
xc 3 "cannot write $fs/r\.json: .*No space left on device" -- \
  "$bin" schedule --schedule zb-h1 -p 4 -m 64 --json "$fs/r.json" || exit 1
# The run's own report and timeline: exit 3 naming the file, and no "report:" line.
xc 3 "cannot write $fs/r\.json: .*No space left on device" -- \
  "$bin" run --deck "$deck" --train.steps 1 --json "$fs/r.json" || exit 1
xc 3 "cannot write $fs/t\.svg: .*No space left on device" -- \
  mpiexec -n 2 "$bin" run --deck "$deck" --train.steps 1 --schedule 1f1b --output.svg "$fs/t.svg" || exit 1
rm -f "$fs/filler"
empty
echo PASS
