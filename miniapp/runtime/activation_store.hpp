// Where a stage keeps each micro-batch's activations between F, I and W, and which of them the
// recompute mode has I remake instead: the storage policy, apart from the block's math (block.hpp).
#pragma once

#include <array>
#include <cstddef>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "kernels/types.hpp"
#include "miniapp/model/model.hpp"
#include "miniapp/runtime/block.hpp"

namespace minipipe {

// The last stage's final LayerNorm, LM head and loss for n samples (N = n*T rows): a member per
// row of MINIPIPE_HEAD_TENSORS (miniapp/io/model_tensors.hpp), with its shape.
template <class T>
struct HeadActivations {
#define MINIPIPE_TENSOR_MEMBER(name, ...) View2<T> name;
  MINIPIPE_HEAD_TENSORS(MINIPIPE_TENSOR_MEMBER)
#undef MINIPIPE_TENSOR_MEMBER
  View2<T>& operator[](HeadTensor t) {
    return this->*members()[static_cast<std::size_t>(t)];
  }
  const View2<T>& operator[](HeadTensor t) const {
    return this->*members()[static_cast<std::size_t>(t)];
  }

 private:
  static constexpr std::array<View2<T> HeadActivations::*, kHeadTensors.size()> members() {
#define MINIPIPE_TENSOR_POINTER(name, ...) &HeadActivations::name,
    return {MINIPIPE_HEAD_TENSORS(MINIPIPE_TENSOR_POINTER)};
#undef MINIPIPE_TENSOR_POINTER
  }
};

// A table row's (rows, cols) for n samples of T tokens (N = n*T): (N, C), (N, 3C), (N, 4C), (N, V),
// (N, 1), and (n*H*T, T) for attention probabilities (model_tensors.hpp's TensorShape).
std::pair<std::size_t, std::size_t> tensor_extent(TensorShape shape, const ModelShape& s, int n);

// A stage's stored micro-batches. Per recompute mode each value is kept from F to W, made by F
// into scratch and remade by I (held to W), only F's scratch (backward never reads it), or a
// gradient that I makes for W, as its row's `Lives` says (miniapp/io/model_tensors.hpp); the
// block's transient values live in buffers all blocks and micro-batches share. Sets of buffers are pooled per
// micro-batch size and mode, so the hot path allocates nothing once every size has been seen.
template <class T>
class ActivationStore {
 public:
  ActivationStore(const ModelShape& shape, int num_layers, bool first, bool last, Recompute recompute);
  ~ActivationStore();
  ActivationStore(ActivationStore&&) noexcept;

  Recompute recompute() const { return recompute_; }
  // Between steps (nothing stored; the caller checks): later micro-batches keep what `r` says.
  void set_recompute(Recompute r) { recompute_ = r; }
  // Frees every pooled set (nothing stored; the caller checks).
  void release_buffers();

  bool holds(int mb) const { return store_.count(mb) != 0; }
  int size() const { return static_cast<int>(store_.size()); }
  int first_stored() const { return store_.begin()->first; }

  // F of micro-batch mb (n samples): its kept set, and F's scratch for the values it does not keep.
  void begin_forward(int mb, int n);
  // F done: the scratch is no longer the micro-batch's.
  void end_forward(int mb);
  // I: the set that holds, from I to W, what I remakes and the gradients W reads.
  void begin_backward(int mb);
  void end_backward(int mb);
  bool backward_done(int mb) const;
  // W done: the micro-batch's sets go back to the pools.
  void release(int mb);

  // Block b's activations of micro-batch mb: what F kept, else what I remade, else F's scratch
  // (during F), plus the shared transient buffers.
  BlockActivations<T> block(int mb, int b) const;
  HeadActivations<T> head(int mb) const;  // last stage
  View2<T> embedding_grad(int mb) const;  // (N, C) dL/d(embedding output); first stage
  // Where the stage's running activation lives before its first block (F): block 0's input, the
  // head's input, or nothing (an empty view) on a pass-through stage.
  View2<T> entry(int mb) const;

  // Stored micro-batches' bytes (kept sets and I -> W sets).
  std::size_t stored_bytes() const;
  // F's scratch and the transient buffers.
  std::size_t scratch_bytes() const;

 private:
  struct Set;
  struct Entry;
  std::unique_ptr<Set> take(std::vector<std::unique_ptr<Set>>& pool, int n, int which);
  void ensure_transient(std::size_t N);

  ModelShape shape_;
  int num_layers_;
  bool first_, last_;
  Recompute recompute_;
  std::map<int, std::unique_ptr<Entry>> store_;
  // Freed sets kept for reuse: what F keeps and what lives from I to W are pooled apart, so the
  // device holds as many of each as are ever alive at once; F's scratch, one block's worth per
  // micro-batch size (blocks run one after the other).
  std::vector<std::unique_ptr<Set>> kept_pool_, work_pool_, forward_scratch_;
  // Transient buffers shared by the blocks, one per `buffer` of the transient rows, as wide as the
  // widest row it holds, grown to the largest N.
  std::vector<View2<T>> transient_;
  std::size_t rows_ = 0;
};

extern template class ActivationStore<float>;
extern template class ActivationStore<double>;

}  // namespace minipipe
