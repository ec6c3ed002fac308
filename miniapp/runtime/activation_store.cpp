// ActivationStore: the table of where each activation lives per recompute mode, and the pooled
// sets of buffers that hold them.
#include "miniapp/runtime/activation_store.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace minipipe {

namespace {
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
// Which values a Set holds: F's kept set, the I -> W set, or F's scratch.
enum Which { kKeptSet, kWorkSet, kScratchSet };
bool in_set(Phase ph, Which set) {
  switch (set) {
    case kKeptSet:
      return ph == kKept;
    case kWorkSet:
      return ph == kRemade || ph == kGrad;
    default:
      return ph == kRemade || ph == kScratch;
  }
}

// Calls f(member, name, rows, cols, where) for every stored value of a block, in a fixed order.
// The transient values (attn_proj, fc_proj, d_gelu, d_res1_ln2, d_atty, d_x_ln1) are not stored.
template <class T, class F>
void visit_block(const ModelShape& s, int n, F&& f) {
  using A = BlockActivations<T>;
  const std::size_t N = static_cast<std::size_t>(n) * s.seq_len, C = s.channels, Tl = s.seq_len;
  f(&A::x_in, "x_in", N, C, kInput);
  f(&A::ln1, "ln1", N, C, kUnlessBlock);
  f(&A::qkv, "qkv", N, 3 * C, kUnlessBlock);
  f(&A::att, "att", static_cast<std::size_t>(n) * s.n_head * Tl, Tl, kAttention);
  f(&A::atty, "atty", N, C, kAttention);
  f(&A::res1, "res1", N, C, kUnlessBlock);
  f(&A::ln2, "ln2", N, C, kUnlessBlock);
  f(&A::fc, "fc", N, 4 * C, kUnlessBlock);
  f(&A::gelu, "gelu", N, 4 * C, kUnlessBlock);
  f(&A::ln1_mean, "mean1", N, 1, kUnlessBlock);
  f(&A::ln1_rstd, "rstd1", N, 1, kUnlessBlock);
  f(&A::ln2_mean, "mean2", N, 1, kUnlessBlock);
  f(&A::ln2_rstd, "rstd2", N, 1, kUnlessBlock);
  f(&A::dout, "dout", N, C, kGradient);
  f(&A::d_res1, "d_res1", N, C, kGradient);
  f(&A::d_qkv, "d_qkv", N, 3 * C, kGradient);
  f(&A::d_ln1, "d_ln1", N, C, kGradient);
  f(&A::d_fc, "d_fc", N, 4 * C, kGradient);
  f(&A::d_ln2, "d_ln2", N, C, kGradient);
}

template <class T, class F>
void visit_head(const ModelShape& s, int n, F&& f) {
  using A = HeadActivations<T>;
  const std::size_t N = static_cast<std::size_t>(n) * s.seq_len, C = s.channels, V = s.vocab;
  f(&A::x, "h_x", N, C, kInput);
  f(&A::lnf, "lnf", N, C, kUnlessBlock);
  f(&A::logits, "logits", N, V, kUnlessBlock);
  f(&A::losses, "losses", N, 1, kLosses);
  f(&A::lnf_mean, "h_mean", N, 1, kUnlessBlock);
  f(&A::lnf_rstd, "h_rstd", N, 1, kUnlessBlock);
  f(&A::dlogits, "dlogits", N, V, kGradient);
  f(&A::d_lnf, "d_lnf", N, C, kGradient);
}

// The first of kept, work, scratch that holds the member (a value lives in exactly one of them).
template <class S, class M>
void resolve(S& out, M m, const S* kept, const S* work, const S* scratch) {
  if ((kept->*m).data())
    out.*m = kept->*m;
  else if (work && (work->*m).data())
    out.*m = work->*m;
  else if (scratch)
    out.*m = scratch->*m;
}
}  // namespace

