// The split optimizer: contiguous blocks over p*v stages minimizing the slowest stage, with the
// embedding counted on the first stage and the head on the last; empty stages are allowed.
#pragma once

#include <vector>

namespace minipipe::sched {

// block[l]: cost of block l; first / last: what stage 0 / the last stage carry beside their
// blocks. Returns the block count of each of `stages` stages (sum = block.size()), the one whose
// slowest stage is fastest; among those, the one whose stage costs have the least sum of
// squares (most even), then the lexicographically largest counts. Throws ScheduleError for
// stages < 1 or a negative or non-finite cost.
std::vector<int> balanced_split(const std::vector<double>& block, double first, double last, int stages);

// The slowest stage of a split (same cost convention).
double slowest_stage(const std::vector<double>& block, double first, double last, const std::vector<int>& counts);

}  // namespace minipipe::sched
