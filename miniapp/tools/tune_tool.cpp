// `minipipe tune`: checks the command line on every rank, takes or measures the costs, prints the
// tuner's best configurations and, with --verify, runs them in alternating rounds and measures.
#include "miniapp/tools/tune_tool.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <sstream>

#include "miniapp/io/output_paths.hpp"
#include "miniapp/model/model.hpp"
#include "miniapp/runtime/profile.hpp"
#include "miniapp/runtime/version.hpp"
#include "miniapp/tuning/calibrate.hpp"
#include "miniapp/tuning/tuner.hpp"
#include "schedules/schedules.hpp"

namespace minipipe {

namespace {

// Everything the tool checks before anything collective runs (it throws on bad input): dp, the
// rank count of --verify, the --schedules names, and the cost file when given.
void check_request(const TuneTool& tool, const Deck& deck, int world, CostFile& costs,
                   std::vector<std::string>& names) {
  const int p = tool.p, verify = tool.verify;
  const std::string& costs_path = tool.costs_path;
  const ModelShape shape = model_shape_from_deck(deck);
  const int batch = static_cast<int>(deck.config().train.batch);
  if (deck.config().pipeline.dp != 1)
    key_error("pipeline.dp", std::to_string(deck.config().pipeline.dp), "1 (the tuner plans one pipeline)");
  if (p > shape.n_layer)
    throw InputError("command line: -p has value " + std::to_string(p) +
                     " but model.n_layer = " + std::to_string(shape.n_layer) + "; allowed: 1 .. " +
                     std::to_string(shape.n_layer) + " (every stage holds at least one transformer block)");
  if (verify > 0 && world != p)
    throw InputError("command line: --verify " + std::to_string(verify) + " with -p " + std::to_string(p) + " but " +
                     std::to_string(world) + " MPI ranks; allowed: launch mpiexec -n " + std::to_string(p));
  std::stringstream ss(tool.schedules);
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
    costs.check_setting(deck.config().train.mode, execution_space_name(), costs_path);
    if (costs.batch != batch)
      key_error("train.batch", std::to_string(batch), "the profiled batch",
                " but the cost file " + costs_path + " was measured with " + std::to_string(costs.batch));
  }
}

// Why enumerate_configs found nothing: the memory cap (with the smallest cap that admits one) or
// the schedules that take no (p, m, v) with this batch and layer count.
std::string why_no_configuration(const CostFile& costs, int p, int batch, double memory_cap,
                                 const std::vector<std::string>& names, const std::string& schedules) {
  const auto uncapped = enumerate_configs(costs, p, batch, 0, names);
  if (memory_cap > 0 && !uncapped.empty()) {
    const auto smallest = std::min_element(uncapped.begin(), uncapped.end(),
                                           [](const auto& a, const auto& b) { return a.peak_bytes < b.peak_bytes; });
    char text[400];
    std::snprintf(text, sizeof(text),
                  "command line: --memory-cap has value %.17g bytes, below the predicted peak of every one of the "
                  "%zu configurations; allowed: 0 (no cap) or >= %.17g bytes (the smallest peak: %s v=%d m=%d "
                  "recompute %s)",
                  memory_cap, uncapped.size(), std::ceil(smallest->peak_bytes), smallest->schedule.c_str(), smallest->v,
                  smallest->m, to_string(smallest->recompute));
    return text;
  }
  return "command line: " + (schedules.empty() ? std::string("no schedule") : "--schedules \"" + schedules + "\"") +
         " has no configuration at -p " + std::to_string(p) + " with train.batch = " + std::to_string(batch) +
         " and model.n_layer = " + std::to_string(costs.shape.n_layer) +
         "; allowed: a p, batch and schedule list with at least one (schedule, v, m) where m divides the batch "
         "and p*v <= n_layer (minipipe schedule --list gives each schedule's constraints)";
}

// What rank 0 chose: the best configurations, the 1F1B baseline, and why the baseline failed.
struct Choice {
  std::vector<TuneCandidate> best;
  TuneCandidate base;
  int base_m = 1, n_configs = 0;
  std::string error;
};

Choice choose(const TuneTool& tool, const Deck& deck, const CostFile& costs, const std::vector<std::string>& names) {
  Choice c;
  const int batch = static_cast<int>(deck.config().train.batch);
  c.base_m = static_cast<int>(deck.config().pipeline.microbatches.front());
  const auto all = enumerate_configs(costs, tool.p, batch, tool.memory_cap, names);
  c.n_configs = static_cast<int>(all.size());
  c.best.assign(all.begin(), all.begin() + std::min<std::ptrdiff_t>(tool.top, static_cast<std::ptrdiff_t>(all.size())));
  try {
    c.base = predict(costs, tool.p, "1f1b", 1, c.base_m, make_stage_layout(costs.shape.n_layer, tool.p, {}).count,
                     Recompute::none);
  } catch (const std::exception& e) {
    c.error = std::string("baseline 1f1b, m = ") + std::to_string(c.base_m) + ": " + e.what();
  }
  return c;
}

void print_header(const TuneTool& tool, const Deck& deck, const CostFile& costs, const Choice& c, std::ostream& out) {
  const int p = tool.p, batch = static_cast<int>(deck.config().train.batch), n_configs = c.n_configs;
  const double memory_cap = tool.memory_cap;
  const std::string& costs_path = tool.costs_path;
  const std::string& error = c.error;
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
// measured = the median whole-step time over every round's steps after the first. Per
// configuration (the baseline last): every step time and each round's median, on rank 0.
struct Measured {
  std::vector<std::vector<double>> samples, round_medians;
  std::vector<TimeBudget> budget;  // of each configuration's last verify run
  int k_runs = 0;
};

int measure(const TuneTool& tool, const Deck& deck, MPI_Comm comm, const Choice& c, Measured& m) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  const std::vector<TuneCandidate>& best = c.best;
  const TuneCandidate& base = c.base;
  const int rounds = tool.rounds, verify = tool.verify, steps = tool.steps;
  const std::size_t n_runs = best.size() + 1;
  auto& samples = m.samples;
  auto& round_medians = m.round_medians;
  samples.assign(n_runs, {}), round_medians.assign(n_runs, {});
  m.budget.assign(n_runs, {});
  int& k_runs = m.k_runs;
  k_runs = std::min<int>(verify, static_cast<int>(best.size()));
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
      m.budget[slot] = rep.budget;
      round_medians[slot].push_back(median(t));
    }
  return 0;
}

