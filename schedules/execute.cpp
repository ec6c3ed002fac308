// Runs every rank's action list as far as its dependencies allow, waking a blocked rank only
// when the rank it waits on has moved, so a whole p=64, m=512 schedule takes milliseconds.
#include "schedules/execute.hpp"

#include <algorithm>
#include <deque>

namespace minipipe::sched {

namespace {

constexpr int kKeyOps = 8;  // every Op except OVERLAP_F_B, which is never a dependency itself

int op_slot(Op op) {
  switch (op) {
    case Op::F:
      return 0;
    case Op::B:
      return 1;
    case Op::I:
      return 2;
    case Op::W:
      return 3;
    case Op::SEND_F:
      return 4;
    case Op::RECV_F:
      return 5;
    case Op::SEND_B:
      return 6;
    case Op::RECV_B:
      return 7;
    case Op::OVERLAP_F_B:
      break;
  }
  return -1;
}

// Completion time of every (op, stage, micro-batch); negative until done. The ops of one
// (stage, micro-batch) share a cache line, because an action reads its neighbours' entries.
class KeyTable {
 public:
  KeyTable(int stages, int m) : m_(m), time_(static_cast<std::size_t>(kKeyOps) * stages * m, -1.0) {}
  std::size_t key(Op op, int stage, int mb) const {
    return (static_cast<std::size_t>(stage) * m_ + mb) * kKeyOps + op_slot(op);
  }
  bool done(Op op, int stage, int mb) const { return time_[key(op, stage, mb)] >= 0; }
  double time(Op op, int stage, int mb) const { return time_[key(op, stage, mb)]; }
  void set(Op op, int stage, int mb, double t) { time_[key(op, stage, mb)] = t; }

 private:
  int m_;
  std::vector<double> time_;
};

// Whether an action's inputs are available on its rank, and when the transferred ones arrive.
class Inputs {
 public:
  Inputs(const Schedule& s, const KeyTable& table, double comm_latency, const std::vector<double>& boundary)
      : s_(s),
        table_(table),
        comm_latency_(comm_latency),
        boundary_(boundary),
        S_(s.num_stages()),
        m_(s.m),
        // A compute-only schedule has its transfers implied: the consumer waits for the producer on
        // the other rank plus the latency, exactly as if RECV sat right before it and SEND right
        // after the producer (what lower_communication inserts), without materialising them.
        implicit_comm_(!s.is_lowered()),
        split_(static_cast<std::size_t>(S_) * m_, 0) {
    // Which (stage, micro-batch) use split backward, so a missing "backward of the next stage"
    // is reported with the op the schedule actually contains.
    for (const auto& row : s.ranks)
      for (const auto& a : row) {
        if (a.op == Op::I) split_[static_cast<std::size_t>(a.stage) * m_ + a.microbatch] = 1;
        for (const auto& sub : a.sub)
          if (sub.op == Op::I) split_[static_cast<std::size_t>(sub.stage) * m_ + sub.microbatch] = 1;
      }
  }

  // True when every input of `a` (never an OVERLAP_F_B) is available on rank r; raises
  // `ready` to the time a transferred input arrives. Otherwise `missing` names what is awaited.
  bool ready(const Action& a, int r, double& ready, Action& missing) const {
    const int st = a.stage, mb = a.microbatch;
    const auto& rank_of = s_.stage_to_rank;
    auto need = [&](Op op, int stage) {
      if (table_.done(op, stage, mb)) return true;
      missing = Action::make(op, stage, mb);
      return false;
    };
    // Across boundary b (between stages b and b+1): its own time when given, else the one latency.
    auto arrives = [&](double t, int b) {
      ready = std::max(ready, t + (boundary_.empty() ? comm_latency_ : boundary_[static_cast<std::size_t>(b)]));
    };
    // A transferred input: its receive was posted earlier on this rank and the peer has posted
    // the matching send; the data lands `comm_latency` after the send (eager: a receive posted
    // late finds it there), so where a RECV sits never changes when its consumer can start.
    auto received = [&](Op recv, int recv_stage, Op send, int send_stage) {
      if (!need(recv, recv_stage) || !need(send, send_stage)) return false;
      arrives(table_.time(send, send_stage, mb), std::min(recv_stage, send_stage));
      return true;
    };
    switch (a.op) {
      case Op::F:
        if (s_.is_first_stage(st)) return true;
        if (rank_of[st - 1] == r) return need(Op::F, st - 1);
        if (!implicit_comm_) return received(Op::RECV_F, st, Op::SEND_F, st - 1);
        if (!need(Op::F, st - 1)) return false;
        arrives(table_.time(Op::F, st - 1, mb), st - 1);
        return true;
      case Op::B:
      case Op::I:
        if (!need(Op::F, st)) return false;
        if (s_.is_last_stage(st)) return true;
        if (rank_of[st + 1] != r && !implicit_comm_) return received(Op::RECV_B, st, Op::SEND_B, st + 1);
        if (!backward_done(st + 1, mb)) {
          missing = backward_action(st + 1, mb);
          return false;
        }
        if (rank_of[st + 1] != r) arrives(std::max(table_.time(Op::B, st + 1, mb), table_.time(Op::I, st + 1, mb)), st);
        return true;
      case Op::W:
        return need(Op::I, st);
      case Op::SEND_F:
        return need(Op::F, st);
      case Op::SEND_B:
        if (backward_done(st, mb)) return true;
        missing = backward_action(st, mb);
        return false;
      case Op::RECV_F:
      case Op::RECV_B:
        return true;  // posting a receive waits for nothing (MPI_Irecv)
      case Op::OVERLAP_F_B:
        break;
    }
    return false;
  }

