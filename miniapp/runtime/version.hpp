// Build and platform identification printed by the driver, the benchmarks and the reports:
// miniPipe version, Kokkos version and backends, MPI and HDF5 libraries, BLAS, determinism flags.
#pragma once

#include <string>

#include "kernels/mode.hpp"

namespace minipipe {

std::string version_string();
std::string kokkos_version_string();
std::string blas_string();
// The GEMM that runs in `mode` on the default execution space: in fast mode the library Kokkos
// Kernels calls (cuBLAS, rocBLAS, the host BLAS, or its own kernel where the install has no such
// TPL); in deterministic mode miniPipe's own, whose bits do not depend on the backend.
std::string gemm_string(Mode mode);
// "KokkosBlas::gemm -> " and the library it calls on the default execution space.
std::string kokkosblas_gemm_string();
// The host GEMM's cache blocking and the CPU description it was chosen from
// (kernels/gemm_blocking.hpp); empty when the device path runs the GEMMs.
std::string gemm_blocking_string();

// Kokkos backends compiled into the Kokkos install, e.g. "Serial, OpenMP", and the default one.
std::string kokkos_backends_string();
// The default execution space's name ("Serial", "OpenMP", "Cuda"), as cost files record it.
std::string execution_space_name();
// The MPI library's own identification (first line of MPI_Get_library_version) and standard.
std::string mpi_library_string();
// "1.10.8 (parallel)" from H5get_libversion and how miniPipe was built against it.
std::string hdf5_version_string();
// The compile-time switches that the determinism contract depends on, one "name: value" each.
std::string determinism_flags_string();

// Everything above, one item per line (no final newline): the text of `minipipe --version`.
std::string build_report();

}  // namespace minipipe
