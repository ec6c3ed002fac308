// FiniteCheck: one device reduction per tensor over non_finite_code (finite_check.hpp), so no libm
// classification is needed.
#include "finite_check.hpp"

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

NonFinite decode_non_finite(std::int64_t lowest_code) {
  NonFinite out;
  if (lowest_code != kFiniteCode) {
    out.index = lowest_code / 2;
    out.kind = lowest_code % 2 == 0 ? NonFiniteKind::nan : NonFiniteKind::inf;
  }
  return out;
}

template <class T>
NonFinite FiniteCheck<T>::first_non_finite(CVec<T> x) {
  const std::int64_t n = static_cast<std::int64_t>(x.extent(0));
  std::int64_t code = kFiniteCode;
  Kokkos::parallel_reduce(
      "FiniteCheck::first_non_finite", Kokkos::RangePolicy<ExecSpace>(0, n),
      KOKKOS_LAMBDA(const std::int64_t i, std::int64_t& lowest) {
        const std::int64_t c = non_finite_code(x(i), i);
        if (c < lowest) lowest = c;
      },
      Kokkos::Min<std::int64_t>(code));
  return decode_non_finite(code);
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
