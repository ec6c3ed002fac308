// `minipipe tune`: every schedule x m x v x split x recompute predicted by the event simulator fed
// with measured costs; the fastest under a memory cap, optionally run and measured next to it.
#pragma once

#include <mpi.h>

#include <ostream>
#include <string>
#include <vector>

#include "miniapp/model/config.hpp"
#include "miniapp/model/cost_file.hpp"

namespace CLI {
class App;
}

namespace minipipe {

// One candidate configuration and what the simulator predicts for it.
struct TuneCandidate {
  std::string schedule;
  int v = 1, m = 1;
  std::vector<int> split;  // blocks per stage
  bool auto_split = false;
  Recompute recompute = Recompute::none;
  double step_ms = 0;      // predicted step: makespan + the slowest rank's fixed cost
  double makespan_ms = 0;  // simulated pipeline makespan (calibrated costs)
  double fixed_ms = 0;     // the slowest rank's per-step fixed cost (zero, finalize, update)
  double busy_ms = 0;      // simulated compute time summed over ranks
  double bubble = 0;       // simulated bubble fraction
  double peak_bytes = 0;   // predicted peak stored activations of the worst rank
};

// Every configuration for p ranks that the deck's batch allows (m divides train.batch, v the
// schedule accepts with p*v stages), sorted by predicted step time (then memory); those over
// `memory_cap` bytes (0 = none) are left out. `names`: schedules to try (empty = all).
std::vector<TuneCandidate> enumerate_configs(const CostFile& costs, int p, int batch, double memory_cap,
                                             const std::vector<std::string>& names);
// The same prediction for one configuration (the baseline, say).
TuneCandidate predict(const CostFile& costs, int p, const std::string& schedule, int v, int m,
                      const std::vector<int>& split, Recompute r);

// The smallest m (1..max_m) whose simulated bubble is below `target` for each schedule at p,
// with every stage costing the cost file's mean even-split stage (micro-batch size fixed);
// 0 where none is.
struct BubbleAnswer {
  std::string schedule;
  int v = 1, m = 0;
  double bubble = 0;
};
std::vector<BubbleAnswer> smallest_m_for_bubble(const CostFile& costs, int p, int samples, double target, int max_m);

// Collective over `comm` (p = its size >= 2): runs the reference pipeline (1F1B, even split, no
// recompute, the deck's first m) `runs` times for 2 steps and stores in costs.calibration the
// slowdown (measured compute time of every rank in the second step over the simulated one) and
// the measured and predicted step and makespan. runs = 0 or one rank: uncalibrated (slowdown 1).
// Returns the exit code of a failed run (0 ok); the result is the same on every rank.
int calibrate_costs(const Deck& deck, MPI_Comm comm, CostFile& costs, int runs);

struct TuneTool {
  CLI::App* sub = nullptr;
  std::string deck_path, costs_path, schedules;
  int p = 2, verify = 0, top = 10, steps = 6, repeat = 3, rounds = 1, calibrate = 3;
  double memory_cap = 0, bubble_target = 0;
  void attach(CLI::App& parent);
  // Collective when --verify (launch with mpiexec -n p) or without --costs (it profiles).
  int run(const Deck& deck, MPI_Comm comm, std::ostream& out);
};

}  // namespace minipipe
