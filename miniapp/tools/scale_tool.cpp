// `minipipe scale`'s command line: reads the deck, the cluster file and the costs, runs the
// scaling model (miniapp/tuning/scale_model.hpp), prints its table and writes the curves as SVG.
#include "miniapp/tools/scale_tool.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "miniapp/io/message_text.hpp"
#include "miniapp/io/output_file.hpp"
#include "miniapp/io/output_paths.hpp"
#include "miniapp/model/model.hpp"
#include "schedules/schedules.hpp"
#include "util/svg.hpp"

namespace minipipe {

namespace {

std::string layout_text(const ScalePoint& x) {
  char t[200];
  std::snprintf(t, sizeof(t), "%dx%d %s %s v=%d m=%d %s %s", x.p, x.dp, to_string(x.order), x.schedule.c_str(), x.v,
                x.m, x.auto_split ? "auto" : "even", to_string(x.recompute));
  return t;
}

std::string num(double x, int digits) {
  char t[64];
  std::snprintf(t, sizeof(t), "%.*f", digits, x);
  return t;
}

struct Series {
  std::string name, colour;
  std::vector<std::pair<double, double>> points;  // (devices, value)
  bool dashed = false;
};

// A log-log line chart: x = devices (powers of two), y = samples/s; one polyline per series, a
// marker per point, grid lines at each power of two (x) and decade (y), a legend.
void write_curves_svg(const std::string& title, const std::string& y_label, const std::vector<Series>& series,
                      std::ostream& out) {
  double x0 = 1e300, x1 = 0, y0 = 1e300, y1 = 0;
  for (const auto& s : series)
    for (const auto& [x, y] : s.points)
      if (y > 0) x0 = std::min(x0, x), x1 = std::max(x1, x), y0 = std::min(y0, y), y1 = std::max(y1, y);
  if (x1 <= 0) x0 = 1, x1 = 2, y0 = 1, y1 = 10;
  const double lx0 = std::floor(std::log2(x0)), lx1 = std::max(lx0 + 1, std::ceil(std::log2(x1)));
  const double ly0 = std::floor(std::log10(y0)), ly1 = std::max(ly0 + 1, std::ceil(std::log10(y1)));
  const double W = 720, Hh = 460, left = 80, right = 200, top = 40, bottom = 50;
  const double pw = W - left - right, ph = Hh - top - bottom;
  auto X = [&](double x) { return left + pw * (std::log2(x) - lx0) / (lx1 - lx0); };
  auto Y = [&](double y) { return top + ph * (1 - (std::log10(y) - ly0) / (ly1 - ly0)); };
  util::SvgWriter svg(out, {"width", W}, {"height", Hh}, {{"font-family", "sans-serif"}, {"font-size", "12"}});
  svg.element("text", {{"x", left}, {"y", "22"}, {"font-size", "13"}}, title).newline();
  for (double e = lx0; e <= lx1; ++e) {
    const double x = X(std::pow(2.0, e));
    svg.element("line", {{"x1", num(x, 1)}, {"y1", top}, {"x2", num(x, 1)}, {"y2", top + ph}, {"stroke", "#ddd"}})
        .newline()
        .element("text", {{"x", num(x, 1)}, {"y", top + ph + 16}, {"text-anchor", "middle"}}, num(std::pow(2.0, e), 0))
        .newline();
  }
  for (double e = ly0; e <= ly1; ++e) {
    const double y = Y(std::pow(10.0, e));
    svg.element("line", {{"x1", left}, {"y1", num(y, 1)}, {"x2", left + pw}, {"y2", num(y, 1)}, {"stroke", "#ddd"}})
        .newline()
        .element("text", {{"x", left - 6}, {"y", num(y + 4, 1)}, {"text-anchor", "end"}}, "1e" + num(e, 0))
        .newline();
  }
  svg.element("rect", {{"x", left}, {"y", top}, {"width", pw}, {"height", ph}, {"fill", "none"}, {"stroke", "black"}})
      .newline();
  svg.element("text", {{"x", left + pw / 2}, {"y", Hh - 10}, {"text-anchor", "middle"}}, "devices").newline();
  svg.element(
         "text",
         {{"transform", "translate(18," + util::number(top + ph / 2) + ") rotate(-90)"}, {"text-anchor", "middle"}},
         y_label)
      .newline();
  for (std::size_t k = 0; k < series.size(); ++k) {
    const Series& s = series[k];
    std::string pts;
    for (const auto& [x, y] : s.points)
      if (y > 0) pts += num(X(x), 1) + "," + num(Y(y), 1) + " ";
    const double ly = top + 14 + 18 * static_cast<double>(k);
    if (s.dashed) {
      svg.element("polyline", {{"fill", "none"},
                               {"stroke", s.colour},
                               {"stroke-width", "2"},
                               {"stroke-dasharray", "6,4"},
                               {"points", pts}})
          .newline();
      svg.element("line", {{"x1", left + pw + 12},
                           {"y1", ly},
                           {"x2", left + pw + 36},
                           {"y2", ly},
                           {"stroke", s.colour},
                           {"stroke-width", "2"},
                           {"stroke-dasharray", "6,4"}});
    } else {
      svg.element("polyline", {{"fill", "none"}, {"stroke", s.colour}, {"stroke-width", "2"}, {"points", pts}})
          .newline();
      for (const auto& [x, y] : s.points)
        if (y > 0)
          svg.element("circle", {{"cx", num(X(x), 1)}, {"cy", num(Y(y), 1)}, {"r", "3"}, {"fill", s.colour}}).newline();
      svg.element("line", {{"x1", left + pw + 12},
                           {"y1", ly},
                           {"x2", left + pw + 36},
                           {"y2", ly},
                           {"stroke", s.colour},
                           {"stroke-width", "2"}});
    }
    svg.newline().element("text", {{"x", left + pw + 42}, {"y", ly + 4}}, s.name).newline();
  }
  svg.finish();
}

// ScaleTool::run's inputs: the deck with the command line's overrides, the cluster, the costs
// (measured or from FLOPs) and the sweep's options; throws on bad input.
void read_scale_inputs(ScaleTool& tool, const std::map<std::string, std::string>& overrides, Cluster& cl,
                       CostFile& costs, ScaleOptions& opt) {
  Deck deck;
  io::check_input_file("--deck", tool.deck_path);
  io::check_input_file("--cluster", tool.cluster_path);
  if (!tool.costs_path.empty()) io::check_input_file("--costs", tool.costs_path);
  if (!tool.compare_run.empty()) io::check_input_file("--compare-run", tool.compare_run);
  io::check_outputs(
      {{"--strong-svg", tool.strong_svg, tool.force, false}, {"--weak-svg", tool.weak_svg, tool.force, false}},
      {{"--deck", tool.deck_path}, {"--cluster", tool.cluster_path}, {"--costs", tool.costs_path}});
  deck = Deck::from_file(tool.deck_path);
  for (const auto& [key, value] : overrides) deck.set_from_text(key, value);
  deck.validate();
  const ModelShape shape = model_shape_from_deck(deck);
  cl = read_cluster(tool.cluster_path);
  if (tool.devices == 0) tool.devices = cl.devices();
  if (tool.devices > cl.devices())
    throw InputError("command line: key '--devices' has value " + std::to_string(tool.devices) + "; allowed: 1 .. " +
                     std::to_string(cl.devices()) + " (the devices of " + tool.cluster_path + ")");
  const bool det = deck.config().train.mode != "fast";
  const int batch = static_cast<int>(deck.config().train.batch);
  if (!tool.costs_path.empty()) {
    costs = read_cost_file(tool.costs_path);
    costs.check_shape(shape, tool.costs_path);
    if (costs.mode != deck.config().train.mode)
      key_error("train.mode", "\"" + deck.config().train.mode + "\"", "the profiled mode",
                " but the cost file " + tool.costs_path + " was measured in \"" + costs.mode + "\"");
    cl.use_measured_link(costs.latency_ms, costs.ms_per_byte);
  } else {
    for (const auto& [key, on] : {std::pair<const char*, bool>{"link.intra.from_costs", cl.intra_from_costs},
                                  {"link.inter.from_costs", cl.inter_from_costs}})
      if (on)
        throw InputError("cluster file " + tool.cluster_path + ": key '" + key +
                         "' has value true; allowed: true only with --costs FILE (the measured link)");
    costs = analytic_costs(shape, batch, det, cl);
  }
  opt.global_batch = tool.global_batch > 0 ? tool.global_batch : batch;
  opt.memory_cap = tool.memory_cap_gib > 0 ? tool.memory_cap_gib * 1073741824.0 : cl.memory_bytes;
  opt.timing = tool.allreduce_after ? AllReduceTiming::after : AllReduceTiming::overlapped;
  opt.exact_bytes = tool.exact_bytes;
  opt.max_m = tool.max_m;
  opt.prune = !tool.no_prune;
  // scale sweeps the one-copy schedules only (its per-rank state and bounds count one model copy).
  std::vector<std::string> swept;
  for (const auto& a : sched::schedule_names())
    if (sched::model_copies(a) == 1) swept.push_back(a);
  std::stringstream ss(tool.schedules);
  for (std::string n; std::getline(ss, n, ',');) {
    if (std::find(swept.begin(), swept.end(), n) == swept.end()) {
      std::string t;
      for (const auto& a : swept) t += (t.empty() ? "" : " | ") + a;
      const bool two_copies = [&] {
        try {
          return sched::model_copies(n) != 1;
        } catch (const std::exception&) {
          return false;
        }
      }();
      throw InputError("command line: --schedules has entry " + quoted_text(n) +
                       (two_copies ? " (two model copies: scale does not sweep it; `minipipe tune` predicts it)" : "") +
                       "; allowed: a comma list of " + t);
    }
    opt.schedules.push_back(n);
  }
  // Bounded by default (a clear line says what was left out); named explicitly, tried everywhere.
  bool named = false;
  for (const auto& n : opt.schedules) named = named || list_scheduled(n);
  opt.list_scheduled_max_pm = named ? 0 : kListScheduledMaxPm;
  if (tool.batch_per_replica == 0) tool.batch_per_replica = batch;
}

// The model, the cluster and the links the sweep charges.
void print_scale_header(const ScaleTool& tool, const Cluster& cl, const CostFile& costs, std::ostream& out) {
  const ModelShape& s = costs.shape;
  double params = 0;
  for (double e : part_elements(s)) params += e;
  char line[400];
  std::snprintf(line, sizeof(line),
                "scale: %s (V %d, T %d, C %d, H %d, L %d: %.1fM parameters), %s mode; cluster %s: %d node(s) x %d "
                "device(s); costs %s\n",
                tool.deck_path.c_str(), s.vocab, s.seq_len, s.channels, s.n_head, s.n_layer, params / 1e6,
                costs.mode.c_str(), cl.name.c_str(), cl.nodes, cl.devices_per_node,
                tool.costs_path.empty() ? "from FLOPs (device.tflops)" : tool.costs_path.c_str());
  out << line;
  char bytes[160];
  if (costs.mode == "fast")
    std::snprintf(bytes, sizeof(bytes), "4 B per parameter: float");
  else
    std::snprintf(bytes, sizeof(bytes), "%g B per parameter: %s, --exact-bytes", tool.exact_bytes,
                  tool.exact_bytes == 32 ? "the full 4 int64 limbs" : "compact exact form");
  std::snprintf(line, sizeof(line),
                "links: inside a node %.4f ms + bytes / %.3g GB/s, between nodes %.4f ms + bytes / %.3g GB/s; "
                "all-reduce %s (%s), %s\n",
                cl.intra.latency_ms, cl.intra.gb_per_s(), cl.inter.latency_ms, cl.inter.gb_per_s(),
                to_string(cl.allreduce), bytes,
                tool.allreduce_after ? "after the pipeline (--allreduce-after)"
                                     : "overlapped: each stage's from its last B/W (--allreduce-after: after the "
                                       "pipeline)");
  out << line;
}

// Where the strong-scaling global batch came from, for the text of an empty sweep.
std::string batch_key(const ScaleTool& tool) {
  return tool.global_batch > 0 ? "--global-batch" : "train.batch";
}

// The sweep on tool.devices and the table of its best configurations.
void print_best_table(const ScaleTool& tool, const Cluster& cl, const CostFile& costs, const ScaleOptions& opt,
                      std::ostream& out) {
  char line[400];
  const std::clock_t t0 = std::clock();
  SweepCount count;
  const std::vector<ScalePoint> best = best_layouts(costs, cl, tool.devices, opt, tool.top, &count);
  const double cpu = static_cast<double>(std::clock() - t0) / CLOCKS_PER_SEC;
  out << tool.devices << " devices, global batch " << opt.global_batch << ", memory cap "
      << num(opt.memory_cap / 1073741824.0, 1) << " GiB: " << count.configurations << " configurations, "
      << count.simulations << " pipeline simulations, " << num(cpu, 2) << " s of CPU\n";
  std::snprintf(line, sizeof(line), "%3s  %-50s %10s %10s %7s %9s %9s %9s %11s", "#",
                "p x dp order schedule v m split recompute", "step ms", "makespan", "bubble", "exp comm", "allreduce",
                "mem GiB", "samples/s");
  out << line << "\n";
  for (std::size_t k = 0; k < best.size(); ++k) {
    const ScalePoint& x = best[k];
    std::snprintf(line, sizeof(line), "%3zu  %-50s %10.2f %10.2f %7.3f %9.2f %9.2f %9.2f %11.1f", k + 1,
                  layout_text(x).c_str(), x.step_ms, x.makespan_ms, x.bubble, x.exposed_comm_ms, x.allreduce_ms,
                  x.memory_bytes / 1073741824.0, x.samples_per_s);
    out << line << "\n";
  }
  if (count.list_scheduled_skipped > 0)
    out << "(" << list_scheduled_names() << " were left out of " << count.list_scheduled_skipped
        << " (schedule, p, m, v) instances with p x m > " << opt.list_scheduled_max_pm
        << ": they are list-scheduled over all ranks, seconds per instance at that size; name them in --schedules "
           "to try them everywhere)\n";
  if (best.empty())
    out << "(no configuration: " << no_configuration_reason(count, opt.global_batch, batch_key(tool)) << ")\n";
  out << (opt.timing == AllReduceTiming::after
              ? "(step = slowest replica's makespan + all-reduce + loss agreement + fixed update cost; "
              : "(step = slowest replica's makespan + the part of the overlapped all-reduces that ends after it + "
                "loss agreement + fixed update cost; ")
      << "exp comm: what transfers and all-reduces add to the step; allreduce: the slowest rank's; mem: model state + "
         "peak stored activations of the fullest device; order: `minipipe run --pipeline.rank_order`)\n";
}

// One scaling curve over device counts: strong at opt's global batch, or weak at
// tool.batch_per_replica; prints its table and returns its SVG's text (written by the caller).
std::string scaling_curve(const ScaleTool& tool, const Cluster& cl, const CostFile& costs, const ScaleOptions& opt,
                          const std::vector<int>& counts, bool weak, std::ostream& out) {
  char line[400];
  ScaleOptions o = opt;
  if (weak) o.batch_per_replica = tool.batch_per_replica;
  Series got{"predicted", "#1f77b4", {}, false}, ideal{"ideal (linear)", "#888", {}, true};
  double first = 0;
  int first_n = 0;
  out << (weak ? "weak scaling, batch per replica " + std::to_string(tool.batch_per_replica)
               : "strong scaling, global batch " + std::to_string(opt.global_batch))
      << ":\n";
  for (int n : counts) {
    SweepCount count;
    const auto b = best_layouts(costs, cl, n, o, 1, &count);
    if (b.empty()) {
      out << "  " << n << " devices: no configuration ("
          << (weak ? (count.over_cap > 0 ? "over the memory cap: raise --memory-cap"
                                         : std::string("no schedule instance at these p, v and m"))
                   : no_configuration_reason(count, o.global_batch, batch_key(tool)))
          << ")\n";
      continue;
    }
    const ScalePoint& x = b.front();
    if (first_n == 0) first = x.samples_per_s, first_n = n;
    const double eff = x.samples_per_s / (first * n / first_n);
    std::snprintf(line, sizeof(line),
                  "  %6d devices: %-50s step %10.2f ms  bubble %.3f  exp comm %8.2f ms  %10.1f samples/s  "
                  "efficiency %.2f",
                  n, layout_text(x).c_str(), x.step_ms, x.bubble, x.exposed_comm_ms, x.samples_per_s, eff);
    out << line << "\n";
    got.points.push_back({static_cast<double>(n), x.samples_per_s});
    ideal.points.push_back({static_cast<double>(n), first * n / first_n});
  }
  const std::string title = std::string(weak ? "Weak" : "Strong") + " scaling: " + tool.deck_path + " on " + cl.name;
  std::ostringstream svg;
  write_curves_svg(title, "samples/s", {got, ideal}, svg);
  return svg.str();
}

// --compare-run: what a `minipipe run` on this machine measured (its JSON report's first run) and
// the model's prediction for the same configuration (schedule, p, dp, v, m, the deck's recompute,
// an even split, the rank order it ran), one row each. Throws InputError when the report
// is unreadable or the sweep has no such configuration.
void print_compare_run(const ScaleTool& tool, const Cluster& cl, const CostFile& costs, const ScaleOptions& opt,
                       std::ostream& out) {
  const std::string& path = tool.compare_run;
  nlohmann::json j;
  try {
    std::ifstream in(path);
    j = nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    throw InputError("command line: key '--compare-run' has value " + quoted_text(path) +
                     ", not a readable JSON report (" + e.what() + "); allowed: the --json of `minipipe run`");
  }
  const auto bad = [&](const std::string& why) {
    return InputError("command line: key '--compare-run' has value " + quoted_text(path) + ": " + why +
                      "; allowed: the --json of `minipipe run` with one run of a layout scale sweeps");
  };
  if (!j.contains("runs") || !j["runs"].is_array() || j["runs"].empty() || !j.contains("deck")) throw bad("no runs");
  const nlohmann::json& r = j["runs"][0];
  std::string schedule;
  int p = 0, dp = 0, v = 0, m = 0;
  std::vector<double> steps;
  try {
    schedule = r.at("schedule").get<std::string>();
    p = r.at("p").get<int>(), dp = r.at("dp").get<int>(), v = r.at("v").get<int>(), m = r.at("m").get<int>();
    steps = r.at("step_seconds").get<std::vector<double>>();
  } catch (const std::exception& e) {
    throw bad(std::string("its first run lacks a field (") + e.what() + ")");
  }
  if (steps.size() < 2) throw bad("fewer than 2 steps (the first is warm-up)");
  const Deck deck = Deck::from_string(j["deck"].get<std::string>(), path);
  const Recompute rc = parse_recompute(deck.config().train.recompute);
  if (deck.config().pipeline.layers_per_stage.automatic) throw bad("an automatic split (the model uses even)");
  if (!deck.config().pipeline.layers_per_stage.counts.empty()) throw bad("an explicit split (the model uses even)");
  ScaleOptions o = opt;
  o.schedules = {schedule};
  o.prune = false;
  o.global_batch = static_cast<int>(deck.config().train.batch);
  o.batch_per_replica = 0;
  o.list_scheduled_max_pm = 0;
  // Ranks as the run placed them: dp-major unless its deck names another order (a runtime that
  // reads pipeline.rank_order).
  RankOrder order = RankOrder::dp_major;
  try {
    if (deck.config().pipeline.rank_order == "pp-major") order = RankOrder::pp_major;
  } catch (const std::exception&) {
  }
  Cluster placed = cl;
  placed.order = order, placed.any_order = false;
  const ScalePoint* got = nullptr;
  const std::vector<ScalePoint> all = best_layouts(costs, placed, p * dp, o, 1 << 20);
  for (const auto& x : all)
    if (x.p == p && x.dp == dp && x.v == v && x.m == m && x.recompute == rc && !x.auto_split) got = &x;
  if (!got)
    throw bad("the model has no " + schedule + " " + std::to_string(p) + "x" + std::to_string(dp) +
              " v=" + std::to_string(v) + " m=" + std::to_string(m) + " at this deck's batch");
  std::vector<double> after_first(steps.begin() + 1, steps.end());
  std::sort(after_first.begin(), after_first.end());
  const std::size_t n = after_first.size();
  const double measured = 1e3 * (n % 2 ? after_first[n / 2] : (after_first[n / 2 - 1] + after_first[n / 2]) / 2);
  double measured_ar = -1;
  if (r.contains("time_budget") && r["time_budget"].is_object() && r["time_budget"].contains("allreduce"))
    for (const auto& x : r["time_budget"]["allreduce"]) measured_ar = std::max(measured_ar, x.get<double>());
  char line[400];
  std::snprintf(
      line, sizeof(line),
      "this machine (%s): %s\n  predicted step %.2f ms (makespan %.2f, all-reduce %.2f, %s)\n  measured  step "
      "%.2f ms (median of steps 1..%zu; all-reduce %s ms, the slowest rank's last step)\n  measured / "
      "predicted %.3f\n",
      path.c_str(), layout_text(*got).c_str(), got->step_ms, got->makespan_ms, got->allreduce_ms,
      opt.timing == AllReduceTiming::after ? "after the pipeline" : "overlapped", measured, n,
      measured_ar >= 0 ? num(measured_ar, 2).c_str() : "not reported", measured / got->step_ms);
  out << line;
}

// The SVGs all or nothing: every temporary is written whole before any is renamed, a failure
// removes every temporary, and a rename that fails after another succeeded removes the file
// that one made (a rerun must not find half of the outputs and refuse without --force).
void write_all_or_nothing(const std::vector<std::pair<std::string, std::string>>& files, bool force,
                          std::ostream& out) {
  std::vector<std::unique_ptr<io::OutputFile>> temps;
  for (const auto& [path, text] : files) {
    temps.push_back(std::make_unique<io::OutputFile>(path, force));
    temps.back()->write(text.data(), text.size());
  }
  std::vector<std::string> done;
  try {
    for (auto& t : temps) {
      t->commit();
      done.push_back(t->target());
    }
  } catch (...) {
    if (!force)
      for (const auto& d : done) std::remove(d.c_str());
    throw;
  }
  for (const auto& d : done) out << "wrote " << d << "\n";
}

}  // namespace

void ScaleTool::attach(CLI::App& parent) {
  sub = parent.add_subcommand("scale",
                              "predict the best p x dp x schedule x m x v x recompute on N devices of a cluster file "
                              "(links per boundary, the gradient all-reduce), and strong/weak scaling curves");
  sub->option_defaults()->always_capture_default();
  sub->add_option("--deck", deck_path, "TOML input deck (the model shape, train.batch, train.mode)")->required();
  sub->add_option("--cluster", cluster_path, "cluster file (TOML, docs/cluster.md)")->required();
  sub->add_option("--devices", devices, "devices to plan for (0 = all of the cluster)")->check(CLI::Range(0, 1 << 24));
  sub->add_option("--costs", costs_path,
                  "cost file of `minipipe profile` on this deck (times divided by device.speedup); empty: costs "
                  "from FLOPs at device.tflops");
  sub->add_option("--global-batch", global_batch, "strong scaling's global batch (0 = the deck's train.batch)")
      ->check(CLI::Range(0, 1 << 24));
  sub->add_option("--batch-per-replica", batch_per_replica,
                  "weak scaling's batch per replica (0 = the deck's train.batch)")
      ->check(CLI::Range(0, 1 << 20));
  sub->add_option("--memory-cap", memory_cap_gib, "GiB per device for model state and activations (0 = the cluster's)")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--max-m", max_m, "largest m tried")->check(CLI::Range(1, 1 << 16));
  sub->add_option("--top", top, "configurations printed")->check(CLI::Range(1, 100000));
  sub->add_option("--schedules", schedules, "comma list of schedules to try (empty = all)");
  auto* overlap = sub->add_flag("--overlap-allreduce", overlap_allreduce,
                                "model each stage's all-reduce starting when its last B or W ends, overlapping the "
                                "rest of the pipeline (the default, as the runtime runs it)");
  sub->add_flag("--allreduce-after", allreduce_after,
                "model one all-reduce per rank after the whole pipeline (the older runtime; to compare)")
      ->excludes(overlap);
  sub->add_option("--exact-bytes", exact_bytes,
                  "deterministic mode: bytes per parameter the exact all-reduce moves (16: the compact form; 32: "
                  "the full 4 int64 limbs)")
      ->check(CLI::Range(1.0, 64.0));
  sub->add_option("--compare-run", compare_run,
                  "JSON report of `minipipe run` on this machine: print the model's step for its configuration "
                  "beside the measured one");
  sub->add_flag("--no-prune", no_prune,
                "simulate every configuration, also those whose lower bound cannot enter the best (to measure)");
  sub->add_option("--strong-svg", strong_svg, "SVG of samples/s over device counts at the fixed global batch");
  sub->add_option("--weak-svg", weak_svg, "SVG of samples/s over device counts at the fixed batch per replica");
  sub->add_flag("--force", force, "overwrite existing SVG files");
}

int ScaleTool::run(const std::map<std::string, std::string>& overrides, std::ostream& out, std::ostream& err) {
  Cluster cl;
  CostFile costs;
  ScaleOptions opt;
  try {
    read_scale_inputs(*this, overrides, cl, costs, opt);
  } catch (const std::exception& e) {
    err << "minipipe: error: " << e.what() << "\n";
    return 2;
  }
  // Inputs are checked: what fails from here on is a failure of the command (exit 3), never an
  // uncaught exception.
  try {
    print_scale_header(*this, cl, costs, out);
    if (!compare_run.empty()) {
      try {
        print_compare_run(*this, cl, costs, opt, out);
      } catch (const InputError& e) {
        out << std::flush;
        err << "minipipe: error: " << e.what() << "\n";
        return 2;
      }
    }
    print_best_table(*this, cl, costs, opt, out);
    if (strong_svg.empty() && weak_svg.empty()) return 0;
    std::vector<int> counts;
    for (int n = 1; n < devices; n *= 2) counts.push_back(n);
    counts.push_back(devices);
    std::vector<std::pair<std::string, std::string>> files;
    if (!strong_svg.empty()) files.push_back({strong_svg, scaling_curve(*this, cl, costs, opt, counts, false, out)});
    if (!weak_svg.empty()) files.push_back({weak_svg, scaling_curve(*this, cl, costs, opt, counts, true, out)});
    write_all_or_nothing(files, force, out);
  } catch (const std::exception& e) {
    out << std::flush;
    err << "minipipe: error: scale: " << e.what() << "\n";
    return 3;
  }
  return 0;
}

}  // namespace minipipe
