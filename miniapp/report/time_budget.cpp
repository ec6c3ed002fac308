// The time budget: three nested event simulations give each rank's idle targets, a clamp chain
// splits the measured idle into ideal bubble, imbalance, communication and overhead; reports.
#include "miniapp/report/time_budget.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <tuple>

#include "miniapp/report/report.hpp"
#include "util/svg.hpp"

namespace minipipe {

namespace {

std::int64_t ns_of_seconds(double s) {
  return std::isfinite(s) ? static_cast<std::int64_t>(std::llround(s * 1e9)) : 0;
}
std::int64_t ns_of_ms(double ms) {
  return std::isfinite(ms) ? static_cast<std::int64_t>(std::llround(ms * 1e6)) : 0;
}

double mean_of(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x / static_cast<double>(v.size());
  return s;
}

// The five kinds in report order, with their names and colours.
struct Kind {
  const char* name;
  const char* colour;
  std::int64_t BudgetLine::*field;
};
constexpr Kind kKinds[] = {{"compute", "#4e79a7", &BudgetLine::compute},
                           {"ideal bubble", "#bab0ac", &BudgetLine::ideal_bubble},
                           {"imbalance wait", "#f28e2b", &BudgetLine::imbalance_wait},
                           {"exposed comm", "#e15759", &BudgetLine::exposed_comm},
                           {"overhead", "#b07aa1", &BudgetLine::overhead}};

}  // namespace

BudgetLine& BudgetLine::operator+=(const BudgetLine& o) {
  compute += o.compute, ideal_bubble += o.ideal_bubble, imbalance_wait += o.imbalance_wait;
  exposed_comm += o.exposed_comm, overhead += o.overhead;
  return *this;
}

BudgetLine split_rank_time(std::int64_t makespan, std::int64_t compute, const IdleTargets& idle) {
  const std::int64_t M = std::max<std::int64_t>(0, makespan);
  BudgetLine b;
  b.compute = std::clamp<std::int64_t>(compute, 0, M);
  const std::int64_t N = M - b.compute;  // the rank's idle, as measured
  // Clamped from the measured end downwards: a later kind keeps its own increment and a target
  // that falls (a slow stage's rank idles less than the ideal) lowers the earlier kinds.
  const std::int64_t v2 = std::clamp<std::int64_t>(idle.comm, 0, N);
  const std::int64_t v1 = std::clamp<std::int64_t>(idle.imbalance, 0, v2);
  const std::int64_t v0 = std::clamp<std::int64_t>(idle.ideal, 0, v1);
  b.ideal_bubble = v0, b.imbalance_wait = v1 - v0, b.exposed_comm = v2 - v1, b.overhead = N - v2;
  return b;
}

sched::CostModel stage_mean_costs(const sched::CostModel& costs, int stages, int v) {
  sched::CostModel c = costs.resolved(stages, v);
  for (auto* list : {&c.F, &c.B, &c.I, &c.W, &c.W_tail})
    if (!list->empty()) list->assign(list->size(), mean_of(*list));
  return c;
}

TimeBudget time_budget(const sched::Schedule& plan, const sched::CostModel& costs, double link_ms,
                       const std::vector<double>& compute_s, double makespan_s) {
  const int S = plan.num_stages();
  sched::CostModel measured = costs.resolved(S, plan.v);
  measured.comm = 0, measured.action_overhead = 0, measured.jitter_cv = 0;
  sched::CostModel linked = measured;
  linked.comm = std::max(0.0, link_ms);
  const sched::SimResult sim[3] = {sched::simulate(plan, stage_mean_costs(measured, S, plan.v)),
                                   sched::simulate(plan, measured), sched::simulate(plan, linked)};
  TimeBudget b;
  b.makespan = ns_of_seconds(makespan_s);
  b.link_ms = linked.comm;
  b.costs = measured;
  for (int k = 0; k < 3; ++k) b.sim_makespan[k] = ns_of_ms(sim[k].makespan);
  for (int r = 0; r < plan.p; ++r) {
    const auto i = static_cast<std::size_t>(r);
    const IdleTargets t{ns_of_ms(sim[0].idle[i]), ns_of_ms(sim[1].idle[i]), ns_of_ms(sim[2].idle[i])};
    b.ranks.push_back(split_rank_time(b.makespan, ns_of_seconds(i < compute_s.size() ? compute_s[i] : 0.0), t));
    b.total += b.ranks.back();
  }
  return b;
}

LinkEstimate measured_link(const std::vector<RankStepStats>& ranks) {
  // (forward?, stage, micro-batch) -> (rank, end) of the action whose output crosses a boundary.
  std::map<std::tuple<bool, int, int>, std::pair<int, double>> produced;
  for (std::size_t r = 0; r < ranks.size(); ++r)
    for (const auto& a : ranks[r].actions)
      if (a.op == sched::Op::F || a.op == sched::Op::I || a.op == sched::Op::B)
        produced[{a.op == sched::Op::F, a.stage, a.microbatch}] = {static_cast<int>(r), a.end};
  std::vector<double> lat;
  for (std::size_t r = 0; r < ranks.size(); ++r)
    for (const auto& a : ranks[r].actions) {
      if (a.wait <= 0 || a.op == sched::Op::W) continue;
      const bool fwd = a.op == sched::Op::F;
      const auto it = produced.find({fwd, fwd ? a.stage - 1 : a.stage + 1, a.microbatch});
      if (it == produced.end() || it->second.first == static_cast<int>(r)) continue;
      // Waiting already when the producer ended: the data cannot have arrived before the wait.
      if (a.start - a.wait <= it->second.second) lat.push_back(std::max(0.0, a.start - it->second.second));
    }
  LinkEstimate e;
  e.samples = static_cast<int>(lat.size());
  if (lat.empty()) return e;
  std::sort(lat.begin(), lat.end());
  const std::size_t n = lat.size();
  e.latency_ms = 1e3 * (n % 2 ? lat[n / 2] : 0.5 * (lat[n / 2 - 1] + lat[n / 2]));
  return e;
}

double ms_of(std::int64_t ns) {
  return static_cast<double>(ns) * 1e-6;
}

std::string budget_rank_text(const TimeBudget& b) {
  std::string out;
  char line[320];
  for (std::size_t r = 0; r < b.ranks.size(); ++r) {
    const BudgetLine& l = b.ranks[r];
    std::snprintf(line, sizeof(line),
                  "  rank %zu budget: compute %7.2f  ideal bubble %7.2f  imbalance %7.2f  exposed comm %7.2f  "
                  "overhead %7.2f ms | beside: all-reduce %.2f  optimizer %.2f ms\n",
                  r, ms_of(l.compute), ms_of(l.ideal_bubble), ms_of(l.imbalance_wait), ms_of(l.exposed_comm),
                  ms_of(l.overhead), r < b.allreduce.size() ? 1e3 * b.allreduce[r] : 0.0,
                  r < b.optimizer.size() ? 1e3 * b.optimizer[r] : 0.0);
    out += line;
  }
  std::snprintf(line, sizeof(line),
                "  makespans: measured %.2f ms; simulated ideal %.2f, + imbalance %.2f, + link %.3f ms a transfer "
                "(%d receive(s) measured) %.2f ms\n",
                ms_of(b.makespan), ms_of(b.sim_makespan[0]), ms_of(b.sim_makespan[1]), b.link_ms, b.link_samples,
                ms_of(b.sim_makespan[2]));
  out += line;
  return out;
}

void print_budget_table(const std::vector<RunReport>& runs, std::ostream& out) {
  char line[320];
  std::snprintf(line, sizeof(line), "%-17s %3s %3s %4s %8s %8s %8s %8s %8s %9s %9s %9s", "time budget", "p", "v", "m",
                "compute", "ideal", "imbal", "comm", "overhd", "link ms", "allred ms", "optim ms");
  out << line << "\n";
  for (const auto& r : runs) {
    const TimeBudget& b = r.budget;
    if (b.empty()) continue;
    const double all = static_cast<double>(b.total.total());
    auto f = [&](std::int64_t x) { return all > 0 ? static_cast<double>(x) / all : 0.0; };
    const double ar = b.allreduce.empty() ? 0.0 : *std::max_element(b.allreduce.begin(), b.allreduce.end());
    const double opt = b.optimizer.empty() ? 0.0 : *std::max_element(b.optimizer.begin(), b.optimizer.end());
    std::snprintf(line, sizeof(line), "%-17s %3d %3d %4d %8.3f %8.3f %8.3f %8.3f %8.3f %9.3f %9.2f %9.2f",
                  r.schedule.c_str(), r.p, r.v, r.m, f(b.total.compute), f(b.total.ideal_bubble),
                  f(b.total.imbalance_wait), f(b.total.exposed_comm), f(b.total.overhead), b.link_ms, 1e3 * ar,
                  1e3 * opt);
    out << line << "\n";
  }
  out << "(time budget: the last step's p x makespan in five kinds summing to 1 (docs/time-budget.md): measured\n"
         " compute; ideal bubble = idle with every stage at the stage-mean cost (simulated); imbalance = added by\n"
         " each stage's own measured cost; comm = added by the measured link latency; overhead = the rest of the\n"
         " measured idle (dump I/O included); beside it, the slowest rank's all-reduce and optimizer)\n";
}

void write_budget_svg(const TimeBudget& b, const std::string& title, std::ostream& out) {
  using util::fixed;
  const int bar_w = 520, left = 105, row_h = 26, top = 40;  // left: room for "p x makespan"
  const int rows = static_cast<int>(b.ranks.size()) + 1;
  const int height = top + rows * row_h + 60;
  util::SvgWriter svg(out, {"width", left + bar_w + 20}, {"height", height},
                      {{"font-family", "sans-serif"}, {"font-size", "12"}});
  svg.element("text", {{"x", "10"}, {"y", "20"}, {"font-size", "14"}}, "time budget: " + title + " (last step)")
      .newline();
  auto bar = [&](int row, const std::string& label, const BudgetLine& l) {
    const double all = static_cast<double>(l.total());
    const int y = top + row * row_h;
    svg.element("text", {{"x", "10"}, {"y", y + 14}}, label).newline();
    double x = left;
    for (const Kind& k : kKinds) {
      const double w = all > 0 ? bar_w * static_cast<double>(l.*k.field) / all : 0.0;
      const double pct = all > 0 ? 100.0 * static_cast<double>(l.*k.field) / all : 0.0;
      svg.open("rect", {{"x", fixed(x)}, {"y", y}, {"width", fixed(w)}, {"height", "18"}, {"fill", k.colour}})
          .element("title", {},
                   std::string(k.name) + " " + fixed(ms_of(l.*k.field), 3) + " ms (" + fixed(pct, 1) + "%)")
          .close("rect")
          .newline();
      x += w;
    }
  };
  for (std::size_t r = 0; r < b.ranks.size(); ++r) bar(static_cast<int>(r), "rank " + std::to_string(r), b.ranks[r]);
  bar(static_cast<int>(b.ranks.size()), "p x makespan", b.total);
  int x = 10;
  const int y = top + rows * row_h + 14;
  for (const Kind& k : kKinds) {
    svg.element("rect", {{"x", x}, {"y", y}, {"width", "12"}, {"height", "12"}, {"fill", k.colour}})
        .element("text", {{"x", x + 16}, {"y", y + 11}}, k.name)
        .newline();
    x += 16 + 8 * static_cast<int>(std::string(k.name).size()) + 14;
  }
  svg.element("text", {{"x", "10"}, {"y", y + 34}, {"fill", "#555"}},
              "each bar: the makespan " + fixed(ms_of(b.makespan)) + " ms of one rank (last: all ranks); hover for ms")
      .newline();
  svg.finish();
}

}  // namespace minipipe
