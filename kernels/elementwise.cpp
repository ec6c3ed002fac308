// Elementwise kernels of the residual stream (add, accumulate, copy), explicitly instantiated
// for float and double.
#include "elementwise.hpp"

#include <stdexcept>
#include <string>

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

template struct Elementwise<float>;
template struct Elementwise<double>;

}  // namespace minipipe
