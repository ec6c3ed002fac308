#!/usr/bin/env bash
# Quick start 1: install what is missing, build, and run the default demo: every schedule on
# a small deck over 2 MPI ranks in one launch, with HDF5 dumps compared to the reference run.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${BUILD_DIR:-$here/build}
bash "$here/scripts/setup.sh"
source "$here/scripts/env.sh"
out=${DEMO_OUT:-$here/out/demo}
mkdir -p "$out"
mpiexec -n 2 "$build/miniapp/minipipe" run --deck "$here/inputs/demo.toml" \
  --output.dump "$out/dump.h5" --output.json "$out/report.json" \
  --output.svg "$out/timeline.svg" --output.trace "$out/trace.json" --force
echo "demo: dumps, report.json, timelines (SVG), time budgets (*_budget.svg) and Chrome traces are in $out"
