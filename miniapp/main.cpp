// The minipipe driver: parses the command line, initializes MPI and Kokkos, runs a command.
// Every error becomes one clear message and a non-zero exit on every rank.
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "config.hpp"
#include "deck_checks.hpp"
#include "io/compare_tool.hpp"
#include "io/dump_writer.hpp"
#include "io/output_paths.hpp"
#include "kokkos_session.hpp"
#include "message_text.hpp"
#include "profile.hpp"
#include "run.hpp"
#include "schedule_tool.hpp"
#include "schedules/schedule.hpp"
#include "signals.hpp"
#include "tokenize_tool.hpp"
#include "tune.hpp"
#include "version.hpp"

namespace {

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

// Exit codes, the same for every subcommand (DESIGN.md §7).
constexpr int kExitUsage = 2;    // bad input or usage: parse errors, bad Kokkos options, bad deck
constexpr int kExitFailure = 3;  // failure during the run

// Rank 0's exit code on every rank, so that mpiexec reports the same code however it picks.
int same_on_all_ranks(int rc) {
  MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
  return rc;
}

// The first option given more than once, in the project's words ("" when none): CLI11 would
// only say "At Most 1 required but received 2". A repeat is refused rather than the last taken:
// `--pipeline.schedule 1f1b --pipeline.schedule gpipe` reads like a sweep and would silently run
// one schedule. `key_of` names an option by its deck key (a run alias such as --dump and its key
// --output.dump count as one); flags may repeat (the same value twice).
std::string repeated_option(CLI::App& app, const std::vector<char*>& args,
                            const std::map<const CLI::Option*, std::string>& key_of) {
  CLI::App* sub = nullptr;
  std::map<std::string, std::vector<std::string>> given;  // key -> "--option value" in order
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string a = args[i];
    if (a == "--") break;
    if (!sub) {
      for (CLI::App* s : app.get_subcommands([](CLI::App*) { return true; }))
        if (s->get_name() == a) sub = s;
      if (sub) continue;
    }
    if (a.size() < 2 || a[0] != '-') continue;
    std::string name = a, value;
    bool inline_value = false;
    if (a.rfind("--", 0) == 0) {
      const auto eq = a.find('=');
      if (eq != std::string::npos) name = a.substr(0, eq), value = a.substr(eq + 1), inline_value = true;
    } else if (a.size() > 2) {
      name = a.substr(0, 2), value = a.substr(2), inline_value = true;  // -m4
    }
    const CLI::Option* o = sub ? sub->get_option_no_throw(name) : nullptr;
    if (!o) o = app.get_option_no_throw(name);
    if (!o || o->get_items_expected_max() != 1) continue;  // not an option, a flag or a list option
    if (!inline_value && i + 1 < args.size()) value = args[++i];
    const auto k = key_of.find(o);
    given[k != key_of.end() ? k->second : name].push_back(name + " " + minipipe::quoted_text(value));
  }
  for (const auto& [key, uses] : given) {
    if (uses.size() < 2) continue;
    std::string list;
    for (const auto& u : uses) list += (list.empty() ? "" : ", ") + u;
    const bool deck_key = key[0] != '-';
    return "command line: " + std::string(deck_key ? "key '" : "option '") + key + "' is given " +
           std::to_string(uses.size()) + " times (" + list + "); allowed: once" +
           (deck_key ? " (a list key takes one comma-separated list, e.g. --pipeline.schedule 1f1b,gpipe)" : "");
  }
  return "";
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
    if (world_rank() == 0) std::cerr << "minipipe: error: " << kokkos_error << "\n";
    MPI_Finalize();
    return kExitUsage;
  }
  int rc = 0;
  {
    CLI::App app{"miniPipe: pipeline-parallel GPT-2 training mini-app (Kokkos + MPI + HDF5)"};
    app.require_subcommand(1);
    app.set_version_flag(
        "--version", [] { return minipipe::build_report(); },
        "print miniPipe, Kokkos, MPI, HDF5 and BLAS versions and the determinism flags");
    app.fallthrough();
    app.footer(
        "Every deck key can be overridden after the subcommand, e.g.\n"
        "  mpiexec -n 2 minipipe run --deck inputs/tiny.toml --train.steps 5 --pipeline.schedule 1f1b,gpipe\n"
        "Kokkos options (--kokkos-...) are read by Kokkos::initialize.\n"
        "Exit codes (every subcommand): 0 success; 1 `compare` found differences (or a sweep's dumps\n"
        "differ); 2 bad input or usage (command-line, Kokkos option, deck, path); 3 failure during the run\n"
        "(I/O error, disk full, peer timeout, divergence); killed by SIGINT/SIGTERM: 128 + signal.");
    std::map<std::string, std::string> overrides;
    std::map<const CLI::Option*, std::string> key_of;  // options that set a deck key
    for (const auto& k : minipipe::deck_keys()) {
      auto* o = app.add_option_function<std::string>(
          "--" + k.name, [&overrides, name = k.name](const std::string& v) { overrides[name] = v; },
          minipipe::help_text(k));
      o->default_str(minipipe::to_text(k.def));
      static const char* kinds[] = {"INT", "NUM", "BOOL", "TEXT", "INT[,INT...]", "TEXT[,TEXT...]"};
      o->type_name(kinds[k.def.index()]);
      o->group("Deck keys (default shown)");
      key_of[o] = k.name;
    }
    auto* run = app.add_subcommand("run", "train the model with a pipeline schedule (launch with mpiexec -n P)");
    std::string deck_path, schedule, dump, json, restart, verify;
    int m = 0, v = -1;
    bool force = false;
    run->add_option("--deck", deck_path, "TOML input deck (defaults apply to missing keys)");
    key_of[run->add_option("--schedule", schedule, "schedule name or comma list (= --pipeline.schedule)")] =
        "pipeline.schedule";
    key_of[run->add_option("-m", m, "micro-batches (= --pipeline.microbatches)")] = "pipeline.microbatches";
    key_of[run->add_option("-v", v, "model chunks per rank (= --pipeline.chunks)")] = "pipeline.chunks";
    key_of[run->add_option("--dump", dump, "HDF5 dump file (= --output.dump)")] = "output.dump";
    key_of[run->add_option("--json", json, "JSON report (= --output.json)")] = "output.json";
    key_of[run->add_option("--restart", restart, "continue from a checkpoint (= --checkpoint.restart)")] =
        "checkpoint.restart";
    key_of[run->add_option("--verify", verify, "reference dump to verify the run against (= --output.verify)")] =
        "output.verify";
    run->add_flag("--force", force, "overwrite existing output files (= --output.force)");

    minipipe::ScheduleTool schedule_tool;
    schedule_tool.attach(app);
    minipipe::io::CompareTool compare_tool;
    compare_tool.attach(app);
    minipipe::TokenizeTool tokenize_tool;
    tokenize_tool.attach(app);
    minipipe::ProfileTool profile_tool;
    profile_tool.attach(app);
    minipipe::TuneTool tune_tool;
    tune_tool.attach(app);

    const std::string repeated = repeated_option(app, app_args, key_of);
    if (!repeated.empty()) {
      if (world_rank() == 0) std::cerr << "minipipe: error: " << repeated << "\n";
      minipipe::finalize_kokkos();
      MPI_Finalize();
      return kExitUsage;
    }
    try {
      app.parse(static_cast<int>(app_args.size()), app_args.data());
    } catch (const CLI::ParseError& e) {
      // --help and --version are "errors" with code 0; every real parse error is usage (2).
      if (world_rank() == 0)
        rc = app.exit(e);
      else
        rc = e.get_exit_code();
      if (rc != 0) rc = kExitUsage;
      minipipe::finalize_kokkos();
      MPI_Finalize();
      return rc;
    }

    if (schedule_tool.sub->parsed()) {
      rc = same_on_all_ranks(world_rank() == 0 ? schedule_tool.run(std::cout) : 0);
    } else if (compare_tool.sub->parsed()) {
      rc = same_on_all_ranks(world_rank() == 0 ? compare_tool.run(std::cout) : 0);
    } else if (tokenize_tool.sub->parsed()) {
      rc = same_on_all_ranks(world_rank() == 0 ? tokenize_tool.run(std::cout) : 0);
    } else if (profile_tool.sub->parsed() || tune_tool.sub->parsed()) {
      // Deck-driven tools: the deck and its overrides checked on every rank, then collective.
      const bool profile = profile_tool.sub->parsed();
      minipipe::Deck deck;
      std::string message;
      try {
        const std::string& path = profile ? profile_tool.deck_path : tune_tool.deck_path;
        if (!path.empty()) deck = minipipe::Deck::from_file(path);
        for (const auto& [k, val] : overrides) deck.set_from_text(k, val);
        deck.validate();
        (void)minipipe::model_shape_from_deck(deck);
        if (profile)
          minipipe::io::check_outputs({{"--out", profile_tool.out_path, profile_tool.force, false}},
                                      {{"--deck", profile_tool.deck_path}});
        else if (!tune_tool.costs_path.empty())
          minipipe::io::check_input_file("--costs", tune_tool.costs_path);
      } catch (const std::exception& e) {
        message = e.what();
      }
      if (minipipe::any_rank_failed(MPI_COMM_WORLD, message.empty() ? nullptr : &message, std::cerr)) {
        rc = kExitUsage;
      } else {
        try {
          rc = same_on_all_ranks(profile ? profile_tool.run(deck, MPI_COMM_WORLD, std::cout)
                                         : tune_tool.run(deck, MPI_COMM_WORLD, std::cout));
        } catch (const minipipe::InputError& e) {
          std::cerr << "minipipe: error: " << e.what() << "\n";
          rc = kExitUsage;
        } catch (const std::exception& e) {
          std::cerr << "minipipe: error on rank " << world_rank() << ": " << e.what() << "\n" << std::flush;
          MPI_Abort(MPI_COMM_WORLD, kExitFailure);
        }
      }
    } else {
      minipipe::Deck deck;
      bool failed = false;
      std::string message;
      try {
        if (!deck_path.empty()) deck = minipipe::Deck::from_file(deck_path);
        for (const auto& [k, val] : overrides) deck.set_from_text(k, val);
        if (!schedule.empty()) deck.set_from_text("pipeline.schedule", schedule);
        if (run->count("-m")) deck.set_from_text("pipeline.microbatches", std::to_string(m));
        if (run->count("-v")) deck.set_from_text("pipeline.chunks", std::to_string(v));
        if (!dump.empty()) deck.set_from_text("output.dump", dump);
        if (!json.empty()) deck.set_from_text("output.json", json);
        if (!restart.empty()) deck.set_from_text("checkpoint.restart", restart);
        if (!verify.empty()) deck.set_from_text("output.verify", verify);
        if (force) deck.set_from_text("output.force", "true");
      } catch (const std::exception& e) {
        failed = true;
        message = e.what();
      }
      if (minipipe::any_rank_failed(MPI_COMM_WORLD, failed ? &message : nullptr, std::cerr)) {
        rc = kExitUsage;
      } else {
        try {
          rc = minipipe::run_command(deck, deck_path, MPI_COMM_WORLD, std::cout);
        } catch (const std::exception& e) {
          // Input was validated on every rank before anything ran, so this is a failure on one
          // rank while its peers may be waiting for it: report it and abort them all.
          std::cerr << "minipipe: error on rank " << world_rank() << ": " << e.what() << "\n" << std::flush;
          int world = 1;
          MPI_Comm_size(MPI_COMM_WORLD, &world);
          // MPI_Abort also skips HDF5's second close of a file whose close failed (full disk),
          // which crashes inside MPI_Finalize (see io::unclosable_hdf5_files).
          if (world > 1 || minipipe::io::unclosable_hdf5_files() > 0) MPI_Abort(MPI_COMM_WORLD, kExitFailure);
          rc = kExitFailure;
        }
      }
    }
  }
  minipipe::finalize_kokkos();
  MPI_Finalize();
  return rc;
}
