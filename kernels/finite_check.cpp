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
  const T* const xp = x.data();
  return checked_for_each<T>(
      "FiniteCheck::first_non_finite", x, KOKKOS_LAMBDA(const std::int64_t i) { return xp[i]; });
}

template <class T>
NonFinite FiniteCheck<T>::first_non_finite(CMat<T> x) {
  return first_non_finite(CVec<T>(x.data(), x.extent(0) * x.extent(1)));
}

template <class T>
void FiniteCheck<T>::lowest_code_to(CMat<T> x, const Kokkos::View<std::int64_t*, MemSpace>& codes, std::size_t slot) {
  const CVec<T> v(x.data(), x.extent(0) * x.extent(1));
  const T* const xp = v.data();
  const CodeSlot into{codes, slot};
  checked_for_each<T>(
      "FiniteCheck::lowest_code_to", v, KOKKOS_LAMBDA(const std::int64_t i) { return xp[i]; }, &into);
}

template struct FiniteCheck<float>;
template struct FiniteCheck<double>;

std::string describe_non_finite(const NonFinite& bad, const std::string& where) {
  if (!bad) return where + " is finite";
  return std::string(to_string(bad.kind)) + " at element " + std::to_string(bad.index) + " of " + where;
}

}  // namespace minipipe
