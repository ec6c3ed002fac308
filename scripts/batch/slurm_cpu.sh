#!/usr/bin/env bash
# slurm_cpu.sh: miniPipe on CPU nodes under Slurm, one pipeline stage per rank, several ranks per node.
# sbatch [sbatch options] slurm_cpu.sh [DECK] [minipipe run options]; outside Slurm it runs through mpiexec.
#SBATCH --job-name=minipipe-cpu
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=4
#SBATCH --cpus-per-task=8
#SBATCH --exclusive
#SBATCH --time=00:30:00
#SBATCH --output=minipipe-cpu-%j.out
# Ranks per node x nodes = p, the pipeline depth (pipeline.p = 0 takes the launched count). With a
# Kokkos OpenMP build each rank runs --cpus-per-task threads, bound to its own cores.
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
