// v-mem: V placement, split backward, at most pipeline.memory_cap stored micro-batches per rank
// (default p; a chunk-micro-batch counts half): the fastest V order found under the cap (capped.hpp).
#include "schedules/variant.hpp"
#include "schedules/variants/capped.hpp"

#include <algorithm>

namespace minipipe::sched::gen {

// Caps above m micro-batches (any int is allowed) hold no more than m; the search counts
// chunk-micro-batches, two to a micro-batch.
Plan v_mem(const VariantCall& c) {
  const int cap = std::min(c.opt.memory_cap == 0 ? c.p : c.opt.memory_cap, c.m);
  return {gen_v_capped(c.name, c.p, c.m, 2 * cap, c.opt), {}};
}

}  // namespace minipipe::sched::gen
