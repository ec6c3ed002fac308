// The time budget's arithmetic on synthetic inputs with answers computed by hand: the clamp chain
// (sums exact, nothing negative whatever the targets), the nested simulations of small 1F1B
// pipelines worked out on paper, and the link latency read off measured action times.
#include <gtest/gtest.h>

#include <cstdint>

#include "miniapp/report/time_budget.hpp"
#include "schedules/schedules.hpp"

namespace {

using namespace minipipe;
namespace ms = minipipe::sched;

void expect_line(const BudgetLine& b, std::int64_t c, std::int64_t ideal, std::int64_t imb, std::int64_t comm,
                 std::int64_t ovh) {
  EXPECT_EQ(b.compute, c);
  EXPECT_EQ(b.ideal_bubble, ideal);
  EXPECT_EQ(b.imbalance_wait, imb);
  EXPECT_EQ(b.exposed_comm, comm);
  EXPECT_EQ(b.overhead, ovh);
}

TEST(TimeBudget, ClampChainKeepsEachIncrementWhenTheTargetsRise) {
  // Idle 40 of 100: the simulations leave 10, 25, 30 idle, so 10 + 15 + 5 and 10 over.
  expect_line(split_rank_time(100, 60, {10, 25, 30}), 60, 10, 15, 5, 10);
}

TEST(TimeBudget, ASlowStagesRankIdlesLessThanTheIdealAndTheIdealShrinksNotTheLaterKinds) {
  // The slow rank: with its own cost it idles 5 where the stage mean would leave 15; the link
  // adds 3, and the measured idle 20 leaves 12 of overhead.
  expect_line(split_rank_time(100, 80, {15, 5, 8}), 80, 5, 0, 3, 12);
}

TEST(TimeBudget, TargetsAboveTheMeasuredIdleAreCappedFromTheEnd) {
  // Measured idle 10 below what the link simulation predicts (20): no overhead, and the link's
  // share shrinks first.
  expect_line(split_rank_time(100, 90, {5, 12, 20}), 90, 5, 5, 0, 0);
}

TEST(TimeBudget, NegativeTargetsAndComputeBeyondTheMakespanStayInRange) {
  expect_line(split_rank_time(50, 70, {-3, 4, 2}), 50, 0, 0, 0, 0);
  expect_line(split_rank_time(50, 20, {-3, -4, -2}), 20, 0, 0, 0, 30);
}

TEST(TimeBudget, EveryKindIsNonNegativeAndTheySumToTheMakespanExactly) {
  // A deterministic sweep over targets below, inside and above the measured idle, any order.
  std::uint64_t x = 12345;
  auto next = [&](std::int64_t range) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<std::int64_t>((x >> 33) % static_cast<std::uint64_t>(range)) - range / 4;
  };
  for (int k = 0; k < 20000; ++k) {
    const std::int64_t M = next(4000000) + 1000000;
    const BudgetLine b = split_rank_time(M, next(M + 1000), {next(M), next(M), next(M)});
    ASSERT_EQ(b.total(), std::max<std::int64_t>(M, 0)) << k;
    for (std::int64_t part : {b.compute, b.ideal_bubble, b.imbalance_wait, b.exposed_comm, b.overhead})
      ASSERT_GE(part, 0) << k;
  }
}

ms::Schedule onef1b(int p, int m) {
  return ms::post_receives_early(ms::lower_communication(ms::make_schedule("1f1b", p, m)));
}

ms::CostModel costs(std::vector<double> F, std::vector<double> B) {
  ms::CostModel c;
  c.F = std::move(F), c.B = std::move(B);
  return c;
}

constexpr std::int64_t kMs = 1000000;  // ns

TEST(TimeBudget, EqualStagesHaveOnlyTheClosedFormBubble) {
  // 1F1B, p = 2, m = 2, F = 1 ms, B = 2 ms on both stages: makespan (m + p - 1)(F + B) = 9 ms,
  // each rank busy 6 ms and idle 3 ms. Measured 10 ms: the extra 1 ms per rank is overhead.
  const TimeBudget b = time_budget(onef1b(2, 2), costs({1, 1}, {2, 2}), 0.0, {0.006, 0.006}, 0.010);
  EXPECT_EQ(b.sim_makespan[0], 9 * kMs);
  EXPECT_EQ(b.sim_makespan[1], 9 * kMs);
  ASSERT_EQ(b.ranks.size(), 2u);
  for (const auto& r : b.ranks) expect_line(r, 6 * kMs, 3 * kMs, 0, 0, 1 * kMs);
  expect_line(b.total, 12 * kMs, 6 * kMs, 0, 0, 2 * kMs);
  EXPECT_EQ(b.total.total(), 2 * b.makespan);
}

