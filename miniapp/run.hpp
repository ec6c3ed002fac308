// `minipipe run`: one launch runs every (schedule, m) of the deck's sweep from the same initial
// state, dumps each to HDF5, prints a step line per step and a table, writes reports.
#pragma once

#include <mpi.h>

#include <ostream>
#include <string>

#include "config.hpp"

namespace minipipe {

// Validates the deck on every rank (InputError on all ranks alike), then runs. Returns the exit
// code: 0 ok, 1 when a dump differs from the reference run of the sweep.
int run_command(const Deck& deck, MPI_Comm comm, std::ostream& out);

// Collective: true when any rank passes an error. The lowest failing rank's message is printed
// once, by rank 0, so a problem seen on one rank only (a node-local file) is still named.
bool any_rank_failed(MPI_Comm comm, const std::string* error, std::ostream& err);

}  // namespace minipipe
