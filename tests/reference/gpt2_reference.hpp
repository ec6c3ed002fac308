// Independent double-precision GPT-2 (pre-LN) written from docs/design.md §2 alone: forward, backward
// and the AdamW/SGD updates on plain std::vector<double>; shares no code with kernels/ or miniapp/.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace minipipe::reference {

// Model shape as docs/design.md §2 names it (block_size = rows of wpe, >= seq_len).
struct Shape {
  int vocab = 0, seq_len = 0, block_size = 0, channels = 0, n_head = 0, n_layer = 0;
};

// A parameter tensor: global name, shape ([out, in] for Linear weights), row-major values.
struct Tensor {
  std::vector<std::uint64_t> dims;
  std::vector<double> v;
};
using Params = std::map<std::string, Tensor>;

// Global parameter names and shapes of docs/design.md §2, in a fixed order (embedding, blocks, head).
std::vector<std::pair<std::string, std::vector<std::uint64_t>>> parameter_table(const Shape& s);
// "layer_07": the dump name of block 7.
std::string layer_name(int layer);

// One tensor of the kernel-level dump (docs/design.md §5): scope "block" (/kernels/layer_NN/<name>)
// or "head" (/kernels/head/<name>), phase "forward" or "backward", dims as written ("B", "T", "3C").
struct KernelTensor {
  std::string scope, phase, name;
  std::vector<std::string> dims;
};
// Every kernel-level tensor, in dataflow order within each scope and phase (gpt2_reference.cpp).
const std::vector<KernelTensor>& kernel_tensors();
// The dims of k for the model shape s and a global batch of B sequences.
std::vector<std::uint64_t> kernel_tensor_dims(const KernelTensor& k, const Shape& s, int B);

// Everything one step of the model produces for a global batch of B sequences.
struct StepResult {
  // Per dump layer name ("embedding", "layer_00", ..., "lnf"): [B,T,C] row-major.
  std::map<std::string, std::vector<double>> activations;
  // dL/d(input of layer): "layer_00".."layer_{L-1}", "lnf". [B,T,C].
  std::map<std::string, std::vector<double>> input_grads;
  std::vector<double> per_sample_loss_sum;           // [B]
  std::vector<int> per_sample_tokens;                // [B]
  double loss = 0;                                   // sum of token losses / valid tokens of the whole batch
  std::map<std::string, std::vector<double>> grads;  // dL/dparam, same shapes as the params
  // Intermediates of each block, by kernel-level dump name ("layer_00/qkv", "layer_00/d_fc"),
  // row-major as dumped ([B,T,C], [B,T,3C], [B,T,4C]).
  std::map<std::string, std::vector<double>> kernels;
};

// Forward and backward of the whole model on tokens/targets [B,T] (target -1 = padding).
StepResult run_step(const Shape& s, const Params& params, const std::vector<int>& tokens,
                    const std::vector<int>& targets, int B);

// Optimizer hyperparameters (the deck's train.* keys).
struct Optimizer {
  std::string kind = "adamw";  // adamw | sgd
  double lr = 0, beta1 = 0, beta2 = 0, eps = 0, weight_decay = 0, momentum = 0;
};

// Optimizer state of one parameter: AdamW first/second moments, or the SGD momentum buffer in m;
// m_abs is m accumulated from |g| (and |wd p|), the magnitude that bounds its rounding error.
struct Moments {
  std::vector<double> m, v, m_abs;
};

// One update of `param` with gradient `grad` at 1-based step `step`, as torch.optim.AdamW
// (decoupled decay, bias-corrected moments) or torch.optim.SGD (no dampening). Weight decay
// applies only to 2-D weights (`decay`). `magnitude` receives, per element, the size of the
// update computed from absolute values (lr |m|/(sqrt(vhat)+eps) with |m| from |g|, or lr |d|):
// the scale of the update's rounding error, for tolerances.
void optimizer_update(const Optimizer& opt, int step, bool decay, std::vector<double>& param,
                      const std::vector<double>& grad, Moments& state, std::vector<double>& magnitude);

}  // namespace minipipe::reference
