// The list-scheduled variants: V-Half and V-Min hold the activation memory of the table in
// "Pipeline Parallelism with Controllable Memory" (arXiv 2405.15362; sail-sg's repository):
// (p+2)/2 and (p+4)/3 micro-batches against 1F1B's p; zb-mem keeps its cap and is never slower
// than ZB-H1 where ZB-H1 fits under the same cap.
#include <gtest/gtest.h>

#include <algorithm>

#include "schedules/schedules.hpp"

namespace ms = minipipe::sched;

namespace {

template <class T>
T max_of(const std::vector<T>& v) {
  return *std::max_element(v.begin(), v.end());
}

ms::SimResult run(const ms::Schedule& s, double f = 1, double i = 1, double w = 1) {
  return ms::simulate(s, ms::CostModel::uniform(s.num_stages(), f, 0, i, w, 0));
}

}  // namespace

TEST(MemoryCapped, VHalfAndVMinHoldThePapersActivationMemory) {
  for (int p = 1; p <= 8; ++p)
    for (int m : {1, 2, p, 2 * p, 4 * p + 1}) {
      const auto h = run(ms::make_schedule("v-half", p, m)), n = run(ms::make_schedule("v-min", p, m));
      // Micro-batch units: a chunk-micro-batch is half of a rank's share of the model.
      EXPECT_LE(max_of(h.activation_mem), (p + 2) / 2) << "v-half p=" << p << " m=" << m;
      EXPECT_LE(max_of(n.activation_mem), (p + 4) / 3) << "v-min p=" << p << " m=" << m;
      // Enough micro-batches to fill the cap: V-Min holds the table's number exactly (V-Half may
      // hold less where a tighter order is as fast: at p = 8 it picks V-Min's).
      if (m >= 2 * p) {
        EXPECT_DOUBLE_EQ(max_of(n.activation_mem), std::max(1, (p + 4) / 3)) << "v-min p=" << p << " m=" << m;
      }
    }
}

// At p = 4 (table: 1F1B 4, V-Half 3, V-Min 2 micro-batches), same m.
TEST(MemoryCapped, MemoryOrdering1F1BOverVHalfOverVMin) {
  for (int p : {4})
    for (int m : {2 * p, 4 * p, 8 * p}) {
      const double f1 = max_of(run(ms::make_schedule("1f1b", p, m)).activation_mem);
      const double vh = max_of(run(ms::make_schedule("v-half", p, m)).activation_mem);
      const double vm = max_of(run(ms::make_schedule("v-min", p, m)).activation_mem);
      EXPECT_EQ(f1, p);
      EXPECT_EQ(vh, (p + 2) / 2);
      EXPECT_EQ(vm, (p + 4) / 3);
      EXPECT_GT(f1, vh);
      EXPECT_GT(vh, vm);
      // Peak stored chunk-micro-batches (what the runtime's activation store holds), same order.
      EXPECT_GT(2 * max_of(run(ms::make_schedule("1f1b", p, m)).peak_held),
                max_of(run(ms::make_schedule("v-half", p, m)).peak_held));
    }
}

// The paper's bubbles with F = I = W: 1F1B ~ p/m, V-Min ~ 2p/3m, V-Half ~ p/2m, ZB-V 0. Here:
// both lie between ZB-V's and 1F1B's at even p >= 4 and m >= 4p, and at p = 4, m = 32 they are
// 1/2 and 2/3 of 1F1B's. (Odd p rounds the caps down; at p = 3, m = 12 V-Half loses to 1F1B.)
TEST(MemoryCapped, BubblesLieBetweenZBVAnd1F1B) {
  for (int p = 4; p <= 8; p += 2)
    for (int m : {4 * p, 8 * p}) {
      const double zv = run(ms::make_schedule("zb-v", p, m)).bubble_fraction;
      const double f1 = run(ms::make_schedule("1f1b", p, m)).bubble_fraction;
      for (const char* n : {"v-half", "v-min"}) {
        const double b = run(ms::make_schedule(n, p, m)).bubble_fraction;
        EXPECT_GE(b, zv) << n << " p=" << p << " m=" << m;
        EXPECT_LT(b, f1) << n << " p=" << p << " m=" << m;
      }
    }
  // The paper's ratios to 1F1B's bubble (about 1/2 and 2/3) are what its constructions reach;
  // the building-block orders offered beside them may only do better.
  const double f1 = run(ms::make_schedule("1f1b", 4, 32)).bubble_fraction;
  EXPECT_LE(run(ms::make_schedule("v-half", 4, 32)).bubble_fraction / f1, 0.5 + 0.05);
  EXPECT_LE(run(ms::make_schedule("v-min", 4, 32)).bubble_fraction / f1, 2.0 / 3 + 0.05);
}

TEST(MemoryCapped, ZBMemKeepsItsCapAndNeverLosesToZBH1) {
  const double fiw[][3] = {{1, 1, 1}, {1, 1.5, 0.5}, {2, 1, 1}, {1, 2, 1}};
  int compared = 0;
  for (const auto& c : fiw)
    for (int p = 1; p <= 5; ++p)
      for (int m = 1; m <= 12; ++m)
        for (int cap = 1; cap <= 2 * p; ++cap) {
          ms::ScheduleOptions opt;
          opt.memory_cap = cap;
          opt.F = {c[0]};
          opt.I = {c[1]};
          opt.W = {c[2]};
          const auto s = ms::make_schedule("zb-mem", p, m, 0, opt);
          ASSERT_NO_THROW(ms::validate(s));
          EXPECT_EQ(s.name, "zb-mem");
          const auto r = run(s, c[0], c[1], c[2]);
          EXPECT_LE(max_of(r.peak_held), cap) << "p=" << p << " m=" << m << " cap=" << cap;
          const auto h1 = run(ms::make_schedule("zb-h1", p, m), c[0], c[1], c[2]);
          if (max_of(h1.peak_held) <= cap) {
            EXPECT_LE(r.makespan, h1.makespan) << "p=" << p << " m=" << m << " cap=" << cap;
            ++compared;
          }
        }
  EXPECT_GT(compared, 500);
  // Its default cap is 1F1B's p, and a negative cap is refused by name.
  EXPECT_EQ(max_of(run(ms::make_schedule("zb-mem", 4, 16)).peak_held), 4);
  ms::ScheduleOptions bad;
  bad.memory_cap = -1;
  EXPECT_THROW(ms::make_schedule("zb-mem", 4, 8, 0, bad), ms::ScheduleError);
}

// Below 1F1B's memory zb-mem still runs, trading bubble for memory monotonically at m = 16.
TEST(MemoryCapped, ZBMemTradesBubbleForMemory) {
  double last = 1e300;
  for (int cap = 1; cap <= 7; ++cap) {
    ms::ScheduleOptions opt;
    opt.memory_cap = cap;
    const double t = run(ms::make_schedule("zb-mem", 4, 16, 0, opt)).makespan;
    EXPECT_LE(t, last) << "cap " << cap;
    last = t;
  }
  EXPECT_EQ(last, 16 * 3 + 3);  // ZB-H2's parallelogram at cap 2p-1 = 7: only the first fill
}
