// One GPT-2 block (pre-LayerNorm) as the model reads: forward, backward-input and backward-weight
// over a struct of the block's activations, one kernel call per line with its shapes.
#pragma once

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

// The parameters of one block, resolved by global name (never by position).
template <class T>
struct BlockParams {
  Param<T>*ln1_w = nullptr, *ln1_b = nullptr, *qkv_w = nullptr, *qkv_b = nullptr, *attn_proj_w = nullptr,
  *attn_proj_b = nullptr, *ln2_w = nullptr, *ln2_b = nullptr, *fc_w = nullptr, *fc_b = nullptr, *fc_proj_w = nullptr,
  *fc_proj_b = nullptr;
};

// A block's activations for n samples (N = n*T rows), named as the kernel-level dump names them
// (docs/design.md §5). Where each lives (kept from F to W, remade by I, F's scratch, a transient buffer
// shared by the blocks) is ActivationStore's business; the block only reads and writes them.
template <class T>
struct BlockActivations {
  // forward, in computation order
  View2<T> x_in;                // (N, C)     the block's input (residual stream)
  View2<T> ln1;                 // (N, C)     LayerNorm 1
  View2<T> ln1_mean, ln1_rstd;  // (N, 1)
  View2<T> qkv;                 // (N, 3C)    [q | k | v]
  View2<T> att;                 // (n*H*T, T) softmax probabilities (above the diagonal: 0)
  View2<T> atty;                // (N, C)     attention output
  View2<T> attn_proj;           // (N, C)     transient
  View2<T> res1;                // (N, C)     x_in + attn_proj
  View2<T> ln2;                 // (N, C)     LayerNorm 2
  View2<T> ln2_mean, ln2_rstd;  // (N, 1)
  View2<T> fc;                  // (N, 4C)
  View2<T> gelu;                // (N, 4C)
  View2<T> fc_proj;             // (N, C)     transient; the block's output is res1 + fc_proj
  // backward-input, in computation order
  View2<T> dout;        // (N, C)  dL/d(block output), arriving from above
  View2<T> d_gelu;      // (N, 4C) transient
  View2<T> d_fc;        // (N, 4C)
  View2<T> d_ln2;       // (N, C)
  View2<T> d_res1_ln2;  // (N, C)  transient: res1's gradient through LayerNorm 2
  View2<T> d_res1;      // (N, C)  dout + d_res1_ln2
  View2<T> d_atty;      // (N, C)  transient
  View2<T> d_qkv;       // (N, 3C)
  View2<T> d_ln1;       // (N, C)
  View2<T> d_x_ln1;     // (N, C)  transient: x_in's gradient through LayerNorm 1
};

// Sees each kernel's output right after the kernel ran: the dump name of docs/design.md §5 ("qkv",
// "d_fc") and the buffer, produced on ExecSpace and not yet fenced. A stage's tap feeds the
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

  // x_in -> ln1 -> qkv -> att, atty -> res1 = x_in + attn_proj -> ln2 -> fc -> gelu, then
  // x_out = res1 + fc_proj(gelu).
  static void forward(const Call& c, const BlockParams<T>& P, const BlockActivations<T>& a, Mat<T> x_out);
  // The forward up to the MLP activation (all that backward reads): what F and I's block
  // recompute both run, so the remade values are F's bits.
  static void forward_to_gelu(const Call& c, const BlockParams<T>& P, const BlockActivations<T>& a);
  // qkv -> att, atty: what I's attention recompute runs.
  static void forward_attention(const Call& c, const BlockActivations<T>& a);

  // dout -> d_gelu -> d_fc -> d_ln2 -> d_res1 = dout + d_res1_ln2 -> d_atty -> d_qkv -> d_ln1, then
  // dx = d_res1 + d_x_ln1.
  static void backward_input(const Call& c, const BlockParams<T>& P, const BlockActivations<T>& a, Mat<T> dx);
  // The parameter gradients (fc_proj, fc, ln2, attn_proj, qkv, ln1: backward-input's order) added
  // to the exact accumulators, from the forward values and backward-input's gradients.
  static void backward_weight(const Call& c, const BlockParams<T>& P, const BlockActivations<T>& a);
};

extern template struct Block<float>;
extern template struct Block<double>;

}  // namespace minipipe
