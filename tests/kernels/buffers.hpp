// Host <-> MemSpace copies for the GEMM/Linear tests, so they also run where MemSpace is a
// device memory space; random data with varied magnitudes so rounding differences show up.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/types.hpp"

namespace minipipe::test {

template <class T>
using HostVecView = Kokkos::View<T*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

template <class T>
View1<T> to_device(const std::vector<T>& h, const char* label = "test_buffer") {
  View1<T> d(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string(label)), h.size());
  Kokkos::deep_copy(d, HostVecView<const T>(h.data(), h.size()));
  return d;
}

template <class T>
std::vector<T> to_host(const View1<T>& d) {
  std::vector<T> h(d.extent(0));
  Kokkos::deep_copy(HostVecView<T>(h.data(), h.size()), d);
  return h;
}

// A 2-D row-major View filled from a host vector of rows*cols values.
template <class T>
View2<T> to_device2(const std::vector<T>& h, std::size_t rows, std::size_t cols, const char* label = "test_matrix") {
  View2<T> d(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string(label)), rows, cols);
  Kokkos::deep_copy(
      d, Kokkos::View<const T**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(
             h.data(), rows, cols));
  return d;
}

template <class T>
std::vector<T> to_host2(const View2<T>& d) {
  std::vector<T> h(d.extent(0) * d.extent(1));
  Kokkos::deep_copy(Kokkos::View<T**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(
                        h.data(), d.extent(0), d.extent(1)),
                    d);
  return h;
}

// Uniform in [-1, 1) scaled by 2^e, e uniform in [-4, 4]: mixed exponents make every
// reordering or contraction of a sum visible in the last bits.
template <class T>
std::vector<T> random_values(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::uniform_int_distribution<int> e(-4, 4);
  std::vector<T> v(n);
  for (auto& x : v) x = static_cast<T>(std::ldexp(u(gen), e(gen)));
  return v;
}

}  // namespace minipipe::test
