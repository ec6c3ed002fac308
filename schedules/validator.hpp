// The validator, the communication-lowering pass and the rank-by-step grid they print.
// Every schedule, generated or loaded from CSV, passes validate() before anything runs it.
#pragma once

#include <string>
#include <vector>

#include "schedules/schedule.hpp"

namespace minipipe::sched {

// Throws ScheduleError with the rank-by-step grid and the offending cell marked for: a cell out
// of range or on the wrong rank; a missing or duplicated action; B/I before its F; W before
// its I; B mixed with I/W for one (stage, micro-batch); a misplaced or missing SEND/RECV in a
// lowered schedule; and any order that deadlocks once communication is added. Works on
// compute-only and on lowered schedules.
void validate(const Schedule& schedule);

// validate() without the deadlock check: for callers (the simulator) that execute the
// schedule anyway and call validate() for the full report only when execution stalls.
void validate_structure(const Schedule& schedule);

// Adds SEND_F after F(s,mb) when rank(s+1) != rank(s), RECV_F(s,mb) before F(s,mb) when
// rank(s-1) != rank(s), SEND_B after B/I(s,mb) when rank(s-1) != rank(s), and RECV_B(s,mb)
// before B/I(s,mb) when rank(s+1) != rank(s). Stages on one rank hand over locally. A schedule
// that already holds communication actions is returned unchanged (the pass is idempotent).
Schedule lower_communication(const Schedule& schedule);

// The order the MPI runtime executes: a RECV moves back past up to `lookahead` compute actions
// (2: a receive sitting between compute actions c_k and c_k+1 is posted right before c_k-1,
// before c_0 when there is none), so the transfer overlaps the compute before its consumer.
// RECVs before a rank's first compute stay. Apply once, to a lowered schedule, before
// validate() and simulate(): they then see the order that runs.
Schedule post_receives_early(const Schedule& lowered, int lookahead = 2);

// The same schedule without SEND/RECV actions.
Schedule strip_communication(const Schedule& schedule);

// A cell to point at in format_grid. step == size of that rank's list marks a missing action,
// shown as an extra cell holding `missing`.
struct GridMark {
  int rank = -1;
  int step = -1;
  std::string missing;
};

// Rows are ranks, columns the position in each rank's list. Large grids are cut to a window
// around the mark (or the first columns) so an error message stays readable.
std::string format_grid(const Schedule& schedule, const GridMark& mark = {}, int max_columns = 24, int max_rows = 24);

}  // namespace minipipe::sched
