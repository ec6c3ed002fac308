// The run driver as a sequence of named phases: plan (validate everything up front), open the
// outputs, train, gather the measurements into one record, summarize, write the reports.
#include "miniapp/launch/run.hpp"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <variant>

#include "kernels/gemm.hpp"
#include "kernels/kernel_counters.hpp"
#include "kernels/kernel_path.hpp"
#include "miniapp/io/compare.hpp"
#include "miniapp/io/dump_reader.hpp"
#include "miniapp/io/dump_writer.hpp"
#include "miniapp/io/message_text.hpp"
#include "miniapp/io/output_file.hpp"
#include "miniapp/model/cost_file.hpp"
#include "miniapp/model/deck_checks.hpp"
#include "miniapp/model/kernel_outputs.hpp"
#include "miniapp/model/test_hooks.hpp"
#include "miniapp/mpi/peer_wait.hpp"
#include "miniapp/report/kernel_report.hpp"
#include "miniapp/report/report.hpp"
#include "miniapp/report/summary.hpp"
#include "miniapp/report/time_budget.hpp"
#include "miniapp/report/verdict.hpp"
#include "miniapp/runtime/checkpoint.hpp"
#include "miniapp/runtime/dump_observer.hpp"
#include "miniapp/runtime/profile.hpp"
#include "miniapp/runtime/real.hpp"
#include "miniapp/runtime/test_delays.hpp"
#include "miniapp/runtime/trainer.hpp"
#include "miniapp/runtime/version.hpp"
#include "schedules/csv.hpp"
#include "schedules/split.hpp"
#include "schedules/timeline.hpp"
#include "schedules/validator.hpp"

