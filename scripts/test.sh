#!/usr/bin/env bash
# Quick start 2: install what is missing, build (the same configuration as demo.sh, warnings as
# errors), run every test with ctest except the timing-sensitive ones (label `timing`: they measure
# speed and need an otherwise idle machine; `scripts/test.sh -L timing` runs only them).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
labels=(-LE timing)
if [ "${1:-}" = "-L" ] && [ "${2:-}" = timing ] && [ $# -eq 2 ]; then
  labels=(-L timing)
elif [ $# -gt 0 ]; then
  echo "test.sh: error: unknown arguments '$*'; allowed: none (every test but the timing ones) or -L timing" >&2
  exit 2
fi
bash "$here/scripts/setup.sh"
source "$here/scripts/env.sh"
ctest --test-dir "${BUILD_DIR:-$here/build}" --output-on-failure -j 2 --timeout 600 "${labels[@]}"
