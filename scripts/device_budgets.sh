#!/usr/bin/env bash
# Register, spill and shared-memory budgets of the device kernels (kernels/), per GPU backend.
#
#   scripts/device_budgets.sh [--backend cuda|hip|all] [--work DIR] [--check] [--doc FILE] [--jobs N]
#
# For each backend whose toolchain is here (CUDA: nvcc and a CUDA Kokkos install, $KOKKOS_CUDA_ROOT,
# default /opt/kokkos-cuda; HIP: hipcc and $KOKKOS_HIP_ROOT, default /opt/kokkos-hip) it configures
# DIR/<backend> with MINIPIPE_PTXAS_VERBOSE=ON (ptxas -v for sm_90; clang's kernel-resource-usage
# remarks for gfx90a), recompiles minipipe_kernels only, and hands the log to device_budgets.py,
# which prints one table per backend (kernel, team size, registers, spills, shared memory, blocks
# per SM / waves per SIMD, theoretical occupancy). --check: fail when a kernel spills or cannot
# launch at its team size. --doc FILE: also put each table into FILE between the lines
# `<!-- device_budgets:<backend> begin -->` and `<!-- device_budgets:<backend> end -->`.
#
# Exit codes: 0 within budget, 1 a budget is broken, 2 bad usage, 3 a build failed,
# 77 no backend's toolchain here (ctest's SKIP_RETURN_CODE).
set -u -o pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src=$(cd "$here/.." && pwd)
backend=all work="" check="" doc="" jobs=2
while [ $# -gt 0 ]; do
  case "$1" in
    --backend) backend=${2:-}; shift 2 ;;
    --work) work=${2:-}; shift 2 ;;
    --check) check=--check; shift ;;
    --doc) doc=${2:-}; shift 2 ;;
    --jobs) jobs=${2:-}; shift 2 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "device_budgets.sh: unknown argument '$1' (allowed: --backend cuda|hip|all, --work DIR, --check, --doc FILE, --jobs N)" >&2; exit 2 ;;
  esac
done
case "$backend" in cuda|hip|all) ;; *)
  echo "device_budgets.sh: --backend '$backend' is not one of cuda, hip, all" >&2; exit 2 ;;
esac
[ -n "$work" ] || work="$src/build-device-budgets"
mkdir -p "$work" || exit 2
work=$(cd "$work" && pwd)

kokkos_cuda=${KOKKOS_CUDA_ROOT:-/opt/kokkos-cuda}
kokkos_hip=${KOKKOS_HIP_ROOT:-/opt/kokkos-hip}
cuda_bin=${CUDA_BIN:-/usr/local/cuda/bin}

have_cuda() {
  { command -v nvcc >/dev/null 2>&1 || [ -x "$cuda_bin/nvcc" ]; } &&
    grep -qs '^#define KOKKOS_ENABLE_CUDA$' "$kokkos_cuda/include/KokkosCore_config.h"
}
have_hip() {
  command -v hipcc >/dev/null 2>&1 && grep -qs '^#define KOKKOS_ENABLE_HIP$' "$kokkos_hip/include/KokkosCore_config.h"
}

