// View aliases, the compute mode and portability shims shared by every kernel of miniPipe.
// Everything that differs between Kokkos 3.4 and 4.x is wrapped here, nowhere else.
#pragma once

#include <Kokkos_Core.hpp>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "kernel_counters.hpp"
#include "mode.hpp"

namespace minipipe {

using ExecSpace = Kokkos::DefaultExecutionSpace;
using MemSpace = ExecSpace::memory_space;
using HostSpace = Kokkos::HostSpace;

// Row-major (LayoutRight) everywhere so a [B,T,C] tensor is also a [B*T, C] matrix.
template <class T>
using View1 = Kokkos::View<T*, Kokkos::LayoutRight, MemSpace>;
template <class T>
using View2 = Kokkos::View<T**, Kokkos::LayoutRight, MemSpace>;
template <class T>
using View3 = Kokkos::View<T***, Kokkos::LayoutRight, MemSpace>;
template <class T>
using View4 = Kokkos::View<T****, Kokkos::LayoutRight, MemSpace>;

// Unmanaged 2-D view of a [B,T,C] tensor as [B*T, C] (no copy).
template <class T>
using View2U = Kokkos::View<T**, Kokkos::LayoutRight, MemSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
template <class T>
View2U<T> as_rows(const View3<T>& x) {
  return View2U<T>(x.data(), x.extent(0) * x.extent(1), x.extent(2));
}

// Unmanaged views: the argument types of every kernel. Managed views convert to these, and
// parameter tensors stored flat are viewed with their shape without a copy.
template <class T>
using Vec = Kokkos::View<T*, Kokkos::LayoutRight, MemSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
template <class T>
using CVec = Kokkos::View<const T*, Kokkos::LayoutRight, MemSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
template <class T>
using Mat = Kokkos::View<T**, Kokkos::LayoutRight, MemSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
template <class T>
using CMat = Kokkos::View<const T**, Kokkos::LayoutRight, MemSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
using CIdx = Kokkos::View<const int*, Kokkos::LayoutRight, MemSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
using Idx = Kokkos::View<int*, Kokkos::LayoutRight, MemSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

// Argument check of a kernel's host-side entry: throws std::invalid_argument "where: what".
inline void require(bool ok, const char* where, const std::string& what) {
  if (!ok) throw std::invalid_argument(std::string(where) + ": " + what);
}

// ---- portability shims ----------------------------------------------------------------

// Explicit fused multiply-add: a*b+c with one rounding. IEEE-exact on every backend, so it
// is the only FMA the deterministic kernels use (implicit contraction is disabled).
KOKKOS_FORCEINLINE_FUNCTION float fma_exact(float a, float b, float c) {
  return ::fmaf(a, b, c);
}
KOKKOS_FORCEINLINE_FUNCTION double fma_exact(double a, double b, double c) {
  return ::fma(a, b, c);
}

// Correctly rounded square root (IEEE) on every backend.
KOKKOS_FORCEINLINE_FUNCTION float sqrt_exact(float x) {
  return ::sqrtf(x);
}
KOKKOS_FORCEINLINE_FUNCTION double sqrt_exact(double x) {
  return ::sqrt(x);
}

// libm functions for fast mode (Kokkos::Experimental:: before 3.7, Kokkos:: after).
#if KOKKOS_VERSION >= 30700
namespace kmath = ::Kokkos;
#else
namespace kmath = ::Kokkos::Experimental;
#endif

// Kokkos 3.5 and later report every fence to the kernel counters' callback; before 3.5 the
// shims count the ones miniPipe asks for.
// Host synchronizations: the points where the host waits for the device (explicit fences, a
// reduction into a host scalar, a deep_copy that reads or fills memory across the two), counted
// where miniPipe issues them so that a run reports them per step (RankStepStats::host_syncs).
// The fence wrappers below count themselves; other sites call note_host_sync(). Kokkos' own
// waits inside libraries (Kokkos Kernels) are not seen: Kokkos Tools counters can replace this one.
inline std::int64_t& host_sync_count() {
  static std::int64_t n = 0;
  return n;
}
inline void note_host_sync() {
  ++host_sync_count();
}

inline void fence(const char* label) {
  note_host_sync();
#if KOKKOS_VERSION >= 30500
  Kokkos::fence(label);
#else
  (void)label;
  if (counters::counting()) counters::note_program_fence(label);
  Kokkos::fence();
#endif
}

template <class Space>
inline void fence_space(const Space& space, const char* label) {
  note_host_sync();
#if KOKKOS_VERSION >= 30500
  space.fence(label);
#else
  (void)label;
  if (counters::counting()) counters::note_program_fence(label);
  space.fence();
#endif
}

// Joins a host backend's threads after a host-path kernel (packed GEMM, held samples): no device is
// involved, so it is not a host synchronization and is not counted.
template <class Space>
inline void fence_host_threads(const Space& space, const char* label) {
#if KOKKOS_VERSION >= 30500
  space.fence(label);
#else
  (void)label;
  if (counters::counting()) counters::note_program_fence(label);
  space.fence();
#endif
}

// RAII Kokkos profiling region, so Kokkos Tools / Nsight see each phase by name.
class ProfileRegion {
 public:
  explicit ProfileRegion(const char* name) { Kokkos::Profiling::pushRegion(name); }
  explicit ProfileRegion(const std::string& name) { Kokkos::Profiling::pushRegion(name); }
  ~ProfileRegion() { Kokkos::Profiling::popRegion(); }
  ProfileRegion(const ProfileRegion&) = delete;
  ProfileRegion& operator=(const ProfileRegion&) = delete;
};

}  // namespace minipipe
