#!/usr/bin/env bash
# check_double_build.sh SRC BUILD CHECKER DECK [LAUNCHER]: configures and builds minipipe with
# MINIPIPE_DOUBLE=ON in BUILD, then checks that its dumps are double, bitwise identical between
# one rank and pipelined layouts, and agree with the independent reference at double tolerances.
set -uo pipefail
src=$1 build=$2 check=$3 deck=$4 launcher=${5:-}
extra=()
[ -n "$launcher" ] && extra+=("-DCMAKE_CXX_COMPILER_LAUNCHER=$launcher" "-DCMAKE_C_COMPILER_LAUNCHER=$launcher")
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
cmake -S "$src" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DMINIPIPE_DOUBLE=ON -DMINIPIPE_BUILD_TESTS=OFF \
  -DMINIPIPE_BUILD_BENCHMARKS=OFF -DMINIPIPE_WERROR=ON "${extra[@]}" > "$build.configure.log" 2>&1 \
  || { tail -n 30 "$build.configure.log"; echo "FAIL: configure"; exit 1; }
cmake --build "$build" --target minipipe -j 2 > "$build.build.log" 2>&1 || { tail -n 30 "$build.build.log"; echo "FAIL: build"; exit 1; }
bin="$build/miniapp/minipipe"
out="$build/out"
rm -rf "$out" && mkdir -p "$out" || exit 1
mpiexec -n 1 "$bin" run --deck "$deck" --dump "$out/ref.h5" > "$out/ref.log" 2>&1 || { tail "$out/ref.log"; echo "FAIL: one-rank run"; exit 1; }
status=0
"$check" "$out/ref.h5" | tail -n 3 || status=1
grep -q ", f64," <("$check" --schema-only "$out/ref.h5") || { echo "FAIL: the dump of a double build is not f64"; status=1; }
for cfg in "2 zb-h1 4" "3 dualpipev 6" "4 interleaved-1f1b 4"; do
  set -- $cfg
  mpiexec -n "$1" "$bin" run --deck "$deck" --schedule "$2" -m "$3" --dump "$out/p$1_$2.h5" > "$out/p$1_$2.log" 2>&1 \
    || { tail "$out/p$1_$2.log"; echo "FAIL: run p=$1 $2"; status=1; continue; }
  if "$bin" compare "$out/ref.h5" "$out/p$1_$2.h5" > "$out/cmp_p$1_$2.log"; then
    echo "double p=$1 $2 m=$3: bitwise identical to one rank"
  else
    tail -n 10 "$out/cmp_p$1_$2.log"; echo "FAIL: double p=$1 $2 differs from one rank"; status=1
  fi
done
"$check" --require-uneven "$out/p2_zb-h1.h5" | tail -n 2 || status=1
[ $status -eq 0 ] && echo PASS
exit $status