namespace minipipe {

namespace {

// One (schedule, m) of the sweep.
struct Plan {
  std::string schedule;
  int m = 1;
  sched::Schedule lowered;  // what runs: lowered, receives posted early
  StageLayout layout;
  std::string dump;
  std::string split_note;  // how an automatic split was chosen (rank 0)
};

// Everything a launch needs, validated before any rank communicates.
struct RunSetup {
  RunSetup(const ModelShape& s, DataSource d) : shape(s), data(std::move(d)) {}
  ModelShape shape;
  DataSource data;
  int B = 0, steps = 0, print_every = 1, p = 1, dp = 1;
  double timeout = 0;                         // pipeline.timeout, seconds (0 = wait forever)
  std::shared_ptr<const Checkpoint> restart;  // checkpoint.restart, verified
  int first_step = 0;                         // its completed steps (0 without a restart)
  std::string checkpoint;                     // checkpoint.path
  int checkpoint_every = 0;
  std::uint64_t seed = 0;
  Mode mode = Mode::deterministic;
  Recompute recompute = Recompute::none;
  OptimizerConfig opt;
  io::DumpLevel level = io::DumpLevel::full;
  bool force = false;
  CommPath path = CommPath::host_memory;
  std::string why;
  bool action_fence = true;               // profile.action_fence: each compute action fenced (per-action times)
  ReduceConfig reduce;                    // the data-parallel gradient reduction (pipeline.allreduce etc.)
  bool pp_major = false;                  // pipeline.rank_order = pp-major: rank = pp * dp + d
  bool auto_split = false;                // pipeline.layers_per_stage = "auto"
  std::shared_ptr<const CostFile> costs;  // its measured costs (pipeline.costs or profiled)
  std::vector<Plan> plans;
};

// Where a sweep entry's picture goes: the key's path, tagged with schedule and m in a sweep.
std::string picture_path(const std::string& path, const Plan& pl, bool sweep, const char* ext) {
  return sweep ? sweep_file_name(path, pl.schedule + "_m" + std::to_string(pl.m), ext) : path;
}

sched::ScheduleOptions schedule_options(const Deck& deck) {
  sched::ScheduleOptions opt;
  opt.group = static_cast<int>(deck.config().pipeline.group);
  opt.memory_cap = static_cast<int>(deck.config().pipeline.memory_cap);
  return opt;
}

sched::Schedule build_schedule(const Deck& deck, const std::string& name, int p, int m, int v) {
  if (name != "csv") return sched::make_schedule(name, p, m, v, schedule_options(deck));
  // Every error of a CSV schedule names the key and the file, whichever check finds it.
  const std::string& path = deck.config().pipeline.csv;
  const std::string key = "deck: key 'pipeline.csv' has value " + quoted_text(path);
  try {
    std::ifstream in(path);
    if (!in) throw InputError(key + ", which cannot be read");
    sched::Schedule s = sched::read_csv(in, p, sched::parse_placement(deck.config().pipeline.placement), path);
    if (s.p != p)
      key_error(
          "pipeline.csv", quoted_text(path), "one row per rank",
          ", which has " + std::to_string(s.p) + " rank rows but the launch has p = " + std::to_string(p) + " ranks");
    if (s.m != m)
      key_error("pipeline.csv", quoted_text(path), "the file's m",
                ", which schedules " + std::to_string(s.m) +
                    " micro-batches but pipeline.microbatches = " + std::to_string(m));
    sched::validate(s);
    return s;
  } catch (const InputError&) {
    throw;
  } catch (const std::exception& e) {
    std::string why = e.what();
    if (why.rfind(path + ": ", 0) == 0) why.erase(0, path.size() + 2);  // the file is named already
    throw InputError(key + ": " + why);
  }
}

OptimizerConfig optimizer_from_deck(const Deck& deck) {
  OptimizerConfig opt;
  opt.kind = deck.config().train.optimizer == "sgd" ? OptimizerKind::sgd : OptimizerKind::adamw;
  opt.adamw.lr = opt.sgd.lr = deck.config().train.lr;
  opt.adamw.beta1 = deck.config().train.beta1;
  opt.adamw.beta2 = deck.config().train.beta2;
  opt.adamw.eps = deck.config().train.eps;
  opt.adamw.weight_decay = opt.sgd.weight_decay = deck.config().train.weight_decay;
  opt.sgd.momentum = deck.config().train.momentum;
  return opt;
}

void choose_splits(RunSetup& su, MPI_Comm* comm);

// A kernel setting's text: the deck's, except that "auto" (the default) defers to the documented
// environment variable when that is set, so `MINIPIPE_KERNEL_PATH=device minipipe run` takes
// effect while an explicit deck or command-line value still wins. `where` names the source for
// the parse error.
std::string auto_or_environment(const std::string& text, const char* key, const char* variable, std::string& where) {
  const char* env = std::getenv(variable);
  if (text != "auto" || env == nullptr || *env == '\0') {
    where = std::string("deck: key '") + key + "'";
    return text;
  }
  where = std::string("environment variable ") + variable + " (" + key + " = \"auto\" defers to it)";
  return env;
}

// output.verify, up front (before any step): the reference must open as HDF5 (a truncated file
// fails here: its end lies before the one its superblock records), list every object, and be a
// miniPipe dump (/meta with its deck). Otherwise the run would train and only then fail (exit 3).
void check_verify_reference(const std::string& path) {
  if (path.empty()) return;
  auto bad = [&](const std::string& why) {
    key_error("output.verify", quoted_text(path), "a dump of `minipipe run` (HDF5)", ", " + why);
  };
  try {
    io::DumpReader r(path);
    (void)r.list_datasets();
    const auto names = r.attribute_names("/meta");
    if (std::find(names.begin(), names.end(), "deck") == names.end()) bad("which has no /meta deck attribute");
  } catch (const InputError&) {
    throw;
  } catch (const std::exception& e) {
    bad(std::string("which cannot be read as a dump (") + e.what() + ")");
  }
}

// plan_run's training keys: batch, steps, seed, mode, the kernel settings, the optimizer,
// recompute, the dump level and output keys, a restart's checkpoint, the data and the disk.
void plan_training(const Deck& deck, RunSetup& su) {
  su.B = static_cast<int>(deck.config().train.batch);
  su.steps = static_cast<int>(deck.config().train.steps);
  su.seed = static_cast<std::uint64_t>(deck.config().train.seed);
  su.mode = deck.config().train.mode == "fast" ? Mode::fast : Mode::deterministic;
  std::string where;
  const std::string kernel_path =
      auto_or_environment(deck.config().train.kernel_path, "train.kernel_path", "MINIPIPE_KERNEL_PATH", where);
  set_kernel_path(parse_kernel_path(kernel_path, where.c_str()));
  const std::string fast_gemm =
      auto_or_environment(deck.config().train.fast_gemm, "train.fast_gemm", "MINIPIPE_FAST_GEMM", where);
  set_fast_gemm(parse_fast_gemm(fast_gemm, where.c_str()));
  su.opt = optimizer_from_deck(deck);
  su.recompute = parse_recompute(deck.config().train.recompute);
  su.level = io::parse_dump_level(deck.config().output.dump_level);
  (void)perturb_from_environment(su.shape.n_layer);  // the test hook's value, refused up front
  su.force = deck.config().output.force;
  su.print_every = static_cast<int>(deck.config().output.print_every);
  su.timeout = pipeline_timeout(deck);
  if (!deck.config().checkpoint.restart.empty()) {
    su.restart = std::make_shared<const Checkpoint>(deck.config().checkpoint.restart, sizeof(Real));
    su.restart->check_same_training(deck, su.data.fingerprint());
    su.first_step = static_cast<int>(su.restart->completed_steps());
  }
  su.data.check_every_batch_has_targets(su.first_step, deck.config().train.steps, deck.config().train.batch,
                                        deck.config().data.path, deck.config().data.dataset);
  check_verify_reference(deck.config().output.verify);
  check_output_space(deck, su.shape, su.first_step, sizeof(Real));
  su.checkpoint = deck.config().checkpoint.path;
  su.checkpoint_every = static_cast<int>(deck.config().checkpoint.every);
}

// plan_run's launch: pipeline.dp against the rank count and the batch, pipeline.p against
// ranks / dp. Returns the smallest replica's share of the batch.
int plan_ranks(const Deck& deck, RunSetup& su, int world) {
  su.dp = static_cast<int>(deck.config().pipeline.dp);
  if (world % su.dp != 0)
    key_error("pipeline.dp", std::to_string(su.dp), "a divisor of the rank count (mpiexec -n p*dp)",
              " but " + std::to_string(world) + " MPI ranks were launched");
  if (su.dp > su.B)
    key_error("pipeline.dp", std::to_string(su.dp),
              "1 .. train.batch (" + std::to_string(su.B) + ") so every replica has a sample");
  const int pp = world / su.dp;
  const long long p_key = deck.config().pipeline.p;
  if (p_key > 0 && p_key != pp)
    key_error("pipeline.p", std::to_string(p_key),
              "0 (use ranks / dp) or exactly " + std::to_string(pp) + " (launch mpiexec -n P*dp with P = pipeline.p)",
              " but " + std::to_string(world) + " MPI ranks were launched with pipeline.dp = " + std::to_string(su.dp));
  su.p = pp;
  return replica_share(su.B, su.dp, su.dp - 1).count;
}

// plan_run's plans: one per (schedule, m) of the sweep, each built, lowered and validated, its
// message tags within MPI_TAG_UB, its layout and its dump path.
void plan_sweep(const Deck& deck, RunSetup& su, int smallest_share, long long tag_ub) {
  const long long v_key = deck.config().pipeline.chunks;
  const auto& names = deck.config().pipeline.schedule;
  const auto& ms = deck.config().pipeline.microbatches;
  const std::string& dump_path = deck.config().output.dump;
  const bool sweep = names.size() * ms.size() > 1;
  if (sweep && !su.checkpoint.empty())
    key_error("checkpoint.path", "\"" + su.checkpoint + "\"", "one (schedule, m) per launch when checkpointing",
              " with a sweep of " + std::to_string(names.size() * ms.size()) + " runs");
  std::set<std::pair<std::string, long long>> seen;
  for (const auto& name : names) {
    for (long long m : ms) {
      if (!seen.insert({name, m}).second)
        throw InputError("deck: keys 'pipeline.schedule' x 'pipeline.microbatches' list (" + name +
                         ", m = " + std::to_string(m) + ") twice; allowed: each pair once");
      if (m > smallest_share)
        key_error("pipeline.microbatches", std::to_string(m),
                  std::string("1 .. ") +
                      (su.dp > 1 ? "the smallest replica's share of train.batch (" : "train.batch (") +
                      std::to_string(smallest_share) + ") so every micro-batch has a sample");
      const int v = v_key > 0 || name == "csv" ? static_cast<int>(v_key) : sched::default_v(name);
      Plan pl;
      pl.schedule = name;
      pl.m = static_cast<int>(m);
      sched::Schedule s = build_schedule(deck, name, su.p, pl.m, v);
      sched::validate(s);
      pl.lowered = sched::post_receives_early(sched::lower_communication(s));
      sched::validate(pl.lowered);
      const long long max_tag = 2LL * pl.lowered.num_stages() * pl.m - 1;
      if (max_tag > tag_ub)
        throw InputError("pipeline: schedule " + name + " with " + std::to_string(pl.lowered.num_stages()) +
                         " stages and m = " + std::to_string(m) + " needs message tags up to " +
                         std::to_string(max_tag) + " but this MPI allows MPI_TAG_UB = " + std::to_string(tag_ub) +
                         "; allowed: 2 * stages * m <= MPI_TAG_UB + 1");
      // One layer split for the model's parts, repeated for each copy (DualPipe's two).
      if (!su.auto_split)
        pl.layout = model_copies(make_stage_layout(su.shape.n_layer, pl.lowered.chain_length(),
                                                   deck.config().pipeline.layers_per_stage.counts, pl.lowered.chains),
                                 pl.lowered.chains);
      pl.dump = dump_path.empty() || su.level == io::DumpLevel::none
                    ? ""
                    : (sweep ? sweep_dump_name(dump_path, name, pl.m) : dump_path);
      su.plans.push_back(std::move(pl));
    }
  }
}

// The delay test hooks: a malformed value, or a stage that a plan does not have, is bad input.
void check_delay_stages(const RunSetup& su) {
  const TestDelays& delays = test_delays();
  for (const auto& pl : su.plans)
    if (delays.forward_stage >= pl.lowered.num_stages())
      throw InputError("environment: variable MINIPIPE_TEST_DELAY_FORWARD names stage " +
                       std::to_string(delays.forward_stage) + " but schedule " + pl.schedule + " has stages 0 .. " +
                       std::to_string(pl.lowered.num_stages() - 1) + "; allowed: one of those");
}

// Phase 1: every key against its rule, keys without effect, every input and output path (each
// rank checks what it sees: a node-local file system may differ), then what needs several
// keys or the launch.
RunSetup plan_run(const Deck& deck, const std::string& deck_path, int world, long long tag_ub) {
  deck.validate();
  check_effective_keys(deck);
  check_run_files(deck, deck_path);
  const ModelShape checked_shape = model_shape_from_deck(deck);
  RunSetup su{checked_shape, DataSource(deck, checked_shape)};
  plan_training(deck, su);

  const int smallest_share = plan_ranks(deck, su, world);
  su.path = choose_comm_path(deck.config().pipeline.cuda_aware, su.why);
  su.action_fence = deck.config().profile.action_fence;
  su.reduce.overlap = deck.config().pipeline.overlap_allreduce;
  su.reduce.compact = deck.config().pipeline.allreduce_limbs == "compact";
  su.reduce.kind =
      deck.config().pipeline.allreduce == "hierarchical" ? AllreduceKind::hierarchical : AllreduceKind::flat;
  su.reduce.ranks_per_node = static_cast<int>(deck.config().pipeline.ranks_per_node);
  su.pp_major = deck.config().pipeline.rank_order == "pp-major";

  su.auto_split = deck.config().pipeline.layers_per_stage.automatic;
  if (su.auto_split && !deck.config().pipeline.costs.empty()) {
    su.costs = std::make_shared<const CostFile>(read_cost_file(deck.config().pipeline.costs));
    su.costs->check_shape(su.shape, deck.config().pipeline.costs);
    su.costs->check_setting(deck.config().train.mode, ExecSpace::name(), deck.config().pipeline.costs);
  }
  plan_sweep(deck, su, smallest_share, tag_ub);
  check_delay_stages(su);
  if (su.costs) choose_splits(su, nullptr);
  return su;
}

// pipeline.layers_per_stage = "auto": each plan's split from the measured per-part costs of its
// micro-batch size (train.recompute included). Without a cost file (`comm` given, collective)
// rank 0 profiles briefly and every rank takes its splits.
void choose_splits(RunSetup& su, MPI_Comm* comm) {
  int rank = 0;
  if (comm) MPI_Comm_rank(*comm, &rank);
  for (auto& pl : su.plans) {
    const int S = pl.lowered.chain_length();  // the parts of one model copy
    std::vector<int> counts(static_cast<std::size_t>(S));
    const int samples = (su.B / su.dp + pl.m - 1) / pl.m;
    LayerTimes lt;
    if (rank == 0) {
      lt = layer_times(*su.costs, samples, su.recompute);
      counts = sched::balanced_split(lt.blocks, lt.embedding, lt.head, S);
    }
    if (comm) MPI_Bcast(counts.data(), S, MPI_INT, 0, *comm);
    pl.layout = model_copies(
        make_stage_layout(su.shape.n_layer, S, std::vector<long long>(counts.begin(), counts.end()), pl.lowered.chains),
        pl.lowered.chains);
    if (rank == 0) {
      std::ostringstream os;
      os << "auto split for " << pl.schedule << " m = " << pl.m << ": ";
      for (int s = 0; s < S; ++s) os << (s ? "/" : "") << counts[static_cast<std::size_t>(s)];
      char line[96];
      std::snprintf(line, sizeof(line), " (slowest stage %.3f ms of F+I+W per micro-batch)",
                    sched::slowest_stage(lt.blocks, lt.embedding, lt.head, counts));
      os << line;
      pl.split_note = os.str();
    }
  }
}

// The hierarchical all-reduce's form as each replica group's reducer picks it (grad_reduce.hpp):
// two-level where the group's nodes (blocks of ranks_per_node job ranks) hold equally many of its
// ranks, else the leader form. With MPI's shared-memory nodes only the reducers see the nodes.
std::string hierarchical_form(const RunSetup& su) {
  const std::string two = "two-level: node reduce-scatter, shard all-reduce across nodes, node all-gather";
  const std::string leader = "node reduce, leaders all-reduce, node broadcast";
  const int rpn = su.reduce.ranks_per_node;
  if (rpn <= 0) return two + "; leader form (" + leader + ") where the nodes hold unequal numbers of replicas";
  int equal = 0;
  std::string unequal;  // the first unequal group's replicas per node, as 2+1
  for (int q = 0; q < su.p; ++q) {
    std::map<int, int> per_node;
    for (int d = 0; d < su.dp; ++d) ++per_node[(su.pp_major ? q * su.dp + d : d * su.p + q) / rpn];
    bool same = true;
    std::string sizes;
    for (const auto& [node, n] : per_node) {
      same = same && n == per_node.begin()->second;
      sizes += (sizes.empty() ? "" : "+") + std::to_string(n);
    }
    if (same)
      ++equal;
    else if (unequal.empty())
      unequal = sizes;
  }
  if (equal == su.p) return two;
  const std::string fallback = "leader form, nodes of unequal size " + unequal + ": " + leader;
  return equal == 0 ? fallback : two + "; where a replica group's nodes differ, " + fallback;
}

void print_banner(const RunSetup& su, std::ostream& out) {
  const ModelShape& s = su.shape;
  out << "miniPipe " << version_string() << " | Kokkos " << kokkos_version_string() << " (" << ExecSpace::name()
      << ") | " << blas_string() << "\n";
  out << "GEMM: " << gemm_string(su.mode) << "\n";
  if (const std::string blocking = gemm_blocking_string(); !blocking.empty())
    out << "GEMM blocking: " << blocking << "\n";
  out << "model: V=" << s.vocab << " T=" << s.seq_len << " C=" << s.channels << " H=" << s.n_head << " L=" << s.n_layer
      << " | batch " << su.B << " | " << su.steps << " steps | mode " << to_string(su.mode) << " | recompute "
      << to_string(su.recompute) << " | p = " << su.p << ", dp = " << su.dp << " (" << su.p * su.dp << " ranks)\n";
  out << "boundary transfers: " << to_string(su.path) << " [" << su.why << "]\n";
  if (const std::string hooks = active_test_hooks_text(); !hooks.empty())
    out << "test hooks active: " << hooks << " (times and FOM of this run are not a measurement)\n";
  out << "per-action fence: "
      << (su.action_fence ? "on (each compute action fenced: per-action times, bubble and time budget measured)"
                          : "off (profile.action_fence = false: actions only enqueued; fences where MPI or the host "
                            "reads device memory; per-action times unavailable)")
      << "\n";
  if (!su.plans.empty() && !su.plans.front().dump.empty())
    out << "dump size estimate: "
        << static_cast<long long>(
               estimated_dump_bytes(su.shape, su.B, su.steps - su.first_step, io::to_string(su.level), sizeof(Real)))
        << " bytes per dump file (" << su.steps - su.first_step
        << " steps at output.dump_level = " << io::to_string(su.level) << ")\n";
  if (su.dp > 1)
    out << "gradient all-reduce: "
        << (su.reduce.kind == AllreduceKind::hierarchical ? "hierarchical (" + hierarchical_form(su)
                                                          : std::string("flat (one collective per bucket"))
        << (su.reduce.kind == AllreduceKind::hierarchical && su.reduce.ranks_per_node > 0
                ? ", " + std::to_string(su.reduce.ranks_per_node) + " ranks per node)"
                : std::string(")"))
        << ", "
        << (su.mode == Mode::fast ? "float partials"
            : su.reduce.compact   ? "compact exact words"
                                  : "full exact limbs")
        << ", overlap "
        << (su.reduce.overlap ? "on (each stage's buckets start at its last W)" : "off (after the pipeline)") << "\n";
  if (su.dp > 1)
    for (int d = 0; d < su.dp; ++d) {
      const SampleRange r = replica_share(su.B, su.dp, d);
      out << "replica " << d << ": ranks ";
      if (su.pp_major)
        for (int q = 0; q < su.p; ++q) out << (q ? "," : "") << q * su.dp + d;
      else
        out << d * su.p << ".." << (d + 1) * su.p - 1;
      out << " = (dp " << d << ", pp 0.." << su.p - 1 << "), samples [" << r.first << ", " << r.first + r.count
          << ")\n";
    }
}

// Where this rank sits (pipeline.rank_order): dp-major, rank = dp * p + pp, so each replica's
// pipeline is a contiguous block; pp-major, rank = pp * dp + dp, so the replicas of one pipeline
// rank are (their all-reduce stays inside a node). World rank 0 is (dp 0, pp 0) either way.
struct Coordinates {
  int dp = 0, pp = 0;
  MPI_Comm pipeline = MPI_COMM_NULL, replicas = MPI_COMM_NULL;  // same dp / same pp
  Coordinates(MPI_Comm world, int p, int num_replicas, bool pp_major) {
    int rank = 0;
    MPI_Comm_rank(world, &rank);
    if (pp_major)
      pp = rank / num_replicas, dp = rank % num_replicas;
    else
      dp = rank / p, pp = rank % p;
    MPI_Comm_split(world, dp, pp, &pipeline);
    MPI_Comm_split(world, pp, dp, &replicas);
  }
  ~Coordinates() {
    MPI_Comm_free(&pipeline);
    MPI_Comm_free(&replicas);
  }
  Coordinates(const Coordinates&) = delete;
  Coordinates& operator=(const Coordinates&) = delete;
};

// Phase 2: the dump of one sweep entry, with /meta (collective; nullptr when there is none).
std::unique_ptr<io::DumpWriter> open_dump(const Deck& deck, const RunSetup& su, const Plan& pl, MPI_Comm comm) {
  if (pl.dump.empty()) return nullptr;
  auto dump = std::make_unique<io::DumpWriter>(comm, pl.dump, su.force);
  const ModelShape& s = su.shape;
  const std::pair<const char*, long long> ints[] = {{"vocab", s.vocab},
                                                    {"seq_len", s.seq_len},
                                                    {"block_size", s.block_size},
                                                    {"channels", s.channels},
                                                    {"n_head", s.n_head},
                                                    {"n_layer", s.n_layer},
                                                    {"p", su.p},
                                                    {"v", pl.lowered.v},
                                                    {"m", pl.m},
                                                    {"dp", su.dp},
                                                    {"first_step", su.first_step}};
  for (const auto& [name, value] : ints) dump->set_attribute("/meta", name, value);
  dump->set_attribute("/meta", "schedule", pl.schedule);
  dump->set_attribute("/meta", "mode", std::string(to_string(su.mode)));
  dump->set_attribute("/meta", "backend", std::string(ExecSpace::name()));
  dump->set_attribute("/meta", "versions", version_string() + "; Kokkos " + kokkos_version_string());
  dump->set_attribute("/meta", "deck", deck.effective_toml());
  dump->set_attribute("/meta", "dump_level", std::string(io::to_string(su.level)));
  // "none" on a clean run; else the hooks that changed this run's times or bits (test_hooks.hpp).
  const std::string hooks = active_test_hooks_text();
  dump->set_attribute("/meta", "test_hooks", hooks.empty() ? std::string("none") : hooks);
  return dump;
}

// What one sweep entry's training leaves: per step loss, time and pipeline makespan, and this
// rank's stats of the last step.
struct TrainRecord {
  std::vector<double> losses, step_seconds, makespans;
  RankStepStats last;
  std::vector<counters::SyncCounts> sync_per_step;  // profile.kernels: this rank's syncs in each step
  int counted_steps = 0;                            // steps in the kernel counters' work and time
};

// Phase 3: the step loop, with one step line per print_every steps on rank 0.
// After complete optimizer steps: the checkpoint every checkpoint.every steps and after the
// last one; it replaces the run's own previous one (atomically: a crash keeps the previous).
void maybe_checkpoint(const Deck& deck, const Trainer<Real>& trainer, const RunSetup& su, const Coordinates& at,
                      int completed, double first_loss, bool& written, MPI_Comm comm, std::ostream& out) {
  if (su.checkpoint.empty()) return;
  const bool due = (su.checkpoint_every > 0 && completed % su.checkpoint_every == 0) || completed == su.steps;
  if (!due) return;
  {
    CollectiveGuard guard(su.timeout, "every rank to write the checkpoint " + su.checkpoint);
    write_checkpoint(comm, su.checkpoint, su.force || written, trainer.stages(), at.dp == 0, completed, deck, su.shape,
                     su.data.fingerprint(), first_loss);
  }
  written = true;
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  if (rank == 0) out << "checkpoint: " << su.checkpoint << " (after step " << completed - 1 << ")\n";
}

TrainRecord train(const Deck& deck, Trainer<Real>& trainer, DumpObserver<Real>* dump, const RunSetup& su,
                  const Coordinates& at, MPI_Comm comm, std::ostream& out) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  const bool holds_loss = at.dp == 0 && at.pp == trainer.plan().stage_to_rank.back();
  const SampleRange share = replica_share(su.B, su.dp, at.dp);
  bool checkpointed = false;  // this run wrote the checkpoint before: the next one replaces it
  TrainRecord rec;
  for (int step = su.first_step; step < su.steps; ++step) {
    const Batch batch = su.data.batch(step, su.B);
    if (dump) {
      CollectiveGuard guard(su.timeout, "every rank to create the dump datasets of step " + std::to_string(step));
      dump->begin_step(step);
    }
    const counters::SyncCounts sync0 = counters::counting() ? counters::sync_now() : counters::SyncCounts{};
    StepResult res = trainer.step(step, batch, share, dump);
    if (counters::counting()) {
      rec.sync_per_step.push_back(counters::sync_now() - sync0);
      // The first step warms up (allocations, packing): kernel rates count the steps after it.
      if (step == su.first_step && su.steps - su.first_step > 1)
        counters::reset_work();
      else
        ++rec.counted_steps;
    }
    if (dump) dump->end_step(batch, res, rank == 0, holds_loss);
    // Step time = the slowest rank's whole step; the pipeline's makespan likewise.
    // The makespan is the measured replica's (the bubble is summarized from its ranks).
    double times[2] = {res.stats.step, res.stats.makespan};
    {
      CollectiveGuard guard(su.timeout, "every rank's time of step " + std::to_string(step));
      MPI_Allreduce(MPI_IN_PLACE, &times[0], 1, MPI_DOUBLE, MPI_MAX, comm);
      MPI_Allreduce(MPI_IN_PLACE, &times[1], 1, MPI_DOUBLE, MPI_MAX, at.pipeline);
    }
    const double span = times[0];
    rec.losses.push_back(res.loss);
    rec.step_seconds.push_back(span);
    rec.makespans.push_back(times[1]);
    if (rank == 0 && (step % su.print_every == 0 || step + 1 == su.steps)) {
      char line[160];
      std::snprintf(line, sizeof(line), "step %4d  loss %.6f  %9.2f ms  %11.0f tokens/s", step, res.loss, 1e3 * span,
                    static_cast<double>(su.B) * su.shape.seq_len / span);
      out << line << "\n" << std::flush;
    }
    rec.last = std::move(res.stats);
    maybe_checkpoint(deck, trainer, su, at, step + 1, su.restart ? su.restart->first_loss() : rec.losses.front(),
                     checkpointed, comm, out);
  }
  return rec;
}

// Phase 4: every rank's last-step statistics on rank 0, as one typed record. The records
// travel as bytes: the ranks of one job run the same binary.
RunMeasurements gather_measurements(MPI_Comm comm, const TrainRecord& rec) {
  static_assert(std::is_trivially_copyable<ActionTiming>::value, "ActionTiming travels as bytes");
  int rank = 0, p = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &p);
  RankStepStats totals = rec.last;
  totals.actions.clear();
  struct Totals {
    double makespan, F, I, W, B, comm_wait, observer_io, allreduce, allreduce_start, step, optimizer;
    double allreduce_total, allreduce_bytes, allreduce_elements;
    long long peak_mb, peak_bytes, workspace_bytes, host_syncs, allreduce_full_pieces;
  } mine{totals.makespan,
         totals.time_F,
         totals.time_I,
         totals.time_W,
         totals.time_B,
         totals.comm_wait,
         totals.observer_io,
         totals.allreduce,
         totals.allreduce_start,
         totals.step,
         totals.optimizer,
         totals.allreduce_total,
         totals.allreduce_bytes,
         totals.allreduce_elements,
         totals.peak_stored_mb,
         static_cast<long long>(totals.peak_stored_bytes),
         static_cast<long long>(totals.workspace_bytes),
         totals.host_syncs,
         totals.allreduce_full_pieces};
  std::vector<Totals> all(static_cast<std::size_t>(p));
  MPI_Gather(&mine, sizeof(Totals), MPI_BYTE, all.data(), sizeof(Totals), MPI_BYTE, 0, comm);

