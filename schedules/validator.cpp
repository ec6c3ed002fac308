// Structural, ordering and deadlock checks of a schedule, each failure reported on the grid.
// Checks run cheapest first, so the message names the most basic problem a schedule has.
#include "schedules/validator.hpp"

#include <algorithm>
#include <deque>
#include <sstream>

#include "schedules/execute.hpp"

namespace minipipe::sched {

namespace {

std::string header(const Schedule& s) {
  return "invalid schedule '" + s.name + "' (p=" + std::to_string(s.p) + ", v=" + std::to_string(s.v) +
         ", m=" + std::to_string(s.m) + ")";
}

[[noreturn]] void fail_at(const Schedule& s, int rank, int step, const std::string& why) {
  GridMark mark{rank, step, ""};
  throw ScheduleError(header(s) + ": rank " + std::to_string(rank) + ", step " + std::to_string(step) + ": " + why +
                      "\n" + format_grid(s, mark));
}

[[noreturn]] void fail_missing(const Schedule& s, int rank, const Action& a, const std::string& why) {
  GridMark mark{rank, static_cast<int>(s.ranks[rank].size()), to_string(a)};
  throw ScheduleError(header(s) + ": rank " + std::to_string(rank) + ": missing " + to_string(a) + " (" + why + ")\n" +
                      format_grid(s, mark));
}

// Where each (op, stage, micro-batch) sits: its rank and step, or -1 when absent.
class Positions {
 public:
  Positions(int stages, int m)
      : m_(m), rank_(static_cast<std::size_t>(kNumOps) * stages * m, -1), step_(rank_.size(), -1) {}
  std::size_t key(Op op, int stage, int mb) const {
    return (static_cast<std::size_t>(stage) * m_ + mb) * kNumOps + static_cast<std::size_t>(op);
  }
  bool has(Op op, int stage, int mb) const { return rank_[key(op, stage, mb)] >= 0; }
  int rank(Op op, int stage, int mb) const { return rank_[key(op, stage, mb)]; }
  int step(Op op, int stage, int mb) const { return step_[key(op, stage, mb)]; }
  void set(Op op, int stage, int mb, int r, int k) {
    rank_[key(op, stage, mb)] = r;
    step_[key(op, stage, mb)] = k;
  }

