#!/bin/bash
# The kernel-level dump (output.dump_level = kernels, docs/design.md §5): bitwise the same at p = 1 and
# p = 2 (1f1b with uneven micro-batches and block recompute; zb-h1 with attention recompute; 1f1b
# on the device kernel path), its block-level datasets bitwise those of a full-level dump, and its
# schema and block intermediates checked against the independent double reference (tests/reference).
# Usage: check_kernel_dump.sh MINIPIPE REFERENCE_CHECK DECK OUTDIR
set -u
bin=$1 check=$2 deck=$3 out=$4
mkdir -p "$out" && rm -f "$out"/*.h5
mpiexec=${MPIEXEC:-mpiexec}
fail() { echo "FAIL: $*"; exit 1; }
run() {  # ranks file args...
  local n=$1 f=$2
  shift 2
  $mpiexec -n "$n" "$bin" run --deck "$deck" --dump "$out/$f" "$@" >"$out/$f.log" 2>&1 ||
    fail "run $f exited $? ($(tail -n 3 "$out/$f.log"))"
}
run 1 k1.h5 --schedule sequential -m 1 --output.dump_level kernels
run 2 k2_1f1b.h5 --schedule 1f1b -m 4 --train.recompute block --output.dump_level kernels
run 2 k2_zbh1.h5 --schedule zb-h1 -m 3 --train.recompute attention --output.dump_level kernels
run 2 k2_device.h5 --schedule 1f1b -m 4 --train.kernel_path device --output.dump_level kernels
run 1 full.h5 --schedule sequential -m 1 --output.dump_level full

h5ls -r "$out/k1.h5" | grep -q '/step_0001/kernels/layer_07/d_x_ln1 ' || fail "k1.h5 has no kernel datasets"
for f in k2_1f1b.h5 k2_zbh1.h5 k2_device.h5; do
  h5diff --exclude-path /meta "$out/k1.h5" "$out/$f" >"$out/$f.diff" 2>&1 ||
    fail "k1.h5 and $f differ: $(head -n 5 "$out/$f.diff")"
done
# Without its kernels groups the kernel-level dump is the full-level dump (no object more or less).
excl=()
for g in $(h5ls "$out/k1.h5" | awk '/^step_/ {print $1}'); do excl+=(--exclude-path "/$g/kernels"); done
[ ${#excl[@]} -gt 0 ] || fail "k1.h5 has no steps"
h5diff --exclude-path /meta "${excl[@]}" "$out/k1.h5" "$out/full.h5" >"$out/full.diff" 2>&1 ||
  fail "the block-level datasets of k1.h5 differ from full.h5: $(head -n 5 "$out/full.diff")"
"$check" "$out/k1.h5" >"$out/reference.log" 2>&1 || fail "reference check: $(grep -m 5 FAIL "$out/reference.log")"
grep -q '^step 0 kernels ' "$out/reference.log" || fail "the reference check compared no kernel tensor"
echo "kernel-level dumps: p=1 == p=2 (1f1b uneven + block recompute, zb-h1 + attention recompute, device path)," \
  "== full dump" \
  "outside kernels/, reference: $(tail -n 1 "$out/reference.log")"
