// Stage: forward, backward-input and backward-weight of its layers for one micro-batch: the
// embedding, the blocks (block.hpp) and the head, over the activations its ActivationStore holds.
#include "miniapp/runtime/stage.hpp"

#include <algorithm>
#include <sstream>
#include <stdexcept>

#include "kernels/cross_entropy.hpp"
#include "kernels/elementwise.hpp"
#include "kernels/embedding.hpp"
#include "kernels/layernorm.hpp"
#include "kernels/linear.hpp"

namespace minipipe {

namespace {
// On: the GEMMs of this step's micro-batches share one packed copy of p's weight per use
// (PackedB); off: the copies are dropped, as they must be before the weight can change.
template <class T>
void share_packed_weights(Param<T>& p, bool on) {
  if (on) {
    p.packed_fwd.enable();
    p.packed_bwd.enable();
  } else {
    p.packed_fwd.disable();
    p.packed_bwd.disable();
  }
}

template <class T>
CMat<T> cmat(const Param<T>& p) {
  return CMat<T>(p.value.data(), p.spec.shape[0], p.spec.shape[1]);
}
template <class T>
CVec<T> cvec(const View1<T>& v) {
  return CVec<T>(v.data(), v.extent(0));
}
template <class T>
CVec<T> flat(const View2<T>& v) {
  return CVec<T>(v.data(), v.size());
}
template <class T>
Vec<T> flat_mut(const View2<T>& v) {
  return Vec<T>(v.data(), v.size());
}
template <class T>
Mat<T> rows(const View2<T>& v, std::size_t n) {
  return Mat<T>(v.data(), n, v.extent(1));
}
const std::string kHead = "head";  // the head's name in the kernel-level dump
// The x and dy of the blocks' four Linear weight gradients (Block::backward_weight): what a held
// dW sample refers to.
constexpr BlockTensor kWeightOperands[] = {BlockTensor::gelu, BlockTensor::dout, BlockTensor::ln2,
                                           BlockTensor::d_fc, BlockTensor::atty, BlockTensor::d_res1,
                                           BlockTensor::ln1,  BlockTensor::d_qkv};
}  // namespace

// A stage's KernelTap: the test hook's one-ULP nudge on the micro-batch that holds global
// sample 0, then the observer's copy (so a dump shows the nudged value).
template <class T>
class Stage<T>::Tap final : public KernelTap<T> {
 public:
  Tap(const std::string& layer, const MicroBatch& mb, TensorObserver<T>* observer, const Perturb* perturb)
      : layer_(layer), mb_(mb), observer_(observer), perturb_(perturb && perturb->layer == layer ? perturb : nullptr) {}
  // Whether a call does anything (else the stage passes no tap at all).
  bool active() const { return observer_ || perturb_; }
  const KernelTap<T>* get() const { return active() ? this : nullptr; }
  // Row t of the head's table, under its name (a string literal, so it ends in NUL).
  void produced(const HeadActivations<T>& h, HeadTensor t) const { produced(row_of(t).name.data(), h[t]); }
  void produced(const char* name, const View2<T>& x) const override {
    if (perturb_ && mb_.sample0 == 0 && perturb_->name == name)
      Elementwise<T>::next_up_first(Vec<T>(x.data(), x.size()));
    if (observer_) observer_->kernel_output(layer_, name, mb_, x);
  }

