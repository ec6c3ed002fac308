// Transfers charged per stage boundary (a cluster's links) against closed forms, the one-link
// model as its special case, and the lean sweep simulation against the full one, bit for bit.
#include <gtest/gtest.h>

#include <ctime>
#include <numeric>

#include "schedules/schedules.hpp"

namespace ms = minipipe::sched;

namespace {

ms::CostModel uniform(const ms::Schedule& s, double f, double b, double comm = 0) {
  return ms::CostModel::uniform(s.num_stages(), f, b, 0, 0, comm);
}

// Boundary b's time: uneven on purpose (a node edge every third boundary is dearer).
std::vector<double> uneven_links(int stages) {
  std::vector<double> t;
  for (int b = 0; b + 1 < stages; ++b) t.push_back(b % 3 == 2 ? 0.75 : 0.125 * (1 + b % 2));
  return t;
}

}  // namespace

TEST(Links, GPipeAndSequentialChargeEachBoundaryTwiceOnTheCriticalPath) {
  const double F = 1, B = 2;
  for (int p = 1; p <= 7; ++p)
    for (int m = 1; m <= 9; ++m) {
      const std::vector<double> links = uneven_links(p);
      const double C = std::accumulate(links.begin(), links.end(), 0.0);
      // GPipe: micro-batch 0 reaches the last stage after (p-1) F + C, the others follow F apart,
      // and the backwards drain back the same way: (m+p-1)(F+B) + 2C.
      const auto g = ms::make_schedule("gpipe", p, m);
      auto cg = uniform(g, F, B);
      cg.boundary = links;
      const auto rg = ms::simulate(g, cg);
      const double span = (m + p - 1) * (F + B) + 2 * C;
      EXPECT_DOUBLE_EQ(rg.makespan, span) << "p=" << p << " m=" << m;
      // The bubble with links charged: every rank is busy m(F+B) of it.
      EXPECT_DOUBLE_EQ(rg.bubble_fraction, 1 - m * (F + B) / span) << "p=" << p << " m=" << m;
      // Sequential: every micro-batch crosses every boundary twice, one at a time.
      const auto q = ms::make_schedule("sequential", p, m);
      auto cq = uniform(q, F, B);
      cq.boundary = links;
      EXPECT_DOUBLE_EQ(ms::simulate(q, cq).makespan, m * (p * (F + B) + 2 * C)) << "p=" << p << " m=" << m;
    }
}

TEST(Links, EqualBoundariesAreTheOneLinkModel) {
  for (const auto& name : ms::schedule_names())
    for (int p : {2, 3, 4})
      for (int m : {4, 8}) {
        ms::Schedule s;
        try {
          s = ms::make_schedule(name, p, m);
        } catch (const ms::ScheduleError&) {
          continue;
        }
        const auto one = ms::simulate(s, uniform(s, 1, 2, 0.3));
        auto c = uniform(s, 1, 2, 7.0);  // comm is ignored where boundaries are given
        c.boundary.assign(static_cast<std::size_t>(s.num_stages() - 1), 0.3);
        const auto per = ms::simulate(s, c);
        EXPECT_EQ(one.makespan, per.makespan) << name << " p=" << p << " m=" << m;
        EXPECT_EQ(one.busy, per.busy) << name;
        c.boundary = {0.3};  // one entry: every boundary
        EXPECT_EQ(ms::simulate(s, c).makespan, one.makespan) << name;
      }
}

TEST(Links, ABoundaryInsideOneRankIsNeverCharged) {
  // ZB-V's V placement keeps stages p-1 and p on rank p-1: its boundary costs nothing.
  const int p = 4;
  const auto s = ms::make_schedule("zb-v", p, 8);
  ASSERT_EQ(s.stage_to_rank[p - 1], s.stage_to_rank[p]);
  auto c = ms::CostModel::uniform(s.num_stages(), 1, 0, 1, 1, 0);
  c.boundary.assign(static_cast<std::size_t>(s.num_stages() - 1), 0.25);
  const double base = ms::simulate(s, c).makespan;
  c.boundary[p - 1] = 1000;
  EXPECT_EQ(ms::simulate(s, c).makespan, base);
  c.boundary[0] = 1000;  // a boundary between two ranks is charged
  EXPECT_GT(ms::simulate(s, c).makespan, base + 999);
}

TEST(Links, BadBoundaryListsAreRefused) {
  const auto s = ms::make_schedule("1f1b", 4, 8);
  auto c = uniform(s, 1, 2);
  c.boundary = {0.1, 0.2};
  EXPECT_THROW(ms::simulate(s, c), ms::ScheduleError);
  c.boundary = {0.1, -0.2, 0.1};
  EXPECT_THROW(ms::simulate(s, c), ms::ScheduleError);
}

TEST(Links, SimulateTotalsIsSimulateBitForBit) {
  for (const auto& name : ms::schedule_names())
    for (int p : {1, 2, 3, 4, 6})
      for (int m : {1, 3, 8, 12})
        for (int v : {0, 2, 3}) {
          ms::Schedule s;
          try {
            s = ms::make_schedule(name, p, m, v);
          } catch (const ms::ScheduleError&) {
            continue;
          }
          const int S = s.num_stages();
          ms::CostModel c;
          for (int k = 0; k < S; ++k) {
            c.F.push_back(1 + 0.1 * k), c.I.push_back(0.9 + 0.05 * k), c.W.push_back(0.7 + 0.02 * (k % 3));
            c.act.push_back(1 + k % 2), c.act_work.push_back(0.5), c.W_tail.push_back(k == 1 ? 0.4 : 0.0);
          }
          c.boundary = uneven_links(S);
          c.action_overhead = 0.01, c.overlap_fb = 0.8, c.jitter_cv = 0.2, c.jitter_seed = 3;
          const auto full = ms::simulate(s, c);
          const auto lean = ms::simulate_totals(s, c);
          const std::string at =
              name + " p=" + std::to_string(p) + " m=" + std::to_string(m) + " v=" + std::to_string(s.v);
          EXPECT_EQ(full.makespan, lean.makespan) << at;
          EXPECT_EQ(full.bubble_fraction, lean.bubble_fraction) << at;
          EXPECT_EQ(full.busy, lean.busy) << at;
          EXPECT_EQ(full.end, lean.end) << at;
          EXPECT_EQ(full.activation_mem, lean.activation_mem) << at;
        }
}

TEST(Links, SimulateTotalsAtP128M1024IsFast) {
  // The sweep's largest case: one 1F1B simulation at p = 128, m = 1024 (262144 actions). The
  // full simulation takes ~0.2 s here; the sweeps need well under 0.1 s.
  const auto s = ms::make_schedule("1f1b", 128, 1024);
  auto c = uniform(s, 1, 2);
  c.boundary = uneven_links(128);
  const std::clock_t t0 = std::clock();  // CPU time: other users of the machine do not count
  const auto r = ms::simulate_totals(s, c);
  const double secs = double(std::clock() - t0) / CLOCKS_PER_SEC;
  EXPECT_GT(r.makespan, (1024 + 127) * 3.0);
  EXPECT_LT(secs, 0.1);
}
