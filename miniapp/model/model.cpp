// Model description: parameter naming, initialization by (seed, name, index) and stage layout.
// Pure host code; the Kokkos storage of parameters lives in stage.cpp.
#include "miniapp/model/model.hpp"

#include <cmath>
#include <sstream>

namespace minipipe {

ModelShape model_shape_from_deck(const Deck& deck) {
  ModelShape s;
  const ModelConfig& m = deck.config().model;
  auto positive = [&](const char* key, long long v, int& out, long long max) {
    if (v <= 0 || v > max) key_error(key, std::to_string(v), "an integer in [1, " + std::to_string(max) + "]");
    out = static_cast<int>(v);
  };
  positive("model.vocab", m.vocab, s.vocab, 1LL << 24);
  positive("model.seq_len", m.seq_len, s.seq_len, 1LL << 16);
  positive("model.channels", m.channels, s.channels, 1LL << 16);
  positive("model.n_head", m.n_head, s.n_head, 1LL << 10);
  positive("model.n_layer", m.n_layer, s.n_layer, 1LL << 10);
  const long long bs = m.block_size;
  if (bs < 0 || bs > (1LL << 16))
    key_error("model.block_size", std::to_string(bs), "0 (= model.seq_len) or an integer in [1, 65536]");
  s.block_size = bs == 0 ? s.seq_len : static_cast<int>(bs);
  if (s.seq_len > s.block_size)
    key_error("model.seq_len", std::to_string(s.seq_len), "seq_len <= block_size",
              ", longer than the position table (model.block_size = " + std::to_string(s.block_size) + ")");
  if (s.channels % s.n_head != 0)
    key_error("model.channels", std::to_string(s.channels), "a multiple of model.n_head",
              ", which is not divisible by model.n_head = " + std::to_string(s.n_head));
  return s;
}

std::size_t ParamSpec::numel() const {
  std::size_t n = 1;
  for (int d : shape) n *= static_cast<std::size_t>(d);
  return n;
}

std::string block_name(int layer) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "layer_%02d", layer);
  return buf;
}

namespace {
std::vector<int> param_dims(ParamShape shape, const ModelShape& s) {
  const int V = s.vocab, P = s.block_size, C = s.channels;
  switch (shape) {
    case ParamShape::v_c:
      return {V, C};
    case ParamShape::p_c:
      return {P, C};
    case ParamShape::c:
      return {C};
    case ParamShape::c3:
      return {3 * C};
    case ParamShape::c4:
      return {4 * C};
    case ParamShape::c3_c:
      return {3 * C, C};
    case ParamShape::c_c:
      return {C, C};
    case ParamShape::c4_c:
      return {4 * C, C};
    case ParamShape::c_c4:
      return {C, 4 * C};
  }
  return {};
}

// The specs of one table (model_tensors.hpp), names prefixed by `prefix` ("layer_07/" or "").
template <std::size_t K>
std::vector<ParamSpec> specs_of(const std::array<ParamRow, K>& rows, const ModelShape& s, const std::string& prefix) {
  std::vector<ParamSpec> out;
  for (const ParamRow& r : rows) {
    ParamSpec p;
    p.name = prefix + std::string(r.name);
    p.shape = param_dims(r.shape, s);
    p.init = r.init == ParamInit::normal  ? ParamSpec::Init::normal
             : r.init == ParamInit::zeros ? ParamSpec::Init::zeros
                                          : ParamSpec::Init::ones;
    // GPT-2 scales the residual projections by 1/sqrt(2L).
    p.std = r.residual ? r.std / std::sqrt(2.0 * s.n_layer) : r.std;
    p.decay = r.decay;
    out.push_back(std::move(p));
  }
  return out;
}
}  // namespace

std::vector<ParamSpec> embedding_params(const ModelShape& s) {
  return specs_of(kEmbeddingParams, s, "");
}

std::vector<ParamSpec> block_params(const ModelShape& s, int layer) {
  return specs_of(kBlockParams, s, block_name(layer) + "/");
}

std::vector<ParamSpec> head_params(const ModelShape& s) {
  return specs_of(kHeadParams, s, "");
}

std::vector<ParamSpec> all_params(const ModelShape& s) {
  auto out = embedding_params(s);
  for (int l = 0; l < s.n_layer; ++l) {
    auto b = block_params(s, l);
    out.insert(out.end(), b.begin(), b.end());
  }
  auto h = head_params(s);
  out.insert(out.end(), h.begin(), h.end());
  return out;
}

