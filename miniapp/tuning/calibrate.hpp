// Measured runs of candidate configurations: the profile's calibration (a short real pipeline run
// against what the profiled part costs predict) and the tuner's --verify runs. Above the run
// command's core (launch/), which they call; below the tools.
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

#include "miniapp/model/config.hpp"
#include "miniapp/model/cost_file.hpp"
#include "miniapp/report/report.hpp"
#include "miniapp/tuning/tuner.hpp"

namespace minipipe {

// Collective over `comm` (p = its size >= 2): runs the reference pipeline (1F1B, even split, no
// recompute, the deck's first m) `runs` times for 2 steps and stores in costs.calibration the
// slowdown (measured compute time of every rank in the second step over the simulated one) and
// the measured and predicted step and makespan. runs = 0 or one rank: uncalibrated (slowdown 1).
// Returns the exit code of a failed run (0 ok); the result is the same on every rank.
int calibrate_costs(const Deck& deck, MPI_Comm comm, CostFile& costs, int runs);

// The deck keys of a configuration as one line of text (rank 0's choice travels this way).
std::string config_keys(const TuneCandidate& c);

// Collective: runs rank 0's configuration `keys` for `steps` steps with every output off; rank 0
// gets the run's report. Returns run_command's exit code.
int run_config(const Deck& deck, MPI_Comm comm, std::string keys, int steps, RunReport& report);

// Whole-step times (ms) of the steps after the first.
std::vector<double> steps_after_first(const RunReport& r);

}  // namespace minipipe
