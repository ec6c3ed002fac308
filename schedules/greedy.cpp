// The list scheduler behind the memory-capped schedules: an event simulation that decides each
// rank's next action when the rank becomes free, so the order it records runs as simulated.
#include "schedules/greedy.hpp"

#include <algorithm>
#include <deque>
#include <limits>

#include "schedules/validator.hpp"

namespace minipipe::sched {

namespace {

constexpr double kNever = std::numeric_limits<double>::infinity();

std::vector<double> per_stage(const std::vector<double>& c, int stages, const char* key) {
  std::vector<double> out = c.size() == 1 ? std::vector<double>(stages, c[0]) : c;
  if (static_cast<int>(out.size()) != stages)
    throw ScheduleError("greedy schedule: cost " + std::string(key) + " has " + std::to_string(c.size()) +
                        " entries; allowed: 1 or p*v = " + std::to_string(stages));
  for (double x : out)
    if (!(x > 0) || x == kNever)
      throw ScheduleError("greedy schedule: cost " + std::string(key) + " = " + std::to_string(x) +
                          " is not allowed; need a finite time > 0");
  return out;
}

// The event simulation's state: when each (stage, micro-batch) finished its F and I, each
// stage's next micro-batch, what each rank holds, and when each rank is free again.
struct ListScheduler {
  const GreedyInput& in;
  Schedule& s;
  int p, v, m, S;
  std::vector<double> F, I, W;
  std::vector<std::vector<int>> stages;  // per rank, descending: later stages finish older work
  std::vector<double> f_end, i_end;
  std::vector<int> next_f, next_i;
  std::vector<int> held, cap;
  std::vector<std::deque<Action>> pending_w;
  std::vector<double> free_at, blocked_at;

  ListScheduler(const GreedyInput& in_, Schedule& s_) : in(in_), s(s_), p(in_.p), v(in_.v), m(in_.m), S(in_.p * in_.v) {
    F = per_stage(in.F, S, "F"), I = per_stage(in.I, S, "I"), W = per_stage(in.W, S, "W");
    stages.resize(p);
    for (int st = S - 1; st >= 0; --st) stages[s.stage_to_rank[st]].push_back(st);
    f_end.assign(static_cast<std::size_t>(S) * m, kNever), i_end = f_end;
    next_f.assign(S, 0), next_i.assign(S, 0);
    held.assign(p, 0), cap.assign(p, v);
    for (int r = 0; r < p; ++r)
      if (r < static_cast<int>(in.cap.size())) cap[r] = std::max(v, in.cap[r]);
    pending_w.resize(p);
    free_at.assign(p, 0.0), blocked_at.assign(p, -1.0);
  }

  std::size_t idx(int st, int mb) const { return static_cast<std::size_t>(st) * m + mb; }
  double hop(int a, int b) const { return s.stage_to_rank[a] == s.stage_to_rank[b] ? 0.0 : in.comm; }

  // What rank r runs at time t, by the policy's priorities; nullopt: nothing is ready.
  std::optional<Action> pick(int r, double t) {
    std::optional<Action> pick;
    // 1. An input gradient whose upstream gradient has arrived: it is on the critical path.
    for (int st : stages[r]) {
      const int mb = next_i[st];
      if (mb >= m || f_end[idx(st, mb)] > t) continue;
      if (st + 1 < S && !(i_end[idx(st + 1, mb)] + hop(st, st + 1) <= t)) continue;
      pick = Action::make(Op::I, st, mb);
      break;
    }
    // 2. A W before a forward (always, or under memory pressure: no room to admit a micro-batch),
    //    as the policy says: it frees its place sooner.
    const bool w_first = in.w_policy == WPolicy::first || (in.w_policy == WPolicy::when_full && held[r] + v > cap[r]);
    if (!pick && !pending_w[r].empty() && w_first) {
      pick = pending_w[r].front();
      pending_w[r].pop_front();
    }
    // 3. A forward whose input has arrived and that fits: a micro-batch's first visit to this
    //    rank must leave v-1 places free. The oldest unfinished micro-batch then always finds
    //    room for its later visits (younger ones reach each stage after it, older ones are
    //    gone), so it completes and the schedule never deadlocks on memory.
    if (!pick)
      for (std::size_t k = 0; k < stages[r].size(); ++k) {
        const int st = stages[r][in.forward_earliest_stage ? stages[r].size() - 1 - k : k];
        const int mb = next_f[st];
        if (mb >= m || (st > 0 && !(f_end[idx(st - 1, mb)] + hop(st - 1, st) <= t))) continue;
        if (st == 0 && t < mb * in.inject_interval) continue;
        const bool first_visit = st == stages[r].back();
        if (held[r] + (first_visit && !in.tight_admission ? v : 1) > cap[r]) continue;
        pick = Action::make(Op::F, st, mb);
        break;
      }
    // 4. A deferred weight gradient: fills what would be idle time.
    if (!pick && !pending_w[r].empty()) {
      pick = pending_w[r].front();
      pending_w[r].pop_front();
    }
    return pick;
  }

