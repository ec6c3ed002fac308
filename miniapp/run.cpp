// The run driver: sweep planning and validation, step loop with HDF5 dumps, measurement
// gathering, the simulator fed with measured costs, and the reports.
#include "run.hpp"

#include <unistd.h>

#include <climits>
#include <cmath>
#include <set>

#include <cstdio>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <optional>
#include <sstream>

#include "io/compare.hpp"
#include "io/dump_writer.hpp"
#include "report.hpp"
#include "runtime.hpp"
#include "schedules/csv.hpp"
#include "schedules/simulator.hpp"
#include "schedules/timeline.hpp"
#include "schedules/validator.hpp"
#include "version.hpp"

namespace minipipe {

#ifdef MINIPIPE_DOUBLE
using Real = double;
#else
using Real = float;
#endif

struct Plan {
  std::string schedule;
  int m = 1;
  sched::Schedule lowered;
  StageLayout layout;
  std::string dump;
};

namespace {

std::string run_suffix(const std::string& path, const std::string& schedule, int m) {
  const auto dot = path.rfind(".h5");
  const std::string stem = dot == std::string::npos ? path : path.substr(0, dot);
  return stem + "_" + schedule + "_m" + std::to_string(m) + ".h5";
}

std::string with_suffix(const std::string& path, const std::string& tag, const std::string& ext) {
  if (path.empty()) return path;
  const auto slash = path.rfind('/');
  auto dot = path.rfind('.');
  if (dot != std::string::npos && slash != std::string::npos && dot < slash) dot = std::string::npos;
  const std::string stem = dot == std::string::npos ? path : path.substr(0, dot);
  return stem + "_" + tag + (dot == std::string::npos ? ext : path.substr(dot));
}

// Doubles in messages with all their digits (std::to_string prints 1e-9 as 0.000000).
std::string fmt(double x) {
  std::ostringstream os;
  os << std::setprecision(17) << x;
  return os.str();
}

sched::Schedule build_schedule(const Deck& deck, const std::string& name, int p, int m, int v) {
  if (name == "csv") {
    const std::string& path = deck.get_string("pipeline.csv");
    std::ifstream in(path);
    if (!in) throw InputError("deck: key 'pipeline.csv' has value \"" + path + "\", which cannot be read");
    const std::string& placement = deck.get_string("pipeline.placement");
    if (placement != "loop" && placement != "v")
      throw InputError("deck: key 'pipeline.placement' has value \"" + placement + "\"; allowed: loop | v");
    sched::Schedule s = sched::read_csv(in, p, placement == "v" ? sched::Placement::v : sched::Placement::loop);
    if (s.p != p)
      throw InputError("pipeline.csv: " + path + " has " + std::to_string(s.p) +
                       " rank rows but the launch has p = " + std::to_string(p) + " ranks");
    if (s.m != m)
      throw InputError("pipeline.csv: " + path + " schedules " + std::to_string(s.m) +
                       " micro-batches but pipeline.microbatches = " + std::to_string(m));
    return s;
  }
  return sched::make_schedule(name, p, m, v);
}

template <class T>
io::DType dtype() {
  return sizeof(T) == 4 ? io::DType::f32 : io::DType::f64;
}

std::vector<std::uint64_t> dims_of(const ParamSpec& p) {
  std::vector<std::uint64_t> d;
  for (int x : p.shape) d.push_back(static_cast<std::uint64_t>(x));
  return d;
}

// Writes the parameters of `stage` under `group` (the owning rank writes; datasets exist).
template <class T>
void write_params(io::DumpWriter& w, const std::string& group, Stage<T>& stage, bool grads) {
  for (auto& p : stage.params()) {
    auto h = Kokkos::create_mirror_view_and_copy(HostSpace(), grads ? p.grad : p.value);
    const auto dims = dims_of(p.spec);
    w.write_rows(group + "/" + p.spec.name, 0, dims[0], h.data());
  }
}

void create_param_sets(io::DumpWriter& w, const std::string& group, const ModelShape& shape) {
  for (const auto& p : all_params(shape)) w.create_dataset(group + "/" + p.name, dims_of(p), dtype<Real>());
}

// Everything a run needs, validated before any rank communicates.
struct RunSetup {
  RunSetup(const ModelShape& s, DataSource d) : shape(s), data(std::move(d)) {}
  ModelShape shape;
  DataSource data;
  long long B = 0, steps = 0, print_every = 1;
  Mode mode = Mode::deterministic;
  OptimizerConfig opt;
  io::DumpLevel level = io::DumpLevel::full;
  bool force = false;
  int p = 1;
  CommPath path = CommPath::host_memory;
  std::string why;
  std::vector<Plan> plans;
};

// Refuses an output file that exists (without output.force) or whose directory cannot be
// written, before anything runs.
void check_output(const std::string& key, const std::string& path, bool force, bool hdf5) {
  if (path.empty()) return;
  const auto slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  if (access(dir.c_str(), W_OK | X_OK) != 0)
    throw InputError("deck: key '" + key + "' has value \"" + path + "\": directory '" + dir +
                     "' does not exist or is not writable");
  if (hdf5 && !force && access(path.c_str(), F_OK) == 0)
    throw InputError("deck: key '" + key + "' has value \"" + path +
                     "\": the file exists; refusing to overwrite it without --force (output.force = true)");
}

RunSetup plan_run(const Deck& deck, int world, long long tag_ub) {
  const ModelShape checked_shape = model_shape_from_deck(deck);
  RunSetup su{checked_shape, DataSource(deck, checked_shape)};
  const ModelShape& shape = su.shape;
  su.B = deck.get_int("train.batch");
  if (su.B <= 0 || su.B > (1LL << 24))
    throw InputError("deck: key 'train.batch' has value " + std::to_string(su.B) +
                     "; allowed: an integer in [1, 2^24]");
  su.steps = deck.get_int("train.steps");
  if (su.steps <= 0 || su.steps > 1000000)
    throw InputError("deck: key 'train.steps' has value " + std::to_string(su.steps) + "; allowed: 1 .. 1000000");
  const std::string& mode_s = deck.get_string("train.mode");
  if (mode_s != "deterministic" && mode_s != "fast")
    throw InputError("deck: key 'train.mode' has value \"" + mode_s + "\"; allowed: deterministic | fast");
  su.mode = mode_s == "fast" ? Mode::fast : Mode::deterministic;
  OptimizerConfig& opt = su.opt;
  opt.kind = deck.get_string("train.optimizer");
  if (opt.kind != "adamw" && opt.kind != "sgd")
    throw InputError("deck: key 'train.optimizer' has value \"" + opt.kind + "\"; allowed: adamw | sgd");
  const double lr = deck.get_double("train.lr");
  if (!(lr > 0) || lr > 10) throw InputError("deck: key 'train.lr' has value " + fmt(lr) + "; allowed: (0, 10]");
  opt.adamw.lr = opt.sgd.lr = lr;
  opt.adamw.beta1 = deck.get_double("train.beta1");
  opt.adamw.beta2 = deck.get_double("train.beta2");
  opt.adamw.eps = deck.get_double("train.eps");
  opt.adamw.weight_decay = opt.sgd.weight_decay = deck.get_double("train.weight_decay");
  opt.sgd.momentum = deck.get_double("train.momentum");
  for (const char* k : {"train.beta1", "train.beta2", "train.momentum"}) {
    const double x = deck.get_double(k);
    if (!(x >= 0 && x < 1))
      throw InputError(std::string("deck: key '") + k + "' has value " + fmt(x) + "; allowed: [0, 1)");
  }
  if (!(opt.adamw.eps > 0) || !std::isfinite(opt.adamw.eps))
    throw InputError("deck: key 'train.eps' has value " + fmt(opt.adamw.eps) + "; allowed: a finite number > 0");
  if (!(opt.adamw.weight_decay >= 0) || !std::isfinite(opt.adamw.weight_decay))
    throw InputError("deck: key 'train.weight_decay' has value " + fmt(opt.adamw.weight_decay) +
                     "; allowed: a finite number >= 0");
  su.level = io::parse_dump_level(deck.get_string("output.dump_level"));
  const std::string dump_path = deck.get_string("output.dump");
  const bool force = deck.get_bool("output.force");
  su.force = force;
  su.print_every = deck.get_int("output.print_every");
  if (su.print_every <= 0)
    throw InputError("deck: key 'output.print_every' has value " + std::to_string(su.print_every) + "; allowed: >= 1");
  check_output("output.json", deck.get_string("output.json"), force, false);
  check_output("output.svg", deck.get_string("output.svg"), force, false);
  check_output("output.trace", deck.get_string("output.trace"), force, false);

  const long long p_key = deck.get_int("pipeline.p");
  if (p_key < 0 || (p_key > 0 && p_key != world))
    throw InputError("deck: key 'pipeline.p' has value " + std::to_string(p_key) + " but " + std::to_string(world) +
                     " MPI ranks were launched; allowed: 0 (use the launched count) or exactly " +
                     std::to_string(world) + " (launch mpiexec -n P with P = pipeline.p)");
  const int p = world;
  su.p = p;
  const long long v_key = deck.get_int("pipeline.chunks");
  if (v_key < 0 || v_key > 64)
    throw InputError("deck: key 'pipeline.chunks' has value " + std::to_string(v_key) + "; allowed: 0 (auto) .. 64");
  const auto& names = deck.get_string_list("pipeline.schedule");
  const auto& ms = deck.get_int_list("pipeline.microbatches");
  if (names.empty()) throw InputError("deck: key 'pipeline.schedule' is empty; allowed: one or more schedule names");
  if (ms.empty()) throw InputError("deck: key 'pipeline.microbatches' is empty; allowed: one or more integers >= 1");

  su.path = choose_comm_path(deck.get_string("pipeline.cuda_aware"), su.why);

  std::set<std::pair<std::string, long long>> seen;
  for (const auto& name : names) {
    for (long long m : ms) {
      if (!seen.insert({name, m}).second)
        throw InputError("deck: keys 'pipeline.schedule' x 'pipeline.microbatches' list (" + name +
                         ", m = " + std::to_string(m) + ") twice; allowed: each pair once");
      if (m < 1 || m > su.B)
        throw InputError("deck: key 'pipeline.microbatches' has value " + std::to_string(m) +
                         "; allowed: 1 .. train.batch (" + std::to_string(su.B) +
                         ") so every micro-batch has a sample");
      const int v = v_key > 0 || name == "csv" ? static_cast<int>(v_key) : sched::default_v(name);
      Plan pl;
      pl.schedule = name;
      pl.m = static_cast<int>(m);
      sched::Schedule s = build_schedule(deck, name, p, pl.m, v);
      sched::validate(s);
      pl.lowered = sched::lower_communication(s);
      sched::validate(pl.lowered);
      const long long max_tag = 2LL * pl.lowered.num_stages() * pl.m - 1;
      if (max_tag > tag_ub)
        throw InputError("pipeline: schedule " + name + " with " + std::to_string(pl.lowered.num_stages()) +
                         " stages and m = " + std::to_string(m) + " needs message tags up to " +
                         std::to_string(max_tag) + " but this MPI allows MPI_TAG_UB = " + std::to_string(tag_ub) +
                         "; allowed: 2 * stages * m <= MPI_TAG_UB + 1");
      pl.layout =
          make_stage_layout(shape.n_layer, pl.lowered.num_stages(), deck.get_int_list("pipeline.layers_per_stage"));
      const bool sweep = names.size() * ms.size() > 1;
      pl.dump = dump_path.empty() || su.level == io::DumpLevel::none
                    ? ""
                    : (sweep ? run_suffix(dump_path, name, pl.m) : dump_path);
      check_output("output.dump", pl.dump, force, true);
      su.plans.push_back(std::move(pl));
    }
  }
  return su;
}

int execute_run(const Deck& deck, RunSetup& su, MPI_Comm comm, std::ostream& out) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  const ModelShape& shape = su.shape;
  const DataSource& data = su.data;
  const long long B = su.B, steps = su.steps, print_every = su.print_every;
  const Mode mode = su.mode;
  const int p = su.p;
  const auto level = su.level;
  const CommPath path = su.path;
  const std::string& why = su.why;
  const OptimizerConfig& opt = su.opt;
  auto& plans = su.plans;

