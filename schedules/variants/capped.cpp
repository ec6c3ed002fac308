// The memory-capped searches (schedules/variants/capped.hpp): every candidate is simulated and the
// fastest whose peak activation memory fits the cap is kept.
#include "schedules/variants/capped.hpp"

#include <algorithm>
#include <cstdio>

#include "schedules/greedy.hpp"
#include "schedules/simulator.hpp"
#include "schedules/validator.hpp"
#include "schedules/variant.hpp"
#include "schedules/variants/constructions.hpp"
#include "schedules/zb_orders.hpp"

namespace minipipe::sched::gen {

namespace {

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
  // The fastest order, named; throws ScheduleError naming the schedule, p, m and the bound when
  // no order offered kept within it.
  Schedule take(const std::string& name, int p, int m) {
    if (best_.ranks.empty()) {
      char bound[32];
      std::snprintf(bound, sizeof bound, "%g", bound_);
      throw ScheduleError("schedule '" + name + "' at p = " + std::to_string(p) + ", m = " + std::to_string(m) +
                          ": no order was found within its memory cap of " + bound +
                          " stored micro-batches per rank; allowed: a larger cap (pipeline.memory_cap, for " +
                          sched::names_reading(sched::kMemoryCap) + "), or fewer ranks or micro-batches");
    }
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
// The authors' V constructions: ZB-V's step by step up to this many (kind, chunk, rank,
// micro-batch) cells, the building-block search up to this many grid cells (v_block_work).
constexpr long long kAuthorsCells = 1LL << 20, kAuthorsBlockWork = 1LL << 28;

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

// The orders the Zero Bubble authors' V generators would pick among (zb_orders.hpp), where their
// search stays cheap: offered, the fastest of them under the cap is never slower than theirs.
void offer_authors_v(Fastest& best, const GreedyInput& in, int cap_pairs) {
  const auto mean = [](const std::vector<double>& c) {
    double sum = 0;
    for (double x : c) sum += x;
    return sum / static_cast<double>(c.size());
  };
  if (6LL * in.p * in.m <= kAuthorsCells)
    for (Schedule& s : zbv_fill_orders(in.p, in.m, mean(in.F), mean(in.I), mean(in.W), in.comm, cap_pairs))
      best.offer(std::move(s));
  std::vector<Schedule> unchecked;  // may stall: the simulation says so (ScheduleError)
  if (v_block_work(in.p, in.m) <= kAuthorsBlockWork) unchecked = v_block_orders(in.p, in.m, cap_pairs);
  if (v_pattern_work(in.p, in.m) <= kAuthorsBlockWork)
    for (bool half : {true, false})
      if (std::optional<Schedule> s = v_pattern_order(in.p, in.m, half)) unchecked.push_back(std::move(*s));
  for (Schedule& s : unchecked) {
    try {
      best.offer(std::move(s));
    } catch (const ScheduleError&) {
    }
  }
}

}  // namespace

bool searched(int p, int m, int v) {
  return 3LL * p * v * m <= kSearchActions;
}

Schedule gen_v_capped(const std::string& name, int p, int m, int cap_pairs, const ScheduleOptions& opt) {
  GreedyInput in = greedy_input(name, p, m, 2, Placement::v, opt);
  Fastest best(cost_of(in), cap_pairs / 2.0);
  if (name == "zb-v" || searched(p, m, 2)) best.offer(build(gen_zbv_any_m(p, m)));
  in.cap.assign(p, std::min(cap_pairs, 2 * m));  // a rank never holds more than its 2m pairs
  offer_greedy(best, in, in.cap[0] - 2);
  offer_authors_v(best, in, cap_pairs);  // last: kept only where strictly faster
  Schedule s = best.take(name, p, m);
  validate(s);  // the authors' orders are offered unvalidated
  return s;
}

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
  if (3LL * p * m <= kAuthorsCells)  // last: kept only where strictly faster
    for (Schedule& s : zb_fill_orders(p, m, in.F, in.I, in.W, in.comm, cap)) best.offer(std::move(s));
  return best.take(name, p, m);
}

}  // namespace minipipe::sched::gen
