// Deck keys, TOML parsing with toml++ and conversion of command-line overrides.
// All type and unknown-key errors are raised here; range checks live with the code using them.
#include "config.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <toml++/toml.h>

#include "message_text.hpp"

namespace minipipe {

using IntList = std::vector<long long>;
using StrList = std::vector<std::string>;

const std::vector<DeckKey>& deck_keys() {
  static const std::vector<DeckKey> keys = {
      {"model.vocab", 64LL, "vocabulary size V"},
      {"model.seq_len", 32LL, "sequence length T of every sample"},
      {"model.block_size", 0LL, "rows of the position table wpe (0 = model.seq_len); seq_len <= block_size"},
      {"model.channels", 64LL, "embedding width C (divisible by model.n_head)"},
      {"model.n_head", 4LL, "attention heads H"},
      {"model.n_layer", 4LL, "transformer blocks L"},
      {"train.batch", 8LL, "global batch B (sequences per optimizer step)"},
      {"train.steps", 30LL, "optimizer steps"},
      {"train.seed", 1234LL, "seed of parameter init and synthetic data"},
      {"train.mode", std::string("deterministic"), "deterministic | fast"},
      {"train.optimizer", std::string("adamw"), "adamw | sgd"},
      {"train.lr", 5e-3, "learning rate"},
      {"train.beta1", 0.9, "AdamW beta1"},
      {"train.beta2", 0.95, "AdamW beta2"},
      {"train.eps", 1e-8, "AdamW epsilon"},
      {"train.weight_decay", 0.0, "weight decay (2-D weights only)"},
      {"train.momentum", 0.0, "SGD momentum"},
      {"data.source", std::string("synthetic"), "synthetic | hdf5"},
      {"data.path", std::string(""), "HDF5 token file (data.source = hdf5)"},
      {"data.dataset", std::string("tokens"), "int32 [N, seq_len+1] dataset in data.path"},
      {"data.min_len", 0LL, "shortest synthetic sequence (0 = seq_len/2); shorter ones are right-padded"},
      {"pipeline.schedule", StrList{"sequential"}, "schedule name(s); a list runs a sweep in one launch"},
      {"pipeline.microbatches", IntList{1}, "micro-batch count(s) m; a list runs a sweep"},
      {"pipeline.p", 0LL, "pipeline ranks p; 0 = the launched rank count (which must equal p otherwise)"},
      {"pipeline.chunks", 0LL, "model chunks v per rank (0 = what the schedule needs)"},
      {"pipeline.layers_per_stage", IntList{}, "explicit layer split over the p*v stages (empty = even)"},
      {"pipeline.csv", std::string(""), "PyTorch-format CSV schedule (used when schedule = \"csv\")"},
      {"pipeline.placement", std::string("loop"), "stage placement for CSV schedules: loop | v"},
      {"pipeline.cuda_aware", std::string("auto"), "auto | on | off: device buffers straight to MPI"},
      {"pipeline.timeout", 600.0,
       "seconds any wait for a peer rank may take before the job aborts naming the wait (0 = wait forever)"},
      {"output.dump", std::string(""), "HDF5 dump file (empty = none); a sweep adds _<schedule>_m<M>"},
      {"output.dump_level", std::string("full"), "none | loss | grads | full"},
      {"output.force", false, "overwrite existing output files"},
      {"output.json", std::string(""), "JSON report file (empty = none)"},
      {"output.svg", std::string(""), "SVG timeline of the last step (empty = none)"},
      {"output.trace", std::string(""), "Chrome-trace JSON of the last step (empty = none)"},
      {"output.print_every", 1LL, "print a step line every N steps"},
  };
  return keys;
}

namespace {

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
  std::size_t pos = 0;
  long long v = 0;
  try {
    v = std::stoll(text, &pos);
  } catch (const std::exception&) {
    pos = 0;
  }
  if (pos == 0 || pos != text.size())
    throw InputError("command line: key '" + key + "' has value " + quoted_text(text) + ", but it must be an integer");
  return v;
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
                       " must be a table; allowed sections are model, train, data, pipeline, output");
    for (const auto& [name, value] : *sub) {
      const std::string key = sec + "." + std::string(name.str());
      auto it = d.values_.find(key);
      if (it == d.values_.end())
        throw InputError(origin + ": unknown key " + quoted_text(key) + "; run `minipipe --help` for the list of keys");
      it->second = convert_node(key, value, it->second, origin);
    }
  }
  return d;
}

void Deck::set_from_text(const std::string& key, const std::string& text) {
  auto it = values_.find(key);
  if (it == values_.end()) throw InputError("command line: unknown key " + quoted_text(key));
  DeckValue& v = it->second;
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
      break;
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
// A TOML basic string: quotes and backslashes escaped.
std::string quoted(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    o += c;
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
