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

# Bad OUT_DIR and arguments: one clear line each, exit 2, nothing made.
touch "$out/plainfile"
rc=0
bash "$repo/scripts/device_kit.sh" "$build" "$out/plainfile" --cpu-build "$build" > /dev/null 2> "$out/bad_out.txt" || rc=$?
cat "$out/bad_out.txt"
[[ $rc -eq 2 && $(wc -l < "$out/bad_out.txt") -eq 1 ]] && grep -q "OUT_DIR '.*plainfile' exists and is not a directory" "$out/bad_out.txt" ||
  fail "a regular file as OUT_DIR: exit $rc and $(wc -l < "$out/bad_out.txt") lines, expected exit 2 and one clear line"
rc=0
bash "$repo/scripts/device_kit.sh" "$build" "$out/made" "$out/other" > /dev/null 2> "$out/bad_args.txt" || rc=$?
[[ $rc -eq 2 ]] && grep -q "unknown argument '.*other'" "$out/bad_args.txt" || fail "a third positional argument: exit $rc: $(cat "$out/bad_args.txt")"
[[ -e $out/made || -e $out/other ]] && fail "a refused device_kit.sh created OUT_DIR"

# A failing reference run leaves nothing under the kit's final name (nor its temporary), so the
# next attempt into the same OUT_DIR goes through.
mkdir -p "$out/failing_cpu/miniapp"
printf '#!/bin/sh
echo "a reference build that fails on purpose" >&2
exit 3
' > "$out/failing_cpu/miniapp/minipipe"
chmod +x "$out/failing_cpu/miniapp/minipipe"
rc=0
bash "$repo/scripts/device_kit.sh" "$build" "$out/made" --cpu-build "$out/failing_cpu" > "$out/failed_pack.txt" 2>&1 || rc=$?
cat "$out/failed_pack.txt"
[[ $rc -eq 2 ]] || fail "a failing reference run: device_kit.sh exited $rc, expected 2"
grep -q "the reference run of tiny failed" "$out/failed_pack.txt" || fail "the failing reference run is not named"
grep -q "fails on purpose" "$out/failed_pack.txt" || fail "the failing reference run's log is not shown"
[[ -z $(ls -A "$out/made") ]] || fail "a failed device_kit.sh left $(ls -A "$out/made") in OUT_DIR"

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
# A GPU result is never overwritten: a second run into the same RESULT_DIR is refused before it
# runs anything; two RESULT_DIRs and a regular file as RESULT_DIR are refused too.
before=$(find "$out/result" -type f -exec cksum {} + | sort)
rc=0
bash "$kit/run.sh" "$out/result" --timing-deck tiny --steps 2 > "$out/rerun.txt" 2>&1 || rc=$?
cat "$out/rerun.txt"
[[ $rc -eq 2 ]] || fail "a second run.sh into the same RESULT_DIR exited $rc, expected 2"
grep -q "already holds results .*never overwritten" "$out/rerun.txt" || fail "the refusal of a used RESULT_DIR is not clear"
[[ $(find "$out/result" -type f -exec cksum {} + | sort) == "$before" ]] || fail "a refused rerun changed the first run's results"
rc=0
bash "$kit/run.sh" "$out/r1" "$out/r2" > "$out/two_dirs.txt" 2>&1 || rc=$?
[[ $rc -eq 2 ]] && grep -q "a second RESULT_DIR" "$out/two_dirs.txt" || fail "two RESULT_DIRs: exit $rc: $(cat "$out/two_dirs.txt")"
[[ -e $out/r1 || -e $out/r2 ]] && fail "a refused run.sh created a RESULT_DIR"
rc=0
bash "$kit/run.sh" "$out/plainfile" > "$out/file_dir.txt" 2>&1 || rc=$?
[[ $rc -eq 2 && $(wc -l < "$out/file_dir.txt") -eq 1 ]] && grep -q "exists and is not a directory" "$out/file_dir.txt" ||
  fail "a regular file as RESULT_DIR: exit $rc: $(cat "$out/file_dir.txt")"
