// The dataflow order of docs/design.md §5 written once as tables: a block's forward and backward-input
// lists, the head's, the model's parameter order, and the kernel label beside each name.
#include "miniapp/io/dataflow_order.hpp"

#include <array>
#include <cctype>
#include <limits>
#include <utility>

namespace minipipe::io {

namespace {

struct Entry {
  const char* name;
  const char* kernel;
};

// A block's forward, in computation order (`kernels/layer_NN/<name>`); activations/layer_NN
// (the second residual add) comes right after.
constexpr std::array<Entry, 14> kBlockForward{{
    {"ln1", "LayerNorm::forward (ln1)"},
    {"ln1_mean", "LayerNorm::forward (ln1)"},
    {"ln1_rstd", "LayerNorm::forward (ln1)"},
    {"qkv", "Linear::forward (qkv_w)"},
    {"att", "Attention::forward"},
    {"atty", "Attention::forward"},
    {"attn_proj", "Linear::forward (attn_proj_w)"},
    {"res1", "Elementwise::add (residual 1)"},
    {"ln2", "LayerNorm::forward (ln2)"},
    {"ln2_mean", "LayerNorm::forward (ln2)"},
    {"ln2_rstd", "LayerNorm::forward (ln2)"},
    {"fc", "Linear::forward (fc_w)"},
    {"gelu", "Gelu::forward"},
    {"fc_proj", "Linear::forward (fc_proj_w)"},
}};

// A block's backward-input, in computation order; input_grads/layer_NN comes right after.
constexpr std::array<Entry, 9> kBlockBackward{{
    {"d_gelu", "Linear::backward_input (fc_proj_w)"},
    {"d_fc", "Gelu::backward_input"},
    {"d_ln2", "Linear::backward_input (fc_w)"},
    {"d_res1_ln2", "LayerNorm::backward_input (ln2)"},
    {"d_res1", "Elementwise::add (residual 1 gradient)"},
    {"d_atty", "Linear::backward_input (attn_proj_w)"},
    {"d_qkv", "Attention::backward_input"},
    {"d_ln1", "Linear::backward_input (qkv_w)"},
    {"d_x_ln1", "LayerNorm::backward_input (ln1)"},
}};

// The head and the loss, from the final LayerNorm to the gradient it hands the last block.
// Paths relative to the step group.
constexpr std::array<Entry, 11> kHead{{
    {"activations/lnf", "LayerNorm::forward (lnf)"},
    {"kernels/head/lnf_mean", "LayerNorm::forward (lnf)"},
    {"kernels/head/lnf_rstd", "LayerNorm::forward (lnf)"},
    {"kernels/head/logits", "Linear::forward (lm_head_w)"},
    {"kernels/head/losses", "CrossEntropy::forward"},
    {"per_sample_loss_sum", "CrossEntropy::sample_sums"},
    {"per_sample_tokens", "CrossEntropy::sample_sums"},
    {"loss", "CrossEntropy::sample_sums + global loss reduction"},
    {"kernels/head/dlogits", "CrossEntropy::backward_input"},
    {"kernels/head/d_lnf", "Linear::backward_input (lm_head_w)"},
    {"input_grads/lnf", "LayerNorm::backward_input (lnf)"},
}};

// Parameter names in model order (miniapp/model.cpp): embedding, then per block, then head.
constexpr std::array<const char*, 2> kEmbeddingParams{{"wte", "wpe"}};
constexpr std::array<const char*, 12> kBlockParams{{"ln1_w", "ln1_b", "qkv_w", "qkv_b", "attn_proj_w", "attn_proj_b",
                                                    "ln2_w", "ln2_b", "fc_w", "fc_b", "fc_proj_w", "fc_proj_b"}};
constexpr std::array<const char*, 3> kHeadParams{{"lnf_w", "lnf_b", "lm_head_w"}};

// Positions inside a step group. Layers are numbered below kMaxLayers; each layer owns a
// window of kLayerStride positions.
constexpr std::int64_t kMaxLayers = 100000;
constexpr std::int64_t kLayerStride = 100;
constexpr std::int64_t kTokens = 0, kTargets = 1, kEmbedding = 2;
constexpr std::int64_t kForward = 1000;
constexpr std::int64_t kHeadBase = 100'000'000;
constexpr std::int64_t kBackward = 200'000'000;
constexpr std::int64_t kGrads = 300'000'000;
constexpr std::int64_t kParams = 400'000'000;
constexpr std::int64_t kParamSpan = 10 + kMaxLayers * 20 + 10;
constexpr std::int64_t kUnknown = 900'000'000;

bool starts_with(const std::string& s, const std::string& p) {
  return s.compare(0, p.size(), p) == 0;
}

// "layer_07" -> 7; -1 when the text is not layer_<digits> or the number is out of range.
std::int64_t layer_index(const std::string& s) {
  if (!starts_with(s, "layer_") || s.size() == 6 || s.size() > 12) return -1;
  std::int64_t v = 0;
  for (std::size_t i = 6; i < s.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(s[i]))) return -1;
    v = 10 * v + (s[i] - '0');
  }
  return v < kMaxLayers ? v : -1;
}

struct Param {
  std::int64_t index = -1;  // in model parameter order; -1 unknown
  std::string layer = "-";
  std::string base;  // name without the layer prefix
};

