# Environment for running miniPipe under OpenMPI on a small machine (sourced by the scripts).
# Root needs OpenMPI's explicit consent; oversubscribed ranks must yield instead of spinning;
# one BLAS thread per rank. OpenBLAS 0.3.21 does not recognise newer CPUs and falls back to its
# slowest kernels: pick SkylakeX kernels on AVX-512 machines, Haswell ones on AVX2+FMA machines.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_mpi_yield_when_idle=1
export OMPI_MCA_rmaps_base_oversubscribe=1
export OPENBLAS_NUM_THREADS=1
if [ -z "${OPENBLAS_CORETYPE:-}" ]; then
  if grep -qw avx512f /proc/cpuinfo 2>/dev/null; then
    export OPENBLAS_CORETYPE=SkylakeX
  elif grep -qw avx2 /proc/cpuinfo 2>/dev/null && grep -qw fma /proc/cpuinfo 2>/dev/null; then
    export OPENBLAS_CORETYPE=Haswell  # SkylakeX kernels need AVX-512 and crash without it
  fi
fi
