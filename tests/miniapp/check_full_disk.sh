#!/usr/bin/env bash
# check_full_disk.sh MINIPIPE DECK OUTDIR: outputs on a 64 KiB tmpfs (needs root and mount;
# exits 77 = skipped otherwise). A dump that runs out of space, at 1 and at 2 ranks, and the
# schedule tool's and the run's SVG/JSON on a full file system: exit 3, a message naming the file and the OS
# reason, no crash, nothing left on the file system.
set -u
bin=$1 deck=$2 dir=$3
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root to mount a tmpfs"; exit 77; }
mkdir -p "$dir/fs"
mountpoint -q "$dir/fs" && umount "$dir/fs"
mount -t tmpfs -o size=64k tmpfs "$dir/fs" 2>/dev/null || { echo "SKIP: cannot mount a tmpfs here"; exit 77; }
trap 'umount "$dir/fs" 2>/dev/null' EXIT
fs=$dir/fs
xc() { bash "$(dirname "$0")/expect_code.sh" "$@"; }
empty() { [ -z "$(ls -A "$fs")" ] || { echo "FAIL: left on the file system: $(ls -A "$fs")"; exit 1; }; }

xc 3 "cannot write rows .*$fs/d\.h5\.tmp\.[A-Za-z0-9]{6}: .*No space left on device" -- \
  "$bin" run --deck "$deck" --dump "$fs/d.h5" || exit 1
empty
xc 3 "$fs/d\.h5\.tmp\.[A-Za-z0-9]{6}: .*No space left on device" -- \
  mpiexec -n 2 "$bin" run --deck "$deck" --dump "$fs/d.h5" || exit 1
empty
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
