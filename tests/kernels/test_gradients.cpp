// Backward kernels (I and W) in double against central finite differences of the scalar loss
// sum(out * G) with random G, in deterministic and in fast mode; forwards against host references.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/attention.hpp"
#include "kernels/cross_entropy.hpp"
#include "kernels/elementwise.hpp"
#include "kernels/embedding.hpp"
#include "kernels/gelu.hpp"
#include "kernels/layernorm.hpp"
#include "test_util.hpp"

namespace minipipe {
namespace {

using test::expect_close;
using test::fd_gradient;
using test::Tensor;
constexpr Mode kDet = Mode::deterministic;
constexpr double kFdTol = 1e-6;    // finite differences in double, step 1e-5
constexpr double kRefTol = 1e-12;  // forward against a host double reference

// Every kernel in both modes: fast mode has its own loops (libm, team reductions, plain sums).
class Gradients : public ::testing::TestWithParam<Mode> {};

TEST_P(Gradients, LayerNorm) {
  const Mode mode = GetParam();
  const int B = 2, T = 3, N = B * T, C = 8;
  Tensor<double> x("x", N, C), w("w", C), b("b", C), out("out", N, C), mean("mean", N), rstd("rstd", N), G("G", N, C),
      dx("dx", N, C), gw("gw", C), gb("gb", C);
  test::fill_uniform(x, 1, -2.0, 2.0);
  test::fill_uniform(w, 2, 0.5, 1.5);
  test::fill_uniform(b, 3);
  test::fill_uniform(G, 4);
  auto loss = [&] {
    LayerNorm<double>::forward(mode, x.cmat(), w.cvec(), b.cvec(), out.mat(), mean.vec(), rstd.vec());
    return test::dot_host(out, G);
  };
  loss();

  // forward against a direct two-pass evaluation on the host
  std::vector<double> ref(N * C);
  for (int n = 0; n < N; ++n) {
    double m = 0, v = 0;
    for (int c = 0; c < C; ++c) m += x.h(n * C + c) / C;
    for (int c = 0; c < C; ++c) v += (x.h(n * C + c) - m) * (x.h(n * C + c) - m) / C;
    for (int c = 0; c < C; ++c) ref[n * C + c] = (x.h(n * C + c) - m) / std::sqrt(v + 1e-5) * w.h(c) + b.h(c);
  }
  expect_close("LayerNorm forward vs host", out.host_values(), ref, kRefTol);

  LayerNorm<double>::backward_input(mode, x.cmat(), w.cvec(), mean.cvec(), rstd.cvec(), G.cmat(), dx.mat());
  GradAccum<double> dw("ln_w", C, mode), db("ln_b", C, mode);
  dw.zero();
  db.zero();
  LayerNorm<double>::backward_weight(mode, x.cmat(), mean.cvec(), rstd.cvec(), G.cmat(), T, dw, db);
  dw.finalize(gw.d);
  db.finalize(gb.d);
  expect_close("LayerNorm dx (I) vs FD", dx.host_values(), fd_gradient(x, loss), kFdTol);
  expect_close("LayerNorm dw (W) vs FD", gw.host_values(), fd_gradient(w, loss), kFdTol);
  expect_close("LayerNorm db (W) vs FD", gb.host_values(), fd_gradient(b, loss), kFdTol);
}

TEST_P(Gradients, Gelu) {
  const Mode mode = GetParam();
  const int n = 64;
  Tensor<double> x("x", n), y("y", n), G("G", n), dx("dx", n);
  test::fill_uniform(x, 5, -5.0, 5.0);
  test::fill_uniform(G, 6);
  auto loss = [&] {
    Gelu<double>::forward(mode, x.cvec(), y.vec());
    return test::dot_host(y, G);
  };
  loss();
  std::vector<double> ref(n);
  const double s = std::sqrt(2.0 / M_PI);
  for (int i = 0; i < n; ++i) {
    const double xi = x.h(i);
    ref[i] = 0.5 * xi * (1.0 + std::tanh(s * (xi + 0.044715 * xi * xi * xi)));
  }
  expect_close("Gelu forward vs host", y.host_values(), ref, kRefTol);
  Gelu<double>::backward_input(mode, x.cvec(), G.cvec(), dx.vec());
  expect_close("Gelu dx (I) vs FD", dx.host_values(), fd_gradient(x, loss), kFdTol);
}

TEST_P(Gradients, Attention) {
  const Mode mode = GetParam();
  const int B = 2, T = 5, C = 8, H = 2, hs = C / H, N = B * T;
  Tensor<double> qkv("qkv", N, 3 * C), att("att", B * H * T, T), out("out", N, C), G("G", N, C), dqkv("dqkv", N, 3 * C);
  test::fill_uniform(qkv, 7, -1.5, 1.5);
  test::fill_uniform(G, 8);
  auto loss = [&] {
    Attention<double>::forward(mode, B, T, C, H, qkv.cmat(), att.mat(), out.mat());
    return test::dot_host(out, G);
  };
  loss();

  // forward against a naive host evaluation with std::exp
  qkv.pull();
  std::vector<double> ref(N * C, 0.0), att_ref(B * H * T * T, 0.0);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h)
      for (int t = 0; t < T; ++t) {
        std::vector<double> p(t + 1);
        double mx = -1e300, sum = 0;
        for (int t2 = 0; t2 <= t; ++t2) {
          double d = 0;
          for (int i = 0; i < hs; ++i)
            d += qkv.h((b * T + t) * 3 * C + h * hs + i) * qkv.h((b * T + t2) * 3 * C + C + h * hs + i);
          p[t2] = d / std::sqrt(double(hs));
          mx = std::max(mx, p[t2]);
        }
        for (auto& v : p) sum += (v = std::exp(v - mx));
        for (int t2 = 0; t2 <= t; ++t2) att_ref[((b * H + h) * T + t) * T + t2] = p[t2] / sum;
        for (int i = 0; i < hs; ++i)
          for (int t2 = 0; t2 <= t; ++t2)
            ref[(b * T + t) * C + h * hs + i] += p[t2] / sum * qkv.h((b * T + t2) * 3 * C + 2 * C + h * hs + i);
      }
  expect_close("Attention out vs host", out.host_values(), ref, kRefTol);
  expect_close("Attention att vs host (masked = 0)", att.host_values(), att_ref, kRefTol);
  for (int r = 0; r < B * H * T; ++r)
    for (int t2 = r % T + 1; t2 < T; ++t2) EXPECT_EQ(att.h(r * T + t2), 0.0) << "masked entry not zero";

