// Deterministic mode, float32: the same step twice, any micro-batch split and any W order give
// bitwise identical loss, gradients and updated parameters (docs/design.md §4).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "single_stage.hpp"

using namespace minipipe;
using namespace minipipe::testing;

namespace {

template <class V>
bool same_bits(const V& a, const V& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(a[0])) == 0;
}

struct Outcome {
  double loss;
  std::vector<float> grads, params;
};

Outcome run(int m, bool reverse_w, int B = 7) {
  const auto shape = tiny_shape();
  SingleStage<float> model(shape, Mode::deterministic);
  OptimizerConfig opt;
  Outcome o;
  o.loss = model.step(test_batch(shape, B), m, reverse_w, &opt);
  o.grads = model.gather(true);
  o.params = model.gather(false);
  return o;
}

}  // namespace

TEST(StageDeterminism, SameStepTwiceIsBitwiseIdentical) {
  const auto a = run(1, false), b = run(1, false);
  EXPECT_EQ(std::memcmp(&a.loss, &b.loss, sizeof(double)), 0);
  EXPECT_TRUE(same_bits(a.grads, b.grads));
  EXPECT_TRUE(same_bits(a.params, b.params));
}

TEST(StageDeterminism, MicroBatchSplitsAreBitwiseIdentical) {
  const int B = 7;
  const auto ref = run(1, false, B);
  // Gradients must not be trivially zero, or the comparison proves nothing.
  double norm = 0;
  for (float g : ref.grads) norm += static_cast<double>(g) * g;
  ASSERT_GT(norm, 1e-8);
  for (int m : {2, 3, 4, B}) {
    const auto o = run(m, false, B);
    EXPECT_EQ(std::memcmp(&o.loss, &ref.loss, sizeof(double)), 0) << "m = " << m;
    EXPECT_TRUE(same_bits(o.grads, ref.grads)) << "gradients differ for m = " << m;
    EXPECT_TRUE(same_bits(o.params, ref.params)) << "updated parameters differ for m = " << m;
  }
}

TEST(StageDeterminism, ReversedWOrderChangesNothing) {
  const auto fwd = run(3, false), rev = run(3, true);
  EXPECT_TRUE(same_bits(fwd.grads, rev.grads));
  EXPECT_TRUE(same_bits(fwd.params, rev.params));
}

TEST(StageDeterminism, FastModeAgreesWithDeterministic) {
  const auto shape = tiny_shape();
  const Batch b = test_batch(shape, 5);
  SingleStage<float> det(shape, Mode::deterministic), fast(shape, Mode::fast);
  const double ld = det.step(b, 2, false), lf = fast.step(b, 2, false);
  EXPECT_NEAR(lf, ld, 1e-4 * std::abs(ld));
  // Per parameter tensor: max |fast - det| relative to max |det| (element-wise relative error is
  // meaningless for gradient entries that are zero up to rounding).
  std::size_t off = 0;
  const auto gd = det.gather(true), gf = fast.gather(true);
  for (auto& p : det.stage.params()) {
    const std::size_t n = p.spec.numel();
    double maxd = 0, maxref = 0;
    for (std::size_t i = off; i < off + n; ++i) {
      maxd = std::max(maxd, std::abs(static_cast<double>(gf[i]) - gd[i]));
      maxref = std::max(maxref, std::abs(static_cast<double>(gd[i])));
    }
    if (maxref > 0) {
      EXPECT_LT(maxd / maxref, 1e-4) << p.spec.name;
    }
    off += n;
  }
}

namespace {

// Held-back dW samples of a stage's accumulators now (Linear's deferral, kernels/grad_accum.hpp).
int held_samples(Stage<float>& s) {
  int n = 0;
  for (auto& p : s.params()) n += p.acc.pending.count;
  return n;
}

// All gradients by global parameter name.
std::map<std::string, std::vector<float>> grads_by_name(Stage<float>& s) {
  std::map<std::string, std::vector<float>> g;
  for (auto& p : s.params()) {
    auto h = Kokkos::create_mirror_view_and_copy(HostSpace(), p.grad);
    g[p.acc.name].assign(h.data(), h.data() + h.extent(0));
  }
  return g;
}

}  // namespace

