#!/usr/bin/env bash
# check_host_only.sh BUILD_DIR: every target without Kokkos is built by the host compiler
# (minipipe_host_only), so that nvcc_wrapper as CMAKE_CXX_COMPILER builds the whole tree
# (docs/building.md); the top-level CMakeLists.txt writes the unmarked ones to host_only_unmarked.txt.
f=$1/host_only_unmarked.txt
[ -f "$f" ] || { echo "FAIL: no $f (the configure step that lists unmarked targets did not run)"; exit 1; }
if [ -s "$f" ]; then
  echo "FAIL: targets without Kokkos that nvcc would compile (add them to minipipe_host_only):"
  cat "$f"; echo
  exit 1
fi
echo "PASS: every target without Kokkos is host-only"
