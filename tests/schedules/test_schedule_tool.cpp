// `minipipe schedule` driven through CLI11 exactly as main.cpp does: printed numbers, the
// SVG / Chrome-trace / JSON / CSV files, --list, --load-csv and error paths.
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "miniapp/tools/schedule_tool.hpp"
#include "minipipe_source_dir.hpp"  // MINIPIPE_SOURCE_DIR (generated)
#include "schedules/schedules.hpp"

namespace fs = std::filesystem;
namespace ms = minipipe::sched;

namespace {

struct Outcome {
  int rc = -1;
  std::string out, err;
};

// Parses argv after "minipipe" with a fresh app; CLI::ParseError propagates to the caller.
Outcome run_tool(const std::vector<std::string>& args) {
  CLI::App app{"minipipe"};
  minipipe::ScheduleTool tool;
  tool.attach(app);
  std::vector<const char*> argv = {"minipipe"};
  for (const auto& a : args) argv.push_back(a.c_str());
  app.parse(static_cast<int>(argv.size()), argv.data());
  EXPECT_TRUE(tool.sub->parsed());
  std::ostringstream out, err;
  tool.err = &err;
  Outcome o;
  o.rc = tool.run(out);
  o.out = out.str();
  o.err = err.str();
  return o;
}

std::string slurp(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + what.size())) ++n;
  return n;
}

// The number after "key": in a JSON text.
double json_number(const std::string& json, const std::string& key) {
  const auto pos = json.find("\"" + key + "\": ");
  EXPECT_NE(pos, std::string::npos) << key;
  if (pos == std::string::npos) return -1;
  return std::strtod(json.c_str() + pos + key.size() + 4, nullptr);
}

class ScheduleToolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("minipipe_schedule_tool_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

}  // namespace

