// `minipipe profile`: the command line, the table rank 0 prints and the cost file it writes.
#include "miniapp/tools/profile_tool.hpp"

#include <CLI/CLI.hpp>
#include <cstdio>

#include "miniapp/io/output_file.hpp"
#include "miniapp/io/output_paths.hpp"
#include "miniapp/model/cost_file.hpp"
#include "miniapp/runtime/profile.hpp"
#include "miniapp/tuning/calibrate.hpp"

namespace minipipe {

void ProfileTool::attach(CLI::App& parent) {
  sub = parent.add_subcommand("profile",
                              "measure per-part F/I/W time and stored bytes under each recompute mode, and the "
                              "boundary transfer, into a JSON cost file (mpiexec -n 2 to measure transfers)");
  sub->option_defaults()->always_capture_default();
  sub->add_option("--deck", deck_path, "TOML input deck (model shape, batch, mode)");
  sub->add_option("--out", out_path, "cost file to write (JSON)")->required();
  sub->add_option("--repeat", repeat,
                  "timed rounds per recompute mode; a round runs one step of m = batch/size micro-batches for every "
                  "size, and the median over rounds of each part's mean per micro-batch is kept")
      ->check(CLI::Range(1, 1000));
  sub->add_option("--calibrate", calibrate,
                  "on 2+ ranks: runs (2 steps each) of the 1F1B reference pipeline that measure the slowdown of a "
                  "real run over the profiled times (0 = none)")
      ->check(CLI::Range(0, 100));
  sub->add_flag("--concurrent", concurrent,
                "every rank profiles every part at the same time (default: rank 0 alone, the others wait)");
  sub->add_flag("--force", force, "overwrite an existing cost file");
}

int ProfileTool::run(const DeckOptions& deck_options, MPI_Comm comm, std::ostream& out) {
  Deck deck;
  return run_collective_tool(
      comm,
      [&] {
        deck = deck_options.load(deck_path);
        deck.validate();
        (void)model_shape_from_deck(deck);
        io::check_outputs({{"--out", out_path, force, false}}, {{"--deck", deck_path}});
      },
      [&] { return profile(deck, comm, out); });
}

int ProfileTool::profile(const Deck& deck, MPI_Comm comm, std::ostream& out) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  CostFile c = profile_costs(deck, comm, repeat, concurrent);
  if (const int rc = calibrate_costs(deck, comm, c, calibrate)) return rc;
  if (rank != 0) return 0;
  char line[200];
  out << "profile: " << c.backend << ", " << c.mode << ", " << c.comm_path << " transfers: ";
  if (c.transfer_measured) {
    std::snprintf(line, sizeof(line), "latency %.4f ms, bandwidth %.2f GB/s\n", c.latency_ms,
                  c.ms_per_byte > 0 ? 1e-6 / c.ms_per_byte : 0.0);
    out << line;
  } else {
    out << "not measured (one rank; launch mpiexec -n 2 to measure them)\n";
  }
  out << calibration_text(c.calibration) << (c.calibration.measured ? "" : " (it needs 2+ ranks and --calibrate > 0)")
      << "\n";
  const SizeCosts& big = c.sizes.back();
  out << "micro-batch of " << big.samples << " samples (ms; MiB kept by F / added by I):\n";
  for (std::size_t p = 0; p < big.parts.size(); ++p) {
    out << "  " << part_name(static_cast<int>(p), c.shape.n_layer);
    for (int r = 0; r < 3; ++r) {
      const PartCost& pc = big.parts[p][static_cast<std::size_t>(r)];
      std::snprintf(line, sizeof(line), " | %s F %.3f I %.3f W %.3f  %.2f/%.2f", to_string(static_cast<Recompute>(r)),
                    pc.F, pc.I, pc.W, pc.kept_bytes / 1048576.0, pc.work_bytes / 1048576.0);
      out << line;
    }
    out << "\n";
  }
  io::write_output_file(out_path, force, [&](std::ostream& f) { write_cost_file(c, f); });
  out << "cost file: " << out_path << "\n";
  return 0;
}

}  // namespace minipipe
