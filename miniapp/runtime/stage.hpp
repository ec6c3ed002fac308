// A pipeline stage: a contiguous range of GPT-2 layers with its parameters, gradient
// accumulators, optimizer state and the activations it stores between F, I and W.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/gemm.hpp"
#include "kernels/grad_accum.hpp"
#include "kernels/optimizer.hpp"
#include "kernels/types.hpp"
#include "kernels/workspace.hpp"
#include "miniapp/model/data.hpp"
#include "miniapp/model/kernel_outputs.hpp"
#include "miniapp/model/model.hpp"
#include "miniapp/runtime/activation_store.hpp"
#include "miniapp/runtime/block.hpp"

namespace minipipe {

// The rows of one micro-batch: samples [sample0, sample0 + nsamples) of the global batch.
struct MicroBatch {
  int index = 0, sample0 = 0, nsamples = 0;
};

enum class OptimizerKind { adamw, sgd };
const char* to_string(OptimizerKind k);

struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::adamw;
  AdamWConfig adamw;
  SgdConfig sgd;
};

// Per-step inputs every stage may need (the global batch on the device and the loss scale) and
// where the last stage leaves each global sample's loss sum and valid-token count ([B], on the
// device: the owner copies them to the host once per step, not once per micro-batch).
template <class T>
struct StepInputs {
  Kokkos::View<int*, MemSpace> tokens, targets;  // (B*T) global batch
  long long global_valid_tokens = 0;
  Kokkos::View<double*, MemSpace> sample_loss;
  Kokkos::View<int*, MemSpace> sample_tokens;
};

// Fresh step inputs holding `b` on the device, with zeroed per-sample loss outputs (tools and
// tests; the trainer keeps its allocations across steps).
template <class T>
StepInputs<T> device_inputs(const Batch& b) {
  StepInputs<T> in;
  using HostInts = Kokkos::View<const int*, HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  in.tokens = Kokkos::View<int*, MemSpace>("StepInputs::tokens", b.tokens.size());
  in.targets = Kokkos::View<int*, MemSpace>("StepInputs::targets", b.targets.size());
  Kokkos::deep_copy(in.tokens, HostInts(b.tokens.data(), b.tokens.size()));
  Kokkos::deep_copy(in.targets, HostInts(b.targets.data(), b.targets.size()));
  in.global_valid_tokens = b.valid_tokens();
  in.sample_loss = Kokkos::View<double*, MemSpace>("StepInputs::sample_loss", static_cast<std::size_t>(b.B));
  in.sample_tokens = Kokkos::View<int*, MemSpace>("StepInputs::sample_tokens", static_cast<std::size_t>(b.B));
  return in;
}

// Sees a stage's boundary tensors as they are made: a layer name ("embedding", "layer_03",
// "lnf") and a (n*T, C) device tensor, produced on ExecSpace and not yet fenced.
template <class T>
class TensorObserver {
 public:
  virtual ~TensorObserver() = default;
  virtual void activation(const std::string& layer, const MicroBatch& mb, CMat<T> x) = 0;
  virtual void input_grad(const std::string& layer, const MicroBatch& mb, CMat<T> dx) = 0;
  // A kernel's output inside a block or the head: layer "layer_03" or "head", a name of
  // kernel_outputs.hpp (the kernel-level dump). Called only while wants_kernel_outputs().
  virtual void kernel_output(const std::string& /*layer*/, const char* /*name*/, const MicroBatch& /*mb*/,
                             CMat<T> /*x*/) {}
  virtual bool wants_kernel_outputs() const { return false; }
};

template <class T>
class Stage {
 public:
  Stage(const ModelShape& shape, const StageLayout& layout, int stage_id, Mode mode, std::uint64_t seed,
        Recompute recompute = Recompute::none);
  ~Stage();
  Stage(Stage&&) noexcept;

