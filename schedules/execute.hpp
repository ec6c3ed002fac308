// Dependency-ordered execution of a lowered schedule: the one engine behind the validator's
// deadlock check, the unit-step grid and the event simulator, so all three agree on semantics.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "schedules/schedule.hpp"

namespace minipipe::sched {

// Semantics (those of torch.distributed.pipelining and of the MPI runtime): each rank runs its
// list in order; SEND is posted without waiting (isend) and so is RECV (irecv); a compute action
// waits for its inputs: a RECV posted earlier on its own rank whose matching SEND the peer has
// posted, `comm_latency` after the later of the two, or the neighbouring stage when it is local.
struct Execution {
  bool complete = false;
  std::vector<std::vector<double>> start, end;  // per rank, per action index
  std::vector<std::size_t> head;                // per rank: first action that did not run
  // For a rank that stopped early: the action its head waits for (a SEND on a peer, or an
  // action on its own rank that comes later in its list).
  std::vector<Action> waits_for;
};

// `schedule` must have passed the structural checks of validate (indices in range, stages on
// their ranks). A lowered schedule runs its SEND/RECV actions; a compute-only one behaves as
// its lower_communication() would. duration(action) is the time of one compute action.
Execution execute(const Schedule& schedule, const std::function<double(const Action&)>& duration, double comm_latency);
// The same with a time per stage boundary: a transfer between stages s and s+1 (either way)
// takes boundary[s] (size p*v - 1; a boundary inside one rank is never charged). Empty: every
// transfer takes comm_latency, exactly as above.
Execution execute(const Schedule& schedule, const std::function<double(const Action&)>& duration, double comm_latency,
                  const std::vector<double>& boundary);

// Whether stage s needs a communication action of kind op under the schedule's placement.
bool needs_comm(const Schedule& s, Op op, int stage);

}  // namespace minipipe::sched
