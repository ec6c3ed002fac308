// `minipipe run`: the command line of a training launch (the deck, its overrides and the run's
// shortcut flags) on top of the run command's core (launch/run.hpp).
#pragma once

#include <mpi.h>

#include <ostream>
#include <string>

#include "miniapp/tools/command.hpp"

namespace CLI {
class App;
}

namespace minipipe {

struct RunTool {
  CLI::App* sub = nullptr;  // the "run" subcommand, set by attach()

  std::string deck_path, schedule, dump, json, restart, verify;
  int m = 0, v = -1;
  bool force = false;

  // Adds "run [--deck F] [--schedule S] [-m M] [-v V] [--dump F] ..." to `parent`.
  void attach(CLI::App& parent, DeckOptions& deck_options);

  // Collective over `comm`: the deck with the overrides and the flags, agreed on every rank (2
  // when bad), then run_command's exit code. A failure during the run is printed; on several
  // ranks (or with an HDF5 file that could not be closed) the job is aborted (3).
  int run(const DeckOptions& deck_options, MPI_Comm comm, std::ostream& out);

 private:
  // The deck of this launch: file, overrides, then the shortcut flags given.
  Deck deck(const DeckOptions& deck_options) const;
};

}  // namespace minipipe
