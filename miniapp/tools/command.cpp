// The deck keys on the command line and the agreement of a collective tool on its input.
#include "miniapp/tools/command.hpp"

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdlib>
#include <iostream>

#include "miniapp/io/message_text.hpp"
#include "miniapp/runtime/comm.hpp"

namespace minipipe {

void DeckOptions::attach(CLI::App& app) {
  for (const auto& k : deck_keys()) {
    auto* o = app.add_option_function<std::string>(
        "--" + k.name, [this, name = k.name](const std::string& v) { overrides[name] = v; }, help_text(k));
    o->default_str(to_text(k.def));
    o->type_name(kind_text(k.def));
    o->group("Deck keys (default shown)");
    key_of[o] = k.name;
  }
}

Deck DeckOptions::load(const std::string& path) const {
  Deck deck;
  if (!path.empty()) deck = Deck::from_file(path);
  for (const auto& [k, val] : overrides) deck.set_from_text(k, val);
  return deck;
}

std::string repeated_option(CLI::App& app, const std::vector<char*>& args,
                            const std::map<const CLI::Option*, std::string>& key_of) {
  CLI::App* sub = nullptr;
  std::map<std::string, std::vector<std::string>> given;  // key -> "--option value" in order
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string a = args[i];
    if (a == "--") break;
    if (!sub) {
      for (CLI::App* s : app.get_subcommands([](CLI::App*) { return true; }))
        if (s->get_name() == a) sub = s;
      if (sub) continue;
    }
    if (a.size() < 2 || a[0] != '-') continue;
    std::string name = a, value;
    bool inline_value = false;
    if (a.rfind("--", 0) == 0) {
      const auto eq = a.find('=');
      if (eq != std::string::npos) name = a.substr(0, eq), value = a.substr(eq + 1), inline_value = true;
    } else if (a.size() > 2) {
      name = a.substr(0, 2), value = a.substr(2), inline_value = true;  // -m4
    }
    const CLI::Option* o = sub ? sub->get_option_no_throw(name) : nullptr;
    if (!o) o = app.get_option_no_throw(name);
    if (!o || o->get_items_expected_max() != 1) continue;  // not an option, a flag or a list option
    if (!inline_value && i + 1 < args.size()) value = args[++i];
    const auto k = key_of.find(o);
    given[k != key_of.end() ? k->second : name].push_back(name + " " + quoted_text(value));
  }
  for (const auto& [key, uses] : given) {
    if (uses.size() < 2) continue;
    std::string list;
    for (const auto& u : uses) list += (list.empty() ? "" : ", ") + u;
    const bool deck_key = key[0] != '-';
    return "command line: " + std::string(deck_key ? "key '" : "option '") + key + "' is given " +
           std::to_string(uses.size()) + " times (" + list + "); allowed: once" +
           (deck_key ? " (a list key takes one comma-separated list, e.g. --pipeline.schedule 1f1b,gpipe)" : "");
  }
  return "";
}

int print_error(std::ostream& err, const std::string& text, int code) {
  err << "minipipe: error: " << escaped_controls(text) << "\n" << std::flush;
  return code;
}

CLI::Validator integer_at_least(long long min) {
  return CLI::Validator(
      [min](std::string& text) -> std::string {
        errno = 0;
        char* end = nullptr;
        const long long v = std::strtoll(text.c_str(), &end, 10);
        if (text.empty() || end != text.c_str() + text.size() || errno != 0 || v < min)
          return "value " + quoted_text(text) + " is not allowed; allowed: an integer >= " + std::to_string(min);
        return {};
      },
      "INT>=" + std::to_string(min));
}

int same_on_all_ranks(int rc, MPI_Comm comm) {
  MPI_Bcast(&rc, 1, MPI_INT, 0, comm);
  return rc;
}

int on_rank_zero(MPI_Comm comm, const std::function<int()>& run) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  return same_on_all_ranks(rank == 0 ? run() : 0, comm);
}

int run_collective_tool(MPI_Comm comm, const std::function<void()>& check, const std::function<int()>& run) {
  std::string message;
  try {
    check();
  } catch (const std::exception& e) {
    message = e.what();
  }
  if (any_rank_failed(comm, message.empty() ? nullptr : &message, std::cerr)) return kExitUsage;
  try {
    return same_on_all_ranks(run(), comm);
  } catch (const InputError& e) {
    return print_error(std::cerr, e.what(), kExitUsage);
  } catch (const std::exception& e) {
    int rank = 0;
    MPI_Comm_rank(comm, &rank);
    print_error(std::cerr, "on rank " + std::to_string(rank) + ": " + e.what(), kExitFailure);
    MPI_Abort(comm, kExitFailure);
  }
  return kExitFailure;
}

}  // namespace minipipe
