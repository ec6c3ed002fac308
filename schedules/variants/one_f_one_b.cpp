// 1F1B (PipeDream-Flush): p-1-r warm-up forwards, then one forward and one backward at a time,
// then the remaining backwards; at most p-r micro-batches are in flight on rank r.
#include "schedules/variant.hpp"
#include "schedules/variants/constructions.hpp"

#include <algorithm>

namespace minipipe::sched::gen {

Rankwise gen_1f1b(int p, int m) {
  return rankwise("1f1b", p, m, 1, Placement::loop, [p, m](int r, std::vector<Action>& row) {
    RankBuilder rb(row);
    const int warmup = std::min(p - 1 - r, m);
    for (int k = 0; k < warmup; ++k) rb.forward(r);
    while (rb.forwards_done(r) < m) {
      rb.forward(r);
      rb.full_backward(r);
    }
    while (rb.backwards_done(r) < m) rb.full_backward(r);
  });
}

Plan one_f_one_b(const VariantCall& c) {
  return {std::nullopt, gen_1f1b(c.p, c.m)};
}

}  // namespace minipipe::sched::gen
