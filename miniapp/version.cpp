// Version strings. OpenBLAS is asked which kernels it chose because on CPUs it does not know
// (this project's CI machine) it silently falls back to its slowest ones.
#include "version.hpp"

#include <Kokkos_Core.hpp>

#include <cstdlib>

#ifdef MINIPIPE_HAVE_OPENBLAS_API
extern "C" char* openblas_get_config(void);
extern "C" char* openblas_get_corename(void);
#endif

namespace minipipe {

std::string version_string() {
  return MINIPIPE_VERSION;
}

std::string kokkos_version_string() {
  const int v = KOKKOS_VERSION;
  return std::to_string(v / 10000) + "." + std::to_string((v / 100) % 100) + "." + std::to_string(v % 100);
}

std::string blas_string() {
  std::string s = MINIPIPE_BLAS_LIBRARY;
#ifdef MINIPIPE_HAVE_OPENBLAS_API
  s = std::string("OpenBLAS (") + openblas_get_config() + "), core " + openblas_get_corename();
  if (const char* ct = std::getenv("OPENBLAS_CORETYPE")) s += std::string(", OPENBLAS_CORETYPE=") + ct;
#endif
  return s;
}

}  // namespace minipipe
