// A schedule held as one compact program per rank, for simulations whose memory must stay near
// one rank's actions: runs of a block of actions repeated with fixed micro-batch steps.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "schedules/schedule.hpp"

namespace minipipe::sched {

// One rank's actions as runs: a run is a block of cells repeated `count` times, repetition k
// adding k * step to each cell's micro-batch. A generator's row is a few phases of a periodic
// pattern (warm-up, steady state, cool-down), so 1F1B's 3m actions become three runs.
class RankProgram {
 public:
  // The program that replays `row` exactly (a compute-only rank's list; pairs included).
  static RankProgram compress(const std::vector<Action>& row);
  std::size_t num_actions() const;
  std::size_t bytes() const;  // held (capacities)

 private:
  friend class ProgramCursor;
  // One action, or one half of a pair: a pair's first half has `pair` set, its second follows.
  struct Part {
    int stage = -1, microbatch = -1, step = 0;
    Op op = Op::F;
    bool pair = false;
  };
  struct Run {
    std::uint32_t first = 0;  // parts_[first, ...): `length` actions
    int length = 0, count = 0;
  };
  std::vector<Part> parts_;
  std::vector<Run> runs_;
};

// Replays a program action by action; the Action it shows is rebuilt in place (no allocation
// after the first pair).
class ProgramCursor {
 public:
  explicit ProgramCursor(const RankProgram& program);
  const Action* peek() const { return at_end_ ? nullptr : &current_; }
  void advance();

 private:
  void load();
  const RankProgram* program_;
  std::size_t run_ = 0, part_ = 0;  // part_: where the current action's parts start
  int repetition_ = 0, position_ = 0;
  bool at_end_ = true;
  Action current_;
};

// A schedule as per-rank programs: the Schedule's header fields and one program per rank.
struct RankPrograms {
  std::string name;
  int p = 0, v = 1, m = 0, group = 0;
  int chains = 1;                  // model copies (Schedule::chains)
  std::vector<int> stage_to_rank;  // size p*v
  std::vector<RankProgram> ranks;

  int num_stages() const { return p * v; }
  std::size_t num_actions() const;
  std::size_t bytes() const;  // programs and stage map, held
};

// The event loop's action source over every rank's program (engine.hpp's peek/advance).
class ProgramSource {
 public:
  explicit ProgramSource(const RankPrograms& s);
  const Action* peek(int r) const { return cursor_[static_cast<std::size_t>(r)].peek(); }
  void advance(int r) { cursor_[static_cast<std::size_t>(r)].advance(); }

 private:
  std::vector<ProgramCursor> cursor_;
};

// Each rank of a built schedule compressed (a compute-only one).
RankPrograms to_programs(const Schedule& s);

// The rows back: the Schedule that make_schedule returns for the same arguments.
Schedule to_schedule(const RankPrograms& s);

// make_schedule's schedule as programs. The variants built rank by rank (Build::rank_by_rank in
// schedules/variant_table.cpp, where not searched) never hold more than one rank's actions
// uncompressed; the others are built whole by make_schedule and then compressed.
RankPrograms make_rank_programs(const std::string& name, int p, int m, int v = 0, const ScheduleOptions& opt = {});

// Whether make_rank_programs builds `name` rank by rank (false: whole, then compressed).
bool built_rank_by_rank(const std::string& name);

// Whether every rank reaches the end of its program (no deadlock), as execute() decides.
bool runs_to_end(const RankPrograms& s);

}  // namespace minipipe::sched
