// Costs, the event simulation on top of execute(), per-rank memory accounting and the closed
// forms. Memory depends only on each rank's order, so it is counted by walking that order.
#include "schedules/simulator.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "schedules/engine.hpp"
#include "schedules/execute.hpp"
#include "schedules/validator.hpp"
#include "schedules/variant.hpp"

namespace minipipe::sched {

namespace {

[[noreturn]] void bad_cost(const std::string& key, const std::string& value, const std::string& allowed) {
  throw ScheduleError("cost " + key + " = '" + value + "' is not allowed; " + allowed);
}

std::vector<double> expand(const std::vector<double>& v, int stages, const char* key) {
  if (v.size() == 1) return std::vector<double>(stages, v[0]);
  if (static_cast<int>(v.size()) == stages) return v;
  throw ScheduleError("cost " + std::string(key) + " has " + std::to_string(v.size()) +
                      " entries; allowed: 1 (all stages) or p*v = " + std::to_string(stages));
}

// splitmix64: a counter-based generator, so a factor depends on its key only.
unsigned long long mix(unsigned long long x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Log-normal factor of mean 1 and coefficient of variation cv for one action.
double jitter(double cv, unsigned long long seed, const Action& a) {
  const unsigned long long key =
      mix(mix(mix(mix(seed) ^ static_cast<unsigned long long>(a.op)) ^ static_cast<unsigned long long>(a.stage)) ^
          static_cast<unsigned long long>(a.microbatch));
  const double u1 = (static_cast<double>(key >> 11) + 0.5) / 9007199254740992.0;
  const double u2 = (static_cast<double>(mix(key) >> 11) + 0.5) / 9007199254740992.0;
  const double z = std::sqrt(-2 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  const double s2 = std::log(1 + cv * cv);
  return std::exp(std::sqrt(s2) * z - s2 / 2);
}

bool all_equal(const std::vector<double>& v) {
  return std::all_of(v.begin(), v.end(), [&](double x) { return x == v.front(); });
}

}  // namespace

CostModel CostModel::uniform(int stages, double f, double b, double i, double w, double comm) {
  CostModel c;
  if (b <= 0 && (i > 0 || w > 0)) b = i + w;
  if (i <= 0 && w <= 0) i = w = b / 2;
  c.F.assign(stages, f);
  c.B.assign(stages, b);
  c.I.assign(stages, i);
  c.W.assign(stages, w);
  c.comm = comm;
  return c;
}

CostModel CostModel::resolved(int stages, int v) const {
  CostModel c = *this;
  if (F.empty()) throw ScheduleError("cost F is missing; give F=<time> (per stage: F=a:b:c)");
  c.F = expand(F, stages, "F");
  if (!I.empty() || !W.empty()) {
    if (I.empty() || W.empty())
      throw ScheduleError("cost: give both I and W (or only B, which splits into I = W = B/2)");
    c.I = expand(I, stages, "I");
    c.W = expand(W, stages, "W");
  }
  if (!B.empty()) c.B = expand(B, stages, "B");
  if (c.B.empty() && c.I.empty()) {  // only F: the usual rule of thumb, backward = 2 forward
    c.B.resize(stages);
    c.I = c.F;
    c.W = c.F;
    for (int s = 0; s < stages; ++s) c.B[s] = 2 * c.F[s];
  } else if (c.B.empty()) {
    c.B.resize(stages);
    for (int s = 0; s < stages; ++s) c.B[s] = c.I[s] + c.W[s];
  } else if (c.I.empty()) {
    c.I.resize(stages);
    c.W.resize(stages);
    for (int s = 0; s < stages; ++s) c.I[s] = c.W[s] = c.B[s] / 2;
  }
  c.act = act.empty() ? std::vector<double>(stages, 1.0 / v) : expand(act, stages, "act");
  if (!act_work.empty()) c.act_work = expand(act_work, stages, "act_work");
  c.W_tail = W_tail.empty() ? std::vector<double>(stages, 0.0) : expand(W_tail, stages, "W_tail");
  if (!boundary.empty()) {
    if (boundary.size() == 1) {
      c.boundary.assign(static_cast<std::size_t>(std::max(0, stages - 1)), boundary[0]);
    } else if (static_cast<int>(boundary.size()) != stages - 1) {
      throw ScheduleError("cost boundary has " + std::to_string(boundary.size()) +
                          " entries; allowed: 1 (every boundary) or p*v - 1 = " + std::to_string(stages - 1));
    }
  }
  auto check = [](const std::vector<double>& list, const char* key) {
    for (double x : list)
      if (!std::isfinite(x) || x < 0) bad_cost(key, std::to_string(x), "costs must be finite and >= 0");
  };
  check(c.F, "F");
  check(c.B, "B");
  check(c.I, "I");
  check(c.W, "W");
  check(c.act, "act");
  check(c.act_work, "act_work");
  check(c.W_tail, "W_tail");
  check(c.boundary, "boundary");
  if (!std::isfinite(comm) || comm < 0) bad_cost("comm", std::to_string(comm), "latency must be finite and >= 0");
  if (!std::isfinite(jitter_cv) || jitter_cv < 0)
    bad_cost("jitter_cv", std::to_string(jitter_cv), "coefficient of variation must be finite and >= 0");
  if (!std::isfinite(action_overhead) || action_overhead < 0)
    bad_cost("action_overhead", std::to_string(action_overhead), "time must be finite and >= 0");
  if (!std::isfinite(overlap_fb) || overlap_fb <= 0)
    bad_cost("overlap", std::to_string(overlap_fb), "factor must be finite and > 0");
  if (!std::isfinite(w_act) || w_act < 0 || w_act > 1)
    bad_cost("w_act", std::to_string(w_act), "fraction must be in [0, 1]");
  return c;
}

CostModel parse_costs(const std::string& spec, int stages, double comm) {
  CostModel c;
  c.comm = comm;
  std::stringstream items(spec);
  std::string item;
  while (std::getline(items, item, ',')) {
    if (item.empty()) continue;
    const auto eq = item.find('=');
    const std::string allowed_keys =
        "allowed keys: F, B, I, W (time per micro-batch, ':'-separated for per-stage values) "
        "and overlap (OVERLAP_F_B time over F+B), e.g. F=1,B=2 or F=1,I=1,W=1 or F=8:20:10";
    if (eq == std::string::npos) bad_cost(item, "", "expected key=value; " + allowed_keys);
    const std::string key = item.substr(0, eq), text = item.substr(eq + 1);
    std::vector<double> values;
    std::stringstream parts(text);
    std::string part;
    while (std::getline(parts, part, ':')) {
      char* end = nullptr;
      const double x = std::strtod(part.c_str(), &end);
      if (part.empty() || end != part.c_str() + part.size() || !std::isfinite(x) || x < 0)
        bad_cost(key, text, "values must be numbers >= 0");
      values.push_back(x);
    }
    if (values.empty()) bad_cost(key, text, "a value is required");
    if (key == "F") {
      if (std::any_of(values.begin(), values.end(), [](double x) { return x <= 0; }))
        bad_cost(key, text, "forward time must be > 0");
      c.F = values;
    } else if (key == "B") {
      c.B = values;
    } else if (key == "I") {
      c.I = values;
    } else if (key == "W") {
      c.W = values;
    } else if (key == "overlap") {
      if (values.size() != 1 || values[0] <= 0) bad_cost(key, text, "one factor > 0");
      c.overlap_fb = values[0];
    } else {
      bad_cost(key, text, allowed_keys);
    }
  }
  if (c.F.empty()) c.F = {1.0};
  // resolved() reports list-length and pairing errors with the same wording as here.
  (void)c.resolved(stages, 1);
  return c;
}

namespace {

// The time of each compute action under resolved costs: jitter, the stage's W tail on its last
// W-carrying action, the per-action overhead and DualPipe's overlap factor.
class ActionTime {
 public:
  ActionTime(const Schedule& s, const CostModel& c) : c_(c), last_w_(static_cast<std::size_t>(s.num_stages()), -1) {
    for (const auto& list : s.ranks)
      for (const Action& a : list) note_row_action(a);
  }
  // Each stage's last W-carrying action from the rank programs, one rank at a time.
  ActionTime(const RankPrograms& s, const CostModel& c) : c_(c), last_w_(static_cast<std::size_t>(s.num_stages()), -1) {
    for (int r = 0; r < s.p; ++r)
      for (ProgramCursor at(s.ranks[static_cast<std::size_t>(r)]); const Action* a = at.peek(); at.advance())
        note_row_action(*a);
  }
  double operator()(const Action& a) const {
    switch (a.op) {
      case Op::F:
        return c_.F[a.stage] * spread(a) + c_.action_overhead;
      case Op::B:
        return c_.B[a.stage] * spread(a) + tail(a) + c_.action_overhead;
      case Op::I:
        return c_.I[a.stage] * spread(a) + c_.action_overhead;
      case Op::W:
        return c_.W[a.stage] * spread(a) + tail(a) + c_.action_overhead;
      case Op::OVERLAP_F_B: {
        // A tail is serial work after the pair's overlapped part: not scaled by overlap_fb.
        const double tails = tail(a.sub[0]) + tail(a.sub[1]);
        return c_.overlap_fb * ((*this)(a.sub[0]) + (*this)(a.sub[1]) - tails) + tails;
      }
      default:
        return 0.0;
    }
  }

 private:
  // Each stage's last W-carrying action (the micro-batch of its W or B): a stage's actions all
  // run on one rank, so its rank's order is their order.
  void note_row_action(const Action& a) {
    if (a.op == Op::OVERLAP_F_B) {
      for (const Action& x : a.sub) note(x);
    } else {
      note(a);
    }
  }
  void note(const Action& x) {
    if (x.op == Op::W || x.op == Op::B) last_w_[static_cast<std::size_t>(x.stage)] = x.microbatch;
  }
  double spread(const Action& a) const { return c_.jitter_cv > 0 ? jitter(c_.jitter_cv, c_.jitter_seed, a) : 1.0; }
  double tail(const Action& a) const {
    const bool carries_w = a.op == Op::W || a.op == Op::B;
    return carries_w && a.microbatch == last_w_[static_cast<std::size_t>(a.stage)] ? c_.W_tail[a.stage] : 0.0;
  }
  const CostModel& c_;
  std::vector<int> last_w_;
};

// Held activations of one rank, walked in its order (simulate and simulate_totals share it).
struct HeldMemory {
  int inflight = 0, waiting = 0;
  double held = 0, peak = 0;
  int peak_inflight = 0, peak_waiting = 0, peak_held = 0;
  void apply(const CostModel& c, const Action& x) {
    const double size = c.act[x.stage];
    const bool has_work = !c.act_work.empty();
    const double work = has_work ? c.act_work[x.stage] : 0.0;
    switch (x.op) {
      case Op::F:
        ++inflight;
        held += size;
        break;
      case Op::B:
        --inflight;
        peak = std::max(peak, held + work);  // inside the action
        held -= size;
        break;
      case Op::I:
        --inflight;
        ++waiting;
        held += has_work ? work : -size * (1 - c.w_act);
        break;
      case Op::W:
        --waiting;
        held -= has_work ? size + work : size * c.w_act;
        break;
      default:
        break;
    }
    peak_inflight = std::max(peak_inflight, inflight);
    peak_waiting = std::max(peak_waiting, waiting);
    peak_held = std::max(peak_held, inflight + waiting);
    peak = std::max(peak, held);
  }
};

}  // namespace

SimResult simulate(const Schedule& s, const CostModel& cost) {
  validate_structure(s);
  // act's unit: one micro-batch over a rank's share of one model copy (v / chains stages).
  const CostModel c = cost.resolved(s.num_stages(), s.v / s.chains);
  const ActionTime time_of(s, c);
  const std::function<double(const Action&)> duration = [&](const Action& a) { return time_of(a); };
  const Execution ex = execute(s, duration, c.comm, c.boundary);
  if (!ex.complete) {
    validate(s);  // reports the deadlock with the grid
    throw ScheduleError("internal error: schedule '" + s.name + "' stalls but validates");
  }

  const int p = s.p;
  SimResult res;
  res.busy.assign(p, 0.0);
  res.idle.assign(p, 0.0);
  res.start.assign(p, 0.0);
  res.end.assign(p, 0.0);
  res.interior_idle.assign(p, 0.0);
  res.peak_inflight.assign(p, 0);
  res.peak_waiting_w.assign(p, 0);
  res.peak_held.assign(p, 0);
  res.activation_mem.assign(p, 0.0);
  res.timeline.p = p;
  res.timeline.events.reserve(s.num_actions() + 16);
  res.timeline.title = s.name + "  p=" + std::to_string(p) + " v=" + std::to_string(s.v) + " m=" + std::to_string(s.m);

  for (int r = 0; r < p; ++r) {
    bool seen = false;
    HeldMemory mem;
    const auto& row = s.ranks[r];
    for (std::size_t k = 0; k < row.size(); ++k) {
      const Action& a = row[k];
      if (!is_compute(a.op)) continue;
      const double st = ex.start[r][k], en = ex.end[r][k];
      res.busy[r] += en - st;
      res.start[r] = seen ? std::min(res.start[r], st) : st;
      res.end[r] = seen ? std::max(res.end[r], en) : en;
      seen = true;
      const Action* parts[2] = {&a, nullptr};
      if (a.op == Op::OVERLAP_F_B) parts[0] = &a.sub[0], parts[1] = &a.sub[1];
      double t = st;
      const double whole = a.op == Op::OVERLAP_F_B ? duration(a.sub[0]) + duration(a.sub[1]) : 0;
      for (const Action* part : parts) {
        if (!part) continue;
        const Action& x = *part;
        // An overlapped pair is drawn as its two halves in proportion to their own costs.
        const double d = a.op == Op::OVERLAP_F_B ? (whole > 0 ? (en - st) * duration(x) / whole : 0.0) : en - st;
        res.timeline.events.push_back(TimelineEvent{r, t, t + d, x.op, x.stage, x.microbatch, a.op == Op::OVERLAP_F_B});
        t += d;
        mem.apply(c, x);
      }
    }
    res.peak_inflight[r] = mem.peak_inflight;
    res.peak_waiting_w[r] = mem.peak_waiting;
    res.peak_held[r] = mem.peak_held;
    res.activation_mem[r] = mem.peak;
    res.makespan = std::max(res.makespan, res.end[r]);
  }
  double idle_sum = 0, interior_sum = 0, span_sum = 0;
  for (int r = 0; r < p; ++r) {
    res.idle[r] = res.makespan - res.busy[r];
    res.interior_idle[r] = (res.end[r] - res.start[r]) - res.busy[r];
    idle_sum += res.idle[r];
    interior_sum += res.interior_idle[r];
    span_sum += res.end[r] - res.start[r];
  }
  res.bubble_fraction = res.makespan > 0 ? idle_sum / (p * res.makespan) : 0.0;
  res.interior_bubble_fraction = span_sum > 0 ? interior_sum / span_sum : 0.0;
  return res;
}

namespace {

// simulate_totals over any action source: the shared event loop with the table that keeps only
// what is in flight, and per rank four numbers and its memory walk.
template <class Source>
StepTotals totals_of(Source& source, const std::string& name, const std::vector<int>& stage_to_rank, int p, int m,
                     int chains, const CostModel& c, const ActionTime& time_of) {
  engine::Inputs<engine::StreamTable> inputs(engine::StreamTable(static_cast<int>(stage_to_rank.size()), m, chains),
                                             stage_to_rank, m, chains, false, c.comm, c.boundary);
  struct Totals {
    const CostModel& c;
    StepTotals res;
    std::vector<HeldMemory> mem;
    void ran(int r, const Action& a, double st, double en) {
      if (a.op == Op::OVERLAP_F_B) {
        for (const Action& x : a.sub) mem[r].apply(c, x);
      } else {
        mem[r].apply(c, a);
      }
      res.busy[r] += en - st;
      res.end[r] = std::max(res.end[r], en);
    }
    void blocked(int, const Action&) {}
  } totals{c, {}, std::vector<HeldMemory>(static_cast<std::size_t>(p))};
  totals.res.busy.assign(p, 0.0);
  totals.res.end.assign(p, 0.0);
  totals.res.activation_mem.assign(p, 0.0);
  if (!engine::run(p, stage_to_rank, source, inputs, time_of, totals))
    throw ScheduleError("simulate_totals: schedule '" + name + "' deadlocks; run validate() for the grid");
  StepTotals& res = totals.res;
  double idle_sum = 0;
  for (int r = 0; r < p; ++r) {
    res.activation_mem[r] = totals.mem[r].peak;
    res.makespan = std::max(res.makespan, res.end[r]);
  }
  for (int r = 0; r < p; ++r) idle_sum += res.makespan - res.busy[r];
  res.bubble_fraction = res.makespan > 0 ? idle_sum / (p * res.makespan) : 0.0;
  res.state_bytes = inputs.table().bytes();
  return res;
}

}  // namespace

StepTotals simulate_totals(const Schedule& s, const CostModel& cost) {
  if (s.is_lowered()) throw ScheduleError("simulate_totals: schedule '" + s.name + "' holds SEND/RECV actions");
  const CostModel c = cost.resolved(s.num_stages(), s.v / s.chains);  // act's unit as in simulate()
  engine::RowsSource rows(s.ranks);
  return totals_of(rows, s.name, s.stage_to_rank, s.p, s.m, s.chains, c, ActionTime(s, c));
}

StepTotals simulate_totals(const RankPrograms& s, const CostModel& cost) {
  const CostModel c = cost.resolved(s.num_stages(), s.v / s.chains);
  ProgramSource programs(s);
  return totals_of(programs, s.name, s.stage_to_rank, s.p, s.m, s.chains, c, ActionTime(s, c));
}

double mean_makespan(const Schedule& s, const CostModel& cost, int samples) {
  if (cost.jitter_cv <= 0 || samples < 1) return simulate(s, cost).makespan;
  CostModel c = cost;
  double sum = 0;
  for (int k = 1; k <= samples; ++k) {
    c.jitter_seed = static_cast<unsigned long long>(k);
    sum += simulate(s, c).makespan;
  }
  return sum / samples;
}

std::string analytic_formula(const std::string& name) {
  const VariantSpec* spec = find_variant_spec(name);
  return spec ? spec->formula : "";
}

std::optional<double> analytic_bubble(const Schedule& s, const CostModel& cost) {
  const VariantSpec* spec = find_variant_spec(s.name);
  if (!spec || !spec->bubble) return std::nullopt;
  const int S = s.num_stages();
  const CostModel c = cost.resolved(S, s.v);
  const bool links = std::any_of(c.boundary.begin(), c.boundary.end(), [](double x) { return x != 0; });
  if (c.comm != 0 || links || !all_equal(c.F) || !all_equal(c.B) || !all_equal(c.I) || !all_equal(c.W))
    return std::nullopt;
  // Below this m the warm-up is cut short and the closed forms do not hold.
  if (s.m < full_warmup_m(*spec, s.p)) return std::nullopt;
  return spec->bubble(BubbleCase{s.p, s.m, s.v, s.group, c.F[0], c.B[0], c.I[0], c.W[0], c.overlap_fb});
}

std::vector<std::vector<std::optional<Action>>> step_grid(const Schedule& s) {
  const Schedule low = strip_communication(s);
  const Execution ex = execute(
      low, [](const Action&) { return 1.0; }, 0.0);
  if (!ex.complete)
    throw ScheduleError("step grid of '" + s.name + "': the schedule deadlocks; run validate() for details");
  std::vector<std::vector<std::optional<Action>>> grid(s.p);
  for (int r = 0; r < s.p; ++r) {
    for (std::size_t k = 0; k < low.ranks[r].size(); ++k) {
      const Action& a = low.ranks[r][k];
      if (!is_compute(a.op)) continue;
      const auto step = static_cast<std::size_t>(std::llround(ex.start[r][k]));
      if (grid[r].size() <= step) grid[r].resize(step + 1);
      grid[r][step] = a;
    }
  }
  return grid;
}

std::string format_step_grid(const Schedule& s, int max_columns) {
  const auto grid = step_grid(s);
  std::size_t n = 0;
  for (const auto& row : grid) n = std::max(n, row.size());
  const std::size_t shown = std::min<std::size_t>(n, static_cast<std::size_t>(std::max(1, max_columns)));
  auto text = [&](int r, std::size_t k) {
    return k < grid[r].size() && grid[r][k] ? to_string(*grid[r][k]) : std::string(".");
  };
  std::vector<std::size_t> width(shown, 1);
  for (int r = 0; r < s.p; ++r)
    for (std::size_t k = 0; k < shown; ++k) width[k] = std::max(width[k], text(r, k).size());
  std::ostringstream os;
  const std::string label = "rank " + std::to_string(s.p - 1);
  for (int r = 0; r < s.p; ++r) {
    const std::string name = "rank " + std::to_string(r);
    os << std::string(label.size() - name.size(), ' ') << name << " |";
    for (std::size_t k = 0; k < shown; ++k) {
      const std::string t = text(r, k);
      os << ' ' << std::string(width[k] - t.size(), ' ') << t;
    }
    if (shown < n) os << " ...";
    os << '\n';
  }
  if (shown < n) os << "(first " << shown << " of " << n << " steps shown)\n";
  return os.str();
}

}  // namespace minipipe::sched