  if (rank == 0) {
    out << "miniPipe " << version_string() << " | Kokkos " << kokkos_version_string() << " (" << ExecSpace::name()
        << ") | " << blas_string() << "\n";
    out << "model: V=" << shape.vocab << " T=" << shape.seq_len << " C=" << shape.channels << " H=" << shape.n_head
        << " L=" << shape.n_layer << " | batch " << B << " | " << steps << " steps | mode " << to_string(mode)
        << " | p = " << p << " ranks\n";
    out << "boundary transfers: " << to_string(path) << " [" << why << "]\n";
  }

  std::vector<RunReport> reports;
  std::string reference_dump;
  int exit_code = 0;
  for (auto& pl : plans) {
    Pipeline<Real> pipe(comm, shape, pl.layout, pl.lowered, mode,
                        static_cast<std::uint64_t>(deck.get_int("train.seed")), path);
    if (rank == 0) {
      out << "\n== schedule " << pl.schedule << ", p = " << p << ", v = " << pl.lowered.v << ", m = " << pl.m
          << " ==\n";
    }
    std::unique_ptr<io::DumpWriter> dump;
    if (!pl.dump.empty()) {
      dump = std::make_unique<io::DumpWriter>(comm, pl.dump, su.force);
      dump->set_attribute("/meta", "vocab", static_cast<long long>(shape.vocab));
      dump->set_attribute("/meta", "seq_len", static_cast<long long>(shape.seq_len));
      dump->set_attribute("/meta", "block_size", static_cast<long long>(shape.block_size));
      dump->set_attribute("/meta", "channels", static_cast<long long>(shape.channels));
      dump->set_attribute("/meta", "n_head", static_cast<long long>(shape.n_head));
      dump->set_attribute("/meta", "n_layer", static_cast<long long>(shape.n_layer));
      dump->set_attribute("/meta", "schedule", pl.schedule);
      dump->set_attribute("/meta", "p", static_cast<long long>(p));
      dump->set_attribute("/meta", "v", static_cast<long long>(pl.lowered.v));
      dump->set_attribute("/meta", "m", static_cast<long long>(pl.m));
      dump->set_attribute("/meta", "dp", 1LL);
      dump->set_attribute("/meta", "mode", std::string(to_string(mode)));
      dump->set_attribute("/meta", "backend", std::string(ExecSpace::name()));
      dump->set_attribute("/meta", "versions", version_string() + "; Kokkos " + kokkos_version_string());
      dump->set_attribute("/meta", "deck", deck.effective_toml());
      dump->set_attribute("/meta", "dump_level", std::string(io::to_string(level)));
      if (level >= io::DumpLevel::grads) {
        create_param_sets(*dump, "/init/params", shape);
        for (auto& s : pipe.stages()) write_params(*dump, "/init/params", s, false);
      }
    }

    RunReport rep;
    rep.schedule = pl.schedule;
    rep.p = p;
    rep.v = pl.lowered.v;
    rep.m = pl.m;
    rep.steps = static_cast<int>(steps);
    rep.batch = static_cast<int>(B);
    rep.seq_len = shape.seq_len;
    rep.mode = to_string(mode);
    rep.backend = ExecSpace::name();
    rep.blas = blas_string();
    rep.comm_path = to_string(path);
    rep.dump_path = pl.dump;
    StepResult last;
    for (int step = 0; step < steps; ++step) {
      const Batch batch = data.batch(step, static_cast<int>(B));
      char gname[32];
      std::snprintf(gname, sizeof(gname), "/step_%04d", step);
      const std::string g = gname;
      const std::uint64_t uB = static_cast<std::uint64_t>(B), uT = shape.seq_len, uC = shape.channels;
      if (dump) {
        dump->create_dataset(g + "/tokens", {uB, uT}, io::DType::i32);
        dump->create_dataset(g + "/targets", {uB, uT}, io::DType::i32);
        dump->create_dataset(g + "/loss", {}, io::DType::f64);
        dump->create_dataset(g + "/per_sample_loss_sum", {uB}, io::DType::f64);
        dump->create_dataset(g + "/per_sample_tokens", {uB}, io::DType::i32);
        if (level >= io::DumpLevel::full) {
          dump->create_dataset(g + "/activations/embedding", {uB, uT, uC}, dtype<Real>());
          for (int l = 0; l < shape.n_layer; ++l) {
            dump->create_dataset(g + "/activations/" + block_name(l), {uB, uT, uC}, dtype<Real>());
            dump->create_dataset(g + "/input_grads/" + block_name(l), {uB, uT, uC}, dtype<Real>());
          }
          dump->create_dataset(g + "/activations/lnf", {uB, uT, uC}, dtype<Real>());
          dump->create_dataset(g + "/input_grads/lnf", {uB, uT, uC}, dtype<Real>());
          auto hook = [&dump, &pipe, g](const char* kind) {
            return [&dump, &pipe, g, kind](const std::string& layer, const MicroBatch& mb, CMat<Real> x) {
              const double t0 = MPI_Wtime();
              fence_space(ExecSpace(), "Dump::fence");
              auto h = Kokkos::create_mirror_view_and_copy(HostSpace(), x);
              dump->write_rows(g + "/" + kind + "/" + layer, mb.sample0, mb.nsamples, h.data());
              pipe.excluded_seconds += MPI_Wtime() - t0;
            };
          };
          for (auto& s : pipe.stages()) {
            s.on_activation = hook("activations");
            s.on_input_grad = hook("input_grads");
          }
        }
        if (level >= io::DumpLevel::grads) {
          create_param_sets(*dump, g + "/grads", shape);
          create_param_sets(*dump, g + "/params", shape);
          pipe.on_grads_ready = [&dump, g](Stage<Real>& s) { write_params(*dump, g + "/grads", s, true); };
          pipe.on_params_updated = [&dump, g](Stage<Real>& s) { write_params(*dump, g + "/params", s, false); };
        }
      }
      last = pipe.run_step(step, batch, opt);
      // Step time = the slowest rank's makespan.
      double span = last.stats.makespan;
      MPI_Allreduce(MPI_IN_PLACE, &span, 1, MPI_DOUBLE, MPI_MAX, comm);
      rep.losses.push_back(last.loss);
      rep.step_seconds.push_back(span);
      if (dump) {
        if (rank == 0) {
          dump->write_rows(g + "/tokens", 0, uB, batch.tokens.data());
          dump->write_rows(g + "/targets", 0, uB, batch.targets.data());
        }
        if (rank == pl.lowered.stage_to_rank.back()) {
          dump->write_rows(g + "/loss", 0, 1, &last.loss);
          dump->write_rows(g + "/per_sample_loss_sum", 0, uB, last.sample_loss.data());
          dump->write_rows(g + "/per_sample_tokens", 0, uB, last.sample_tokens.data());
        }
        for (auto& s : pipe.stages()) s.on_activation = s.on_input_grad = nullptr;
        pipe.on_grads_ready = pipe.on_params_updated = nullptr;
      }
      if (rank == 0 && (step % print_every == 0 || step + 1 == steps)) {
        char line[160];
        std::snprintf(line, sizeof(line), "step %4d  loss %.6f  %9.2f ms  %11.0f tokens/s", step, last.loss, 1e3 * span,
                      static_cast<double>(B) * shape.seq_len / span);
        out << line << "\n" << std::flush;
      }
    }
    if (dump) dump->close();
    dump.reset();

    // ---- gather the last step's measurements on rank 0 ----
    const auto& st = last.stats;
    std::vector<double> mine = {st.time_F,
                                st.time_I,
                                st.time_W,
                                st.time_B,
                                st.comm_wait,
                                st.makespan,
                                static_cast<double>(st.peak_stored_mb),
                                static_cast<double>(st.peak_stored_bytes),
                                st.dump_io};
    std::vector<double> all(mine.size() * static_cast<std::size_t>(p));
    MPI_Gather(mine.data(), static_cast<int>(mine.size()), MPI_DOUBLE, all.data(), static_cast<int>(mine.size()),
               MPI_DOUBLE, 0, comm);
    std::vector<double> packed;
    for (const auto& a : st.actions)
      packed.insert(packed.end(), {static_cast<double>(static_cast<int>(a.op)), static_cast<double>(a.stage),
                                   static_cast<double>(a.microbatch), a.start, a.end});
    int n_packed = static_cast<int>(packed.size());
    std::vector<int> counts(p), displs(p);
    MPI_Gather(&n_packed, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, comm);
    int total = 0;
    for (int r = 0; r < p; ++r) displs[r] = total, total += counts[r];
    std::vector<double> all_actions(static_cast<std::size_t>(std::max(total, 1)));
    MPI_Gatherv(packed.data(), n_packed, MPI_DOUBLE, all_actions.data(), counts.data(), displs.data(), MPI_DOUBLE, 0,
                comm);

    if (rank == 0) {
      const double makespan = rep.step_seconds.back();
      rep.makespan = makespan;
      double sum = 0;
      int counted = 0;
      for (std::size_t i = rep.step_seconds.size() > 1 ? 1 : 0; i < rep.step_seconds.size(); ++i)
        sum += rep.step_seconds[i], ++counted;
      rep.step_seconds_mean = sum / counted;
      rep.tokens_per_second = static_cast<double>(B) * shape.seq_len / rep.step_seconds_mean;
      const int S = pl.lowered.num_stages();
      std::vector<double> cF(S, 0), cI(S, 0), cW(S, 0), cB(S, 0);
      std::vector<int> nF(S, 0), nI(S, 0), nW(S, 0), nB(S, 0);
      sched::Timeline tl;
      tl.p = p;
      tl.title = "measured: " + pl.schedule + " p=" + std::to_string(p) + " v=" + std::to_string(pl.lowered.v) +
                 " m=" + std::to_string(pl.m) + " (last step, ms)";
      double busy_total = 0;
      for (int r = 0; r < p; ++r) {
        RankReport rr;
        rr.rank = r;
        for (int s = 0; s < S; ++s)
          if (pl.lowered.stage_to_rank[s] == r) rr.stages.push_back(s);
        const double* q = &all[static_cast<std::size_t>(r) * mine.size()];
        rr.time_F = q[0], rr.time_I = q[1], rr.time_W = q[2], rr.time_B = q[3], rr.comm_wait = q[4];
        rr.busy = q[0] + q[1] + q[2] + q[3];
        rr.idle = makespan - rr.busy - rr.dump_io;
        rr.peak_stored_mb = static_cast<int>(q[6]);
        rr.peak_stored_bytes = q[7];
        rr.dump_io = q[8];
        busy_total += rr.busy;
        rep.ranks.push_back(rr);
        for (int k = 0; k < counts[r] / 5; ++k) {
          const double* a = &all_actions[static_cast<std::size_t>(displs[r]) + 5 * static_cast<std::size_t>(k)];
          const auto op = static_cast<sched::Op>(static_cast<int>(a[0]));
          const int s = static_cast<int>(a[1]);
          const double d = a[4] - a[3];
          tl.events.push_back({r, 1e3 * a[3], 1e3 * a[4], op, s, static_cast<int>(a[2])});
          switch (op) {
            case sched::Op::F:
              cF[s] += d, ++nF[s];
              break;
            case sched::Op::I:
              cI[s] += d, ++nI[s];
              break;
            case sched::Op::W:
              cW[s] += d, ++nW[s];
              break;
            default:
              cB[s] += d, ++nB[s];
              break;
          }
        }
      }
      double dump_total = 0;
      for (const auto& rr : rep.ranks) dump_total += rr.dump_io;
      // Dump I/O is neither compute nor pipeline idle; leave it out of the bubble.
      rep.bubble_measured = 1.0 - (busy_total + dump_total) / (p * makespan);
      // Simulator fed with the measured mean cost of each action kind per stage.
      sched::CostModel cost;
      double mean_stage = 0, max_stage = 0;
      for (int s = 0; s < S; ++s) {
        const double f = nF[s] ? cF[s] / nF[s] : 0, i = nI[s] ? cI[s] / nI[s] : 0, w = nW[s] ? cW[s] / nW[s] : 0;
        const double b = nB[s] ? cB[s] / nB[s] : i + w;
        cost.F.push_back(1e3 * f);
        cost.I.push_back(1e3 * (nI[s] ? i : b / 2));
        cost.W.push_back(1e3 * (nW[s] ? w : b / 2));
        cost.B.push_back(1e3 * b);
        const double stage_total = cF[s] + cI[s] + cW[s] + cB[s];
        rep.stage_compute.push_back(stage_total);
        mean_stage += stage_total / S;
        max_stage = std::max(max_stage, stage_total);
      }
      cost.comm = 0;
      rep.imbalance = mean_stage > 0 ? max_stage / mean_stage : 1;
      const auto sim = sched::simulate(pl.lowered, cost);
      rep.bubble_simulated = sim.bubble_fraction;
      // The closed form assumes every stage costs the same: feed it the stage-mean of the measured
      // costs, or, where the formula also needs F = I = W (ZB-H2, ZB-V, DualPipeV), unit costs.
      sched::CostModel mean_cost;
      auto mean_of = [](const std::vector<double>& v) {
        double x = 0;
        for (double e : v) x += e / static_cast<double>(v.size());
        return x;
      };
      mean_cost = sched::CostModel::uniform(S, mean_of(cost.F), mean_of(cost.B), mean_of(cost.I), mean_of(cost.W), 0);
      rep.bubble_analytic = sched::analytic_bubble(pl.lowered, mean_cost);
      if (!rep.bubble_analytic)
        rep.bubble_analytic = sched::analytic_bubble(pl.lowered, sched::CostModel::uniform(S, 1, 2, 1, 1, 0));
      const std::string svg = deck.get_string("output.svg"), trace = deck.get_string("output.trace");
      const bool sweep = plans.size() > 1;
      const std::string tag = pl.schedule + "_m" + std::to_string(pl.m);
      if (!svg.empty()) {
        std::ofstream f(sweep ? with_suffix(svg, tag, ".svg") : svg);
        sched::write_svg(tl, f);
      }
      if (!trace.empty()) {
        std::ofstream f(sweep ? with_suffix(trace, tag, ".json") : trace);
        sched::write_chrome_trace(tl, f);
      }
      if (!pl.dump.empty()) {
        if (reference_dump.empty()) {
          reference_dump = pl.dump;
          rep.dump_vs_reference = "reference";
        } else {
          std::ostringstream sink;
          io::CompareOptions co;
          const int rc = io::compare_files(reference_dump, pl.dump, co, sink);
          rep.dump_vs_reference = rc == 0 ? "identical" : (rc == 1 ? "DIFFERS" : "error");
          if (rc != 0 && mode == Mode::deterministic) exit_code = 1;
        }
      } else {
        rep.dump_vs_reference = "-";
      }
      char line[256];
      std::snprintf(line, sizeof(line),
                    "bubble measured %.3f | simulated %.3f | analytic %s | imbalance %.2f | peak stored on rank 0: %d "
                    "micro-batches, %.2f MiB",
                    rep.bubble_measured, rep.bubble_simulated,
                    rep.bubble_analytic ? std::to_string(*rep.bubble_analytic).c_str() : "-", rep.imbalance,
                    rep.ranks[0].peak_stored_mb, rep.ranks[0].peak_stored_bytes / 1048576.0);
      out << line << "\n";
      for (const auto& rr : rep.ranks) {
        std::snprintf(line, sizeof(line),
                      "  rank %d: F %7.2f  I %7.2f  W %7.2f  B %7.2f  comm wait %7.2f  idle %7.2f  dump %7.2f ms"
                      " | peak %d mb\n",
                      rr.rank, 1e3 * rr.time_F, 1e3 * rr.time_I, 1e3 * rr.time_W, 1e3 * rr.time_B, 1e3 * rr.comm_wait,
                      1e3 * rr.idle, 1e3 * rr.dump_io, rr.peak_stored_mb);
        out << line;
      }
    }
    reports.push_back(rep);
  }

