#!/usr/bin/env bash
# The device kit's run.sh (scripts/device_kit.sh copies it into the kit): on one GPU, checks the
# tiny and small decks bitwise against CPU-made dumps; on a mismatch reruns the smallest failing
# case at the `kernels` dump level against the kit's kernel-level CPU reference and prints the
# first divergent kernel; then times a GPT-2-124M-shaped deck in deterministic and fast mode, with
# the built-in kernel counters on in a second run of each, and writes every result into one JSON
# (docs/device-kit.md says how to read it).
#
#   ./run.sh [RESULT_DIR] [--steps N] [--timeout S] [--timing-deck NAME]
#
# RESULT_DIR    where dumps, logs and kit_result.json go: a new or empty directory (one that holds
#               anything is refused: a result is never overwritten); default: result next to
#               run.sh, or result.2, result.3, ... when that exists (a new one every run)
# --steps       steps of each timing run (default 3; the first is warm-up)
# --timeout     seconds any one run may take before it is stopped and reported (default 150)
# --timing-deck the deck of the timing runs: gpt2-124m (default), small or tiny (a CPU self-test)
# Exit code: 0 every check ran and every dump matched; 1 a dump differs; 2 bad usage; 3 a run failed.
set -uo pipefail
kit=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

usage() { sed -n '2,17p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }
die() { echo "run.sh: error: $*" >&2; exit 2; }
result=""
steps=3
limit=150
timing_deck=gpt2-124m
while [[ $# -gt 0 ]]; do
  case $1 in
    -h | --help) usage; exit 0 ;;
    --steps) [[ ${2:-} =~ ^[1-9][0-9]*$ ]] || { echo "run.sh: --steps needs a count >= 1, got '${2:-}'" >&2; exit 2; }
      steps=$2; shift 2 ;;
    --timeout) [[ ${2:-} =~ ^[1-9][0-9]*$ ]] || { echo "run.sh: --timeout needs seconds >= 1, got '${2:-}'" >&2; exit 2; }
      limit=$2; shift 2 ;;
    --timing-deck) [[ ${2:-} =~ ^(gpt2-124m|small|tiny)$ ]] || { echo "run.sh: --timing-deck is one of gpt2-124m, small, tiny; got '${2:-}'" >&2; exit 2; }
      timing_deck=$2; shift 2 ;;
    -*) echo "run.sh: unknown option '$1'; allowed: --steps N, --timeout S, --timing-deck NAME" >&2; exit 2 ;;
    *) [[ -z $result ]] || die "a second RESULT_DIR '$1' (after '$result'); allowed: one RESULT_DIR and the options above"
      [[ -n $1 ]] || die "RESULT_DIR is empty; allowed: a new or empty directory"
      result=$1; shift ;;
  esac
done
# GPU results are scarce: a run never writes into a directory that holds anything (an earlier
# run's kit_result.json, dumps and logs). Without RESULT_DIR each run takes a new directory.
if [[ -z $result ]]; then
  result=$kit/result
  n=1
  until mkdir "$result" 2> /dev/null; do
    [[ -e $result || -L $result ]] || die "cannot create '$result' (the kit's directory is not writable?); allowed: a RESULT_DIR elsewhere"
    n=$((n + 1))
    result=$kit/result.$n
  done
else
  if [[ -e $result && ! -d $result ]]; then
    die "RESULT_DIR '$result' exists and is not a directory; allowed: a new or empty directory"
  fi
  if [[ -d $result && -n $(ls -A "$result" 2> /dev/null) ]]; then
    die "RESULT_DIR '$result' already holds results ($(ls -A "$result" | head -3 | tr '\n' ' ')...); a result is never overwritten; allowed: a new or empty directory (or no RESULT_DIR: result, result.2, ... next to run.sh)"
  fi
  mkdir -p "$result" 2> /dev/null || die "cannot create RESULT_DIR '$result'; allowed: a new or empty directory in a writable place"
fi
echo "run.sh: results go to $result"
t_start=$(date +%s)

# The kit's own libraries and MPI, relocated; the GPU vendor's BLAS from the target's toolkit.
export LD_LIBRARY_PATH=$kit/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
vendor_lib=""
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda-*/lib64 /opt/rocm/lib /usr/lib/x86_64-linux-gnu; do
  for f in "$d"/libcublas.so.* "$d"/librocblas.so.*; do
    [[ -e $f ]] && { vendor_lib=$d; break 2; }
  done
