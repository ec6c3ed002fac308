// The GPT-2 model description: shapes, global parameter names and their stage assignment,
// counter-based initialization, and the split of layers into pipeline stages.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "miniapp/io/model_tensors.hpp"
#include "miniapp/model/config.hpp"

namespace minipipe {

struct ModelShape {
  int vocab = 0, seq_len = 0, channels = 0, n_head = 0, n_layer = 0;
  int block_size = 0;  // rows of the position table (>= seq_len)
};

// Reads and range-checks model.* keys (InputError names key, value and what is allowed).
ModelShape model_shape_from_deck(const Deck& deck);

// One parameter tensor: global name (e.g. "layer_07/qkv_w"), shape and how it is initialized.
struct ParamSpec {
  std::string name;
  std::vector<int> shape;
  enum class Init { normal, zeros, ones } init = Init::normal;
  double std = 0.02;
  bool decay = false;  // weight decay applies (2-D weights)
  std::size_t numel() const;
};

// Layer names used in dumps: "embedding", "layer_00".."layer_{L-1}", "lnf".
std::string block_name(int layer);

// Parameters of the embedding, of block `layer`, and of the head (lnf + lm_head), in the order of
// their tables (miniapp/io/model_tensors.hpp).
std::vector<ParamSpec> embedding_params(const ModelShape& s);
std::vector<ParamSpec> block_params(const ModelShape& s, int layer);
std::vector<ParamSpec> head_params(const ModelShape& s);
std::vector<ParamSpec> all_params(const ModelShape& s);

// Counter-based init: value of element `index` of parameter `name` for `seed`; depends on
// nothing else (never on p, m, rank or schedule). Built from integer hashing and exact
// double arithmetic only, so every platform produces the same bits.
double init_value(std::uint64_t seed, const ParamSpec& p, std::size_t index);
std::uint64_t hash_name(const std::string& name);
std::uint64_t mix64(std::uint64_t x);

// Contiguous layer ranges of the p*v stages: stage s holds blocks [first, first+count).
// Embedding on stage 0, final LN + head + loss on the last stage. With several copies of the
// model (DualPipe), the stages are the copies one after another, `parts` stages each: stage s
// is part s % parts of copy s / parts, the same layers and parameters in every copy.
struct StageLayout {
  std::vector<int> first, count;
  int parts = 0;  // stages of one model copy; 0 = every stage (one copy)
  int num_stages() const { return static_cast<int>(first.size()); }
  int num_parts() const { return parts > 0 ? parts : num_stages(); }
  int part_of(int stage) const { return stage % num_parts(); }
  int copy_of(int stage) const { return stage / num_parts(); }  // 0: the copy dumps and checkpoints write
  bool is_first(int stage) const { return part_of(stage) == 0; }
  bool is_last(int stage) const { return part_of(stage) == num_parts() - 1; }
};

// `copies` copies of the one-copy layout `one`, one after another (DualPipe: 2).
StageLayout model_copies(const StageLayout& one, int copies);

// The sum over stage `stage`'s parts of a per-part table (embedding, block 0 .. n_layer-1, head:
// n_layer + 2 entries): the embedding's on a first part, its blocks', the head's on a last part.
double stage_sum(const StageLayout& layout, int stage, const std::vector<double>& per_part);

// Even split (earlier stages take the remainder) or the explicit list; InputError when the
// explicit split does not add up to n_layer, has a negative entry, or there are more stages than
// layers. `num_stages` are the parts of one model copy; `copies` (DualPipe: 2) only shapes the
// messages, which name the p*v stages of every copy.
StageLayout make_stage_layout(int n_layer, int num_stages, const std::vector<long long>& explicit_split,
                              int copies = 1);

// What F keeps for backward (train.recompute). none: every forward value; attention: all but the
// attention probabilities and output, which I recomputes from qkv; block: only each block's
// (and the head's) input, from which I recomputes the rest. I recomputes with the same kernels
// on the same inputs, so the results are bitwise those of none.
enum class Recompute { none, attention, block };
const char* to_string(Recompute r);
// "none" | "attention" | "block"; InputError naming train.recompute otherwise.
Recompute parse_recompute(const std::string& text);

}  // namespace minipipe
