// The table of schedule variants: one row per name with everything the rest of miniPipe asks
// about a variant (v rule, copies, knobs, generator, closed form, help text). Rows: variants.cpp.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "schedules/schedule.hpp"
#include "schedules/variants/rank_rows.hpp"

namespace minipipe::sched {

// The chunks per rank (v) a variant has a placement for.
enum class VRule { one, two, at_least_one, at_least_two };

// Deck and CLI knobs a variant reads (bit set); a knob set away from its default while no listed
// schedule reads it is refused by the deck checks.
enum Knob : unsigned { kNoKnobs = 0, kGroup = 1u << 0, kMemoryCap = 1u << 1 };

// How a variant is built: rank by rank (make_rank_programs streams it unless it is small enough to
// be searched), whole, or whole by list scheduling under a memory cap (schedules/greedy.hpp).
enum class Build { rank_by_rank, whole, list_scheduled };

// Whether its backward passes are full (B), split into I and W, or both (split in the tail only).
enum class Backward { full, split, mixed };

// What a generator is asked for: the variant's name, p, m, the checked v and the knobs.
struct VariantCall {
  const std::string& name;
  int p, m, v;
  const ScheduleOptions& opt;
};

// What a generator returns: the whole schedule, or its rows to be built one rank at a time.
struct Plan {
  std::optional<Schedule> whole;
  gen::Rankwise rows;
};
using Generator = Plan (*)(const VariantCall&);

// The uniform costs a closed-form bubble is evaluated at (comm = 0; the simulator checked that).
struct BubbleCase {
  int p, m, v, group;
  double F, B, I, W;  // B: a full backward's cost (I + W unless given)
  double overlap;     // an OVERLAP_F_B pair's F+B factor
};
// The bubble fraction (idle over p x makespan) where the literature gives one, else nullopt.
using ClosedForm = std::optional<double> (*)(const BubbleCase&);

struct VariantSpec {
  const char* name;
  VRule v_rule;
  const char* v_note;  // why, appended to a refused v ("" = none)
  int default_v;
  Placement placement;  // loop or v
  int copies;           // copies of the model the micro-batches flow through (Schedule::chains)
  unsigned knobs;       // Knob bits
  Generator generate;
  Build build;
  Backward backward;
  // The m from which the warm-up runs in full: warmup_per_p * p + warmup_plus (below it the
  // warm-up is cut short and the closed form does not hold).
  int warmup_per_p, warmup_plus;
  const char* formula;       // the closed form with its conditions ("" = none)
  ClosedForm bubble;         // nullptr = none
  const char* bubble_brief;  // the closed form in a few words (README column)
  const char* summary;       // one line (README column)
  const char* limits;        // placement, allowed v and m, and why (`minipipe schedule --list`)
};

// Every variant in the order of schedule_names().
const std::vector<VariantSpec>& variant_table();

// The row of `name`, or nullptr (a CSV schedule's name, say).
const VariantSpec* find_variant_spec(const std::string& name);

// The row of `name`; throws ScheduleError naming every allowed name.
const VariantSpec& variant_spec(const std::string& name);

// The m from which the variant's warm-up runs in full at p ranks.
int full_warmup_m(const VariantSpec& spec, int p);

// "v = 1", "v = 2", "v >= 1", "v >= 2".
std::string v_rule_text(VRule rule);

bool v_allowed(VRule rule, int v);

// The text of the table (variant_docs.cpp): what help, `minipipe schedule --list` and the README
// print. Names in table order, joined by ", ".
std::string names_reading(Knob knob);
std::string names_with_default_v(int v);
// One entry per variant: its name, constraints and closed form (`minipipe schedule --list`).
std::string variant_list_text();
// The README's schedule table (Markdown), the CSV import as its last row.
std::string variant_markdown_table();

}  // namespace minipipe::sched