  const int n_bytes = static_cast<int>(rec.last.actions.size() * sizeof(ActionTiming));
  std::vector<int> counts(static_cast<std::size_t>(p)), displs(static_cast<std::size_t>(p));
  MPI_Gather(&n_bytes, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, comm);
  long long total = 0;
  for (int r = 0; r < p; ++r) {
    displs[r] = static_cast<int>(total);
    total += counts[r];
  }
  if (total > INT_MAX) throw std::runtime_error("gather_measurements: over 2 GiB of action timings");
  std::vector<ActionTiming> actions(static_cast<std::size_t>(total) / sizeof(ActionTiming) + 1);
  MPI_Gatherv(rec.last.actions.data(), n_bytes, MPI_BYTE, actions.data(), counts.data(), displs.data(), MPI_BYTE, 0,
              comm);

  RunMeasurements meas;
  if (rank != 0) return meas;
  meas.losses = rec.losses;
  meas.step_seconds = rec.step_seconds;
  meas.makespans = rec.makespans;
  for (int r = 0; r < p; ++r) {
    const Totals& t = all[static_cast<std::size_t>(r)];
    RankStepStats st;
    st.makespan = t.makespan, st.time_F = t.F, st.time_I = t.I, st.time_W = t.W, st.time_B = t.B;
    st.comm_wait = t.comm_wait, st.observer_io = t.observer_io, st.allreduce = t.allreduce, st.step = t.step;
    st.allreduce_start = t.allreduce_start, st.optimizer = t.optimizer;
    st.allreduce_total = t.allreduce_total, st.allreduce_bytes = t.allreduce_bytes;
    st.allreduce_elements = t.allreduce_elements, st.allreduce_full_pieces = static_cast<int>(t.allreduce_full_pieces);
    st.peak_stored_mb = static_cast<int>(t.peak_mb);
    st.peak_stored_bytes = static_cast<std::size_t>(t.peak_bytes);
    st.workspace_bytes = static_cast<std::size_t>(t.workspace_bytes);
    st.host_syncs = t.host_syncs;
    const std::size_t first = static_cast<std::size_t>(displs[r]) / sizeof(ActionTiming);
    const std::size_t n = static_cast<std::size_t>(counts[r]) / sizeof(ActionTiming);
    st.actions.assign(actions.begin() + static_cast<std::ptrdiff_t>(first),
                      actions.begin() + static_cast<std::ptrdiff_t>(first + n));
    meas.ranks.push_back(std::move(st));
  }
  return meas;
}

