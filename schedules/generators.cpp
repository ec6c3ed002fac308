// Warm-up / steady / cool-down construction of each schedule variant, rank by rank.
// Each follows the structure of its paper so the closed-form bubbles in the tests hold exactly.
#include "schedules/schedule.hpp"

#include "schedules/execute.hpp"
#include "schedules/greedy.hpp"
#include "schedules/program.hpp"
#include "schedules/simulator.hpp"

#include <algorithm>
#include <deque>
#include <functional>
#include <map>
#include <memory>

namespace minipipe::sched {

namespace {

// Appends actions to one rank's list, numbering micro-batches per (stage, kind) in issue order,
// which is how every variant below walks through its micro-batches.
class RankBuilder {
 public:
  explicit RankBuilder(std::vector<Action>& out) : out_(out) {}

  void forward(int stage) { out_.push_back(Action::make(Op::F, stage, next(fwd_, stage))); }
  void full_backward(int stage) { out_.push_back(Action::make(Op::B, stage, next(bwd_, stage))); }
  // Backward-input; its weight pass joins a FIFO that weight() drains oldest first.
  void input_backward(int stage) {
    const int mb = next(bwd_, stage);
    out_.push_back(Action::make(Op::I, stage, mb));
    pending_w_.push_back(Action::make(Op::W, stage, mb));
  }
  void backward(int stage, bool split) {
    if (split)
      input_backward(stage);
    else
      full_backward(stage);
  }
  bool weight() {
    if (pending_w_.empty()) return false;
    out_.push_back(pending_w_.front());
    pending_w_.pop_front();
    return true;
  }
  void overlapped(int fwd_stage, int bwd_stage) {
    Action f = Action::make(Op::F, fwd_stage, next(fwd_, fwd_stage));
    Action b = Action::make(Op::B, bwd_stage, next(bwd_, bwd_stage));
    out_.push_back(Action::overlap(f, b));
  }
  int forwards_done(int stage) const { return count(fwd_, stage); }
  int backwards_done(int stage) const { return count(bwd_, stage); }
  std::size_t pending_weights() const { return pending_w_.size(); }

