// The schedule variants, one row each: the only place a variant is named. Help text, deck checks,
// the simulator's closed forms, the tests, the README's table and the demo deck read these rows.
#include "schedules/variant.hpp"

namespace minipipe::sched {

// The generators and closed forms, one file each under schedules/variants/.
namespace gen {
Plan sequential(const VariantCall&);
Plan gpipe(const VariantCall&);
Plan one_f_one_b(const VariantCall&);
Plan interleaved(const VariantCall&);
Plan looped_bfs(const VariantCall&);
Plan zb_h1(const VariantCall&);
Plan zb_h2(const VariantCall&);
Plan zb_v(const VariantCall&);
Plan dualpipev(const VariantCall&);
Plan v_half(const VariantCall&);
Plan v_min(const VariantCall&);
Plan v_mem(const VariantCall&);
Plan zb_mem(const VariantCall&);
Plan dualpipe(const VariantCall&);
std::optional<double> sequential_bubble(const BubbleCase&);
std::optional<double> fill_drain_bubble(const BubbleCase&);
std::optional<double> interleaved_bubble(const BubbleCase&);
std::optional<double> looped_bfs_bubble(const BubbleCase&);
std::optional<double> zb_h1_bubble(const BubbleCase&);
std::optional<double> zb_h2_bubble(const BubbleCase&);
std::optional<double> zb_v_bubble(const BubbleCase&);
std::optional<double> dualpipev_bubble(const BubbleCase&);
std::optional<double> dualpipe_bubble(const BubbleCase&);
}  // namespace gen

// Columns (VariantSpec): name; v rule, why, default v; placement; model copies; knobs; generator;
// build; backward; full warm-up from m = a*p + b; closed form, its function; README bubble and
// summary; constraints (`minipipe schedule --list`).
const std::vector<VariantSpec>& variant_table() {
  // Built on first use: other files' static initializers may ask for it.
  static const std::vector<VariantSpec> table = {
      {"sequential", VRule::one, "", 1, Placement::loop, 1, kNoKnobs, gen::sequential, Build::rank_by_rank,
       Backward::full, 0, 1, "(p-1)/p  [uniform stage costs, comm = 0]", gen::sequential_bubble, "(p-1)/p",
       "no pipelining; the reference layout",
       "v = 1; any p >= 1, m >= 1; no pipelining: one micro-batch in the pipe at a time"},
      {"gpipe", VRule::one, "", 1, Placement::loop, 1, kNoKnobs, gen::gpipe, Build::rank_by_rank, Backward::full, 0, 1,
       "(p-1)/(m+p-1)  [uniform stage costs, comm = 0]", gen::fill_drain_bubble, "(p-1)/(m+p-1)",
       "fill-drain; holds m micro-batches",
       "v = 1; any p >= 1, m >= 1; all forwards then all backwards (holds m micro-batches)"},
      {"1f1b", VRule::one, "", 1, Placement::loop, 1, kNoKnobs, gen::one_f_one_b, Build::rank_by_rank, Backward::full,
       0, 1, "(p-1)/(m+p-1)  [uniform stage costs, comm = 0]", gen::fill_drain_bubble, "(p-1)/(m+p-1)",
       "warm-up p-1-r forwards; holds at most p-r", "v = 1; any p >= 1, m >= 1; warm-up p-1-r forwards on rank r"},
      {"interleaved-1f1b", VRule::at_least_two, "v = 1 is plain 1f1b", 2, Placement::loop, 1, kGroup, gen::interleaved,
       Build::rank_by_rank, Backward::full, 0, 1,
       "(p-1)/(v*m+p-1)  [uniform stage costs, comm = 0, group = p, m a multiple of p]", gen::interleaved_bubble,
       "(p-1)/(vm+p-1) at group = p",
       "Megatron's interleaving; `pipeline.group` micro-batches per group, p (depth-first) up to m (breadth-first)",
       "v >= 2 chunks, looped placement (stage s on rank s%p); any m >= 1: micro-batches go through "
       "the chunks in groups of pipeline.group (default p; the last group takes the remainder)"},
      {"looped-bfs", VRule::at_least_one, "", 2, Placement::loop, 1, kNoKnobs, gen::looped_bfs, Build::rank_by_rank,
       Backward::full, 1, 0, "(p-1)/(v*m+p-1)  [uniform stage costs, comm = 0, m >= p]", gen::looped_bfs_bubble,
       "(p-1)/(vm+p-1), m >= p", "breadth-first; holds m micro-batches",
       "v >= 1 chunks, looped placement; any m >= 1 (bubble closed form needs m >= p); holds "
       "m micro-batches like GPipe"},
      {"zb-h1", VRule::one, "", 1, Placement::loop, 1, kNoKnobs, gen::zb_h1, Build::rank_by_rank, Backward::split, 1, 0,
       "b/(m(F+B)+b), b = (p-1)(F+B-2W), B = I+W  [uniform stage costs, comm = 0, W <= F, W <= I, m >= p]",
       gen::zb_h1_bubble, "(p-1)(F+B-2W) per step", "zero-bubble H1: 1F1B's memory",
       "v = 1, split backward (I/W); any m >= 1 (m < p cuts 1F1B's warm-up of p-r forwards short)"},
      {"zb-h2", VRule::one, "", 1, Placement::loop, 1, kNoKnobs, gen::zb_h2, Build::rank_by_rank, Backward::split, 2,
       -1,
       "b/(m(F+B)+b), b = (p-1)F: only the fill of the first forward; interior bubble 0  [uniform stage costs, comm = "
       "0, "
       "F = I = W, m >= 2p-1]",
       gen::zb_h2_bubble, "(p-1)F per step", "zero-bubble H2: no interior bubble",
       "v = 1, split backward (I/W); any m >= 1 (m < 2p-1 cuts the warm-up of 2(p-r)-1 forwards short)"},
      {"zb-v", VRule::two, "", 2, Placement::v, 1, kNoKnobs, gen::zb_v, Build::rank_by_rank, Backward::split, 2, -1,
       "b/(2m(F+B)+b), b = (p-1)F per chunk: only the fill; interior bubble 0  [uniform stage costs, comm = 0, F = I = "
       "W, m >= 2p-1]",
       gen::zb_v_bubble, "(p-1)F per chunk", "zero-bubble V",
       "v = 2, V placement (rank r holds stages r and 2p-1-r), split backward; any m >= 1 (m < 2p-1: "
       "the m = 2p-1 order restricted to m micro-batches)"},
      {"dualpipev", VRule::two, "", 2, Placement::v, 1, kNoKnobs, gen::dualpipev, Build::rank_by_rank, Backward::mixed,
       2, 0,
       "b/(2m(F+B)+b), b = (p-1)(F&B+B-3W) with F&B = F+B (DualPipe's claim)  [uniform stage costs, comm = 0, F = I = "
       "W, "
       "overlap = 1, m >= 2p]",
       gen::dualpipev_bubble, "(p-1)(F&B+B-3W)", "DualPipe cut in half; overlapped F&B pairs",
       "v = 2, V placement (rank r holds stages r and 2p-1-r), OVERLAP_F_B pairs in steady state, "
       "I/W split in the tail; any m >= 1 (m < 2p: the m = 2p order restricted to m micro-batches)"},
      {"v-half", VRule::two, "", 2, Placement::v, 1, kNoKnobs, gen::v_half, Build::list_scheduled, Backward::split, 0,
       1, "", nullptr, "about half of 1F1B's", "memory-controlled V: (p+2)/2 micro-batches per rank, half of 1F1B's",
       "v = 2, V placement, split backward; any p, m >= 1; list-scheduled under a cap of (p+2)/2 stored "
       "micro-batches per rank (half of 1F1B's p)"},
      {"v-min", VRule::two, "", 2, Placement::v, 1, kNoKnobs, gen::v_min, Build::list_scheduled, Backward::split, 0, 1,
       "", nullptr, "about 2/3 of 1F1B's", "memory-controlled V: (p+4)/3 micro-batches per rank, a third of 1F1B's",
       "v = 2, V placement, split backward; any p, m >= 1; list-scheduled under a cap of (p+4)/3 stored "
       "micro-batches per rank (a third of 1F1B's p)"},
      {"v-mem", VRule::two, "", 2, Placement::v, 1, kMemoryCap, gen::v_mem, Build::list_scheduled, Backward::split, 0,
       1, "", nullptr, "simulated",
       "V-shape order planned under `pipeline.memory_cap` stored micro-batches (default p; a chunk counts half)",
       "v = 2, V placement, split backward; any p, m >= 1; at most pipeline.memory_cap stored micro-batches "
       "per rank (default p; a chunk-micro-batch counts half): the fastest list scheduling under the cap, or "
       "ZB-V's construction where it fits"},
      {"zb-mem", VRule::one, "", 1, Placement::loop, 1, kMemoryCap, gen::zb_mem, Build::list_scheduled, Backward::split,
       0, 1, "", nullptr, "simulated",
       "zero-bubble order planned under `pipeline.memory_cap` stored micro-batches (default p); never slower than "
       "ZB-H1 where ZB-H1 fits the cap",
       "v = 1, split backward; any p, m >= 1; at most pipeline.memory_cap stored micro-batches per rank "
       "(default p, 1F1B's); never slower in simulation than ZB-H1 where ZB-H1 fits the cap"},
      {"dualpipe", VRule::two, "one part of each of the two model copies per rank", 2, Placement::v, 2, kNoKnobs,
       gen::dualpipe, Build::whole, Backward::mixed, 2, 0,
       "b/(m(F+B)+b), b = (p/2-1)(F&B+B-3W) with F&B = F+B (DualPipe's table)  [uniform stage costs, comm = 0, F = I = "
       "W, overlap = 1, p even, m even, m >= 2p]",
       gen::dualpipe_bubble, "(p/2-1)(F&B+B-3W), p even",
       "DeepSeek's bidirectional DualPipe: even micro-batches enter at rank 0, odd ones at rank p-1; the copies' "
       "gradients are summed exactly before the step; odd p: each copy's 1F1B merged by time "
       "([docs/dualpipe.md](docs/dualpipe.md))",
       "v = 2, two copies of the model (rank r holds copy 0's part r and copy 1's part p-1-r; even "
       "micro-batches enter at rank 0, odd ones at rank p-1; the copies' gradients are summed before the "
       "step); any p, m >= 1: p even: DeepSeek's phases (OVERLAP_F_B pairs, I/W in the tail), for m < 2p or "
       "m odd the order of the next even m >= 2p restricted to m; p odd (no DeepSeek construction): "
       "each copy's 1F1B, merged on every rank in the order of their times"},
  };
  return table;
}

}  // namespace minipipe::sched
