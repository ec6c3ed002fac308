// Dump schema check: builds the list of datasets docs/design.md §5 promises for the dump level and
// compares it with what the file holds (missing, extra, wrong shape, wrong type).
#include "dump_schema.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>
#include <stdexcept>

#include <toml++/toml.h>

namespace minipipe::reference {

namespace {

template <class T>
T deck_value(const toml::table& t, const std::string& section, const std::string& key) {
  const auto v = t[section][key].value<T>();
  if (!v) throw std::runtime_error("/meta@deck has no " + section + "." + key);
  return *v;
}

std::string dims_text(const std::vector<std::uint64_t>& d) {
  std::string s = "[";
  for (std::size_t i = 0; i < d.size(); ++i) s += (i ? "," : "") + std::to_string(d[i]);
  return s + "]";
}

struct Expected {
  std::vector<std::uint64_t> dims;
  std::string type;  // "f32"/"f64" (info.float_type), "int", "float" (either float type)
};

}  // namespace

std::string step_group(int step) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "/step_%04d", step);
  return buf;
}

RunInfo read_run_info(const io::DumpReader& r) {
  RunInfo info;
  info.deck = r.string_attribute("/meta", "deck");
  toml::table t;
  try {
    t = toml::parse(info.deck, std::string("/meta@deck"));
  } catch (const toml::parse_error& e) {
    throw std::runtime_error(std::string("/meta@deck is not TOML: ") + std::string(e.description()));
  }
  Shape& s = info.shape;
  s.vocab = static_cast<int>(r.int_attribute("/meta", "vocab"));
  s.seq_len = static_cast<int>(r.int_attribute("/meta", "seq_len"));
  s.channels = static_cast<int>(r.int_attribute("/meta", "channels"));
  s.n_head = static_cast<int>(r.int_attribute("/meta", "n_head"));
  s.n_layer = static_cast<int>(r.int_attribute("/meta", "n_layer"));
  const auto bs = deck_value<long long>(t, "model", "block_size");
  s.block_size = bs == 0 ? s.seq_len : static_cast<int>(bs);
  // The attributes and the deck must tell the same story.
  const std::pair<const char*, int> same[] = {{"vocab", s.vocab},
                                              {"seq_len", s.seq_len},
                                              {"channels", s.channels},
                                              {"n_head", s.n_head},
                                              {"n_layer", s.n_layer}};
  for (const auto& [key, val] : same)
    if (deck_value<long long>(t, "model", key) != val)
      throw std::runtime_error(std::string("/meta@") + key + " = " + std::to_string(val) + " but the deck says " +
                               std::to_string(deck_value<long long>(t, "model", key)));
  info.B = static_cast<int>(deck_value<long long>(t, "train", "batch"));
  info.steps = static_cast<int>(deck_value<long long>(t, "train", "steps"));
  info.level = deck_value<std::string>(t, "output", "dump_level");
  info.p = static_cast<int>(r.int_attribute("/meta", "p"));
  info.v = static_cast<int>(r.int_attribute("/meta", "v"));
  info.m = static_cast<int>(r.int_attribute("/meta", "m"));
  info.schedule = r.string_attribute("/meta", "schedule");
  info.mode = r.string_attribute("/meta", "mode");
  Optimizer& o = info.opt;
  o.kind = deck_value<std::string>(t, "train", "optimizer");
  o.lr = deck_value<double>(t, "train", "lr");
  o.beta1 = deck_value<double>(t, "train", "beta1");
  o.beta2 = deck_value<double>(t, "train", "beta2");
  o.eps = deck_value<double>(t, "train", "eps");
  o.weight_decay = deck_value<double>(t, "train", "weight_decay");
  o.momentum = deck_value<double>(t, "train", "momentum");
  // The float type of the run's tensors (float32, or double in a MINIPIPE_DOUBLE build), read
  // from a tensor the level dumps; check_schema then holds every tensor to it.
  for (const char* probe : {"/init/params/wte", "/step_0000/activations/embedding"})
    if (r.has_dataset(probe)) {
      info.float_type = r.info(probe).type_text;
      break;
    }
  return info;
}