// A stage of a pipeline adds every micro-batch's dW samples in that micro-batch's W (nothing is
// held back for the step's last W, whose extra time would delay the stages waiting on it), while
// a stage that is the whole model holds them back for fewer exact folds; the gradients are the
// same bits either way (docs/design.md §4 rule 2). Counts, not times: robust under load.
TEST(StageDeterminism, PipelineStagesHoldNoSamplesPastTheirW) {
  const auto shape = tiny_shape();
  const int B = 4, m = 4, T = shape.seq_len, C = shape.channels;
  const Batch batch = test_batch(shape, B);
  const auto mbs = split_batch(B, m);

  SingleStage<float> whole(shape, Mode::deterministic);
  auto in1 = whole.inputs(batch);
  whole.stage.zero_grads();
  whole.stage.begin_step(m);
  for (const auto& mb : mbs) whole.stage.forward(mb, in1, CMat<float>(), Mat<float>());
  for (const auto& mb : mbs) whole.stage.backward_input(mb, in1, CMat<float>(), Mat<float>());
  std::vector<int> held_whole;
  for (const auto& mb : mbs) {
    whole.stage.backward_weight(mb, in1);
    held_whole.push_back(held_samples(whole.stage));
  }
  EXPECT_GT(held_whole[0], 0) << "the whole-model stage no longer holds samples back";
  EXPECT_EQ(held_whole.back(), 0);
  EXPECT_TRUE(whole.stage.last_w_added_held());
  whole.stage.finalize_grads();

  // The same step through a two-stage pipeline driven by hand (1F1B-free: all F, then all B).
  const StageLayout layout = make_stage_layout(shape.n_layer, 2, {});
  Stage<float> s0(shape, layout, 0, Mode::deterministic, 7), s1(shape, layout, 1, Mode::deterministic, 7);
  auto in2 = whole.inputs(batch);
  std::vector<View2<float>> act, grad;
  for (auto* s : {&s0, &s1}) s->zero_grads(), s->begin_step(m);
  for (const auto& mb : mbs) {
    act.emplace_back("act", static_cast<std::size_t>(mb.nsamples) * T, C);
    grad.emplace_back("grad", static_cast<std::size_t>(mb.nsamples) * T, C);
    s0.forward(mb, in2, CMat<float>(), Mat<float>(act.back().data(), act.back().extent(0), C));
    s1.forward(mb, in2, CMat<float>(act.back().data(), act.back().extent(0), C), Mat<float>());
  }
  for (std::size_t k = 0; k < mbs.size(); ++k) {
    const MicroBatch& mb = mbs[k];
    Mat<float> g(grad[k].data(), grad[k].extent(0), C);
    s1.backward_input(mb, in2, CMat<float>(), g);
    s1.backward_weight(mb, in2);
    s0.backward_input(mb, in2, CMat<float>(g.data(), g.extent(0), C), Mat<float>());
    s0.backward_weight(mb, in2);
    EXPECT_EQ(held_samples(s1), 0) << "last stage holds samples after the W of micro-batch " << k;
    EXPECT_EQ(held_samples(s0), 0) << "first stage holds samples after the W of micro-batch " << k;
  }
  EXPECT_FALSE(s0.last_w_added_held());
  EXPECT_FALSE(s1.last_w_added_held());
  s0.finalize_grads();
  s1.finalize_grads();

  auto ref = grads_by_name(whole.stage);
  auto got = grads_by_name(s0);
  for (auto& [name, g] : grads_by_name(s1)) got[name] = g;
  ASSERT_EQ(ref.size(), got.size());
  for (const auto& [name, g] : ref) EXPECT_TRUE(same_bits(g, got[name])) << "gradient " << name << " differs";
}