// Phase 5 (rank 0): the measured timeline as SVG and Chrome trace, where asked for.
void write_pictures(const Deck& deck, const RunSetup& su, const Plan& pl, const RunContext& ctx,
                    const RunMeasurements& meas, const RunReport& rep) {
  const std::string svg = deck.config().output.svg, trace = deck.config().output.trace;
  if (svg.empty() && trace.empty()) return;
  const bool sweep = su.plans.size() > 1;
  const sched::Timeline tl = measured_timeline(ctx, pl.lowered, meas);
  if (!svg.empty())
    io::write_output_file(picture_path(svg, pl, sweep, ".svg"), su.force,
                          [&](std::ostream& f) { sched::write_svg(tl, f); });
  // The time budget's stacked bars beside the timeline: <svg stem>_budget.svg.
  if (!svg.empty())
    io::write_output_file(budget_svg_path(picture_path(svg, pl, sweep, ".svg")), su.force, [&](std::ostream& f) {
      write_budget_svg(rep.budget, pl.schedule + " p=" + std::to_string(su.p) + " m=" + std::to_string(pl.m), f);
    });
  if (!trace.empty())
    io::write_output_file(picture_path(trace, pl, sweep, ".json"), su.force,
                          [&](std::ostream& f) { sched::write_chrome_trace(tl, f); });
}

