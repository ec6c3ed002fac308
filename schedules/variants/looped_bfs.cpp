// Looped BFS (Lamy-Poirier 2023, "Breadth-First Pipeline Parallelism"): every micro-batch
// through chunk 0, then chunk 1, ...; backwards chunk v-1 first. Memory grows with m like GPipe.
#include "schedules/variant.hpp"

namespace minipipe::sched::gen {

Plan looped_bfs(const VariantCall& c) {
  const int p = c.p, m = c.m, v = c.v;
  return {std::nullopt, rankwise(c.name, p, m, v, Placement::loop, [p, m, v](int r, std::vector<Action>& row) {
            for (int ch = 0; ch < v; ++ch)
              for (int mb = 0; mb < m; ++mb) row.push_back(Action::make(Op::F, ch * p + r, mb));
            for (int ch = v - 1; ch >= 0; --ch)
              for (int mb = 0; mb < m; ++mb) row.push_back(Action::make(Op::B, ch * p + r, mb));
          })};
}

// Needs m >= p (the table's warm-up minimum).
std::optional<double> looped_bfs_bubble(const BubbleCase& b) {
  const double p = b.p, m = b.m, v = b.v;
  return (p - 1) / (v * m + p - 1);
}

}  // namespace minipipe::sched::gen
