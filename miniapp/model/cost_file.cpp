// Cost file: JSON written by `minipipe profile`, read back by the split optimizer and the tuner
// with a small strict reader (objects, arrays, numbers, strings, booleans, null).
#include "miniapp/model/cost_file.hpp"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <map>
#include <memory>
#include <sstream>

namespace minipipe {

namespace {

const char* kModes[3] = {"none", "attention", "block"};
// Version 2 added the per-part step costs, the profiled concurrency and the calibration; version 3
// times each size in steps of its m micro-batches and adds W_tail.
const char* kFormat = "minipipe-costs-3";

// ---- a strict JSON reader: enough for the cost file ----
struct Json {
  enum Kind { null, boolean, number, string, array, object } kind = null;
  double num = 0;
  bool b = false;
  std::string str;
  std::vector<Json> items;
  std::map<std::string, Json> fields;
};

class Reader {
 public:
  Reader(const std::string& text, const std::string& origin) : t_(text), origin_(origin) {}
  Json document() {
    Json v = value();
    skip();
    if (i_ != t_.size()) fail("text after the JSON document");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw InputError("cost file " + origin_ + ": not a valid cost file at byte " + std::to_string(i_) + ": " + what);
  }
  void skip() {
    while (i_ < t_.size() && std::isspace(static_cast<unsigned char>(t_[i_]))) ++i_;
  }
  bool eat(char c) {
    skip();
    if (i_ < t_.size() && t_[i_] == c) return ++i_, true;
    return false;
  }
  void expect(char c) {
    if (!eat(c)) fail(std::string("expected '") + c + "'");
  }
  std::string text() {
    expect('"');
    std::string out;
    while (i_ < t_.size() && t_[i_] != '"') {
      if (t_[i_] == '\\') {
        if (++i_ >= t_.size()) break;
        const char e = t_[i_];
        out += e == 'n' ? '\n' : e == 't' ? '\t' : e;
      } else {
        out += t_[i_];
      }
      ++i_;
    }
    if (i_ >= t_.size()) fail("unterminated string");
    ++i_;
    return out;
  }
  Json value() {
    skip();
    if (i_ >= t_.size()) fail("unexpected end");
    Json v;
    const char c = t_[i_];
    if (c == '{') {
      ++i_;
      v.kind = Json::object;
      if (eat('}')) return v;
      do {
        skip();
        const std::string k = text();
        expect(':');
        v.fields[k] = value();
      } while (eat(','));
      expect('}');
    } else if (c == '[') {
      ++i_;
      v.kind = Json::array;
      if (eat(']')) return v;
      do v.items.push_back(value());
      while (eat(','));
      expect(']');
    } else if (c == '"') {
      v.kind = Json::string;
      v.str = text();
    } else if (t_.compare(i_, 4, "true") == 0 || t_.compare(i_, 5, "false") == 0) {
      v.kind = Json::boolean;
      v.b = t_[i_] == 't';
      i_ += v.b ? 4 : 5;
    } else if (t_.compare(i_, 4, "null") == 0) {
      i_ += 4;
    } else {
      const char* start = t_.c_str() + i_;
      char* end = nullptr;
      v.num = std::strtod(start, &end);
      if (end == start || !std::isfinite(v.num)) fail("expected a value");
      v.kind = Json::number;
      i_ += static_cast<std::size_t>(end - start);
    }
    return v;
  }
  const std::string& t_;
  std::string origin_;
  std::size_t i_ = 0;
};

const Json& field(const Json& o, const std::string& key, Json::Kind kind, const std::string& origin) {
  auto it = o.kind == Json::object ? o.fields.find(key) : o.fields.end();
  static const char* kinds[] = {"null", "a boolean", "a number", "a string", "an array", "an object"};
  if (it == o.fields.end())
    throw InputError("cost file " + origin + ": key '" + key + "' is missing; allowed: " + kinds[kind] +
                     " (write the file with `minipipe profile`)");
  if (it->second.kind != kind)
    throw InputError("cost file " + origin + ": key '" + key + "' is " + kinds[it->second.kind] +
                     "; allowed: " + kinds[kind] + " (write the file with `minipipe profile`)");
  return it->second;
}
double number(const Json& o, const std::string& key, const std::string& origin) {
  const double x = field(o, key, Json::number, origin).num;
  if (x < 0)
    throw InputError("cost file " + origin + ": key '" + key + "' has value " + std::to_string(x) +
                     "; allowed: a number >= 0");
  return x;
}

}  // namespace

std::string calibration_text(const Calibration& k) {
  if (!k.measured) return "calibration: none (slowdown 1: the profiled times as they are)";
  char line[400];
  std::snprintf(line, sizeof(line),
                "calibration: %s, %d runs: slowdown %.3f (measured compute / profiled), %.3f ms per action outside "
                "compute, fixed-cost slowdown %.3f, action spread %.3f; step measured %.2f ms, predicted %.2f ms; "
                "makespan measured "
                "%.2f ms, predicted %.2f ms",
                k.config.c_str(), k.runs, k.slowdown, k.action_overhead_ms, k.fixed_slowdown, k.action_cv,
                k.measured_step_ms, k.predicted_step_ms, k.measured_makespan_ms, k.predicted_makespan_ms);
  return line;
}

const char* part_name(int part, int n_layer) {
  static std::vector<std::string> names;
  if (part == 0) return "embedding";
  if (part == n_layer + 1) return "head";
  while (static_cast<int>(names.size()) < n_layer) names.push_back(block_name(static_cast<int>(names.size())));
  return names.at(static_cast<std::size_t>(part - 1)).c_str();
}

SizeCosts CostFile::at(int samples) const {
  if (sizes.empty()) throw InputError("cost file: no micro-batch size was measured");
  const SizeCosts* near = &sizes.front();
  for (const auto& s : sizes)
    if (std::abs(s.samples - samples) < std::abs(near->samples - samples)) near = &s;
  SizeCosts out = *near;
  // Linear in the samples; W_tail too: at the same m, the samples held back for a step's last W
  // grow with the micro-batch.
  const double k = static_cast<double>(samples) / near->samples;
  for (auto& part : out.parts)
    for (auto& c : part) c.F *= k, c.I *= k, c.W *= k, c.kept_bytes *= k, c.work_bytes *= k, c.W_tail *= k;
  out.samples = samples;
  return out;
}

double CostFile::transfer_ms(int samples) const {
  const double bytes = static_cast<double>(samples) * shape.seq_len * shape.channels * real_bytes;
  return latency_ms + bytes * ms_per_byte;
}

void CostFile::check_shape(const ModelShape& s, const std::string& origin) const {
  const std::pair<const char*, std::pair<int, int>> keys[] = {{"model.vocab", {s.vocab, shape.vocab}},
                                                              {"model.seq_len", {s.seq_len, shape.seq_len}},
                                                              {"model.channels", {s.channels, shape.channels}},
                                                              {"model.n_head", {s.n_head, shape.n_head}},
                                                              {"model.n_layer", {s.n_layer, shape.n_layer}}};
  for (const auto& [key, v] : keys)
    if (v.first != v.second)
      throw InputError("deck: key '" + std::string(key) + "' has value " + std::to_string(v.first) +
                       " but the cost file " + origin + " was measured with " + std::to_string(v.second) +
                       "; allowed: the profiled shape (run `minipipe profile` on this deck)");
}

void CostFile::check_setting(const std::string& train_mode, const std::string& exec_backend,
                             const std::string& origin) const {
  if (train_mode != mode)
    throw InputError("deck: key 'train.mode' has value \"" + train_mode + "\" but the cost file " + origin +
                     " was profiled with train.mode = \"" + mode +
                     "\"; allowed: a cost file profiled in the same mode (minipipe profile --train.mode " + train_mode +
                     ")");
  if (exec_backend != backend)
    throw InputError("cost file " + origin + ": key 'backend' has value \"" + backend + "\" but this build runs on " +
                     exec_backend + "; allowed: a cost file profiled on " + exec_backend +
                     " (run `minipipe profile` with this build)");
}

sched::CostModel stage_costs(const CostFile& costs, const StageLayout& layout, int samples, Recompute r) {
  const SizeCosts sc = costs.at(samples);
  const int S = layout.num_stages(), L = costs.shape.n_layer, ri = static_cast<int>(r);
  sched::CostModel cm;
  for (int s = 0; s < S; ++s) {
    PartCost sum;
    auto add = [&](int part) {
      const PartCost& c = sc.parts.at(static_cast<std::size_t>(part))[static_cast<std::size_t>(ri)];
      sum.F += c.F, sum.I += c.I, sum.W += c.W, sum.kept_bytes += c.kept_bytes, sum.work_bytes += c.work_bytes;
      sum.W_tail += c.W_tail;
    };
    if (s == 0) add(0);
    for (int l = layout.first[s]; l < layout.first[s] + layout.count[s]; ++l) add(1 + l);
    if (s == S - 1) add(L + 1);
    const double k = costs.calibration.slowdown;
    cm.F.push_back(k * sum.F), cm.I.push_back(k * sum.I), cm.W.push_back(k * sum.W);
    cm.B.push_back(k * (sum.I + sum.W));
    cm.W_tail.push_back(k * sum.W_tail);
    cm.act.push_back(sum.kept_bytes), cm.act_work.push_back(sum.work_bytes);
  }
  cm.comm = costs.transfer_ms(samples);
  cm.action_overhead = costs.calibration.action_overhead_ms;
  cm.jitter_cv = costs.calibration.action_cv;
  return cm;
}

std::vector<double> rank_fixed_ms(const CostFile& costs, const StageLayout& layout,
                                  const std::vector<int>& stage_to_rank, int p) {
  const int S = layout.num_stages(), L = costs.shape.n_layer;
  std::vector<double> out(static_cast<std::size_t>(p), 0.0);
  if (costs.step_fixed_ms.empty()) return out;
  for (int s = 0; s < S; ++s) {
    double t = 0;
    if (s == 0) t += costs.step_fixed_ms.at(0);
    for (int l = layout.first[s]; l < layout.first[s] + layout.count[s]; ++l)
      t += costs.step_fixed_ms.at(static_cast<std::size_t>(1 + l));
    if (s == S - 1) t += costs.step_fixed_ms.at(static_cast<std::size_t>(L + 1));
    out.at(static_cast<std::size_t>(stage_to_rank.at(static_cast<std::size_t>(s)))) +=
        costs.calibration.fixed_slowdown * t;
  }
  return out;
}

LayerTimes layer_times(const CostFile& costs, int samples, Recompute r) {
  const SizeCosts sc = costs.at(samples);
  const int L = costs.shape.n_layer;
  auto t = [&](int part) {
    const PartCost& c = sc.parts.at(static_cast<std::size_t>(part))[static_cast<std::size_t>(r)];
    return c.F + c.I + c.W + c.W_tail * samples / costs.batch;  // the tail's share of one of m = batch/samples
  };
  LayerTimes lt;
  lt.embedding = t(0), lt.head = t(L + 1);
  for (int l = 0; l < L; ++l) lt.blocks.push_back(t(1 + l));
  return lt;
}

void write_cost_file(const CostFile& c, std::ostream& out) {
  out << std::setprecision(9);
  out << "{\n  \"format\": \"" << kFormat << "\",\n";
  out << "  \"backend\": \"" << c.backend << "\", \"mode\": \"" << c.mode << "\", \"comm_path\": \"" << c.comm_path
      << "\",\n";
  out << "  \"model\": {\"vocab\": " << c.shape.vocab << ", \"seq_len\": " << c.shape.seq_len
      << ", \"channels\": " << c.shape.channels << ", \"n_head\": " << c.shape.n_head
      << ", \"n_layer\": " << c.shape.n_layer << "},\n";
  out << "  \"batch\": " << c.batch << ", \"real_bytes\": " << c.real_bytes << ",\n";
  out << "  \"profiled_ranks\": " << c.profiled_ranks << ",\n";
  out << "  \"step_fixed_ms\": [";
  for (std::size_t k = 0; k < c.step_fixed_ms.size(); ++k) out << (k ? ", " : "") << c.step_fixed_ms[k];
  out << "],\n";
  const Calibration& k = c.calibration;
  out << "  \"calibration\": {\"measured\": " << (k.measured ? "true" : "false") << ", \"ranks\": " << k.ranks
      << ", \"m\": " << k.m << ", \"runs\": " << k.runs << ", \"config\": \"" << k.config
      << "\", \"slowdown\": " << k.slowdown << ", \"action_overhead_ms\": " << k.action_overhead_ms
      << ", \"fixed_slowdown\": " << k.fixed_slowdown << ", \"action_cv\": " << k.action_cv
      << ",\n    \"measured_step_ms\": " << k.measured_step_ms
      << ", \"measured_makespan_ms\": " << k.measured_makespan_ms << ", \"predicted_step_ms\": " << k.predicted_step_ms
      << ", \"predicted_makespan_ms\": " << k.predicted_makespan_ms << "},\n";
  out << "  \"transfer\": {\"measured\": " << (c.transfer_measured ? "true" : "false")
      << ", \"latency_ms\": " << c.latency_ms << ", \"ms_per_byte\": " << c.ms_per_byte << "},\n";
  out << "  \"sizes\": [";
  for (std::size_t k = 0; k < c.sizes.size(); ++k) {
    const SizeCosts& s = c.sizes[k];
    out << (k ? "," : "") << "\n    {\"samples\": " << s.samples << ", \"parts\": [";
    for (std::size_t p = 0; p < s.parts.size(); ++p) {
      out << (p ? "," : "") << "\n      {\"name\": \"" << part_name(static_cast<int>(p), c.shape.n_layer) << "\"";
      for (int r = 0; r < 3; ++r) {
        const PartCost& pc = s.parts[p][static_cast<std::size_t>(r)];
        out << ", \"" << kModes[r] << "\": {\"F\": " << pc.F << ", \"I\": " << pc.I << ", \"W\": " << pc.W
            << ", \"W_tail\": " << pc.W_tail << ", \"kept_bytes\": " << pc.kept_bytes
            << ", \"work_bytes\": " << pc.work_bytes << "}";
      }
      out << "}";
    }
    out << "]}";
  }
  out << "\n  ]\n}\n";
}

CostFile read_cost_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError("cost file '" + path + "' cannot be read; write one with `minipipe profile --out FILE`");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  const Json doc = Reader(text, path).document();
  const std::string& fmt = field(doc, "format", Json::string, path).str;
  if (fmt != kFormat)
    throw InputError("cost file " + path + ": key 'format' has value \"" + fmt + "\"; allowed: " + kFormat +
                     " (write it again with `minipipe profile`)");
  CostFile c;
  c.backend = field(doc, "backend", Json::string, path).str;
  c.mode = field(doc, "mode", Json::string, path).str;
  c.comm_path = field(doc, "comm_path", Json::string, path).str;
  const Json& model = field(doc, "model", Json::object, path);
  c.shape.vocab = static_cast<int>(number(model, "vocab", path));
  c.shape.seq_len = static_cast<int>(number(model, "seq_len", path));
  c.shape.channels = static_cast<int>(number(model, "channels", path));
  c.shape.n_head = static_cast<int>(number(model, "n_head", path));
  c.shape.n_layer = static_cast<int>(number(model, "n_layer", path));
  c.batch = static_cast<int>(number(doc, "batch", path));
  c.real_bytes = static_cast<int>(number(doc, "real_bytes", path));
  c.profiled_ranks = static_cast<int>(number(doc, "profiled_ranks", path));
  for (const Json& x : field(doc, "step_fixed_ms", Json::array, path).items) {
    if (x.kind != Json::number || x.num < 0)
      throw InputError("cost file " + path + ": key 'step_fixed_ms' has an entry that is not a number >= 0");
    c.step_fixed_ms.push_back(x.num);
  }
  if (static_cast<int>(c.step_fixed_ms.size()) != c.shape.n_layer + 2)
    throw InputError("cost file " + path + ": key 'step_fixed_ms' has " + std::to_string(c.step_fixed_ms.size()) +
                     " entries; allowed: n_layer + 2 = " + std::to_string(c.shape.n_layer + 2) +
                     " (embedding, each block, head)");
  const Json& cal = field(doc, "calibration", Json::object, path);
  Calibration& k = c.calibration;
  k.measured = field(cal, "measured", Json::boolean, path).b;
  k.ranks = static_cast<int>(number(cal, "ranks", path));
  k.m = static_cast<int>(number(cal, "m", path));
  k.runs = static_cast<int>(number(cal, "runs", path));
  k.config = field(cal, "config", Json::string, path).str;
  k.slowdown = number(cal, "slowdown", path);
  if (!(k.slowdown > 0))
    throw InputError("cost file " + path + ": key 'slowdown' has value 0; allowed: > 0 (1 = uncalibrated)");
  k.action_overhead_ms = number(cal, "action_overhead_ms", path);
  k.fixed_slowdown = number(cal, "fixed_slowdown", path);
  k.action_cv = number(cal, "action_cv", path);
  if (!(k.fixed_slowdown > 0))
    throw InputError("cost file " + path + ": key 'fixed_slowdown' has value 0; allowed: > 0 (1 = uncalibrated)");
  k.measured_step_ms = number(cal, "measured_step_ms", path);
  k.measured_makespan_ms = number(cal, "measured_makespan_ms", path);
  k.predicted_step_ms = number(cal, "predicted_step_ms", path);
  k.predicted_makespan_ms = number(cal, "predicted_makespan_ms", path);
  const Json& tr = field(doc, "transfer", Json::object, path);
  c.transfer_measured = field(tr, "measured", Json::boolean, path).b;
  c.latency_ms = number(tr, "latency_ms", path);
  c.ms_per_byte = number(tr, "ms_per_byte", path);
  for (const Json& s : field(doc, "sizes", Json::array, path).items) {
    SizeCosts sc;
    sc.samples = static_cast<int>(number(s, "samples", path));
    if (sc.samples < 1) throw InputError("cost file " + path + ": key 'samples' is 0; allowed: >= 1");
    const auto& parts = field(s, "parts", Json::array, path).items;
    if (static_cast<int>(parts.size()) != c.shape.n_layer + 2)
      throw InputError("cost file " + path + ": key 'parts' has " + std::to_string(parts.size()) +
                       " entries; allowed: n_layer + 2 = " + std::to_string(c.shape.n_layer + 2) +
                       " (embedding, each block, head)");
    for (const Json& p : parts) {
      std::array<PartCost, 3> pc;
      for (int r = 0; r < 3; ++r) {
        const Json& m = field(p, kModes[r], Json::object, path);
        pc[static_cast<std::size_t>(r)] = {number(m, "F", path),          number(m, "I", path),
                                           number(m, "W", path),          number(m, "kept_bytes", path),
                                           number(m, "work_bytes", path), number(m, "W_tail", path)};
      }
      sc.parts.push_back(pc);
    }
    c.sizes.push_back(std::move(sc));
  }
  if (c.sizes.empty()) throw InputError("cost file " + path + ": key 'sizes' is empty; allowed: at least one size");
  return c;
}

}  // namespace minipipe
