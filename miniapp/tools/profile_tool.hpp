// `minipipe profile`: profiles every part (runtime/profile.hpp), calibrates against a short real
// pipeline run (tuning/calibrate.hpp), prints a table on rank 0 and writes the cost file.
#pragma once

#include <mpi.h>

#include <ostream>
#include <string>

#include "miniapp/tools/command.hpp"

namespace CLI {
class App;
}

namespace minipipe {

struct ProfileTool {
  CLI::App* sub = nullptr;
  std::string deck_path, out_path;
  int repeat = 5, calibrate = 3;
  bool force = false, concurrent = false;
  void attach(CLI::App& parent);
  // Collective over `comm`: the deck and the output path checked on every rank, then the profile.
  // Rank 0 prints a table and writes the file; returns the exit code (2 bad input, 3 failure).
  int run(const DeckOptions& deck_options, MPI_Comm comm, std::ostream& out);

 private:
  int profile(const Deck& deck, MPI_Comm comm, std::ostream& out);
};

}  // namespace minipipe
