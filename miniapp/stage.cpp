// Stage: forward, backward-input and backward-weight of its layers for one micro-batch.
// Block math follows GPT-2 pre-LN; what W needs is kept in a per-micro-batch store until W runs.
#include "stage.hpp"

#include <algorithm>
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

// Where a stored value lives, per recompute mode: kept from F to W; made by F (into scratch)
// but remade by I and held to W; only F's scratch (backward never reads it); or a gradient
// made by I for W.
enum Phase { kKept, kRemade, kScratch, kGrad };
struct Where {
  Phase none, attention, block;
  Phase in(Recompute r) const { return r == Recompute::none ? none : r == Recompute::attention ? attention : block; }
};
constexpr Where kInput{kKept, kKept, kKept};          // a block's (the head's) input
constexpr Where kUnlessBlock{kKept, kKept, kRemade};  // remade under block recompute
constexpr Where kAttention{kKept, kRemade, kRemade};  // remade under attention and block
constexpr Where kLosses{kKept, kKept, kScratch};      // F's per-token losses (W never reads them)
constexpr Where kGradient{kGrad, kGrad, kGrad};       // I -> W, in every mode
// Which buffers a Buffers object holds: F's kept set, the I -> W set, or F's scratch.
enum Set { kKeptSet, kWorkSet, kScratchSet };
bool in_set(Phase ph, Set set) {
  switch (set) {
    case kKeptSet:
      return ph == kKept;
    case kWorkSet:
      return ph == kRemade || ph == kGrad;
    default:
      return ph == kRemade || ph == kScratch;
  }
}
}  // namespace

// One block's stored values; statistics are (N, 1). Which are allocated depends on the set.
template <class T>
struct Stage<T>::BlockBuf {
  View2<T> x_in, ln1, qkv, att, atty, res1, ln2, fc, gelu;  // (N,C) (N,C) (N,3C) (n*H*T,T) (N,C) .. (N,4C) (N,4C)
  View2<T> mean1, rstd1, mean2, rstd2;                      // (N,1)
  View2<T> dout, d_res1, d_qkv, d_ln1, d_fc, d_ln2;         // gradients made by I for W
  // Calls f(member, name, rows, cols, where) for every value, in a fixed order.
  template <class F>
  static void visit(const ModelShape& s, int n, F&& f) {
    const std::size_t N = static_cast<std::size_t>(n) * s.seq_len, C = s.channels, Tl = s.seq_len;
    f(&BlockBuf::x_in, "x_in", N, C, kInput);
    f(&BlockBuf::ln1, "ln1", N, C, kUnlessBlock);
    f(&BlockBuf::qkv, "qkv", N, 3 * C, kUnlessBlock);
    f(&BlockBuf::att, "att", static_cast<std::size_t>(n) * s.n_head * Tl, Tl, kAttention);
    f(&BlockBuf::atty, "atty", N, C, kAttention);
    f(&BlockBuf::res1, "res1", N, C, kUnlessBlock);
    f(&BlockBuf::ln2, "ln2", N, C, kUnlessBlock);
    f(&BlockBuf::fc, "fc", N, 4 * C, kUnlessBlock);
    f(&BlockBuf::gelu, "gelu", N, 4 * C, kUnlessBlock);
    f(&BlockBuf::mean1, "mean1", N, 1, kUnlessBlock);
    f(&BlockBuf::rstd1, "rstd1", N, 1, kUnlessBlock);
    f(&BlockBuf::mean2, "mean2", N, 1, kUnlessBlock);
    f(&BlockBuf::rstd2, "rstd2", N, 1, kUnlessBlock);
    f(&BlockBuf::dout, "dout", N, C, kGradient);
    f(&BlockBuf::d_res1, "d_res1", N, C, kGradient);
    f(&BlockBuf::d_qkv, "d_qkv", N, 3 * C, kGradient);
    f(&BlockBuf::d_ln1, "d_ln1", N, C, kGradient);
    f(&BlockBuf::d_fc, "d_fc", N, 4 * C, kGradient);
    f(&BlockBuf::d_ln2, "d_ln2", N, C, kGradient);
  }
};

