// `minipipe run`: one launch runs every (schedule, m) of the deck's sweep from the same initial
// state, dumps each to HDF5, prints a step line per step and a table, writes reports.
#pragma once

#include <mpi.h>

#include <ostream>
#include <string>

#include "miniapp/model/config.hpp"
#include "miniapp/report/report.hpp"

namespace minipipe {

// Validates the deck (read from `deck_path`, empty when none) and every input and output path on
// every rank, agreeing before anything runs, then runs. Returns the exit code: 0 ok, 2 bad input,
// 3 when the verification failed (a sweep's dumps that differ included) or the run diverged (every
// rank returns it after the dump kept the completed steps). Other failures during the run throw.
// `reports` (when given) receives rank 0's report of every run of the launch (empty elsewhere).
int run_command(const Deck& deck, const std::string& deck_path, MPI_Comm comm, std::ostream& out,
                std::vector<RunReport>* reports = nullptr);

}  // namespace minipipe