done
if [[ -z $vendor_lib ]]; then
  for f in $(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2> /dev/null); do
        [[ -d $f/nvidia/cublas/lib ]] && vendor_lib=$f/nvidia/cublas/lib
  done
fi
[[ -n $vendor_lib ]] && export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$vendor_lib
if read -r layout _ < "$kit/mpi/layout" && [[ $layout == openmpi ]]; then
  export OPAL_PREFIX=$kit/mpi OMPI_MCA_btl=self,vader,tcp OMPI_MCA_pml=ob1 OMPI_MCA_mtl=^ofi,psm,psm2
  export OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_rmaps_base_oversubscribe=1
    # One node, no ssh on a bare machine: the isolated launcher starts every rank locally.
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_plm=isolated
  [[ -d $kit/pmix ]] && export PMIX_INSTALL_PREFIX=$kit/pmix PMIX_MCA_gds=hash PMIX_MCA_psec=native
fi
# OpenBLAS 0.3.21 misdetects recent CPUs and falls back to its slowest kernels; Haswell's (AVX2)
# run on every x86-64 host a GPU sits in. The host BLAS serves host-side work only.
export PATH=$kit/mpi/bin:$kit/bin:$PATH OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-Haswell}
mp=$kit/bin/minipipe

missing=$(ldd "$mp" | awk '/not found/ { print $1 }' | tr '\n' ' ')
if [[ -n $missing ]]; then
  echo "run.sh: minipipe cannot start: missing shared libraries: $missing" >&2
  echo "run.sh: cuBLAS/rocBLAS come from the target's CUDA toolkit or ROCm (looked in /usr/local/cuda*, /opt/rocm, Python's nvidia/cublas)" >&2
  exit 3
fi
gpu=$( (nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2> /dev/null || rocm-smi --showproductname 2> /dev/null || echo "no GPU tool found") | head -1)
mpiexec -n 1 "$mp" --version > "$result/version.txt" 2>&1 < /dev/null

json_text() { printf '%s' "$1" | sed 's/\\/\\\\/g; s/"/\\"/g' | tr -d '\n'; }
# run_mp NAME NP ARGS...: one minipipe run under the time limit; its log is RESULT_DIR/NAME.log.
run_mp() {
  local name=$1 np=$2
  shift 2
  timeout "$limit" mpiexec -n "$np" "$mp" run "$@" > "$result/$name.log" 2>&1
}
# A JSON number from the run's JSON report, or null.
field() { sed -n "s/.*\"$2\": *{\"value\": *\([-0-9.eE+]*\).*/\1/p; s/.*\"$2\": *\([-0-9.eE+]*\).*/\1/p" "$1" | head -1; }

# Launch shapes first: one tiny run at the `kernels` dump level against the kit's kernel-level CPU
# reference, so every device kernel's output at this GPU's launch shape (team size, scratch, league)
# is compared with the host path's bits, kernel by kernel, before the whole-run checks (CI runs the
# same kernels at these shapes on a simulated executor: docs/device-path.md, "Launch shapes in CI").
launch_shapes="null" shapes_worst=0
lsteps="" lbatch=""
[[ -f $kit/ref/locate.txt ]] && read -r _ lsteps lbatch < <(grep "^tiny " "$kit/ref/locate.txt" || true)
if [[ -n $lsteps && -f $kit/ref/tiny_kernels.h5 ]]; then
  run_mp launch_shapes 1 --deck "$kit/decks/tiny.toml" --train.mode deterministic --train.steps "$lsteps" \
    --train.batch "$lbatch" --pipeline.schedule sequential --pipeline.microbatches 1 \
    --output.dump "$result/launch_shapes.h5" --output.dump_level kernels < /dev/null
  rc=$?
  verdict="FAILED (exit code $rc, see launch_shapes.log)"
  ((rc == 124)) && verdict="TIMED OUT after ${limit} s"
  shapes_worst=3
  if [[ $rc -eq 0 ]]; then
    shapes_worst=1
    if "$mp" compare "$kit/ref/tiny_kernels.h5" "$result/launch_shapes.h5" > "$result/launch_shapes.compare.txt" 2>&1 < /dev/null; then
      verdict=IDENTICAL shapes_worst=0
    else
      verdict="DIFFERS: $(grep -m1 '^first divergence:' "$result/launch_shapes.compare.txt" || true)"
    fi
  fi
  echo "run.sh: launch shapes (every kernel of tiny at this GPU's launch shape vs the CPU, kernel level): $verdict"
  launch_shapes="{\"deck\": \"tiny\", \"batch\": $lbatch, \"steps\": $lsteps, \"outcome\": \"$(json_text "$verdict")\"}"
