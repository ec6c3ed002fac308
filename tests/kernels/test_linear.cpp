// Linear layer: F/I/W gradients against central finite differences (double, both modes),
// deterministic dW/db bitwise independent of the micro-batch split and call order (float),
// fast mode within 1e-4 of deterministic (float), and on the packed tiles when it shares a weight.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <utility>
#include <vector>

#include "buffers.hpp"
#include "kernels/kernel_path.hpp"
#include "kernels/linear.hpp"

namespace minipipe {
namespace {

using test::random_values;
using test::to_device;
using test::to_device2;
using test::to_host;
using test::to_host2;

constexpr bool kMemHostAccessible = Kokkos::SpaceAccessibility<Kokkos::DefaultHostExecutionSpace, MemSpace>::accessible;

// Host-side copy of a Linear problem: x (N,I), W (O,I), b (O), upstream gradient G (N,O).
template <class T>
struct LinearData {
  int N, I, O;
  std::vector<T> x, W, b, G;
  LinearData(int n, int i, int o, std::uint64_t seed) : N(n), I(i), O(o) {
    x = random_values<T>(static_cast<std::size_t>(N) * I, seed);
    W = random_values<T>(static_cast<std::size_t>(O) * I, seed + 1);
    b = random_values<T>(static_cast<std::size_t>(O), seed + 2);
    G = random_values<T>(static_cast<std::size_t>(N) * O, seed + 3);
  }
};

template <class T>
std::vector<T> forward(Mode mode, const LinearData<T>& d, const std::vector<T>& x, const std::vector<T>& W,
                       const std::vector<T>& b) {
  auto dx = to_device2(x, d.N, d.I), dW = to_device2(W, d.O, d.I);
  auto db = to_device(b);
  View2<T> y("y", d.N, d.O);
  KernelWorkspace ws;
  Linear<T>::forward(mode, dx, dW, db, y, ws);
  return to_host2(y);
}

// Scalar loss L = sum(y * G), accumulated in long double so the finite differences see
// only the rounding of y itself.
template <class T>
long double loss(const std::vector<T>& y, const std::vector<T>& G) {
  long double s = 0;
  for (std::size_t i = 0; i < y.size(); ++i) s += static_cast<long double>(y[i]) * G[i];
  return s;
}

template <class T>
void expect_matches_fd(const char* what, const std::vector<T>& analytic, std::vector<T> param,
                       const std::function<long double(const std::vector<T>&)>& L) {
  const T h = T(1e-3);  // L is linear in every parameter, so only rounding limits the step
  for (std::size_t i = 0; i < param.size(); ++i) {
    const T p0 = param[i];
    param[i] = p0 + h;
    const long double lp = L(param);
    param[i] = p0 - h;
    const long double lm = L(param);
    param[i] = p0;
    const double fd = static_cast<double>((lp - lm) / (2 * static_cast<long double>(h)));
    const double a = static_cast<double>(analytic[i]);
    const double rel = std::abs(a - fd) / std::max({std::abs(a), std::abs(fd), 1e-6});
    EXPECT_LT(rel, 1e-6) << what << "[" << i << "]: analytic " << a << " finite difference " << fd;
  }
}

class LinearFiniteDifference : public ::testing::TestWithParam<Mode> {};

TEST_P(LinearFiniteDifference, GradientsOfSumYG) {
  const Mode mode = GetParam();
  const int T_rows = 4;  // rows per sample
  const LinearData<double> d(3 * T_rows, 7, 5, 42);

  // Forward itself against a plain reference (bias included).
  const auto y = forward(mode, d, d.x, d.W, d.b);
  for (int n = 0; n < d.N; ++n)
    for (int o = 0; o < d.O; ++o) {
      long double r = d.b[o];
      for (int i = 0; i < d.I; ++i) r += static_cast<long double>(d.x[n * d.I + i]) * d.W[o * d.I + i];
      EXPECT_NEAR(y[n * d.O + o], static_cast<double>(r), 1e-13) << "y(" << n << "," << o << ")";
    }

  // I: dx = G W.
  auto dG = to_device2(d.G, d.N, d.O), dWv = to_device2(d.W, d.O, d.I), dxv = to_device2(d.x, d.N, d.I);
  View2<double> dx("dx", d.N, d.I);
  KernelWorkspace ws;
  Kokkos::deep_copy(dx, 12345.0);  // must be overwritten, not accumulated into
  Linear<double>::backward_input(mode, dG, dWv, dx, ws);
  expect_matches_fd<double>("dx", to_host2(dx), d.x,
                            [&](const std::vector<double>& x) { return loss(forward(mode, d, x, d.W, d.b), d.G); });

  // W: dW = G^T x, db = colsum(G), accumulated over the samples of one call.
  GradAccum<double> gW("lin_w", static_cast<std::size_t>(d.O) * d.I, mode), gb("lin_b", d.O, mode);
  gW.zero();
  gb.zero();
  Linear<double>::backward_weight(mode, dxv, dG, T_rows, gW, &gb, ws);
  View1<double> dW("dW", gW.size()), db("db", gb.size());
  gW.finalize(dW);
  gb.finalize(db);
  expect_matches_fd<double>("dW", to_host(dW), d.W,
                            [&](const std::vector<double>& W) { return loss(forward(mode, d, d.x, W, d.b), d.G); });
  expect_matches_fd<double>("db", to_host(db), d.b,
                            [&](const std::vector<double>& b) { return loss(forward(mode, d, d.x, d.W, b), d.G); });
}

INSTANTIATE_TEST_SUITE_P(Modes, LinearFiniteDifference, ::testing::Values(Mode::deterministic, Mode::fast),
                         [](const auto& info) { return std::string(to_string(info.param)); });

// Runs backward_weight on the given sample ranges [first, last), in the given order, into one
// fresh accumulator pair, and returns the finalized (dW, db).
std::pair<std::vector<float>, std::vector<float>> weight_grad_in_calls(Mode mode, const LinearData<float>& d,
                                                                       int rows_per_sample,
                                                                       const std::vector<std::pair<int, int>>& calls) {
  GradAccum<float> gW("w", static_cast<std::size_t>(d.O) * d.I, mode), gb("b", d.O, mode);
  gW.zero();
  gb.zero();
  const auto x = to_device2(d.x, d.N, d.I), dy = to_device2(d.G, d.N, d.O);
  KernelWorkspace ws;
  for (const auto& [s0, s1] : calls) {
    const std::pair<int, int> rows{s0 * rows_per_sample, s1 * rows_per_sample};
    auto xs = Kokkos::subview(x, rows, Kokkos::ALL());
    auto dys = Kokkos::subview(dy, rows, Kokkos::ALL());
    Linear<float>::backward_weight(mode, CMat<float>(xs.data(), xs.extent(0), xs.extent(1)),
                                   CMat<float>(dys.data(), dys.extent(0), dys.extent(1)), rows_per_sample, gW, &gb, ws);
  }
  View1<float> dW("dW", gW.size()), db("db", gb.size());
  gW.finalize(dW);
  gb.finalize(db);
  return {to_host(dW), to_host(db)};
}

TEST(LinearDeterministicWeightGrad, IndependentOfMicroBatchSplitAndOrder) {
  const int rows_per_sample = 5, samples = 6;
  const LinearData<float> d(samples * rows_per_sample, 40, 24, 7);
  const auto whole = weight_grad_in_calls(Mode::deterministic, d, rows_per_sample, {{0, 6}});
  const std::vector<std::vector<std::pair<int, int>>> splits = {
      {{0, 3}, {3, 6}},                                  // 2 micro-batches
      {{0, 1}, {1, 3}, {3, 6}},                          // 3 uneven micro-batches
      {{3, 6}, {1, 3}, {0, 1}},                          // the same, W in reverse order
      {{5, 6}, {4, 5}, {3, 4}, {2, 3}, {1, 2}, {0, 1}},  // one sample per call, reversed
  };
  for (std::size_t k = 0; k < splits.size(); ++k) {
    const auto part = weight_grad_in_calls(Mode::deterministic, d, rows_per_sample, splits[k]);
    EXPECT_EQ(std::memcmp(part.first.data(), whole.first.data(), whole.first.size() * sizeof(float)), 0)
        << "dW differs for split " << k;
    EXPECT_EQ(std::memcmp(part.second.data(), whole.second.data(), whole.second.size() * sizeof(float)), 0)
        << "db differs for split " << k;
  }
  // And the invariant result is the gradient: compare with a double-precision reference.
  double max_err = 0, max_ref = 0;
  for (int o = 0; o < d.O; ++o)
    for (int i = 0; i < d.I; ++i) {
      double r = 0;
      for (int n = 0; n < d.N; ++n) r += static_cast<double>(d.G[n * d.O + o]) * d.x[n * d.I + i];
      max_err = std::max(max_err, std::abs(r - whole.first[o * d.I + i]));
      max_ref = std::max(max_ref, std::abs(r));
    }
  EXPECT_GT(max_ref, 0.1);
  EXPECT_LT(max_err / max_ref, 1e-6);
}

template <class T>
double max_rel_diff(const std::vector<T>& a, const std::vector<T>& ref) {
  double err = 0, mag = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    err = std::max(err, std::abs(static_cast<double>(a[i]) - ref[i]));
    mag = std::max(mag, std::abs(static_cast<double>(ref[i])));
  }
  return err / mag;
}

// Sets the fast-mode GEMM for one scope and restores the previous setting.
struct ScopedFastGemm {
  explicit ScopedFastGemm(FastGemm g) : saved(fast_gemm()) { set_fast_gemm(g); }
  ~ScopedFastGemm() { set_fast_gemm(saved); }
  FastGemm saved;
};

TEST(LinearFastMode, AgreesWithDeterministic) {
  const int rows_per_sample = 8;
  const LinearData<float> d(4 * rows_per_sample, 48, 40, 99);
  const std::vector<float> no_bias;
  for (const FastGemm g : {FastGemm::blas, FastGemm::gemm_det}) {
    const ScopedFastGemm scoped(g);
    SCOPED_TRACE(to_string(g));
    for (const auto* b : {&d.b, &no_bias}) {
      const auto yd = forward(Mode::deterministic, d, d.x, d.W, *b);
      const auto yf = forward(Mode::fast, d, d.x, d.W, *b);
      EXPECT_LT(max_rel_diff(yf, yd), 1e-4) << "forward, bias " << !b->empty();
    }

    auto dG = to_device2(d.G, d.N, d.O), dWv = to_device2(d.W, d.O, d.I);
    View2<float> dxd("dxd", d.N, d.I), dxf("dxf", d.N, d.I);
    KernelWorkspace ws;
    Linear<float>::backward_input(Mode::deterministic, dG, dWv, dxd, ws);
    Linear<float>::backward_input(Mode::fast, dG, dWv, dxf, ws);
    EXPECT_LT(max_rel_diff(to_host2(dxf), to_host2(dxd)), 1e-4) << "backward_input";

    // Fast mode sums the two calls in the accumulator, deterministic exactly: same gradient.
    const std::vector<std::pair<int, int>> calls = {{0, 1}, {1, 4}};
    const auto gd = weight_grad_in_calls(Mode::deterministic, d, rows_per_sample, calls);
    const auto gf = weight_grad_in_calls(Mode::fast, d, rows_per_sample, calls);
    EXPECT_LT(max_rel_diff(gf.first, gd.first), 1e-4) << "dW";
    EXPECT_LT(max_rel_diff(gf.second, gd.second), 1e-4) << "db";
  }
}

// train.fast_gemm = gemm_det: every fast-mode GEMM is gemm_det (its host path packs into the caller's
// workspace, which BLAS never touches), so forward and backward-input give deterministic mode's bits and the
// backward-weight of each call is one gemm_det chain over the call's rows added into the sum.
// blas: no GEMM touches the workspace.
TEST(LinearFastMode, FastGemmSettingChoosesTheLibrary) {
  const int rows_per_sample = 4;
  const LinearData<float> d(6 * rows_per_sample, 40, 36, 23);
  auto dx = to_device2(d.x, d.N, d.I), dWv = to_device2(d.W, d.O, d.I), dG = to_device2(d.G, d.N, d.O);
  auto db = to_device(d.b);
  View2<float> y("y", d.N, d.O), dxo("dxo", d.N, d.I);
  std::vector<float> y_det, dx_det;
  {
    KernelWorkspace ws;
    Linear<float>::forward(Mode::deterministic, dx, dWv, db, y, ws);
    y_det = to_host2(y);
    Linear<float>::backward_input(Mode::deterministic, dG, dWv, dxo, ws);
    dx_det = to_host2(dxo);
  }
  // Reference of the fast backward-weight over the calls {0, 2} and {2, 6} samples: gemm_det's
  // chains that start from the sum, call after call, on one zeroed sum.
  std::vector<float> dW_ref;
  {
    View1<float> sum("sum", static_cast<std::size_t>(d.O) * d.I);
    KernelWorkspace ws;
    for (const auto& [r0, r1] : {std::pair<int, int>{0, 2 * rows_per_sample}, {2 * rows_per_sample, d.N}})
      gemm_det<float>(ws, d.O, d.I, r1 - r0, transposed(dG.data() + r0 * d.O, d.O),
                      row_major(dx.data() + r0 * d.I, d.I), sum.data(), d.I, nullptr, GemmOut::chain_on_c);
    dW_ref = to_host(sum);
  }
  {
    const ScopedFastGemm scoped(FastGemm::gemm_det);
    EXPECT_TRUE(fast_gemm_on_gemm_det());
    KernelWorkspace ws;
    Linear<float>::forward(Mode::fast, dx, dWv, db, y, ws);
    if (!use_device_path()) {
      EXPECT_GT(ws.bytes(), 0u) << "gemm_det's host path packs into the workspace";
    }
    EXPECT_EQ(to_host2(y), y_det);
    Linear<float>::backward_input(Mode::fast, dG, dWv, dxo, ws);
    EXPECT_EQ(to_host2(dxo), dx_det);
    const auto gf = weight_grad_in_calls(Mode::fast, d, rows_per_sample, {{0, 2}, {2, 6}});
    EXPECT_EQ(gf.first, dW_ref);
  }
  {
    const ScopedFastGemm scoped(FastGemm::blas);
    EXPECT_FALSE(fast_gemm_on_gemm_det());
    KernelWorkspace ws;
    Linear<float>::forward(Mode::fast, dx, dWv, db, y, ws);
    Linear<float>::backward_input(Mode::fast, dG, dWv, dxo, ws);
    GradAccum<float> gW("w", static_cast<std::size_t>(d.O) * d.I, Mode::fast);
    gW.zero();
    Linear<float>::backward_weight(Mode::fast, dx, dG, rows_per_sample, gW, nullptr, ws);
    EXPECT_EQ(ws.bytes(), 0u) << "a BLAS call used gemm_det's packing buffers";
    EXPECT_LT(max_rel_diff(to_host2(y), y_det), 1e-4);
  }
}

// Fast mode on gemm_det given an enabled PackedB (a step of several micro-batches) packs the
// weight once and reads the kept copy in the next calls, deterministic mode's bits throughout; on
// BLAS the PackedB is ignored and every call reads W itself.
TEST(LinearFastMode, SharedPackedWeightRunsTheTiles) {
  if constexpr (!kMemHostAccessible) {  // constexpr: nvcc warns of an unreachable loop otherwise
    GTEST_SKIP() << "PackedB is a host-path feature";
  } else {
    const LinearData<float> d(24, 48, 40, 17);
    auto dx = to_device2(d.x, d.N, d.I), dWv = to_device2(d.W, d.O, d.I), dG = to_device2(d.G, d.N, d.O);
    auto db = to_device(d.b);
    KernelWorkspace ws;
    View2<float> y("y", d.N, d.O), dxo("dxo", d.N, d.I);
    Linear<float>::forward(Mode::deterministic, dx, dWv, db, y, ws);
    const std::vector<float> y_det = to_host2(y);
    Linear<float>::backward_input(Mode::deterministic, dG, dWv, dxo, ws);
    const std::vector<float> dx_det = to_host2(dxo);
    {
      const ScopedFastGemm scoped(FastGemm::gemm_det);
      PackedB<float> pf, pb;
      pf.enable();
      pb.enable();
      for (int call = 0; call < 3; ++call) {
        Linear<float>::forward(Mode::fast, dx, dWv, db, y, ws, &pf);
        EXPECT_EQ(to_host2(y), y_det) << "forward, call " << call;
        Linear<float>::backward_input(Mode::fast, dG, dWv, dxo, ws, &pb);
        EXPECT_EQ(to_host2(dxo), dx_det) << "backward_input, call " << call;
      }
      EXPECT_TRUE(pf.valid && pb.valid);
      // W changes in place while the copies are kept: the tiles still read the copies, which is
      // why a stage disables them before the optimizer step.
      Kokkos::deep_copy(dWv, 0.5f);
      Linear<float>::forward(Mode::fast, dx, dWv, db, y, ws, &pf);
      EXPECT_EQ(to_host2(y), y_det) << "forward did not read the kept copy";
      Linear<float>::backward_input(Mode::fast, dG, dWv, dxo, ws, &pb);
      EXPECT_EQ(to_host2(dxo), dx_det) << "backward_input did not read the kept copy";
      pf.disable();  // off again: W itself is packed
      Linear<float>::forward(Mode::fast, dx, dWv, db, y, ws, &pf);
      EXPECT_NE(to_host2(y), y_det) << "forward read a dropped copy";
      Kokkos::deep_copy(dWv, to_device2(d.W, d.O, d.I));
    }
    {
      const ScopedFastGemm scoped(FastGemm::blas);
      PackedB<float> pf;
      pf.enable();
      Linear<float>::forward(Mode::fast, dx, dWv, db, y, ws, &pf);
      EXPECT_LT(max_rel_diff(to_host2(y), y_det), 1e-4);
      EXPECT_FALSE(pf.valid) << "BLAS packed a copy";
      Kokkos::deep_copy(dWv, 0.5f);
      Linear<float>::forward(Mode::fast, dx, dWv, db, y, ws, &pf);
      EXPECT_NE(to_host2(y), y_det) << "BLAS did not read W";
    }
  }
}

TEST(LinearArguments, RejectsBadShapesAndModes) {
  View2<float> x("x", 6, 4), W("W", 3, 5), y("y", 6, 3), dy("dy", 6, 3);
  KernelWorkspace ws;
  EXPECT_THROW(Linear<float>::forward(Mode::deterministic, x, W, CVec<float>(), y, ws), std::invalid_argument);
  View2<float> W_ok("W", 3, 4);
  GradAccum<float> g_fast("w", 12, Mode::fast), g_det("w", 12, Mode::deterministic);
  EXPECT_THROW(Linear<float>::backward_weight(Mode::deterministic, x, dy, 3, g_fast, nullptr, ws),
               std::invalid_argument);
  EXPECT_THROW(Linear<float>::backward_weight(Mode::deterministic, x, dy, 4, g_det, nullptr, ws),
               std::invalid_argument);
  EXPECT_NO_THROW(Linear<float>::backward_weight(Mode::deterministic, x, dy, 3, g_det, nullptr, ws));
}

}  // namespace
}  // namespace minipipe
