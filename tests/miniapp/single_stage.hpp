// Test helper: the whole model as one Stage driven by hand (no MPI), with any micro-batch split
// and any order of the W calls, so tests can compare splits bit for bit.
#pragma once

#include <algorithm>
#include <vector>

#include "kernels/cross_entropy.hpp"
#include "miniapp/model/data.hpp"
#include "miniapp/runtime/stage.hpp"
#include "miniapp/runtime/trainer.hpp"

namespace minipipe::testing {

inline ModelShape tiny_shape() {
  ModelShape s;
  s.vocab = 16;
  s.seq_len = 6;
  s.block_size = 8;
  s.channels = 8;
  s.n_head = 2;
  s.n_layer = 2;
  return s;
}

template <class T>
struct SingleStage {
  ModelShape shape;
  StageLayout layout;
  Stage<T> stage;

  SingleStage(const ModelShape& s, Mode mode, std::uint64_t seed = 7, Recompute recompute = Recompute::none)
      : shape(s), layout(make_stage_layout(s.n_layer, 1, {})), stage(s, layout, 0, mode, seed, recompute) {}

  StepInputs<T> inputs(const Batch& b) const { return device_inputs<T>(b); }

  // The trainer's exact global loss from the per-sample sums the last stage left on the device.
  static double loss_of(const StepInputs<T>& in) {
    auto sums = Kokkos::create_mirror_view_and_copy(HostSpace(), in.sample_loss);
    auto counts = Kokkos::create_mirror_view_and_copy(HostSpace(), in.sample_tokens);
    return global_loss(std::vector<double>(sums.data(), sums.data() + sums.extent(0)),
                       std::vector<int>(counts.data(), counts.data() + counts.extent(0)));
  }

  // Forward only; returns the global loss (the trainer's exact sum of per-sample sums over the
  // valid tokens).
  double loss(const Batch& b) {
    auto in = inputs(b);
    MicroBatch mb{0, 0, b.B};
    stage.forward(mb, in, CMat<T>(), Mat<T>());
    // Drop the stored activations: run I and W into scratch accumulators.
    stage.backward_input(mb, in, CMat<T>(), Mat<T>());
    stage.backward_weight(mb, in);
    stage.zero_grads();
    return loss_of(in);
  }

  // One step: F and I per micro-batch in order, then the W calls in `w_order` (indices into the
  // split), then finalize; optionally the optimizer. Returns the loss.
  double step(const Batch& b, int m, bool reverse_w, const OptimizerConfig* opt = nullptr, int step_no = 1) {
    auto in = inputs(b);
    stage.zero_grads();
    auto mbs = split_batch(b.B, m);
    for (const auto& mb : mbs) stage.forward(mb, in, CMat<T>(), Mat<T>());
    for (const auto& mb : mbs) stage.backward_input(mb, in, CMat<T>(), Mat<T>());
    if (reverse_w) std::reverse(mbs.begin(), mbs.end());
    for (const auto& mb : mbs) stage.backward_weight(mb, in);
    stage.finalize_grads();
    if (opt) stage.optimizer_step(*opt, step_no);
    return loss_of(in);
  }

  // All gradients (or parameter values) concatenated on the host, in parameter order.
  std::vector<T> gather(bool grads) {
    std::vector<T> out;
    for (auto& p : stage.params()) {
      auto h = Kokkos::create_mirror_view_and_copy(HostSpace(), grads ? p.grad : p.value);
      out.insert(out.end(), h.data(), h.data() + h.extent(0));
    }
    return out;
  }
};

// A batch with varied lengths and padding, from the synthetic corpus.
inline Batch test_batch(const ModelShape& s, int B, int step = 0) {
  Deck d;
  d.set_from_text("train.seed", "99");
  d.set_from_text("data.min_len", "2");
  d.set_from_text("model.vocab", std::to_string(s.vocab));
  d.set_from_text("model.seq_len", std::to_string(s.seq_len));
  DataSource src(d, s);
  return src.batch(step, B);
}

}  // namespace minipipe::testing
