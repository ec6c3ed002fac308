// The executor: runs one rank's list of a lowered schedule for one step (post and complete
// boundary transfers, run compute actions, time them). What runs when is the schedule's alone.
//
// Two execution-space instances: compute actions run on ExecSpace's default instance, the staging
// copies of boundary transfers (host_staging) on a second one (transfer_instance(): a stream of
// its own on a GPU, the same queue on a host backend), so that a copy overlaps the next compute
// action. The ordering, made explicit:
// - a send's device-to-host copy starts after the producing compute is complete (a fence of the
//   compute instance, which the per-action fence already is), and its MPI_Isend is posted at the
//   next progress point (after the next compute action is enqueued) once the transfer instance is
//   fenced, or before this rank blocks on anything; on a host backend (no queue of its own, the
//   next action would run before the post) it is posted at once;
// - a receive's host-to-device copy is issued on the transfer instance as soon as the message is
//   seen complete (at a progress point or when its consumer needs it), and the transfer instance
//   is fenced before the consumer's kernels are enqueued;
// - with profile.action_fence off, compute actions are only enqueued: the compute instance is
//   fenced where MPI or the host reads what it wrote (before a send, at the step's end), and a
//   buffer a compute action gave back goes to MPI or the transfer instance only after that fence.
#pragma once

#include <mpi.h>

#include <functional>
#include <map>
#include <vector>

#include "miniapp/report/step_stats.hpp"
#include "miniapp/runtime/comm.hpp"
#include "miniapp/runtime/stage.hpp"
#include "schedules/schedule.hpp"

namespace minipipe {

// Host memory of staged transfers (CommPath::host_staging): page-locked where the backend has
// it, so the device copy is a DMA and MPI reads the same buffer. Buffers are pooled by shape.
#if defined(KOKKOS_ENABLE_CUDA)
using StagingSpace = Kokkos::CudaHostPinnedSpace;
#elif defined(KOKKOS_ENABLE_HIP) && KOKKOS_VERSION >= 40000
using StagingSpace = Kokkos::HIPHostPinnedSpace;
#else
using StagingSpace = HostSpace;
#endif

template <class T>
class Executor {
 public:
  // `plan` is lowered (SEND/RECV in it, receives where they are to be posted: see
  // sched::post_receives_early); `stages` are this rank's, in ascending stage id, and outlive
  // the executor.
  // `timeout_s` bounds every wait for a peer (0: wait forever; see wait_for_peer).
  // `action_fence`: fence the compute instance after every compute action (each action's
  // recorded span is then its own; without, spans are enqueue times).
  Executor(MPI_Comm comm, const sched::Schedule& plan, std::vector<Stage<T>>& stages, CommPath path, int seq_len,
           int channels, double timeout_s, bool action_fence = true);
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // Runs every action of this rank for one step. Boundary tensors reach `observer` (nullptr:
  // none); the time spent there is reported as observer_io, never as compute or idle. Every
  // boundary tensor is checked for NaN/inf on the device; the checks are read once, at the end
  // of the step, and the first non-finite one is in the stats' non_finite.
  RankStepStats run(int step, const std::vector<MicroBatch>& mbs, const StepInputs<T>& in, TensorObserver<T>* observer);

  // Called after each entry of this rank's action list has run, with its index in the list (the
  // trainer starts a stage's gradient reduction after its last W and advances those in flight).
  void after_each_action(std::function<void(std::size_t)> f) { after_action_ = std::move(f); }