 private:
  static int next(std::map<int, int>& c, int stage) { return c[stage]++; }
  static int count(const std::map<int, int>& c, int stage) {
    auto it = c.find(stage);
    return it == c.end() ? 0 : it->second;
  }
  std::vector<Action>& out_;
  std::map<int, int> fwd_, bwd_;
  std::deque<Action> pending_w_;
};

// A variant built rank by rank: each rank's row depends on p, m, v and its rank only, so a
// simulation can build one rank at a time (make_rank_programs) and a Schedule all of them.
struct Rankwise {
  Schedule header;  // everything but the rows (ranks is empty)
  std::function<void(int rank, std::vector<Action>& row)> row;
};

Rankwise rankwise(const std::string& name, int p, int m, int v, Placement pl,
                  std::function<void(int, std::vector<Action>&)> row) {
  Rankwise w{Schedule{}, std::move(row)};
  w.header.name = name;
  w.header.p = p;
  w.header.v = v;
  w.header.m = m;
  w.header.stage_to_rank = pl == Placement::v ? v_placement(p, v) : looped_placement(p, v);
  return w;
}

Schedule build(const Rankwise& w) {
  Schedule s = w.header;
  s.ranks.resize(static_cast<std::size_t>(s.p));
  for (int r = 0; r < s.p; ++r) {
    // Up to three actions (F, I, W) per stage and micro-batch; reserving avoids regrowth.
    s.ranks[r].reserve(static_cast<std::size_t>(3) * s.v * s.m);
    w.row(r, s.ranks[r]);
  }
  return s;
}

RankPrograms programs(const Rankwise& w) {
  const Schedule& h = w.header;
  RankPrograms out;
  out.name = h.name, out.p = h.p, out.v = h.v, out.m = h.m, out.group = h.group, out.chains = h.chains;
  out.stage_to_rank = h.stage_to_rank;
  out.ranks.reserve(static_cast<std::size_t>(h.p));
  std::vector<Action> row;  // one rank's actions at a time
  row.reserve(static_cast<std::size_t>(3) * h.v * h.m);
  for (int r = 0; r < h.p; ++r) {
    row.clear();
    w.row(r, row);
    out.ranks.push_back(RankProgram::compress(row));
  }
  return out;
}

// No pipelining: a micro-batch runs forward through every stage and back before the next one
// starts, so at any time exactly one rank is busy.
Rankwise gen_sequential(int p, int m) {
  return rankwise("sequential", p, m, 1, Placement::loop, [m](int r, std::vector<Action>& row) {
    for (int mb = 0; mb < m; ++mb) {
      row.push_back(Action::make(Op::F, r, mb));
      row.push_back(Action::make(Op::B, r, mb));
    }
  });
}

// GPipe (fill-drain): all forwards, then all backwards, last micro-batch first because it is
// the one whose forward finished most recently on the last stage.
Rankwise gen_gpipe(int p, int m) {
  return rankwise("gpipe", p, m, 1, Placement::loop, [m](int r, std::vector<Action>& row) {
    for (int mb = 0; mb < m; ++mb) row.push_back(Action::make(Op::F, r, mb));
    for (int mb = m - 1; mb >= 0; --mb) row.push_back(Action::make(Op::B, r, mb));
  });
}

// 1F1B (PipeDream-Flush): p-1-r warm-up forwards, then one forward and one backward at a time,
// then the remaining backwards; at most p-r micro-batches are in flight on rank r.
Rankwise gen_1f1b(int p, int m) {
  return rankwise("1f1b", p, m, 1, Placement::loop, [p, m](int r, std::vector<Action>& row) {
    RankBuilder rb(row);
    const int warmup = std::min(p - 1 - r, m);
    for (int k = 0; k < warmup; ++k) rb.forward(r);
    while (rb.forwards_done(r) < m) {
      rb.forward(r);
      rb.full_backward(r);
    }
    while (rb.backwards_done(r) < m) rb.full_backward(r);
  });
}

// Interleaved 1F1B (Narayanan et al. 2021, Megatron-LM): forwards walk micro-batches in
// groups of `group` through chunk 0, 1, ..., v-1; backwards walk the chunks in reverse. Warm-up
// is 2(p-1-r) + (v-1)*group forwards so each rank's first backward arrives just as warm-up
// ends. group = p is Megatron's default (depth-first); group >= m sends every micro-batch
// through a chunk before the next chunk starts (the breadth-first order of Looped BFS). When
// group does not divide m the last group is smaller (Megatron's remainder group).
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

// Looped BFS (Lamy-Poirier 2023, "Breadth-First Pipeline Parallelism"): every micro-batch
// through chunk 0, then chunk 1, ...; backwards chunk v-1 first. Memory grows with m like GPipe.
Rankwise gen_looped_bfs(int p, int m, int v) {
  return rankwise("looped-bfs", p, m, v, Placement::loop, [p, m, v](int r, std::vector<Action>& row) {
    for (int c = 0; c < v; ++c)
      for (int mb = 0; mb < m; ++mb) row.push_back(Action::make(Op::F, c * p + r, mb));
    for (int c = v - 1; c >= 0; --c)
      for (int mb = 0; mb < m; ++mb) row.push_back(Action::make(Op::B, c * p + r, mb));
  });
}

// ZB-H1 and ZB-H2 (Qi et al. 2023, "Zero Bubble Pipeline Parallelism", section 2): backward is
// split into I and W; rank r keeps up to `deferred` weight passes pending so its I passes run
// earlier, and the postponed W passes fill the cool-down. ZB-H1 keeps 1F1B's warm-up (p-r
// forwards) and defers r; ZB-H2 warms up with 2(p-r)-1 forwards and defers 2r, which turns
// the pipeline into a parallelogram with no idle time between a rank's first and last action.
Rankwise gen_zero_bubble_h(const std::string& name, int p, int m, bool h2) {
  return rankwise(name, p, m, 1, Placement::loop, [p, m, h2](int r, std::vector<Action>& row) {
    RankBuilder rb(row);
    const int warmup = std::min(h2 ? 2 * (p - r) - 1 : p - r, m);
    const std::size_t deferred = static_cast<std::size_t>(h2 ? 2 * r : r);
    for (int k = 0; k < warmup; ++k) rb.forward(r);
    while (rb.backwards_done(r) < m) {
      rb.input_backward(r);
      if (rb.pending_weights() > deferred) rb.weight();
      if (rb.forwards_done(r) < m) rb.forward(r);
    }
    while (rb.weight()) {
    }
  });
}

// ZB-V (same paper, section 6): two chunks per rank in V placement (rank r holds stages r and
// 2p-1-r), F = I = W assumed; warm-up fills chunk 0 with 2(p-r)-1 forwards, then mixes in chunk 1,
// steady state alternates F/I/W on both chunks, cool-down runs the remaining I's and drains W's.
Rankwise gen_zbv(int p, int m) {
  return rankwise("zb-v", p, m, 2, Placement::v, [p, m](int r, std::vector<Action>& row) {
    const int s0 = r, s1 = 2 * p - 1 - r;
    int f0 = 0, f1 = 0, b0 = 0, b1 = 0;
    auto F = [&](int st, int& c) { row.push_back(Action::make(Op::F, st, c++)); };
    auto IW = [&](int st, int& c) {
      row.push_back(Action::make(Op::I, st, c));
      row.push_back(Action::make(Op::W, st, c));
      ++c;
    };
    for (int k = 0; k < 2 * (p - r) - 1; ++k) F(s0, f0);
    for (int k = 0; k < r; ++k) {
      F(s1, f1);
      F(s0, f0);
    }
    for (int k = 0; k < p - r; ++k) {
      F(s1, f1);
      IW(s1, b1);
    }
    while (f1 < f0 || f0 < m) {
      if (f0 < m) F(s0, f0);
      IW(s0, b0);
      F(s1, f1);
      IW(s1, b1);
    }
    // Cool-down: input gradients first (they are on the critical path), weights after.
    int w0 = b0, w1 = b1;
    for (int k = 0; k < r; ++k) {
      row.push_back(Action::make(Op::I, s0, b0++));
      row.push_back(Action::make(Op::I, s1, b1++));
    }
    for (int k = 0; k < p - r; ++k) {
      row.push_back(Action::make(Op::I, s0, b0++));
      row.push_back(Action::make(Op::W, s0, w0++));
    }
    while (w1 < b1) row.push_back(Action::make(Op::W, s1, w1++));
    while (w0 < b0) row.push_back(Action::make(Op::W, s0, w0++));
  });
}

// The eight phases of one rank of DeepSeek's DualPipe family (deepseek-ai/DualPipe), shared by
// DualPipeV and bidirectional DualPipe. `half` ranks and `chunks` micro-batches per direction as
// that family counts them; this rank is `pos` of them (0 = the end that is fed first); its
// stage `first` is reached by the micro-batches it sees first, `second` by the others. Steady
// state pairs a forward of one stage with a full backward of the other in OVERLAP_F_B units; the
// warm-up tail and the cool-down use I/W splitting so deferred weight passes fill the drain.
void dualpipe_rank(RankBuilder& rb, int first, int second, int half, int pos, int chunks) {
  const int s0 = first, s1 = second;
  // 1: forwards of the first stage that fill the pipe ahead of this rank.
  for (int k = 0; k < 2 * (half - pos - 1); ++k) rb.forward(s0);
  // 2: forwards alternating between the two stages.
  for (int k = 0; k < pos + 1; ++k) {
    rb.forward(s0);
    rb.forward(s1);
  }
  // 3: second-stage input backward, its weight pass, next second-stage forward (zero-bubble style).
  for (int k = 0; k < half - pos - 1; ++k) {
    rb.input_backward(s1);
    rb.weight();
    rb.forward(s1);
  }
  // 4: steady state, two overlapped pairs per step. The middle rank runs its very first pair
  // unoverlapped: its backward can start only once its own forward has finished.
  for (int k = 0; k < chunks - 2 * half + pos + 1; ++k) {
    if (k == 0 && pos == half - 1) {
      rb.forward(s0);
      rb.full_backward(s1);
    } else {
      rb.overlapped(s0, s1);
    }
    rb.overlapped(s1, s0);
  }
  // 5: second-stage backwards with overlapped second-stage forward / first-stage backward.
  for (int k = 0; k < half - pos - 1; ++k) {
    rb.full_backward(s1);
    rb.overlapped(s1, s0);
  }
  // 6: backward pairs; the second half switches to I so its W's can fill the tail.
  bool split = false;
  const int n6 = pos + 1;
  for (int k = 0; k < n6; ++k) {
    if (k == n6 / 2 && pos % 2 == 1) split = true;
    rb.backward(s1, split);
    if (k == n6 / 2 && pos % 2 == 0) split = true;
    rb.backward(s0, split);
  }
  // 7: one deferred weight pass per remaining first-stage backward.
  for (int k = 0; k < half - pos - 1; ++k) {
    rb.weight();
    rb.backward(s0, split);
  }
  // 8: drain the weight passes.
  while (rb.weight()) {
  }
}

// DualPipeV (DeepSeek-V3 report; the V-shaped "cut-in-half" DualPipe of deepseek-ai/DualPipe):
// one model copy in V placement (rank r holds stages r and 2p-1-r), every micro-batch through both.
Rankwise gen_dualpipev(int p, int m) {
  return rankwise("dualpipev", p, m, 2, Placement::v, [p, m](int r, std::vector<Action>& row) {
    RankBuilder rb(row);
    dualpipe_rank(rb, r, 2 * p - 1 - r, p, r, m);
  });
}

// Bidirectional DualPipe (DeepSeek-V3 report, deepseek-ai/DualPipe): two copies of the model, copy
// 0 = stages 0..p-1 on ranks 0..p-1, copy 1 = stages p..2p-1 on ranks p-1..0 (the V placement), even
// micro-batches through copy 0 (fed at rank 0), odd ones through copy 1 (fed at rank p-1). Rank r
// and rank p-1-r run the same phases, each starting with the copy fed at its own end; with p/2
// such pairs and m/2 micro-batches per direction, every rank runs the phases of DualPipeV. Needs
// p and m even and m >= 2p (DeepSeek's conditions).
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

// The schedule restricted to micro-batches 0..m-1: every other action dropped, and a pair
// that loses one half kept as its other half. Each dropped action's dependants are dropped with
// it (they are of the same micro-batch), so what remains runs in the same order without waiting
// for anything removed: a valid schedule for m' >= m stays valid for m. This is how the
// variants whose warm-up needs a minimum m accept any m (the warm-up is cut short).
Rankwise keep_microbatches(Rankwise w, int m) {
  w.header.m = m;
  w.row = [all = std::move(w.row), m](int r, std::vector<Action>& row) {
    const std::size_t from = row.size();
    all(r, row);
    std::size_t to = from;
    for (std::size_t k = from; k < row.size(); ++k) {
      Action& a = row[k];
      const bool pair = a.op == Op::OVERLAP_F_B;
      const bool f = pair ? a.sub[0].microbatch < m : a.microbatch < m, b = pair && a.sub[1].microbatch < m;
      if (pair && f != b) a = Action(a.sub[f ? 0 : 1]);  // the pair loses a half
      if (!f && !b) continue;
      if (to != k) row[to] = std::move(a);
      ++to;
    }
    row.resize(to);
  };
  return w;
}

// The memory caps of "Pipeline Parallelism with Controllable Memory" (Qi et al. 2024,
// arXiv 2405.15362, and its table in sail-sg's repository): V-Half holds (p+2)/2 micro-batches
// per rank, V-Min (p+4)/3, against 1F1B's p. Chunk-micro-batches are half a micro-batch each.
int v_half_cap(int p) {
  return 2 * ((p + 2) / 2);
}
int v_min_cap(int p) {
  return 2 * ((p + 4) / 3);
}

GreedyInput greedy_input(const std::string& name, int p, int m, int v, Placement pl, const ScheduleOptions& opt) {
  GreedyInput in;
  in.name = name;
  in.p = p;
  in.m = m;
  in.v = v;
  in.placement = pl;
  in.F = opt.F.empty() ? std::vector<double>{1.0} : opt.F;
  in.I = opt.I.empty() ? std::vector<double>{1.0} : opt.I;
  in.W = opt.W.empty() ? std::vector<double>{1.0} : opt.W;
  in.comm = opt.comm;
  return in;
}

CostModel cost_of(const GreedyInput& in) {
  CostModel cost;
  cost.F = in.F;
  cost.I = in.I;
  cost.W = in.W;
  cost.comm = in.comm;
  return cost;
}

// Keeps the fastest schedule offered whose peak activation memory (micro-batch units, a V chunk
// counting 1/v) is at most `bound`; the first offered wins a tie, so a paper's construction offered
// first stays wherever nothing is strictly faster (its closed form then holds).
class Fastest {
 public:
  Fastest(CostModel cost, double bound) : cost_(std::move(cost)), bound_(bound) {}
  void offer(Schedule s) {
    // The makespan only: simulate_totals's is simulate's to the bit, without the timeline.
    const StepTotals t = simulate_totals(s, cost_);
    const double memory = *std::max_element(t.activation_mem.begin(), t.activation_mem.end());
    if (memory > bound_ + 1e-9 || (!best_.ranks.empty() && !(t.makespan < time_))) return;
    best_ = std::move(s);
    time_ = t.makespan;
  }
  bool empty() const { return best_.ranks.empty(); }
  Schedule take(const std::string& name) {
    best_.name = name;
    return std::move(best_);
  }

