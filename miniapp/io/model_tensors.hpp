// The model's tensors written once: a block's and the head's activations (shape, where each lives
// between F, I and W, the kernel that makes it) and the parameters (shape, init, owner, decay).
// The activation and parameter structs, the taps, the store, the kernel-level dump, the model's
// parameter list and the dataflow order of docs/design.md §5 are all made from these rows.
#pragma once

#include <array>
#include <cstddef>
#include <string_view>

namespace minipipe {

// ---- activations ------------------------------------------------------------------------------

// A value's shape for n samples of T tokens (N = n*T rows) and, in the kernel-level dump, for the
// B samples of the global batch: (N, C) [B,T,C]; (N, 3C) [B,T,3C]; (N, 4C) [B,T,4C]; (N, V)
// [B,T,V]; (N, 1) [B,T] (statistics, losses); (n*H*T, T) [B,H,T,T] (attention probabilities).
enum class TensorShape { c, c3, c4, v, one, att };

// Who makes the value: the part's input (made by the part below or above; not a kernel output of
// this part), a forward kernel, a backward-input kernel, or the forward kernel whose output is the
// layer's own block-level dump (the head's lnf: activations/lnf, not kernels/head/lnf).
enum class Made { input, forward, backward, layer_output };

// Where the value lives between F, I and W (activation_store.cpp): kept from F to W in every mode;
// kept unless train.recompute = block (then F writes it to scratch and I remakes it, held to W);
// kept unless recompute is attention or block; kept unless block, where it is only F's scratch
// (backward never reads it); a gradient I makes for W; or transient: read only by the kernel right
// after the one that made it, in shared buffer `buffer` of the stage (all blocks, all micro-batches).
enum class Lives { kept, unless_block, unless_attention, scratch_under_block, gradient, transient };

struct TensorRow {
  std::string_view name;  // the struct member, the tap and the dump name (kernels/<layer>/<name>)
  TensorShape shape;
  Made made;
  Lives lives;
  int buffer;                 // transient only: which shared buffer (0, 1, ...)
  std::string_view producer;  // the kernel label `minipipe compare` names ("" for an input)
};

// One row per value of a GPT-2 block, forward then backward-input, each in computation order (the
// order of block.cpp's taps and of the kernel-level dump). A new kernel adds its output here.
// X(name, shape, made, lives, buffer, producer)
#define MINIPIPE_BLOCK_TENSORS(X)                                               \
  X(x_in, c, input, kept, 0, "")                                                \
  X(ln1, c, forward, unless_block, 0, "LayerNorm::forward (ln1)")               \
  X(ln1_mean, one, forward, unless_block, 0, "LayerNorm::forward (ln1)")        \
  X(ln1_rstd, one, forward, unless_block, 0, "LayerNorm::forward (ln1)")        \
  X(qkv, c3, forward, unless_block, 0, "Linear::forward (qkv_w)")               \
  X(att, att, forward, unless_attention, 0, "Attention::forward")               \
  X(atty, c, forward, unless_attention, 0, "Attention::forward")                \
  X(attn_proj, c, forward, transient, 0, "Linear::forward (attn_proj_w)")       \
  X(res1, c, forward, unless_block, 0, "Elementwise::add (residual 1)")         \
  X(ln2, c, forward, unless_block, 0, "LayerNorm::forward (ln2)")               \
  X(ln2_mean, one, forward, unless_block, 0, "LayerNorm::forward (ln2)")        \
  X(ln2_rstd, one, forward, unless_block, 0, "LayerNorm::forward (ln2)")        \
  X(fc, c4, forward, unless_block, 0, "Linear::forward (fc_w)")                 \
  X(gelu, c4, forward, unless_block, 0, "Gelu::forward")                        \
  X(fc_proj, c, forward, transient, 0, "Linear::forward (fc_proj_w)")           \
  X(dout, c, input, gradient, 0, "")                                            \
  X(d_gelu, c4, backward, transient, 2, "Linear::backward_input (fc_proj_w)")   \
  X(d_fc, c4, backward, gradient, 0, "Gelu::backward_input")                    \
  X(d_ln2, c, backward, gradient, 0, "Linear::backward_input (fc_w)")           \
  X(d_res1_ln2, c, backward, transient, 0, "LayerNorm::backward_input (ln2)")   \
  X(d_res1, c, backward, gradient, 0, "Elementwise::add (residual 1 gradient)") \
  X(d_atty, c, backward, transient, 1, "Linear::backward_input (attn_proj_w)")  \
  X(d_qkv, c3, backward, gradient, 0, "Attention::backward_input")              \
  X(d_ln1, c, backward, gradient, 0, "Linear::backward_input (qkv_w)")          \
  X(d_x_ln1, c, backward, transient, 0, "LayerNorm::backward_input (ln1)")

// The last stage's final LayerNorm, LM head and loss, in the same form and order.
#define MINIPIPE_HEAD_TENSORS(X)                                           \
  X(x, c, input, kept, 0, "")                                              \
  X(lnf, c, layer_output, unless_block, 0, "LayerNorm::forward (lnf)")     \
  X(lnf_mean, one, forward, unless_block, 0, "LayerNorm::forward (lnf)")   \
  X(lnf_rstd, one, forward, unless_block, 0, "LayerNorm::forward (lnf)")   \
  X(logits, v, forward, unless_block, 0, "Linear::forward (lm_head_w)")    \
  X(losses, one, forward, scratch_under_block, 0, "CrossEntropy::forward") \
  X(dlogits, v, backward, gradient, 0, "CrossEntropy::backward_input")     \
  X(d_lnf, c, backward, gradient, 0, "Linear::backward_input (lm_head_w)")

#define MINIPIPE_TENSOR_ENUM(name, ...) name,
#define MINIPIPE_TENSOR_ROW(name, shape, made, lives, buffer, producer) \
  TensorRow{#name, TensorShape::shape, Made::made, Lives::lives, buffer, producer},

enum class BlockTensor { MINIPIPE_BLOCK_TENSORS(MINIPIPE_TENSOR_ENUM) };
enum class HeadTensor { MINIPIPE_HEAD_TENSORS(MINIPIPE_TENSOR_ENUM) };
inline constexpr std::array kBlockTensors{MINIPIPE_BLOCK_TENSORS(MINIPIPE_TENSOR_ROW)};
inline constexpr std::array kHeadTensors{MINIPIPE_HEAD_TENSORS(MINIPIPE_TENSOR_ROW)};

constexpr const TensorRow& row_of(BlockTensor t) {
  return kBlockTensors[static_cast<std::size_t>(t)];
}
constexpr const TensorRow& row_of(HeadTensor t) {
  return kHeadTensors[static_cast<std::size_t>(t)];
}

// ---- parameters -------------------------------------------------------------------------------

// A parameter's shape in the model's sizes: V vocab, P block_size (the position table's rows),
// C channels. Linear weights are [out, in] (docs/design.md §2).
enum class ParamShape { v_c, p_c, c, c3, c4, c3_c, c_c, c4_c, c_c4 };
enum class ParamInit { normal, zeros, ones };
// Whose parameter it is: the embedding (first stage), every block (named layer_NN/<name>), or the
// head (last stage).
enum class ParamOwner { embedding, block, head };

struct ParamRow {
  std::string_view name;  // the global name without the layer prefix
  ParamOwner owner;
  ParamShape shape;
  ParamInit init;
  double std;                    // normal init: the standard deviation (0 for zeros and ones)
  bool residual;                 // normal init scaled by 1/sqrt(2 n_layer) (GPT-2's residual projections)
  bool decay;                    // weight decay applies (the 2-D weights)
  std::string_view grad_kernel;  // the backward-weight kernel that makes its gradient
};

// Every parameter in model order: embedding, one block (repeated per layer), head.
// X(name, owner, shape, init, std, residual, decay, grad_kernel)
#define MINIPIPE_EMBEDDING_PARAMS(X)                                              \
  X(wte, embedding, v_c, normal, 0.02, false, true, "Embedding::backward_weight") \
  X(wpe, embedding, p_c, normal, 0.01, false, true, "Embedding::backward_weight")
#define MINIPIPE_BLOCK_PARAMS(X)                                                  \
  X(ln1_w, block, c, ones, 0, false, false, "LayerNorm::backward_weight")         \
  X(ln1_b, block, c, zeros, 0, false, false, "LayerNorm::backward_weight")        \
  X(qkv_w, block, c3_c, normal, 0.02, false, true, "Linear::backward_weight")     \
  X(qkv_b, block, c3, zeros, 0, false, false, "Linear::backward_weight")          \
  X(attn_proj_w, block, c_c, normal, 0.02, true, true, "Linear::backward_weight") \
  X(attn_proj_b, block, c, zeros, 0, false, false, "Linear::backward_weight")     \
  X(ln2_w, block, c, ones, 0, false, false, "LayerNorm::backward_weight")         \
  X(ln2_b, block, c, zeros, 0, false, false, "LayerNorm::backward_weight")        \
  X(fc_w, block, c4_c, normal, 0.02, false, true, "Linear::backward_weight")      \
  X(fc_b, block, c4, zeros, 0, false, false, "Linear::backward_weight")           \
  X(fc_proj_w, block, c_c4, normal, 0.02, true, true, "Linear::backward_weight")  \
  X(fc_proj_b, block, c, zeros, 0, false, false, "Linear::backward_weight")
#define MINIPIPE_HEAD_PARAMS(X)                                           \
  X(lnf_w, head, c, ones, 0, false, false, "LayerNorm::backward_weight")  \
  X(lnf_b, head, c, zeros, 0, false, false, "LayerNorm::backward_weight") \
  X(lm_head_w, head, v_c, normal, 0.02, false, true, "Linear::backward_weight")

#define MINIPIPE_PARAM_ROW(name, owner, shape, init, std, residual, decay, grad_kernel) \
  ParamRow{#name, ParamOwner::owner, ParamShape::shape, ParamInit::init, std, residual, decay, grad_kernel},

inline constexpr std::array kEmbeddingParams{MINIPIPE_EMBEDDING_PARAMS(MINIPIPE_PARAM_ROW)};
inline constexpr std::array kBlockParams{MINIPIPE_BLOCK_PARAMS(MINIPIPE_PARAM_ROW)};
inline constexpr std::array kHeadParams{MINIPIPE_HEAD_PARAMS(MINIPIPE_PARAM_ROW)};

}  // namespace minipipe
