// From measurements to a run's report: per-rank time split, bubble (measured, simulated with
// the measured costs, closed form), imbalance, memory, throughput, and the measured timeline.
#pragma once

#include <string>
#include <vector>

#include "miniapp/report/report.hpp"
#include "miniapp/report/step_stats.hpp"
#include "schedules/schedule.hpp"
#include "schedules/timeline.hpp"

namespace minipipe {

// What a run is, beside what it measured.
struct RunContext {
  std::string schedule, mode, backend, blas, gemm, comm_path, dump_path;
  std::string gemm_blocking;  // host GEMM blocking and CPU (runtime/version.hpp); empty on the device path
  int p = 1, dp = 1, m = 1, steps = 0, batch = 0, seq_len = 0;
  int first_step = 0;  // of this launch (a restart's checkpoint step)
  // Each compute action was fenced (profile.action_fence), so its span is its own; without,
  // the spans are enqueue times and everything built from them is reported unavailable.
  bool action_times = true;
};

// A run's measurements as rank 0 holds them after the gather: per step the loss, the step time
// and the pipeline's makespan (each the slowest rank's), and every pipeline rank's statistics
// of the last step.
struct RunMeasurements {
  std::vector<double> losses, step_seconds, makespans;
  std::vector<RankStepStats> ranks;  // index = rank
};

// `plan` is the schedule that ran (lowered). Pure: no MPI, no I/O.
RunReport summarize(const RunContext& ctx, const sched::Schedule& plan, const RunMeasurements& meas);

// The last step's actions of every rank, in ms from the step's start.
sched::Timeline measured_timeline(const RunContext& ctx, const sched::Schedule& plan, const RunMeasurements& meas);

}  // namespace minipipe
