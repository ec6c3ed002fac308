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

// Row-major (LayoutRight) everywhere, so a [B,T,C] tensor is stored as a [B*T, C] matrix.
template <class T>
using View1 = Kokkos::View<T*, Kokkos::LayoutRight, MemSpace>;
template <class T>
using View2 = Kokkos::View<T**, Kokkos::LayoutRight, MemSpace>;

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
// reduction into a host scalar, a blocking deep_copy between host and device memory). Each goes
// through one of the shims below (fence, fence_space, blocking_copy) or opens a
// counters::HostSync itself, which counts it once for the run report (RankStepStats::host_syncs)
// and lets the kernel counters check that Kokkos saw it (kernel_counters.hpp). Kokkos' own waits
// inside libraries (Kokkos Kernels) are not miniPipe's and are not counted.
inline std::int64_t host_sync_count() {
  return counters::host_sync_count();
}

inline void fence(const char* label) {
  counters::HostSync sync;
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
  counters::HostSync sync;
#if KOKKOS_VERSION >= 30500
  space.fence(label);
#else
  (void)label;
  if (counters::counting()) counters::note_program_fence(label);
  space.fence();
#endif
}

// A deep_copy the host waits for (no execution space: Kokkos fences before and after it), counted
// as one host synchronization.
template <class Dst, class Src>
inline void blocking_copy(Dst&& dst, const Src& src) {  // Dst: a view, or a scalar read from one
  counters::HostSync sync;
  Kokkos::deep_copy(dst, src);
}

// The instance boundary transfers' staging copies run on, so that a copy overlaps the next compute
// action (executor.cpp). A device backend gets its own queue (a CUDA/HIP stream, a SYCL queue:
// partition_space, Kokkos 4 and later); a host backend (Serial, OpenMP, Threads) keeps the default
// instance, where kernels and copies run when they are issued and a second queue would gain nothing.
#if KOKKOS_VERSION >= 40000 && \
    (defined(KOKKOS_ENABLE_CUDA) || defined(KOKKOS_ENABLE_HIP) || defined(KOKKOS_ENABLE_SYCL))
inline constexpr bool kTransferQueueOfItsOwn = !Kokkos::SpaceAccessibility<Kokkos::HostSpace, MemSpace>::accessible;
inline ExecSpace transfer_instance() {
  if (kTransferQueueOfItsOwn) return Kokkos::Experimental::partition_space(ExecSpace(), 1)[0];
  return ExecSpace();
}
#else
inline constexpr bool kTransferQueueOfItsOwn = false;
inline ExecSpace transfer_instance() {
  return ExecSpace();
}
#endif

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
