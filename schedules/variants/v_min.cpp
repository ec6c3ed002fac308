// V-Min ("Pipeline Parallelism with Controllable Memory", Qi et al. 2024, arXiv 2405.15362): V
// placement, split backward, list-scheduled under (p+4)/3 stored micro-batches per rank.
#include "schedules/variant.hpp"
#include "schedules/variants/capped.hpp"

namespace minipipe::sched::gen {

// The cap of that paper (and of its table in sail-sg's repository) in chunk-micro-batches, half a
// micro-batch each: a third of 1F1B's p.
Plan v_min(const VariantCall& c) {
  return {gen_v_capped(c.name, c.p, c.m, 2 * ((c.p + 4) / 3), c.opt), {}};
}

}  // namespace minipipe::sched::gen