namespace {

// One step of a whole-model stage as the trainer runs it (begin_step with the step's samples, so
// the blocks' Linear dW operands live in step-wide rows and are held by reference), F and I per
// micro-batch in order, then the W's in order or reversed. Returns the gradients by name and, in
// `copied`, the bytes of held-sample copies of the blocks' Linear weights.
std::map<std::string, std::vector<float>> step_with_rows(Mode mode, int B, int m, bool reverse_w, bool rows,
                                                         std::size_t* copied = nullptr) {
  const auto shape = tiny_shape();
  SingleStage<float> s(shape, mode);
  const Batch batch = test_batch(shape, B);
  auto in = s.inputs(batch);
  auto mbs = split_batch(B, m);
  s.stage.zero_grads();
  s.stage.begin_step(m, false, 0, rows ? B : 0);
  for (const auto& mb : mbs) s.stage.forward(mb, in, CMat<float>(), Mat<float>());
  for (const auto& mb : mbs) s.stage.backward_input(mb, in, CMat<float>(), Mat<float>());
  if (reverse_w) std::reverse(mbs.begin(), mbs.end());
  for (const auto& mb : mbs) s.stage.backward_weight(mb, in);
  if (copied) {
    *copied = 0;
    for (auto& p : s.stage.params())
      if (p.spec.name.find("layer_") == 0 && p.spec.shape.size() == 2)
        *copied += (p.acc.pending.x.size() + p.acc.pending.dy.size()) * sizeof(float);
  }
  s.stage.finalize_grads();
  return grads_by_name(s.stage);
}

}  // namespace

// The blocks' Linear dW samples held by reference in the step-wide rows (no copies) give the bits
// of m = 1 in deterministic mode, for every split and W order (docs/design.md §4 rule 2).
TEST(StageDeterminism, StepRowsHoldDetSamplesByReference) {
  const int B = 7;
  const auto ref = step_with_rows(Mode::deterministic, B, 1, false, false);
  for (int m : {2, 3, 4, B})
    for (bool reverse : {false, true}) {
      std::size_t copied = 1;
      const auto got = step_with_rows(Mode::deterministic, B, m, reverse, true, &copied);
      EXPECT_EQ(0u, copied) << "m = " << m << ": block Linear samples were copied";
      ASSERT_EQ(ref.size(), got.size());
      for (const auto& [name, g] : ref)
        EXPECT_TRUE(same_bits(g, got.at(name))) << "m = " << m << (reverse ? " reversed" : "") << ": " << name;
    }
}

// Fast mode on a whole-model stage: the blocks' Linear weight and bias gradients of m micro-batches
// are one GEMM over the step's rows at the last W, the bits of m = 1 (per micro-batch, the bias sums
// of the calls were added one by one: other bits).
TEST(StageDeterminism, StepRowsGiveFastLinearGradsOfOneMicroBatch) {
  const int B = 4;
  const auto ref = step_with_rows(Mode::fast, B, 1, false, true);
  const auto got = step_with_rows(Mode::fast, B, B, false, true);
  int compared = 0;
  for (const auto& [name, g] : ref)
    for (const char* w : {"/qkv_", "/attn_proj_", "/fc_", "/fc_proj_"})
      if (name.find("layer_") == 0 && name.find(w) != std::string::npos) {
        EXPECT_TRUE(same_bits(g, got.at(name))) << name;
        ++compared;
        break;
      }
  EXPECT_EQ(8 * tiny_shape().n_layer, compared);
}