// One set of a micro-batch's stored values (blocks in layer order, the head, the embedding's
// gradient); which are allocated depends on the set and the recompute mode.
template <class T>
struct ActivationStore<T>::Set {
  int n = 0;
  Recompute r = Recompute::none;
  std::vector<BlockActivations<T>> blocks;
  HeadActivations<T> head;
  View2<T> emb_dout;  // (N, C) first stage
  std::size_t bytes = 0;
};

// A micro-batch's store: what F kept and, from I to W, what I remade and the gradients.
template <class T>
struct ActivationStore<T>::Entry {
  int n = 0;
  bool input_grad_done = false;
  std::unique_ptr<Set> kept, work;
  const Set* scratch = nullptr;  // F's scratch, during F only
  std::size_t bytes() const { return (kept ? kept->bytes : 0) + (work ? work->bytes : 0); }
};

template <class T>
ActivationStore<T>::ActivationStore(const ModelShape& shape, int num_layers, bool first, bool last, Recompute recompute)
    : shape_(shape), num_layers_(num_layers), first_(first), last_(last), recompute_(recompute) {}
template <class T>
ActivationStore<T>::~ActivationStore() = default;
template <class T>
ActivationStore<T>::ActivationStore(ActivationStore&&) noexcept = default;

template <class T>
void ActivationStore<T>::release_buffers() {
  kept_pool_.clear();
  work_pool_.clear();
  forward_scratch_.clear();
}

template <class T>
std::unique_ptr<typename ActivationStore<T>::Set> ActivationStore<T>::take(std::vector<std::unique_ptr<Set>>& pool,
                                                                           int n, int which) {
  for (auto it = pool.begin(); it != pool.end(); ++it)
    if ((*it)->n == n && (*it)->r == recompute_) {
      auto b = std::move(*it);
      pool.erase(it);
      return b;
    }
  auto b = std::make_unique<Set>();
  b->n = n;
  b->r = recompute_;
  const Recompute r = recompute_;
  auto alloc = [&](View2<T>& v, const char* name, std::size_t rows, std::size_t cols, const Where& w) {
    if (!in_set(w.in(r), static_cast<Which>(which))) return;
    v = View2<T>(Kokkos::view_alloc(std::string("Stage::saved::") + name, Kokkos::WithoutInitializing), rows, cols);
    b->bytes += rows * cols * sizeof(T);
  };
  // F's scratch is one block's worth, shared by the blocks.
  b->blocks.resize(which == kScratchSet ? (num_layers_ > 0 ? 1 : 0) : static_cast<std::size_t>(num_layers_));
  for (auto& blk : b->blocks)
    visit_block<T>(shape_, n,
                   [&](View2<T> BlockActivations<T>::*m, const char* name, std::size_t rows, std::size_t cols,
                       const Where& w) { alloc(blk.*m, name, rows, cols, w); });
  if (first_) alloc(b->emb_dout, "emb_dout", static_cast<std::size_t>(n) * shape_.seq_len, shape_.channels, kGradient);
  if (last_)
    visit_head<T>(shape_, n,
                  [&](View2<T> HeadActivations<T>::*m, const char* name, std::size_t rows, std::size_t cols,
                      const Where& w) { alloc(b->head.*m, name, rows, cols, w); });
  return b;
}

template <class T>
void ActivationStore<T>::ensure_transient(std::size_t N) {
  if (N <= rows_) return;
  rows_ = N;
  const std::size_t C = shape_.channels;
  c1_ = View2<T>(Kokkos::view_alloc("Stage::ws::c1", Kokkos::WithoutInitializing), N, C);
  c2_ = View2<T>(Kokkos::view_alloc("Stage::ws::c2", Kokkos::WithoutInitializing), N, C);
  d4_ = View2<T>(Kokkos::view_alloc("Stage::ws::d4", Kokkos::WithoutInitializing), N, 4 * C);
}

