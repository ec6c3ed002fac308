# launch.sh: the one launch line of every miniPipe batch script (Slurm, Flux, or mpiexec locally),
# sourced by slurm_*.sh and flux_*.sh; the ctest suite runs it through mpiexec on one machine.
# shellcheck shell=bash
#
# Settings (environment; the batch scripts set defaults from the allocation):
#   MINIPIPE_LAUNCHER  srun | flux | mpiexec          how ranks are started
#   MP_NODES           nodes                           MP_RANKS_PER_NODE  ranks (pipeline stages) per node
#   MP_CPUS_PER_RANK   cores per rank (OpenMP threads) MP_GPUS_PER_RANK   GPUs per rank, 0 = CPU run
#   MP_CUDA_AWARE      auto | on | off: device buffers straight to MPI (pipeline.cuda_aware); "on"
#                      also switches the MPI library to its GPU path (OMPI_MCA_pml=ucx for Open MPI,
#                      MPICH_GPU_SUPPORT_ENABLED=1 for Cray MPICH / MPICH)
#   MP_BIN             the minipipe binary             MP_DECK            the input deck
#   MP_OUT             directory for dumps, reports, timelines and the log (created)
#   MP_DUMP_LEVEL      none | loss | grads | full | kernels  MP_DRY_RUN=1       print the line, run nothing
#   MPIEXEC            the mpiexec to use (default: mpiexec on PATH)

# Sets the array MP_LINE to the launcher part of the command for the current settings.
minipipe_launcher_line() {
  local nodes=${MP_NODES:-1} rpn=${MP_RANKS_PER_NODE:-1} cpus=${MP_CPUS_PER_RANK:-1} gpus=${MP_GPUS_PER_RANK:-0}
  local ntasks=$((nodes * rpn))
  case "${MINIPIPE_LAUNCHER:-mpiexec}" in
    srun)
      MP_LINE=(srun --nodes="$nodes" --ntasks="$ntasks" --ntasks-per-node="$rpn" --cpus-per-task="$cpus"
        --cpu-bind=cores)
      # One GPU set per rank, the one closest to the rank's cores; the rank then sees only it.
      if [ "$gpus" -gt 0 ]; then MP_LINE+=(--gpus-per-task="$gpus" --gpu-bind=closest); fi
      ;;
    flux)
      MP_LINE=(flux run --nodes="$nodes" --ntasks="$ntasks" --cores-per-task="$cpus" -o cpu-affinity=per-task)
      if [ "$gpus" -gt 0 ]; then MP_LINE+=(--gpus-per-task="$gpus" -o gpu-affinity=per-task); fi
      ;;
    mpiexec)
      # mpiexec has no portable GPU binding: bind_gpu.sh picks the device from the local rank.
      MP_LINE=("${MPIEXEC:-mpiexec}" -n "$ntasks")
      if [ "$gpus" -gt 0 ]; then MP_LINE+=("$MP_BATCH_DIR/bind_gpu.sh"); fi
      ;;
    *)
      echo "launch.sh: MINIPIPE_LAUNCHER='${MINIPIPE_LAUNCHER}'; allowed: srun | flux | mpiexec" >&2
      return 2
      ;;
  esac
}

# Exports what the MPI library and the OpenMP backend read; sets MP_CUDA_AWARE_ARG.
minipipe_environment() {
  export OMP_NUM_THREADS=${MP_CPUS_PER_RANK:-1} OMP_PROC_BIND=spread OMP_PLACES=threads
  case "${MP_CUDA_AWARE:-auto}" in
    on) export OMPI_MCA_pml=ucx MPICH_GPU_SUPPORT_ENABLED=1 ;;
    off) export MPICH_GPU_SUPPORT_ENABLED=0 ;;
    auto) ;;
    *)
      echo "launch.sh: MP_CUDA_AWARE='${MP_CUDA_AWARE}'; allowed: auto | on | off" >&2
      return 2
      ;;
  esac
  MP_CUDA_AWARE_ARG=(--pipeline.cuda_aware "${MP_CUDA_AWARE:-auto}")
}

# Whether the run options ask to overwrite outputs (--force, --output.force [true|1|on]).
minipipe_forced() {
  while [ $# -gt 0 ]; do
    case "$1" in
      --force | --output.force=true | --output.force=1 | --output.force=on) return 0 ;;
      --output.force) case "${2:-}" in true | 1 | on) return 0 ;; esac ;;
    esac
    shift
  done
  return 1
}

