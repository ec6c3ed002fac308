#!/usr/bin/env bash
# Quick start 2: install what is missing, build (the same configuration as demo.sh, warnings as
# errors), run every test with ctest except two labels: `timing` (they measure speed and need an
# otherwise idle machine; `scripts/test.sh -L timing` runs only them) and `device_budgets` (compiles
# the kernels for a GPU where a CUDA or HIP Kokkos is installed, about 20 minutes on 2 cores;
# `scripts/test.sh -L device_budgets` runs it).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
labels=(-LE 'timing|device_budgets')
if [ "${1:-}" = "-L" ] && { [ "${2:-}" = timing ] || [ "${2:-}" = device_budgets ]; } && [ $# -eq 2 ]; then
  labels=(-L "$2")
elif [ $# -gt 0 ]; then
  echo "test.sh: error: unknown arguments '$*'; allowed: none (every test but the labelled ones), -L timing or -L device_budgets" >&2
  exit 2
fi
bash "$here/scripts/setup.sh"
source "$here/scripts/env.sh"
ctest --test-dir "${BUILD_DIR:-$here/build}" --output-on-failure -j 2 --timeout 600 "${labels[@]}"