// Where each configuration's makespan goes, predicted (and measured by --verify).
void print_budgets(const Choice& choice, const Measured& m, int verify, std::ostream& out) {
  const std::vector<TuneCandidate>& best = choice.best;
  const std::size_t n_runs = best.size() + 1;
  char line[320];
  out << "time budget, fraction of p x makespan: compute / ideal bubble / imbalance wait / exposed comm / overhead\n";
  auto fractions = [&](const TimeBudget& b) {
    const double all = static_cast<double>(b.total.total());
    auto f = [&](std::int64_t x) { return all > 0 ? static_cast<double>(x) / all : 0.0; };
    std::snprintf(line, sizeof(line), "%.3f / %.3f / %.3f / %.3f / %.3f", f(b.total.compute), f(b.total.ideal_bubble),
                  f(b.total.imbalance_wait), f(b.total.exposed_comm), f(b.total.overhead));
    return std::string(line);
  };
  auto budget_row = [&](const std::string& label, const TuneCandidate& c, const TimeBudget* meas) {
    const std::string pred = fractions(c.budget), got = meas && !meas->empty() ? fractions(*meas) : "";
    std::snprintf(line, sizeof(line), "budget %-5s %-17s v=%d m=%-3d pred %s%s%s", label.c_str(),
                  (c.schedule + (c.memory_cap > 0 ? " cap=" + std::to_string(c.memory_cap) : "")).c_str(), c.v, c.m,
                  pred.c_str(), got.empty() ? "" : "  | meas ", got.c_str());
    out << line << "\n";
  };
  for (std::size_t k = 0; k < best.size(); ++k)
    budget_row("#" + std::to_string(k + 1), best[k], static_cast<int>(k) < m.k_runs ? &m.budget[k] : nullptr);
  if (choice.error.empty()) budget_row("base", choice.base, verify > 0 ? &m.budget[n_runs - 1] : nullptr);
  out << "(pred: the simulated makespan split like a run's (docs/time-budget.md): overhead = the calibrated\n"
         " per-action overhead and the waits of the measured action spread"
      << (verify > 0 ? "; meas: the last step of the configuration's last --verify run" : "") << ")\n";
}

