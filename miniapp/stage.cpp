// Stage: forward, backward-input and backward-weight of its layers for one micro-batch.
// Block math follows GPT-2 pre-LN; what W needs is kept in a per-micro-batch store until W runs.
#include "stage.hpp"

#include <sstream>
#include <stdexcept>

#include "kernels/attention.hpp"
#include "kernels/cross_entropy.hpp"
#include "kernels/elementwise.hpp"
#include "kernels/embedding.hpp"
#include "kernels/gelu.hpp"
#include "kernels/layernorm.hpp"
#include "kernels/linear.hpp"

namespace minipipe {

namespace {
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
}  // namespace

template <class T>
struct Stage<T>::Saved {
  struct Block {
    // Forward values kept for I and W.  All (N, .) with N = n*T rows.
    View2<T> x_in, ln1, qkv, att, atty, res1, ln2, fc, gelu;  // (N,C) (N,C) (N,3C) (n*H*T,T) ... (N,4C)
    View1<T> mean1, rstd1, mean2, rstd2;                      // (N)
    // Gradients made by I and consumed by W.
    View2<T> dout, d_res1, d_qkv, d_ln1, d_fc, d_ln2;
  };
  int n = 0;
  bool input_grad_done = false;
  std::vector<Block> blocks;
  View2<T> emb_dout;                          // (N,C) first stage
  View2<T> h_x, lnf, logits, dlogits, d_lnf;  // head: (N,C) (N,C) (N,V) (N,V) (N,C)
  View1<T> h_mean, h_rstd, losses;            // (N)
  std::size_t bytes = 0;

  Saved(const ModelShape& s, int n_samples, int num_blocks, bool first, bool last) : n(n_samples) {
    const std::size_t N = static_cast<std::size_t>(n) * s.seq_len, C = s.channels, Tl = s.seq_len;
    auto m2 = [&](const char* name, std::size_t r, std::size_t c) {
      bytes += r * c * sizeof(T);
      return View2<T>(Kokkos::view_alloc(std::string("Stage::saved::") + name, Kokkos::WithoutInitializing), r, c);
    };
    auto m1 = [&](const char* name, std::size_t r) {
      bytes += r * sizeof(T);
      return View1<T>(Kokkos::view_alloc(std::string("Stage::saved::") + name, Kokkos::WithoutInitializing), r);
    };
    for (int b = 0; b < num_blocks; ++b) {
      Block k;
      k.x_in = m2("x_in", N, C);
      k.ln1 = m2("ln1", N, C);
      k.qkv = m2("qkv", N, 3 * C);
      k.att = m2("att", static_cast<std::size_t>(n) * s.n_head * Tl, Tl);
      k.atty = m2("atty", N, C);
      k.res1 = m2("res1", N, C);
      k.ln2 = m2("ln2", N, C);
      k.fc = m2("fc", N, 4 * C);
      k.gelu = m2("gelu", N, 4 * C);
      k.mean1 = m1("mean1", N);
      k.rstd1 = m1("rstd1", N);
      k.mean2 = m1("mean2", N);
      k.rstd2 = m1("rstd2", N);
      k.dout = m2("dout", N, C);
      k.d_res1 = m2("d_res1", N, C);
      k.d_qkv = m2("d_qkv", N, 3 * C);
      k.d_ln1 = m2("d_ln1", N, C);
      k.d_fc = m2("d_fc", N, 4 * C);
      k.d_ln2 = m2("d_ln2", N, C);
      blocks.push_back(k);
    }
    if (first) emb_dout = m2("emb_dout", N, C);
    if (last) {
      h_x = m2("h_x", N, C);
      lnf = m2("lnf", N, C);
      logits = m2("logits", N, s.vocab);
      dlogits = m2("dlogits", N, s.vocab);
      d_lnf = m2("d_lnf", N, C);
      h_mean = m1("h_mean", N);
      h_rstd = m1("h_rstd", N);
      losses = m1("losses", N);
    }
  }
};

// Scratch buffers shared by all micro-batches of a stage (not kept between actions).
template <class T>
struct Stage<T>::Workspace {
  View2<T> c1, c2, d4;
  KernelWorkspace kernels;  // GEMM packing and dW buffers of the Linear kernels
  std::size_t rows = 0;
  void ensure(std::size_t N, std::size_t C) {
    if (N <= rows) return;
    rows = N;
    c1 = View2<T>(Kokkos::view_alloc("Stage::ws::c1", Kokkos::WithoutInitializing), N, C);
    c2 = View2<T>(Kokkos::view_alloc("Stage::ws::c2", Kokkos::WithoutInitializing), N, C);
    d4 = View2<T>(Kokkos::view_alloc("Stage::ws::d4", Kokkos::WithoutInitializing), N, 4 * C);
  }
};

template <class T>
Stage<T>::Stage(const ModelShape& shape, const StageLayout& layout, int stage_id, Mode mode, std::uint64_t seed)
    : shape_(shape),
      id_(stage_id),
      first_layer_(layout.first.at(stage_id)),
      num_layers_(layout.count.at(stage_id)),
      first_(stage_id == 0),
      last_(stage_id == layout.num_stages() - 1),
      mode_(mode),
      ws_(std::make_unique<Workspace>()) {
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
    auto host = Kokkos::create_mirror_view(p.value);
    for (std::size_t i = 0; i < n; ++i) host(i) = static_cast<T>(init_value(seed, spec, i));
    Kokkos::deep_copy(p.value, host);
    params_.push_back(std::move(p));
  }
  // Resolve every part's parameters by global name, after params_ stops growing.
  if (first_) embedding_ = {find_param("wte"), find_param("wpe")};
  for (int l = first_layer_; l < first_layer_ + num_layers_; ++l) {
    const std::string b = block_name(l) + "/";
    blocks_.push_back({find_param(b + "ln1_w"), find_param(b + "ln1_b"), find_param(b + "qkv_w"),
                       find_param(b + "qkv_b"), find_param(b + "attn_proj_w"), find_param(b + "attn_proj_b"),
                       find_param(b + "ln2_w"), find_param(b + "ln2_b"), find_param(b + "fc_w"), find_param(b + "fc_b"),
                       find_param(b + "fc_proj_w"), find_param(b + "fc_proj_b")});
  }
  if (last_) head_ = {find_param("lnf_w"), find_param("lnf_b"), find_param("lm_head_w")};
}

