// FiniteCheck against a host scan written another way (std::isnan / std::isinf): the first bad
// element and its kind, for NaN, +-inf, both, none, and the [rows, cols] overload; likewise the
// checks fused into the kernels that write gradients (GradAccum::finalize) and parameters
// (AdamW / SGD updates), which replace a separate FiniteCheck pass over each in the trainer.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kernels/finite_check.hpp"
#include "kernels/grad_accum.hpp"
#include "kernels/optimizer.hpp"

namespace {

using minipipe::FiniteCheck;
using minipipe::kCheckedBlock;
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
std::vector<T> to_host(const minipipe::View1<T>& d) {
  auto m = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), d);
  return std::vector<T>(m.data(), m.data() + m.extent(0));
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
  // Host kernels check blocks of kCheckedBlock elements: the lowest code within a block that holds
  // several (an inf after a NaN at a higher index), after clean blocks, in the last partial block.
  std::vector<T> blocks(3 * kCheckedBlock + 16, T(-1.5));  // device builds: kCheckedBlock = 1
  blocks[std::size_t(kCheckedBlock) + 9] = inf;
  blocks[std::size_t(kCheckedBlock) + 3] = nan;
  blocks[std::size_t(kCheckedBlock) + 1] = -inf;
  blocks.back() = nan;
  cases.push_back(blocks);
  std::vector<T> last(blocks.size(), T(2));
  last[last.size() - 2] = inf;
  last.back() = nan;
  cases.push_back(last);
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

// Fast-mode gradients: the float sum is copied out and checked in one pass; its report must be the
// host scan of what was written. Deterministic sums are range-checked, hence finite.
template <class T>
void check_finalize() {
  const T nan = std::numeric_limits<T>::quiet_NaN(), inf = std::numeric_limits<T>::infinity();
  const std::vector<std::vector<T>> cases = {{1, 2, 3}, {1, inf, nan}, {nan, 0, -inf}, {0, 0, 0, -inf}};
  for (const auto& h : cases) {
    minipipe::GradAccum<T> acc("w", h.size(), minipipe::Mode::fast);
    Kokkos::deep_copy(acc.sum, to_device(h));
    minipipe::View1<T> g("g", h.size());
    const NonFinite got = acc.finalize(g);
    const std::vector<T> written = to_host(g);
    const NonFinite want = host_reference(written);
    EXPECT_EQ(got.index, want.index);
    EXPECT_EQ(got.kind, want.kind);
    for (std::size_t i = 0; i < h.size(); ++i)
      EXPECT_TRUE(std::isnan(h[i]) ? std::isnan(written[i]) : written[i] == h[i]) << "element " << i;
  }
  minipipe::GradAccum<T> det("w", 4, minipipe::Mode::deterministic);
  det.zero();
  minipipe::View1<T> g("g", 4);
  EXPECT_FALSE(det.finalize(g));
}

TEST(FiniteCheck, FinalizeReportsWhatItWrote) {
  check_finalize<float>();
  check_finalize<double>();
}

// Updates: an infinite gradient makes AdamW's parameter NaN (inf / inf) and SGD's infinite; a NaN
// parameter stays NaN. The fused report is the host scan of the updated parameters.
template <class T>
void check_updates() {
  const T nan = std::numeric_limits<T>::quiet_NaN(), inf = std::numeric_limits<T>::infinity();
  const std::vector<T> p0 = {0.5, -0.25, 1, 2, nan, 3, 4, 5};
  const std::vector<std::vector<T>> grads = {
      {0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8},  // only the NaN parameter (4)
      {0.1, 0.2, inf, 0.4, 0.5, 0.6, 0.7, 0.8},  // element 2 comes first
  };
  for (const auto& gh : grads) {
    for (int opt = 0; opt < 2; ++opt) {
      auto p = to_device(p0), m = to_device(std::vector<T>(8, T(0))), v = to_device(std::vector<T>(8, T(0)));
      const auto g = to_device(gh);
      const NonFinite got =
          opt == 0 ? minipipe::AdamW<T>::update(minipipe::AdamWConfig{}, 1, true, p, minipipe::CVec<T>(g), m, v)
                   : minipipe::Sgd<T>::update(minipipe::SgdConfig{}, true, p, minipipe::CVec<T>(g), m);
      const NonFinite want = host_reference(to_host(p));
      EXPECT_EQ(got.index, want.index) << (opt == 0 ? "AdamW" : "SGD");
      EXPECT_EQ(got.kind, want.kind) << (opt == 0 ? "AdamW" : "SGD");
      EXPECT_TRUE(got) << (opt == 0 ? "AdamW" : "SGD");
    }
  }
  // Over several of the host kernels' blocks: an infinite gradient in the second block comes before a
  // NaN parameter later in it and one in the third.
  const std::size_t n = 3 * std::size_t(kCheckedBlock) + 7;  // a partial last block on the host
  std::vector<T> pl(n, T(0.75)), gl(n, T(0.125));
  gl[kCheckedBlock + 1] = inf;
  pl[kCheckedBlock + 2] = nan;
  pl[2 * kCheckedBlock + 3] = nan;
  for (int opt = 0; opt < 2; ++opt) {
    auto p = to_device(pl), m = to_device(std::vector<T>(n, T(0))), v = to_device(std::vector<T>(n, T(0)));
    const auto g = to_device(gl);
    const NonFinite got =
        opt == 0 ? minipipe::AdamW<T>::update(minipipe::AdamWConfig{}, 1, true, p, minipipe::CVec<T>(g), m, v)
                 : minipipe::Sgd<T>::update(minipipe::SgdConfig{}, true, p, minipipe::CVec<T>(g), m);
    const NonFinite want = host_reference(to_host(p));
    EXPECT_EQ(want.index, kCheckedBlock + 1);
    EXPECT_EQ(got.index, want.index) << (opt == 0 ? "AdamW" : "SGD") << ", several blocks";
    EXPECT_EQ(got.kind, want.kind) << (opt == 0 ? "AdamW" : "SGD") << ", several blocks";
  }
  auto p = to_device(std::vector<T>{1, 2}), m = to_device(std::vector<T>{0, 0}), v = to_device(std::vector<T>{0, 0});
  const auto g = to_device(std::vector<T>{0.5, -0.5});
  EXPECT_FALSE(minipipe::AdamW<T>::update(minipipe::AdamWConfig{}, 1, true, p, minipipe::CVec<T>(g), m, v));
}

TEST(FiniteCheck, UpdatesReportWhatTheyWrote) {
  check_updates<float>();
  check_updates<double>();
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
