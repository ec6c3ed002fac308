// ZB-V (Qi et al. 2023, "Zero Bubble Pipeline Parallelism", section 6): two chunks per rank in V
// placement, split backward; small cases are searched around the construction (capped.hpp).
#include "schedules/variant.hpp"
#include "schedules/variants/capped.hpp"
#include "schedules/variants/constructions.hpp"

namespace minipipe::sched::gen {

// Rank r holds stages r and 2p-1-r, F = I = W assumed; warm-up fills chunk 0 with 2(p-r)-1
// forwards, then mixes in chunk 1, steady state alternates F/I/W on both chunks, cool-down runs
// the remaining I's and drains W's.
Rankwise gen_zbv(int p, int m) {
  return rankwise("zb-v", p, m, 2, Placement::v, [p, m](int r, std::vector<Action>& row) {
    const int s0 = r, s1 = 2 * p - 1 - r;
    int f0 = 0, f1 = 0, b0 = 0, b1 = 0;
    auto F = [&](int st, int& c) { row.push_back(Action::make(Op::F, st, c++)); };
    auto IW = [&](int st, int& c) {
      row.push_back(Action::make(Op::I, st, c));
      row.push_back(Action::make(Op::W, st, c));
      ++c;
    };
    for (int k = 0; k < 2 * (p - r) - 1; ++k) F(s0, f0);
    for (int k = 0; k < r; ++k) {
      F(s1, f1);
      F(s0, f0);
    }
    for (int k = 0; k < p - r; ++k) {
      F(s1, f1);
      IW(s1, b1);
    }
    while (f1 < f0 || f0 < m) {
      if (f0 < m) F(s0, f0);
      IW(s0, b0);
      F(s1, f1);
      IW(s1, b1);
    }
    // Cool-down: input gradients first (they are on the critical path), weights after.
    int w0 = b0, w1 = b1;
    for (int k = 0; k < r; ++k) {
      row.push_back(Action::make(Op::I, s0, b0++));
      row.push_back(Action::make(Op::I, s1, b1++));
    }
    for (int k = 0; k < p - r; ++k) {
      row.push_back(Action::make(Op::I, s0, b0++));
      row.push_back(Action::make(Op::W, s0, w0++));
    }
    while (w1 < b1) row.push_back(Action::make(Op::W, s1, w1++));
    while (w0 < b0) row.push_back(Action::make(Op::W, s0, w0++));
  });
}

Rankwise gen_zbv_any_m(int p, int m) {
  return m >= 2 * p - 1 ? gen_zbv(p, m) : keep_microbatches(gen_zbv(p, 2 * p - 1), m);
}

// Searched (a list scheduling at no more than the construction's 2p chunk-micro-batches is kept
// where faster) when small; else the construction, streamed rank by rank.
Plan zb_v(const VariantCall& c) {
  if (searched(c.p, c.m, 2)) return {gen_v_capped(c.name, c.p, c.m, 2 * c.p, c.opt), {}};
  return {std::nullopt, gen_zbv_any_m(c.p, c.m)};
}

// Only the fill of the first forward, per chunk; the interior bubble is 0.
std::optional<double> zb_v_bubble(const BubbleCase& c) {
  if (c.F != c.I || c.F != c.W) return std::nullopt;
  const double p = c.p, m = c.m, Bsplit = c.I + c.W;
  const double b = (p - 1) * c.F;
  return b / (2 * m * (c.F + Bsplit) + b);
}

}  // namespace minipipe::sched::gen