template <class T>
void ActivationStore<T>::begin_forward(int mb, int n) {
  auto e = std::make_unique<Entry>();
  e->n = n;
  e->kept = take(kept_pool_, n, kKeptSet);
  ensure_transient(static_cast<std::size_t>(n) * shape_.seq_len);
  if (recompute_ != Recompute::none) {
    auto it = std::find_if(forward_scratch_.begin(), forward_scratch_.end(),
                           [&](const auto& b) { return b->n == n && b->r == recompute_; });
    if (it == forward_scratch_.end()) {
      forward_scratch_.push_back(take(forward_scratch_, n, kScratchSet));
      it = forward_scratch_.end() - 1;
    }
    e->scratch = it->get();
  }
  store_[mb] = std::move(e);
}

template <class T>
void ActivationStore<T>::end_forward(int mb) {
  store_.at(mb)->scratch = nullptr;
}

template <class T>
void ActivationStore<T>::begin_backward(int mb) {
  Entry& e = *store_.at(mb);
  ensure_transient(static_cast<std::size_t>(e.n) * shape_.seq_len);
  e.work = take(work_pool_, e.n, kWorkSet);
}

template <class T>
void ActivationStore<T>::end_backward(int mb) {
  store_.at(mb)->input_grad_done = true;
}

template <class T>
bool ActivationStore<T>::backward_done(int mb) const {
  return store_.at(mb)->input_grad_done;
}

template <class T>
void ActivationStore<T>::release(int mb) {
  auto it = store_.find(mb);
  kept_pool_.push_back(std::move(it->second->kept));
  work_pool_.push_back(std::move(it->second->work));
  store_.erase(it);
}

template <class T>
BlockActivations<T> ActivationStore<T>::block(int mb, int b) const {
  const Entry& e = *store_.at(mb);
  const auto i = static_cast<std::size_t>(b);
  BlockActivations<T> out;
  visit_block<T>(shape_, e.n,
                 [&](View2<T> BlockActivations<T>::*m, const char*, std::size_t, std::size_t, const Where&) {
                   resolve(out, m, &e.kept->blocks[i], e.work ? &e.work->blocks[i] : nullptr,
                           e.scratch ? &e.scratch->blocks[0] : nullptr);
                 });
  // The transient values: each is read only by the kernel right after the one that made it.
  const std::size_t N = static_cast<std::size_t>(e.n) * shape_.seq_len, C = shape_.channels;
  out.attn_proj = out.fc_proj = out.d_res1_ln2 = out.d_x_ln1 = View2<T>(c1_.data(), N, C);
  out.d_atty = View2<T>(c2_.data(), N, C);
  out.d_gelu = View2<T>(d4_.data(), N, 4 * C);
  return out;
}

template <class T>
HeadActivations<T> ActivationStore<T>::head(int mb) const {
  const Entry& e = *store_.at(mb);
  HeadActivations<T> out;
  visit_head<T>(shape_, e.n, [&](View2<T> HeadActivations<T>::*m, const char*, std::size_t, std::size_t, const Where&) {
    resolve(out, m, &e.kept->head, e.work ? &e.work->head : nullptr, e.scratch ? &e.scratch->head : nullptr);
  });
  return out;
}

template <class T>
View2<T> ActivationStore<T>::embedding_grad(int mb) const {
  const Entry& e = *store_.at(mb);
  return e.work ? e.work->emb_dout : View2<T>();
}

template <class T>
View2<T> ActivationStore<T>::entry(int mb) const {
  const Entry& e = *store_.at(mb);
  if (num_layers_ > 0) return e.kept->blocks[0].x_in;
  if (last_) return e.kept->head.x;
  return View2<T>();
}

template <class T>
std::size_t ActivationStore<T>::stored_bytes() const {
  std::size_t b = 0;
  for (const auto& kv : store_) b += kv.second->bytes();
  return b;
}

template <class T>
std::size_t ActivationStore<T>::scratch_bytes() const {
  std::size_t b = (c1_.size() + c2_.size() + d4_.size()) * sizeof(T);
  for (const auto& s : forward_scratch_) b += s->bytes;
  return b;
}

template class ActivationStore<float>;
template class ActivationStore<double>;

}  // namespace minipipe
