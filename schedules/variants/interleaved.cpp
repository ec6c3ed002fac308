// Interleaved 1F1B (Narayanan et al. 2021, Megatron-LM): v chunks per rank in looped placement,
// micro-batches through the chunks in groups; the warm-up found by bisection where Megatron's stalls.
#include "schedules/variant.hpp"

#include <algorithm>
#include <memory>

namespace minipipe::sched::gen {

namespace {

// Forwards walk micro-batches in groups of `group` through chunk 0, 1, ..., v-1; backwards walk
// the chunks in reverse. Warm-up is 2(p-1-r) + (v-1)*group forwards so each rank's first
// backward arrives just as warm-up ends. group = p is Megatron's default (depth-first); group >=
// m sends every micro-batch through a chunk before the next chunk starts (the breadth-first order
// of Looped BFS). When group does not divide m the last group is smaller (Megatron's remainder
// group).
Rankwise gen_interleaved(int p, int m, int v, int group) {
  Rankwise w = rankwise("interleaved-1f1b", p, m, v, Placement::loop, {});
  w.header.group = group;
  const int total = m * v;
  // The order in which each rank visits (chunk, micro-batch): the same on every rank.
  auto order = std::make_shared<std::vector<std::pair<int, int>>>();  // {chunk, micro-batch}
  order->reserve(static_cast<std::size_t>(total));
  // A group of m or more is one group of all m (group is any int >= 1: no first + group).
  const int step = std::min(group, m);
  for (int first = 0; first < m; first += step)
    for (int c = 0; c < v; ++c)
      for (int mb = first; mb < first + std::min(step, m - first); ++mb) order->emplace_back(c, mb);
  auto build = [&](int extra) {
    w.row = [order, p, v, group, total, extra](int r, std::vector<Action>& row) {
      const auto& o = *order;
      auto fwd = [&](int k) { return Action::make(Op::F, o[k].first * p + r, o[k].second); };
      auto bwd = [&](int k) { return Action::make(Op::B, (v - 1 - o[k].first) * p + r, o[k].second); };
      // In 64 bits: (v-1) * group overflows an int for a large group (then every forward first).
      const int warmup = static_cast<int>(
          std::min<long long>(2LL * (p - 1 - r) + static_cast<long long>(v - 1) * group + extra, total));
      for (int k = 0; k < warmup; ++k) row.push_back(fwd(k));
      for (int k = 0; k < total - warmup; ++k) {
        row.push_back(fwd(warmup + k));
        row.push_back(bwd(k));
      }
      for (int k = total - warmup; k < total; ++k) row.push_back(bwd(k));
    };
  };
  // Megatron's warm-up is enough when every group is full and group >= p. A remainder group or
  // a group smaller than p can leave a rank's first backward waiting on a forward that rank has
  // not issued yet; then every rank warms up by the fewest extra forwards that let the schedule
  // run (extra = total is all forwards first, which always runs), found by bisection: every
  // candidate kept as the upper end has run, so the result is valid whatever the search meets.
  // Each candidate runs as rank programs, one rank's actions uncompressed at a time.
  const auto runs = [&](int extra) {
    build(extra);
    return runs_to_end(programs(w));
  };
  if (runs(0)) return w;
  int lo = 0, hi = total;
  while (hi - lo > 1) {
    const int mid = lo + (hi - lo) / 2;
    (runs(mid) ? hi : lo) = mid;
  }
  build(hi);
  return w;
}

}  // namespace

Plan interleaved(const VariantCall& c) {
  return {std::nullopt, gen_interleaved(c.p, c.m, c.v, c.opt.group == 0 ? c.p : c.opt.group)};
}

// Megatron's depth-first order with full groups only.
std::optional<double> interleaved_bubble(const BubbleCase& b) {
  if (b.group != b.p || b.m % b.p != 0) return std::nullopt;
  const double p = b.p, m = b.m, v = b.v;
  return (p - 1) / (v * m + p - 1);
}

}  // namespace minipipe::sched::gen
