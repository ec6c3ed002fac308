#!/usr/bin/env bash
# check_no_string_defines.sh BUILD_DIR SOURCE_DIR: no compile definition carries a quoted string.
# nvcc_wrapper, the CXX compiler of a CUDA build, passes -DNAME="..." on as
# -DNAME=\"...\" and the compile fails ("stray '\' in program"); strings go through generated
# headers instead (cmake/MiniPipeStringHeader.cmake). Checks the compile lines this build really
# uses (build.ninja or the Makefiles' flags.make) and the CMake sources' definition commands.
set -u
build=$1 src=$2
status=0
files=$(find "$build" -maxdepth 6 \( -name build.ninja -o -name flags.make \) -not -path "*/double_build/*")
[ -n "$files" ] || { echo "FAIL: no build.ninja or flags.make under $build"; exit 1; }
hits=$(grep -hoE -- "-D[A-Za-z_][A-Za-z0-9_]*=(\\\\?\"|'\")" $files | sort -u)
if [ -n "$hits" ]; then
  echo "FAIL: string compile definitions in the build files:"
  echo "$hits"
  status=1
fi
# The sources: a definition command (and the lines of its argument list) with NAME="...".
srcs=$(find "$src" \( -name CMakeLists.txt -o -name '*.cmake' \) -not -path "$build/*" -not -path "*/build*/*")
bad=$(awk '/(compile_definitions|COMPILE_DEFINITIONS|add_definitions)/ { open = 1 }
  open && /[A-Za-z_][A-Za-z0-9_]*=\\?"/ { print FILENAME ":" FNR ": " $0 }
  open && /\)/ { open = 0 }' $srcs)
if [ -n "$bad" ]; then
  echo "FAIL: string compile definitions in the CMake sources (use minipipe_string_header):"
  echo "$bad"
  status=1
fi
[ $status -eq 0 ] && echo "PASS: no string compile definitions ($(echo $files | wc -w) build file(s), $(echo $srcs | wc -w) CMake files)"
exit $status