// profile.kernels: the counters run from the first step to the end of the launch.
struct KernelCountersOn {
  explicit KernelCountersOn(bool on) : on_(on) {
    if (on_) counters::enable(/*timed=*/true);
  }
  ~KernelCountersOn() {
    if (on_) counters::disable();
  }
  KernelCountersOn(const KernelCountersOn&) = delete;
  KernelCountersOn& operator=(const KernelCountersOn&) = delete;

 private:
  bool on_;
};

// Phase 4, profile.kernels: every pipeline rank's per-step synchronizations on rank 0 (the
// ranks of one job run the same binary, so the counts travel as bytes), with rank 0's kernels.
std::unique_ptr<KernelCounterReport> gather_kernel_counters(MPI_Comm comm, const TrainRecord& rec) {
  static_assert(std::is_trivially_copyable<counters::SyncCounts>::value, "SyncCounts travel as bytes");
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const int bytes = static_cast<int>(rec.sync_per_step.size() * sizeof(counters::SyncCounts));
  std::vector<counters::SyncCounts> all(rank == 0 ? rec.sync_per_step.size() * static_cast<std::size_t>(size) : 0);
  MPI_Gather(rec.sync_per_step.data(), bytes, MPI_BYTE, all.data(), bytes, MPI_BYTE, 0, comm);
  if (rank != 0) return nullptr;
  auto r = std::make_unique<KernelCounterReport>();
  const counters::Snapshot snap = counters::snapshot();
  r->timed = true;
  r->steps = rec.counted_steps;
  r->work = snap.work;
  r->kokkos = snap.kokkos;
  r->fence_labels = snap.fence_labels;
  r->run_steps = rec.counted_steps;
  const std::size_t steps = rec.sync_per_step.size();
  for (int k = 0; k < size; ++k)
    r->sync.emplace_back(all.begin() + static_cast<std::ptrdiff_t>(k * steps),
                         all.begin() + static_cast<std::ptrdiff_t>((k + 1) * steps));
  return r;
}

