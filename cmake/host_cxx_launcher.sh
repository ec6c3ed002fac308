#!/bin/sh
# Compiler launcher for host-only translation units when CMAKE_CXX_COMPILER is hipcc (which
# compiles every .cpp as HIP): runs the same command with the host C++ compiler instead.
# Called by CMake as: host_cxx_launcher.sh HOST_CXX DEVICE_CXX ARGS...
host=$1
shift 2
exec "$host" "$@"
