// `minipipe run`: its flags, the deck they make, and how a failure during the run ends the job.
#include "miniapp/tools/run_tool.hpp"

#include <CLI/CLI.hpp>
#include <iostream>

#include "miniapp/io/dump_writer.hpp"
#include "miniapp/launch/run.hpp"
#include "miniapp/runtime/comm.hpp"

namespace minipipe {

void RunTool::attach(CLI::App& parent, DeckOptions& deck_options) {
  sub = parent.add_subcommand("run", "train the model with a pipeline schedule (launch with mpiexec -n P)");
  auto& key_of = deck_options.key_of;  // each alias counts as its deck key for repeat checks
  sub->add_option("--deck", deck_path, "TOML input deck (defaults apply to missing keys)");
  key_of[sub->add_option("--schedule", schedule, "schedule name or comma list (= --pipeline.schedule)")] =
      "pipeline.schedule";
  key_of[sub->add_option("-m", m, "micro-batches (= --pipeline.microbatches)")] = "pipeline.microbatches";
  key_of[sub->add_option("-v", v, "model chunks per rank (= --pipeline.chunks)")] = "pipeline.chunks";
  key_of[sub->add_option("--dump", dump, "HDF5 dump file (= --output.dump)")] = "output.dump";
  key_of[sub->add_option("--json", json, "JSON report (= --output.json)")] = "output.json";
  key_of[sub->add_option("--restart", restart, "continue from a checkpoint (= --checkpoint.restart)")] =
      "checkpoint.restart";
  key_of[sub->add_option("--verify", verify, "reference dump to verify the run against (= --output.verify)")] =
      "output.verify";
  sub->add_flag("--force", force, "overwrite existing output files (= --output.force)");
}

Deck RunTool::deck(const DeckOptions& deck_options) const {
  Deck d = deck_options.load(deck_path);
  if (!schedule.empty()) d.set_from_text("pipeline.schedule", schedule);
  if (sub->count("-m")) d.set_from_text("pipeline.microbatches", std::to_string(m));
  if (sub->count("-v")) d.set_from_text("pipeline.chunks", std::to_string(v));
  if (!dump.empty()) d.set_from_text("output.dump", dump);
  if (!json.empty()) d.set_from_text("output.json", json);
  if (!restart.empty()) d.set_from_text("checkpoint.restart", restart);
  if (!verify.empty()) d.set_from_text("output.verify", verify);
  if (force) d.set_from_text("output.force", "true");
  return d;
}

int RunTool::run(const DeckOptions& deck_options, MPI_Comm comm, std::ostream& out) {
  Deck d;
  bool failed = false;
  std::string message;
  try {
    d = deck(deck_options);
  } catch (const std::exception& e) {
    failed = true;
    message = e.what();
  }
  if (any_rank_failed(comm, failed ? &message : nullptr, std::cerr)) return kExitUsage;
  try {
    return run_command(d, deck_path, comm, out);
  } catch (const std::exception& e) {
    // Input was validated on every rank before anything ran, so this is a failure on one
    // rank while its peers may be waiting for it: report it and abort them all.
    int rank = 0, world = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &world);
    std::cerr << "minipipe: error on rank " << rank << ": " << e.what() << "\n" << std::flush;
    // MPI_Abort also skips HDF5's second close of a file whose close failed (full disk),
    // which crashes inside MPI_Finalize (see io::unclosable_hdf5_files).
    if (world > 1 || io::unclosable_hdf5_files() > 0) MPI_Abort(comm, kExitFailure);
    return kExitFailure;
  }
}

}  // namespace minipipe