// Phase 5 (rank 0), profile.kernels: the same-run peaks, the table, the JSON section and the
// roofline. Sizes: big enough to reach the peak of the memory the kernels use, small on a host.
void report_kernel_counters(const Deck& deck, const RunSetup& su, const Plan& pl, KernelCounterReport& r,
                            RunReport& rep, std::ostream& out) {
  const bool host_memory = Kokkos::SpaceAccessibility<HostSpace, MemSpace>::accessible;
  r.dw_exact_group = gemm_det_exact_group(su.shape.seq_len);
  r.peaks = counters::measure_peaks(host_memory ? 512 : 4096, host_memory ? (1u << 22) : (1u << 26), 5,
                                    kokkosblas_gemm_string());
  print_kernel_report(r, out);
  rep.kernel_counters_json = kernel_counters_json(r);
  const std::string svg = deck.config().output.roofline;
  if (!svg.empty()) {
    const std::string path = picture_path(svg, pl, su.plans.size() > 1, ".svg");
    io::write_output_file(path, su.force, [&](std::ostream& f) { write_roofline_svg(r, f); });
    out << "roofline: " << path << "\n";
  }
}

// Phase 5 (rank 0): the dump of this entry against the sweep's first ("reference"), bit for bit.
std::string compare_to_reference(const Plan& pl, std::string& reference_dump) {
  if (pl.dump.empty()) return "-";
  if (reference_dump.empty()) {
    reference_dump = pl.dump;
    return "reference";
  }
  std::ostringstream sink;
  const int rc = io::compare_files(reference_dump, pl.dump, io::CompareOptions{}, sink);
  return rc == 0 ? "identical" : (rc == 1 ? "DIFFERS" : "error");
}

