// Text and JSON reports of a simulated schedule: makespan, bubble (simulated next to the
// closed form), per-rank busy/idle and memory. Shared by `minipipe schedule` and the runtime.
#pragma once

#include <optional>
#include <ostream>
#include <string>

#include "schedules/schedule.hpp"
#include "schedules/simulator.hpp"

namespace minipipe::sched {

// "loop", "v" or "custom" for the schedule's stage-to-rank map.
std::string describe_placement(const Schedule& schedule);

// Human-readable summary: one header block, then one line per rank.
void write_summary(const Schedule& schedule, const CostModel& cost, const SimResult& result,
                   std::optional<double> analytic, std::ostream& out);

// The same numbers as JSON: makespan, bubble fractions (simulated, analytic or null, interior),
// and per rank busy, idle, interior idle, peak in-flight, waiting for W, held and memory.
void write_json(const Schedule& schedule, const CostModel& cost, const SimResult& result,
                std::optional<double> analytic, std::ostream& out);

}  // namespace minipipe::sched
