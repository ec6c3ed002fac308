// The figure of merit against hand arithmetic and the FLOP table of docs/benchmarking.md, and
// the built-in verification verdict.
#include <gtest/gtest.h>

#include "miniapp/report/verdict.hpp"

namespace {

using namespace minipipe;

ModelShape shape(int V, int T, int C, int L) {
  ModelShape s;
  s.vocab = V, s.seq_len = T, s.channels = C, s.n_layer = L, s.n_head = 1, s.block_size = T;
  return s;
}

TEST(Verdict, FlopsPerTokenMatchesTheDerivation) {
  // tiny: 6 (12*4*64^2 + 64*64) + 6*4*64*33, counted by hand.
  EXPECT_EQ(flops_per_token(shape(64, 32, 64, 4)), 6.0 * (196608 + 4096) + 50688);
  // GPT-2-124M shape (untied head): 797.87 MFLOP per token, the docs' table.
  EXPECT_NEAR(flops_per_token(shape(50257, 1024, 768, 12)) / 1e6, 797.870592, 1e-9);
}

TEST(Verdict, FigureOfMeritCountsTimedStepsOfEveryRun) {
  RunReport a, b;
  a.batch = b.batch = 4, a.seq_len = b.seq_len = 8;
  a.step_seconds = {9.0, 1.0, 3.0};  // first step is warm-up
  b.step_seconds = {2.0};            // a one-step run is timed on that step
  const ModelShape s = shape(64, 8, 16, 2);
  const FigureOfMerit f = figure_of_merit({a, b}, s);
  EXPECT_DOUBLE_EQ(f.tokens_per_second, (3 * 32.0) / (1.0 + 3.0 + 2.0));
  EXPECT_DOUBLE_EQ(f.model_tflops, f.tokens_per_second * flops_per_token(s) / 1e12);
  EXPECT_EQ(fom_line(f).rfind("FOM: 16 tokens/s (model ", 0), 0u) << fom_line(f);
}

TEST(Verdict, BuiltInChecksWantTheLossToFall) {
  RunReport r;
  r.schedule = "1f1b", r.m = 2;
  r.losses = {3.0, 2.0};
  EXPECT_TRUE(verify_runs({r}, "", Mode::deterministic).pass);
  EXPECT_EQ(verdict_line(verify_runs({r}, "", Mode::deterministic)), "verification: PASS");
  r.losses = {3.0, 3.0};
  const Verdict v = verify_runs({r}, "", Mode::deterministic);
  EXPECT_FALSE(v.pass);
  EXPECT_EQ(verdict_line(v), "verification: FAIL (run 1f1b m=2: the loss did not fall (first 3, last 3))");
  r.losses = {3.0};  // one step: nothing to compare
  EXPECT_TRUE(verify_runs({r}, "", Mode::deterministic).pass);
  // A deterministic sweep whose dumps differ from its first run's fails (fast mode may differ).
  r.losses = {3.0, 2.0};
  r.dump_vs_reference = "DIFFERS";
  EXPECT_EQ(verdict_line(verify_runs({r}, "", Mode::deterministic)),
            "verification: FAIL (run 1f1b m=2: its dump differs from the dump of the launch's first run)");
  EXPECT_TRUE(verify_runs({r}, "", Mode::fast).pass);
  r.dump_vs_reference = "identical";
  // With a reference, a run without a dump cannot be verified.
  EXPECT_FALSE(verify_runs({r}, "/nonexistent/ref.h5", Mode::deterministic).pass);
}

// A restarted segment is judged from the training's first loss (its checkpoint's),
// so a chain of restarts gets the uninterrupted run's verdict; the segment alone may rise.
TEST(Verdict, RestartedRunIsJudgedFromTheTrainingsFirstLoss) {
  RunReport r;
  r.schedule = "sequential", r.m = 1;
  r.losses = {3.909127, 3.937145};  // steps 3 and 4 of the tiny deck: up within the segment
  EXPECT_FALSE(verify_runs({r}, "", Mode::deterministic).pass);
  EXPECT_TRUE(verify_runs({r}, "", Mode::deterministic, 4.175295).pass);
  r.losses = {3.937145};  // a one-step segment is judged too
  const Verdict v = verify_runs({r}, "", Mode::deterministic, 3.9);
  EXPECT_EQ(verdict_line(v),
            "verification: FAIL (run sequential m=1: the loss did not fall (first 3.9 at step 0, before the restart, "
            "last 3.93715))");
}

}  // namespace