  Attention<double>::backward_input(mode, B, T, C, H, qkv.cmat(), att.cmat(), G.cmat(), dqkv.mat());
  expect_close("Attention dqkv (I) vs FD", dqkv.host_values(), fd_gradient(qkv, loss), kFdTol);
}

TEST_P(Gradients, CrossEntropyWithPadding) {
  const Mode mode = GetParam();
  const int N = 8, V = 7;
  const std::vector<int> tg = {3, -1, 0, 6, 2, -1, 5, 1};
  int valid = 0;
  for (int t : tg) valid += t >= 0;
  const double scale = 1.0 / valid;
  test::IntTensor targets(tg);
  Tensor<double> logits("logits", N, V), losses("losses", N), dlogits("dlogits", N, V);
  test::fill_uniform(logits, 9, -3.0, 3.0);
  auto loss = [&] {
    CrossEntropy<double>::forward(mode, logits.cmat(), targets.all(), losses.vec());
    double s = 0;
    for (double l : losses.host_values()) s += l;
    return s * scale;
  };
  loss();

  std::vector<double> ref(N, 0.0);
  logits.pull();
  for (int n = 0; n < N; ++n) {
    if (tg[n] < 0) continue;
    double sum = 0;
    for (int v = 0; v < V; ++v) sum += std::exp(logits.h(n * V + v));
    ref[n] = std::log(sum) - logits.h(n * V + tg[n]);
  }
  expect_close("CrossEntropy losses vs host", losses.host_values(), ref, kRefTol);

  CrossEntropy<double>::backward_input(mode, logits.cmat(), targets.all(), scale, dlogits.mat());
  const std::vector<double> dl = dlogits.host_values();
  for (int n = 0; n < N; ++n)
    if (tg[n] < 0) {
      EXPECT_EQ(losses.h(n), 0.0) << "padding row " << n;
      for (int v = 0; v < V; ++v) EXPECT_EQ(dl[n * V + v], 0.0) << "padding row " << n;
    }
  expect_close("CrossEntropy dlogits (I) vs FD", dl, fd_gradient(logits, loss), kFdTol);
}

TEST_P(Gradients, EmbeddingWeights) {
  const Mode mode = GetParam();
  const int B = 2, T = 4, V = 5, C = 3, Tmax = 6, N = B * T;
  const std::vector<int> tok = {1, 3, 1, 1, 4, 0, 3, 3};  // repeated tokens within and across samples
  test::IntTensor tokens(tok);
  Tensor<double> wte("wte", V, C), wpe("wpe", Tmax, C), out("out", N, C), G("G", N, C), gte("gte", V * C),
      gpe("gpe", Tmax * C);
  test::fill_uniform(wte, 10);
  test::fill_uniform(wpe, 11);
  test::fill_uniform(G, 12);
  auto loss = [&] {
    Embedding<double>::forward(B, T, tokens.all(), wte.cmat(), wpe.cmat(), out.mat());
    return test::dot_host(out, G);
  };
  loss();
  out.pull();
  for (int n = 0; n < N; ++n)  // exact: one addition per element
    for (int c = 0; c < C; ++c) ASSERT_EQ(out.h(n * C + c), wte.h(tok[n] * C + c) + wpe.h((n % T) * C + c));

  GradAccum<double> dwte("wte", V * C, mode), dwpe("wpe", Tmax * C, mode);
  dwte.zero();
  dwpe.zero();
  Embedding<double>::backward_weight(mode, B, T, tokens.all(), G.cmat(), dwte, dwpe);
  dwte.finalize(gte.d);
  dwpe.finalize(gpe.d);
  expect_close("Embedding dwte (W) vs FD", gte.host_values(), fd_gradient(wte, loss), kFdTol);
  expect_close("Embedding dwpe (W) vs FD", gpe.host_values(), fd_gradient(wpe, loss), kFdTol);
  // positions >= T were never used: exactly zero
  for (int i = T * C; i < Tmax * C; ++i) EXPECT_EQ(gpe.h(i), 0.0);
}

INSTANTIATE_TEST_SUITE_P(Modes, Gradients, ::testing::Values(Mode::deterministic, Mode::fast),
                         [](const ::testing::TestParamInfo<Mode>& i) { return std::string(to_string(i.param)); });

template <class T>
void check_elementwise() {
  const int n = 1000;
  Tensor<T> a("a", n), b("b", n), out("out", n), y("y", n);
  test::fill_uniform(a, 13);
  test::fill_uniform(b, 14);
  Elementwise<T>::add(a.cvec(), b.cvec(), out.vec());
  Elementwise<T>::copy(a.cvec(), y.vec());
  Elementwise<T>::accumulate(y.vec(), b.cvec());
  out.pull();
  y.pull();
  for (int i = 0; i < n; ++i) {
    const T expect = static_cast<T>(a.h(i) + b.h(i));  // one IEEE rounding in T
    ASSERT_EQ(out.h(i), expect);
    ASSERT_EQ(y.h(i), expect);
  }
}
TEST(Elementwise, AddAccumulateCopyExactDouble) {
  check_elementwise<double>();
}
TEST(Elementwise, AddAccumulateCopyExactFloat) {
  check_elementwise<float>();
}

TEST(Shapes, MismatchesThrowWithContext) {
  Tensor<double> x("x", 4, 8), w("w", 7), b("b", 8), out("out", 4, 8), mean("m", 4), rstd("r", 4);
  EXPECT_THROW(LayerNorm<double>::forward(kDet, x.cmat(), w.cvec(), b.cvec(), out.mat(), mean.vec(), rstd.vec()),
               std::invalid_argument);
  Tensor<double> qkv("qkv", 4, 24), att("att", 12, 2), o("o", 4, 8);
  EXPECT_THROW(Attention<double>::forward(kDet, 2, 2, 8, 3, qkv.cmat(), att.mat(), o.mat()), std::invalid_argument);
  GradAccum<double> dw("w", 8, Mode::fast), db("b", 8, kDet);
  EXPECT_THROW(LayerNorm<double>::backward_weight(kDet, x.cmat(), mean.cvec(), rstd.cvec(), out.cmat(), 3, dw, db),
               std::invalid_argument);
}

}  // namespace
}  // namespace minipipe
