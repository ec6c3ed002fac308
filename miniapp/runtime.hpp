// The MPI pipeline runtime: executes a lowered schedule's action list on this rank's stages,
// moving boundary activations and gradients with nonblocking point-to-point messages.
#pragma once

#include <mpi.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "data.hpp"
#include "schedules/schedule.hpp"
#include "stage.hpp"

namespace minipipe {

// How boundary buffers reach MPI.
enum class CommPath { host_memory, device_buffers, host_staging };
const char* to_string(CommPath p);
// Chooses the path from the deck's pipeline.cuda_aware (auto | on | off), the memory space and
// what the MPI library says at compile time (MPIX_CUDA_AWARE_SUPPORT) and run time
// (MPIX_Query_cuda_support). `why` says how the choice was made.
CommPath choose_comm_path(const std::string& cuda_aware, std::string& why);

// One executed compute action with its times (seconds from the step's start, after a barrier).
struct ActionTiming {
  sched::Op op;
  int stage, microbatch;
  double start, end;
};

// What one rank measured in one step.
struct RankStepStats {
  double makespan = 0;  // step start to this rank's last action (s)
  double time_F = 0, time_I = 0, time_W = 0, time_B = 0;
  double comm_wait = 0;    // blocked waiting for a boundary tensor (exposed communication)
  double dump_io = 0;      // inside actions but spent in dump hooks (counted neither as compute nor idle-free)
  int peak_stored_mb = 0;  // micro-batches with stored activations, all stages of the rank
  std::size_t peak_stored_bytes = 0;
  std::vector<ActionTiming> actions;
};

// Per-step results known on every rank.
struct StepResult {
  double loss = 0;                  // global: sum of token losses / global valid tokens
  std::vector<double> sample_loss;  // per global sample (valid on the last stage's rank)
  std::vector<int> sample_tokens;
  RankStepStats stats;  // this rank's
};

template <class T>
class Pipeline {
 public:
  // Builds this rank's stages (stage s lives on schedule.stage_to_rank[s]).
  Pipeline(MPI_Comm comm, const ModelShape& shape, const StageLayout& layout, const sched::Schedule& lowered, Mode mode,
           std::uint64_t seed, CommPath path);
  ~Pipeline();

  // Runs one optimizer step over the global batch with m micro-batches (sizes differ by <= 1).
  StepResult run_step(int step, const Batch& batch, const OptimizerConfig& opt);

  std::vector<Stage<T>>& stages() { return stages_; }
  const sched::Schedule& schedule() const { return schedule_; }
  // Micro-batch partition of a batch of B samples into m parts.
  static std::vector<MicroBatch> split(int B, int m);

  // Called after finalize_grads (gradients ready) and after the optimizer (new parameters).
  std::function<void(Stage<T>&)> on_grads_ready, on_params_updated;
  // Seconds the stages' hooks (dumps) spent; the runtime leaves them out of compute times.
  double excluded_seconds = 0;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  MPI_Comm comm_;
  int rank_ = 0;
  ModelShape shape_;
  sched::Schedule schedule_;
  std::vector<Stage<T>> stages_;
  std::map<int, int> local_index_;  // global stage id -> index in stages_
};

}  // namespace minipipe