 private:
  const std::string& layer_;
  const MicroBatch& mb_;
  TensorObserver<T>* observer_;
  const Perturb* perturb_;
};

template <class T>
typename Stage<T>::Tap Stage<T>::tap(const std::string& layer, const MicroBatch& mb, bool observe) const {
  TensorObserver<T>* o = observe && observer_ && observer_->wants_kernel_outputs() ? observer_ : nullptr;
  return Tap(layer, mb, o, perturb_ ? &*perturb_ : nullptr);
}

template <class T>
Stage<T>::Stage(const ModelShape& shape, const StageLayout& layout, int stage_id, Mode mode, std::uint64_t seed,
                Recompute recompute)
    : shape_(shape),
      id_(stage_id),
      first_layer_(layout.first.at(stage_id)),
      num_layers_(layout.count.at(stage_id)),
      copy_(layout.copy_of(stage_id)),
      first_(layout.is_first(stage_id)),
      last_(layout.is_last(stage_id)),
      mode_(mode),
      acts_(shape, num_layers_, first_, last_, recompute) {
  std::vector<ParamSpec> specs;
  if (first_) specs = embedding_params(shape);
  for (int l = first_layer_; l < first_layer_ + num_layers_; ++l) {
    auto b = block_params(shape, l);
    specs.insert(specs.end(), b.begin(), b.end());
  }
  if (last_) {
    auto h = head_params(shape);
    specs.insert(specs.end(), h.begin(), h.end());
  }
  flags_ = Kokkos::View<int*, MemSpace>("Stage::overflow_flags", specs.size());
  flags_host_ = Kokkos::create_mirror_view(flags_);
  for (auto& spec : specs) {
    Param<T> p;
    const std::size_t n = spec.numel();
    p.spec = spec;
    p.value = View1<T>("param::" + spec.name, n);
    p.grad = View1<T>("grad::" + spec.name, n);
    p.m = View1<T>("opt_m::" + spec.name, n);
    p.v = View1<T>("opt_v::" + spec.name, n);
    p.acc = GradAccum<T>(spec.name, n, mode, Kokkos::subview(flags_, params_.size()));
    p.acc.finalize_into(p.grad);  // the exact GEMM may store the gradient with its sums
    auto host = Kokkos::create_mirror_view(p.value);
    for (std::size_t i = 0; i < n; ++i) host(i) = static_cast<T>(init_value(seed, spec, i));
    Kokkos::deep_copy(p.value, host);
    params_.push_back(std::move(p));
  }
  // Resolve every part's parameters by global name (their tables' rows), after params_ stops growing.
  if (first_)
    for (std::size_t k = 0; k < kEmbeddingParams.size(); ++k) embedding_.at(k) = find_param(kEmbeddingParams[k].name);
  for (int l = first_layer_; l < first_layer_ + num_layers_; ++l) {
    BlockParams<T> b;
    for (std::size_t k = 0; k < kBlockParams.size(); ++k)
      b.at(k) = find_param(block_name(l) + "/" + std::string(kBlockParams[k].name));
    blocks_.push_back(b);
  }
  if (last_)
    for (std::size_t k = 0; k < kHeadParams.size(); ++k) head_.at(k) = find_param(kHeadParams[k].name);
  for (int l = first_layer_; l < first_layer_ + num_layers_; ++l) layer_names_.push_back(block_name(l));
  perturb_ = perturb_from_environment(shape.n_layer);
}

template <class T>
Param<T>* Stage<T>::find_param(std::string_view name) {
  for (auto& p : params_)
    if (p.spec.name == name) return &p;
  throw std::logic_error(describe() + ": the model description has no parameter '" + std::string(name) + "'");
}

const char* to_string(OptimizerKind k) {
  return k == OptimizerKind::adamw ? "adamw" : "sgd";
}

template <class T>
Stage<T>::~Stage() = default;
template <class T>
Stage<T>::Stage(Stage&&) noexcept = default;

template <class T>
std::string Stage<T>::describe() const {
  std::ostringstream os;
  os << "stage " << id_ << ":";
  if (first_) os << " embedding";
  if (num_layers_ > 0) os << " " << block_name(first_layer_) << ".." << block_name(first_layer_ + num_layers_ - 1);
  if (last_) os << " lnf+lm_head+loss";
  if (!first_ && !last_ && num_layers_ == 0) os << " (pass-through)";
  return os.str();
}

template <class T>
std::size_t Stage<T>::workspace_bytes() const {
  std::size_t scratch = 0;
  for (const auto& p : params_)
    scratch +=
        (p.acc.pending.x.size() + p.acc.pending.dy.size()) * sizeof(T) + p.packed_fwd.bytes() + p.packed_bwd.bytes();
  for (const auto& b : step_rows_)
    for (BlockTensor t : kWeightOperands) scratch += b[t].size() * sizeof(T);
  return acts_.scratch_bytes() + kernels_.bytes() + scratch;
}

template <class T>
BlockActivations<T> Stage<T>::block_acts(const MicroBatch& mb, int b) const {
  BlockActivations<T> a = acts_.block(mb.index, b);
  if (!step_rows_on_) return a;
  const int s0 = mb.sample0 - step_first_;
  if (s0 < 0 || s0 + mb.nsamples > step_samples_) {
    std::ostringstream os;
    os << describe() << ", micro-batch " << mb.index << ": samples [" << mb.sample0 << ", " << mb.sample0 + mb.nsamples
       << ") lie outside the step's [" << step_first_ << ", " << step_first_ + step_samples_ << ")";
    throw std::logic_error(os.str());
  }
  const std::size_t r0 = static_cast<std::size_t>(s0) * shape_.seq_len;
  const std::size_t rows = static_cast<std::size_t>(mb.nsamples) * shape_.seq_len;
  const BlockActivations<T>& all = step_rows_[static_cast<std::size_t>(b)];
  for (BlockTensor t : kWeightOperands) {
    const std::size_t cols = all[t].extent(1);
    a[t] = View2<T>(all[t].data() + r0 * cols, rows, cols);
  }
  return a;
}

template <class T>
void Stage<T>::check_stored(const MicroBatch& mb, const char* action) const {
  if (!acts_.holds(mb.index)) {
    std::ostringstream os;
    os << action << " on stage " << id_ << ", micro-batch " << mb.index
       << ": no stored forward activations (F of this micro-batch has not run on this stage)";
    throw std::logic_error(os.str());
  }
}

template <class T>
void Stage<T>::forward(const MicroBatch& mb, const StepInputs<T>& in, CMat<T> x_in, Mat<T> y_out) {
  if (acts_.holds(mb.index)) {
    std::ostringstream os;
    os << "F on stage " << id_ << ", micro-batch " << mb.index << " ran twice in one step";
    throw std::logic_error(os.str());
  }
  const int n = mb.nsamples, T_ = shape_.seq_len;
  const std::size_t N = static_cast<std::size_t>(n) * T_;
  acts_.begin_forward(mb.index, n);
  const CIdx tokens(in.tokens.data() + static_cast<std::size_t>(mb.sample0) * T_, N);
  const CIdx targets(in.targets.data() + static_cast<std::size_t>(mb.sample0) * T_, N);

  // Where the stage's running activation lives before the first block.
  const View2<T> stored_entry = acts_.entry(mb.index);
  const Mat<T> entry = stored_entry.data() ? rows(stored_entry, N) : y_out;
  if (first_) {
    Embedding<T>::forward(n, T_, tokens, cmat(*embedding_.wte), cmat(*embedding_.wpe), entry);
    if (observer_) observer_->activation("embedding", mb, entry);
  } else if (entry.data() != x_in.data()) {
    Kokkos::deep_copy(ExecSpace(), entry, x_in);
  }

  for (int b = 0; b < num_layers_; ++b) {
    const std::string& layer = layer_names_[static_cast<std::size_t>(b)];
    // The block's output: the next block's input, the head's input, or the stage's output.
    Mat<T> out =
        b + 1 < num_layers_ ? rows(block_acts(mb, b + 1).x_in, N) : (last_ ? rows(acts_.head(mb.index).x, N) : y_out);
    const Tap t = tap(layer, mb, true);
    Block<T>::forward(block_call(n, t.get()), blocks_[static_cast<std::size_t>(b)], block_acts(mb, b), out);
    if (observer_) observer_->activation(layer, mb, out);
  }

  if (last_) {
    const HeadParams<T>& h = head_;
    const HeadActivations<T> t = acts_.head(mb.index);
    LayerNorm<T>::forward(mode_, t.x, cvec(h.lnf_w->value), cvec(h.lnf_b->value), t.lnf, flat_mut(t.lnf_mean),
                          flat_mut(t.lnf_rstd));
    if (observer_) observer_->activation("lnf", mb, t.lnf);
    const Tap k = tap(kHead, mb, true);
    k.produced(t, HeadTensor::lnf_mean);
    k.produced(t, HeadTensor::lnf_rstd);
    Linear<T>::forward(mode_, t.lnf, cmat(*h.lm_head_w), CVec<T>(), t.logits, kernels_, &h.lm_head_w->packed_fwd);
    k.produced(t, HeadTensor::logits);
    CrossEntropy<T>::forward(mode_, t.logits, targets, flat_mut(t.losses));
    k.produced(t, HeadTensor::losses);
    const std::size_t s0 = static_cast<std::size_t>(mb.sample0), s1 = s0 + static_cast<std::size_t>(n);
    if (in.sample_loss.extent(0) < s1 || in.sample_tokens.extent(0) < s1)
      throw std::logic_error("F on the last stage " + std::to_string(id_) + ", micro-batch " +
                             std::to_string(mb.index) + ": the per-sample loss outputs hold " +
                             std::to_string(in.sample_loss.extent(0)) + " samples, need " + std::to_string(s1));
    CrossEntropy<T>::sample_sums(n, T_, flat(t.losses), targets,
                                 Kokkos::subview(in.sample_loss, std::make_pair(s0, s1)),
                                 Kokkos::subview(in.sample_tokens, std::make_pair(s0, s1)));
  }
  acts_.end_forward(mb.index);
  action_peak_ = stored_bytes();
}

// I's first part under recompute: the forward values F did not keep, remade from what it kept
// with the kernels F ran (so with F's bits), into the I -> W set: attention's probabilities and
// output (attention), or each block up to its MLP activation and the head's LayerNorm and logits
// (block). Observers see nothing: F already reported them.
template <class T>
void Stage<T>::recompute(const MicroBatch& mb) {
  ProfileRegion region("Stage::recompute");
  const Recompute r = acts_.recompute();
  for (int b = 0; b < num_layers_; ++b) {
    const BlockActivations<T> a = block_acts(mb, b);
    const Tap t = tap(layer_names_[static_cast<std::size_t>(b)], mb, false);  // the test hook acts again
    if (r == Recompute::attention)
      Block<T>::forward_attention(block_call(mb.nsamples, t.get()), a);
    else
      Block<T>::forward_saved(block_call(mb.nsamples, t.get()), blocks_[static_cast<std::size_t>(b)], a);
  }
  if (last_ && r == Recompute::block) {
    const HeadActivations<T> t = acts_.head(mb.index);
    const Tap k = tap(kHead, mb, false);
    LayerNorm<T>::forward(mode_, t.x, cvec(head_.lnf_w->value), cvec(head_.lnf_b->value), t.lnf, flat_mut(t.lnf_mean),
                          flat_mut(t.lnf_rstd));
    k.produced(t, HeadTensor::lnf_mean);
    k.produced(t, HeadTensor::lnf_rstd);
    Linear<T>::forward(mode_, t.lnf, cmat(*head_.lm_head_w), CVec<T>(), t.logits, kernels_,
                       &head_.lm_head_w->packed_fwd);
    k.produced(t, HeadTensor::logits);
  }
}

template <class T>
void Stage<T>::backward_input(const MicroBatch& mb, const StepInputs<T>& in, CMat<T> dy, Mat<T> dx) {
  backward_parts(mb, in, dy, dx, false);
}

template <class T>
void Stage<T>::backward(const MicroBatch& mb, const StepInputs<T>& in, CMat<T> dy, Mat<T> dx) {
  if (mode_ == Mode::fast) {
    backward_parts(mb, in, dy, dx, true);
    return;
  }
  // Deterministic mode keeps I then W: interleaved, its exact dW kernels (whose cost is their limbs
  // and folds, not reading dy) made the B action no faster and measured up to 2% slower.
  backward_input(mb, in, dy, dx);
  backward_weight(mb, in);
}

template <class T>
void Stage<T>::backward_parts(const MicroBatch& mb, const StepInputs<T>& in, CMat<T> dy, Mat<T> dx, bool weights) {
  check_stored(mb, "I");
  if (acts_.backward_done(mb.index)) {
    std::ostringstream os;
    os << "I on stage " << id_ << ", micro-batch " << mb.index << " ran twice in one step";
    throw std::logic_error(os.str());
  }
  const int n = mb.nsamples, T_ = shape_.seq_len;
  const std::size_t N = static_cast<std::size_t>(n) * T_;
  if (weights) begin_weight();
  acts_.begin_backward(mb.index);
  if (acts_.recompute() != Recompute::none) recompute(mb);
  const CIdx targets(in.targets.data() + static_cast<std::size_t>(mb.sample0) * T_, N);
  auto cv = [](const View2<T>& x) { return CVec<T>(x.data(), x.size()); };

  // Where the gradient flowing out of the stage's layers goes (input of the stage).
  auto exit_grad = [&]() -> Mat<T> { return first_ ? rows(acts_.embedding_grad(mb.index), N) : dx; };
  // Gradient arriving at the top of the blocks.
  Mat<T> top = num_layers_ > 0 ? rows(block_acts(mb, num_layers_ - 1).dout, N) : exit_grad();

  if (last_) {
    const HeadActivations<T> t = acts_.head(mb.index);
    const T scale = static_cast<T>(1.0 / static_cast<double>(in.global_valid_tokens));
    const Tap k = tap(kHead, mb, true);
    CrossEntropy<T>::backward_input(mode_, t.logits, targets, scale, t.dlogits);
    k.produced(t, HeadTensor::dlogits);
    Linear<T>::backward_input(mode_, t.dlogits, cmat(*head_.lm_head_w), t.d_lnf, kernels_,
                              &head_.lm_head_w->packed_bwd);
    k.produced(t, HeadTensor::d_lnf);
    LayerNorm<T>::backward_input(mode_, t.x, cvec(head_.lnf_w->value), cv(t.lnf_mean), cv(t.lnf_rstd), t.d_lnf, top);
    if (observer_) observer_->input_grad("lnf", mb, top);
    if (weights) head_weight(mb);
  } else if (top.data() != dy.data()) {
    Kokkos::deep_copy(ExecSpace(), top, dy);
  }

  for (int b = num_layers_ - 1; b >= 0; --b) {
    const std::string& layer = layer_names_[static_cast<std::size_t>(b)];
    // The gradient of the block's input: the previous block's dout or the stage's exit.
    Mat<T> out = b > 0 ? rows(block_acts(mb, b - 1).dout, N) : exit_grad();
    const Tap t = tap(layer, mb, true);
    if (weights)
      Block<T>::backward(block_call(n, t.get()), blocks_[static_cast<std::size_t>(b)], block_acts(mb, b), out);
    else
      Block<T>::backward_input(block_call(n, t.get()), blocks_[static_cast<std::size_t>(b)], block_acts(mb, b), out);
    if (observer_) observer_->input_grad(layer, mb, out);
  }
  acts_.end_backward(mb.index);
  action_peak_ = stored_bytes();
  if (!weights) return;
  if (first_) embedding_weight(mb, in);
  end_weight(mb);
}

template <class T>
void Stage<T>::backward_weight(const MicroBatch& mb, const StepInputs<T>& in) {
  check_stored(mb, "W");
  if (!acts_.backward_done(mb.index)) {
    std::ostringstream os;
    os << "W on stage " << id_ << ", micro-batch " << mb.index << " ran before its I";
    throw std::logic_error(os.str());
  }
  action_peak_ = stored_bytes();
  begin_weight();
  if (last_) head_weight(mb);
  for (int b = num_layers_ - 1; b >= 0; --b) block_weight(mb, b);
  if (first_) embedding_weight(mb, in);
  end_weight(mb);
}

template <class T>
void Stage<T>::begin_weight() {
  // The step's last W adds what earlier W's held back (in its Linear calls when this one fills a
  // group, else in end_weight's flush): read before any of its Linear calls adds or holds.
  added_held_ = w_expected_ > 0 && w_done_ + 1 == w_expected_ &&
                std::any_of(params_.begin(), params_.end(), [](const Param<T>& p) { return p.acc.pending.count > 0; });
}

template <class T>
void Stage<T>::head_weight(const MicroBatch& mb) {
  const HeadActivations<T> t = acts_.head(mb.index);
  auto cv = [](const View2<T>& x) { return CVec<T>(x.data(), x.size()); };
  const int T_ = shape_.seq_len;
  Linear<T>::backward_weight(mode_, t.lnf, t.dlogits, T_, head_.lm_head_w->acc, nullptr, kernels_);
  LayerNorm<T>::backward_weight(mode_, t.x, cv(t.lnf_mean), cv(t.lnf_rstd), t.d_lnf, T_, head_.lnf_w->acc,
                                head_.lnf_b->acc);
}

template <class T>
void Stage<T>::block_weight(const MicroBatch& mb, int b) {
  Block<T>::backward_weight(block_call(mb.nsamples, nullptr), blocks_[static_cast<std::size_t>(b)], block_acts(mb, b));
}

template <class T>
void Stage<T>::embedding_weight(const MicroBatch& mb, const StepInputs<T>& in) {
  const int T_ = shape_.seq_len;
  const CIdx tokens(in.tokens.data() + static_cast<std::size_t>(mb.sample0) * T_,
                    static_cast<std::size_t>(mb.nsamples) * T_);
  Embedding<T>::backward_weight(mode_, mb.nsamples, T_, tokens, acts_.embedding_grad(mb.index), embedding_.wte->acc,
                                embedding_.wpe->acc);
}

template <class T>
void Stage<T>::end_weight(const MicroBatch& mb) {
  if (w_expected_ > 0 && ++w_done_ == w_expected_)
    for (auto& p : params_) Linear<T>::flush_weight(p.acc, kernels_);
  acts_.release(mb.index);
}

template <class T>
void Stage<T>::zero_grads() {
  Kokkos::deep_copy(ExecSpace(), flags_, 0);  // ordered with the step's kernels, no host wait
  w_expected_ = w_done_ = 0;
  step_rows_on_ = false;
  for (auto& p : params_) {
    p.acc.zero_values();
    p.acc.defer_weight_samples(false);
    share_packed_weights(p, false);
  }
}

template <class T>
void Stage<T>::set_recompute(Recompute r) {
  if (acts_.size() != 0)
    throw std::logic_error(describe() + ": recompute mode changed with " + std::to_string(acts_.size()) +
                           " micro-batch(es) stored");
  acts_.set_recompute(r);
}

template <class T>
void Stage<T>::release_buffers() {
  if (acts_.size() != 0)
    throw std::logic_error(describe() + ": buffers released with " + std::to_string(acts_.size()) +
                           " micro-batch(es) stored");
  acts_.release_buffers();
}

template <class T>
void Stage<T>::begin_step(int microbatches, bool ends_with_split_w, int first_sample, int samples) {
  w_expected_ = microbatches;
  w_done_ = 0;
  // With several micro-batches the weights of this step are packed once for the GEMMs of all of
  // them (both modes: see Linear); they stay fixed until finalize_grads, which drops the packed
  // copies. Deterministic mode holds dW samples back for fewer exact folds (docs/design.md §4
  // rule 2) only where the tail this puts on the step's last W delays no other stage: where the
  // whole model is this one stage, or where that last W is a split W, which nothing consumes. A
  // last B's tail would delay the stage waiting for its input gradient (or end the step late).
  const bool share = microbatches > 1;
  const bool tail_free = share && ((first_ && last_) || ends_with_split_w);
  const bool hold = tail_free && mode_ == Mode::deterministic;
  for (auto& p : params_) {
    p.acc.defer_weight_samples(hold);
    share_packed_weights(p, share);
    // Nothing else reads the sums: the exact GEMM call that adds all the step's samples to zero
    // accumulators (the one call at m = 1, the held samples' one call where they are held) may
    // store the gradient's floats alone.
    if (!sums_read_ && microbatches == 1) p.acc.words_unread();
    if (!sums_read_ && hold && samples > 0) p.acc.words_unread(samples);
  }
  // The blocks' Linear weights hold their samples by reference in the step-wide operand rows:
  // where deterministic mode holds them, and in fast mode on a stage that is the whole model (its
  // per-micro-batch dW GEMMs gain nothing from a pipeline's bubbles there, and one GEMM over the
  // step's rows reads and writes the sums once instead of once per micro-batch).
  step_rows_on_ = (mode_ == Mode::deterministic ? hold : share && first_ && last_) && samples > 0 && num_layers_ > 0 &&
                  acts_.recompute() == Recompute::none;
  if (!step_rows_on_) return;
  step_first_ = first_sample;
  step_samples_ = samples;
  const std::size_t rows = static_cast<std::size_t>(samples) * shape_.seq_len;
  step_rows_.resize(static_cast<std::size_t>(num_layers_));
  for (auto& b : step_rows_)
    for (BlockTensor t : kWeightOperands)
      if (b[t].extent(0) < rows) {
        const std::size_t cols = tensor_extent(row_of(t).shape, shape_, 1).second;
        b[t] = View2<T>(
            Kokkos::view_alloc("Stage::step_rows::" + std::string(row_of(t).name), Kokkos::WithoutInitializing), rows,
            cols);
      }
  for (auto& blk : blocks_) {
    Param<T>* const weights[] = {blk.qkv_w, blk.attn_proj_w, blk.fc_w, blk.fc_proj_w};  // nvcc: no braced range
    for (Param<T>* w : weights) w->acc.defer_weight_samples(true, true);
  }
}

template <class T>
std::vector<NonFinite> Stage<T>::finalize_grads() {
  if (acts_.size() != 0) {
    std::ostringstream os;
    os << "stage " << id_ << ": step ended with " << acts_.size()
       << " micro-batch(es) whose W never ran (first: micro-batch " << acts_.first_stored() << ")";
    throw std::logic_error(os.str());
  }
  blocking_copy(flags_host_, flags_);
  for (std::size_t k = 0; k < params_.size(); ++k)
    if (flags_host_(k)) params_[k].acc.throw_overflow();
  for (std::size_t k = 0; k < params_.size(); ++k) {
    const CodeSlot slot = param_slot(k);
    params_[k].acc.finalize_unchecked(params_[k].grad, &slot);
    share_packed_weights(params_[k], false);  // the optimizer is next to change the weights
  }
  // deterministic mode's gradients need no check (the overflow flags stand for it)
  return mode_ == Mode::fast ? read_param_codes() : std::vector<NonFinite>(params_.size());
}

template <class T>
CodeSlot Stage<T>::param_slot(std::size_t k) {
  if (param_codes_.extent(0) < params_.size()) {
    param_codes_ = Kokkos::View<std::int64_t*, MemSpace>("Stage::param_codes", params_.size());
    param_codes_host_ = Kokkos::View<std::int64_t*, HostSpace>("Stage::param_codes_host", params_.size());
  }
  return CodeSlot{param_codes_, k};
}

template <class T>
std::vector<NonFinite> Stage<T>::read_param_codes() {
  std::vector<NonFinite> bad(params_.size());
  if (params_.empty()) return bad;
  blocking_copy(param_codes_host_, param_codes_);
  for (std::size_t k = 0; k < params_.size(); ++k) bad[k] = decode_non_finite(param_codes_host_(k));
  return bad;
}

template <class T>
std::vector<NonFinite> Stage<T>::optimizer_step(const OptimizerConfig& cfg, int step) {
  for (std::size_t k = 0; k < params_.size(); ++k) {
    Param<T>& p = params_[k];
    share_packed_weights(p, false);  // also when no finalize_grads ran first
    const CodeSlot slot = param_slot(k);
    switch (cfg.kind) {
      case OptimizerKind::adamw:
        AdamW<T>::update(cfg.adamw, step, p.spec.decay, p.value, cvec(p.grad), p.m, p.v, &slot);
        break;
      case OptimizerKind::sgd:
        Sgd<T>::update(cfg.sgd, p.spec.decay, p.value, cvec(p.grad), p.m, &slot);
        break;
    }
  }
  return read_param_codes();
}

template class Stage<float>;
template class Stage<double>;

}  // namespace minipipe
