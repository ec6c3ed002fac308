#!/usr/bin/env bash
# Installs what is missing on a fresh Debian 12 machine (as root or with sudo) and builds
# miniPipe into ${BUILD_DIR:-build} (warnings as errors). Safe to run again: installed packages
# are skipped.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${BUILD_DIR:-$here/build}

packages=(cmake g++ ninja-build pkg-config
  libtrilinos-kokkos-dev libtrilinos-kokkos-kernels-dev
  libopenmpi-dev openmpi-bin libhdf5-openmpi-dev hdf5-tools libopenblas-dev
  libgtest-dev libbenchmark-dev libtomlplusplus-dev libcli11-dev nlohmann-json3-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The one configure line of demo.sh and test.sh (both call this script): the same flags, warnings
# as errors included, so running one after the other into the same build directory rebuilds nothing.
cmake -S "$here" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMINIPIPE_WERROR=ON ${MINIPIPE_CMAKE_ARGS:-}
cmake --build "$build" -j "$(nproc)"
