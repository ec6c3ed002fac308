#!/usr/bin/env bash
# check_scale_full_disk.sh MINIPIPE DECK CLUSTER OUTDIR: `scale` writes its two SVGs all or nothing.
# On a 64 KiB tmpfs with room for one SVG but not two (the approach of check_full_disk.sh; needs
# root and mount, exits 77 = skipped otherwise): exit 3 naming the file and ENOSPC, and neither SVG
# nor a temporary left behind, so a rerun is not refused for an output that half exists.
set -u
bin=$1 deck=$2 cluster=$3 dir=$4
. "$(dirname "$0")/tiny_tmpfs.sh"
mount_tiny_tmpfs "$dir"
args=(scale --deck "$deck" --cluster "$cluster" --devices 8)
# Each SVG is one page or two: measure them, then leave room for the first only.
"$bin" "${args[@]}" --strong-svg "$fs/s.svg" --weak-svg "$fs/w.svg" > "$dir/sizes.log" 2>&1 ||
  { cat "$dir/sizes.log"; echo "FAIL: scale with room for both SVGs"; exit 1; }
pages() { echo $(( ($(stat -c %s "$1") + 4095) / 4096 )); }
first=$(pages "$fs/s.svg")
rm -f "$fs/s.svg" "$fs/w.svg"
free=$(df -B4096 --output=avail "$fs" | tail -n 1 | tr -d ' ')
dd if=/dev/zero of="$fs/filler" bs=4096 count=$((free - first)) 2>/dev/null
bash "$(dirname "$0")/../expect_code.sh" 3 "cannot write $fs/w\.svg.*No space left on device" -- \
  "$bin" "${args[@]}" --strong-svg "$fs/s.svg" --weak-svg "$fs/w.svg" || exit 1
left=$(ls -A "$fs" | grep -v '^filler$')
[ -z "$left" ] || { echo "FAIL: left on the file system: $left"; exit 1; }
# With the space back, the same command (no --force) writes both.
rm -f "$fs/filler"
"$bin" "${args[@]}" --strong-svg "$fs/s.svg" --weak-svg "$fs/w.svg" > "$dir/rerun.log" 2>&1 ||
  { cat "$dir/rerun.log"; echo "FAIL: the rerun without --force was refused"; exit 1; }
grep -q '</svg>' "$fs/s.svg" && grep -q '</svg>' "$fs/w.svg" || { echo "FAIL: rerun's SVGs incomplete"; exit 1; }
echo "PASS"