TEST(TimeBudget, ASlowFirstStageIsImbalanceWaitOnTheOtherRank) {
  // Stage 0: F = 3, B = 2; stage 1: F = 1, B = 2 (ms). By hand, rank 0 runs F0 [0,3] F1 [3,6]
  // B0 [6,8] B1 [9,11]; rank 1 F0 [3,4] B0 [4,6] F1 [6,7] B1 [7,9]: makespan 11, idle 1 and 5.
  // Stage means F = 2, B = 2: makespan 3 x 4 = 12, busy 8, idle 4 on each rank.
  const TimeBudget b = time_budget(onef1b(2, 2), costs({3, 1}, {2, 2}), 0.0, {0.010, 0.006}, 0.011);
  EXPECT_EQ(b.sim_makespan[0], 12 * kMs);
  EXPECT_EQ(b.sim_makespan[1], 11 * kMs);
  expect_line(b.ranks[0], 10 * kMs, 1 * kMs, 0, 0, 0);  // its ideal 4 shrinks to its idle 1
  expect_line(b.ranks[1], 6 * kMs, 4 * kMs, 1 * kMs, 0, 0);
  expect_line(b.total, 16 * kMs, 5 * kMs, 1 * kMs, 0, 0);
}

TEST(TimeBudget, TheLinkLatencyIsExposedCommunication) {
  // 1F1B, p = 2, m = 1, F = 1, B = 2, one transfer 0.5 ms each way: F0 [0,1], F1 [1.5,2.5],
  // B1 [2.5,4.5], B0 [5,7]: makespan 7 against 6 without the link. Measured 8 ms.
  const TimeBudget b = time_budget(onef1b(2, 1), costs({1, 1}, {2, 2}), 0.5, {0.003, 0.003}, 0.008);
  EXPECT_EQ(b.sim_makespan[1], 6 * kMs);
  EXPECT_EQ(b.sim_makespan[2], 7 * kMs);
  EXPECT_DOUBLE_EQ(b.link_ms, 0.5);
  for (const auto& r : b.ranks) expect_line(r, 3 * kMs, 3 * kMs, 0, 1 * kMs, 1 * kMs);
}

RankStepStats actions(std::vector<ActionTiming> a) {
  RankStepStats st;
  st.actions = std::move(a);
  return st;
}

TEST(TimeBudget, LinkLatencyIsTheMedianOverReceivesThatWaitedForTheProducer) {
  using ms::Op;
  // Rank 0 holds stage 0, rank 1 stage 1. Receives that were waiting when the producer ended:
  // F1/mb0 (0.5 after F0 ended), F1/mb1 (0.7), B0/mb0 (0.2). F1/mb2 began waiting after its
  // producer ended (the data may have been there): not a sample. B0/mb1 did not wait.
  ActionTiming f00{Op::F, 0, 0, 0.0, 1.0}, f01{Op::F, 0, 1, 1.0, 2.0}, f02{Op::F, 0, 2, 2.0, 3.0};
  ActionTiming b00{Op::B, 0, 0, 6.2, 7.0}, b01{Op::B, 0, 1, 8.0, 9.0};
  b00.wait = 1.0;
  ActionTiming f10{Op::F, 1, 0, 1.5, 2.5}, f11{Op::F, 1, 1, 2.7, 3.5}, f12{Op::F, 1, 2, 4.0, 4.5};
  ActionTiming b10{Op::B, 1, 0, 5.0, 6.0}, b11{Op::B, 1, 1, 6.0, 7.0};
  f10.wait = 1.2, f11.wait = 1.0, f12.wait = 0.4;
  const LinkEstimate e = measured_link({actions({f00, f01, f02, b00, b01}), actions({f10, f11, f12, b10, b11})});
  EXPECT_EQ(e.samples, 3);
  EXPECT_NEAR(e.latency_ms, 500.0, 1e-9);
  // Nothing waited: no sample, latency 0.
  const LinkEstimate none = measured_link({actions({f00}), actions({ActionTiming{Op::F, 1, 0, 1.5, 2.5}})});
  EXPECT_EQ(none.samples, 0);
  EXPECT_EQ(none.latency_ms, 0.0);
}

TEST(TimeBudget, StageMeanCostsAverageEveryList) {
  ms::CostModel c = costs({3, 1}, {2, 4});
  c.W_tail = {1, 0};
  const ms::CostModel m = stage_mean_costs(c, 2, 1);
  EXPECT_EQ(m.F, (std::vector<double>{2, 2}));
  EXPECT_EQ(m.B, (std::vector<double>{3, 3}));
  EXPECT_EQ(m.I, (std::vector<double>{1.5, 1.5}));
  EXPECT_EQ(m.W_tail, (std::vector<double>{0.5, 0.5}));
}

}  // namespace
