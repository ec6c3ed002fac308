// A pipeline stage: a contiguous range of GPT-2 layers with its parameters, gradient
// accumulators, optimizer state and the activations it stores between F, I and W.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kernels/grad_accum.hpp"
#include "kernels/optimizer.hpp"
#include "kernels/types.hpp"
#include "model.hpp"

namespace minipipe {

template <class T>
struct Param {
  ParamSpec spec;
  View1<T> value, grad, m, v;  // m, v: optimizer state (AdamW moments or SGD momentum in m)
  GradAccum<T> acc;
};

// The rows of one micro-batch: samples [sample0, sample0 + nsamples) of the global batch.
struct MicroBatch {
  int index = 0, sample0 = 0, nsamples = 0;
};

struct OptimizerConfig {
  std::string kind = "adamw";  // adamw | sgd
  AdamWConfig adamw;
  SgdConfig sgd;
};

// Per-step inputs every stage may need: the global batch on the device and the loss scale.
template <class T>
struct StepInputs {
  Kokkos::View<int*, MemSpace> tokens, targets;  // (B*T) global batch
  long long global_valid_tokens = 0;
};

// Called with a layer name ("embedding", "layer_03", "lnf") and a (n*T, C) device tensor.
template <class T>
using TensorHook = std::function<void(const std::string& layer, const MicroBatch&, CMat<T>)>;
// Called on the last stage with per-sample loss sums and valid-token counts of a micro-batch.
using LossHook =
    std::function<void(const MicroBatch&, const std::vector<double>& loss_sum, const std::vector<int>& valid)>;

template <class T>
class Stage {
 public:
  Stage(const ModelShape& shape, const StageLayout& layout, int stage_id, Mode mode, std::uint64_t seed);
  ~Stage();
  Stage(Stage&&) noexcept;

  int id() const { return id_; }
  bool is_first() const { return first_; }
  bool is_last() const { return last_; }
  std::string describe() const;  // "stage 1: layer_02..layer_03"
  std::vector<Param<T>>& params() { return params_; }
  const ModelShape& shape() const { return shape_; }

  // F: x_in (n*T, C) is ignored on the first stage (it embeds tokens); y_out (n*T, C) is ignored
  // on the last stage (it computes the loss and calls on_loss).
  void forward(const MicroBatch& mb, const StepInputs<T>& in, CMat<T> x_in, Mat<T> y_out);
  // I: dy (n*T, C) is ignored on the last stage (the loss is the source); dx (n*T, C) is ignored
  // on the first stage. Keeps what W needs.
  void backward_input(const MicroBatch& mb, const StepInputs<T>& in, CMat<T> dy, Mat<T> dx);
  // W: parameter gradients of the micro-batch, added to the step's accumulators; frees its store.
  void backward_weight(const MicroBatch& mb, const StepInputs<T>& in);

  void zero_grads();
  // Gradients of the step into Param::grad (throws naming the parameter on accumulator overflow).
  void finalize_grads();
  void optimizer_step(const OptimizerConfig& cfg, int step);

  // Stored micro-batches: forward done and W not yet done (in micro-batches and bytes).
  int stored_microbatches() const { return static_cast<int>(store_.size()); }
  std::size_t stored_bytes() const;
  // Scratch shared by the stage's actions: its own buffers plus the kernels' workspace.
  std::size_t workspace_bytes() const;

  TensorHook<T> on_activation, on_input_grad;
  LossHook on_loss;

 private:
  struct Saved;
  struct Workspace;
  Saved& saved(const MicroBatch& mb, const char* action);

  ModelShape shape_;
  int id_, first_layer_, num_layers_;
  bool first_, last_;
  Mode mode_;
  std::vector<Param<T>> params_;
  std::map<int, std::unique_ptr<Saved>> store_;
  std::vector<std::unique_ptr<Saved>> pool_;  // freed stores kept for reuse
  std::unique_ptr<Workspace> ws_;             // scratch shared by the stage's actions
};

}  // namespace minipipe
