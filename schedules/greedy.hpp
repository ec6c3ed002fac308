// List scheduling under a per-rank memory cap: each rank, whenever it is free, runs the most
// urgent action it can (I, then F where memory allows, then W). V-Half, V-Min and zb-mem use it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "schedules/schedule.hpp"

namespace minipipe::sched {

// When a rank with a pending W runs it: only when nothing else is ready (W fills idle time),
// before a forward whenever the rank has no room to admit a micro-batch, or before any forward.
enum class WPolicy { last, when_full, first };

struct GreedyInput {
  std::string name;
  int p = 1, v = 1, m = 1;
  Placement placement = Placement::loop;  // loop or v
  // Per rank: the most (stage, micro-batch) pairs it may hold at once (forward done, W not done).
  // A rank admits a new micro-batch only while v-1 places stay free for later visits, so a cap
  // >= v always completes; smaller caps are raised to v.
  std::vector<int> cap;
  std::vector<double> F, I, W;  // per stage (size 1 = every stage), each > 0
  double comm = 0;              // latency of a transfer between ranks
  WPolicy w_policy = WPolicy::last;
  // Admit a micro-batch whenever one place is free (no room kept for later visits): uses the cap
  // fully but can deadlock, which greedy_schedule then reports as nullopt.
  bool tight_admission = false;
  // Micro-batch j enters stage 0 no earlier than j * inject_interval (0 = as soon as it fits):
  // a steady injection rate keeps the ranks from filling their memory in bursts.
  double inject_interval = 0;
  // Which ready forward a rank runs first: its latest stage (older micro-batches, drains the
  // pipe) or, when set, its earliest (fills the first chunk, as a V warm-up does).
  bool forward_earliest_stage = false;
};

// The compute-only schedule (F, I, W) of the list scheduling; it has passed validate(). nullopt
// only with tight_admission, when the ranks' memory fills with work that waits on each other.
std::optional<Schedule> greedy_schedule(const GreedyInput& in);

}  // namespace minipipe::sched
