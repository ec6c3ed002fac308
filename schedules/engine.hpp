// The one event loop behind execute() (validator, step grid, full simulator) and the totals-only
// simulator: ranks run their actions in order as far as their inputs allow, over any action source.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <queue>
#include <utility>
#include <vector>

#include "schedules/schedule.hpp"

namespace minipipe::sched::engine {

constexpr int kKeyOps = 8;  // every Op except OVERLAP_F_B, which is never a dependency itself

inline int op_slot(Op op) {
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
// O(stages * m): what the validator needs to name any missing action of any schedule.
class KeyTable {
 public:
  KeyTable(int stages, int m) : m_(m), time_(static_cast<std::size_t>(kKeyOps) * stages * m, -1.0) {}
  bool done(Op op, int stage, int mb) const { return time_[key(op, stage, mb)] >= 0; }
  double time(Op op, int stage, int mb) const { return time_[key(op, stage, mb)]; }
  void set(Op op, int stage, int mb, double t, bool /*read_later*/) { time_[key(op, stage, mb)] = t; }
  void release(Op, int, int) {}
  std::size_t bytes() const { return time_.capacity() * sizeof(double); }

 private:
  std::size_t key(Op op, int stage, int mb) const {
    return (static_cast<std::size_t>(stage) * m_ + mb) * kKeyOps + op_slot(op);
  }
  int m_;
  std::vector<double> time_;
};

// Key -> completion time for the few keys in flight: open addressing with linear probing and
// backward-shift deletion, at most half full, so it stays about twice the most keys held at once.
class TimeMap {
 public:
  bool contains(std::uint64_t key) const { return !key_.empty() && key_[find(key)] == key; }
  double get(std::uint64_t key) const {
    if (key_.empty()) return -1.0;
    const std::size_t i = find(key);
    return key_[i] == key ? value_[i] : -1.0;
  }
  void put(std::uint64_t key, double t) {
    if (2 * (size_ + 1) > key_.size()) grow();
    const std::size_t i = find(key);
    size_ += key_[i] == kEmpty;
    key_[i] = key;
    value_[i] = t;
  }
  void erase(std::uint64_t key) {
    if (key_.empty()) return;
    std::size_t i = find(key);
    if (key_[i] != key) return;
    const std::size_t mask = key_.size() - 1;
    // Move back every later entry of the cluster whose home slot does not lie in (i, j].
    for (std::size_t j = (i + 1) & mask; key_[j] != kEmpty; j = (j + 1) & mask) {
      const std::size_t home = slot(key_[j]);
      if (((j - home) & mask) >= ((j - i) & mask)) {
        key_[i] = key_[j];
        value_[i] = value_[j];
        i = j;
      }
    }
    key_[i] = kEmpty;
    --size_;
  }
  std::size_t size() const { return size_; }
  std::size_t bytes() const { return key_.capacity() * sizeof(std::uint64_t) + value_.capacity() * sizeof(double); }

 private:
  static constexpr std::uint64_t kEmpty = ~std::uint64_t{0};
  std::size_t slot(std::uint64_t key) const {
    key = (key ^ (key >> 31)) * 0x7fb5d329728ea185ULL;  // a mix, so consecutive keys spread
    return static_cast<std::size_t>(key ^ (key >> 27)) & (key_.size() - 1);
  }
  std::size_t find(std::uint64_t key) const {
    std::size_t i = slot(key);
    while (key_[i] != kEmpty && key_[i] != key) i = (i + 1) & (key_.size() - 1);
    return i;
  }
  void grow() {
    std::vector<std::uint64_t> keys = std::move(key_);
    std::vector<double> values = std::move(value_);
    key_.assign(keys.empty() ? 16 : 2 * keys.size(), kEmpty);
    value_.assign(key_.size(), 0.0);
    size_ = 0;
    for (std::size_t k = 0; k < keys.size(); ++k)
      if (keys[k] != kEmpty) put(keys[k], values[k]);
  }
  std::vector<std::uint64_t> key_;
  std::vector<double> value_;
  std::size_t size_ = 0;
};

// The completion state a compute-only schedule needs, in memory that follows what is in flight:
// per stage and kind (F, backward) the finished micro-batches as a done prefix [0, lo) and suffix
// (hi, m) (every generator runs a stage's micro-batches in increasing order, or GPipe's backward
// in decreasing order) with the few finished out of order in one shared map, and a completion
// time only while its reader on another stage has not run (released then). Used by the
// totals-only simulation, whose sweeps go to p = 128, m = 1024 and beyond.
class StreamTable {
 public:
  // chains: the schedule's model copies; a stage of copy c runs micro-batches c, c + chains, ...
  // (Schedule::chain_of_microbatch), which the bounds count as 0, 1, ...
  StreamTable(int stages, int m, int chains = 1) : m_(m), chains_(chains) {
    bounds_.reserve(static_cast<std::size_t>(stages) * kKinds);
    for (int st = 0; st < stages; ++st) {
      const int c = st / (stages / chains), runs = m > c ? (m - 1 - c) / chains + 1 : 0;
      for (int k = 0; k < kKinds; ++k) bounds_.push_back(Bounds{0, runs - 1});
    }
  }
  bool done(Op op, int stage, int mb) const {
    const int k = kind(op);
    if (k < 0) return false;
    const Bounds& b = bounds_[index(k, stage)];
    const int i = mb / chains_;
    return i < b.lo || i > b.hi || map_.contains(key(kKinds + k, stage, i));
  }
  double time(Op op, int stage, int mb) const {
    const int k = kind(op);
    return k >= 0 ? map_.get(key(k, stage, mb)) : -1.0;
  }
  void set(Op op, int stage, int mb, double t, bool read_later) {
    const int k = kind(op);
    if (k < 0) return;  // W: nothing waits on it
    mark_done(k, stage, mb);
    if (read_later) map_.put(key(k, stage, mb), t);
    peak_keys_ = std::max(peak_keys_, map_.size());
  }
  void release(Op op, int stage, int mb) {
    const int k = kind(op);
    if (k >= 0) map_.erase(key(k, stage, mb));
  }
  // Bytes held (capacities never shrink, so also the peak) and the most keys held at once.
  std::size_t bytes() const { return bounds_.capacity() * sizeof(Bounds) + map_.bytes(); }
  std::size_t peak_keys() const { return peak_keys_; }

 private:
  static constexpr int kKinds = 2;  // F, backward; kinds 2..3 in the map: finished out of order
  struct Bounds {
    int lo, hi;
  };
  // B and I are one kind, the backward: a stage may switch between them from one micro-batch to
  // the next (DualPipeV), and W asks for its I only after the validator has made sure that
  // its backward is an I, so "backward done" answers both.
  static int kind(Op op) { return op == Op::F ? 0 : op == Op::B || op == Op::I ? 1 : -1; }
  static std::size_t index(int k, int stage) { return static_cast<std::size_t>(stage) * kKinds + k; }
  std::uint64_t key(int k, int stage, int mb) const {
    return (static_cast<std::uint64_t>(stage) * (2 * kKinds) + k) * static_cast<std::uint64_t>(m_) + mb;
  }
  void mark_done(int k, int stage, int mb) {
    Bounds& b = bounds_[index(k, stage)];
    mb /= chains_;  // the stage's count of it
    const int out_of_order = kKinds + k;
    if (mb == b.lo) {
      ++b.lo;
      while (b.lo <= b.hi && map_.contains(key(out_of_order, stage, b.lo)))
        map_.erase(key(out_of_order, stage, b.lo++));
    } else if (mb == b.hi) {
      --b.hi;
      while (b.hi >= b.lo && map_.contains(key(out_of_order, stage, b.hi)))
        map_.erase(key(out_of_order, stage, b.hi--));
    } else if (mb > b.lo && mb < b.hi) {
      map_.put(key(out_of_order, stage, mb), 0.0);
    }
  }
  int m_, chains_;
  std::vector<Bounds> bounds_;
  TimeMap map_;
  std::size_t peak_keys_ = 0;
};

// The dependency rules, once: whether an action's inputs are available on its rank and when the
// transferred ones arrive, over either table.
template <class Table>
class Inputs {
 public:
  // lowered: the schedule holds SEND/RECV (only KeyTable has their slots). split, when given
  // (size stages * m), marks the (stage, micro-batch) pairs that use I, so a missing backward is
  // named with the op the schedule contains; empty names it B. chains: the schedule's model
  // copies (Schedule::chains), each a run of stages/chains consecutive stages.
  Inputs(Table table, const std::vector<int>& stage_to_rank, int m, int chains, bool lowered, double comm_latency,
         const std::vector<double>& boundary, std::vector<char> split = {})
      : table_(std::move(table)),
        rank_of_(stage_to_rank),
        comm_latency_(comm_latency),
        boundary_(boundary),
        S_(static_cast<int>(stage_to_rank.size())),
        m_(m),
        L_(S_ / chains),
        // A compute-only schedule has its transfers implied: the consumer waits for the producer on
        // the other rank plus the latency, exactly as if RECV sat right before it and SEND right
        // after the producer (what lower_communication inserts), without materialising them.
        implicit_comm_(!lowered),
        split_(std::move(split)) {}

  const Table& table() const { return table_; }

  // True when every input of `a` (never an OVERLAP_F_B) is available on rank r; raises
  // `ready` to the time a transferred input arrives. Otherwise `missing` names what is awaited.
  bool ready(const Action& a, int r, double& ready, Action& missing) const {
    const int st = a.stage, mb = a.microbatch;
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
        if (first(st)) return true;
        if (rank_of_[st - 1] == r) return need(Op::F, st - 1);
        if (!implicit_comm_) return received(Op::RECV_F, st, Op::SEND_F, st - 1);
        if (!need(Op::F, st - 1)) return false;
        arrives(table_.time(Op::F, st - 1, mb), st - 1);
        return true;
      case Op::B:
      case Op::I:
        if (!need(Op::F, st)) return false;
        if (last(st)) return true;
        if (rank_of_[st + 1] != r && !implicit_comm_) return received(Op::RECV_B, st, Op::SEND_B, st + 1);
        if (!backward_done(st + 1, mb)) {
          missing = backward_action(st + 1, mb);
          return false;
        }
        if (rank_of_[st + 1] != r)
          arrives(std::max(table_.time(Op::B, st + 1, mb), table_.time(Op::I, st + 1, mb)), st);
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

  // Records that `x` (never an OVERLAP_F_B) finished at t. A time is kept while an action of
  // another stage may still read it (F's for the next stage's F, a backward's for the previous
  // stage's backward) and released once that reader has run.
  void finish(const Action& x, double t) {
    const int st = x.stage, mb = x.microbatch;
    const bool backward = x.op == Op::B || x.op == Op::I;
    const bool read_later = (x.op == Op::F && !last(st)) || (backward && !first(st)) || is_comm(x.op);
    table_.set(x.op, st, mb, t, read_later);
    if (x.op == Op::F && !first(st)) table_.release(Op::F, st - 1, mb);
    if (backward && !last(st)) {
      table_.release(Op::B, st + 1, mb);
      table_.release(Op::I, st + 1, mb);
    }
  }

 private:
  // A copy's first stage embeds, its last one computes the loss (Schedule::is_first_stage and
  // is_last_stage; one copy: stage 0 and stage S-1).
  bool first(int st) const { return st % L_ == 0; }
  bool last(int st) const { return st % L_ == L_ - 1; }
  bool backward_done(int st, int mb) const { return table_.done(Op::B, st, mb) || table_.done(Op::I, st, mb); }
  Action backward_action(int st, int mb) const {
    const bool split = !split_.empty() && split_[static_cast<std::size_t>(st) * m_ + mb];
    return Action::make(split ? Op::I : Op::B, st, mb);
  }

  Table table_;
  const std::vector<int>& rank_of_;
  double comm_latency_;
  const std::vector<double>& boundary_;
  int S_, m_, L_;
  bool implicit_comm_;
  std::vector<char> split_;
};

// Each rank's actions in a std::vector (a Schedule's rows): the cursor is an index.
class RowsSource {
 public:
  explicit RowsSource(const std::vector<std::vector<Action>>& rows) : rows_(rows), head_(rows.size(), 0) {}
  const Action* peek(int r) const {
    const auto& row = rows_[static_cast<std::size_t>(r)];
    return head_[r] < row.size() ? &row[head_[r]] : nullptr;
  }
  void advance(int r) { ++head_[r]; }
  std::size_t index(int r) const { return head_[r]; }
  const std::vector<std::size_t>& heads() const { return head_; }

 private:
  const std::vector<std::vector<Action>>& rows_;
  std::vector<std::size_t> head_;
};

// Runs every rank's actions as far as their inputs allow. Source: peek(r) (nullptr at the end)
// and advance(r). Deps: an Inputs. duration(a): a compute action's time (a SEND/RECV takes none).
// Observer: ran(r, a, start, end) after each action, blocked(r, missing) when rank r stops.
// A blocked rank is woken only when the rank it waits on has moved. Among the ranks that can
// move, the one whose clock is earliest goes first, and yields as soon as another is earlier:
// the results do not depend on this order (every start is the max of its inputs), but the
// completion times waiting for a reader then are those in flight at one moment of the step, not
// a whole rank's run ahead. Memory: O(p) here; the rest is the source's and the table's.
// Returns whether every rank reached its end.
template <class Source, class Deps, class Duration, class Observer>
bool run(int p, const std::vector<int>& rank_of, Source& source, Deps& deps, const Duration& duration,
         Observer& observer) {
  using Entry = std::pair<double, int>;  // (clock, rank)
  std::vector<double> clock(static_cast<std::size_t>(p), 0.0);
  std::vector<std::vector<int>> blocked_on(static_cast<std::size_t>(p));  // ranks waiting for rank q
  std::vector<char> queued(static_cast<std::size_t>(p), 1);
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> movable;
  for (int r = 0; r < p; ++r) movable.emplace(0.0, r);
  auto enqueue = [&](int r) {
    if (queued[r]) return;
    queued[r] = 1;
    movable.emplace(clock[r], r);
  };

  while (!movable.empty()) {
    const int r = movable.top().second;
    movable.pop();
    queued[r] = 0;
    while (const Action* next = source.peek(r)) {
      if (!movable.empty() && movable.top() < Entry(clock[r], r)) {
        enqueue(r);  // another rank is earlier
        break;
      }
      const Action& a = *next;
      double ready = 0.0;
      Action missing;
      bool ok = true;
      if (a.op == Op::OVERLAP_F_B) {
        for (const auto& sub : a.sub) ok = ok && deps.ready(sub, r, ready, missing);
      } else {
        ok = deps.ready(a, r, ready, missing);
      }
      if (!ok) {
        observer.blocked(r, missing);
        blocked_on[rank_of[missing.stage]].push_back(r);
        break;
      }
      const double st = std::max(clock[r], ready);
      const double en = is_comm(a.op) ? st : st + duration(a);
      if (a.op == Op::OVERLAP_F_B) {
        for (const auto& sub : a.sub) deps.finish(sub, en);
      } else {
        // A SEND is stamped with its posting time; the receiver adds the latency.
        deps.finish(a, en);
      }
      observer.ran(r, a, st, en);
      clock[r] = en;
      source.advance(r);
      for (int w : blocked_on[r]) enqueue(w);
      blocked_on[r].clear();
    }
  }
  for (int r = 0; r < p; ++r)
    if (source.peek(r)) return false;
  return true;
}

}  // namespace minipipe::sched::engine