# build BACKEND: configure DIR/BACKEND, recompile minipipe_kernels, leave the log in DIR/BACKEND.log
build() {
  local be=$1 dir="$work/$1" log="$work/$1.log"
  local cfg=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DMINIPIPE_PTXAS_VERBOSE=ON -DMINIPIPE_WERROR=ON
             -DMINIPIPE_BUILD_TESTS=OFF -DMINIPIPE_BUILD_BENCHMARKS=OFF)
  if [ "$be" = cuda ]; then
    # g++ as the compiler: Kokkos' launcher sends the Kokkos units (the kernels) to nvcc_wrapper
    cfg+=(-DCMAKE_CXX_COMPILER=g++ "-DKokkos_ROOT=$kokkos_cuda" "-DKokkosKernels_ROOT=$kokkos_cuda")
    export PATH="$cuda_bin:$PATH"
  else
    cfg+=(-DCMAKE_CXX_COMPILER=hipcc "-DKokkos_ROOT=$kokkos_hip" "-DKokkosKernels_ROOT=$kokkos_hip")
    export ROCM_PATH=${ROCM_PATH:-/usr}
  fi
  if ! cmake -S "$src" -B "$dir" "${cfg[@]}" >"$log" 2>&1; then
    echo "device_budgets.sh: configuring $dir for $be failed; see $log" >&2
    tail -20 "$log" >&2
    return 3
  fi
  # The report is printed only when a unit compiles, so each unit's report is kept beside the build
  # (DIR/BACKEND/resource-report/<unit>.log) and a unit without one is compiled again; a rerun then
  # compiles only the units that changed.
  local reports="$dir/resource-report" o
  mkdir -p "$reports"
  while IFS= read -r o; do
    [ -s "$reports/$(basename "$o" .o).log" ] || rm -f "$o"
  done < <(find "$dir/kernels" -name '*.o' 2>/dev/null)
  local built=0
  ninja -C "$dir" -j "$jobs" minipipe_kernels >>"$log" 2>&1 || built=$?
  # ninja (output not a terminal) prints "[i/n] Building CXX object .../<unit>.o" when a unit is
  # done, followed by what its compiler printed. Kept even when another unit failed: a unit that
  # compiled has a new object, so the next run would not compile it again and would otherwise
  # read its old report.
  python3 - "$log" "$reports" <<'EOF'
import os, re, sys
log, reports = sys.argv[1], sys.argv[2]
unit, chunks = None, {}
for line in open(log, errors="replace"):
    if re.match(r"\[\d+/\d+\] ", line):
        u = re.search(r"minipipe_kernels\.dir/(\S+)\.o\b", line)
        unit = os.path.basename(u.group(1)) if u else None
        if unit:
            chunks[unit] = []
        continue
    if unit:
        chunks[unit].append(line)
for unit, lines in chunks.items():
    if any(re.search(r"\berror\b", l) for l in lines):
        continue  # a unit that failed has no new object: no report
    with open(os.path.join(reports, unit + ".log"), "w") as f:
        f.write("".join(lines) or "(no kernel)\n")
EOF
  if [ "$built" -ne 0 ]; then
    echo "device_budgets.sh: building minipipe_kernels for $be failed; see $log" >&2
    grep -m 20 -i 'error' "$log" >&2
    return 3
  fi
  # each unit's part after a line naming it: device_budgets.py names a body of an anonymous
  # namespace by its unit (two units may use one name)
  local r
  for r in "$reports"/*.log; do
    printf 'device_budgets unit: %s\n' "$(basename "$r" .log)"
    cat "$r"
  done >"$work/$be.report"
}

# splice FILE BACKEND TABLE: replace the lines between the backend's markers in FILE
splice() {
  python3 - "$1" "$2" "$3" <<'EOF'
import sys
path, be, table = sys.argv[1], sys.argv[2], open(sys.argv[3]).read()
begin, end = f"<!-- device_budgets:{be} begin -->", f"<!-- device_budgets:{be} end -->"
text = open(path).read()
if begin not in text or end not in text:
    sys.exit(f"device_budgets.sh: {path} has no '{begin}' ... '{end}' lines")
head, rest = text.split(begin, 1)
_, tail = rest.split(end, 1)
open(path, "w").write(head + begin + "\n" + table + end + tail)
EOF
}

ran=0 rc=0
for be in cuda hip; do
  [ "$backend" = all ] || [ "$backend" = "$be" ] || continue
  if ! have_$be; then
    echo "device_budgets.sh: $be: no toolchain here (compiler or Kokkos install with $be), skipped" >&2
    continue
  fi
  ran=1
  build "$be" || { rc=3; continue; }
  python3 "$here/device_budgets.py" "$be" "$work/$be.report" $check --markdown "$work/$be.md"
  r=$?
  cat "$work/$be.md"
  [ $r -eq 0 ] || [ $rc -ne 0 ] || rc=$r
  if [ -n "$doc" ] && [ $r -ne 2 ]; then
    splice "$doc" "$be" "$work/$be.md" || rc=2
  fi
done
[ $ran -eq 1 ] || exit 77
exit $rc
