// The tuner's search: every schedule x m x v x split x recompute predicted by the event simulator
// fed with measured costs (a cost file), sorted by predicted step time, under a memory cap.
#pragma once

#include <string>
#include <vector>

#include "miniapp/model/cost_file.hpp"
#include "miniapp/report/time_budget.hpp"

namespace minipipe {

// One candidate configuration and what the simulator predicts for it.
struct TuneCandidate {
  std::string schedule;
  int v = 1, m = 1;
  std::vector<int> split;  // blocks per stage
  bool auto_split = false;
  Recompute recompute = Recompute::none;
  int memory_cap = 0;      // a capped schedule's pipeline.memory_cap; 0 = its default, p
  double step_ms = 0;      // predicted step: makespan + the slowest rank's fixed cost
  double makespan_ms = 0;  // simulated pipeline makespan (calibrated costs)
  double fixed_ms = 0;     // the slowest rank's per-step fixed cost (zero, finalize, update, a sum of model copies)
  double busy_ms = 0;      // simulated compute time summed over ranks
  double bubble = 0;       // simulated bubble fraction
  double peak_bytes = 0;   // predicted peak stored activations of the worst rank
  TimeBudget budget;       // the predicted makespan in five kinds (the simulated compute as compute)
};

// Every configuration for p ranks that the deck's batch allows (m divides train.batch, v the
// schedule accepts with p*v stages), sorted by predicted step time (then memory); those over
// `memory_cap` bytes (0 = none) are left out. Where memory binds (`memory_cap` > 0), a schedule
// planned under a cap of stored micro-batches (its row in schedules/variant_table.cpp reads
// pipeline.memory_cap) is also tried at every cap below its default p. `names`: schedules to try
// (empty = all).
std::vector<TuneCandidate> enumerate_configs(const CostFile& costs, int p, int batch, double memory_cap,
                                             const std::vector<std::string>& names);
// Per rank, the sum of two model copies' gradients after the pipeline (DualPipe; zeros for one
// copy): each stage's gradient goes through memory `passes` times at the measured link's copy
// rate, plus one latency where the other copy's holder is another rank. Deterministic: the four
// 8-byte limbs of each element packed, exchanged, added and unpacked (4 passes of 32 bytes);
// fast: the floats exchanged and added (2 passes of real_bytes). Zeros without a measured link.
std::vector<double> rank_copy_sum_ms(const CostFile& costs, const StageLayout& layout,
                                     const std::vector<int>& stage_to_rank, int p);

// The same prediction for one configuration (the baseline, say).
// `schedule_cap`: its pipeline.memory_cap (0 = the default).
TuneCandidate predict(const CostFile& costs, int p, const std::string& schedule, int v, int m,
                      const std::vector<int>& split, Recompute r, int schedule_cap = 0);

// The smallest m (1..max_m) whose simulated bubble is below `target` for each schedule at p,
// with every stage costing the cost file's mean even-split stage (micro-batch size fixed);
// 0 where none is.
struct BubbleAnswer {
  std::string schedule;
  int v = 1, m = 0;
  double bubble = 0;
};
std::vector<BubbleAnswer> smallest_m_for_bubble(const CostFile& costs, int p, int samples, double target, int max_m);

// "4/4/2": blocks per stage.
std::string split_text(const std::vector<int>& split);
// The median of `x` (0 when empty).
double median(std::vector<double> x);

}  // namespace minipipe
