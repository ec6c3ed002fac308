// Deterministic mode, float: weight gradients are bitwise identical whatever the split of the
// samples into calls (1, 2, 3 uneven calls) and their order; row kernels are split-invariant.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/attention.hpp"
#include "kernels/cross_entropy.hpp"
#include "kernels/embedding.hpp"
#include "kernels/gemm.hpp"
#include "kernels/kernel_path.hpp"
#include "kernels/layernorm.hpp"
#include "kernels/linear.hpp"
#include "test_util.hpp"

namespace minipipe {
namespace {

using test::Tensor;
constexpr Mode kDet = Mode::deterministic;

// Sample counts of the calls: one call, two even, three uneven, and the uneven ones reversed.
struct Split {
  const char* name;
  std::vector<int> samples;
  bool reverse;
};
const std::vector<Split> kSplits = {{"1 call", {6}, false},
                                    {"2 calls", {3, 3}, false},
                                    {"3 uneven calls", {1, 2, 3}, false},
                                    {"3 uneven calls reversed", {1, 2, 3}, true},
                                    {"3 uneven calls other", {3, 1, 2}, true}};

// Runs fn(first_sample, n_samples) once per call of the split, in call order or reversed.
template <class F>
void for_each_call(const Split& split, F&& fn) {
  std::vector<std::pair<int, int>> calls;
  int s0 = 0;
  for (int k : split.samples) {
    calls.push_back({s0, k});
    s0 += k;
  }
  if (split.reverse) std::reverse(calls.begin(), calls.end());
  for (auto [first, count] : calls) fn(first, count);
}

// The exact accumulator words and the finalized float gradient of one parameter.
struct GradBits {
  std::vector<Fixed128> exact;
  std::vector<float> value;
};
GradBits grad_bits(const GradAccum<float>& acc) {
  GradBits g;
  auto ex = Kokkos::create_mirror_view(acc.exact);
  Kokkos::deep_copy(ex, acc.exact);
  View1<float> v("grad", acc.size());
  acc.finalize(v);
  auto vh = Kokkos::create_mirror_view(v);
  Kokkos::deep_copy(vh, v);
  for (std::size_t i = 0; i < acc.size(); ++i) {
    g.exact.push_back(ex(i));
    g.value.push_back(vh(i));
  }
  return g;
}
void expect_same_bits(const GradBits& a, const GradBits& b, const char* what, const char* split) {
  ASSERT_EQ(a.value.size(), b.value.size());
  // One failure per comparison (the first element that differs and how many do), not one per element.
  std::size_t differ = 0, first = 0;
  for (std::size_t i = 0; i < a.value.size(); ++i) {
    const bool same = a.exact[i].hi == b.exact[i].hi && a.exact[i].lo == b.exact[i].lo &&
                      std::memcmp(&a.value[i], &b.value[i], sizeof(float)) == 0;
    if (!same && differ++ == 0) first = i;
  }
  EXPECT_EQ(0u, differ) << what << ": " << differ << " of " << a.value.size() << " elements differ for split '" << split
                        << "', the first at " << first << ": " << a.value[first] << " vs " << b.value[first];
}

TEST(Determinism, LayerNormWeightGradSplitAndOrderInvariant) {
  const int S = 6, R = 4, N = S * R, C = 16;
  Tensor<float> x("x", N, C), w("w", C), b("b", C), out("out", N, C), mean("mean", N), rstd("rstd", N),
      dout("dout", N, C);
  test::fill_uniform(x, 21, -3.0, 3.0);
  test::fill_uniform(w, 22);
  test::fill_uniform(b, 23);
  test::fill_uniform(dout, 24);
  LayerNorm<float>::forward(kDet, x.cmat(), w.cvec(), b.cvec(), out.mat(), mean.vec(), rstd.vec());

  std::vector<GradBits> dws, dbs;
  for (const Split& split : kSplits) {
    GradAccum<float> dw("ln_w", C, kDet), db("ln_b", C, kDet);
    dw.zero();
    db.zero();
    for_each_call(split, [&](int s0, int k) {
      const int r0 = s0 * R, nr = k * R;
      LayerNorm<float>::backward_weight(kDet, x.rows_cmat(r0, nr), mean.slice(r0, nr), rstd.slice(r0, nr),
                                        dout.rows_cmat(r0, nr), R, dw, db);
    });
    dws.push_back(grad_bits(dw));
    dbs.push_back(grad_bits(db));
  }
  for (std::size_t i = 1; i < kSplits.size(); ++i) {
    expect_same_bits(dws[0], dws[i], "LayerNorm dw", kSplits[i].name);
    expect_same_bits(dbs[0], dbs[i], "LayerNorm db", kSplits[i].name);
  }

  // Control: plain float accumulation (fast mode) does change bits with the split on this data,
  // so the bitwise comparison above is a real test of the exact accumulation.
  std::vector<std::vector<double>> fast;
  for (const Split& split : kSplits) {
    GradAccum<float> dw("ln_w", C, Mode::fast), db("ln_b", C, Mode::fast);
    dw.zero();
    db.zero();
    for_each_call(split, [&](int s0, int k) {
      const int r0 = s0 * R, nr = k * R;
      LayerNorm<float>::backward_weight(Mode::fast, x.rows_cmat(r0, nr), mean.slice(r0, nr), rstd.slice(r0, nr),
                                        dout.rows_cmat(r0, nr), R, dw, db);
    });
    Tensor<float> g("g", C);
    dw.finalize(g.d);
    fast.push_back(g.host_values());
  }
  bool any_differs = false;
  for (std::size_t i = 1; i < fast.size(); ++i) any_differs = any_differs || fast[i] != fast[0];
  EXPECT_TRUE(any_differs) << "control: float accumulation happened to be split invariant on this data";
}

// Linear dW with samples held back (GradAccum::defer_weight_samples, as a stage does over the
// micro-batches of a step) gives the bits of one direct call, whatever the split: R = 256 rows
// per sample makes the group 4 samples, so the splits hit a full group, an overfull call and a
// remainder left for flush_weight. The second shape has partial micro-panels and more than one
// row block (O > 192) and column block (I > 1024) of the exact GEMM that adds the held samples.
// db, formed from the copied dy (held) or the packed dy panels (direct), equals per-sample float
// chains over t added exactly here.
TEST(Determinism, LinearWeightGradHeldBackEqualsDirect) {
  const int S = 6, R = 256, N = S * R;
  ASSERT_EQ(4, gemm_det_exact_group(R));
  struct Shape {
    int O, I;
  };
  for (const Shape sh : {Shape{24, 16}, Shape{205, 1037}}) {
    const int I = sh.I, O = sh.O;
    const std::string shape = "O=" + std::to_string(O) + " I=" + std::to_string(I) + ", ";
    Tensor<float> x("x", N, I), dy("dy", N, O);
    test::fill_uniform(x, 31, -2.0, 2.0);
    test::fill_uniform(dy, 32);
    KernelWorkspace ws;
    GradAccum<float> ref("w", std::size_t(O) * I, kDet), ref_db("b", O, kDet);
    ref.zero();
    ref_db.zero();
    Linear<float>::backward_weight(kDet, x.cmat(), dy.cmat(), R, ref, &ref_db, ws);
    const GradBits want = grad_bits(ref);
    const GradBits want_db = grad_bits(ref_db);
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
      db_differ += acc.lo != want_db.exact[o].lo || acc.hi != want_db.exact[o].hi ? 1 : 0;
    }
    EXPECT_EQ(0u, db_differ) << shape << "direct db against per-sample chains added exactly";

    std::vector<Split> splits = kSplits;
    splits.push_back({"6 single-sample calls", {1, 1, 1, 1, 1, 1}, false});
    // Held as copies, and by reference (a stage's step-wide rows: calls on consecutive rows are
    // one held run, a reversed order restarts it and nothing is copied).
    for (const bool by_reference : {false, true})
      for (const Split& split : splits) {
        const std::string name = shape + split.name + (by_reference ? ", by reference" : ", copied");
        GradAccum<float> dw("w", std::size_t(O) * I, kDet), db("b", O, kDet);
        dw.zero();
        db.zero();
        dw.defer_weight_samples(true, by_reference);
        for_each_call(split, [&](int s0, int k) {
          Linear<float>::backward_weight(kDet, x.rows_cmat(s0 * R, k * R), dy.rows_cmat(s0 * R, k * R), R, dw, &db, ws);
        });
        Linear<float>::flush_weight(dw, ws);
        EXPECT_EQ(0, dw.pending.count) << name;
        if (by_reference) {
          EXPECT_EQ(0u, dw.pending.x.size() + dw.pending.dy.size()) << name << ": samples copied";
        }
        expect_same_bits(want, grad_bits(dw), "Linear dW held back", name.c_str());
        expect_same_bits(want_db, grad_bits(db), "Linear db beside held-back dW", name.c_str());
      }

    // A held sample is really held (not yet in the accumulator), and reading it unflushed is an error.
    GradAccum<float> dw("w", std::size_t(O) * I, kDet);
    dw.zero();
    dw.defer_weight_samples(true);
    Linear<float>::backward_weight(kDet, x.rows_cmat(0, R), dy.rows_cmat(0, R), R, dw, nullptr, ws);
    EXPECT_EQ(1, dw.pending.count) << shape;
    View1<float> g("g", dw.size());
    EXPECT_THROW(dw.finalize(g), std::logic_error) << shape;
  }
}

// Fast mode's Linear dW held by reference: single-sample calls on consecutive rows run as one GEMM
// at the flush, so dW has the bits of one call over all rows (the chain over n continued exactly,
// call by call too) and db those of one chain over all rows; nothing is added before the flush.
// Against the call-by-call db (a chain per call, summed) on this data, as a control.
TEST(Determinism, LinearFastWeightGradHeldByReferenceIsOneCall) {
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

TEST(Determinism, EmbeddingWeightGradSplitAndOrderInvariant) {
  const int S = 6, T = 4, V = 5, C = 8, N = S * T;
  std::vector<int> tok(N);
  for (int n = 0; n < N; ++n) tok[n] = (n * 7 + n / 3) % V;  // every token repeats, across samples too
  test::IntTensor tokens(tok);
  Tensor<float> dout("dout", N, C);
  test::fill_uniform(dout, 25);

  std::vector<GradBits> tes, pes;
  for (const Split& split : kSplits) {
    GradAccum<float> dwte("wte", V * C, kDet), dwpe("wpe", T * C, kDet);
    dwte.zero();
    dwpe.zero();
    for_each_call(split, [&](int s0, int k) {
      Embedding<float>::backward_weight(kDet, k, T, tokens.slice(s0 * T, k * T), dout.rows_cmat(s0 * T, k * T), dwte,
                                        dwpe);
    });
    tes.push_back(grad_bits(dwte));
    pes.push_back(grad_bits(dwpe));
  }
  for (std::size_t i = 1; i < kSplits.size(); ++i) {
    expect_same_bits(tes[0], tes[i], "Embedding dwte", kSplits[i].name);
    expect_same_bits(pes[0], pes[i], "Embedding dwpe", kSplits[i].name);
  }
}

// Row kernels never mix samples: running a micro-batch alone gives the rows of the full batch.
TEST(Determinism, AttentionAndLossRowsSplitInvariant) {
  const int S = 6, T = 5, C = 8, H = 2, N = S * T, V = 11;
  Tensor<float> qkv("qkv", N, 3 * C), att("att", S * H * T, T), out("out", N, C), dout("dout", N, C),
      dqkv("dqkv", N, 3 * C), logits("logits", N, V), losses("losses", N);
  test::fill_uniform(qkv, 26, -2.0, 2.0);
  test::fill_uniform(dout, 27);
  test::fill_uniform(logits, 28, -4.0, 4.0);
  std::vector<int> tg(N);
  for (int n = 0; n < N; ++n) tg[n] = (n % T) >= 3 + (n / T) % 2 ? -1 : (n * 5) % V;
  test::IntTensor targets(tg);
  Attention<float>::forward(kDet, S, T, C, H, qkv.cmat(), att.mat(), out.mat());
  Attention<float>::backward_input(kDet, S, T, C, H, qkv.cmat(), att.cmat(), dout.cmat(), dqkv.mat());
  CrossEntropy<float>::forward(kDet, logits.cmat(), targets.all(), losses.vec());

  Tensor<float> att2("att2", S * H * T, T), out2("out2", N, C), dqkv2("dqkv2", N, 3 * C), losses2("losses2", N);
  for_each_call(kSplits[4], [&](int s0, int k) {
    const int r0 = s0 * T, nr = k * T;
    Mat<float> a(att2.d.data() + std::size_t(s0) * H * T * T, k * H * T, T);
    Attention<float>::forward(kDet, k, T, C, H, qkv.rows_cmat(r0, nr), a, out2.rows_mat(r0, nr));
    Attention<float>::backward_input(kDet, k, T, C, H, qkv.rows_cmat(r0, nr), a, dout.rows_cmat(r0, nr),
                                     dqkv2.rows_mat(r0, nr));
    CrossEntropy<float>::forward(kDet, logits.rows_cmat(r0, nr), targets.slice(r0, nr), losses2.slice_mut(r0, nr));
  });
  EXPECT_TRUE(test::bitwise_equal(att, att2));
  EXPECT_TRUE(test::bitwise_equal(out, out2));
  EXPECT_TRUE(test::bitwise_equal(dqkv, dqkv2));
  EXPECT_TRUE(test::bitwise_equal(losses, losses2));
}

}  // namespace
}  // namespace minipipe