 private:
  CostModel cost_;
  double bound_;
  Schedule best_;
  double time_ = 0;
};

// Planning must stay fast (a sweep plans thousands of schedules; `minipipe schedule` allows p*v*m
// up to 2^22), so the search narrows with the size: up to kSearchActions actions every cap from
// the given one down, both forward orders and the paper constructions around; up to kKnobWork
// actions times p (a list scheduling's cost) the W policies, admission rules and paces at the
// cap; beyond, one list scheduling.
constexpr long long kSearchActions = 4000, kKnobWork = 4000000;

bool searched(int p, int m, int v) {
  return 3LL * p * v * m <= kSearchActions;
}

// The list scheduling under per-rank caps from in.cap down to `lowest` (stored (stage,
// micro-batch) pairs), each W policy, admission rule, forward order and injection pace; every
// run that completes is offered. A tighter cap is sometimes faster: it keeps a rank from filling
// its memory with forwards while the pipe behind it starves.
void offer_greedy(Fastest& best, GreedyInput in, int lowest) {
  // One micro-batch's work on the busiest rank: the period of a steady state without bubbles.
  std::vector<double> per_rank(static_cast<std::size_t>(in.p), 0.0);
  const auto map = in.placement == Placement::v ? v_placement(in.p, in.v) : looped_placement(in.p, in.v);
  const auto at = [](const std::vector<double>& c, std::size_t k) { return c.size() == 1 ? c[0] : c[k]; };
  for (std::size_t st = 0; st < map.size(); ++st)
    per_rank[static_cast<std::size_t>(map[st])] += at(in.F, st) + at(in.I, st) + at(in.W, st);
  const double period = *std::max_element(per_rank.begin(), per_rank.end());
  const int top = in.cap.empty() ? in.v : in.cap[0];
  const bool search = searched(in.p, in.m, in.v);
  const bool knobs = 3LL * in.p * in.v * in.m * in.p <= kKnobWork;
  const std::vector<double> paces = knobs ? std::vector<double>{0.0, 1.0, 1.1, 1.25, 1.5} : std::vector<double>{0.0};
  // Below the cap the paces, which matter least, are left out.
  for (int cap = top; cap >= std::max(in.v, search ? lowest : top); --cap)
    for (double pace : cap == top ? paces : std::vector<double>{0.0})
      for (bool tight : {false, true})
        for (WPolicy w : {WPolicy::last, WPolicy::when_full, WPolicy::first})
          for (bool earliest : {false, true}) {
            if ((earliest && !search) || (!knobs && (tight || w != WPolicy::last))) continue;
            in.cap.assign(static_cast<std::size_t>(in.p), cap);
            in.inject_interval = pace * period;
            in.w_policy = w;
            in.tight_admission = tight;
            in.forward_earliest_stage = earliest;
            if (std::optional<Schedule> s = greedy_schedule(in)) best.offer(std::move(*s));
          }
}

// V placement, split backward, under a cap of `cap_pairs` stored chunk-micro-batches per rank:
// the list scheduling at that cap and a little below it, and ZB-V's construction where it fits.
Schedule gen_v_capped(const std::string& name, int p, int m, int cap_pairs, const ScheduleOptions& opt) {
  GreedyInput in = greedy_input(name, p, m, 2, Placement::v, opt);
  Fastest best(cost_of(in), cap_pairs / 2.0);
  if (name == "zb-v" || searched(p, m, 2))
    best.offer(build(m >= 2 * p - 1 ? gen_zbv(p, m) : keep_microbatches(gen_zbv(p, 2 * p - 1), m)));
  in.cap.assign(p, std::min(cap_pairs, 2 * m));  // a rank never holds more than its 2m pairs
  offer_greedy(best, in, in.cap[0] - 2);
  return best.take(name);
}

// ZB-H1 / ZB-H2 / zb-mem: one chunk per rank, split backward, at most `cap` stored micro-batches:
// the paper constructions where they fit, then the list scheduling at caps down to p - 1 below.
Schedule gen_zb_capped(const std::string& name, int p, int m, int cap, const ScheduleOptions& opt) {
  GreedyInput in = greedy_input(name, p, m, 1, Placement::loop, opt);
  Fastest best(cost_of(in), cap);
  if (name == "zb-h2") best.offer(build(gen_zero_bubble_h(name, p, m, true)));
  if (name != "zb-h2" || searched(p, m, 1)) best.offer(build(gen_zero_bubble_h(name, p, m, false)));
  if (name == "zb-mem") best.offer(build(gen_zero_bubble_h(name, p, m, true)));
  if (name == "zb-mem" || searched(p, m, 1)) {
    in.cap.assign(p, std::min(cap, m));  // a rank never holds more than its m micro-batches
    offer_greedy(best, in, std::min(in.cap[0], p) - 1);
  }
  return best.take(name);
}

struct Variant {
  const char* name;
  int default_v;
  const char* limits;
  int copies = 1;  // copies of the model the micro-batches flow through (Schedule::chains)
};

const Variant kVariants[] = {
    {"sequential", 1, "v = 1; any p >= 1, m >= 1; no pipelining: one micro-batch in the pipe at a time"},
    {"gpipe", 1, "v = 1; any p >= 1, m >= 1; all forwards then all backwards (holds m micro-batches)"},
    {"1f1b", 1, "v = 1; any p >= 1, m >= 1; warm-up p-1-r forwards on rank r"},
    {"interleaved-1f1b", 2,
     "v >= 2 chunks, looped placement (stage s on rank s%p); any m >= 1: micro-batches go through "
     "the chunks in groups of pipeline.group (default p; the last group takes the remainder)"},
    {"looped-bfs", 2,
     "v >= 1 chunks, looped placement; any m >= 1 (bubble closed form needs m >= p); holds "
     "m micro-batches like GPipe"},
    {"zb-h1", 1, "v = 1, split backward (I/W); any m >= 1 (m < p cuts 1F1B's warm-up of p-r forwards short)"},
    {"zb-h2", 1, "v = 1, split backward (I/W); any m >= 1 (m < 2p-1 cuts the warm-up of 2(p-r)-1 forwards short)"},
    {"zb-v", 2,
     "v = 2, V placement (rank r holds stages r and 2p-1-r), split backward; any m >= 1 (m < 2p-1: "
     "the m = 2p-1 order restricted to m micro-batches)"},
    {"dualpipev", 2,
     "v = 2, V placement (rank r holds stages r and 2p-1-r), OVERLAP_F_B pairs in steady state, "
     "I/W split in the tail; any m >= 1 (m < 2p: the m = 2p order restricted to m micro-batches)"},
    {"v-half", 2,
     "v = 2, V placement, split backward; any p, m >= 1; list-scheduled under a cap of (p+2)/2 stored "
     "micro-batches per rank (half of 1F1B's p)"},
    {"v-min", 2,
     "v = 2, V placement, split backward; any p, m >= 1; list-scheduled under a cap of (p+4)/3 stored "
     "micro-batches per rank (a third of 1F1B's p)"},
    {"v-mem", 2,
     "v = 2, V placement, split backward; any p, m >= 1; at most pipeline.memory_cap stored micro-batches "
     "per rank (default p; a chunk-micro-batch counts half): the fastest list scheduling under the cap, or "
     "ZB-V's construction where it fits"},
    {"zb-mem", 1,
     "v = 1, split backward; any p, m >= 1; at most pipeline.memory_cap stored micro-batches per rank "
     "(default p, 1F1B's); never slower in simulation than ZB-H1 where ZB-H1 fits the cap"},
    {"dualpipe", 2,
     "v = 2, two copies of the model (rank r holds copy 0's part r and copy 1's part p-1-r; even "
     "micro-batches enter at rank 0, odd ones at rank p-1; the copies' gradients are summed before the "
     "step); any p, m >= 1: p even: DeepSeek's phases (OVERLAP_F_B pairs, I/W in the tail), for m < 2p or "
     "m odd the order of the next even m >= 2p restricted to m; p odd (no DeepSeek construction): "
     "each copy's 1F1B, merged on every rank in the order of their times",
     2},
};

const Variant& find_variant(const std::string& name) {
  for (const auto& var : kVariants)
    if (name == var.name) return var;
  std::string allowed;
  for (const auto& var : kVariants) allowed += std::string(allowed.empty() ? "" : ", ") + var.name;
  throw ScheduleError("schedule = '" + name + "' is not allowed; allowed: " + allowed);
}

[[noreturn]] void reject(const std::string& name, const std::string& key, long long value, const std::string& allowed) {
  throw ScheduleError("schedule '" + name + "': " + key + " = " + std::to_string(value) + " is not allowed; " +
                      allowed + " (" + constraints(name) + ")");
}

}  // namespace

std::vector<std::string> schedule_names() {
  std::vector<std::string> out;
  for (const auto& var : kVariants) out.emplace_back(var.name);
  return out;
}

std::string constraints(const std::string& name) {
  return find_variant(name).limits;
}

int default_v(const std::string& name) {
  return find_variant(name).default_v;
}

int model_copies(const std::string& name) {
  return find_variant(name).copies;
}

namespace {

// Throws ScheduleError unless (name, p, m, v, opt) is allowed; v is the one the variant uses.
void check_arguments(const std::string& name, int p, int m, int v, const ScheduleOptions& opt) {
  if (p < 1) reject(name, "p", p, "need p >= 1");
  if (m < 1) reject(name, "m", m, "need m >= 1");
  if (v < 1) reject(name, "v", v, "need v >= 1");
  // Bounds the memory a schedule takes (a few actions per stage and micro-batch).
  const long long cells = 1LL * p * v * m;
  if (cells > (1LL << 22)) reject(name, "p*v*m", cells, "need p*v*m <= 4194304");
  // The list scheduling wakes every waiting rank after each action: its time grows as p*v*m * p
  // (zb-mem at p = 512 ran for minutes at m = 8192, 17 s of CPU at m = 128), so the list-scheduled
  // variants stop at p*p*v*m = 2^23 (p = 512, m = 32; p = 16, v*m = 32768).
  if (cells * p > (1LL << 23) && (name == "zb-mem" || name == "v-half" || name == "v-min" || name == "v-mem"))
    reject(name, "p*p*v*m", cells * p, "need p*p*v*m <= 8388608 for a list-scheduled schedule");

  if (name == "sequential" || name == "gpipe" || name == "1f1b" || name == "zb-h1" || name == "zb-h2" ||
      name == "zb-mem") {
    if (v != 1) reject(name, "v", v, "need v = 1");
  }
  if (name == "interleaved-1f1b") {
    if (v < 2) reject(name, "v", v, "need v >= 2 (v = 1 is plain 1f1b)");
    const int group = opt.group == 0 ? p : opt.group;
    if (group < 1) reject(name, "group", group, "need group >= 1 micro-batches (0 = p)");
  }
  if ((name == "zb-mem" || name == "v-mem") && opt.memory_cap < 0)
    reject(name, "memory_cap", opt.memory_cap, "need memory_cap >= 1 micro-batches (0 = p)");
  if ((name == "v-half" || name == "v-min" || name == "v-mem" || name == "zb-v" || name == "dualpipev") && v != 2)
    reject(name, "v", v, "need v = 2");
  if (name == "dualpipe" && v != 2)
    reject(name, "v", v, "need v = 2 (one part of each of the two model copies per rank)");
}

// The variants whose ranks are built one at a time (rankwise_variant); the others (the
// list-scheduled zb-mem, v-half, v-min) are planned over all ranks at once.
bool rank_by_rank(const std::string& name) {
  for (const char* n :
       {"sequential", "gpipe", "1f1b", "interleaved-1f1b", "looped-bfs", "zb-h1", "zb-h2", "zb-v", "dualpipev"})
    if (name == n) return true;
  return false;
}

// The variants built rank by rank that are also searched around (make_schedule) when small.
bool searched_variant(const std::string& name, int p, int m) {
  return (name == "zb-h1" || name == "zb-h2") ? searched(p, m, 1) : name == "zb-v" && searched(p, m, 2);
}

// A (checked) variant of rank_by_rank.
Rankwise rankwise_variant(const std::string& name, int p, int m, int v, const ScheduleOptions& opt) {
  if (name == "sequential") return gen_sequential(p, m);
  if (name == "gpipe") return gen_gpipe(p, m);
  if (name == "1f1b") return gen_1f1b(p, m);
  if (name == "interleaved-1f1b") return gen_interleaved(p, m, v, opt.group == 0 ? p : opt.group);
  if (name == "looped-bfs") return gen_looped_bfs(p, m, v);
  if (name == "zb-h1") return gen_zero_bubble_h(name, p, m, false);
  if (name == "zb-h2") return gen_zero_bubble_h(name, p, m, true);
  if (name == "zb-v") return m >= 2 * p - 1 ? gen_zbv(p, m) : keep_microbatches(gen_zbv(p, 2 * p - 1), m);
  if (name == "dualpipev") return m >= 2 * p ? gen_dualpipev(p, m) : keep_microbatches(gen_dualpipev(p, 2 * p), m);
  throw ScheduleError("internal error: no rank-by-rank generator for schedule '" + name + "'");
}

}  // namespace

Schedule make_schedule(const std::string& name, int p, int m, int v, const ScheduleOptions& opt) {
  const Variant& var = find_variant(name);
  if (v == 0) v = var.default_v;
  check_arguments(name, p, m, v, opt);
  // Searched around the paper's construction (a list scheduling is kept where it is faster at
  // no more memory); too large to search: the construction, streamed rank by rank.
  if (searched_variant(name, p, m)) {
    if (name == "zb-h1") return gen_zb_capped(name, p, m, p, opt);
    if (name == "zb-h2") return gen_zb_capped(name, p, m, 2 * p - 1, opt);
    if (name == "zb-v") return gen_v_capped(name, p, m, 2 * p, opt);
  }
  if (rank_by_rank(name)) return build(rankwise_variant(name, p, m, v, opt));
  // Caps above m micro-batches (any int is allowed) hold no more than m.
  const int cap = std::min(opt.memory_cap == 0 ? p : opt.memory_cap, m);
  if (name == "zb-mem") return gen_zb_capped(name, p, m, cap, opt);
  if (name == "v-mem") return gen_v_capped(name, p, m, 2 * cap, opt);
  if (name == "dualpipe") {
    // Built whole, then compressed by make_rank_programs (minipipe scale does not sweep it).
    if (p % 2 == 1) return gen_dualpipe_merged(p, m);
    const int full = std::max(2 * p, m + m % 2);
    return build(full == m ? gen_dualpipe_deepseek(p, m) : keep_microbatches(gen_dualpipe_deepseek(p, full), m));
  }
  if (name == "v-half") return gen_v_capped(name, p, m, v_half_cap(p), opt);
  if (name == "v-min") return gen_v_capped(name, p, m, v_min_cap(p), opt);
  throw ScheduleError("internal error: no generator for schedule '" + name + "'");
}

void check_schedule(const std::string& name, int p, int m, int v, const ScheduleOptions& opt) {
  check_arguments(name, p, m, v == 0 ? find_variant(name).default_v : v, opt);
}

bool built_rank_by_rank(const std::string& name) {
  (void)find_variant(name);
  return rank_by_rank(name);
}

RankPrograms make_rank_programs(const std::string& name, int p, int m, int v, const ScheduleOptions& opt) {
  const Variant& var = find_variant(name);
  if (v == 0) v = var.default_v;
  check_arguments(name, p, m, v, opt);
  if (!rank_by_rank(name) || searched_variant(name, p, m)) return to_programs(make_schedule(name, p, m, v, opt));
  return programs(rankwise_variant(name, p, m, v, opt));
}

}  // namespace minipipe::sched
