// The process-wide KernelPath setting of the deterministic kernels, initialised from the
// environment variable MINIPIPE_KERNEL_PATH so test binaries can force the device path.
#include "kernel_path.hpp"

#include <cstddef>
#include <cstdlib>
#include <stdexcept>

#include "gemm.hpp"
#include "team.hpp"
#include "types.hpp"

namespace minipipe {
namespace {
constexpr bool kHostAccessible = Kokkos::SpaceAccessibility<Kokkos::DefaultHostExecutionSpace, MemSpace>::accessible;

// The spellings of a setting's values; the first is "auto", which "automatic" also names.
template <class E>
struct Spelling {
  const char* name;
  E value;
};
constexpr Spelling<KernelPath> kPaths[] = {
    {"auto", KernelPath::automatic}, {"host", KernelPath::host}, {"device", KernelPath::device}};
constexpr Spelling<FastGemm> kFastGemms[] = {
    {"auto", FastGemm::automatic}, {"blas", FastGemm::blas}, {"gemm_det", FastGemm::gemm_det}};

template <class E, std::size_t N>
const char* name_of(E v, const Spelling<E> (&names)[N]) {
  for (const Spelling<E>& s : names)
    if (s.value == v) return s.name;
  return names[0].name;
}

// Throws std::invalid_argument naming `where`, the text and every allowed spelling.
template <class E, std::size_t N>
E parse_spelling(const std::string& text, const char* where, const Spelling<E> (&names)[N]) {
  if (text == "automatic") return names[0].value;
  std::string allowed;
  for (const Spelling<E>& s : names) {
    if (text == s.name) return s.value;
    allowed += std::string(allowed.empty() ? "" : ", ") + s.name;
  }
  throw std::invalid_argument(std::string(where) + " = '" + text + "': allowed are " + allowed);
}

// The value of environment variable `var` when set and not empty, else automatic.
template <class E, std::size_t N>
E from_env(const char* var, const Spelling<E> (&names)[N]) {
  const char* env = std::getenv(var);
  return env && *env ? parse_spelling(env, var, names) : names[0].value;
}

KernelPath initial_setting() {
#ifndef MINIPIPE_TEAM_SIM_ON
  const char* sim = std::getenv("MINIPIPE_TEST_TEAM_SIM");
  if (sim && *sim)
    throw std::invalid_argument(std::string("MINIPIPE_TEST_TEAM_SIM = '") + sim +
                                "': this build has no simulated team executor (configure a host backend with "
                                "-DMINIPIPE_TEAM_SIM=ON)");
#endif
  return from_env("MINIPIPE_KERNEL_PATH", kPaths);
}

KernelPath& setting() {
  static KernelPath p = initial_setting();
  return p;
}

FastGemm& fast_gemm_setting() {
  static FastGemm g = from_env("MINIPIPE_FAST_GEMM", kFastGemms);
  return g;
}
}  // namespace

const char* to_string(KernelPath p) {
  return name_of(p, kPaths);
}

KernelPath parse_kernel_path(const std::string& text, const char* where) {
  return parse_spelling(text, where, kPaths);
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
  return name_of(g, kFastGemms);
}

FastGemm parse_fast_gemm(const std::string& text, const char* where) {
  return parse_spelling(text, where, kFastGemms);
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
