// Every schedule at every small m: the sweep p in 1..4, m in 1..2p+1 over every variant (and the
// interleaved group sizes) is accepted, validator-clean and simulated, and the orders that are cut
// short for small m hold no more than the full schedule does. The refusals left are on v alone.
#include <gtest/gtest.h>

#include <algorithm>

#include "schedules/schedules.hpp"

namespace ms = minipipe::sched;

namespace {

int max_of(const std::vector<int>& v) {
  return *std::max_element(v.begin(), v.end());
}

// A variant's own minimum m before this round (the m its warm-up fills, its table row's): below
// it the schedule is the full one restricted to fewer micro-batches.
int full_warmup_m(const std::string& n, int p) {
  return ms::full_warmup_m(ms::variant_spec(n), p);
}

}  // namespace

TEST(AnyM, EveryScheduleAcceptsEveryMUpTo2pPlus1) {
  int runs = 0;
  for (const auto& n : ms::schedule_names())
    for (int p = 1; p <= 4; ++p)
      for (int m = 1; m <= 2 * p + 1; ++m) {
        const std::string what = n + " p=" + std::to_string(p) + " m=" + std::to_string(m);
        ms::Schedule s;
        ASSERT_NO_THROW(s = ms::make_schedule(n, p, m)) << what;
        ASSERT_NO_THROW(ms::validate(s)) << what;
        ASSERT_NO_THROW(ms::validate(ms::post_receives_early(ms::lower_communication(s)))) << what;
        const auto cost = ms::CostModel::uniform(s.num_stages(), 1, 0, 1, 1, 0);
        const ms::SimResult r = ms::simulate(s, cost);
        // Every rank does 3 units of work per (stage, micro-batch) it runs: F + I + W or F + B. A
        // micro-batch visits v / chains of a rank's stages (DualPipe: one, its copy's part).
        const double units = 3.0 * s.v / s.chains * m;
        for (int k = 0; k < p; ++k) EXPECT_DOUBLE_EQ(r.busy[k], units) << what << " rank " << k;
        EXPECT_GE(r.makespan, units) << what;
        // Never more in flight than micro-batches exist, on any rank.
        EXPECT_LE(max_of(r.peak_held), s.v * m) << what;
        // A cut-short order holds no more than the full-warm-up schedule it comes from.
        const int full = full_warmup_m(n, p);
        if (m < full) {
          const auto big = ms::make_schedule(n, p, full);
          EXPECT_LE(max_of(r.peak_held), max_of(ms::simulate(big, cost).peak_held)) << what;
        }
        ++runs;
      }
  EXPECT_EQ(runs, static_cast<int>(ms::schedule_names().size()) * (3 + 5 + 7 + 9));
}

TEST(AnyM, InterleavedAnyMAnyGroupAnyV) {
  for (int p = 1; p <= 4; ++p)
    for (int v = 2; v <= 3; ++v)
      for (int m = 1; m <= 2 * p + 1; ++m)
        for (int g = 1; g <= m + 1; ++g) {
          ms::ScheduleOptions opt;
          opt.group = g;
          const std::string what = "p=" + std::to_string(p) + " v=" + std::to_string(v) + " m=" + std::to_string(m) +
                                   " group=" + std::to_string(g);
          ms::Schedule s;
          ASSERT_NO_THROW(s = ms::make_schedule("interleaved-1f1b", p, m, v, opt)) << what;
          ASSERT_NO_THROW(ms::validate(s)) << what;
          EXPECT_GT(ms::simulate(s, ms::CostModel::uniform(s.num_stages(), 1, 2, 1, 1, 0)).makespan, 0) << what;
        }
}

// The refusals that remain are about v (a placement that does not exist for the variant), and
// each says so with the value and what is allowed.
TEST(AnyM, RemainingRefusalsAreAboutVAndSayWhy) {
  struct Case {
    const char* name;
    int v;
    const char* says;
  };
  const Case cases[] = {{"1f1b", 2, "v = 2 is not allowed; need v = 1"},
                        {"zb-h1", 3, "v = 3 is not allowed; need v = 1"},
                        {"interleaved-1f1b", 1, "v = 1 is not allowed; need v >= 2 (v = 1 is plain 1f1b)"},
                        {"zb-v", 3, "v = 3 is not allowed; need v = 2"},
                        {"dualpipev", 1, "v = 1 is not allowed; need v = 2"},
                        {"dualpipe", 3, "v = 3 is not allowed; need v = 2"}};
  for (const auto& c : cases)
    for (int m = 1; m <= 5; ++m) {
      try {
        ms::make_schedule(c.name, 2, m, c.v);
        ADD_FAILURE() << c.name << " v=" << c.v << " must be refused";
      } catch (const ms::ScheduleError& e) {
        EXPECT_NE(std::string(e.what()).find(c.says), std::string::npos) << e.what();
      }
    }
}
