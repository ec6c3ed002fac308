// Generators: every variant over a sweep of p, m, v is valid exactly where its stated
// constraints allow, rejects the rest by name, and has the warm-up its paper prescribes.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "schedules/schedules.hpp"

namespace ms = minipipe::sched;

namespace {

// The v each variant's documented constraints (`minipipe schedule --list`) start with: "v = 1",
// "v = 2", "v >= 2 chunks", read from the text, not from the table's v rule.
bool documented_v(const std::string& n, int v) {
  const std::string text = ms::constraints(n);
  if (text.rfind("v = ", 0) == 0) return v == std::stoi(text.substr(4));
  if (text.rfind("v >= ", 0) == 0) return v >= std::stoi(text.substr(5));
  ADD_FAILURE() << n << "'s constraints do not start with its v: " << text;
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

TEST(Generators, NamesAreTheTablesInItsOrder) {
  std::vector<std::string> rows;
  for (const auto& spec : ms::variant_table()) rows.emplace_back(spec.name);
  EXPECT_EQ(ms::schedule_names(), rows);
  for (const auto& n : rows) EXPECT_FALSE(ms::constraints(n).empty()) << n;
}

TEST(Generators, ValidExactlyWhereTheConstraintsAllow) {
  int accepted = 0, rejected = 0;
  for (const auto& n : ms::schedule_names())
    for (int p = 1; p <= 6; ++p)
      for (int m = 1; m <= 16; ++m)
        for (int v = 1; v <= 3; ++v) {
          const ms::VariantSpec& spec = ms::variant_spec(n);
          const bool ok = documented_v(n, v);
          try {
            const ms::Schedule s = ms::make_schedule(n, p, m, v);
            EXPECT_TRUE(ok) << n << " p=" << p << " m=" << m << " v=" << v << " should be rejected";
            ASSERT_NO_THROW(ms::validate(s)) << n << " p=" << p << " m=" << m << " v=" << v;
            EXPECT_EQ(s.name, n);
            EXPECT_EQ(s.p, p);
            EXPECT_EQ(s.m, m);
            EXPECT_EQ(s.v, v);
            const bool v_shaped = spec.placement == ms::Placement::v;
            EXPECT_EQ(s.stage_to_rank, v_shaped ? ms::v_placement(p, v) : ms::looped_placement(p, v)) << n;
            EXPECT_EQ(s.chains, spec.copies) << n;
            // DualPipeV splits only when a rank reaches its tail phase and pairs only in its steady
            // state: both happen from m = 2p on; below, the cut-short order may have neither.
            const bool full_dpv = n == "dualpipev" && m >= 2 * p;
            // DualPipe: DeepSeek's phases for p even and m >= 2p even (pairs, I/W in the tail), the
            // two copies' 1F1B orders merged by time (full backward, no pairs) for p odd.
            if (n == "dualpipe" && p % 2 == 1) {
              EXPECT_FALSE(s.uses_split_backward()) << n << " p=" << p << " m=" << m;
              EXPECT_FALSE(s.uses_overlap()) << n << " p=" << p << " m=" << m;
            }
            if (n == "dualpipe" && p % 2 == 0 && m >= 2 * p && m % 2 == 0) {
              EXPECT_TRUE(s.uses_split_backward()) << n << " p=" << p << " m=" << m;
              EXPECT_TRUE(s.uses_overlap()) << n << " p=" << p << " m=" << m;
            }
            if (full_dpv) {
              EXPECT_TRUE(s.uses_split_backward()) << n << " p=" << p << " m=" << m;
              EXPECT_TRUE(s.uses_overlap()) << n << " p=" << p << " m=" << m;
            }
            // The others split always or never, as their row says, and pair nothing.
            if (spec.backward != ms::Backward::mixed) {
              EXPECT_EQ(s.uses_split_backward(), spec.backward == ms::Backward::split) << n;
              EXPECT_FALSE(s.uses_overlap()) << n;
            }
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
    ms::make_schedule("zb-h2", 4, 5, 2);
    FAIL() << "zb-h2 with v = 2 must be rejected";
  } catch (const ms::ScheduleError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("'zb-h2'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("v = 2 is not allowed; need v = 1"), std::string::npos) << msg;
  }
  try {
    ms::make_schedule("zb-v", 4, 8, 3);
    FAIL();
  } catch (const ms::ScheduleError& e) {
    EXPECT_NE(std::string(e.what()).find("v = 3 is not allowed; need v = 2"), std::string::npos) << e.what();
  }
  try {
    ms::ScheduleOptions opt;
    opt.group = -1;
    ms::make_schedule("interleaved-1f1b", 4, 6, 2, opt);
    FAIL();
  } catch (const ms::ScheduleError& e) {
    EXPECT_NE(std::string(e.what()).find("group = -1 is not allowed; need group >= 1"), std::string::npos) << e.what();
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
      {
        const auto h1 = ms::make_schedule("zb-h1", p, m);
        // Below m = p the warm-up stops at m forwards (then the first I follows).
        for (int r = 0; r < p; ++r) EXPECT_EQ(leading_forwards(h1.ranks[r]), std::min(p - r, m));
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

// Megatron's depth-first interleaving as index arithmetic (the generator before group sizes
// existed): forward k runs chunk (k % pv) / p on micro-batch (k / pv) p + k % p, backward the same
// with the chunk reversed, after 2(p-1-r) + (v-1)p warm-up forwards. group = p (the default) must
// reproduce it action for action wherever it was defined (m a multiple of p).
TEST(Generators, InterleavedGroupPIsMegatronsDepthFirstOrder) {
  int compared = 0;
  for (int p = 1; p <= 6; ++p)
    for (int v = 2; v <= 4; ++v)
      for (int m = p; m <= 4 * p; m += p) {
        const int total = m * v, pv = p * v;
        for (const int group : {0, p}) {
          ms::ScheduleOptions opt;
          opt.group = group;
          const auto s = ms::make_schedule("interleaved-1f1b", p, m, v, opt);
          for (int r = 0; r < p; ++r) {
            std::vector<ms::Action> want;
            auto f = [&](int k) { return ms::Action::make(ms::Op::F, ((k % pv) / p) * p + r, (k / pv) * p + k % p); };
            auto b = [&](int k) {
              return ms::Action::make(ms::Op::B, (v - 1 - (k % pv) / p) * p + r, (k / pv) * p + k % p);
            };
            const int warmup = std::min(2 * (p - 1 - r) + (v - 1) * p, total);
            for (int k = 0; k < warmup; ++k) want.push_back(f(k));
            for (int k = 0; k < total - warmup; ++k) {
              want.push_back(f(warmup + k));
              want.push_back(b(k));
            }
            for (int k = total - warmup; k < total; ++k) want.push_back(b(k));
            ASSERT_EQ(s.ranks[r], want) << "p=" << p << " v=" << v << " m=" << m << " rank " << r;
            ++compared;
          }
        }
      }
  EXPECT_EQ(compared, 2 * 3 * (1 + 2 + 3 + 4 + 5 + 6) * 4);
}

// group >= m: every micro-batch goes through chunk 0 before any enters chunk 1 (and backwards
// through the last chunk first): per rank the forward order and the backward order are those of
// Looped BFS, while the 1F1B interleaving of the two keeps fewer micro-batches in flight.
TEST(Generators, InterleavedGroupAtLeastMIsTheBreadthFirstOrder) {
  auto only = [](const std::vector<ms::Action>& row, ms::Op op) {
    std::vector<ms::Action> out;
    for (const auto& a : row)
      if (a.op == op) out.push_back(a);
    return out;
  };
  for (int p = 1; p <= 5; ++p)
    for (int v = 2; v <= 3; ++v)
      for (int m = 1; m <= 3 * p + 1; ++m)
        for (const int group : {m, m + 3}) {
          ms::ScheduleOptions opt;
          opt.group = group;
          const auto s = ms::make_schedule("interleaved-1f1b", p, m, v, opt);
          const auto bfs = ms::make_schedule("looped-bfs", p, m, v);
          EXPECT_EQ(s.group, group);
          for (int r = 0; r < p; ++r) {
            EXPECT_EQ(only(s.ranks[r], ms::Op::F), only(bfs.ranks[r], ms::Op::F)) << "p=" << p << " m=" << m;
            EXPECT_EQ(only(s.ranks[r], ms::Op::B), only(bfs.ranks[r], ms::Op::B)) << "p=" << p << " m=" << m;
          }
          const auto cost = ms::CostModel::uniform(s.num_stages(), 1, 2, 1, 1, 0);
          const auto rs = ms::simulate(s, cost), rb = ms::simulate(bfs, cost);
          // Same bubble as breadth-first's closed form where that holds (m >= p) ...
          if (m >= p) {
            EXPECT_DOUBLE_EQ(rs.bubble_fraction, double(p - 1) / (v * m + p - 1)) << "p=" << p << " m=" << m;
          }
          // ... and never more held than Looped BFS's v*m.
          EXPECT_LE(rs.peak_held[0], rb.peak_held[0]);
        }
}

// Between the ends the group trades memory for bubble: rank 0's peak in flight grows with the
// group (Megatron's 2(p-1) + (v-1)g + 1 while the warm-up fits).
TEST(Generators, InterleavedGroupSizeSetsTheWarmUp) {
  const int p = 4, v = 2, m = 16;
  int last_peak = 0;
  for (int g = p; g <= m; g += p) {
    ms::ScheduleOptions opt;
    opt.group = g;
    const auto s = ms::make_schedule("interleaved-1f1b", p, m, v, opt);
    const auto r = ms::simulate(s, ms::CostModel::uniform(s.num_stages(), 1, 2, 1, 1, 0));
    EXPECT_EQ(r.peak_inflight[0], std::min(2 * (p - 1) + (v - 1) * g + 1, v * m)) << "group " << g;
    EXPECT_GT(r.peak_inflight[0], last_peak);
    last_peak = r.peak_inflight[0];
  }
}
