// The kernel outputs inside a block and the head that the kernel-level dump writes (docs/design.md §5,
// in computation order), read from the tables of miniapp/io/model_tensors.hpp, and the one-ULP test
// hook MINIPIPE_TEST_PERTURB that may move them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "miniapp/model/model.hpp"

namespace minipipe {

// One kernel output: its dump name and its shape for a batch of B samples.
struct KernelOutput {
  const char* name;
  TensorShape shape;
  std::vector<std::uint64_t> dims(const ModelShape& s, int B) const;
};

// A block's forward outputs then its backward-input outputs, each in computation order: the rows
// of MINIPIPE_BLOCK_TENSORS (miniapp/io/model_tensors.hpp) a forward or backward kernel makes.
const std::vector<KernelOutput>& block_forward_outputs();
const std::vector<KernelOutput>& block_backward_outputs();
// The head's: forward (after activations/lnf) then backward (before input_grads/lnf).
const std::vector<KernelOutput>& head_forward_outputs();
const std::vector<KernelOutput>& head_backward_outputs();

// MINIPIPE_TEST_PERTURB=<layer>/<name> (layer_NN or head; name one of that part's outputs):
// right after the kernel that makes that buffer runs on the micro-batch holding global sample 0,
// its element 0 moves one ULP up (every step, host and device path, any dump level).
struct Perturb {
  std::string layer, name;
};
// Parses the variable's value; throws std::invalid_argument naming the variable, the value and
// the allowed names.
Perturb parse_perturb(const std::string& value, int n_layer);
// The variable of this process (empty when unset), parsed as parse_perturb.
std::optional<Perturb> perturb_from_environment(int n_layer);

}  // namespace minipipe
