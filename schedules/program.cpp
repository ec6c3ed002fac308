// Compression of one rank's actions into runs, the cursor that replays them, and the conversions
// between programs and a Schedule. Generators' rows are periodic, so the search is a short scan.
#include "schedules/program.hpp"

#include "schedules/engine.hpp"

namespace minipipe::sched {

namespace {

// The longest block tried: ZB-V's steady state repeats every 6 actions, Interleaved 1F1B's with
// v = 4 and groups of 2 every 16.
constexpr int kMaxBlock = 16;

}  // namespace

RankProgram RankProgram::compress(const std::vector<Action>& row) {
  // One entry per action: its one or two parts.
  struct Cell {
    Part part[2];
    int halves = 1;
  };
  std::vector<Cell> raw(row.size());
  for (std::size_t k = 0; k < row.size(); ++k) {
    const Action& a = row[k];
    if (is_comm(a.op))
      throw ScheduleError("rank program: " + to_string(a) + " is a transfer; compress the compute-only schedule");
    Cell& c = raw[k];
    c.halves = a.op == Op::OVERLAP_F_B ? 2 : 1;
    for (int h = 0; h < c.halves; ++h) {
      const Action& x = c.halves == 2 ? a.sub[static_cast<std::size_t>(h)] : a;
      c.part[h].op = x.op, c.part[h].stage = x.stage, c.part[h].microbatch = x.microbatch;
    }
    c.part[0].pair = c.halves == 2;
  }
  auto same_shape = [](const Cell& a, const Cell& b) {
    if (a.halves != b.halves) return false;
    for (int h = 0; h < a.halves; ++h)
      if (a.part[h].op != b.part[h].op || a.part[h].stage != b.part[h].stage) return false;
    return true;
  };
  // Whether cell `at` is cell `base` moved on by `reps` repetitions of the step to `step_from`.
  auto follows = [&](std::size_t base, std::size_t step_from, std::size_t at, int reps) {
    if (!same_shape(raw[base], raw[at])) return false;
    for (int h = 0; h < raw[base].halves; ++h) {
      const long long mb0 = raw[base].part[h].microbatch, step = raw[step_from].part[h].microbatch - mb0;
      if (raw[at].part[h].microbatch != mb0 + reps * step) return false;
    }
    return true;
  };
  RankProgram out;
  auto emit = [&](const Cell& c) {
    for (int h = 0; h < c.halves; ++h) out.parts_.push_back(c.part[h]);
  };
  const std::size_t n = raw.size();
  std::size_t i = 0;
  while (i < n) {
    std::size_t best_len = 1, best_reps = 1;
    for (std::size_t len = 1; len <= static_cast<std::size_t>(kMaxBlock) && i + 2 * len <= n; ++len) {
      std::size_t reps = 1;
      for (bool whole = true; whole && i + (reps + 1) * len <= n;) {
        for (std::size_t j = 0; j < len && whole; ++j)
          whole = follows(i + j, i + len + j, i + reps * len + j, static_cast<int>(reps));
        if (whole) ++reps;
      }
      if (reps >= 2 && reps * len > best_reps * best_len) best_len = len, best_reps = reps;
    }
    if (best_reps == 1 && !out.runs_.empty() && out.runs_.back().count == 1) {
      ++out.runs_.back().length;  // a stretch with no repeat stays one run
      emit(raw[i]);
    } else {
      out.runs_.push_back(
          Run{static_cast<std::uint32_t>(out.parts_.size()), static_cast<int>(best_len), static_cast<int>(best_reps)});
      for (std::size_t j = 0; j < best_len; ++j) {
        Cell c = raw[i + j];
        if (best_reps > 1)
          for (int h = 0; h < c.halves; ++h)
            c.part[h].step = raw[i + best_len + j].part[h].microbatch - c.part[h].microbatch;
        emit(c);
      }
    }
    i += best_len * best_reps;
  }
  out.parts_.shrink_to_fit();
  out.runs_.shrink_to_fit();
  return out;
}

std::size_t RankProgram::num_actions() const {
  std::size_t n = 0;
  for (const Run& r : runs_) n += static_cast<std::size_t>(r.length) * r.count;
  return n;
}

std::size_t RankProgram::bytes() const {
  return sizeof(*this) + parts_.capacity() * sizeof(Part) + runs_.capacity() * sizeof(Run);
}

ProgramCursor::ProgramCursor(const RankProgram& program) : program_(&program) {
  current_.sub.reserve(2);
  if (!program.runs_.empty()) part_ = program.runs_[0].first;
  load();
}

void ProgramCursor::advance() {
  const RankProgram::Run& run = program_->runs_[run_];
  part_ += program_->parts_[part_].pair ? 2 : 1;
  if (++position_ == run.length) {
    position_ = 0;
    part_ = run.first;
    if (++repetition_ == run.count) {
      repetition_ = 0;
      if (++run_ < program_->runs_.size()) part_ = program_->runs_[run_].first;
    }
  }
  load();
}

void ProgramCursor::load() {
  at_end_ = run_ >= program_->runs_.size();
  if (at_end_) return;
  const RankProgram::Part* part = &program_->parts_[part_];
  auto set = [&](Action& x, const RankProgram::Part& h) {
    x.op = h.op, x.stage = h.stage, x.microbatch = h.microbatch + repetition_ * h.step;
  };
  if (part->pair) {
    current_.op = Op::OVERLAP_F_B, current_.stage = -1, current_.microbatch = -1;
    current_.sub.resize(2);
    set(current_.sub[0], part[0]);
    set(current_.sub[1], part[1]);
  } else {
    current_.sub.clear();
    set(current_, part[0]);
  }
}

std::size_t RankPrograms::num_actions() const {
  std::size_t n = 0;
  for (const auto& r : ranks) n += r.num_actions();
  return n;
}

std::size_t RankPrograms::bytes() const {
  std::size_t n = sizeof(*this) + name.capacity() + stage_to_rank.capacity() * sizeof(int);
  for (const auto& r : ranks) n += r.bytes();
  return n + (ranks.capacity() - ranks.size()) * sizeof(RankProgram);
}

ProgramSource::ProgramSource(const RankPrograms& s) {
  cursor_.reserve(s.ranks.size());
  for (const auto& r : s.ranks) cursor_.emplace_back(r);
}

RankPrograms to_programs(const Schedule& s) {
  RankPrograms out;
  out.name = s.name, out.p = s.p, out.v = s.v, out.m = s.m, out.group = s.group, out.chains = s.chains;
  out.stage_to_rank = s.stage_to_rank;
  out.ranks.reserve(s.ranks.size());
  for (const auto& row : s.ranks) out.ranks.push_back(RankProgram::compress(row));
  return out;
}

Schedule to_schedule(const RankPrograms& s) {
  Schedule out;
  out.name = s.name, out.p = s.p, out.v = s.v, out.m = s.m, out.group = s.group, out.chains = s.chains;
  out.stage_to_rank = s.stage_to_rank;
  out.ranks.resize(s.ranks.size());
  for (std::size_t r = 0; r < s.ranks.size(); ++r)
    for (ProgramCursor at(s.ranks[r]); const Action* a = at.peek(); at.advance()) out.ranks[r].push_back(*a);
  return out;
}

bool runs_to_end(const RankPrograms& s) {
  const std::vector<double> no_links;
  engine::Inputs<engine::StreamTable> inputs(engine::StreamTable(s.num_stages(), s.m, s.chains), s.stage_to_rank, s.m,
                                             s.chains, false, 0.0, no_links);
  ProgramSource source(s);
  struct Nothing {
    void ran(int, const Action&, double, double) {}
    void blocked(int, const Action&) {}
  } nothing;
  return engine::run(
      s.p, s.stage_to_rank, source, inputs, [](const Action&) { return 1.0; }, nothing);
}

}  // namespace minipipe::sched
