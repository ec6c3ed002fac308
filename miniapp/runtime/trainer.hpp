// The trainer: owns this rank's stages and one optimizer step (zero gradients, run the
// executor, the global loss, gradient finalization, optimizer), with observers for dumps.
#pragma once

#include <mpi.h>

#include <map>
#include <memory>
#include <vector>

#include "kernels/exact_limbs.hpp"
#include "miniapp/model/data.hpp"
#include "miniapp/report/step_stats.hpp"
#include "miniapp/runtime/checkpoint.hpp"
#include "miniapp/runtime/comm.hpp"
#include "miniapp/runtime/executor.hpp"
#include "miniapp/runtime/grad_reduce.hpp"
#include "miniapp/runtime/stage.hpp"
#include "schedules/schedule.hpp"

namespace minipipe {

// Sees a step as it happens: boundary tensors (timed by the executor), then each local stage's
// gradients once complete and its parameters once updated.
template <class T>
class StepObserver : public TensorObserver<T> {
 public:
  void activation(const std::string&, const MicroBatch&, CMat<T>) override {}
  void input_grad(const std::string&, const MicroBatch&, CMat<T>) override {}
  virtual void grads_ready(const Stage<T>&) {}
  virtual void params_updated(const Stage<T>&) {}
};

// A step met a NaN or an infinity (or an exact accumulator overflowed). Thrown on every rank
// alike, naming the first tensor where it appeared; the steps before `step` are complete.
struct Diverged : std::runtime_error {
  Diverged(int s, const std::string& what) : std::runtime_error(what), step(s) {}
  int step;
};

// Per-step results known on every rank.
struct StepResult {
  double loss = 0;                  // global: sum of token losses / global valid tokens
  std::vector<double> sample_loss;  // per global sample
  std::vector<int> sample_tokens;
  RankStepStats stats;  // this rank's
};

// The micro-batches of a batch of B samples in m parts (sizes differ by at most one, larger
// first), numbered from sample `first` of the global batch.
std::vector<MicroBatch> split_batch(int B, int m, int first = 0);

// The samples [first, first + count) of the global batch that one data-parallel replica trains.
struct SampleRange {
  int first = 0, count = 0;
};
// Replica d of dp: shares of B that differ by at most one, larger first, in replica order.
SampleRange replica_share(int B, int dp, int d);

template <class T>
class Trainer {
 public:
  // Builds this rank's stages (stage s lives on rank plan.stage_to_rank[s] of `pipeline`);
  // `plan` is what the executor runs (lowered, receives posted early). `replicas` joins the
  // ranks that hold the same stages in every data-parallel replica (size 1: no data
  // parallelism); `job` holds every rank. `timeout_s` bounds each wait for a peer. `reduce`: how
  // the gradients are reduced over the replicas (grad_reduce.hpp).
  Trainer(MPI_Comm job, MPI_Comm pipeline, MPI_Comm replicas, const ModelShape& shape, const StageLayout& layout,
          const sched::Schedule& plan, Mode mode, std::uint64_t seed, CommPath path, const OptimizerConfig& opt,
          double timeout_s, Recompute recompute = Recompute::none, bool action_fence = true,
          const ReduceConfig& reduce = {});
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // One optimizer step (0-based `step`): this replica pipelines `share` of the global batch in
  // the plan's m micro-batches; gradients and loss then cover the whole global batch. Throws
  // Diverged on every rank when any rank met a non-finite value.
  StepResult step(int step, const Batch& batch, SampleRange share, StepObserver<T>* observer = nullptr);

  const std::vector<Stage<T>>& stages() const { return stages_; }
  // Parameters and optimizer state of this rank's stages from a verified checkpoint.
  void restore(const Checkpoint& checkpoint) { checkpoint.load(stages_); }
  const sched::Schedule& plan() const { return plan_; }

 private:
  void upload(int step, const Batch& batch);
  void gather_loss(int step, StepResult& res) const;
  void after_action(std::size_t index);
  void sum_model_copies();
  void add_copy_limbs(const std::vector<GradAccum<T>*>& accs, const std::vector<GradAccum<T>*>& twins, int peer,
                      int tag);
  void add_copy_partials(GradAccum<T>& acc, GradAccum<T>* twin, int peer, int tag);
  void merge_copy_flags(Stage<T>& a, Stage<T>* twin, int peer, int tag);
  void exchange(void* send, void* recv, int count, MPI_Datatype type, int peer, int tag) const;
  void finalize(int step, RankStepStats& st);
  void update(int step, RankStepStats& st, StepObserver<T>* observer);
  void agree_finite(int step, const RankStepStats& st) const;
  void note_non_finite(RankStepStats& st, const std::string& where) const;

  MPI_Comm job_, comm_, replicas_;
  int num_replicas_ = 1;
  double clock0_ = 0;   // MPI_Wtime() at the start of the step's clock
  double timeout_ = 0;  // pipeline.timeout: the bound of every collective wait
  CommPath path_;
  LimbView limbs_;                                     // all-reduce buffer of exact gradients
  LimbView copy_limbs_;                                // the other model copy's limbs (DualPipe)
  View1<T> copy_sum_;                                  // the other copy's fast-mode partials
  Kokkos::View<std::int64_t*, HostSpace> host_limbs_;  // host copies where MPI cannot read them
  ModelShape shape_;
  sched::Schedule plan_;
  OptimizerConfig opt_;
  std::vector<Stage<T>> stages_;
  std::unique_ptr<Executor<T>> executor_;
  std::unique_ptr<GradReducer<T>> reducer_;         // dp > 1 only
  bool overlap_ = true;                             // a stage's reduction starts at its last W
  std::map<std::size_t, std::vector<int>> last_w_;  // action index -> local stages whose last W it is
  StepInputs<T> in_;
};

}  // namespace minipipe
