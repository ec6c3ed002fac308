// Cross-key and file-system checks of a deck, run on every rank before anything communicates:
// ignored keys, pipeline.timeout, and the distinctness and limits of all input and output paths.
#include "deck_checks.hpp"

#include <algorithm>
#include <cmath>
#include <variant>

#include "message_text.hpp"

namespace minipipe {

namespace {

const DeckValue& default_of(const std::string& key) {
  for (const auto& k : deck_keys())
    if (k.name == key) return k.def;
  throw std::logic_error("deck key not declared: " + key);
}

bool is_default_double(const Deck& d, const std::string& key) {
  return d.get_double(key) == std::get<double>(default_of(key));
}

bool has_csv_schedule(const Deck& d) {
  const auto& names = d.get_string_list("pipeline.schedule");
  return std::find(names.begin(), names.end(), "csv") != names.end();
}

[[noreturn]] void no_effect(const std::string& key, const std::string& value, const std::string& because,
                            const std::string& allowed) {
  throw InputError("deck: key '" + key + "' has value " + value + ", which has no effect " + because +
                   "; allowed: " + allowed);
}

}  // namespace

double pipeline_timeout(const Deck& deck) {
  const double t = deck.get_double("pipeline.timeout");
  if (!std::isfinite(t) || t < 0 || t > 1e6)
    throw InputError("deck: key 'pipeline.timeout' has value " + compact_number(t) +
                     "; allowed: seconds in [0, 1e6] (0 = wait forever)");
  return t;
}

void check_effective_keys(const Deck& deck) {
  const std::string& placement = deck.get_string("pipeline.placement");
  if (placement != "loop" && placement != "v")
    throw InputError("deck: key 'pipeline.placement' has value " + quoted_text(placement) + "; allowed: loop | v");
  const bool csv = has_csv_schedule(deck);
  if (!csv && !deck.get_string("pipeline.csv").empty())
    no_effect("pipeline.csv", quoted_text(deck.get_string("pipeline.csv")), "unless pipeline.schedule lists \"csv\"",
              "leave it empty, or add csv to pipeline.schedule");
  if (!csv && placement != std::get<std::string>(default_of("pipeline.placement")))
    no_effect("pipeline.placement", quoted_text(placement), "unless pipeline.schedule lists \"csv\"",
              "leave it at \"loop\", or add csv to pipeline.schedule");

  const bool auto_split = std::holds_alternative<std::string>(deck.value("pipeline.layers_per_stage"));
  if (!auto_split && !deck.get_string("pipeline.costs").empty())
    no_effect("pipeline.costs", quoted_text(deck.get_string("pipeline.costs")),
              "unless pipeline.layers_per_stage = \"auto\"", "leave it empty, or set pipeline.layers_per_stage = auto");

  if (deck.get_string("train.mode") != "fast" &&
      deck.get_string("train.fast_gemm") != std::get<std::string>(default_of("train.fast_gemm")))
    no_effect("train.fast_gemm", quoted_text(deck.get_string("train.fast_gemm")),
              "with train.mode = " + quoted_text(deck.get_string("train.mode")),
              "leave it at \"auto\", or set train.mode = fast");

  if (!deck.get_bool("profile.kernels") && !deck.get_string("output.roofline").empty())
    no_effect("output.roofline", quoted_text(deck.get_string("output.roofline")), "unless profile.kernels = true",
              "leave it empty, or set profile.kernels = true");

  const std::string& source = deck.get_string("data.source");
  if (source != "hdf5") {
    if (!deck.get_string("data.path").empty())
      no_effect("data.path", quoted_text(deck.get_string("data.path")), "with data.source = " + quoted_text(source),
                "leave it empty, or set data.source = hdf5");
    if (deck.get_string("data.dataset") != std::get<std::string>(default_of("data.dataset")))
      no_effect("data.dataset", quoted_text(deck.get_string("data.dataset")),
                "with data.source = " + quoted_text(source), "leave it at \"tokens\", or set data.source = hdf5");
  } else if (deck.get_int("data.min_len") != 0) {
    no_effect("data.min_len", std::to_string(deck.get_int("data.min_len")),
              "with data.source = \"hdf5\" (sequence lengths come from the file)", "leave it at 0");
  }

  const std::string& opt = deck.get_string("train.optimizer");
  if (opt == "adamw" && !is_default_double(deck, "train.momentum"))
    no_effect("train.momentum", compact_number(deck.get_double("train.momentum")), "with train.optimizer = \"adamw\"",
              "leave it at 0, or set train.optimizer = sgd");
  if (opt == "sgd") {
    for (const char* k : {"train.beta1", "train.beta2", "train.eps"}) {
      if (!is_default_double(deck, k))
        no_effect(k, compact_number(deck.get_double(k)), "with train.optimizer = \"sgd\"",
                  "leave it at its default, or set train.optimizer = adamw");
    }
  }

  if (deck.get_string("output.dump").empty() &&
      deck.get_string("output.dump_level") != std::get<std::string>(default_of("output.dump_level")))
    no_effect("output.dump_level", quoted_text(deck.get_string("output.dump_level")), "without output.dump",
              "leave it at \"full\", or set output.dump");
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

std::vector<io::OutputSpec> planned_outputs(const Deck& deck) {
  const bool force = deck.get_bool("output.force");
  const auto& names = deck.get_string_list("pipeline.schedule");
  const auto& ms = deck.get_int_list("pipeline.microbatches");
  const bool sweep = names.size() * ms.size() > 1;
  const std::string dump = deck.get_string("output.dump");
  const bool dumping = !dump.empty() && deck.get_string("output.dump_level") != "none";
  const std::string svg = deck.get_string("output.svg"), trace = deck.get_string("output.trace");
  std::vector<io::OutputSpec> out;
  if (!sweep) {
    if (dumping) out.push_back({"output.dump", dump, force, true});
    out.push_back({"output.svg", svg, force, false});
    out.push_back({"output.trace", trace, force, false});
    out.push_back({"output.roofline", deck.get_string("output.roofline"), force, false});
  } else {
    for (const auto& name : names) {
      for (long long m : ms) {
        const std::string tag = name + "_m" + std::to_string(m);
        if (dumping) out.push_back({"output.dump", sweep_dump_name(dump, name, m), force, true});
        out.push_back({"output.svg", sweep_file_name(svg, tag, ".svg"), force, false});
        out.push_back({"output.trace", sweep_file_name(trace, tag, ".json"), force, false});
        out.push_back(
            {"output.roofline", sweep_file_name(deck.get_string("output.roofline"), tag, ".svg"), force, false});
      }
    }
  }
  out.push_back({"output.json", deck.get_string("output.json"), force, false});
  out.push_back({"checkpoint.path", deck.get_string("checkpoint.path"), force, true});
  return out;
}

std::vector<io::InputSpec> planned_inputs(const Deck& deck, const std::string& deck_path) {
  std::vector<io::InputSpec> in;
  in.push_back({"--deck", deck_path});
  if (has_csv_schedule(deck)) in.push_back({"pipeline.csv", deck.get_string("pipeline.csv")});
  if (deck.get_string("data.source") == "hdf5") in.push_back({"data.path", deck.get_string("data.path")});
  in.push_back({"checkpoint.restart", deck.get_string("checkpoint.restart")});
  in.push_back({"output.verify", deck.get_string("output.verify")});
  return in;
}

void check_run_files(const Deck& deck, const std::string& deck_path) {
  const auto inputs = planned_inputs(deck, deck_path);
  for (const auto& in : inputs)
    if (!in.path.empty()) io::check_input_file(in.key, in.path);
  io::check_outputs(planned_outputs(deck), inputs);
}

}  // namespace minipipe
