// JSON report and end-of-run table. The report is built as a JSON value, one function per
// section, and written by sched::json_text (nlohmann-json: numbers read back as the same doubles,
// every string escaped, invalid UTF-8 replaced).
#include "miniapp/report/report.hpp"

#include <cmath>
#include <cstdio>
#include <iomanip>
#include <sstream>

#include "schedules/text.hpp"

namespace minipipe {

namespace {

using sched::Json;

Json fom_section(const LaunchSummary& launch) {
  return {{"value", launch.fom_tokens_per_second}, {"unit", "tokens/s"}, {"model_tflops", launch.model_tflops}};
}

// A run's time budget (time_budget.hpp), in ms.
Json budget_section(const TimeBudget& b) {
  auto line = [](const BudgetLine& l) {
    return Json{{"compute", ms_of(l.compute)},
                {"ideal_bubble", ms_of(l.ideal_bubble)},
                {"imbalance_wait", ms_of(l.imbalance_wait)},
                {"exposed_comm", ms_of(l.exposed_comm)},
                {"overhead", ms_of(l.overhead)}};
  };
  Json j;
  j["unit"] = "ms";
  j["measured_makespan"] = ms_of(b.makespan);
  j["simulated_makespan"] = {
      {"ideal", ms_of(b.sim_makespan[0])}, {"imbalance", ms_of(b.sim_makespan[1])}, {"comm", ms_of(b.sim_makespan[2])}};
  j["stage_costs"] = {
      {"F", b.costs.F}, {"B", b.costs.B}, {"I", b.costs.I}, {"W", b.costs.W}, {"W_tail", b.costs.W_tail}};
  j["link_latency"] = b.link_ms;
  j["link_samples"] = b.link_samples;
  j["total"] = line(b.total);
  j["ranks"] = Json::array();
  for (const BudgetLine& l : b.ranks) j["ranks"].push_back(line(l));
  // Beside the pipeline, per rank (ms).
  j["allreduce"] = Json::array();
  j["optimizer"] = Json::array();
  for (double x : b.allreduce) j["allreduce"].push_back(1e3 * x);
  for (double x : b.optimizer) j["optimizer"].push_back(1e3 * x);
  return j;
}

Json rank_section(const RankReport& q) {
  return {{"rank", q.rank},
          {"stages", q.stages},
          {"F", q.time_F},
          {"I", q.time_I},
          {"W", q.time_W},
          {"B", q.time_B},
          {"busy", q.busy},
          {"comm_wait", q.comm_wait},
          {"allreduce", q.allreduce},
          {"allreduce_total", q.allreduce_total},
          {"allreduce_bytes_per_element", q.allreduce_bytes_per_element},
          {"idle", q.idle},
          {"dump_io", q.dump_io},
          {"peak_stored_microbatches", q.peak_stored_mb},
          {"peak_stored_bytes", q.peak_stored_bytes},
          {"workspace_bytes", q.workspace_bytes},
          {"host_syncs_per_step", q.host_syncs}};
}

Json run_section(const RunReport& r) {
  Json j;
  j["schedule"] = r.schedule;
  j["p"] = r.p;
  j["dp"] = r.dp;
  j["v"] = r.v;
  j["m"] = r.m;
  j["first_step"] = r.first_step;
  j["steps"] = r.steps;
  j["batch"] = r.batch;
  j["seq_len"] = r.seq_len;
  j["mode"] = r.mode;
  j["backend"] = r.backend;
  j["blas"] = r.blas;
  j["gemm"] = r.gemm;
  j["gemm_blocking"] = r.gemm_blocking.empty() ? Json() : Json(r.gemm_blocking);
  j["comm_path"] = r.comm_path;
  j["loss"] = r.losses;
  j["step_seconds"] = r.step_seconds;
  j["step_seconds_mean"] = r.step_seconds_mean;
  j["tokens_per_second"] = r.tokens_per_second;
  j["makespan"] = r.makespan;
  j["bubble_measured"] = r.bubble_measured;
  j["bubble_simulated"] = r.bubble_simulated;
  j["bubble_analytic"] = r.bubble_analytic ? Json(*r.bubble_analytic) : Json();
  j["imbalance"] = r.imbalance;
  j["stage_compute_seconds"] = r.action_times ? Json(r.stage_compute) : Json();
  j["time_budget"] = r.budget.empty() ? Json() : budget_section(r.budget);
  // false: profile.action_fence = false; the figures built from per-action times are null.
  j["per_action_times"] = r.action_times;
  j["ranks"] = Json::array();
  for (const RankReport& q : r.ranks) j["ranks"].push_back(rank_section(q));
  j["dump"] = r.dump_path;
  j["dump_vs_reference"] = r.dump_vs_reference;
  // The kernel counters' section comes as JSON text from the device-side counters (kernel_report),
  // which may not include nlohmann-json; read back here so the report stays one JSON value.
  if (!r.kernel_counters_json.empty()) j["kernel_counters"] = Json::parse(r.kernel_counters_json);
  return j;
}

}  // namespace

void write_json(const std::vector<RunReport>& runs, const LaunchSummary& launch, const std::string& deck_toml,
                std::ostream& out) {
  Json j;
  j["fom"] = fom_section(launch);
  j["verification"] = launch.verification;
  j["verified"] = launch.verified;
  // Always present, empty on a clean run: a reader need not know the hooks to see that one was on.
  j["test_hooks"] = launch.test_hooks;
  j["fom"]["measured"] = launch.test_hooks.empty();
  j["deck"] = deck_toml;
  j["runs"] = Json::array();
  for (const RunReport& r : runs) j["runs"].push_back(run_section(r));
  out << sched::json_text(j) << "\n";
}

void print_table(const std::vector<RunReport>& runs, std::ostream& out) {
  char line[512];
  std::snprintf(line, sizeof(line), "%-17s %3s %3s %4s %10s %11s %27s %15s %10s", "schedule", "p", "v", "m", "step ms",
                "tokens/s", "bubble meas / sim / analytic", "peak act mb/MiB", "dump");
  out << line << "\n";
  for (const auto& r : runs) {
    int peak_mb = 0;
    double peak_bytes = 0;
    if (!r.ranks.empty()) peak_mb = r.ranks[0].peak_stored_mb, peak_bytes = r.ranks[0].peak_stored_bytes;
    char an[16] = "-";
    if (r.bubble_analytic) std::snprintf(an, sizeof(an), "%.3f", *r.bubble_analytic);
    char bub[64];
    if (r.action_times)
      std::snprintf(bub, sizeof(bub), "%.3f / %.3f / %s", r.bubble_measured, r.bubble_simulated, an);
    else
      std::snprintf(bub, sizeof(bub), "n/a / n/a / %s", an);
    char act[32];
    std::snprintf(act, sizeof(act), "%d / %.2f", peak_mb, peak_bytes / 1048576.0);
    std::snprintf(line, sizeof(line), "%-17s %3d %3d %4d %10.2f %11.0f %27s %15s %10s", r.schedule.c_str(), r.p, r.v,
                  r.m, 1e3 * r.step_seconds_mean, r.tokens_per_second, bub, act, r.dump_vs_reference.c_str());
    out << line << "\n";
  }
  out << "(bubble: idle / (p x makespan) of the last step; sim = event simulator fed with this run's measured\n"
         " per-stage F/I/W/B costs; analytic = the schedule's closed form for equal stages (stage-mean measured\n"
         " costs, or F = I = W where the formula needs it); peak act = stored micro-batches and MiB on rank 0)\n";
  for (const auto& r : runs)
    if (!r.action_times) {
      out << "(n/a: per-action times unavailable: profile.action_fence = false enqueues compute actions without a\n"
             " fence, so the measured and simulated bubble, per-rank F/I/W/B, imbalance and time budget are not\n"
             " reported; the analytic bubble uses unit costs)\n";
      break;
    }
  print_budget_table(runs, out);
}

}  // namespace minipipe
