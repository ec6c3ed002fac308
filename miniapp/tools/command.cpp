// The deck keys on the command line and the agreement of a collective tool on its input.
#include "miniapp/tools/command.hpp"

#include <CLI/CLI.hpp>
#include <iostream>

#include "miniapp/runtime/comm.hpp"

namespace minipipe {

void DeckOptions::attach(CLI::App& app) {
  for (const auto& k : deck_keys()) {
    auto* o = app.add_option_function<std::string>(
        "--" + k.name, [this, name = k.name](const std::string& v) { overrides[name] = v; }, help_text(k));
    o->default_str(to_text(k.def));
    static const char* kinds[] = {"INT", "NUM", "BOOL", "TEXT", "INT[,INT...]", "TEXT[,TEXT...]"};
    o->type_name(kinds[k.def.index()]);
    o->group("Deck keys (default shown)");
  }
}

Deck DeckOptions::load(const std::string& path) const {
  Deck deck;
  if (!path.empty()) deck = Deck::from_file(path);
  for (const auto& [k, val] : overrides) deck.set_from_text(k, val);
  return deck;
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
    std::cerr << "minipipe: error: " << e.what() << "\n";
    return kExitUsage;
  } catch (const std::exception& e) {
    int rank = 0;
    MPI_Comm_rank(comm, &rank);
    std::cerr << "minipipe: error on rank " << rank << ": " << e.what() << "\n" << std::flush;
    MPI_Abort(comm, kExitFailure);
  }
  return kExitFailure;
}

}  // namespace minipipe
