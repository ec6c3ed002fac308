// Kernel outputs: the name tables of the kernel-level dump and the test hook's parser.
#include "miniapp/model/kernel_outputs.hpp"

#include <cstdlib>
#include <stdexcept>

namespace minipipe {

std::vector<std::uint64_t> KernelOutput::dims(const ModelShape& s, int B) const {
  const std::uint64_t b = static_cast<std::uint64_t>(B), T = s.seq_len, C = s.channels;
  switch (shape) {
    case btc:
      return {b, T, C};
    case bt3c:
      return {b, T, 3 * C};
    case bt4c:
      return {b, T, 4 * C};
    case btv:
      return {b, T, static_cast<std::uint64_t>(s.vocab)};
    case bt:
      return {b, T};
    case bhtt:
      return {b, static_cast<std::uint64_t>(s.n_head), T, T};
  }
  return {};
}

const std::vector<KernelOutput>& block_forward_outputs() {
  using K = KernelOutput;
  static const std::vector<K> v = {{"ln1", K::btc},   {"ln1_mean", K::bt}, {"ln1_rstd", K::bt},   {"qkv", K::bt3c},
                                   {"att", K::bhtt},  {"atty", K::btc},    {"attn_proj", K::btc}, {"res1", K::btc},
                                   {"ln2", K::btc},   {"ln2_mean", K::bt}, {"ln2_rstd", K::bt},   {"fc", K::bt4c},
                                   {"gelu", K::bt4c}, {"fc_proj", K::btc}};
  return v;
}

const std::vector<KernelOutput>& block_backward_outputs() {
  using K = KernelOutput;
  static const std::vector<K> v = {{"d_gelu", K::bt4c},    {"d_fc", K::bt4c},  {"d_ln2", K::btc},
                                   {"d_res1_ln2", K::btc}, {"d_res1", K::btc}, {"d_atty", K::btc},
                                   {"d_qkv", K::bt3c},     {"d_ln1", K::btc},  {"d_x_ln1", K::btc}};
  return v;
}

const std::vector<KernelOutput>& head_forward_outputs() {
  using K = KernelOutput;
  static const std::vector<K> v = {{"lnf_mean", K::bt}, {"lnf_rstd", K::bt}, {"logits", K::btv}, {"losses", K::bt}};
  return v;
}

const std::vector<KernelOutput>& head_backward_outputs() {
  using K = KernelOutput;
  static const std::vector<K> v = {{"dlogits", K::btv}, {"d_lnf", K::btc}};
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