  int id() const { return id_; }
  // Which copy of the model this stage belongs to (DualPipe holds two with the same parameters;
  // dumps and checkpoints write copy 0's only).
  int copy() const { return copy_; }
  bool is_first() const { return first_; }
  bool is_last() const { return last_; }
  std::string describe() const;  // "stage 1: layer_02..layer_03"
  std::vector<Param<T>>& params() { return params_; }
  const std::vector<Param<T>>& params() const { return params_; }
  const ModelShape& shape() const { return shape_; }
  Recompute recompute() const { return acts_.recompute(); }
  // Between steps (nothing stored): later micro-batches keep what `r` says. Buffer sets are pooled
  // per mode and size; release_buffers (nothing stored) frees every pooled set.
  void set_recompute(Recompute r);
  void release_buffers();
  // Whether the last backward_weight was the step's last W and samples held back by the step's
  // earlier W's were waiting for it (begin_step's deferral): a cost the step pays once, there.
  bool last_w_added_held() const { return added_held_; }

  // F: x_in (n*T, C) is ignored on the first stage (it embeds tokens); y_out (n*T, C) is ignored
  // on the last stage (it computes the loss into in.sample_loss / in.sample_tokens).
  void forward(const MicroBatch& mb, const StepInputs<T>& in, CMat<T> x_in, Mat<T> y_out);
  // I: dy (n*T, C) is ignored on the last stage (the loss is the source); dx (n*T, C) is ignored
  // on the first stage. Keeps what W needs.
  void backward_input(const MicroBatch& mb, const StepInputs<T>& in, CMat<T> dy, Mat<T> dx);
  // W: parameter gradients of the micro-batch, added to the step's accumulators; frees its store.
  void backward_weight(const MicroBatch& mb, const StepInputs<T>& in);
  // B: I and W of the micro-batch. Fast mode runs them in one pass, each parameter gradient right
  // after the kernel that makes its dy (the head's, then each block's from the top with
  // Block::backward, the embedding's last), so its GEMM reads dy from cache, not memory;
  // deterministic mode runs backward_input then backward_weight. Either way the same kernels on the
  // same values, so the same bits: each accumulator's own additions keep their order.
  void backward(const MicroBatch& mb, const StepInputs<T>& in, CMat<T> dy, Mat<T> dx);

  void zero_grads();
  // After zero_grads: the step runs `microbatches` W actions on this stage; `ends_with_split_w`:
  // the last of them is a split W (the schedule's, not a B). On a stage that is the whole model,
  // or whose last is a split W, deterministic Linear weight gradients of its micro-batches are
  // then held back and added in groups (the last W of the step adds the rest), so the exact
  // accumulators are folded once per group, not per W. Elsewhere each W adds its micro-batch's:
  // extra work on a last B would delay the stage waiting for its input gradient.
  // With the step's samples [first_sample, first_sample + samples) given (and recompute none),
  // the blocks' Linear weight-gradient operands (the x and dy rows of their four Linear layers)
  // live in step-wide buffers, each micro-batch at its samples' rows, and those weights' samples
  // are held by reference instead of copied: in both modes (fast mode then runs one dW GEMM over
  // the step's rows at its last W, the chain it runs micro-batch by micro-batch).
  void begin_step(int microbatches, bool ends_with_split_w = false, int first_sample = 0, int samples = 0);
  // Whether anything reads the exact gradient sums between the step's last W and finalize_grads
  // (the data-parallel all-reduce, the sum of two model copies; the default, true). Off, the exact
  // weight GEMM call that adds all the step's samples to zero accumulators (each weight's one call
  // at one micro-batch; the held samples' one call where deterministic mode holds them) may store
  // the gradient's floats without its sums (GradAccum::words_unread).
  void set_sums_read(bool read) { sums_read_ = read; }
  // Gradients of the step into Param::grad (throws naming the parameter on accumulator overflow).
  // Every parameter's overflow flag is read back with one copy. Returns, in params() order, each
  // gradient's first non-finite element (checked while it is written).
  std::vector<NonFinite> finalize_grads();
  // One overflow flag per parameter, in params() order, in one device array (each GradAccum's
  // flag is an element of it): the data-parallel all-reduce combines them in one message.
  Kokkos::View<int*, MemSpace> overflow_flags() const { return flags_; }
  // Returns, in params() order, each updated parameter's first non-finite element.
  std::vector<NonFinite> optimizer_step(const OptimizerConfig& cfg, int step);

