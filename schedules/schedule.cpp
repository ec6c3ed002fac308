// Stage-to-rank placements and the small queries every schedule consumer needs.
// Kept apart from the generators so the runtime can use Schedule without pulling them in.
#include "schedules/schedule.hpp"

namespace minipipe::sched {

const char* placement_name(Placement pl) {
  switch (pl) {
    case Placement::loop:
      return "loop";
    case Placement::v:
      return "v";
    case Placement::inferred:
      return "inferred";
  }
  return "?";
}

Placement parse_placement(const std::string& text) {
  if (text == "loop") return Placement::loop;
  if (text == "v") return Placement::v;
  if (text == "inferred" || text == "auto") return Placement::inferred;
  throw ScheduleError("placement = '" + text +
                      "' is not allowed; allowed: loop (stage s on rank s%p), v (rank r holds "
                      "stages r and 2p-1-r), auto (read the ranks from the file)");
}

std::vector<int> looped_placement(int p, int v) {
  std::vector<int> map(static_cast<std::size_t>(p) * v);
  for (std::size_t s = 0; s < map.size(); ++s) map[s] = static_cast<int>(s % p);
  return map;
}

std::vector<int> v_placement(int p, int v) {
  std::vector<int> map(static_cast<std::size_t>(p) * v);
  for (std::size_t s = 0; s < map.size(); ++s) {
    const int chunk = static_cast<int>(s) / p, pos = static_cast<int>(s) % p;
    map[s] = (chunk % 2 == 0) ? pos : p - 1 - pos;
  }
  return map;
}

namespace {
template <class Pred>
bool any_action(const Schedule& s, Pred pred) {
  for (const auto& row : s.ranks)
    for (const auto& a : row) {
      if (pred(a)) return true;
      for (const auto& sub : a.sub)
        if (pred(sub)) return true;
    }
  return false;
}
}  // namespace

bool Schedule::uses_split_backward() const {
  return any_action(*this, [](const Action& a) { return a.op == Op::I || a.op == Op::W; });
}

bool Schedule::is_lowered() const {
  return any_action(*this, [](const Action& a) { return is_comm(a.op); });
}

bool Schedule::uses_overlap() const {
  return any_action(*this, [](const Action& a) { return a.op == Op::OVERLAP_F_B; });
}

std::vector<int> Schedule::stages_of_rank(int rank) const {
  std::vector<int> out;
  for (std::size_t s = 0; s < stage_to_rank.size(); ++s)
    if (stage_to_rank[s] == rank) out.push_back(static_cast<int>(s));
  return out;
}

std::size_t Schedule::num_actions() const {
  std::size_t n = 0;
  for (const auto& row : ranks) n += row.size();
  return n;
}

}  // namespace minipipe::sched
