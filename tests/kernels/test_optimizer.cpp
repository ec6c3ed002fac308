// AdamW and SGD update kernels against hand-computed double references: AdamW's first step has
// the closed form p(1 - lr wd) - lr g/(|g| + eps); later steps follow the textbook formulas.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/optimizer.hpp"
#include "test_util.hpp"

namespace minipipe {
namespace {

using test::Tensor;

TEST(AdamW, FirstStepClosedForm) {
  const std::vector<double> p0 = {1.0, -2.0, 0.5, 0.0, 3.0};
  const std::vector<double> g = {0.5, -0.25, 0.0, 3.0, 1e-9};
  const int n = static_cast<int>(p0.size());
  Tensor<double> p("p", n), grad("g", n), m("m", n), v("v", n);
  for (int i = 0; i < n; ++i) {
    p.h(i) = p0[i];
    grad.h(i) = g[i];
  }
  p.push();
  grad.push();
  AdamWConfig cfg;
  cfg.lr = 1e-3;
  cfg.weight_decay = 0.1;
  AdamW<double>::update(cfg, 1, true, p.vec(), grad.cvec(), m.vec(), v.vec());
  p.pull();
  m.pull();
  v.pull();
  for (int i = 0; i < n; ++i) {
    // step 1: mhat = g and vhat = g^2, so the update is lr g / (|g| + eps) (about lr sign(g)).
    const double expect = p0[i] * (1.0 - 1e-3 * 0.1) - 1e-3 * g[i] / (std::fabs(g[i]) + 1e-8);
    EXPECT_NEAR(p.h(i), expect, 1e-15) << "element " << i;
    EXPECT_NEAR(m.h(i), 0.1 * g[i], 1e-15 * std::fabs(g[i]));  // (1 - 0.9) is 0.1 only to 1 ulp
    EXPECT_NEAR(v.h(i), 0.05 * g[i] * g[i], 1e-15 * g[i] * g[i]);
  }
  EXPECT_NEAR(p.h(0), 0.99890000002, 1e-12);  // 0.9999 - 1e-3 * 0.5 / 0.50000001, by hand
  EXPECT_EQ(p.h(2), 0.5 * (1.0 - 1e-4));      // zero gradient: decay only
}

template <class T>
void check_third_step(double tol) {
  const int n = 257;
  Tensor<T> p("p", n), grad("g", n), m("m", n), v("v", n);
  test::fill_uniform(p, 60);
  test::fill_uniform(grad, 61);
  test::fill_uniform(m, 62, -0.1, 0.1);
  test::fill_uniform(v, 63, 0.0, 0.01);
  p.pull();
  grad.pull();
  m.pull();
  v.pull();
  std::vector<long double> p0(n), g(n), m0(n), v0(n);
  for (int i = 0; i < n; ++i) {
    p0[i] = p.h(i);
    g[i] = grad.h(i);
    m0[i] = m.h(i);
    v0[i] = v.h(i);
  }
  AdamWConfig cfg;
  cfg.lr = 2e-3;
  cfg.beta1 = 0.9;
  cfg.beta2 = 0.95;
  cfg.eps = 1e-8;
  cfg.weight_decay = 0.01;
  const int step = 3;
  AdamW<T>::update(cfg, step, true, p.vec(), grad.cvec(), m.vec(), v.vec());
  std::vector<double> got(n), ref(n);
  p.pull();
  for (int i = 0; i < n; ++i) {
    const long double mi = 0.9L * m0[i] + 0.1L * g[i];
    const long double vi = 0.95L * v0[i] + 0.05L * g[i] * g[i];
    const long double mhat = mi / (1 - std::pow(0.9L, step));
    const long double vhat = vi / (1 - std::pow(0.95L, step));
    ref[i] = static_cast<double>(p0[i] * (1 - 2e-3L * 0.01L) - 2e-3L * mhat / (std::sqrt(vhat) + 1e-8L));
    got[i] = p.h(i);
  }
  test::expect_close(sizeof(T) == 4 ? "AdamW step 3 float vs long double" : "AdamW step 3 double vs long double", got,
                     ref, tol);
}
TEST(AdamW, ThirdStepDouble) {
  check_third_step<double>(1e-14);
}
TEST(AdamW, ThirdStepFloat) {
  check_third_step<float>(1e-6);
}

TEST(AdamW, DecayOnlyWhenRequestedAndStepValidated) {
  const int n = 64;
  Tensor<double> g("g", n), pa("pa", n), pb("pb", n), ma("ma", n), va("va", n), mb("mb", n), vb("vb", n);
  test::fill_uniform(g, 64);
  test::fill_uniform(pa, 65);
  Kokkos::deep_copy(pb.d, pa.d);
  AdamWConfig with_wd;
  with_wd.weight_decay = 0.1;
  AdamWConfig no_wd;
  AdamW<double>::update(with_wd, 1, false, pa.vec(), g.cvec(), ma.vec(), va.vec());  // 1-D weight: no decay
  AdamW<double>::update(no_wd, 1, true, pb.vec(), g.cvec(), mb.vec(), vb.vec());
  EXPECT_TRUE(test::bitwise_equal(pa, pb));
  EXPECT_THROW(AdamW<double>::update(no_wd, 0, true, pa.vec(), g.cvec(), ma.vec(), va.vec()), std::invalid_argument);
}

TEST(Sgd, TwoStepsWithMomentumAndDecay) {
  const std::vector<double> p0 = {1.0, -0.5}, g1 = {0.2, 0.4}, g2 = {-0.1, 0.3};
  Tensor<double> p("p", 2), grad("g", 2), buf("buf", 2);
  p.h(0) = p0[0];
  p.h(1) = p0[1];
  p.push();
  SgdConfig cfg;
  cfg.lr = 0.1;
  cfg.momentum = 0.9;
  cfg.weight_decay = 0.01;
  for (const auto& gs : {g1, g2}) {
    grad.h(0) = gs[0];
    grad.h(1) = gs[1];
    grad.push();
    Sgd<double>::update(cfg, true, p.vec(), grad.cvec(), buf.vec());
  }
  p.pull();
  for (int i = 0; i < 2; ++i) {
    // by hand: d1 = g1 + wd p0, buf1 = d1, p1 = p0 - lr d1; d2 = g2 + wd p1, buf2 = 0.9 buf1 + d2, p2 = p1 - lr buf2
    const double d1 = g1[i] + 0.01 * p0[i];
    const double p1 = p0[i] - 0.1 * d1;
    const double buf2 = 0.9 * d1 + (g2[i] + 0.01 * p1);
    EXPECT_NEAR(p.h(i), p1 - 0.1 * buf2, 1e-15);
  }
  // by hand: p1 = 1 - 0.1*0.21 = 0.979; buf2 = 0.9*0.21 + (-0.1 + 0.00979) = 0.09879; p2 = 0.979 - 0.009879
  EXPECT_NEAR(p.h(0), 0.969121, 1e-12);
}

}  // namespace
}  // namespace minipipe
