// Validator and lowering: each kind of broken schedule is rejected with the grid and the
// offending cell marked; lowering inserts exactly the transfers the placement needs.
#include <gtest/gtest.h>

#include <algorithm>

#include "schedules/schedules.hpp"

namespace ms = minipipe::sched;

namespace {

ms::Schedule from_rows(const std::vector<std::vector<std::string>>& rows, int v, int m,
                       ms::Placement pl = ms::Placement::loop) {
  ms::Schedule s;
  s.name = "test";
  s.p = static_cast<int>(rows.size());
  s.v = v;
  s.m = m;
  s.stage_to_rank = pl == ms::Placement::v ? ms::v_placement(s.p, v) : ms::looped_placement(s.p, v);
  for (const auto& row : rows) {
    s.ranks.emplace_back();
    for (const auto& cell : row) s.ranks.back().push_back(ms::parse_action(cell));
  }
  return s;
}

std::vector<std::vector<std::string>> cells(const ms::Schedule& s) {
  std::vector<std::vector<std::string>> out;
  for (const auto& row : s.ranks) {
    out.emplace_back();
    for (const auto& a : row) out.back().push_back(ms::to_string(a));
  }
  return out;
}

// The validator's message, or "" when it accepts the schedule.
std::string error_of(const ms::Schedule& s) {
  try {
    ms::validate(s);
  } catch (const ms::ScheduleError& e) {
    return e.what();
  }
  return "";
}

const std::vector<std::vector<std::string>> k1F1B = {{"0F0", "0F1", "0B0", "0B1"}, {"1F0", "1B0", "1F1", "1B1"}};

}  // namespace

TEST(Validator, AcceptsAHandWritten1F1B) {
  EXPECT_EQ(error_of(from_rows(k1F1B, 1, 2)), "");
  EXPECT_EQ(cells(ms::make_schedule("1f1b", 2, 2)), k1F1B);
}

TEST(Validator, DuplicateShowsTheExactGrid) {
  auto rows = k1F1B;
  rows[0].push_back("0F0");
  EXPECT_EQ(error_of(from_rows(rows, 1, 2)),
            "invalid schedule 'test' (p=2, v=1, m=2): rank 0, step 4: duplicate 0F0 (first at rank 0, step 0)\n"
            "  step |   0   1   2   3     4\n"
            "rank 0 | 0F0 0F1 0B0 0B1 >0F0<   <-- here\n"
            "rank 1 | 1F0 1B0 1F1 1B1\n"
            "  (>cell< marks the problem)\n");
}

