#!/usr/bin/env bash
# run_mutants.sh [NAME...]: applies plausible bugs one at a time to a scratch copy of the
# tracked sources, rebuilds it incrementally, runs the tests meant to catch each, prints a table.
# Exit 0 only when every mutant applied, built and was caught by at least one failing test.
#
# Scratch copy: <repo>/build-mutants/src (git-ignored; its build in src/build shares ccache
# entries with <repo>/build because the relative paths are the same). Each mutant names a folder,
# a short distinctive code fragment and its replacement; the fragment is searched in every
# tracked C++ file of that folder, so a file that moves or is split keeps its mutant, and its
# first occurrence is replaced (where it occurs more than once, the first is the code path the
# tests run: e.g. the forward attention kernel). A fragment found nowhere, or in two files,
# fails loudly: "mutation did not apply".
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
work="$repo/build-mutants"
src="$work/src"
build="$src/build"
only=("$@")

# name | folder | fragment | replacement | tests (ctest -R regex) — fields split on " | ".
# Every regex also runs the reference checks (^reference_): they are the tests of the contract.
mutants=(
  "loss_denominator | miniapp | in_.global_valid_tokens = batch.valid_tokens(); | in_.global_valid_tokens = static_cast<long long>(batch.B) * batch.T; | ^bitwise_p2_1f1b\$|^Loss"
  "microbatch_split | miniapp | const int n = B / m + (i < B % m ? 1 : 0); | const int n = B / m + (i + 1 < B % m ? 1 : 0); | ^bitwise_p2_(1f1b|gpipe)\$"
  "loss_scale_per_microbatch | miniapp | static_cast<T>(1.0 / static_cast<double>(in.global_valid_tokens)); | static_cast<T>(1.0 / static_cast<double>(mb.nsamples * T_)); | ^bitwise_p2_1f1b\$"
  "attention_value_index | kernels | const Real* vb = qb + 2 * C; | const Real* vb = qb + C; | ^AttentionBits|^Kernels/KernelGradient\.MatchesFiniteDifferencesInDouble/Attention_|^bitwise_p2_1f1b\$"
  "attention_scale | kernels | const Real scale = Real(1) / sqrt_exact(static_cast<Real>(hs)); | const Real scale = Real(1) / sqrt_exact(static_cast<Real>(C)); | ^AttentionBits|^Kernels/KernelGradient\.MatchesFiniteDifferencesInDouble/Attention_"
  "layernorm_eps | kernels | static constexpr double kEps = 1e-5; | static constexpr double kEps = 1e-6; | ^Kernels/KernelGradient\.MatchesFiniteDifferencesInDouble/LayerNorm_|^bitwise_p2_1f1b\$"
  "gelu_constant | kernels | constexpr double kCubic = 0.044715; | constexpr double kCubic = 0.04715; | ^Kernels/KernelGradient\.MatchesFiniteDifferencesInDouble/Gelu_|^DetmathBits.Gelu"
  "adamw_bias_correction | kernels | const T bc1 = static_cast<T>(1.0 - pow_int(cfg.beta1, step)); | const T bc1 = static_cast<T>(1.0 - pow_int(cfg.beta2, step)); | ^AdamW"
  "decay_on_layernorm_weight | miniapp | {p + \"ln1_w\", {C}, I::ones, 0, false} | {p + \"ln1_w\", {C}, I::ones, 0, true} | ^AdamW"
  "sgd_dampening | kernels | d = mu * momentum_buf(i) + d; | d = mu * momentum_buf(i) + (T(1) - mu) * d; | ^Sgd"
  "send_tag | miniapp | mpi_type<T>(), peer, tag(dir, peer_stage, a.microbatch) | mpi_type<T>(), peer, tag(dir, a.stage, a.microbatch) | ^bitwise_p2_(1f1b|zb-h1)\$"
  "w_order_lifo | schedules | out_.push_back(pending_w_.front()); | out_.push_back(pending_w_.back()); | ^Generators|^Validator|^bitwise_p2_zb-h1\$"
  "exact_sum_limb_carry | kernels | const std::uint64_t c1b = s1 < t1 ? 1u : 0u; | const std::uint64_t c1b = s1 < w1 ? 1u : 0u; | ^ExactSum|^Loss|^bitwise_p2_1f1b\$"
  "dump_row_offset | miniapp | static_cast<std::uint64_t>(mb.sample0), static_cast<std::uint64_t>(mb.nsamples) | static_cast<std::uint64_t>(mb.index), static_cast<std::uint64_t>(mb.nsamples) | ^bitwise_p2_1f1b\$"
  "csv_parse_swapped_fields | schedules | return Action::make(op, stage, mb); | return Action::make(op, mb, stage); | ^Csv|^bitwise_csv"
  "dp_limb_carry | kernels | l2 += l1 >> 32; | l2 += 0 * (l1 >> 32); | ^bitwise_dp"
  "restart_skips_restore | miniapp | if (su.restart) trainer.restore(*su.restart); | if (su.restart && su.first_step < 0) trainer.restore(*su.restart); | ^checkpoint_restart\$"
  "held_bias_chain_last_row | kernels | acc[l] = acc[l] + v; | acc[l] = v; | ^Kernels/KernelDeterminism\.SplitsOrdersAndHeldSamplesChangeNoBit/Linear_|^bitwise_p2_1f1b\$"
  "row_sums_restart_per_kblock | kernels | r[i] = i < M - m0 ? rs[m0 + i] : T(0); | r[i] = T(0); | ^GemmDet\\.RowSums|^LinearFastMode"
  "exact_known_zero_every_group | kernels | const bool first_fold = target.known_zero && s0 == 0; | const bool first_fold = target.known_zero; | ^GemmDetExact|^Kernels/KernelDeterminism\.SplitsOrdersAndHeldSamplesChangeNoBit/Linear_"
)

