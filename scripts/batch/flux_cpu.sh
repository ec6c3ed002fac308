#!/usr/bin/env bash
# flux_cpu.sh: miniPipe on CPU nodes under Flux, one pipeline stage per rank, several ranks per node.
# flux batch [options] flux_cpu.sh [DECK] [minipipe run options]; outside Flux it runs through mpiexec.
#flux: --job-name=minipipe-cpu
#flux: -N 2
#flux: --exclusive
#flux: -t 30m
#flux: --output=minipipe-cpu-{{id}}.out
# MP_RANKS_PER_NODE ranks per node (default 2 here; 4 on the nodes above is typical), each with
# MP_CPUS_PER_RANK cores; Flux binds each task to its cores (cpu-affinity=per-task).
set -euo pipefail
# sbatch / flux batch run a copy of this file elsewhere: find launch.sh next to the original,
# through scontrol, or in the install tree of the minipipe on PATH (or set MP_BATCH_DIR).
if [ -z "${MP_BATCH_DIR:-}" ]; then
  for d in "$(dirname "$0")" \
    "$(scontrol show job "${SLURM_JOB_ID:-none}" 2>/dev/null | sed -n "s/^ *Command=\([^ ]*\).*/\1/p" | xargs -r dirname)" \
    "$(dirname "$(command -v minipipe 2>/dev/null || echo .)")/../share/minipipe/batch"; do
    [ -n "$d" ] && [ -f "$d/launch.sh" ] && { MP_BATCH_DIR=$(cd "$d" && pwd); break; }
  done
fi
: "${MP_BATCH_DIR:?cannot find launch.sh; set MP_BATCH_DIR to the scripts/batch directory}"
# shellcheck source-path=SCRIPTDIR source=launch.sh
source "$MP_BATCH_DIR/launch.sh"
minipipe_batch_main 0 "$@"
