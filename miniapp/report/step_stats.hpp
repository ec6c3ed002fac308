// What one rank measured in one training step: compute time per action kind, exposed
// communication, time spent in observers (dumps), peak stored activations, every action's span.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "schedules/action.hpp"

namespace minipipe {

// One executed compute action with its times (seconds from the step's start, after a barrier).
struct ActionTiming {
  sched::Op op = sched::Op::F;
  int stage = -1, microbatch = -1;
  double start = 0, end = 0;
  bool adds_held = false;  // the stage's last W of the step, which added the held-back dW samples
  double wait = 0;         // blocked on its input's receive just before `start` (s; 0: no wait)
};

// The first NaN or infinity this rank saw in a step, on the step's clock so that ranks can agree
// on the earliest (a non-finite value spreads forward in time from where it first appears).
struct FirstNonFinite {
  bool found = false;
  double time = 0;
  std::string where;  // "NaN at element 17 of step 3 / stage 1 / layer_02 / micro-batch 0 / activation"
};

struct RankStepStats {
  double makespan = 0;  // step start to this rank's last action (s)
  double time_F = 0, time_I = 0, time_W = 0, time_B = 0;
  double comm_wait = 0;        // blocked waiting for a boundary tensor (exposed communication)
  double observer_io = 0;      // inside actions but spent in observers (dumps): neither compute nor idle
  double allreduce = 0;        // exact gradient all-reduce over the data-parallel replicas (exposed)
  double allreduce_start = 0;  // when it began, on the clock of `actions`
  // The data-parallel gradient reduction as a whole: from its first bucket's start (a stage's last
  // W with pipeline.overlap_allreduce) to its last bucket's end, of which `allreduce` was exposed;
  // the bytes this rank contributed per gradient element reduced; exact pieces sent as full limbs.
  double allreduce_total = 0, allreduce_bytes = 0, allreduce_elements = 0;
  int allreduce_full_pieces = 0;
  double optimizer = 0;    // after the all-reduce: finalize the gradients and update the parameters
  double step = 0;         // the whole step on this rank: actions, loss, all-reduce, optimizer
  int peak_stored_mb = 0;  // micro-batches with stored activations, all stages of the rank
  std::size_t peak_stored_bytes = 0;
  std::size_t workspace_bytes = 0;  // scratch of the rank's stages and their kernels (peak)
  long long host_syncs = 0;         // host synchronizations in the step (host_sync_count, kernels/types.hpp)
  std::vector<ActionTiming> actions;
  FirstNonFinite non_finite;
};

}  // namespace minipipe