// The analytic bubble as the run table prints it ("-" when no closed form applies).
std::string analytic_text(const RunReport& rep) {
  char text[32] = "-";
  if (rep.bubble_analytic) std::snprintf(text, sizeof(text), "%.6f", *rep.bubble_analytic);
  return text;
}

// profile.action_fence = false: the per-rank lines without the figures built from action spans.
void print_run_without_action_times(const RunReport& rep, std::ostream& out) {
  char line[256];
  const std::string analytic = analytic_text(rep);
  std::snprintf(line, sizeof(line),
                "bubble measured n/a | simulated n/a | analytic %s (unit costs) | imbalance n/a | peak stored on "
                "rank 0: %d micro-batches, %.2f MiB",
                analytic.c_str(), rep.ranks[0].peak_stored_mb, rep.ranks[0].peak_stored_bytes / 1048576.0);
  out << line << "\n";
  for (const auto& rr : rep.ranks) {
    std::snprintf(line, sizeof(line),
                  "  rank %d: F/I/W/B n/a  comm wait %7.2f  dump %7.2f  all-reduce %7.2f exposed of %7.2f ms | peak %d "
                  "mb, scratch %.2f MiB | host syncs %lld/step\n",
                  rr.rank, 1e3 * rr.comm_wait, 1e3 * rr.dump_io, 1e3 * rr.allreduce, 1e3 * rr.allreduce_total,
                  rr.peak_stored_mb, rr.workspace_bytes / 1048576.0, rr.host_syncs);
    out << line;
  }
  out << "  per-action times unavailable (profile.action_fence = false): compute actions were only enqueued\n";
}

void print_run(const RunReport& rep, std::ostream& out) {
  if (!rep.action_times) return print_run_without_action_times(rep, out);
  char line[256];
  const std::string analytic = analytic_text(rep);
  std::snprintf(line, sizeof(line),
                "bubble measured %.3f | simulated %.3f | analytic %s | imbalance %.2f | peak stored on rank 0: %d "
                "micro-batches, %.2f MiB",
                rep.bubble_measured, rep.bubble_simulated, analytic.c_str(), rep.imbalance, rep.ranks[0].peak_stored_mb,
                rep.ranks[0].peak_stored_bytes / 1048576.0);
  out << line << "\n";
  for (const auto& rr : rep.ranks) {
    std::snprintf(line, sizeof(line),
                  "  rank %d: F %7.2f  I %7.2f  W %7.2f  B %7.2f  comm wait %7.2f  idle %7.2f  dump %7.2f"
                  "  all-reduce %7.2f exposed of %7.2f ms | peak %d mb, scratch %.2f MiB | host syncs %lld/step\n",
                  rr.rank, 1e3 * rr.time_F, 1e3 * rr.time_I, 1e3 * rr.time_W, 1e3 * rr.time_B, 1e3 * rr.comm_wait,
                  1e3 * rr.idle, 1e3 * rr.dump_io, 1e3 * rr.allreduce, 1e3 * rr.allreduce_total, rr.peak_stored_mb,
                  rr.workspace_bytes / 1048576.0, rr.host_syncs);
    out << line;
  }
  if (rep.dp > 1)
    out << "  gradient all-reduce: " << rep.ranks[0].allreduce_bytes_per_element
        << " bytes per gradient element sent by rank 0 (last step)\n";
  out << budget_rank_text(rep.budget);
}