else
  echo "run.sh: no kernel-level reference of tiny in this kit: launch-shape check skipped"
fi

checks=()
worst=$shapes_worst
first_fail=""  # the smallest failing case, "deck schedule p m" (checks.txt lists the decks smallest first)
while read -r deck ref_steps level; do
  for layout in "sequential 1 1" "1f1b 2 4"; do
    read -r sched np m <<< "$layout"
    name=${deck}_${sched}_p${np}
    run_mp "$name" "$np" --deck "$kit/decks/$deck.toml" --train.mode deterministic --train.steps "$ref_steps" \
      --pipeline.schedule "$sched" --pipeline.microbatches "$m" --output.dump "$result/$name.h5" \
      --output.dump_level "$level" < /dev/null
    rc=$?
    verdict=FAILED
    if [[ $rc -eq 0 ]]; then
      if "$mp" compare "$kit/ref/$deck.h5" "$result/$name.h5" > "$result/$name.compare.txt" 2>&1 < /dev/null; then
        verdict=IDENTICAL
        if [[ -x $kit/bin/h5diff ]] && ! h5diff --exclude-path /meta "$kit/ref/$deck.h5" "$result/$name.h5" >> "$result/$name.compare.txt" 2>&1 < /dev/null; then
          verdict=DIFFERS
        fi
      else
        verdict=DIFFERS
      fi
    elif [[ $rc -eq 124 ]]; then
      verdict="TIMED OUT after ${limit} s"
    fi
    [[ $verdict == DIFFERS ]] && ((worst < 1)) && worst=1
    [[ $verdict != IDENTICAL && $verdict != DIFFERS ]] && worst=3
    echo "run.sh: $deck $sched p=$np vs CPU reference: $verdict"
    first=""
    if [[ $verdict == DIFFERS ]]; then
      first=$(grep -m1 '^first divergence:' "$result/$name.compare.txt" || true)
      [[ -n $first ]] && echo "run.sh:   $first"
      [[ -z $first_fail ]] && first_fail="$deck $sched $np $m"
    fi
    checks+=("{\"deck\": \"$deck\", \"steps\": $ref_steps, \"dump_level\": \"$level\", \"schedule\": \"$sched\", \"p\": $np, \"m\": $m, \"verdict\": \"$verdict\", \"first_divergence\": \"$(json_text "$first")\"}")
  done
done < "$kit/ref/checks.txt"

# The locator: the smallest failing case again at the `kernels` dump level (every intermediate of
# each block), on the batch of the kit's kernel-level CPU reference, and its first divergence.
locate="null"
if [[ -n $first_fail ]]; then
  read -r deck sched np m <<< "$first_fail"
  lsteps="" lbatch=""
  [[ -f $kit/ref/locate.txt ]] && read -r _ lsteps lbatch < <(grep "^$deck " "$kit/ref/locate.txt" || true)
  if [[ -n $lsteps && -f $kit/ref/${deck}_kernels.h5 ]]; then
    lm=$((m < lbatch ? m : lbatch))
    name=locate_${deck}_${sched}_p${np}
    run_mp "$name" "$np" --deck "$kit/decks/$deck.toml" --train.mode deterministic --train.steps "$lsteps" \
      --train.batch "$lbatch" --pipeline.schedule "$sched" --pipeline.microbatches "$lm" \
      --output.dump "$result/$name.h5" --output.dump_level kernels < /dev/null
    rc=$?
    line="the kernel-level rerun failed with exit code $rc (see $name.log)"
    if [[ $rc -eq 0 ]]; then
      "$mp" compare "$kit/ref/${deck}_kernels.h5" "$result/$name.h5" > "$result/$name.compare.txt" 2>&1 < /dev/null
      line=$(grep -m1 '^first divergence:' "$result/$name.compare.txt" || echo "no first-divergence line (see $name.compare.txt)")
    fi
    echo "run.sh: kernel level, $deck $sched p=$np m=$lm batch $lbatch: $line"
    locate="{\"deck\": \"$deck\", \"schedule\": \"$sched\", \"p\": $np, \"m\": $lm, \"batch\": $lbatch, \"steps\": $lsteps, \"line\": \"$(json_text "$line")\"}"
  else
    echo "run.sh: no kernel-level reference of $deck in this kit: the block-level first divergence above is all it can say"
  fi
