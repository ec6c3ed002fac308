// Elementwise kernels of the residual stream (add, accumulate, copy), explicitly instantiated
// for float and double.
#include "elementwise.hpp"

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace minipipe {

namespace {
void require_same_length(std::size_t a, std::size_t b, const char* where) {
  if (a != b)
    throw std::invalid_argument(std::string(where) + ": length mismatch (" + std::to_string(a) + " vs " +
                                std::to_string(b) + ")");
}
}  // namespace

template <class T>
void Elementwise<T>::add(CVec<T> a, CVec<T> b, Vec<T> out) {
  require_same_length(a.extent(0), b.extent(0), "Elementwise::add");
  require_same_length(a.extent(0), out.extent(0), "Elementwise::add");
  counters::WorkScope work("Elementwise::add", double(out.extent(0)), 3.0 * sizeof(T) * out.extent(0));
  Kokkos::parallel_for(
      "Elementwise::add", Kokkos::RangePolicy<ExecSpace>(0, out.extent(0)),
      KOKKOS_LAMBDA(const std::size_t i) { out(i) = a(i) + b(i); });
}

template <class T>
void Elementwise<T>::accumulate(Vec<T> y, CVec<T> x) {
  require_same_length(y.extent(0), x.extent(0), "Elementwise::accumulate");
  counters::WorkScope work("Elementwise::accumulate", double(y.extent(0)), 3.0 * sizeof(T) * y.extent(0));
  Kokkos::parallel_for(
      "Elementwise::accumulate", Kokkos::RangePolicy<ExecSpace>(0, y.extent(0)),
      KOKKOS_LAMBDA(const std::size_t i) { y(i) += x(i); });
}

template <class T>
void Elementwise<T>::copy(CVec<T> x, Vec<T> y) {
  require_same_length(y.extent(0), x.extent(0), "Elementwise::copy");
  counters::WorkScope work("Elementwise::copy", 0.0, 2.0 * sizeof(T) * y.extent(0));
  Kokkos::parallel_for(
      "Elementwise::copy", Kokkos::RangePolicy<ExecSpace>(0, y.extent(0)),
      KOKKOS_LAMBDA(const std::size_t i) { y(i) = x(i); });
}

template <class T>
void Elementwise<T>::next_up_first(Vec<T> x) {
  if (x.extent(0) == 0) return;
  using Bits = typename std::conditional<sizeof(T) == 4, std::uint32_t, std::uint64_t>::type;
  Kokkos::parallel_for(
      "Elementwise::next_up_first", Kokkos::RangePolicy<ExecSpace>(0, 1), KOKKOS_LAMBDA(const int) {
        const T v = x(0);
        if (v != v || (!(v - v == T(0)) && v > T(0))) return;  // NaN or +inf
        if (v == T(0)) {                                       // either zero: the smallest positive subnormal
          const Bits one = 1;
          T r;
          std::memcpy(&r, &one, sizeof(T));
          x(0) = r;
          return;
        }
        Bits b;
        std::memcpy(&b, &v, sizeof(T));
        b = v > T(0) ? b + 1 : b - 1;  // away from zero when positive, towards it when negative
        T r;
        std::memcpy(&r, &b, sizeof(T));
        x(0) = r;
      });
}

template struct Elementwise<float>;
template struct Elementwise<double>;

}  // namespace minipipe
