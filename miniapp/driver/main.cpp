// The minipipe driver: initializes MPI and Kokkos, parses the command line and hands it to the
// tool of the subcommand (tools/). Every error becomes one clear message and a non-zero exit.
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <string>
#include <vector>

#include "miniapp/mpi/signals.hpp"
#include "miniapp/runtime/kokkos_session.hpp"
#include "miniapp/runtime/version.hpp"
#include "miniapp/tools/command.hpp"
#include "miniapp/tools/compare_tool.hpp"
#include "miniapp/tools/deck_tool.hpp"
#include "miniapp/tools/profile_tool.hpp"
#include "miniapp/tools/run_tool.hpp"
#include "miniapp/tools/scale_tool.hpp"
#include "miniapp/tools/schedule_tool.hpp"
#include "miniapp/tools/tokenize_tool.hpp"
#include "miniapp/tools/tune_tool.hpp"

namespace {

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

constexpr const char* kFooter =
    "Every deck key can be overridden after the subcommand, e.g.\n"
    "  mpiexec -n 2 minipipe run --deck inputs/tiny.toml --train.steps 5 --pipeline.schedule 1f1b,gpipe\n"
    "Kokkos options (--kokkos-...) are read by Kokkos::initialize.\n"
    "Exit codes (every subcommand): 0 success; 1 `compare` found differences (or a sweep's dumps\n"
    "differ); 2 bad input or usage (command-line, Kokkos option, deck, path); 3 failure during the run\n"
    "(I/O error, disk full, peer timeout, divergence); killed by SIGINT/SIGTERM: 128 + signal.";

// Parses `args` and runs the one subcommand given; returns the exit code.
int dispatch(std::vector<char*>& args) {
  using namespace minipipe;
  CLI::App app{"miniPipe: pipeline-parallel GPT-2 training mini-app (Kokkos + MPI + HDF5)"};
  app.require_subcommand(1);
  app.set_version_flag(
      "--version", [] { return build_report(); },
      "print miniPipe, Kokkos, MPI, HDF5 and BLAS versions and the determinism flags");
  app.fallthrough();
  app.footer(kFooter);
  DeckOptions deck;
  deck.attach(app);
  RunTool run;
  ScheduleTool schedule;
  CompareTool compare;
  TokenizeTool tokenize;
  ProfileTool profile;
  TuneTool tune;
  ScaleTool scale;
  DeckTool deck_tool;
  run.attach(app, deck);
  schedule.attach(app);
  compare.attach(app);
  tokenize.attach(app);
  profile.attach(app);
  tune.attach(app);
  scale.attach(app);
  deck_tool.attach(app);
  const std::string repeated = repeated_option(app, args, deck.key_of);
  if (!repeated.empty()) return world_rank() == 0 ? print_error(std::cerr, repeated, kExitUsage) : kExitUsage;
  try {
    app.parse(static_cast<int>(args.size()), args.data());
  } catch (const CLI::ParseError& e) {
    // --help and --version are "errors" with code 0 that CLI11 prints; every real parse error is
    // usage (2), printed through the one error path (prefix, stderr, control bytes escaped).
    if (e.get_exit_code() == 0) return world_rank() == 0 ? app.exit(e) : 0;
    return world_rank() == 0 ? print_error(std::cerr, e.what(), kExitUsage) : kExitUsage;
  }
  const MPI_Comm world = MPI_COMM_WORLD;
  if (schedule.sub->parsed()) return on_rank_zero(world, [&] { return schedule.run(std::cout); });
  if (compare.sub->parsed()) return on_rank_zero(world, [&] { return compare.run(std::cout); });
  if (scale.sub->parsed()) return on_rank_zero(world, [&] { return scale.run(deck.overrides, std::cout, std::cerr); });
  if (deck_tool.sub->parsed()) return on_rank_zero(world, [&] { return deck_tool.run(deck, std::cout); });
  if (tokenize.sub->parsed()) return on_rank_zero(world, [&] { return tokenize.run(std::cout); });
  if (profile.sub->parsed()) return profile.run(deck, world, std::cout);
  if (tune.sub->parsed()) return tune.run(deck, world, std::cout);
  return run.run(deck, world, std::cout);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  // SIGINT/SIGTERM from here on remove the temporaries of outputs being written.
  minipipe::install_termination_handlers(world_rank());
  // Kokkos reads only its own --kokkos-* options (it would also answer a plain --help with its
  // own text); everything else is the driver's.
  std::vector<char*> kokkos_args{argv[0]}, app_args{argv[0]};
  for (int i = 1; i < argc; ++i)
    (std::string(argv[i]).rfind("--kokkos-", 0) == 0 ? kokkos_args : app_args).push_back(argv[i]);
  const std::string kokkos_error = minipipe::initialize_kokkos(kokkos_args);
  if (!kokkos_error.empty()) {
    if (world_rank() == 0) minipipe::print_error(std::cerr, kokkos_error, minipipe::kExitUsage);
    MPI_Finalize();
    return minipipe::kExitUsage;
  }
  const int rc = dispatch(app_args);
  minipipe::finalize_kokkos();
  MPI_Finalize();
  return rc;
}
