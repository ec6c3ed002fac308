#!/usr/bin/env bash
# Runs the kernel benchmarks (GEMM det vs KokkosBlas vs cblas, Linear, LayerNorm, attention) from
# an existing build directory; builds nothing. Usage: scripts/bench_kernels.sh BUILD_DIR [benchmark flags...]
set -euo pipefail

if [[ $# -lt 1 ]]; then
  echo "usage: $0 BUILD_DIR [--benchmark_filter=REGEX] [--tokens=512] [--channels=768] [--seq-len=64] [--heads=12] [--layers=8] [...]" >&2
  exit 2
fi
build_dir=$1
shift
bin="$build_dir/benchmarks/minipipe_bench_kernels"
if [[ ! -x "$bin" ]]; then
  echo "$0: $bin not found; build it first: ninja -C $build_dir minipipe_bench_kernels" >&2
  exit 2
fi

# One BLAS thread so every kernel is compared on one core, and the OpenBLAS core type env.sh
# picks for this CPU (SkylakeX with AVX-512, Haswell with AVX2+FMA): OpenBLAS 0.3.21 does not
# recognise newer CPUs and falls back to its slowest kernels.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/env.sh"

exec "$bin" --benchmark_counters_tabular=true "$@"
