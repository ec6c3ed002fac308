// `minipipe scale`: past one machine, by simulation. The command line of the scaling model
// (miniapp/tuning/scale_model.hpp): the best layouts on N devices of a cluster file, and strong-
// and weak-scaling curves over device counts (SVG).
#pragma once

#include <map>
#include <ostream>
#include <string>

#include "miniapp/tuning/scale_model.hpp"

namespace CLI {
class App;
}

namespace minipipe {

struct ScaleTool {
  CLI::App* sub = nullptr;
  std::string deck_path, cluster_path, costs_path, schedules, strong_svg, weak_svg, compare_run;
  int devices = 0, top = 10, global_batch = 0, batch_per_replica = 0, max_m = 1024;
  double memory_cap_gib = 0, exact_bytes = kCompactExactBytes;
  bool overlap_allreduce = false, allreduce_after = false, force = false, no_prune = false;
  void attach(CLI::App& parent);
  // Rank 0 only: reads the deck with the command line's deck-key `overrides`, prints the table
  // and writes the SVGs. 0 ok, 2 bad input, 3 an output failed.
  int run(const std::map<std::string, std::string>& overrides, std::ostream& out, std::ostream& err);
};

}  // namespace minipipe
