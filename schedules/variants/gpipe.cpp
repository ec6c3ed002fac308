// GPipe (fill-drain): all forwards, then all backwards, last micro-batch first because it is
// the one whose forward finished most recently on the last stage.
#include "schedules/variant.hpp"

namespace minipipe::sched::gen {

Plan gpipe(const VariantCall& c) {
  const int m = c.m;
  return {std::nullopt, rankwise(c.name, c.p, m, 1, Placement::loop, [m](int r, std::vector<Action>& row) {
            for (int mb = 0; mb < m; ++mb) row.push_back(Action::make(Op::F, r, mb));
            for (int mb = m - 1; mb >= 0; --mb) row.push_back(Action::make(Op::B, r, mb));
          })};
}

// GPipe and 1F1B: the fill and the drain of p-1 stages around m micro-batches.
std::optional<double> fill_drain_bubble(const BubbleCase& b) {
  const double p = b.p, m = b.m;
  return (p - 1) / (m + p - 1);
}

}  // namespace minipipe::sched::gen
