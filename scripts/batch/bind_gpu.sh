#!/usr/bin/env bash
# bind_gpu.sh CMD...: runs CMD seeing only the GPU(s) of its local rank, for launchers without a
# GPU binding of their own (plain mpiexec). MP_GPUS_PER_RANK GPUs per rank, default 1.
set -eu
local_rank=${SLURM_LOCALID:-${FLUX_TASK_LOCAL_ID:-${OMPI_COMM_WORLD_LOCAL_RANK:-${MPI_LOCALRANKID:-${PALS_LOCAL_RANKID:-${PMI_LOCAL_RANK:-0}}}}}}
per_rank=${MP_GPUS_PER_RANK:-1}
first=$((local_rank * per_rank))
devices=$first
for ((i = 1; i < per_rank; ++i)); do devices="$devices,$((first + i))"; done
# One variable per vendor runtime; each ignores the others.
export CUDA_VISIBLE_DEVICES=$devices ROCR_VISIBLE_DEVICES=$devices ZE_AFFINITY_MASK=$devices
exec "$@"
