// What every subcommand shares: the exit codes, the deck keys as options of the command line, and
// how a collective deck-driven tool agrees on its input before it runs and reports a failure.
#pragma once

#include <mpi.h>

#include <functional>
#include <iosfwd>
#include <map>
#include <string>
#include <vector>

#include "miniapp/model/config.hpp"

namespace CLI {
class App;
class Option;
class Validator;
}  // namespace CLI

namespace minipipe {

// Exit codes, the same for every subcommand (docs/design.md §7).
constexpr int kExitUsage = 2;    // bad input or usage: parse errors, bad Kokkos options, bad deck
constexpr int kExitFailure = 3;  // failure during the run

// Every deck key as an option of the top-level command line (`--section.key VALUE`, allowed
// after the subcommand too), and the deck a tool reads: its file, then these overrides.
struct DeckOptions {
  std::map<std::string, std::string> overrides;  // key -> text, applied in key order
  // Every option that sets a deck key (--section.key, and a tool's alias such as run's --dump),
  // so that a key given twice is refused whatever spelling each use took.
  std::map<const CLI::Option*, std::string> key_of;

  // Adds every key of deck_keys() to `app`, with its help, type and default.
  void attach(CLI::App& app);
  // The deck at `path` ("" = every default) with the overrides applied; InputError when bad.
  Deck load(const std::string& path) const;
};

// The first option given more than once in `args`, in the project's words ("" when none): CLI11
// would only say "At Most 1 required but received 2". A repeat is refused rather than the last
// taken (docs/deck.md). Options are named by their deck key through `key_of`.
std::string repeated_option(CLI::App& app, const std::vector<char*>& args,
                            const std::map<const CLI::Option*, std::string>& key_of);

// The one error path of every subcommand: "minipipe: error: TEXT" and a newline on `err` (stderr),
// control bytes of TEXT escaped (io/message_text.hpp); returns `code` (kExitUsage or kExitFailure).
int print_error(std::ostream& err, const std::string& text, int code);

// A CLI11 check for an integer option: a whole number >= `min`, refused in the project's words
// ("value '0' is not allowed; allowed: an integer >= 1") rather than CLI11's range with a
// 309-digit upper bound.
CLI::Validator integer_at_least(long long min);

// Rank 0's exit code on every rank, so that mpiexec reports the same code however it picks.
int same_on_all_ranks(int rc, MPI_Comm comm);

// A tool that works on files only (schedule, compare, tokenize): `run` on rank 0, its exit code on
// every rank.
int on_rank_zero(MPI_Comm comm, const std::function<int()>& run);

// A collective deck-driven tool (profile, tune): `check` (it throws on bad input) on every rank,
// then an agreement: any rank's error is printed once and every rank returns 2. Then `run` on
// every rank, rank 0's exit code on all; an InputError it throws is bad input (2), any other
// exception a failure while peers may wait for this rank: it is printed and the job aborted (3).
int run_collective_tool(MPI_Comm comm, const std::function<void()>& check, const std::function<int()>& run);

}  // namespace minipipe
