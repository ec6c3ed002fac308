// Cost file: JSON written by `minipipe profile`, read back by the split optimizer and the tuner,
// both through nlohmann-json. Reading is strict: one JSON document (no comments, nothing after
// it), no key twice in an object, every key present with its type.
#include "miniapp/model/cost_file.hpp"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>

#include "schedules/text.hpp"

namespace minipipe {

namespace {

const char* kModes[3] = {"none", "attention", "block"};
// Version 2 added the per-part step costs, the profiled concurrency and the calibration; version 3
// times each size in steps of its m micro-batches and adds W_tail.
const char* kFormat = "minipipe-costs-3";
constexpr long long kMaxInt = 2147483647;  // every integer of the file is narrowed to int

using Json = nlohmann::json;

const char* kind_name(Json::value_t t) {
  switch (t) {
    case Json::value_t::boolean:
      return "a boolean";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
    case Json::value_t::number_float:
      return "a number";
    case Json::value_t::string:
      return "a string";
    case Json::value_t::array:
      return "an array";
    case Json::value_t::object:
      return "an object";
    default:
      return "null";
  }
}

// nlohmann's "[json.exception.parse_error.101] parse error at line 1, column 76: syntax error
// while parsing object - unexpected end of input; expected string literal" as
// "expected string literal (syntax error while parsing object - unexpected end of input)".
std::string parse_problem(const std::string& what) {
  std::string m = what;
  const auto col = m.find("column ");
  if (col != std::string::npos && m.find(": ", col) != std::string::npos) m = m.substr(m.find(": ", col) + 2);
  const auto exp = m.find("; expected ");
  if (exp == std::string::npos) return "expected a JSON value (" + m + ")";
  return m.substr(exp + 2) + " (" + m.substr(0, exp) + ")";
}

// Parses the whole text as one JSON document; InputError naming the file and the byte.
Json parse_document(const std::string& text, const std::string& origin) {
  // Keys seen in each open object, innermost last: a key twice is refused (nlohmann keeps the last).
  std::vector<std::set<std::string>> open;
  std::string twice;
  auto check = [&](int, Json::parse_event_t event, Json& parsed) {
    if (event == Json::parse_event_t::object_start) open.emplace_back();
    if (event == Json::parse_event_t::object_end && !open.empty()) open.pop_back();
    if (event == Json::parse_event_t::key && !open.empty() && !open.back().insert(parsed.get<std::string>()).second &&
        twice.empty())
      twice = parsed.get<std::string>();
    return true;
  };
  Json doc;
  try {
    doc = Json::parse(text, check, /*allow_exceptions=*/true, /*ignore_comments=*/false);
  } catch (const Json::parse_error& e) {
    throw InputError("cost file " + origin + ": not a valid cost file at byte " + std::to_string(e.byte) + ": " +
                     parse_problem(e.what()));
  }
  if (!twice.empty())
    throw InputError("cost file " + origin + ": key '" + twice +
                     "' appears twice in one object; allowed: each key once (write the file with `minipipe profile`)");
  return doc;
}

const Json& field(const Json& o, const std::string& key, Json::value_t kind, const std::string& origin) {
  const auto it = o.is_object() ? o.find(key) : o.end();
  if (it == o.end())
    throw InputError("cost file " + origin + ": key '" + key + "' is missing; allowed: " + kind_name(kind) +
                     " (write the file with `minipipe profile`)");
  if (std::string(kind_name(it->type())) != kind_name(kind))
    throw InputError("cost file " + origin + ": key '" + key + "' is " + kind_name(it->type()) +
                     "; allowed: " + kind_name(kind) + " (write the file with `minipipe profile`)");
  return *it;
}
const std::string& text_of(const Json& o, const std::string& key, const std::string& origin) {
  return field(o, key, Json::value_t::string, origin).get_ref<const std::string&>();
}
bool boolean(const Json& o, const std::string& key, const std::string& origin) {
  return field(o, key, Json::value_t::boolean, origin).get<bool>();
}
// A whole number in [lo, hi], checked in the width the JSON holds (int64, uint64 or double)
// before it is narrowed to int: a vocab of 2^32 + 32 must not read as 32.
int whole(const Json& o, const std::string& key, const std::string& origin, long long lo, long long hi) {
  const Json& j = field(o, key, Json::value_t::number_integer, origin);
  const std::string allowed = "an integer " + std::to_string(lo) + " .. " + std::to_string(hi);
  auto refuse = [&]() -> int { key_error(key, j.dump(), allowed, "", "cost file " + origin); };
  if (j.is_number_unsigned()) {
    const auto u = j.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(hi) || static_cast<long long>(u) < lo) return refuse();
    return static_cast<int>(u);
  }
  if (j.is_number_integer()) {
    const auto v = j.get<std::int64_t>();
    if (v < lo || v > hi) return refuse();
    return static_cast<int>(v);
  }
  const double x = j.get<double>();  // 1e3 is a whole number too; 2.5, NaN and 1e300 are not
  if (!(x >= static_cast<double>(lo) && x <= static_cast<double>(hi)) || x != std::floor(x)) return refuse();
  return static_cast<int>(x);
}

double number(const Json& o, const std::string& key, const std::string& origin) {
  const double x = field(o, key, Json::value_t::number_float, origin).get<double>();
  if (x < 0) key_error(key, std::to_string(x), "a number >= 0", "", "cost file " + origin);
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
      key_error(key, std::to_string(v.first), "the profiled shape (run `minipipe profile` on this deck)",
                " but the cost file " + origin + " was measured with " + std::to_string(v.second));
}

void CostFile::check_setting(const std::string& train_mode, const std::string& exec_backend,
                             const std::string& origin) const {
  if (train_mode != mode)
    key_error("train.mode", "\"" + train_mode + "\"",
              "a cost file profiled in the same mode (minipipe profile --train.mode " + train_mode + ")",
              " but the cost file " + origin + " was profiled with train.mode = \"" + mode + "\"");
  if (exec_backend != backend)
    key_error("backend", "\"" + backend + "\"",
              "a cost file profiled on " + exec_backend + " (run `minipipe profile` with this build)",
              " but this build runs on " + exec_backend, "cost file " + origin);
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
    if (layout.is_first(s)) add(0);
    for (int l = layout.first[s]; l < layout.first[s] + layout.count[s]; ++l) add(1 + l);
    if (layout.is_last(s)) add(L + 1);
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
  std::vector<double> out(static_cast<std::size_t>(p), 0.0);
  if (costs.step_fixed_ms.empty()) return out;
  for (int s = 0; s < layout.num_stages(); ++s)
    out.at(static_cast<std::size_t>(stage_to_rank.at(static_cast<std::size_t>(s)))) +=
        costs.calibration.fixed_slowdown * stage_sum(layout, s, costs.step_fixed_ms);
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
  sched::Json j;
  j["format"] = kFormat;
  j["backend"] = c.backend;
  j["mode"] = c.mode;
  j["comm_path"] = c.comm_path;
  j["model"] = {{"vocab", c.shape.vocab},
                {"seq_len", c.shape.seq_len},
                {"channels", c.shape.channels},
                {"n_head", c.shape.n_head},
                {"n_layer", c.shape.n_layer}};
  j["batch"] = c.batch;
  j["real_bytes"] = c.real_bytes;
  j["profiled_ranks"] = c.profiled_ranks;
  j["step_fixed_ms"] = c.step_fixed_ms;
  const Calibration& k = c.calibration;
  j["calibration"] = {{"measured", k.measured},
                      {"ranks", k.ranks},
                      {"m", k.m},
                      {"runs", k.runs},
                      {"config", k.config},
                      {"slowdown", k.slowdown},
                      {"action_overhead_ms", k.action_overhead_ms},
                      {"fixed_slowdown", k.fixed_slowdown},
                      {"action_cv", k.action_cv},
                      {"measured_step_ms", k.measured_step_ms},
                      {"measured_makespan_ms", k.measured_makespan_ms},
                      {"predicted_step_ms", k.predicted_step_ms},
                      {"predicted_makespan_ms", k.predicted_makespan_ms}};
  j["transfer"] = {{"measured", c.transfer_measured}, {"latency_ms", c.latency_ms}, {"ms_per_byte", c.ms_per_byte}};
  j["sizes"] = sched::Json::array();
  for (const SizeCosts& s : c.sizes) {
    sched::Json parts = sched::Json::array();
    for (std::size_t p = 0; p < s.parts.size(); ++p) {
      sched::Json part = {{"name", part_name(static_cast<int>(p), c.shape.n_layer)}};
      for (int r = 0; r < 3; ++r) {
        const PartCost& pc = s.parts[p][static_cast<std::size_t>(r)];
        part[kModes[r]] = {{"F", pc.F},
                           {"I", pc.I},
                           {"W", pc.W},
                           {"W_tail", pc.W_tail},
                           {"kept_bytes", pc.kept_bytes},
                           {"work_bytes", pc.work_bytes}};
      }
      parts.push_back(part);
    }
    j["sizes"].push_back({{"samples", s.samples}, {"parts", parts}});
  }
  out << sched::json_text(j) << "\n";
}

CostFile read_cost_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError("cost file '" + path + "' cannot be read; write one with `minipipe profile --out FILE`");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  const Json doc = parse_document(text, path);
  const std::string& fmt = text_of(doc, "format", path);
  if (fmt != kFormat)
    key_error("format", "\"" + fmt + "\"", std::string(kFormat) + " (write it again with `minipipe profile`)", "",
              "cost file " + path);
  CostFile c;
  c.backend = text_of(doc, "backend", path);
  c.mode = text_of(doc, "mode", path);
  c.comm_path = text_of(doc, "comm_path", path);
  const Json& model = field(doc, "model", Json::value_t::object, path);
  c.shape.vocab = whole(model, "vocab", path, 1, kMaxInt);
  c.shape.seq_len = whole(model, "seq_len", path, 1, kMaxInt);
  c.shape.channels = whole(model, "channels", path, 1, kMaxInt);
  c.shape.n_head = whole(model, "n_head", path, 1, kMaxInt);
  c.shape.n_layer = whole(model, "n_layer", path, 1, kMaxInt);
  c.batch = whole(doc, "batch", path, 1, kMaxInt);
  c.real_bytes = whole(doc, "real_bytes", path, 4, 8);
  c.profiled_ranks = whole(doc, "profiled_ranks", path, 1, kMaxInt);
  for (const Json& x : field(doc, "step_fixed_ms", Json::value_t::array, path)) {
    if (!x.is_number() || x.get<double>() < 0)
      throw InputError("cost file " + path + ": key 'step_fixed_ms' has an entry that is not a number >= 0");
    c.step_fixed_ms.push_back(x.get<double>());
  }
  if (static_cast<int>(c.step_fixed_ms.size()) != c.shape.n_layer + 2)
    throw InputError("cost file " + path + ": key 'step_fixed_ms' has " + std::to_string(c.step_fixed_ms.size()) +
                     " entries; allowed: n_layer + 2 = " + std::to_string(c.shape.n_layer + 2) +
                     " (embedding, each block, head)");
  const Json& cal = field(doc, "calibration", Json::value_t::object, path);
  Calibration& k = c.calibration;
  k.measured = boolean(cal, "measured", path);
  k.ranks = whole(cal, "ranks", path, 0, kMaxInt);
  k.m = whole(cal, "m", path, 0, kMaxInt);
  k.runs = whole(cal, "runs", path, 0, kMaxInt);
  k.config = text_of(cal, "config", path);
  k.slowdown = number(cal, "slowdown", path);
  if (!(k.slowdown > 0)) key_error("slowdown", "0", "> 0 (1 = uncalibrated)", "", "cost file " + path);
  k.action_overhead_ms = number(cal, "action_overhead_ms", path);
  k.fixed_slowdown = number(cal, "fixed_slowdown", path);
  k.action_cv = number(cal, "action_cv", path);
  if (!(k.fixed_slowdown > 0)) key_error("fixed_slowdown", "0", "> 0 (1 = uncalibrated)", "", "cost file " + path);
  k.measured_step_ms = number(cal, "measured_step_ms", path);
  k.measured_makespan_ms = number(cal, "measured_makespan_ms", path);
  k.predicted_step_ms = number(cal, "predicted_step_ms", path);
  k.predicted_makespan_ms = number(cal, "predicted_makespan_ms", path);
  const Json& tr = field(doc, "transfer", Json::value_t::object, path);
  c.transfer_measured = boolean(tr, "measured", path);
  c.latency_ms = number(tr, "latency_ms", path);
  c.ms_per_byte = number(tr, "ms_per_byte", path);
  for (const Json& s : field(doc, "sizes", Json::value_t::array, path)) {
    SizeCosts sc;
    sc.samples = whole(s, "samples", path, 1, kMaxInt);
    const Json& parts = field(s, "parts", Json::value_t::array, path);
    if (static_cast<int>(parts.size()) != c.shape.n_layer + 2)
      throw InputError("cost file " + path + ": key 'parts' has " + std::to_string(parts.size()) +
                       " entries; allowed: n_layer + 2 = " + std::to_string(c.shape.n_layer + 2) +
                       " (embedding, each block, head)");
    for (const Json& p : parts) {
      std::array<PartCost, 3> pc;
      for (int r = 0; r < 3; ++r) {
        const Json& m = field(p, kModes[r], Json::value_t::object, path);
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
