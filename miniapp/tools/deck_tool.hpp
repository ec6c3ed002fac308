// `minipipe deck`: the deck keys as data: the effective deck (a file and the command line's
// overrides, every default filled in) as TOML, or docs/deck.md's key tables (--markdown).
#pragma once

#include <ostream>
#include <string>

namespace CLI {
class App;
}

namespace minipipe {

struct DeckOptions;

struct DeckTool {
  CLI::App* sub = nullptr;  // the "deck" subcommand, set by attach()
  std::string deck_path;
  bool markdown = false;

  // Adds the subcommand "deck" to `parent`.
  void attach(CLI::App& parent);

  // Prints the tables (--markdown) or the validated effective deck to `out`; 0, or 2 after one
  // error message on stderr for a bad deck.
  int run(const DeckOptions& deck_options, std::ostream& out);
};

}  // namespace minipipe
