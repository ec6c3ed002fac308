#!/bin/bash
# `minipipe compare` names the first divergence (contract B of docs/design.md §5): with the one-ULP test
# hook on a forward kernel (layer_00/qkv) and a backward kernel (layer_00/d_fc), on the host and
# the forced device kernel path, its last line names that dataset and kernel, element 0 and 1 ULP;
# between two unperturbed runs it prints "first divergence: none" and exits 0.
# Usage: check_first_divergence.sh MINIPIPE DECK OUTDIR
set -u
bin=$1 deck=$2 out=$3
mkdir -p "$out" && rm -f "$out"/*.h5
args=(--deck "$deck" --model.n_layer 2 --train.steps 2 --schedule 1f1b -m 3 --output.dump_level kernels)
fail() { echo "FAIL: $*"; exit 1; }
run() {  # file ranks [perturb] extra-args...
  local f=$1 n=$2 p=$3
  shift 3
  env ${p:+MINIPIPE_TEST_PERTURB=$p} ${MPIEXEC:-mpiexec} -n "$n" "$bin" run "${args[@]}" --dump "$out/$f" "$@" \
    >"$out/$f.log" 2>&1 || fail "run $f ($p) exited $? ($(tail -n 3 "$out/$f.log"))"
}
compare() {  # a b expected-exit -> prints the last line
  "$bin" compare "$1" "$2" >"$out/compare.log" 2>&1
  local rc=$?
  [ $rc = "$3" ] || fail "compare $(basename "$1") $(basename "$2") exited $rc, expected $3: $(tail -n 2 "$out/compare.log")"
  tail -n 1 "$out/compare.log"
}
re_num='[-+0-9.eEinfa]+'
for path in host device; do
  run base_$path.h5 1 "" --train.kernel_path $path
  run again_$path.h5 2 "" --train.kernel_path $path --train.recompute block
  line=$(compare "$out/base_$path.h5" "$out/again_$path.h5" 0)
  [ "$line" = "first divergence: none" ] || fail "$path path, no hook: '$line'"
  for case in "layer_00/qkv|Linear::forward (qkv_w)" "layer_00/d_fc|Gelu::backward_input"; do
    target=${case%%|*} kernel=${case#*|}
    f=perturbed_${path}_${target//\//_}.h5
    run "$f" 2 "$target" --train.kernel_path $path
    line=$(compare "$out/base_$path.h5" "$out/$f" 1)
    kre=$(sed 's/[][()*.+?^$|]/\\&/g' <<<"$kernel")
    want="^first divergence: step_0000/kernels/$target \\(kernel $kre, step 0, layer layer_00\\) element 0 \\[0,0,0\\]: $re_num vs $re_num, 1 ULP; [0-9]+ later datasets differ$"
    grep -Eq "$want" <<<"$line" || fail "$path path, MINIPIPE_TEST_PERTURB=$target: '$line'"
    echo "$path path, $target: $line"
  done
done
echo "compare names the perturbed kernel output as the first divergence"