  // Sleep until the earliest input already on its way, or until another rank records an
  // action (its completion may come sooner); then look again.
  void sleep(int r, double t) {
    double wake = kNever;
    for (int st : stages[r]) {
      const int bi = next_i[st], bf = next_f[st];
      if (bi < m && f_end[idx(st, bi)] < kNever) {
        const double up = st + 1 < S ? i_end[idx(st + 1, bi)] + hop(st, st + 1) : 0.0;
        if (up < kNever) wake = std::min(wake, std::max(f_end[idx(st, bi)], up));
      }
      if (bf < m && st > 0 && f_end[idx(st - 1, bf)] < kNever)
        wake = std::min(wake, f_end[idx(st - 1, bf)] + hop(st - 1, st));
      if (bf < m && st == 0) wake = std::min(wake, bf * in.inject_interval);
    }
    blocked_at[r] = t;
    free_at[r] = wake > t ? wake : kNever;
  }

  // Rank r runs `a` from t: its effects, the schedule's record, and the sleeping ranks woken.
  void record(int r, double t, const Action& a) {
    const std::size_t k = idx(a.stage, a.microbatch);
    const double end = t + (a.op == Op::F ? F : a.op == Op::I ? I : W)[a.stage];
    switch (a.op) {
      case Op::F:
        f_end[k] = end;
        ++next_f[a.stage];
        ++held[r];
        break;
      case Op::I:
        i_end[k] = end;
        ++next_i[a.stage];
        pending_w[r].push_back(Action::make(Op::W, a.stage, a.microbatch));
        break;
      default:
        --held[r];
        break;
    }
    s.ranks[r].push_back(a);
    free_at[r] = end;
    blocked_at[r] = -1;
    for (int q = 0; q < p; ++q)
      if (q != r && blocked_at[q] >= 0) {
        free_at[q] = std::min(free_at[q], std::max(t, blocked_at[q]));
        blocked_at[q] = -1;
      }
  }
};

}  // namespace

std::optional<Schedule> greedy_schedule(const GreedyInput& in) {
  const int p = in.p, v = in.v, m = in.m, S = p * v;
  Schedule s;
  s.name = in.name;
  s.p = p;
  s.v = v;
  s.m = m;
  s.stage_to_rank = in.placement == Placement::v ? v_placement(p, v) : looped_placement(p, v);
  s.ranks.resize(p);
  ListScheduler ls(in, s);
  std::size_t left = static_cast<std::size_t>(3) * S * m;

  while (left > 0) {
    int r = -1;
    for (int q = 0; q < p; ++q)
      if (ls.free_at[q] < kNever && (r < 0 || ls.free_at[q] < ls.free_at[r])) r = q;
    if (r < 0) return std::nullopt;  // only with tight admission: memory is full of waiting work
    const double t = ls.free_at[r];
    const std::optional<Action> pick = ls.pick(r, t);
    if (!pick) {
      ls.sleep(r, t);
      continue;
    }
    ls.record(r, t, *pick);
    --left;
  }
  validate(s);
  return s;
}

}  // namespace minipipe::sched
