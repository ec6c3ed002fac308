#!/bin/bash
# The one-ULP test hook MINIPIPE_TEST_PERTURB (docs/design.md §5): with it on a forward kernel and a
# backward kernel, on the host and on the forced device kernel path, the first dataset in dataflow
# order (dataflow_order.sh) whose bits differ from an unperturbed run is the perturbed one; without
# it nothing differs (p = 1 against p = 2 with block recompute); a bad value exits 2 naming the
# variable, the value and the allowed names.
# Usage: check_perturb.sh MINIPIPE DECK OUTDIR
set -u
bin=$1 deck=$2 out=$3
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out" && rm -f "$out"/*.h5
L=2
args=(--deck "$deck" --model.n_layer $L --train.steps 2 --schedule 1f1b -m 3)
fail() { echo "FAIL: $*"; exit 1; }
run() {  # file ranks [perturb] extra-args...
  local f=$1 n=$2 p=$3
  shift 3
  env ${p:+MINIPIPE_TEST_PERTURB=$p} ${MPIEXEC:-mpiexec} -n "$n" "$bin" run "${args[@]}" --dump "$out/$f" \
    --output.dump_level "${level:-kernels}" "$@" \
    >"$out/$f.log" 2>&1 || fail "run $f ($p) exited $? ($(tail -n 3 "$out/$f.log"))"
}
# The first dataset of a.h5 and b.h5 in dataflow order whose bits differ ("none" if none does).
first_difference() {
  local diffs
  diffs=$(h5diff -r --exclude-path /meta "$1" "$2" | awk '/^dataset: </ {d = substr($2, 2, length($2) - 2)}
    /differences? found/ && $1 > 0 {print d}')
  [ -z "$diffs" ] && { echo none; return; }
  local p
  for p in $("$here/dataflow_order.sh" $L 0 1); do
    if grep -qxF "$p" <<<"$diffs"; then echo "$p"; return; fi
  done
  echo "unordered: $(head -n 1 <<<"$diffs")"
}

for path in host device; do
  run base_$path.h5 1 "" --train.kernel_path $path
  run again_$path.h5 2 "" --train.kernel_path $path --train.recompute block
  got=$(first_difference "$out/base_$path.h5" "$out/again_$path.h5")
  [ "$got" = none ] || fail "$path path, no hook: $got differs"
  for target in layer_00/qkv layer_00/d_fc head/logits; do
    f=perturbed_${path}_${target//\//_}.h5
    run "$f" 2 "$target" --train.kernel_path $path
    got=$(first_difference "$out/base_$path.h5" "$out/$f")
    [ "$got" = "/step_0000/kernels/$target" ] || fail "$path path, MINIPIPE_TEST_PERTURB=$target: first difference $got"
    echo "$path path, MINIPIPE_TEST_PERTURB=$target: first difference $got"
  done
done
# The hook acts at any dump level: at the full level the first difference is the block's output.
# (Not with qkv: element 0 is query 0's first channel, and query 0 sees key 0 only, so its
# softmax is 1 whatever the score and nothing after qkv changes.)
level=full run perturbed_full.h5 1 layer_00/ln1
got=$(first_difference "$out/base_host.h5" "$out/perturbed_full.h5")
[ "$got" = /step_0000/activations/layer_00 ] || fail "dump level full, MINIPIPE_TEST_PERTURB=layer_00/ln1: first difference $got"
# Bad values: exit 2, naming the variable, the value and the allowed names.
for bad in layer_00 layer_09/qkv layer_00/nope head/qkv; do
  MINIPIPE_TEST_PERTURB=$bad "$bin" run "${args[@]}" --dump "$out/bad.h5" >"$out/bad.log" 2>&1
  rc=$?
  [ $rc = 2 ] || fail "MINIPIPE_TEST_PERTURB=$bad exited $rc, expected 2"
  grep -q "MINIPIPE_TEST_PERTURB = \"$bad\"" "$out/bad.log" && grep -q "allowed:" "$out/bad.log" ||
    fail "MINIPIPE_TEST_PERTURB=$bad: message $(head -n 2 "$out/bad.log")"
done
echo "test hook: the perturbed kernel output is the first difference; none without the hook; bad values exit 2"
