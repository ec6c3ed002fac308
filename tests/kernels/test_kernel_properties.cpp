// The four properties every kernel of the block is held to, as generic tests over the rows of the
// kernel-case table (kernel_cases.cpp): gradients against finite differences in double, the device
// path bitwise equal to the host path, fast mode within tolerance of deterministic mode, and the
// deterministic outputs bitwise invariant under splitting, reordering and holding back samples.
// Then the kernel-specific edges that do not fit a row.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "kernel_cases.hpp"
#include "kernels/attention.hpp"
#include "kernels/elementwise.hpp"
#include "kernels/gemm.hpp"
#include "kernels/kernel_path.hpp"
#include "kernels/layernorm.hpp"
#include "kernels/linear.hpp"

namespace minipipe {
namespace {

using test::Calls;
using test::KernelRow;
using test::Out;
using test::Outs;
using test::PathScope;
using test::Shape;
using test::Tensor;
constexpr Mode kDet = Mode::deterministic;

const KernelRow& row_at(int i) {
  return test::kernel_rows().at(static_cast<std::size_t>(i));
}
std::string shape_text(const Shape& s) {
  std::string t = "shape {";
  for (std::size_t i = 0; i < s.size(); ++i) t += (i ? "," : "") + std::to_string(s[i]);
  return t + "}";
}
Calls whole(const KernelRow& row, const Shape& s, int repeat = 1) {
  Calls c;
  for (int r = 0; r < repeat; ++r) c.calls.push_back({0, row.samples(s)});
  return c;
}
const Out* find_out(const Outs& o, const std::string& name) {
  for (const Out& x : o)
    if (x.name == name) return &x;
  return nullptr;
}

// Every output of `b` has the bits of the same output of `a` (values and exact accumulator words);
// one failure per output, naming the first element that differs and how many do.
void expect_same_bits(const Outs& a, const Outs& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (std::size_t k = 0; k < a.size(); ++k) {
    const Out &x = a[k], &y = b[k];
    ASSERT_EQ(x.name, y.name) << what;
    ASSERT_EQ(x.v.size(), y.v.size()) << what << " " << x.name;
    std::size_t differ = 0, first = 0;
    for (std::size_t i = 0; i < x.v.size(); ++i)
      if (std::memcmp(&x.v[i], &y.v[i], sizeof(double)) != 0 && differ++ == 0) first = i;
    EXPECT_EQ(0u, differ) << what << " " << x.name << ": " << differ << " of " << x.v.size()
                          << " elements differ, the first at " << first << ": " << x.v[first] << " vs " << y.v[first];
    EXPECT_TRUE(x.exact == y.exact) << what << " " << x.name << ": exact accumulator words differ";
  }
}

template <class P>
std::string row_name(const ::testing::TestParamInfo<P>& i) {
  return row_at(std::get<0>(i.param)).name;
}
const char* precision_name(bool dbl) {
  return dbl ? "double" : "float";
}
auto rows_range() {
  return ::testing::Range(0, static_cast<int>(test::kernel_rows().size()));
}
const auto kModes = ::testing::Values(Mode::deterministic, Mode::fast);
const auto kPaths = ::testing::Values(KernelPath::host, KernelPath::device);

// ---- gradients: finite differences in double -------------------------------------------------

// The loss is sum over the seeded forward outputs of dot(output, seed); every backward output is
// the gradient of the input it names, checked against central differences (step 1e-5). The forward
// is checked against the row's host reference in double, then the row's exact checks run.
class KernelGradient : public ::testing::TestWithParam<std::tuple<int, Mode, KernelPath>> {};

TEST_P(KernelGradient, MatchesFiniteDifferencesInDouble) {
  const KernelRow& row = row_at(std::get<0>(GetParam()));
  const Mode mode = std::get<1>(GetParam());
  PathScope scope(std::get<2>(GetParam()));
  ASSERT_FALSE(row.grad_shapes.empty()) << row.name << ": the row names no gradient shape";
  ASSERT_TRUE(row.reference) << row.name << ": the row has no forward reference";
  for (const Shape& s : row.grad_shapes) {
    SCOPED_TRACE(row.name + " " + shape_text(s));
    test::Inputs<double> in = test::make_inputs<double>(row, s);
    const Calls calls = whole(row, s);
    auto loss = [&] {
      double l = 0;
      for (const Out& f : row.run_d(mode, s, in, calls, false))
        if (!f.seed.empty()) {
          Tensor<double>& g = in(f.seed);
          g.pull();
          for (std::size_t i = 0; i < f.v.size(); ++i) l += f.v[i] * g.h(i);
        }
      return l;
    };
    const Outs outs = row.run_d(mode, s, in, calls, true);
    for (const Out& r : row.reference(s, in)) {
      const Out* o = find_out(outs, r.name);
      ASSERT_NE(o, nullptr) << "reference names output '" << r.name << "'";
      test::expect_close((row.name + " " + r.name + " vs host").c_str(), o->v, r.v, row.ref_tol);
    }
    if (row.exact_checks) row.exact_checks(s, in, outs);
    // Every differentiable input has its gradient among the outputs, and nothing else does.
    std::set<std::string> want, got;
    for (const test::InputSpec& sp : row.inputs(s))
      if (sp.kind == test::InputSpec::differentiable) want.insert(sp.name);
    for (const Out& g : outs)
      if (!g.grad_of.empty()) {
        got.insert(g.grad_of);
        test::expect_close((row.name + " " + g.name + " vs FD").c_str(), g.v, test::fd_gradient(in(g.grad_of), loss),
                           row.fd_tol);
      }
    EXPECT_EQ(want, got) << "differentiable inputs against the inputs the outputs are gradients of";
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, KernelGradient, ::testing::Combine(rows_range(), kModes, kPaths),
                         [](const ::testing::TestParamInfo<std::tuple<int, Mode, KernelPath>>& i) {
                           return row_name(i) + "_" + to_string(std::get<1>(i.param)) + "_" +
                                  to_string(std::get<2>(i.param));
                         });

// ---- both paths: the device path bitwise equal to the host path ---------------------------------

template <class T>
void check_paths(const KernelRow& row, Mode mode) {
  for (const Shape& s : row.path_shapes) {
    const std::string what =
        row.name + " " + precision_name(sizeof(T) == 8) + " " + to_string(mode) + " " + shape_text(s);
    test::Inputs<T> in = test::make_inputs<T>(row, s);
    const Calls calls = whole(row, s, row.path_repeat);
    Outs host, dev;
    {
      PathScope p(KernelPath::host);
      host = test::runner<T>(row)(mode, s, in, calls, true);
    }
    {
      PathScope p(KernelPath::device);
      dev = test::runner<T>(row)(mode, s, in, calls, true);
    }
    expect_same_bits(host, dev, what + ", device path vs host path:");
    if (mode != kDet) continue;
    SCOPED_TRACE(what + ", host path vs the canonical order built here");
    if constexpr (std::is_same<T, float>::value) {
      if (row.path_check_f) row.path_check_f(s, in, host);
    } else {
      if (row.path_check_d) row.path_check_d(s, in, host);
    }
  }
}

class KernelPaths : public ::testing::TestWithParam<std::tuple<int, Mode, bool>> {};

TEST_P(KernelPaths, DeviceEqualsHost) {
  const KernelRow& row = row_at(std::get<0>(GetParam()));
  const Mode mode = std::get<1>(GetParam());
  if (mode == Mode::fast && row.fast_paths_differ) GTEST_SKIP() << row.name << ": " << row.fast_paths_differ;
  ASSERT_FALSE(row.path_shapes.empty()) << row.name << ": the row names no path shape";
  if (std::get<2>(GetParam()))
    check_paths<double>(row, mode);
  else
    check_paths<float>(row, mode);
}

INSTANTIATE_TEST_SUITE_P(Kernels, KernelPaths, ::testing::Combine(rows_range(), kModes, ::testing::Bool()),
                         [](const ::testing::TestParamInfo<std::tuple<int, Mode, bool>>& i) {
                           return row_name(i) + "_" + to_string(std::get<1>(i.param)) + "_" +
                                  precision_name(std::get<2>(i.param));
                         });

// ---- fast mode: within the row's tolerance of deterministic mode --------------------------------

// Float, on each path (fast mode's device path has team reductions and the vendor BLAS of its own),
// every output of the row, max-norm relative error (test::rel_error).
class KernelFastMode : public ::testing::TestWithParam<std::tuple<int, KernelPath>> {};

TEST_P(KernelFastMode, WithinToleranceOfDeterministic) {
  const KernelRow& row = row_at(std::get<0>(GetParam()));
  PathScope scope(std::get<1>(GetParam()));
  ASSERT_GT(row.fast_tol, 0.0) << row.name << ": the row states no fast-mode tolerance";
  test::Inputs<float> in = test::make_inputs<float>(row, row.fast_shape);
  const Calls calls = whole(row, row.fast_shape);
  const Outs det = row.run_f(kDet, row.fast_shape, in, calls, true);
  const Outs fast = row.run_f(Mode::fast, row.fast_shape, in, calls, true);
  ASSERT_EQ(det.size(), fast.size());
  for (std::size_t k = 0; k < det.size(); ++k)
    test::expect_close((row.name + " fast " + det[k].name).c_str(), fast[k].v, det[k].v, row.fast_tol);
}

INSTANTIATE_TEST_SUITE_P(Kernels, KernelFastMode, ::testing::Combine(rows_range(), kPaths),
                         [](const ::testing::TestParamInfo<std::tuple<int, KernelPath>>& i) {
                           return row_name(i) + "_" + to_string(std::get<1>(i.param));
                         });

// ---- determinism: splits, orders and held-back samples change no bit -----------------------------

// Sample counts of the calls (6 samples): two even, three uneven, the uneven ones reversed and in
// another order, one sample a call.
struct Split {
  const char* name;
  std::vector<int> samples;
  bool reverse;
};
const std::vector<Split> kSplits = {{"2 calls", {3, 3}, false},
                                    {"3 uneven calls", {1, 2, 3}, false},
                                    {"3 uneven calls reversed", {1, 2, 3}, true},
                                    {"3 uneven calls other", {3, 1, 2}, true},
                                    {"6 single-sample calls", {1, 1, 1, 1, 1, 1}, false}};
Calls calls_of(const Split& split, bool hold) {
  Calls c;
  int s0 = 0;
  for (int k : split.samples) {
    c.calls.push_back({s0, k});
    s0 += k;
  }
  if (split.reverse) std::reverse(c.calls.begin(), c.calls.end());
  c.hold = hold;
  return c;
}

class KernelDeterminism : public ::testing::TestWithParam<std::tuple<int, KernelPath>> {};

TEST_P(KernelDeterminism, SplitsOrdersAndHeldSamplesChangeNoBit) {
  const KernelRow& row = row_at(std::get<0>(GetParam()));
  if (row.no_split) GTEST_SKIP() << row.name << ": " << row.no_split;
  const KernelPath path = std::get<1>(GetParam());
  PathScope scope(path);
  ASSERT_FALSE(row.split_shapes.empty()) << row.name << ": the row names no split shape";
  std::vector<Shape> shapes = row.split_shapes;
  if (path == KernelPath::host) shapes.insert(shapes.end(), row.host_split_shapes.begin(), row.host_split_shapes.end());
  for (const Shape& s : shapes) {
    ASSERT_EQ(6, row.samples(s)) << row.name << " " << shape_text(s) << ": the splits are of 6 samples";
    test::Inputs<float> in = test::make_inputs<float>(row, s);
    const Outs want = row.run_f(kDet, s, in, whole(row, s), true);
    // Direct, held back as copies, and held back by reference (consecutive calls on consecutive
    // rows are one held run; a reversed order restarts it).
    for (int hold = 0; hold < 3; ++hold) {
      if (hold > 0 && !row.holds_back) continue;
      const std::string how = hold == 0 ? " direct, " : hold == 1 ? " held back, " : " held by reference, ";
      if (hold > 0) {  // one call holding all its samples back equals the direct call too
        Calls c = whole(row, s);
        c.hold = true;
        c.by_reference = hold == 2;
        expect_same_bits(want, row.run_f(kDet, s, in, c, true), row.name + " " + shape_text(s) + how + "1 call:");
      }
      for (const Split& split : kSplits) {
        Calls c = calls_of(split, hold > 0);
        c.by_reference = hold == 2;
        expect_same_bits(want, row.run_f(kDet, s, in, c, true),
                         row.name + " " + shape_text(s) + how + split.name + ":");
      }
    }
    if (!row.fast_split_control) continue;
    // Control: fast mode's plain float sums do change bits with the split on this data, so the
    // bitwise comparison above is a real test of the exact accumulation.
    const Outs fast = row.run_f(Mode::fast, s, in, whole(row, s), true);
    bool any_differs = false;
    for (const Split& split : kSplits) {
      const Outs f = row.run_f(Mode::fast, s, in, calls_of(split, false), true);
      for (std::size_t k = 0; k < f.size(); ++k) any_differs = any_differs || f[k].v != fast[k].v;
    }
    EXPECT_TRUE(any_differs) << "control: float accumulation happened to be split invariant on this data";
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, KernelDeterminism, ::testing::Combine(rows_range(), kPaths),
                         [](const ::testing::TestParamInfo<std::tuple<int, KernelPath>>& i) {
                           return row_name(i) + "_" + to_string(std::get<1>(i.param));
                         });

// ---- kernel-specific edges ----------------------------------------------------------------------

// The direct bias gradient (formed from the packed dy panels) equals per-sample float chains over t
// added exactly here; a held sample is really held (not yet in the accumulator), reading it
// unflushed is an error, and R = 256 makes gemm_det_exact's group the 4 samples the table's splits
// are built around.
TEST(LinearHeldBack, DirectBiasIsPerSampleChainsAndHeldSamplesWait) {
  const int S = 6, R = 256, N = S * R;
  ASSERT_EQ(4, gemm_det_exact_group(R));
  struct Dims {
    int O, I;
  };
  for (const Dims sh : {Dims{24, 16}, Dims{205, 1037}}) {
    const int I = sh.I, O = sh.O;
    const std::string shape = "O=" + std::to_string(O) + " I=" + std::to_string(I) + ", ";
    Tensor<float> x("x", N, I), dy("dy", N, O), db_v("db", O);
    test::fill_uniform(x, 31, -2.0, 2.0);
    test::fill_uniform(dy, 32);
    KernelWorkspace ws;
    GradAccum<float> dw_ref("w", std::size_t(O) * I, kDet), db("b", O, kDet);
    dw_ref.zero();
    db.zero();
    Linear<float>::backward_weight(kDet, x.cmat(), dy.cmat(), R, dw_ref, &db, ws);
    auto ex = Kokkos::create_mirror_view(db.exact());
    Kokkos::deep_copy(ex, db.exact());
    const std::vector<double> dyh = dy.host_values();
    std::size_t db_differ = 0;
    for (int o = 0; o < O; ++o) {
      Fixed128 acc;
      int ov = 0;
      for (int s = 0; s < S; ++s) {
        float chain = 0;
        for (int t = 0; t < R; ++t)
          chain = chain + static_cast<float>(dyh[(static_cast<std::size_t>(s) * R + t) * O + o]);
        ExactSum::add(acc, chain, ov);
      }
      db_differ += acc.lo != ex(o).lo || acc.hi != ex(o).hi ? 1 : 0;
    }
    EXPECT_EQ(0u, db_differ) << shape << "direct db against per-sample chains added exactly";

    GradAccum<float> dw("w", std::size_t(O) * I, kDet);
    dw.zero();
    dw.defer_weight_samples(true);
    Linear<float>::backward_weight(kDet, x.rows_cmat(0, R), dy.rows_cmat(0, R), R, dw, nullptr, ws);
    EXPECT_EQ(1, dw.pending.count) << shape;
    View1<float> g("g", dw.size());
    EXPECT_THROW(dw.finalize(g), std::logic_error) << shape;
    Linear<float>::flush_weight(dw, ws);
    EXPECT_EQ(0, dw.pending.count) << shape;
  }
}

// Fast mode's Linear dW held by reference: single-sample calls on consecutive rows run as one GEMM
// at the flush, so dW has the bits of one call over all rows (the chain over n continued exactly,
// call by call too) and db those of one chain over all rows; nothing is added before the flush.
// Against the call-by-call db (a chain per call, summed) on this data, as a control.
TEST(LinearHeldBack, FastWeightGradHeldByReferenceIsOneCall) {
  const int S = 6, R = 16, N = S * R, O = 40, I = 72;
  Tensor<float> x("x", N, I), dy("dy", N, O);
  test::fill_uniform(x, 41, -2.0, 2.0);
  test::fill_uniform(dy, 42);
  KernelWorkspace ws;
  GradAccum<float> one("w", std::size_t(O) * I, Mode::fast), one_db("b", O, Mode::fast);
  one.zero();
  one_db.zero();
  Linear<float>::backward_weight(Mode::fast, x.cmat(), dy.cmat(), R, one, &one_db, ws);
  GradAccum<float> each("w", std::size_t(O) * I, Mode::fast), each_db("b", O, Mode::fast);
  GradAccum<float> held("w", std::size_t(O) * I, Mode::fast), held_db("b", O, Mode::fast);
  for (auto* g : {&each, &each_db, &held, &held_db}) g->zero();
  held.defer_weight_samples(true, true);
  for (int s = 0; s < S; ++s) {
    Linear<float>::backward_weight(Mode::fast, x.rows_cmat(s * R, R), dy.rows_cmat(s * R, R), R, each, &each_db, ws);
    Linear<float>::backward_weight(Mode::fast, x.rows_cmat(s * R, R), dy.rows_cmat(s * R, R), R, held, &held_db, ws);
  }
  EXPECT_EQ(S, held.pending.count);
  EXPECT_EQ(0u, held.pending.x.size() + held.pending.dy.size()) << "samples copied";
  Linear<float>::flush_weight(held, ws);
  EXPECT_EQ(0, held.pending.count);
  auto values = [](GradAccum<float>& g) {
    Tensor<float> v("v", static_cast<int>(g.size()));
    g.finalize(v.d);
    return v.host_values();
  };
  const std::vector<double> want = values(one), want_db = values(one_db);
  EXPECT_EQ(want, values(held)) << "held dW against one call";
  EXPECT_EQ(want_db, values(held_db)) << "held db against one call";
  if (fast_gemm_on_gemm_det()) {
    EXPECT_EQ(want, values(each)) << "dW call by call continues the chain exactly";
  }
  EXPECT_NE(want_db, values(each_db)) << "control: per-call db chains summed happen to equal one chain";
}

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
// The residual stream's kernels have one implementation for both paths and no mode: exactness is
// their whole contract, so they are plain tests, not rows.
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