namespace {

// One step of a two-stage pipeline driven by hand, each micro-batch's backward a B action
// (Stage::backward: in fast mode every parameter gradient right after the kernel that makes its
// dy) or I then W. `perturb`: the test hook's MINIPIPE_TEST_PERTURB while the stages are made ("":
// none); W must read the nudged value either way.
struct BackwardOutcome {
  std::map<std::string, std::vector<float>> grads;
  std::vector<std::vector<float>> dx;  // what the last stage sends back, per micro-batch
  std::vector<std::size_t> peaks;      // action_peak_bytes of each backward, both stages
};
BackwardOutcome pipeline_step(Mode mode, bool fused, const std::string& perturb) {
  const auto shape = tiny_shape();
  const int B = 4, m = 2, T = shape.seq_len, C = shape.channels;
  const StageLayout layout = make_stage_layout(shape.n_layer, 2, {});
  if (!perturb.empty()) setenv("MINIPIPE_TEST_PERTURB", perturb.c_str(), 1);
  Stage<float> s0(shape, layout, 0, mode, 7), s1(shape, layout, 1, mode, 7);
  unsetenv("MINIPIPE_TEST_PERTURB");
  const Batch batch = test_batch(shape, B);
  auto in = device_inputs<float>(batch);
  const auto mbs = split_batch(B, m);
  std::vector<View2<float>> act, grad;
  for (auto* s : {&s0, &s1}) s->zero_grads(), s->begin_step(m);
  for (const auto& mb : mbs) {
    act.emplace_back("act", static_cast<std::size_t>(mb.nsamples) * T, C);
    grad.emplace_back("grad", static_cast<std::size_t>(mb.nsamples) * T, C);
    s0.forward(mb, in, CMat<float>(), Mat<float>(act.back().data(), act.back().extent(0), C));
    s1.forward(mb, in, CMat<float>(act.back().data(), act.back().extent(0), C), Mat<float>());
  }
  BackwardOutcome o;
  for (std::size_t k = 0; k < mbs.size(); ++k) {
    const MicroBatch& mb = mbs[k];
    const Mat<float> g(grad[k].data(), grad[k].extent(0), C);
    for (auto* s : {&s1, &s0}) {
      const CMat<float> dy = s == &s0 ? CMat<float>(g.data(), g.extent(0), C) : CMat<float>();
      const Mat<float> dx = s == &s1 ? g : Mat<float>();
      if (fused) {
        s->backward(mb, in, dy, dx);
      } else {
        s->backward_input(mb, in, dy, dx);
        s->backward_weight(mb, in);
      }
      o.peaks.push_back(s->action_peak_bytes());
      EXPECT_FALSE(s->last_w_added_held()) << "stage " << s->id() << ", micro-batch " << k;
      EXPECT_EQ(0, s->stored_microbatches() - static_cast<int>(mbs.size() - k - 1)) << "micro-batch " << k;
    }
    auto h = Kokkos::create_mirror_view_and_copy(HostSpace(), grad[k]);
    o.dx.emplace_back(h.data(), h.data() + h.size());
  }
  s0.finalize_grads();
  s1.finalize_grads();
  o.grads = grads_by_name(s0);
  for (auto& [name, g] : grads_by_name(s1)) o.grads[name] = g;
  return o;
}

}  // namespace

// A B action gives I then W's bits in both modes (each accumulator's additions keep their order),
// its stores and peak bytes, also when the test hook nudges a gradient W reads.
TEST(StageDeterminism, BackwardActionIsInputThenWeightBitwise) {
  const std::vector<std::string> nudges = {"layer_01/d_fc", "layer_00/d_qkv",  "layer_00/d_ln1",
                                           "head/dlogits",  "layer_01/d_res1", "layer_00/d_fc"};
  std::vector<std::string> cases = {""};
  cases.insert(cases.end(), nudges.begin(), nudges.end());
  for (Mode mode : {Mode::fast, Mode::deterministic})
    for (const std::string& perturb : cases) {
      const std::string what =
          std::string(mode == Mode::fast ? "fast" : "deterministic") + ", perturb '" + perturb + "'";
      const auto split = pipeline_step(mode, false, perturb), fused = pipeline_step(mode, true, perturb);
      ASSERT_EQ(split.grads.size(), fused.grads.size()) << what;
      for (const auto& [name, g] : split.grads) EXPECT_TRUE(same_bits(g, fused.grads.at(name))) << what << ": " << name;
      for (std::size_t k = 0; k < split.dx.size(); ++k)
        EXPECT_TRUE(same_bits(split.dx[k], fused.dx[k])) << what << ": dx of micro-batch " << k;
      EXPECT_EQ(split.peaks, fused.peaks) << what;
    }
  // The hook's nudges are live in these runs (else the perturbed cases above compare two unnudged
  // steps): in each mode at least one of them moves a parameter gradient. A one-ULP nudge of one
  // element is often lost in the rounding of the sums that read it (at this size, in fast mode, in
  // every weight that reads the nudged tensor directly), so the check asks for any gradient.
  for (Mode mode : {Mode::fast, Mode::deterministic}) {
    const auto plain = pipeline_step(mode, true, "");
    int moved = 0;
    for (const std::string& perturb : nudges) {
      const auto nudged = pipeline_step(mode, true, perturb);
      for (const auto& [name, g] : plain.grads) moved += same_bits(g, nudged.grads.at(name)) ? 0 : 1;
    }
    EXPECT_GT(moved, 0) << (mode == Mode::fast ? "fast" : "deterministic") << ": no nudge moved a gradient";
  }
}
