// Orders built the way the Zero Bubble authors' public generators build them (sail-sg's
// zero-bubble-pipeline-parallelism), re-derived here so that a named schedule can offer them as
// candidates: the best candidate is then never slower than the authors' generator at its memory.
#pragma once

#include <optional>
#include <vector>

#include "schedules/schedule.hpp"

namespace minipipe::sched {

// The building-block search of "Pipeline Parallelism with Controllable Memory" (Qi et al. 2024,
// section 3 and appendix A): every starting pattern of one 6-slot block (F, f, B, b and their W
// placed right after), every pair of uniform offsets between neighbouring ranks, repeated over the
// micro-batches, squeezed, warm-up and cool-down reorganised and gaps filled without raising peak
// memory. Every valid order whose peak is at most `cap_chunks` stored chunk-micro-batches per rank
// (a micro-batch counts 2) comes back; the authors keep the one of least per-rank span, so the
// fastest of these is never slower than theirs. Costs do not enter: the orders depend on p and m.
// Each order holds every action once, in an order the authors' slot grid respects; one that
// still stalls is caught by simulating it (simulate_totals throws). Needs p >= 2.
std::vector<Schedule> v_block_orders(int p, int m, int cap_chunks);

// Rough number of grid cells v_block_orders(p, m, .) touches, to decide whether to run it.
long long v_block_work(int p, int m);

// ZB-V's own construction (Qi et al. 2023, section 6) as its authors' generator builds it for any
// m and costs: forwards fill chunk 0 then alternate, each rank then runs one input gradient and
// one forward per step and slips a deferred weight pass in wherever the input it waits for
// arrives later than the pass would end, or where the wait exceeds the largest bubble some rank
// already has; rerun with those bubbles as the allowance until the largest stops shrinking. One
// order per combination of the two fill rules, those that fit `cap_chunks` stored
// chunk-micro-batches per rank (2p is ZB-V's own). Needs p >= 1.
std::vector<Schedule> zbv_fill_orders(int p, int m, double F, double I, double W, double comm, int cap_chunks);

// V-Half (half) or V-Min as the Controllable Memory paper's authors build them (section 4 and
// their greedy reordering): a stable pattern of F, f, B, b slots repeated every 6 slots, each
// entry moved to the earliest free slot after its inputs that keeps the rank's peak memory, weight
// passes in the slots left free. One order for p, m (costs do not enter); nullopt where a step
// cannot be taken. Needs p >= 2; its time grows as v_pattern_work(p, m).
std::optional<Schedule> v_pattern_order(int p, int m, bool half);
long long v_pattern_work(int p, int m);

// The one-chunk zero-bubble order of the authors' zb generator (Qi et al. 2023, their heuristic
// before the ILP): forwards as in 1F1B with extra warm-up forwards where they fit before the first
// backward arrives, then per micro-batch a forward and a backward on every rank, deferred weight
// passes filling each wait (and freeing memory at the cap of `cap` stored micro-batches). One
// order per combination of its three rules (bubble before the first backward, backward priority,
// greedy fill), those that fit. Costs per stage or one for all. Needs p >= 1.
std::vector<Schedule> zb_fill_orders(int p, int m, const std::vector<double>& F, const std::vector<double>& I,
                                     const std::vector<double>& W, double comm, int cap);

}  // namespace minipipe::sched