Param param_of(const std::string& name) {
  Param p;
  const auto slash = name.find('/');
  if (slash == std::string::npos) {
    p.base = name;
    for (std::size_t i = 0; i < kEmbeddingParams.size(); ++i)
      if (name == kEmbeddingParams[i]) {
        p.index = static_cast<std::int64_t>(i);
        p.layer = "embedding";
      }
    for (std::size_t i = 0; i < kHeadParams.size(); ++i)
      if (name == kHeadParams[i]) {
        p.index = kParamSpan - 10 + static_cast<std::int64_t>(i);
        p.layer = "head";
      }
    return p;
  }
  const std::string layer = name.substr(0, slash);
  p.base = name.substr(slash + 1);
  const std::int64_t l = layer_index(layer);
  if (l < 0) return p;
  p.layer = layer;
  for (std::size_t i = 0; i < kBlockParams.size(); ++i)
    if (p.base == kBlockParams[i]) p.index = 10 + l * 20 + static_cast<std::int64_t>(i);
  return p;
}

std::string backward_weight_label(const std::string& base) {
  std::string k;
  if (base == "wte" || base == "wpe")
    k = "Embedding::backward_weight";
  else if (starts_with(base, "ln"))
    k = "LayerNorm::backward_weight";
  else
    k = "Linear::backward_weight";
  return k + " (" + base + ") + GradAccum::finalize";
}

// Fills position/kernel/layer for a path relative to a step group ("kernels/layer_01/qkv").
void place_in_step(const std::string& rel, const std::string& optimizer_update, DatasetOrigin& o) {
  auto set = [&](std::int64_t pos, std::string kernel, std::string layer) {
    o.position = pos;
    o.kernel = std::move(kernel);
    o.layer = std::move(layer);
    o.known = true;
  };
  if (rel == "tokens" || rel == "targets") return set(rel == "tokens" ? kTokens : kTargets, "input data", "-");
  if (rel == "activations/embedding") return set(kEmbedding, "Embedding::forward", "embedding");
  for (std::size_t i = 0; i < kHead.size(); ++i)
    if (rel == kHead[i].name) return set(kHeadBase + static_cast<std::int64_t>(i), kHead[i].kernel, "head");
  const auto slash = rel.find('/');
  const std::string top = rel.substr(0, slash);
  const std::string rest = slash == std::string::npos ? std::string{} : rel.substr(slash + 1);
  if (top == "activations" || top == "input_grads") {
    const std::int64_t l = layer_index(rest);
    if (l < 0) return;
    if (top == "activations")
      return set(kForward + l * kLayerStride + static_cast<std::int64_t>(kBlockForward.size()),
                 "Elementwise::add (residual 2)", rest);
    return set(kBackward + (kMaxLayers - l) * kLayerStride + static_cast<std::int64_t>(kBlockBackward.size()),
               "Elementwise::add (input gradient)", rest);
  }
  if (top == "kernels") {
    const auto s2 = rest.find('/');
    if (s2 == std::string::npos) return;
    const std::string layer = rest.substr(0, s2), name = rest.substr(s2 + 1);
    const std::int64_t l = layer_index(layer);
    if (l < 0) return;
    for (std::size_t i = 0; i < kBlockForward.size(); ++i)
      if (name == kBlockForward[i].name)
        return set(kForward + l * kLayerStride + static_cast<std::int64_t>(i), kBlockForward[i].kernel, layer);
    for (std::size_t i = 0; i < kBlockBackward.size(); ++i)
      if (name == kBlockBackward[i].name)
        return set(kBackward + (kMaxLayers - l) * kLayerStride + static_cast<std::int64_t>(i), kBlockBackward[i].kernel,
                   layer);
    o.layer = layer;  // an unknown kernel output still names its layer
    return;
  }
  if (top == "grads" || top == "params") {
    const Param p = param_of(rest);
    if (p.index < 0) return;
    if (top == "grads") return set(kGrads + (kParamSpan - p.index), backward_weight_label(p.base), p.layer);
    return set(kParams + p.index, optimizer_update + " (" + p.base + ")", p.layer);
  }
}

}  // namespace

DatasetOrigin dataset_origin(const std::string& path, const std::string& optimizer_update) {
  DatasetOrigin o;
  o.path = path;
  o.short_path = starts_with(path, "/") ? path.substr(1) : path;
  o.kernel = "?";
  o.step = "-";
  o.layer = "-";
  o.group = std::numeric_limits<std::int64_t>::max();
  o.position = kUnknown;
  const std::string& p = o.short_path;
  if (starts_with(p, "init/params/")) {
    o.group = -1;
    const Param prm = param_of(p.substr(12));
    o.layer = prm.layer;
    if (prm.index >= 0) {
      o.position = prm.index;
      o.kernel = "init (" + prm.base + ")";
      o.known = true;
    }
    return o;
  }
  if (starts_with(p, "step_")) {
    const auto slash = p.find('/');
    std::int64_t step = 0;
    bool digits = slash != std::string::npos && slash > 5 && slash < 5 + 18;
    for (std::size_t i = 5; digits && i < slash; ++i) {
      if (!std::isdigit(static_cast<unsigned char>(p[i]))) digits = false;
      step = 10 * step + (p[i] - '0');
    }
    if (!digits) return o;
    o.group = step;
    o.step = std::to_string(step);
    place_in_step(p.substr(slash + 1), optimizer_update, o);
  }
  return o;
}

std::string optimizer_update_label(const std::string& deck_text) {
  // The deck in /meta is the resolved TOML deck, one `key = value` per line.
  std::size_t pos = 0;
  while ((pos = deck_text.find("optimizer", pos)) != std::string::npos) {
    const bool line_start = pos == 0 || deck_text[pos - 1] == '\n';
    pos += 9;
    if (!line_start || pos >= deck_text.size() || (deck_text[pos] != ' ' && deck_text[pos] != '=')) continue;
    const auto eol = deck_text.find('\n', pos);
    const std::string line = deck_text.substr(pos, eol == std::string::npos ? std::string::npos : eol - pos);
    if (line.find("\"sgd\"") != std::string::npos) return "Sgd::update";
    return "AdamW::update";
  }
  return "AdamW::update";
}

}  // namespace minipipe::io