// One set of a micro-batch's stored values (blocks in layer order, then embedding and head).
template <class T>
struct Stage<T>::Buffers {
  int n = 0;
  Recompute r = Recompute::none;  // which values the set holds depends on it
  std::vector<BlockBuf> blocks;
  View2<T> emb_dout;                                  // (N,C) first stage
  View2<T> h_x, lnf, logits, losses, h_mean, h_rstd;  // head: (N,C) (N,C) (N,V) (N,1) (N,1) (N,1)
  View2<T> dlogits, d_lnf;                            // (N,V) (N,C)
  std::size_t bytes = 0;
  template <class F>
  static void visit_top(const ModelShape& s, int n, bool first, bool last, F&& f) {
    const std::size_t N = static_cast<std::size_t>(n) * s.seq_len, C = s.channels, V = s.vocab;
    if (first) f(&Buffers::emb_dout, "emb_dout", N, C, kGradient);
    if (!last) return;
    f(&Buffers::h_x, "h_x", N, C, kInput);
    f(&Buffers::lnf, "lnf", N, C, kUnlessBlock);
    f(&Buffers::logits, "logits", N, V, kUnlessBlock);
    f(&Buffers::losses, "losses", N, 1, kLosses);
    f(&Buffers::h_mean, "h_mean", N, 1, kUnlessBlock);
    f(&Buffers::h_rstd, "h_rstd", N, 1, kUnlessBlock);
    f(&Buffers::dlogits, "dlogits", N, V, kGradient);
    f(&Buffers::d_lnf, "d_lnf", N, C, kGradient);
  }
};

// A micro-batch's store: what F kept and, from I to W, what I remade and the gradients.
template <class T>
struct Stage<T>::Saved {
  int n = 0;
  bool input_grad_done = false;
  std::unique_ptr<Buffers> kept, work;
  std::size_t bytes() const { return (kept ? kept->bytes : 0) + (work ? work->bytes : 0); }
};

// Scratch buffers shared by all micro-batches of a stage (not kept between actions).
template <class T>
struct Stage<T>::Workspace {
  View2<T> c1, c2, d4;
  KernelWorkspace kernels;  // GEMM packing and dW buffers of the Linear kernels
  // F's scratch for the values it does not keep (recompute), one block's worth per micro-batch
  // size: blocks are done one after the other.
  std::vector<std::unique_ptr<Buffers>> forward_scratch;
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
Stage<T>::Stage(const ModelShape& shape, const StageLayout& layout, int stage_id, Mode mode, std::uint64_t seed,
                Recompute recompute)
    : shape_(shape),
      id_(stage_id),
      first_layer_(layout.first.at(stage_id)),
      num_layers_(layout.count.at(stage_id)),
      first_(stage_id == 0),
      last_(stage_id == layout.num_stages() - 1),
      mode_(mode),
      recompute_(recompute),
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
  for (const auto& kv : store_) b += kv.second->bytes();
  return b;
}

template <class T>
std::size_t Stage<T>::workspace_bytes() const {
  const auto& w = *ws_;
  std::size_t scratch = 0;
  for (const auto& b : w.forward_scratch) scratch += b->bytes;
  for (const auto& p : params_)
    scratch +=
        (p.acc.pending.x.size() + p.acc.pending.dy.size()) * sizeof(T) + p.packed_fwd.bytes() + p.packed_bwd.bytes();
  return (w.c1.size() + w.c2.size() + w.d4.size()) * sizeof(T) + w.kernels.bytes() + scratch;
}

