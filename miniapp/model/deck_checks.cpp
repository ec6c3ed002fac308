// Cross-key and file-system checks of a deck, run on every rank before anything communicates:
// ignored keys, pipeline.timeout, and the distinctness and limits of all input and output paths.
#include "miniapp/model/deck_checks.hpp"

#include <sys/stat.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <tuple>
#include <variant>

#include "miniapp/io/message_text.hpp"
#include "miniapp/model/kernel_outputs.hpp"
#include "schedules/variant.hpp"

namespace minipipe {

namespace {

// Every key at its row's default, to tell a key the deck set from one it left alone.
const RunConfig& defaults() {
  static const RunConfig d = Deck().config();
  return d;
}

bool has_csv_schedule(const RunConfig& c) {
  const auto& names = c.pipeline.schedule;
  return std::find(names.begin(), names.end(), "csv") != names.end();
}

[[noreturn]] void no_effect(const std::string& key, const std::string& value, const std::string& because,
                            const std::string& allowed) {
  key_error(key, value, allowed, ", which has no effect " + because);
}

}  // namespace

double pipeline_timeout(const Deck& deck) {
  // Finite and >= 0 are the row's rule (Deck::validate); the upper bound is this check's.
  const double t = deck.config().pipeline.timeout;
  if (t > 1e6) key_error("pipeline.timeout", compact_number(t), "seconds in [0, 1e6] (0 = wait forever)");
  return t;
}

void check_effective_keys(const Deck& deck) {
  const RunConfig &c = deck.config(), &d0 = defaults();
  const std::string& placement = c.pipeline.placement;  // loop | v: the row's rule (Deck::validate)
  const bool csv = has_csv_schedule(c);
  if (!csv && !c.pipeline.csv.empty())
    no_effect("pipeline.csv", quoted_text(c.pipeline.csv), "unless pipeline.schedule lists \"csv\"",
              "leave it empty, or add csv to pipeline.schedule");
  if (!csv && placement != d0.pipeline.placement)
    no_effect("pipeline.placement", quoted_text(placement), "unless pipeline.schedule lists \"csv\"",
              "leave it at \"loop\", or add csv to pipeline.schedule");

  // A knob only some schedules read (their rows in schedules/variant_table.cpp) is refused away
  // from 0 unless pipeline.schedule lists one of them.
  const auto& names = c.pipeline.schedule;
  for (const auto& [key, knob, value] : {std::tuple{"pipeline.group", sched::kGroup, c.pipeline.group},
                                         {"pipeline.memory_cap", sched::kMemoryCap, c.pipeline.memory_cap}}) {
    const bool read = std::any_of(names.begin(), names.end(), [knob = knob](const std::string& n) {
      const sched::VariantSpec* spec = sched::find_variant_spec(n);
      return spec && (spec->knobs & knob);
    });
    if (read || value == 0) continue;
    std::string listed, added;
    for (const auto& spec : sched::variant_table()) {
      if (!(spec.knobs & knob)) continue;
      listed += (listed.empty() ? "" : " or ") + quoted_text(spec.name);
      added += (added.empty() ? "" : " or ") + std::string(spec.name);
    }
    no_effect(key, std::to_string(value), "unless pipeline.schedule lists " + listed, "leave it at 0, or add " + added);
  }

  if (!c.pipeline.layers_per_stage.automatic && !c.pipeline.costs.empty())
    no_effect("pipeline.costs", quoted_text(c.pipeline.costs), "unless pipeline.layers_per_stage = \"auto\"",
              "leave it empty, or set pipeline.layers_per_stage = auto");

  if (c.train.mode != "fast" && c.train.fast_gemm != d0.train.fast_gemm)
    no_effect("train.fast_gemm", quoted_text(c.train.fast_gemm), "with train.mode = " + quoted_text(c.train.mode),
              "leave it at \"auto\", or set train.mode = fast");

  if (!c.profile.kernels && !c.output.roofline.empty())
    no_effect("output.roofline", quoted_text(c.output.roofline), "unless profile.kernels = true",
              "leave it empty, or set profile.kernels = true");

  // Timelines draw each action's span, which is its enqueue time without the per-action fence.
  if (!c.profile.action_fence)
    for (const auto& [key, path] : {std::pair{"output.svg", c.output.svg}, {"output.trace", c.output.trace}})
      if (!path.empty())
        no_effect(key, quoted_text(path), "unless profile.action_fence = true",
                  "leave it empty, or set profile.action_fence = true");

  const std::string& source = c.data.source;
  if (source != "hdf5") {
    if (!c.data.path.empty())
      no_effect("data.path", quoted_text(c.data.path), "with data.source = " + quoted_text(source),
                "leave it empty, or set data.source = hdf5");
    if (c.data.dataset != d0.data.dataset)
      no_effect("data.dataset", quoted_text(c.data.dataset), "with data.source = " + quoted_text(source),
                "leave it at \"tokens\", or set data.source = hdf5");
  } else if (c.data.min_len != 0) {
    no_effect("data.min_len", std::to_string(c.data.min_len),
              "with data.source = \"hdf5\" (sequence lengths come from the file)", "leave it at 0");
  }

  const std::string& opt = c.train.optimizer;
  if (opt == "adamw" && c.train.momentum != d0.train.momentum)
    no_effect("train.momentum", compact_number(c.train.momentum), "with train.optimizer = \"adamw\"",
              "leave it at 0, or set train.optimizer = sgd");
  if (opt == "sgd") {
    for (const auto& [k, x, x0] : {std::tuple{"train.beta1", c.train.beta1, d0.train.beta1},
                                   {"train.beta2", c.train.beta2, d0.train.beta2},
                                   {"train.eps", c.train.eps, d0.train.eps}}) {
      if (x != x0)
        no_effect(k, compact_number(x), "with train.optimizer = \"sgd\"",
                  "leave it at its default, or set train.optimizer = adamw");
    }
  }

  if (c.output.dump.empty() && c.output.dump_level != d0.output.dump_level)
    no_effect("output.dump_level", quoted_text(c.output.dump_level), "without output.dump",
              "leave it at \"full\", or set output.dump");

  if (c.checkpoint.path.empty() && c.checkpoint.every != 0)
    no_effect("checkpoint.every", std::to_string(c.checkpoint.every), "without checkpoint.path",
              "leave it at 0, or set checkpoint.path");
  // Verification compares the run's dump with the reference: without a dump the run would train
  // every step and only then fail.
  const bool dumps = !c.output.dump.empty() && c.output.dump_level != "none";
  if (!dumps && !c.output.verify.empty())
    no_effect("output.verify", quoted_text(c.output.verify),
              c.output.dump.empty() ? "without output.dump" : "with output.dump_level = \"none\"",
              "leave it empty, or set output.dump (--dump FILE) at a dump level the reference has");
}

std::string sweep_dump_name(const std::string& path, const std::string& schedule, long long m) {
  const auto dot = path.rfind(".h5");
  const std::string stem = dot == std::string::npos ? path : path.substr(0, dot);
  return stem + "_" + schedule + "_m" + std::to_string(m) + ".h5";
}

std::string sweep_file_name(const std::string& path, const std::string& tag, const std::string& ext) {
  if (path.empty()) return path;
  const auto slash = path.rfind('/');
  auto dot = path.rfind('.');
  if (dot != std::string::npos && slash != std::string::npos && dot < slash) dot = std::string::npos;
  const std::string stem = dot == std::string::npos ? path : path.substr(0, dot);
  return stem + "_" + tag + (dot == std::string::npos ? ext : path.substr(dot));
}

std::string budget_svg_path(const std::string& svg_path) {
  return sweep_file_name(svg_path, "budget", ".svg");
}

std::vector<io::OutputSpec> planned_outputs(const Deck& deck) {
  const RunConfig& c = deck.config();
  const bool force = c.output.force;
  const auto& names = c.pipeline.schedule;
  const auto& ms = c.pipeline.microbatches;
  const bool sweep = names.size() * ms.size() > 1;
  const std::string& dump = c.output.dump;
  const bool dumping = !dump.empty() && c.output.dump_level != "none";
  const std::string &svg = c.output.svg, &trace = c.output.trace, &roofline = c.output.roofline;
  std::vector<io::OutputSpec> out;
  if (!sweep) {
    if (dumping) out.push_back({"output.dump", dump, force, true});
    out.push_back({"output.svg", svg, force, false});
    out.push_back({"output.svg", budget_svg_path(svg), force, false});
    out.push_back({"output.trace", trace, force, false});
    out.push_back({"output.roofline", roofline, force, false});
  } else {
    for (const auto& name : names) {
      for (long long m : ms) {
        const std::string tag = name + "_m" + std::to_string(m);
        if (dumping) out.push_back({"output.dump", sweep_dump_name(dump, name, m), force, true});
        out.push_back({"output.svg", sweep_file_name(svg, tag, ".svg"), force, false});
        out.push_back({"output.svg", budget_svg_path(sweep_file_name(svg, tag, ".svg")), force, false});
        out.push_back({"output.trace", sweep_file_name(trace, tag, ".json"), force, false});
        out.push_back({"output.roofline", sweep_file_name(roofline, tag, ".svg"), force, false});
      }
    }
  }
  out.push_back({"output.json", c.output.json, force, false});
  out.push_back({"checkpoint.path", c.checkpoint.path, force, true});
  return out;
}

std::vector<io::InputSpec> planned_inputs(const Deck& deck, const std::string& deck_path) {
  const RunConfig& c = deck.config();
  std::vector<io::InputSpec> in;
  in.push_back({"--deck", deck_path});
  if (has_csv_schedule(c)) in.push_back({"pipeline.csv", c.pipeline.csv});
  if (c.data.source == "hdf5") in.push_back({"data.path", c.data.path});
  if (c.pipeline.layers_per_stage.automatic) in.push_back({"pipeline.costs", c.pipeline.costs});
  in.push_back({"checkpoint.restart", c.checkpoint.restart});
  in.push_back({"output.verify", c.output.verify});
  return in;
}

double estimated_dump_bytes(const ModelShape& shape, long long batch, long long steps, const std::string& level,
                            std::size_t real_bytes) {
  if (level == "none" || steps <= 0) return 0;
  const double B = static_cast<double>(batch), T = shape.seq_len, C = shape.channels, L = shape.n_layer,
               R = static_cast<double>(real_bytes);
  double params = 0, param_sets = 0;
  for (const auto& p : all_params(shape)) params += static_cast<double>(p.numel()), ++param_sets;
  const double kHeader = 640;  // per dataset: object header, layout and link (measured about 420)
  // Every level: tokens, targets [B,T] i32; loss; per_sample_loss_sum [B] f64; per_sample_tokens [B] i32.
  double step = 2 * B * T * 4 + 8 + B * 8 + B * 4 + 5 * kHeader, once = 0;
  const bool grads = level != "loss", full = grads && level != "grads", kernels = level == "kernels";
  if (grads) {
    once += params * R + param_sets * kHeader;        // /init/params
    step += 2 * (params * R + param_sets * kHeader);  // grads/ and params/
  }
  if (full) step += (2 * L + 3) * (B * T * C * R + kHeader);  // activations: embedding, blocks, lnf; input grads
  if (kernels) {  // per block and once for the head: every kernel output of the tables (docs/design.md §5)
    const auto add = [&](const std::vector<KernelOutput>& outs, double times) {
      for (const KernelOutput& k : outs) {
        double n = 1;
        for (const std::uint64_t d : k.dims(shape, static_cast<int>(batch))) n *= static_cast<double>(d);
        step += times * (n * R + kHeader);
      }
    };
    for (const auto* outs : {&block_forward_outputs(), &block_backward_outputs()}) add(*outs, L);
    for (const auto* outs : {&head_forward_outputs(), &head_backward_outputs()}) add(*outs, 1);
  }
  return once + static_cast<double>(steps) * step + 64 * 1024;  // the superblock, /meta and the deck
}

double estimated_checkpoint_bytes(const ModelShape& shape, std::size_t real_bytes) {
  double params = 0, param_sets = 0;
  for (const auto& p : all_params(shape)) params += static_cast<double>(p.numel()), ++param_sets;
  return 3 * (params * static_cast<double>(real_bytes) + param_sets * 640) + 64 * 1024;  // params, m, v
}

namespace {

std::string human_bytes(double b) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int u = 0;
  while (b >= 1024 && u < 5) b /= 1024, ++u;
  char text[32];
  std::snprintf(text, sizeof(text), u == 0 ? "%.0f %s" : "%.1f %s", b, units[u]);
  return text;
}

}  // namespace

