// The variant table (schedules/variant_table.cpp) against what is written about it elsewhere: the
// README's schedule table and the demo deck's schedule list must be the table's, and every row
// must be consistent with the schedules its generator builds.
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>

#include "minipipe_source_dir.hpp"
#include "schedules/schedules.hpp"

namespace ms = minipipe::sched;

namespace {

std::string read_source(const std::string& path) {
  std::ifstream in(std::string(MINIPIPE_SOURCE_DIR) + "/" + path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The README lines from the schedule table's header row through its last row.
std::string readme_schedule_table() {
  std::istringstream in(read_source("README.md"));
  std::string line, out;
  bool inside = false;
  while (std::getline(in, line)) {
    if (line.rfind("| name | placement, v |", 0) == 0) inside = true;
    if (inside && line.rfind("|", 0) != 0) break;
    if (inside) out += line + "\n";
  }
  return out;
}

// The quoted names of the demo deck's `schedule = [...]` list (which may span lines), or {"all"}
// for `schedule = "all"`.
std::vector<std::string> demo_deck_schedules() {
  const std::string deck = read_source("inputs/demo.toml");
  if (deck.find("\nschedule = \"all\"") != std::string::npos) return {"all"};
  const auto key = deck.find("\nschedule = [");
  if (key == std::string::npos) return {};
  const auto end = deck.find(']', key);
  std::vector<std::string> out;
  for (auto q = deck.find('"', key); q < end; q = deck.find('"', q + 1)) {
    const auto close = deck.find('"', q + 1);
    out.push_back(deck.substr(q + 1, close - q - 1));
    q = close;
  }
  return out;
}

}  // namespace

TEST(ScheduleTable, ReadmeScheduleTableIsTheTables) {
  EXPECT_EQ(readme_schedule_table(), ms::variant_markdown_table())
      << "README.md's schedule table differs from the variant table; paste the output of "
         "`minipipe schedule --list --markdown` over it";
}

TEST(ScheduleTable, DemoDeckRunsEverySchedule) {
  // "all" is every schedule of the table (Deck.AllSchedulesIsEveryNameInTableOrder); a list must
  // name them all, in the table's order.
  const auto listed = demo_deck_schedules();
  if (listed == std::vector<std::string>{"all"}) return;
  EXPECT_EQ(listed, ms::schedule_names())
      << "inputs/demo.toml's pipeline.schedule must be \"all\" or list every schedule of "
         "schedules/variant_table.cpp in its order";
}

TEST(ScheduleTable, RowsAreConsistent) {
  std::set<std::string> seen;
  for (const auto& spec : ms::variant_table()) {
    const std::string n = spec.name;
    EXPECT_TRUE(seen.insert(n).second) << n << " is listed twice";
    EXPECT_TRUE(ms::v_allowed(spec.v_rule, spec.default_v)) << n;
    EXPECT_TRUE(spec.placement == ms::Placement::loop || spec.placement == ms::Placement::v) << n;
    EXPECT_GE(spec.copies, 1) << n;
    EXPECT_EQ(*spec.formula != '\0', spec.bubble != nullptr) << n << ": a closed form needs its text and function";
    EXPECT_NE(*spec.limits, '\0') << n;
    EXPECT_NE(*spec.summary, '\0') << n;
    EXPECT_NE(*spec.bubble_brief, '\0') << n;
    EXPECT_GE(ms::full_warmup_m(spec, 1), 1) << n;
  }
}

// Each row's placement, copies, v and backward are what its generator builds, on a small sweep.
TEST(ScheduleTable, RowsDescribeTheirSchedules) {
  for (const auto& spec : ms::variant_table())
    for (int p = 1; p <= 4; ++p)
      for (int m : {1, 2 * p + 1}) {
        const std::string what = std::string(spec.name) + " p=" + std::to_string(p) + " m=" + std::to_string(m);
        const ms::Schedule s = ms::make_schedule(spec.name, p, m);
        EXPECT_EQ(s.v, spec.default_v) << what;
        EXPECT_EQ(s.chains, spec.copies) << what;
        EXPECT_EQ(s.stage_to_rank,
                  spec.placement == ms::Placement::v ? ms::v_placement(p, s.v) : ms::looped_placement(p, s.v))
            << what;
        if (spec.backward != ms::Backward::mixed) {
          EXPECT_EQ(s.uses_split_backward(), spec.backward == ms::Backward::split) << what;
        }
      }
}
