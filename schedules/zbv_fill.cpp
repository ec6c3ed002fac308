// ZB-V built step by step with bubble-driven weight passes (the construction of the Zero Bubble
// authors' zbv generator), for any m, costs and memory cap.
#include <algorithm>
#include <array>
#include <deque>
#include <optional>

#include "schedules/validator.hpp"
#include "schedules/zb_orders.hpp"

namespace minipipe::sched {

namespace {

// A step the construction cannot take (memory full with nothing to free, an input not yet
// produced): the order is dropped.
struct Dropped {};
void need(bool ok) {
  if (!ok) throw Dropped{};
}

// Kinds: F = forward, B = input gradient, Wt = weight pass. Chunk 0 forward runs down the ranks
// (stage r), chunk 1 forward back up (stage 2p-1-r); a backward's chunk 0 is the one that runs
// first, i.e. that of stage 2p-1-r, chunk 1 that of stage r.
enum Kind { kF = 0, kB = 1, kWt = 2 };

struct Builder {
  int p, m;
  std::array<double, 3> cost;
  std::array<int, 3> mem_of{1, 0, -1};
  double comm;
  int cap;
  bool fill_f, fill_b;
  std::vector<double> allowed;  // per rank the bubble a previous run had (empty: first run)
  double allowed_max = -1;

  std::vector<std::array<int, 6>> count;  // per rank, per kind*2 + chunk
  std::vector<double> end;                // per (kind, chunk, rank, micro-batch): -1 = not yet
  std::vector<double> now, bubble;
  std::vector<int> mem;
  double bubble_max = 0;
  std::vector<std::deque<int>> pending;                // per rank, the chunks of its deferred weight passes
  std::vector<std::vector<std::array<int, 3>>> order;  // per rank (kind, chunk, micro-batch)

  Builder(int p_, int m_, std::array<double, 3> c, double comm_, int cap_, bool ff, bool fb, std::vector<double> a)
      : p(p_), m(m_), cost(c), comm(comm_), cap(cap_), fill_f(ff), fill_b(fb), allowed(std::move(a)) {
    for (double x : allowed) allowed_max = std::max(allowed_max, x);
    count.assign(p, {});
    end.assign(static_cast<std::size_t>(6) * p * m, -1.0);
    now.assign(p, 0.0), bubble.assign(p, 0.0), mem.assign(p, 0), pending.resize(p), order.resize(p);
  }

  std::size_t id(int kind, int chunk, int rank, int mb) const {
    return ((static_cast<std::size_t>(kind) * 2 + chunk) * p + rank) * m + mb;
  }
  // The authors index their end times with -1 for "no input": that reads the last entry, the
  // final weight pass of chunk 1 on rank p-1, which is -1 until the very end.
  double end_at(long long k) const { return k < 0 ? end.back() : end[static_cast<std::size_t>(k)]; }
  double max_bubble(int rank) const {
    return allowed.empty() ? bubble_max : std::max(bubble_max, allowed_max - allowed[rank]);
  }

  void put(int kind, int chunk, int r) {
    const int n = count[r][kind * 2 + chunk];
    need(n < m);
    need(mem[r] + mem_of[kind] <= cap);
    const double free_time = now[r] + cost[kind];
    double t = free_time;
    if (kind > 0 || chunk > 0) {
      const int prev = kind * 2 + chunk - 1;
      need(kind < 2 ? end[id(prev / 2, prev % 2, r, n)] >= 0 : end[id(kB, chunk, r, n)] >= 0);
    }
    if (kind < 2) {
      const int from = chunk == 1 ? r + 1 : r - 1;
      if (from >= 0 && from < p) {
        const double in = end[id(kind, chunk, from, n)];
        need(in >= 0);
        t = std::max(t, in + comm + cost[kind]);
      }
    }
    if (count[r][0] > 0) {
      bubble[r] += t - free_time;
      bubble_max = std::max(bubble_max, bubble[r]);
    }
    end[id(kind, chunk, r, n)] = t;
    now[r] = t;
    mem[r] += mem_of[kind];
    order[r].push_back({kind, chunk, n});
    if (kind == kB) pending[r].push_back(chunk);
    ++count[r][kind * 2 + chunk];
  }
  void put_w(int r) {
    need(!pending[r].empty());
    const int chunk = pending[r].front();
    pending[r].pop_front();
    put(kWt, chunk, r);
  }
  // Deferred weight passes fill the wait for input `in`; one more where the wait is larger than
  // the bubble this rank may still take.
  void fill_wait(int r, long long in, bool extra) {
    while (!pending[r].empty() && in >= 0 && end_at(in) + comm >= now[r] + cost[kWt]) put_w(r);
    if (!pending[r].empty() && end_at(in) + comm - now[r] > max_bubble(r) - bubble[r] && extra) put_w(r);
  }