// Phase 6 (rank 0): the launch's table, JSON report, figure of merit and verdict; false when
// the verification failed.
// `stopped`: the verdict of a launch that stopped early (its runs so far are reported).
bool write_reports(const Deck& deck, const RunSetup& su, const std::vector<RunReport>& reports, std::ostream& out,
                   const Verdict* stopped = nullptr) {
  out << "\n";
  if (!reports.empty()) print_table(reports, out);
  const FigureOfMerit fom = figure_of_merit(reports, su.shape);
  const Verdict verdict_checks =
      stopped ? *stopped
              : verify_runs(reports, deck.config().output.verify, su.mode,
                            su.restart ? su.restart->first_loss() : std::numeric_limits<double>::quiet_NaN(),
                            su.opt.kind == OptimizerKind::adamw, su.first_step);
  const Verdict& verdict = verdict_checks;
  const std::string hooks = active_test_hooks_text();
  LaunchSummary launch;
  launch.fom_tokens_per_second = fom.tokens_per_second, launch.model_tflops = fom.model_tflops;
  launch.verified = verdict.pass;
  launch.verification = verdict_text(verdict, hooks);
  launch.test_hooks = active_test_hooks();
  const std::string json = deck.config().output.json;
  if (!json.empty()) {
    io::write_output_file(json, su.force,
                          [&](std::ostream& f) { write_json(reports, launch, deck.effective_toml(), f); });
    out << "report: " << json << "\n";
  }
  if (reports.empty())
    out << "FOM: unavailable (no run completed)\n";
  else
    out << fom_line(fom, hooks) << "\n";
  out << verdict_line(verdict, hooks) << "\n" << std::flush;
  return verdict.pass;
}

int execute_run(const Deck& deck, const RunSetup& su, MPI_Comm comm, std::ostream& out,
                std::vector<RunReport>* keep = nullptr) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  if (rank == 0) print_banner(su, out);
  std::vector<RunReport> reports;
  std::string reference_dump;
  const Coordinates at(comm, su.p, su.dp, su.pp_major);
  std::unique_ptr<Verdict> stopped;  // a run diverged: the launch stops, its report says why
  KernelCountersOn counters_on(deck.config().profile.kernels);
  for (const auto& pl : su.plans) {
    counters::reset_work();
    if (rank == 0)
      out << "\n== schedule " << pl.schedule << ", p = " << su.p << ", v = " << pl.lowered.v << ", m = " << pl.m
          << " ==\n";
    if (rank == 0 && !pl.split_note.empty()) out << pl.split_note << "\n";
    Trainer<Real> trainer(comm, at.pipeline, at.replicas, su.shape, pl.layout, pl.lowered, su.mode, su.seed, su.path,
                          su.opt, su.timeout, su.recompute, su.action_fence, su.reduce);
    if (su.restart) trainer.restore(*su.restart);
    auto writer = open_dump(deck, su, pl, comm);
    std::unique_ptr<DumpObserver<Real>> dump;
    if (writer) {
      // Every replica holds the same parameters: replica 0 writes them.
      dump = std::make_unique<DumpObserver<Real>>(*writer, su.level, su.shape, su.B, at.dp == 0);
      dump->write_initial(trainer.stages());
    }
    TrainRecord rec;
    try {
      rec = train(deck, trainer, dump.get(), su, at, comm, out);
    } catch (const Diverged& e) {
      // Every rank agreed: keep the completed steps, record why the run stopped, then stop.
      if (writer) writer->close_stopped(e.what(), e.step, {step_group(e.step)});
      if (rank == 0) std::cerr << "minipipe: error: " << escaped_controls(e.what()) << "\n" << std::flush;
      stopped = std::make_unique<Verdict>(Verdict{false, e.what()});
      break;
    }
    dump.reset();
    if (writer) {
      CollectiveGuard guard(su.timeout, "every rank to close the dump " + pl.dump);
      writer->close();
    }
    writer.reset();

    std::unique_ptr<KernelCounterReport> counted;
    if (counters::counting()) {
      CollectiveGuard guard(su.timeout, "every rank's kernel counters of " + pl.schedule);
      counted = gather_kernel_counters(at.pipeline, rec);
    }
    // Replica 0's pipeline is measured (world rank 0 is its first rank); the others match it.
    RunMeasurements meas;
    {
      CollectiveGuard guard(su.timeout, "every rank's measurements of " + pl.schedule);
      meas = gather_measurements(at.pipeline, rec);
    }
    if (rank == 0) {
      RunContext ctx;
      ctx.schedule = pl.schedule, ctx.mode = to_string(su.mode), ctx.backend = ExecSpace::name();
      ctx.blas = blas_string(), ctx.gemm = gemm_string(su.mode), ctx.gemm_blocking = gemm_blocking_string(),
      ctx.comm_path = to_string(su.path), ctx.dump_path = pl.dump;
      ctx.p = su.p, ctx.dp = su.dp, ctx.m = pl.m, ctx.first_step = su.first_step;
      ctx.steps = su.steps - su.first_step, ctx.batch = su.B;
      ctx.seq_len = su.shape.seq_len;
      ctx.action_times = su.action_fence;
      RunReport rep = summarize(ctx, pl.lowered, meas);
      rep.dump_vs_reference = compare_to_reference(pl, reference_dump);
      write_pictures(deck, su, pl, ctx, meas, rep);
      print_run(rep, out);
      if (counted) report_kernel_counters(deck, su, pl, *counted, rep, out);
      reports.push_back(std::move(rep));
    }
  }
  // A failed verification (a sweep's dumps that differ included) or a diverged run: exit 3.
  int exit_code = 0;
  if (rank == 0 && !write_reports(deck, su, reports, out, stopped.get())) exit_code = 3;
  MPI_Bcast(&exit_code, 1, MPI_INT, 0, comm);
  if (keep) *keep = std::move(reports);
  return exit_code;
}

}  // namespace

int run_command(const Deck& deck, const std::string& deck_path, MPI_Comm comm, std::ostream& out,
                std::vector<RunReport>* reports) {
  int world = 1;
  MPI_Comm_size(comm, &world);
  std::unique_ptr<RunSetup> setup;
  std::string message;
  try {
    setup = std::make_unique<RunSetup>(plan_run(deck, deck_path, world, mpi_tag_ub(comm)));
  } catch (const std::exception& e) {
    message = e.what();
  }
  // Every rank validated its input; agree before anyone communicates.
  if (any_rank_failed(comm, setup ? nullptr : &message, std::cerr)) return 2;
  if (setup->auto_split && !setup->costs) {
    setup->costs = std::make_shared<const CostFile>(profile_costs(deck, comm, 1));
    choose_splits(*setup, &comm);
  }
  return execute_run(deck, *setup, comm, out, reports);
}

}  // namespace minipipe