void print_table(const TuneTool& tool, const Choice& choice, const Measured& m, std::ostream& out) {
  const int verify = tool.verify, steps = tool.steps, rounds = tool.rounds, k_runs = m.k_runs;
  const std::vector<TuneCandidate>& best = choice.best;
  const TuneCandidate& base = choice.base;
  const std::size_t n_runs = best.size() + 1;
  const auto& samples = m.samples;
  const std::string& error = choice.error;
  char line[320];
  std::snprintf(line, sizeof(line), "%3s  %-17s %2s %3s  %-15s %-9s %9s %9s %7s %9s", "#", "schedule", "v", "m",
                "split", "recompute", "pred ms", "makespan", "bubble", "peak MiB");
  out << line << (verify > 0 ? "   meas ms  meas/pred" : "") << "\n";
  auto row = [&](const std::string& label, const TuneCandidate& c, double meas) {
    std::snprintf(line, sizeof(line), "%3s  %-17s %2d %3d  %-15s %-9s %9.2f %9.2f %7.3f %9.2f", label.c_str(),
                  (c.schedule + (c.memory_cap > 0 ? " cap=" + std::to_string(c.memory_cap) : "")).c_str(), c.v, c.m,
                  (split_text(c.split) + (c.auto_split ? " auto" : "")).c_str(), to_string(c.recompute), c.step_ms,
                  c.makespan_ms, c.bubble, c.peak_bytes / 1048576.0);
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
  out << "(pred ms: predicted step = simulated makespan + the slowest rank's fixed cost (zero, finalize, update; "
         "DualPipe: the sum of the two model copies); "
         "peak: stored activations of the worst rank; base: 1f1b, even split, no recompute, the deck's m"
      << (verify > 0 ? "; meas ms: median whole-step time of steps 1.." + std::to_string(steps - 1) + " of " +
                           std::to_string(rounds) + " alternating round(s)"
                     : "")
      << ")\n";
  print_budgets(choice, m, verify, out);
}

// The noise of this machine, from this run: how far one round's median of a configuration is
// from another's (the largest such spread over the measured configurations).
void print_noise(const Measured& m, std::ostream& out) {
  const auto& round_medians = m.round_medians;
  const std::size_t n_runs = round_medians.size();
  char line[320];
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

void print_bubble_targets(const TuneTool& tool, const Deck& deck, const CostFile& costs, int base_m,
                          std::ostream& out) {
  const int p = tool.p, batch = static_cast<int>(deck.config().train.batch);
  const double bubble_target = tool.bubble_target;
  char line[320];
  const int samples = std::max(1, batch / base_m);
  out << "smallest m with a simulated bubble below " << bubble_target << " at p = " << p
      << " (uniform stages of a micro-batch of " << samples << " samples):\n";
  for (const auto& a : smallest_m_for_bubble(costs, p, samples, bubble_target, 1024)) {
    if (a.m > 0)
      std::snprintf(line, sizeof(line), "  %-17s v=%d  m = %4d  (bubble %.3f; closed form %s)", a.schedule.c_str(), a.v,
                    a.m, a.bubble, sched::analytic_formula(a.schedule).substr(0, 40).c_str());
    else
      std::snprintf(line, sizeof(line), "  %-17s v=%d  none up to m = 1024", a.schedule.c_str(), a.v);
    out << line << "\n";
  }
}

}  // namespace

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

int TuneTool::run(const DeckOptions& deck_options, MPI_Comm comm, std::ostream& out) {
  Deck deck;
  return run_collective_tool(
      comm,
      [&] {
        deck = deck_options.load(deck_path);
        deck.validate();
        (void)model_shape_from_deck(deck);
        if (!costs_path.empty()) io::check_input_file("--costs", costs_path);
      },
      [&] { return tune(deck, comm, out); });
}

int TuneTool::tune(const Deck& deck, MPI_Comm comm, std::ostream& out) {
  int rank = 0, world = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &world);
  // Everything is checked on every rank before anything collective runs.
  std::string error;
  CostFile costs;
  std::vector<std::string> names;
  try {
    check_request(*this, deck, world, costs, names);
  } catch (const std::exception& e) {
    error = e.what();
  }
  int bad = error.empty() ? 0 : 1;
  MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, comm);
  if (bad) {
    if (!error.empty() && rank == 0) print_error(std::cerr, error, kExitUsage);
    return kExitUsage;
  }
  if (costs_path.empty()) {
    costs = profile_costs(deck, comm, repeat);
    if (const int rc = calibrate_costs(deck, comm, costs, calibrate)) return rc;
  }
  const Choice choice = rank == 0 ? choose(*this, deck, costs, names) : Choice{};
  // No configuration: say why and refuse (exit 2) rather than print an empty table.
  std::string none;
  if (rank == 0 && choice.n_configs == 0)
    none = why_no_configuration(costs, p, static_cast<int>(deck.config().train.batch), memory_cap, names, schedules);
  int refuse = none.empty() ? 0 : 1;
  MPI_Bcast(&refuse, 1, MPI_INT, 0, comm);
  if (refuse) {
    if (rank == 0) print_error(std::cerr, none, kExitUsage);
    return kExitUsage;
  }
  if (rank == 0) print_header(*this, deck, costs, choice, out);
  Measured measured;
  if (const int rc = measure(*this, deck, comm, choice, measured)) return rc;
  if (rank != 0) return 0;
  print_table(*this, choice, measured, out);
  if (verify > 0 && rounds > 1) print_noise(measured, out);
  if (bubble_target > 0) print_bubble_targets(*this, deck, costs, choice.base_m, out);
  return 0;
}

}  // namespace minipipe
