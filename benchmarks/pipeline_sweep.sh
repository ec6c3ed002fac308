#!/usr/bin/env bash
# The pipeline sweep: every schedule over p in {2, 4} and several m on the small deck, one
# launch per p (a deck sweep), JSON reports and timelines in OUTDIR. Usage:
#   benchmarks/pipeline_sweep.sh BUILD_DIR [OUTDIR] [extra minipipe run flags...]
# Measured, simulated and analytic bubbles are printed side by side; compare ratios within one
# run, not absolute times, on a shared or oversubscribed machine.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:?usage: $0 BUILD_DIR [OUTDIR]}
out=${2:-$here/out/sweep}
shift $(( $# >= 2 ? 2 : 1 ))
MINIPIPE_BLAS=fastest  # speed is compared only with the fastest BLAS the CPU runs
source "$here/scripts/env.sh"
mkdir -p "$out"
bin="$build/miniapp/minipipe"
for p in 2 4; do
  mpiexec -n "$p" "$bin" run --deck "$here/inputs/small.toml" --train.steps 3 \
    --pipeline.schedule sequential,gpipe,1f1b,interleaved-1f1b,looped-bfs,zb-h1,zb-h2,zb-v,dualpipev,v-half,v-min,zb-mem,dualpipe \
    --pipeline.microbatches 8,16 --pipeline.chunks 0 \
    --output.json "$out/sweep_p$p.json" --output.svg "$out/timeline_p$p.svg" --force "$@" | sed -n '/^schedule /,$p'
done
echo "pipeline sweep: reports and timelines in $out"
