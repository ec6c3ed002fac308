// Rank programs (schedules/program.hpp) and the totals simulation over them against the old path,
// a whole Schedule simulated by the full simulator: equal to the bit, in a fraction of the memory.
#include <gtest/gtest.h>

#include <string>

#include "schedules/schedules.hpp"

namespace ms = minipipe::sched;

namespace {

// Uneven costs on every knob the simulator has, so a mixed-up stage or micro-batch shows.
ms::CostModel rich_costs(int S) {
  ms::CostModel c;
  for (int k = 0; k < S; ++k) {
    c.F.push_back(1 + 0.1 * k), c.I.push_back(0.9 + 0.05 * k), c.W.push_back(0.7 + 0.02 * (k % 3));
    c.act.push_back(1 + k % 2), c.act_work.push_back(0.5), c.W_tail.push_back(k == 1 ? 0.4 : 0.0);
  }
  for (int b = 0; b + 1 < S; ++b) c.boundary.push_back(b % 3 == 2 ? 0.75 : 0.125 * (1 + b % 2));
  c.action_overhead = 0.01, c.overlap_fb = 0.8, c.jitter_cv = 0.2, c.jitter_seed = 3;
  return c;
}

std::size_t row_bytes(const std::vector<ms::Action>& row) {
  std::size_t n = row.size() * sizeof(ms::Action);
  for (const auto& a : row) n += a.sub.capacity() * sizeof(ms::Action);
  return n;
}

// The programs replay make_schedule's rows exactly, and simulate alike to the bit.
void expect_same(const std::string& name, int p, int m, int v) {
  const std::string at = name + " p=" + std::to_string(p) + " m=" + std::to_string(m) + " v=" + std::to_string(v);
  ms::Schedule s;
  try {
    s = ms::make_schedule(name, p, m, v);
  } catch (const ms::ScheduleError& e) {
    // The programs refuse the same arguments with the same words.
    try {
      (void)ms::make_rank_programs(name, p, m, v);
      ADD_FAILURE() << at << ": make_rank_programs accepted what make_schedule refused: " << e.what();
    } catch (const ms::ScheduleError& e2) {
      EXPECT_EQ(std::string(e.what()), e2.what()) << at;
    }
    return;
  }
  const ms::RankPrograms programs = ms::make_rank_programs(name, p, m, v);
  ASSERT_EQ(programs.num_actions(), s.num_actions()) << at;
  const ms::Schedule replayed = ms::to_schedule(programs);
  EXPECT_EQ(replayed.stage_to_rank, s.stage_to_rank) << at;
  EXPECT_EQ(replayed.group, s.group) << at;
  for (int r = 0; r < p; ++r) ASSERT_EQ(replayed.ranks[r], s.ranks[r]) << at << " rank " << r;

  const ms::CostModel c = rich_costs(s.num_stages());
  const ms::StepTotals lean = ms::simulate_totals(programs, c);
  // The reference: the whole schedule by the full simulator (timeline, per-action times and
  // the dense completion table of every (op, stage, micro-batch)).
  const ms::SimResult ref = ms::simulate(s, c);
  EXPECT_EQ(lean.makespan, ref.makespan) << at;
  EXPECT_EQ(lean.bubble_fraction, ref.bubble_fraction) << at;
  EXPECT_EQ(lean.busy, ref.busy) << at;
  EXPECT_EQ(lean.end, ref.end) << at;
  EXPECT_EQ(lean.activation_mem, ref.activation_mem) << at;
}

}  // namespace

TEST(Programs, EveryScheduleReplaysAndSimulatesAsTheWholeScheduleBitForBit) {
  for (const auto& name : ms::schedule_names())
    for (int p = 1; p <= 8; ++p)
      for (int m = 1; m <= 2 * p + 2; ++m) {
        expect_same(name, p, m, 0);
        if (name == "interleaved-1f1b" || name == "looped-bfs") expect_same(name, p, m, 3);
      }
}

TEST(Programs, LargeSchedulesSimulateAsTheWholeScheduleBitForBit) {
  expect_same("1f1b", 128, 1024, 1);
  expect_same("gpipe", 128, 1024, 1);
  expect_same("zb-h2", 96, 700, 1);
  expect_same("interleaved-1f1b", 64, 1000, 4);
  expect_same("zb-v", 128, 1024, 2);
  expect_same("dualpipev", 100, 333, 2);
  expect_same("v-half", 16, 128, 2);  // built whole, then compressed
}

TEST(Programs, SimulationHoldsAboutOneRanksActions) {
  // The bound of docs/cluster.md: the simulation's memory (the programs plus the dependency table at its
  // peak) within what one rank's action list takes, at p = 128, m = 1024, for every variant
  // built rank by rank; the whole Schedule is p = 128 times that list. Interleaved 1F1B's runs
  // break at every group boundary (m v / group of them per rank), so it is allowed twice that.
  for (const auto& name : ms::schedule_names()) {
    if (!ms::built_rank_by_rank(name)) continue;
    const int p = 128, m = 1024;
    const ms::Schedule s = ms::make_schedule(name, p, m);
    const ms::RankPrograms programs = ms::make_rank_programs(name, p, m);
    const ms::StepTotals t = ms::simulate_totals(programs, ms::CostModel::uniform(s.num_stages(), 1, 2, 0, 0, 0.1));
    std::size_t one_rank = 0, whole = 0;
    for (const auto& row : s.ranks) one_rank = std::max(one_rank, row_bytes(row)), whole += row_bytes(row);
    const std::size_t held = programs.bytes() + t.state_bytes;
    EXPECT_LT(held, (name == "interleaved-1f1b" ? 2 : 1) * one_rank)
        << name << ": programs " << programs.bytes() << " B, table " << t.state_bytes << " B, one rank's list "
        << one_rank << " B, the schedule " << whole << " B";
    EXPECT_EQ(t.makespan, ms::simulate_totals(s, ms::CostModel::uniform(s.num_stages(), 1, 2, 0, 0, 0.1)).makespan)
        << name;
  }
}

TEST(Programs, AHandWrittenOrderRoundTrips) {
  // Not a generator's: steps of 0, 1, 2 and -1 in one block, a pair, and a stretch with no repeat.
  std::vector<ms::Action> row;
  for (int k = 0; k < 5; ++k) {
    row.push_back(ms::Action::make(ms::Op::F, 3, 2 * k));
    row.push_back(ms::Action::make(ms::Op::I, 1, 9 - k));
    row.push_back(ms::Action::make(ms::Op::W, 0, 4));
    row.push_back(ms::Action::overlap(ms::Action::make(ms::Op::F, 2, k), ms::Action::make(ms::Op::B, 5, 7 - k)));
  }
  for (int mb : {3, 1, 4, 1, 5, 9, 2, 6}) row.push_back(ms::Action::make(ms::Op::B, mb % 3, mb));
  ms::RankPrograms ps;
  ps.p = 1, ps.v = 6, ps.m = 10, ps.stage_to_rank.assign(6, 0);
  ps.ranks.push_back(ms::RankProgram::compress(row));
  EXPECT_EQ(ms::to_schedule(ps).ranks[0], row);
  EXPECT_LT(ps.ranks[0].bytes(), row_bytes(row));
}
