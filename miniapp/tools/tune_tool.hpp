// `minipipe tune`: the tuner's configurations for p ranks from a cost file (or a profile made
// now), the fastest under a memory cap, optionally run and measured next to it (--verify).
#pragma once

#include <mpi.h>

#include <ostream>
#include <string>

#include "miniapp/tools/command.hpp"

namespace CLI {
class App;
}

namespace minipipe {

struct TuneTool {
  CLI::App* sub = nullptr;
  std::string deck_path, costs_path, schedules;
  int p = 2, verify = 0, top = 10, steps = 6, repeat = 3, rounds = 1, calibrate = 3;
  double memory_cap = 0, bubble_target = 0;
  void attach(CLI::App& parent);
  // The deck and the cost file's path checked on every rank, then the tuning. Collective when
  // --verify (launch with mpiexec -n p) or without --costs (it profiles).
  int run(const DeckOptions& deck_options, MPI_Comm comm, std::ostream& out);

 private:
  int tune(const Deck& deck, MPI_Comm comm, std::ostream& out);
};

}  // namespace minipipe
