// What a pipeline run reports (docs/design.md §6): per-rank time split, measured bubble next to the
// simulated and analytic ones, imbalance, peak stored activations, throughput; JSON output.
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "miniapp/report/time_budget.hpp"

namespace minipipe {

struct RankReport {
  int rank = 0;
  std::vector<int> stages;
  double time_F = 0, time_I = 0, time_W = 0, time_B = 0;  // seconds, last measured step
  double comm_wait = 0, idle = 0, busy = 0, dump_io = 0;
  double allreduce = 0;                    // exposed data-parallel gradient all-reduce, after the pipeline
  double allreduce_total = 0;              // the whole reduction, first bucket's start to last bucket's end
  double allreduce_bytes_per_element = 0;  // bytes this rank sent per gradient element (0: dp = 1)
  int peak_stored_mb = 0;
  double peak_stored_bytes = 0;
  double workspace_bytes = 0;  // stage and kernel scratch (GEMM packing, dW buffers), peak
  long long host_syncs = 0;    // host synchronizations in the last step (kernels/types.hpp's counter)
};

struct RunReport {
  std::string schedule;
  int p = 1, dp = 1, v = 1, m = 1, steps = 0, batch = 0, seq_len = 0;
  int first_step = 0;  // global index of this launch's first step (a restart continues)
  std::string mode, backend, blas, gemm, comm_path;
  std::string gemm_blocking;         // empty: the device path ran the GEMMs (JSON null)
  std::vector<double> losses;        // per step
  std::vector<double> step_seconds;  // per step (max over ranks), whole step
  double step_seconds_mean = 0;      // steps after the first (warm-up) when there are several
  double tokens_per_second = 0;
  double makespan = 0;            // the pipeline's makespan in the timed (last) step
  std::vector<double> makespans;  // per step, the pipeline's makespan (s)
  // Without per-action times (profile.action_fence = false) every figure built from the actions'
  // spans is NaN (JSON null, "n/a" in tables): per-rank F/I/W/B, busy and idle, the measured and
  // simulated bubble, the imbalance, the stage times and the time budget (left empty); the
  // analytic bubble then uses unit costs. Step times, throughput and the FOM stay measured.
  bool action_times = true;
  double bubble_measured = 0, bubble_simulated = 0;
  std::optional<double> bubble_analytic;
  double imbalance = 0;  // max/mean per-stage compute time
  // Spread of the timed step's compute actions about the mean of their kind and stage: the root
  // mean square of (time / mean - 1) (0 = every F of a stage as long as every other one). The W
  // that added a stage's held-back dW samples is left out (a planned cost, not a spread).
  double action_cv = 0;
  std::vector<double> stage_compute;  // per stage: F + I + W + B seconds in the timed step
  std::vector<RankReport> ranks;
  TimeBudget budget;  // the last step's pipeline time in five kinds (time_budget.hpp)
  std::string dump_path;
  std::string dump_vs_reference;     // "reference", "identical", "DIFFERS", "error", "-" (no dump)
  std::string kernel_counters_json;  // profile.kernels: the JSON object of kernel_report.hpp, else empty
};

// The launch as a whole: the figure of merit and the verification verdict (verdict.hpp).
struct LaunchSummary {
  double fom_tokens_per_second = 0, model_tflops = 0;
  bool verified = true;
  std::string verification;  // "PASS", "PASS (test hooks active: ...)" or "FAIL (<why>)"
  // Test hooks set for this launch ("NAME=value"): its times and FOM are not a measurement.
  std::vector<std::string> test_hooks;
};

void write_json(const std::vector<RunReport>& runs, const LaunchSummary& launch, const std::string& deck_toml,
                std::ostream& out);
// One table row per run, the header first (rank 0 prints it at the end of a launch).
void print_table(const std::vector<RunReport>& runs, std::ostream& out);

}  // namespace minipipe
