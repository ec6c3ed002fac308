// PyTorch CSV schedules: cell text both ways, round trip of every generator, exact aligned
// layout, errors that name row, column and cell, and the example files in inputs/schedules.
#include <gtest/gtest.h>

#include <sstream>

#include "minipipe_source_dir.hpp"  // MINIPIPE_SOURCE_DIR (generated)
#include "schedules/schedules.hpp"

namespace ms = minipipe::sched;

namespace {

std::string csv_of(const ms::Schedule& s, ms::CsvLayout layout = ms::CsvLayout::compact) {
  std::ostringstream os;
  ms::write_csv(s, os, layout);
  return os.str();
}

ms::Schedule read(const std::string& text, int p = 0, ms::Placement pl = ms::Placement::inferred) {
  std::istringstream in(text);
  return ms::read_csv(in, p, pl, "test.csv");
}

std::string read_error(const std::string& text, ms::Placement pl = ms::Placement::inferred) {
  try {
    read(text, 0, pl);
  } catch (const ms::ScheduleError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Csv, CellTextBothWays) {
  using ms::Action;
  using ms::Op;
  const std::vector<std::pair<std::string, Action>> cases = {
      {"0F3", Action::make(Op::F, 0, 3)},
      {"2I0", Action::make(Op::I, 2, 0)},
      {"2W0", Action::make(Op::W, 2, 0)},
      {"1B2", Action::make(Op::B, 1, 2)},
      {"0SEND_F1", Action::make(Op::SEND_F, 0, 1)},
      {"2RECV_B0", Action::make(Op::RECV_B, 2, 0)},
      {"3RECV_F12", Action::make(Op::RECV_F, 3, 12)},
      {"10SEND_B7", Action::make(Op::SEND_B, 10, 7)},
      {"(0F7;7B3)OVERLAP_F_B", Action::overlap(Action::make(Op::F, 0, 7), Action::make(Op::B, 7, 3))},
  };
  for (const auto& [text, action] : cases) {
    EXPECT_EQ(ms::to_string(action), text);
    EXPECT_EQ(ms::parse_action(text), action) << text;
    EXPECT_EQ(ms::parse_action("  " + text + " "), action) << text;
  }
  for (const char* bad : {"", "F0", "2F", "2X0", "0F1x", "-1F0", "(0F1;1F2)OVERLAP_F_B", "(0F1;1B2)",
                          "(0F1)OVERLAP_F_B", "0UNSHARD", "99999999999F0"})
    EXPECT_THROW(ms::parse_action(bad), ms::ScheduleError) << bad;
}

TEST(Csv, AlignedLayoutIsTheUnitStepGrid) {
  const auto s = ms::make_schedule("1f1b", 2, 2);
  EXPECT_EQ(csv_of(s), "0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n");
  // Rank 1 waits one step for micro-batch 0; rank 0 waits for each gradient to come back.
  EXPECT_EQ(csv_of(s, ms::CsvLayout::aligned), "0F0,0F1,,0B0,,0B1\n,1F0,1B0,1F1,1B1\n");
  EXPECT_EQ(ms::format_step_grid(s), "rank 0 | 0F0 0F1   . 0B0   . 0B1\nrank 1 |   . 1F0 1B0 1F1 1B1   .\n");
}

TEST(Csv, EveryGeneratorRoundTrips) {
  for (const auto& n : ms::schedule_names())
    for (int p : {1, 2, 4})
      for (int m : {4 * p, 6 * p}) {
        const auto s = ms::make_schedule(n, p, m);
        for (auto layout : {ms::CsvLayout::compact, ms::CsvLayout::aligned}) {
          const auto back = read(csv_of(s, layout));
          EXPECT_EQ(back.p, s.p) << n;
          EXPECT_EQ(back.v, s.v) << n;
          EXPECT_EQ(back.m, s.m) << n;
          EXPECT_EQ(back.stage_to_rank, s.stage_to_rank) << n;
          EXPECT_EQ(back.chains, s.chains) << n;  // DualPipe's two copies are read from the cells
          EXPECT_EQ(back.ranks, s.ranks) << n << " p=" << p << " m=" << m;
          EXPECT_EQ(back.name, "csv:test.csv");
        }
        // The lowered (compute + comms) form round trips too and stays lowered.
        const auto low = ms::lower_communication(s);
        const auto back = read(csv_of(low));
        EXPECT_EQ(back.is_lowered(), p > 1);  // one rank has nobody to talk to
        EXPECT_EQ(back.ranks, low.ranks) << n;
      }
}

// The new variants at small m and with their options (the list-scheduled ones, zb-mem under a
// tight cap with uneven costs, interleaved with a remainder group or groups of 1) re-import to
// the same actions, compact and aligned.
TEST(Csv, NewVariantsAndOptionsRoundTrip) {
  for (int p : {2, 3, 4})
    for (int m : {1, p - 1, p + 1, 2 * p + 1}) {
      std::vector<ms::Schedule> all;
      for (const char* n : {"v-half", "v-min", "zb-mem", "zb-v", "dualpipev"})
        all.push_back(ms::make_schedule(n, p, m));
      ms::ScheduleOptions opt;
      opt.memory_cap = 2;
      opt.F = {1.0};
      opt.I = {1.5};
      opt.W = {0.5};
      all.push_back(ms::make_schedule("zb-mem", p, m, 0, opt));
      for (int g : {1, p, m + 1}) {
        ms::ScheduleOptions og;
        og.group = g;
        all.push_back(ms::make_schedule("interleaved-1f1b", p, m, 2, og));
      }
      // DualPipe with m >= 2: both copies have micro-batches, so the file shows both (m = 1 reads
      // back as the one-copy schedule of copy 0's stages: same actions, see read_csv).
      if (m >= 2) all.push_back(ms::make_schedule("dualpipe", p, m));
      for (const auto& s : all)
        for (auto layout : {ms::CsvLayout::compact, ms::CsvLayout::aligned}) {
          const auto back = read(csv_of(s, layout), p);
          EXPECT_EQ(back.chains, s.chains) << s.name << " p=" << p << " m=" << m;
          EXPECT_EQ(back.stage_to_rank, s.stage_to_rank) << s.name << " p=" << p << " m=" << m;
          EXPECT_EQ(back.ranks, s.ranks) << s.name << " p=" << p << " m=" << m;
          EXPECT_EQ(back.m, m);
        }
    }
}

TEST(Csv, MalformedCellsNameRowColumnAndText) {
  std::string msg = read_error("0F0,0F1,0B0,0B1\n1F0,1B0,1Q1,1B1\n");
  EXPECT_NE(msg.find("test.csv: row 2, column 3: invalid schedule cell '1Q1'"), std::string::npos) << msg;
  msg = read_error("0F0,0F1,0B0,0B1\n1F0,1B0,(1F1;1F0)OVERLAP_F_B,1B1\n");
  EXPECT_NE(msg.find("row 2, column 3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'(1F1;1F0)OVERLAP_F_B'"), std::string::npos) << msg;
  msg = read_error("0F0,0F1,0B0,0B1,,0F\n");
  EXPECT_NE(msg.find("row 1, column 6: invalid schedule cell '0F'"), std::string::npos) << msg;
  // A well-formed file whose schedule is wrong goes through the validator and its grid.
  msg = read_error("0F0,0B0,0F1,0B1\n1F1,1B1,1F0,1B0\n");
  EXPECT_NE(msg.find("deadlock"), std::string::npos) << msg;
  msg = read_error("0F0,1F0\n");  // two stages on one rank (v = 2), no backward at all
  EXPECT_NE(msg.find("missing 0B0"), std::string::npos) << msg;
  msg = read_error("0F0,0B0\n1F0,1B0\n2F0,2B0\n", ms::Placement::inferred);
  EXPECT_EQ(msg, "");
  msg = read_error("0F0,1F0,2F0,2B0,1B0,0B0\n\n");  // one rank holding three stages
  EXPECT_EQ(msg, "");
  msg = read_error("0F0,0B0\n1F0,1B0,2F0,2B0\n");
  EXPECT_NE(msg.find("3 stages (largest stage index + 1) is not a multiple of p = 2"), std::string::npos) << msg;
  EXPECT_NE(read_error("\n\n").find("holds no actions"), std::string::npos);
}

TEST(Csv, WhatPythonsCsvModuleWrites) {
  // csv.writer ends lines with CRLF and quotes cells when asked; some editors add a BOM.
  const auto s = read("\xEF\xBB\xBF\"0F0\",0F1,,0B0,,0B1\r\n,1F0,1B0,1F1,1B1\r\n\r\n");
  EXPECT_EQ(s.ranks, ms::make_schedule("1f1b", 2, 2).ranks);
  EXPECT_EQ(s.p, 2);
  // p can be given: two rows cannot be a 4-rank schedule (its 2 stages do not divide among 4
  // ranks), and a file with more rows than p is rejected rather than cut.
  std::istringstream in("0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n");
  EXPECT_THROW(ms::read_csv(in, 4, ms::Placement::loop, "x"), ms::ScheduleError);
  std::istringstream in1("0F0,0B0\n1F0,1B0\n");
  EXPECT_THROW(ms::read_csv(in1, 1, ms::Placement::loop, "x"), ms::ScheduleError);
}

TEST(Csv, PlacementFromFlagOrFromTheRows) {
  const std::string text = csv_of(ms::make_schedule("zb-v", 2, 4));
  EXPECT_EQ(read(text).stage_to_rank, ms::v_placement(2, 2));
  EXPECT_EQ(read(text, 0, ms::Placement::v).stage_to_rank, (std::vector<int>{0, 1, 1, 0}));
  const std::string msg = read_error(text, ms::Placement::loop);
  EXPECT_NE(msg.find("belongs to rank"), std::string::npos) << msg;
  EXPECT_EQ(ms::parse_placement("loop"), ms::Placement::loop);
  EXPECT_EQ(ms::parse_placement("v"), ms::Placement::v);
  EXPECT_EQ(ms::parse_placement("auto"), ms::Placement::inferred);
  EXPECT_THROW(ms::parse_placement("zigzag"), ms::ScheduleError);
}

TEST(Csv, ExampleInputsValidate) {
  const std::string dir = std::string(MINIPIPE_SOURCE_DIR) + "/inputs/schedules/";
  const auto split = ms::read_csv_file(dir + "zb_h1_p2_m4.csv");
  EXPECT_EQ(split.p, 2);
  EXPECT_EQ(split.v, 1);
  EXPECT_EQ(split.m, 4);
  EXPECT_TRUE(split.uses_split_backward());
  EXPECT_FALSE(split.uses_overlap());
  EXPECT_EQ(ms::read_csv_file(dir + "zb_h1_p2_m4.csv", 2, ms::Placement::loop).ranks, split.ranks);

  // Bidirectional DualPipe: the two model copies are read from the cells (even micro-batches on
  // stages 0-1, odd ones on 2-3), and the file is exactly the generator's schedule.
  const auto copies = ms::read_csv_file(dir + "dualpipe_p2_m4.csv");
  EXPECT_EQ(copies.chains, 2);
  EXPECT_EQ(copies.stage_to_rank, ms::v_placement(2, 2));
  EXPECT_EQ(copies.ranks, ms::make_schedule("dualpipe", 2, 4).ranks);

  const auto overlap = ms::read_csv_file(dir + "dualpipev_p2_m4.csv", 2, ms::Placement::v);
  EXPECT_EQ(overlap.p, 2);
  EXPECT_EQ(overlap.v, 2);
  EXPECT_EQ(overlap.m, 4);
  EXPECT_TRUE(overlap.uses_overlap());
  EXPECT_EQ(overlap.stage_to_rank, ms::v_placement(2, 2));
  // Both lower and simulate: the runtime will execute exactly these.
  for (const auto* s : {&split, &overlap}) {
    EXPECT_NO_THROW(ms::validate(ms::lower_communication(*s)));
    const auto r = ms::simulate(*s, ms::CostModel::uniform(s->num_stages(), 1, 0, 1, 1, 0));
    EXPECT_GT(r.makespan, 0);
  }
  EXPECT_THROW(ms::read_csv_file(dir + "no_such_file.csv"), ms::ScheduleError);
}
