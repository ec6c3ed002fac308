// Calibration and measured runs: a configuration's deck keys broadcast from rank 0, run through
// run_command with every output off, and the profile's slowdown measured from such runs.
#include "miniapp/tuning/calibrate.hpp"

#include <sstream>

#include "miniapp/launch/run.hpp"
#include "schedules/schedules.hpp"

namespace minipipe {

namespace {

std::string list_text(const std::vector<int>& split) {
  std::string t;
  for (std::size_t i = 0; i < split.size(); ++i) t += (i ? "," : "") + std::to_string(split[i]);
  return t;
}

}  // namespace

std::string config_keys(const TuneCandidate& c) {
  return c.schedule + ";" + std::to_string(c.m) + ";" + std::to_string(c.v) + ";" + list_text(c.split) + ";" +
         to_string(c.recompute) + ";" + std::to_string(c.memory_cap);
}

int run_config(const Deck& deck, MPI_Comm comm, std::string keys, int steps, RunReport& report) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  int len = static_cast<int>(keys.size());
  MPI_Bcast(&len, 1, MPI_INT, 0, comm);
  keys.resize(static_cast<std::size_t>(len));
  MPI_Bcast(keys.data(), len, MPI_CHAR, 0, comm);
  std::vector<std::string> f;
  std::stringstream ks(keys);
  for (std::string x; std::getline(ks, x, ';');) f.push_back(x);
  Deck d = deck;
  d.set_from_text("pipeline.schedule", f.at(0));
  d.set_from_text("pipeline.microbatches", f.at(1));
  d.set_from_text("pipeline.chunks", f.at(2));
  d.set_from_text("pipeline.layers_per_stage", f.at(3));
  d.set_from_text("train.recompute", f.at(4));
  if (f.size() > 5 && f.at(5) != "0") d.set_from_text("pipeline.memory_cap", f.at(5));
  d.set_from_text("pipeline.costs", "");
  d.set_from_text("train.steps", std::to_string(steps));
  d.set_from_text("profile.kernels", "false");
  d.set_from_text("profile.action_fence", "true");  // the calibration reads per-action times
  for (const char* key : {"output.dump", "output.json", "output.svg", "output.trace", "output.roofline",
                          "output.verify", "checkpoint.path", "checkpoint.restart"})
    d.set_from_text(key, "");
  std::ostream quiet(nullptr);
  std::vector<RunReport> reports;
  const int rc = run_command(d, "", comm, quiet, &reports);
  if (rc == 0 && rank == 0) report = reports.at(0);
  return rc;
}

std::vector<double> steps_after_first(const RunReport& r) {
  std::vector<double> out;
  for (std::size_t k = 1; k < r.step_seconds.size(); ++k) out.push_back(1e3 * r.step_seconds[k]);
  return out;
}

int calibrate_costs(const Deck& deck, MPI_Comm comm, CostFile& costs, int runs) {
  int rank = 0, world = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &world);
  costs.calibration = Calibration{};
  if (runs <= 0 || world < 2) return 0;
  const int m = static_cast<int>(deck.config().pipeline.microbatches.front());
  const std::vector<int> even = make_stage_layout(costs.shape.n_layer, world, {}).count;
  TuneCandidate ref;
  try {
    ref = predict(costs, world, "1f1b", 1, m, even, Recompute::none);
  } catch (const std::exception&) {
    return 0;  // the deck's m makes no 1F1B schedule at this p: left uncalibrated (on every rank)
  }
  // Every rank holds the same costs, so `ref` is the same everywhere.
  const sched::Schedule plan = sched::make_schedule("1f1b", world, m, 1);
  int rank0_actions = 0;
  for (const auto& a : plan.ranks.at(0)) rank0_actions += sched::is_compute(a.op) ? 1 : 0;
  double outside = 0, cv = 0;
  std::vector<double> busy_ms, step_ms, span_ms, outside_step;
  for (int k = 0; k < runs; ++k) {
    RunReport rep;
    const int rc = run_config(deck, comm, config_keys(ref), 2, rep);
    if (rc != 0) return rc;
    if (rank != 0) continue;
    double busy = 0;
    for (const auto& q : rep.ranks) busy += 1e3 * (q.time_F + q.time_I + q.time_W + q.time_B);
    busy_ms.push_back(busy);
    const RankReport& r0 = rep.ranks.at(0);
    outside += 1e3 * std::max(0.0, rep.makespan - r0.busy - r0.comm_wait - r0.dump_io);
    step_ms.push_back(1e3 * rep.step_seconds.back());
    span_ms.push_back(1e3 * rep.makespans.back());
    outside_step.push_back(step_ms.back() - span_ms.back());
    cv += rep.action_cv / runs;
  }
  // Medians over the runs, like the step times: one disturbed run does not move the model.
  double got[6] = {ref.busy_ms > 0 ? median(busy_ms) / ref.busy_ms : 1.0,
                   median(step_ms),
                   median(span_ms),
                   outside / (runs * std::max(1, rank0_actions)),
                   ref.fixed_ms > 0 ? std::max(0.0, median(outside_step)) / ref.fixed_ms : 1.0,
                   cv};
  MPI_Bcast(got, 6, MPI_DOUBLE, 0, comm);
  Calibration& c = costs.calibration;
  c.measured = true, c.ranks = world, c.m = m, c.runs = runs;
  c.config = "1f1b p=" + std::to_string(world) + " v=1 m=" + std::to_string(m) + " split " + split_text(even) +
             " recompute none";
  c.slowdown = got[0] > 0 ? got[0] : 1.0;
  c.measured_step_ms = got[1], c.measured_makespan_ms = got[2], c.action_overhead_ms = got[3];
  c.fixed_slowdown = got[4] > 0 ? got[4] : 1.0;
  c.action_cv = got[5];
  const TuneCandidate cal = predict(costs, world, "1f1b", 1, m, even, Recompute::none);
  c.predicted_step_ms = cal.step_ms, c.predicted_makespan_ms = cal.makespan_ms;
  return 0;
}

}  // namespace minipipe
