// Bidirectional DualPipe (DeepSeek-V3 report, deepseek-ai/DualPipe): two copies of the model fed
// from both ends; DeepSeek's phases at even p, each copy's 1F1B merged by time at odd p.
#include "schedules/execute.hpp"
#include "schedules/variant.hpp"
#include "schedules/variants/constructions.hpp"

#include <algorithm>

namespace minipipe::sched::gen {

namespace {

// Copy 0 = stages 0..p-1 on ranks 0..p-1, copy 1 = stages p..2p-1 on ranks p-1..0 (the V
// placement), even micro-batches through copy 0 (fed at rank 0), odd ones through copy 1 (fed at
// rank p-1). Rank r and rank p-1-r run the same phases, each starting with the copy fed at its own
// end; with p/2 such pairs and m/2 micro-batches per direction, every rank runs the phases of
// DualPipeV. Needs p and m even and m >= 2p (DeepSeek's conditions).
Rankwise gen_dualpipe_deepseek(int p, int m) {
  Rankwise w = rankwise("dualpipe", p, m, 2, Placement::v, {});
  w.header.chains = 2;
  w.row = [p, m, L = w.header.chain_length()](int r, std::vector<Action>& row) {
    const int half = p / 2;
    const int own = r < half ? r : 2 * p - 1 - r;    // the stage of the copy fed at this rank's end
    const int other = r < half ? 2 * p - 1 - r : r;  // the stage of the copy fed at the other end
    const std::size_t from = row.size();
    RankBuilder rb(row);
    dualpipe_rank(rb, own, other, half, std::min(r, p - 1 - r), m / 2);
    // RankBuilder numbered each stage's micro-batches 0, 1, ... in its copy; copy c's k-th is
    // micro-batch 2k + c of the step.
    auto global = [L](Action& x) { x.microbatch = x.microbatch * 2 + x.stage / L; };
    for (std::size_t k = from; k < row.size(); ++k) {
      Action& a = row[k];
      if (a.op == Op::OVERLAP_F_B) {
        for (auto& x : a.sub) global(x);
      } else {
        global(a);
      }
    }
  };
  return w;
}

// Bidirectional DualPipe where DeepSeek's phases do not apply (p odd: they pair rank r with rank
// p-1-r and have no middle rank). Each copy alone runs 1F1B over its p parts with its own
// micro-batches, timed with F = 1, B = 2; each rank then runs both copies' actions in the order of
// those times, so one copy's fill and drain fall into the other's busy time. Valid by
// construction: an action's inputs start strictly earlier in its copy's 1F1B, so the unrun action
// of earliest time (earliest in its rank's list on a tie) always has its inputs and can run.
// Built whole (the order of a rank depends on the whole 1F1B's times).
Schedule gen_dualpipe_merged(int p, int m) {
  Schedule s = build(rankwise("dualpipe", p, m, 2, Placement::v, [](int, std::vector<Action>&) {}));
  s.chains = 2;
  std::vector<std::vector<std::pair<double, Action>>> timed(static_cast<std::size_t>(p));
  for (int c = 0; c < 2; ++c) {
    const int mc = (m - c + 1) / 2;  // micro-batches 2k + c, k < mc
    if (mc == 0) continue;
    const Schedule one = build(gen_1f1b(p, mc));
    const Execution ex = execute(
        one, [](const Action& a) { return a.op == Op::F ? 1.0 : 2.0; }, 0.0);
    for (int pos = 0; pos < p; ++pos) {
      const int rank = c == 0 ? pos : p - 1 - pos;
      const auto& row = one.ranks[static_cast<std::size_t>(pos)];
      for (std::size_t k = 0; k < row.size(); ++k)
        timed[static_cast<std::size_t>(rank)].emplace_back(
            ex.start[static_cast<std::size_t>(pos)][k],
            Action::make(row[k].op, c * p + pos, 2 * row[k].microbatch + c));
    }
  }
  for (int r = 0; r < p; ++r) {
    auto& list = timed[static_cast<std::size_t>(r)];
    std::stable_sort(list.begin(), list.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (auto& [time, a] : list) s.ranks[static_cast<std::size_t>(r)].push_back(std::move(a));
  }
  return s;
}

}  // namespace

// Built whole, then compressed by make_rank_programs (minipipe scale does not sweep it). For m
// < 2p or m odd, the order of the next even m >= 2p restricted to m.
Plan dualpipe(const VariantCall& c) {
  const int p = c.p, m = c.m;
  if (p % 2 == 1) return {gen_dualpipe_merged(p, m), {}};
  const int full = std::max(2 * p, m + m % 2);
  return {build(full == m ? gen_dualpipe_deepseek(p, m) : keep_microbatches(gen_dualpipe_deepseek(p, full), m)), {}};
}

// DualPipe's table; each micro-batch visits one stage per rank (one part of one copy): m (F + B)
// of work. Holds at p even and m even (DeepSeek's phases).
std::optional<double> dualpipe_bubble(const BubbleCase& c) {
  if (c.m % 2 || c.p % 2) return std::nullopt;
  if (c.F != c.I || c.F != c.W) return std::nullopt;
  if (c.overlap != 1.0 || c.B != c.I + c.W) return std::nullopt;
  const double p = c.p, m = c.m;
  const double b = (p / 2 - 1) * ((c.F + c.B) + c.B - 3 * c.W);
  return b / (m * (c.F + c.B) + b);
}

}  // namespace minipipe::sched::gen
