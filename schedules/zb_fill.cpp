// The one-chunk zero-bubble order built step by step under a memory cap (the construction of the
// Zero Bubble authors' zb generator): a 1F1B-like walk whose deferred weight passes fill the waits.
#include <algorithm>

#include "schedules/validator.hpp"
#include "schedules/zb_orders.hpp"

namespace minipipe::sched {

namespace {

struct Dropped {};  // memory full with no weight pass left to free it

enum Kind { kF = 0, kB = 1, kWt = 2 };

struct ZbBuilder {
  int p, m;
  std::vector<double> F, I, W;
  double comm;
  int cap;
  bool allow_early_bubble, prioritize_b, greedy;
  std::vector<int> f, b, w, mem;
  std::vector<double> end_of_rank, bubble;
  std::vector<double> done;  // per (kind, rank, micro-batch): completion time
  std::vector<std::vector<Action>> order;

  double cost(int kind, int r) const {
    const auto& c = kind == kF ? F : kind == kB ? I : W;
    return c.size() == 1 ? c[0] : c[static_cast<std::size_t>(r)];
  }
  static int mem_of(int kind) { return kind == kF ? 1 : kind == kB ? 0 : -1; }
  double& at(int kind, int r, int mb) {
    return done[(static_cast<std::size_t>(kind) * p + r) * m + static_cast<std::size_t>(mb)];
  }
  double max_bubble() const { return *std::max_element(bubble.begin(), bubble.end()); }

  void put(int r, int kind) {
    const int mb = kind == kF ? f[r] : kind == kB ? b[r] : w[r];
    const double c = cost(kind, r);
    double t = end_of_rank[r] + c;
    const double no_wait = t;
    if (r > 0 && kind == kF) t = std::max(t, at(kF, r - 1, mb) + comm + c);
    if (r < p - 1 && kind == kB) t = std::max(t, at(kB, r + 1, mb) + comm + c);
    if (f[r] > 0) bubble[r] += t - no_wait;
    end_of_rank[r] = t;
    at(kind, r, mb) = t;
    mem[r] += mem_of(kind);
    (kind == kF ? f : kind == kB ? b : w)[r] += 1;
    order[r].push_back(Action::make(kind == kF ? Op::F : kind == kB ? Op::I : Op::W, r, mb));
  }
  void free_for(int r, int kind) {
    while (mem[r] + mem_of(kind) > cap) {
      if (w[r] >= b[r]) throw Dropped{};
      put(r, kWt);
    }
  }
  // Weight passes while they end before input `ready` arrives; one more where the wait is at
  // most the bubble this rank may still take (greedy) or larger than it.
  void fill_wait(int r, double ready) {
    while (w[r] < b[r] && end_of_rank[r] + cost(kWt, r) <= ready) put(r, kWt);
    if (w[r] < b[r] && end_of_rank[r] < ready) {
      if (ready - end_of_rank[r] <= max_bubble() - bubble[r]) {
        if (greedy) put(r, kWt);
      } else {
        put(r, kWt);
      }
    }
  }

  void run() {
    for (int i = 0; i < m; ++i) {
      if (i == 0) {
        for (int j = 0; j < p; ++j) put(j, kF);
        // Extra warm-up forwards per rank, as many as fit before the first backward reaches it.
        std::vector<int> extra(p, 0);
        double last = 0;
        for (int j = p - 1; j >= 0; --j) {
          if (j == p - 1) {
            last = at(kF, j, 0) + cost(kB, j);
            continue;
          }
          int held = mem[j];
          double t = end_of_rank[j];
          while (f[j] + extra[j] < m && held + 1 <= cap) {
            if (allow_early_bubble ? t + cost(kF, j) > last + comm : t >= last + comm) break;
            held += 1;
            t += cost(kF, j);
            ++extra[j];
          }
          last = std::max(t, last + comm) + cost(kB, j);
        }
        for (int j = 1; j < p; ++j)
          while (extra[j] > 0 && extra[j] >= extra[j - 1] && f[j] + extra[j] < m) --extra[j];
        for (int j = 0; j < p; ++j)
          for (int k = 0; k < extra[j]; ++k) put(j, kF);
        for (int j = p - 1; j >= 0; --j) put(j, kB);
        continue;
      }
      std::vector<int> want(p, 0);
      for (int j = 0; j < p; ++j) {
        if (f[j] >= m) continue;
        if (j + 1 < p && f[j] >= f[j + 1] + 2 && prioritize_b) {
          const double next_fb = end_of_rank[j + 1] + cost(kF, j + 1) + cost(kB, j + 1) + comm;
          if (end_of_rank[j] >= next_fb) continue;
          double w_cost = 0;
          int held = mem[j] + 1, n = 0;
          while (held > cap && w[j] + n < b[j]) {
            w_cost += cost(kWt, j);
            held -= 1;
            ++n;
          }
          if (end_of_rank[j] + cost(kF, j) + w_cost <= next_fb) {
            want[j] = 1;
            continue;
          }
          if (next_fb - end_of_rank[j] <= max_bubble() - bubble[j]) continue;
        }
        want[j] = 1;
      }
      for (int j = p - 2; j >= 0; --j) want[j] = std::min(want[j], want[j + 1]);
      for (int j = 0; j < p; ++j) {
        if (want[j] == 0) continue;
        free_for(j, kF);
        if (j > 0) fill_wait(j, at(kF, j - 1, f[j]) + comm);
        put(j, kF);
      }
      for (int j = p - 1; j >= 0; --j) {
        free_for(j, kB);
        if (j + 1 < p) fill_wait(j, at(kB, j + 1, i) + comm);
        if (j == 0 && f[j] == m)
          while (w[j] < b[j]) put(j, kWt);
        put(j, kB);
      }
    }
    for (int r = 0; r < p; ++r)
      while (w[r] < m) put(r, kWt);
  }
};

}  // namespace

std::vector<Schedule> zb_fill_orders(int p, int m, const std::vector<double>& F, const std::vector<double>& I,
                                     const std::vector<double>& W, double comm, int cap) {
  std::vector<Schedule> out;
  if (p < 1 || m < 1) return out;
  for (bool early : {true, false})
    for (bool prioritize : {true, false})
      for (bool greedy : {true, false}) {
        ZbBuilder z{p, m, F, I, W, comm, cap, early, prioritize, greedy, {}, {}, {}, {}, {}, {}, {}, {}};
        z.f.assign(p, 0), z.b = z.f, z.w = z.f, z.mem = z.f;
        z.end_of_rank.assign(p, 0.0), z.bubble = z.end_of_rank;
        z.done.assign(static_cast<std::size_t>(3) * p * m, 0.0);
        z.order.resize(p);
        try {
          z.run();
        } catch (const Dropped&) {
          continue;
        }
        Schedule s;
        s.name = "zb-fill";
        s.p = p, s.v = 1, s.m = m;
        s.stage_to_rank = looped_placement(p, 1);
        s.ranks = std::move(z.order);
        try {
          validate(s);
        } catch (const ScheduleError&) {
          continue;
        }
        out.push_back(std::move(s));
      }
  return out;
}

}  // namespace minipipe::sched
