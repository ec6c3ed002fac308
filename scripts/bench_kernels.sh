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

# One BLAS thread so every kernel is compared on one core, and the fastest OpenBLAS kernels this
# CPU runs, even over a slower preset OPENBLAS_CORETYPE (env.sh says so when it overrides one).
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
MINIPIPE_BLAS=fastest
source "$here/env.sh"

exec "$bin" --benchmark_counters_tabular=true "$@"
