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

template <class T>
struct FiniteCheck {
  // x (n): one Kokkos::Min reduction ("FiniteCheck::first_non_finite") over 2*index + (inf ? 1 : 0)
  // of the non-finite elements, so the first bad element and its kind come from one pass.
  static NonFinite first_non_finite(CVec<T> x);
  // x (rows, cols), contiguous row-major: the same over its rows * cols elements.
  static NonFinite first_non_finite(CMat<T> x);
};

extern template struct FiniteCheck<float>;
extern template struct FiniteCheck<double>;

// "NaN at element 17 of step 3 / stage 1 / layer_02 / micro-batch 0 / fc_w.grad"-style text:
// `where` is the caller's description of the tensor.
std::string describe_non_finite(const NonFinite& bad, const std::string& where);

}  // namespace minipipe
