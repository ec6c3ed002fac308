// Building blocks the generators share: a rank's action list built in issue order, a schedule
// built rank by rank (so a simulation can hold one rank's actions at a time), and a cut to fewer m.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "schedules/program.hpp"
#include "schedules/schedule.hpp"

namespace minipipe::sched::gen {

// Appends actions to one rank's list, numbering micro-batches per (stage, kind) in issue order,
// which is how every variant walks through its micro-batches.
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
                  std::function<void(int, std::vector<Action>&)> row);

// Every rank's row, built.
Schedule build(const Rankwise& w);

// Every rank's row compressed as soon as it is built.
RankPrograms programs(const Rankwise& w);

// The schedule restricted to micro-batches 0..m-1: every other action dropped, and a pair
// that loses one half kept as its other half. Each dropped action's dependants are dropped with
// it (they are of the same micro-batch), so what remains runs in the same order without waiting
// for anything removed: a valid schedule for m' >= m stays valid for m. This is how the
// variants whose warm-up needs a minimum m accept any m (the warm-up is cut short).
Rankwise keep_microbatches(Rankwise w, int m);

}  // namespace minipipe::sched::gen