  if (rank == 0) {
    out << "\n";
    print_table(reports, out);
    const std::string json = deck.get_string("output.json");
    if (!json.empty()) {
      std::ofstream f(json);
      if (!f) throw InputError("deck: key 'output.json' has value \"" + json + "\", which cannot be written");
      write_json(reports, deck.effective_toml(), f);
      out << "report: " << json << "\n";
    }
  }
  MPI_Bcast(&exit_code, 1, MPI_INT, 0, comm);
  return exit_code;
}

}  // namespace

bool any_rank_failed(MPI_Comm comm, const std::string* error, std::ostream& err) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  // The lowest failing rank's message is the one reported, by rank 0, whichever rank it was.
  int first = error ? rank : INT_MAX;
  MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, comm);
  if (first == INT_MAX) return false;
  std::string text = rank == first ? *error : std::string();
  int len = static_cast<int>(text.size());
  MPI_Bcast(&len, 1, MPI_INT, first, comm);
  text.resize(static_cast<std::size_t>(len));
  MPI_Bcast(text.data(), len, MPI_CHAR, first, comm);
  if (rank == 0)
    err << "minipipe: error" << (first != 0 ? " (rank " + std::to_string(first) + ")" : "") << ": " << text << "\n";
  return true;
}

int run_command(const Deck& deck, MPI_Comm comm, std::ostream& out) {
  int world = 1, flag = 0;
  MPI_Comm_size(comm, &world);
  int* ub = nullptr;
  MPI_Comm_get_attr(comm, MPI_TAG_UB, &ub, &flag);
  std::unique_ptr<RunSetup> setup;
  std::string message;
  try {
    setup = std::make_unique<RunSetup>(plan_run(deck, world, flag && ub ? *ub : 32767));
  } catch (const std::exception& e) {
    message = e.what();
  }
  // Every rank validated its input; agree before anyone communicates.
  if (any_rank_failed(comm, setup ? nullptr : &message, std::cerr)) return 2;
  return execute_run(deck, *setup, comm, out);
}

}  // namespace minipipe