 private:
  int m_;
  std::vector<int> rank_, step_;
};

void check_shape(const Schedule& s) {
  auto bad = [&](const std::string& what) { throw ScheduleError(header(s) + ": " + what); };
  if (s.p < 1) bad("p = " + std::to_string(s.p) + " is not allowed; need p >= 1");
  if (s.v < 1) bad("v = " + std::to_string(s.v) + " is not allowed; need v >= 1");
  if (s.m < 1) bad("m = " + std::to_string(s.m) + " is not allowed; need m >= 1");
  if (s.chains < 1 || s.num_stages() % s.chains != 0)
    bad("chains = " + std::to_string(s.chains) +
        " is not allowed; need chains >= 1 dividing p*v = " + std::to_string(s.num_stages()));
  if (static_cast<int>(s.ranks.size()) != s.p)
    bad("the schedule lists " + std::to_string(s.ranks.size()) + " ranks; need p = " + std::to_string(s.p));
  if (static_cast<int>(s.stage_to_rank.size()) != s.num_stages())
    bad("stage_to_rank has " + std::to_string(s.stage_to_rank.size()) +
        " entries; need p*v = " + std::to_string(s.num_stages()));
  for (std::size_t st = 0; st < s.stage_to_rank.size(); ++st)
    if (s.stage_to_rank[st] < 0 || s.stage_to_rank[st] >= s.p)
      bad("stage " + std::to_string(st) + " is placed on rank " + std::to_string(s.stage_to_rank[st]) +
          "; allowed ranks are 0.." + std::to_string(s.p - 1));
  for (int r = 0; r < s.p; ++r) {
    int held = 0;
    for (int q : s.stage_to_rank) held += q == r;
    if (held != s.v)
      bad("rank " + std::to_string(r) + " holds " + std::to_string(held) +
          " stages; every rank must hold v = " + std::to_string(s.v));
  }
}

// Range, placement, relevance of communication actions and duplicates, cell by cell.
void check_cells(const Schedule& s, Positions& pos) {
  const int S = s.num_stages();
  for (int r = 0; r < s.p; ++r) {
    const auto& row = s.ranks[r];
    for (int k = 0; k < static_cast<int>(row.size()); ++k) {
      const Action& a = row[k];
      auto check_one = [&](const Action& x) {
        if (x.op == Op::OVERLAP_F_B) fail_at(s, r, k, "OVERLAP_F_B cannot be nested");
        if (x.stage < 0 || x.stage >= S)
          fail_at(s, r, k,
                  "stage " + std::to_string(x.stage) + " is out of range; allowed 0.." + std::to_string(S - 1));
        if (x.microbatch < 0 || x.microbatch >= s.m)
          fail_at(s, r, k,
                  "micro-batch " + std::to_string(x.microbatch) + " is out of range; allowed 0.." +
                      std::to_string(s.m - 1));
        if (!s.runs(x.stage, x.microbatch))
          fail_at(s, r, k,
                  "micro-batch " + std::to_string(x.microbatch) + " runs through model copy " +
                      std::to_string(s.chain_of_microbatch(x.microbatch)) + " (micro-batch % " +
                      std::to_string(s.chains) + "), but stage " + std::to_string(x.stage) + " is part of copy " +
                      std::to_string(s.chain_of_stage(x.stage)));
        const int owner = s.stage_to_rank[x.stage];
        if (owner != r)
          fail_at(s, r, k,
                  "stage " + std::to_string(x.stage) + " belongs to rank " + std::to_string(owner) + ", not rank " +
                      std::to_string(r));
        if (is_comm(x.op) && !needs_comm(s, x.op, x.stage))
          fail_at(s, r, k,
                  std::string(op_name(x.op)) + " is not needed for stage " + std::to_string(x.stage) +
                      ": the neighbouring stage is on the same rank or does not exist");
        if (pos.has(x.op, x.stage, x.microbatch))
          fail_at(s, r, k,
                  "duplicate " + to_string(x) + " (first at rank " +
                      std::to_string(pos.rank(x.op, x.stage, x.microbatch)) + ", step " +
                      std::to_string(pos.step(x.op, x.stage, x.microbatch)) + ")");
        pos.set(x.op, x.stage, x.microbatch, r, k);
      };
      if (a.op == Op::OVERLAP_F_B) {
        if (a.sub.size() != 2 || a.sub[0].op != Op::F || !is_backward(a.sub[1].op))
          fail_at(s, r, k, "OVERLAP_F_B must hold a forward then a backward (B or I)");
        if (a.sub[0].stage == a.sub[1].stage && a.sub[0].microbatch == a.sub[1].microbatch)
          fail_at(s, r, k, "OVERLAP_F_B pairs a backward with its own forward");
        for (const auto& sub : a.sub) check_one(sub);
      } else {
        if (!a.sub.empty()) fail_at(s, r, k, "only OVERLAP_F_B holds sub-actions");
        check_one(a);
      }
    }
  }
}

// Every (stage, micro-batch) has one F and either one B or one I and one W; a lowered
// schedule also has every SEND/RECV its placement needs.
void check_complete(const Schedule& s, const Positions& pos, bool lowered) {
  for (int st = 0; st < s.num_stages(); ++st) {
    const int owner = s.stage_to_rank[st];
    for (int mb = 0; mb < s.m; ++mb) {
      if (!s.runs(st, mb)) continue;  // another copy of the model runs this micro-batch
      auto act = [&](Op op) { return Action::make(op, st, mb); };
      if (!pos.has(Op::F, st, mb)) fail_missing(s, owner, act(Op::F), "every stage runs each micro-batch forward once");
      const bool b = pos.has(Op::B, st, mb), i = pos.has(Op::I, st, mb), w = pos.has(Op::W, st, mb);
      if (b && (i || w)) {
        const Op other = i ? Op::I : Op::W;
        const bool b_later = pos.step(Op::B, st, mb) > pos.step(other, st, mb);
        const Op at = b_later ? Op::B : other;
        fail_at(s, pos.rank(at, st, mb), pos.step(at, st, mb),
                "stage " + std::to_string(st) + ", micro-batch " + std::to_string(mb) +
                    " mixes a full backward (B) with split backward (I/W); use one or the other");
      }
      if (!b && !i)
        fail_missing(
            s, owner, act(Op::B),
            "no backward: neither " + to_string(act(Op::B)) + " nor " + to_string(act(Op::I)) + " is scheduled");
      if (i && !w) fail_missing(s, owner, act(Op::W), "its I pass is scheduled, so its W pass must be too");
      if (w && !i)
        fail_at(s, pos.rank(Op::W, st, mb), pos.step(Op::W, st, mb), to_string(act(Op::W)) + " has no matching I pass");
      if (lowered)
        for (Op op : {Op::RECV_F, Op::SEND_F, Op::RECV_B, Op::SEND_B})
          if (needs_comm(s, op, st) && !pos.has(op, st, mb))
            fail_missing(s, owner, act(op), "the schedule is lowered and the neighbouring stage is on another rank");
    }
  }
}

// Orders on one rank: B/I after F, W after I, SEND after what it sends, RECV before use.
void check_rank_order(const Schedule& s, const Positions& pos, bool lowered) {
  for (int st = 0; st < s.num_stages(); ++st)
    for (int mb = 0; mb < s.m; ++mb) {
      if (!s.runs(st, mb)) continue;
      const int f = pos.step(Op::F, st, mb);
      const Op bop = pos.has(Op::B, st, mb) ? Op::B : Op::I;
      const int r = pos.rank(bop, st, mb), b = pos.step(bop, st, mb);
      auto name = [&](Op op) { return to_string(Action::make(op, st, mb)); };
      if (b < f)
        fail_at(s, r, b, name(bop) + " comes before its forward " + name(Op::F) + " (step " + std::to_string(f) + ")");
      if (bop == Op::I && pos.step(Op::W, st, mb) < b)
        fail_at(s, r, pos.step(Op::W, st, mb),
                name(Op::W) + " comes before its " + name(Op::I) + " (step " + std::to_string(b) +
                    "); W needs the gradient that I produces");
      if (!lowered) continue;
      auto after = [&](Op comm, int producer_step, Op producer) {
        if (pos.has(comm, st, mb) && pos.step(comm, st, mb) <= producer_step)
          fail_at(s, r, pos.step(comm, st, mb),
                  name(comm) + " must come after " + name(producer) + " (step " + std::to_string(producer_step) + ")");
      };
      auto before = [&](Op comm, int consumer_step, Op consumer) {
        if (pos.has(comm, st, mb) && pos.step(comm, st, mb) >= consumer_step)
          fail_at(s, r, pos.step(comm, st, mb),
                  name(comm) + " must come before " + name(consumer) + " (step " + std::to_string(consumer_step) + ")");
      };
      after(Op::SEND_F, f, Op::F);
      before(Op::RECV_F, f, Op::F);
      after(Op::SEND_B, b, bop);
      before(Op::RECV_B, b, bop);
    }
}

Schedule lower_impl(const Schedule& s) {
  if (s.is_lowered()) return s;
  Schedule out;
  out.name = s.name;
  out.p = s.p;
  out.v = s.v;
  out.m = s.m;
  out.stage_to_rank = s.stage_to_rank;
  out.group = s.group;
  out.chains = s.chains;
  out.ranks.resize(s.ranks.size());
  for (std::size_t r = 0; r < s.ranks.size(); ++r) {
    auto& row = out.ranks[r];
    row.reserve(2 * s.ranks[r].size());
    for (std::size_t k = 0; k < s.ranks[r].size(); ++k) {
      const Action& a = s.ranks[r][k];
      auto emit = [&](const Action& x) { row.push_back(x); };
      // The compute actions inside this cell: the cell itself or the two halves of a pair.
      const Action* parts[2] = {&a, nullptr};
      if (a.op == Op::OVERLAP_F_B && a.sub.size() == 2) parts[0] = &a.sub[0], parts[1] = &a.sub[1];
      for (const Action* c : parts) {
        if (!c || !(c->op == Op::F || is_backward(c->op))) continue;
        const Op recv = c->op == Op::F ? Op::RECV_F : Op::RECV_B;
        if (needs_comm(s, recv, c->stage)) emit(Action::make(recv, c->stage, c->microbatch));
      }
      emit(a);
      for (const Action* c : parts) {
        if (!c || !(c->op == Op::F || is_backward(c->op))) continue;
        const Op send = c->op == Op::F ? Op::SEND_F : Op::SEND_B;
        if (needs_comm(s, send, c->stage)) emit(Action::make(send, c->stage, c->microbatch));
      }
    }
  }
  return out;
}

// Runs the schedule on unit costs with its communication (explicit or implied); if some rank
// can never move, reports who waits for what and marks the first stuck rank's cell.
void check_deadlock(const Schedule& s) {
  const Execution ex = execute(
      s, [](const Action&) { return 1.0; }, 0.0);
  if (ex.complete) return;
  std::ostringstream why;
  why << "deadlock once communication is added: no rank can progress.";
  int first = -1;
  for (int r = 0; r < s.p; ++r) {
    if (ex.head[r] >= s.ranks[r].size()) continue;
    if (first < 0) first = r;
    const Action& at = s.ranks[r][ex.head[r]];
    const Action& wait = ex.waits_for[r];
    const int owner = s.stage_to_rank[wait.stage];
    why << "\n  rank " << r << " is stuck at " << to_string(at) << " waiting for " << to_string(wait)
        << (owner == r ? " (later on the same rank)" : " on rank " + std::to_string(owner));
  }
  GridMark mark{first, static_cast<int>(ex.head[first]), ""};
  throw ScheduleError(header(s) + ": " + why.str() + "\n" + format_grid(s, mark));
}

}  // namespace

void validate_structure(const Schedule& s) {
  check_shape(s);
  Positions pos(s.num_stages(), s.m);
  check_cells(s, pos);
  const bool lowered = s.is_lowered();
  check_complete(s, pos, lowered);
  check_rank_order(s, pos, lowered);
}

void validate(const Schedule& s) {
  validate_structure(s);
  check_deadlock(s);
}

Schedule lower_communication(const Schedule& s) {
  return lower_impl(s);
}

Schedule post_receives_early(const Schedule& s, int lookahead) {
  if (lookahead < 1) throw ScheduleError("post_receives_early: lookahead " + std::to_string(lookahead) + "; need >= 1");
  Schedule out = s;
  for (auto& row : out.ranks) {
    std::vector<Action> moved;
    moved.reserve(row.size());
    std::deque<std::size_t> recent;  // indices in `moved` of the latest `lookahead` compute actions
    for (auto& a : row) {
      if ((a.op == Op::RECV_F || a.op == Op::RECV_B) && !recent.empty()) {
        const std::size_t at = recent.front();
        moved.insert(moved.begin() + static_cast<std::ptrdiff_t>(at), std::move(a));
        for (auto& k : recent) ++k;  // every one of them sits at or after `at`
        continue;
      }
      if (is_compute(a.op)) {
        recent.push_back(moved.size());
        if (static_cast<int>(recent.size()) > lookahead) recent.pop_front();
      }
      moved.push_back(std::move(a));
    }
    row = std::move(moved);
  }
  return out;
}

Schedule strip_communication(const Schedule& s) {
  Schedule out = s;
  for (auto& row : out.ranks)
    row.erase(std::remove_if(row.begin(), row.end(), [](const Action& a) { return is_comm(a.op); }), row.end());
  return out;
}

std::string format_grid(const Schedule& s, const GridMark& mark, int max_columns, int max_rows) {
  const int p = static_cast<int>(s.ranks.size());
  const bool marked = mark.rank >= 0 && mark.rank < p && mark.step >= 0;
  int n = 0;
  for (const auto& row : s.ranks) n = std::max(n, static_cast<int>(row.size()));
  if (marked) n = std::max(n, mark.step + 1);
  max_columns = std::max(1, max_columns);
  max_rows = std::max(1, max_rows);

  auto window = [](int size, int centre, int width) {
    int lo = centre < 0 ? 0 : std::max(0, centre - width / 2);
    const int hi = std::min(size, lo + width);
    lo = std::max(0, hi - width);
    return std::pair<int, int>(lo, hi);
  };
  const auto [c0, c1] = window(n, marked ? mark.step : -1, max_columns);
  const auto [r0, r1] = window(p, marked ? mark.rank : -1, max_rows);

  auto cell = [&](int r, int k) -> std::string {
    const bool here = marked && r == mark.rank && k == mark.step;
    std::string text;
    if (k < static_cast<int>(s.ranks[r].size()))
      text = to_string(s.ranks[r][k]);
    else if (here)
      text = mark.missing + "?";
    return here ? ">" + text + "<" : text;
  };
  std::vector<std::size_t> width(static_cast<std::size_t>(c1 - c0), 1);
  for (int k = c0; k < c1; ++k) {
    width[k - c0] = std::to_string(k).size();
    for (int r = r0; r < r1; ++r) width[k - c0] = std::max(width[k - c0], cell(r, k).size());
  }
  const std::string label_pad = "rank " + std::to_string(p - 1);
  auto pad = [](const std::string& t, std::size_t w) { return t.size() >= w ? t : std::string(w - t.size(), ' ') + t; };
  std::ostringstream os;
  // Lines end without trailing blanks so the grid reads the same in any terminal or test.
  auto line = [&os](std::string text) {
    while (!text.empty() && text.back() == ' ') text.pop_back();
    os << text << '\n';
  };
  std::string head = pad("step", label_pad.size()) + " |" + (c0 > 0 ? " ..." : "");
  for (int k = c0; k < c1; ++k) head += ' ' + pad(std::to_string(k), width[k - c0]);
  line(head + (c1 < n ? " ..." : ""));
  if (r0 > 0) line("  (ranks 0.." + std::to_string(r0 - 1) + " not shown)");
  for (int r = r0; r < r1; ++r) {
    std::string row = pad("rank " + std::to_string(r), label_pad.size()) + " |" + (c0 > 0 ? "    " : "");
    for (int k = c0; k < c1; ++k) row += ' ' + pad(cell(r, k), width[k - c0]);
    if (marked && r == mark.rank) row += std::string(c1 < n ? "    " : "") + "   <-- here";
    line(row);
  }
  if (r1 < p) line("  (ranks " + std::to_string(r1) + ".." + std::to_string(p - 1) + " not shown)");
  if (marked)
    os << "  (>cell< marks the problem" << (mark.missing.empty() ? "" : "; cell? is the missing action") << ")\n";
  return os.str();
}

}  // namespace minipipe::sched
