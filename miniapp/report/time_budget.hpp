// Where a step's pipeline time goes, per rank and in total (p x makespan), in five kinds: useful
// compute, ideal bubble, imbalance wait, exposed communication, runtime overhead (docs/time-budget.md).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "miniapp/report/step_stats.hpp"
#include "schedules/schedule.hpp"
#include "schedules/simulator.hpp"

namespace minipipe {

struct RunReport;

// One rank's share of the pipeline (or the sum over ranks) in whole nanoseconds, so that the five
// kinds add up to the total exactly.
struct BudgetLine {
  std::int64_t compute = 0, ideal_bubble = 0, imbalance_wait = 0, exposed_comm = 0, overhead = 0;
  std::int64_t total() const { return compute + ideal_bubble + imbalance_wait + exposed_comm + overhead; }
  BudgetLine& operator+=(const BudgetLine& o);
};

// What three nested simulations of the schedule leave idle on one rank (ns): every stage at the
// stage mean of the measured costs (ideal), each stage at its own measured cost (imbalance added),
// and the measured link latency on every transfer between ranks (communication added).
struct IdleTargets {
  std::int64_t ideal = 0, imbalance = 0, comm = 0;
};

// One rank's `makespan` (the pipeline's, ns): `compute` as measured (at most the makespan), the
// rest idle N split by the clamp chain V2 = clamp(comm, 0, N), V1 = clamp(imbalance, 0, V2),
// V0 = clamp(ideal, 0, V1): ideal V0, imbalance V1 - V0, communication V2 - V1, overhead N - V2.
// Each kind is >= 0 and the five sum to the makespan, whatever the targets.
BudgetLine split_rank_time(std::int64_t makespan, std::int64_t compute, const IdleTargets& idle);

struct TimeBudget {
  std::int64_t makespan = 0;                 // ns: every rank's total (p x makespan in all)
  std::int64_t sim_makespan[3] = {0, 0, 0};  // ns: ideal, + imbalance, + communication
  double link_ms = 0;                        // the link model: latency of one transfer
  int link_samples = 0;                      // receives it was measured on (0: none waited)
  sched::CostModel costs;                    // per-stage costs of the simulations (ms, resolved)
  std::vector<BudgetLine> ranks;             // index = pipeline rank
  BudgetLine total;                          // the sum over ranks
  std::vector<double> allreduce, optimizer;  // per rank, seconds, after the pipeline (beside it)
  bool empty() const { return ranks.empty(); }
};

// Every per-stage list of `costs` (resolved for `stages` stages) replaced by its stage mean.
sched::CostModel stage_mean_costs(const sched::CostModel& costs, int stages, int v);

// Pure. `costs`: per-stage compute costs in ms (the ones the simulator takes; their comm,
// action_overhead and jitter are not used); `link_ms`: one transfer between ranks; `compute_s`:
// each rank's measured compute (s); `makespan_s`: the measured pipeline makespan.
TimeBudget time_budget(const sched::Schedule& plan, const sched::CostModel& costs, double link_ms,
                       const std::vector<double>& compute_s, double makespan_s);

// The link model measured in the run: the median, over the receives whose consumer was already
// waiting when the producing action ended, of (consumer's start - producer's end), i.e. fence,
// staging copies and the transfer; 0 with no such receive (every transfer hidden).
struct LinkEstimate {
  double latency_ms = 0;
  int samples = 0;
};
LinkEstimate measured_link(const std::vector<RankStepStats>& ranks);

// Nanoseconds as the reports print them (ms).
double ms_of(std::int64_t ns);
// Reports (the JSON section is report.cpp's budget_section): the per-rank lines of a run's
// summary, the launch's table (one row per run) and a stacked bar per rank as SVG.
std::string budget_rank_text(const TimeBudget& b);
void print_budget_table(const std::vector<RunReport>& runs, std::ostream& out);
void write_budget_svg(const TimeBudget& b, const std::string& title, std::ostream& out);

}  // namespace minipipe
