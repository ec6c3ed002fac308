// The dataflow order of docs/design.md §5, read from the model's tables (model_tensors.hpp): a block's
// forward and backward-input rows, the head's, the parameter order, and the kernel beside each name.
#include "miniapp/io/dataflow_order.hpp"

#include <array>
#include <cctype>
#include <limits>
#include <string_view>
#include <utility>
#include <vector>

#include "miniapp/io/model_tensors.hpp"

namespace minipipe::io {

namespace {

struct Entry {
  std::string_view name;
  std::string_view kernel;
};

// The rows of a part's tensor table (model_tensors.hpp) that `made` marks, in computation order,
// with `prefix` before each name.
template <std::size_t K>
std::vector<Entry> entries(const std::array<TensorRow, K>& rows, Made made) {
  std::vector<Entry> out;
  for (const TensorRow& r : rows)
    if (r.made == made) out.push_back({r.name, r.producer});
  return out;
}

// A block's forward, in computation order (`kernels/layer_NN/<name>`); activations/layer_NN
// (the second residual add) comes right after.
const std::vector<Entry>& block_forward() {
  static const std::vector<Entry> v = entries(kBlockTensors, Made::forward);
  return v;
}
// A block's backward-input, in computation order; input_grads/layer_NN comes right after.
const std::vector<Entry>& block_backward() {
  static const std::vector<Entry> v = entries(kBlockTensors, Made::backward);
  return v;
}

// The head and the loss, from the final LayerNorm to the gradient it hands the last block, as
// paths relative to the step group: the head's layer output and forward kernel outputs, the loss,
// its backward kernel outputs and the input gradient.
const std::vector<std::pair<std::string, std::string_view>>& head() {
  static const auto v = [] {
    std::vector<std::pair<std::string, std::string_view>> out;
    for (const TensorRow& r : kHeadTensors)
      if (r.made == Made::layer_output) out.emplace_back("activations/" + std::string(r.name), r.producer);
    for (const Entry& e : entries(kHeadTensors, Made::forward))
      out.emplace_back("kernels/head/" + std::string(e.name), e.kernel);
    out.emplace_back("per_sample_loss_sum", "CrossEntropy::sample_sums");
    out.emplace_back("per_sample_tokens", "CrossEntropy::sample_sums");
    out.emplace_back("loss", "CrossEntropy::sample_sums + global loss reduction");
    for (const Entry& e : entries(kHeadTensors, Made::backward))
      out.emplace_back("kernels/head/" + std::string(e.name), e.kernel);
    out.emplace_back("input_grads/lnf", "LayerNorm::backward_input (lnf)");
    return out;
  }();
  return v;
}

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
  std::string base;              // name without the layer prefix
  std::string_view grad_kernel;  // the table row's backward-weight kernel
};

Param param_of(const std::string& name) {
  Param p;
  const auto slash = name.find('/');
  if (slash == std::string::npos) {
    p.base = name;
    for (std::size_t i = 0; i < kEmbeddingParams.size(); ++i)
      if (name == kEmbeddingParams[i].name) {
        p.index = static_cast<std::int64_t>(i);
        p.layer = "embedding";
        p.grad_kernel = kEmbeddingParams[i].grad_kernel;
      }
    for (std::size_t i = 0; i < kHeadParams.size(); ++i)
      if (name == kHeadParams[i].name) {
        p.index = kParamSpan - 10 + static_cast<std::int64_t>(i);
        p.layer = "head";
        p.grad_kernel = kHeadParams[i].grad_kernel;
      }
    return p;
  }
  const std::string layer = name.substr(0, slash);
  p.base = name.substr(slash + 1);
  const std::int64_t l = layer_index(layer);
  if (l < 0) return p;
  p.layer = layer;
  for (std::size_t i = 0; i < kBlockParams.size(); ++i)
    if (p.base == kBlockParams[i].name) {
      p.index = 10 + l * 20 + static_cast<std::int64_t>(i);
      p.grad_kernel = kBlockParams[i].grad_kernel;
    }
  return p;
}

std::string backward_weight_label(const Param& p) {
  return std::string(p.grad_kernel) + " (" + p.base + ") + GradAccum::finalize";
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
  for (std::size_t i = 0; i < head().size(); ++i)
    if (rel == head()[i].first)
      return set(kHeadBase + static_cast<std::int64_t>(i), std::string(head()[i].second), "head");
  const auto slash = rel.find('/');
  const std::string top = rel.substr(0, slash);
  const std::string rest = slash == std::string::npos ? std::string{} : rel.substr(slash + 1);
  if (top == "activations" || top == "input_grads") {
    const std::int64_t l = layer_index(rest);
    if (l < 0) return;
    if (top == "activations")
      return set(kForward + l * kLayerStride + static_cast<std::int64_t>(block_forward().size()),
                 "Elementwise::add (residual 2)", rest);
    return set(kBackward + (kMaxLayers - l) * kLayerStride + static_cast<std::int64_t>(block_backward().size()),
               "Elementwise::add (input gradient)", rest);
  }
  if (top == "kernels") {
    const auto s2 = rest.find('/');
    if (s2 == std::string::npos) return;
    const std::string layer = rest.substr(0, s2), name = rest.substr(s2 + 1);
    const std::int64_t l = layer_index(layer);
    if (l < 0) return;
    const auto& fwd = block_forward();
    for (std::size_t i = 0; i < fwd.size(); ++i)
      if (name == fwd[i].name)
        return set(kForward + l * kLayerStride + static_cast<std::int64_t>(i), std::string(fwd[i].kernel), layer);
    const auto& bwd = block_backward();
    for (std::size_t i = 0; i < bwd.size(); ++i)
      if (name == bwd[i].name)
        return set(kBackward + (kMaxLayers - l) * kLayerStride + static_cast<std::int64_t>(i),
                   std::string(bwd[i].kernel), layer);
    o.layer = layer;  // an unknown kernel output still names its layer
    return;
  }
  if (top == "grads" || top == "params") {
    const Param p = param_of(rest);
    if (p.index < 0) return;
    if (top == "grads") return set(kGrads + (kParamSpan - p.index), backward_weight_label(p), p.layer);
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
