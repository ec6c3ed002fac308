// Divergence detection: where a device tensor first holds a NaN or an infinity, found with one
// reduction on the device (no host copy of the tensor), so a trainer can name the first bad one.
#pragma once

#include <cstdint>
#include <limits>
#include <string>

#include "types.hpp"

namespace minipipe {

enum class NonFiniteKind { none, nan, inf };

const char* to_string(NonFiniteKind kind);  // "finite", "NaN", "inf"

// The lowest flat index holding a non-finite value and what it holds; index -1 when every
// element is finite.
struct NonFinite {
  std::int64_t index = -1;
  NonFiniteKind kind = NonFiniteKind::none;
  explicit operator bool() const { return kind != NonFiniteKind::none; }
};

// The reduction code of element i holding v: 2*i for NaN, 2*i + 1 for an infinity, kFiniteCode
// when v is finite. The lowest code over a tensor (a Kokkos::Min reduction) names its first
// non-finite element and kind, so a kernel that writes a tensor can check it in the same pass.
// x - x is NaN exactly when x is NaN or +-inf (no fast-math here) and x != x tells them apart.
constexpr std::int64_t kFiniteCode = std::numeric_limits<std::int64_t>::max();
template <class T>
KOKKOS_FORCEINLINE_FUNCTION std::int64_t non_finite_code(T v, std::int64_t i) {
  const T d = v - v;
  return d != d ? 2 * i + (v != v ? 0 : 1) : kFiniteCode;
}
NonFinite decode_non_finite(std::int64_t lowest_code);

// Elements one thread of a checked element-wise kernel takes: a block on host backends, whose loop
// vectorizes because it carries a flag, not the index minimum (the per-element Min reduction kept
// AdamW scalar: no vsqrtps, no vdivps); one on devices, where neighbouring threads coalesce.
constexpr std::int64_t kCheckedBlock =
    Kokkos::SpaceAccessibility<Kokkos::DefaultHostExecutionSpace, MemSpace>::accessible ? 2048 : 1;

// Runs write(i) for every i in [0, n = out.extent(0)): it stores element i of `out` (or only reads
// it) and returns the value. Reduces the lowest non_finite_code of out into `lowest_code` (a
// Kokkos::Min reducer on a host scalar or a device View) from the same pass: a block that met one
// is scanned again for its lowest code, so the answer is that of the per-element reduction.
// `label` names the kernel (Kokkos Tools).
template <class T, class View, class Write, class Lowest>
void checked_reduce(const char* label, const View& out, const Write& write, const Lowest& lowest_code) {
  const std::int64_t n = static_cast<std::int64_t>(out.extent(0));
  const std::int64_t blocks = (n + kCheckedBlock - 1) / kCheckedBlock;
  Kokkos::parallel_reduce(
      label, Kokkos::RangePolicy<ExecSpace>(0, blocks),
      KOKKOS_LAMBDA(const std::int64_t blk, std::int64_t& lowest) {
        const std::int64_t i0 = blk * kCheckedBlock;
        const std::int64_t i1 = i0 + kCheckedBlock < n ? i0 + kCheckedBlock : n;
        int bad = 0;
        for (std::int64_t i = i0; i < i1; ++i) {
          const T v = write(i);
          const T d = v - v;
          bad |= d != d;
        }
        if (bad)
          for (std::int64_t i = i0; i < i1; ++i) {
            const std::int64_t c = non_finite_code(T(out(i)), i);
            if (c < lowest) lowest = c;
          }
      },
      lowest_code);
}

// Where a check leaves its lowest code in device memory instead of returning it: codes(slot).
struct CodeSlot {
  Kokkos::View<std::int64_t*, MemSpace> codes;
  std::size_t slot = 0;
};

// checked_reduce into a host scalar: returns out's first non-finite element (a host wait). With
// `into`, the lowest code goes to into->codes(into->slot) instead, no host wait, and the result
// is empty: the caller reads the codes of many checks at once (decode_non_finite).
template <class T, class View, class Write>
NonFinite checked_for_each(const char* label, const View& out, const Write& write, const CodeSlot* into = nullptr) {
  if (into) {
    const Kokkos::View<std::int64_t, MemSpace> result = Kokkos::subview(into->codes, into->slot);
    checked_reduce<T>(label, out, write, Kokkos::Min<std::int64_t, MemSpace>(result));
    return NonFinite{};
  }
  std::int64_t code = kFiniteCode;
  {
    counters::HostSync sync;  // the result is a host scalar
    checked_reduce<T>(label, out, write, Kokkos::Min<std::int64_t>(code));
  }
  return decode_non_finite(code);
}

template <class T>
struct FiniteCheck {
  // x (n): one Kokkos::Min reduction ("FiniteCheck::first_non_finite") over 2*index + (inf ? 1 : 0)
  // of the non-finite elements, so the first bad element and its kind come from one pass.
  static NonFinite first_non_finite(CVec<T> x);
  // x (rows, cols), contiguous row-major: the same over its rows * cols elements.
  static NonFinite first_non_finite(CMat<T> x);
  // The same reduction with its lowest code left in device memory, codes(slot), instead of a host
  // scalar: no host wait (the reduction is ordered with the kernels around it); the caller reads
  // the codes of many checks at once and decodes them (decode_non_finite).
  static void lowest_code_to(CMat<T> x, const Kokkos::View<std::int64_t*, MemSpace>& codes, std::size_t slot);
};

extern template struct FiniteCheck<float>;
extern template struct FiniteCheck<double>;

// "NaN at element 17 of step 3 / stage 1 / layer_02 / micro-batch 0 / fc_w.grad"-style text:
// `where` is the caller's description of the tensor.
std::string describe_non_finite(const NonFinite& bad, const std::string& where);

}  // namespace minipipe