std::vector<std::string> check_schema(const io::DumpReader& r, const RunInfo& info) {
  std::vector<std::string> problems;
  // /meta attributes docs/design.md §5 lists.
  const auto names = r.attribute_names("/meta");
  for (const char* a : {"vocab", "seq_len", "channels", "n_head", "n_layer", "schedule", "p", "v", "m", "dp", "mode",
                        "backend", "versions", "deck"})
    if (std::find(names.begin(), names.end(), a) == names.end())
      problems.push_back("/meta: attribute '" + std::string(a) + "' missing");

  const std::string& lv = info.level;
  if (lv != "loss" && lv != "grads" && lv != "full" && lv != "kernels") {
    problems.push_back("/meta@deck: output.dump_level = '" + lv +
                       "'; a dump file exists only for loss | grads | full | kernels");
    return problems;
  }
  const bool kernels = lv == "kernels", full = lv == "full" || kernels, grads = lv == "grads" || full;
  const Shape& s = info.shape;
  const std::uint64_t B = info.B, T = s.seq_len, C = s.channels;
  std::map<std::string, Expected> want;
  const auto params = parameter_table(s);
  if (grads)
    for (const auto& [name, dims] : params) want["/init/params/" + name] = {dims, "f"};
  for (int k = 0; k < info.steps; ++k) {
    const std::string g = step_group(k);
    want[g + "/tokens"] = {{B, T}, "int"};
    want[g + "/targets"] = {{B, T}, "int"};
    want[g + "/loss"] = {{}, "float"};
    want[g + "/per_sample_loss_sum"] = {{B}, "float"};
    want[g + "/per_sample_tokens"] = {{B}, "int"};
    if (full) {
      want[g + "/activations/embedding"] = {{B, T, C}, "f"};
      for (int l = 0; l < s.n_layer; ++l) {
        want[g + "/activations/" + layer_name(l)] = {{B, T, C}, "f"};
        want[g + "/input_grads/" + layer_name(l)] = {{B, T, C}, "f"};
      }
      want[g + "/activations/lnf"] = {{B, T, C}, "f"};
      want[g + "/input_grads/lnf"] = {{B, T, C}, "f"};
    }
    if (kernels)  // docs/design.md §5's kernel level, as the reference model's table lists it
      for (const KernelTensor& k : kernel_tensors()) {
        const auto dims = kernel_tensor_dims(k, s, info.B);
        if (k.scope == "head")
          want[g + "/kernels/head/" + k.name] = {dims, "f"};
        else
          for (int l = 0; l < s.n_layer; ++l) want[g + "/kernels/" + layer_name(l) + "/" + k.name] = {dims, "f"};
      }
    if (grads)
      for (const auto& [name, dims] : params) {
        want[g + "/grads/" + name] = {dims, "f"};
        want[g + "/params/" + name] = {dims, "f"};
      }
  }
  if (grads && info.float_type != "f32" && info.float_type != "f64")
    problems.push_back("float tensors have type '" + info.float_type + "'; allowed: f32 | f64");

  std::map<std::string, io::DatasetInfo> have;
  for (auto& d : r.list_datasets({"/meta"})) have.emplace(d.path, d);
  for (const auto& [path, e] : want) {
    auto it = have.find(path);
    if (it == have.end()) {
      problems.push_back(path + ": missing (dump level " + lv + " promises it, shape " + dims_text(e.dims) + ")");
      continue;
    }
    const io::DatasetInfo& d = it->second;
    if (d.dims != e.dims) problems.push_back(path + ": shape " + dims_text(d.dims) + ", expected " + dims_text(e.dims));
    const bool is_float = d.value_class == io::ValueClass::floating;
    const bool is_int = d.value_class == io::ValueClass::signed_int || d.value_class == io::ValueClass::unsigned_int;
    if ((e.type == "int" && !is_int) || (e.type == "float" && !is_float) ||
        (e.type == "f" && d.type_text != info.float_type))
      problems.push_back(path + ": type " + d.type_text + ", expected " +
                         (e.type == "f"     ? info.float_type
                          : e.type == "int" ? "an integer"
                                            : "a float"));
    if (path.size() > 7 && path.compare(path.size() - 7, 7, "/tokens") == 0 && d.type_text != "i32")
      problems.push_back(path + ": type " + d.type_text + ", docs/design.md §5 says int32");
    if (path.size() > 8 && path.compare(path.size() - 8, 8, "/targets") == 0 && d.type_text != "i32")
      problems.push_back(path + ": type " + d.type_text + ", docs/design.md §5 says int32");
  }
  for (const auto& [path, d] : have)
    if (!want.count(path)) problems.push_back(path + ": not in the docs/design.md §5 layout for dump level " + lv);
  return problems;
}

}  // namespace minipipe::reference