std::uint64_t mix64(std::uint64_t x) {
  // splitmix64 finalizer: a bijective integer mix, identical on every platform.
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

std::uint64_t hash_name(const std::string& name) {
  std::uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a
  for (unsigned char c : name) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

double init_value(std::uint64_t seed, const ParamSpec& p, std::size_t index) {
  switch (p.init) {
    case ParamSpec::Init::zeros:
      return 0.0;
    case ParamSpec::Init::ones:
      return 1.0;
    case ParamSpec::Init::normal:
      break;
  }
  // Irwin-Hall: the sum of 4 uniforms on [0,1) has mean 2 and variance 1/3; no transcendental
  // function is involved, so the value is the same on every libm.
  const std::uint64_t key = mix64(seed ^ mix64(hash_name(p.name)) ^ mix64(index * 0x2545f4914f6cdd1dULL));
  double sum = 0;
  std::uint64_t state = key;
  for (int i = 0; i < 4; ++i) {
    state = mix64(state + static_cast<std::uint64_t>(i));
    sum += static_cast<double>(state >> 11) * (1.0 / 9007199254740992.0);  // 53-bit uniform
  }
  return (sum - 2.0) * 1.7320508075688772 * p.std;  // sqrt(3) scales variance 1/3 to 1
}

StageLayout make_stage_layout(int n_layer, int num_stages, const std::vector<long long>& split, int copies) {
  StageLayout lay;
  // "N stages (p*v)" counts every stage; with several model copies (DualPipe) the limit and the
  // split are per part of one copy, and the message says both numbers.
  const std::string stages =
      std::to_string(num_stages * copies) + " stages (p*v)" +
      (copies > 1 ? ", " + std::to_string(copies) + " model copies of " + std::to_string(num_stages) + " parts each,"
                  : std::string());
  if (num_stages > n_layer)
    throw InputError("pipeline: " + stages + " but model.n_layer = " + std::to_string(n_layer) +
                     "; allowed: at most one stage per transformer block (dualpipe: its stages are the p parts of "
                     "one model copy)");
  if (!split.empty()) {
    const char* const key = "pipeline.layers_per_stage";
    std::string value = "[";
    for (long long c : split) value += (value.size() > 1 ? ", " : "") + std::to_string(c);
    value += "]";
    if (static_cast<int>(split.size()) != num_stages)
      key_error(key, value, "one entry per stage (dualpipe: per part of one model copy, p entries)",
                ", which has " + std::to_string(split.size()) + " entries but there are " + stages);
    long long total = 0;
    for (long long c : split) {
      if (c < 0)
        key_error(key, value, "counts >= 0 that add up to model.n_layer",
                  ", with a negative entry " + std::to_string(c));
      total += c;
    }
    if (total != n_layer)
      key_error(key, value, "counts that add up to model.n_layer",
                ", which adds up to " + std::to_string(total) + " but model.n_layer = " + std::to_string(n_layer));
    int first = 0;
    for (long long c : split) {
      lay.first.push_back(first);
      lay.count.push_back(static_cast<int>(c));
      first += static_cast<int>(c);
    }
    return lay;
  }
  int first = 0;
  for (int s = 0; s < num_stages; ++s) {
    const int c = n_layer / num_stages + (s < n_layer % num_stages ? 1 : 0);
    lay.first.push_back(first);
    lay.count.push_back(c);
    first += c;
  }
  return lay;
}

StageLayout model_copies(const StageLayout& one, int copies) {
  StageLayout out;
  out.parts = one.num_stages();
  for (int c = 0; c < copies; ++c) {
    out.first.insert(out.first.end(), one.first.begin(), one.first.end());
    out.count.insert(out.count.end(), one.count.begin(), one.count.end());
  }
  return out;
}

double stage_sum(const StageLayout& layout, int stage, const std::vector<double>& per_part) {
  const std::size_t s = static_cast<std::size_t>(stage);
  double t = layout.is_first(stage) ? per_part.at(0) : 0.0;
  for (int l = layout.first.at(s); l < layout.first.at(s) + layout.count.at(s); ++l)
    t += per_part.at(static_cast<std::size_t>(1 + l));
  return layout.is_last(stage) ? t + per_part.back() : t;
}

const char* to_string(Recompute r) {
  return r == Recompute::none ? "none" : r == Recompute::attention ? "attention" : "block";
}

Recompute parse_recompute(const std::string& text) {
  for (Recompute r : {Recompute::none, Recompute::attention, Recompute::block})
    if (text == to_string(r)) return r;
  key_error("train.recompute", "\"" + text + "\"", "none | attention | block");
}

}  // namespace minipipe