TEST(Validator, MissingActionIsShownWhereItBelongs) {
  auto rows = k1F1B;
  rows[0].pop_back();  // 0B1
  const std::string msg = error_of(from_rows(rows, 1, 2));
  EXPECT_NE(msg.find("rank 0: missing 0B1 (no backward: neither 0B1 nor 0I1 is scheduled)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("rank 0 | 0F0 0F1 0B0 >0B1?<   <-- here"), std::string::npos) << msg;

  rows = k1F1B;
  rows[1].erase(rows[1].begin() + 2);  // 1F1
  EXPECT_NE(error_of(from_rows(rows, 1, 2)).find("missing 1F1"), std::string::npos);
}

TEST(Validator, OrderingErrorsOnOneRank) {
  auto rows = k1F1B;
  std::swap(rows[1][0], rows[1][1]);  // 1B0 before 1F0
  std::string msg = error_of(from_rows(rows, 1, 2));
  EXPECT_NE(msg.find("rank 1, step 0: 1B0 comes before its forward 1F0 (step 1)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("rank 1 | >1B0<"), std::string::npos) << msg;

  msg = error_of(from_rows({{"0F0", "0W0", "0I0"}}, 1, 1));
  EXPECT_NE(msg.find("step 1: 0W0 comes before its 0I0 (step 2)"), std::string::npos) << msg;

  msg = error_of(from_rows({{"0F0", "0B0", "0W0"}}, 1, 1));
  EXPECT_NE(msg.find("step 2: stage 0, micro-batch 0 mixes a full backward (B) with split backward (I/W)"),
            std::string::npos)
      << msg;

  msg = error_of(from_rows({{"0F0", "0I0"}}, 1, 1));
  EXPECT_NE(msg.find("missing 0W0"), std::string::npos) << msg;
}

TEST(Validator, CellsOutOfRangeOrOnTheWrongRank) {
  auto rows = k1F1B;
  rows[0][1] = "1F1";  // stage 1 lives on rank 1
  std::string msg = error_of(from_rows(rows, 1, 2));
  EXPECT_NE(msg.find("rank 0, step 1: stage 1 belongs to rank 1, not rank 0"), std::string::npos) << msg;

  rows = k1F1B;
  rows[0][1] = "0F5";
  msg = error_of(from_rows(rows, 1, 2));
  EXPECT_NE(msg.find("micro-batch 5 is out of range; allowed 0..1"), std::string::npos) << msg;

  rows = k1F1B;
  rows[1][0] = "4F0";
  msg = error_of(from_rows(rows, 1, 2));
  EXPECT_NE(msg.find("stage 4 is out of range; allowed 0..1"), std::string::npos) << msg;
}

TEST(Validator, CrossRankDeadlock) {
  // Rank 0 wants micro-batch 0's gradient before sending micro-batch 1 forward; rank 1
  // insists on micro-batch 1 first. Each waits for the other.
  const std::string msg = error_of(from_rows({{"0F0", "0B0", "0F1", "0B1"}, {"1F1", "1B1", "1F0", "1B0"}}, 1, 2));
  EXPECT_NE(msg.find("deadlock once communication is added"), std::string::npos) << msg;
  EXPECT_NE(msg.find("rank 0 is stuck at 0B0 waiting for 1B0 on rank 1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("rank 1 is stuck at 1F1 waiting for 0F1 on rank 0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("rank 0 | 0F0 >0B0<"), std::string::npos) << msg;
}

TEST(Validator, LocalHandOffDeadlockInVPlacement) {
  // One rank holds stages 0 and 1: stage 1's forward cannot run before stage 0's.
  const std::string msg = error_of(from_rows({{"1F0", "0F0", "1B0", "0B0"}}, 2, 1, ms::Placement::v));
  EXPECT_NE(msg.find("rank 0 is stuck at 1F0 waiting for 0F0 (later on the same rank)"), std::string::npos) << msg;
  EXPECT_EQ(error_of(from_rows({{"0F0", "1F0", "1B0", "0B0"}}, 2, 1, ms::Placement::v)), "");
}

TEST(Validator, LoweredSchedules) {
  const ms::Schedule low = ms::lower_communication(from_rows(k1F1B, 1, 2));
  const std::vector<std::vector<std::string>> expected = {
      {"0F0", "0SEND_F0", "0F1", "0SEND_F1", "0RECV_B0", "0B0", "0RECV_B1", "0B1"},
      {"1RECV_F0", "1F0", "1B0", "1SEND_B0", "1RECV_F1", "1F1", "1B1", "1SEND_B1"}};
  EXPECT_EQ(cells(low), expected);
  EXPECT_TRUE(low.is_lowered());
  EXPECT_EQ(error_of(low), "");
  EXPECT_EQ(cells(ms::lower_communication(low)), expected);  // idempotent

  auto rows = expected;
  rows[1].erase(rows[1].begin());  // 1RECV_F0
  std::string msg = error_of(from_rows(rows, 1, 2));
  EXPECT_NE(msg.find("missing 1RECV_F0"), std::string::npos) << msg;

  rows = expected;
  std::swap(rows[1][0], rows[1][1]);
  msg = error_of(from_rows(rows, 1, 2));
  EXPECT_NE(msg.find("1RECV_F0 must come before 1F0"), std::string::npos) << msg;

  rows = expected;
  rows[1].push_back("1SEND_F0");  // the last stage has nobody to send to
  msg = error_of(from_rows(rows, 1, 2));
  EXPECT_NE(msg.find("SEND_F is not needed for stage 1"), std::string::npos) << msg;

  // Receives are posted without waiting (MPI_Irecv), so a RECV listed before the peer's SEND
  // is no deadlock: only a compute action waits for its data.
  rows = {{"0F0", "0SEND_F0", "0F1", "0RECV_B1", "0SEND_F1", "0B1", "0RECV_B0", "0B0"},
          {"1RECV_F0", "1F0", "1RECV_F1", "1F1", "1B1", "1SEND_B1", "1B0", "1SEND_B0"}};
  EXPECT_EQ(error_of(from_rows(rows, 1, 2)), "");

  // Orders that pass every per-rank check but deadlock on the wire: rank 0 waits for micro-
  // batch 0's gradient before it sends micro-batch 1's activations, which rank 1 needs first.
  rows = {{"0F0", "0SEND_F0", "0RECV_B0", "0B0", "0F1", "0SEND_F1", "0RECV_B1", "0B1"},
          {"1RECV_F0", "1RECV_F1", "1F0", "1F1", "1B1", "1SEND_B1", "1B0", "1SEND_B0"}};
  msg = error_of(from_rows(rows, 1, 2));
  EXPECT_NE(msg.find("rank 0 is stuck at 0B0 waiting for 1SEND_B0 on rank 1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("rank 1 is stuck at 1F1 waiting for 0SEND_F1 on rank 0"), std::string::npos) << msg;
}

TEST(Validator, ReceivesArePostedTwoComputeActionsAhead) {
  const ms::Schedule low = ms::lower_communication(ms::make_schedule("1f1b", 2, 3));
  const ms::Schedule early = ms::post_receives_early(low);
  // Rank 1 (last stage) runs F0 B0 F1 B1 F2 B2; each RECV_F moves back past two compute actions.
  EXPECT_EQ(cells(low)[1], (std::vector<std::string>{"1RECV_F0", "1F0", "1B0", "1SEND_B0", "1RECV_F1", "1F1", "1B1",
                                                     "1SEND_B1", "1RECV_F2", "1F2", "1B2", "1SEND_B2"}));
  EXPECT_EQ(cells(early)[1], (std::vector<std::string>{"1RECV_F0", "1RECV_F1", "1F0", "1B0", "1SEND_B0", "1RECV_F2",
                                                       "1F1", "1B1", "1SEND_B1", "1F2", "1B2", "1SEND_B2"}));
  EXPECT_EQ(cells(ms::post_receives_early(low, 1))[1],
            (std::vector<std::string>{"1RECV_F0", "1F0", "1RECV_F1", "1B0", "1SEND_B0", "1F1", "1RECV_F2", "1B1",
                                      "1SEND_B1", "1F2", "1B2", "1SEND_B2"}));
  // Only RECVs move, compute and SEND order is kept, and every generator's early order is valid
  // and simulates to the same makespan (a receive posted early never delays anything).
  EXPECT_EQ(cells(ms::strip_communication(early)), cells(ms::strip_communication(low)));
  for (const auto& n : ms::schedule_names()) {
    const ms::Schedule l = ms::lower_communication(ms::make_schedule(n, 3, 6));
    const ms::Schedule e = ms::post_receives_early(l);
    EXPECT_EQ(error_of(e), "") << n;
    const auto cost = ms::CostModel::uniform(l.num_stages(), 1.0, 0, 1.0, 0.5, 0.25);
    EXPECT_EQ(ms::simulate(e, cost).makespan, ms::simulate(l, cost).makespan) << n;
  }
  EXPECT_THROW(ms::post_receives_early(low, 0), ms::ScheduleError);
}

TEST(Validator, LoweringFollowsThePlacement) {
  // V placement, p = 2: stages 1 and 2 share rank 1 and hand over locally.
  const ms::Schedule s = ms::make_schedule("zb-v", 2, 3);
  const ms::Schedule low = ms::lower_communication(s);
  auto count = [&](ms::Op op, int stage) {
    int n = 0;
    for (const auto& row : low.ranks)
      for (const auto& a : row) n += a.op == op && a.stage == stage;
    return n;
  };
  EXPECT_EQ(count(ms::Op::SEND_F, 0), 3);
  EXPECT_EQ(count(ms::Op::SEND_F, 1), 0);
  EXPECT_EQ(count(ms::Op::RECV_F, 2), 0);
  EXPECT_EQ(count(ms::Op::SEND_F, 2), 3);
  EXPECT_EQ(count(ms::Op::RECV_F, 3), 3);
  EXPECT_EQ(count(ms::Op::SEND_B, 3), 3);
  EXPECT_EQ(count(ms::Op::SEND_B, 2), 0);
  EXPECT_EQ(count(ms::Op::RECV_B, 1), 0);
  EXPECT_EQ(count(ms::Op::RECV_B, 0), 3);
  // Every transfer is one SEND and one RECV; compute actions are kept in order.
  EXPECT_EQ(low.num_actions(), s.num_actions() + 4 * 3 * 2);
  EXPECT_EQ(cells(ms::strip_communication(low)), cells(s));
}

TEST(Validator, EveryLoweredGeneratorValidatesAndSimulatesAlike) {
  for (const auto& n : ms::schedule_names()) {
    const ms::Schedule s = ms::make_schedule(n, 3, 6);
    const ms::Schedule low = ms::lower_communication(s);
    EXPECT_EQ(error_of(low), "") << n;
    EXPECT_EQ(cells(ms::lower_communication(low)), cells(low)) << n;
    // Explicit SEND/RECV and the implied transfers of a compute-only schedule are one model.
    const auto cost = ms::CostModel::uniform(s.num_stages(), 1.0, 0, 1.0, 0.5, 0.25);
    const auto a = ms::simulate(s, cost), b = ms::simulate(low, cost);
    EXPECT_EQ(a.makespan, b.makespan) << n;
    EXPECT_EQ(a.busy, b.busy) << n;
    EXPECT_EQ(a.peak_held, b.peak_held) << n;
  }
}

TEST(Validator, LargeGridsAreCutAroundTheMark) {
  ms::Schedule s = ms::make_schedule("1f1b", 40, 64);
  s.ranks[30][100] = s.ranks[30][0];  // duplicate deep inside a big grid
  const std::string msg = error_of(s);
  EXPECT_NE(msg.find("rank 30, step 100: duplicate 30F0"), std::string::npos);
  EXPECT_NE(msg.find("(ranks 0..15 not shown)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("rank 30 |     "), std::string::npos) << msg;
  EXPECT_NE(msg.find(">30F0<"), std::string::npos);
  EXPECT_LT(std::count(msg.begin(), msg.end(), '\n'), 30);
}

TEST(Validator, DualPipeCopiesHaveTheirOwnEnds) {
  // Two copies, p = 2: copy 0 = stages 0 (rank 0), 1 (rank 1); copy 1 = stages 2 (rank 1), 3
  // (rank 0). Even micro-batches run through copy 0 only, odd ones through copy 1 only.
  const ms::Schedule s = ms::make_schedule("dualpipe", 2, 4);
  ASSERT_EQ(s.chains, 2);
  const ms::Schedule low = ms::lower_communication(s);
  auto count = [&](ms::Op op, int stage) {
    int n = 0;
    for (const auto& row : low.ranks)
      for (const auto& a : row) {
        n += a.op == op && a.stage == stage;
        for (const auto& x : a.sub) n += x.op == op && x.stage == stage;
      }
    return n;
  };
  // Stage 1 ends copy 0 and stage 2 starts copy 1: though both are on rank 1, nothing passes
  // between them; each copy's own boundary (0 -> 1, 2 -> 3) carries its two micro-batches.
  for (int st = 0; st < 4; ++st) EXPECT_EQ(count(ms::Op::F, st), 2) << st;
  EXPECT_EQ(count(ms::Op::SEND_F, 0), 2);
  EXPECT_EQ(count(ms::Op::RECV_F, 1), 2);
  EXPECT_EQ(count(ms::Op::SEND_F, 1), 0);
  EXPECT_EQ(count(ms::Op::RECV_F, 2), 0);
  EXPECT_EQ(count(ms::Op::SEND_F, 2), 2);
  EXPECT_EQ(count(ms::Op::RECV_F, 3), 2);
  EXPECT_EQ(count(ms::Op::SEND_B, 3), 2);
  EXPECT_EQ(count(ms::Op::SEND_B, 2), 0);
  EXPECT_EQ(count(ms::Op::SEND_B, 1), 2);
  EXPECT_EQ(count(ms::Op::SEND_B, 0), 0);
  EXPECT_EQ(error_of(low), "");

  // A micro-batch on the other copy's stage is refused with the cell marked.
  ms::Schedule bad = s;
  ASSERT_EQ(bad.ranks[0][0].op, ms::Op::F);
  ASSERT_EQ(bad.ranks[0][0].stage, 0);
  bad.ranks[0][0].microbatch = 1;
  const std::string msg = error_of(bad);
  EXPECT_NE(msg.find("rank 0, step 0: micro-batch 1 runs through model copy 1 (micro-batch % 2), but stage 0 is "
                     "part of copy 0"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find(">0F1<"), std::string::npos) << msg;
  // With one chain the same actions are incomplete: every micro-batch must visit every stage.
  ms::Schedule one = s;
  one.chains = 1;
  EXPECT_NE(error_of(one).find("missing"), std::string::npos);
  one.chains = 3;  // does not divide the 4 stages
  EXPECT_NE(error_of(one).find("chains = 3 is not allowed; need chains >= 1 dividing p*v = 4"), std::string::npos);
}
