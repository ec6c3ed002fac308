// Deck keys, TOML parsing with toml++ and conversion of command-line overrides.
// All type and unknown-key errors are raised here; range checks live with the code using them.
#include "miniapp/model/config.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <sstream>

#include <toml++/toml.h>

#include "miniapp/io/message_text.hpp"
#include "schedules/schedule.hpp"
#include "schedules/variant.hpp"

namespace minipipe {

using IntList = std::vector<long long>;
using StrList = std::vector<std::string>;

Allowed Allowed::one_of(std::vector<std::string> c) {
  Allowed a;
  a.choices = std::move(c);
  return a;
}
Allowed Allowed::range(double lo, double hi, std::string note) {
  Allowed a;
  a.has_min = a.has_max = true;
  a.min = lo, a.max = hi;
  a.note = std::move(note);
  return a;
}
Allowed Allowed::at_least(double lo, std::string note) {
  Allowed a;
  a.has_min = true;
  a.min = lo;
  a.note = std::move(note);
  return a;
}
Allowed& Allowed::open_below() {
  min_open = true;
  return *this;
}
Allowed& Allowed::open_above() {
  max_open = true;
  return *this;
}
Allowed& Allowed::not_empty() {
  nonempty = true;
  return *this;
}

bool Allowed::ok(double x) const {
  if (!std::isfinite(x)) return false;  // no deck number may be NaN or infinite
  if (has_min && (min_open ? !(x > min) : !(x >= min))) return false;
  if (has_max && (max_open ? !(x < max) : !(x <= max))) return false;
  return true;
}

bool Allowed::ok(const std::string& x) const {
  if (choices.empty()) return true;
  for (const auto& c : choices)
    if (c == x) return true;
  return false;
}

std::string Allowed::text() const {
  std::string t;
  if (!choices.empty()) {
    for (std::size_t i = 0; i < choices.size(); ++i) t += (i ? " | " : "") + choices[i];
  } else if (has_min && has_max && !min_open && !max_open) {
    t = compact_number(min) + " .. " + compact_number(max);
  } else if (has_min && has_max) {
    t = std::string(min_open ? "(" : "[") + compact_number(min) + ", " + compact_number(max) + (max_open ? ")" : "]");
  } else if (has_min) {
    t = std::string(min_open ? "> " : ">= ") + compact_number(min);
  } else if (has_max) {
    t = std::string(max_open ? "< " : "<= ") + compact_number(max);
  }
  if (!note.empty()) t += t.empty() ? note : " (" + note + ")";
  return t;
}

const std::vector<DeckKey>& deck_keys() {
  using A = Allowed;
  static const std::vector<DeckKey> keys = {
      {"model.vocab", 64LL, "vocabulary size V", {}},
      {"model.seq_len", 32LL, "sequence length T of every sample", {}},
      {"model.block_size", 0LL, "rows of the position table wpe (0 = model.seq_len); seq_len <= block_size", {}},
      {"model.channels", 64LL, "embedding width C (divisible by model.n_head)", {}},
      {"model.n_head", 4LL, "attention heads H", {}},
      {"model.n_layer", 4LL, "transformer blocks L", {}},
      {"train.batch", 8LL, "global batch B (sequences per optimizer step)", A::range(1, 16777216)},
      {"train.steps", 30LL, "optimizer steps", A::range(1, 1000000)},
      {"train.seed", 1234LL, "seed of parameter init and synthetic data", A::at_least(0)},
      {"train.mode", std::string("deterministic"), "arithmetic", A::one_of({"deterministic", "fast"})},
      {"train.optimizer", std::string("adamw"), "optimizer", A::one_of({"adamw", "sgd"})},
      // Kernel path of the deterministic kernels (kernels/kernel_path.hpp): the same bits either way.
      {"train.kernel_path", std::string("auto"), "deterministic kernels: auto (host path on host memory), host, device",
       A::one_of({"auto", "host", "device"})},
      // GEMMs of fast mode (kernels/kernel_path.hpp): auto = gemm_det where its SIMD microkernel runs.
      {"train.fast_gemm", std::string("auto"),
       "fast-mode GEMMs: auto (gemm_det on the host path where it has a SIMD microkernel, else blas), blas "
       "(KokkosBlas::gemm: BLAS, cuBLAS, rocBLAS), gemm_det",
       A::one_of({"auto", "blas", "gemm_det"})},
      {"train.lr", 5e-3, "learning rate", A::range(0, 10).open_below()},
      {"train.beta1", 0.9, "AdamW beta1", A::range(0, 1).open_above()},
      {"train.beta2", 0.95, "AdamW beta2", A::range(0, 1).open_above()},
      {"train.eps", 1e-8, "AdamW epsilon", A::at_least(0).open_below()},
      {"train.weight_decay", 0.0, "weight decay (2-D weights only)", A::at_least(0)},
      {"train.momentum", 0.0, "SGD momentum", A::range(0, 1).open_above()},
      {"train.recompute", std::string("none"),
       "what F keeps for backward: none = every value; attention = all but the attention probabilities and output; "
       "block = only each block's input (I recomputes the rest, bitwise the same)",
       A::one_of({"none", "attention", "block"})},
      {"data.source", std::string("synthetic"), "where tokens come from", A::one_of({"synthetic", "hdf5"})},
      {"data.path", std::string(""), "HDF5 token file (data.source = hdf5)", {}},
      {"data.dataset", std::string("tokens"), "int32 [N, seq_len+1] dataset in data.path", {}},
      {"data.min_len", 0LL, "shortest synthetic sequence (0 = seq_len/2); shorter ones are right-padded",
       A::at_least(0)},
      {"pipeline.schedule", StrList{"sequential"},
       "schedule name(s); a list runs a sweep in one launch; \"all\" = every schedule, in `minipipe schedule --list` "
       "order",
       [] {
         auto names = sched::schedule_names();
         names.push_back("csv");
         return A::one_of(names).not_empty();
       }()},
      {"pipeline.microbatches", IntList{1}, "micro-batch count(s) m; a list runs a sweep",
       A::at_least(1, "at most train.batch").not_empty()},
      {"pipeline.dp", 1LL, "data-parallel replicas of the pipeline (launch p*dp ranks)", A::at_least(1)},
      {"pipeline.p", 0LL, "pipeline ranks p; 0 = launched ranks / pipeline.dp (which must equal p otherwise)",
       A::at_least(0)},
      {"pipeline.chunks", 0LL, "model chunks v per rank", A::range(0, 64, "0 = what the schedule needs")},
      {"pipeline.group", 0LL,
       sched::names_reading(sched::kGroup) +
           ": micro-batches per group through the chunks (p = Megatron's depth-first, >= m = breadth-first)",
       A::at_least(0, "0 = p")},
      {"pipeline.memory_cap", 0LL,
       sched::names_reading(sched::kMemoryCap) + ": stored micro-batches per rank (the list scheduling keeps under it)",
       A::at_least(0, "0 = p, 1F1B's")},
      {"pipeline.layers_per_stage", IntList{},
       "explicit layer split over the p*v stages (empty = even; \"auto\" = the split whose slowest stage is "
       "fastest by measured costs, embedding and head counted)",
       A::at_least(0)},
      {"pipeline.costs",
       std::string(""),
       "cost file of `minipipe profile` for layers_per_stage = \"auto\" (empty = a short profiling step at start)",
       {}},
      {"pipeline.csv", std::string(""), "PyTorch-format CSV schedule (used when schedule = \"csv\")", {}},
      {"pipeline.placement", std::string("loop"), "stage placement for CSV schedules", A::one_of({"loop", "v"})},
      {"pipeline.cuda_aware", std::string("auto"), "device buffers straight to MPI", A::one_of({"auto", "on", "off"})},
      // The data-parallel gradient reduction (miniapp/runtime/grad_reduce.hpp): bitwise the same
      // in deterministic mode whatever these say.
      {"pipeline.overlap_allreduce",
       true,
       "start each stage's gradient all-reduce over the replicas when its last W is done (false: after the pipeline)",
       {}},
      {"pipeline.allreduce", std::string("flat"),
       "gradient all-reduce over the replicas: flat (one collective) or hierarchical (two-level: reduce-scatter "
       "inside each node, all-reduce of each shard across nodes, all-gather inside the node; with nodes of unequal "
       "size the leader form: reduce to a node leader, all-reduce among leaders, broadcast inside the node)",
       A::one_of({"flat", "hierarchical"})},
      {"pipeline.allreduce_limbs", std::string("compact"),
       "deterministic all-reduce words: compact (a shared exponent per tensor piece, 8 or 16 bytes per element where "
       "the agreed range fits, else full) or full (four 32-bit limbs, 32 bytes per element)",
       A::one_of({"compact", "full"})},
      {"pipeline.ranks_per_node", 0LL,
       "hierarchical all-reduce: consecutive ranks per node (lets one machine stand for several nodes)",
       A::at_least(0, "0 = the nodes MPI reports (shared memory)")},
      {"pipeline.rank_order", std::string("dp-major"),
       "placement of the p x dp ranks: dp-major (rank = dp * p + pp, a replica's pipeline on consecutive ranks) or "
       "pp-major (rank = pp * dp + dp index, one pipeline rank's replicas on consecutive ranks)",
       A::one_of({"dp-major", "pp-major"})},
      {"pipeline.timeout", 600.0, "seconds any wait for a peer rank may take before the job aborts naming the wait",
       A::at_least(0, "0 = wait forever")},
      {"checkpoint.path", std::string(""), "HDF5 checkpoint written after complete optimizer steps (empty = none)", {}},
      {"checkpoint.every", 0LL, "write the checkpoint every N steps and after the last one",
       A::at_least(0, "0 = after the last step only")},
      {"checkpoint.restart", std::string(""), "continue from this checkpoint (train.steps counts all steps)", {}},
      {"output.dump", std::string(""), "HDF5 dump file (empty = none); a sweep adds _<schedule>_m<M>", {}},
      {"output.dump_level", std::string("full"), "what the dump holds",
       A::one_of({"none", "loss", "grads", "full", "kernels"})},
      {"output.force", false, "overwrite existing output files", {}},
      {"output.json", std::string(""), "JSON report file (empty = none)", {}},
      {"output.svg", std::string(""), "SVG timeline of the last step (empty = none)", {}},
      {"output.trace", std::string(""), "Chrome-trace JSON of the last step (empty = none)", {}},
      {"output.print_every", 1LL, "print a step line every N steps", A::at_least(1)},
      {"output.roofline",
       std::string(""),
       "SVG roofline of the kernel counters (needs profile.kernels; empty = none); a sweep adds _<schedule>_m<M>",
       {}},
      {"output.verify",
       std::string(""),
       "reference dump: verification compares every run's dump with it (bitwise; fast mode 1e-4 normwise, with AdamW "
       "up "
       "to its first update)",
       {}},
      // Built-in kernel counters (kernels/kernel_counters.hpp): Kokkos Tools callbacks miniPipe
      // registers itself; off, nothing is registered.
      {"profile.kernels",
       false,
       "built-in kernel counters: per kernel calls, fenced time, FLOPs, bytes and rates beside a same-run sgemm and "
       "triad; per step fences and host-device copies (kernels are fenced while on, so steps run slower)",
       {}},
      // The executor's fence after each compute action (docs/device-path.md): it gives every
      // action its own end time; off, actions are only enqueued and the fences left are those
      // where MPI or the host reads device memory.
      {"profile.action_fence",
       true,
       "fence after every compute action, so each action's time is its own (the measured bubble, per-rank F/I/W/B, "
       "the time budget and the timelines need it); false: actions are only enqueued, fences remain only where MPI "
       "or the host reads device memory, and the report marks per-action times unavailable",
       {}},
  };
  return keys;
}

std::string help_text(const DeckKey& key) {
  const std::string allowed = key.allowed.text();
  return allowed.empty() ? key.help : key.help + "; allowed: " + allowed;
}

namespace {

// The one list key that also takes a word: pipeline.layers_per_stage = "auto".
const char* const kAutoSplitKey = "pipeline.layers_per_stage";

const char* type_name(const DeckValue& v) {
  switch (v.index()) {
    case 0:
      return "integer";
    case 1:
      return "number";
    case 2:
      return "boolean";
    case 3:
      return "string";
    case 4:
      return "integer or list of integers";
    default:
      return "string or list of strings";
  }
}

[[noreturn]] void bad_type(const std::string& key, const std::string& got, const DeckValue& want,
                           const std::string& origin) {
  throw InputError(origin + ": key '" + key + "' has value " + got + ", but it must be " + type_name(want));
}

std::string node_text(const toml::node& n) {
  std::ostringstream os;
  if (n.is_table())
    os << "a table";
  else if (n.is_array())
    os << "an array";
  else
    n.visit([&](auto&& x) { os << x; });
  return os.str();
}

// Converts a TOML node to the type of the key's default.
DeckValue convert_node(const std::string& key, const toml::node& n, const DeckValue& want, const std::string& origin) {
  switch (want.index()) {
    case 0:
      if (auto v = n.value_exact<int64_t>()) return static_cast<long long>(*v);
      break;
    case 1:
      if (auto v = n.value_exact<double>()) return *v;
      if (auto v = n.value_exact<int64_t>()) return static_cast<double>(*v);
      break;
    case 2:
      if (auto v = n.value_exact<bool>()) return *v;
      break;
    case 3:
      if (auto v = n.value_exact<std::string>()) return *v;
      break;
    case 4: {
      if (auto v = n.value_exact<std::string>(); v && key == kAutoSplitKey && *v == "auto") return *v;
      if (auto v = n.value_exact<int64_t>()) return IntList{static_cast<long long>(*v)};
      if (auto arr = n.as_array()) {
        IntList out;
        for (const auto& e : *arr) {
          auto v = e.value_exact<int64_t>();
          if (!v) bad_type(key, node_text(n), want, origin);
          out.push_back(*v);
        }
        return out;
      }
      break;
    }
    default: {
      if (auto v = n.value_exact<std::string>()) return StrList{*v};
      if (auto arr = n.as_array()) {
        StrList out;
        for (const auto& e : *arr) {
          auto v = e.value_exact<std::string>();
          if (!v) bad_type(key, node_text(n), want, origin);
          out.push_back(*v);
        }
        return out;
      }
      break;
    }
  }
  bad_type(key, node_text(n), want, origin);
}

// "a,b" -> {a, b}; an empty text is the empty list. An empty entry ("2,,4", "2,4,") is an
// error rather than skipped: it is almost always a typo, and dropping it would change the sweep.
StrList split_list(const std::string& key, const std::string& text) {
  StrList out;
  if (text.find_first_not_of(" \t[]\"") == std::string::npos) return out;
  std::size_t start = 0;
  for (int index = 1;; ++index) {
    const std::size_t comma = text.find(',', start);
    const std::string cur = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const auto b = cur.find_first_not_of(" \t[]\"");
    const auto e = cur.find_last_not_of(" \t[]\"");
    if (b == std::string::npos)
      throw InputError("command line: key '" + key + "' has value " + quoted_text(text) + ", whose entry " +
                       std::to_string(index) + " is empty; allowed: a comma-separated list without empty entries");
    out.push_back(cur.substr(b, e - b + 1));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

long long parse_int(const std::string& key, const std::string& text) {
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  const bool whole = !text.empty() && end == text.c_str() + text.size() && end != text.c_str();
  if (whole && errno == ERANGE) {
    // An integer, but past what 64 bits hold: say so, with the range Deck::validate applies (the
    // key's rule, and int's magnitude for every key but the 64-bit seed).
    std::string rule;
    for (const auto& k : deck_keys())
      if (k.name == key) rule = k.allowed.text();
    const std::string bits =
        key == "train.seed" ? "an integer in [" + std::to_string(LLONG_MIN) + ", " + std::to_string(LLONG_MAX) + "]"
                            : "at most 2147483647 in magnitude";
    throw InputError("command line: key '" + key + "' has value " + quoted_text(text) +
                     ", which is out of range; allowed: " + (rule.empty() ? "" : rule + ", ") + bits);
  }
  if (!whole || errno != 0)
    throw InputError("command line: key '" + key + "' has value " + quoted_text(text) + ", but it must be an integer");
  return v;
}

}  // namespace

namespace {
// pipeline.schedule = "all" stands for every named schedule in the variant table's order, so a deck
// that sweeps them all (the demo's) needs no edit when a schedule is added.
void expand_all_schedules(DeckValue& v, const std::string& origin) {
  auto* names = std::get_if<StrList>(&v);
  if (!names || std::find(names->begin(), names->end(), "all") == names->end()) return;
  if (names->size() != 1)
    throw InputError(origin + ": key 'pipeline.schedule' has value " + to_text(v) +
                     "; allowed: \"all\" alone, or a list of schedule names");
  *names = sched::schedule_names();
}
}  // namespace

Deck::Deck() {
  for (const auto& k : deck_keys()) values_[k.name] = k.def;
}

Deck Deck::from_file(const std::string& path) {
  // A directory opens as an empty stream and a FIFO blocks forever: only regular files are decks.
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw InputError("deck: cannot read file " + quoted_text(path) + " (" + std::strerror(errno) +
                     "); pass --deck FILE with an existing TOML deck");
  if (!S_ISREG(st.st_mode))
    throw InputError("deck: key '--deck' has value " + quoted_text(path) + ", which is " +
                     (S_ISDIR(st.st_mode)                          ? "a directory"
                      : S_ISFIFO(st.st_mode)                       ? "a FIFO"
                      : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device"
                                                                   : "not a regular file") +
                     "; allowed: a regular TOML file");
  std::ifstream in(path);
  if (!in)
    throw InputError("deck: cannot read file " + quoted_text(path) +
                     " (missing or not readable); pass --deck FILE with an existing TOML deck");
  std::stringstream ss;
  ss << in.rdbuf();
  return from_string(ss.str(), path);
}

Deck Deck::from_string(const std::string& text, const std::string& origin) {
  Deck d;
  d.source_text_ = text;
  toml::table tbl;
  try {
    tbl = toml::parse(text, origin);
  } catch (const toml::parse_error& e) {
    std::ostringstream os;
    os << origin << ": not valid TOML at line " << e.source().begin.line << ", column " << e.source().begin.column
       << ": " << e.description();
    throw InputError(os.str());
  }
  for (const auto& [section, node] : tbl) {
    const std::string sec(section.str());
    const auto* sub = node.as_table();
    if (!sub)
      throw InputError(origin + ": top-level key " + quoted_text(sec) +
                       " must be a table; allowed sections are model, train, data, pipeline, checkpoint, output");
    for (const auto& [name, value] : *sub) {
      const std::string key = sec + "." + std::string(name.str());
      auto it = d.values_.find(key);
      if (it == d.values_.end())
        throw InputError(origin + ": unknown key " + quoted_text(key) + "; run `minipipe --help` for the list of keys");
      it->second = convert_node(key, value, it->second, origin);
      if (key == "pipeline.schedule") expand_all_schedules(it->second, origin);
    }
  }
  return d;
}

void Deck::set_from_text(const std::string& key, const std::string& text) {
  auto it = values_.find(key);
  if (it == values_.end()) throw InputError("command line: unknown key " + quoted_text(key));
  DeckValue& v = it->second;
  if (key == kAutoSplitKey) {
    if (text == "auto") {
      v = text;
      return;
    }
    v = IntList{};  // the key's list type again after an "auto"
  }
  switch (v.index()) {
    case 0:
      v = parse_int(key, text);
      break;
    case 1: {
      std::size_t pos = 0;
      double x = 0;
      try {
        x = std::stod(text, &pos);
      } catch (const std::exception&) {
        pos = 0;
      }
      if (pos == 0 || pos != text.size())
        throw InputError("command line: key '" + key + "' has value " + quoted_text(text) +
                         ", but it must be a number");
      v = x;
      break;
    }
    case 2:
      if (text == "true" || text == "1" || text == "on")
        v = true;
      else if (text == "false" || text == "0" || text == "off")
        v = false;
      else
        throw InputError("command line: key '" + key + "' has value " + quoted_text(text) +
                         ", but it must be true or false");
      break;
    case 3:
      v = text;
      break;
    case 4: {
      IntList out;
      for (const auto& s : split_list(key, text)) out.push_back(parse_int(key, s));
      v = out;
      break;
    }
    default:
      v = split_list(key, text);
      if (key == "pipeline.schedule") expand_all_schedules(v, "command line");
      break;
  }
}

void Deck::validate() const {
  for (const auto& k : deck_keys()) {
    const Allowed& a = k.allowed;
    const DeckValue& v = at(k.name);
    auto bad = [&](const std::string& shown) {
      throw InputError("deck: key '" + k.name + "' has value " + shown + "; allowed: " + a.text());
    };
    // Integers are narrowed to int where they are used (all but the 64-bit seed): refuse what an
    // int cannot hold here, before a cast wraps it (print_every 2^32 became 0, dp 2^32+1 became 1).
    const bool narrowed = k.name != "train.seed";
    auto fits = [&](long long x) { return !narrowed || (x >= INT_MIN && x <= INT_MAX); };
    auto bad_int = [&](const std::string& shown) {
      const std::string rule = a.text();
      throw InputError("deck: key '" + k.name + "' has value " + shown +
                       "; allowed: " + (rule.empty() ? "" : rule + ", ") + "at most 2147483647 in magnitude");
    };
    switch (v.index()) {
      case 0:
        if (!a.ok(static_cast<double>(std::get<long long>(v)))) bad(to_text(v));
        if (!fits(std::get<long long>(v))) bad_int(to_text(v));
        break;
      case 1:
        if (!a.ok(std::get<double>(v))) bad(to_text(v));
        break;
      case 3:
        if (!a.ok(std::get<std::string>(v))) bad(to_text(v));
        break;
      case 4: {
        const auto& l = std::get<IntList>(v);
        if (a.nonempty && l.empty()) bad("[] (empty)");
        for (std::size_t i = 0; i < l.size(); ++i) {
          if (!a.ok(static_cast<double>(l[i])))
            bad(to_text(v) + " (entry " + std::to_string(i) + ": " + std::to_string(l[i]) + ")");
          if (!fits(l[i])) bad_int(to_text(v) + " (entry " + std::to_string(i) + ": " + std::to_string(l[i]) + ")");
        }
        break;
      }
      case 5: {
        const auto& l = std::get<StrList>(v);
        if (a.nonempty && l.empty()) bad("[] (empty)");
        for (std::size_t i = 0; i < l.size(); ++i)
          if (!a.ok(l[i])) bad(to_text(v) + " (entry " + std::to_string(i) + ": \"" + l[i] + "\")");
        break;
      }
      default:
        break;
    }
  }
}

const DeckValue& Deck::at(const std::string& key) const {
  auto it = values_.find(key);
  if (it == values_.end()) throw std::logic_error("deck key not declared: " + key);
  return it->second;
}

long long Deck::get_int(const std::string& key) const {
  return std::get<long long>(at(key));
}
double Deck::get_double(const std::string& key) const {
  return std::get<double>(at(key));
}
bool Deck::get_bool(const std::string& key) const {
  return std::get<bool>(at(key));
}
const std::string& Deck::get_string(const std::string& key) const {
  return std::get<std::string>(at(key));
}
const std::vector<long long>& Deck::get_int_list(const std::string& key) const {
  return std::get<IntList>(at(key));
}
const std::vector<std::string>& Deck::get_string_list(const std::string& key) const {
  return std::get<StrList>(at(key));
}

namespace {
// A TOML basic string: quotes, backslashes and control characters escaped, so that any value
// (a path with a newline, say) reads back as itself (the deck of /meta and of a checkpoint).
std::string quoted(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      o += '\\';
      o += c;
    } else if (c == '\n') {
      o += "\\n";
    } else if (c == '\t') {
      o += "\\t";
    } else if (u < 0x20 || u == 0x7f) {
      char esc[8];
      std::snprintf(esc, sizeof(esc), "\\u%04X", static_cast<unsigned>(u));
      o += esc;
    } else {
      o += c;
    }
  }
  return o + '"';
}
}  // namespace

std::string to_text(const DeckValue& v) {
  std::ostringstream os;
  switch (v.index()) {
    case 0:
      os << std::get<long long>(v);
      break;
    case 1:
      os << compact_number(std::get<double>(v));
      break;
    case 2:
      os << (std::get<bool>(v) ? "true" : "false");
      break;
    case 3:
      os << quoted(std::get<std::string>(v));
      break;
    case 4: {
      os << '[';
      const auto& l = std::get<IntList>(v);
      for (std::size_t i = 0; i < l.size(); ++i) os << (i ? ", " : "") << l[i];
      os << ']';
      break;
    }
    default: {
      os << '[';
      const auto& l = std::get<StrList>(v);
      for (std::size_t i = 0; i < l.size(); ++i) os << (i ? ", " : "") << quoted(l[i]);
      os << ']';
      break;
    }
  }
  return os.str();
}

std::string Deck::effective_toml() const {
  std::ostringstream os;
  std::string section;
  for (const auto& k : deck_keys()) {
    const auto dot = k.name.find('.');
    const std::string sec = k.name.substr(0, dot);
    if (sec != section) {
      os << (section.empty() ? "" : "\n") << '[' << sec << "]\n";
      section = sec;
    }
    os << k.name.substr(dot + 1) << " = " << to_text(at(k.name)) << '\n';
  }
  return os.str();
}

}  // namespace minipipe
