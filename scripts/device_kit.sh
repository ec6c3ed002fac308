#!/usr/bin/env bash
# Packs a GPU build of minipipe into a kit for a bare Linux machine that has only a GPU driver:
# the binary, the shared libraries it lacks (MPI with launcher and plugins, HDF5, BLAS), decks,
# CPU-made reference dumps (block level, and kernel level for the first-divergence locator) and
# run.sh (see docs/device-kit.md or `run.sh --help`).
#
#   scripts/device_kit.sh BUILD_DIR OUT_DIR [--cpu-build DIR] [--max-mib N]
#
# BUILD_DIR   a configured and built miniPipe tree (CUDA or HIP Kokkos; a host build makes a kit
#             that runs the same checks on a CPU, which is how the kit itself is tested)
# OUT_DIR     where minipipe-kit/ and minipipe-kit.tar.xz are written (a directory, created when
#             missing, that holds no kit yet); the kit is built under a temporary name in it and
#             renamed when complete: a failed attempt leaves nothing behind
# --cpu-build the host build that makes the reference dumps (default: <repo>/build)
# --max-mib   refuse a kit whose archive is larger (default 60)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

die() { echo "device_kit.sh: error: $*" >&2; exit 2; }
usage() { sed -n '2,15p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

[[ $# -ge 1 && ( $1 == -h || $1 == --help ) ]] && { usage; exit 0; }
[[ $# -ge 2 ]] || { usage >&2; exit 2; }
build=$(cd "$1" 2>/dev/null && pwd) || die "BUILD_DIR '$1' does not exist"
out=$2
shift 2
cpu_build=$here/build
max_mib=60
while [[ $# -gt 0 ]]; do
  case $1 in
    --cpu-build) [[ $# -ge 2 ]] || die "--cpu-build needs a directory"; cpu_build=$2; shift 2 ;;
    --max-mib) [[ $# -ge 2 && $2 =~ ^[0-9]+$ ]] || die "--max-mib needs a whole number of MiB, got '${2:-}'"
      max_mib=$2; shift 2 ;;
    *) die "unknown argument '$1'; allowed: --cpu-build DIR, --max-mib N" ;;
  esac
done
exe=$build/miniapp/minipipe
cpu_exe=$cpu_build/miniapp/minipipe
[[ -x $exe ]] || die "'$exe' is not built (build the minipipe target of BUILD_DIR first)"
[[ -x $cpu_exe ]] || die "the reference build '$cpu_exe' is not built (--cpu-build DIR)"
[[ -e $out && ! -d $out ]] && die "OUT_DIR '$out' exists and is not a directory; allowed: a directory (created when missing)"
final=$out/minipipe-kit
[[ -e $final || -L $final || -e $out/minipipe-kit.tar.xz || -L $out/minipipe-kit.tar.xz ]] &&
  die "'$final' or its archive already exists; choose an empty OUT_DIR"
command -v mpiexec > /dev/null || die "mpiexec not found (the kit packs this machine's MPI)"
mkdir -p "$out" 2> /dev/null || die "cannot create OUT_DIR '$out'; allowed: a directory in a writable place"
# Built under a temporary name and renamed at the end: a failed or interrupted attempt removes it,
# so nothing half-built ever sits under the final name and blocks the next attempt.
stage=$(mktemp -d "$out/.minipipe-kit.XXXXXX") || die "cannot create a temporary directory in OUT_DIR '$out'"
trap 'rm -rf "$stage"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
kit=$stage/minipipe-kit

# What the build is: the backend list of its Kokkos, from the build's CMake cache.
kokkos_dir=$(sed -n 's/^Kokkos_DIR:[A-Z]*=//p' "$build/CMakeCache.txt")
backends=host
for h in "$kokkos_dir"/../../../include/KokkosCore_config.h /usr/include/trilinos/KokkosCore_config.h; do
  if [[ -f $h ]]; then
    grep -q '^#define KOKKOS_ENABLE_CUDA$' "$h" && backends=cuda
    grep -q '^#define KOKKOS_ENABLE_HIP$' "$h" && backends=hip
    break
  fi
done

mkdir -p "$kit"/{bin,lib,decks,ref,mpi/bin,mpi/share}
echo "device_kit.sh: packing a '$backends' build from $build into $final"

# The references first: they are what most often fails (a broken reference build), and a failure
# here costs seconds, before the libraries and MPI are copied.
# Decks and the CPU references, deterministic, sequential on one rank; run.sh runs the same
# checks on the GPU (also at p = 2) and needs the same bits. ref/checks.txt lists them as
# "deck steps dump_level": tiny dumps everything for 3 steps; small's gradients and updated
# parameters of one step (its activations would push the kit past 60 MiB).
cp "$here"/inputs/tiny.toml "$here"/inputs/small.toml "$here"/inputs/gpt2-124m.toml "$kit/decks/"
printf '%s\n' "tiny 3 full" "small 1 grads" > "$kit/ref/checks.txt"
while read -r deck steps level; do
  "$cpu_exe" run --deck "$here/inputs/$deck.toml" --train.mode deterministic --train.steps "$steps" \
    --pipeline.schedule sequential --pipeline.microbatches 1 --output.dump "$kit/ref/$deck.h5" \
    --output.dump_level "$level" --output.force true > "$kit/ref/$deck.log" 2>&1 ||
    { tail -n 20 "$kit/ref/$deck.log" >&2; die "the reference run of $deck failed (its log's end above); nothing was left in '$out'"; }
done < "$kit/ref/checks.txt"
# Kernel-level CPU references for the first-divergence locator (the `kernels` dump level: every
# intermediate of each block, docs/design.md §5): on a mismatch run.sh reruns the smallest failing deck at
# that level and prints the first kernel that differs. ref/locate.txt lists them as "deck steps
# batch". Only tiny's first step fits (about 8 MiB compressed; the kit is about 45 MiB without it):
# a kernel-level dump holds everything `full` does, and small's parameters, gradients and updated
# parameters alone are 19 MB, so a mismatch of small only is located at block level.
printf '%s\n' "tiny 1 8" > "$kit/ref/locate.txt"
while read -r deck steps batch; do
  rc=0
  "$cpu_exe" run --deck "$here/inputs/$deck.toml" --train.mode deterministic --train.steps "$steps" \
    --train.batch "$batch" --pipeline.schedule sequential --pipeline.microbatches 1 \
    --output.dump "$kit/ref/${deck}_kernels.h5" --output.dump_level kernels --output.force true \
    > "$kit/ref/${deck}_kernels.log" 2>&1 || rc=$?
  if [[ $rc -eq 2 ]] && grep -q "dump_level" "$kit/ref/${deck}_kernels.log"; then
    echo "device_kit.sh: note: $cpu_exe has no 'kernels' dump level; the kit names a divergence at block level only"
    rm -f "$kit/ref/locate.txt" "$kit/ref/${deck}_kernels.log"
    break
  fi
  [[ $rc -eq 0 ]] || { tail -n 20 "$kit/ref/${deck}_kernels.log" >&2
    die "the kernel-level reference run of $deck failed (its log's end above); nothing was left in '$out'"; }
done < "$kit/ref/locate.txt"

# Libraries: everything ldd resolves except the C library family (the target's own must be
# used), the GPU driver, and the GPU vendor's math libraries (cuBLAS alone is over 500 MiB; run.sh
# finds the target's CUDA toolkit or ROCm copy and says so when it is missing).
skip='^(linux-vdso|ld-linux|libc\.so|libm\.so|libpthread|libdl\.so|librt\.so|libresolv|libutil\.so|libcuda\.so|libnvidia|libcublas|libcudart|libamdhip64|librocblas|libhsa-runtime|libamd_comgr)'
copy_deps() {  # copy_deps FILE DESTDIR: the shared libraries FILE needs, into DESTDIR
  ldd "$1" | awk '/=>/ { print $1, $3 }' | while read -r name path; do
    [[ $name =~ $skip ]] && continue
    [[ $path == "not" || -z $path ]] && die "$1 needs $name, which this machine cannot resolve"
    [[ -e $2/$name ]] || cp -L "$path" "$2/$name"
  done
}
cp "$exe" "$kit/bin/minipipe"
copy_deps "$exe" "$kit/lib"
# The CUDA runtime is small and versioned with the build: pack it (the driver is the target's).
for lib in $(ldd "$exe" | awk '/libcudart/ { print $3 }'); do cp -L "$lib" "$kit/lib/"; done

# MPI: the launcher, its runtime libraries and plugins, relocated with OPAL_PREFIX (Open MPI) or
# used as is (MPICH's hydra needs no plugins).
launcher=$(readlink -f "$(command -v mpiexec)")
cp "$launcher" "$kit/mpi/bin/mpiexec"
copy_deps "$launcher" "$kit/lib"
if command -v ompi_info > /dev/null; then
  orted=$(command -v orted || true)
  [[ -n $orted ]] && { cp "$(readlink -f "$orted")" "$kit/mpi/bin/orted"; copy_deps "$orted" "$kit/lib"; }
  prefix=$(ompi_info --path prefix --parsable | sed -n 's/^path:prefix://p')
  pkglib=$(ompi_info --path pkglibdir --parsable | sed -n 's/^path:pkglibdir://p')
  pkgdata=$(ompi_info --path pkgdatadir --parsable | sed -n 's/^path:pkgdatadir://p')
  rel_pkglib=${pkglib#"$prefix"/}
  rel_pkgdata=${pkgdata#"$prefix"/}
  mkdir -p "$kit/mpi/$rel_pkglib" "$kit/mpi/$rel_pkgdata"
  # Shared-memory and TCP transports only: the fabric plugins (UCX, OFI, PSM, verbs) drag in
  # their vendor stacks and are of no use on one node.
  for plugin in "$pkglib"/mca_*.so; do
    base=$(basename "$plugin")
    [[ $base =~ (ucx|ofi|psm|verbs|openib|usnic|portals|java|cuda|smcuda|hcoll|fca|mxm|lustre|gpfs|ime|slurm|sge|tm_|flux) ]] && continue
    cp "$plugin" "$kit/mpi/$rel_pkglib/"
    copy_deps "$plugin" "$kit/lib"
  done
  cp -r "$pkgdata"/. "$kit/mpi/$rel_pkgdata/"
  echo "openmpi $rel_pkglib" > "$kit/mpi/layout"
  # An external PMIx (Debian's Open MPI) relocates with PMIX_INSTALL_PREFIX.
  pmix_lib=$(ldd "$kit"/mpi/"$rel_pkglib"/mca_pmix_ext3x.so 2> /dev/null | awk '/libpmix/ { print $3 }')
  if [[ -n $pmix_lib ]]; then
    pmix_prefix=$(dirname "$(dirname "$(readlink -f "$pmix_lib")")")
    mkdir -p "$kit/pmix/lib"
    for plugin in "$pmix_prefix"/lib/pmix/*.so; do
      [[ $(basename "$plugin") =~ (psm|ofi|ucx) ]] && continue
      mkdir -p "$kit/pmix/lib/pmix"
      cp "$plugin" "$kit/pmix/lib/pmix/"
      copy_deps "$plugin" "$kit/lib"
    done
    [[ -d $pmix_prefix/share ]] && cp -r "$pmix_prefix/share" "$kit/pmix/"
    echo "pmix" >> "$kit/mpi/layout"
  fi
else
  echo "mpich" > "$kit/mpi/layout"
fi
# h5diff for the bitwise comparisons (run.sh also uses `minipipe compare`).
if command -v h5diff > /dev/null; then
  cp "$(readlink -f "$(command -v h5diff)")" "$kit/bin/h5diff"
  copy_deps "$kit/bin/h5diff" "$kit/lib"
fi

"$cpu_exe" --version > "$kit/ref/cpu_build.txt" 2>&1 || true
cp "$here/scripts/device_kit_run.sh" "$kit/run.sh"
chmod +x "$kit/run.sh"
{
  echo "miniPipe device kit"
  echo "made: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -n) from commit $(git -C "$here" rev-parse --short HEAD 2> /dev/null || echo unknown)"
  echo "backend: $backends; build: $build; references: $cpu_build"
  echo "run: ./run.sh [RESULT_DIR]  (see ./run.sh --help)"
} > "$kit/MANIFEST"

tar -C "$stage" -I 'xz -T0' -cf "$stage/minipipe-kit.tar.xz" minipipe-kit
bytes=$(stat -c %s "$stage/minipipe-kit.tar.xz")
mib=$(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1048576 }')
if ((bytes > max_mib * 1048576)); then
  die "the kit is $mib MiB, over the limit of $max_mib MiB (--max-mib); nothing was left in '$out'"
fi
# The rename: -n and -T never replace what appeared under the final names meanwhile.
mv -n -T "$kit" "$final" && [[ ! -e $kit ]] || die "'$final' appeared while the kit was built; the kit was not moved there"
mv -n -T "$stage/minipipe-kit.tar.xz" "$out/minipipe-kit.tar.xz" && [[ ! -e $stage/minipipe-kit.tar.xz ]] ||
  { rm -rf "$final"; die "'$out/minipipe-kit.tar.xz' appeared while the kit was built; the kit was not moved there"; }
rmdir "$stage" 2> /dev/null || true
echo "device_kit.sh: $out/minipipe-kit.tar.xz is $mib MiB ($(du -sh "$final" | cut -f1) unpacked)"
