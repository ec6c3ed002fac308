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

struct DeckKey {
  std::string name;  // "section.key"
  DeckValue def;
  std::string help;
};

// The full list of keys, in help order.
const std::vector<DeckKey>& deck_keys();

// Deck values by key; every key of deck_keys() is present after load.
class Deck {
 public:
  Deck();  // all defaults
  // Reads a TOML file; unknown keys, wrong types and unreadable files are InputError.
  static Deck from_file(const std::string& path);
  static Deck from_string(const std::string& toml_text, const std::string& origin);

  // Sets one key from command-line text, converting to the key's type.
  void set_from_text(const std::string& key, const std::string& text);

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