fi

# The kernel_counters object of a run's JSON report (report.cpp writes it last in the run's object,
# its own lines indented by at least six spaces), or null.
counters_of() {
  [[ -f $1 ]] || { echo null; return; }
  awk '/"kernel_counters": /{on=1; sub(/.*"kernel_counters": /, "")} on && /^    }/{exit} on{print}' "$1" | tr -d '\n' | sed 's/^$/null/'
}

timings=()
for mode in deterministic fast; do
  name=timing_${timing_deck}_$mode
  run_mp "$name" 1 --deck "$kit/decks/$timing_deck.toml" --train.mode "$mode" --train.steps "$steps" \
    --pipeline.schedule 1f1b --pipeline.microbatches 4 --output.json "$result/$name.json"
  rc=$?
  tps=null tflops=null step=null status=ok
  if [[ $rc -eq 0 && -f $result/$name.json ]]; then
    tps=$(field "$result/$name.json" fom)
    tflops=$(field "$result/$name.json" model_tflops)
    step=$(field "$result/$name.json" step_seconds_mean)
  elif [[ $rc -eq 124 ]]; then
    status="timed out after ${limit} s"
    worst=3
  else
    status="failed with exit code $rc (see $name.log)"
    worst=3
  fi
  echo "run.sh: $timing_deck $mode: ${tps:-null} tokens/s, ${tflops:-null} model TFLOP/s ($status)"
  # The same deck with the kernel counters on (every kernel fenced, so slower): per-kernel rates
  # beside a same-run sgemm and triad, the roofline, the host synchronizations per step.
  cname=counters_${timing_deck}_$mode
  run_mp "$cname" 1 --deck "$kit/decks/$timing_deck.toml" --train.mode "$mode" --train.steps 2 \
    --pipeline.schedule 1f1b --pipeline.microbatches 4 --profile.kernels true \
    --output.json "$result/$cname.json" --output.roofline "$result/$cname.svg" < /dev/null
  rc=$?
  cstatus=ok
  if [[ $rc -ne 0 ]]; then
    cstatus="failed with exit code $rc (see $cname.log)"
    ((rc == 124)) && cstatus="timed out after ${limit} s"
    worst=3
  else
    sed -n '/^kernel counters/,/^roofline:/p' "$result/$cname.log" | sed 's/^/run.sh: /'
  fi
  timings+=("{\"deck\": \"$timing_deck\", \"mode\": \"$mode\", \"status\": \"$status\", \"tokens_per_second\": ${tps:-null}, \"model_tflops\": ${tflops:-null}, \"step_seconds_mean\": ${step:-null}, \"counters_status\": \"$(json_text "$cstatus")\", \"roofline\": \"$cname.svg\", \"kernel_counters\": $(counters_of "$result/$cname.json")}")
done

join() { local IFS=,; echo "$*"; }
{
  echo "{"
  echo "  \"kit\": \"$(json_text "$(head -2 "$kit/MANIFEST" | tail -1)")\","
  echo "  \"gpu\": \"$(json_text "$gpu")\","
  echo "  \"build\": \"$(json_text "$(head -3 "$result/version.txt" | tr '\n' ';')")\","
  echo "  \"gemm_fast\": \"$(json_text "$(sed -n 's/^fast-mode GEMM: //p' "$result/version.txt")")\","
  echo "  \"vendor_blas_dir\": \"$(json_text "$vendor_lib")\","
  echo "  \"launch_shapes\": $launch_shapes,"
  echo "  \"bitwise\": [$(join "${checks[@]}")],"
  echo "  \"first_divergence_kernel_level\": $locate,"
    echo "  \"timing\": [$(join "${timings[@]}")],"
  echo "  \"seconds\": $(($(date +%s) - t_start)),"
  echo "  \"exit_code\": $worst"
  echo "}"
} > "$result/kit_result.json"
cat "$result/kit_result.json"
exit $worst
