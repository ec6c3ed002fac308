// `minipipe deck`: prints what deck_keys() holds, so that docs/deck.md's tables are generated
// from the key table (ctest docs_cover_keys_and_links_resolve compares them).
#include "miniapp/tools/deck_tool.hpp"

#include <CLI/CLI.hpp>
#include <iostream>

#include "miniapp/model/config.hpp"
#include "miniapp/tools/command.hpp"

namespace minipipe {

void DeckTool::attach(CLI::App& parent) {
  sub = parent.add_subcommand("deck", "print the effective deck as TOML, or every key as docs/deck.md's tables");
  sub->add_option("--deck", deck_path, "TOML input deck (defaults apply to missing keys)");
  sub->add_flag("--markdown", markdown, "print docs/deck.md's key tables (one per section) instead");
}

int DeckTool::run(const DeckOptions& deck_options, std::ostream& out) {
  if (markdown) {
    out << deck_markdown_tables();
    return 0;
  }
  try {
    const Deck deck = deck_options.load(deck_path);
    deck.validate();
    out << deck.effective_toml();
  } catch (const InputError& e) {
    return print_error(std::cerr, e.what(), kExitUsage);
  }
  return 0;
}

}  // namespace minipipe
