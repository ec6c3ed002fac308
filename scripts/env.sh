# Environment for running miniPipe under OpenMPI on a small machine (sourced by the scripts).
# Root needs OpenMPI's explicit consent; oversubscribed ranks must yield instead of spinning;
# one BLAS thread per rank.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_mpi_yield_when_idle=1
export OMPI_MCA_rmaps_base_oversubscribe=1
export OPENBLAS_NUM_THREADS=1

# OpenBLAS's kernels. OpenBLAS 0.3.21 does not recognise newer CPUs and falls back to slow kernels,
# so this picks the fastest kernel set the CPU runs: SkylakeX with AVX-512F (Cooperlake and
# SapphireRapids add only bf16/fp16 kernels to SkylakeX's sgemm), Haswell with AVX2 + FMA
# (SkylakeX's kernels crash without AVX-512). A machine may preset OPENBLAS_CORETYPE (and OPENBLAS_L2_SIZE) because older OpenBLAS
# builds compute wrong results on some processors; tests and the demo keep such a preset. A
# benchmark sets MINIPIPE_BLAS=fastest before sourcing this file: its command then runs the
# fastest kernels even over a slower preset, and this says so on stderr (speed is only ever
# compared with the fastest BLAS the CPU runs).
minipipe_fastest_coretype() {
  minipipe_flags=" $(grep -m1 '^flags' "${MINIPIPE_CPUINFO:-/proc/cpuinfo}" 2>/dev/null) "  # the file: for tests
  case $minipipe_flags in
    *" avx512f "*) echo SkylakeX ;;
    *" avx2 "*) case $minipipe_flags in *" fma "*) echo Haswell ;; esac ;;
  esac
  unset minipipe_flags
}
minipipe_blas_rank() {  # higher = faster kernels; unknown names rank 0
  case $(echo "$1" | tr '[:upper:]' '[:lower:]') in
    skylakex | cooperlake | sapphirerapids) echo 2 ;;
    haswell | zen) echo 1 ;;
    *) echo 0 ;;
  esac
}
minipipe_best_core=$(minipipe_fastest_coretype)
if [ -z "$minipipe_best_core" ]; then
  :  # no kernel set to choose (the CPU lacks AVX2 + FMA): OpenBLAS picks its own
elif [ -z "${OPENBLAS_CORETYPE:-}" ]; then
  export OPENBLAS_CORETYPE=$minipipe_best_core
elif [ "${MINIPIPE_BLAS:-}" = fastest ] &&
  [ "$(minipipe_blas_rank "$OPENBLAS_CORETYPE")" -lt "$(minipipe_blas_rank "$minipipe_best_core")" ]; then
  echo "env.sh: OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE was preset; this benchmark runs $minipipe_best_core," \
    "the fastest OpenBLAS kernels this CPU runs (OPENBLAS_L2_SIZE unset with it)" >&2
  export OPENBLAS_CORETYPE=$minipipe_best_core
  unset OPENBLAS_L2_SIZE
fi
unset minipipe_best_core
