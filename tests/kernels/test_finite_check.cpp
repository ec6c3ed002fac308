// FiniteCheck against a host scan written another way (std::isnan / std::isinf): the first bad
// element and its kind, for NaN, +-inf, both, none, and the [rows, cols] overload.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kernels/finite_check.hpp"

namespace {

using minipipe::FiniteCheck;
using minipipe::NonFinite;
using minipipe::NonFiniteKind;

template <class T>
minipipe::View1<T> to_device(const std::vector<T>& h) {
  minipipe::View1<T> d("finite_check_test", h.size());
  auto m = Kokkos::create_mirror_view(d);
  for (std::size_t i = 0; i < h.size(); ++i) m(i) = h[i];
  Kokkos::deep_copy(d, m);
  return d;
}

template <class T>
NonFinite host_reference(const std::vector<T>& h) {
  NonFinite r;
  for (std::size_t i = 0; i < h.size(); ++i) {
    if (std::isnan(h[i]) || std::isinf(h[i])) {
      r.index = static_cast<std::int64_t>(i);
      r.kind = std::isnan(h[i]) ? NonFiniteKind::nan : NonFiniteKind::inf;
      return r;
    }
  }
  return r;
}

template <class T>
void check_cases() {
  const T nan = std::numeric_limits<T>::quiet_NaN(), inf = std::numeric_limits<T>::infinity();
  const T big = std::numeric_limits<T>::max(), tiny = std::numeric_limits<T>::denorm_min();
  std::vector<std::vector<T>> cases = {
      {},                                  // empty: finite
      {1, -2, big, -big, tiny, 0},         // extremes that are finite
      {1, 2, nan, 4},                      // NaN at 2
      {1, -inf, 3, nan},                   // -inf at 1 comes before the NaN
      {nan, inf},                          // NaN first
      {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, inf}  // the last element
  };
  std::vector<T> large(100003, T(0.5));
  large[77777] = -inf;
  large[99999] = nan;
  cases.push_back(large);
  for (const auto& h : cases) {
    const NonFinite want = host_reference(h);
    const NonFinite got = FiniteCheck<T>::first_non_finite(minipipe::CVec<T>(to_device(h)));
    EXPECT_EQ(got.index, want.index) << "case of size " << h.size();
    EXPECT_EQ(got.kind, want.kind) << "case of size " << h.size();
    EXPECT_EQ(static_cast<bool>(got), static_cast<bool>(want));
  }
  // The matrix overload sees the same elements: [3, 4] with a NaN at (2, 1) = element 9.
  std::vector<T> m(12, T(1));
  m[9] = nan;
  auto d = to_device(m);
  const minipipe::CMat<T> mat(d.data(), 3, 4);
  const NonFinite got = FiniteCheck<T>::first_non_finite(mat);
  EXPECT_EQ(got.index, 9);
  EXPECT_EQ(got.kind, NonFiniteKind::nan);
}

TEST(FiniteCheck, FirstNonFiniteMatchesHostScanFloat) {
  check_cases<float>();
}

TEST(FiniteCheck, FirstNonFiniteMatchesHostScanDouble) {
  check_cases<double>();
}

TEST(FiniteCheck, DescriptionNamesKindElementAndTensor) {
  NonFinite bad;
  bad.index = 17;
  bad.kind = NonFiniteKind::inf;
  EXPECT_EQ(minipipe::describe_non_finite(bad, "step 3 / stage 1 / layer_02 / fc_w.grad"),
            "inf at element 17 of step 3 / stage 1 / layer_02 / fc_w.grad");
  EXPECT_EQ(minipipe::describe_non_finite(NonFinite{}, "x"), "x is finite");
}

}  // namespace