 private:
  enum Dir { kFwd = 0, kBwd = 1 };
  // A boundary tensor: direction, the stage that consumes it (receives) or produced it
  // (outputs), micro-batch.
  struct Key {
    int dir, stage, mb;
    bool operator<(const Key& o) const;
  };
  using Staging = Kokkos::View<T**, Kokkos::LayoutRight, StagingSpace>;
  struct Pending {
    MPI_Request req = MPI_REQUEST_NULL;
    View2<T> dev;                       // tensor on the device
    Staging host;                       // staging buffer (host_staging only), from the staging pool
    bool copied = false;                // a receive: its host-to-device copy is issued on the transfer instance
    int peer = -1, tag = 0, count = 0;  // a staged send waiting for its copy: where it goes
  };
  class Watch;
  // The step's checks of boundary tensors for NaN/inf: each a device reduction into its own slot
  // of `codes` (FiniteCheck::lowest_code_to, no host wait), all read with one copy at the step's
  // end, where the first slot that holds a non-finite code names the tensor, in the order of today's
  // checks (actions in list order, tensors in the order the stages report them).
  struct FiniteChecks {
    struct Site {
      int stage = -1, microbatch = -1;
      std::string layer;
      const char* what = "";
      double time = 0;  // when the check was issued, on the step's clock
    };
    Kokkos::View<std::int64_t*, MemSpace> codes;  // grow-only, reaches its size in the first step
    Kokkos::View<std::int64_t*, HostSpace> host;
    std::vector<Site> sites;
  };
  void read_finite_checks();

  void dispatch(const sched::Action& a);
  void post_recv(Dir dir, const sched::Action& a);
  void post_send(Dir dir, const sched::Action& a);
  View2<T> input_of(Dir dir, const sched::Action& a);
  void compute(const sched::Action& a);
  void record(const sched::Action& a, double start, double end, bool adds_held);
  void note_memory(const Stage<T>& ran);
  void reap_sends(bool wait_all);
  void check_drained(int step) const;
  void progress();
  void fence_compute(const char* label);
  void fence_transfers();
  void copy_received(Pending& p);

  View2<T> take(std::size_t rows);       // for the compute instance's output
  View2<T> take_free(std::size_t rows);  // for a receive (MPI or the transfer instance writes it)
  void give(const View2<T>& buffer);
  Staging take_staging(std::size_t rows);
  void give_staging(const Staging& buffer);
  int tag(Dir dir, int stage, int mb) const;
  int count_of(const View2<T>& v, const sched::Action& a) const;
  int peer_of(int stage, const sched::Action& a) const;
  Stage<T>& stage_of(const sched::Action& a);
  std::size_t rows_of(int mb) const;
  double now() const;

  MPI_Comm comm_;
  int rank_ = 0, num_stages_ = 0, m_ = 0, tag_ub_ = 0, seq_len_ = 0, channels_ = 0;
  std::string describe_wait(const char* what, int peer, const sched::Action& a) const;
  CommPath path_;
  bool action_fence_ = true;
  ExecSpace transfer_;              // the staging copies' instance (transfer_instance())
  bool defer_posts_ = false;        // staged sends posted at the next progress point (a queue of its own)
  bool compute_unfenced_ = false;   // compute work enqueued since the compute instance's last fence
  bool transfer_unfenced_ = false;  // copies issued on transfer_ since its last fence
  std::vector<int> stage_to_rank_;
  std::vector<sched::Action> actions_;
  std::vector<Stage<T>>& stages_;
  std::map<int, int> local_index_;  // global stage id -> index in stages_

  std::map<Key, Pending> recvs_;                              // posted receives
  std::vector<Pending> sends_;                                // sends in flight
  std::vector<Pending> staged_;                               // sends whose copy is on transfer_, not yet posted
  std::map<Key, View2<T>> outputs_;                           // produced, not yet sent or handed over
  std::map<std::size_t, std::vector<View2<T>>> pool_;         // free boundary buffers by row count
  std::map<std::size_t, std::vector<View2<T>>> retired_;      // given back by unfenced compute: compute only
  std::map<std::size_t, std::vector<Staging>> staging_pool_;  // free staging buffers by row count
  FiniteChecks checks_;
  std::function<void(std::size_t)> after_action_;

  // The step being run.
  const std::vector<MicroBatch>* mbs_ = nullptr;
  const StepInputs<T>* in_ = nullptr;
  RankStepStats* stats_ = nullptr;
  Watch* watch_ = nullptr;
  double t0_ = 0, timeout_ = 0;
  int step_ = 0;
};

}  // namespace minipipe
