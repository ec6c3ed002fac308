// One GPT-2 block (pre-LayerNorm) as the model reads: forward, backward-input and backward-weight
// over a struct of the block's activations, one kernel call per line with its shapes.
#pragma once

#include <array>
#include <cstddef>
#include <string>

#include "kernels/gemm.hpp"
#include "kernels/grad_accum.hpp"
#include "kernels/types.hpp"
#include "kernels/workspace.hpp"
#include "miniapp/model/model.hpp"

namespace minipipe {

template <class T>
struct Param {
  ParamSpec spec;
  View1<T> value, grad, m, v;  // m, v: optimizer state (AdamW moments or SGD momentum in m)
  GradAccum<T> acc;
  // Linear weights: the packed W^T (forward) and W (backward-input) that a step's micro-batches
  // share (PackedB); enabled by begin_step for a step of several micro-batches.
  PackedB<T> packed_fwd, packed_bwd;
};

// The parameters of one block (a member per row of MINIPIPE_BLOCK_PARAMS), resolved by global name
// (never by position).
template <class T>
struct BlockParams {
#define MINIPIPE_PARAM_MEMBER(name, ...) Param<T>* name = nullptr;
  MINIPIPE_BLOCK_PARAMS(MINIPIPE_PARAM_MEMBER)
#undef MINIPIPE_PARAM_MEMBER
  // The member of row k of kBlockParams.
  Param<T>*& at(std::size_t k) {
    return this->*members()[k];
  }

 private:
  static constexpr std::array<Param<T> * BlockParams::*, kBlockParams.size()> members() {
#define MINIPIPE_PARAM_POINTER(name, ...) &BlockParams::name,
    return {MINIPIPE_BLOCK_PARAMS(MINIPIPE_PARAM_POINTER)};
#undef MINIPIPE_PARAM_POINTER
  }
};

// The embedding's and the head's parameters, the same way (MINIPIPE_EMBEDDING_PARAMS, _HEAD_PARAMS).
template <class T>
struct EmbeddingParams {
#define MINIPIPE_PARAM_MEMBER(name, ...) Param<T>* name = nullptr;
  MINIPIPE_EMBEDDING_PARAMS(MINIPIPE_PARAM_MEMBER)
#undef MINIPIPE_PARAM_MEMBER
  Param<T>*& at(std::size_t k) {
    return this->*members()[k];
  }

 private:
  static constexpr std::array<Param<T> * EmbeddingParams::*, kEmbeddingParams.size()> members() {
#define MINIPIPE_PARAM_POINTER(name, ...) &EmbeddingParams::name,
    return {MINIPIPE_EMBEDDING_PARAMS(MINIPIPE_PARAM_POINTER)};
#undef MINIPIPE_PARAM_POINTER
  }
};
template <class T>
struct HeadParams {
#define MINIPIPE_PARAM_MEMBER(name, ...) Param<T>* name = nullptr;
  MINIPIPE_HEAD_PARAMS(MINIPIPE_PARAM_MEMBER)
#undef MINIPIPE_PARAM_MEMBER
  Param<T>*& at(std::size_t k) {
    return this->*members()[k];
  }

 private:
  static constexpr std::array<Param<T> * HeadParams::*, kHeadParams.size()> members() {
#define MINIPIPE_PARAM_POINTER(name, ...) &HeadParams::name,
    return {MINIPIPE_HEAD_PARAMS(MINIPIPE_PARAM_POINTER)};
#undef MINIPIPE_PARAM_POINTER
  }
};

// A block's activations for n samples (N = n*T rows): a member per row of MINIPIPE_BLOCK_TENSORS
// (miniapp/io/model_tensors.hpp), named as the kernel-level dump names them, with its shape. Where
// each lives (kept from F to W, remade by I, F's scratch, a transient buffer shared by the blocks)
// is ActivationStore's business, read from the same rows; the block only reads and writes them.
template <class T>
struct BlockActivations {
#define MINIPIPE_TENSOR_MEMBER(name, ...) View2<T> name;
  MINIPIPE_BLOCK_TENSORS(MINIPIPE_TENSOR_MEMBER)
#undef MINIPIPE_TENSOR_MEMBER
  View2<T>& operator[](BlockTensor t) {
    return this->*members()[static_cast<std::size_t>(t)];
  }
  const View2<T>& operator[](BlockTensor t) const {
    return this->*members()[static_cast<std::size_t>(t)];
  }

 private:
  static constexpr std::array<View2<T> BlockActivations::*, kBlockTensors.size()> members() {
#define MINIPIPE_TENSOR_POINTER(name, ...) &BlockActivations::name,
    return {MINIPIPE_BLOCK_TENSORS(MINIPIPE_TENSOR_POINTER)};
#undef MINIPIPE_TENSOR_POINTER
  }
};

// Sees each kernel's output right after the kernel ran: its row's name, the dump name of
// docs/design.md §5 ("qkv", "d_fc"), and the buffer, produced on ExecSpace and not yet fenced. A stage's tap feeds the
// kernel-level dump and the one-ULP test hook.
template <class T>
class KernelTap {
 public:
  virtual ~KernelTap() = default;
  virtual void produced(const char* name, const View2<T>& x) const = 0;
};

template <class T>
struct Block {
  // What every call of one micro-batch shares.
  struct Call {
    Mode mode;
    int n;  // samples
    const ModelShape& shape;
    KernelWorkspace& kernels;
    const KernelTap<T>* tap = nullptr;  // nullptr: nobody watches
  };

  // The forward rows of MINIPIPE_BLOCK_TENSORS in order (LayerNorm, attention, the first residual
  // add, LayerNorm, the MLP), then x_out = res1 + fc_proj.
  static void forward(const Call& c, const BlockParams<T>& P, const BlockActivations<T>& a, Mat<T> x_out);
  // The forward up to the MLP activation (all that backward reads): what F and I's block
  // recompute both run, so the remade values are F's bits.
  static void forward_saved(const Call& c, const BlockParams<T>& P, const BlockActivations<T>& a);
  // qkv -> att, atty: what I's attention recompute runs.
  static void forward_attention(const Call& c, const BlockActivations<T>& a);

  // The backward rows of MINIPIPE_BLOCK_TENSORS in order (the forward's kernels in reverse), then
  // dx = d_res1 + d_x_ln1.
  static void backward_input(const Call& c, const BlockParams<T>& P, const BlockActivations<T>& a, Mat<T> dx);
  // The parameter gradients (fc_proj, fc, ln2, attn_proj, qkv, ln1: backward-input's order) added
  // to the exact accumulators, from the forward values and backward-input's gradients.
  static void backward_weight(const Call& c, const BlockParams<T>& P, const BlockActivations<T>& a);
  // backward_input and backward_weight in one pass (a B action): each parameter gradient right
  // after the backward-input kernel that makes or reads its dy (and after that kernel's tap, so a
  // tap's nudge reaches it as in backward_weight), so it reads dy from cache. The same kernels on
  // the same values, so the same bits.
  static void backward(const Call& c, const BlockParams<T>& P, const BlockActivations<T>& a, Mat<T> dx);

 private:
  // backward_weight's parts, in its order: the gradients of one Linear or LayerNorm's parameters.
  enum class Weights { fc_proj, fc, ln2, attn_proj, qkv, ln1 };
  static void weight_grads(const Call& c, const BlockParams<T>& P, const BlockActivations<T>& a, Weights part);
  static void backward_parts(const Call& c, const BlockParams<T>& P, const BlockActivations<T>& a, Mat<T> dx,
                             bool weights);
};

extern template struct Block<float>;
extern template struct Block<double>;

}  // namespace minipipe