export CCACHE_BASEDIR=${CCACHE_BASEDIR:-/work} CCACHE_DIR=${CCACHE_DIR:-/work/.ccache}
# shellcheck source=/dev/null
source "$repo/scripts/env.sh"

echo "== scratch copy of the tracked files of $repo in $src"
# Files that differ from the copy are rewritten (new mtime, so ninja rebuilds them); unchanged
# ones keep their mtime, so a rerun is incremental and never keeps an object of an old mutant.
rm -rf "$work/incoming" && mkdir -p "$work/incoming" "$src" || exit 2
(cd "$repo" && git ls-files -z | tar --null -cf - -T -) | tar -C "$work/incoming" -xf - || { echo "copy failed"; exit 2; }
python3 - "$work/incoming" "$src" <<'EOF' || exit 2
import filecmp, pathlib, shutil, sys
new, dst = map(pathlib.Path, sys.argv[1:])
for f in new.rglob("*"):
    if f.is_file():
        t = dst / f.relative_to(new)
        if not t.exists() or not filecmp.cmp(f, t, shallow=False):
            t.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(f, t)
            shutil.copymode(f, t)
EOF
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMINIPIPE_WERROR=ON -DMINIPIPE_BUILD_BENCHMARKS=OFF \
  -DMINIPIPE_TEST_TIMEOUT=40 "${launcher[@]}" > "$work/configure.log" 2>&1 || { tail "$work/configure.log"; exit 2; }
echo "== baseline build and tests (every selected test must pass unmutated)"
nice -n 5 ninja -C "$build" -j2 > "$work/build.log" 2>&1 || { tail -n 30 "$work/build.log"; exit 2; }

# Applies one literal replacement to the single tracked file of FOLDER holding FRAGMENT once.
apply() {
  python3 - "$src" "$1" "$2" "$3" <<'EOF'
import pathlib, sys
root, folder, frag, repl = sys.argv[1:]
hits = []
for p in sorted((pathlib.Path(root) / folder).rglob("*")):
    if p.suffix in (".cpp", ".hpp", ".h") and "build" not in p.relative_to(root).parts:
        n = p.read_text().count(frag)
        if n:
            hits.append((p, n))
if len(hits) != 1:
    where = ", ".join(f"{p.relative_to(root)} x{n}" for p, n in hits) or "nowhere"
    print(f"mutation did not apply: fragment {frag!r} found {where} under {folder}/ (need one file)")
    sys.exit(1)
p = hits[0][0]
p.write_text(p.read_text().replace(frag, repl, 1))
print(p.relative_to(root))
EOF
}

declare -a rows
status=0
baseline_checked=0
for entry in "${mutants[@]}"; do
  IFS='|' read -r name folder frag repl regex <<< "${entry// | /|}"
  if [ ${#only[@]} -gt 0 ] && ! printf '%s\n' "${only[@]}" | grep -qx "$name"; then continue; fi
  tests="^reference_|$regex"
  if [ $baseline_checked -eq 0 ]; then
    # The union of every mutant's tests must pass on the unmutated copy, or "caught" means nothing.
    all="^reference_"
    for e in "${mutants[@]}"; do all="$all|${e##* | }"; done
    ctest --test-dir "$build" -j2 -R "$all" > "$work/baseline.log" 2>&1 \
      || { grep -E "Failed|Timeout|Not Run" "$work/baseline.log"; echo "baseline tests fail: fix them first"; exit 2; }
    echo "baseline: $(grep -E 'tests passed' "$work/baseline.log")"
    baseline_checked=1
  fi
  echo "== mutant $name"
  file=$(apply "$folder" "$frag" "$repl")
  if [ $? -ne 0 ]; then
    echo "$file"
    rows+=("$name|-|NOT APPLIED|$file")
    status=1
    continue
  fi
  if ! nice -n 5 ninja -C "$build" -j2 > "$work/build_$name.log" 2>&1; then
    rows+=("$name|$file|DID NOT BUILD|see build-mutants/build_$name.log")
    status=1
  else
    ctest --test-dir "$build" -j2 -R "$tests" > "$work/ctest_$name.log" 2>&1
    caught=$(grep -E '^\s*[0-9]+ - .* \((Failed|Timeout|SEGFAULT|Exception|Subprocess aborted|Child aborted|Not Run)\)' \
      "$work/ctest_$name.log" | sed -E 's/^\s*[0-9]+ - //; s/ \(/ (/' | tr '\n' ';' | sed 's/;$//')
    total=$(grep -oE 'out of [0-9]+' "$work/ctest_$name.log" | grep -oE '[0-9]+')
    if [ -n "$caught" ]; then
      n=$(echo "$caught" | tr ';' '\n' | wc -l)
      rows+=("$name|$file|caught by $n of ${total:-?}|${caught//;/, }")
    else
      rows+=("$name|$file|NOT CAUGHT (0 of ${total:-?} failed)|")
      status=1
    fi
  fi
  cp "$repo/$file" "$src/$file"  # restore before the next mutant
done
echo "== restoring the unmutated build"
nice -n 5 ninja -C "$build" -j2 > "$work/build_restore.log" 2>&1

echo
printf '%-27s %-32s %-22s %s\n' mutant file verdict "failing tests"
for r in "${rows[@]}"; do
  IFS='|' read -r a b c d <<< "$r"
  printf '%-27s %-32s %-22s %s\n' "$a" "$b" "$c" "$d"
done
echo "(logs and the scratch copy: $work; rm -rf it to start from scratch)"
exit $status
