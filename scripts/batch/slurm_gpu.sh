#!/usr/bin/env bash
# slurm_gpu.sh: miniPipe on GPU nodes under Slurm, one rank (pipeline stage) per GPU.
# sbatch [sbatch options] slurm_gpu.sh [DECK] [minipipe run options]; outside Slurm it runs through mpiexec.
#SBATCH --job-name=minipipe-gpu
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=4
#SBATCH --gpus-per-node=4
#SBATCH --cpus-per-task=16
#SBATCH --exclusive
#SBATCH --time=00:30:00
#SBATCH --output=minipipe-gpu-%j.out
# Each rank gets --gpus-per-task GPUs bound to the closest ones to its cores (srun --gpu-bind=closest;
# under mpiexec bind_gpu.sh picks them from the local rank). MP_CUDA_AWARE=on hands device buffers to
# a CUDA-aware MPI (Open MPI with UCX, Cray MPICH with GPU support); off stages through host memory.
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
minipipe_batch_main 1 "$@"