# minipipe_launch [minipipe run options...]: starts the run, every output under MP_OUT, the
# console copied to MP_OUT/minipipe.log. Returns minipipe's exit status; 2 when MP_OUT holds the
# log of an earlier launch, or a symlink at its name, and no --force was given (the log is an
# output like the others: a second launch would truncate it before minipipe refuses to overwrite
# the dump, and a dangling link would create its target); 128 + the
# signal when SIGTERM, SIGINT or SIGHUP stopped it (the signal is passed on to the run; mpiexec
# itself exits 1 then, which the exit-code table reserves for "compare found differences").
minipipe_launch() {
  : "${MP_BIN:?launch.sh: set MP_BIN to the minipipe binary}" "${MP_DECK:?launch.sh: set MP_DECK to a deck}"
  : "${MP_OUT:?launch.sh: set MP_OUT to an output directory}"
  minipipe_launcher_line || return
  minipipe_environment || return
  local cmd=("${MP_LINE[@]}" "$MP_BIN" run --deck "$MP_DECK" "${MP_CUDA_AWARE_ARG[@]}"
    --output.dump "$MP_OUT/dump.h5" --output.dump_level "${MP_DUMP_LEVEL:-loss}" --output.json "$MP_OUT/report.json"
    --output.svg "$MP_OUT/timeline.svg" --output.trace "$MP_OUT/trace.json" "$@")
  echo "launch: ${cmd[*]}"
  echo "launch env: OMP_NUM_THREADS=$OMP_NUM_THREADS OMPI_MCA_pml=${OMPI_MCA_pml:-} MPICH_GPU_SUPPORT_ENABLED=${MPICH_GPU_SUPPORT_ENABLED:-}"
  if [ "${MP_DRY_RUN:-0}" = 1 ]; then return 0; fi
  mkdir -p "$MP_OUT" || return 3
  # The log is never written through a symlink (a dangling one would create its target): without
  # --force anything at its name is refused; --force removes that file or link, never a link's
  # target; then the log is created exclusively (noclobber opens with O_EXCL).
  local log=$MP_OUT/minipipe.log
  if [ -e "$log" ] || [ -L "$log" ]; then
    if ! minipipe_forced "$@"; then
      local what="the log of an earlier launch"
      [ -L "$log" ] && what="a symlink to '$(readlink "$log")'"
      echo "launch.sh: error: $log exists ($what); refusing to overwrite it" \
        "without --force; allowed: a new MP_OUT, or --force to replace every output (a symlink itself, not its target)" >&2
      return 2
    fi
    rm -f -- "$log" || return 3
  fi
  if ! (set -C && : > "$log") 2> /dev/null; then
    echo "launch.sh: error: cannot create $log exclusively (something appeared at that name); nothing was run" >&2
    return 2
  fi
  set -o pipefail
  # The run in its own process group (job control on while it starts), so that a signal to this
  # script reaches mpiexec and the ranks; tee ignores them and keeps the log to the last line.
  # Its stdin is /dev/null: a background group that read the terminal would be stopped (SIGTTIN).
  local sig=0 rc=0 leader last monitor=${-//[^m]/}
  set -m
  "${cmd[@]}" < /dev/null 2>&1 | (trap '' INT TERM HUP; exec tee -a "$log") &
  leader=$(jobs -p %+) last=$!
  [ -n "$monitor" ] || set +m  # job control as the caller had it
  trap 'sig=15; kill -TERM -- "-$leader" 2>/dev/null || true' TERM
  trap 'sig=2; kill -INT -- "-$leader" 2>/dev/null || true' INT
  trap 'sig=1; kill -HUP -- "-$leader" 2>/dev/null || true' HUP
  rc=0
  wait %+ || rc=$?
  # A trapped signal ends the wait early: wait until mpiexec and tee are gone, then take the
  # pipeline's status (mpiexec's under pipefail).
  while kill -0 "$leader" 2> /dev/null || kill -0 "$last" 2> /dev/null; do
    sleep 0.2
    rc=0
    wait %+ || rc=$?
  done
  trap - TERM INT HUP
  if [ "$sig" -ne 0 ]; then
    echo "launch.sh: stopped by signal $sig; exit $((128 + sig))" >&2
    return $((128 + sig))
  fi
  return "$rc"
}

# minipipe_find_default FILE_IN_REPO FILE_INSTALLED: the first that exists, relative to
# MP_BATCH_DIR (scripts/batch in the source tree, share/minipipe/batch when installed).
minipipe_find_default() {
  local f
  for f in "$MP_BATCH_DIR/$1" "$MP_BATCH_DIR/$2"; do
    [ -e "$f" ] && { echo "$f"; return 0; }
  done
  return 1
}

# Defaults shared by the batch scripts: the binary on PATH, else next to this file's tree.
minipipe_defaults() {
  if [ -z "${MP_BIN:-}" ]; then
    MP_BIN=$(command -v minipipe || minipipe_find_default ../../build/miniapp/minipipe ../../../bin/minipipe) || {
      echo "launch.sh: no minipipe binary found; set MP_BIN" >&2
      return 2
    }
  fi
  if [ -z "${MP_DECK:-}" ]; then
    MP_DECK=$(minipipe_find_default "../../inputs/$1" "../inputs/$1") || {
      echo "launch.sh: deck $1 not found; pass a deck" >&2
      return 2
    }
  fi
}

# minipipe_batch_main GPUS_PER_RANK [DECK] [minipipe run options]: what every batch script does
# after sourcing this file. Reads the allocation of the scheduler that runs the job (Slurm or Flux;
# neither: mpiexec on this node), then launches. Anything set by the caller wins.
minipipe_batch_main() {
  : "${MP_GPUS_PER_RANK:=$1}"
  shift
  if [ -n "${SLURM_JOB_ID:-}" ]; then
    : "${MINIPIPE_LAUNCHER:=srun}" "${MP_NODES:=$SLURM_JOB_NUM_NODES}"
    : "${MP_RANKS_PER_NODE:=${SLURM_NTASKS_PER_NODE:-$((SLURM_NTASKS / SLURM_JOB_NUM_NODES))}}"
    : "${MP_CPUS_PER_RANK:=${SLURM_CPUS_PER_TASK:-1}}"
  elif [ -n "${FLUX_JOB_ID:-}" ]; then
    : "${MINIPIPE_LAUNCHER:=flux}" "${MP_NODES:=$(flux resource list -s up -no "{nnodes}")}"
  fi
  : "${MINIPIPE_LAUNCHER:=mpiexec}" "${MP_NODES:=1}" "${MP_RANKS_PER_NODE:=2}"
  export MP_OUT=${MP_OUT:-${SLURM_SUBMIT_DIR:-$PWD}/minipipe-${SLURM_JOB_ID:-${FLUX_JOB_ID:-local}}}
  export MP_GPUS_PER_RANK
  if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then
    export MP_DECK=$1
    shift
  fi
  minipipe_defaults small.toml
  minipipe_launch "$@"
}
