// Version strings. OpenBLAS is asked which kernels it chose because on CPUs it does not know
// (this project's CI machine) it silently falls back to its slowest ones.
#include "miniapp/runtime/version.hpp"

#include <hdf5.h>
#include <mpi.h>

#include <KokkosKernels_config.h>
#include <Kokkos_Core.hpp>

#include <cstdlib>
#include <cstring>
#include <sstream>
#include <type_traits>

#include "kernels/cpu_info.hpp"
#include "kernels/gemm.hpp"
#include "kernels/gemm_blocking.hpp"
#include "kernels/kernel_path.hpp"

#ifdef MINIPIPE_HAVE_OPENBLAS_API
extern "C" char* openblas_get_config(void);
extern "C" char* openblas_get_corename(void);
extern "C" int openblas_get_parallel(void);
#endif

// MINIPIPE_VERSION, MINIPIPE_BLAS_LIBRARY, the compiler, build type and determinism flags, from
// miniapp/CMakeLists.txt (generated: string defines do not survive nvcc_wrapper).
#include "minipipe_build_info.hpp"

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
  // Its own thread pool (pthreads) competes with an OpenMP Kokkos's threads for the same cores;
  // the OpenMP build of OpenBLAS shares theirs (README, "Building against another Kokkos").
  const int par = openblas_get_parallel();
  s += par == 0 ? ", threading none" : par == 1 ? ", threading pthreads" : par == 2 ? ", threading OpenMP" : "";
  if (const char* ct = std::getenv("OPENBLAS_CORETYPE")) s += std::string(", OPENBLAS_CORETYPE=") + ct;
#endif
  return s;
}

std::string gemm_string(Mode mode) {
  if (mode == Mode::deterministic)
    return std::string("miniPipe deterministic GEMM (one fixed k-order per output, every backend); ") +
           (use_device_path() ? "device" : "host") + " kernel path";
  if (fast_gemm_on_gemm_det()) return gemm_det_label() + " (train.fast_gemm = " + to_string(fast_gemm()) + ")";
  return kokkosblas_gemm_string();
}

std::string kokkosblas_gemm_string() {
  using Mem = Kokkos::DefaultExecutionSpace::memory_space;
  const bool host = Kokkos::SpaceAccessibility<Kokkos::DefaultHostExecutionSpace, Mem>::accessible;
  std::string lib = "Kokkos Kernels' own GEMM (no vendor BLAS TPL for this memory space)";
#if defined(KOKKOS_ENABLE_CUDA) && defined(KOKKOSKERNELS_ENABLE_TPL_CUBLAS)
  if (std::is_same<Kokkos::DefaultExecutionSpace, Kokkos::Cuda>::value) lib = "cuBLAS";
#endif
#if defined(KOKKOS_ENABLE_HIP) && defined(KOKKOSKERNELS_ENABLE_TPL_ROCBLAS)
#if KOKKOS_VERSION >= 40000
  if (std::is_same<Kokkos::DefaultExecutionSpace, Kokkos::HIP>::value) lib = "rocBLAS";
#endif
#endif
#if defined(KOKKOSKERNELS_ENABLE_TPL_BLAS) || defined(KOKKOSKERNELS_ENABLE_TPL_MKL)
  if (host) lib = "host BLAS: " + blas_string();
#endif
  (void)host;
  return "KokkosBlas::gemm -> " + lib;
}

std::string gemm_blocking_string() {
  if (use_device_path()) return {};
  return describe(gemm_blocking()) + " (" + describe(host_cpu_info()) + ")";
}

std::string kokkos_backends_string() {
  std::string s;
  auto add = [&s](const char* name) { s += (s.empty() ? "" : ", ") + std::string(name); };
#ifdef KOKKOS_ENABLE_SERIAL
  add("Serial");
#endif
#ifdef KOKKOS_ENABLE_OPENMP
  add("OpenMP");
#endif
#ifdef KOKKOS_ENABLE_THREADS
  add("Threads");
#endif
#ifdef KOKKOS_ENABLE_CUDA
  add("CUDA");
#endif
#ifdef KOKKOS_ENABLE_HIP
  add("HIP");
#endif
#ifdef KOKKOS_ENABLE_SYCL
  add("SYCL");
#endif
  return s + " (default execution space " + Kokkos::DefaultExecutionSpace::name() + ")";
}

std::string mpi_library_string() {
  // Callable before MPI_Init (MPI 3.0), so --version works however the driver was started.
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  MPI_Get_library_version(text, &len);
  // Some libraries count the terminating NUL in len; stop at the first one.
  std::string lib(text, static_cast<std::size_t>(len));
  lib.resize(std::strlen(lib.c_str()));
  const auto eol = lib.find_first_of("\r\n");
  if (eol != std::string::npos) lib.resize(eol);
  while (!lib.empty() && (lib.back() == ',' || lib.back() == ' ')) lib.pop_back();
  int major = 0, minor = 0;
  MPI_Get_version(&major, &minor);
  return lib + " (MPI standard " + std::to_string(major) + "." + std::to_string(minor) + ")";
}

std::string hdf5_version_string() {
  unsigned major = 0, minor = 0, release = 0;
  H5get_libversion(&major, &minor, &release);
  std::string s = std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(release);
#ifdef MINIPIPE_HDF5_PARALLEL
  s += " (parallel)";
#else
  s += " (serial)";
#endif
  return s;
}

std::string determinism_flags_string() {
  std::ostringstream os;
  os << "host FMA contraction: " << MINIPIPE_FLAG_FP_CONTRACT << "\n"
     << "device FMA contraction: " << MINIPIPE_FLAG_DEVICE_FMAD << "\n"
     << "-march=native: " << MINIPIPE_FLAG_MARCH << "\n"
#ifdef MINIPIPE_DOUBLE
     << "precision: double (MINIPIPE_DOUBLE=ON)";
#else
     << "precision: float32 (MINIPIPE_DOUBLE=OFF)";
#endif
  return os.str();
}

std::string build_report() {
  std::ostringstream os;
  os << "miniPipe " << version_string() << "\n"
     << "Kokkos " << kokkos_version_string() << ", backends: " << kokkos_backends_string() << "\n"
     << "MPI: " << mpi_library_string() << "\n"
     << "HDF5 " << hdf5_version_string() << "\n"
     << "BLAS: " << blas_string() << "\n"
     << "fast-mode GEMM: " << gemm_string(Mode::fast) << "\n"
     << "compiler: " << MINIPIPE_BUILD_COMPILER << ", build type " << MINIPIPE_BUILD_TYPE << "\n"
     << determinism_flags_string();  // CLI11 ends --version output with its own newline
  return os.str();
}

std::string execution_space_name() {
  return ExecSpace::name();
}

}  // namespace minipipe
