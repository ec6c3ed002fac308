// The tuner: enumerate, simulate with measured per-part costs (recompute's extra I time and its
// smaller stores included) scaled by the calibration's slowdown, add the step's fixed costs,
// filter by the memory cap, rank; --verify runs the best in alternating rounds and measures.
#include "tune.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "model.hpp"
#include "profile.hpp"
#include "run.hpp"
#include "schedules/schedules.hpp"
#include "schedules/split.hpp"

namespace minipipe {

namespace {

std::string split_text(const std::vector<int>& split) {
  std::string t;
  for (std::size_t i = 0; i < split.size(); ++i) t += (i ? "/" : "") + std::to_string(split[i]);
  return t;
}

std::string list_text(const std::vector<int>& split) {
  std::string t;
  for (std::size_t i = 0; i < split.size(); ++i) t += (i ? "," : "") + std::to_string(split[i]);
  return t;
}

StageLayout layout_of(int n_layer, const std::vector<int>& split) {
  return make_stage_layout(n_layer, static_cast<int>(split.size()), std::vector<long long>(split.begin(), split.end()));
}

// Simulations per prediction when the calibration measured an action spread.
constexpr int kJitterSamples = 16;

double median(std::vector<double> x) {
  if (x.empty()) return 0.0;
  std::sort(x.begin(), x.end());
  const std::size_t n = x.size();
  return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

// The deck keys of a configuration as one line of text (rank 0's choice travels this way).
std::string config_keys(const TuneCandidate& c) {
  return c.schedule + ";" + std::to_string(c.m) + ";" + std::to_string(c.v) + ";" + list_text(c.split) + ";" +
         to_string(c.recompute);
}

// Collective: runs rank 0's configuration `keys` for `steps` steps with every output off; rank 0
// gets the run's report. Returns run_command's exit code.
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
  d.set_from_text("pipeline.costs", "");
  d.set_from_text("train.steps", std::to_string(steps));
  d.set_from_text("profile.kernels", "false");
  for (const char* key : {"output.dump", "output.json", "output.svg", "output.trace", "output.roofline",
                          "output.verify", "checkpoint.path", "checkpoint.restart"})
    d.set_from_text(key, "");
  std::ostream quiet(nullptr);
  std::vector<RunReport> reports;
  const int rc = run_command(d, "", comm, quiet, &reports);
  if (rc == 0 && rank == 0) report = reports.at(0);
  return rc;
}

// Whole-step times (ms) of the steps after the first.
std::vector<double> steps_after_first(const RunReport& r) {
  std::vector<double> out;
  for (std::size_t k = 1; k < r.step_seconds.size(); ++k) out.push_back(1e3 * r.step_seconds[k]);
  return out;
}

}  // namespace

TuneCandidate predict(const CostFile& costs, int p, const std::string& schedule, int v, int m,
                      const std::vector<int>& split, Recompute r) {
  const sched::Schedule s = sched::make_schedule(schedule, p, m, v);
  const int samples = costs.batch / m;
  const StageLayout layout = layout_of(costs.shape.n_layer, split);
  const sched::CostModel cm = stage_costs(costs, layout, samples, r);
  const sched::SimResult sim = sched::simulate(s, cm);
  const std::vector<double> fixed = rank_fixed_ms(costs, layout, s.stage_to_rank, p);
  TuneCandidate c;
  c.schedule = schedule, c.v = s.v, c.m = m, c.split = split, c.recompute = r;
  // With a measured action spread: the mean over jittered simulations (uneven actions add waits).
  c.makespan_ms = sched::mean_makespan(s, cm, kJitterSamples), c.bubble = sim.bubble_fraction;
  c.fixed_ms = *std::max_element(fixed.begin(), fixed.end());
  c.step_ms = c.makespan_ms + c.fixed_ms;
  for (double b : sim.busy) c.busy_ms += b;
  c.peak_bytes = *std::max_element(sim.activation_mem.begin(), sim.activation_mem.end());
  return c;
}

int calibrate_costs(const Deck& deck, MPI_Comm comm, CostFile& costs, int runs) {
  int rank = 0, world = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &world);
  costs.calibration = Calibration{};
  if (runs <= 0 || world < 2) return 0;
  const int m = static_cast<int>(deck.get_int_list("pipeline.microbatches").front());
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

std::vector<TuneCandidate> enumerate_configs(const CostFile& costs, int p, int batch, double memory_cap,
                                             const std::vector<std::string>& names_in) {
  const std::vector<std::string> names = names_in.empty() ? sched::schedule_names() : names_in;
  const int L = costs.shape.n_layer;
  std::vector<TuneCandidate> out;
  for (const auto& name : names)
    for (int v = 1; v <= 4; ++v) {
      const int S = p * v;
      if (S > L) continue;
      for (int m = 1; m <= batch; ++m) {
        if (batch % m != 0) continue;
        try {
          (void)sched::make_schedule(name, p, m, v);
        } catch (const sched::ScheduleError&) {
          continue;  // this schedule does not take (p, m, v)
        }
        for (Recompute r : {Recompute::none, Recompute::attention, Recompute::block}) {
          const StageLayout even = make_stage_layout(L, S, {});
          const LayerTimes lt = layer_times(costs, batch / m, r);
          const std::vector<int> balanced = sched::balanced_split(lt.blocks, lt.embedding, lt.head, S);
          std::vector<std::pair<std::vector<int>, bool>> splits{{even.count, false}};
          if (balanced != even.count) splits.push_back({balanced, true});
          for (const auto& [split, is_auto] : splits) {
            TuneCandidate c = predict(costs, p, name, v, m, split, r);
            c.auto_split = is_auto;
            if (memory_cap > 0 && c.peak_bytes > memory_cap) continue;
            out.push_back(std::move(c));
          }
        }
      }
    }
  std::stable_sort(out.begin(), out.end(), [](const TuneCandidate& a, const TuneCandidate& b) {
    return a.step_ms != b.step_ms ? a.step_ms < b.step_ms : a.peak_bytes < b.peak_bytes;
  });
  return out;
}

std::vector<BubbleAnswer> smallest_m_for_bubble(const CostFile& costs, int p, int samples, double target, int max_m) {
  std::vector<BubbleAnswer> out;
  const int L = costs.shape.n_layer;
  for (const auto& name : sched::schedule_names()) {
    BubbleAnswer a;
    a.schedule = name;
    a.v = sched::default_v(name);
    const int S = p * a.v;
    if (S > L) continue;
    // Every stage the mean of the even split's stages: the closed forms' uniform-cost setting.
    const sched::CostModel even = stage_costs(costs, make_stage_layout(L, S, {}), samples, Recompute::none);
    auto mean = [](const std::vector<double>& x) {
      double s = 0;
      for (double e : x) s += e / static_cast<double>(x.size());
      return s;
    };
    const sched::CostModel cm = sched::CostModel::uniform(S, mean(even.F), 0, mean(even.I), mean(even.W), 0);
    for (int m = 1; m <= max_m && a.m == 0; ++m) {
      sched::Schedule s;
      try {
        s = sched::make_schedule(name, p, m, a.v);
      } catch (const sched::ScheduleError&) {
        continue;
      }
      const double b = sched::simulate(s, cm).bubble_fraction;
      if (b < target) a.m = m, a.bubble = b;
    }
    out.push_back(a);
  }
  return out;
}

void TuneTool::attach(CLI::App& parent) {
  sub = parent.add_subcommand("tune",
                              "predict step time, bubble and memory of every schedule x m x v x split x recompute "
                              "from measured costs and print the best (--verify K: mpiexec -n P, runs the K best)");
  sub->option_defaults()->always_capture_default();
  sub->add_option("--deck", deck_path, "TOML input deck (model, batch, the m of the 1F1B baseline)");
  sub->add_option("-p", p, "pipeline ranks")->check(CLI::Range(1, 4096));
  sub->add_option("--memory-cap", memory_cap, "largest predicted peak stored activations per rank, bytes (0 = none)")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--costs", costs_path, "cost file of `minipipe profile` (empty: profile now)");
  sub->add_option("--verify", verify, "run the K best (and the 1F1B even-split baseline) and print measured times")
      ->check(CLI::Range(0, 100));
  sub->add_option("--top", top, "configurations to print")->check(CLI::Range(1, 10000));
  sub->add_option("--steps", steps, "steps of each --verify run (the first is warm-up)")->check(CLI::Range(2, 10000));
  sub->add_option("--repeat", repeat, "timed rounds per recompute mode when profiling now (see profile --help)")
      ->check(CLI::Range(1, 1000));
  sub->add_option("--calibrate", calibrate,
                  "when profiling now on 2+ ranks: runs (2 steps each) of the 1F1B reference that measure the slowdown")
      ->check(CLI::Range(0, 100));
  sub->add_option("--rounds", rounds, "--verify: alternating rounds over the configurations (noise shown when > 1)")
      ->check(CLI::Range(1, 100));
  sub->add_option("--schedules", schedules, "comma list of schedules to try (empty = all)");
  sub->add_option("--bubble-target", bubble_target,
                  "also print, per schedule, the smallest m whose simulated bubble is below this fraction at p")
      ->check(CLI::Range(0.0, 1.0));
}

int TuneTool::run(const Deck& deck, MPI_Comm comm, std::ostream& out) {
  int rank = 0, world = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &world);
  // Everything is checked on every rank before anything collective runs.
  std::string error;
  CostFile costs;
  std::vector<std::string> names;
  const ModelShape shape = model_shape_from_deck(deck);
  const int batch = static_cast<int>(deck.get_int("train.batch"));
  try {
    if (deck.get_int("pipeline.dp") != 1)
      throw InputError("deck: key 'pipeline.dp' has value " + std::to_string(deck.get_int("pipeline.dp")) +
                       "; allowed: 1 (the tuner plans one pipeline)");
    if (verify > 0 && world != p)
      throw InputError("command line: --verify " + std::to_string(verify) + " with -p " + std::to_string(p) + " but " +
                       std::to_string(world) + " MPI ranks; allowed: launch mpiexec -n " + std::to_string(p));
    std::stringstream ss(schedules);
    for (std::string n; std::getline(ss, n, ',');) {
      const auto all = sched::schedule_names();
      if (std::find(all.begin(), all.end(), n) == all.end())
        throw InputError("command line: --schedules has entry \"" + n + "\"; allowed: a comma list of " + [&] {
          std::string t;
          for (const auto& a : all) t += (t.empty() ? "" : " | ") + a;
          return t;
        }());
      names.push_back(n);
    }
    if (!costs_path.empty()) {
      costs = read_cost_file(costs_path);
      costs.check_shape(shape, costs_path);
      if (costs.batch != batch)
        throw InputError("deck: key 'train.batch' has value " + std::to_string(batch) + " but the cost file " +
                         costs_path + " was measured with " + std::to_string(costs.batch) +
                         "; allowed: the profiled batch");
    }
  } catch (const std::exception& e) {
    error = e.what();
  }
  int bad = error.empty() ? 0 : 1;
  MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, comm);
  if (bad) {
    if (!error.empty() && rank == 0) std::cerr << "minipipe: error: " << error << "\n";
    return 2;
  }
  if (costs_path.empty()) {
    costs = profile_costs(deck, comm, repeat);
    if (const int rc = calibrate_costs(deck, comm, costs, calibrate)) return rc;
  }

  std::vector<TuneCandidate> best;
  TuneCandidate base;
  const int base_m = static_cast<int>(deck.get_int_list("pipeline.microbatches").front());
  int n_configs = 0;
  if (rank == 0) {
    const auto all = enumerate_configs(costs, p, batch, memory_cap, names);
    n_configs = static_cast<int>(all.size());
    best.assign(all.begin(), all.begin() + std::min<std::ptrdiff_t>(top, static_cast<std::ptrdiff_t>(all.size())));
    try {
      base = predict(costs, p, "1f1b", 1, base_m, make_stage_layout(shape.n_layer, p, {}).count, Recompute::none);
    } catch (const std::exception& e) {
      error = std::string("baseline 1f1b, m = ") + std::to_string(base_m) + ": " + e.what();
    }
  }
  char line[320];
  if (rank == 0) {
    out << "tune: p = " << p << ", batch " << batch << ", " << n_configs << " configurations"
        << (memory_cap > 0 ? " under the memory cap" : "") << "; costs "
        << (costs_path.empty() ? "profiled now" : costs_path) << " (" << costs.backend << ", profiled on "
        << costs.profiled_ranks << " rank(s) at once, transfers "
        << (costs.transfer_measured ? "measured" : "not measured: 0") << ")\n";
    const Calibration& k = costs.calibration;
    if (k.measured) {
      out << calibration_text(k) << "\n";
      if (k.ranks != p)
        out << "note: calibrated at p = " << k.ranks << ", tuning p = " << p << ": the slowdown may differ\n";
    } else {
      out << calibration_text(k) << " (a cost file profiled on 2+ ranks has one)\n";
    }
    if (!error.empty()) out << error << "\n";
  }
  // --verify: the K best and the baseline, `rounds` times in turn (alternating launches, so a
  // change in the machine's load hits every configuration alike), each a run of `steps` steps;
  // measured = the median whole-step time over every round's steps after the first.
  const std::size_t n_runs = best.size() + 1;
  std::vector<std::vector<double>> samples(n_runs), round_medians(n_runs);
  int k_runs = std::min<int>(verify, static_cast<int>(best.size()));
  MPI_Bcast(&k_runs, 1, MPI_INT, 0, comm);
  for (int round = 0; round < rounds && verify > 0; ++round)
    for (int k = 0; k <= k_runs; ++k) {
      const std::size_t slot = k < k_runs ? static_cast<std::size_t>(k) : n_runs - 1;
      RunReport rep;
      const int rc = run_config(deck, comm, rank == 0 ? config_keys(k < k_runs ? best[slot] : base) : "", steps, rep);
      if (rc != 0) return rc;
      if (rank != 0) continue;
      const std::vector<double> t = steps_after_first(rep);
      samples[slot].insert(samples[slot].end(), t.begin(), t.end());
      round_medians[slot].push_back(median(t));
    }
  if (rank != 0) return 0;
  std::snprintf(line, sizeof(line), "%3s  %-17s %2s %3s  %-15s %-9s %9s %9s %7s %9s", "#", "schedule", "v", "m",
                "split", "recompute", "pred ms", "makespan", "bubble", "peak MiB");
  out << line << (verify > 0 ? "   meas ms  meas/pred" : "") << "\n";
  auto row = [&](const std::string& label, const TuneCandidate& c, double meas) {
    std::snprintf(line, sizeof(line), "%3s  %-17s %2d %3d  %-15s %-9s %9.2f %9.2f %7.3f %9.2f", label.c_str(),
                  c.schedule.c_str(), c.v, c.m, (split_text(c.split) + (c.auto_split ? " auto" : "")).c_str(),
                  to_string(c.recompute), c.step_ms, c.makespan_ms, c.bubble, c.peak_bytes / 1048576.0);
    out << line;
    if (meas > 0) {
      std::snprintf(line, sizeof(line), " %9.2f %10.3f", meas, meas / c.step_ms);
      out << line;
    }
    out << "\n";
  };
  for (std::size_t k = 0; k < best.size(); ++k)
    row(std::to_string(k + 1), best[k], static_cast<int>(k) < k_runs ? median(samples[k]) : 0.0);
  if (error.empty()) row("base", base, verify > 0 ? median(samples[n_runs - 1]) : 0.0);
  out << "(pred ms: predicted step = simulated makespan + the slowest rank's fixed cost (zero, finalize, update); "
         "peak: stored activations of the worst rank; base: 1f1b, even split, no recompute, the deck's m"
      << (verify > 0 ? "; meas ms: median whole-step time of steps 1.." + std::to_string(steps - 1) + " of " +
                           std::to_string(rounds) + " alternating round(s)"
                     : "")
      << ")\n";
  if (verify > 0 && rounds > 1) {
    // The noise of this machine, from this run: how far one round's median of a configuration is
    // from another's (the largest such spread over the measured configurations).
    double spread = 0;
    std::string worst, each;
    for (std::size_t k = 0; k < n_runs; ++k) {
      if (round_medians[k].empty()) continue;
      const auto [lo, hi] = std::minmax_element(round_medians[k].begin(), round_medians[k].end());
      const double s = *lo > 0 ? (*hi - *lo) / *lo : 0.0;
      const std::string label = k + 1 == n_runs ? "base" : "#" + std::to_string(k + 1);
      if (s >= spread) spread = s, worst = label;
      std::snprintf(line, sizeof(line), " %s %.3f", label.c_str(), s);
      each += line;
    }
    std::string base_rounds;
    for (double x : round_medians[n_runs - 1]) {
      std::snprintf(line, sizeof(line), "%s%.2f", base_rounds.empty() ? "" : " ", x);
      base_rounds += line;
    }
    const auto [blo, bhi] = std::minmax_element(round_medians[n_runs - 1].begin(), round_medians[n_runs - 1].end());
    const double base_spread = *blo > 0 ? (*bhi - *blo) / *blo : 0.0;
    std::snprintf(line, sizeof(line),
                  "noise: round medians of base %s ms; base spread %.3f; largest round-to-round spread %.3f (%s)",
                  base_rounds.c_str(), base_spread, spread, worst.c_str());
    out << line << "\n"
        << "round-to-round spread of each:" << each << "\n";
  }
  if (bubble_target > 0) {
    const int samples = std::max(1, batch / base_m);
    out << "smallest m with a simulated bubble below " << bubble_target << " at p = " << p
        << " (uniform stages of a micro-batch of " << samples << " samples):\n";
    for (const auto& a : smallest_m_for_bubble(costs, p, samples, bubble_target, 1024)) {
      if (a.m > 0)
        std::snprintf(line, sizeof(line), "  %-17s v=%d  m = %4d  (bubble %.3f; closed form %s)", a.schedule.c_str(),
                      a.v, a.m, a.bubble, sched::analytic_formula(a.schedule).substr(0, 40).c_str());
      else
        std::snprintf(line, sizeof(line), "  %-17s v=%d  none up to m = 1024", a.schedule.c_str(), a.v);
      out << line << "\n";
    }
  }
  return 0;
}

}  // namespace minipipe
