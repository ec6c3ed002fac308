// sequential: no pipelining; a micro-batch runs forward through every stage and back before the
// next one starts, so at any time exactly one rank is busy.
#include "schedules/variant.hpp"

namespace minipipe::sched::gen {

Plan sequential(const VariantCall& c) {
  const int m = c.m;
  return {std::nullopt, rankwise(c.name, c.p, m, 1, Placement::loop, [m](int r, std::vector<Action>& row) {
            for (int mb = 0; mb < m; ++mb) {
              row.push_back(Action::make(Op::F, r, mb));
              row.push_back(Action::make(Op::B, r, mb));
            }
          })};
}

std::optional<double> sequential_bubble(const BubbleCase& b) {
  const double p = b.p;
  return (p - 1) / p;
}

}  // namespace minipipe::sched::gen
