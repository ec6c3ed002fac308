// Activation recompute: every mode gives the gradients and loss of `none` bit for bit, and stores
// exactly the bytes its rule says (counted here from the shapes, independently of the stage).
#include <gtest/gtest.h>

#include <cstring>

#include "single_stage.hpp"

namespace minipipe::testing {
namespace {

// Bytes one micro-batch of n samples holds on a one-stage model (embedding, L blocks, head),
// float, written out from the rule of each mode: after F, and from I until W.
struct Expected {
  std::size_t after_f, after_i;
};
Expected expected_bytes(const ModelShape& s, int n, Recompute r) {
  const std::size_t N = static_cast<std::size_t>(n) * s.seq_len, C = s.channels, V = s.vocab, L = s.n_layer;
  const std::size_t att = static_cast<std::size_t>(n) * s.n_head * s.seq_len * s.seq_len;
  // Per block: x_in ln1 qkv att atty res1 ln2 fc gelu (1+1+3+1+1+1+4+4 = 16 NC + att) + 4 statistics.
  const std::size_t block_all = 16 * N * C + att + 4 * N;
  const std::size_t block_grads = 11 * N * C;              // dout d_res1 d_qkv(3) d_ln1 d_fc(4) d_ln2
  const std::size_t head_all = 2 * N * C + N * V + 3 * N;  // h_x lnf logits, losses mean rstd
  const std::size_t head_grads = N * V + N * C;            // dlogits d_lnf
  const std::size_t emb_grads = N * C;                     // emb_dout
  std::size_t kept = 0, remade = 0;
  switch (r) {
    case Recompute::none:
      kept = L * block_all + head_all;
      break;
    case Recompute::attention:  // att and atty are remade
      kept = L * (block_all - att - N * C) + head_all;
      remade = L * (att + N * C);
      break;
    case Recompute::block:  // only x_in and h_x are kept; F's per-token losses are never stored
      kept = L * N * C + N * C;
      remade = L * (block_all - N * C) + (head_all - N * C - N);
      break;
  }
  const std::size_t grads = L * block_grads + head_grads + emb_grads;
  return {kept * sizeof(float), (kept + remade + grads) * sizeof(float)};
}

ModelShape shape() {
  ModelShape s = tiny_shape();
  s.n_layer = 3;
  return s;
}

TEST(Recompute, ParsesItsNamesAndRefusesOthers) {
  EXPECT_EQ(parse_recompute("none"), Recompute::none);
  EXPECT_EQ(parse_recompute("attention"), Recompute::attention);
  EXPECT_EQ(parse_recompute("block"), Recompute::block);
  try {
    parse_recompute("full");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("train.recompute"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("none | attention | block"), std::string::npos) << e.what();
  }
}

TEST(Recompute, StoredBytesFollowEachModesRule) {
  const ModelShape s = shape();
  const Batch b = test_batch(s, 5);
  for (Recompute r : {Recompute::none, Recompute::attention, Recompute::block}) {
    SCOPED_TRACE(to_string(r));
    SingleStage<float> model(s, Mode::deterministic, 7, r);
    auto in = model.inputs(b);
    const MicroBatch a{0, 0, 3}, c{1, 3, 2};
    model.stage.forward(a, in, CMat<float>(), Mat<float>());
    model.stage.forward(c, in, CMat<float>(), Mat<float>());
    const Expected ea = expected_bytes(s, 3, r), ec = expected_bytes(s, 2, r);
    EXPECT_EQ(model.stage.stored_bytes(), ea.after_f + ec.after_f);
    model.stage.backward_input(a, in, CMat<float>(), Mat<float>());
    EXPECT_EQ(model.stage.stored_bytes(), ea.after_i + ec.after_f);
    EXPECT_EQ(model.stage.action_peak_bytes(), ea.after_i + ec.after_f);
    model.stage.backward_weight(a, in);
    EXPECT_EQ(model.stage.stored_bytes(), ec.after_f);
    EXPECT_EQ(model.stage.action_peak_bytes(), ea.after_i + ec.after_f);  // held just before W freed it
    model.stage.backward_input(c, in, CMat<float>(), Mat<float>());
    model.stage.backward_weight(c, in);
    EXPECT_EQ(model.stage.stored_bytes(), 0u);
  }
  // The ordering the modes exist for, on this shape: each keeps less than the one before.
  EXPECT_LT(expected_bytes(s, 4, Recompute::attention).after_f, expected_bytes(s, 4, Recompute::none).after_f);
  EXPECT_LT(expected_bytes(s, 4, Recompute::block).after_f, expected_bytes(s, 4, Recompute::attention).after_f);
}

TEST(Recompute, GradientsLossAndUpdateAreBitwiseThoseOfNone) {
  const ModelShape s = shape();
  const Batch b = test_batch(s, 7);
  OptimizerConfig opt;
  SingleStage<float> ref(s, Mode::deterministic);
  const double ref_loss = ref.step(b, 3, false, &opt);
  const std::vector<float> ref_grads = ref.gather(true), ref_params = ref.gather(false);
  for (Recompute r : {Recompute::attention, Recompute::block}) {
    SCOPED_TRACE(to_string(r));
    SingleStage<float> model(s, Mode::deterministic, 7, r);
    // Reversed W order: the remade values must survive until their own W, in any order.
    const double loss = model.step(b, 3, true, &opt);
    EXPECT_EQ(std::memcmp(&loss, &ref_loss, sizeof loss), 0);
    const auto g = model.gather(true), p = model.gather(false);
    ASSERT_EQ(g.size(), ref_grads.size());
    EXPECT_EQ(std::memcmp(g.data(), ref_grads.data(), g.size() * sizeof(float)), 0);
    EXPECT_EQ(std::memcmp(p.data(), ref_params.data(), p.size() * sizeof(float)), 0);
  }
}

// One stage switched between modes from step to step (as the profiler does) computes each step
// as a stage built for that mode: its buffer sets are pooled per mode, so a set allocated under
// one mode never serves another. Each mode's step stores that mode's bytes, the gradients are
// those of `none` bit for bit, and switching while micro-batches are stored is refused.
TEST(Recompute, SwitchingModesBetweenStepsKeepsBitsAndBytes) {
  const ModelShape s = shape();
  const Batch b = test_batch(s, 6);
  SingleStage<float> ref(s, Mode::deterministic);
  const double ref_loss = ref.step(b, 2, false);
  const std::vector<float> ref_grads = ref.gather(true);
  SingleStage<float> model(s, Mode::deterministic);
  for (Recompute r : {Recompute::block, Recompute::none, Recompute::attention, Recompute::block, Recompute::none}) {
    SCOPED_TRACE(to_string(r));
    model.stage.set_recompute(r);
    EXPECT_EQ(model.stage.recompute(), r);
    const double loss = model.step(b, 2, r == Recompute::attention);
    EXPECT_EQ(std::memcmp(&loss, &ref_loss, sizeof loss), 0);
    const auto g = model.gather(true);
    ASSERT_EQ(g.size(), ref_grads.size());
    EXPECT_EQ(std::memcmp(g.data(), ref_grads.data(), g.size() * sizeof(float)), 0);
    auto in = model.inputs(b);
    model.stage.zero_grads();
    model.stage.forward(MicroBatch{0, 0, 3}, in, CMat<float>(), Mat<float>());
    EXPECT_EQ(model.stage.stored_bytes(), expected_bytes(s, 3, r).after_f);
    EXPECT_THROW(model.stage.set_recompute(Recompute::none), std::logic_error);
    model.stage.backward_input(MicroBatch{0, 0, 3}, in, CMat<float>(), Mat<float>());
    model.stage.backward_weight(MicroBatch{0, 0, 3}, in);
  }
}

// The taps the kernel-level dump sees come in the order of the tensor table (model_tensors.hpp),
// which the dump and the first-divergence locator take for computation order: each block's forward
// rows, the head's, then the head's backward rows and each block's, last block first; in every
// mode (I's recompute reports nothing again).
class TapOrder final : public TensorObserver<float> {
 public:
  std::vector<std::string> seen;
  void activation(const std::string&, const MicroBatch&, CMat<float>) override {}
  void input_grad(const std::string&, const MicroBatch&, CMat<float>) override {}
  void kernel_output(const std::string& layer, const char* name, const MicroBatch&, CMat<float>) override {
    seen.push_back(layer + "/" + name);
  }
  bool wants_kernel_outputs() const override { return true; }
};

TEST(Recompute, KernelOutputsComeInTheTableOrderInEveryMode) {
  const ModelShape s = shape();
  std::vector<std::string> want;
  auto add = [&](const std::string& part, const std::vector<KernelOutput>& list) {
    for (const auto& k : list) want.push_back(part + "/" + k.name);
  };
  for (int l = 0; l < s.n_layer; ++l) add(block_name(l), block_forward_outputs());
  add("head", head_forward_outputs());
  add("head", head_backward_outputs());
  for (int l = s.n_layer - 1; l >= 0; --l) add(block_name(l), block_backward_outputs());
  for (Recompute r : {Recompute::none, Recompute::attention, Recompute::block}) {
    SCOPED_TRACE(to_string(r));
    SingleStage<float> model(s, Mode::deterministic, 7, r);
    TapOrder taps;
    model.stage.observe(&taps);
    const Batch b = test_batch(s, 2);
    auto in = model.inputs(b);
    const MicroBatch mb{0, 0, 2};
    model.stage.forward(mb, in, CMat<float>(), Mat<float>());
    model.stage.backward_input(mb, in, CMat<float>(), Mat<float>());
    model.stage.backward_weight(mb, in);
    EXPECT_EQ(taps.seen, want);
  }
}

}  // namespace
}  // namespace minipipe::testing
