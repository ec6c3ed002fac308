// The split optimizer against brute force over every contiguous split, the memory accounting of
// the simulator with per-stage I -> W bytes, on small cases with known answers.
#include <gtest/gtest.h>

#include <functional>

#include "schedules/schedules.hpp"
#include "schedules/split.hpp"

namespace minipipe::sched {
namespace {

// Every split of L blocks into S stages (zero blocks allowed): the least slowest stage.
double brute_force(const std::vector<double>& block, double first, double last, int S) {
  double best = 1e300;
  std::vector<int> counts(S, 0);
  std::function<void(int, int)> go = [&](int s, int left) {
    if (s == S - 1) {
      counts[s] = left;
      best = std::min(best, slowest_stage(block, first, last, counts));
      return;
    }
    for (int c = 0; c <= left; ++c) counts[s] = c, go(s + 1, left - c);
  };
  go(0, static_cast<int>(block.size()));
  return best;
}

TEST(Split, HeavyHeadMovesBlocksToTheFirstStages) {
  // 8 equal blocks, a head worth 4 blocks, p = 2: the even split 4/4 has a slowest stage of 8;
  // 6/2 gives 6 and 6.
  const std::vector<double> block(8, 1.0);
  const auto counts = balanced_split(block, 0.0, 4.0, 2);
  EXPECT_EQ(counts, (std::vector<int>{6, 2}));
  EXPECT_DOUBLE_EQ(slowest_stage(block, 0.0, 4.0, counts), 6.0);
  EXPECT_DOUBLE_EQ(slowest_stage(block, 0.0, 4.0, {4, 4}), 8.0);
}

TEST(Split, AHeadHeavierThanTheBlocksGetsAStageOfItsOwn) {
  const std::vector<double> block(4, 1.0);
  EXPECT_EQ(balanced_split(block, 0.5, 10.0, 2), (std::vector<int>{4, 0}));
  EXPECT_EQ(balanced_split(block, 0.0, 0.0, 4), (std::vector<int>{1, 1, 1, 1}));
}

TEST(Split, MatchesBruteForceOnUnevenCosts) {
  const std::vector<double> block{3, 1, 4, 1, 5, 9, 2, 6};
  for (int S = 1; S <= 5; ++S)
    for (double head : {0.0, 2.5, 12.0}) {
      const auto counts = balanced_split(block, 1.5, head, S);
      int sum = 0;
      for (int c : counts) sum += c;
      EXPECT_EQ(sum, 8);
      EXPECT_DOUBLE_EQ(slowest_stage(block, 1.5, head, counts), brute_force(block, 1.5, head, S))
          << "S = " << S << ", head = " << head;
    }
}

TEST(Split, RefusesBadInput) {
  EXPECT_THROW(balanced_split({1.0}, 0, 0, 0), ScheduleError);
  EXPECT_THROW(balanced_split({-1.0}, 0, 0, 1), ScheduleError);
}

TEST(SimulatorMemory, PerStageWorkBytesAreHeldFromIToW) {
  // One rank, m = 2, sequential-like GPipe at p = 1: F0 F1 B... ; with split backward (ZB-H1 at
  // p = 1 runs F I W per micro-batch) a W-deferring schedule holds act + work until W.
  Schedule s = make_schedule("gpipe", 1, 2);
  CostModel c = CostModel::uniform(1, 1, 2, 0, 0, 0);
  c.act = {10};
  c.act_work = {3};
  // GPipe p = 1: F0 F1 B0 B1; held 10, 20, inside B0 23, then 10, inside B1 13.
  EXPECT_DOUBLE_EQ(simulate(s, c).activation_mem[0], 23.0);
  Schedule z = make_schedule("zb-h1", 1, 2);
  // ZB-H1 p = 1: F0 I0 W0 F1 I1 W1 or similar; the peak is one micro-batch's act + work.
  EXPECT_DOUBLE_EQ(simulate(z, c).activation_mem[0], 13.0);
}

}  // namespace
}  // namespace minipipe::sched
