#!/usr/bin/env bash
# check_install.sh BUILD_DIR SOURCE_DIR MPIEXEC CMAKE: installs into a fresh prefix, moves the prefix,
# hides the source and build trees (a private mount namespace where available) and runs the
# installed binary from an unrelated directory on the installed decks, CSV schedule and batch script.
set -u
build=$(cd "$1" && pwd) src=$(cd "$2" && pwd) mpiexec=$3 cmake=${4:-cmake}
work=$(mktemp -d /tmp/minipipe_install.XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
"$cmake" --install "$build" --prefix "$work/stage" >"$work/install.log" 2>&1 || { cat "$work/install.log"; fail "cmake --install"; }
mv "$work/stage" "$work/prefix"  # nothing may depend on the prefix it was installed to either
p=$work/prefix
for f in bin/minipipe share/minipipe/inputs/tiny.toml share/minipipe/inputs/text.toml share/minipipe/inputs/gpt2-124m.toml \
  share/minipipe/schedules/zb_h1_p2_m4.csv share/minipipe/schedules/dualpipev_p2_m4.csv share/minipipe/batch/launch.sh \
  share/minipipe/batch/slurm_gpu.sh share/doc/miniPipe/README.md share/doc/miniPipe/determinism.md \
  share/doc/miniPipe/dump-format.md; do
  [ -e "$p/$f" ] || fail "$f not installed"
done
if readelf -d "$p/bin/minipipe" | grep -E 'R(UN)?PATH' | grep -qF -e "$build" -e "$src"; then
  fail "installed binary has a run path into the build or source tree: $(readelf -d "$p/bin/minipipe" | grep PATH)"
fi
ldd "$p/bin/minipipe" | grep -qF -e "$build" -e "$src" && fail "installed binary loads a library from the build tree"

mkdir -p "$work/elsewhere"
cat >"$work/run.sh" <<RUN
set -eu
cd "$work/elsewhere"
"$p/bin/minipipe" --version
"$p/bin/minipipe" run --deck "$p/share/minipipe/inputs/tiny.toml" --train.steps 3 --dump tiny.h5
"$mpiexec" -n 2 "$p/bin/minipipe" run --deck "$p/share/minipipe/inputs/tiny.toml" --train.steps 2 --schedule csv \
  --pipeline.csv "$p/share/minipipe/schedules/zb_h1_p2_m4.csv" -m 4 --pipeline.placement loop
PATH="$p/bin:\$PATH" MINIPIPE_LAUNCHER=mpiexec MPIEXEC="$mpiexec" MP_OUT="$work/elsewhere/batch" \
  bash "$p/share/minipipe/batch/slurm_cpu.sh" "$p/share/minipipe/inputs/tiny.toml" --train.steps 2 --schedule 1f1b -m 2
test -s tiny.h5 && test -s batch/report.json
RUN
clean_env=(env -i PATH=/usr/bin:/bin HOME="$work" OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  OMPI_MCA_mpi_yield_when_idle=1 OMPI_MCA_rmaps_base_oversubscribe=1 OPENBLAS_NUM_THREADS=1)
if unshare -m --propagation private true 2>/dev/null; then
  echo "hiding $build and $src behind empty mounts"
  "${clean_env[@]}" unshare -m --propagation private bash -c \
    "mount -t tmpfs none '$build' && mount -t tmpfs none '$src' && test -z \"\$(ls -A '$src')\" && bash '$work/run.sh'" \
    >"$work/run.log" 2>&1
else
  echo "no mount namespace here: the trees stay visible, the run uses a clean environment from $work/elsewhere"
  "${clean_env[@]}" bash "$work/run.sh" >"$work/run.log" 2>&1
fi
rc=$?
cat "$work/run.log"
[ $rc -eq 0 ] || fail "the installed binary did not run from a clean prefix (exit $rc)"
echo PASS
