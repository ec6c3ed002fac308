// The input deck: every key with its type, default and allowed values, read from TOML and
// overridden from the command line (`--section.key VALUE`), validated up front.
#pragma once

#include <map>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

namespace minipipe {

// A bad user-supplied value: the message names the key, the value and what is allowed.
struct InputError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// One deck value. Lists are used for sweeps (schedules, micro-batch counts) and layer splits.
using DeckValue = std::variant<long long, double, bool, std::string, std::vector<long long>, std::vector<std::string>>;

// What a key accepts beyond its type: checked by Deck::validate() and shown by --help, so the
// rule and its text are one datum. Applies to each entry of a list.
struct Allowed {
  std::vector<std::string> choices;  // strings: exactly one of these
  bool has_min = false, has_max = false;
  double min = 0, max = 0;
  bool min_open = false, max_open = false;  // min < x (not <=), x < max
  bool nonempty = false;                    // lists: at least one entry
  std::string note;                         // extra words, e.g. "0 = auto"

  static Allowed one_of(std::vector<std::string> c);
  static Allowed range(double lo, double hi, std::string note = "");  // lo <= x <= hi
  static Allowed at_least(double lo, std::string note = "");
  Allowed& open_below();  // lo < x
  Allowed& open_above();  // x < hi
  Allowed& not_empty();
  bool ok(double x) const;
  bool ok(const std::string& x) const;
  std::string text() const;  // "deterministic | fast", "(0, 10]", ">= 1 (0 = auto)"; "" when anything goes
};

struct DeckKey {
  std::string name;  // "section.key"
  DeckValue def;
  std::string help;
  Allowed allowed;
};

// The full list of keys, in help order.
const std::vector<DeckKey>& deck_keys();
// A key's help line: its description and, where it has one, its Allowed rule.
std::string help_text(const DeckKey& key);

// Deck values by key; every key of deck_keys() is present after load.
class Deck {
 public:
  Deck();  // all defaults
  // Reads a TOML file; unknown keys, wrong types and unreadable files are InputError.
  static Deck from_file(const std::string& path);
  static Deck from_string(const std::string& toml_text, const std::string& origin);

  // Sets one key from command-line text, converting to the key's type.
  void set_from_text(const std::string& key, const std::string& text);

  // Every key against its Allowed rule; InputError names the key, the value and what is allowed.
  void validate() const;

  const DeckValue& value(const std::string& key) const { return at(key); }
  long long get_int(const std::string& key) const;
  double get_double(const std::string& key) const;
  bool get_bool(const std::string& key) const;
  const std::string& get_string(const std::string& key) const;
  const std::vector<long long>& get_int_list(const std::string& key) const;
  const std::vector<std::string>& get_string_list(const std::string& key) const;

  // Deck text as given (for /meta) and the effective values as TOML (for reports).
  const std::string& source_text() const { return source_text_; }
  std::string effective_toml() const;

 private:
  const DeckValue& at(const std::string& key) const;
  std::map<std::string, DeckValue> values_;
  std::string source_text_;
};

std::string to_text(const DeckValue& v);

}  // namespace minipipe
