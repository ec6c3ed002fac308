// Generators: every variant over a sweep of p, m, v is valid exactly where its stated
// constraints allow, rejects the rest by name, and has the warm-up its paper prescribes.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "schedules/schedules.hpp"

namespace ms = minipipe::sched;

namespace {

// The constraints each variant documents, written out independently of the generators.
bool allowed(const std::string& n, int p, int m, int v) {
  if (n == "sequential" || n == "gpipe" || n == "1f1b") return v == 1;
  if (n == "interleaved-1f1b") return v >= 2 && m % p == 0;
  if (n == "looped-bfs") return v >= 1;
  if (n == "zb-h1") return v == 1 && m >= p;
  if (n == "zb-h2") return v == 1 && m >= 2 * p - 1;
  if (n == "zb-v") return v == 2 && m >= 2 * p - 1;
  if (n == "dualpipev") return v == 2 && m >= 2 * p;
  ADD_FAILURE() << "unknown variant " << n;
  return false;
}

// Forwards a rank runs before its first backward (B or I).
int leading_forwards(const std::vector<ms::Action>& row) {
  int n = 0;
  for (const auto& a : row) {
    if (a.op != ms::Op::F) break;
    ++n;
  }
  return n;
}

int count_op(const ms::Schedule& s, ms::Op op) {
  int n = 0;
  for (const auto& row : s.ranks)
    for (const auto& a : row) n += a.op == op;
  return n;
}

}  // namespace

TEST(Generators, NamesAreTheDocumentedOnes) {
  const std::vector<std::string> expected = {"sequential", "gpipe", "1f1b", "interleaved-1f1b", "looped-bfs",
                                             "zb-h1",      "zb-h2", "zb-v", "dualpipev"};
  EXPECT_EQ(ms::schedule_names(), expected);
  for (const auto& n : expected) EXPECT_FALSE(ms::constraints(n).empty()) << n;
}

TEST(Generators, ValidExactlyWhereTheConstraintsAllow) {
  int accepted = 0, rejected = 0;
  for (const auto& n : ms::schedule_names())
    for (int p = 1; p <= 6; ++p)
      for (int m = 1; m <= 16; ++m)
        for (int v = 1; v <= 3; ++v) {
          const bool ok = allowed(n, p, m, v);
          try {
            const ms::Schedule s = ms::make_schedule(n, p, m, v);
            EXPECT_TRUE(ok) << n << " p=" << p << " m=" << m << " v=" << v << " should be rejected";
            ASSERT_NO_THROW(ms::validate(s)) << n << " p=" << p << " m=" << m << " v=" << v;
            EXPECT_EQ(s.name, n);
            EXPECT_EQ(s.p, p);
            EXPECT_EQ(s.m, m);
            EXPECT_EQ(s.v, v);
            const bool v_shaped = n == "zb-v" || n == "dualpipev";
            EXPECT_EQ(s.stage_to_rank, v_shaped ? ms::v_placement(p, v) : ms::looped_placement(p, v)) << n;
            const bool split = n.rfind("zb-", 0) == 0 || n == "dualpipev";
            // DualPipeV splits only when a rank reaches its tail phase, which always happens.
            EXPECT_EQ(s.uses_split_backward(), split) << n;
            EXPECT_EQ(s.uses_overlap(), n == "dualpipev") << n;
            EXPECT_FALSE(s.is_lowered());
            ++accepted;
          } catch (const ms::ScheduleError& e) {
            EXPECT_FALSE(ok) << n << " p=" << p << " m=" << m << " v=" << v << ": " << e.what();
            ++rejected;
          }
        }
  // Both sides of every constraint were exercised.
  EXPECT_GT(accepted, 500);
  EXPECT_GT(rejected, 500);
}

TEST(Generators, RejectionsNameKeyValueAndWhatIsAllowed) {
  try {
    ms::make_schedule("zb-h2", 4, 5);
    FAIL() << "zb-h2 with m < 2p-1 must be rejected";
  } catch (const ms::ScheduleError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("'zb-h2'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("m = 5 is not allowed"), std::string::npos) << msg;
    EXPECT_NE(msg.find("m >= 2p-1 = 7"), std::string::npos) << msg;
  }
  try {
    ms::make_schedule("zb-v", 4, 8, 3);
    FAIL();
  } catch (const ms::ScheduleError& e) {
    EXPECT_NE(std::string(e.what()).find("v = 3 is not allowed; need v = 2"), std::string::npos) << e.what();
  }
  try {
    ms::make_schedule("interleaved-1f1b", 4, 6, 2);
    FAIL();
  } catch (const ms::ScheduleError& e) {
    EXPECT_NE(std::string(e.what()).find("need m a multiple of p = 4"), std::string::npos) << e.what();
  }
  try {
    ms::make_schedule("pipedream", 4, 8);
    FAIL();
  } catch (const ms::ScheduleError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("schedule = 'pipedream' is not allowed"), std::string::npos) << msg;
    for (const auto& n : ms::schedule_names()) EXPECT_NE(msg.find(n), std::string::npos) << n;
  }
  EXPECT_THROW(ms::make_schedule("1f1b", 0, 8), ms::ScheduleError);
  EXPECT_THROW(ms::make_schedule("1f1b", 4, 0), ms::ScheduleError);
  EXPECT_THROW(ms::make_schedule("1f1b", 4, 8, 2), ms::ScheduleError);
}

