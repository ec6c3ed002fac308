// The process-wide KernelPath setting of the deterministic kernels, initialised from the
// environment variable MINIPIPE_KERNEL_PATH so test binaries can force the device path.
#include "kernel_path.hpp"

#include <cstdlib>
#include <stdexcept>

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

}  // namespace minipipe