template <class T>
Param<T>* Stage<T>::find_param(const std::string& name) {
  for (auto& p : params_)
    if (p.spec.name == name) return &p;
  throw std::logic_error(describe() + ": the model description has no parameter '" + name + "'");
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
std::size_t Stage<T>::stored_bytes() const {
  std::size_t b = 0;
  for (const auto& kv : store_) b += kv.second->bytes;
  return b;
}

template <class T>
std::size_t Stage<T>::workspace_bytes() const {
  const auto& w = *ws_;
  return (w.c1.size() + w.c2.size() + w.d4.size()) * sizeof(T) + w.kernels.bytes();
}

template <class T>
typename Stage<T>::Saved& Stage<T>::saved(const MicroBatch& mb, const char* action) {
  auto it = store_.find(mb.index);
  if (it == store_.end()) {
    std::ostringstream os;
    os << action << " on stage " << id_ << ", micro-batch " << mb.index
       << ": no stored forward activations (F of this micro-batch has not run on this stage)";
    throw std::logic_error(os.str());
  }
  return *it->second;
}

template <class T>
void Stage<T>::forward(const MicroBatch& mb, const StepInputs<T>& in, CMat<T> x_in, Mat<T> y_out) {
  if (store_.count(mb.index)) {
    std::ostringstream os;
    os << "F on stage " << id_ << ", micro-batch " << mb.index << " ran twice in one step";
    throw std::logic_error(os.str());
  }
  const int n = mb.nsamples, T_ = shape_.seq_len, C = shape_.channels, H = shape_.n_head;
  const std::size_t N = static_cast<std::size_t>(n) * T_;
  std::unique_ptr<Saved> sp;
  for (auto it = pool_.begin(); it != pool_.end(); ++it)
    if ((*it)->n == n) {
      sp = std::move(*it);
      pool_.erase(it);
      break;
    }
  if (!sp) sp = std::make_unique<Saved>(shape_, n, num_layers_, first_, last_);
  Saved& s = *sp;
  s.input_grad_done = false;
  auto& ws = *ws_;
  ws.ensure(N, C);
  const CIdx tokens(in.tokens.data() + static_cast<std::size_t>(mb.sample0) * T_, N);
  const CIdx targets(in.targets.data() + static_cast<std::size_t>(mb.sample0) * T_, N);

  // Where the stage's running activation lives before the first block.
  auto entry = [&]() -> Mat<T> {
    if (num_layers_ > 0) return rows(s.blocks[0].x_in, N);
    if (last_) return rows(s.h_x, N);
    return y_out;
  }();
  if (first_) {
    Embedding<T>::forward(n, T_, tokens, cmat(*embedding_.wte), cmat(*embedding_.wpe), entry);
    if (observer_) observer_->activation("embedding", mb, entry);
  } else if (entry.data() != x_in.data()) {
    Kokkos::deep_copy(entry, x_in);
  }

  for (int b = 0; b < num_layers_; ++b) {
    auto& k = s.blocks[b];
    const BlockParams<T>& P = blocks_[static_cast<std::size_t>(b)];
    LayerNorm<T>::forward(mode_, k.x_in, cvec(P.ln1_w->value), cvec(P.ln1_b->value), k.ln1, k.mean1, k.rstd1);
    Linear<T>::forward(mode_, k.ln1, cmat(*P.qkv_w), cvec(P.qkv_b->value), k.qkv, ws.kernels);
    Attention<T>::forward(mode_, n, T_, C, H, k.qkv, k.att, k.atty);
    auto tmp = rows(ws.c1, N);
    Linear<T>::forward(mode_, k.atty, cmat(*P.attn_proj_w), cvec(P.attn_proj_b->value), tmp, ws.kernels);
    Elementwise<T>::add(flat(k.x_in), CVec<T>(tmp.data(), tmp.size()), flat_mut(k.res1));
    LayerNorm<T>::forward(mode_, k.res1, cvec(P.ln2_w->value), cvec(P.ln2_b->value), k.ln2, k.mean2, k.rstd2);
    Linear<T>::forward(mode_, k.ln2, cmat(*P.fc_w), cvec(P.fc_b->value), k.fc, ws.kernels);
    Gelu<T>::forward(mode_, flat(k.fc), flat_mut(k.gelu));
    Linear<T>::forward(mode_, k.gelu, cmat(*P.fc_proj_w), cvec(P.fc_proj_b->value), tmp, ws.kernels);
    Mat<T> out = b + 1 < num_layers_ ? rows(s.blocks[b + 1].x_in, N) : (last_ ? rows(s.h_x, N) : y_out);
    Elementwise<T>::add(flat(k.res1), CVec<T>(tmp.data(), tmp.size()), Vec<T>(out.data(), out.size()));
    if (observer_) observer_->activation(block_name(first_layer_ + b), mb, out);
  }

  if (last_) {
    const HeadParams<T>& h = head_;
    LayerNorm<T>::forward(mode_, s.h_x, cvec(h.lnf_w->value), cvec(h.lnf_b->value), s.lnf, s.h_mean, s.h_rstd);
    if (observer_) observer_->activation("lnf", mb, s.lnf);
    Linear<T>::forward(mode_, s.lnf, cmat(*h.lm_head_w), CVec<T>(), s.logits, ws.kernels);
    CrossEntropy<T>::forward(mode_, s.logits, targets, s.losses);
    const std::size_t s0 = static_cast<std::size_t>(mb.sample0), s1 = s0 + static_cast<std::size_t>(n);
    if (in.sample_loss.extent(0) < s1 || in.sample_tokens.extent(0) < s1)
      throw std::logic_error("F on the last stage " + std::to_string(id_) + ", micro-batch " +
                             std::to_string(mb.index) + ": the per-sample loss outputs hold " +
                             std::to_string(in.sample_loss.extent(0)) + " samples, need " + std::to_string(s1));
    CrossEntropy<T>::sample_sums(n, T_, cvec(s.losses), targets,
                                 Kokkos::subview(in.sample_loss, std::make_pair(s0, s1)),
                                 Kokkos::subview(in.sample_tokens, std::make_pair(s0, s1)));
  }
  store_[mb.index] = std::move(sp);
}

template <class T>
void Stage<T>::backward_input(const MicroBatch& mb, const StepInputs<T>& in, CMat<T> dy, Mat<T> dx) {
  Saved& s = saved(mb, "I");
  if (s.input_grad_done) {
    std::ostringstream os;
    os << "I on stage " << id_ << ", micro-batch " << mb.index << " ran twice in one step";
    throw std::logic_error(os.str());
  }
  const int n = mb.nsamples, T_ = shape_.seq_len, C = shape_.channels, H = shape_.n_head;
  const std::size_t N = static_cast<std::size_t>(n) * T_;
  auto& ws = *ws_;
  ws.ensure(N, C);
  const CIdx targets(in.targets.data() + static_cast<std::size_t>(mb.sample0) * T_, N);

  // Where the gradient flowing out of the stage's layers goes (input of the stage).
  auto exit_grad = [&]() -> Mat<T> { return first_ ? rows(s.emb_dout, N) : dx; };
  // Gradient arriving at the top of the blocks.
  Mat<T> top = num_layers_ > 0 ? rows(s.blocks[num_layers_ - 1].dout, N) : exit_grad();

  if (last_) {
    const T scale = static_cast<T>(1.0 / static_cast<double>(in.global_valid_tokens));
    CrossEntropy<T>::backward_input(mode_, s.logits, targets, scale, s.dlogits);
    Linear<T>::backward_input(mode_, s.dlogits, cmat(*head_.lm_head_w), s.d_lnf, ws.kernels);
    LayerNorm<T>::backward_input(mode_, s.h_x, cvec(head_.lnf_w->value), cvec(s.h_mean), cvec(s.h_rstd), s.d_lnf, top);
    if (observer_) observer_->input_grad("lnf", mb, top);
  } else if (top.data() != dy.data()) {
    Kokkos::deep_copy(top, dy);
  }

  for (int b = num_layers_ - 1; b >= 0; --b) {
    auto& k = s.blocks[b];
    const BlockParams<T>& P = blocks_[static_cast<std::size_t>(b)];
    auto d4 = rows(ws.d4, N);
    auto c1 = rows(ws.c1, N);
    auto c2 = rows(ws.c2, N);
    Linear<T>::backward_input(mode_, k.dout, cmat(*P.fc_proj_w), d4, ws.kernels);  // d gelu (N,4C)
    Gelu<T>::backward_input(mode_, flat(k.fc), CVec<T>(d4.data(), d4.size()), flat_mut(k.d_fc));
    Linear<T>::backward_input(mode_, k.d_fc, cmat(*P.fc_w), k.d_ln2, ws.kernels);  // (N,C)
    LayerNorm<T>::backward_input(mode_, k.res1, cvec(P.ln2_w->value), cvec(k.mean2), cvec(k.rstd2), k.d_ln2, c1);
    Elementwise<T>::add(flat(k.dout), CVec<T>(c1.data(), c1.size()), flat_mut(k.d_res1));
    Linear<T>::backward_input(mode_, k.d_res1, cmat(*P.attn_proj_w), c2, ws.kernels);  // d atty (N,C)
    Attention<T>::backward_input(mode_, n, T_, C, H, k.qkv, k.att, c2, k.d_qkv);
    Linear<T>::backward_input(mode_, k.d_qkv, cmat(*P.qkv_w), k.d_ln1, ws.kernels);
    LayerNorm<T>::backward_input(mode_, k.x_in, cvec(P.ln1_w->value), cvec(k.mean1), cvec(k.rstd1), k.d_ln1, c1);
    Mat<T> out = b > 0 ? rows(s.blocks[b - 1].dout, N) : exit_grad();
    Elementwise<T>::add(flat(k.d_res1), CVec<T>(c1.data(), c1.size()), Vec<T>(out.data(), out.size()));
    if (observer_) observer_->input_grad(block_name(first_layer_ + b), mb, out);
  }
  s.input_grad_done = true;
}

template <class T>
void Stage<T>::backward_weight(const MicroBatch& mb, const StepInputs<T>& in) {
  Saved& s = saved(mb, "W");
  if (!s.input_grad_done) {
    std::ostringstream os;
    os << "W on stage " << id_ << ", micro-batch " << mb.index << " ran before its I";
    throw std::logic_error(os.str());
  }
  const int n = mb.nsamples, T_ = shape_.seq_len;
  const std::size_t N = static_cast<std::size_t>(n) * T_;
  auto& ws = *ws_;
  if (last_) {
    Linear<T>::backward_weight(mode_, s.lnf, s.dlogits, T_, head_.lm_head_w->acc, nullptr, ws.kernels);
    LayerNorm<T>::backward_weight(mode_, s.h_x, cvec(s.h_mean), cvec(s.h_rstd), s.d_lnf, T_, head_.lnf_w->acc,
                                  head_.lnf_b->acc);
  }
  for (int b = num_layers_ - 1; b >= 0; --b) {
    auto& k = s.blocks[b];
    const BlockParams<T>& P = blocks_[static_cast<std::size_t>(b)];
    Linear<T>::backward_weight(mode_, k.gelu, k.dout, T_, P.fc_proj_w->acc, &P.fc_proj_b->acc, ws.kernels);
    Linear<T>::backward_weight(mode_, k.ln2, k.d_fc, T_, P.fc_w->acc, &P.fc_b->acc, ws.kernels);
    LayerNorm<T>::backward_weight(mode_, k.res1, cvec(k.mean2), cvec(k.rstd2), k.d_ln2, T_, P.ln2_w->acc, P.ln2_b->acc);
    Linear<T>::backward_weight(mode_, k.atty, k.d_res1, T_, P.attn_proj_w->acc, &P.attn_proj_b->acc, ws.kernels);
    Linear<T>::backward_weight(mode_, k.ln1, k.d_qkv, T_, P.qkv_w->acc, &P.qkv_b->acc, ws.kernels);
    LayerNorm<T>::backward_weight(mode_, k.x_in, cvec(k.mean1), cvec(k.rstd1), k.d_ln1, T_, P.ln1_w->acc, P.ln1_b->acc);
  }
  if (first_) {
    const CIdx tokens(in.tokens.data() + static_cast<std::size_t>(mb.sample0) * T_, N);
    Embedding<T>::backward_weight(mode_, n, T_, tokens, s.emb_dout, embedding_.wte->acc, embedding_.wpe->acc);
  }
  auto it = store_.find(mb.index);
  pool_.push_back(std::move(it->second));
  store_.erase(it);
}

template <class T>
void Stage<T>::zero_grads() {
  Kokkos::deep_copy(flags_, 0);
  for (auto& p : params_) p.acc.zero_values();
}

template <class T>
void Stage<T>::finalize_grads() {
  if (!store_.empty()) {
    std::ostringstream os;
    os << "stage " << id_ << ": step ended with " << store_.size()
       << " micro-batch(es) whose W never ran (first: micro-batch " << store_.begin()->first << ")";
    throw std::logic_error(os.str());
  }
  Kokkos::deep_copy(flags_host_, flags_);
  for (std::size_t k = 0; k < params_.size(); ++k)
    if (flags_host_(k)) params_[k].acc.throw_overflow();
  for (auto& p : params_) p.acc.finalize_unchecked(p.grad);
}

template <class T>
void Stage<T>::optimizer_step(const OptimizerConfig& cfg, int step) {
  for (auto& p : params_) {
    switch (cfg.kind) {
      case OptimizerKind::adamw:
        AdamW<T>::update(cfg.adamw, step, p.spec.decay, p.value, cvec(p.grad), p.m, p.v);
        break;
      case OptimizerKind::sgd:
        Sgd<T>::update(cfg.sgd, p.spec.decay, p.value, cvec(p.grad), p.m);
        break;
    }
  }
}

template class Stage<float>;
template class Stage<double>;

}  // namespace minipipe
