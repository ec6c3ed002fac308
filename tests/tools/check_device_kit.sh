#!/usr/bin/env bash
# The device kit end to end on this CPU: scripts/device_kit.sh packs the host build, the archive is
# unpacked elsewhere, and its run.sh runs with every system copy of a library the kit packs (and
# the system's MPI tree, launcher and PMIx) hidden in a private mount namespace, so a library the
# kit forgot, or an MPI that does not relocate, fails the test.
#   check_device_kit.sh REPO BUILD_DIR OUT_DIR
set -euo pipefail
repo=$1 build=$2 out=$3
rm -rf "$out"
mkdir -p "$out"
fail() { echo "check_device_kit: FAIL: $*" >&2; exit 1; }

# Bad input is refused with the key and what is allowed.
if bash "$repo/scripts/device_kit.sh" "$build" "$out/x" --max-mib ten 2> "$out/bad.txt"; then fail "--max-mib ten was accepted"; fi
grep -q -- "--max-mib needs a whole number" "$out/bad.txt" || fail "no clear message for --max-mib ten: $(cat "$out/bad.txt")"

bash "$repo/scripts/device_kit.sh" "$build" "$out/made" --cpu-build "$build" | tee "$out/pack.txt"
archive=$out/made/minipipe-kit.tar.xz
[[ -f $archive ]] || fail "no archive"
bytes=$(stat -c %s "$archive")
((bytes <= 60 * 1048576)) || fail "the kit is $bytes bytes, over 60 MiB"
mkdir -p "$out/unpacked"
tar -C "$out/unpacked" -xJf "$archive"
kit=$out/unpacked/minipipe-kit
rm -rf "$out/made/minipipe-kit"  # only the archive's copy may be used from here on

# Hide the system's copies: every library the kit carries, Open MPI's and PMIx's trees, HDF5's
# tools, the launcher. A private mount namespace keeps this to the test's own processes.
hide=$out/hide.sh
{
  echo "set -e"
  for lib in "$kit"/lib/*; do
    for dir in /usr/lib/x86_64-linux-gnu /lib/x86_64-linux-gnu /usr/lib64 /usr/lib; do
      sys=$dir/$(basename "$lib")
      [[ -e $sys ]] && echo "mount --bind /dev/null '$(readlink -f "$sys")'"
    done
  done
  for d in /usr/lib/x86_64-linux-gnu/openmpi /usr/lib/x86_64-linux-gnu/pmix2 /usr/share/openmpi /etc/openmpi; do
    [[ -d $d ]] && echo "mount -t tmpfs none '$d'"
  done
  for b in mpiexec orterun orted h5diff; do
    p=$(command -v "$b" || true)
    [[ -n $p ]] && echo "mount --bind /dev/null '$(readlink -f "$p")'"
  done
  echo 'exec env -i PATH=/usr/bin:/bin HOME=/tmp "$@"'
} | awk '!seen[$0]++' > "$hide"
if ! unshare -m true 2> /dev/null; then
  fail "unshare -m is not permitted here; the kit cannot be checked with the system libraries hidden"
fi
rc=0
unshare -m bash "$hide" bash "$kit/run.sh" "$out/result" --timing-deck tiny --steps 2 --timeout 120 || rc=$?
[[ -f $out/result/kit_result.json ]] || fail "run.sh wrote no kit_result.json (exit $rc)"
cat "$out/result/kit_result.json"
[[ $rc -eq 0 ]] || fail "run.sh exited $rc"
n=$(grep -o '"verdict": "IDENTICAL"' "$out/result/kit_result.json" | wc -l)
[[ $n -eq 4 ]] || fail "expected 4 IDENTICAL dumps against the CPU references, got $n"
grep -q '"status": "ok", "tokens_per_second": [0-9]' "$out/result/kit_result.json" || fail "no timing result"
# The MPI that ran is the kit's (the hidden system one could not have started).
grep -q "OPAL_PREFIX\|mpi/bin" "$kit/run.sh" || fail "run.sh does not relocate the kit's MPI"
echo "check_device_kit: OK: $(tail -1 "$out/pack.txt")"
