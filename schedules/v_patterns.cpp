// V-Half and V-Min as their authors build them (Qi et al. 2024, "Pipeline Parallelism with
// Controllable Memory", section 4): a stable pattern repeated every 6 slots, then squeezed
// greedily slot by slot without raising any rank's peak memory.
#include <algorithm>
#include <array>
#include <queue>
#include <tuple>

#include "schedules/zb_orders.hpp"

namespace minipipe::sched {

namespace {

// Kinds per rank: 0 = forward of the first chunk (stage r), 1 = forward of the second (stage
// 2p-1-r), 2 = input gradient of the second chunk, 3 = of the first, 4 (and 5) = weight passes.
// A rank's plan: per kind, the slot of each micro-batch (ascending).
using Plan = std::vector<std::vector<long long>>;

struct Dropped {};
void need(bool ok) {
  if (!ok) throw Dropped{};
}

long long last_slot(const Plan& plan) {
  long long bound = -1;
  for (const auto& kind : plan) {
    need(!kind.empty());
    bound = std::max(bound, kind.back());
  }
  return bound;
}

// The kind whose next unplaced entry has the earliest slot (lowest kind on a tie); `at` are the
// per-kind positions, `kinds` how many kinds take part.
std::pair<long long, int> earliest(const Plan& plan, const std::vector<std::size_t>& at, int kinds, long long never) {
  std::pair<long long, int> best{never, 0};
  for (int t = kinds - 1; t >= 0; --t) {
    const long long slot = at[t] < plan[t].size() ? plan[t][at[t]] : never;
    if (slot <= best.first) best = {slot, t};
  }
  return best;
}

// Weight passes into the free slots: at each slot without a forward or input gradient, the oldest
// pending one (split: per chunk, the first chunk's kind 4 before kind 5); the rest after the end.
void add_weights(Plan& plan, bool split) {
  need(plan.size() == 4);
  const long long bound = last_slot(plan), never = bound + 1;
  plan.resize(split ? 6 : 5);
  std::array<int, 2> waiting{0, 0};
  std::vector<std::size_t> at(4, 0);
  long long i = 0;
  for (i = 0; i <= bound; ++i) {
    const auto [slot, kind] = earliest(plan, at, 4, never);
    need(slot != never);
    if (slot == i) {
      ++at[kind];
      if (kind >= 2) ++waiting[split ? kind - 2 : 0];
    } else {
      for (int w = 0; w < 2; ++w)
        if (waiting[w] > 0) {
          plan[4 + w].push_back(i);
          --waiting[w];
          break;
        }
    }
  }
  --i;
  for (int w = 0; w < 2; ++w)
    for (; waiting[w] > 0; --waiting[w]) plan[4 + w].push_back(++i);
}

// A rank's peak memory (forwards hold, weight passes free; without weight passes in the plan,
// one frees at each empty slot as add_weights would put it).
int peak_memory(const Plan& plan) {
  static constexpr int kDelta[] = {1, 1, 0, 0, -1};
  const bool has_w = plan.size() > 4;
  const long long bound = last_slot(plan), never = bound + 1;
  const int kinds = static_cast<int>(plan.size());
  std::vector<std::size_t> at(plan.size(), 0);
  int waiting = 0, mem = 0, peak = 0;
  for (long long i = 0; i <= bound; ++i) {
    const auto [slot, kind] = earliest(plan, at, kinds, never);
    need(slot != never);
    if (slot == i) {
      ++at[kind];
      mem += kDelta[std::min(kind, 4)];
      if (kind == 2 || kind == 3) ++waiting;
    } else if (!has_w && waiting > 0) {
      mem -= 1;
      --waiting;
    }
    peak = std::max(peak, mem);
  }
  return peak;
}

struct Item {
  long long slot;
  int rank, kind, mb;
  bool operator>(const Item& o) const {
    return std::tie(slot, rank, kind, mb) > std::tie(o.slot, o.rank, o.kind, o.mb);
  }
};

// Walks every rank's entries in slot order (then rank, kind, micro-batch), each kind's
// micro-batches in turn, calling visit(rank, kind, mb, slot).
template <class Visit>
void in_slot_order(const std::vector<Plan>& plans, Visit visit) {
  std::priority_queue<Item, std::vector<Item>, std::greater<Item>> heads;
  for (int r = 0; r < static_cast<int>(plans.size()); ++r)
    for (int k = 0; k < static_cast<int>(plans[r].size()); ++k)
      if (!plans[r][k].empty()) heads.push({plans[r][k][0], r, k, 0});
  while (!heads.empty()) {
    const Item it = heads.top();
    heads.pop();
    visit(it.rank, it.kind, it.mb);
    const auto& list = plans[it.rank][it.kind];
    if (static_cast<std::size_t>(it.mb) + 1 < list.size()) heads.push({list[it.mb + 1], it.rank, it.kind, it.mb + 1});
  }
}

// Each entry as early as its rank's previous one and its inputs allow with unit times: the
// plans' slots squeezed.
std::vector<Plan> squeezed(const std::vector<Plan>& plans) {
  const int p = static_cast<int>(plans.size());
  std::vector<Plan> end(p);
  for (int r = 0; r < p; ++r) {
    end[r].resize(plans[r].size());
    for (std::size_t k = 0; k < plans[r].size(); ++k) end[r][k].assign(plans[r][k].size(), -1);
  }
  std::vector<long long> last(p, 0);
  in_slot_order(plans, [&](int r, int k, int mb) {
    const auto done = [&](int rank, int kind, int b) {
      const long long e = end[rank][kind][b];
      need(e >= 0);
      return e;
    };
    long long t = last[r];
    if ((k == 0 || k == 2) && r > 0) t = std::max(t, done(r - 1, k, mb));
    if ((k == 1 || k == 3) && r + 1 < p) t = std::max(t, done(r + 1, k, mb));
    if (k > 0 && k < 4) t = std::max(t, done(r, k - 1, mb));
    if (mb > 0) t = std::max(t, done(r, k, mb - 1));
    end[r][k][mb] = last[r] = t + 1;
  });
  for (auto& plan : end)
    for (auto& kind : plan)
      for (auto& x : kind) --x;  // start slots
  return end;
}

// Moves each entry (outside the steady middle) to the earliest free slot after its inputs that
// does not raise the rank's peak memory; with_w: weight passes are placed first and move too.
std::vector<Plan> reorder(std::vector<Plan> plans, bool with_w) {
  const int p = static_cast<int>(plans.size());
  if (with_w)
    for (auto& plan : plans) add_weights(plan, false);
  int limit = 0;
  for (const auto& plan : plans) limit = std::max(limit, peak_memory(plan));
  std::vector<std::vector<bool>> taken(p);
  for (int r = 0; r < p; ++r) {
    need(!plans[r].back().empty());
    taken[r].assign(static_cast<std::size_t>(plans[r].back().back() + 1), false);
  }
  const std::size_t last_mb = plans[0][0].size() - 1;
  const auto take = [&](int r, long long slot) {
    need(slot >= 0 && static_cast<std::size_t>(slot) < taken[r].size());
    taken[r][slot] = true;
  };
  int phase = 0;
  // Entries are visited in their original slot order; a moved entry only moves earlier.
  const std::vector<Plan> original = plans;
  in_slot_order(original, [&](int r, int k, int mb) {
    auto& plan = plans[r];
    const long long slot = plan[k][mb];
    if (k == 3 && r == 0 && phase == 0) phase = 1;
    if (phase == 1) {
      if (k == 0 && static_cast<std::size_t>(mb) == last_mb) phase = 2;
      take(r, slot);
      return;
    }
    if (phase == 0 && !with_w) {
      take(r, slot);
      return;
    }
    long long from = -1;
    if ((k == 0 || k == 2) && r > 0) from = std::max(from, plans[r - 1][k][mb]);
    if ((k == 1 || k == 3) && r + 1 < p) from = std::max(from, plans[r + 1][k][mb]);
    if (k > 0 && k < 4) from = std::max(from, plan[k - 1][mb]);
    if (k == 4) {
      std::vector<long long> b(plan[2]);
      b.insert(b.end(), plan[3].begin(), plan[3].end());
      std::sort(b.begin(), b.end());
      from = std::max(from, b[mb]);
    }
    if (mb > 0) from = std::max(from, plan[k][mb - 1]);
    ++from;
    need(from <= slot);
    bool moved = false;
    for (long long t = from; t < slot && !moved; ++t) {
      need(static_cast<std::size_t>(t) < taken[r].size());
      if (taken[r][t]) continue;
      plan[k][mb] = t;
      moved = peak_memory(plan) <= limit;
    }
    if (!moved) plan[k][mb] = slot;
    take(r, plan[k][mb]);
  });
  if (!with_w)
    for (auto& plan : plans) add_weights(plan, false);
  return squeezed(plans);
}

}  // namespace

long long v_pattern_work(int p, int m) {
  return 1LL * p * m * m * 64;
}

std::optional<Schedule> v_pattern_order(int p, int m, bool half) {
  if (p < 2 || m < 1) return std::nullopt;
  // The stable pattern: rank i's first slot of each kind within a period of 6.
  std::vector<Plan> plans(p);
  for (int i = 0; i < p; ++i) {
    std::array<long long, 4> first;
    if (half) {
      const int gap = p % 2 == 0 ? 3 : 0;
      first = {2LL * i, 3LL * p - i - 2, 3LL * p + gap + 2 * i - 1, 6LL * p + gap - i - 2};
    } else {
      const int gap = p % 3 == 0 ? 2 : 0;
      first = {1LL * i, 2LL * p - i - 1, 2LL * p + gap + i, 4LL * p + gap - i - 1};
    }
    plans[i].resize(4);
    for (int k = 0; k < 4; ++k)
      for (int mb = 0; mb < m; ++mb) plans[i][k].push_back(first[k] + 6LL * mb);
  }
  try {
    plans = reorder(plans, true);
    for (auto& plan : plans) plan.resize(4);
    plans = reorder(plans, false);
    for (auto& plan : plans) {
      plan.resize(4);
      add_weights(plan, true);
    }
  } catch (const Dropped&) {
    return std::nullopt;
  }
  Schedule s;
  s.name = half ? "v-half-pattern" : "v-min-pattern";
  s.p = p, s.v = 2, s.m = m;
  s.stage_to_rank = v_placement(p, 2);
  s.ranks.resize(p);
  in_slot_order(plans, [&](int r, int k, int mb) {
    const bool second = k == 1 || k == 2 || k == 4;  // stage 2p-1-r
    const Op op = k < 2 ? Op::F : k < 4 ? Op::I : Op::W;
    s.ranks[r].push_back(Action::make(op, second ? 2 * p - 1 - r : r, mb));
  });
  return s;
}

}  // namespace minipipe::sched
