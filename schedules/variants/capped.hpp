// Schedules planned under a memory cap: the paper constructions that fit and the list scheduling
// (schedules/greedy.hpp) at the cap and below it; the fastest in simulation is kept.
#pragma once

#include <string>

#include "schedules/schedule.hpp"

namespace minipipe::sched::gen {

// Whether a schedule of p ranks, v chunks and m micro-batches is small enough to search around.
bool searched(int p, int m, int v);

// V placement, split backward, under a cap of `cap_pairs` stored chunk-micro-batches per rank:
// the list scheduling at that cap and a little below it, ZB-V's construction where it fits, and
// the orders the authors' V generators choose among (schedules/zb_orders.hpp).
Schedule gen_v_capped(const std::string& name, int p, int m, int cap_pairs, const ScheduleOptions& opt);

// ZB-H1 / ZB-H2 / zb-mem: one chunk per rank, split backward, at most `cap` stored micro-batches:
// the paper constructions where they fit, then the list scheduling at caps down to p - 1 below.
Schedule gen_zb_capped(const std::string& name, int p, int m, int cap, const ScheduleOptions& opt);

}  // namespace minipipe::sched::gen
