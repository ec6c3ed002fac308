#!/usr/bin/env bash
# Quick start 2: install what is missing, build (warnings as errors), run every test with ctest.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export MINIPIPE_CMAKE_ARGS="-DMINIPIPE_WERROR=ON ${MINIPIPE_CMAKE_ARGS:-}"
bash "$here/scripts/setup.sh"
source "$here/scripts/env.sh"
ctest --test-dir "${BUILD_DIR:-$here/build}" --output-on-failure -j 2 --timeout 600
