// Building a schedule rank by rank, whole or compressed, and cutting one to fewer micro-batches.
// Shared by every generator in this folder (schedules/variants/rank_rows.hpp).
#include "schedules/variants/rank_rows.hpp"

namespace minipipe::sched::gen {

Rankwise rankwise(const std::string& name, int p, int m, int v, Placement pl,
                  std::function<void(int, std::vector<Action>&)> row) {
  Rankwise w{Schedule{}, std::move(row)};
  w.header.name = name;
  w.header.p = p;
  w.header.v = v;
  w.header.m = m;
  w.header.stage_to_rank = pl == Placement::v ? v_placement(p, v) : looped_placement(p, v);
  return w;
}

Schedule build(const Rankwise& w) {
  Schedule s = w.header;
  s.ranks.resize(static_cast<std::size_t>(s.p));
  for (int r = 0; r < s.p; ++r) {
    // Up to three actions (F, I, W) per stage and micro-batch; reserving avoids regrowth.
    s.ranks[r].reserve(static_cast<std::size_t>(3) * s.v * s.m);
    w.row(r, s.ranks[r]);
  }
  return s;
}

RankPrograms programs(const Rankwise& w) {
  const Schedule& h = w.header;
  RankPrograms out;
  out.name = h.name, out.p = h.p, out.v = h.v, out.m = h.m, out.group = h.group, out.chains = h.chains;
  out.stage_to_rank = h.stage_to_rank;
  out.ranks.reserve(static_cast<std::size_t>(h.p));
  std::vector<Action> row;  // one rank's actions at a time
  row.reserve(static_cast<std::size_t>(3) * h.v * h.m);
  for (int r = 0; r < h.p; ++r) {
    row.clear();
    w.row(r, row);
    out.ranks.push_back(RankProgram::compress(row));
  }
  return out;
}

Rankwise keep_microbatches(Rankwise w, int m) {
  w.header.m = m;
  w.row = [all = std::move(w.row), m](int r, std::vector<Action>& row) {
    const std::size_t from = row.size();
    all(r, row);
    std::size_t to = from;
    for (std::size_t k = from; k < row.size(); ++k) {
      Action& a = row[k];
      const bool pair = a.op == Op::OVERLAP_F_B;
      const bool f = pair ? a.sub[0].microbatch < m : a.microbatch < m, b = pair && a.sub[1].microbatch < m;
      if (pair && f != b) a = Action(a.sub[f ? 0 : 1]);  // the pair loses a half
      if (!f && !b) continue;
      if (to != k) row[to] = std::move(a);
      ++to;
    }
    row.resize(to);
  };
  return w;
}

}  // namespace minipipe::sched::gen