TEST_F(ScheduleToolTest, OneF1BNumbersAndAllFiles) {
  const auto o = run_tool({"schedule", "--schedule", "1f1b", "-p", "4", "-m", "8", "--json", path("r.json"), "--svg",
                           path("t.svg"), "--trace", path("t.json"), "--csv", path("s.csv")});
  ASSERT_EQ(o.rc, 0) << o.err;
  EXPECT_EQ(o.err, "");
  // (p-1)/(m+p-1) = 3/11, printed next to the simulated value.
  EXPECT_NE(o.out.find("bubble fraction 0.272727 simulated"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("0.272727 analytic (p-1)/(m+p-1)"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("rank 0 | 0F0 0F1 0F2 0F3"), std::string::npos) << o.out;

  const std::string json = slurp(path("r.json"));
  EXPECT_DOUBLE_EQ(json_number(json, "bubble_fraction"), 3.0 / 11);
  EXPECT_DOUBLE_EQ(json_number(json, "analytic_bubble_fraction"), 3.0 / 11);
  EXPECT_DOUBLE_EQ(json_number(json, "makespan"), 33);  // (m+p-1)(F+B) with F=1, B=2
  EXPECT_EQ(count(json, "\"rank\": "), 4u);
  EXPECT_EQ(count(json, "\"peak_inflight\": "), 4u);

  const std::string svg = slurp(path("t.svg"));
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("rank 3"), std::string::npos);
  EXPECT_EQ(count(svg, "<title>"), 64u);  // one box per F and B of 4 ranks x 8 micro-batches

  const std::string trace = slurp(path("t.json"));
  EXPECT_NE(trace.find("\"traceEvents\""), std::string::npos);
  EXPECT_EQ(count(trace, "\"ph\": \"X\""), 64u);

  std::ifstream csv(path("s.csv"));
  EXPECT_EQ(ms::read_csv(csv).ranks, ms::make_schedule("1f1b", 4, 8).ranks);
  for (const auto& e : fs::directory_iterator(dir_))  // no temporary ("<name>.tmp.XXXXXX") is left
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
}

TEST_F(ScheduleToolTest, WorkedCaseThroughTheCommandLine) {
  const auto o = run_tool({"schedule", "--schedule", "1f1b", "-p", "3", "-m", "8", "--cost", "F=8:20:10", "--comm", "3",
                           "--json", path("r.json"), "--csv", path("s.csv"), "--csv-layout", "comms"});
  ASSERT_EQ(o.rc, 0) << o.err;
  const std::string json = slurp(path("r.json"));
  EXPECT_DOUBLE_EQ(json_number(json, "makespan"), 526);
  EXPECT_DOUBLE_EQ(json_number(json, "stage_imbalance"), 60.0 / 38);  // slowest F+B over the mean
  EXPECT_NE(o.out.find("does not apply to these costs"), std::string::npos) << o.out;
  EXPECT_NE(slurp(path("s.csv")).find("0SEND_F0"), std::string::npos);
}

TEST_F(ScheduleToolTest, ListNamesEveryVariantWithItsConstraints) {
  const auto o = run_tool({"schedule", "--list"});
  ASSERT_EQ(o.rc, 0);
  for (const auto& n : ms::schedule_names()) {
    EXPECT_NE(o.out.find(n + "\n"), std::string::npos) << n;
    EXPECT_NE(o.out.find(ms::constraints(n)), std::string::npos) << n;
  }
}

TEST_F(ScheduleToolTest, LoadCsvInsteadOfAGenerator) {
  const std::string file = std::string(MINIPIPE_SOURCE_DIR) + "/inputs/schedules/dualpipev_p2_m4.csv";
  const auto o = run_tool({"schedule", "--load-csv", file, "--placement", "v", "--svg", path("t.svg")});
  ASSERT_EQ(o.rc, 0) << o.err;
  EXPECT_NE(o.out.find("csv:"), std::string::npos);
  EXPECT_NE(o.out.find("p=2 v=2 m=4"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("OVERLAP_F_B"), std::string::npos);
  EXPECT_NE(slurp(path("t.svg")).find("#6a3d9a"), std::string::npos);  // overlapped halves outlined

  const auto bad = run_tool({"schedule", "--load-csv", file, "--placement", "loop"});
  EXPECT_EQ(bad.rc, 2);
  EXPECT_NE(bad.err.find("belongs to rank"), std::string::npos) << bad.err;
  EXPECT_THROW(run_tool({"schedule", "--load-csv", file, "-p", "3"}), CLI::ParseError);
}

TEST_F(ScheduleToolTest, BadInputIsOneClearMessageAndNonZero) {
  const auto o = run_tool({"schedule", "--schedule", "zb-h2", "-p", "4", "-m", "5", "-v", "2"});
  EXPECT_EQ(o.rc, 2);
  EXPECT_NE(o.err.find("v = 2 is not allowed"), std::string::npos) << o.err;
  EXPECT_EQ(count(o.err, "\n"), 1u);

  const auto c = run_tool({"schedule", "--cost", "F=1,Q=2"});
  EXPECT_EQ(c.rc, 2);
  EXPECT_NE(c.err.find("cost Q = '2' is not allowed"), std::string::npos) << c.err;

  const auto f = run_tool({"schedule", "--load-csv", path("missing.csv")});
  EXPECT_EQ(f.rc, 2);
  EXPECT_NE(f.err.find("'--load-csv' has value"), std::string::npos) << f.err;
  EXPECT_NE(f.err.find("cannot be read"), std::string::npos) << f.err;

  try {
    run_tool({"schedule", "--schedule", "pipedream"});
    FAIL() << "an unknown schedule must be a parse error";
  } catch (const CLI::ParseError& e) {
    EXPECT_NE(std::string(e.what()).find("pipedream"), std::string::npos) << e.what();
  }
  EXPECT_THROW(run_tool({"schedule", "-p", "0"}), CLI::ParseError);
}

TEST_F(ScheduleToolTest, HelpPrintsDefaults) {
  CLI::App app{"minipipe"};
  minipipe::ScheduleTool tool;
  tool.attach(app);
  const std::string help = tool.sub->help();
  for (const char* expected : {"--schedule", "1f1b", "F=1,I=1,W=1", "--load-csv", "--placement", "auto", "--trace"})
    EXPECT_NE(help.find(expected), std::string::npos) << expected << "\n" << help;
}

// Outputs are never replaced without --force, never the loaded CSV, never one another.
TEST_F(ScheduleToolTest, OutputsRefuseOverwriteInputsAndEachOther) {
  { std::ofstream(path("t.svg")) << "keep"; }
  const auto o = run_tool({"schedule", "--svg", path("t.svg")});
  EXPECT_EQ(o.rc, 2);
  EXPECT_NE(o.err.find("refusing to overwrite"), std::string::npos) << o.err;
  EXPECT_EQ(slurp(path("t.svg")), "keep");
  const auto forced = run_tool({"schedule", "--svg", path("t.svg"), "--force"});
  EXPECT_EQ(forced.rc, 0) << forced.err;
  EXPECT_EQ(slurp(path("t.svg")).rfind("<svg", 0), 0u);

  const auto same = run_tool({"schedule", "--svg", path("a.out"), "--json", path("a.out")});
  EXPECT_EQ(same.rc, 2);
  EXPECT_NE(same.err.find("'--svg'"), std::string::npos) << same.err;
  EXPECT_NE(same.err.find("'--json'"), std::string::npos) << same.err;
  EXPECT_NE(same.err.find("same output file"), std::string::npos) << same.err;
  EXPECT_FALSE(fs::exists(path("a.out")));

  const std::string csv = path("in.csv");
  ASSERT_EQ(run_tool({"schedule", "--csv", csv}).rc, 0);
  const std::string before = slurp(csv);
  const auto onto_input = run_tool({"schedule", "--load-csv", csv, "--json", csv, "--force"});
  EXPECT_EQ(onto_input.rc, 2);
  EXPECT_NE(onto_input.err.find("names the input of '--load-csv'"), std::string::npos) << onto_input.err;
  EXPECT_EQ(slurp(csv), before);
  // A symlink to the input is the input.
  fs::create_symlink(csv, path("link.json"));
  const auto via_link = run_tool({"schedule", "--load-csv", csv, "--json", path("link.json"), "--force"});
  EXPECT_EQ(via_link.rc, 2);
  EXPECT_EQ(slurp(csv), before);
}

// --group and --memory-cap reach the generators, and the list-scheduled zb-mem plans with --cost:
// the JSON report of each equals the library's own simulation of the same options.
TEST_F(ScheduleToolTest, GroupAndMemoryCapOptions) {
  const auto g = run_tool({"schedule", "-s", "interleaved-1f1b", "-p", "4", "-m", "16", "--group", "8", "--json",
                           path("g.json"), "--grid", "none"});
  ASSERT_EQ(g.rc, 0) << g.err;
  ms::ScheduleOptions og;
  og.group = 8;
  const auto sg = ms::make_schedule("interleaved-1f1b", 4, 16, 2, og);
  const auto rg = ms::simulate(sg, ms::parse_costs("F=1,I=1,W=1", sg.num_stages(), 0));
  EXPECT_DOUBLE_EQ(json_number(slurp(path("g.json")), "makespan"), rg.makespan);
  EXPECT_EQ(rg.peak_inflight[0], 2 * 3 + 8 + 1);  // Megatron's warm-up with group 8, plus one
  // The bubble is that of the default group; rank 0's first peak tells the groups apart.
  EXPECT_EQ(json_number(slurp(path("g.json")), "peak_inflight"), rg.peak_inflight[0]);

  const auto c = run_tool({"schedule", "-s", "zb-mem", "-p", "4", "-m", "12", "--memory-cap", "2", "--cost",
                           "F=1,I=2,W=1", "--json", path("c.json"), "--grid", "none"});
  ASSERT_EQ(c.rc, 0) << c.err;
  ms::ScheduleOptions oc;
  oc.memory_cap = 2;
  oc.F = {1};
  oc.I = {2};
  oc.W = {1};
  const auto sc = ms::make_schedule("zb-mem", 4, 12, 1, oc);
  const auto rc = ms::simulate(sc, ms::parse_costs("F=1,I=2,W=1", 4, 0));
  EXPECT_DOUBLE_EQ(json_number(slurp(path("c.json")), "makespan"), rc.makespan);
  for (int held : rc.peak_held) EXPECT_LE(held, 2);
  EXPECT_EQ(json_number(slurp(path("c.json")), "peak_held"), rc.peak_held[0]);
  EXPECT_GT(rc.makespan,
            ms::simulate(ms::make_schedule("zb-mem", 4, 12), ms::parse_costs("F=1,I=2,W=1", 4, 0)).makespan);
}

// Bidirectional DualPipe through the command line: the two copies are named, the simulated bubble
// is DualPipe's table (p = 4, m = 8, F = I = W: b = (p/2-1)(F&B+B-3W) = 2 against m(F+B) = 24),
// and the CSV it writes loads back as the same two-copy schedule.
TEST_F(ScheduleToolTest, DualPipeTwoCopiesAndItsCsv) {
  const auto o = run_tool(
      {"schedule", "--schedule", "dualpipe", "-p", "4", "-m", "8", "--json", path("d.json"), "--csv", path("d.csv")});
  ASSERT_EQ(o.rc, 0) << o.err;
  EXPECT_NE(o.out.find("p=4 v=2 m=8"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("model copies=2"), std::string::npos) << o.out;
  const std::string json = slurp(path("d.json"));
  EXPECT_DOUBLE_EQ(json_number(json, "makespan"), 26);
  EXPECT_DOUBLE_EQ(json_number(json, "bubble_fraction"), 2.0 / 26);
  EXPECT_DOUBLE_EQ(json_number(json, "analytic_bubble_fraction"), 2.0 / 26);
  EXPECT_DOUBLE_EQ(json_number(json, "model_copies"), 2);
  const auto back = run_tool({"schedule", "--load-csv", path("d.csv"), "--json", path("b.json")});
  ASSERT_EQ(back.rc, 0) << back.err;
  EXPECT_NE(back.out.find("model copies=2"), std::string::npos) << back.out;
  EXPECT_DOUBLE_EQ(json_number(slurp(path("b.json")), "makespan"), 26);
}

// User-sized knobs at their extremes: a group of INT_MAX micro-batches is one group (every
// forward first), not an int overflow; a p whose schedule could not be held is refused before
// anything is sized by it (the cost tables once grew without bound, zb-v's overflowed a vector).
TEST_F(ScheduleToolTest, ExtremeKnobsAreRefusedOrRunNeverOverflow) {
  const auto g =
      run_tool({"schedule", "-s", "interleaved-1f1b", "-p", "2", "-m", "4", "--group", "2147483647", "--grid", "none"});
  ASSERT_EQ(g.rc, 0) << g.err;
  ms::ScheduleOptions huge, all;
  huge.group = 2147483647;
  all.group = 4;
  const ms::Schedule a = ms::make_schedule("interleaved-1f1b", 2, 4, 2, huge);
  // Every forward first on every rank: warm-up = v*m.
  for (const auto& row : a.ranks)
    for (std::size_t k = 0; k < row.size(); ++k) EXPECT_EQ(row[k].op, k < 8 ? ms::Op::F : ms::Op::B);
  EXPECT_NO_THROW(ms::make_schedule("interleaved-1f1b", 3, 5, 3, huge));

  for (const char* name : {"sequential", "zb-v", "zb-mem"}) {
    const auto o = run_tool({"schedule", "-s", name, "-p", "2147483647", "-m", "1", "--grid", "none"});
    EXPECT_EQ(o.rc, 2) << name;
    EXPECT_NE(o.err.find("p*v*m = "), std::string::npos) << o.err;
    EXPECT_NE(o.err.find("need p*v*m <= 4194304"), std::string::npos) << o.err;
    EXPECT_EQ(count(o.err, "\n"), 1u) << o.err;
  }
}

// The list-scheduled variants stop at p*p*v*m = 2^23 (zb-mem at p = 512, m = 8192, once allowed,
// planned for minutes); at that limit one plans in seconds of CPU.
TEST_F(ScheduleToolTest, ListScheduledSizesAreBoundedAndFast) {
  const auto o = run_tool({"schedule", "-s", "zb-mem", "-p", "512", "-m", "8192", "--grid", "none"});
  EXPECT_EQ(o.rc, 2);
  EXPECT_NE(o.err.find("p*p*v*m = 2147483648 is not allowed; need p*p*v*m <= 8388608"), std::string::npos) << o.err;
  const std::clock_t t0 = std::clock();
  const ms::Schedule s = ms::make_schedule("zb-mem", 512, 32);
  const double seconds = static_cast<double>(std::clock() - t0) / CLOCKS_PER_SEC;
  EXPECT_EQ(s.m, 32);
#ifdef NDEBUG
  EXPECT_LT(seconds, 20.0);
#endif
  std::printf("zb-mem at p=512, m=32: %.3f s of CPU\n", seconds);
}
