// FiniteCheck: one device reduction per tensor. x - x is NaN exactly when x is NaN or +-inf (no
// fast-math here), and x != x tells the two apart, so no libm classification is needed.
#include "finite_check.hpp"

#include <limits>

namespace minipipe {

const char* to_string(NonFiniteKind kind) {
  switch (kind) {
    case NonFiniteKind::none:
      return "finite";
    case NonFiniteKind::nan:
      return "NaN";
    case NonFiniteKind::inf:
      return "inf";
  }
  return "?";
}

template <class T>
NonFinite FiniteCheck<T>::first_non_finite(CVec<T> x) {
  const std::int64_t n = static_cast<std::int64_t>(x.extent(0));
  const std::int64_t none = std::numeric_limits<std::int64_t>::max();
  std::int64_t code = none;
  Kokkos::parallel_reduce(
      "FiniteCheck::first_non_finite", Kokkos::RangePolicy<ExecSpace>(0, n),
      KOKKOS_LAMBDA(const std::int64_t i, std::int64_t& lowest) {
        const T v = x(i);
        const T d = v - v;
        if (d != d) {
          const std::int64_t c = 2 * i + (v != v ? 0 : 1);
          if (c < lowest) lowest = c;
        }
      },
      Kokkos::Min<std::int64_t>(code));
  NonFinite out;
  if (code != none) {
    out.index = code / 2;
    out.kind = code % 2 == 0 ? NonFiniteKind::nan : NonFiniteKind::inf;
  }
  return out;
}

template <class T>
NonFinite FiniteCheck<T>::first_non_finite(CMat<T> x) {
  return first_non_finite(CVec<T>(x.data(), x.extent(0) * x.extent(1)));
}

template struct FiniteCheck<float>;
template struct FiniteCheck<double>;

std::string describe_non_finite(const NonFinite& bad, const std::string& where) {
  if (!bad) return where + " is finite";
  return std::string(to_string(bad.kind)) + " at element " + std::to_string(bad.index) + " of " + where;
}

}  // namespace minipipe
