// The scaling model of `minipipe scale`: every p x dp x schedule x m x v x split x recompute of a
// deck's model on N devices of a cluster file, predicted with the links each boundary crosses and
// the data-parallel all-reduce; the best under a memory cap.
#pragma once

#include <string>
#include <vector>

#include "miniapp/model/config.hpp"
#include "miniapp/model/cost_file.hpp"
#include "miniapp/tuning/cluster.hpp"
#include "schedules/program.hpp"
#include "schedules/simulator.hpp"

namespace minipipe {

// Parameter elements of each part of the model: embedding, blocks 0..L-1, head.
std::vector<double> part_elements(const ModelShape& shape);

// Default bound of the list-scheduled variants in a sweep (ScaleOptions::list_scheduled_max_pm).
constexpr long long kListScheduledMaxPm = 1024;

// Per-part costs from the model's FLOPs and bytes on a device of `cluster` (no measurement): F,
// I, W of one sample in ms at cluster.tflops, kept/work bytes from the tensors each recompute
// mode keeps, per-step fixed cost from the parameter bytes the update and finalize touch.
// One size (1 sample): CostFile::at scales it linearly. docs/cluster.md lists the formulas.
CostFile analytic_costs(const ModelShape& shape, int batch, bool deterministic, const Cluster& cluster);

// Time of one transfer of `bytes` across each stage boundary of replica `replica` of a p x dp
// layout on `cluster` (its rank order): the intra- or inter-node link the boundary crosses; 0
// where both stages sit on one rank.
std::vector<double> boundary_ms(const Cluster& cluster, const std::vector<int>& stage_to_rank, int p, int dp,
                                int replica, double bytes);

// Bytes the gradient all-reduce moves per parameter element in deterministic mode by default: the
// compact exact form (a shared exponent per bucket and fewer fixed-point limbs than the full
// accumulator's ExactLimbs::kLimbs int64 = 32 bytes). ScaleOptions::exact_bytes sets it.
constexpr double kCompactExactBytes = 16;

// Bytes the gradient all-reduce moves per parameter element: `exact_bytes` in deterministic mode
// (32 = the full int64 limbs; kCompactExactBytes the compact form), one float in fast mode.
double allreduce_bytes_per_element(bool deterministic, double exact_bytes);

// When the data-parallel all-reduce runs. overlapped: each stage's (model chunk's) reduction
// starts when its last B or W ends, overlapping the rest of the pipeline, the reductions of one
// rank one after another in the order they become ready (the runtime's default). after: one
// reduction per rank once the whole pipeline is done.
enum class AllReduceTiming { overlapped, after };

// Per stage of one simulated step (programs s at costs cm): when its weight gradients are
// complete, the end of its last B or W (the full simulation's timeline).
std::vector<double> stage_gradients_ready(const sched::RankPrograms& s, const sched::CostModel& cm);

// Per rank: when its overlapped reductions end, stage st's taking stage_ar[st] and starting at
// ready[st] or when the rank's previous one ends, whichever is later.
std::vector<double> overlapped_allreduce_end(const std::vector<double>& ready, const std::vector<double>& stage_ar,
                                             const std::vector<int>& stage_to_rank, int p);

// One configuration on p x dp devices and what the model predicts for it.
struct ScalePoint {
  std::string schedule;
  int p = 1, dp = 1, v = 1, m = 1;
  int global_batch = 0;
  RankOrder order = RankOrder::dp_major;  // how its ranks fill the nodes
  Recompute recompute = Recompute::none;
  bool auto_split = false;
  std::vector<int> split;
  double step_ms = 0;          // makespan (+ what the all-reduce adds) + loss agreement + fixed
  double makespan_ms = 0;      // the slowest replica's pipeline, links charged
  double bubble = 0;           // its bubble fraction
  double allreduce_ms = 0;     // the slowest rank's gradient all-reduce (overlapped: its stages' summed)
  double exposed_comm_ms = 0;  // step time that communication adds (filled for printed points)
  double memory_bytes = 0;     // the fullest device: model state + peak stored activations
  double samples_per_s = 0;
};

struct ScaleOptions {
  int global_batch = 0;       // strong scaling: the same global batch at every device count
  int batch_per_replica = 0;  // > 0: weak scaling, global batch = this x dp
  double memory_cap = 0;      // bytes per device
  AllReduceTiming timing = AllReduceTiming::overlapped;
  double exact_bytes = kCompactExactBytes;  // deterministic mode's all-reduce bytes per parameter
  int max_m = 1024;
  std::vector<std::string> schedules;  // empty = all
  bool prune = true;                   // false: simulate every configuration (to measure the pruning)
  // The list-scheduled variants (v-half, v-min, zb-mem: schedules/greedy.cpp, built over all ranks
  // at once) are tried only where p x m <= this, unless --schedules names them (0 = everywhere):
  // above it each build takes seconds and they made a 128-device sweep take minutes.
  long long list_scheduled_max_pm = 0;
};

// What a sweep did: configurations enumerated (after the model-state memory check) and
// pipeline simulations run.
struct SweepCount {
  long long configurations = 0, simulations = 0;
  // Why configurations were left out, for the text of an empty result: the data-parallel widths
  // dp = devices / p whose replicas cannot share the global batch evenly, and the configurations
  // over the memory cap (model state, or state and stored activations).
  std::vector<int> uneven_dp;
  std::vector<int> batch_below_dp;  // the widths dp larger than the global batch: a replica would get none
  long long over_cap = 0;
  long long list_scheduled_skipped = 0;  // (schedule, p, m, v) instances over list_scheduled_max_pm
};

// The schedules built over all ranks at once (the list-scheduled rows of
// schedules/variant_table.cpp): a sweep's slow part.
bool list_scheduled(const std::string& name);
// Their names for a sentence, in the table's order ("a, b and c").
std::string list_scheduled_names();

// Why a sweep of `devices` devices at global batch `global_batch` (read from `batch_key`: a deck
// key or a flag) found no configuration, from its count: a global batch smaller than every dp,
// the batch that no dp divides, or the memory cap, or no schedule instance.
std::string no_configuration_reason(const SweepCount& count, int global_batch, const std::string& batch_key);

// The `keep` best configurations on `devices` devices (p | devices, p*v <= n_layer), least time
// per sample first; those over the memory cap are left out. With opt.prune a configuration whose
// lower bound (its busiest rank's compute + all-reduce + fixed cost) cannot beat the keep-th best
// found so far is not simulated.
std::vector<ScalePoint> best_layouts(const CostFile& costs, const Cluster& cluster, int devices,
                                     const ScaleOptions& opt, int keep, SweepCount* count = nullptr);

}  // namespace minipipe
