// summarize(): per-rank idle and the measured bubble leave observer (dump) time out alike, the
// simulator fed with measured costs reproduces the closed form, and throughput skips warm-up.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "miniapp/report/summary.hpp"
#include "schedules/schedules.hpp"

namespace {

using namespace minipipe;
namespace ms = minipipe::sched;

RunContext context(int p, int m) {
  RunContext c;
  c.schedule = "1f1b", c.mode = "deterministic", c.backend = "Serial", c.blas = "test", c.comm_path = "host";
  c.p = p, c.m = m, c.steps = 3, c.batch = 4, c.seq_len = 8;
  return c;
}

// Every compute action of `plan` measured at `f` (F) or `b` (B) seconds, back to back per rank.
RunMeasurements measured(const ms::Schedule& plan, double f, double b) {
  RunMeasurements meas;
  meas.losses = {3.0, 2.5, 2.0};
  meas.step_seconds = {9.0, 1.0, 3.0};
  meas.makespans = meas.step_seconds;
  for (const auto& row : plan.ranks) {
    RankStepStats st;
    double t = 0;
    for (const auto& a : row) {
      if (!ms::is_compute(a.op)) continue;
      const double d = a.op == ms::Op::F ? f : b;
      st.actions.push_back({a.op, a.stage, a.microbatch, t, t + d});
      (a.op == ms::Op::F ? st.time_F : st.time_B) += d;
      t += d;
    }
    st.makespan = t;
    meas.ranks.push_back(st);
  }
  return meas;
}

TEST(Summary, IdleAndBubbleBothLeaveDumpTimeOut) {
  const ms::Schedule plan = ms::post_receives_early(ms::lower_communication(ms::make_schedule("1f1b", 2, 2)));
  RunMeasurements meas = measured(plan, 0.25, 0.5);  // busy 1.5 s on each rank
  meas.ranks[0].observer_io = 0.75;                  // rank 0 spent 0.75 s writing the dump
  const RunReport rep = summarize(context(2, 2), plan, meas);
  const double makespan = 3.0;  // the last step's time
  ASSERT_EQ(rep.ranks.size(), 2u);
  EXPECT_DOUBLE_EQ(rep.ranks[0].busy, 1.5);
  EXPECT_DOUBLE_EQ(rep.ranks[0].dump_io, 0.75);
  EXPECT_DOUBLE_EQ(rep.ranks[0].idle, makespan - 1.5 - 0.75);
  EXPECT_DOUBLE_EQ(rep.ranks[1].idle, makespan - 1.5);
  // The bubble is exactly the ranks' idle over p x makespan.
  EXPECT_DOUBLE_EQ(rep.bubble_measured, (rep.ranks[0].idle + rep.ranks[1].idle) / (2 * makespan));
  EXPECT_DOUBLE_EQ(rep.makespan, makespan);
  EXPECT_EQ(rep.ranks[0].stages, std::vector<int>{0});
  EXPECT_EQ(rep.ranks[1].stages, std::vector<int>{1});
}

TEST(Summary, ThroughputSkipsTheWarmUpStepAndBubbleUsesThePipelineMakespan) {
  const ms::Schedule plan = ms::lower_communication(ms::make_schedule("1f1b", 2, 2));
  RunMeasurements meas = measured(plan, 0.25, 0.5);
  meas.makespans = {8.0, 0.5, 2.0};  // the steps' all-reduce and optimizer come after the pipeline
  const RunReport rep = summarize(context(2, 2), plan, meas);
  EXPECT_DOUBLE_EQ(rep.step_seconds_mean, 2.0);  // (1 + 3) / 2, not counting the 9 s first step
  EXPECT_DOUBLE_EQ(rep.tokens_per_second, 4.0 * 8 / 2.0);
  EXPECT_DOUBLE_EQ(rep.makespan, 2.0);
  EXPECT_DOUBLE_EQ(rep.bubble_measured, 1.0 - (1.5 + 1.5) / (2 * 2.0));
  EXPECT_EQ(rep.losses, (std::vector<double>{3.0, 2.5, 2.0}));
}

TEST(Summary, SimulatorFedWithMeasuredCostsMatchesTheClosedForm) {
  // 1F1B with equal stages and B = 2F: bubble (p-1)/(m+p-1), whatever the absolute costs.
  for (int p : {2, 3, 4})
    for (int m : {1, 4, 8}) {
      const ms::Schedule plan = ms::post_receives_early(ms::lower_communication(ms::make_schedule("1f1b", p, m)));
      const RunReport rep = summarize(context(p, m), plan, measured(plan, 0.003, 0.006));
      const double closed = (p - 1.0) / (m + p - 1.0);
      EXPECT_NEAR(rep.bubble_simulated, closed, 1e-12) << "p=" << p << " m=" << m;
      ASSERT_TRUE(rep.bubble_analytic.has_value());
      EXPECT_NEAR(*rep.bubble_analytic, closed, 1e-12);
      EXPECT_NEAR(rep.imbalance, 1.0, 1e-12);
      ASSERT_EQ(rep.stage_compute.size(), static_cast<std::size_t>(p));
      EXPECT_NEAR(rep.stage_compute[0], m * 0.009, 1e-12);
    }
}

// profile.action_fence = false: the actions' spans are enqueue times, so every figure built from
// them is NaN (null in the JSON), the budget is empty, and what the step clock measures stays.
TEST(Summary, WithoutPerActionTimesNothingBuiltFromActionSpansIsReported) {
  const ms::Schedule plan = ms::post_receives_early(ms::lower_communication(ms::make_schedule("1f1b", 2, 4)));
  RunContext ctx = context(2, 4);
  ctx.action_times = false;
  RunMeasurements meas = measured(plan, 0.25, 0.5);
  meas.ranks[1].comm_wait = 0.125;
  const RunReport rep = summarize(ctx, plan, meas);
  EXPECT_FALSE(rep.action_times);
  for (double x : {rep.bubble_measured, rep.bubble_simulated, rep.imbalance, rep.action_cv})
    EXPECT_TRUE(std::isnan(x)) << x;
  for (const RankReport& rr : rep.ranks)
    for (double x : {rr.time_F, rr.time_B, rr.busy, rr.idle}) EXPECT_TRUE(std::isnan(x)) << x;
  EXPECT_TRUE(rep.budget.empty());
  EXPECT_TRUE(rep.stage_compute.empty());
  EXPECT_DOUBLE_EQ(rep.ranks[1].comm_wait, 0.125);
  EXPECT_DOUBLE_EQ(rep.step_seconds_mean, 2.0);
  EXPECT_DOUBLE_EQ(rep.makespan, 3.0);
  // The closed form needs no measurement: 1F1B with unit costs, (p-1)/(m+p-1).
  ASSERT_TRUE(rep.bubble_analytic.has_value());
  EXPECT_NEAR(*rep.bubble_analytic, 1.0 / 5.0, 1e-12);
  // The same measurements with the fence: numbers.
  ctx.action_times = true;
  const RunReport fenced = summarize(ctx, plan, meas);
  EXPECT_TRUE(std::isfinite(fenced.bubble_measured));
  EXPECT_FALSE(fenced.budget.empty());
}

// A deterministic step's last B per stage adds the held-back dW samples (flagged adds_held): the
// spread leaves it out (every other action is as long as its siblings: 0) and the simulated bubble
// is the simulator's with that extra as W_tail. Unflagged, the same times count as spread.
TEST(Summary, HeldSampleAddsAreATailNotSpread) {
  const int p = 2, m = 4;
  const ms::Schedule plan = ms::post_receives_early(ms::lower_communication(ms::make_schedule("1f1b", p, m)));
  RunMeasurements meas = measured(plan, 0.003, 0.006);
  for (auto& st : meas.ranks) {
    ActionTiming* last = nullptr;
    for (auto& a : st.actions)
      if (a.op == ms::Op::B) last = &a;
    ASSERT_NE(last, nullptr);
    last->end += 0.010;
    last->adds_held = true;
  }
  const RunReport rep = summarize(context(p, m), plan, meas);
  EXPECT_NEAR(rep.action_cv, 0.0, 1e-12);
  ms::CostModel c = ms::CostModel::uniform(p, 3, 6, 3, 3, 0);
  c.W_tail = {10.0};
  EXPECT_NEAR(rep.bubble_simulated, ms::simulate(ms::make_schedule("1f1b", p, m), c).bubble_fraction, 1e-12);
  EXPECT_GT(rep.bubble_simulated, 0.0);
  for (auto& st : meas.ranks)
    for (auto& a : st.actions) a.adds_held = false;
  EXPECT_GT(summarize(context(p, m), plan, meas).action_cv, 0.3);
}

TEST(Summary, MeasuredTimelineHoldsEveryActionInMilliseconds) {
  const ms::Schedule plan = ms::lower_communication(ms::make_schedule("gpipe", 2, 3));
  const RunMeasurements meas = measured(plan, 0.001, 0.002);
  RunContext ctx = context(2, 3);
  ctx.schedule = "gpipe";
  const ms::Timeline tl = measured_timeline(ctx, plan, meas);
  EXPECT_EQ(tl.p, 2);
  ASSERT_EQ(tl.events.size(), 12u);  // 2 ranks x 3 micro-batches x (F, B)
  EXPECT_EQ(tl.events[0].rank, 0);
  EXPECT_DOUBLE_EQ(tl.events[0].end - tl.events[0].start, 1.0);
  EXPECT_NE(tl.title.find("gpipe p=2 v=1 m=3"), std::string::npos) << tl.title;

  // Data parallelism: each rank's exposed all-reduce is its own labelled span after its actions.
  RunMeasurements dp = meas;
  dp.ranks[1].allreduce = 0.004, dp.ranks[1].allreduce_start = 0.010;
  const ms::Timeline tl2 = measured_timeline(ctx, plan, dp);
  ASSERT_EQ(tl2.events.size(), 13u);
  EXPECT_EQ(tl2.events.back().label, "all-reduce");
  EXPECT_EQ(tl2.events.back().rank, 1);
  EXPECT_DOUBLE_EQ(tl2.events.back().start, 10.0);
  EXPECT_DOUBLE_EQ(tl2.events.back().end, 14.0);
  std::ostringstream svg, trace;
  ms::write_svg(tl2, svg);
  ms::write_chrome_trace(tl2, trace);
  EXPECT_NE(svg.str().find("rank 1 all-reduce [10.000, 14.000]"), std::string::npos);
  EXPECT_NE(trace.str().find("{\"name\": \"all-reduce\", \"cat\": \"communication\""), std::string::npos)
      << trace.str();
}

TEST(Summary, RefusesIncompleteMeasurements) {
  const ms::Schedule plan = ms::lower_communication(ms::make_schedule("1f1b", 2, 2));
  RunMeasurements meas = measured(plan, 1, 2);
  meas.ranks.pop_back();
  EXPECT_THROW(summarize(context(2, 2), plan, meas), std::logic_error);
}

TEST(Summary, TimeBudgetCoversPTimesTheMakespanWithTheAllReduceAndOptimizerBeside) {
  // 1F1B p = 2, m = 2, F = 0.25 s, B = 0.5 s on both stages: the simulations (every stage equal, no
  // receive waited so no link) give makespan 3 x 0.75 = 2.25 s and 0.75 s idle a rank, all ideal.
  // Measured makespan 3 s (the last step): 0.75 s more idle a rank is overhead, dump time included.
  const ms::Schedule plan = ms::post_receives_early(ms::lower_communication(ms::make_schedule("1f1b", 2, 2)));
  RunMeasurements meas = measured(plan, 0.25, 0.5);
  meas.ranks[0].observer_io = 0.5;
  meas.ranks[0].allreduce = 0.125, meas.ranks[1].optimizer = 0.0625;
  const TimeBudget b = summarize(context(2, 2), plan, meas).budget;
  const std::int64_t s = 1000000000;
  EXPECT_EQ(b.makespan, 3 * s);
  EXPECT_EQ(b.sim_makespan[0], 9 * s / 4);
  EXPECT_EQ(b.link_samples, 0);
  ASSERT_EQ(b.ranks.size(), 2u);
  for (const auto& r : b.ranks) {
    EXPECT_EQ(r.compute, 3 * s / 2);
    EXPECT_EQ(r.ideal_bubble, 3 * s / 4);
    EXPECT_EQ(r.imbalance_wait + r.exposed_comm, 0);
    EXPECT_EQ(r.overhead, 3 * s / 4);
  }
  EXPECT_EQ(b.total.total(), 2 * b.makespan);
  EXPECT_EQ(b.allreduce, (std::vector<double>{0.125, 0}));
  EXPECT_EQ(b.optimizer, (std::vector<double>{0, 0.0625}));
}

}  // namespace
