// The process-wide KernelPath setting of the deterministic kernels, initialised from the
// environment variable MINIPIPE_KERNEL_PATH so test binaries can force the device path.
#include "kernel_path.hpp"

#include <cstdlib>
#include <stdexcept>

#include "gemm.hpp"
#include "types.hpp"

namespace minipipe {
namespace {
constexpr bool kHostAccessible = Kokkos::SpaceAccessibility<Kokkos::DefaultHostExecutionSpace, MemSpace>::accessible;

KernelPath& setting() {
  static KernelPath p = [] {
    const char* env = std::getenv("MINIPIPE_KERNEL_PATH");
    return env && *env ? parse_kernel_path(env, "MINIPIPE_KERNEL_PATH") : KernelPath::automatic;
  }();
  return p;
}

FastGemm& fast_gemm_setting() {
  static FastGemm g = [] {
    const char* env = std::getenv("MINIPIPE_FAST_GEMM");
    return env && *env ? parse_fast_gemm(env, "MINIPIPE_FAST_GEMM") : FastGemm::automatic;
  }();
  return g;
}
}  // namespace

const char* to_string(KernelPath p) {
  switch (p) {
    case KernelPath::host:
      return "host";
    case KernelPath::device:
      return "device";
    default:
      return "auto";
  }
}

KernelPath parse_kernel_path(const std::string& text, const char* where) {
  if (text == "auto" || text == "automatic") return KernelPath::automatic;
  if (text == "host") return KernelPath::host;
  if (text == "device") return KernelPath::device;
  throw std::invalid_argument(std::string(where) + " = '" + text + "': allowed are auto, host, device");
}

void set_kernel_path(KernelPath p) {
  if (p == KernelPath::host && !kHostAccessible)
    throw std::invalid_argument(std::string("kernel path 'host' needs host-accessible memory; ") + MemSpace::name() +
                                " is not");
  setting() = p;
}

KernelPath kernel_path() {
  return setting();
}

bool use_device_path() {
  const KernelPath p = setting();
  return p == KernelPath::device || (p == KernelPath::automatic && !kHostAccessible);
}

const char* to_string(FastGemm g) {
  switch (g) {
    case FastGemm::blas:
      return "blas";
    case FastGemm::gemm_det:
      return "gemm_det";
    default:
      return "auto";
  }
}

FastGemm parse_fast_gemm(const std::string& text, const char* where) {
  if (text == "auto" || text == "automatic") return FastGemm::automatic;
  if (text == "blas") return FastGemm::blas;
  if (text == "gemm_det") return FastGemm::gemm_det;
  throw std::invalid_argument(std::string(where) + " = '" + text + "': allowed are auto, blas, gemm_det");
}

void set_fast_gemm(FastGemm g) {
  fast_gemm_setting() = g;
}

FastGemm fast_gemm() {
  return fast_gemm_setting();
}

bool fast_gemm_on_gemm_det() {
  const FastGemm g = fast_gemm_setting();
  return g == FastGemm::gemm_det || (g == FastGemm::automatic && !use_device_path() && gemm_det_has_simd());
}

}  // namespace minipipe
