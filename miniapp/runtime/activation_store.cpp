// ActivationStore: where each activation lives per recompute mode, read from the rows of
// miniapp/io/model_tensors.hpp, and the pooled sets of buffers that hold them.
#include "miniapp/runtime/activation_store.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

namespace minipipe {

namespace {
// Where a stored value lives under one recompute mode: kept from F to W; made by F (into scratch)
// but remade by I and held to W; only F's scratch (backward never reads it); a gradient made by I
// for W; or nowhere of its own (transient).
enum Phase { kKept, kRemade, kScratch, kGrad, kTransient };
Phase phase(Lives l, Recompute r) {
  switch (l) {
    case Lives::kept:
      return kKept;
    case Lives::unless_block:
      return r == Recompute::block ? kRemade : kKept;
    case Lives::unless_attention:
      return r == Recompute::none ? kKept : kRemade;
    case Lives::scratch_under_block:
      return r == Recompute::block ? kScratch : kKept;
    case Lives::gradient:
      return kGrad;
    case Lives::transient:
      break;
  }
  return kTransient;
}
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

// Calls f(tensor, row) for every row of a part's table, in table order.
template <class F>
void visit_block(F&& f) {
  for (std::size_t k = 0; k < kBlockTensors.size(); ++k) f(static_cast<BlockTensor>(k), kBlockTensors[k]);
}
template <class F>
void visit_head(F&& f) {
  for (std::size_t k = 0; k < kHeadTensors.size(); ++k) f(static_cast<HeadTensor>(k), kHeadTensors[k]);
}

// The first of kept, work, scratch that holds the member (a value lives in exactly one of them).
template <class S, class K>
void resolve(S& out, K t, const S* kept, const S* work, const S* scratch) {
  if (kept->operator[](t).data())
    out[t] = (*kept)[t];
  else if (work && (*work)[t].data())
    out[t] = (*work)[t];
  else if (scratch)
    out[t] = (*scratch)[t];
}
}  // namespace

std::pair<std::size_t, std::size_t> tensor_extent(TensorShape shape, const ModelShape& s, int n) {
  const std::size_t N = static_cast<std::size_t>(n) * s.seq_len, C = s.channels;
  switch (shape) {
    case TensorShape::c:
      return {N, C};
    case TensorShape::c3:
      return {N, 3 * C};
    case TensorShape::c4:
      return {N, 4 * C};
    case TensorShape::v:
      return {N, static_cast<std::size_t>(s.vocab)};
    case TensorShape::one:
      return {N, 1};
    case TensorShape::att:
      break;
  }
  return {static_cast<std::size_t>(n) * s.n_head * s.seq_len, static_cast<std::size_t>(s.seq_len)};
}

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
  auto alloc = [&](View2<T>& v, const std::string& name, TensorShape shape, Lives lives) {
    if (!in_set(phase(lives, r), static_cast<Which>(which))) return;
    const auto [rows, cols] = tensor_extent(shape, shape_, n);
    v = View2<T>(Kokkos::view_alloc("Stage::saved::" + name, Kokkos::WithoutInitializing), rows, cols);
    b->bytes += rows * cols * sizeof(T);
  };
  // F's scratch is one block's worth, shared by the blocks.
  b->blocks.resize(which == kScratchSet ? (num_layers_ > 0 ? 1 : 0) : static_cast<std::size_t>(num_layers_));
  for (auto& blk : b->blocks)
    visit_block(
        [&](BlockTensor t, const TensorRow& row) { alloc(blk[t], std::string(row.name), row.shape, row.lives); });
  if (first_) alloc(b->emb_dout, "emb_dout", TensorShape::c, Lives::gradient);
  if (last_)
    visit_head([&](HeadTensor t, const TensorRow& row) {
      alloc(b->head[t], "head/" + std::string(row.name), row.shape, row.lives);
    });
  return b;
}

template <class T>
void ActivationStore<T>::ensure_transient(std::size_t N) {
  if (N <= rows_) return;
  rows_ = N;
  std::vector<std::size_t> width;  // per buffer, the widest row it holds
  visit_block([&](BlockTensor, const TensorRow& row) {
    if (row.lives != Lives::transient) return;
    const auto b = static_cast<std::size_t>(row.buffer);
    if (width.size() <= b) width.resize(b + 1, 0);
    width[b] = std::max(width[b], tensor_extent(row.shape, shape_, 1).second);
  });
  transient_.clear();
  for (std::size_t b = 0; b < width.size(); ++b)
    transient_.emplace_back(Kokkos::view_alloc("Stage::ws::transient" + std::to_string(b), Kokkos::WithoutInitializing),
                            N, width[b]);
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
  visit_block([&](BlockTensor t, const TensorRow& row) {
    if (row.lives == Lives::transient) {
      // Read only by the kernel right after the one that made it: a view of the shared buffer.
      const auto [rows, cols] = tensor_extent(row.shape, shape_, e.n);
      out[t] = View2<T>(transient_[static_cast<std::size_t>(row.buffer)].data(), rows, cols);
    } else {
      resolve(out, t, &e.kept->blocks[i], e.work ? &e.work->blocks[i] : nullptr,
              e.scratch ? &e.scratch->blocks[0] : nullptr);
    }
  });
  return out;
}

template <class T>
HeadActivations<T> ActivationStore<T>::head(int mb) const {
  const Entry& e = *store_.at(mb);
  HeadActivations<T> out;
  visit_head([&](HeadTensor t, const TensorRow&) {
    resolve(out, t, &e.kept->head, e.work ? &e.work->head : nullptr, e.scratch ? &e.scratch->head : nullptr);
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
  std::size_t b = 0;
  for (const auto& t : transient_) b += t.size() * sizeof(T);
  for (const auto& s : forward_scratch_) b += s->bytes;
  return b;
}

template class ActivationStore<float>;
template class ActivationStore<double>;

}  // namespace minipipe