void check_output_space(const Deck& deck, const ModelShape& shape, long long first_step, std::size_t real_bytes) {
  // What each file system must hold (a sweep's dumps share a directory, so they add up).
  struct Need {
    double bytes = 0;
    std::string dir, key, path, what;  // a directory on it, the first output's key and path, the list
  };
  std::map<unsigned long long, Need> need;  // by st_dev
  const RunConfig& c = deck.config();
  const long long steps = c.train.steps - first_step;
  const long long B = c.train.batch;
  for (const auto& o : planned_outputs(deck)) {
    if (o.path.empty()) continue;
    double bytes = 0;
    if (o.key == "output.dump")
      bytes = estimated_dump_bytes(shape, B, steps, c.output.dump_level, real_bytes);
    else if (o.key == "checkpoint.path")
      bytes = 2 * estimated_checkpoint_bytes(shape, real_bytes);  // the previous one stays until the rename
    if (bytes <= 0) continue;
    const auto slash = o.path.rfind('/');
    const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : o.path.substr(0, slash));
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0) continue;  // check_outputs has named a missing directory already
    Need& n = need[static_cast<unsigned long long>(st.st_dev)];
    if (n.dir.empty()) n.dir = dir, n.key = o.key, n.path = o.path;
    n.bytes += bytes;
    n.what += (n.what.empty() ? "" : " + ") + o.key + " " + quoted_text(o.path) + " " + human_bytes(bytes);
  }
  for (const auto& [dev, n] : need) {
    struct statvfs fs {};
    if (::statvfs(n.dir.c_str(), &fs) != 0) continue;
    const double free_bytes = static_cast<double>(fs.f_bavail) * static_cast<double>(fs.f_frsize);
    if (n.bytes > free_bytes)
      key_error(n.key, quoted_text(n.path), "fewer train.steps, a lower output.dump_level, or a directory with room",
                ": the outputs need about " + human_bytes(n.bytes) + " (" + n.what + "; " + std::to_string(steps) +
                    " steps at output.dump_level = " + quoted_text(c.output.dump_level) +
                    ", estimated from the model shape and batch) but the file system of " + quoted_text(n.dir) +
                    " has " + human_bytes(free_bytes) + " free");
  }
}

void check_run_files(const Deck& deck, const std::string& deck_path) {
  const auto inputs = planned_inputs(deck, deck_path);
  for (const auto& in : inputs)
    if (!in.path.empty()) io::check_input_file(in.key, in.path);
  io::check_outputs(planned_outputs(deck), inputs);
}

}  // namespace minipipe
