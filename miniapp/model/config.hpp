// The input deck: every key as one row of deck_keys() (type, default, help, allowed values, flags)
// bound to one typed field of RunConfig; read from TOML, overridden from the command line
// (`--section.key VALUE`), validated up front, then read by field.
#pragma once

#include <functional>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include "schedules/schedule.hpp"
#include "schedules/variant.hpp"

namespace minipipe {

// A bad user-supplied value: the message names the key, the value and what is allowed.
struct InputError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// One deck value. Lists are used for sweeps (schedules, micro-batch counts) and layer splits.
using DeckValue = std::variant<long long, double, bool, std::string, std::vector<long long>, std::vector<std::string>>;

// What a key accepts beyond its type: checked by Deck::validate() and shown by --help, so the
// rule and its text are one datum. Applies to each entry of a list.
struct Allowed {
  std::vector<std::string> choices;  // strings: exactly one of these
  bool has_min = false, has_max = false;
  double min = 0, max = 0;
  bool min_open = false, max_open = false;  // min < x (not <=), x < max
  bool nonempty = false;                    // lists: at least one entry
  std::string note;                         // extra words, e.g. "0 = auto"

  static Allowed one_of(std::vector<std::string> c);
  static Allowed range(double lo, double hi, std::string note = "");  // lo <= x <= hi
  static Allowed at_least(double lo, std::string note = "");
  Allowed& open_below();  // lo < x
  Allowed& open_above();  // x < hi
  Allowed& not_empty();
  bool ok(double x) const;
  bool ok(const std::string& x) const;
  std::string text() const;  // "deterministic | fast", "(0, 10]", ">= 1 (0 = auto)"; "" when anything goes
};

// The run's settings, one typed field per deck key, built once from the deck (Deck::config()) and
// read by the code that uses them. Each field's row in deck_keys() below gives its type, default,
// help, allowed values and flags; the field names are the keys' ("train.batch" is train.batch).
// pipeline.layers_per_stage: explicit blocks per stage (empty = even), or "auto".
struct LayerSplit {
  bool automatic = false;
  std::vector<long long> counts;
};
struct ModelConfig {
  long long vocab, seq_len, block_size, channels, n_head, n_layer;
};
struct TrainConfig {
  long long batch, steps, seed;
  std::string mode, optimizer, kernel_path, fast_gemm;
  double lr, beta1, beta2, eps, weight_decay, momentum;
  std::string recompute;
};
struct DataConfig {
  std::string source, path, dataset;
  long long min_len;
};
struct PipelineConfig {
  std::vector<std::string> schedule;
  std::vector<long long> microbatches;
  long long dp, p, chunks, group, memory_cap;
  LayerSplit layers_per_stage;
  std::string costs, csv, placement, cuda_aware;
  bool overlap_allreduce;
  std::string allreduce, allreduce_limbs;
  long long ranks_per_node;
  std::string rank_order;
  double timeout;
};
struct CheckpointConfig {
  std::string path;
  long long every;
  std::string restart;
};
struct OutputConfig {
  std::string dump, dump_level;
  bool force;
  std::string json, svg, trace;
  long long print_every;
  std::string verify, roofline;
};
struct ProfileConfig {
  bool kernels, action_fence;
};
struct RunConfig {
  ModelConfig model;
  TrainConfig train;
  DataConfig data;
  PipelineConfig pipeline;
  CheckpointConfig checkpoint;
  OutputConfig output;
  ProfileConfig profile;
};

// A row's flags: the commands that read the key (every key is run's; tune's --verify and
// --calibrate runs read run's keys too), and whether a restart must keep its value.
enum KeyFlag : unsigned {
  kRun = 1u << 0,
  kProfile = 1u << 1,
  kTune = 1u << 2,
  kScale = 1u << 3,
  kEveryTool = kRun | kProfile | kTune | kScale,
  kRestartMatch = 1u << 8,  // Checkpoint::check_same_training compares it with the checkpoint's deck
  // How the parser reads it, beyond its type: an integer used in 64 bits (every other integer key is
  // narrowed to int where it is used, so a value past int is refused); a list that also takes the
  // word "auto"; a list of names where "all" alone stands for every schedule.
  kInt64 = 1u << 9,
  kTakesAuto = 1u << 10,
  kAllSchedules = 1u << 11,
};

// A row's field in RunConfig, read and written as a DeckValue.
struct DeckField {
  std::function<DeckValue(const RunConfig&)> get;
  std::function<void(RunConfig&, const DeckValue&)> set;
};

struct DeckKey {
  std::string name;  // "section.key"
  DeckValue def;
  std::string help;
  Allowed allowed;
  unsigned flags = kRun;
  DeckField field;
};

// The commands a row names ("run, profile, tune, scale").
std::string commands_text(unsigned flags);

// Conversions between a field and its DeckValue; LayerSplit is a list, or the word "auto".
template <class T>
DeckValue field_value(const T& x) {
  return DeckValue(x);
}
DeckValue field_value(const LayerSplit& x);
template <class T>
void set_field(T& x, const DeckValue& v) {
  x = std::get<T>(v);
}
void set_field(LayerSplit& x, const DeckValue& v);

template <class T>
struct SameType {
  using type = T;
};

// One row: the key's name and field (MINIPIPE_DECK_KEY), its default (of the field's type), help,
// allowed values and flags.
template <class S, class T>
DeckKey deck_key(const char* name, S RunConfig::*section, T S::*member, typename SameType<T>::type def,
                 std::string help, Allowed allowed = {}, unsigned flags = kRun) {
  DeckKey k{name, field_value(def), std::move(help), std::move(allowed), flags, {}};
  k.field.get = [section, member](const RunConfig& c) { return field_value((c.*section).*member); };
  k.field.set = [section, member](RunConfig& c, const DeckValue& v) { set_field((c.*section).*member, v); };
  return k;
}

// "train, batch" -> the key's name "train.batch" and its field RunConfig::train.batch, so that a
// row cannot name one key and bind another.
#define MINIPIPE_DECK_KEY(section, key) #section "." #key, &RunConfig::section, &decltype(RunConfig::section)::key

// Every key, in help order: the one table that the parser, the checks, --help, the restart check
// and docs/deck.md (`minipipe deck --markdown`) read.
inline const std::vector<DeckKey>& deck_keys() {
  using A = Allowed;
  using IntList = std::vector<long long>;
  using StrList = std::vector<std::string>;
  constexpr unsigned kTools = kEveryTool, kRestart = kRestartMatch;
  static const std::vector<DeckKey> keys = {
      deck_key(MINIPIPE_DECK_KEY(model, vocab), 64LL, "vocabulary size V", {}, kTools | kRestart),
      deck_key(MINIPIPE_DECK_KEY(model, seq_len), 32LL, "sequence length T of every sample", {}, kTools | kRestart),
      deck_key(MINIPIPE_DECK_KEY(model, block_size), 0LL,
               "rows of the position table wpe (0 = model.seq_len); seq_len <= block_size", {}, kTools | kRestart),
      deck_key(MINIPIPE_DECK_KEY(model, channels), 64LL, "embedding width C (divisible by model.n_head)", {},
               kTools | kRestart),
      deck_key(MINIPIPE_DECK_KEY(model, n_head), 4LL, "attention heads H", {}, kTools | kRestart),
      deck_key(MINIPIPE_DECK_KEY(model, n_layer), 4LL, "transformer blocks L", {}, kTools | kRestart),
      deck_key(MINIPIPE_DECK_KEY(train, batch), 8LL, "global batch B (sequences per optimizer step)",
               A::range(1, 16777216), kTools | kRestart),
      deck_key(MINIPIPE_DECK_KEY(train, steps), 30LL, "optimizer steps", A::range(1, 1000000), kRun),
      deck_key(MINIPIPE_DECK_KEY(train, seed), 1234LL, "seed of parameter init and synthetic data", A::at_least(0),
               kRun | kProfile | kTune | kRestart | kInt64),
      deck_key(MINIPIPE_DECK_KEY(train, mode), std::string("deterministic"), "arithmetic",
               A::one_of({"deterministic", "fast"}), kTools | kRestart),
      deck_key(MINIPIPE_DECK_KEY(train, optimizer), std::string("adamw"), "optimizer", A::one_of({"adamw", "sgd"}),
               kRun | kProfile | kTune | kRestart),
      // Kernel path of the deterministic kernels (kernels/kernel_path.hpp): the same bits either way.
      deck_key(MINIPIPE_DECK_KEY(train, kernel_path), std::string("auto"),
               "deterministic kernels: auto (host path on host memory), host, device",
               A::one_of({"auto", "host", "device"}), kRun),
      // GEMMs of fast mode (kernels/kernel_path.hpp): auto = gemm_det where its SIMD microkernel runs.
      deck_key(MINIPIPE_DECK_KEY(train, fast_gemm), std::string("auto"),
               "fast-mode GEMMs: auto (gemm_det on the host path where it has a SIMD microkernel, else blas), blas "
               "(KokkosBlas::gemm: BLAS, cuBLAS, rocBLAS), gemm_det",
               A::one_of({"auto", "blas", "gemm_det"}), kRun),
      deck_key(MINIPIPE_DECK_KEY(train, lr), 5e-3, "learning rate", A::range(0, 10).open_below(), kRun | kRestart),
      deck_key(MINIPIPE_DECK_KEY(train, beta1), 0.9, "AdamW beta1", A::range(0, 1).open_above(), kRun | kRestart),
      deck_key(MINIPIPE_DECK_KEY(train, beta2), 0.95, "AdamW beta2", A::range(0, 1).open_above(), kRun | kRestart),
      deck_key(MINIPIPE_DECK_KEY(train, eps), 1e-8, "AdamW epsilon", A::at_least(0).open_below(), kRun | kRestart),
      deck_key(MINIPIPE_DECK_KEY(train, weight_decay), 0.0, "weight decay (2-D weights only)", A::at_least(0),
               kRun | kRestart),
      deck_key(MINIPIPE_DECK_KEY(train, momentum), 0.0, "SGD momentum", A::range(0, 1).open_above(), kRun | kRestart),
      deck_key(
          MINIPIPE_DECK_KEY(train, recompute), std::string("none"),
          "what F keeps for backward: none = every value; attention = all but the attention probabilities and output; "
          "block = only each block's input (I recomputes the rest, bitwise the same)",
          A::one_of({"none", "attention", "block"}), kRun | kScale),
      deck_key(MINIPIPE_DECK_KEY(data, source), std::string("synthetic"), "where tokens come from",
               A::one_of({"synthetic", "hdf5"}), kRun | kProfile | kTune | kRestart),
      deck_key(MINIPIPE_DECK_KEY(data, path), std::string(""), "HDF5 token file (data.source = hdf5)", {},
               kRun | kProfile | kTune),
      deck_key(MINIPIPE_DECK_KEY(data, dataset), std::string("tokens"), "int32 [N, seq_len+1] dataset in data.path", {},
               kRun | kProfile | kTune | kRestart),
      deck_key(MINIPIPE_DECK_KEY(data, min_len), 0LL,
               "shortest synthetic sequence (0 = seq_len/2); shorter ones are right-padded", A::at_least(0),
               kRun | kProfile | kTune | kRestart),
      deck_key(
          MINIPIPE_DECK_KEY(pipeline, schedule), StrList{"sequential"},
          "schedule name(s); a list runs a sweep in one launch; \"all\" = every schedule, in "
          "`minipipe schedule --list` order",
          [] {
            auto names = sched::schedule_names();
            names.push_back("csv");
            return A::one_of(names).not_empty();
          }(),
          kRun | kAllSchedules),
      deck_key(MINIPIPE_DECK_KEY(pipeline, microbatches), IntList{1}, "micro-batch count(s) m; a list runs a sweep",
               A::at_least(1, "at most train.batch").not_empty(), kRun | kProfile | kTune),
      deck_key(MINIPIPE_DECK_KEY(pipeline, dp), 1LL, "data-parallel replicas of the pipeline (launch p*dp ranks)",
               A::at_least(1), kRun | kTune),
      deck_key(MINIPIPE_DECK_KEY(pipeline, p), 0LL,
               "pipeline ranks p; 0 = launched ranks / pipeline.dp (which must equal p otherwise)", A::at_least(0),
               kRun),
      deck_key(MINIPIPE_DECK_KEY(pipeline, chunks), 0LL, "model chunks v per rank",
               A::range(0, 64, "0 = what the schedule needs"), kRun),
      deck_key(MINIPIPE_DECK_KEY(pipeline, group), 0LL,
               sched::names_reading(sched::kGroup) +
                   ": micro-batches per group through the chunks (p = Megatron's depth-first, >= m = breadth-first)",
               A::at_least(0, "0 = p"), kRun),
      deck_key(MINIPIPE_DECK_KEY(pipeline, memory_cap), 0LL,
               sched::names_reading(sched::kMemoryCap) +
                   ": stored micro-batches per rank (the list scheduling keeps under it)",
               A::at_least(0, "0 = p, 1F1B's"), kRun),
      deck_key(MINIPIPE_DECK_KEY(pipeline, layers_per_stage), LayerSplit{},
               "explicit layer split over the p*v stages (empty = even; \"auto\" = the split whose slowest stage is "
               "fastest by measured costs, embedding and head counted)",
               A::at_least(0), kRun | kScale | kTakesAuto),
      deck_key(
          MINIPIPE_DECK_KEY(pipeline, costs), std::string(""),
          "cost file of `minipipe profile` for layers_per_stage = \"auto\" (empty = a short profiling step at start)",
          {}, kRun),
      deck_key(MINIPIPE_DECK_KEY(pipeline, csv), std::string(""),
               "PyTorch-format CSV schedule (used when schedule = \"csv\")", {}, kRun),
      deck_key(MINIPIPE_DECK_KEY(pipeline, placement), std::string("loop"), "stage placement for CSV schedules",
               A::one_of({"loop", "v"}), kRun),
      deck_key(MINIPIPE_DECK_KEY(pipeline, cuda_aware), std::string("auto"), "device buffers straight to MPI",
               A::one_of({"auto", "on", "off"}), kRun | kProfile | kTune),
      // The data-parallel gradient reduction (miniapp/runtime/grad_reduce.hpp): bitwise the same
      // in deterministic mode whatever these say.
      deck_key(MINIPIPE_DECK_KEY(pipeline, overlap_allreduce), true,
               "start each stage's gradient all-reduce over the replicas when its last W is done (false: after the "
               "pipeline)",
               {}, kRun),
      deck_key(
          MINIPIPE_DECK_KEY(pipeline, allreduce), std::string("flat"),
          "gradient all-reduce over the replicas: flat (one collective) or hierarchical (two-level: reduce-scatter "
          "inside each node, all-reduce of each shard across nodes, all-gather inside the node; with nodes of unequal "
          "size the leader form: reduce to a node leader, all-reduce among leaders, broadcast inside the node)",
          A::one_of({"flat", "hierarchical"}), kRun),
      deck_key(MINIPIPE_DECK_KEY(pipeline, allreduce_limbs), std::string("compact"),
               "deterministic all-reduce words: compact (a shared exponent per tensor piece, 8 or 16 bytes per element "
               "where the agreed range fits, else full) or full (four 32-bit limbs, 32 bytes per element)",
               A::one_of({"compact", "full"}), kRun),
      deck_key(MINIPIPE_DECK_KEY(pipeline, ranks_per_node), 0LL,
               "hierarchical all-reduce: consecutive ranks per node (lets one machine stand for several nodes)",
               A::at_least(0, "0 = the nodes MPI reports (shared memory)"), kRun),
      deck_key(
          MINIPIPE_DECK_KEY(pipeline, rank_order), std::string("dp-major"),
          "placement of the p x dp ranks: dp-major (rank = dp * p + pp, a replica's pipeline on consecutive ranks) or "
          "pp-major (rank = pp * dp + dp index, one pipeline rank's replicas on consecutive ranks)",
          A::one_of({"dp-major", "pp-major"}), kRun | kScale),
      deck_key(MINIPIPE_DECK_KEY(pipeline, timeout), 600.0,
               "seconds any wait for a peer rank may take before the job aborts naming the wait",
               A::at_least(0, "0 = wait forever"), kRun),
      deck_key(MINIPIPE_DECK_KEY(checkpoint, path), std::string(""),
               "HDF5 checkpoint written after complete optimizer steps (empty = none)", {}, kRun),
      deck_key(MINIPIPE_DECK_KEY(checkpoint, every), 0LL, "write the checkpoint every N steps and after the last one",
               A::at_least(0, "0 = after the last step only"), kRun),
      deck_key(MINIPIPE_DECK_KEY(checkpoint, restart), std::string(""),
               "continue from this checkpoint (train.steps counts all steps)", {}, kRun),
      deck_key(MINIPIPE_DECK_KEY(output, dump), std::string(""),
               "HDF5 dump file (empty = none); a sweep adds _<schedule>_m<M>", {}, kRun),
      deck_key(MINIPIPE_DECK_KEY(output, dump_level), std::string("full"), "what the dump holds",
               A::one_of({"none", "loss", "grads", "full", "kernels"}), kRun),
      deck_key(MINIPIPE_DECK_KEY(output, force), false, "overwrite existing output files", {}, kRun),
      deck_key(MINIPIPE_DECK_KEY(output, json), std::string(""), "JSON report file (empty = none)", {}, kRun),
      deck_key(MINIPIPE_DECK_KEY(output, svg), std::string(""), "SVG timeline of the last step (empty = none)", {},
               kRun),
      deck_key(MINIPIPE_DECK_KEY(output, trace), std::string(""), "Chrome-trace JSON of the last step (empty = none)",
               {}, kRun),
      deck_key(MINIPIPE_DECK_KEY(output, print_every), 1LL, "print a step line every N steps", A::at_least(1), kRun),
      deck_key(
          MINIPIPE_DECK_KEY(output, roofline), std::string(""),
          "SVG roofline of the kernel counters (needs profile.kernels; empty = none); a sweep adds _<schedule>_m<M>",
          {}, kRun),
      deck_key(MINIPIPE_DECK_KEY(output, verify), std::string(""),
               "reference dump: verification compares every run's dump with it (bitwise; fast mode 1e-4 normwise, with "
               "AdamW up to its first update)",
               {}, kRun),
      // Built-in kernel counters (kernels/kernel_counters.hpp): Kokkos Tools callbacks miniPipe
      // registers itself; off, nothing is registered.
      deck_key(
          MINIPIPE_DECK_KEY(profile, kernels), false,
          "built-in kernel counters: per kernel calls, fenced time, FLOPs, bytes and rates beside a same-run sgemm and "
          "triad; per step fences and host-device copies (kernels are fenced while on, so steps run slower)",
          {}, kRun),
      // The executor's fence after each compute action (docs/device-path.md): it gives every
      // action its own end time; off, actions are only enqueued and the fences left are those
      // where MPI or the host reads device memory.
      deck_key(
          MINIPIPE_DECK_KEY(profile, action_fence), true,
          "fence after every compute action, so each action's time is its own (the measured bubble, per-rank F/I/W/B, "
          "the time budget and the timelines need it); false: actions are only enqueued, fences remain only where MPI "
          "or the host reads device memory, and the report marks per-action times unavailable",
          {}, kRun),
  };
  return keys;
}
// The row of `name`; nullptr when there is none.
const DeckKey* find_deck_key(const std::string& name);

// A key's help line: its description and, where it has one, its Allowed rule.
std::string help_text(const DeckKey& key);
// The value type of a key as --help and docs/deck.md name it: INT, NUM, BOOL, TEXT, INT[,INT...] ...
const char* kind_text(const DeckValue& def);
// docs/deck.md's key tables: one per section, a row per key (`minipipe deck --markdown`).
std::string deck_markdown_tables();

// The one form of a bad key's message: "<where>: key '<key>' has value <value><detail>; allowed:
// <allowed>". `where` says where the value came from (deck, command line, a file); `detail` says
// why it is refused when that is more than "not allowed" (", which has no effect unless ...").
std::string key_error_text(const std::string& key, const std::string& value, const std::string& allowed,
                           const std::string& detail = "", const std::string& where = "deck");
[[noreturn]] void key_error(const std::string& key, const std::string& value, const std::string& allowed,
                            const std::string& detail = "", const std::string& where = "deck");

// Deck values by key, held in their typed fields; every key of deck_keys() has its value.
class Deck {
 public:
  Deck();  // all defaults
  // Reads a TOML file; unknown keys, wrong types and unreadable files are InputError.
  static Deck from_file(const std::string& path);
  static Deck from_string(const std::string& toml_text, const std::string& origin);

  // Sets one key from command-line text, converting to the key's type.
  void set_from_text(const std::string& key, const std::string& text);

  // Every key against its Allowed rule; InputError names the key, the value and what is allowed.
  void validate() const;

  // The typed settings: what code that uses the deck reads.
  const RunConfig& config() const { return config_; }
  // One key's value, for messages and the restart check.
  DeckValue value(const std::string& key) const;

  // Deck text as given (for /meta) and the effective values as TOML (for reports).
  const std::string& source_text() const { return source_text_; }
  std::string effective_toml() const;

 private:
  RunConfig config_;
  std::string source_text_;
};

std::string to_text(const DeckValue& v);

}  // namespace minipipe