  void run() {
    // Warm-up: chunk 0 down the ranks, then from the last rank up, more chunk-0 forwards on
    // ranks 0..i while they fit before rank i's first chunk-1 forward can start.
    for (int i = 0; i < p; ++i) put(kF, 0, i);
    for (int i = p - 1; i >= 0; --i) {
      if (i < p - 1) {
        const double t = end[id(kF, 1, i + 1, 0)] + comm;
        while (mem[i] + 2 + 2 * i <= cap && now[i] + cost[kF] <= t && count[i][0] < m)
          for (int j = 0; j <= i; ++j) put(kF, 0, j);
      }
      put(kF, 1, i);
    }
    // Every rank catches up with the forwards of the rank before it, alternating chunks.
    int chunk = 0;
    long long guard = 0;
    for (int i = 1; i < p; ++i)
      while (count[i][0] + count[i][1] < count[i - 1][0] + count[i - 1][1] ||
             (count[i][1] <= count[i - 1][1] && count[i - 1][1] < m)) {
        need(++guard <= 4LL * p * m + 16);
        for (int j = p - 1; j >= i; --j)
          if (count[j][chunk] < m) put(kF, chunk, j);
        chunk = 1 - chunk;
      }
    for (int step = 0; step < 2 * m; ++step) {
      // One input gradient per rank: chunk 1's (which reaches the rank later) where it has
      // arrived or chunk 0 has none left, from the last rank up; then chunk 0's, from rank 0.
      std::vector<int> b0, b1;
      for (int i = 0; i < p; ++i) {
        if (count[i][3] >= count[i][2])
          b0.push_back(i);
        else if (i == p - 1 || end[id(kB, 1, i + 1, count[i][3])] >= 0 || count[i][2] >= m)
          b1.push_back(i);
        else
          b0.push_back(i);
      }
      std::vector<std::pair<int, int>> pending;
      for (auto it = b1.rbegin(); it != b1.rend(); ++it) pending.emplace_back(*it, 1);
      for (int i : b0) pending.emplace_back(i, 0);
      for (auto [i, c] : pending) {
        long long in = -1;
        if (c == 1 && i < p - 1) in = static_cast<long long>(id(kB, 1, i + 1, count[i][3]));
        if (c == 0 && i > 0) in = static_cast<long long>(id(kB, 0, i - 1, count[i][2]));
        fill_wait(i, in, c == 1 || fill_b);
        put(kB, c, i);
      }
      // One forward per rank: chunk 1's where its input has arrived, else chunk 0's.
      for (int i = 0; i < p; ++i) {
        if (count[i][1] >= m) continue;
        int c = -1;
        if (count[i][1] >= count[i][0])
          c = 0;
        else if (i == p - 1)
          c = 1;
        else if (end[id(kF, 1, i + 1, count[i][1])] >= 0)
          c = 1;
        else if (count[i][0] < m && (i == 0 || end[id(kF, 0, i - 1, count[i][0])] >= 0))
          c = 0;
        if (c < 0) continue;
        while (mem[i] + 1 > cap) put_w(i);
        long long in = -1;
        if (c == 0 && i > 0) in = static_cast<long long>(id(kF, 0, i - 1, count[i][0]));
        if (c == 1 && i < p - 1) in = static_cast<long long>(id(kF, 1, i + 1, count[i][1]));
        fill_wait(i, in, fill_f);
        put(kF, c, i);
      }
    }
    for (int i = 0; i < p; ++i)
      while (!pending[i].empty()) put_w(i);
  }
};

Schedule to_schedule(const Builder& b) {
  const int p = b.p;
  Schedule s;
  s.name = "zbv-fill";
  s.p = p, s.v = 2, s.m = b.m;
  s.stage_to_rank = v_placement(p, 2);
  s.ranks.resize(p);
  for (int r = 0; r < p; ++r)
    for (const auto& [kind, chunk, mb] : b.order[r]) {
      const bool first = kind == kF ? chunk == 0 : chunk == 1;  // runs on stage r
      const Op op = kind == kF ? Op::F : kind == kB ? Op::I : Op::W;
      s.ranks[r].push_back(Action::make(op, first ? r : 2 * p - 1 - r, mb));
    }
  return s;
}

}  // namespace

std::vector<Schedule> zbv_fill_orders(int p, int m, double F, double I, double W, double comm, int cap_chunks) {
  std::vector<Schedule> out;
  if (p < 1 || m < 1) return out;
  for (bool fill_b : {true, false})
    for (bool fill_f : {true, false}) {
      // Rerun with the last run's bubbles as the allowance while the largest shrinks.
      std::optional<Builder> best;
      for (int round = 0; round < 64; ++round) {
        Builder b(p, m, {F, I, W}, comm, cap_chunks, fill_f, fill_b, best ? best->bubble : std::vector<double>{});
        try {
          b.run();
        } catch (const Dropped&) {
          break;
        }
        if (best && !(b.bubble_max < best->bubble_max)) break;
        best = std::move(b);
      }
      if (!best) continue;
      Schedule s = to_schedule(*best);
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
