#!/usr/bin/env bash
# check_version.sh MINIPIPE VERSION HDF5_VERSION: `minipipe --version` exits 0 and names the
# project version and the HDF5 version CMake found (a second source), Kokkos, MPI, BLAS and flags.
set -u
bin=$1 version=$2 hdf5=$3
out=$("$bin" --version 2>&1); rc=$?
echo "$out"
[ $rc -eq 0 ] || { echo "FAIL: --version exited $rc"; exit 1; }
status=0
for want in "^miniPipe $version\$" "^Kokkos [0-9]+\.[0-9]+\.[0-9]+, backends: " "^MPI: .+\(MPI standard [0-9]\.[0-9]\)" \
  "^HDF5 ${hdf5//./\\.} \((parallel|serial)\)" "^BLAS: " "^host FMA contraction: " "^device FMA contraction: " \
  "^-march=native: (on|off)" "^precision: (float32|double)"; do
  echo "$out" | grep -Eq -- "$want" || { echo "FAIL: no line matching '$want'"; status=1; }
done
[ $status -eq 0 ] && echo PASS
exit $status
