// v-mem: a V-placement schedule under pipeline.memory_cap. It holds no more than its cap on any
// rank, takes p by default, does every rank's work, and is never slower than ZB-V where ZB-V fits.
#include <gtest/gtest.h>

#include <algorithm>

#include "schedules/schedules.hpp"

namespace ms = minipipe::sched;

namespace {

ms::SimResult run(const ms::Schedule& s) {
  return ms::simulate(s, ms::CostModel::uniform(s.num_stages(), 1, 0, 1, 1, 0));
}

double peak(const ms::SimResult& r) {
  return *std::max_element(r.activation_mem.begin(), r.activation_mem.end());
}

ms::ScheduleOptions capped(int cap) {
  ms::ScheduleOptions opt;
  opt.memory_cap = cap;
  return opt;
}

}  // namespace

TEST(ScheduleVMem, HoldsAtMostItsCapAndDoesAllTheWork) {
  for (int p = 1; p <= 5; ++p)
    for (int m : {1, p, 2 * p + 1})
      for (int cap = 2; cap <= p + 1; ++cap) {
        const std::string what = "p=" + std::to_string(p) + " m=" + std::to_string(m) + " cap=" + std::to_string(cap);
        const ms::Schedule s = ms::make_schedule("v-mem", p, m, 0, capped(cap));
        ASSERT_NO_THROW(ms::validate(s)) << what;
        EXPECT_EQ(s.v, 2) << what;
        EXPECT_EQ(s.stage_to_rank, ms::v_placement(p, 2)) << what;
        const ms::SimResult r = run(s);
        // Micro-batch units, a chunk-micro-batch counting half.
        EXPECT_LE(peak(r), cap + 1e-9) << what;
        // F + I + W of 1 each on two chunks per micro-batch, on every rank: 6m units of work.
        for (int k = 0; k < p; ++k) EXPECT_DOUBLE_EQ(r.busy[k], 6.0 * m) << what << " rank " << k;
        // One rank has nothing to wait for: it runs back to back.
        if (p == 1) {
          EXPECT_DOUBLE_EQ(r.makespan, 6.0 * m) << what;
        }
      }
}

TEST(ScheduleVMem, DefaultCapIsP) {
  for (int p = 1; p <= 5; ++p)
    for (int m : {2, 2 * p + 1}) {
      const ms::Schedule d = ms::make_schedule("v-mem", p, m), c = ms::make_schedule("v-mem", p, m, 0, capped(p));
      EXPECT_EQ(d.ranks, c.ranks) << "p=" << p << " m=" << m;
    }
}

// ZB-V holds about p micro-batches (2p chunk-micro-batches); where it fits the cap, v-mem is at
// least as fast.
TEST(ScheduleVMem, NeverSlowerThanZbVWhereZbVFits) {
  for (int p = 1; p <= 5; ++p)
    for (int m : {p, 2 * p - 1, 3 * p}) {
      const ms::SimResult zbv = run(ms::make_schedule("zb-v", p, m));
      for (int cap = 1; cap <= p + 1; ++cap) {
        if (peak(zbv) > cap) continue;
        const ms::SimResult r = run(ms::make_schedule("v-mem", p, m, 0, capped(cap)));
        EXPECT_LE(r.makespan, zbv.makespan) << "p=" << p << " m=" << m << " cap=" << cap;
      }
    }
}

TEST(ScheduleVMem, RefusesOtherVAndANegativeCap) {
  EXPECT_THROW(ms::make_schedule("v-mem", 4, 8, 1), ms::ScheduleError);
  try {
    ms::make_schedule("v-mem", 4, 8, 0, capped(-1));
    FAIL() << "memory_cap = -1 must be refused";
  } catch (const ms::ScheduleError& e) {
    EXPECT_NE(std::string(e.what()).find("memory_cap = -1 is not allowed"), std::string::npos) << e.what();
  }
}

// A cap under which the search finds no order is refused by name, with p, m and the cap, never
// returned as an empty schedule (which read "p = 0 is not allowed").
TEST(ScheduleVMem, NoOrderUnderTheCapIsNamed) {
  try {
    const ms::Schedule s = ms::make_schedule("v-mem", 4, 4, 0, capped(1));
    EXPECT_GE(s.p, 4) << "a schedule that is returned must be a real one";
    EXPECT_LE(peak(run(s)), 1.0 + 1e-9);
  } catch (const ms::ScheduleError& e) {
    const std::string what = e.what();
    for (const char* part : {"'v-mem'", "p = 4", "m = 4", "memory cap of 1", "allowed"})
      EXPECT_NE(what.find(part), std::string::npos) << "'" << part << "' missing from: " << what;
  }
}
