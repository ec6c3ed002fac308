// Helpers of the kernel tests: device tensors with host mirrors, seeded random fills, central
// finite differences and error measures used by every test file.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/kernel_path.hpp"
#include "kernels/types.hpp"

namespace minipipe::test {

// Sets the kernel path for one scope and restores the previous one.
class PathScope {
 public:
  explicit PathScope(KernelPath p) : old_(kernel_path()) { set_kernel_path(p); }
  ~PathScope() { set_kernel_path(old_); }
  PathScope(const PathScope&) = delete;
  PathScope& operator=(const PathScope&) = delete;

 private:
  KernelPath old_;
};

// A flat device buffer with a host mirror, viewed as (rows, cols) on demand.
template <class T>
struct Tensor {
  View1<T> d;
  typename View1<T>::HostMirror h;
  int rows = 0, cols = 1;

  Tensor() = default;
  Tensor(const char* name, int r, int c = 1) : d(std::string(name), std::size_t(r) * std::size_t(c)), rows(r), cols(c) {
    h = Kokkos::create_mirror_view(d);
  }
  std::size_t size() const { return d.extent(0); }
  void push() { Kokkos::deep_copy(d, h); }
  void pull() { Kokkos::deep_copy(h, d); }
  Mat<T> mat() const { return Mat<T>(d.data(), rows, cols); }
  CMat<T> cmat() const { return CMat<T>(d.data(), rows, cols); }
  Vec<T> vec() const { return Vec<T>(d.data(), d.extent(0)); }
  CVec<T> cvec() const { return CVec<T>(d.data(), d.extent(0)); }
  // Rows [r0, r0 + n) as an unmanaged (n, cols) matrix: how a micro-batch sees its rows.
  Mat<T> rows_mat(int r0, int n) const { return Mat<T>(d.data() + std::size_t(r0) * cols, n, cols); }
  CMat<T> rows_cmat(int r0, int n) const { return CMat<T>(d.data() + std::size_t(r0) * cols, n, cols); }
  CVec<T> slice(int i0, int n) const { return CVec<T>(d.data() + i0, n); }
  Vec<T> slice_mut(int i0, int n) const { return Vec<T>(d.data() + i0, n); }
  std::vector<double> host_values() {
    pull();
    std::vector<double> v(size());
    for (std::size_t i = 0; i < size(); ++i) v[i] = static_cast<double>(h(i));
    return v;
  }
};

struct IntTensor {
  Kokkos::View<int*, Kokkos::LayoutRight, MemSpace> d;
  Kokkos::View<int*, Kokkos::LayoutRight, MemSpace>::HostMirror h;
  explicit IntTensor(const std::vector<int>& v) : d(std::string("ints"), v.size()) {
    h = Kokkos::create_mirror_view(d);
    for (std::size_t i = 0; i < v.size(); ++i) h(i) = v[i];
    Kokkos::deep_copy(d, h);
  }
  CIdx all() const { return CIdx(d.data(), d.extent(0)); }
  CIdx slice(int i0, int n) const { return CIdx(d.data() + i0, n); }
};

template <class T>
void fill_uniform(Tensor<T>& t, std::uint64_t seed, double lo = -1.0, double hi = 1.0) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  for (std::size_t i = 0; i < t.size(); ++i) t.h(i) = static_cast<T>(u(rng));
  t.push();
}

// sum_i a_i * g_i in double: the scalar loss whose gradient the backward kernels compute.
template <class T>
double dot_host(Tensor<T>& a, Tensor<T>& g) {
  a.pull();
  g.pull();
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += static_cast<double>(a.h(i)) * static_cast<double>(g.h(i));
  return s;
}

// Central differences of loss() with respect to every entry of p (double tensors only).
template <class F>
std::vector<double> fd_gradient(Tensor<double>& p, F&& loss, double step = 1e-5) {
  p.pull();
  std::vector<double> g(p.size());
  for (std::size_t i = 0; i < p.size(); ++i) {
    const double old = p.h(i);
    p.h(i) = old + step;
    p.push();
    const double lp = loss();
    p.h(i) = old - step;
    p.push();
    const double lm = loss();
    p.h(i) = old;
    p.push();
    g[i] = (lp - lm) / (2 * step);
  }
  return g;
}

// max_i |a_i - b_i| / max_i |b_i|: error relative to the size of the reference.
inline double rel_error(const std::vector<double>& a, const std::vector<double>& ref) {
  EXPECT_EQ(a.size(), ref.size());
  double num = 0, den = 0;
  for (std::size_t i = 0; i < ref.size() && i < a.size(); ++i) {
    num = std::max(num, std::fabs(a[i] - ref[i]));
    den = std::max(den, std::fabs(ref[i]));
  }
  return den > 0 ? num / den : num;
}

// Asserts rel_error(a, ref) < tol and prints the measured number (it goes into reports).
inline void expect_close(const char* what, const std::vector<double>& a, const std::vector<double>& ref, double tol) {
  const double e = rel_error(a, ref);
  std::printf("  [measure] %-44s rel err %.3e (tol %.2g)\n", what, e, tol);
  EXPECT_LT(e, tol) << what;
}

template <class T>
bool bitwise_equal(Tensor<T>& a, Tensor<T>& b) {
  a.pull();
  b.pull();
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a.h(i), &b.h(i), sizeof(T)) != 0) return false;
  return true;
}

}  // namespace minipipe::test
