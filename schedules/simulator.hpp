// Event simulator of a schedule under a cost model: makespan, bubble, memory, timeline.
// Also the analytic bubble of each variant where the literature gives a closed form.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "schedules/program.hpp"
#include "schedules/schedule.hpp"
#include "schedules/timeline.hpp"

namespace minipipe::sched {

struct CostModel {
  // Per stage (size p*v), in any time unit (the CLI says ms). An empty B means I + W; empty I
  // and W mean B/2 each. A list of size 1 applies to every stage.
  std::vector<double> F, B, I, W;
  double comm = 0;  // latency of one transfer between two ranks (same-rank hand-over is free)
  // Per stage boundary (size p*v - 1, or 1 for all): the time of one transfer between stages s
  // and s+1, either way, when the link it crosses is known (a cluster's placement: latency +
  // bytes / bandwidth of that link). Replaces comm where given; empty = comm everywhere.
  std::vector<double> boundary;
  // An OVERLAP_F_B pair takes overlap_fb * (F + B): 1 = no overlap gain (the conservative
  // default), below 1 = DualPipe's computation-communication overlap pays off.
  double overlap_fb = 1.0;
  // Time a runtime spends per compute action outside the compute itself (posting transfers,
  // fences, buffer hand-over, scheduler slices lost when it yields): added to every compute action.
  double action_overhead = 0;
  // Run-to-run spread of compute actions: when > 0 each compute action's time is multiplied by a
  // log-normal factor of mean 1 and this coefficient of variation, drawn from (jitter_seed, op,
  // stage, micro-batch), so that a simulation sees the waits that uneven action times cause.
  double jitter_cv = 0;
  unsigned long long jitter_seed = 0;
  // Activation one micro-batch leaves on a stage, in micro-batch units; empty means 1/v so a
  // rank's whole share of the model counts 1. w_act: fraction still held while only W is left.
  std::vector<double> act;
  double w_act = 1.0;
  // When given (per stage, the units of act): what I adds on top of act (recomputed values,
  // gradients), held until W, and for a B action inside it. Then I frees nothing, W frees
  // act + act_work, and w_act is not used.
  std::vector<double> act_work;
  // Per stage (empty = none): time added to the stage's last W-carrying action (W, or B) in its
  // rank's order, for work that a step does once there (the trainer's deterministic mode holds
  // back a step's dW samples and adds them in that W).
  std::vector<double> W_tail;

  // Same costs on every stage; b <= 0 means i + w, and i, w both <= 0 mean b/2 each.
  static CostModel uniform(int stages, double f, double b, double i, double w, double comm);

  // Defaults filled in, every list of size `stages`; throws ScheduleError on a bad entry.
  CostModel resolved(int stages, int v) const;
};

// "F=1,B=2", "F=1,I=1,W=1", per stage "F=8:20:10" (one value per stage, ':'-separated),
// optional "overlap=0.8". Missing backward costs: B = 2F, I = W = F. Throws ScheduleError
// naming the key, the value and what is allowed.
CostModel parse_costs(const std::string& spec, int stages, double comm);

struct SimResult {
  double makespan = 0;                 // last end over all ranks (everything starts at 0)
  std::vector<double> busy, idle;      // per rank; idle = makespan - busy
  double bubble_fraction = 0;          // sum(idle) / (p * makespan)
  std::vector<int> peak_inflight;      // (stage, mb) with F done and B/I not done
  std::vector<int> peak_waiting_w;     // (stage, mb) with I done and W not done
  std::vector<double> activation_mem;  // peak held activations, micro-batch units (see act)
  Timeline timeline;
  // Per rank: first start, last end and the idle time between them. A rank that starts late
  // only because the first forward has not reached it yet has no interior idle from that.
  std::vector<double> start, end, interior_idle;
  std::vector<int> peak_held;           // (stage, mb) with F done and B or W not done
  double interior_bubble_fraction = 0;  // sum(interior_idle) / sum(end - start)
};

// Validates, lowers communication when needed and runs the schedule. comm latency applies to
// each transfer between ranks; SEND never blocks, RECV waits for the data.
SimResult simulate(const Schedule& schedule, const CostModel& cost);

// What a sweep needs of one simulation, and nothing per action: the same makespan, busy, end,
// activation_mem and bubble_fraction as simulate() (bit for bit), computed while the ranks run.
struct StepTotals {
  double makespan = 0, bubble_fraction = 0;
  std::vector<double> busy, end, activation_mem;  // per rank
  std::size_t state_bytes = 0;                    // what the dependency table held at its peak (capacities)
};

// simulate() for sweeps of thousands of configurations: the same event loop as execute(), with
// no timeline and no time kept per action: per stage which micro-batches finished, a completion
// time only until the other stage that reads it has run, a few numbers per rank. The schedule
// must be compute-only and must have passed validate() once (a generator's schedule has); a
// deadlock is reported as ScheduleError.
StepTotals simulate_totals(const Schedule& schedule, const CostModel& cost);
// The same from per-rank programs (program.hpp), bit for bit: with make_rank_programs the whole
// simulation holds O(p + in flight) besides the programs, never every rank's list.
StepTotals simulate_totals(const RankPrograms& programs, const CostModel& cost);

// The mean makespan of `samples` simulations with jitter seeds 1..samples (cost.jitter_cv > 0);
// the plain makespan when jitter_cv is 0.
double mean_makespan(const Schedule& schedule, const CostModel& cost, int samples);

// Closed-form bubble fraction (idle over p x makespan) where the literature gives one and it
// is exact for this schedule: uniform stage costs, no communication latency, no overlap gain,
// and the variant's own domain (see analytic_formula). nullopt elsewhere.
std::optional<double> analytic_bubble(const Schedule& schedule, const CostModel& cost);

// The formula and its domain as text, e.g. "(p-1)/(m+p-1)  [uniform costs, comm = 0]";
// empty for a schedule without one (a CSV import).
std::string analytic_formula(const std::string& name);

// Unit-step placement: every compute action takes one step, communication none, and each
// action starts as early as its rank order and inputs allow. This is the time-aligned grid the
// CLI prints and the aligned CSV layout writes (an empty cell is an idle step).
std::vector<std::vector<std::optional<Action>>> step_grid(const Schedule& schedule);

// The step grid as text (rows = ranks), cut after max_columns steps.
std::string format_step_grid(const Schedule& schedule, int max_columns = 80);

}  // namespace minipipe::sched
