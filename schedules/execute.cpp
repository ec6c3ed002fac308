// execute(): the shared event loop (engine.hpp) over a Schedule's rows with the dense table that
// lets the validator name any missing action; a whole p=64, m=512 schedule takes milliseconds.
#include "schedules/execute.hpp"

#include "schedules/engine.hpp"

namespace minipipe::sched {

bool needs_comm(const Schedule& s, Op op, int stage) {
  const auto& map = s.stage_to_rank;
  switch (op) {
    case Op::SEND_F:
    case Op::RECV_B:
      return !s.is_last_stage(stage) && map[stage + 1] != map[stage];
    case Op::RECV_F:
    case Op::SEND_B:
      return !s.is_first_stage(stage) && map[stage - 1] != map[stage];
    default:
      return false;
  }
}

Execution execute(const Schedule& s, const std::function<double(const Action&)>& duration, double comm_latency) {
  return execute(s, duration, comm_latency, {});
}

Execution execute(const Schedule& s, const std::function<double(const Action&)>& duration, double comm_latency,
                  const std::vector<double>& boundary) {
  const int p = s.p, S = s.num_stages(), m = s.m;
  // Which (stage, micro-batch) use split backward, so a missing "backward of the next stage"
  // is reported with the op the schedule actually contains.
  std::vector<char> split(static_cast<std::size_t>(S) * m, 0);
  for (const auto& row : s.ranks)
    for (const auto& a : row) {
      if (a.op == Op::I) split[static_cast<std::size_t>(a.stage) * m + a.microbatch] = 1;
      for (const auto& sub : a.sub)
        if (sub.op == Op::I) split[static_cast<std::size_t>(sub.stage) * m + sub.microbatch] = 1;
    }
  engine::Inputs<engine::KeyTable> inputs(engine::KeyTable(S, m), s.stage_to_rank, m, s.chains, s.is_lowered(),
                                          comm_latency, boundary, std::move(split));
  engine::RowsSource rows(s.ranks);

  Execution ex;
  ex.start.resize(p);
  ex.end.resize(p);
  for (int r = 0; r < p; ++r) {
    ex.start[r].assign(s.ranks[r].size(), 0.0);
    ex.end[r].assign(s.ranks[r].size(), 0.0);
  }
  ex.waits_for.assign(p, Action{});
  struct Record {
    Execution& ex;
    const engine::RowsSource& rows;
    void ran(int r, const Action&, double st, double en) {
      ex.start[r][rows.index(r)] = st;
      ex.end[r][rows.index(r)] = en;
    }
    void blocked(int r, const Action& missing) { ex.waits_for[r] = missing; }
  } record{ex, rows};
  ex.complete = engine::run(p, s.stage_to_rank, rows, inputs, duration, record);
  ex.head = rows.heads();
  for (int r = 0; r < p; ++r)
    if (ex.head[r] == s.ranks[r].size()) ex.waits_for[r] = Action{};
  return ex;
}

}  // namespace minipipe::sched