template <class T>
std::unique_ptr<typename Stage<T>::Buffers> Stage<T>::take_buffers(std::vector<std::unique_ptr<Buffers>>& pool, int n,
                                                                   int set) {
  for (auto it = pool.begin(); it != pool.end(); ++it)
    if ((*it)->n == n && (*it)->r == recompute_) {
      auto b = std::move(*it);
      pool.erase(it);
      return b;
    }
  auto b = std::make_unique<Buffers>();
  b->n = n;
  b->r = recompute_;
  const Recompute r = recompute_;
  auto alloc = [&](View2<T>& v, const char* name, std::size_t rows, std::size_t cols, const Where& w) {
    if (!in_set(w.in(r), static_cast<Set>(set))) return;
    v = View2<T>(Kokkos::view_alloc(std::string("Stage::saved::") + name, Kokkos::WithoutInitializing), rows, cols);
    b->bytes += rows * cols * sizeof(T);
  };
  // F's scratch is one block's worth, shared by the blocks.
  b->blocks.resize(set == kScratchSet ? (num_layers_ > 0 ? 1 : 0) : static_cast<std::size_t>(num_layers_));
  for (auto& blk : b->blocks)
    BlockBuf::visit(shape_, n,
                    [&](View2<T> BlockBuf::*m, const char* name, std::size_t rows, std::size_t cols, const Where& w) {
                      alloc(blk.*m, name, rows, cols, w);
                    });
  Buffers::visit_top(shape_, n, first_, last_,
                     [&](View2<T> Buffers::*m, const char* name, std::size_t rows, std::size_t cols, const Where& w) {
                       alloc((*b).*m, name, rows, cols, w);
                     });
  return b;
}

