// Formatting of simulation results for people (aligned table) and for tools (JSON).
// JSON through json_text (schedules/text.hpp): numbers read back as the exact doubles.
#include "schedules/report.hpp"

#include <algorithm>
#include <cstdio>

#include "schedules/schedule.hpp"
#include "schedules/text.hpp"
#include "schedules/timeline.hpp"

namespace minipipe::sched {

namespace {

std::string fmt(double x, const char* spec = "%.6g") {
  char buf[64];
  std::snprintf(buf, sizeof buf, spec, x);
  return buf;
}

std::string list_text(const std::vector<double>& v) {
  bool same = true;
  for (double x : v) same = same && x == v.front();
  if (same && !v.empty()) return fmt(v.front());
  std::string out;
  for (std::size_t k = 0; k < v.size(); ++k) out += (k ? ":" : "") + fmt(v[k]);
  return out;
}

// Slowest stage's F+B over the mean: 1 means balanced; every other stage waits for the excess.
double stage_imbalance(const CostModel& c) {
  double worst = 0, sum = 0;
  for (std::size_t k = 0; k < c.F.size(); ++k) {
    worst = std::max(worst, c.F[k] + c.B[k]);
    sum += c.F[k] + c.B[k];
  }
  return sum > 0 ? worst * static_cast<double>(c.F.size()) / sum : 1.0;
}

bool is_generated(const Schedule& s) {
  for (const auto& n : schedule_names())
    if (n == s.name) return true;
  return false;
}

}  // namespace

std::string describe_placement(const Schedule& s) {
  if (s.stage_to_rank == looped_placement(s.p, s.v)) return "loop";
  if (s.stage_to_rank == v_placement(s.p, s.v)) return "v";
  return "custom";
}

void write_summary(const Schedule& s, const CostModel& cost, const SimResult& r, std::optional<double> analytic,
                   std::ostream& out) {
  const CostModel c = cost.resolved(s.num_stages(), s.v);
  out << "schedule        " << s.name << "  p=" << s.p << " v=" << s.v << " m=" << s.m << "  stages=" << s.num_stages()
      << " placement=" << describe_placement(s)
      << (s.chains > 1 ? "  model copies=" + std::to_string(s.chains) + " (micro-batch mb through copy mb % " +
                             std::to_string(s.chains) + ")"
                       : "")
      << (s.uses_split_backward() ? "  split backward (I/W)" : "") << (s.uses_overlap() ? "  OVERLAP_F_B" : "") << '\n';
  if (is_generated(s)) out << "constraints     " << constraints(s.name) << '\n';
  out << "costs           F=" << list_text(c.F) << " B=" << list_text(c.B) << " I=" << list_text(c.I)
      << " W=" << list_text(c.W) << "  comm=" << fmt(c.comm);
  if (s.uses_overlap()) out << "  overlap=" << fmt(c.overlap_fb);
  out << "  stage imbalance (max/mean F+B) " << fmt(stage_imbalance(c)) << '\n';
  out << "makespan        " << fmt(r.makespan) << '\n';
  out << "bubble fraction " << fmt(r.bubble_fraction) << " simulated (idle / (p x makespan))";
  const std::string formula = is_generated(s) ? analytic_formula(s.name) : "";
  if (analytic)
    out << ";  " << fmt(*analytic) << " analytic " << formula;
  else if (!formula.empty())
    out << ";  analytic " << formula << " does not apply to these costs";
  out << '\n';
  out << "interior bubble " << fmt(r.interior_bubble_fraction)
      << " (idle between each rank's first and last action, over their spans)\n";
  out << "\n rank        busy        idle    interior  in-flight  waiting-W  held  act-mem\n";
  for (int k = 0; k < s.p; ++k) {
    char line[160];
    std::snprintf(line, sizeof line, "%5d %11.6g %11.6g %11.6g %10d %10d %5d %8.4g\n", k, r.busy[k], r.idle[k],
                  r.interior_idle[k], r.peak_inflight[k], r.peak_waiting_w[k], r.peak_held[k], r.activation_mem[k]);
    out << line;
  }
  out << "(in-flight: forward done, B/I not; waiting-W: I done, W not; held: both, in stage-"
         "micro-batches; act-mem: micro-batch units, a rank's whole model share = 1)\n";
}

void write_json(const Schedule& s, const CostModel& cost, const SimResult& r, std::optional<double> analytic,
                std::ostream& out) {
  const CostModel c = cost.resolved(s.num_stages(), s.v);
  const std::string formula = is_generated(s) ? analytic_formula(s.name) : "";
  Json j;
  j["schedule"] = s.name;
  j["p"] = s.p;
  j["v"] = s.v;
  j["m"] = s.m;
  j["stages"] = s.num_stages();
  j["placement"] = describe_placement(s);
  j["stage_to_rank"] = s.stage_to_rank;
  if (s.chains > 1) j["model_copies"] = s.chains;  // DualPipe: stage s is part s % (p*v/2) of copy s / (p*v/2)
  j["costs"] = {{"F", c.F}, {"B", c.B}, {"I", c.I}, {"W", c.W}, {"comm", c.comm}, {"overlap", c.overlap_fb}};
  j["stage_imbalance"] = stage_imbalance(c);
  j["makespan"] = r.makespan;
  j["bubble_fraction"] = r.bubble_fraction;
  j["analytic_bubble_fraction"] = analytic ? Json(*analytic) : Json();
  j["analytic_formula"] = formula.empty() ? Json() : Json(formula);
  j["interior_bubble_fraction"] = r.interior_bubble_fraction;
  j["ranks"] = Json::array();
  for (int k = 0; k < s.p; ++k)
    j["ranks"].push_back({{"rank", k},
                          {"busy", r.busy[k]},
                          {"idle", r.idle[k]},
                          {"interior_idle", r.interior_idle[k]},
                          {"start", r.start[k]},
                          {"end", r.end[k]},
                          {"peak_inflight", r.peak_inflight[k]},
                          {"peak_waiting_w", r.peak_waiting_w[k]},
                          {"peak_held", r.peak_held[k]},
                          {"activation_mem", r.activation_mem[k]}});
  out << json_text(j) << "\n";
}

}  // namespace minipipe::sched
