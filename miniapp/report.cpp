// JSON report and end-of-run table. The JSON writer is deliberately tiny: flat objects,
// numbers printed with 17 significant digits so a report can be re-read without loss.
#include "report.hpp"

#include <cmath>
#include <cstdio>
#include <iomanip>
#include <sstream>

#include "schedules/text.hpp"

namespace minipipe {

namespace {
using sched::json_number;
using sched::json_quote;
template <class V>
std::string arr(const V& v) {
  return sched::json_array(std::vector<double>(v.begin(), v.end()));
}
}  // namespace

void write_json(const std::vector<RunReport>& runs, const LaunchSummary& launch, const std::string& deck_toml,
                std::ostream& out) {
  out << "{\n  \"fom\": {\"value\": " << json_number(launch.fom_tokens_per_second)
      << ", \"unit\": \"tokens/s\", \"model_tflops\": " << json_number(launch.model_tflops) << "},\n";
  out << "  \"verification\": " << json_quote(launch.verification)
      << ", \"verified\": " << (launch.verified ? "true" : "false") << ",\n";
  out << "  \"deck\": " << json_quote(deck_toml) << ",\n  \"runs\": [\n";
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const auto& r = runs[i];
    out << "    {\n";
    out << "      \"schedule\": " << json_quote(r.schedule) << ", \"p\": " << r.p << ", \"dp\": " << r.dp
        << ", \"v\": " << r.v << ", \"m\": " << r.m << ", \"first_step\": " << r.first_step
        << ", \"steps\": " << r.steps << ", \"batch\": " << r.batch << ", \"seq_len\": " << r.seq_len << ",\n";
    out << "      \"mode\": " << json_quote(r.mode) << ", \"backend\": " << json_quote(r.backend)
        << ", \"blas\": " << json_quote(r.blas) << ", \"gemm\": " << json_quote(r.gemm)
        << ", \"comm_path\": " << json_quote(r.comm_path) << ",\n";
    out << "      \"loss\": " << arr(r.losses) << ",\n";
    out << "      \"step_seconds\": " << arr(r.step_seconds)
        << ", \"step_seconds_mean\": " << json_number(r.step_seconds_mean)
        << ", \"tokens_per_second\": " << json_number(r.tokens_per_second) << ",\n";
    out << "      \"makespan\": " << json_number(r.makespan)
        << ", \"bubble_measured\": " << json_number(r.bubble_measured)
        << ", \"bubble_simulated\": " << json_number(r.bubble_simulated)
        << ", \"bubble_analytic\": " << (r.bubble_analytic ? json_number(*r.bubble_analytic) : "null")
        << ", \"imbalance\": " << json_number(r.imbalance) << ",\n";
    out << "      \"stage_compute_seconds\": " << arr(r.stage_compute) << ",\n";
    out << "      \"ranks\": [\n";
    for (std::size_t k = 0; k < r.ranks.size(); ++k) {
      const auto& q = r.ranks[k];
      out << "        {\"rank\": " << q.rank << ", \"stages\": " << arr(q.stages)
          << ", \"F\": " << json_number(q.time_F) << ", \"I\": " << json_number(q.time_I)
          << ", \"W\": " << json_number(q.time_W) << ", \"B\": " << json_number(q.time_B)
          << ", \"busy\": " << json_number(q.busy) << ", \"comm_wait\": " << json_number(q.comm_wait)
          << ", \"allreduce\": " << json_number(q.allreduce) << ", \"idle\": " << json_number(q.idle)
          << ", \"dump_io\": " << json_number(q.dump_io) << ", \"peak_stored_microbatches\": " << q.peak_stored_mb
          << ", \"peak_stored_bytes\": " << json_number(q.peak_stored_bytes)
          << ", \"workspace_bytes\": " << json_number(q.workspace_bytes)
          << ", \"host_syncs_per_step\": " << q.host_syncs << "}" << (k + 1 < r.ranks.size() ? "," : "") << "\n";
    }
    out << "      ],\n";
    out << "      \"dump\": " << json_quote(r.dump_path)
        << ", \"dump_vs_reference\": " << json_quote(r.dump_vs_reference) << "\n";
    out << "    }" << (i + 1 < runs.size() ? "," : "") << "\n";
  }
  out << "  ]\n}\n";
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
    std::snprintf(bub, sizeof(bub), "%.3f / %.3f / %s", r.bubble_measured, r.bubble_simulated, an);
    char act[32];
    std::snprintf(act, sizeof(act), "%d / %.2f", peak_mb, peak_bytes / 1048576.0);
    std::snprintf(line, sizeof(line), "%-17s %3d %3d %4d %10.2f %11.0f %27s %15s %10s", r.schedule.c_str(), r.p, r.v,
                  r.m, 1e3 * r.step_seconds_mean, r.tokens_per_second, bub, act, r.dump_vs_reference.c_str());
    out << line << "\n";
  }
  out << "(bubble: idle / (p x makespan) of the last step; sim = event simulator fed with this run's measured\n"
         " per-stage F/I/W/B costs; analytic = the schedule's closed form for equal stages (stage-mean measured\n"
         " costs, or F = I = W where the formula needs it); peak act = stored micro-batches and MiB on rank 0)\n";
}

}  // namespace minipipe