# The MPI that ran is the kit's (the hidden system one could not have started).
grep -q "OPAL_PREFIX\|mpi/bin" "$kit/run.sh" || fail "run.sh does not relocate the kit's MPI"
# Kit v2: the counters' runs of both modes are in the one JSON (rates, syncs, a roofline file).
n=$(grep -o '"counters_status": "ok"' "$out/result/kit_result.json" | wc -l)
[[ $n -eq 2 ]] || fail "expected 2 kernel-counter runs with status ok, got $n"
python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
assert [t["kernel_counters"]["timed"] for t in d["timing"]] == [True, True]' "$out/result/kit_result.json" ||
  fail "no kernel_counters object (timed) for both modes in the JSON"
grep -q '"sync_per_step": \[' "$out/result/kit_result.json" || fail "no sync counts in the JSON"
grep -q '"first_divergence_kernel_level": null' "$out/result/kit_result.json" || fail "a locator ran although every dump matched"
for mode in deterministic fast; do
  grep -q "<circle" "$out/result/counters_tiny_$mode.svg" || fail "no roofline points in counters_tiny_$mode.svg"
done
if command -v python3 > /dev/null; then
  python3 -c "import json, sys; json.load(open(sys.argv[1]))" "$out/result/kit_result.json" || fail "kit_result.json is not valid JSON"
fi

# The locator on an injected mismatch: MINIPIPE_TEST_PERTURB moves one element of one kernel's
# output by one ULP in every GPU-side run (a test hook of the binary), so every bitwise check
# differs, and the rerun of the smallest case at the kernels dump level must name that kernel.
if "$build/miniapp/minipipe" run --deck "$repo/inputs/tiny.toml" --train.steps 1 --output.dump "$out/probe.h5" \
  --output.dump_level kernels --output.force true > "$out/probe.log" 2>&1; then
  [[ -f $kit/ref/tiny_kernels.h5 ]] || fail "the binary has the kernels dump level but the kit carries no kernel-level reference"
  # No RESULT_DIR while result/ (an earlier run's) is there: the run takes result.2.
  mkdir -p "$kit/result" && echo "an earlier result" > "$kit/result/kit_result.json"
  rc=0
  unshare -m bash "$hide" env MINIPIPE_TEST_PERTURB=layer_01/ln1 bash "$kit/run.sh" --timing-deck tiny \
    --steps 2 --timeout 120 > "$out/perturbed.txt" 2>&1 || rc=$?
  [[ $(cat "$kit/result/kit_result.json") == "an earlier result" ]] || fail "run.sh without RESULT_DIR overwrote result/"
  [[ -f $kit/result.2/kit_result.json ]] || fail "run.sh without RESULT_DIR did not write result.2/ next to result/"
  ln -s "$kit/result.2" "$out/perturbed"
  cat "$out/perturbed.txt"
  [[ $rc -eq 1 ]] || fail "run.sh exited $rc on an injected mismatch, expected 1"
  want='^run.sh: kernel level, tiny sequential p=1 m=1 batch 8: first divergence: step_0000/kernels/layer_01/ln1 \(kernel LayerNorm::forward \(ln1\), step 0, layer layer_01\) element 0 \[0,0,0\]: .*, 1 ULP; [0-9]+ later datasets differ$'
  grep -Eq "$want" "$out/perturbed.txt" || fail "no locator line naming layer_01/ln1 in run.sh's output"
  grep -q '"first_divergence_kernel_level": {"deck": "tiny"' "$out/perturbed/kit_result.json" ||
    fail "kit_result.json has no kernel-level first divergence"
  echo "check_device_kit: locator: $(grep -E "$want" "$out/perturbed.txt")"
else
  echo "check_device_kit: SKIP (locator on an injected mismatch): this minipipe rejects --output.dump_level kernels" \
    "(contract A and MINIPIPE_TEST_PERTURB land from branch h2-block); the check runs by itself once the binary" \
    "accepts it: $(grep -m1 -i 'dump_level' "$out/probe.log" || head -1 "$out/probe.log")"
fi
echo "check_device_kit: OK: $(tail -1 "$out/pack.txt")"
