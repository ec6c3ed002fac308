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

DeckValue field_value(const LayerSplit& x) {
  return x.automatic ? DeckValue(std::string("auto")) : DeckValue(x.counts);
}

void set_field(LayerSplit& x, const DeckValue& v) {
  x.automatic = std::holds_alternative<std::string>(v);
  x.counts = x.automatic ? IntList{} : std::get<IntList>(v);
}

const DeckKey* find_deck_key(const std::string& name) {
  for (const auto& k : deck_keys())
    if (k.name == name) return &k;
  return nullptr;
}

std::string commands_text(unsigned flags) {
  std::string t;
  for (const auto& [flag, name] : {std::pair{kRun, "run"}, {kProfile, "profile"}, {kTune, "tune"}, {kScale, "scale"}})
    if (flags & flag) t += (t.empty() ? "" : ", ") + std::string(name);
  return t;
}

std::string key_error_text(const std::string& key, const std::string& value, const std::string& allowed,
                           const std::string& detail, const std::string& where) {
  return where + ": key '" + key + "' has value " + value + detail + "; allowed: " + allowed;
}

void key_error(const std::string& key, const std::string& value, const std::string& allowed, const std::string& detail,
               const std::string& where) {
  throw InputError(key_error_text(key, value, allowed, detail, where));
}

std::string help_text(const DeckKey& key) {
  const std::string allowed = key.allowed.text();
  return allowed.empty() ? key.help : key.help + "; allowed: " + allowed;
}

const char* kind_text(const DeckValue& def) {
  static const char* kinds[] = {"INT", "NUM", "BOOL", "TEXT", "INT[,INT...]", "TEXT[,TEXT...]"};
  return kinds[def.index()];
}

std::string deck_markdown_tables() {
  auto cell = [](const std::string& text) {  // a table cell: '|' would end it
    std::string o;
    for (char c : text) o += c == '|' ? std::string("\\|") : std::string(1, c);
    return o;
  };
  std::ostringstream os;
  std::string section;
  for (const auto& k : deck_keys()) {
    const std::string sec = k.name.substr(0, k.name.find('.'));
    if (sec != section) {
      os << (section.empty() ? "" : "\n") << "### [" << sec << "]\n\n"
         << "| key | type | default | commands | restart | meaning |\n|---|---|---|---|---|---|\n";
      section = sec;
    }
    os << "| `" << k.name << "` | " << cell(kind_text(k.def)) << " | `" << cell(to_text(k.def)) << "` | "
       << commands_text(k.flags) << " | " << (k.flags & kRestartMatch ? "must match" : "") << " | "
       << cell(help_text(k)) << " |\n";
  }
  return os.str();
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

// Converts a TOML node to the type of the key's default (or the word "auto" where the row takes it).
DeckValue convert_node(const DeckKey& row, const toml::node& n, const std::string& origin) {
  const std::string& key = row.name;
  const DeckValue& want = row.def;
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
      if (auto v = n.value_exact<std::string>(); v && (row.flags & kTakesAuto) && *v == "auto") return *v;
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
      key_error(key, quoted_text(text), "a comma-separated list without empty entries",
                ", whose entry " + std::to_string(index) + " is empty", "command line");
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
    const DeckKey* row = find_deck_key(key);
    const std::string rule = row ? row->allowed.text() : "";
    const std::string bits = row && (row->flags & kInt64) ? "an integer in [" + std::to_string(LLONG_MIN) + ", " +
                                                                std::to_string(LLONG_MAX) + "]"
                                                          : "at most 2147483647 in magnitude";
    key_error(key, quoted_text(text), (rule.empty() ? "" : rule + ", ") + bits, ", which is out of range",
              "command line");
  }
  if (!whole || errno != 0)
    throw InputError("command line: key '" + key + "' has value " + quoted_text(text) + ", but it must be an integer");
  return v;
}

}  // namespace

namespace {
// pipeline.schedule = "all" stands for every named schedule in the variant table's order, so a deck
// that sweeps them all (the demo's) needs no edit when a schedule is added.
void expand_all_schedules(const DeckKey& k, DeckValue& v, const std::string& origin) {
  auto* names = std::get_if<StrList>(&v);
  if (!names || std::find(names->begin(), names->end(), "all") == names->end()) return;
  if (names->size() != 1) key_error(k.name, to_text(v), "\"all\" alone, or a list of schedule names", "", origin);
  *names = sched::schedule_names();
}
}  // namespace

Deck::Deck() {
  for (const auto& k : deck_keys()) k.field.set(config_, k.def);
}

Deck Deck::from_file(const std::string& path) {
  // A directory opens as an empty stream and a FIFO blocks forever: only regular files are decks.
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw InputError("deck: cannot read file " + quoted_text(path) + " (" + std::strerror(errno) +
                     "); pass --deck FILE with an existing TOML deck");
  if (!S_ISREG(st.st_mode))
    key_error("--deck", quoted_text(path), "a regular TOML file",
              std::string(", which is ") + (S_ISDIR(st.st_mode)                          ? "a directory"
                                            : S_ISFIFO(st.st_mode)                       ? "a FIFO"
                                            : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device"
                                                                                         : "not a regular file"));
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
      const DeckKey* k = find_deck_key(key);
      if (!k)
        throw InputError(origin + ": unknown key " + quoted_text(key) + "; run `minipipe --help` for the list of keys");
      DeckValue v = convert_node(*k, value, origin);
      if (k->flags & kAllSchedules) expand_all_schedules(*k, v, origin);
      k->field.set(d.config_, v);
    }
  }
  return d;
}

void Deck::set_from_text(const std::string& key, const std::string& text) {
  const DeckKey* k = find_deck_key(key);
  if (!k) throw InputError("command line: unknown key " + quoted_text(key));
  if ((k->flags & kTakesAuto) && text == "auto") return k->field.set(config_, text);
  DeckValue v = k->def;  // the key's type (a list again after an "auto")
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
      if (k->flags & kAllSchedules) expand_all_schedules(*k, v, "command line");
      break;
  }
  k->field.set(config_, v);
}

void Deck::validate() const {
  for (const auto& k : deck_keys()) {
    const Allowed& a = k.allowed;
    const DeckValue v = k.field.get(config_);
    auto bad = [&](const std::string& shown) { key_error(k.name, shown, a.text()); };
    // Integers are narrowed to int where they are used (all but the 64-bit seed): refuse what an
    // int cannot hold here, before a cast wraps it (print_every 2^32 became 0, dp 2^32+1 became 1).
    const bool narrowed = !(k.flags & kInt64);
    auto fits = [&](long long x) { return !narrowed || (x >= INT_MIN && x <= INT_MAX); };
    auto bad_int = [&](const std::string& shown) {
      const std::string rule = a.text();
      key_error(k.name, shown, (rule.empty() ? "" : rule + ", ") + "at most 2147483647 in magnitude");
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

DeckValue Deck::value(const std::string& key) const {
  const DeckKey* k = find_deck_key(key);
  if (!k) throw std::logic_error("deck key not declared: " + key);
  return k->field.get(config_);
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
    os << k.name.substr(dot + 1) << " = " << to_text(k.field.get(config_)) << '\n';
  }
  return os.str();
}

}  // namespace minipipe