  // Stored micro-batches: forward done and W not yet done (in micro-batches and bytes). The bytes
  // are what F keeps plus, from I to W, what I recomputes and the gradients W consumes.
  int stored_microbatches() const { return acts_.size(); }
  std::size_t stored_bytes() const { return acts_.stored_bytes(); }
  // The most bytes stored at any moment of the last action (I and W of a B action hold the
  // recomputed values and gradients only inside the action, so stored_bytes() after it misses them).
  std::size_t action_peak_bytes() const { return action_peak_; }
  // Scratch shared by the stage's actions: its own buffers plus the kernels' workspace.
  std::size_t workspace_bytes() const;

  // Boundary tensors go to `observer` (nullptr: nobody watches); the caller owns it.
  void observe(TensorObserver<T>* observer) { observer_ = observer; }

 private:
  void check_stored(const MicroBatch& mb, const char* action) const;
  typename Block<T>::Call block_call(int n, const KernelTap<T>* k) { return {mode_, n, shape_, kernels_, k}; }
  void recompute(const MicroBatch& mb);  // I's first part: the values F did not keep
  // I, with each parameter gradient as soon as its operands are made when `weights` (backward).
  void backward_parts(const MicroBatch& mb, const StepInputs<T>& in, CMat<T> dy, Mat<T> dx, bool weights);
  // W's parts, shared by backward_weight and backward: what W notes before its first weight-gradient
  // kernel, the head's, block b's and the embedding's gradients, and W's end (the step's last W adds
  // what was held back; the micro-batch's store is freed).
  void begin_weight();
  void head_weight(const MicroBatch& mb);
  void block_weight(const MicroBatch& mb, int b);
  void embedding_weight(const MicroBatch& mb, const StepInputs<T>& in);
  void end_weight(const MicroBatch& mb);
  // Block b's activations of micro-batch mb: the store's, with the weight-gradient operands at the
  // micro-batch's rows of the step-wide buffers while they are on (begin_step).
  BlockActivations<T> block_acts(const MicroBatch& mb, int b) const;
  class Tap;
  // The tap of one part ("layer_03", "head") for an action: observes when `observe` and the
  // observer wants kernel outputs, and applies the test hook.
  Tap tap(const std::string& layer, const MicroBatch& mb, bool observe) const;
  Param<T>* find_param(std::string_view name);

  ModelShape shape_;
  int id_, first_layer_, num_layers_, copy_;
  bool first_, last_;
  Mode mode_;
  std::size_t action_peak_ = 0;
  int w_expected_ = 0, w_done_ = 0;  // W actions of the step (begin_step) and those run so far
  bool added_held_ = false;          // see last_w_added_held
  std::vector<Param<T>> params_;
  Kokkos::View<int*, MemSpace> flags_;                            // overflow flag per parameter
  typename Kokkos::View<int*, MemSpace>::HostMirror flags_host_;  // read once per step
  // Non-finite codes of the per-parameter checks (fast mode's gradients, the optimizer's update):
  // one device slot per parameter, read with one copy per call (read_param_codes).
  Kokkos::View<std::int64_t*, MemSpace> param_codes_;
  Kokkos::View<std::int64_t*, HostSpace> param_codes_host_;
  CodeSlot param_slot(std::size_t k);
  std::vector<NonFinite> read_param_codes();
  EmbeddingParams<T> embedding_;        // first stage only
  std::vector<BlockParams<T>> blocks_;  // one per block, in layer order
  HeadParams<T> head_;                  // last stage only
  TensorObserver<T>* observer_ = nullptr;
  std::vector<std::string> layer_names_;  // block_name of each block
  std::optional<Perturb> perturb_;        // MINIPIPE_TEST_PERTURB (kernel_outputs.hpp)
  ActivationStore<T> acts_;               // what F keeps for I and W, and what I remakes (recompute)
  KernelWorkspace kernels_;               // GEMM packing and dW buffers of the Linear kernels, shared by the actions
  // Per block, the step-wide rows of the Linear weight-gradient operands (see begin_step; only those
  // members are allocated), on while step_rows_on_, the step's first sample at row 0.
  std::vector<BlockActivations<T>> step_rows_;
  bool step_rows_on_ = false;
  int step_first_ = 0, step_samples_ = 0;
  bool sums_read_ = true;  // set_sums_read
};

}  // namespace minipipe
