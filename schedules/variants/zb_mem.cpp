// zb-mem: one chunk per rank, split backward, at most pipeline.memory_cap stored micro-batches per
// rank (default p, 1F1B's); ZB-H1 and ZB-H2 where they fit, else the list scheduling (capped.hpp).
#include "schedules/variant.hpp"
#include "schedules/variants/capped.hpp"

#include <algorithm>

namespace minipipe::sched::gen {

// Caps above m micro-batches (any int is allowed) hold no more than m.
Plan zb_mem(const VariantCall& c) {
  const int cap = std::min(c.opt.memory_cap == 0 ? c.p : c.opt.memory_cap, c.m);
  return {gen_zb_capped(c.name, c.p, c.m, cap, c.opt), {}};
}

}  // namespace minipipe::sched::gen
