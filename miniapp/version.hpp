// Build and platform identification printed by the driver, the benchmarks and the reports:
// miniPipe version, Kokkos version and backend, BLAS library and (for OpenBLAS) its core.
#pragma once

#include <string>

namespace minipipe {

std::string version_string();
std::string kokkos_version_string();
std::string blas_string();

}  // namespace minipipe
