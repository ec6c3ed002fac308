// Per-rank timelines of pipeline actions and their two pictures: an SVG and a Chrome trace.
// The simulator fills one with modelled times; the runtime fills one with measured times.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "schedules/action.hpp"

namespace minipipe::sched {

struct TimelineEvent {
  int rank = 0;
  double start = 0, end = 0;  // in Timeline::unit
  Op op = Op::F;              // F, B, I or W (an OVERLAP_F_B pair appears as two events)
  int stage = 0, microbatch = 0;
  bool overlapped = false;  // half of an OVERLAP_F_B pair
  std::string label{};      // non-empty: a span that is no compute action ("all-reduce"); op unused
};

struct Timeline {
  int p = 0;
  std::vector<TimelineEvent> events;
  std::string title;
  std::string unit = "ms";      // what one time unit is, for axis labels
  double us_per_unit = 1000.0;  // Chrome traces count microseconds
};

// One row per rank, F/B/I/W in distinct colours (later chunks lighter), micro-batch numbers in
// the boxes, idle time left as grey background, a time axis and a legend.
void write_svg(const Timeline& timeline, std::ostream& out);

// Chrome trace-event JSON ("X" events, one thread per rank) that Perfetto and chrome://tracing
// open directly.
void write_chrome_trace(const Timeline& timeline, std::ostream& out);

}  // namespace minipipe::sched