TEST(Generators, DefaultChunksPerRank) {
  EXPECT_EQ(ms::make_schedule("interleaved-1f1b", 2, 4).v, 2);
  EXPECT_EQ(ms::make_schedule("looped-bfs", 2, 4).v, 2);
  EXPECT_EQ(ms::make_schedule("zb-v", 2, 4).v, 2);
  EXPECT_EQ(ms::make_schedule("dualpipev", 2, 4).v, 2);
  EXPECT_EQ(ms::make_schedule("1f1b", 2, 4).v, 1);
}

TEST(Generators, WarmUpsFollowThePapers) {
  for (int p = 1; p <= 8; ++p)
    for (int m : {1, 3, 8, 17}) {
      const auto f1 = ms::make_schedule("1f1b", p, m);
      const auto gp = ms::make_schedule("gpipe", p, m);
      for (int r = 0; r < p; ++r) {
        // 1F1B: p-1-r warm-up forwards, then the steady state starts with one more forward.
        EXPECT_EQ(leading_forwards(f1.ranks[r]), std::min(p - r, m)) << "p=" << p << " m=" << m << " r=" << r;
        EXPECT_EQ(leading_forwards(gp.ranks[r]), m);
      }
      if (m >= p) {
        const auto h1 = ms::make_schedule("zb-h1", p, m);
        for (int r = 0; r < p; ++r) EXPECT_EQ(leading_forwards(h1.ranks[r]), p - r);
      }
      if (m >= 2 * p - 1) {
        const auto h2 = ms::make_schedule("zb-h2", p, m);
        for (int r = 0; r < p; ++r) EXPECT_EQ(leading_forwards(h2.ranks[r]), 2 * (p - r) - 1);
        const auto zv = ms::make_schedule("zb-v", p, m);
        for (int r = 0; r < p; ++r) {
          // 2(p-r)-1 chunk-0 forwards, then chunk 1 and chunk 0 alternate r times, then chunk 1.
          EXPECT_EQ(leading_forwards(zv.ranks[r]), 2 * (p - r) - 1 + 2 * r + 1);
          EXPECT_EQ(zv.ranks[r].front().stage, r);
        }
      }
    }
  // Megatron's interleaved warm-up: 2(p-1-r) + (v-1)p forwards, plus the first steady one.
  for (int p = 1; p <= 6; ++p)
    for (int v = 2; v <= 4; ++v)
      for (int m = p; m <= 4 * p; m += p) {
        const auto s = ms::make_schedule("interleaved-1f1b", p, m, v);
        for (int r = 0; r < p; ++r) {
          const int warmup = std::min(2 * (p - 1 - r) + (v - 1) * p, m * v);
          EXPECT_EQ(leading_forwards(s.ranks[r]), std::min(warmup + 1, m * v));
          // Forwards walk groups of p micro-batches through chunk 0, then chunk 1, ...
          EXPECT_EQ(s.ranks[r][0].stage, r);
          if (warmup > p) {
            EXPECT_EQ(s.ranks[r][p].stage, p + r);
          }
        }
      }
}

TEST(Generators, DualPipeVPhases) {
  for (int p = 1; p <= 6; ++p)
    for (int m = 2 * p; m <= 2 * p + 5; ++m) {
      const auto s = ms::make_schedule("dualpipev", p, m);
      for (int r = 0; r < p; ++r) {
        std::set<int> stages;
        int pairs = 0;
        for (const auto& a : s.ranks[r]) {
          if (a.op == ms::Op::OVERLAP_F_B) {
            ++pairs;
            stages.insert(a.sub[0].stage);
            stages.insert(a.sub[1].stage);
          } else {
            stages.insert(a.stage);
          }
        }
        EXPECT_EQ(stages, (std::set<int>{r, 2 * p - 1 - r}));
        // Phase 4 runs two pairs per step (the last rank's very first one unpaired), phase 5 one.
        const int expected = 2 * (m - 2 * p + r + 1) - (r == p - 1 ? 1 : 0) + (p - r - 1);
        EXPECT_EQ(pairs, expected) << "p=" << p << " m=" << m << " r=" << r;
      }
      // Exactly one of B or I/W per (stage, micro-batch): counted over the whole schedule.
      int fwd = count_op(s, ms::Op::F), bwd = count_op(s, ms::Op::B) + count_op(s, ms::Op::I);
      for (const auto& row : s.ranks)
        for (const auto& a : row)
          if (a.op == ms::Op::OVERLAP_F_B) ++fwd, ++bwd;
      EXPECT_EQ(fwd, 2 * p * m);
      EXPECT_EQ(bwd, 2 * p * m);
      EXPECT_EQ(count_op(s, ms::Op::W), count_op(s, ms::Op::I));
    }
}