 private:
  bool backward_done(int st, int mb) const { return table_.done(Op::B, st, mb) || table_.done(Op::I, st, mb); }
  Action backward_action(int st, int mb) const {
    return Action::make(split_[static_cast<std::size_t>(st) * m_ + mb] ? Op::I : Op::B, st, mb);
  }

  const Schedule& s_;
  const KeyTable& table_;
  double comm_latency_;
  const std::vector<double>& boundary_;
  int S_, m_;
  bool implicit_comm_;
  std::vector<char> split_;
};

}  // namespace

bool needs_comm(const Schedule& s, Op op, int stage) {
  const auto& map = s.stage_to_rank;
  switch (op) {
    case Op::SEND_F:
    case Op::RECV_B:
      return !s.is_last_stage(stage) && map[stage + 1] != map[stage];
    case Op::RECV_F:
    case Op::SEND_B:
      return !s.is_first_stage(stage) && map[stage - 1] != map[stage];
    default:
      return false;
  }
}

Execution execute(const Schedule& s, const std::function<double(const Action&)>& duration, double comm_latency) {
  return execute(s, duration, comm_latency, {});
}

Execution execute(const Schedule& s, const std::function<double(const Action&)>& duration, double comm_latency,
                  const std::vector<double>& boundary) {
  const int p = s.p, S = s.num_stages(), m = s.m;
  const auto& rank_of = s.stage_to_rank;
  KeyTable table(S, m);
  const Inputs inputs(s, table, comm_latency, boundary);
  auto inputs_ready = [&](const Action& a, int r, double& ready, Action& missing) {
    return inputs.ready(a, r, ready, missing);
  };

  Execution ex;
  ex.start.resize(p);
  ex.end.resize(p);
  for (int r = 0; r < p; ++r) {
    ex.start[r].assign(s.ranks[r].size(), 0.0);
    ex.end[r].assign(s.ranks[r].size(), 0.0);
  }
  ex.head.assign(p, 0);
  ex.waits_for.assign(p, Action{});
  std::vector<double> clock(p, 0.0);
  std::vector<std::vector<int>> blocked_on(p);  // ranks waiting for progress of rank q
  std::vector<char> queued(p, 1);
  std::deque<int> work;
  for (int r = 0; r < p; ++r) work.push_back(r);

  while (!work.empty()) {
    const int r = work.front();
    work.pop_front();
    queued[r] = 0;
    const auto& row = s.ranks[r];
    bool progressed = false;
    while (ex.head[r] < row.size()) {
      const Action& a = row[ex.head[r]];
      double ready = 0.0;
      Action missing;
      bool ok = true;
      if (a.op == Op::OVERLAP_F_B) {
        for (const auto& sub : a.sub) ok = ok && inputs_ready(sub, r, ready, missing);
      } else {
        ok = inputs_ready(a, r, ready, missing);
      }
      if (!ok) {
        ex.waits_for[r] = missing;
        blocked_on[rank_of[missing.stage]].push_back(r);
        break;
      }
      const double st = std::max(clock[r], ready);
      const double en = is_comm(a.op) ? st : st + duration(a);
      if (a.op == Op::OVERLAP_F_B) {
        for (const auto& sub : a.sub) table.set(sub.op, sub.stage, sub.microbatch, en);
      } else {
        // A SEND is stamped with its posting time; the receiver adds the latency.
        table.set(a.op, a.stage, a.microbatch, en);
      }
      ex.start[r][ex.head[r]] = st;
      ex.end[r][ex.head[r]] = en;
      clock[r] = en;
      ++ex.head[r];
      progressed = true;
    }
    if (progressed) {
      for (int w : blocked_on[r])
        if (!queued[w]) {
          queued[w] = 1;
          work.push_back(w);
        }
      blocked_on[r].clear();
    }
  }
  ex.complete = true;
  for (int r = 0; r < p; ++r) {
    if (ex.head[r] < s.ranks[r].size())
      ex.complete = false;
    else
      ex.waits_for[r] = Action{};
  }
  return ex;
}

}  // namespace minipipe::sched
