// Import and export of the CSV schedule format of PyTorch's torch.distributed.pipelining
// (_dump_csv/_load_csv): one row per rank, one action per cell, an empty cell is an idle slot.
#pragma once

#include <istream>
#include <ostream>
#include <string>

#include "schedules/schedule.hpp"

namespace minipipe::sched {

// Reads compute-only or lowered (SEND/RECV) schedules. p is the number of rows unless p_hint
// is given; the number of stages and m come from the largest indices; v = stages / p; two model
// copies (chains = 2, DualPipe) when even micro-batches use only the first half of the stages and
// odd ones only the second (m = 1 then shows one copy: a one-copy schedule of p*v/2 stages). The
// stage-to-rank map comes from `placement`, or from the rows themselves when Inferred. The
// result has passed validate(). A malformed cell is reported with its row, column (both from
// 1) and text; `source` names the file in messages and in the schedule name ("csv:<source>").
Schedule read_csv(std::istream& in, int p_hint = 0, Placement placement = Placement::inferred,
                  const std::string& source = "csv");
Schedule read_csv_file(const std::string& path, int p_hint = 0, Placement placement = Placement::inferred);

// compact: each rank's actions back to back, as a schedule is stored. aligned: compute actions
// placed on the unit-step grid with empty cells for idle steps, as PyTorch's own generators
// dump them (communication actions are left out of this layout).
enum class CsvLayout { compact, aligned };

void write_csv(const Schedule& schedule, std::ostream& out, CsvLayout layout = CsvLayout::compact);

}  // namespace minipipe::sched
