// ZB-H1 and ZB-H2 (Qi et al. 2023, "Zero Bubble Pipeline Parallelism", section 2): one chunk per
// rank, backward split into I and W; small cases are searched around the construction (capped.hpp).
#include "schedules/variant.hpp"
#include "schedules/variants/capped.hpp"
#include "schedules/variants/constructions.hpp"

#include <algorithm>

namespace minipipe::sched::gen {

// Rank r keeps up to `deferred` weight passes pending so its I passes run earlier, and the
// postponed W passes fill the cool-down. ZB-H1 keeps 1F1B's warm-up (p-r forwards) and defers r;
// ZB-H2 warms up with 2(p-r)-1 forwards and defers 2r, which turns the pipeline into a
// parallelogram with no idle time between a rank's first and last action.
Rankwise gen_zero_bubble_h(const std::string& name, int p, int m, bool h2) {
  return rankwise(name, p, m, 1, Placement::loop, [p, m, h2](int r, std::vector<Action>& row) {
    RankBuilder rb(row);
    const int warmup = std::min(h2 ? 2 * (p - r) - 1 : p - r, m);
    const std::size_t deferred = static_cast<std::size_t>(h2 ? 2 * r : r);
    for (int k = 0; k < warmup; ++k) rb.forward(r);
    while (rb.backwards_done(r) < m) {
      rb.input_backward(r);
      if (rb.pending_weights() > deferred) rb.weight();
      if (rb.forwards_done(r) < m) rb.forward(r);
    }
    while (rb.weight()) {
    }
  });
}

// Searched around the paper's construction (a list scheduling is kept where it is faster at no
// more memory: 1F1B's p micro-batches for H1, 2p-1 for H2); too large to search: the
// construction, streamed rank by rank.
Plan zb_h1(const VariantCall& c) {
  if (searched(c.p, c.m, 1)) return {gen_zb_capped(c.name, c.p, c.m, c.p, c.opt), {}};
  return {std::nullopt, gen_zero_bubble_h(c.name, c.p, c.m, false)};
}

Plan zb_h2(const VariantCall& c) {
  if (searched(c.p, c.m, 1)) return {gen_zb_capped(c.name, c.p, c.m, 2 * c.p - 1, c.opt), {}};
  return {std::nullopt, gen_zero_bubble_h(c.name, c.p, c.m, true)};
}

std::optional<double> zb_h1_bubble(const BubbleCase& c) {
  if (c.W > c.F || c.W > c.I) return std::nullopt;
  const double p = c.p, m = c.m, Bsplit = c.I + c.W;
  const double b = (p - 1) * (c.F + Bsplit - 2 * c.W);
  return b / (m * (c.F + Bsplit) + b);
}

// Only the fill of the first forward; the interior bubble is 0.
std::optional<double> zb_h2_bubble(const BubbleCase& c) {
  if (c.F != c.I || c.F != c.W) return std::nullopt;
  const double p = c.p, m = c.m, Bsplit = c.I + c.W;
  const double b = (p - 1) * c.F;
  return b / (m * (c.F + Bsplit) + b);
}

}  // namespace minipipe::sched::gen
