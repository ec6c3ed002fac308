// Kernel outputs: the kernel-level dump's lists, made from the tensor tables, and the test hook's parser.
#include "miniapp/model/kernel_outputs.hpp"

#include <array>
#include <cstdlib>
#include <stdexcept>

namespace minipipe {

std::vector<std::uint64_t> KernelOutput::dims(const ModelShape& s, int B) const {
  const std::uint64_t b = static_cast<std::uint64_t>(B), T = s.seq_len, C = s.channels;
  switch (shape) {
    case TensorShape::c:
      return {b, T, C};
    case TensorShape::c3:
      return {b, T, 3 * C};
    case TensorShape::c4:
      return {b, T, 4 * C};
    case TensorShape::v:
      return {b, T, static_cast<std::uint64_t>(s.vocab)};
    case TensorShape::one:
      return {b, T};
    case TensorShape::att:
      return {b, static_cast<std::uint64_t>(s.n_head), T, T};
  }
  return {};
}

namespace {
// The rows of a table that `made` marks, in table order (their names are string literals).
template <std::size_t K>
std::vector<KernelOutput> outputs(const std::array<TensorRow, K>& rows, Made made) {
  std::vector<KernelOutput> out;
  for (const TensorRow& r : rows)
    if (r.made == made) out.push_back({r.name.data(), r.shape});
  return out;
}
}  // namespace

const std::vector<KernelOutput>& block_forward_outputs() {
  static const std::vector<KernelOutput> v = outputs(kBlockTensors, Made::forward);
  return v;
}

const std::vector<KernelOutput>& block_backward_outputs() {
  static const std::vector<KernelOutput> v = outputs(kBlockTensors, Made::backward);
  return v;
}

const std::vector<KernelOutput>& head_forward_outputs() {
  static const std::vector<KernelOutput> v = outputs(kHeadTensors, Made::forward);
  return v;
}

const std::vector<KernelOutput>& head_backward_outputs() {
  static const std::vector<KernelOutput> v = outputs(kHeadTensors, Made::backward);
  return v;
}

namespace {
std::string names_of(const std::vector<KernelOutput>& a, const std::vector<KernelOutput>& b) {
  std::string s;
  for (const auto* list : {&a, &b})
    for (const auto& k : *list) s += (s.empty() ? "" : ", ") + std::string(k.name);
  return s;
}
bool has(const std::vector<KernelOutput>& a, const std::vector<KernelOutput>& b, const std::string& name) {
  for (const auto* list : {&a, &b})
    for (const auto& k : *list)
      if (name == k.name) return true;
  return false;
}
}  // namespace

Perturb parse_perturb(const std::string& value, int n_layer) {
  const std::string allowed = "<layer>/<name> with <layer> one of layer_00.." + block_name(n_layer - 1) +
                              " (names: " + names_of(block_forward_outputs(), block_backward_outputs()) +
                              ") or head (names: " + names_of(head_forward_outputs(), head_backward_outputs()) + ")";
  auto fail = [&](const std::string& why) -> Perturb {
    throw std::invalid_argument("environment variable MINIPIPE_TEST_PERTURB = \"" + value + "\": " + why +
                                "; allowed: " + allowed);
  };
  const auto slash = value.find('/');
  if (slash == std::string::npos) return fail("no '/'");
  Perturb p{value.substr(0, slash), value.substr(slash + 1)};
  if (p.layer == "head") {
    if (!has(head_forward_outputs(), head_backward_outputs(), p.name)) return fail("unknown head output");
    return p;
  }
  bool known_layer = false;
  for (int l = 0; l < n_layer; ++l) known_layer = known_layer || p.layer == block_name(l);
  if (!known_layer) return fail("unknown layer");
  if (!has(block_forward_outputs(), block_backward_outputs(), p.name)) return fail("unknown block output");
  return p;
}

std::optional<Perturb> perturb_from_environment(int n_layer) {
  const char* v = std::getenv("MINIPIPE_TEST_PERTURB");
  if (!v) return std::nullopt;
  return parse_perturb(v, n_layer);
}

}  // namespace minipipe