// Block b's values as one set: what F kept, else what I remade, else F's scratch.
template <class T>
typename Stage<T>::BlockBuf Stage<T>::block_views(const Saved& s, const Buffers* scratch, int b) const {
  BlockBuf out;
  const auto i = static_cast<std::size_t>(b);
  BlockBuf::visit(shape_, s.n, [&](View2<T> BlockBuf::*m, const char*, std::size_t, std::size_t, const Where&) {
    if ((s.kept->blocks[i].*m).data())
      out.*m = s.kept->blocks[i].*m;
    else if (s.work && (s.work->blocks[i].*m).data())
      out.*m = s.work->blocks[i].*m;
    else if (scratch)
      out.*m = scratch->blocks[0].*m;
  });
  return out;
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
typename Stage<T>::Buffers Stage<T>::top_views(const Saved& s, const Buffers* scratch) const {
  Buffers out;
  out.n = s.n;
  Buffers::visit_top(shape_, s.n, first_, last_,
                     [&](View2<T> Buffers::*m, const char*, std::size_t, std::size_t, const Where&) {
                       if (((*s.kept).*m).data())
                         out.*m = (*s.kept).*m;
                       else if (s.work && ((*s.work).*m).data())
                         out.*m = (*s.work).*m;
                       else if (scratch)
                         out.*m = (*scratch).*m;
                     });
  return out;
}

// The forward of block b up to its MLP activation: k.x_in -> ln1, qkv, att, atty, res1, ln2,
// fc, gelu (and the LayerNorm statistics). F and the recompute of I run exactly this.
template <class T>
void Stage<T>::forward_block(int b, int n, const BlockBuf& k) {
  const int T_ = shape_.seq_len, C = shape_.channels, H = shape_.n_head;
  const std::size_t N = static_cast<std::size_t>(n) * T_;
  auto& ws = *ws_;
  const BlockParams<T>& P = blocks_[static_cast<std::size_t>(b)];
  auto v = [](const View2<T>& x) { return Vec<T>(x.data(), x.size()); };
  LayerNorm<T>::forward(mode_, k.x_in, cvec(P.ln1_w->value), cvec(P.ln1_b->value), k.ln1, v(k.mean1), v(k.rstd1));
  Linear<T>::forward(mode_, k.ln1, cmat(*P.qkv_w), cvec(P.qkv_b->value), k.qkv, ws.kernels, &P.qkv_w->packed_fwd);
  Attention<T>::forward(mode_, n, T_, C, H, k.qkv, k.att, k.atty);
  auto tmp = rows(ws.c1, N);
  Linear<T>::forward(mode_, k.atty, cmat(*P.attn_proj_w), cvec(P.attn_proj_b->value), tmp, ws.kernels,
                     &P.attn_proj_w->packed_fwd);
  Elementwise<T>::add(flat(k.x_in), CVec<T>(tmp.data(), tmp.size()), flat_mut(k.res1));
  LayerNorm<T>::forward(mode_, k.res1, cvec(P.ln2_w->value), cvec(P.ln2_b->value), k.ln2, v(k.mean2), v(k.rstd2));
  Linear<T>::forward(mode_, k.ln2, cmat(*P.fc_w), cvec(P.fc_b->value), k.fc, ws.kernels, &P.fc_w->packed_fwd);
  Gelu<T>::forward(mode_, flat(k.fc), flat_mut(k.gelu));
}

template <class T>
void Stage<T>::forward(const MicroBatch& mb, const StepInputs<T>& in, CMat<T> x_in, Mat<T> y_out) {
  if (store_.count(mb.index)) {
    std::ostringstream os;
    os << "F on stage " << id_ << ", micro-batch " << mb.index << " ran twice in one step";
    throw std::logic_error(os.str());
  }
  const int n = mb.nsamples, T_ = shape_.seq_len, C = shape_.channels;
  const std::size_t N = static_cast<std::size_t>(n) * T_;
  auto sp = std::make_unique<Saved>();
  Saved& s = *sp;
  s.n = n;
  s.kept = take_buffers(kept_pool_, n, kKeptSet);
  auto& ws = *ws_;
  ws.ensure(N, C);
  const Buffers* scratch = nullptr;
  if (recompute_ != Recompute::none) {
    auto& pool = ws.forward_scratch;
    auto it = std::find_if(pool.begin(), pool.end(), [&](const auto& b) { return b->n == n && b->r == recompute_; });
    if (it == pool.end()) {
      pool.push_back(take_buffers(pool, n, kScratchSet));
      it = pool.end() - 1;
    }
    scratch = it->get();
  }
  const CIdx tokens(in.tokens.data() + static_cast<std::size_t>(mb.sample0) * T_, N);
  const CIdx targets(in.targets.data() + static_cast<std::size_t>(mb.sample0) * T_, N);

  // Where the stage's running activation lives before the first block.
  auto entry = [&]() -> Mat<T> {
    if (num_layers_ > 0) return rows(s.kept->blocks[0].x_in, N);
    if (last_) return rows(s.kept->h_x, N);
    return y_out;
  }();
  if (first_) {
    Embedding<T>::forward(n, T_, tokens, cmat(*embedding_.wte), cmat(*embedding_.wpe), entry);
    if (observer_) observer_->activation("embedding", mb, entry);
  } else if (entry.data() != x_in.data()) {
    Kokkos::deep_copy(ExecSpace(), entry, x_in);
  }

  for (int b = 0; b < num_layers_; ++b) {
    const BlockBuf k = block_views(s, scratch, b);
    const BlockParams<T>& P = blocks_[static_cast<std::size_t>(b)];
    forward_block(b, n, k);
    auto tmp = rows(ws.c1, N);
    Linear<T>::forward(mode_, k.gelu, cmat(*P.fc_proj_w), cvec(P.fc_proj_b->value), tmp, ws.kernels,
                       &P.fc_proj_w->packed_fwd);
    Mat<T> out = b + 1 < num_layers_ ? rows(s.kept->blocks[b + 1].x_in, N) : (last_ ? rows(s.kept->h_x, N) : y_out);
    Elementwise<T>::add(flat(k.res1), CVec<T>(tmp.data(), tmp.size()), Vec<T>(out.data(), out.size()));
    if (observer_) observer_->activation(block_name(first_layer_ + b), mb, out);
  }

  if (last_) {
    const HeadParams<T>& h = head_;
    const Buffers t = top_views(s, scratch);
    LayerNorm<T>::forward(mode_, t.h_x, cvec(h.lnf_w->value), cvec(h.lnf_b->value), t.lnf, flat_mut(t.h_mean),
                          flat_mut(t.h_rstd));
    if (observer_) observer_->activation("lnf", mb, t.lnf);
    Linear<T>::forward(mode_, t.lnf, cmat(*h.lm_head_w), CVec<T>(), t.logits, ws.kernels, &h.lm_head_w->packed_fwd);
    CrossEntropy<T>::forward(mode_, t.logits, targets, flat_mut(t.losses));
    const std::size_t s0 = static_cast<std::size_t>(mb.sample0), s1 = s0 + static_cast<std::size_t>(n);
    if (in.sample_loss.extent(0) < s1 || in.sample_tokens.extent(0) < s1)
      throw std::logic_error("F on the last stage " + std::to_string(id_) + ", micro-batch " +
                             std::to_string(mb.index) + ": the per-sample loss outputs hold " +
                             std::to_string(in.sample_loss.extent(0)) + " samples, need " + std::to_string(s1));
    CrossEntropy<T>::sample_sums(n, T_, flat(t.losses), targets,
                                 Kokkos::subview(in.sample_loss, std::make_pair(s0, s1)),
                                 Kokkos::subview(in.sample_tokens, std::make_pair(s0, s1)));
  }
  store_[mb.index] = std::move(sp);
  action_peak_ = stored_bytes();
}

// I's first part under recompute: the forward values F did not keep, remade from what it kept
// with the kernels F ran, into the I -> W set. Observers see nothing: F already reported them.
template <class T>
void Stage<T>::recompute(const MicroBatch& mb, Saved& s) {
  const int n = mb.nsamples, T_ = shape_.seq_len, C = shape_.channels, H = shape_.n_head;
  ProfileRegion region("Stage::recompute");
  for (int b = 0; b < num_layers_; ++b) {
    const BlockBuf k = block_views(s, nullptr, b);
    if (recompute_ == Recompute::attention)
      Attention<T>::forward(mode_, n, T_, C, H, k.qkv, k.att, k.atty);
    else
      forward_block(b, n, k);
  }
  if (last_ && recompute_ == Recompute::block) {
    const Buffers t = top_views(s, nullptr);
    LayerNorm<T>::forward(mode_, t.h_x, cvec(head_.lnf_w->value), cvec(head_.lnf_b->value), t.lnf, flat_mut(t.h_mean),
                          flat_mut(t.h_rstd));
    Linear<T>::forward(mode_, t.lnf, cmat(*head_.lm_head_w), CVec<T>(), t.logits, ws_->kernels,
                       &head_.lm_head_w->packed_fwd);
  }
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
  s.work = take_buffers(work_pool_, n, kWorkSet);
  if (recompute_ != Recompute::none) recompute(mb, s);
  const CIdx targets(in.targets.data() + static_cast<std::size_t>(mb.sample0) * T_, N);
  const Buffers t = top_views(s, nullptr);
  auto cv = [](const View2<T>& x) { return CVec<T>(x.data(), x.size()); };

  // Where the gradient flowing out of the stage's layers goes (input of the stage).
  auto exit_grad = [&]() -> Mat<T> { return first_ ? rows(t.emb_dout, N) : dx; };
  // Gradient arriving at the top of the blocks.
  Mat<T> top = num_layers_ > 0 ? rows(s.work->blocks[num_layers_ - 1].dout, N) : exit_grad();

  if (last_) {
    const T scale = static_cast<T>(1.0 / static_cast<double>(in.global_valid_tokens));
    CrossEntropy<T>::backward_input(mode_, t.logits, targets, scale, t.dlogits);
    Linear<T>::backward_input(mode_, t.dlogits, cmat(*head_.lm_head_w), t.d_lnf, ws.kernels,
                              &head_.lm_head_w->packed_bwd);
    LayerNorm<T>::backward_input(mode_, t.h_x, cvec(head_.lnf_w->value), cv(t.h_mean), cv(t.h_rstd), t.d_lnf, top);
    if (observer_) observer_->input_grad("lnf", mb, top);
  } else if (top.data() != dy.data()) {
    Kokkos::deep_copy(ExecSpace(), top, dy);
  }

  for (int b = num_layers_ - 1; b >= 0; --b) {
    const BlockBuf k = block_views(s, nullptr, b);
    const BlockParams<T>& P = blocks_[static_cast<std::size_t>(b)];
    auto d4 = rows(ws.d4, N);
    auto c1 = rows(ws.c1, N);
    auto c2 = rows(ws.c2, N);
    Linear<T>::backward_input(mode_, k.dout, cmat(*P.fc_proj_w), d4, ws.kernels,
                              &P.fc_proj_w->packed_bwd);  // d gelu (N,4C)
    Gelu<T>::backward_input(mode_, flat(k.fc), CVec<T>(d4.data(), d4.size()), flat_mut(k.d_fc));
    Linear<T>::backward_input(mode_, k.d_fc, cmat(*P.fc_w), k.d_ln2, ws.kernels, &P.fc_w->packed_bwd);  // (N,C)
    LayerNorm<T>::backward_input(mode_, k.res1, cvec(P.ln2_w->value), cv(k.mean2), cv(k.rstd2), k.d_ln2, c1);
    Elementwise<T>::add(flat(k.dout), CVec<T>(c1.data(), c1.size()), flat_mut(k.d_res1));
    Linear<T>::backward_input(mode_, k.d_res1, cmat(*P.attn_proj_w), c2, ws.kernels,
                              &P.attn_proj_w->packed_bwd);  // d atty (N,C)
    Attention<T>::backward_input(mode_, n, T_, C, H, k.qkv, k.att, c2, k.d_qkv);
    Linear<T>::backward_input(mode_, k.d_qkv, cmat(*P.qkv_w), k.d_ln1, ws.kernels, &P.qkv_w->packed_bwd);
    LayerNorm<T>::backward_input(mode_, k.x_in, cvec(P.ln1_w->value), cv(k.mean1), cv(k.rstd1), k.d_ln1, c1);
    Mat<T> out = b > 0 ? rows(s.work->blocks[b - 1].dout, N) : exit_grad();
    Elementwise<T>::add(flat(k.d_res1), CVec<T>(c1.data(), c1.size()), Vec<T>(out.data(), out.size()));
    if (observer_) observer_->input_grad(block_name(first_layer_ + b), mb, out);
  }
  s.input_grad_done = true;
  action_peak_ = stored_bytes();
}

template <class T>
void Stage<T>::backward_weight(const MicroBatch& mb, const StepInputs<T>& in) {
  Saved& s = saved(mb, "W");
  if (!s.input_grad_done) {
    std::ostringstream os;
    os << "W on stage " << id_ << ", micro-batch " << mb.index << " ran before its I";
    throw std::logic_error(os.str());
  }
  action_peak_ = stored_bytes();
  // The step's last W adds what earlier W's held back (in its Linear calls when this one fills a
  // group, else in the flush below).
  added_held_ = w_expected_ > 0 && w_done_ + 1 == w_expected_ &&
                std::any_of(params_.begin(), params_.end(), [](const Param<T>& p) { return p.acc.pending.count > 0; });
  const int n = mb.nsamples, T_ = shape_.seq_len;
  const std::size_t N = static_cast<std::size_t>(n) * T_;
  auto& ws = *ws_;
  const Buffers t = top_views(s, nullptr);
  auto cv = [](const View2<T>& x) { return CVec<T>(x.data(), x.size()); };
  if (last_) {
    Linear<T>::backward_weight(mode_, t.lnf, t.dlogits, T_, head_.lm_head_w->acc, nullptr, ws.kernels);
    LayerNorm<T>::backward_weight(mode_, t.h_x, cv(t.h_mean), cv(t.h_rstd), t.d_lnf, T_, head_.lnf_w->acc,
                                  head_.lnf_b->acc);
  }
  for (int b = num_layers_ - 1; b >= 0; --b) {
    const BlockBuf k = block_views(s, nullptr, b);
    const BlockParams<T>& P = blocks_[static_cast<std::size_t>(b)];
    Linear<T>::backward_weight(mode_, k.gelu, k.dout, T_, P.fc_proj_w->acc, &P.fc_proj_b->acc, ws.kernels);
    Linear<T>::backward_weight(mode_, k.ln2, k.d_fc, T_, P.fc_w->acc, &P.fc_b->acc, ws.kernels);
    LayerNorm<T>::backward_weight(mode_, k.res1, cv(k.mean2), cv(k.rstd2), k.d_ln2, T_, P.ln2_w->acc, P.ln2_b->acc);
    Linear<T>::backward_weight(mode_, k.atty, k.d_res1, T_, P.attn_proj_w->acc, &P.attn_proj_b->acc, ws.kernels);
    Linear<T>::backward_weight(mode_, k.ln1, k.d_qkv, T_, P.qkv_w->acc, &P.qkv_b->acc, ws.kernels);
    LayerNorm<T>::backward_weight(mode_, k.x_in, cv(k.mean1), cv(k.rstd1), k.d_ln1, T_, P.ln1_w->acc, P.ln1_b->acc);
  }
  if (first_) {
    const CIdx tokens(in.tokens.data() + static_cast<std::size_t>(mb.sample0) * T_, N);
    Embedding<T>::backward_weight(mode_, n, T_, tokens, t.emb_dout, embedding_.wte->acc, embedding_.wpe->acc);
  }
  if (w_expected_ > 0 && ++w_done_ == w_expected_)
    for (auto& p : params_) Linear<T>::flush_weight(p.acc, ws.kernels);
  auto it = store_.find(mb.index);
  kept_pool_.push_back(std::move(it->second->kept));
  work_pool_.push_back(std::move(it->second->work));
  store_.erase(it);
}

template <class T>
void Stage<T>::zero_grads() {
  Kokkos::deep_copy(ExecSpace(), flags_, 0);  // ordered with the step's kernels, no host wait
  w_expected_ = w_done_ = 0;
  for (auto& p : params_) {
    p.acc.zero_values();
    p.acc.defer_weight_samples(false);
    share_packed_weights(p, false);
  }
}

template <class T>
void Stage<T>::set_recompute(Recompute r) {
  if (!store_.empty())
    throw std::logic_error(describe() + ": recompute mode changed with " + std::to_string(store_.size()) +
                           " micro-batch(es) stored");
  recompute_ = r;
}

template <class T>
void Stage<T>::release_buffers() {
  if (!store_.empty())
    throw std::logic_error(describe() + ": buffers released with " + std::to_string(store_.size()) +
                           " micro-batch(es) stored");
  kept_pool_.clear();
  work_pool_.clear();
  ws_->forward_scratch.clear();
}

template <class T>
void Stage<T>::begin_step(int microbatches) {
  w_expected_ = microbatches;
  w_done_ = 0;
  // With several micro-batches the weights of this step are packed once for the GEMMs of all of
  // them (both modes: see Linear); they stay fixed until finalize_grads, which drops the packed
  // copies. Deterministic mode also holds dW samples back for fewer exact folds.
  const bool share = microbatches > 1;
  for (auto& p : params_) {
    p.acc.defer_weight_samples(share && mode_ == Mode::deterministic);
    share_packed_weights(p, share);
  }
}

template <class T>
std::vector<NonFinite> Stage<T>::finalize_grads() {
  if (!store_.empty()) {
    std::ostringstream os;
    os << "stage " << id_ << ": step ended with " << store_.size()
       << " micro-batch(es) whose W never ran (first: micro-batch " << store_.begin()->first << ")";
    throw std::logic_error(os.str());
  }
  Kokkos::deep_copy(flags_host_, flags_);
  note_host_sync();
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
  Kokkos::deep_copy(param_codes_host_, param_codes_);
  note_host_sync();
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
